#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_races.sh - two nodes (a 10.0.1.1, b 10.0.1.2) and the races between
# their xferds: connects that cross, records that turn out to be one
# xferd, memory reused the moment a notification says it may be, links
# torn down under load, shutdown under load, and source memory that goes
# away under a write.
#
#  1. simultaneous connects: a and b list each other as peer= and start
#     at the same moment, ten times (XFERT_RACE_ROUNDS) with fresh daemons.  Every other
#     round both first connects are held (each node's neighbour entry for
#     the other points nowhere until both sockets are in SYN-SENT), so
#     that both handshakes run at once.  Each round: both show the other
#     up, exactly one of them initiated the link, one link remains (two
#     TCP connections: the link and its latency lane, which both show
#     up), a -> b and b -> a transfers are verified, and both exit 0
#     on SIGTERM with no allocator or sanitizer report in their logs.
#  2. an address b does not advertise (added after b started, b listens
#     on *:7474): a knows b by id; xferctl ping 10.0.1.22:7474 and a lookup
#     "10.0.1.22:7474/NAME" answer (with the link up, and again after the
#     link was killed), a write through that lookup is read back, and a
#     keeps one record for b.
#  3. a READ with notify: the owner overwrites the range the moment the
#     notification arrives; the reader still gets every original byte
#     (single reads and a linked vector, memfd owner).
#  4. a and b write into each other without pause (4 writes in flight
#     each, resubmitted as they complete) while the link is killed: six
#     times with ss -K on a's socket, then with a's veth down and up.
#     Every write ends within its deadline + grace, done or failed with a
#     link error; after each kill, writes submitted since succeed again
#     on both sides (both reconnect at once); both xferds survive, and
#     single transfers both ways are verified at the end.
#  5. SIGTERM to an xferd while remote writes are in flight (the target,
#     the source, then both): it exits 0 and its log has no sanitizer
#     report - run with XFERD_BIN from an ASan build (make asan), memory
#     its links still use after the peers were torn down shows up here.
#  6. one client of a unmaps its registered source (its own pages,
#     reached with CMA like malloc'd memory) while its writes to b are in
#     flight, another is killed (SIGKILL) in the middle
#     of its stream: only their writes fail (-EFAULT for the unmapped
#     one); a third client's writes over the same link all succeed and
#     its bytes are read back.
#
# XFERT_RACES="2 5" runs only those cases.  Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

MiB=1048576
A=10.0.1.1 B=10.0.1.2 B_ALIAS=10.0.1.22
TIMING=(keepalive_ms=200 peer_timeout_ms=1000 connect_timeout_ms=3000)
STREAM=(--size $((4 * MiB)) --depth 4 --timeout-ms 3000 --grace-ms 5000
	--until-error --max-ms 60000)
ROUNDS=${XFERT_RACE_ROUNDS:-10}

# --- helpers ---------------------------------------------------------------

# peers_json NODE: NODE's xferctl peers --json.
peers_json() { xferctl_on "$1" peers --json 2>/dev/null; }

# peer_up NODE PEER: a record of NODE's for PEER is up.
peer_up() {
	local out
	both_alive "$1"
	out=$(peers_json "$1") || return 1
	jq -e --arg p "$2" 'any(.peers[]; .node_name == $p and .state == "up")' \
		<<<"$out" >/dev/null
}

no_peer_up() { ! peer_up "$@"; }

# only_record_up NODE PEER: NODE has exactly one record for PEER, and it is up.
only_record_up() {
	local out
	out=$(peers_json "$1") || return 1
	jq -e --arg p "$2" '[.peers[] | select(.node_name == $p)] |
		length == 1 and .[0].state == "up"' <<<"$out" >/dev/null
}

# initiated NODE PEER: "true" or "false" for NODE's up link to PEER.
initiated() {
	peers_json "$1" | jq -r --arg p "$2" \
		'[.peers[] | select(.node_name == $p and .state == "up")][0].initiated'
}

# tcp_links NODE: established TCP connections of the node to or from the
# xferd port.
tcp_links() {
	ns_exec "$1" ss -Htn state established \
		"( sport = :$XD_PORT or dport = :$XD_PORT )" | grep -c .
}
# lane_up NODE PEER: NODE shows PEER's link with its latency lane up.
lane_up() {
	peers_json "$1" | jq -e --arg p "$2" \
		'any(.peers[]; .node_name == $p and .state == "up" and .lane_up)' \
		>/dev/null
}
# One link: its connection and its latency lane's (transport/link_lane.c).
one_tcp_link() {
	lane_up a b && lane_up b a &&
		[ "$(tcp_links a)" -eq 2 ] && [ "$(tcp_links b)" -eq 2 ]
}

