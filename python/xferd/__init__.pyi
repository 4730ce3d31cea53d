# SPDX-License-Identifier: Apache-2.0
# Type hints of the xferd package (xferd/_core is C).
from typing import Any, AsyncIterator, Generator, Iterator, Optional, Sequence, Union

import numpy

TOKEN_MAX: int
STREAM_TOKEN_MAX: int
__version__: str

# Offsets, lengths and indices: an array of any integer dtype (int8 to
# uint64, either byte order, any strides: views are fine), anything with
# the buffer protocol holding integers (array.array, memoryview), or a
# sequence of ints.  Cast and copied in C; a negative value or one past
# 64 bits is a ValueError naming the argument and the entry.
IntArray = Union["numpy.ndarray", memoryview, Sequence[int]]

# Every timeout is in seconds (timeout=).  The timeout_ms= parameters
# are the deprecated millisecond spelling: they keep their old place,
# warn (DeprecationWarning), and may not be passed with timeout=.

class XferError(OSError):
    """errno: the error number; strerror: xfer_strerror's explanation."""

class IndexRangeError(ValueError, IndexError):
    """An index past the end of its DList; names the argument and entry."""

class Sender(tuple):
    """Who sent a notification, as xferd recorded it (not the sender's
    say): compare node and client to know a sender again."""
    node: bytes           # 16 bytes: the instance id of its xferd
    client: int           # its connection id there, never reused
    uid: int              # as its xferd saw it (informational elsewhere)
    remote: bool          # a client of another node's xferd

class Notification(tuple):
    value: int            # the sender's notify value
    nbytes: int           # bytes that landed with it (0 for notify())
    region: Optional["Region"]
    handle: int
    sender: Optional[Sender]  # attribute only; None: xferd names none
    message: bytes        # attribute only: sent with it (b'': none; 256 at most)
    sender_name: str      # attribute only: what the sender calls itself ('': none)

def strerror(errno: int) -> str: ...

class Region:
    length: int
    handle: int
    ptr: int
    readonly: bool
    device: bool
    closed: bool
    host: bool
    obj: Any
    context: "Context"
    def export(self, off: int = 0, length: Optional[int] = None) -> bytes: ...
    def numpy(self, dtype: Any = "uint8", shape: Any = None) -> "numpy.ndarray": ...
    def close(self) -> None: ...
    def __enter__(self) -> "Region": ...
    def __exit__(self, *exc: Any) -> None: ...
    def __buffer__(self, flags: int) -> memoryview: ...

class Remote:
    length: int
    handle: int
    closed: bool
    def close(self) -> None: ...
    def __enter__(self) -> "Remote": ...
    def __exit__(self, *exc: Any) -> None: ...

class Request:
    result: Optional[int]     # bytes moved or -errno; None while pending
    path: Optional[str]       # "memcpy", "cma", "tcp", "rdma", "cuda-ipc",
                              # "cuda-staged", "tcp-staged", "none"
    error: Optional[XferError]
    context: "Context"
    def wait(self, timeout: Optional[float] = None) -> int: ...
    def done(self) -> bool: ...
    def __await__(self) -> Generator[Any, None, int]: ...

Target = Union[Remote, Region]
# notify=: a value, a message (bytes, or str sent as UTF-8; NOTIFY_MSG_MAX
# bytes at most) with value 0, or a (value, message) pair.
Notify = Union[int, bytes, bytearray, memoryview, str,
               tuple[int, Union[bytes, bytearray, memoryview, str]]]

class DList:
    count: int
    handle: int
    target: Target
    closed: bool
    def close(self) -> None: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> "DList": ...
    def __exit__(self, *exc: Any) -> None: ...

