#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_triangle.sh - the mesh of seed 004: three nodes where each pair
# shares its own subnet and nothing is routed between subnets.
#
#   a: 10.0.1.1/24 (to b), 10.0.3.1/24 (to c)
#   b: 10.0.1.2/24 (to a), 10.0.2.1/24 (to c)
#   c: 10.0.2.2/24 (to b), 10.0.3.2/24 (to a)
#
# Tokens travel as files, not through lookups or configured peers, so
# every link is made from the addresses a token advertises - which
# include one that the connecting node cannot reach at all.
#  - every ordered pair writes ~1 MiB into the other's region (the target
#    process verifies it when notified) and reads it back, path tcp; the
#    first three transfers go round the triangle so that every node
#    initiates one link;
#  - xferctl peers --json on every node: each peer is up and reached at
#    its address on the subnet the two share (a's link to b uses
#    10.0.1.2, to c 10.0.3.2, ...), and links a node initiated give a
#    "subnet" reason;
#  - a fourth node d that shares no subnet with a (10.0.4.0/24 behind c,
#    which forwards; a has a route there): a -> d works, and a's
#    xferctl peers says the link to d is "routed".
# Every xferd stops cleanly at the end.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

MiB=1048576
SIZE=999999
NODES=(a b c)
declare -A NUM=([a]=1 [b]=2 [c]=3)
# node:peer -> the peer's address on the subnet they share
declare -A SHARED=([a:b]=10.0.1.2 [a:c]=10.0.3.2 [b:a]=10.0.1.1
	[b:c]=10.0.2.2 [c:a]=10.0.3.1 [c:b]=10.0.2.1)

topo_triangle
for n in "${NODES[@]}"; do
	start_xferd "$n" "$n" '*'
done

# Transfer x -> y: notification 10*x+y, seed 100 + that, at x MiB + 3.
val() { echo $((10 * NUM[$1] + NUM[$2])); }
off() { echo $((NUM[$1] * MiB + 3)); }

step "one region per node, tokens in files"
for y in "${NODES[@]}"; do
	exp=()
	for x in "${NODES[@]}"; do
		[ "$x" = "$y" ] && continue
		v=$(val "$x" "$y")
		exp+=(--expect-notify "$v:$((100 + v)):$(off "$x"):$SIZE")
	done
	serve_start "$y" "t-$y" --token-file "$TMP/t-$y.tok" --size $((4 * MiB)) \
		"${exp[@]}"
done

# Round the triangle first (each node initiates one link), then back.
for pair in a:b b:c c:a b:a c:b a:c; do
	x=${pair%:*} y=${pair#*:}
	v=$(val "$x" "$y")
	step "$x -> $y"
	xnode_ok "$x" write --token-file "$TMP/t-$y.tok" --size $SIZE \
		--offset "$(off "$x")" --seed $((100 + v)) --notify "$v" \
		--expect-path tcp
	expect_notified "t-$y" "$v"
	xnode_ok "$x" read --token-file "$TMP/t-$y.tok" --size $SIZE \
		--offset "$(off "$x")" --seed $((100 + v)) --expect-path tcp
done
for y in "${NODES[@]}"; do
	serve_stop "t-$y"
done

# check_peers NODE: every other triangle node is up at its shared-subnet
# address; links NODE initiated say "subnet", and there is at least one.
check_peers() {
	local n=$1 p out
	out=$(xferctl_on "$n" peers --json) || fail "xferctl peers --json on $n"
	xferctl_on "$n" peers | sed 's/^/    | /'
	for p in "${NODES[@]}"; do
		[ "$p" = "$n" ] && continue
		jq -e --arg p "$p" --arg ip "${SHARED[$n:$p]}" '
			[.peers[] | select(.node_name == $p and .state == "up")] |
			length >= 1 and
			all(.[]; (.address | sub(":[0-9]+$"; "")) == $ip)' \
			<<<"$out" >/dev/null ||
			fail "$n: peer $p is not up at ${SHARED[$n:$p]}: $out"
	done
	jq -e '[.peers[] | select(.state == "up" and .initiated == true)] |
		length >= 1 and all(.[]; (.why // "") | test("subnet"))' \
		<<<"$out" >/dev/null ||
		fail "$n: its links do not give a subnet reason: $out"
	local list=
	for p in "${NODES[@]}"; do
		[ "$p" = "$n" ] || list+=" $p@${SHARED[$n:$p]}"
	done
	note "$n: peers$list, chosen by subnet"
}

step "xferctl peers: every link on the subnet the pair shares"
for n in "${NODES[@]}"; do
	check_peers "$n"
done

step "a fourth node d behind c, no subnet in common with a"
ns_create d
veth c 10.0.4.1/24 d 10.0.4.2/24
ns_exec c sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward' ||
	fail "forwarding on c"
ip -n "$(ns_name d)" route add default via 10.0.4.1 || fail "route on d"
ip -n "$(ns_name a)" route add 10.0.4.0/24 via 10.0.3.2 || fail "route on a"
start_xferd d d '*'
serve_start d t-d --token-file "$TMP/t-d.tok" --size $MiB \
	--expect-notify "14:114:7:500000"
xnode_ok a write --token-file "$TMP/t-d.tok" --size 500000 --offset 7 \
	--seed 114 --notify 14 --expect-path tcp
expect_notified t-d 14
xnode_ok a read --token-file "$TMP/t-d.tok" --size 500000 --offset 7 \
	--seed 114 --expect-path tcp
serve_stop t-d
out=$(xferctl_on a peers --json) || fail "xferctl peers --json on a"
jq -e '[.peers[] | select(.node_name == "d" and .state == "up")] |
	length == 1 and (.[0] | (.address | startswith("10.0.4.2:")) and
	.initiated == true and ((.why // "") | test("routed")))' \
	<<<"$out" >/dev/null || fail "a's link to d is not shown as routed: $out"
text=$(xferctl_on a peers) || fail "xferctl peers on a"
# shellcheck disable=SC2001 # every line
sed 's/^/    | /' <<<"$text"
grep -E '(^| )d( |$)' <<<"$text" | grep -q routed ||
	fail "xferctl peers (text) on a does not say 'routed' for d"

step "every xferd stops cleanly"
for n in a b c d; do
	stop_xferd "$n"
done
echo "pass: triangle mesh, links by shared subnet, routed otherwise"
