# SPDX-License-Identifier: Apache-2.0
"""Every call of the xferd package against a real xferd; every transfer
checks the bytes that arrived."""
import asyncio
import errno
import gc
import os
import select
import threading
import time

import numpy as np
import pytest

import xferd
from conftest import pattern


def test_alloc_host_buffer_and_numpy(ctx):
    r = ctx.alloc_host(4096 + 7)
    assert r.length == 4096 + 7 and r.host and not r.readonly and not r.closed
    mv = memoryview(r)
    assert len(mv) == 4097 + 6 and not mv.readonly
    mv[:3] = b"abc"
    a = r.numpy()
    assert bytes(a[:3]) == b"abc"
    with pytest.raises(BufferError):
        r.close()                     # views exist: memory must stay
    mv.release()
    del a
    r.close()
    assert r.closed
    with pytest.raises(BufferError):
        memoryview(r)
    with pytest.raises(ValueError):
        ctx.alloc_host(0)
    with pytest.raises(TypeError):
        ctx.alloc_host("10")


@pytest.mark.parametrize("size,loff,roff", [(1, 3, 5), (4097, 1, 4095),
                                            ((1 << 20) + 7, 13, 0)])
def test_write_read_memfd_numpy(ctx, ctx2, size, loff, roff):
    src = ctx.alloc_host(size + loff)
    src.numpy()[loff:] = pattern(size, size)
    dst = np.zeros(size + roff + 9, np.uint8)
    rdst = ctx2.register(dst)
    remote = ctx.import_token(ctx2.export(rdst))
    req = ctx.write(src, remote, local_off=loff, remote_off=roff, length=size)
    assert req.wait(10) == size and req.result == size and req.done()
    assert req.path == "cma" and req.error is None
    assert np.array_equal(dst[roff:roff + size], pattern(size, size))
    assert not dst[:roff].any() and not dst[roff + size:].any()
    back = ctx.alloc_host(size)
    assert ctx.read(back, remote, remote_off=roff, length=size).wait(10) == size
    assert np.array_equal(back.numpy(), pattern(size, size))


def test_memfd_to_memfd_is_memcpy_and_default_length(ctx, ctx2):
    a, b = ctx.alloc_host(1 << 16), ctx2.alloc_host(1 << 15)
    a.numpy()[:] = pattern(1 << 16, 1)
    req = ctx.write(a, ctx.import_token(b.export()))
    assert req.wait() == 1 << 15 and req.path == "memcpy"   # what fits
    assert np.array_equal(b.numpy(), pattern(1 << 16, 1)[:1 << 15])


def test_memoryview_bytearray_bytes(ctx, ctx2):
    ba = bytearray(b"x" * 100)
    rba = ctx2.register(memoryview(ba))
    src = ctx.register(b"hello world")            # read-only: a source
    assert src.readonly
    remote = ctx.import_token(rba.export(10, 20))
    assert remote.length == 20
    assert ctx.write(src, remote, length=11).wait() == 11
    assert bytes(ba[10:21]) == b"hello world" and ba[21:] == b"x" * 79
    with pytest.raises(ValueError):
        src.export()                              # a token would let anyone write
    with pytest.raises(ValueError):
        ctx.read(src, remote, length=1)           # never a destination
    with pytest.raises(BufferError):
        ba.append(1)                              # pinned while registered
    rba.close()
    ba.append(1)


def test_pointer_interfaces(ctx, ctx2):
    """__cuda_array_interface__, data_ptr() and DLPack, with host memory
    behind them (what a GPU-less machine can check)."""
    backing = [np.zeros(4096, np.uint8) for _ in range(3)]

    class CAI:
        def __init__(self, a):
            self.a = a
            self.__cuda_array_interface__ = {
                "data": (a.ctypes.data, False), "shape": (4096,),
                "typestr": "|u1", "strides": None, "version": 3}

    class Torchish:
        def __init__(self, a):
            self.a = a

        def data_ptr(self):
            return self.a.ctypes.data

        @property
        def nbytes(self):
            return self.a.nbytes

        def is_contiguous(self):
            return True

    class DL:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

    src = ctx.alloc_host(4096)
    for i, (wrap, a) in enumerate(zip((CAI, Torchish, DL), backing)):
        src.numpy()[:] = pattern(4096, 50 + i)
        r = ctx2.register(wrap(a))
        assert r.length == 4096 and r.ptr == a.ctypes.data
        with pytest.raises(BufferError):
            memoryview(r)
        assert ctx.write(src, ctx.import_token(r.export())).wait() == 4096
        assert np.array_equal(a, pattern(4096, 50 + i))
        r.close()
    with pytest.raises(ValueError):               # not contiguous
        ctx.register(np.zeros((8, 8), np.uint8)[:, ::2])
    with pytest.raises(TypeError):
        ctx.register(object())
    with pytest.raises(TypeError):
        ctx.register("a str")


