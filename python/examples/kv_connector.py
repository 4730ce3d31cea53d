#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""kv_connector.py - a disaggregated-prefill KV transfer through xferd.

A prefill process owns a paged KV cache shaped like vLLM's: per layer, K
and V of [num_blocks, block_size, num_kv_heads, head_dim].  It registers
the whole cache once, publishes a token for it under a name and waits.
A decode process (on this node or another) looks the name up, imports the
token and pulls a list of the prefill's block ids into its own (different)
block ids, for every layer, K and V, in ONE vector read (one linked batch,
one completion), then checks every byte and tells the prefill it is done
with a notification.

    kv_connector.py                        # both roles, two processes
    kv_connector.py --role prefill --name kv-demo
    kv_connector.py --role decode --lookup nodeb/kv-demo
    kv_connector.py --device cuda          # torch CUDA tensors (GPU node)

CPU runs use numpy (memory from alloc_host, zero copy); --device cuda
uses torch tensors on the GPU and checks with torch.equal.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

import xferd

DTYPE = np.float16


def cache_shape(a):
    # [layers][K, V][num_blocks, block_size, num_kv_heads, head_dim]
    return (a.layers, 2, a.blocks, a.block_size, a.heads, a.head_dim)


def prefill_content(a):
    """What the prefill computed: deterministic, so decode can check."""
    rng = np.random.default_rng(1234)
    return rng.standard_normal(cache_shape(a), dtype=np.float32).astype(DTYPE)


class Cache:
    """The cache on its device, registered with xferd."""

    def __init__(self, ctx, a, content=None):
        self.a = a
        if a.device == "cuda":
            import torch
            t = torch.zeros(cache_shape(a), dtype=torch.float16, device="cuda")
            if content is not None:
                t.copy_(torch.from_numpy(content))
            torch.cuda.synchronize()   # xferd's copies are not on our stream
            self.tensor = t
            self.region = ctx.register(t)
        else:
            n = int(np.prod(cache_shape(a))) * np.dtype(DTYPE).itemsize
            self.region = ctx.alloc_host(n)
            self.tensor = self.region.numpy(DTYPE, cache_shape(a))
            if content is not None:
                self.tensor[...] = content
        # vLLM's view: per layer, K and V of [blocks, block_size, heads, dim]
        self.kv = [(self.tensor[l, 0], self.tensor[l, 1]) for l in range(a.layers)]
        self.block_bytes = a.block_size * a.heads * a.head_dim * np.dtype(DTYPE).itemsize

    def offset(self, layer, kv, block):
        return ((layer * 2 + kv) * self.a.blocks + block) * self.block_bytes


def prefill(ctx, a):
    cache = Cache(ctx, a, prefill_content(a))
    # Shared: the decode side runs on another node.
    ctx.publish(a.name, cache.region.export(), shared=True)
    print(f"prefill: {a.layers} layers x K,V x {a.blocks} blocks "
          f"({cache.region.length} B) published as {a.name!r}", flush=True)
    # Decode says it is done with a notification on the cache region.
    for note in ctx.notifications(timeout=a.timeout):
        if note.value == 0xD0E:
            print("prefill: decode is done", flush=True)
            return 0
    print("prefill: no word from decode", file=sys.stderr)
    return 1


def decode(ctx, a):
    token = None
    deadline = time.monotonic() + a.timeout
    while token is None:
        try:
            token = ctx.lookup(a.lookup or a.name)
        except xferd.XferError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    remote = ctx.import_token(token)
    cache = Cache(ctx, a)
    # The blocks this request needs, and where they go in our cache.
    rng = np.random.default_rng(99)
    src_blocks = rng.choice(a.blocks, size=a.pull, replace=False)
    dst_blocks = rng.permutation(a.blocks)[:a.pull]
    src, dst = [], []
    for layer in range(a.layers):
        for kv in (0, 1):
            src += [cache.offset(layer, kv, b) for b in src_blocks]
            dst += [cache.offset(layer, kv, b) for b in dst_blocks]
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    t0 = time.perf_counter()
    req = ctx.read_vec(cache.region, dst, remote, src, cache.block_bytes)
    moved = req.wait(a.timeout)
    dt = time.perf_counter() - t0
    print(f"decode: pulled {len(src)} blocks ({moved} B) in one batch via "
          f"{req.path}: {moved / dt / 1e9:.2f} GB/s, {dt * 1e6:.0f} us", flush=True)
    # Check: pulled blocks equal the prefill's, the others are untouched.
    want = prefill_content(a)
    expect = np.zeros_like(want)
    expect[:, :, dst_blocks] = want[:, :, src_blocks]
    if a.device == "cuda":
        import torch
        ok = torch.equal(cache.tensor, torch.from_numpy(expect).cuda())
    else:
        ok = np.array_equal(cache.tensor.view(np.uint16), expect.view(np.uint16))
    if not ok or moved != len(src) * cache.block_bytes:
        print("decode: BYTES DIFFER", file=sys.stderr)
        return 1
    ctx.notify(remote, 0xD0E).wait(a.timeout)
    print("decode: every byte checked: ok", flush=True)
    return 0


def strip_role(argv):
    """argv without --role X / --role=X (the parent's own)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--role":
            skip = True
        elif not arg.startswith("--role="):
            out.append(arg)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=("both", "prefill", "decode"), default="both")
    p.add_argument("--socket", help="xferd socket (default $XFERD_SOCKET)")
    p.add_argument("--name", default=f"kv-demo-{os.getpid()}")
    p.add_argument("--lookup", help="name decode looks up (node/name)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--blocks", type=int, default=128)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--pull", type=int, default=48, help="blocks decode pulls")
    p.add_argument("--timeout", type=float, default=30)
    a = p.parse_args()
    if a.role == "both":
        base = [sys.executable, os.path.abspath(__file__)] + strip_role(sys.argv[1:])
        pre = subprocess.Popen(base + ["--role", "prefill", "--name", a.name])
        try:
            rc = subprocess.call(base + ["--role", "decode", "--name", a.name],
                                 timeout=a.timeout * 2)
            return rc or pre.wait(a.timeout)
        finally:
            if pre.poll() is None:
                pre.kill()
    with xferd.Context(a.socket) as ctx:
        return prefill(ctx, a) if a.role == "prefill" else decode(ctx, a)


if __name__ == "__main__":
    sys.exit(main())
