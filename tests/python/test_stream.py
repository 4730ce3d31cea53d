# SPDX-License-Identifier: Apache-2.0
"""xferd.Stream: a consumer and a producer in two processes, every byte
of every message checked; flow control; bad tokens; a producer killed."""
import errno
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import xferd
from conftest import BUILD, pattern

SLOT = 256 << 10
NSLOTS = 3
COUNT = 40

PRODUCER = r"""
import sys
import numpy as np
import xferd
sock, name, count, slot, stall = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ctx = xferd.Context(sock)
src = ctx.alloc_host(slot)
s = xferd.Stream.connect(ctx, ctx.lookup(name), timeout=30)
for i in range(count):
    if i == stall:
        print("stalled", flush=True)
        sys.stdin.read()
    n = (i * 7919) % (slot + 1)
    src.numpy()[:n] = np.random.default_rng(i).integers(0, 256, n, dtype=np.uint8)
    s.send(src, n, timeout=30)
s.close()
"""


def producer(daemon, name, count, stall=-1):
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python", "lib"))
    return subprocess.Popen(
        [sys.executable, "-c", PRODUCER, daemon.socket, name, str(count),
         str(SLOT), str(stall)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def consumer(ctx, name, offset=0):
    region = ctx.alloc_host(offset + NSLOTS * SLOT)
    s = xferd.Stream.listen(ctx, region, NSLOTS, SLOT, offset)
    assert (s.nslots, s.slot_size) == (NSLOTS, SLOT)
    token = s.token()
    assert 40 < len(token) <= xferd.STREAM_TOKEN_MAX
    ctx.publish(name, token)
    return region, s


def test_stream_every_byte(daemon, ctx):
    name = f"py-stream-{os.getpid()}"
    region, s = consumer(ctx, name, offset=4096)
    p = producer(daemon, name, COUNT)
    try:
        s.accept(timeout=30)
        # The producer, as xferd names it: another client of this node.
        me = ctx.identity
        assert isinstance(s.peer, xferd.Sender)
        assert s.peer.node == me.node and s.peer.client != me.client
        assert s.peer.uid == os.geteuid() and not s.peer.remote
        view = region.numpy()
        held = []
        for i in range(COUNT):
            slot, off, n = s.recv(timeout=30)
            assert slot == i % NSLOTS and off == 4096 + slot * SLOT
            assert n == (i * 7919) % (SLOT + 1)
            want = np.random.default_rng(i).integers(0, 256, n, dtype=np.uint8)
            assert np.array_equal(view[off:off + n], want), f"message {i}"
            held.append(slot)
            if len(held) == NSLOTS or i % 2:
                for h in reversed(held):   # newest first
                    s.release(h)
                held = []
        for h in held:
            s.release(h)
        assert s.recv(timeout=30) is None      # the producer closed
        assert p.wait(30) == 0
        assert s.dropped == 0
    finally:
        p.kill()
        p.wait()
        s.close()
    assert s.closed
    with pytest.raises(ValueError):
        s.recv()


def test_stream_flow_control_and_tokens(daemon, ctx, ctx2):
    region, s = consumer(ctx, f"py-flow-{os.getpid()}")
    # A producer in this process, on a context of its own.
    with pytest.raises(xferd.XferError) as e:
        xferd.Stream.connect(ctx2, b"not a stream token", timeout=0)
    assert e.value.errno == errno.EINVAL
    bad = bytearray(s.token())
    bad[4] ^= 1
    with pytest.raises(xferd.XferError) as e:
        xferd.Stream.connect(ctx2, bytes(bad), timeout=0)
    assert e.value.errno == errno.EPROTONOSUPPORT
    with pytest.raises(xferd.XferError) as e:
        s.accept(timeout=0)
    assert e.value.errno == errno.EAGAIN
    # connect waits for accept: accept in the same thread is impossible,
    # so the HELLO waits in the consumer's CQ while connect times out...
    with pytest.raises(xferd.XferError) as e:
        xferd.Stream.connect(ctx2, s.token(), timeout=0.1)
    assert e.value.errno == errno.ETIME
    s.close()


def test_stream_producer_killed(daemon, ctx):
    name = f"py-kill-{os.getpid()}"
    region, s = consumer(ctx, name)
    p = producer(daemon, name, COUNT, stall=2)
    try:
        s.accept(timeout=30)
        assert p.stdout.readline().strip() == "stalled"
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        for i in range(2):       # what landed before
            slot, off, n = s.recv(timeout=30)
            s.release(slot)
        with pytest.raises(xferd.XferError) as e:
            s.recv(timeout=60)
        assert e.value.errno == errno.ECONNRESET
    finally:
        p.kill()
        p.wait()
        s.close()


def test_notification_sender(ctx, ctx2):
    """Every notification names its sender as xferd saw it, whatever
    its value claims; the tuple keeps its four items."""
    region = ctx.alloc_host(4096)
    remote = ctx2.import_token(region.export())
    ctx2.notify(remote, ctx.identity.client).wait(10)
    (n,) = ctx.get_notifications(timeout=10)
    assert len(n) == 4 and n.value == ctx.identity.client
    assert n.sender == ctx2.identity
    assert n.sender.client != ctx.identity.client
    assert n.sender.node == ctx.identity.node and len(n.sender.node) == 16
    assert n.sender.uid == os.geteuid() and n.sender.remote is False
