# SPDX-License-Identifier: Apache-2.0
"""xferd - Python API of xferd, the per-node data-movement daemon.

A thin layer over ``xferd._core``, the C extension that binds libxfer:

    import numpy as np, xferd

    with xferd.Context() as ctx:                # $XFERD_SOCKET or the default
        buf = ctx.alloc_host(1 << 20)           # shared with xferd: zero copy
        arr = buf.numpy(np.float16)             # a view, no copy
        token = buf.export()                    # bytes, ship them anywhere
        ctx.publish("kv-7", token)
        ...
        remote = ctx.import_token(ctx.lookup("nodeb/kv-7"))
        req = ctx.read_vec(buf, local_offs, remote, remote_offs, block_bytes)
        req.wait()                              # or: await req

Everything that moves bytes returns a Request (wait(), done(), result,
path, awaitable); errors are XferError (an OSError: .errno, .strerror).
Offsets, lengths and indices may be arrays of any integer dtype or lists;
every timeout is in seconds (timeout=; the old timeout_ms= keywords still
work and warn).
"""
import asyncio as _asyncio
import errno as _errno
import math as _math
import time as _time
import warnings as _warnings

from . import _core
from ._core import (DList, IndexRangeError, Notification, Region, Remote,
                    Request, Sender, Stream, XferError, strerror, TOKEN_MAX,
                    STREAM_TOKEN_MAX, NOTIFY_MSG_MAX, SENDER_NAME_MAX)

__all__ = ["Context", "Region", "Remote", "Request", "DList",
           "Notification", "Sender", "Stream", "XferError",
           "IndexRangeError", "strerror", "TOKEN_MAX", "STREAM_TOKEN_MAX",
           "NOTIFY_MSG_MAX", "SENDER_NAME_MAX"]
__version__ = "0.1.0"


