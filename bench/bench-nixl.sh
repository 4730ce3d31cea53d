#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-nixl.sh [BUILD] - what NIXL's XFERD backend costs: nixlbench
# (NIXL's benchmark, scripts/nixlbench-build.sh) with backend XFERD,
# DRAM -> DRAM, beside xferbench's own numbers for the same sizes and the
# same memory (nixlbench's DRAM is malloc'd, so xfer_reg and CMA on one
# node: xferbench --kind malloc), on one node and between two nodes
# (network namespaces a and b, one xferd each, TCP over a veth pair).
#
# nixlbench posts one request at a time (its pipeline depth 1), each a
# single descriptor with a notification, and waits for it; xferbench runs
# with --window 1, one transfer in flight, so the ratio is the plugin's
# (and NIXL's) overhead over libxfer direct.  Goal: >= 0.95x.  NIXL and
# nixlbench are a release build (XFERD_NIXL_BUILDTYPE=release, a cache
# tree of their own; the tests use a debug one, whose status calls cost
# more than the plugin's).
#
# Passes interleave both benchmarks size by size (each size's pair of
# measurements a few seconds apart: the load of a shared machine changes
# by the minute).  The report goes into the day's file
# under bench/results/ (section "NIXL's XFERD backend") and its table
# into BENCHMARKS.md between the markers "bench-nixl.sh"
# (bench/bench-lib.sh); NO_REPORT=1 writes neither.  Raw output in
# BUILD/bench/nixl-*/.  Runs as root (namespaces); without `ip netns` the
# two-node half is left out with a warning.
#
# env: PASSES=3, SIZES="4K 64K 1M 16M", OPS="WRITE READ", ITERS=1000
#      (nixlbench's num_iter; its sizes above 1 MiB run ITERS/16),
#      TIME_MS=300, REPS=5 (xferbench)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd) || exit 1
PASSES=${PASSES:-3}
SIZES=${SIZES:-"4K 64K 1M 16M"}
OPS=${OPS:-"WRITE READ"}
ITERS=${ITERS:-1000}
TIME_MS=${TIME_MS:-300}
REPS=${REPS:-5}
OUT="$BUILD/bench/nixl-$(date +%Y%m%d-%H%M%S)"
TMP=$(mktemp -d /tmp/bench-nixl.XXXXXX)
NS_A=xfernb-$$-a NS_B=xfernb-$$-b
PIDS=()
mkdir -p "$OUT/raw"
# shellcheck source=bench/bench-lib.sh
. "$ROOT/bench/bench-lib.sh"

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

export XFERD_NIXL_BUILDTYPE=${XFERD_NIXL_BUILDTYPE:-release}
NIXL_DIR=$("$ROOT/scripts/nixl-build.sh" | tail -n 1) || exit 1
NIXLBENCH=$("$ROOT/scripts/nixlbench-build.sh" | tail -n 1) || exit 1
[ -f "$BUILD/nixl/libplugin_XFERD.so" ] ||
	{ log "no $BUILD/nixl/libplugin_XFERD.so: make nixl-plugin"; exit 1; }
export NIXL_PLUGIN_DIR=$BUILD/nixl
export LD_LIBRARY_PATH=$NIXL_DIR/prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

bytes() { numfmt --from=iec "$1"; }
label() { case $1 in *K) echo "${1%K}KiB" ;; *M) echo "${1%M}MiB" ;; *) echo "${1}B" ;; esac; }

# in_ns NS CMD...: CMD in namespace NS ("" for this one).
in_ns() {
	local ns=$1
	shift
	if [ -n "$ns" ]; then ip netns exec "$ns" "$@"; else "$@"; fi
}

# spawn NS CMD...: CMD in namespace NS in the background, $! its own pid
# (ip netns exec execs CMD), not a subshell's: killing a subshell would
# leave CMD running, and waiting for it would not wait for CMD.
spawn() {
	local ns=$1
	shift
	if [ -n "$ns" ]; then ip netns exec "$ns" "$@" & else "$@" & fi
}

# xferd_start TAG NS [OPT...]: an xferd on $TMP/TAG.sock.
xferd_start() {
	local tag=$1 ns=$2
	shift 2
	rm -f "$TMP/$tag.sock"
	spawn "$ns" "$BUILD/xferd" -s "$TMP/$tag.sock" -o socket_group=none -l warn \
		"$@" >>"$OUT/raw/xferd-$tag.log" 2>&1
	PIDS+=($!)
	for _ in $(seq 200); do [ -S "$TMP/$tag.sock" ] && return 0; sleep 0.05; done
	log "xferd $tag did not start (see $OUT/raw/xferd-$tag.log)"
	exit 1
}

