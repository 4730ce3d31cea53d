#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_stream.sh - streams (xfer_stream_*) through examples/xferstream,
# between two nodes (namespaces a and b, one xferd each, the TCP path)
# and inside node b:
#
#  - the receiver on b offers 2 slots of 16 MiB; the sender (on a, then on
#    b) streams 12 messages, each with its own pattern in every byte; the
#    receiver checks every byte of every message (--verify) and the
#    count, and sees the sender's close at the end;
#  - the receiver is killed (SIGKILL) holding a slot: the sender, waiting
#    for a slot with a 120 s timeout, fails with ECONNRESET (not ETIME:
#    well before its timeout), and b's xferd keeps nothing of the dead
#    receiver (xferctl: no client with its pid, no region it owned);
#  - the sender is killed while the receiver waits: the receiver fails
#    with ECONNRESET, and the sender's xferd keeps nothing of it.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

XSTREAM=${XFER_BUILD:-}/xferstream
[ -x "$XSTREAM" ] || skip "$XSTREAM not built"
MiB=1048576
COUNT=12
LONG_MS=120000

topo_two
start_xferd b b 10.0.1.2
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474

# stream_on NODE TAG ARGS...: xferstream in the background on NODE.
stream_on() {
	local node=$1 tag=$2
	shift 2
	_nd_say -- "[$node] xferstream $* (as $tag)"
	bg_start "$tag" "${XD_NS[$node]}" "$XSTREAM" --socket "${XD_SOCK[$node]}" "$@"
}

# client_id NODE PID: the xferd client id of process PID, or nothing.
client_id() {
	xferctl_on "$1" --json clients | jq -r --argjson p "$2" \
		'.clients[] | select(.pid == $p) | .id'
}

# nothing_left NODE ID PID: NODE's xferd has no client PID and no region
# owned by client ID.
nothing_left() {
	local out
	out=$(xferctl_on "$1" --json clients) || fail "xferctl clients on $1"
	jq -e --argjson p "$3" '[.clients[] | select(.pid == $p)] | length == 0' \
		<<<"$out" >/dev/null || return 1
	out=$(xferctl_on "$1" --json regions) || fail "xferctl regions on $1"
	jq -e --argjson id "$2" '[.regions[] | select(.owner == $id)] | length == 0' \
		<<<"$out" >/dev/null
}

expect_error() { # TAG ENAME
	bg_has "$1" "^error=$2\$" ||
		fail "$1: no error=$2: $(tail -n 3 "${BG_OUT[$1]}")"
	note "$1 failed with $2"
}

n=0
for snode in a b; do
	n=$((n + 1))
	step "sender on $snode, receiver on b: $COUNT x 16 MiB through 2 slots, every byte checked"
	stream_on b recv$n recv --name s$n --count $COUNT --size $((16 * MiB)) \
		--slots 2 --verify --timeout-ms $LONG_MS
	bg_wait_line recv$n '^recv: 2 slots ' 30
	stream_on "$snode" send$n send --name "b/s$n" --count $COUNT --verify \
		--timeout-ms $LONG_MS
	bg_wait send$n 180 || fail "sender exited with $?: $(tail -n 3 "${BG_OUT[send$n]}")"
	bg_wait recv$n 60 || fail "receiver exited with $?: $(tail -n 3 "${BG_OUT[recv$n]}")"
	sed 's/^/    | /' "${BG_OUT[send$n]}" "${BG_OUT[recv$n]}"
	bg_has recv$n "^recv: $COUNT messages checked \\(every byte\\), $((COUNT * 16 * MiB)) bytes" ||
		fail "the receiver did not check $COUNT messages"

	step "sender on $snode: the receiver on b is killed holding a slot"
	stream_on b hold$n recv --name k$n --count 100 --size $((4 * MiB)) \
		--timeout-ms $LONG_MS --hold-after 1
	bg_wait_line hold$n '^recv: 2 slots ' 30
	stream_on "$snode" ksend$n send --name "b/k$n" --count 100 --timeout-ms $LONG_MS
	bg_wait_line hold$n '^recv: holding after 1' 60
	rpid=${BG_PID[hold$n]}
	rid=$(client_id b "$rpid")
	[ -n "$rid" ] || fail "the receiver (pid $rpid) is no client of b's xferd"
	bg_stop hold$n KILL
	bg_wait ksend$n 180
	rc=$?
	sed 's/^/    | /' "${BG_OUT[ksend$n]}"
	[ $rc -eq 1 ] || fail "the sender exited with $rc, want 1"
	expect_error ksend$n ECONNRESET
	wait_for 10 nothing_left b "$rid" "$rpid" ||
		fail "b's xferd still has something of the dead receiver (client $rid): $(xferctl_on b regions)"
	note "b's xferd has no client $rid and no region of it"

	step "sender on $snode is killed while the receiver on b waits"
	stream_on b krecv$n recv --name p$n --count 100 --size $MiB --timeout-ms $LONG_MS
	bg_wait_line krecv$n '^recv: 2 slots ' 30
	stream_on "$snode" stall$n send --name "b/p$n" --count 100 --stall-after 3 \
		--timeout-ms $LONG_MS
	bg_wait_line stall$n '^send: stalled after 3' 60
	spid=${BG_PID[stall$n]}
	sid=$(client_id "$snode" "$spid")
	[ -n "$sid" ] || fail "the sender (pid $spid) is no client of $snode's xferd"
	bg_stop stall$n KILL
	bg_wait krecv$n 180
	rc=$?
	sed 's/^/    | /' "${BG_OUT[krecv$n]}"
	[ $rc -eq 1 ] || fail "the receiver exited with $rc, want 1"
	expect_error krecv$n ECONNRESET
	wait_for 10 nothing_left "$snode" "$sid" "$spid" ||
		fail "$snode's xferd still has something of the dead sender (client $sid)"
	note "$snode's xferd has no client $sid and no region of it"
done

step "both daemons stop cleanly"
stop_xferd a
stop_xferd b
echo "pass: streams on one node and between two"