class Context(_core.Context):
    """Context(socket=None, spin_us=20, name=None, *, traffic_class=None)

    One connection to the local xferd and its submission/completion ring.
    ``socket`` None means $XFERD_SOCKET, else xferd's default socket.
    ``name``: what the context calls itself as a sender of notifications
    (up to SENDER_NAME_MAX printable ASCII characters; the receiver's
    ``Notification.sender_name``, informational).  Notifications carry a
    message (``notify=b"..."`` or a str, NOTIFY_MSG_MAX bytes at most):
    ``Notification.message``.
    ``traffic_class``: the default class of its transfers, ``"latency"``
    (small transfers a step waits for, e.g. decode's KV blocks: they go
    ahead of bulk transfers on a link shared with other clients; past
    xferd's latency_max_bytes, 1 MiB, a transfer goes as bulk), ``"bulk"``
    (prefill pushes, offload: shared between tenants by weight) or None
    (xferd's first-come order); ``write()``/``read()`` take it per call.
    Waits spin ``spin_us`` microseconds before sleeping.  A context
    manager: leaving the block closes it (every Region and Remote of it
    is released first).  Safe to use from several threads; waits release
    the GIL.  Not usable in a child after fork(): open a new one there.
    """

    # --- pinned host memory ------------------------------------------------

    def _alloc_pinned_view(self, nbytes, cuda):
        # The region's memory, as a memoryview: the view holds an export
        # of the region, so Region.close() refuses and Context.close()
        # keeps the mapping while anything built on the view lives; when
        # the last of them goes, the region is freed (the CUDA
        # registration undone, deregistered, unmapped).
        if nbytes <= 0:
            raise ValueError("alloc_pinned: the shape holds no elements")
        region = self.alloc_host(nbytes)
        if cuda:
            region.cuda_register()
        return memoryview(region)

    def alloc_pinned(self, shape, dtype=None):
        """alloc_pinned(shape, dtype=torch.float16) -> torch.Tensor

        A CPU tensor over host memory shared with xferd (alloc_host: zero
        copy on this node), pinned for CUDA in this process too
        (Region.cuda_register) so that ``tensor.is_pinned()`` is True and
        ``gpu_tensor.copy_(tensor, non_blocking=True)`` runs at DMA speed.
        Where CUDA is not available (torch without CUDA, no GPU) it is a
        plain CPU tensor, still shared with xferd, and a RuntimeWarning
        says so.  Initializes CUDA (the current device's context) first.

        The tensor (and every view of it) is a local of write/read and
        the vectors: ``ctx.write(t, remote)``, ``ctx.write(t[7], remote,
        remote_off=...)``.  Its memory lives as long as the tensor: the
        region is freed, and the CUDA registration undone, when the last
        view of it goes (Context.close() waits for that too).  No other
        process can map it; a token (``ctx.region_of(t).export()``) is
        the only way to it.  Needs torch.
        """
        try:
            import torch
        except ImportError as e:
            raise ImportError("alloc_pinned needs torch; "
                              "alloc_pinned_array gives a numpy array") from e
        dtype = torch.float16 if dtype is None else dtype
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        itemsize = torch.empty((), dtype=dtype).element_size()
        cuda = torch.cuda.is_available()
        if cuda:
            # libxfer pins under a context the process has; make the
            # current device's (it never creates one itself).
            torch.cuda.init()
            torch.cuda.synchronize()
        else:
            _warnings.warn("alloc_pinned: CUDA is not available: a plain "
                           "(unpinned) CPU tensor over xferd's memory",
                           RuntimeWarning, stacklevel=2)
        view = self._alloc_pinned_view(_math.prod(shape) * itemsize, cuda)
        return torch.frombuffer(view, dtype=dtype).reshape(shape)

    alloc_pinned_tensor = alloc_pinned

    def alloc_pinned_array(self, shape, dtype="float16"):
        """alloc_pinned_array(shape, dtype='float16') -> numpy.ndarray

        alloc_pinned for numpy (CuPy, Numba, or no framework): an array
        over alloc_host memory, pinned for CUDA where this process has a
        CUDA context (initialize CUDA first), else plain host memory
        (``ctx.region_of(a).cuda_pinned`` says which).  A local of
        write/read as the array or any contiguous view of it; freed when
        the last view goes.
        """
        import numpy as np
        dtype = np.dtype(dtype)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        view = self._alloc_pinned_view(_math.prod(shape) * dtype.itemsize,
                                       False)
        try:
            view.obj.cuda_register()
        except XferError as e:
            if e.errno != _errno.ENODEV:
                raise
        return np.frombuffer(view, dtype=dtype).reshape(shape)

    def notifications(self, timeout=None):
        """Iterate over notifications as they arrive.

        Stops after ``timeout`` seconds without one (None: never), or when
        the context closes or xferd goes away.
        """
        while not self.closed:
            try:
                got = self.get_notifications(timeout=timeout)
            except XferError:
                return
            if not got:
                return
            yield from got

    # --- asyncio ---------------------------------------------------------

    def _async_start(self, loop):
        state = getattr(self, "_aio", None)
        if state is None:
            state = self._aio = {}
        if loop not in state:
            fds = (self.event_fd(), self._wake_fd)
            for fd in fds:
                loop.add_reader(fd, self._async_event, loop)
            state[loop] = (fds, [])
        return state[loop][1]

    def _async_stop(self, loop):
        fds, waiters = self._aio[loop]
        if not waiters:
            for fd in fds:
                loop.remove_reader(fd)
            del self._aio[loop]

    def _async_event(self, loop):
        dead = self._dispatch()
        _fds, waiters = self._aio.get(loop, ((), []))
        for req, fut in list(waiters):
            if (dead or req.done()) and not fut.done():
                fut.set_result(None)

    async def wait_notifications(self, timeout=None):
        """asyncio: the notifications there are, waiting up to ``timeout``
        seconds (None: forever) for the first; [] after the timeout."""
        deadline = None if timeout is None else _time.monotonic() + timeout
        while True:
            got = self.get_notifications()
            if got or self.closed:
                return got
            left = None if deadline is None else deadline - _time.monotonic()
            if left is not None and left <= 0:
                return []
            # A notification is a CQE: the event fd wakes for it too.
            loop = _asyncio.get_running_loop()
            fut = loop.create_future()
            waiters = self._async_start(loop)
            entry = (_NoteProbe(self), fut)
            waiters.append(entry)
            self._async_waiters(1)
            try:
                self._async_event(loop)
                await _asyncio.wait_for(_asyncio.shield(fut), left)
            except _asyncio.TimeoutError:
                return []
            finally:
                waiters.remove(entry)
                self._async_waiters(-1)
                self._async_stop(loop)


class _NoteProbe:
    """Stands for a request in the asyncio waiters: done when a
    notification is queued."""

    def __init__(self, ctx):
        self.ctx = ctx

    def done(self):
        return self.ctx._notes_pending()


async def _await_request(req):
    """What `await req` runs: resolve through the loop's reader on the
    context's event fd (xfer_event_fd), never blocking the loop."""
    if not req.done():
        ctx = req.context
        if ctx.closed:
            return req.wait(0)
        loop = _asyncio.get_running_loop()
        fut = loop.create_future()
        waiters = ctx._async_start(loop)
        entry = (req, fut)
        waiters.append(entry)
        ctx._async_waiters(1)
        try:
            # Arm and check once now: completions that came before the
            # reader existed wake nobody.
            ctx._async_event(loop)
            await fut
        finally:
            waiters.remove(entry)
            ctx._async_waiters(-1)
            ctx._async_stop(loop)
    return req.wait(0)


_core._set_await(_await_request)