def test_vectors(ctx, ctx2):
    n, blk = 1000, 512
    src = ctx.alloc_host(n * blk)
    src.numpy()[:] = pattern(n * blk, 9)
    dst = ctx2.alloc_host(n * blk)
    remote = ctx.import_token(dst.export())
    loffs = np.arange(n, dtype=np.int64) * blk
    roffs = loffs[::-1].copy()                    # scattered, reversed
    req = ctx.write_vec(src, loffs, remote, roffs, blk)
    assert req.wait(10) == n * blk
    s, d = src.numpy().reshape(n, blk), dst.numpy().reshape(n, blk)
    assert np.array_equal(d[::-1], s)
    # lists, uint64 arrays, per-entry lengths, read_vec
    back = ctx.alloc_host(n * blk)
    req = ctx.read_vec(back, list(range(0, 3 * blk, blk)), remote,
                       np.array([0, 5 * blk, 7 * blk], np.uint64), [blk, 10, blk])
    assert req.wait() == 2 * blk + 10
    b = back.numpy()
    assert np.array_equal(b[:blk], d[0]) and np.array_equal(b[blk:blk + 10], d[5][:10])
    assert np.array_equal(b[2 * blk:3 * blk], d[7]) and not b[blk + 10:2 * blk].any()


def test_vector_longer_than_the_sq(ctx, ctx2):
    n = 5000                                      # the SQ holds 1024
    src, dst = ctx.alloc_host(n * 8), ctx2.alloc_host(n * 8)
    src.numpy()[:] = pattern(n * 8, 3)
    offs = np.arange(n, dtype=np.int64) * 8
    assert ctx.write_vec(src, offs, ctx.import_token(dst.export()), offs, 8).wait(10) == n * 8
    assert np.array_equal(dst.numpy(), src.numpy())


def test_bad_vectors_move_nothing(ctx, ctx2):
    src, dst = ctx.alloc_host(4096), ctx2.alloc_host(4096)
    src.numpy()[:] = 1
    remote = ctx.import_token(dst.export())
    offs = np.arange(4, dtype=np.int64) * 1024
    with pytest.raises(xferd.XferError) as e:
        ctx.write_vec(src, offs, remote, offs + np.array([0, 0, 0, 1]), 1024)
    assert e.value.errno == errno.ERANGE and "outside" in e.value.strerror
    with pytest.raises(ValueError):
        ctx.write_vec(src, offs, remote, offs[:3], 1024)
    with pytest.raises(ValueError):
        ctx.write_vec(src, [-1], remote, [0], 8)
    with pytest.raises(ValueError):
        ctx.write_vec(src, np.array([-8], np.int64), remote, [0], 8)
    with pytest.raises(TypeError):
        ctx.write_vec(src, offs.astype(np.float64), remote, offs, 8)
    with pytest.raises(TypeError):                # any integer dtype, no other
        ctx.write_vec(src, offs.astype(np.float32), remote, offs, 8)
    with pytest.raises(TypeError):
        ctx.write_vec(src, offs.astype(bool), remote, offs, 8)
    with pytest.raises(ValueError):
        ctx.write_vec(src, np.array([0, -8], np.int32), remote, [0, 8], 8)
    with pytest.raises(ValueError):
        ctx.write_vec(src, [], remote, [], 8)
    assert not dst.numpy().any()


def test_bad_input(ctx, ctx2):
    src, dst = ctx.alloc_host(4096), ctx2.alloc_host(4096)
    src.numpy()[:] = 7
    remote = ctx.import_token(dst.export())
    with pytest.raises(xferd.XferError) as e:
        ctx.write(src, remote, remote_off=4000, length=97)
    assert e.value.errno == errno.ERANGE
    with pytest.raises(ValueError):
        ctx.write(src, remote, local_off=-1)
    with pytest.raises(TypeError):
        ctx.write("src", remote)
    with pytest.raises(TypeError):
        ctx.write(src, b"token")
    with pytest.raises(TypeError):
        ctx.write(src, remote, length=1.5)
    with pytest.raises(ValueError):
        ctx.write(dst, remote)                    # ctx2's region on ctx
    with pytest.raises(xferd.XferError) as e:
        ctx.import_token(b"garbage" * 10)
    assert e.value.errno == errno.EINVAL
    tok = bytearray(dst.export())
    tok[-5] ^= 0x40                               # tampered: the key says no
    with pytest.raises(xferd.XferError) as e:
        ctx.import_token(bytes(tok))
    assert e.value.errno in (errno.EACCES, errno.EINVAL)
    for bad in (b"", b"x" * (xferd.TOKEN_MAX + 1)):
        with pytest.raises(xferd.XferError):
            ctx.import_token(bad)
    with pytest.raises(TypeError):
        ctx.import_token("a str")
    with pytest.raises(xferd.XferError) as e:
        dst.export(4000, 100)
    assert e.value.errno == errno.ERANGE
    remote.close()
    with pytest.raises(ValueError):
        ctx.write(src, remote)
    assert not dst.numpy().any()                  # nothing moved