# Every xferd started, stopped and waited for by its pid: the next pass
# binds the same addresses (10.0.9.1:7474 in namespace a).
stop_all() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
	PIDS=()
}

# nixlbench_pair PASS WHERE OP SIZE NS_I SOCK_I NS_T SOCK_T ADDR: the
# initiator (which binds ADDR, rank 0) then the target, one size; the
# initiator's table as RES lines.
nixlbench_pair() {
	local pass=$1 where=$2 op=$3 size=$4 nsi=$5 socki=$6 nst=$7 sockt=$8 addr=$9
	local b port=$((20000 + RANDOM % 30000)) log=$OUT/raw/nixlbench-$where-$op-$size.pass$pass
	b=$(bytes "$size")
	local args=(--runtime_type=ASIO --asio_address="$addr" --asio_port="$port"
		--backend=XFERD --initiator_seg_type=DRAM --target_seg_type=DRAM
		--op_type="$op" --start_block_size="$b" --max_block_size="$b"
		--num_iter="$ITERS" --warmup_iter=$((ITERS / 10))
		--total_buffer_size=$((4 * b)))
	note_command "nixlbench ${args[*]}"
	spawn "$nsi" env XFERD_SOCKET="$socki" "$NIXLBENCH" "${args[@]}" >"$log.i" 2>&1
	local pi=$!
	for _ in $(seq 100); do grep -q "Waiting for all" "$log.i" && break; sleep 0.05; done
	spawn "$nst" env XFERD_SOCKET="$sockt" "$NIXLBENCH" "${args[@]}" >"$log.t" 2>&1
	local pt=$!
	wait "$pi" || warn "pass $pass: nixlbench $where $op $size initiator failed: $(tail -n 2 "$log.i")"
	wait "$pt" || warn "pass $pass: nixlbench $where $op $size target failed: $(tail -n 2 "$log.t")"
	awk -v w="$where" -v o="$(echo "$op" | tr A-Z a-z)" '
		$1 ~ /^[0-9]+$/ && $2 == 1 && NF >= 10 {
			s = $1; l = s >= 1048576 ? s / 1048576 "MiB" : s >= 1024 ? s / 1024 "KiB" : s "B"
			printf "RES nixlbench %s_%s %s bw %s GB/s\n", w, o, l, $3
			printf "RES nixlbench %s_%s %s lat %s us\n", w, o, l, $4 }' \
		"$log.i" >>"$OUT/raw/pass$pass.res"
}

# xferbench_run PASS WHERE OP SIZE NS XFERBENCH-ARGS...
xferbench_run() {
	local pass=$1 where=$2 op=$3 size=$4 ns=$5
	shift 5
	local raw=$OUT/raw/xferbench-$where-$op-$size.pass$pass
	local args=("$@" bw --kind malloc --op "$(echo "$op" | tr A-Z a-z)" --window 1
		--sizes "$size" --time-ms "$TIME_MS" --reps "$REPS")
	note_command "xferbench ${args[*]}"
	in_ns "$ns" "$BUILD/xferbench" "${args[@]}" >"$raw" 2>&1 ||
		warn "pass $pass: xferbench $where $op $size failed"
	awk -v w="$where" -v o="$(echo "$op" | tr A-Z a-z)" '
		/^RES xferbench_bw .* bw_median / { printf "RES xferbench %s_%s %s bw %s GB/s\n", w, o, $4, $6 }' \
		"$raw" >>"$OUT/raw/pass$pass.res"
}

TWO_NODES=1
netns_up() {
	ip netns add "$NS_A" && ip netns add "$NS_B" || return 1
	ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up &&
	ip link add to-b netns "$NS_A" type veth peer name to-a netns "$NS_B" &&
	ip -n "$NS_A" addr add 10.0.9.1/24 dev to-b && ip -n "$NS_B" addr add 10.0.9.2/24 dev to-a &&
	ip -n "$NS_A" link set to-b up && ip -n "$NS_B" link set to-a up
}
netns_up || { warn "no network namespaces here: one node only"; TWO_NODES=0; }

