# SPDX-License-Identifier: Apache-2.0
"""Pinned host memory from xferd (alloc_pinned_array here, alloc_pinned
with torch in test_gpu.py): views of it as transfer locals, its lifetime
tied to the last view, nobody else able to reach it.  Without CUDA the
memory is plain shared host memory and cuda_register says ENODEV."""
import errno
import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import xferd
from conftest import pattern


def test_array_views_are_locals(ctx, ctx2):
    a = ctx.alloc_pinned_array((64, 1024), "float16")
    assert a.shape == (64, 1024) and a.dtype == np.float16
    r = ctx.region_of(a)
    assert isinstance(r, xferd.Region) and r.host and r.length == a.nbytes
    assert ctx.region_of(a[5]) is r
    assert ctx.region_of(np.zeros(4)) is None
    dst = ctx2.alloc_host(a.nbytes)
    remote = ctx.import_token(dst.export())

    src = pattern(a.nbytes, 11)
    a.view(np.uint8).reshape(-1)[:] = src
    assert ctx.write(a, remote).wait(10) == a.nbytes
    assert bytes(memoryview(dst)) == src.tobytes()

    # A row of it: its own offset in the region, length its bytes.
    row = 2048
    dst.numpy()[:] = 0
    assert ctx.write(a[9], remote, remote_off=row).wait(10) == row
    got = dst.numpy()
    assert got[row:2 * row].tobytes() == src[9 * row:10 * row].tobytes()
    assert not got[:row].any() and not got[2 * row:].any()

    # Read into a row, and vectors relative to the row's start.
    back = pattern(a.nbytes, 12)
    dst.numpy()[:] = back
    assert ctx.read(a[3], remote, remote_off=100).wait(10) == row
    assert a[3].tobytes() == back[100:100 + row].tobytes()
    assert ctx.write_vec(a[7], [0, 1024], remote, [0, 4096], 512).wait(10) == 1024
    assert dst.numpy()[:512].tobytes() == a[7].tobytes()[:512]
    assert dst.numpy()[4096:4608].tobytes() == a[7].tobytes()[1024:1536]

    # Past the view: refused before anything moves, even inside the region.
    with pytest.raises(xferd.XferError) as e:
        ctx.write(a[3], remote, length=row + 2)
    assert e.value.errno == errno.ERANGE
    # Strided views are no one range; other memory is not a local.
    with pytest.raises(TypeError, match="contiguous view"):
        ctx.write(a[:, 3], remote, length=2)
    with pytest.raises(TypeError, match="contiguous view"):
        ctx.write(np.zeros(16, np.uint8), remote)
    # Another context's pinned memory is not this one's.
    b = ctx2.alloc_pinned_array(16, "uint8")
    with pytest.raises(TypeError):
        ctx.write(b, remote)


def test_without_cuda_plain_host_memory(ctx):
    a = ctx.alloc_pinned_array(4096, "uint8")
    r = ctx.region_of(a)
    try:
        import torch  # noqa: F401
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    except ImportError:
        cuda = False
    if cuda:
        pytest.skip("this process has CUDA (test_gpu.py checks pinning)")
    assert not r.cuda_pinned
    with pytest.raises(xferd.XferError) as e:
        r.cuda_register()
    assert e.value.errno == errno.ENODEV
    assert "CUDA" in str(e.value)
    with pytest.raises(ValueError, match="only alloc_host"):
        ctx.register(bytearray(64)).cuda_register()


def test_region_lives_with_last_view(daemon, ctx, ctx2):
    a = ctx.alloc_pinned_array(1 << 20, "uint8")
    row = a[4096:8192]
    r = ctx.region_of(a)
    token = r.export()
    gone = weakref.ref(r)
    with pytest.raises(BufferError):
        r.close()  # views exist: the memory stays
    del r, a
    gc.collect()
    assert gone() is not None  # the row still views it
    row[:] = 7
    imported = ctx2.import_token(token)
    sink = ctx2.alloc_host(4096)
    assert ctx2.read(sink, imported, remote_off=4096).wait(10) == 4096
    assert not (sink.numpy() != 7).any()
    imported.close()
    del row
    gc.collect()
    assert gone() is None
    # Deregistered with the last view: its token reaches nothing.
    with pytest.raises(xferd.XferError):
        ctx2.import_token(token)


def test_context_close_waits_for_views(daemon):
    c = xferd.Context(daemon.socket)
    a = c.alloc_pinned_array(8192, "uint8")
    a[:] = 3
    c.close()
    a[100:200] = 5  # still mapped after close
    assert a[150] == 5 and a[0] == 3
    del a
    gc.collect()


CHILD = r"""
import os, sys, xferd
pid, token = int(sys.argv[1]), bytes.fromhex(sys.argv[2])
# No descriptor of the parent names the memory: nothing to open through
# /proc/PID/fd (xferd and the parent's mapping are the only holders).
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        continue
    assert "xfer-host" not in target, target
# A token with one byte of its key (field 4: tag 0x22, 16 bytes)
# changed reaches nothing: the key, not the handle, grants the memory.
bad = bytearray(token)
at = bad.find(b"\x22\x10")
assert at > 0
bad[at + 2 + 7] ^= 0x55
with xferd.Context(sys.argv[3]) as c:
    c.import_token(token).close()  # the token itself does reach it
    try:
        c.import_token(bytes(bad))
    except xferd.XferError as e:
        print("refused", e.errno)
    else:
        print("imported")
"""


def test_other_process_cannot_reach_it(daemon, ctx):
    a = ctx.alloc_pinned_array(1 << 16, "uint8")
    token = ctx.region_of(a).export()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(os.getpid()), token.hex(),
         daemon.socket],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused"), out.stdout


def test_readonly_view_is_no_destination(ctx, ctx2):
    """A read-only view (memoryview.toreadonly(), a numpy array with
    writeable=False) of writable memory is refused as a read's local,
    and still serves as a write's source."""
    a = ctx.alloc_pinned_array(4096, "uint8")
    a[:] = pattern(4096, 21)
    dst = ctx2.alloc_host(4096)
    remote = ctx.import_token(dst.export())
    ro = memoryview(a).toreadonly()
    with pytest.raises(ValueError, match="read-only"):
        ctx.read(ro, remote)
    frozen = a.view()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ctx.read_vec(frozen, [0], remote, [0], 16)
    assert ctx.write(ro, remote).wait(10) == 4096
    assert bytes(memoryview(dst)) == a.tobytes()