# syn_sent NODE: a connect of NODE's to the xferd port waits in SYN-SENT.
syn_sent() {
	ns_exec "$1" ss -Htn state syn-sent "dport = :$XD_PORT" | grep -q .
}

# launch_xferd NS NAME ADDR [KEY=VALUE...]: as start_xferd (listening on
# ADDR:7474), without waiting for it; await_xferd NAME waits.
launch_xferd() {
	local ns=$1 name=$2 addr=$3 kv
	shift 3
	local args=(-s "$TMP/$name.sock" -l debug -o "node_name=$name"
		-o "listen=$addr:$XD_PORT")
	# shellcheck disable=SC2207 # two words, no spaces in $TMP
	args+=($(nd_key_args "$@"))
	for kv in "$@"; do
		args+=(-o "$kv")
	done
	XD_NS[$name]=$ns
	xferd_spawn "$name" "${args[@]}"
}

_answers() {
	xferd_running "$1" ||
		fail "xferd $1 exited during start-up: $(tail -n 5 "$TMP/$1.log")"
	xferctl_on "$1" status >/dev/null 2>&1
}
_listens() {
	ns_exec "${XD_NS[$1]}" ss -Hltn "sport = :$XD_PORT" 2>/dev/null | grep -q .
}
await_xferd() {
	wait_for 20 _answers "$1" || fail "xferd $1: its socket does not answer"
	wait_for 20 _listens "$1" || fail "xferd $1 does not listen on TCP"
}

# log_clean NAME: no allocator or sanitizer report, no crash, in the log
# of NAME's current (or last) run.
log_clean() {
	local bad
	bad=$(xferd_log "$1" | grep -E 'double free|free\(\): |malloc\(\): |corrupted|AddressSanitizer|LeakSanitizer|runtime error' |
		head -n 5)
	[ -z "$bad" ] || fail "xferd $1's log: $bad"
}

# stop_pair NAME...: SIGTERM to all of them at once; each must exit 0
# within 20 s and log cleanly.
stop_pair() {
	local n rc
	for n in "$@"; do
		xferd_running "$n" || fail "xferd $n died before it was stopped"
	done
	for n in "$@"; do
		kill -TERM "${XD_PID[$n]}"
	done
	for n in "$@"; do
		wait_exit "${XD_PID[$n]}" 20
		rc=$?
		unset "XD_PID[$n]"
		[ $rc -ne 124 ] || fail "xferd $n still running 20 s after SIGTERM"
		[ $rc -eq 0 ] || fail "xferd $n exited with $rc after SIGTERM"
		log_clean "$n"
	done
	note "xferd $* stopped cleanly (exit 0)"
}

# both_alive NAME...: every one of them still runs.
both_alive() {
	local n
	for n in "$@"; do
		xferd_running "$n" || fail "xferd $n died: $(xferd_log "$n" | tail -n 5)"
	done
}

# Neighbour entries that send each node's packets for the other nowhere:
# connects stay in SYN-SENT until released.
hold_connects() {
	ip -n "$(ns_name a)" neigh replace $B lladdr 02:00:00:00:00:0b \
		dev to-b nud permanent || fail "neigh on a"
	ip -n "$(ns_name b)" neigh replace $A lladdr 02:00:00:00:00:0a \
		dev to-a nud permanent || fail "neigh on b"
}
release_connects() {
	ip -n "$(ns_name a)" neigh del $B dev to-b
	ip -n "$(ns_name b)" neigh del $A dev to-a
}

# transfer FROM TO TAG V SEED OFF SIZE: FROM writes into TO's region TAG
# (looked up at TO's address), notified and verified there, and reads the
# bytes back.
transfer() {
	local from=$1 to=$2 tag=$3 v=$4 seed=$5 off=$6 size=$7 at
	if [ "$to" = a ]; then at=$A; else at=$B; fi
	xnode_ok "$from" write --lookup "$at:$XD_PORT/$tag" --size "$size" \
		--offset "$off" --seed "$seed" --notify "$v" --timeout-ms 5000 \
		--expect-path tcp
	expect_notified "$tag" "$v"
	xnode_ok "$from" read --lookup "$at:$XD_PORT/$tag" --size "$size" \
		--offset "$off" --seed "$seed" --timeout-ms 5000 --expect-path tcp
}

