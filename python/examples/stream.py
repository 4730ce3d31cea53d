#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""stream.py - a sender streams messages into a receiver's ring through xferd.

The receiver owns a ring of SLOTS slots of SIZE bytes (alloc_host) and
publishes a token for it.  The sender writes message i into slot
i % SLOTS with a notification carrying i + 1 (the tail): xferd delivers it
after the bytes landed.  The receiver checks each message's bytes and
returns credit by writing its head (messages consumed) into the sender's
8-byte head word, through xferd too; the sender never has more than SLOTS
messages unconsumed.  At the end the sender reads the ring back and checks
it, and both print their bandwidth.

    stream.py                       # both roles, two processes
    stream.py --role receiver --name rx &  stream.py --role sender --name rx
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

import xferd


_BASE = {}


def pattern(i, size):
    """Message i's bytes, different for every message and cheap to make
    (so that the stream, not numpy, is measured): its number, then a
    window into random bytes that moves with it."""
    base = _BASE.get(size)
    if base is None:
        base = _BASE[size] = np.random.default_rng(7).integers(
            0, 256, size + 256, dtype=np.uint8)
    out = np.empty(size, np.uint8)
    k = i % 251
    out[8:] = base[k:k + size - 8]
    out[:8] = np.frombuffer(int(i).to_bytes(8, "little"), np.uint8)
    return out


def lookup(ctx, name, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ctx.import_token(ctx.lookup(name))
        except xferd.XferError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def receiver(ctx, a):
    ring = ctx.alloc_host(a.slots * a.size)
    view = ring.numpy().reshape(a.slots, a.size)
    # Shared: the sender may be another user's process or on another node.
    ctx.publish(a.name, ring.export(), shared=True)
    head_word = lookup(ctx, a.name + "-head", a.timeout)
    credit = ctx.alloc_host(8)
    credit_val = credit.numpy(np.uint64)
    head, t0, pending = 0, None, None
    for note in ctx.notifications(timeout=a.timeout):
        tail = note.value                 # messages the sender has landed
        t0 = t0 or time.perf_counter()
        while head < tail:
            if not np.array_equal(view[head % a.slots], pattern(head, a.size)):
                print(f"receiver: message {head} differs", file=sys.stderr)
                return 1
            head += 1
        # Return credit (one write in flight at a time, at most).
        if pending is None or pending.done():
            if pending is not None:
                pending.wait()
            credit_val[0] = head
            pending = ctx.write(credit, head_word, notify=head)
        if head == a.count:
            break
    if pending is not None:
        pending.wait(a.timeout)
    credit_val[0] = head
    ctx.write(credit, head_word, notify=head).wait(a.timeout)
    dt = time.perf_counter() - t0
    print(f"receiver: {head} messages of {a.size} B checked, "
          f"{head * a.size / dt / 1e9:.2f} GB/s", flush=True)
    # Stay until the sender has read the ring back.
    for note in ctx.notifications(timeout=a.timeout):
        if note.value == 1 << 62:
            break
    return 0 if head == a.count else 1


def sender(ctx, a):
    head_region = ctx.alloc_host(8)
    head = head_region.numpy(np.uint64)
    ctx.publish(a.name + "-head", head_region.export(), shared=True)
    ring = lookup(ctx, a.name, a.timeout)
    stage = ctx.alloc_host(a.slots * a.size)
    sview = stage.numpy().reshape(a.slots, a.size)
    inflight = []
    t0 = time.perf_counter()
    for i in range(a.count):
        # Credit: the slot is free once the receiver consumed message
        # i - slots (its head word, written by xferd, says so).
        while i - int(head[0]) >= a.slots:
            ctx.get_notifications(timeout=0.001)   # head updates notify us
        while inflight and inflight[0].done():
            inflight.pop(0).wait()
        slot = i % a.slots
        sview[slot] = pattern(i, a.size)
        inflight.append(ctx.write(stage, ring, local_off=slot * a.size,
                                  remote_off=slot * a.size, length=a.size,
                                  notify=i + 1))
        if len(inflight) >= a.slots:
            inflight.pop(0).wait(a.timeout)
    for r in inflight:
        r.wait(a.timeout)
    dt = time.perf_counter() - t0
    while int(head[0]) < a.count:
        ctx.get_notifications(timeout=0.01)
        if time.perf_counter() - t0 > a.timeout:
            print("sender: the receiver never consumed everything", file=sys.stderr)
            return 1
    # Read the ring back: the last `slots` messages must be there.
    back = ctx.alloc_host(a.slots * a.size)
    ctx.read(back, ring).wait(a.timeout)
    bview = back.numpy().reshape(a.slots, a.size)
    for i in range(max(0, a.count - a.slots), a.count):
        if not np.array_equal(bview[i % a.slots], pattern(i, a.size)):
            print(f"sender: read back message {i} differs", file=sys.stderr)
            return 1
    ctx.notify(ring, 1 << 62).wait(a.timeout)   # the receiver may go
    print(f"sender: {a.count} messages of {a.size} B sent, "
          f"{a.count * a.size / dt / 1e9:.2f} GB/s, read back: ok", flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--role", choices=("both", "sender", "receiver"), default="both")
    p.add_argument("--socket", help="xferd socket (default $XFERD_SOCKET)")
    p.add_argument("--name", default=f"stream-{os.getpid()}")
    p.add_argument("--slots", type=int, default=64)
    p.add_argument("--size", type=int, default=64 << 10)
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--timeout", type=float, default=30)
    a = p.parse_args()
    if a.role == "both":
        base = [sys.executable, os.path.abspath(__file__), "--name", a.name,
                "--slots", str(a.slots), "--size", str(a.size),
                "--count", str(a.count), "--timeout", str(a.timeout)]
        if a.socket:
            base += ["--socket", a.socket]
        rx = subprocess.Popen(base + ["--role", "receiver"])
        try:
            rc = subprocess.call(base + ["--role", "sender"], timeout=a.timeout * 2)
            return rc or rx.wait(a.timeout)
        finally:
            if rx.poll() is None:
                rx.kill()
    with xferd.Context(a.socket) as ctx:
        return sender(ctx, a) if a.role == "sender" else receiver(ctx, a)


if __name__ == "__main__":
    sys.exit(main())
