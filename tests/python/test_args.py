# SPDX-License-Identifier: Apache-2.0
"""What callers pass: offsets, lengths and indices of any integer dtype,
lists and strided views, every byte that moved checked; negative and too
large values refused by name before anything moves; timeouts in seconds
with the old timeout_ms= keywords warning; errors that say what to do."""
import array
import errno
import os
import warnings

import numpy as np
import pytest
import xferd

from conftest import pattern

BLK, SLOTS = 256, 64
DTYPES = [np.uint32, np.int32, np.uint16, np.int16, np.uint8, np.int8,
          np.uint64, np.int64, ">u4", ">i8", "<u2"]


def pair(ctx, ctx2, n=SLOTS * BLK, seed=1):
    src, dst = ctx.alloc_host(n), ctx2.alloc_host(n)
    src.numpy()[:] = pattern(n, seed)
    return src, dst, ctx.import_token(dst.export())


def blocks(region):
    return region.numpy().reshape(-1, BLK)


@pytest.mark.parametrize("dtype", DTYPES, ids=[np.dtype(d).str for d in DTYPES])
def test_dlist_any_dtype(ctx, ctx2, dtype):
    src, dst, remote = pair(ctx, ctx2)
    offs = (np.arange(SLOTS) * BLK).astype(np.int64)
    # uint8/int8 cannot hold the offsets: a list of BLK-blocks by index
    # only needs them as indices.
    if np.dtype(dtype).itemsize >= 4:
        ls = ctx.dlist(src, offs.astype(dtype), BLK)
        lt = ctx.dlist(remote, offs.astype(dtype), np.array(BLK, dtype))
    else:
        ls, lt = ctx.dlist(src, offs, BLK), ctx.dlist(remote, offs, BLK)
    li = np.array([3, 0, 7, 60, 5], dtype)
    ri = np.array([10, 11, 1, 2, 63], dtype)
    assert ctx.write_dlist(ls, lt, li, ri).wait(10) == 5 * BLK
    s, d = blocks(src), blocks(dst)
    for a, b in zip(li.astype(int), ri.astype(int)):
        assert np.array_equal(d[b], s[a])
    assert not d[[i for i in range(SLOTS) if i not in set(ri.astype(int))]].any()


def test_ring_dtype_uint32_indices(ctx, ctx2):
    """The dtype the ring holds: no TypeError, no copy needed to mean it."""
    src, dst, remote = pair(ctx, ctx2)
    offs = np.arange(SLOTS, dtype=np.uint32) * BLK
    ls, lt = ctx.dlist(src, offs, BLK), ctx.dlist(remote, offs, BLK)
    idx = np.arange(SLOTS, dtype=np.uint32)[::-1]          # a reversed view
    assert ctx.write_dlist(ls, lt, idx, idx).wait(10) == SLOTS * BLK
    assert np.array_equal(dst.numpy(), src.numpy())
    back = ctx.alloc_host(SLOTS * BLK)
    lb = ctx.dlist(back, offs, BLK)
    assert ctx.read_dlist(lb, lt, idx, idx[::-1].copy()).wait(10) == SLOTS * BLK
    assert np.array_equal(blocks(back), blocks(src)[::-1])


