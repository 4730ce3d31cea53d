#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# abi.sh - libxfer exports exactly what xfer.h declares, each at the
# version node libxfer.map puts it in (XFER_1, XFER_1.1, ...).
#
# Four lists must agree: the functions include/xfer.h declares (not the
# static inline ones), the names client/libxfer.map gives, the dynamic
# symbols of the built libxfer.so.1, and debian/libxfer1.symbols (each
# function at its node; a new node or function gets its line there, at
# the package version that first ships it).  A new function in xfer.h
# without its map line, or a helper that leaks, fails here.  The library
# is linked with -z defs, so an undefined symbol fails the build before.
set -u
ROOT=${XFER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
LIB=${XFER_BUILD:-$ROOT/build}/libxfer.so.1
command -v nm >/dev/null || { echo "skip: no nm (binutils)"; exit 77; }
[ -f "$LIB" ] || { echo "FAIL: no $LIB"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

grep -v 'static inline' "$ROOT/include/xfer.h" |
	grep -oE '^[a-z][a-z0-9_ *]*[ *]xfer_[a-z0-9_]+\(' |
	sed -E 's/.*(xfer_[a-z0-9_]+)\($/\1/' | sort -u >"$tmp/header"
# "name@@NODE" for every symbol of every version node of the map.
awk '/^XFER_[0-9.]+ *\{/ { node = $1 }
     node && /^[[:space:]]+xfer_[a-z0-9_]+;/ {
	gsub(/[[:space:];]/, ""); print $0 "@@" node }' \
	"$ROOT/client/libxfer.map" | sort -u >"$tmp/map_versioned"
sed 's/@@.*//' "$tmp/map_versioned" | sort -u >"$tmp/map"
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TWDBR]$/ { print $3 }' \
	>"$tmp/nm"
grep -vE '@@XFER_[0-9.]+$' "$tmp/nm" | grep -vE '^XFER_[0-9.]+$' \
	>"$tmp/other"
grep -E '^xfer_[a-z0-9_]+@@XFER_[0-9.]+$' "$tmp/nm" | sort -u \
	>"$tmp/so_versioned"
sed 's/@@.*//' "$tmp/so_versioned" | sort -u >"$tmp/so"

rc=0
if ! diff -u "$tmp/header" "$tmp/map" >"$tmp/d1"; then
	echo "FAIL: xfer.h (-) and libxfer.map (+) differ:"; cat "$tmp/d1"; rc=1
fi
if ! diff -u "$tmp/map" "$tmp/so" >"$tmp/d2"; then
	echo "FAIL: libxfer.map (-) and libxfer.so.1 (+) differ:"; cat "$tmp/d2"; rc=1
fi
if ! diff -u "$tmp/map_versioned" "$tmp/so_versioned" >"$tmp/d3"; then
	echo "FAIL: version nodes of libxfer.map (-) and libxfer.so.1 (+) differ:"
	cat "$tmp/d3"; rc=1
fi
# debian/libxfer1.symbols: " name@NODE version" lines, the nodes too.
sym=$ROOT/debian/libxfer1.symbols
if [ -f "$sym" ]; then
	awk '/^ xfer_/ { split($1, a, "@"); print a[1] "@@" a[2] }' "$sym" |
		sort -u >"$tmp/deb_versioned"
	if ! diff -u "$tmp/map_versioned" "$tmp/deb_versioned" >"$tmp/d4"; then
		echo "FAIL: libxfer.map (-) and debian/libxfer1.symbols (+) differ:"
		cat "$tmp/d4"; rc=1
	fi
fi
if [ -s "$tmp/other" ]; then
	echo "FAIL: exported outside a version node:"; cat "$tmp/other"; rc=1
fi
[ $rc -eq 0 ] && echo "ok: $(wc -l <"$tmp/so") symbols, each in its version node, as xfer.h and libxfer.map say"
exit $rc
