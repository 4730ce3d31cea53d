#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# install.sh [BUILD] - what `make install` puts where, used from there.
#
# Installs the built tree (no rebuild; NO_DEPS=1, and an apt-get that
# fails on PATH to prove it is not called) into a scratch DESTDIR
# twice, for PREFIX=/usr and PREFIX=/opt/xferd, and checks for each:
# libxfer.pc names that PREFIX (not the build's default /usr/local); the
# files a user looks for are there; a program compiled with nothing but
# `pkg-config --cflags --libs libxfer` against the installed header and
# shared library (examples/xferdemo.c) moves verified bytes through the
# installed xferd, and the installed xferctl sees it.
#
# Run by CI (.ci/run) after make check: it calls make, so it stays out of
# make check itself.  Exit 0 pass, 1 fail.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
TMP=$(mktemp -d /tmp/xferd-install.XXXXXX)
pid=''

fail() { echo "FAIL: $*"; exit 1; }
cleanup() {
	[ -n "$pid" ] && { kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
	rm -rf "$TMP"
}
trap cleanup EXIT

# NO_DEPS=1 must keep make away from apt-get even where packages are
# missing: first on PATH, a dpkg-query that finds no package and an
# apt-get that fails and says so.  (Without NO_DEPS=1 this make fails.)
mkdir -p "$TMP/bin"
printf '#!/bin/sh\nexit 1\n' >"$TMP/bin/dpkg-query"
printf '#!/bin/sh\necho "apt-get called despite NO_DEPS=1: $*" >&2\nexit 1\n' >"$TMP/bin/apt-get"
chmod +x "$TMP/bin/dpkg-query" "$TMP/bin/apt-get"

check_prefix() { # prefix
	local prefix=$1 dest=$TMP/root${1//\//_}
	local lib=$dest$prefix/lib
	echo "== make install PREFIX=$prefix DESTDIR=$dest"
	PATH=$TMP/bin:$PATH make -C "$ROOT" -s --no-print-directory BUILD="$BUILD" NO_DEPS=1 \
		PREFIX="$prefix" DESTDIR="$dest" install >"$TMP/install.log" 2>&1 ||
		{ cat "$TMP/install.log"; fail "make install PREFIX=$prefix failed"; }

	for f in sbin/xferd bin/xferctl include/xfer.h include/xfer_ring.h \
		lib/libxfer.so.1 lib/libxfer.so lib/libxfer.a \
		lib/pkgconfig/libxfer.pc lib/systemd/system/xferd.service \
		lib/systemd/system/xferd.socket lib/sysusers.d/xferd.conf \
		share/man/man1/xferctl.1 share/man/man3/libxfer.3 \
		share/man/man5/xferd.conf.5 share/man/man8/xferd.8; do
		[ -e "$dest$prefix/$f" ] || fail "$prefix/$f not installed"
	done
	[ -f "$dest/etc/xferd/xferd.conf" ] || fail "/etc/xferd/xferd.conf not installed"
	# Debian's python3 finds /usr's package in its own dist-packages.
	if [ "$prefix" = /usr ]; then
		[ -d "$dest/usr/lib/python3/dist-packages/xferd" ] ||
			fail "the Python package is not in /usr/lib/python3/dist-packages"
	fi
	grep -q "^ExecStart=$prefix/sbin/xferd\$" "$dest$prefix/lib/systemd/system/xferd.service" ||
		fail "xferd.service does not start $prefix/sbin/xferd"

	local pc=$lib/pkgconfig/libxfer.pc
	grep -qx "prefix=$prefix" "$pc" || { cat "$pc"; fail "libxfer.pc does not say prefix=$prefix"; }
	grep -qx "libdir=$prefix/lib" "$pc" || { cat "$pc"; fail "libxfer.pc's libdir is not $prefix/lib"; }
	grep -qx "includedir=$prefix/include" "$pc" ||
		{ cat "$pc"; fail "libxfer.pc's includedir is not $prefix/include"; }

	# pkg-config as a user of the installed tree would run it; the
	# sysroot maps the .pc's paths into DESTDIR.
	local flags
	flags=$(PKG_CONFIG_LIBDIR=$lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$dest \
		pkg-config --cflags --libs libxfer) || fail "pkg-config libxfer failed"
	echo "pkg-config: $flags"
	[[ $flags == *"-I$dest$prefix/include"* && $flags == *"-L$lib"* ]] ||
		fail "pkg-config flags do not point into the installed tree"
	# Compiled away from the source tree: only the installed header.
	cp "$ROOT/examples/xferdemo.c" "$TMP/demo.c"
	# shellcheck disable=SC2086 # flags are words
	cc -std=c11 -D_GNU_SOURCE -Wall -Werror -o "$TMP/demo" "$TMP/demo.c" $flags ||
		fail "a program does not build against the installed libxfer"
	LD_LIBRARY_PATH=$lib ldd "$TMP/demo" | grep -q "libxfer.so.1 => $lib/libxfer.so.1" ||
		fail "the program does not load the installed libxfer.so.1"

	local sock=$TMP/xferd.sock
	"$dest$prefix/sbin/xferd" -s "$sock" -o listen=off >"$TMP/xferd.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	[ -S "$sock" ] || { cat "$TMP/xferd.log"; fail "the installed xferd did not start"; }
	LD_LIBRARY_PATH=$lib "$TMP/demo" --socket "$sock" --size 1048576 >"$TMP/demo.log" 2>&1 ||
		{ cat "$TMP/demo.log"; fail "the program failed against the installed xferd"; }
	grep -q "both clients done, data verified" "$TMP/demo.log" ||
		{ cat "$TMP/demo.log"; fail "the program did not verify its bytes"; }
	"$dest$prefix/bin/xferctl" --socket "$sock" status >"$TMP/status" ||
		fail "the installed xferctl cannot ask the installed xferd"
	grep -q "memcpy" "$TMP/status" || { cat "$TMP/status"; fail "xferctl status shows no memcpy bytes"; }
	kill -TERM "$pid"
	wait "$pid" || fail "the installed xferd did not stop cleanly"
	pid=''
	echo "ok: PREFIX=$prefix: libxfer.pc right, a pkg-config build moved verified bytes"
}

check_prefix /usr
check_prefix /opt/xferd
