#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_acceptor.sh - hostile acceptors: xferd a dials its configured peer
# 10.0.1.2:7474 (namespace b), and what listens there is
# tests/tools/peer_acceptor, answering each connection the way one case
# says (closed at once, silence, garbage, a 4 GiB header, a Welcome of
# another version, claiming a cluster key, with a's own instance id, an
# Error, a byte a second, another instance than a token named, a node
# name with a forged log line in it, a real link that never answers,
# floods, lanes that lead nowhere or to a mute or garbage listener).
# For every case:
#  - the client's operation on a (a lookup at 10.0.1.2:7474, a token
#    import, a write) ends with an error from the case's set within its
#    deadline: op_timeout_ms 3 s + 2 s of grace;
#  - the acceptor saw a's connection (the case really ran);
#  - a is still up and serves another client at once: a same-node write
#    and read, bytes checked, and `xferctl peers`;
#  - a's descriptors come back to what they were before the cases.
# Then a real xferd b at the same address links, and a write a -> b
# succeeds, bytes checked.
#
# The errno sets, and why:
#  - the connection ends in the handshake (closed, garbage, bad lengths,
#    wrong version, a node name no node may have): ECONNRESET or EPROTO,
#    as the handshake names them;
#  - the acceptor is silent or too slow: ETIMEDOUT (connect_timeout_ms);
#  - it claims a cluster key (a has none), or refuses with an Error:
#    EACCES / ECONNREFUSED; with a's own id: ELOOP;
#  - it says "duplicate link": the dialer waits for the other link,
#    which never comes, so the lookup ends at its deadline (ETIMEDOUT);
#  - a real link that never answers, or floods a with frames nobody
#    waits for (a serves a same-node client meanwhile): ETIMEDOUT at the
#    deadline;
#  - another instance than the token's: the import fails ESTALE;
#  - a lookup while a's backoff after the previous failure runs is
#    refused at once (EHOSTUNREACH) without a dial: the test then tries
#    again until the acceptor sees the connection.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

ACCEPTOR=${XFER_TEST_TOOLS:-}/peer_acceptor
[ -x "$ACCEPTOR" ] || skip "$ACCEPTOR not built"

KiB=1024
B=10.0.1.2:7474
OP_MS=3000 GRACE_MS=2000
FD_SLACK=2

topo_two
# Without a cluster key a dials only its configured peer: the acceptor
# stands at that address.
ND_CLUSTER_KEY=off
start_xferd a a 10.0.1.1 peer=$B connect_timeout_ms=1000 \
	op_timeout_ms=$OP_MS keepalive_ms=200 peer_timeout_ms=1000 link_lanes=on

fd_count() { find "/proc/${XD_PID[a]}/fd" -mindepth 1 -maxdepth 1 | wc -l; }
fds_back() { [ "$(fd_count)" -le $((FD0 + FD_SLACK)) ]; }

# a_serves: a is alive and serves another client at once.
SEED=100
a_serves() {
	xferd_running a || fail "a's xferd died"
	SEED=$((SEED + 1))
	xnode_ok a write --token-file "$TMP/loc.tok" --size $((64 * KiB)) \
		--offset 0 --seed $SEED --timeout-ms 2000
	xnode_ok a read --token-file "$TMP/loc.tok" --size $((64 * KiB)) \
		--offset 0 --seed $SEED --timeout-ms 2000
	run_cmd 10 "$XFERCTL" -s "${XD_SOCK[a]}" peers >/dev/null ||
		fail "xferctl peers on a failed"
}

step "a region on a for the same-node checks"
serve_start a loc --token-file "$TMP/loc.tok" --size $((1024 * KiB))
a_serves
# What a holds with no link: its configured peer refused (nothing listens).
wait_for 10 xferctl_on a peers >/dev/null
FD0=$(fd_count)
note "a holds $FD0 descriptors"

