#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# systemd.sh - xferd under systemd's protocols, without needing systemd
# as PID 1: sd_notify messages (READY only once the socket accepts,
# STATUS, WATCHDOG at half the interval, RELOADING/READY on SIGHUP,
# STOPPING), socket activation (systemd-socket-activate passes the
# listening socket), and the unit files pass systemd-analyze verify.
set -u
: "${XFERD_BIN:?run through make check}" "${XFER_BUILD:?}" "${XFER_ROOT:?}"
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: /usr/bin/python3 missing"; exit 77; }
TMP=$(mktemp -d /tmp/xferd-systemd.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- notify log"; cat "$TMP/notify.log" 2>/dev/null
	echo "--- xferd log"; cat "$TMP/xferd.log" 2>/dev/null; exit 1; }

# wait_for CMD... : poll up to 10 s
wait_for() {
	for _ in $(seq 200); do "$@" && return 0; sleep 0.05; done
	return 1
}
# at_least N PATTERN: the notify log has N lines matching PATTERN
at_least() { [ "$(grep -c "$2" "$TMP/notify.log")" -ge "$1" ]; }

# --- 1. sd_notify and watchdog -------------------------------------------
# A datagram listener standing in for systemd's notify socket; it writes
# one line per message, and for READY=1 whether the socket accepted then.
cat >"$TMP/listen.py" <<'PY'
import os, socket, sys
path, log, xsock = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(log, "a", buffering=1) as f:
    while True:
        msg = s.recv(4096).decode()
        for line in msg.split("\n"):
            if line == "READY=1":
                c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                try:
                    c.connect(xsock); line += " socket-accepting"
                except OSError as e:
                    line += " socket-NOT-accepting"
                c.close()
            f.write(line + "\n")
PY
"$PY" "$TMP/listen.py" "$TMP/notify.sock" "$TMP/notify.log" "$TMP/x.sock" &
pids+=($!)
wait_for test -S "$TMP/notify.sock" || fail "notify listener did not start"

# WATCHDOG_PID must be xferd's own pid: export it from the shell that
# then execs xferd.
NOTIFY_SOCKET="$TMP/notify.sock" WATCHDOG_USEC=400000 \
	sh -c 'WATCHDOG_PID=$$ exec "$0" -s "$1" -o listen=off' "$XFERD_BIN" "$TMP/x.sock" \
	>"$TMP/xferd.log" 2>&1 &
xpid=$!
pids+=($xpid)
wait_for grep -q '^READY=1' "$TMP/notify.log" || fail "no READY=1"
grep -q '^READY=1 socket-accepting' "$TMP/notify.log" ||
	fail "READY=1 came before the socket accepted connections"
wait_for grep -q '^STATUS=0 clients, 0 regions' "$TMP/notify.log" ||
	fail "no STATUS line"
wait_for at_least 3 '^WATCHDOG=1' ||
	fail "fewer than 3 WATCHDOG=1 pings in 10 s at a 400 ms interval"

kill -HUP "$xpid"
wait_for grep -q '^RELOADING=1' "$TMP/notify.log" || fail "no RELOADING=1 on SIGHUP"
wait_for at_least 2 '^READY=1' ||
	fail "no READY=1 after reload"
kill -TERM "$xpid"
wait "$xpid"; rc=$?
[ $rc -eq 0 ] || fail "xferd exited $rc on SIGTERM"
grep -q '^STOPPING=1' "$TMP/notify.log" || fail "no STOPPING=1"
[ ! -e "$TMP/x.sock" ] || fail "socket file left behind"
echo "ok: sd_notify READY/STATUS/WATCHDOG/RELOADING/STOPPING"

# --- 2. the same binary without systemd: nothing changes --------------------
env -u NOTIFY_SOCKET "$XFERD_BIN" -s "$TMP/plain.sock" -o listen=off >"$TMP/xferd.log" 2>&1 &
xpid=$!
pids+=($xpid)
wait_for test -S "$TMP/plain.sock" || fail "xferd without NOTIFY_SOCKET did not listen"
kill -TERM "$xpid"; wait "$xpid" || fail "plain xferd did not exit 0"
echo "ok: runs unchanged without systemd"

# --- 3. socket activation ------------------------------------------------------
command -v systemd-socket-activate >/dev/null ||
	{ echo "skip: systemd-socket-activate missing"; exit 77; }
# xferd must use the inherited socket, not bind: give it a -s path that
# does not exist so a fallback bind would be visible.
systemd-socket-activate --seqpacket -l "$TMP/act.sock" \
	"$XFERD_BIN" -s "$TMP/never.sock" -o listen=off >"$TMP/xferd.log" 2>&1 &
apid=$!
pids+=($apid)
wait_for test -S "$TMP/act.sock" || fail "systemd-socket-activate did not listen"
# The first connection starts xferd; a real client must then work on it.
XFERD_SOCKET="$TMP/act.sock" "$XFER_BUILD/xferdemo" >"$TMP/client.log" 2>&1 ||
	{ cat "$TMP/client.log"; fail "the demo clients failed on the activated socket"; }
wait_for grep -q 'listening on the socket passed by systemd' "$TMP/xferd.log" ||
	fail "xferd did not take the passed socket"
[ ! -e "$TMP/never.sock" ] || fail "xferd bound its own socket despite activation"
kill -TERM "$apid"; wait "$apid" 2>/dev/null
echo "ok: socket activation"

# --- 4. unit files -------------------------------------------------------------
sed "s|@SBINDIR@|$(dirname "$XFERD_BIN")|" "$XFER_ROOT/systemd/xferd.service" \
	>"$TMP/xferd.service"
cp "$XFER_ROOT/systemd/xferd.socket" "$TMP/"
out=$(systemd-analyze verify --man=no "$TMP/xferd.service" "$TMP/xferd.socket" 2>&1) ||
	{ echo "$out"; fail "systemd-analyze verify"; }
echo "ok: unit files verify"
