#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench_py.py - the Python package beside C (build/xferbench), one run.

  1. A 1000-block vector (1000 linked 64 B writes, one completion) from
     Python's write_vec, against xferbench rate --batch 1000 --linked
     --size 64 (the same batch from C): blocks per second and the ratio.
  2. One 8 B write round trip (submit -> completion) from Python, against
     xferbench lat --size 8.

Both sides: two client processes through one private xferd, memfd
(alloc_host) memory, xferd's memcpy path.  Prints a table and RES lines.

    /usr/bin/python3 python/bench/bench_py.py [--build build]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np


def start_xferd(build):
    d = tempfile.mkdtemp(prefix="xferd-bench.")
    sock = os.path.join(d, "xferd.sock")
    p = subprocess.Popen([os.path.join(build, "xferd"), "-s", sock, "-o",
                          "listen=off"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(sock):
            return p, sock
        time.sleep(0.02)
    raise SystemExit("xferd did not start")


def c_rate(build, sock):
    out = subprocess.check_output(
        [os.path.join(build, "xferbench"), "--socket", sock, "rate",
         "--size", "64", "--batch", "1000", "--linked", "--inflight", "1000",
         "--time-ms", "1000", "--reps", "3"], text=True)
    m = re.search(r"rate_median ([0-9.e+]+) Mop/s", out)
    return float(m.group(1)) * 1e6, out


def c_lat(build, sock):
    out = subprocess.check_output(
        [os.path.join(build, "xferbench"), "--socket", sock, "lat", "--size",
         "8", "--iters", "50000"], text=True)
    p50 = float(re.search(r"lat_p50 ([0-9.e+]+) us", out).group(1))
    mean = float(re.search(r"lat_mean ([0-9.e+]+) us", out).group(1))
    return p50, mean, out


def py_runs(sock):
    import xferd
    with xferd.Context(sock) as a, xferd.Context(sock) as b:
        src, dst = a.alloc_host(1 << 20), b.alloc_host(1 << 20)
        src.numpy()[:] = np.arange(1 << 20) % 253
        remote = a.import_token(dst.export())
        offs = np.arange(1000, dtype=np.int64) * 64
        # 1. vectors: as xferbench rate, one batch in flight
        for _ in range(200):
            a.write_vec(src, offs, remote, offs, 64).wait()
        rates = []
        for _ in range(3):
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < 1.0:
                a.write_vec(src, offs, remote, offs, 64).wait()
                n += 1
            rates.append(n * 1000 / (time.perf_counter() - t0))
        assert np.array_equal(dst.numpy()[:64000], src.numpy()[:64000])
        # 2. 8 B round trips
        lat = []
        for i in range(55000):
            t0 = time.perf_counter_ns()
            a.write(src, remote, length=8).wait()
            lat.append(time.perf_counter_ns() - t0)
        lat = np.array(lat[5000:]) / 1e3
        return sorted(rates)[1], float(np.median(lat)), float(lat.mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    sys.path.insert(0, os.path.join(build, "python", "lib"))
    daemon, sock = start_xferd(build)
    try:
        c_bps, _ = c_rate(build, sock)
        py_bps, py_p50, py_mean = py_runs(sock)
        c_p50, c_mean, _ = c_lat(build, sock)
    finally:
        daemon.terminate()
        daemon.wait()
    print("1000-block linked vector of 64 B writes, one in flight (M blocks/s)")
    print(f"  C xferbench {c_bps / 1e6:8.3f}   Python write_vec {py_bps / 1e6:8.3f}"
          f"   Python/C {py_bps / c_bps:5.2f}")
    print("8 B write round trip, submit -> completion (us)")
    print(f"  C p50 {c_p50:7.2f} mean {c_mean:7.2f}   Python p50 {py_p50:7.2f} "
          f"mean {py_mean:7.2f}   Python/C p50 {py_p50 / c_p50:5.2f}")
    print(f"RES bench_py vec1000 c rate {c_bps / 1e6:.4g} Mblock/s")
    print(f"RES bench_py vec1000 python rate {py_bps / 1e6:.4g} Mblock/s")
    print(f"RES bench_py vec1000 ratio python_over_c {py_bps / c_bps:.3g} x")
    print(f"RES bench_py lat8 c p50 {c_p50:.4g} us")
    print(f"RES bench_py lat8 python p50 {py_p50:.4g} us")


if __name__ == "__main__":
    main()
