#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_storm.sh - a storm of clients and faults against two nodes, every
# byte checked (tests/tools/storm.c does the clients).
#
#  - storm: 64 client processes on node a write seeded bytes and read them
#    back, half into a region on a (same xferd: memfd and CMA), half into
#    one on b (over the link), while a killer SIGKILLs a random one every
#    few ms and a new one takes its place (STORM_SECS, default 30).  Every
#    worker that was not killed verified every byte; then, with every
#    client gone, both xferds show 0 clients and 0 operations in flight,
#    their open fds are what they were before the storm and their RSS is
#    within RSS_MARGIN_MIB (default 32) of it.
#  - a client that owns a malloc'd (CMA) target stops (SIGSTOP) while
#    another node writes into it: those writes complete (xferd reaches a
#    stopped process's memory) or time out, never hang; other clients
#    move verified bytes meanwhile; after SIGCONT the target holds the
#    bytes of the last write and its owner exits cleanly.
#  - a client that never looks at its completion queue is notified 3500
#    times (3000 from its node, 500 from the other): every notifier's
#    descriptor completes, xferd holds what its CQ cannot, it gets all
#    3500 when it reads at last (none lost), and other clients are not
#    slowed into errors.
#  - b's xferd stops reading (SIGSTOP) under a stream of writes from a:
#    the writes in flight end with -ETIMEDOUT at their deadline; after
#    SIGCONT the link recovers and a write and read-back succeed.
#  - the veth drops 5% of packets (tc netem) both ways during a 16 MiB
#    write and read-back: every byte arrives (skipped with a message if
#    this kernel has no sch_netem).
#
# STORM_SECS and STORM_REPORT_SECS (a summary line every so often) make
# the same storm a soak (make soak).  Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

MiB=1048576
STORM=${XFER_TEST_TOOLS:-}/storm
[ -x "$STORM" ] || skip "$STORM not built"
STORM_SECS=${STORM_SECS:-30}
STORM_REPORT_SECS=${STORM_REPORT_SECS:-10}
STORM_WORKERS=${STORM_WORKERS:-64}
STORM_KILL_MS=${STORM_KILL_MS:-5}
RSS_MARGIN_MIB=${RSS_MARGIN_MIB:-32}
SLICE=$((64 * 1024))
# Each target holds 8 generations of a slice for each of its workers.
TARGET=$(((STORM_WORKERS + 1) / 2 * 8 * SLICE))
# A stalled peer must end writes by their deadline (1.5 s), before the
# link is declared dead (-ECONNRESET).
TIMING=(keepalive_ms=500 peer_timeout_ms=6000 connect_timeout_ms=2000)

