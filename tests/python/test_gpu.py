# SPDX-License-Identifier: Apache-2.0
"""GPU memory through the Python package: torch CUDA tensors, pinned
tensors, checked with torch.equal.  Skips without torch or a GPU."""
import os
import subprocess
import sys

import pytest

import xferd
from conftest import ROOT

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)


def test_cuda_tensors(ctx, ctx2):
    a = torch.randint(0, 255, (1 << 20,), dtype=torch.uint8, device="cuda")
    b = torch.zeros_like(a)
    torch.cuda.synchronize()
    ra, rb = ctx.register(a), ctx2.register(b)
    assert ra.device and ra.length == a.numel()
    try:
        req = ctx.write(ra, ctx.import_token(rb.export()))
    except xferd.XferError as e:
        pytest.skip(f"xferd has no GPU path here: {e}")
    req.wait(10)
    assert req.path == "cuda-ipc"
    assert torch.equal(a, b)


def test_pinned_and_host_tensors(ctx, ctx2):
    src = torch.arange(4096, dtype=torch.int32).pin_memory()
    dst_host = ctx2.alloc_host(src.numel() * 4)
    assert ctx.write(ctx.register(src), ctx.import_token(dst_host.export())).wait(10) == 16384
    assert torch.equal(torch.from_numpy(dst_host.numpy("int32").copy()), src)
    gpu = torch.zeros(4096, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    rg = ctx.register(gpu)
    ctx.read(rg, ctx.import_token(dst_host.export())).wait(10)
    assert torch.equal(gpu.cpu(), src)


def test_kv_connector_on_gpu(daemon):
    env = dict(os.environ, XFERD_SOCKET=daemon.socket)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "python", "examples",
                        "kv_connector.py"), "--device", "cuda"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


EXPANDABLE = r"""
import sys, torch, xferd
sock = sys.argv[1]
with xferd.Context(sock) as c1, xferd.Context(sock) as c2:
    a = torch.randint(0, 255, (8 << 20,), dtype=torch.uint8, device="cuda")
    b = torch.zeros_like(a)
    torch.cuda.synchronize()
    ra, rb = c1.register(a), c2.register(b)
    req = c1.write(ra, c1.import_token(rb.export()))
    req.wait(10)
    assert req.path == "cuda-ipc", req.path
    assert torch.equal(a, b)
    print("ok", torch.cuda.memory_snapshot()[0].get("segment_type", "?"))
"""


def test_expandable_segments(daemon):
    # PyTorch's expandable segments are CUDA VMM memory: libxfer passes
    # xferd a POSIX fd, not a legacy IPC handle.  The allocator reads its
    # configuration when CUDA starts: a process of its own.
    env = dict(os.environ,
               PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    p = subprocess.run([sys.executable, "-c", EXPANDABLE, daemon.socket],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("ok")


def test_alloc_pinned_tensor(ctx, ctx2):
    import gc
    import weakref
    t = ctx.alloc_pinned((256, 1024), dtype=torch.bfloat16)
    assert t.device.type == "cpu" and t.dtype == torch.bfloat16
    assert t.shape == (256, 1024)
    assert t.is_pinned()  # host-registered with CUDA in this process
    r = ctx.region_of(t)
    assert r is not None and r.cuda_pinned and r.length == t.numel() * 2
    assert ctx.region_of(t[17]) is r
    # A GPU round trip through it: the pinned path, bytes intact.
    src = torch.randn(256, 1024, dtype=torch.bfloat16, device="cuda")
    t.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    assert torch.equal(t.cuda(), src)
    # Written through xferd: the whole tensor, then one row at its place.
    dst = ctx2.alloc_host(t.numel() * 2)
    remote = ctx.import_token(dst.export())
    assert ctx.write(t, remote).wait(10) == t.numel() * 2
    got = torch.frombuffer(bytearray(memoryview(dst)), dtype=torch.bfloat16)
    assert torch.equal(got.reshape(256, 1024), t)
    dst.numpy()[:] = 0
    assert ctx.write(t[17], remote, remote_off=2048).wait(10) == 2048
    got = torch.frombuffer(bytearray(memoryview(dst)), dtype=torch.bfloat16)
    assert torch.equal(got[1024:2048], t[17])
    # The region (and its CUDA registration) goes with the last view.
    token = r.export()
    gone = weakref.ref(r)
    del r, t
    gc.collect()
    assert gone() is None
    with pytest.raises(xferd.XferError):
        ctx2.import_token(token)
    # A fresh one over (maybe) the same addresses pins again.
    t2 = ctx.alloc_pinned(4096, dtype=torch.uint8)
    assert t2.is_pinned()
