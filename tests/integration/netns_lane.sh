#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_lane.sh - a link's latency lane (daemon/transport/link_lane.c)
# between two nodes (namespaces a and b, one xferd each; a connects).
#
#  - the link comes up with its lane, on both sides (xferctl peers);
#  - latency-class writes and reads end on the lane, bulk ones do not
#    (the lane's operation count), every byte read back and checked;
#  - hostile connections to b's peer port: a LaneHello with a's instance
#    id and a wrong secret, one with a short secret, one naming an
#    instance b has no link to: each is closed, b says so in its log,
#    and the link and its lane stay up and carry data;
#  - a restarted with link_lanes=off: the link comes up without a lane
#    on either side and the latency class still moves, on the link;
#  - a restarted with lanes on again: a new link, a new lane.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

MiB=1048576
topo_two
start_xferd b b 10.0.1.2
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474
serve_start b tgt --name tgt --size $((48 * MiB)) --kind memfd

# peer_field NODE FIELD: FIELD of NODE's peer whose link is up.
peer_field() {
	xferctl_on "$1" peers --json 2>/dev/null |
		jq -r --arg f "$2" \
			'[.peers[] | select(.state == "up")][0] | .[$f] | tostring'
}
lane_is() { [ "$(peer_field "$1" lane_up)" = "$2" ]; }

# latency_round SEED: latency writes and verified reads of 64 KiB.
latency_round() {
	xnode_ok a write --lookup b/tgt --size 65536 --offset $((8 * MiB)) \
		--seed "$1" --kind memfd --class latency --repeat 40 \
		--expect-path tcp
	xnode_ok a read --lookup b/tgt --size 65536 --offset $((8 * MiB)) \
		--seed "$1" --kind memfd --class latency --repeat 10 \
		--expect-path tcp
}

step "the link comes up with its latency lane on both sides"
xnode_ok a write --lookup b/tgt --size 4096 --seed 1 --kind memfd
wait_for 20 lane_is a true || fail "a: the lane did not come up"
wait_for 20 lane_is b true || fail "b: the lane did not come up"
xferctl_on a peers | sed 's/^/    | /'

step "latency operations end on the lane, bulk ones on the link"
before=$(peer_field a lane_ops)
latency_round 2
after=$(peer_field a lane_ops)
note "lane operations: $before -> $after"
[ $((after - before)) -ge 50 ] ||
	fail "50 latency operations, $((after - before)) on the lane"
xnode_ok a write --lookup b/tgt --size $((16 * MiB)) --offset $((16 * MiB)) \
	--seed 3 --kind memfd --class bulk --repeat 3
xnode_ok a read --lookup b/tgt --size $((16 * MiB)) --offset $((16 * MiB)) \
	--seed 3 --kind memfd --class bulk
[ "$(peer_field a lane_ops)" = "$after" ] ||
	fail "bulk operations ended on the lane ($(peer_field a lane_ops))"

# forge_lane_hello ID_HEX SECRET_LEN: a LaneHello (proto/peer.proto) on a
# new connection from a to b's peer port; prints "closed" if b closes it
# within 10 s, "open" otherwise.  The protobuf is written by hand: one
# varint field and one nested message.
forge_lane_hello() {
	ns_exec a /usr/bin/python3 - "$1" "$2" <<'EOF'
import os, socket, struct, sys

def varint(n):
    out = b""
    while True:
        b, n = n & 0x7f, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out

def field(num, payload):
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload

hello = field(1, bytes.fromhex(sys.argv[1])) + field(2, os.urandom(int(sys.argv[2])))
msg = field(1, 1) + field(47, hello)
s = socket.create_connection(("10.0.1.2", 7474), timeout=10)
s.sendall(struct.pack("<II", len(msg), 0) + msg)
try:
    print("closed" if s.recv(64) == b"" else "open")
except (socket.timeout, ConnectionResetError) as e:
    print("closed" if isinstance(e, ConnectionResetError) else "open")
EOF
}

step "forged lane hellos are closed; the link and its lane stay"
a_id=$(peer_field b instance_id)
[ ${#a_id} -eq 32 ] || fail "b does not show a's instance id ($a_id)"
for forged in "$a_id 16" "$a_id 8" "00112233445566778899aabbccddeeff 16"; do
	# shellcheck disable=SC2086 # two words
	got=$(forge_lane_hello $forged)
	note "LaneHello ($forged): $got"
	[ "$got" = closed ] || fail "b kept a forged lane ($forged)"
done
refused() { xferd_log b | grep -c 'a latency lane refused'; }
[ "$(refused)" -ge 2 ] || fail "b's log does not say it refused the lanes"
lane_is a true && lane_is b true || fail "the lane went with a forged one"
before=$(peer_field a lane_ops)
latency_round 4
[ "$(peer_field a lane_ops)" -gt "$before" ] ||
	fail "the lane carries nothing after the forged hellos"

step "with link_lanes=off on a, the latency class goes on the link"
stop_xferd a
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474 link_lanes=off
xnode_ok a write --lookup b/tgt --size 4096 --seed 5 --kind memfd
wait_for 20 lane_is b false || fail "b still shows a lane"
latency_round 6
lane_is a false || fail "a has a lane with link_lanes=off"
[ "$(peer_field a lane_ops)" = 0 ] || fail "a counted lane operations"

step "a restarted with lanes on: a new link and a new lane"
stop_xferd a
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474
xnode_ok a write --lookup b/tgt --size 4096 --seed 7 --kind memfd
wait_for 20 lane_is a true || fail "a: no lane on the new link"
wait_for 20 lane_is b true || fail "b: no lane on the new link"
latency_round 8
[ "$(peer_field a lane_ops)" -ge 50 ] || fail "the new lane carries nothing"
xferd_running b || fail "b's xferd died"
echo "PASS"
