#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# journal.sh - xferd's lines in the journal carry the fields an operator
# filters on (journalctl -o json): XFERD_CLIENT_PID of a client that
# connected and of one that sent garbage, XFERD_PEER of a link that came
# up and went down, XFERD_ERRNO of a failure (a metrics port in use, the
# link's end); and a client that repeats one bad line 300 times gets at
# most the rate limit's burst of lines plus one that says how many were
# suppressed.
#
# Needs a journal: the system's when systemd-journald runs here, else (as
# root, where mount namespaces work) a private systemd-journald in a
# mount namespace of this test, with tmpfs over /run/systemd, /run/log and
# /var/log/journal, so nothing of the host's is touched.  Otherwise it
# skips (77) and says why.
#
# Env (from tests/run-tests.sh): XFERD_BIN, XFERBENCH_BIN.
set -u

XFERD=${XFERD_BIN:-} XB=${XFERBENCH_BIN:-}
BURST=20   # LOG_BURST in daemon/core/log.h
skip() { echo "skip: $*"; exit 77; }
[ -n "$XFERD" ] && [ -x "$XFERD" ] && [ -n "$XB" ] && [ -x "$XB" ] ||
	skip "XFERD_BIN, XFERBENCH_BIN not set (run through make check)"
for c in journalctl jq python3; do
	command -v $c >/dev/null || skip "$c not installed (make deps)"
done

JD=/lib/systemd/systemd-journald
if [ -z "${XFERD_JOURNAL_NS:-}" ] && [ ! -S /run/systemd/journal/socket ]; then
	# No journal runs here: bring up a private one, or say why not.
	[ "$(id -u)" = 0 ] || skip "no journal runs here and a private one needs root"
	[ -x "$JD" ] || skip "no journal runs here and $JD is not installed"
	command -v unshare >/dev/null || skip "no journal runs here and no unshare"
	unshare -m --propagation private true 2>/dev/null ||
		skip "no journal runs here and no mount namespace can be made"
	exec unshare -m --propagation private env XFERD_JOURNAL_NS=1 bash "$0" "$@"
fi

