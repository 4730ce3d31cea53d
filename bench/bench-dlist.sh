#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-dlist.sh - prepared lists on one node: dlistbench (bench/dlistbench.c)
# against a private xferd, for memfd regions (path memcpy), a memfd
# source into xfer_reg'd malloc memory (path cma) and malloc memory at
# both ends (cma through xferd's bounce buffer), each beside the same
# blocks as linked SQEs and one memcpy of the same bytes in the same run.
#
#   bench/bench-dlist.sh [BUILD]
#
# xferd's progress thread is pinned to CPU $XFERD_CPU (default 0) and
# dlistbench to $BENCH_CPU (default 1), so that the copy and the client
# do not share a core.  Prints the machine, the noise (load average)
# before and after, and dlistbench's tables.
#
# env: BLOCKS=1000, SIZES=4K,64K, REPS=7, TIME_MS=500, XFERD_CPU, BENCH_CPU
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
BUILD=$(cd "${1:-$ROOT/build}" && pwd -P) || exit 1
BLOCKS=${BLOCKS:-1000} SIZES=${SIZES:-4K,64K} REPS=${REPS:-7}
TIME_MS=${TIME_MS:-500} XFERD_CPU=${XFERD_CPU:-0} BENCH_CPU=${BENCH_CPU:-1}
[ -x "$BUILD/dlistbench" ] || { echo "build first (make)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/xferd-bench-dlist.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$TMP"
}
trap cleanup EXIT

echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1)," \
	"$(nproc) CPUs online"
echo "kernel: $(uname -r); $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "xferd: $("$BUILD/xferd" --version 2>&1 | head -1)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

"$BUILD/xferd" -s "$TMP/xferd.sock" -l warn -o listen=off \
	-o progress_cpu="$XFERD_CPU" >"$TMP/xferd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	[ -S "$TMP/xferd.sock" ] && break
	sleep 0.1
done
[ -S "$TMP/xferd.sock" ] || { cat "$TMP/xferd.log"; exit 1; }

for kind in memfd memfd-malloc malloc; do
	echo "== $BLOCKS blocks, $kind, xferd on CPU $XFERD_CPU," \
		"dlistbench on CPU $BENCH_CPU"
	taskset -c "$BENCH_CPU" "$BUILD/dlistbench" --socket "$TMP/xferd.sock" \
		--kind "$kind" --blocks "$BLOCKS" --sizes "$SIZES" \
		--reps "$REPS" --time-ms "$TIME_MS" | grep -v '^RES' || exit 1
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