def test_names(ctx, ctx2):
    r = ctx.alloc_host(64)
    tok = r.export()
    ctx.publish("py-test-name", tok)
    assert ctx2.lookup("py-test-name") == tok
    with pytest.raises(xferd.XferError) as e:
        ctx2.publish("py-test-name", tok)
    assert e.value.errno == errno.EEXIST
    ctx.unpublish("py-test-name")
    with pytest.raises(xferd.XferError) as e:
        ctx2.lookup("py-test-name")
    assert e.value.errno == errno.ENOENT and "not found" in str(e.value)
    with pytest.raises(xferd.XferError) as e:
        ctx.publish("bad/name", tok)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(TypeError):
        ctx.publish("n", 5)
    # shared=True: the same user sees it either way, also as "~uid/name".
    ctx.publish("py-shared", tok, shared=True)
    assert ctx2.lookup("py-shared") == tok
    assert ctx2.lookup("~%d/py-shared" % os.getuid()) == tok
    ctx.publish("py-shared", tok, shared=False)
    assert ctx2.lookup("~%d/py-shared" % os.getuid()) == tok
    ctx.unpublish("py-shared")
    with pytest.raises(xferd.XferError) as e:
        ctx.lookup("~01/x")
    assert e.value.errno == errno.EINVAL


def test_notifications(ctx, ctx2):
    src, dst = ctx.alloc_host(256), ctx2.alloc_host(256)
    src.numpy()[:] = pattern(256, 4)
    remote = ctx.import_token(dst.export())
    assert ctx2.get_notifications() == []
    t = time.monotonic()
    assert ctx2.get_notifications(timeout=0.1) == []
    assert time.monotonic() - t >= 0.09
    ctx.write(src, remote, length=100, notify=41).wait()
    ctx.notify(remote, 42).wait()
    got = ctx2.get_notifications(timeout=5)
    while len(got) < 2:
        got += ctx2.get_notifications(timeout=5)
    assert [(n.value, n.nbytes) for n in got] == [(41, 100), (42, 0)]
    assert got[0].region is dst and got[0].handle == dst.handle
    assert np.array_equal(dst.numpy()[:100], pattern(256, 4)[:100])
    for v in range(5):
        ctx.notify(remote, 100 + v)
    seen = [n.value for n, _ in zip(ctx2.notifications(timeout=5), range(5))]
    assert seen == [100, 101, 102, 103, 104]
    assert ctx2.overflow == 0


def test_notification_messages(daemon, ctx2):
    """notify= takes bytes and str (UTF-8) as the message, a (value,
    message) pair, on write, read and notify; the owner sees the message
    and the name the sender gave its Context."""
    import xferd
    dst = ctx2.alloc_host(4096)
    with xferd.Context(daemon.socket, name="prefill worker 0") as s:
        src = s.alloc_host(4096)
        src.numpy()[:] = pattern(4096, 8)
        remote = s.import_token(dst.export())
        rid = "cmpl-5b1e7c1d2f0a4b8c9d3e6f7a-0 \u00e9"
        s.write(src, remote, length=1000, notify=b"req-1").wait()
        s.read(src, remote, length=10, notify=rid).wait()
        s.notify(remote, (77, b"\x00" * xferd.NOTIFY_MSG_MAX)).wait()
        s.notify(remote, 78).wait()
        s.notify(remote, b"").wait()
        with pytest.raises(ValueError, match="at most 256"):
            s.notify(remote, b"x" * (xferd.NOTIFY_MSG_MAX + 1))
        with pytest.raises(ValueError, match="at most 256"):
            s.write(src, remote, notify="\u00e9" * 129)
        with pytest.raises(TypeError, match="notify"):
            s.write(src, remote, notify=1.5)
        got = []
        while len(got) < 5:
            got += ctx2.get_notifications(timeout=5)
    assert [(n.value, n.nbytes, n.message) for n in got] == [
        (0, 1000, b"req-1"), (0, 10, rid.encode()),
        (77, 0, b"\x00" * xferd.NOTIFY_MSG_MAX), (78, 0, b""), (0, 0, b"")]
    assert all(n.sender_name == "prefill worker 0" for n in got)
    assert np.array_equal(dst.numpy()[:1000], pattern(4096, 8)[:1000])
    with pytest.raises(ValueError, match="printable ASCII"):
        xferd.Context(daemon.socket, name="bad\tname")
    with pytest.raises(ValueError, match="printable ASCII"):
        xferd.Context(daemon.socket, name="n" * 65)


