#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# deb.sh [BUILD] - the Debian packages, built, installed and used.
#
# `make deb` builds xferd, libxfer1, libxfer-dev and python3-xferd with
# dpkg-buildpackage from a copy of the tree (lintian errors fail it);
# this installs them into this machine with apt (which pulls in their
# dependencies) and checks what a Debian user would: the files where
# Debian keeps them, /etc/xferd/xferd.conf a conffile, the xferd group
# made by the sysusers.d file, the socket unit's group; then it starts
# the installed /usr/sbin/xferd (through systemd when systemd is PID 1,
# else directly, as the unit would: no systemd here to ask), and moves
# verified bytes with a program built from libxfer-dev with pkg-config
# alone, through python3-xferd, and asks the installed xferctl.  At the
# end the packages are purged again, unless they were installed before.
#
# Takes minutes (a full package build), so CI runs it as its own step
# after make check (.ci/run), not inside make check.  XFER_DEBS=DIR tests
# the packages already built there instead of building them.  Needs root.
# Exit 0 pass, 1 fail, 77 skip.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
PKGS="xferd libxfer1 libxfer-dev python3-xferd"
TMP=$(mktemp -d /tmp/xferd-deb.XXXXXX)
chmod 0755 "$TMP"
pid='' installed_here=0 via_systemd=0 group_before=0
getent group xferd >/dev/null && group_before=1

skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*"; [ -f "$TMP/xferd.log" ] && tail -n 20 "$TMP/xferd.log"; exit 1; }
cleanup() {
	[ -n "$pid" ] && { kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
	[ $via_systemd -eq 1 ] && systemctl stop xferd.service xferd.socket 2>/dev/null
	if [ $installed_here -eq 1 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $PKGS >"$TMP/purge.log" 2>&1 ||
			{ echo "purging the packages failed:"; cat "$TMP/purge.log"; }
		# A purge keeps system groups (Debian's rule); this machine
		# had none before the test, so it has none after.
		[ $group_before -eq 1 ] || groupdel xferd 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

[ "$(id -u)" -eq 0 ] || skip "needs root to install packages"
command -v dpkg-buildpackage >/dev/null || command -v apt-get >/dev/null ||
	skip "not a Debian system"
for p in $PKGS; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		skip "$p is installed already: this test would replace it"
	fi
done

if [ -n "${XFER_DEBS:-}" ]; then
	DEBS=$XFER_DEBS
else
	echo "== make deb"
	make -C "$ROOT" --no-print-directory BUILD="$BUILD" deb || fail "make deb failed"
	DEBS=$ROOT/$BUILD/deb
	[ "${BUILD#/}" != "$BUILD" ] && DEBS=$BUILD/deb
fi
for p in $PKGS; do
	ls "$DEBS/${p}_"*.deb >/dev/null 2>&1 || fail "no $p package in $DEBS"
done

# --- what each package holds ---------------------------------------------
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
has() { # package path...
	local deb
	deb=$(ls "$DEBS/${1}_"*.deb)
	shift
	dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\.||' >"$TMP/list"
	for f in "$@"; do
		grep -qx "$f" "$TMP/list" || fail "$(basename "$deb") lacks $f"
	done
}
has xferd /usr/sbin/xferd /usr/bin/xferctl /lib/systemd/system/xferd.service \
	/lib/systemd/system/xferd.socket /usr/lib/sysusers.d/xferd.conf \
	/etc/xferd/xferd.conf /usr/share/man/man8/xferd.8.gz \
	/usr/share/man/man5/xferd.conf.5.gz /usr/share/man/man1/xferctl.1.gz \
	/usr/share/doc/xferd/copyright
has libxfer1 "/usr/lib/$arch/libxfer.so.1"
has libxfer-dev /usr/include/xfer.h /usr/include/xfer_ring.h \
	"/usr/lib/$arch/libxfer.so" "/usr/lib/$arch/libxfer.a" \
	"/usr/lib/$arch/pkgconfig/libxfer.pc" /usr/share/man/man3/libxfer.3.gz
has python3-xferd /usr/lib/python3/dist-packages/xferd/__init__.py
dpkg-deb -c "$(ls "$DEBS"/python3-xferd_*.deb)" >"$TMP/list"
grep -q 'dist-packages/xferd/_core.*\.so$' "$TMP/list" || fail "python3-xferd lacks the extension"
dpkg-deb -e "$(ls "$DEBS"/xferd_*.deb)" "$TMP/ctl"
grep -qx /etc/xferd/xferd.conf "$TMP/ctl/conffiles" || fail "/etc/xferd/xferd.conf is not a conffile"
echo "ok: the packages hold what they should"

# --- install ---------------------------------------------------------------
echo "== apt-get install $PKGS"
installed_here=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	"$DEBS"/xferd_*.deb "$DEBS"/libxfer1_*.deb "$DEBS"/libxfer-dev_*.deb \
	"$DEBS"/python3-xferd_*.deb >"$TMP/apt.log" 2>&1 ||
	{ tail -n 30 "$TMP/apt.log"; fail "installing the packages failed"; }
getent group xferd >/dev/null || fail "installing xferd made no group xferd (sysusers.d)"
systemd-analyze verify --man=no /lib/systemd/system/xferd.socket \
	/lib/systemd/system/xferd.service >"$TMP/verify" 2>&1 ||
	{ cat "$TMP/verify"; fail "the installed units do not verify"; }
grep -qx 'SocketGroup=xferd' /lib/systemd/system/xferd.socket || fail "xferd.socket sets no SocketGroup"
echo "ok: installed; group xferd exists; the units verify"

# --- the installed xferd ---------------------------------------------------
if [ "$(ps -p 1 -o comm=)" = systemd ]; then
	SOCK=/run/xferd/xferd.sock
	via_systemd=1
	systemctl start xferd.socket || fail "systemctl start xferd.socket failed"
	echo "xferd: socket-activated by systemd"
else
	# No systemd to run the unit: the installed binary with the installed
	# configuration, as the unit runs it, on a private socket (this
	# machine may run an xferd of its own on the default one).  No
	# listen= here: the installed defaults must open no TCP port.
	SOCK=$TMP/xferd.sock
	/usr/sbin/xferd -c /etc/xferd/xferd.conf -s "$SOCK" \
		>"$TMP/xferd.log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		[ -S "$SOCK" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	[ -S "$SOCK" ] || fail "the installed xferd did not start"
	echo "xferd: /usr/sbin/xferd started directly (systemd is not PID 1)"
fi
mode=$(stat -c '%a %U %G' "$SOCK")
[ "$mode" = "660 root xferd" ] || fail "the socket is '$mode', not '660 root xferd'"

# A program built from libxfer-dev with pkg-config and nothing else.
cp "$ROOT/examples/xferdemo.c" "$TMP/demo.c"
# shellcheck disable=SC2046 # flags are words
cc -std=c11 -D_GNU_SOURCE -Wall -Werror -o "$TMP/demo" "$TMP/demo.c" \
	$(pkg-config --cflags --libs libxfer) || fail "building against libxfer-dev failed"
# /lib is /usr/lib on a merged-/usr system, and ld.so may name either.
ldd "$TMP/demo" | grep -qE "libxfer.so.1 => (/usr)?/lib/$arch/libxfer.so.1" ||
	{ ldd "$TMP/demo"; fail "the program does not load /usr/lib/$arch/libxfer.so.1"; }
"$TMP/demo" --socket "$SOCK" --size 1048576 >"$TMP/demo.log" 2>&1 ||
	{ cat "$TMP/demo.log"; fail "the program failed against the installed xferd"; }
grep -q "both clients done, data verified" "$TMP/demo.log" &&
	grep -q "malloc'd memory via cma" "$TMP/demo.log" ||
	{ cat "$TMP/demo.log"; fail "no verified bytes on memcpy and cma"; }
echo "ok: a pkg-config build moved verified bytes (memcpy and cma)"

# python3-xferd, from outside the source tree.
(cd "$TMP" && XFERD_SOCKET=$SOCK /usr/bin/python3 - <<'EOF') || fail "python3-xferd failed"
import os, xferd
assert xferd.__file__.startswith("/usr/lib/python3/dist-packages/"), xferd.__file__
n = 1 << 16
data = bytes((i * 7 + 3) & 0xff for i in range(n))
with xferd.Context(os.environ["XFERD_SOCKET"]) as ctx:
    src, dst = ctx.alloc_host(n), ctx.alloc_host(n)
    memoryview(src)[:] = data
    req = ctx.write(src, dst)
    assert req.wait() == n and bytes(memoryview(dst)) == data, "memfd bytes differ"
    first = req.path
    heap = bytearray(n)
    req = ctx.read(ctx.register(heap), src)
    assert req.wait() == n and heap == data, "registered bytes differ"
    assert (first, req.path) == ("memcpy", "cma"), (first, req.path)
    print("python3-xferd: %d bytes via %s, %d via %s" % (n, first, n, req.path))
EOF
/usr/bin/xferctl --socket "$SOCK" status >"$TMP/status" || fail "the installed xferctl failed"
grep -q memcpy "$TMP/status" || { cat "$TMP/status"; fail "xferctl status shows no memcpy"; }
echo "ok: python3-xferd moved verified bytes; xferctl answers"

# Safe by default: the installed xferd, with the installed configuration
# (no cluster key, no listen), listens on no TCP port at all.
xpid=$pid
[ $via_systemd -eq 1 ] && xpid=$(systemctl show -p MainPID --value xferd.service)
if [ -n "$xpid" ] && [ "$xpid" != 0 ]; then
	tcp=$(ss -Hltnp 2>/dev/null | grep "pid=$xpid," || true)
	[ -z "$tcp" ] || fail "the installed xferd listens on TCP by default: $tcp"
	echo "ok: the installed xferd listens on no TCP port (no cluster key, no listen)"
fi

if [ -n "$pid" ]; then
	kill -TERM "$pid"
	wait "$pid" || fail "the installed xferd did not stop cleanly"
	pid=''
fi
echo "ok: the Debian packages build, install and run"