TMP=$(mktemp -d /tmp/xferd-journal.XXXXXX)
pids=''
cleanup() {
	for p in $pids; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	for f in "$TMP"/*.log; do
		[ -s "$f" ] && { echo "--- $f"; tail -n 10 "$f"; }
	done
	exit 1
}

if [ -n "${XFERD_JOURNAL_NS:-}" ]; then
	for d in /run/systemd /run/log /var/log/journal; do
		mkdir -p "$d" && mount -t tmpfs tmpfs "$d" || fail "mount tmpfs on $d"
	done
	mkdir -p /run/systemd/journal
	"$JD" >"$TMP/journald.log" 2>&1 &
	pids="$pids $!"
	for _ in $(seq 100); do [ -S /run/systemd/journal/socket ] && break; sleep 0.05; done
	[ -S /run/systemd/journal/socket ] || fail "the private systemd-journald did not start"
	where="a private systemd-journald"
else
	where="the system journal"
fi

ports=$(python3 -c '
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
read -r PA PB PM <<<"$ports"

start() { # NAME ARGS...: a private xferd logging to the journal
	local name=$1
	shift
	# The flood below is 301 connections of one uid at once: more than
	# max_pending_per_uid lets in, and what it turns away is not the
	# garbage line this test counts.
	"$XFERD" -s "$TMP/$name.sock" -o log_target=journal -o node_name="$name" \
		-o max_pending_per_uid=1000 "$@" >"$TMP/$name.log" 2>&1 &
	local p=$!
	pids="$pids $p"
	eval "pid_$name=$p"
	for _ in $(seq 100); do [ -S "$TMP/$name.sock" ] && return; sleep 0.05; done
	fail "xferd $name did not start"
}

# a: metrics on PM; b: the same port (in use: XFERD_ERRNO), and a link to a.
start a -o listen=127.0.0.1:$PA -o metrics_listen=127.0.0.1:$PM
start b -o listen=127.0.0.1:$PB -o peer=127.0.0.1:$PA -o metrics_listen=127.0.0.1:$PM

# A client that moves bytes (its pid in XFERD_CLIENT_PID).
"$XB" --socket "$TMP/a.sock" lat --iters 10 --warmup 1 >"$TMP/bench.log" 2>&1 ||
	fail "xferbench: $(tail -n 2 "$TMP/bench.log")"

# A client that sends garbage, 300 times from one process, then once
# more after a second (the rate limit has refilled a little by then).
flood() {
	python3 - "$TMP/a.sock" "$1" <<'PY'
import socket, sys
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sys.argv[1])
    s.send(b"garbage, not a channel tag")
    s.close()
PY
}
flood 300
flood_pid_line="unknown channel tag"
sleep 1.2
flood 1
sleep 0.5   # let a log the last one; then every xferd stops
kill "$pid_a"; wait "$pid_a" 2>/dev/null
# b sees the link end (the socket closes): wait for its line.
for _ in $(seq 200); do
	journalctl -o cat --no-pager _PID="$pid_b" 2>/dev/null | grep -q 'link down' && break
	sleep 0.05
done
kill "$pid_b"; wait "$pid_b" 2>/dev/null
journalctl --sync 2>/dev/null || true

found() { # JQ-FILTER FILE: the filter selects at least one line
	[ -n "$(jq -c "$1" "$2")" ]
}
j() { # journal lines of xferd pid $1 as JSON
	journalctl -o json --no-pager _PID="$1" 2>/dev/null
}
j "$pid_a" >"$TMP/a.json"
j "$pid_b" >"$TMP/b.json"
[ -s "$TMP/a.json" ] || fail "nothing of xferd a in $where"

# The client's connect line, with its pid as a field.
n=$(jq -r '.MESSAGE as $m | .XFERD_CLIENT_PID as $p |
	select($p != null and ($m | test("client [0-9]+ connected: pid")) and
	       ($m | contains("pid " + $p + " "))) | $p' "$TMP/a.json" | wc -l)
[ "$n" -ge 2 ] || fail "no 'connected' lines with XFERD_CLIENT_PID (found $n)"
# b could not have the metrics port: XFERD_ERRNO says why.
found 'select(.MESSAGE | test("metrics: cannot listen")) | select(.XFERD_ERRNO == "EADDRINUSE" and .ERRNO == "98" and .PRIORITY == "4")' \
	"$TMP/b.json" || fail "no 'cannot listen' line with XFERD_ERRNO=EADDRINUSE"
# The link: up on both sides, down on b when a went.
found 'select(.MESSAGE | test("link up")) | select(.XFERD_PEER == "a")' "$TMP/b.json" ||
	fail "b: no 'link up' line with XFERD_PEER=a"
found 'select(.MESSAGE | test("link down")) | select(.XFERD_PEER == "a" and .XFERD_ERRNO != null)' \
	"$TMP/b.json" || fail "b: no link-down line with XFERD_PEER=a and XFERD_ERRNO"
# The flood: one call site, at most the burst (plus what refilled while
# it ran and the last one), and a line that counts the rest.
flood_lines=$(jq -r "select(.MESSAGE | test(\"$flood_pid_line\")) | .XFERD_CLIENT_PID" "$TMP/a.json" | wc -l)
[ "$flood_lines" -ge 1 ] || fail "no garbage lines at all"
[ "$flood_lines" -le $((BURST + 4)) ] || fail "$flood_lines garbage lines logged of 301: not rate-limited"
supp=$(jq -r 'select(.MESSAGE | test("^suppressed [0-9]+ messages")) | .MESSAGE' "$TMP/a.json" |
	awk '{s += $2} END {print s + 0}')
[ $((flood_lines + supp)) -eq 301 ] ||
	fail "$flood_lines lines + $supp suppressed != 301 garbage connections"
echo "ok: fields in $where; flood of 301: $flood_lines lines, $supp suppressed"