def test_event_fd_protocol(ctx, ctx2):
    src, dst = ctx.alloc_host(64), ctx2.alloc_host(64)
    remote = ctx.import_token(dst.export())
    fd = ctx2.event_fd()                          # 1. arm
    assert ctx2.get_notifications() == []         # 2. check
    p = select.poll()
    p.register(fd, select.POLLIN)
    ctx.notify(remote, 5).wait()
    assert p.poll(5000), "the event fd did not wake"   # 3. poll
    assert [n.value for n in ctx2.get_notifications()] == [5]
    assert ctx2.event_fd() == fd


def test_asyncio(ctx, ctx2):
    src, dst = ctx.alloc_host(1 << 20), ctx2.alloc_host(1 << 20)
    src.numpy()[:] = pattern(1 << 20, 8)
    remote = ctx.import_token(dst.export())

    async def main():
        reqs = [ctx.write(src, remote, local_off=i << 16, remote_off=i << 16,
                          length=1 << 16) for i in range(16)]
        sizes = await asyncio.gather(*reqs)
        ctx.notify(remote, 9)
        notes = await ctx2.wait_notifications(timeout=5)
        nothing = await ctx2.wait_notifications(timeout=0.05)
        return sizes, notes, nothing

    sizes, notes, nothing = asyncio.run(main())
    assert sizes == [1 << 16] * 16 and [n.value for n in notes] == [9] and nothing == []
    assert np.array_equal(dst.numpy(), src.numpy())


def test_threads_share_a_context(ctx, ctx2):
    src, dst = ctx.alloc_host(1 << 16), ctx2.alloc_host(1 << 16)
    src.numpy()[:] = pattern(1 << 16, 12)
    remote = ctx.import_token(dst.export())
    errors = []

    def worker(k):
        try:
            for i in range(200):
                off = (k * 200 + i) * 64 % (1 << 16)
                assert ctx.write(src, remote, local_off=off, remote_off=off,
                                 length=64).wait(10) == 64
        except Exception as e:                    # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert np.array_equal(dst.numpy()[:800 * 64], src.numpy()[:800 * 64])


def test_request_keeps_regions_alive(ctx, ctx2):
    dst = ctx2.alloc_host(1 << 20)
    remote = ctx.import_token(dst.export())
    req = ctx.write(ctx.register(bytearray(b"\x05" * (1 << 20))), remote)
    gc.collect()                                  # the source lives in the request
    assert req.wait(10) == 1 << 20 and (dst.numpy() == 5).all()
    del req
    for _ in range(100):                          # dropped before completion
        ctx.write(ctx.register(np.full(4096, 3, np.uint8)), remote)
    gc.collect()
    assert ctx.write(ctx.alloc_host(1), remote, length=1).wait(10) == 1


def test_close(daemon, ctx2):
    c = xferd.Context(daemon.socket)
    r = c.alloc_host(4096)
    view = r.numpy()
    other = c.alloc_host(10)
    target = ctx2.alloc_host(8)
    remote = c.import_token(target.export())
    c.close()
    assert c.closed and other.closed and remote.closed and not r.closed
    view[:] = 1                                   # still mapped while viewed
    with pytest.raises(ValueError):
        c.alloc_host(1)
    with pytest.raises(ValueError):
        c.write(r, remote)
    del view
    r.close()
    assert r.closed
    c.close()


def test_errors(daemon):
    with pytest.raises(xferd.XferError) as e:
        xferd.Context(daemon.socket + ".nope")
    assert e.value.errno == errno.ENOENT
    assert "token" in xferd.strerror(errno.EACCES)
    assert issubclass(xferd.XferError, OSError)


def test_daemon_gone(private_daemon):
    c = xferd.Context(private_daemon.socket)
    src = c.alloc_host(4096)
    remote = c.import_token(src.export())
    assert c.write(src, remote, length=8).wait(5) == 8
    private_daemon.proc.kill()
    private_daemon.proc.wait()
    t = time.monotonic()
    with pytest.raises(xferd.XferError) as e:
        c.get_notifications(timeout=10)
        c.write(src, remote, length=8).wait(10)
    assert time.monotonic() - t < 9 and e.value.errno == errno.ENOTCONN
    c.close()