def test_lists_views_and_buffers(ctx, ctx2):
    src, dst, remote = pair(ctx, ctx2)
    s, d = blocks(src), blocks(dst)
    base = np.arange(2 * SLOTS, dtype=np.int32) * BLK // 2   # every half block
    every_other = base[::2]                                  # strided: one per block
    assert not every_other.flags.c_contiguous
    ls = ctx.dlist(src, every_other, BLK)
    grid = (np.arange(SLOTS, dtype=np.uint16) * BLK).reshape(SLOTS // 8, 8)
    lt = ctx.dlist(remote, grid.T, BLK)                      # a 2-D transposed view
    assert lt.count == SLOTS
    # entry k of lt is block (k % 8) * 8 + k // 8
    moved = ctx.write_dlist(ls, lt, [1, 2], array.array("I", [0, 9])).wait(10)
    assert moved == 2 * BLK
    assert np.array_equal(d[0], s[1]) and np.array_equal(d[9], s[2])
    # vectors: a column of a 2-D array, a Python list, a memoryview, a range
    cols = np.stack([np.arange(4, dtype=np.int64) * BLK,
                     np.arange(4, dtype=np.int64) * BLK + 20 * BLK], axis=1)
    req = ctx.write_vec(src, cols[:, 0], remote, memoryview(
        np.array([40, 41, 42, 43], np.uint16) * np.uint16(BLK)), [BLK] * 4)
    assert req.wait(10) == 4 * BLK
    assert np.array_equal(d[40:44], s[0:4])
    req = ctx.write_vec(src, range(BLK * 10, BLK * 12, BLK), remote,
                        cols[2:4, 1], np.uint8(BLK // 2))
    assert req.wait(10) == BLK
    assert np.array_equal(d[22][:BLK // 2], s[10][:BLK // 2])
    assert np.array_equal(d[23][:BLK // 2], s[11][:BLK // 2])


def test_vectors_any_dtype(ctx, ctx2):
    src, dst, remote = pair(ctx, ctx2)
    s, d = blocks(src), blocks(dst)
    for k, dtype in enumerate((np.int32, np.uint32, np.uint16, ">i4")):
        lo = (np.array([k, k + 8]) * BLK).astype(dtype)
        ro = (np.array([k + 16, k + 32]) * BLK).astype(dtype)
        assert ctx.write_vec(src, lo, remote, ro, np.array([BLK, 8], dtype)) \
            .wait(10) == BLK + 8
        assert np.array_equal(d[k + 16], s[k])
        assert np.array_equal(d[k + 32][:8], s[k + 8][:8])
        assert not d[k + 32][8:].any()


def test_negative_and_too_large_values(ctx, ctx2):
    src, dst, remote = pair(ctx, ctx2)
    offs = np.arange(SLOTS, dtype=np.int64) * BLK
    ls, lt = ctx.dlist(src, offs, BLK), ctx.dlist(remote, offs, BLK)
    with pytest.raises(ValueError, match=r"local_offs\[2\] = -256 is negative"):
        ctx.write_vec(src, np.array([0, 256, -256], np.int32), remote,
                      [0, 1, 2], 8)
    with pytest.raises(ValueError, match=r"remote_offs\[1\] must be >= 0, not -3"):
        ctx.write_vec(src, [0, 8], remote, [0, -3], 8)
    with pytest.raises(ValueError, match=r"lengths\[0\] = -1 is negative"):
        ctx.write_vec(src, [0], remote, [0], np.array([-1], np.int8))
    with pytest.raises(ValueError, match=r"offsets\[1\] = .* does not fit in 64 bits"):
        ctx.dlist(src, [0, 2 ** 64], BLK)
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        ctx.write(src, remote, length=2 ** 70)
    with pytest.raises(ValueError, match=r"local_idx\[0\] = -1 is negative"):
        ctx.write_dlist(ls, lt, np.array([-1, 2], np.int8))
    with pytest.raises(ValueError, match=r"local_idx\[0\] = -1 is negative"):
        ctx.write_dlist(ls, lt, np.array([5, 6, -1], np.int16)[::-2])
    # An index past its list: a ValueError and (as before) an IndexError.
    with pytest.raises(xferd.IndexRangeError,
                       match=r"remote_idx\[1\] = 64: the list has 64 entries"):
        ctx.write_dlist(ls, lt, [0, 1], np.array([1, SLOTS], np.uint32))
    for exc in (ValueError, IndexError):
        with pytest.raises(exc, match=r"local_idx\[0\] = 4294967295"):
            ctx.write_dlist(ls, lt, np.array([2 ** 32 - 1], np.uint32))
    small = ctx.dlist(remote, offs[:4], BLK)
    with pytest.raises(ValueError, match=r"local_idx\[1\] = 10 is also the remote index"):
        ctx.write_dlist(ls, small, [1, 10])
    # not integers at all: a TypeError naming the argument
    with pytest.raises(TypeError, match="local_idx: an array of integers"):
        ctx.write_dlist(ls, lt, np.array([1.0]))
    with pytest.raises(TypeError, match=r"remote_offs\[0\] must be an int"):
        ctx.write_vec(src, [0], remote, [0.5], 8)
    assert not dst.numpy().any()                  # nothing moved


def test_timeouts_in_seconds(ctx, ctx2):
    src, dst, remote = pair(ctx, ctx2, 4096)
    offs = np.arange(4, dtype=np.int64) * 1024
    ls, lt = ctx.dlist(src, offs, 1024), ctx.dlist(remote, offs, 1024)
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # timeout= never warns
        assert ctx.write(src, remote, timeout=5).wait(10) == 4096
        assert ctx.read(src, remote, timeout=0.5).wait(10) == 4096
        assert ctx.write(src, remote, timeout=None).wait(10) == 4096
        assert ctx.write(src, remote, timeout_ms=None).wait(10) == 4096
        assert ctx.write_vec(src, offs, remote, offs, 8, timeout=2.5).wait(10) == 32
        assert ctx.write_dlist(ls, lt, timeout=1e-4).wait(10) == 4096
        assert ctx.read_dlist(ls, lt, [0], timeout=3).wait(10) == 1024
    for call in (lambda: ctx.write(src, remote, timeout_ms=5000),
                 lambda: ctx.write(src, remote, 0, 0, None, None, 5000),
                 lambda: ctx.read_vec(src, offs, remote, offs, 8, timeout_ms=100),
                 lambda: ctx.write_dlist(ls, lt, timeout_ms=2000)):
        with pytest.warns(DeprecationWarning, match="timeout_ms= is deprecated"):
            assert call().wait(10) > 0
    with pytest.raises(TypeError, match="not both"):
        ctx.write(src, remote, timeout=1, timeout_ms=1000)
    with pytest.raises(TypeError, match="not both"):
        ctx.read_dlist(ls, lt, timeout=None, timeout_ms=1000)
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        ctx.write(src, remote, timeout=-1)
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        ctx.write_vec(src, offs, remote, offs, 8, timeout=float("nan"))
    with pytest.raises(TypeError, match="seconds or None"):
        ctx.write(src, remote, timeout="5")
    with pytest.raises(ValueError, match="timeout_ms = -1 is out of range"):
        ctx.write(src, remote, timeout_ms=-1)
    assert np.array_equal(dst.numpy(), src.numpy())


def test_stream_timeouts(ctx, ctx2):
    region = ctx.alloc_host(4 * 4096)
    s = xferd.Stream.listen(ctx, region, 4, 4096)
    try:
        with pytest.raises(xferd.XferError) as e:
            s.accept(timeout=0)
        assert e.value.errno == errno.EAGAIN
        with pytest.warns(DeprecationWarning, match="accept: timeout_ms="):
            with pytest.raises(xferd.XferError) as e:
                s.accept(timeout_ms=0)
        assert e.value.errno == errno.EAGAIN
        with pytest.warns(DeprecationWarning):
            with pytest.raises(xferd.XferError):
                s.accept(0)                       # positional: milliseconds, as before
        with pytest.raises(TypeError, match="not both"):
            s.recv(timeout=1, timeout_ms=1)
        with pytest.raises(ValueError, match="timeout must be >= 0"):
            s.recv(timeout=-0.5)
        with pytest.raises(xferd.XferError) as e:   # 20 ms, not 20 s
            xferd.Stream.connect(ctx2, s.token(), timeout=0.02)
        assert e.value.errno == errno.ETIME
    finally:
        s.close()


def test_name_errors_say_what_is_allowed(ctx):
    tok = ctx.alloc_host(64).export()
    for bad, what in (("bad/name", "character '/' at 3"),
                      ("a b", "byte 0x20 at 1"),
                      ("", "the name is empty"),
                      ("na\u00efve", "non-ASCII"),
                      ("x" * 201, "201 bytes")):
        with pytest.raises(xferd.XferError) as e:
            ctx.publish(bad, tok)
        assert e.value.errno == errno.EINVAL
        assert what in str(e.value), str(e.value)
        assert "A-Z a-z 0-9 and . _ : @ + -" in str(e.value)
    with pytest.raises(xferd.XferError) as e:
        ctx.lookup("node-b/kv*7")
    assert e.value.errno == errno.EINVAL
    assert "character '*' at 9" in str(e.value)
    assert "[node/][~uid/]name" in str(e.value)
    with pytest.raises(xferd.XferError) as e:
        ctx.unpublish("semi;colon")
    assert e.value.errno == errno.EINVAL and "';'" in str(e.value)


def test_socket_errors_name_the_path(daemon, monkeypatch, tmp_path):
    missing = str(tmp_path / "nowhere.sock")
    with pytest.raises(xferd.XferError) as e:
        xferd.Context(missing)
    assert e.value.errno == errno.ENOENT
    assert "no xferd socket at " + missing in str(e.value)
    assert "the socket argument" in str(e.value)
    monkeypatch.setenv("XFERD_SOCKET", missing)
    with pytest.raises(xferd.XferError) as e:
        xferd.Context()
    assert missing in str(e.value) and "$XFERD_SOCKET" in str(e.value)
    monkeypatch.delenv("XFERD_SOCKET")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    if os.geteuid() != 0:
        with pytest.raises(xferd.XferError) as e:
            xferd.Context()
        assert str(tmp_path / "xferd.sock") in str(e.value)
        assert "$XDG_RUNTIME_DIR" in str(e.value)
    with pytest.raises(ValueError, match="at most 107"):
        xferd.Context("/tmp/" + "s" * 200)
    with xferd.Context(daemon.socket) as c:      # the path it names works
        assert not c.closed


def test_other_errors_say_what_to_do(ctx, ctx2):
    src = ctx.alloc_host(4096)
    ro = ctx.register(b"\0" * 4096)
    with pytest.raises(ValueError, match="read-only .* register writable memory"):
        ctx.read(ro, ctx.import_token(src.export()))
    with pytest.raises(ValueError, match="import the token on this one"):
        ctx2.write(ctx2.alloc_host(64), ctx.import_token(src.export()))
    with pytest.raises(xferd.XferError, match="tokens are 1 to"):
        ctx.import_token(b"")
    with pytest.raises(TypeError, match="Remote .*import_token"):
        ctx.write(src, b"token")


def test_traffic_class_arguments(daemon, ctx2):
    """traffic_class= on Context and per call: names checked; latency and
    bulk writes move their bytes like any other."""
    with pytest.raises(ValueError):
        xferd.Context(daemon.socket, traffic_class="urgent")
    with pytest.raises(TypeError):
        xferd.Context(daemon.socket, traffic_class=1)
    with xferd.Context(daemon.socket, traffic_class="latency") as c:
        src, dst, remote = pair(c, ctx2, n=65536, seed=9)
        assert c.write(src, remote).wait() == 65536
        assert (dst.numpy() == pattern(65536, 9)).all()
        src.numpy()[:] = pattern(65536, 10)
        assert c.write(src, remote, traffic_class="bulk").wait() == 65536
        assert (dst.numpy() == pattern(65536, 10)).all()
        with pytest.raises(ValueError):
            c.write(src, remote, traffic_class="fast")