class Context:
    closed: bool
    overflow: int
    notifications_lost: int
    identity: Sender      # what this context's notifications carry
    def __init__(self, socket: Optional[str] = None, spin_us: int = 20,
                 name: Optional[str] = None) -> None: ...
    def __enter__(self) -> "Context": ...
    def __exit__(self, *exc: Any) -> bool: ...
    def close(self) -> None: ...
    def alloc_host(self, size: int) -> Region: ...
    def register(self, obj: Any) -> Region: ...
    def export(self, region: Region, off: int = 0,
               length: Optional[int] = None) -> bytes: ...
    def import_token(self, token: bytes) -> Remote: ...
    def publish(self, name: str, token: bytes, shared: bool = False) -> None: ...
    def unpublish(self, name: str) -> None: ...
    def lookup(self, name: str) -> bytes: ...
    def write(self, local: Region, remote: Target, local_off: int = 0,
              remote_off: int = 0, length: Optional[int] = None,
              notify: Optional[Notify] = None, timeout_ms: Optional[int] = None,
              *, timeout: Optional[float] = None) -> Request: ...
    def read(self, local: Region, remote: Target, local_off: int = 0,
             remote_off: int = 0, length: Optional[int] = None,
             notify: Optional[Notify] = None, timeout_ms: Optional[int] = None,
             *, timeout: Optional[float] = None) -> Request: ...
    def write_vec(self, local: Region, local_offs: IntArray, remote: Target,
                  remote_offs: IntArray, lengths: Union[int, IntArray],
                  notify: Optional[Notify] = None, timeout_ms: Optional[int] = None,
                  *, timeout: Optional[float] = None) -> Request: ...
    def read_vec(self, local: Region, local_offs: IntArray, remote: Target,
                 remote_offs: IntArray, lengths: Union[int, IntArray],
                 notify: Optional[Notify] = None, timeout_ms: Optional[int] = None,
                 *, timeout: Optional[float] = None) -> Request: ...
    def dlist(self, target: Target, offsets: IntArray,
              lengths: Union[int, IntArray]) -> DList: ...
    def write_dlist(self, local: DList, remote: DList,
                    local_idx: Optional[IntArray] = None,
                    remote_idx: Optional[IntArray] = None,
                    notify: Optional[Notify] = None, timeout_ms: Optional[int] = None,
                    *, timeout: Optional[float] = None) -> Request: ...
    def read_dlist(self, local: DList, remote: DList,
                   local_idx: Optional[IntArray] = None,
                   remote_idx: Optional[IntArray] = None,
                   notify: Optional[Notify] = None, timeout_ms: Optional[int] = None,
                   *, timeout: Optional[float] = None) -> Request: ...
    def notify(self, remote: Target, value: Notify) -> Request: ...
    def get_notifications(self, timeout: Optional[float] = 0,
                          max: Optional[int] = None) -> list[Notification]: ...
    def notifications(self, timeout: Optional[float] = None) -> Iterator[Notification]: ...
    async def wait_notifications(self, timeout: Optional[float] = None) -> list[Notification]: ...
    def event_fd(self) -> int: ...

class Stream:
    """A queue of slots in the consumer's memory (xfer_stream_*); its
    Context serves this stream only while it lives."""
    nslots: int
    slot_size: int
    closed: bool
    peer: Optional[Sender]  # the other end; None before accept()
    dropped: int            # notifications of anyone else, dropped
    @classmethod
    def listen(cls, context: Context, region: Region, nslots: int,
               slot_size: int, offset: int = 0) -> "Stream": ...
    @classmethod
    def connect(cls, context: Context, token: bytes,
                timeout_ms: Optional[int] = None, *,
                timeout: Optional[float] = None) -> "Stream": ...
    def token(self) -> bytes: ...
    def accept(self, timeout_ms: Optional[int] = None, *,
               timeout: Optional[float] = None) -> None: ...
    def recv(self, timeout_ms: Optional[int] = None, *,
             timeout: Optional[float] = None) -> Optional[tuple[int, int, int]]: ...
    def release(self, slot: int) -> None: ...
    def send(self, region: Region, length: Optional[int] = None,
             offset: int = 0, timeout_ms: Optional[int] = None, *,
             timeout: Optional[float] = None) -> None: ...
    def credits(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Stream": ...
    def __exit__(self, *exc: Any) -> bool: ...
