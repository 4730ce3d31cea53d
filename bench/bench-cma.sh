#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-cma.sh BUILD - same-node copies with xfer_reg'd (malloc) memory:
# on the progress thread (cma_split_bytes=off) against split across the
# copy workers (the default), beside memcpy, interleaved in one run.
#
# Each of PASSES passes starts xferd once per setting (progress thread on
# CPU 0, the client on CPU 1) and runs xferbench bw for malloc -> malloc
# and memfd -> malloc writes at SIZES, and xferbench memcpy of malloc'd
# memory.  Prints the medians (GB/s) and the ratios split / off and
# split / memcpy, into BUILD/bench-cma.md too.
#
# env: PASSES=3, SIZES=16M,256M, WORKERS=auto (copy_workers), TIME_MS=300,
#      REPS=5
set -uo pipefail

BUILD=$(cd "${1:?usage: $0 BUILD}" && pwd) || exit 1
PASSES=${PASSES:-3}
SIZES=${SIZES:-16M,256M}
WORKERS=${WORKERS:-auto}
TIME_MS=${TIME_MS:-300}
REPS=${REPS:-5}
TMP=$(mktemp -d /tmp/xferbench-cma.XXXXXX)
DPID=''

cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# one SETTING PASS: an xferd with cma_split_bytes=SETTING, both kinds.
one() {
	local sock="$TMP/$1.sock" kind
	"$BUILD/xferd" -s "$sock" -o listen=off -o progress_cpu=0 -l warn \
		-o "cma_split_bytes=$1" -o "copy_workers=$WORKERS" \
		>"$TMP/xferd.$1.log" 2>&1 &
	DPID=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
	for kind in malloc memfd; do
		"$BUILD/xferbench" --socket "$sock" bw --kind malloc \
			--local-kind "$kind" --sizes "$SIZES" --time-ms "$TIME_MS" \
			--reps "$REPS" 2>&1 |
			awk -v s="$1" -v k="$kind" '/^RES xferbench_bw .* bw_median/ {
				print s, k "->malloc", $4, $6 }' >>"$TMP/res"
	done
	kill "$DPID"
	wait "$DPID" 2>/dev/null
	DPID=''
}

for pass in $(seq "$PASSES"); do
	echo "== pass $pass"
	one off
	one 8M
	"$BUILD/xferbench" memcpy --kind malloc --sizes "$SIZES" \
		--time-ms "$TIME_MS" --reps "$REPS" 2>&1 |
		awk '/^RES memcpy .* bw_median/ {
			print "memcpy", "malloc", $4, $6 }' >>"$TMP/res"
done

median() { # SETTING CASE SIZE
	awk -v s="$1" -v c="$2" -v z="$3" '$1 == s && $2 == c && $3 == z { print $4 }' \
		"$TMP/res" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

{
	echo "| copy | size | on the progress thread | split (cma_split_bytes=8M) | memcpy | split / off | split / memcpy |"
	echo "|---|---|---:|---:|---:|---:|---:|"
	for c in "malloc->malloc" "memfd->malloc"; do
		for z in ${SIZES//,/ }; do
			zz=$(awk -v z="$z" '$3 ~ z { print $3; exit }' "$TMP/res")
			[ -n "$zz" ] || continue
			off=$(median off "$c" "$zz") on=$(median 8M "$c" "$zz")
			mc=$(median memcpy malloc "$zz")
			awk -v c="$c" -v z="$zz" -v a="$off" -v b="$on" -v m="$mc" 'BEGIN {
				printf "| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
					c, z, a, b, m, b / a, b / m }'
		done
	done
	echo
	echo "GB/s, medians of $PASSES passes, copy_workers=$WORKERS, $(nproc) CPUs."
} | tee "$BUILD/bench-cma.md"
