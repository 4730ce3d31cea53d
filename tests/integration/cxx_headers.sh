#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# cxx_headers.sh - C++ programs can include the installed headers.
#
# Compiles cxx_headers.cpp as C11 (gcc) and as C++17 and C++20 (g++,
# -Wall -Wextra -Wpedantic -Werror), links each with libxfer, runs them
# and requires the same output: the ring ABI's layout and the bytes the
# inline helpers write are the same in both languages.  No compiler is a
# failure, not a skip: `make deps` installs g++ (build-essential).
set -u
ROOT=${XFER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${XFER_BUILD:-$ROOT/build}
SRC=$ROOT/tests/integration/cxx_headers.cpp
CXX=${CXX:-g++}
command -v "$CXX" >/dev/null || { echo "FAIL: no $CXX (make deps)"; exit 1; }
command -v gcc >/dev/null || { echo "FAIL: no gcc"; exit 1; }
[ -f "$BUILD/libxfer.so.1" ] || { echo "FAIL: no $BUILD/libxfer.so.1"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# libxfer.so.1 by path: the build has no libxfer.so link.
LINK=("$BUILD/libxfer.so.1" "-Wl,-rpath,$BUILD")
# An ASan build's libxfer needs the sanitizers' runtimes first in the
# program (make asan): the programs here are built with them too.
case "$BUILD" in *build-asan*) LINK+=(-fsanitize=address,undefined) ;; esac

gcc -std=c11 -Wall -Wextra -pedantic -Werror -I"$ROOT/include" -x c "$SRC" -x none \
	"${LINK[@]}" -o "$tmp/c" || { echo "FAIL: as C11"; exit 1; }
"$tmp/c" >"$tmp/c.out" || { echo "FAIL: the C11 build did not run"; exit 1; }
rc=0
for std in c++17 c++20; do
	if ! "$CXX" -std=$std -Wall -Wextra -Wpedantic -Werror \
		-I"$ROOT/include" "$SRC" "${LINK[@]}" -o "$tmp/$std"; then
		echo "FAIL: $CXX -std=$std cannot compile xfer.h + xfer_ring.h"
		rc=1
		continue
	fi
	"$tmp/$std" >"$tmp/$std.out" || { echo "FAIL: the $std build did not run"; rc=1; continue; }
	if ! diff -u "$tmp/c.out" "$tmp/$std.out"; then
		echo "FAIL: C11 (-) and $std (+) see the headers differently"
		rc=1
	fi
done
[ $rc -eq 0 ] && echo "ok: xfer.h and xfer_ring.h in C11, C++17, C++20 ($(wc -l <"$tmp/c.out") lines agree)"
exit $rc
