#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-stream.sh BUILD - a stream (xfer_stream_*, examples/xferstream)
# against plain back-to-back WRITEs of the same bytes, in the same run.
#
# Two network namespaces a and b joined by a veth pair stand in for two
# nodes, one xferd in each.  Each of PASSES passes runs, on one node (both
# processes on b) and between the nodes (the receiver on b, the sender on
# a, the TCP path):  xferstream recv (2 slots of SIZE, memfd) and
# xferstream send --plain, which moves COUNT x SIZE as plain WRITEs into
# the same slots (one in flight, then two) before and after it streams
# COUNT messages of SIZE through the slots (the plain figures are the
# mean of the two runs).  Prints the medians (MB/s, 1e6
# bytes a second) of the sender's and the receiver's stream bandwidth and
# of the plain WRITEs, and the ratio stream / plain, into
# BUILD/bench-stream.md.  Needs root (namespaces).
#
# env: PASSES=5, COUNT=100, SIZE=16777216, RUN_TIMEOUT=120 (s, each process)
set -uo pipefail

BUILD=$(cd "${1:?usage: $0 BUILD}" && pwd) || exit 1
PASSES=${PASSES:-5}
COUNT=${COUNT:-100}
SIZE=${SIZE:-16777216}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
XFERD=$BUILD/xferd
XSTREAM=$BUILD/xferstream
TMP=$(mktemp -d /tmp/xferbench-stream.XXXXXX)
NS_A=xbstr-$$-a NS_B=xbstr-$$-b
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" -eq 0 ] || { echo "bench-stream: needs root (namespaces)" >&2; exit 1; }
[ -x "$XSTREAM" ] || { echo "bench-stream: $XSTREAM not built" >&2; exit 1; }

ip netns add "$NS_A" && ip netns add "$NS_B" || exit 1
ip link add name to-b netns "$NS_A" type veth peer name to-a netns "$NS_B" || exit 1
ip -n "$NS_A" addr add 10.0.9.1/24 dev to-b
ip -n "$NS_B" addr add 10.0.9.2/24 dev to-a
for ns in "$NS_A" "$NS_B"; do
	ip -n "$ns" link set lo up
	ip netns exec "$ns" sh -c 'for f in all default; do
		echo 1 >/proc/sys/net/ipv6/conf/$f/disable_ipv6; done' 2>/dev/null
done
ip -n "$NS_A" link set to-b up
ip -n "$NS_B" link set to-a up

start_xferd() { # NS NAME ADDR [ARGS...]
	ip netns exec "$1" "$XFERD" -s "$TMP/$2.sock" -l info -o "node_name=$2" \
		-o "listen=$3:7474" "${@:4}" >"$TMP/$2.log" 2>&1 &
	pids+=("$!")
	for _ in $(seq 200); do
		[ -S "$TMP/$2.sock" ] && ip netns exec "$1" ss -Hltn 'sport = :7474' |
			grep -q . && return 0
		sleep 0.05
	done
	echo "bench-stream: xferd $2 did not start: $(tail -n 3 "$TMP/$2.log")" >&2
	exit 1
}
start_xferd "$NS_B" b 10.0.9.2 -o peer=10.0.9.1:7474
start_xferd "$NS_A" a 10.0.9.1 -o peer=10.0.9.2:7474

# one_pass WHERE SENDER_NS SENDER_SOCK PASS: one recv/send pair; appends
# "stream_send stream_recv plain1 plain2" (MB/s) to $TMP/WHERE.txt.
one_pass() {
	local where=$1 sns=$2 ssock=$3 pass=$4 name=bench$4$1
	local r=$TMP/$where-$pass-recv.out s=$TMP/$where-$pass-send.out
	timeout -k 5 "$RUN_TIMEOUT" ip netns exec "$NS_B" "$XSTREAM" recv \
		--socket "$TMP/b.sock" --name "$name" --count "$COUNT" \
		--size "$SIZE" --slots 2 >"$r" 2>&1 &
	local rpid=$!
	for _ in $(seq 200); do grep -q '^recv: 2 slots' "$r" && break; sleep 0.05; done
	timeout -k 5 "$RUN_TIMEOUT" ip netns exec "$sns" "$XSTREAM" send \
		--socket "$ssock" --name "b/$name" --count "$COUNT" --plain >"$s" 2>&1
	local rc=$?
	wait "$rpid" || rc=1
	if [ $rc -ne 0 ]; then
		echo "bench-stream: $where pass $pass failed:" >&2
		cat "$s" "$r" >&2
		exit 1
	fi
	awk -v r="$(sed -nE 's/^recv: .* s: ([0-9.]+) MB\/s$/\1/p' "$r")" '
		/^send: plain WRITEs, mean/ { p1 = $9; p2 = $14 }
		/^send: [0-9]+ messages/ { st = $(NF-1) }
		END { print st, r, p1, p2 }' "$s" >>"$TMP/$where.txt"
	sed 's/^/  /' "$s" "$r"
}

for pass in $(seq "$PASSES"); do
	echo "== pass $pass: one node"
	one_pass node "$NS_B" "$TMP/b.sock" "$pass"
	echo "== pass $pass: two nodes (tcp)"
	one_pass tcp "$NS_A" "$TMP/a.sock" "$pass"
done

median() { # column of $TMP/$1.txt
	awk -v c="$2" '{ print $c }' "$TMP/$1.txt" | sort -g |
		awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

{
	echo "| where | stream, sender | stream, receiver | plain WRITEs, 1 in flight | plain WRITEs, 2 in flight | stream / plain (1) | stream / plain (2) |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	for where in node tcp; do
		st=$(median "$where" 1) rv=$(median "$where" 2)
		p1=$(median "$where" 3) p2=$(median "$where" 4)
		label=$([ "$where" = node ] && echo "one node (memcpy)" || echo "two nodes (tcp over veth)")
		awk -v l="$label" -v st="$st" -v rv="$rv" -v p1="$p1" -v p2="$p2" 'BEGIN {
			printf "| %s | %.0f | %.0f | %.0f | %.0f | %.2f | %.2f |\n",
				l, st, rv, p1, p2, st / p1, st / p2 }'
	done
	echo
	echo "MB/s (1e6 bytes a second), medians of $PASSES passes; $COUNT messages of $SIZE bytes through 2 slots, the plain WRITEs the same $COUNT x $SIZE into the same slots in the same run."
} | tee "$BUILD/bench-stream.md"
