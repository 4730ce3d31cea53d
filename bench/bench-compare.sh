#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-compare.sh OLD_BUILD NEW_BUILD - two builds of xferd side by side
# in one run, interleaved, for a change that must not move the numbers.
#
# Same node: each pass starts the old xferd and then the new one (CPU 0
# for the progress thread, the client on CPU 1) and runs the same
# xferbench commands against each: write bandwidth (memfd) at 64 KiB,
# 1 MiB and 16 MiB, CMA (malloc) at 16 MiB, the 8 B round trip, 64 B
# batched rate.  Between nodes (TCP over veth, network namespaces): the
# same for each build with bench/bench-tcp.sh (no UCX, no iperf3).  Prints
# a table of medians and the new/old ratio; writes it to
# NEW_BUILD/bench/compare-<timestamp>.md too (a build output: a table
# worth keeping goes into bench/results/, beside the day's file, as
# bench/results/2026-11-24-compare.md).  Each build runs with its own
# xferbench.
#
# env: PASSES=3, TIME_MS=300, REPS=5, NO_TCP=1 skips the two-node part.
set -uo pipefail

OLD=$(cd "${1:?usage: $0 OLD_BUILD NEW_BUILD}" && pwd) || exit 1
NEW=$(cd "${2:?usage: $0 OLD_BUILD NEW_BUILD}" && pwd) || exit 1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PASSES=${PASSES:-3}
TIME_MS=${TIME_MS:-300}
REPS=${REPS:-5}
TMP=$(mktemp -d /tmp/xferbench-cmp.XXXXXX)
DPID=''

cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# same_node TAG BUILD PASS: one xferd of BUILD, every same-node command.
same_node() {
	local tag=$1 b=$2 pass=$3 sock="$TMP/$1.sock"
	"$b/xferd" -s "$sock" -o progress_cpu=0 -o listen=off -l warn \
		>"$TMP/$tag.xferd.log" 2>&1 &
	DPID=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
	local xb=("$b/xferbench" --socket "$sock" --cpu 1)
	{
		"${xb[@]}" bw --kind memfd --op write --sizes 64K,1M,16M \
			--time-ms "$TIME_MS" --reps "$REPS"
		"${xb[@]}" bw --kind malloc --op write --sizes 16M \
			--time-ms "$TIME_MS" --reps "$REPS"
		"${xb[@]}" lat --size 8 --iters 100000
		"${xb[@]}" rate --size 64 --batch 64 --time-ms 1000 --reps 3
	} 2>&1 | grep '^RES ' | sed "s/^RES /RES $tag /" >>"$TMP/all.res"
	kill "$DPID"
	wait "$DPID" 2>/dev/null
	DPID=''
	rm -f "$sock"
	echo "pass $pass: $tag same node done" >&2
}

for pass in $(seq "$PASSES"); do
	same_node old "$OLD" "$pass"
	same_node new "$NEW" "$pass"
done

if [ -z "${NO_TCP:-}" ]; then
	for pass in 1 2; do
		for tag in old new; do
			b=$OLD; [ $tag = new ] && b=$NEW
			NO_UCX=1 NO_IPERF=1 NO_REPORT=1 PASSES=1 \
				"$ROOT/bench/bench-tcp.sh" "$b" >"$TMP/tcp.$tag.log" 2>&1
			dir=$(ls -d "$b"/bench/tcp-* 2>/dev/null | tail -1)
			cat "$dir"/raw/pass*.res 2>/dev/null | grep '^RES ' |
				sed "s/^RES /RES $tag tcp_/" >>"$TMP/all.res"
			echo "pass $pass: $tag two nodes done" >&2
		done
	done
fi

# Medians per (bench variant param metric unit), old and new side by side.
report=$(awk '
	{ key = $3 " " $4 " " $5 " " $6; unit[key] = $8
	  v[$2, key, ++n[$2, key]] = $7; keys[key] = 1 }
	function median(tag, key,   m, i, j, t, a) {
		m = n[tag, key]; if (!m) return ""
		for (i = 1; i <= m; i++) a[i] = v[tag, key, i]
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
			if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	END {
		for (key in keys) {
			o = median("old", key); w = median("new", key)
			if (o == "" || w == "") continue
			printf "| %s | %.4g %s | %.4g %s | %.2f |\n", key, o, unit[key],
				w, unit[key], (o > 0 ? w / o : 0)
		}
	}' "$TMP/all.res" | sort)
report=$(printf '%s\n%s\n%s' "| benchmark | before | after | after/before |" \
	"|---|---|---|---|" "$report")
echo "$report"
mkdir -p "$NEW/bench"
echo "$report" >"$NEW/bench/compare-$(date +%Y%m%d-%H%M%S).md"