# stream_start TAG FROM TO_ADDR TARGET [ARGS...]: a stream of writes in
# the background; returns once the first one succeeded.
stream_start() {
	local tag=$1 from=$2 at=$3 target=$4
	shift 4
	bg_start "$tag" "${XD_NS[$from]}" "$XNODE" stream \
		--socket "${XD_SOCK[$from]}" --lookup "$at:$XD_PORT/$target" "$@"
	bg_wait_line "$tag" '^streaming: first write ok' 60
}

# hammer_start TAG FROM TO_ADDR TARGET SEED: FROM writes 1 MiB into
# TARGET again and again, 4 in flight, until SIGTERM; a write may fail
# with a link error (HAMMER_ERRS) but must end within its deadline.
HAMMER_ERRS=ECONNRESET,ETIMEDOUT,EHOSTUNREACH,ENETUNREACH,ECONNREFUSED
hammer_start() {
	local tag=$1 from=$2 at=$3 target=$4 seed=$5
	bg_start "$tag" "${XD_NS[$from]}" "$XNODE" write \
		--socket "${XD_SOCK[$from]}" --lookup "$at:$XD_PORT/$target" \
		--size $MiB --seed "$seed" --repeat 0 --depth 4 --timeout-ms 3000 \
		--grace-ms 5000 --allow-error "$HAMMER_ERRS"
	bg_wait_line "$tag" '^op=[0-9]+ result=[0-9]' 60
}

# hammer_running TAG: it still writes (and both xferds run).
hammer_running() {
	both_alive a b
	bg_running "$1" || fail "$1 ended early: $(grep -v '^submitted' "${BG_OUT[$1]}" | tail -n 3)"
}

# hammer_failed TAG LINE: past line LINE of its output, a write failed.
hammer_failed() {
	hammer_running "$1"
	tail -n +"$(($2 + 1))" "${BG_OUT[$1]}" | grep -Eq '^op=[0-9]+ result=-'
}

# hammer_ok_since TAG T: a write of TAG's submitted after T (xnode clock)
# succeeded.
hammer_ok_since() {
	hammer_running "$1"
	awk -v t="$2" '
		/^op=[0-9]+ result=[0-9]/ {
			for (i = 1; i <= NF; i++) {
				split($i, kv, "=")
				if (kv[1] == "submit_us" && kv[2] + 0 > t + 0) { ok = 1; exit }
			}
		}
		END { exit !ok }' "${BG_OUT[$1]}"
}

# tcp_link_of NODE: its established connection(s) to or from the xferd
# port, as "local peer" lines.
tcp_link_of() {
	ns_exec "$1" ss -Htn state established \
		"( sport = :$XD_PORT or dport = :$XD_PORT )" | awk '{print $3, $4}'
}

