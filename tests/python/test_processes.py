# SPDX-License-Identifier: Apache-2.0
"""Across processes: a peer killed mid-transfer, and the examples."""
import errno
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import xferd
from conftest import ROOT, pattern

EXAMPLES = os.path.join(ROOT, "python", "examples")

CHILD = r"""
import sys, time, xferd
ctx = xferd.Context(sys.argv[1])
r = ctx.alloc_host(64 << 20)
ctx.publish(sys.argv[2], r.export())
print("ready", flush=True)
time.sleep(60)
"""


def test_child_killed_mid_transfer(daemon, ctx, ctx2):
    name = f"py-victim-{os.getpid()}"
    child = subprocess.Popen([sys.executable, "-c", CHILD, daemon.socket, name],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        remote = ctx.import_token(ctx.lookup(name))
        src = ctx.alloc_host(64 << 20)
        src.numpy()[::4096] = 1
        reqs = [ctx.write(src, remote) for _ in range(8)]
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        reqs += [ctx.write(src, remote) for _ in range(4)]
        # Every request ends (bytes or an error), none hangs.
        for r in reqs:
            try:
                assert r.wait(10) == 64 << 20
            except xferd.XferError as e:
                assert e.errno in (errno.ESTALE, errno.EACCES, errno.ENOENT,
                                   errno.ESRCH, errno.EFAULT)
        assert reqs[-1].result < 0               # the target is gone by then
    finally:
        if child.poll() is None:
            child.kill()
    # The daemon and this client are unaffected.
    dst = ctx2.alloc_host(4096)
    src = ctx.alloc_host(4096)
    src.numpy()[:] = pattern(4096, 77)
    assert ctx.write(src, ctx.import_token(dst.export())).wait(10) == 4096
    assert np.array_equal(dst.numpy(), pattern(4096, 77))
    assert daemon.alive()


def run_example(daemon, *args):
    env = dict(os.environ, XFERD_SOCKET=daemon.socket)
    p = subprocess.run([sys.executable, *args], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_kv_connector_example(daemon):
    out = run_example(daemon, os.path.join(EXAMPLES, "kv_connector.py"))
    assert "every byte checked: ok" in out and "decode is done" in out


def test_stream_example(daemon):
    out = run_example(daemon, os.path.join(EXAMPLES, "stream.py"),
                      "--count", "500", "--size", "16384")
    assert "500 messages of 16384 B checked" in out and "read back: ok" in out
