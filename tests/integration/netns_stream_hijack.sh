#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_stream_hijack.sh - a stream between two nodes (namespaces a and
# b, one xferd each, each given its own listen address) with a stranger
# on the producer's node: the consumer on b, the producer and the
# intruder (uid 65534) on a, both looking the stream up as b/NAME.
#
# build/tests/stream_hijack does the work (its header says what it
# checks): the intruder's data, closes and credits cross the link to the
# consumer, and its credits, accept and close reach the producer from
# a's own xferd; both ends drop them; the consumer receives exactly the
# producer's messages, every byte checked, then its close; and its peer
# is the producer's identity - a's instance id, the producer's client id
# there, flagged remote: the sender's identity crossed the nodes.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

PROG=${XFER_BUILD:-}/tests/stream_hijack
[ -x "$PROG" ] || skip "$PROG not built"
getent group nogroup >/dev/null || skip "no group nogroup"

topo_two
# The intruder (uid 65534) must reach a's socket: group nogroup, and a
# directory it may enter.
chmod 0755 "$TMP"
start_xferd b b 10.0.1.2 socket_group=nogroup
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474 socket_group=nogroup

step "consumer on b; producer and a stranger of another uid on a"
HIJACK_CONSUMER_SOCKET=${XD_SOCK[b]} HIJACK_PRODUCER_SOCKET=${XD_SOCK[a]} \
	HIJACK_INTRUDER_SOCKET=${XD_SOCK[a]} HIJACK_NAME=b/hijack.stream \
	timeout 120 "$PROG" >"$TMP/hijack.out" 2>&1
rc=$?
sed 's/^/    | /' "$TMP/hijack.out"
[ $rc -eq 0 ] || fail "stream_hijack across nodes exited with $rc"
grep -q "^consumer: its producer is client [0-9]* (uid 0) of the other node" \
	"$TMP/hijack.out" || fail "the producer's identity did not cross the nodes"

step "both daemons stop cleanly"
stop_xferd a
stop_xferd b
echo "pass: a stranger could not speak for either end of a stream between two nodes"