# ping_alias: xferctl ping of b's unadvertised address from a answers.
ping_alias() {
	local out rc
	out=$(timeout 30 "$XFERCTL" -s "${XD_SOCK[a]}" ping "$B_ALIAS:$XD_PORT" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed 's/^/    | /'
	both_alive a b
	[ $rc -eq 0 ] || fail "ping $B_ALIAS:$XD_PORT from a: exit $rc"
}

# kill_link: a's TCP connections to b destroyed (ss -K); a shows b down.
kill_link() {
	ns_exec a ss -K dst $B >/dev/null 2>&1
	ns_exec a ss -K dst $B_ALIAS >/dev/null 2>&1
	wait_for 10 no_peer_up a b || fail "a still shows b up after ss -K"
}

# term_under_load WHO...: a and b stream writes into each other; SIGTERM
# to WHO.  Every client ends: a stream whose own xferd lives sees its
# writes fail and exits 0; a client whose xferd went away just must not
# hang.
term_under_load() {
	local n s rc
	start_xferd b b $B "${TIMING[@]}"
	start_xferd a a $A "${TIMING[@]}"
	serve_start a t5a --name t5a --size $((16 * MiB))
	serve_start b t5b --name t5b --size $((16 * MiB))
	stream_start t5-a a $B t5b --seed 51 "${STREAM[@]}" --expect-error any
	stream_start t5-b b $A t5a --seed 52 "${STREAM[@]}" --expect-error any
	note "writes flow both ways; SIGTERM to $*"
	stop_pair "$@"
	for n in a b; do
		s=t5-$n
		bg_wait "$s" 60
		rc=$?
		[ $rc -ne 124 ] || fail "$s: writes hang after SIGTERM to $*"
		if xferd_running "$n"; then
			[ $rc -eq 0 ] || fail "$s (exit $rc): $(tail -n 3 "${BG_OUT[$s]}")"
		else
			note "$s: ended (exit $rc) after its xferd exited"
		fi
	done
	for n in a b; do
		if xferd_running "$n"; then
			serve_stop "t5$n"
			stop_xferd "$n"
			log_clean "$n"
		else
			bg_wait "t5$n" 30
			[ $? -ne 124 ] || fail "t5$n hangs after its xferd exited"
		fi
	done
}

# good_ok: the background writer "good" still runs and none of its writes
# failed so far.
good_ok() {
	bg_running good || fail "the other client's writes stopped: $(tail -n 3 "${BG_OUT[good]}")"
	! bg_has good '^op=[0-9]+ result=-' ||
		fail "the other client's writes failed: $(grep -m 3 '^op=[0-9]* result=-' "${BG_OUT[good]}")"
}

CASES=${XFERT_RACES:-1 2 3 4 5 6}
topo_two

# --- 1 ------------------------------------------------------------------------

case_1() {
	local round held ia ib
	step "1. simultaneous connects: $ROUNDS rounds of fresh daemons started at once"
	for round in $(seq 1 "$ROUNDS"); do
		held=0
		[ $((round % 2)) -eq 0 ] && held=1
		if [ $held = 1 ]; then
			note "round $round: both connects held until both are in SYN-SENT"
			hold_connects
		else
			note "round $round: both started at once"
		fi
		launch_xferd a a $A peer=$B:$XD_PORT
		launch_xferd b b $B peer=$A:$XD_PORT
		await_xferd a
		await_xferd b
		if [ $held = 1 ]; then
			wait_for 20 syn_sent a || fail "round $round: a never connected"
			wait_for 20 syn_sent b || fail "round $round: b never connected"
			release_connects
		fi
		wait_for 20 peer_up a b || fail "round $round: a does not show b up: $(peers_json a)"
		wait_for 20 peer_up b a || fail "round $round: b does not show a up: $(peers_json b)"
		wait_for 20 one_tcp_link ||
			fail "round $round: not one link (and its lane) between a and b" \
				"($(tcp_links a) on a, $(tcp_links b) on b)"
		only_record_up a b || fail "round $round: a's records for b: $(peers_json a)"
		only_record_up b a || fail "round $round: b's records for a: $(peers_json b)"
		ia=$(initiated a b) ib=$(initiated b a)
		if [ "$ia" = "$ib" ] || ! [[ $ia =~ ^(true|false)$ && $ib =~ ^(true|false)$ ]]; then
			fail "round $round: initiated on a: $ia, on b: $ib (one link has one initiator)"
		fi
		note "round $round: one link up, initiated by $([ "$ia" = true ] && echo a || echo b)"

		serve_start a ta --name ta --size $MiB --expect-notify "12:$((1200 + round)):4096:300000"
		serve_start b tb --name tb --size $MiB --expect-notify "21:$((2100 + round)):7:500000"
		transfer a b tb 21 $((2100 + round)) 7 500000
		transfer b a ta 12 $((1200 + round)) 4096 300000
		serve_stop ta
		serve_stop tb
		both_alive a b
		one_tcp_link || fail "round $round: the link changed during the transfers"
		if [ "$(initiated a b)" != "$ia" ] || [ "$(initiated b a)" != "$ib" ]; then
			fail "round $round: the link was replaced during the transfers"
		fi
		stop_pair a b
	done
}

# --- 2 ------------------------------------------------------------------------

case_2() {
	step "2. ping and lookup through an address b does not advertise"
	start_xferd b b '*'
	start_xferd a a $A
	serve_start b t2 --name t2 --size $((4 * MiB)) \
		--expect-notify "21:201:0:65536" --expect-notify "22:202:65536:70000" \
		--expect-notify "23:203:262144:4096"
	transfer a b t2 21 201 0 65536
	wait_for 10 peer_up a b || fail "a does not show b up"
	ip -n "$(ns_name b)" addr add $B_ALIAS/24 dev to-a || fail "addr $B_ALIAS"
	peers_json a | jq -e --arg ip "$B_ALIAS" \
		'[.peers[] | select(.node_name == "b") | .addresses[] | select(startswith($ip + "/") or startswith($ip + ":"))] | length == 0' \
		>/dev/null || fail "b advertises $B_ALIAS after all: $(peers_json a)"
	note "b answers at $B_ALIAS, which it does not advertise"

	note "link up: ping $B_ALIAS:$XD_PORT"
	ping_alias
	xnode_ok a lookup --lookup "$B_ALIAS:$XD_PORT/t2"
	xnode_ok a write --lookup "$B_ALIAS:$XD_PORT/t2" --size 70000 --offset 65536 \
		--seed 202 --notify 22 --timeout-ms 5000 --expect-path tcp
	expect_notified t2 22
	xnode_ok a read --lookup "$B:$XD_PORT/t2" --size 70000 --offset 65536 \
		--seed 202 --timeout-ms 5000 --expect-path tcp
	wait_for 10 only_record_up a b || fail "a's records for b: $(peers_json a)"

	note "link killed: ping $B_ALIAS:$XD_PORT"
	kill_link
	ping_alias
	note "link killed: lookup $B_ALIAS:$XD_PORT/t2"
	kill_link
	xnode_ok a write --lookup "$B_ALIAS:$XD_PORT/t2" --size 4096 --offset 262144 \
		--seed 203 --notify 23 --timeout-ms 5000 --expect-path tcp
	expect_notified t2 23
	xnode_ok a read --lookup "$B_ALIAS:$XD_PORT/t2" --size 4096 --offset 262144 \
		--seed 203 --timeout-ms 5000 --expect-path tcp
	xferctl_on a ping b | sed 's/^/    | /'
	[ "${PIPESTATUS[0]}" -eq 0 ] || fail "ping b (by name) from a"
	wait_for 10 only_record_up a b || fail "a's records for b: $(peers_json a)"
	serve_stop t2
	stop_pair a b
	ip -n "$(ns_name b)" addr del $B_ALIAS/24 dev to-a
}

# --- 3 ------------------------------------------------------------------------

case_3() {
	local chunk=$((8 * MiB)) nchunk=6 vec_off k kind exp=()
	step "3. READ with notify: the owner overwrites the range once notified"
	start_xferd b b $B
	start_xferd a a $A
	for k in $(seq 0 $((nchunk - 1))); do
		exp+=(--expect-notify "$((30 + k)):$((300 + k)):$((k * chunk)):$chunk")
	done
	vec_off=$((nchunk * chunk))
	exp+=(--expect-notify "39:309:$vec_off:$((4 * MiB))")
	serve_start b t3 --name t3 --size $((vec_off + 4 * MiB)) --kind memfd \
		--clobber-on-notify "${exp[@]}"
	for k in $(seq 0 $((nchunk - 1))); do
		kind=memfd
		[ $((k % 2)) -eq 1 ] && kind=malloc
		xnode_ok a read --lookup "$B:$XD_PORT/t3" --size $chunk \
			--offset $((k * chunk)) --seed $((300 + k)) --kind $kind \
			--notify $((30 + k)) --timeout-ms 10000 --expect-path tcp
		expect_notified t3 $((30 + k))
	done
	xnode_ok a read --lookup "$B:$XD_PORT/t3" --size $((4 * MiB)) --offset $vec_off \
		--vector 64 --linked --seed 309 --notify 39 --timeout-ms 10000 \
		--expect-path tcp
	expect_notified t3 39
	serve_stop t3
	stop_pair a b
}

# --- 4 ------------------------------------------------------------------------

case_4() {
	local how la lb rc tag t link
	step "4. writes both ways, continuously, while the link is killed"
	start_xferd b b $B "${TIMING[@]}"
	start_xferd a a $A "${TIMING[@]}"
	serve_start a t4a --name t4a --size $((64 * MiB))
	serve_start b t4b --name t4b --size $((64 * MiB))
	hammer_start h-ab a $B t4b 41
	hammer_start h-ba b $A t4a 42
	for how in "ss -K" "ss -K" "ss -K" "ss -K" "ss -K" "ss -K" "veth down"; do
		la=$(wc -l <"${BG_OUT[h-ab]}") lb=$(wc -l <"${BG_OUT[h-ba]}")
		note "writes flow both ways; now: $how"
		case $how in
		"ss -K")
			link=$(tcp_link_of a)
			[ -n "$link" ] || fail "a has no TCP connection to b"
			ns_exec a ss -K dst $B >/dev/null 2>&1
			if [ "$(tcp_link_of a)" = "$link" ]; then
				note "ss -K cannot destroy sockets here (kernel without sock_destroy): skipped"
				continue
			fi
			;;
		"veth down")
			link_down a to-b
			wait_for 30 hammer_failed h-ab "$la" ||
				fail "a's writes did not fail with the link down"
			wait_for 30 hammer_failed h-ba "$lb" ||
				fail "b's writes did not fail with the link down"
			link_up a to-b
			;;
		esac
		t=$("$XNODE" clock)
		wait_for 60 hammer_ok_since h-ab "$t" ||
			fail "a's writes never succeeded again after $how"
		wait_for 60 hammer_ok_since h-ba "$t" ||
			fail "b's writes never succeeded again after $how"
		both_alive a b
		note "after $how: writes submitted since succeed again on both sides"
	done
	for tag in h-ab h-ba; do
		hammer_running "$tag"
		bg_stop "$tag"
		rc=$?
		note "$tag: $(grep -c '^op=[0-9]* result=[0-9]' "${BG_OUT[$tag]}") write(s) ok," \
			"$(grep -c '^op=[0-9]* result=-' "${BG_OUT[$tag]}") failed with a link error"
		grep -Ev '^(submitted|op=)' "${BG_OUT[$tag]}" | sed 's/^/    | /' | tail -n 3
		[ $rc -eq 0 ] || fail "$tag: writes hung or failed otherwise (exit $rc)"
	done
	xnode_ok a write --lookup "$B:$XD_PORT/t4b" --size $MiB --offset $((32 * MiB)) \
		--seed 43 --timeout-ms 5000 --expect-path tcp
	xnode_ok a read --lookup "$B:$XD_PORT/t4b" --size $MiB --offset $((32 * MiB)) \
		--seed 43 --timeout-ms 5000 --expect-path tcp
	xnode_ok b write --lookup "$A:$XD_PORT/t4a" --size $MiB --offset $((32 * MiB)) \
		--seed 44 --timeout-ms 5000 --expect-path tcp
	xnode_ok b read --lookup "$A:$XD_PORT/t4a" --size $MiB --offset $((32 * MiB)) \
		--seed 44 --timeout-ms 5000 --expect-path tcp
	serve_stop t4a
	serve_stop t4b
	stop_pair a b
}

