#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# unit_security.sh - the packaged service is safe by default:
#  1. `systemd-analyze security --offline=true` rates systemd/xferd.service
#     (with @SBINDIR@ filled in) at an exposure of 3.0 or less;
#  2. the xferds of this run have exactly the unit's capabilities in their
#     bounding set (tests/run-tests.sh starts them under setpriv with the
#     list tests/lib/unit_caps.sh reads from the unit), and xferd works
#     with them: a client moves verified bytes through it;
#  3. xferd started with no `listen` and no cluster key listens on no TCP
#     port, and says so in its log.
# The unit's SystemCallFilter= is scored here, never exercised: CI has no
# systemd as PID 1.
#
# Env (from tests/run-tests.sh): XFERD_BIN, XFER_ROOT, XFER_BUILD,
# XFERD_CAPS (set when run as root); UNIT overrides the unit file.
# Exit 0 pass, 1 fail, 77 skip.
set -u
: "${XFERD_BIN:?run through make check}" "${XFER_ROOT:?}" "${XFER_BUILD:?}"
UNIT=${UNIT:-$XFER_ROOT/systemd/xferd.service}
MAX_EXPOSURE=3.0

fail() { echo "FAIL: $*"; exit 1; }
TMP=$(mktemp -d /tmp/xferd-unitsec.XXXXXX)
pid=''
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
# shellcheck source=../lib/unit_caps.sh
. "$XFER_ROOT/tests/lib/unit_caps.sh"

# --- 1. exposure -----------------------------------------------------------
if ! command -v systemd-analyze >/dev/null; then
	echo "skip: systemd-analyze not installed (make deps: systemd)"
	exit 77
fi
systemd-analyze security --help 2>&1 | grep -q -- '--offline' ||
	{ echo "skip: systemd-analyze $(systemd-analyze --version | head -n 1) has no --offline"; exit 77; }
sed "s|@SBINDIR@|$(dirname "${XFERD_REAL_BIN:-$XFERD_BIN}")|" "$UNIT" >"$TMP/xferd.service"
out=$(systemd-analyze security --offline=true "$TMP/xferd.service" 2>&1)
score=$(sed -n 's/.*Overall exposure level for xferd.service: \([0-9.]*\).*/\1/p' <<<"$out")
[ -n "$score" ] || { echo "$out"; fail "no exposure level in systemd-analyze's answer"; }
if ! awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s <= m) }'; then
	grep '✗' <<<"$out" | head -n 40
	fail "unit exposure $score, want <= $MAX_EXPOSURE ($UNIT)"
fi
echo "ok: unit exposure $score (<= $MAX_EXPOSURE)"

# --- 2. the run's xferds have exactly the unit's capabilities -------------
start() { # LOG ARGS...: xferd from $XFERD_BIN on $TMP/x.sock
	local log=$1
	shift
	rm -f "$TMP/x.sock"
	"$XFERD_BIN" -s "$TMP/x.sock" "$@" >"$log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		grep -q ' ready ' "$log" && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$log"
	fail "xferd did not start"
}
stop() {
	kill -TERM "$pid"
	wait "$pid" || fail "xferd did not stop cleanly"
	pid=''
}

if [ -n "${XFERD_CAPS:-}" ]; then
	[ "$XFERD_CAPS" = "$(unit_caps "$UNIT")" ] ||
		fail "the run's xferd capabilities '$XFERD_CAPS' are not the unit's '$(unit_caps "$UNIT")'"
	start "$TMP/caps.log" -o listen=off
	want=$(setpriv --bounding-set="$(unit_caps_setpriv "$UNIT")" -- \
		sed -n 's/^CapBnd:\t//p' /proc/self/status)
	got=$(sed -n 's/^CapBnd:\t//p' "/proc/$pid/status")
	eff=$(sed -n 's/^CapEff:\t//p' "/proc/$pid/status")
	[ -n "$want" ] && [ "$got" = "$want" ] ||
		fail "xferd's bounding set is $got, the unit's ($XFERD_CAPS) is $want"
	[ "$eff" = "$want" ] || fail "xferd's effective set $eff is not the unit's $want"
	XFERD_SOCKET=$TMP/x.sock "$XFER_BUILD/xferdemo" >"$TMP/demo.log" 2>&1 ||
		{ cat "$TMP/demo.log"; fail "clients cannot move bytes through an xferd with the unit's capabilities"; }
	stop
	echo "ok: xferd runs with the unit's capabilities only ($XFERD_CAPS: CapBnd $got), verified transfers"
else
	echo "note: not root (or XFER_NO_CAP_BOUND): the capability bound is not applied in this run"
fi

# --- 3. no TCP listener by default ---------------------------------------
start "$TMP/default.log" -l info
ports=$(ss -Hltnp 2>/dev/null | grep "pid=$pid," || true)
[ -z "$ports" ] || { cat "$TMP/default.log"; fail "xferd with no listen and no cluster key listens on TCP: $ports"; }
grep -q 'peers: not listening' "$TMP/default.log" ||
	{ cat "$TMP/default.log"; fail "xferd does not say why it does not listen for peers"; }
stop
echo "ok: no TCP listener by default: $(grep -o 'peers: not listening.*' "$TMP/default.log")"