# client_op MODE: one operation of a's client towards the acceptor; its
# errno name in $GOT ("ok" if it succeeded), its time in $TOOK ms.
client_op() {
	local t0 rc
	t0=$(now_ms)
	case $1 in
	lookup) xnode a lookup --lookup "$B/t" --expect-error any ;;
	lookup-ok) xnode a lookup --lookup "$B/t" ;;
	import) xnode a write --token-file "$TMP/other.tok" --size 4096 \
		--seed 9 --expect-error any ;;
	write) xnode a write --lookup "$B/t" --size $((64 * KiB)) --seed 9 \
		--timeout-ms 2000 --expect-error any ;;
	esac
	rc=$?
	TOOK=$(($(now_ms) - t0))
	GOT=$(sed -En -e 's/^(expected error at|FAIL:) [a-z]+: ([A-Z0-9]+) .*/\2/p' \
		-e 's/^op=[0-9]+ result=-[0-9]+ ([A-Z0-9]+) .*/\1/p' \
		"$LAST_OUT" | head -n 1)
	[ $rc -ne 0 ] || [ -n "$GOT" ] || GOT=ok
	[ -n "$GOT" ] || fail "xnode on a: exit $rc, no errno said"
	[ "$TOOK" -le $((OP_MS + GRACE_MS)) ] ||
		fail "the operation took $TOOK ms, past its deadline"
}

# hostile CASE MODE ERRS [WAIT [DURING]]: the acceptor runs CASE; a's
# client (MODE) must end with one of ERRS (comma-separated, "ok":
# success) in time, the acceptor must have seen a's connection; WAIT: an
# ERE of a line the acceptor prints once a lookup linked it, before the
# client goes (lane cases, flood); DURING: a must serve another client
# while the case runs on its link (flood: its progress thread is not
# stalled by the frames).
hostile() {
	local c=$1 mode=$2 errs=$3 wait=${4:-} during=${5:-} tries=0
	step "hostile acceptor: $c"
	bg_start "h-$c" b "$ACCEPTOR" --listen "$B" --case "$c" --node b \
		--token-out "$TMP/other.tok"
	bg_wait_line "h-$c" '^listening' 10
	while :; do
		tries=$((tries + 1))
		[ $tries -le 20 ] || fail "$c: a never dialed the acceptor"
		if [ -n "$wait" ]; then
			# The link first (a lookup dials it), then the lane.
			client_op lookup-ok
			[ "$GOT" = ok ] || { sleep 0.3; continue; }
			bg_wait_line "h-$c" "$wait" 10
			[ -z "$during" ] || a_serves
		fi
		client_op "$mode"
		if [ "$GOT" = EHOSTUNREACH ] && ! bg_has "h-$c" '^(conn|lane) '; then
			sleep 0.3    # a's backoff after the previous case
			continue
		fi
		break
	done
	[[ ",$errs," == *",$GOT,"* ]] ||
		fail "$c: the client got $GOT, want one of $errs"
	note "$c: the client got $GOT in $TOOK ms"
	bg_stop "h-$c"
	sed 's/^/    | /' "${BG_OUT[h-$c]}"
	bg_has "h-$c" '^conn [0-9]+ ' || fail "$c: the acceptor saw no connection"
	a_serves
	wait_for 10 fds_back ||
		fail "$c: a holds $(fd_count) descriptors, $FD0 before"
}

hostile close lookup ECONNRESET,EPROTO
hostile silent lookup ETIMEDOUT
hostile garbage lookup EPROTO,ECONNRESET
hostile huge-header lookup EPROTO
hostile huge-payload lookup EPROTO
hostile wrong-version lookup EPROTO
hostile auth lookup EACCES
hostile self lookup ELOOP
hostile refuse lookup ECONNREFUSED
hostile duplicate lookup ETIMEDOUT
hostile slowloris lookup ETIMEDOUT
hostile other-instance import ESTALE
hostile mute lookup ETIMEDOUT
hostile bad-name lookup EPROTO
! xferd_log_has a '^00:00:00.000 xferd info: forged' ||
	fail "a peer's node name forged a line of a's log"
hostile flood write ETIMEDOUT '^listening' during
hostile lane-nowhere lookup-ok ok '^lane offered'
hostile lane-silent lookup-ok ok '^lane dropped'
hostile lane-garbage lookup-ok ok '^lane dropped'
xferd_log_has a 'no latency lane' || fail "a never said its lane failed"

step "a real xferd b at the same address"
start_xferd b b 10.0.1.2
serve_start b t --name t --token-file "$TMP/t.tok" --size $((1024 * KiB))
XNODE_SECS=30 xnode_ok a write --lookup "$B/t" --size $((256 * KiB)) \
	--offset 0 --seed 55 --timeout-ms 5000 --expect-path tcp
xnode_ok a read --lookup b/t --size $((256 * KiB)) --offset 0 --seed 55 \
	--timeout-ms 5000 --expect-path tcp
serve_stop t
serve_stop loc

step "both daemons stop cleanly"
stop_xferd a
stop_xferd b
echo "pass: hostile acceptors end a's operations in time; a stays up and links to a real b"
