#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""etcdbench.py - how far one etcd carries xferd's metadata (metadata = etcd).

Registers N simulated nodes in a real etcd as xferd does (one lease each,
kept alive every TTL/3, a node record under it) and M names per node (name
records under the node's lease, written in transactions of 100), then looks
names of random nodes up through a real xferd (libxfer's xfer_lookup via the
Python package: client -> xferd -> one kv/range at etcd -> back), and reports
the lookup latency (p50, p99), the lookup rate with P clients in parallel,
and etcd's CPU: at rest (N leases kept alive) and per lookup.

Started by bench/bench-etcd.sh, which starts etcd and xferd; not a test.

    etcdbench.py --etcd http://127.0.0.1:23790 --etcd-pid PID \
        --socket /tmp/x/xferd.sock --nodes 100 --names 100
"""
import argparse
import base64
import http.client
import json
import multiprocessing
import os
import random
import sys
import threading
import time
import urllib.parse

import xferd

PREFIX = "/bench/"


def b64(s):
    if isinstance(s, str):
        s = s.encode()
    return base64.b64encode(s).decode()


class Gateway:
    """etcd's v3 JSON gateway over one kept-open HTTP connection."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)

    def call(self, method, body):
        self.conn.request("POST", "/v3/" + method, json.dumps(body),
                          {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{method}: HTTP {r.status}: {data[:200]!r}")
        return json.loads(data)


def cpu_seconds(pid):
    """utime + stime of a process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def register(gw, nodes, names, ttl, token, instance):
    """N leases, N node records, N*M name records (txns of 100 puts)."""
    leases = []
    for n in range(nodes):
        node = f"sim-{n:05d}"
        lease = gw.call("lease/grant", {"TTL": ttl})["ID"]
        leases.append(lease)
        rec = {"v": 1, "node": node, "instance": instance, "port": 7474,
               "addrs": [{"ip": f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}",
                          "prefix": 8, "port": 7474}], "rails": []}
        gw.call("kv/put", {"key": b64(PREFIX + "nodes/" + node),
                           "value": b64(json.dumps(rec)), "lease": lease})
        ops = []
        for m in range(names):
            val = {"v": 1, "node": node, "instance": instance,
                   "token": base64.b64encode(token).decode(),
                   "shared": True}
            ops.append({"request_put": {
                "key": b64(f"{PREFIX}names/{node}-kv-{m}"),
                "value": b64(json.dumps(val)), "lease": lease}})
            if len(ops) == 100 or m == names - 1:
                gw.call("kv/txn", {"success": ops})
                ops = []
    return leases


def keepalive(url, leases, ttl, stop):
    """Every lease once per ttl/3, spread evenly over that time."""
    gw = Gateway(url)
    period = ttl / 3
    while not stop.is_set():
        start = time.monotonic()
        for i, lease in enumerate(leases):
            if stop.is_set():
                return
            due = start + period * i / len(leases)
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            gw.call("lease/keepalive", {"ID": lease})
        rest = start + period - time.monotonic()
        if rest > 0:
            stop.wait(rest)


def lookups(sock, names, count, seed):
    """count lookups of random names through xferd; latencies in us."""
    rnd = random.Random(seed)
    lat = []
    with xferd.Context(sock) as ctx:
        for _ in range(count):
            name = rnd.choice(names)
            t = time.perf_counter_ns()
            ctx.lookup(name)
            lat.append((time.perf_counter_ns() - t) / 1000)
    return lat


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--etcd", required=True)
    ap.add_argument("--etcd-pid", type=int, required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--names", type=int, default=100)
    ap.add_argument("--ttl", type=int, default=10)
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rest", type=float, default=10.0)
    a = ap.parse_args()

    # One real token of the xferd: its instance is what the records say,
    # so that xferd accepts them (record instance = token instance).
    with xferd.Context(a.socket) as ctx:
        region = ctx.alloc_host(1 << 16)
        token = region.export()
        ctx.publish("bench-local", token)
        instance = None
        gw = Gateway(a.etcd)
        # xferd's own record names its instance.
        for kv in gw.call("kv/range", {"key": b64(PREFIX + "nodes/"),
                                       "range_end": b64(PREFIX + "nodes0")}
                          ).get("kvs", []):
            instance = json.loads(base64.b64decode(kv["value"]))["instance"]
        if not instance:
            sys.exit("xferd has no node record in etcd under " + PREFIX)

        t0 = time.monotonic()
        leases = register(gw, a.nodes, a.names, a.ttl, token, instance)
        reg_s = time.monotonic() - t0
        stop = threading.Event()
        ka = threading.Thread(target=keepalive,
                              args=(a.etcd, leases, a.ttl, stop))
        ka.start()
        time.sleep(2)  # xferd's watch takes the node records in

        c0 = cpu_seconds(a.etcd_pid)
        time.sleep(a.rest)
        rest_cpu = (cpu_seconds(a.etcd_pid) - c0) / a.rest

        names = [f"sim-{n:05d}-kv-{m}" for n in range(a.nodes)
                 for m in range(a.names)]
        # Latency: one client, one lookup at a time.
        lat = lookups(a.socket, names, a.lookups, 1)
        # Rate: P clients at once; etcd's CPU over that time.
        per = a.lookups
        c0, t0 = cpu_seconds(a.etcd_pid), time.monotonic()
        with multiprocessing.Pool(a.clients) as pool:
            res = pool.starmap(lookups, [(a.socket, names, per, s + 2)
                                         for s in range(a.clients)])
        wall = time.monotonic() - t0
        cpu = cpu_seconds(a.etcd_pid) - c0
        stop.set()
        ka.join()
        total = per * a.clients
        par = [x for r in res for x in r]
        out = {
            "nodes": a.nodes, "names_per_node": a.names,
            "keys": a.nodes * (a.names + 1), "ttl_s": a.ttl,
            "register_s": round(reg_s, 1),
            "etcd_cpu_at_rest_pct": round(100 * rest_cpu, 1),
            "keepalives_per_s": round(a.nodes / (a.ttl / 3), 1),
            "lookup_p50_us": round(pct(lat, 50)),
            "lookup_p99_us": round(pct(lat, 99)),
            "clients": a.clients,
            "lookups_per_s": round(total / wall),
            "parallel_p50_us": round(pct(par, 50)),
            "parallel_p99_us": round(pct(par, 99)),
            "etcd_cpu_pct_during": round(100 * cpu / wall, 1),
            "etcd_cpu_us_per_lookup": round(1e6 * (cpu - rest_cpu * wall) /
                                            total, 1),
        }
        print(json.dumps(out))


if __name__ == "__main__":
    main()
