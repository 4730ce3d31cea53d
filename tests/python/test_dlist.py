# SPDX-License-Identifier: Apache-2.0
"""Prepared descriptor lists from Python: Context.dlist, write_dlist and
read_dlist move random blocks by index as one descriptor (one Request,
the byte sum, the path), every block checked; bad indices and dead lists
move nothing."""
import errno

import numpy as np
import pytest
import xferd

from conftest import pattern

BLK, SLOTS = 4096, 512


def lists(ctx, ctx2, kind="host"):
    """A source of ctx, a target of ctx2 imported by ctx, a list of every
    block over each."""
    if kind == "host":
        src = ctx.alloc_host(SLOTS * BLK)
    else:
        src = ctx.register(np.zeros(SLOTS * BLK, np.uint8))
    dst = ctx2.alloc_host(SLOTS * BLK)
    remote = ctx.import_token(dst.export())
    offs = np.arange(SLOTS, dtype=np.int64) * BLK
    return src, dst, ctx.dlist(src, offs, BLK), ctx.dlist(remote, offs, BLK)


def blocks(region):
    return np.frombuffer(memoryview(region), np.uint8).reshape(SLOTS, BLK) \
        if region.host else region.obj.reshape(SLOTS, BLK)


@pytest.mark.parametrize("kind,path", [("host", "memcpy"), ("malloc", "cma")])
def test_scatter_and_gather(ctx, ctx2, kind, path):
    src, dst, ls, lt = lists(ctx, ctx2, kind)
    assert (ls.count, len(lt)) == (SLOTS, SLOTS) and ls.target is src
    s, d = blocks(src), dst.numpy().reshape(SLOTS, BLK)
    s[:] = pattern(SLOTS * BLK, 21).reshape(SLOTS, BLK)
    rng = np.random.default_rng(5)
    li = rng.permutation(SLOTS)[:300]
    ri = rng.permutation(SLOTS)[:300]
    req = ctx.write_dlist(ls, lt, li, ri)
    assert req.wait(10) == 300 * BLK and req.path == path
    assert np.array_equal(d[ri], s[li])
    untouched = np.setdiff1d(np.arange(SLOTS), ri)
    assert not d[untouched].any()
    # back into a cleared source: the same blocks, nothing else
    s[:] = 0
    assert ctx.read_dlist(ls, lt, li, ri).wait(10) == 300 * BLK
    assert np.array_equal(s[li], d[ri])
    assert not s[np.setdiff1d(np.arange(SLOTS), li)].any()


def test_identity_lengths_and_notify(ctx, ctx2):
    src, dst, ls, lt = lists(ctx, ctx2)
    src.numpy()[:] = pattern(SLOTS * BLK, 22)
    # no indices: 0..n-1 over the shorter list (one run, merged)
    assert ctx.write_dlist(ls, lt, notify=7).wait(10) == SLOTS * BLK
    assert np.array_equal(dst.numpy(), src.numpy())
    got = ctx2.get_notifications(timeout=5)
    assert [(n.value, n.nbytes) for n in got] == [(7, SLOTS * BLK)]
    # entries of their own lengths; remote_idx None = local_idx
    short = ctx.dlist(src, [0, BLK, 5 * BLK], [10, 20, 30])
    remote = lt.target
    other = ctx.dlist(remote, [100, 200, 300], np.array([10, 20, 30], np.uint64))
    dst.numpy()[:] = 0
    assert ctx.write_dlist(short, other, [2, 0]).wait(10) == 40
    d, s = dst.numpy(), src.numpy()
    assert np.array_equal(d[300:330], s[5 * BLK:5 * BLK + 30])
    assert np.array_equal(d[100:110], s[0:10])
    assert d[110:300].sum() == 0 and d[330:].sum() == 0


def test_index_area_reused(ctx, ctx2):
    """More pairs than the index area holds, in many submissions."""
    src, dst, ls, lt = lists(ctx, ctx2)
    src.numpy()[:] = pattern(SLOTS * BLK, 23)
    idx = np.arange(SLOTS, dtype=np.int64)[::-1].copy()
    reqs = [ctx.write_dlist(ls, lt, idx, idx) for _ in range(400)]
    assert all(r.wait(30) == SLOTS * BLK for r in reqs)
    assert np.array_equal(dst.numpy(), src.numpy())
    # 65536 pairs (half the area) a descriptor: the third waits for room
    n, b = 65536, 64
    big_src, big_dst = ctx.alloc_host(n * b), ctx2.alloc_host(n * b)
    big_src.numpy()[:] = pattern(n * b, 24)
    offs = np.arange(n, dtype=np.int64) * b
    ls = ctx.dlist(big_src, offs, b)
    lt = ctx.dlist(ctx.import_token(big_dst.export()), offs, b)
    perm = np.random.default_rng(6).permutation(n)
    reqs = [ctx.write_dlist(ls, lt, perm, perm) for _ in range(8)]
    assert all(r.wait(30) == n * b for r in reqs)
    assert np.array_equal(big_dst.numpy(), big_src.numpy())


def test_bad_pairs_and_lists(ctx, ctx2):
    src, dst, ls, lt = lists(ctx, ctx2)
    src.numpy()[:] = 1
    with pytest.raises(IndexError):
        ctx.write_dlist(ls, lt, [0, SLOTS])
    with pytest.raises(IndexError):
        ctx.write_dlist(ls, lt, [1], [SLOTS + 3])
    with pytest.raises(ValueError):
        ctx.write_dlist(ls, lt, [1, 2], [3])
    with pytest.raises(ValueError):
        ctx.write_dlist(ls, lt, [], [])
    with pytest.raises(TypeError):
        ctx.write_dlist(ls, src, [0])
    # entries of different lengths: xferd refuses, nothing moved
    odd = ctx.dlist(lt.target, [0], 100)
    with pytest.raises(xferd.XferError) as e:
        ctx.write_dlist(ls, odd, [0], [0]).wait(10)
    assert e.value.errno == errno.EINVAL
    # lists outside their target, of nothing
    with pytest.raises(xferd.XferError) as e:
        ctx.dlist(src, [SLOTS * BLK - 10], 11)
    assert e.value.errno == errno.ERANGE
    with pytest.raises(ValueError):
        ctx.dlist(src, [], 8)
    with pytest.raises(ValueError):
        ctx.dlist(src, [0, 8], [8])
    # a closed list, and lists whose import went
    gone = ctx.dlist(src, [0], BLK)
    gone.close()
    assert gone.closed
    with pytest.raises(ValueError):
        ctx.write_dlist(gone, lt, [0])
    lt.target.close()
    with pytest.raises(xferd.XferError) as e:
        ctx.write_dlist(ls, lt, [0]).wait(10)
    assert e.value.errno == errno.EACCES
    lt.close()                                    # still freed
    assert not dst.numpy().any()


def test_close_context_with_lists(daemon, ctx2):
    c = xferd.Context(daemon.socket)
    src = c.alloc_host(BLK)
    dl = c.dlist(src, [0], BLK)
    c.close()
    assert dl.closed and "closed" in repr(dl)
