#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-classes.sh BUILD - traffic classes and tenant shares on the TCP
# link between two xferds -> a section of bench/results/<date>-classes.md
# and its part of BENCHMARKS.md.
#
# Two nodes (network namespaces a and b, a veth pair, one xferd each,
# from tests/netns/lib.sh); every client runs on a and writes into a
# region on b, so every byte crosses the link.
#  1. the p50/p99 of a 64 KiB write by one client, one at a time
#     (LAT_OPS of them): alone; then while another client pushes 256 MiB
#     writes back to back, with classes off (both default: today's
#     order) and on (latency and bulk); and the bulk client's
#     throughput alone, with classes off and on.
#  2. N_FAIR bulk clients of N_FAIR tenants of equal weight, FAIR_S
#     seconds: the bytes of each, Jain's fairness index.
#  3. two tenants of weights 1 and 3, FAIR_S seconds: the share of each.
# Needs root (namespaces, setpriv).
#
# env: LAT_OPS=2000, BULK_SIZE=256M, FAIR_S=8, N_FAIR=3, FAIR_SIZE=16M,
#      NO_REPORT=1 (only section.md), BENCH_REPORT, BENCH_SUMMARY.
set -uo pipefail

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "bench-classes: no build dir '$1'" >&2; exit 1; }
LAT_OPS=${LAT_OPS:-2000}
BULK_SIZE=${BULK_SIZE:-256M}
FAIR_S=${FAIR_S:-8}
N_FAIR=${N_FAIR:-3}
FAIR_SIZE=${FAIR_SIZE:-16M}
HEADING="## Classes and tenants on the TCP link"
MiB=1048576

export XFERD_BIN="$BUILD/xferd" XFERCTL_BIN="$BUILD/xferctl" \
	XFER_BUILD="$BUILD" XFER_ROOT="$ROOT" XFER_TEST_TOOLS="$BUILD/test-tools"
# shellcheck source-path=SCRIPTDIR source=../tests/netns/lib.sh
. "$ROOT/tests/netns/lib.sh"
BENCH_TMP=$TMP
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$ROOT/bench/bench-lib.sh"
TMP=$BENCH_TMP
OUT="$BUILD/bench/classes-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT/raw"
note_command "bench/bench-classes.sh $1"

size_bytes() { numfmt --from=iec "$1"; }
BULK_B=$(size_bytes "$BULK_SIZE") FAIR_B=$(size_bytes "$FAIR_SIZE")
REGION=$((BULK_B + FAIR_B * 8 + 64 * MiB))

tenants=()
for i in $(seq 1 "$N_FAIR"); do tenants+=("tenant=eq$i weight=1 uid=$((1100 + i))"); done
tenants+=("tenant=w1 weight=1 uid=1201" "tenant=w3 weight=3 uid=1203")

topo_two
start_xferd b b 10.0.1.2
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474 "${tenants[@]}"
chmod 0755 "$TMP"
chmod 0666 "${XD_SOCK[a]}"
serve_start b tgt --name tgt --size $REGION --kind memfd

# bg_as TAG UID ARGS...: xnode on a as UID, in the background.
bg_as() {
	local tag=$1 uid=$2
	shift 2
	node_uid a "$uid"
	_nd_bg_start "$tag" "${ND_ENTER[@]}" "$XNODE" "$@" \
		--socket "${XD_SOCK[a]}"
}
# lat_stats FILE: "p50 p99" of complete_us - submit_us, in us.
lat_stats() {
	awk '/^op=.* result=[0-9]/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print v["complete_us"] - v["submit_us"] }' "$1" | sort -n |
	awk '{ d[++n] = $1 }
	END { if (!n) { print "- -"; exit }
		p50 = int(n * 0.5 + 0.999); p99 = int(n * 0.99 + 0.999)
		printf "%d %d\n", d[p50 < 1 ? 1 : p50], d[p99 < 1 ? 1 : p99] }'
}
# bytes_rate FILE SIZE: MB/s of the completed ops between the first
# submission and the last completion.
bytes_rate() {
	awk -v sz="$2" '/^op=.* result=[0-9]/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (!t0 || v["submit_us"] < t0) t0 = v["submit_us"]
		if (v["complete_us"] > t1) t1 = v["complete_us"]; n++ }
	END { if (n < 2 || t1 <= t0) print "-"; else printf "%.0f\n", n * sz / (t1 - t0) }' "$1"
}
ops_of() { grep -c '^op=.* result=[0-9]' "$TMP/bg-$1.out"; }

lat_run() { # TAG CLASS: LAT_OPS writes of 64 KiB, one at a time
	local cls=()
	[ "$2" = default ] || cls=(--class "$2")
	xnode_ok a write --lookup b/tgt --size 65536 --offset $((BULK_B + 8 * FAIR_B)) \
		--seed 7 --kind memfd --repeat "$LAT_OPS" "${cls[@]}" >/dev/null
	cp "$LAST_OUT" "$OUT/raw/lat-$1.out"
	lat_stats "$OUT/raw/lat-$1.out"
}
bulk_start() { # TAG CLASS
	local cls=()
	[ "$2" = default ] || cls=(--class "$2")
	bg_as "$1" 0 write --lookup b/tgt --size "$BULK_B" --offset 0 --seed 8 \
		--kind memfd --repeat 0 "${cls[@]}"
	bg_wait_line "$1" '^op=1 result=' 120
}
bulk_stop() { # TAG: MB/s
	bg_stop "$1"
	cp "$TMP/bg-$1.out" "$OUT/raw/$1.out"
	bytes_rate "$OUT/raw/$1.out" "$BULK_B"
}