for (( pass = 1; pass <= PASSES; pass++ )); do
	log "pass $pass/$PASSES"
	probe "pass$pass"
	xferd_start one "" -o listen=off
	for op in $OPS; do
		for s in $SIZES; do
			nixlbench_pair "$pass" local "$op" "$s" "" "$TMP/one.sock" "" "$TMP/one.sock" 127.0.0.1
			xferbench_run "$pass" local "$op" "$s" "" --socket "$TMP/one.sock"
		done
	done
	stop_all
	[ "$TWO_NODES" = 1 ] || continue
	xferd_start a "$NS_A" -o listen=10.0.9.1:7474 -o node_name=a -o peer=10.0.9.2:7474
	xferd_start b "$NS_B" -o listen=10.0.9.2:7474 -o node_name=b -o peer=10.0.9.1:7474
	for op in $OPS; do
		for s in $SIZES; do
			nixlbench_pair "$pass" netns "$op" "$s" "$NS_A" "$TMP/a.sock" "$NS_B" "$TMP/b.sock" 10.0.9.1
			xferbench_run "$pass" netns "$op" "$s" "$NS_A" --socket "$TMP/a.sock" --target-socket "$TMP/b.sock"
		done
	done
	stop_all
done

for (( pass = 1; pass <= PASSES; pass++ )); do
	res_rows "$pass" "$OUT/raw/pass$pass.res"
done >"$OUT/all.tsv"

# The table: one row per (where, op, size).
table() {
	awk -v P="$PASSES" -v sizes="$SIZES" -v ops="$OPS" -v two="$TWO_NODES" "$BENCH_AWK"'
	function lb(s) { return s ~ /K$/ ? substr(s, 1, length(s) - 1) "KiB" : s ~ /M$/ ? substr(s, 1, length(s) - 1) "MiB" : s "B" }
	END {
		print "| where | op | size | nixlbench XFERD (GB/s) | xferbench malloc, window 1 (GB/s) | nixlbench ÷ xferbench | nixlbench latency (µs) | ≥ 0.95× |"
		print "|---|---|---|---:|---:|---:|---:|---|"
		nw = split(two ? "local netns" : "local", W, " ")
		no = split(tolower(ops), O, " "); ns = split(sizes, S, " ")
		for (w = 1; w <= nw; w++) for (o = 1; o <= no; o++) for (s = 1; s <= ns; s++) {
			v = W[w] "_" O[o] "|" lb(S[s])
			a = cell("nixlbench|" v "|bw", 1); b = cell("xferbench|" v "|bw", 1)
			r = ratio("nixlbench|" v "|bw", 1, "xferbench|" v "|bw", 1)
			g = gmed == "" ? "–" : goal(gmed >= 0.95)
			printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", W[w] == "local" ? "one node" : "two nodes (TCP)",
				O[o], lb(S[s]), a, b, r, cell("nixlbench|" v "|lat", 1), g
		}
	}' "$OUT/all.tsv"
}
table >"$OUT/table.md"
cat "$OUT/table.md"
log "raw output in $OUT"
[ "${NO_REPORT:-0}" = 1 ] && exit 0

HEADING="## NIXL's XFERD backend (nixlbench)"
MACHINE="$(machine_cpu), $(os_name)"
CMD="PASSES=$PASSES bench/bench-nixl.sh"
{
	echo "$HEADING"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $MACHINE; tree $(tree_version); \`$CMD\`."
	echo "nixlbench (NIXL 8770b655, $XFERD_NIXL_BUILDTYPE build, with tests/nixl/nixlbench-*.patch) XFERD DRAM → DRAM, one"
	echo "request of one descriptor at a time, each with a notification, beside xferbench"
	echo "\`bw --kind malloc --window 1\` (libxfer direct, one transfer in flight) on the same"
	echo "xferd(s). One node: CMA; two nodes: network namespaces, TCP over veth. Load while"
	echo "idle (busy %, load average) per pass: $(awk '$5 == "busy_pct" { printf "%s%s%%", n++ ? ", " : "", $6 } $5 == "loadavg1" { printf " (%s)", $6 }' "$OUT/raw/probe.res")."
	echo
	echo "### Results"
	echo
	cat "$OUT/table.md"
	echo
	warnings_md
	echo "Commands:"
	echo
	sed 's/^/    /' "$OUT/raw/commands.txt"
} >"$OUT/section.md"
RUNFILE=$(results_file)
put_section "$HEADING" "$OUT/section.md" "$RUNFILE"
put_summary "bench-nixl.sh" "NIXL's XFERD backend (nixlbench)" "$RUNFILE" "$OUT/section.md" \
	"### Results" "$MACHINE" "$CMD"
