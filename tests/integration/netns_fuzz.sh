#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_fuzz.sh - hostile peers: tests/tools/peer_fuzz (in namespace a)
# attacks the peer port of b's xferd with malformed frames (bad lengths,
# garbage, wrong version, unknown messages, handshake out of order, a
# truncated frame, a silent connection) and, after a proper handshake,
# with operations on a real region that no honest peer sends (wrong key,
# widened range, out of bounds, payload past the range or the op).
# Every case must end as proto/peer.proto says (mostly: the connection
# dropped, within 5 s) and leave b able to complete a fresh handshake.
# Then:
#  - the attacked region is byte for byte as it was (xnode serve
#    --verify-unchanged: nothing was written outside what a valid frame
#    may touch, and those bytes were written back unchanged);
#  - b is still alive, serves a normal verified transfer from a over TCP,
#    and stops cleanly with a clean log.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

MiB=1048576

topo_two
# The fuzzer speaks the peer protocol without a key: no cluster key
# here, so a reaches b as a configured peer (without a key xferd dials
# only those).
ND_CLUSTER_KEY=off
# A short handshake deadline keeps the silent-connection case quick.
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474
start_xferd b b 10.0.1.2 connect_timeout_ms=1000 keepalive_ms=200 \
	peer_timeout_ms=2000

step "a region on b for the fuzzer: its token grants [4096, +64 KiB) of 1 MiB"
serve_start b fz --token-file "$TMP/fz.tok" --size $MiB --seed 77 \
	--export-range 4096:65536 --verify-unchanged

step "peer_fuzz against b (10.0.1.2:7474)"
run_on a 300 "$PEER_FUZZ" --connect 10.0.1.2:7474 --token-file "$TMP/fz.tok" \
	--pid "${XD_PID[b]}" --deadline-ms 5000 --silent-ms 10000
rc=$?
[ $rc -eq 0 ] || fail "peer_fuzz: exit $rc"
grep -q '^peer_fuzz: .* 0 failed, 0 skipped$' "$LAST_OUT" ||
	fail "peer_fuzz skipped cases"
xferd_running b || fail "b's xferd died"

step "the attacked region is unchanged"
serve_stop fz

step "b still serves a normal transfer from a"
serve_start b ok --token-file "$TMP/ok.tok" --size $MiB --kind malloc \
	--expect-notify "5:55:100:300000"
xnode_ok a write --token-file "$TMP/ok.tok" --size 300000 --offset 100 \
	--seed 55 --notify 5 --expect-path tcp
expect_notified ok 5
xnode_ok a read --token-file "$TMP/ok.tok" --size 300000 --offset 100 \
	--seed 55 --expect-path tcp
serve_stop ok

step "both daemons stop cleanly"
stop_xferd a
stop_xferd b
echo "pass: b survived peer_fuzz and still serves transfers"