fd_count() { ls "/proc/${XD_PID[$1]}/fd" | wc -l; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/${XD_PID[$1]}/status"; }

# idle NODE: xferctl shows no client and nothing in flight.
idle() {
	local out
	out=$(xferctl_on "$1" --json status) || return 1
	jq -e '.clients == 0 and .ops_in_flight == 0' <<<"$out" >/dev/null
}

# fds_back NODE WANT: its open fds are WANT again.
fds_back() { [ "$(fd_count "$1")" -eq "$2" ]; }

# storm_run SECS KILL_MS REPORT: the storm from node a, its lines shown as
# they come (a soak prints one a minute); its status.  LAST_OUT: them all.
storm_run() {
	local shown=0 n deadline=$(($(now_ms) + ($1 + 180) * 1000))
	bg_start storm a "$STORM" run --socket "${XD_SOCK[a]}" \
		--target a/ta --target b/tb --workers "$STORM_WORKERS" \
		--secs "$1" --kill-every-ms "$2" --slice $SLICE \
		--report-secs "$3" --timeout-ms 20000
	LAST_OUT=${BG_OUT[storm]}
	while bg_running storm && [ "$(now_ms)" -lt "$deadline" ]; do
		sleep 1
		n=$(wc -l <"$LAST_OUT")
		[ "$n" -gt "$shown" ] &&
			sed -n "$((shown + 1)),${n}p" "$LAST_OUT" | sed 's/^/    | /'
		shown=$n
	done
	bg_wait storm 1
	local rc=$?
	sed -n "$((shown + 1)),\$p" "$LAST_OUT" | sed 's/^/    | /'
	return $rc
}

topo_two
start_xferd b b 10.0.1.2 "${TIMING[@]}"
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474 "${TIMING[@]}"

step "warm-up: the link, both targets, a few rounds without kills"
serve_start a ta --name ta --size $TARGET
serve_start b tb --name tb --size $TARGET
storm_run 2 0 0 || fail "warm-up storm failed"
serve_stop ta
serve_stop tb
for n in a b; do
	wait_for 10 idle $n || fail "xferd $n not idle after the warm-up"
done
declare -A FD0 RSS0
for n in a b; do
	FD0[$n]=$(fd_count $n)
	RSS0[$n]=$(rss_kib $n)
	note "xferd $n: ${FD0[$n]} fds, $((RSS0[$n] / 1024)) MiB RSS, idle"
done

step "storm: $STORM_WORKERS clients, one SIGKILLed every ${STORM_KILL_MS} ms, ${STORM_SECS} s"
serve_start a ta --name ta --size $TARGET
serve_start b tb --name tb --size $TARGET
storm_run "$STORM_SECS" "$STORM_KILL_MS" "$STORM_REPORT_SECS" ||
	fail "the storm failed"
grep -q '^storm ok$' "$LAST_OUT" || fail "no 'storm ok'"
serve_stop ta
serve_stop tb

step "after the storm: no client, nothing in flight, fds and RSS as before"
for n in a b; do
	wait_for 20 idle $n || fail "xferd $n: $(xferctl_on $n status)"
	wait_for 20 fds_back $n "${FD0[$n]}" ||
		fail "xferd $n has $(fd_count $n) fds, ${FD0[$n]} before the storm"
	rss=$(rss_kib $n)
	note "xferd $n: $(fd_count $n) fds (${FD0[$n]} before), RSS $((rss / 1024)) MiB ($((RSS0[$n] / 1024)) MiB before, margin $RSS_MARGIN_MIB MiB)"
	# ASan keeps freed memory in its quarantine: RSS says nothing there
	# (LeakSanitizer checks at the exit instead).
	if grep -q libasan "/proc/${XD_PID[$n]}/maps"; then
		note "xferd $n runs under ASan: RSS not compared"
	elif [ "$rss" -gt $((RSS0[$n] + RSS_MARGIN_MIB * 1024)) ]; then
		fail "xferd $n grew from $((RSS0[$n] / 1024)) to $((rss / 1024)) MiB RSS"
	fi
done
xferctl_on a status | sed 's/^/    | /' | grep -E 'clients|in flight|ops'

step "a client owning a CMA target stops (SIGSTOP) while b writes into it"
serve_start a tc --name tc --size $((16 * MiB)) --kind malloc
serve_start a ta --name ta --size $TARGET
bg_start cw b "$XNODE" write --socket "${XD_SOCK[b]}" --lookup a/tc \
	--size $MiB --seed 41 --repeat 100 --interval-ms 20 --timeout-ms 3000 \
	--allow-error ETIMEDOUT
bg_wait_line cw '^op=4 ' 60
kill -STOP "${BG_PID[tc]}"
t_stop=$("$XNODE" clock)
note "the owner of a/tc is stopped"
xnode_ok a write --lookup a/ta --size $MiB --offset 0 --seed 42 \
	--timeout-ms 5000
xnode_ok a read --lookup a/ta --size $MiB --offset 0 --seed 42 \
	--timeout-ms 5000
note "another client of a moved verified bytes meanwhile"
bg_wait cw 120
rc=$?
tail -n 3 "${BG_OUT[cw]}" | sed 's/^/    | /'
[ $rc -eq 0 ] || fail "the writes into the stopped client's memory did not all end well (exit $rc)"
# Submitted after the stop (one clock for all: CLOCK_MONOTONIC).
n=$(awk -v t="$t_stop" '/^op=[0-9]* result=1048576 / {
	split($0, f, "submit_us="); split(f[2], g, " "); if (g[1] > t) n++ }
	END {print n + 0}' "${BG_OUT[cw]}")
[ "$n" -gt 0 ] || fail "no write was submitted and landed while the owner was stopped"
note "$n writes submitted after the stop landed in the stopped client's memory"
kill -CONT "${BG_PID[tc]}"
note "the owner continues (SIGCONT)"
xnode_ok b read --lookup a/tc --size $MiB --seed 41 --timeout-ms 5000
serve_stop tc

step "a client that never reads its CQ is notified 3500 times"
_nd_enter a
_nd_bg_start mute "${ND_ENTER[@]}" "$STORM" mute --socket "${XD_SOCK[a]}" \
	--name mute --size $MiB
bg_wait_line mute '^ready ' 30
bg_start na a "$STORM" notify --socket "${XD_SOCK[a]}" --target a/mute \
	--count 3000 --timeout-ms 5000
bg_start nb b "$STORM" notify --socket "${XD_SOCK[b]}" --target a/mute \
	--count 500 --timeout-ms 5000
xnode_ok a write --lookup a/ta --size $MiB --offset $MiB --seed 44 \
	--timeout-ms 5000
xnode_ok a read --lookup a/ta --size $MiB --offset $MiB --seed 44 \
	--timeout-ms 5000
bg_wait na 120 || fail "notifications from a: $(tail -n 2 "${BG_OUT[na]}")"
bg_wait nb 120 || fail "notifications from b: $(tail -n 2 "${BG_OUT[nb]}")"
note "$(cat "${BG_OUT[na]}") from a, $(cat "${BG_OUT[nb]}") from b"
bg_stop mute || fail "the mute client did not exit cleanly"
# Far more than its CQ holds: xferd held the rest, and lost none.
grep -Eq '^notified=3500 cq_overflow=0$' "${BG_OUT[mute]}" ||
	fail "the mute client did not get all 3500 notifications: $(cat "${BG_OUT[mute]}")"
note "the mute client: $(tail -n 1 "${BG_OUT[mute]}"); nobody else noticed"

step "b's xferd stops reading (SIGSTOP) under a stream of writes from a"
serve_start b tb --name tb --size $TARGET
bg_start st a "$XNODE" stream --socket "${XD_SOCK[a]}" --lookup b/tb \
	--size $MiB --depth 4 --timeout-ms 1500 --grace-ms 5000 \
	--until-error --max-ms 60000
bg_wait_line st '^streaming: first write ok' 60
kill -STOP "${XD_PID[b]}"
note "xferd b stopped"
bg_wait st 60
rc=$?
kill -CONT "${XD_PID[b]}"
note "xferd b continues"
sed 's/^/    | /' "${BG_OUT[st]}" | tail -n 5
[ $rc -eq 0 ] || fail "the stream did not end in time (exit $rc)"
bg_has st '^error ETIMEDOUT ' || fail "no write ended with ETIMEDOUT"
xnode_ok a write --lookup b/tb --size $MiB --offset 0 --seed 45 \
	--timeout-ms 10000 --expect-path tcp
xnode_ok a read --lookup b/tb --size $MiB --offset 0 --seed 45 \
	--timeout-ms 10000 --expect-path tcp
note "the link recovered"

step "the veth drops 5% of packets during a 16 MiB write and read-back"
serve_start b big --name big --size $((16 * MiB))
modprobe -q sch_netem 2>/dev/null
if ! tc -n "$(ns_name a)" qdisc add dev to-b root netem loss 5% \
	2>"$TMP/netem.err"; then
	note "SKIPPED this case: this kernel has no sch_netem ($(head -n 1 "$TMP/netem.err"))"
else
	tc -n "$(ns_name b)" qdisc add dev to-a root netem loss 5% ||
		fail "netem on b"
	note "netem loss 5% on both ends"
	xnode_ok a write --lookup b/big --size $((16 * MiB)) --seed 46 \
		--timeout-ms 60000 --expect-path tcp
	xnode_ok a read --lookup b/big --size $((16 * MiB)) --seed 46 \
		--timeout-ms 60000 --expect-path tcp
	tc -n "$(ns_name a)" -s qdisc show dev to-b | grep -o 'dropped [0-9]*' |
		sed 's/^/    dropped on a: /'
	tc -n "$(ns_name a)" qdisc del dev to-b root
	tc -n "$(ns_name b)" qdisc del dev to-a root
fi
serve_stop big
serve_stop tb
serve_stop ta

step "both daemons stop cleanly"
stop_xferd a
stop_xferd b
echo "pass: the storm and the faults cost no byte, fd or client slot"
