#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# pytest_suite.sh - the xferd Python package's tests (run by tests/run-tests.sh):
# the pytest suite (tests/python/test_*.py, each starting a private
# xferd) with Debian's python3, against the extension `make python`
# built into $BUILD/python/lib.  Exit 0 pass, 1 fail, 77 skip.
set -u
ROOT=${XFER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${XFER_BUILD:-$ROOT/build}
PY=/usr/bin/python3
if ! ls "$BUILD"/python/lib/xferd/_core*.so >/dev/null 2>&1; then
	# make python does not build it under SAN=1 (see the Makefile).
	echo "skip: the Python extension is not built in $BUILD (ASan builds leave it out)"
	exit 77
fi
"$PY" -c 'import pytest, numpy' 2>/dev/null ||
	{ echo "skip: python3-pytest or python3-numpy missing (make deps)"; exit 77; }
export PYTHONPATH=$BUILD/python/lib XFER_BUILD="$BUILD"
export XFERD_BIN=${XFERD_BIN:-$BUILD/xferd}
# The shared test xferd of run-tests.sh is not used: every test's own.
unset XFERD_SOCKET
exec "$PY" -m pytest -q -p no:cacheprovider -o python_files='test_*.py' \
	"$ROOT/tests/python"