step "1. a 64 KiB write's latency, alone and behind 256 MiB bulk writes"
read -r idle50 idle99 < <(lat_run idle default)
bulk_start bulk-alone default; sleep 5; bulk_alone=$(bulk_stop bulk-alone)
bulk_start bulk-off default; read -r off50 off99 < <(lat_run off default)
bulk_off=$(bulk_stop bulk-off)
bulk_start bulk-on bulk; read -r on50 on99 < <(lat_run on latency)
bulk_on=$(bulk_stop bulk-on)
bulk_start bulk-alone-on bulk; sleep 5; bulk_alone_on=$(bulk_stop bulk-alone-on)
note "idle $idle50/$idle99 us, off $off50/$off99 us, on $on50/$on99 us; bulk alone $bulk_alone, off $bulk_off, on $bulk_on, alone as bulk $bulk_alone_on MB/s"

step "2. $N_FAIR equal bulk tenants, $FAIR_S s"
for i in $(seq 1 "$N_FAIR"); do
	bg_as "eq$i" $((1100 + i)) write --lookup b/tgt --size "$FAIR_B" \
		--offset $((BULK_B + (i - 1) * FAIR_B)) --seed $((20 + i)) \
		--kind memfd --repeat 0 --depth 8 --class bulk
done
sleep "$FAIR_S"
eq=()
for i in $(seq 1 "$N_FAIR"); do bg_stop "eq$i"; cp "$TMP/bg-eq$i.out" "$OUT/raw/"; eq+=("$(ops_of "eq$i")"); done
jain=$(printf '%s\n' "${eq[@]}" | awk '{ s += $1; q += $1 * $1; n++ } END { if (q) printf "%.3f", s * s / (n * q); else print "-" }')
note "ops of $FAIR_SIZE: ${eq[*]}; Jain $jain"

step "3. tenants of weights 1 and 3, $FAIR_S s"
bg_as w1 1201 write --lookup b/tgt --size "$FAIR_B" --offset $((BULK_B + 4 * FAIR_B)) \
	--seed 31 --kind memfd --repeat 0 --depth 8 --class bulk
bg_as w3 1203 write --lookup b/tgt --size "$FAIR_B" --offset $((BULK_B + 5 * FAIR_B)) \
	--seed 33 --kind memfd --repeat 0 --depth 8 --class bulk
sleep "$FAIR_S"
bg_stop w1; bg_stop w3
cp "$TMP/bg-w1.out" "$TMP/bg-w3.out" "$OUT/raw/"
w1=$(ops_of w1) w3=$(ops_of w3)
ratio=$(awk -v a="$w1" -v b="$w3" 'BEGIN { if (a) printf "%.2f", b / a; else print "-" }')
note "w1 $w1, w3 $w3 ops of $FAIR_SIZE: 1:$ratio"

machine="$(machine_cpu 2>/dev/null || cpu_model), $(nproc) CPUs, $(os_name)"
{
	echo "$HEADING"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $machine; xferd $(tree_version); two xferds in network namespaces over a veth pair, every client on a writing to b. \`bench/bench-classes.sh\` (LAT_OPS=$LAT_OPS, BULK_SIZE=$BULK_SIZE, FAIR_S=$FAIR_S)."
	[ "$(nproc)" -le 2 ] && { echo; echo "**$(nproc) CPUs**: two progress threads, the clients and the kernel's veth share them, which hides much of what scheduling gains; the 16-core run is to come."; }
	echo
	echo "| a 64 KiB write, one at a time | p50 µs | p99 µs |"
	echo "|---|---|---|"
	echo "| alone | $idle50 | $idle99 |"
	echo "| behind $BULK_SIZE writes, classes off | $off50 | $off99 |"
	echo "| behind $BULK_SIZE writes, classes on (latency vs bulk) | $on50 | $on99 |"
	echo
	echo "| the bulk client ($BULK_SIZE writes back to back) | MB/s |"
	echo "|---|---|"
	echo "| alone, default class | $bulk_alone |"
	echo "| alone, bulk class | $bulk_alone_on |"
	echo "| beside the latency client, classes off | $bulk_off |"
	echo "| beside the latency client, classes on | $bulk_on |"
	echo
	echo "| shares ($FAIR_S s, writes of $FAIR_SIZE, 8 in flight each) | result |"
	echo "|---|---|"
	echo "| $N_FAIR tenants of weight 1: writes each | ${eq[*]} |"
	echo "| Jain's fairness index | $jain |"
	echo "| tenants of weights 1 and 3: writes | $w1 : $w3 (1 : $ratio) |"
} >"$OUT/section.md"
cat "$OUT/section.md"
if [ -z "${NO_REPORT:-}" ]; then
	REPORT=${BENCH_REPORT:-$ROOT/$RESULTS_DIR/$(date -u +%F)-classes.md}
	put_section "$HEADING" "$OUT/section.md" "$REPORT"
	put_summary bench-classes.sh "Classes and tenants (TCP link)" "$REPORT" \
		"$OUT/section.md" "$HEADING" "$machine" "bench/bench-classes.sh build"
fi
echo PASS
