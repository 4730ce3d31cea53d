# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the xferd Python tests: a private xferd per session
(build/xferd -s SOCK -o listen=off, as the C integration tests start
theirs), contexts on it, and byte patterns to check what arrived."""
import os
import socket
import subprocess
import tempfile
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("XFER_BUILD", os.path.join(ROOT, "build"))
XFERD = os.environ.get("XFERD_BIN", os.path.join(BUILD, "xferd"))


class Daemon:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="xferd-py.")
        self.socket = os.path.join(self.dir, "xferd.sock")
        self.log = open(os.path.join(self.dir, "xferd.log"), "w+")
        self.proc = subprocess.Popen(
            [XFERD, "-s", self.socket, "-o", "listen=off"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(self.socket)
                s.close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("xferd did not start: " + self.read_log())
                time.sleep(0.02)

    def read_log(self):
        self.log.seek(0)
        return self.log.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        rc = self.proc.wait(20)
        self.log.close()
        return rc


@pytest.fixture(scope="session")
def daemon():
    d = Daemon()
    yield d
    assert d.alive(), "xferd died during the tests:\n" + d.read_log()[-3000:]
    log = d.read_log()
    assert d.stop() == 0
    assert "AddressSanitizer" not in log and "runtime error:" not in log


@pytest.fixture
def private_daemon():
    """A daemon of the test's own (to kill it)."""
    d = Daemon()
    yield d
    if d.alive():
        d.proc.kill()
        d.proc.wait()


@pytest.fixture
def ctx(daemon):
    import xferd
    with xferd.Context(daemon.socket) as c:
        yield c


@pytest.fixture
def ctx2(daemon):
    import xferd
    with xferd.Context(daemon.socket) as c:
        yield c


def pattern(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