# --- 5 ------------------------------------------------------------------------

case_5() {
	step "5. SIGTERM while remote writes are in flight"
	term_under_load b
	term_under_load a
	term_under_load a b
}

# --- 6 ------------------------------------------------------------------------

case_6() {
	local ops rc
	step "6. a client's source goes away under its writes; the link stays"
	start_xferd b b $B
	start_xferd a a $A
	serve_start b t6 --name t6 --size $((96 * MiB))
	bg_start good a "$XNODE" write --socket "${XD_SOCK[a]}" --lookup "$B:$XD_PORT/t6" \
		--size $((4 * MiB)) --offset $((64 * MiB)) --seed 61 --kind malloc \
		--repeat 0 --depth 2 --timeout-ms 10000 --expect-path tcp
	bg_wait_line good '^op=4 result=' 60
	note "another client writes over the same link"
	xnode_ok a stream --lookup "$B:$XD_PORT/t6" --size $((4 * MiB)) --kind malloc \
		--seed 62 --depth 4 --timeout-ms 10000 --until-error --unmap-after 2 \
		--expect-error EFAULT
	grep -q '^error EFAULT ' "$LAST_OUT" || fail "the unmapped source did not fail with EFAULT"
	good_ok
	note "a client that dies (SIGKILL) in the middle of its writes"
	stream_start victim a $B t6 --seed 63 --kind malloc --size $((4 * MiB)) \
		--offset $((32 * MiB)) --depth 4 --timeout-ms 10000 --until-error \
		--max-ms 60000
	bg_stop victim KILL
	good_ok
	# A few more of its writes after both, then all of them checked.
	ops=$(grep -c '^op=[0-9]* result=' "${BG_OUT[good]}")
	bg_wait_line good "^op=$((ops + 4)) result=" 60
	good_ok
	bg_stop good
	rc=$?
	sed 's/^/    | /' "${BG_OUT[good]}" | grep -Ev '^    \| (submitted|op=)' | tail -n 5
	[ $rc -eq 0 ] || fail "the other client's writes failed (exit $rc)"
	xnode_ok a read --lookup "$B:$XD_PORT/t6" --size $((4 * MiB)) \
		--offset $((64 * MiB)) --seed 61 --timeout-ms 5000 --expect-path tcp
	peer_up a b || fail "a's link to b is down"
	serve_stop t6
	stop_pair a b
}

for c in $CASES; do
	"case_$c"
done
echo "pass: connect races, aliases, read notifications, broken links, shutdown and vanishing sources"
