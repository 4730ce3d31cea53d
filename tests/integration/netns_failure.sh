#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_failure.sh - the link or the remote xferd goes away in the middle
# of a stream of writes from a to b (DESIGN.md section 7).  Both xferds
# keep alive every 200 ms and call a link dead after 1 s of silence; every
# write carries a 3 s deadline.
#
#  - the veth goes down mid-stream: every write in flight completes with
#    -ECONNRESET or -ETIMEDOUT, none later than its deadline (+ 5 s of
#    grace): nothing hangs.  a marks b down.  With the link back up, the
#    next write from a reconnects and succeeds (bytes verified).
#  - b's xferd hangs (SIGSTOP) mid-stream: the same; once it continues,
#    the next write from a succeeds again.
#  - b's xferd is killed (SIGKILL) mid-stream: the same, and a write
#    submitted after the reset may also end -ECONNREFUSED (a dials b
#    again); b's own client learns that its xferd is gone and exits
#    instead of hanging.
#  - b's xferd restarts at the same address (a new instance) and the name
#    is published again: a looks it up, and the next write reconnects and
#    succeeds, notified and verified on b; a token of the dead instance
#    fails (at import or on its completion, never hangs) and writes
#    nothing into the new instance's memory.
#  - a's xferd survived all of it and stops cleanly.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

MiB=1048576
TIMING=(keepalive_ms=200 peer_timeout_ms=1000 connect_timeout_ms=1000)
STREAM=(--size $((4 * MiB)) --depth 4 --timeout-ms 3000 --grace-ms 5000
	--until-error --max-ms 60000)

# no_link_up NODE PEER: NODE's xferctl shows no link to PEER that is up.
no_link_up() {
	local out
	out=$(xferctl_on "$1" peers --json) || return 1
	jq -e --arg p "$2" '[.peers[] | select(.node_name == $p and .state == "up")] |
		length == 0' <<<"$out" >/dev/null
}

# stream_through TAG WHAT ERRS CMD...: a stream of writes a -> b/t; once it
# runs, CMD breaks things; the stream must end (all writes completed, each
# error one of ERRS, none hung), the first error a reset or a timeout.
stream_through() {
	local tag=$1 what=$2 errs=$3 rc
	shift 3
	bg_start "$tag" a "$XNODE" stream --socket "${XD_SOCK[a]}" --lookup b/t \
		--seed 7 "${STREAM[@]}" --expect-error "$errs"
	bg_wait_line "$tag" '^streaming: first write ok' 60
	note "writes are flowing; now: $what"
	"$@"
	bg_wait "$tag" 90
	rc=$?
	sed 's/^/    | /' "${BG_OUT[$tag]}"
	[ $rc -ne 124 ] || fail "$tag: the stream still runs 90 s after '$what'"
	[ $rc -eq 0 ] || fail "$tag: the writes did not all end in time with " \
		"-ECONNRESET/-ETIMEDOUT after '$what' (exit $rc)"
	grep -qE '^error (ECONNRESET|ETIMEDOUT) ' "${BG_OUT[$tag]}" ||
		fail "$tag: no ECONNRESET/ETIMEDOUT"
}

topo_two
start_xferd b b 10.0.1.2 "${TIMING[@]}"
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474 "${TIMING[@]}"
serve_start b t --name t --token-file "$TMP/t-old.tok" --size $((64 * MiB))

step "sanity: a -> b works"
xnode_ok a write --lookup b/t --size $MiB --offset 0 --seed 1 \
	--timeout-ms 3000 --expect-path tcp

step "the veth goes down in the middle of a stream of writes"
stream_through s-down "link a/to-b down" ECONNRESET,ETIMEDOUT link_down a to-b
wait_for 10 no_link_up a b || fail "a still shows its link to b up"
note "a shows b down"
link_up a to-b

step "the link is back: the next write reconnects and succeeds"
xnode_ok a write --lookup b/t --size $MiB --offset 4096 --seed 2 \
	--timeout-ms 5000 --expect-path tcp
xnode_ok a read --lookup b/t --size $MiB --offset 4096 --seed 2 \
	--timeout-ms 5000 --expect-path tcp

step "b's xferd hangs (SIGSTOP) in the middle of a stream of writes"
freeze() { kill -STOP "${XD_PID[$1]}"; note "xferd $1 stopped (SIGSTOP)"; }
stream_through s-stop "SIGSTOP b's xferd" ECONNRESET,ETIMEDOUT freeze b
wait_for 10 no_link_up a b || fail "a still shows its link to b up"
note "a shows b down"
kill -CONT "${XD_PID[b]}"
note "xferd b continues (SIGCONT)"
xnode_ok a write --lookup b/t --size $MiB --offset 8192 --seed 3 \
	--timeout-ms 5000 --expect-path tcp
xnode_ok a read --lookup b/t --size $MiB --offset 8192 --seed 3 \
	--timeout-ms 5000 --expect-path tcp

step "b's xferd is killed (SIGKILL) in the middle of a stream of writes"
# A write submitted after the reset dials b again and is refused: nothing
# listens at b's address any more.
stream_through s-kill "kill -9 b's xferd" ECONNRESET,ETIMEDOUT,ECONNREFUSED \
	kill_xferd b
wait_for 10 no_link_up a b || fail "a still shows its link to b up"
note "a shows b down"
bg_wait t 30
rc=$?
sed 's/^/    | /' "${BG_OUT[t]}" | tail -n 3
[ $rc -ne 124 ] || fail "b's client still waits 30 s after its xferd died"
bg_has t '^FAIL: xferd went away' ||
	fail "b's client did not learn that its xferd went away"
note "b's client noticed its xferd died and exited"

step "b restarts at the same address (a new instance) and publishes again"
start_xferd b b 10.0.1.2 "${TIMING[@]}"
serve_start b t2 --name t --token-file "$TMP/t-new.tok" --size $((64 * MiB)) \
	--expect-notify "5:55:0:$MiB"
old=$(grep -o 'instance=[0-9a-f]*' "${BG_OUT[t]}" | head -n 1)
new=$(grep -o 'instance=[0-9a-f]*' "${BG_OUT[t2]}" | head -n 1)
if [ -z "$old" ] || [ "$old" = "$new" ]; then
	fail "the restarted xferd has the same instance ($old, $new)"
fi
note "old $old, new $new"
xnode_ok a write --lookup b/t --size $MiB --offset 0 --seed 55 --notify 5 \
	--timeout-ms 5000 --expect-path tcp
expect_notified t2 5
xnode_ok a read --lookup b/t --size $MiB --offset 0 --seed 55 \
	--timeout-ms 5000 --expect-path tcp

step "a token of the dead instance fails and writes nothing"
XNODE_SECS=30 xnode_ok a write --token-file "$TMP/t-old.tok" --size $MiB \
	--offset 0 --seed 66 --timeout-ms 3000 --expect-error any
xnode_ok a read --lookup b/t --size $MiB --offset 0 --seed 55 \
	--timeout-ms 5000 --expect-path tcp
serve_stop t2

step "both daemons stop cleanly"
stop_xferd a
stop_xferd b
echo "pass: broken links and dead peers end every write in time; reconnects work"
