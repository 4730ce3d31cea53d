# SPDX-License-Identifier: Apache-2.0
"""agent.py - NIXL's Python API (nixl_agent) with backend XFERD, two
processes shaped like vLLM's NixlConnector: each registers its KV blocks,
they exchange agent metadata and block descriptors, the initiator WRITEs
some blocks into the target with a notification and READs others back
through prepped descriptor lists, and both check every byte.

Run by tests/integration/nixl_agent.sh (NIXL's install on PYTHONPATH,
NIXL_PLUGIN_DIR at the built plugin, XFERD_SOCKET at an xferd).  Exit 0
pass, 1 fail."""
import multiprocessing as mp
import sys
import time

BLOCK = 4096
NBLOCKS = 8
TIMEOUT = 30.0


def wait_done(agent, handle):
    deadline = time.monotonic() + TIMEOUT
    while True:
        state = agent.check_xfer_state(handle)
        if state == "DONE":
            return
        if state == "ERR":
            raise RuntimeError("transfer failed")
        if time.monotonic() > deadline:
            raise RuntimeError("transfer timed out")
        time.sleep(0.001)


def make_agent(name):
    import numpy as np
    from nixl_cu12._api import nixl_agent, nixl_agent_config

    conf = nixl_agent_config(enable_prog_thread=False, backends=["XFERD"])
    agent = nixl_agent(name, conf)
    if "XFERD" not in agent.backends:
        raise RuntimeError("NIXL did not load XFERD: %s" % agent.plugin_list)
    kv = np.zeros((NBLOCKS, BLOCK), dtype=np.uint8)
    agent.register_memory([(kv.ctypes.data, kv.nbytes, 0, "")], "DRAM")
    return agent, kv


def block_addrs(kv):
    base = kv.ctypes.data
    return [(base + i * BLOCK, BLOCK, 0) for i in range(NBLOCKS)]


# What vLLM sends: a request id of 40-60 bytes, past the 7 bytes an
# xferd notification value held.
REQ_ID = b"cmpl-5b1e7c1d2f0a4b8c9d3e6f7a8b9c0d1e-0:kv-send-w1"


def target(conn):
    import numpy as np
    agent, kv = make_agent("target")
    for i in range(NBLOCKS):
        kv[i, :] = (np.arange(BLOCK) + 7 * i) % 251
    conn.send((agent.get_agent_metadata(),
               agent.get_serialized_descs(agent.get_xfer_descs(
                   block_addrs(kv), "DRAM")), kv.ctypes.data))
    agent.add_remote_agent(conn.recv())
    # The initiator writes its blocks 0, 2, 3 into our blocks 5, 6, 7.
    deadline = time.monotonic() + TIMEOUT
    got = {}
    while REQ_ID not in got.get("initiator", []):
        for who, msgs in agent.get_new_notifs().items():
            got.setdefault(who, []).extend(msgs)
        if time.monotonic() > deadline:
            raise RuntimeError("no notification: %r" % got)
        time.sleep(0.001)
    for src, dst in ((0, 5), (2, 6), (3, 7)):
        want = (np.arange(BLOCK) + 100 + src) % 256
        if not (kv[dst] == want).all():
            raise RuntimeError("block %d holds the wrong bytes" % dst)
    conn.send("checked")
    conn.recv()  # the initiator has read what it reads
    print("target: notification %r from initiator, 3 blocks checked" % got["initiator"])


def initiator(conn):
    import numpy as np
    agent, kv = make_agent("initiator")
    for i in range(NBLOCKS):
        kv[i, :] = (np.arange(BLOCK) + 100 + i) % 256
    meta, descs, tbase = conn.recv()
    conn.send(agent.get_agent_metadata())
    remote = agent.add_remote_agent(meta)
    assert remote in ("target", b"target"), remote
    local_side = agent.prep_xfer_dlist("NIXL_INIT_AGENT", block_addrs(kv), "DRAM")
    remote_side = agent.prep_xfer_dlist(remote, agent.deserialize_descs(descs))

    h = agent.make_prepped_xfer("WRITE", local_side, [0, 2, 3], remote_side,
                                [5, 6, 7], REQ_ID)
    agent.transfer(h)
    wait_done(agent, h)
    agent.release_xfer_handle(h)
    if conn.recv() != "checked":
        raise RuntimeError("target did not check")

    # READ target blocks 1 and 4 into ours 6 and 7, twice (the second
    # time over the backend's cached lists).
    for _ in range(2):
        kv[6:8, :] = 0
        h = agent.make_prepped_xfer("READ", local_side, [6, 7], remote_side, [1, 4])
        agent.transfer(h)
        wait_done(agent, h)
        agent.release_xfer_handle(h)
        for dst, src in ((6, 1), (7, 4)):
            want = (np.arange(BLOCK) + 7 * src) % 251
            if not (kv[dst] == want).all():
                raise RuntimeError("read block %d: wrong bytes" % src)
    # One transfer without prepped lists (initialize_xfer).
    kv[0, :] = 0
    h = agent.initialize_xfer("READ", agent.get_xfer_descs([block_addrs(kv)[0]], "DRAM"),
                              agent.get_xfer_descs([(tbase + 2 * BLOCK, BLOCK, 0)], "DRAM"),
                              remote)
    agent.transfer(h)
    wait_done(agent, h)
    agent.release_xfer_handle(h)
    if not (kv[0] == (np.arange(BLOCK) + 14) % 251).all():
        raise RuntimeError("initialize_xfer READ: wrong bytes")
    conn.send("done")
    agent.remove_remote_agent(remote)
    print("initiator: WRITE of 3 blocks, READ of 2 blocks twice, one READ unprepped: checked")


def main():
    ctx = mp.get_context("fork")
    a, b = ctx.Pipe()
    procs = [ctx.Process(target=target, args=(a,)),
             ctx.Process(target=initiator, args=(b,))]
    for p in procs:
        p.start()
    rc = 0
    for p in procs:
        p.join(TIMEOUT * 3)
        if p.exitcode != 0:
            print("%s exited %s" % (p.name, p.exitcode))
            rc = 1
    for p in procs:
        if p.is_alive():
            p.kill()
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
