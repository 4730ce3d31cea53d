#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-classes.sh BUILD - traffic classes and tenant shares, on one node
# and on the TCP link between two xferds -> a section of
# bench/results/<date>-classes.md and its part of BENCHMARKS.md.
#
# One node: one xferd (n) and clients on malloc'd, xfer_reg'd memory,
# so every byte moves by CMA; the target is a region of another client
# (an owner).  The bulk writes go in parts through the copy workers
# (from cma_split_bytes up, with two workers or more), which start
# latency jobs first; the 64 KiB writes are the progress thread's.
# Over the link: xferd a and b; every client on a writes into a memfd
# region on b, so every byte crosses the link.
#  1. (both) the p50/p99 of a 64 KiB write by one client, one at a time
#     (LAT_OPS of them): alone; then while another client pushes
#     BULK_SIZE writes back to back, with classes off (both default:
#     today's order) and on (latency and bulk); and the bulk client's
#     throughput alone (BULK_S seconds) and beside the latency client.
#  2. (link) N_FAIR bulk clients of N_FAIR tenants of equal weight,
#     FAIR_S seconds: the writes of each, Jain's fairness index.
#  3. (link) two tenants of weights 1 and 3, FAIR_S seconds: the share
#     of each.
#  4. (link) step 1's latency client behind bulk with classes on, both
#     xferds restarted with link_lanes=off: the latency class on the
#     link itself, under its own scheduling, without the lane
#     (transport/link_lane.c) - what the lane adds.
#
# Where the nodes live (NETNS):
#   1     network namespaces a and b and a veth pair (tests/netns/lib.sh);
#         n lives in a.  Needs ip, ss and jq.
#   0     all three xferds in this namespace, a and b on 127.0.0.1, each
#         listening on a port of its own and the other's peer= (as
#         bench-kv-link.sh does): for a machine without iproute2.
#   auto  (default) 1 where ip, ss and jq are there and a namespace can
#         be made, else 0.
# The shared part (clients, measurements, report) is the same in both;
# the report says which ran.  Tenants are keyed by uid: their clients
# run as uids 1101... (setpriv, or python3 where util-linux's setpriv is
# missing), so this needs root.  What the machine lacks is said at the
# start.
#
# env: NETNS=auto, LAT_OPS=2000, BULK_SIZE=256M, BULK_S=5, FAIR_S=8,
#      N_FAIR=3, FAIR_SIZE=16M, COPY_WORKERS (n's; default xferd's,
#      at least 2), PIN=auto (progress threads of a/n and b on CPUs 2
#      and 3: on with 6 CPUs or more), NO_REPORT=1 (only section.md),
#      BENCH_REPORT, BENCH_SUMMARY.  Short: LAT_OPS=500 BULK_S=3 FAIR_S=4.
set -uo pipefail

BUILD_ARG=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD_ARG" 2>/dev/null && pwd) || { echo "bench-classes: no build dir '$BUILD_ARG'" >&2; exit 1; }
LAT_OPS=${LAT_OPS:-2000}
BULK_SIZE=${BULK_SIZE:-256M}
BULK_S=${BULK_S:-5}
FAIR_S=${FAIR_S:-8}
N_FAIR=${N_FAIR:-3}
FAIR_SIZE=${FAIR_SIZE:-16M}
NETNS=${NETNS:-auto}
PIN=${PIN:-auto}
MiB=1048576

# --- what the machine has ------------------------------------------------

lacks=()
for t in awk sort numfmt mktemp; do
	command -v "$t" >/dev/null || lacks+=("$t")
done
[ "$(id -u)" -eq 0 ] || lacks+=("root (clients of other uids, namespaces)")
if command -v setpriv >/dev/null; then
	AS_UID=setpriv
elif command -v python3 >/dev/null; then
	AS_UID=python3
else
	AS_UID=
	lacks+=("setpriv (util-linux) or python3 (clients of other uids)")
fi
for b in xferd xferctl test-tools/xnode; do
	[ -x "$BUILD/$b" ] || lacks+=("$BUILD/$b (make all; tests/gpu/device.sh builds it too)")
done
if [ ${#lacks[@]} -gt 0 ]; then
	echo "bench-classes: this machine lacks:" >&2
	printf '  %s\n' "${lacks[@]}" >&2
	exit 1
fi

# netns_lacks: why network namespaces cannot be used here (empty: they can).
netns_lacks() {
	local t miss=()
	for t in ip ss jq; do
		command -v "$t" >/dev/null || miss+=("$t")
	done
	if [ ${#miss[@]} -gt 0 ]; then
		echo "no ${miss[*]}"
	elif ! ip netns add "xferb-probe-$$" 2>/dev/null; then
		echo "ip netns add is not permitted"
	else
		ip netns del "xferb-probe-$$"
	fi
}
case $NETNS in
auto)
	why=$(netns_lacks)
	if [ -z "$why" ]; then
		NETNS=1
	else
		NETNS=0
		echo "bench-classes: $why: the xferds run on 127.0.0.1 (NETNS=0)"
	fi
	;;
0 | 1) ;;
*) echo "bench-classes: NETNS is 0, 1 or auto" >&2; exit 2 ;;
esac

export XFERD_BIN="$BUILD/xferd" XFERCTL_BIN="$BUILD/xferctl" \
	XFER_BUILD="$BUILD" XFER_ROOT="$ROOT" XFER_TEST_TOOLS="$BUILD/test-tools"

# --- where the nodes live: the only part that differs by mode ------------
# Each mode provides: link_up (xferd b, then xferd a with the options
# given), node_up KV... (xferd n, no TCP listener) and _nd_enter (for
# tests/lib/nodes.sh), and sets LINK_DESC.

if [ "$NETNS" = 1 ]; then
	# shellcheck source-path=SCRIPTDIR source=../tests/netns/lib.sh
	. "$ROOT/tests/netns/lib.sh"
	LINK_DESC="two xferds in network namespaces over a veth pair (NETNS=1)"
	MODE_SHORT="network namespaces"
	topo_two
	link_up() { # A_OPTS... -- B_OPTS...: see the loopback one
		local aopt=() bopt=()
		while [ $# -gt 0 ] && [ "$1" != -- ]; do aopt+=("$1"); shift; done
		[ $# -gt 0 ] && shift
		bopt=("$@")
		start_xferd b b 10.0.1.2 "${bopt[@]}"
		start_xferd a a 10.0.1.1 peer=10.0.1.2:7474 "${aopt[@]}"
	}
	node_up() { start_xferd a n off "$@"; }
else
	XNODE_SECS=${XNODE_SECS:-180}
	ND_EXIT_POLL=0.02 ND_WAIT_POLL=0.05 ND_STOP_SECS=20 ND_READY_SECS=60
	ND_STAMP=
	# shellcheck source-path=SCRIPTDIR source=../tests/lib/nodes.sh
	. "$ROOT/tests/lib/nodes.sh"
	_nd_enter() { ND_ENTER=(); }
	_lo_cleanup() {
		local rc=$?
		trap - EXIT INT TERM
		_nd_kill_all
		_nd_remove_tmp $rc "${XFERT_KEEP:-0}"
		exit $rc
	}
	_nd_need_binaries
	_nd_traps _lo_cleanup
	TMP=$(mktemp -d "/tmp/xferb-$$.XXXXXX") || fail "mktemp"
	# lo_listening PORT: something listens on TCP PORT (read from
	# /proc/net/tcp: ss is iproute2's).
	lo_listening() {
		awk -v p=":$(printf '%04X' "$1")" \
			'NR > 1 && substr($2, length($2) - 4) == p && $4 == "0A" { f = 1 }
			END { exit !f }' /proc/net/tcp
	}
	lo_port() {
		local p
		while :; do
			p=$((20000 + RANDOM % 30000))
			[ "$p" != "${1:-}" ] && ! lo_listening "$p" && break
		done
		echo "$p"
	}
	PORT_A=$(lo_port) PORT_B=$(lo_port "$PORT_A")
	LINK_DESC="two xferds in one network namespace on 127.0.0.1, ports $PORT_A and $PORT_B, each the other's peer (NETNS=0: loopback, no veth)"
	MODE_SHORT="loopback"
	# lo_xferd NAME LISTEN KV...: as tests/netns/lib.sh's start_xferd,
	# in this namespace; LISTEN is ADDR:PORT or off.
	lo_xferd() {
		local name=$1 listen=$2 kv
		shift 2
		local args=(-s "$TMP/$name.sock" -l debug -o "node_name=$name"
			-o "listen=$listen")
		# shellcheck disable=SC2207 # two words, no spaces in $TMP
		args+=($(nd_key_args "$@"))
		for kv in "$@"; do args+=(-o "$kv"); done
		_nd_spawn_xferd "$name" 20 "${args[@]}"
		if [ "$listen" != off ]; then
			wait_for 20 lo_listening "${listen##*:}" ||
				fail "xferd $name does not listen on TCP $listen"
		fi
		note "xferd $name (pid ${XD_PID[$name]}), listen $listen${*:+, $*}"
	}
	# link_up A_OPTS... -- B_OPTS...: xferd b, then xferd a, with
	# those options.
	link_up() {
		local aopt=() bopt=()
		while [ $# -gt 0 ] && [ "$1" != -- ]; do aopt+=("$1"); shift; done
		[ $# -gt 0 ] && shift
		bopt=("$@")
		lo_xferd b "127.0.0.1:$PORT_B" "peer=127.0.0.1:$PORT_A" "${bopt[@]}"
		lo_xferd a "127.0.0.1:$PORT_A" "peer=127.0.0.1:$PORT_B" "${aopt[@]}"
	}
	node_up() { lo_xferd n off "$@"; }
	step "bench-classes: files in $TMP"
fi
chmod 0755 "$TMP"

# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$ROOT/bench/bench-lib.sh"
OUT="$BUILD/bench/classes-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT/raw"
CMDLINE="NETNS=$NETNS LAT_OPS=$LAT_OPS BULK_SIZE=$BULK_SIZE BULK_S=$BULK_S FAIR_S=$FAIR_S bench/bench-classes.sh $BUILD_ARG"
note_command "$CMDLINE"

BULK_B=$(numfmt --from=iec "$BULK_SIZE") FAIR_B=$(numfmt --from=iec "$FAIR_SIZE")
REGION=$((BULK_B + FAIR_B * 8 + 64 * MiB))
LAT_OFF=$((BULK_B + 8 * FAIR_B))   # the latency client's 64 KiB

# --- clients (the same in both modes) --------------------------------------

# client_as NODE UID: ND_ENTER for a client of UID where NODE lives.
PY_AS_UID='import os, sys
u = int(sys.argv[1])
os.setgroups([]); os.setgid(u); os.setuid(u)
os.execvp(sys.argv[2], sys.argv[2:])'
client_as() {
	_nd_enter "$1"
	[ "$2" = 0 ] && return
	case $AS_UID in
	setpriv) ND_ENTER+=(setpriv --reuid="$2" --regid="$2" --clear-groups) ;;
	python3) ND_ENTER+=(python3 -c "$PY_AS_UID" "$2") ;;
	esac
}
# client_bg TAG NODE UID XNODE_ARGS...: xnode on NODE as UID, in the
# background (output $TMP/bg-TAG.out).
client_bg() {
	local tag=$1 node=$2 uid=$3
	shift 3
	client_as "$node" "$uid"
	_nd_bg_start "$tag" "${ND_ENTER[@]}" "$XNODE" "$@" \
		--socket "${XD_SOCK[$node]}"
}

# --- measurements (the same for one node and for the link) -----------------

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
ops_of() { grep -c '^op=.* result=[0-9]' "$1"; }
# failed_ops FILE TAG: a warning for each failed completion in FILE.
failed_ops() {
	local n
	n=$(grep -c '^op=.* result=-' "$1")
	[ "$n" -eq 0 ] || warn "$2: $n writes failed ($(grep -m1 '^op=.* result=-' "$1"))"
}

# The place of part 1: the client's node, the target's name, the kind
# of the clients' memory (memfd or malloc).
AT_NODE='' AT_TARGET='' AT_KIND=''

# lat_run TAG CLASS: LAT_OPS writes of 64 KiB, one at a time ->
# raw/lat-TAG.out.
lat_run() {
	local cls=()
	[ "$2" = default ] || cls=(--class "$2")
	xnode "$AT_NODE" write --lookup "$AT_TARGET" --size 65536 \
		--offset "$LAT_OFF" --seed 7 --kind "$AT_KIND" \
		--repeat "$LAT_OPS" "${cls[@]}" >/dev/null ||
		fail "the latency client ($1) failed: $(tail -n 5 "$LAST_OUT")"
	cp "$LAST_OUT" "$OUT/raw/lat-$1.out"
	failed_ops "$OUT/raw/lat-$1.out" "$1"
}
# bulk_start TAG CLASS: BULK_SIZE writes back to back until bulk_stop;
# returns once the first one completed.
bulk_start() {
	local cls=()
	[ "$2" = default ] || cls=(--class "$2")
	client_bg "$1" "$AT_NODE" 0 write --lookup "$AT_TARGET" \
		--size "$BULK_B" --offset 0 --seed 8 --kind "$AT_KIND" \
		--repeat 0 "${cls[@]}"
	bg_wait_line "$1" '^op=1 result=' 120
}
# bulk_stop TAG: -> raw/TAG.out.
bulk_stop() {
	bg_stop "$1"
	cp "$TMP/bg-$1.out" "$OUT/raw/$1.out"
	failed_ops "$OUT/raw/$1.out" "$1"
}
# classes_part PART: step 1 at AT_*; its files are raw/*PART-*.out.
classes_part() {
	local p=$1
	lat_run "$p-idle" default
	bulk_start "$p-bulk-alone" default
	sleep "$BULK_S"
	bulk_stop "$p-bulk-alone"
	bulk_start "$p-bulk-off" default
	lat_run "$p-off" default
	bulk_stop "$p-bulk-off"
	bulk_start "$p-bulk-on" bulk
	lat_run "$p-on" latency
	bulk_stop "$p-bulk-on"
	bulk_start "$p-bulk-alone-on" bulk
	sleep "$BULK_S"
	bulk_stop "$p-bulk-alone-on"
	note "$p: 64 KiB p50/p99 us: idle $(lat_of "$p-idle"), off $(lat_of "$p-off"), on $(lat_of "$p-on");" \
		"bulk MB/s: alone $(rate_of "$p-bulk-alone"), off $(rate_of "$p-bulk-off")," \
		"on $(rate_of "$p-bulk-on"), alone as bulk $(rate_of "$p-bulk-alone-on")"
}
# For the report: "p50 p99" of raw/lat-TAG.out, MB/s of raw/TAG.out, A/B.
lat_of() { lat_stats "$OUT/raw/lat-$1.out"; }
rate_of() { bytes_rate "$OUT/raw/$1.out" "$BULK_B"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f×", a / b; else print "-" }'; }

# --- one node ---------------------------------------------------------------

if [ "$PIN" = auto ]; then
	[ "$(nproc)" -ge 6 ] && PIN=1 || PIN=0
fi
PIN_A=() PIN_B=() PIN_DESC="progress threads not pinned"
if [ "$PIN" = 1 ]; then
	PIN_A=(progress_cpu=2) PIN_B=(progress_cpu=3)
	PIN_DESC="progress threads pinned (a and n: CPU 2, b: CPU 3)"
fi
# With one copy worker a CMA copy does not go in parts: the bulk
# writes would be the progress thread's, and the workers out of it.
if [ -z "${COPY_WORKERS:-}" ] && [ "$(nproc)" -lt 4 ]; then
	COPY_WORKERS=2
fi
node_opts=("${PIN_A[@]}")
[ -n "${COPY_WORKERS:-}" ] && node_opts+=("copy_workers=$COPY_WORKERS")

step "1a. one node: a 64 KiB CMA write's latency, alone and behind $BULK_SIZE CMA writes"
node_up "${node_opts[@]}"
workers=$(grep -o '[0-9]* copy workers' "$TMP/n.log" | head -n 1 | cut -d' ' -f1)
serve_start n own --name own --size $((LAT_OFF + MiB)) --kind malloc
AT_NODE=n AT_TARGET=own AT_KIND=malloc
classes_part node
bg_stop own
stop_xferd n

# --- over the link ------------------------------------------------------------

tenants=()
for i in $(seq 1 "$N_FAIR"); do tenants+=("tenant=eq$i weight=1 uid=$((1100 + i))"); done
tenants+=("tenant=w1 weight=1 uid=1201" "tenant=w3 weight=3 uid=1203")

link_up "${PIN_A[@]}" "${tenants[@]}" -- "${PIN_B[@]}"
chmod 0666 "${XD_SOCK[a]}"
serve_start b tgt --name tgt --size $REGION --kind memfd

step "1b. over the link: a 64 KiB write's latency, alone and behind $BULK_SIZE writes"
AT_NODE=a AT_TARGET=b/tgt AT_KIND=memfd
classes_part link

step "2. $N_FAIR equal bulk tenants, $FAIR_S s"
for i in $(seq 1 "$N_FAIR"); do
	client_bg "eq$i" a $((1100 + i)) write --lookup b/tgt --size "$FAIR_B" \
		--offset $((BULK_B + (i - 1) * FAIR_B)) --seed $((20 + i)) \
		--kind memfd --repeat 0 --depth 8 --class bulk
done
sleep "$FAIR_S"
eq=()
for i in $(seq 1 "$N_FAIR"); do
	bg_stop "eq$i"
	cp "$TMP/bg-eq$i.out" "$OUT/raw/"
	failed_ops "$OUT/raw/bg-eq$i.out" "eq$i"
	eq+=("$(ops_of "$OUT/raw/bg-eq$i.out")")
done
jain=$(printf '%s\n' "${eq[@]}" | awk '{ s += $1; q += $1 * $1; n++ } END { if (q) printf "%.3f", s * s / (n * q); else print "-" }')
note "ops of $FAIR_SIZE: ${eq[*]}; Jain $jain"

step "3. tenants of weights 1 and 3, $FAIR_S s"
client_bg w1 a 1201 write --lookup b/tgt --size "$FAIR_B" --offset $((BULK_B + 4 * FAIR_B)) \
	--seed 31 --kind memfd --repeat 0 --depth 8 --class bulk
client_bg w3 a 1203 write --lookup b/tgt --size "$FAIR_B" --offset $((BULK_B + 5 * FAIR_B)) \
	--seed 33 --kind memfd --repeat 0 --depth 8 --class bulk
sleep "$FAIR_S"
bg_stop w1; bg_stop w3
cp "$TMP/bg-w1.out" "$TMP/bg-w3.out" "$OUT/raw/"
failed_ops "$OUT/raw/bg-w1.out" w1
failed_ops "$OUT/raw/bg-w3.out" w3
w1=$(ops_of "$OUT/raw/bg-w1.out") w3=$(ops_of "$OUT/raw/bg-w3.out")
ratio13=$(awk -v a="$w1" -v b="$w3" 'BEGIN { if (a) printf "%.2f", b / a; else print "-" }')
note "w1 $w1, w3 $w3 ops of $FAIR_SIZE: 1:$ratio13"

step "4. classes on without the latency lane (link_lanes=off)"
bg_stop tgt
stop_xferd a
stop_xferd b
link_up "${PIN_A[@]}" link_lanes=off -- "${PIN_B[@]}" link_lanes=off
chmod 0666 "${XD_SOCK[a]}"
serve_start b tgt --name tgt --size $REGION --kind memfd
bulk_start link-bulk-nolane bulk
lat_run link-nolane latency
bulk_stop link-bulk-nolane
note "no lane: 64 KiB p50/p99 us $(lat_of link-nolane), bulk MB/s $(rate_of link-bulk-nolane)"

# --- the report -------------------------------------------------------------

HEADING="## Classes and tenants, one node and over the link ($MODE_SHORT)"
if command -v lscpu >/dev/null; then
	cpu=$(machine_cpu)
else
	cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1) (no lscpu)"
fi
machine="$cpu, $(nproc) CPUs, $(os_name)"
# lat_row LABEL TAG: a row of the latency table, one node and link.
lat_row() {
	local n50 n99 l50 l99
	read -r n50 n99 < <(lat_of "node-$2")
	read -r l50 l99 < <(lat_of "link-$2")
	echo "| $1 | $n50 | $n99 | $l50 | $l99 |"
}
ratio_row() { # LABEL TAG BASE: TAG's p50 and p99 over BASE's
	local n50 n99 l50 l99 b_n50 b_n99 b_l50 b_l99
	read -r n50 n99 < <(lat_of "node-$2")
	read -r l50 l99 < <(lat_of "link-$2")
	read -r b_n50 b_n99 < <(lat_of "node-$3")
	read -r b_l50 b_l99 < <(lat_of "link-$3")
	echo "| $1 | $(ratio "$n50" "$b_n50") | $(ratio "$n99" "$b_n99") |" \
		"$(ratio "$l50" "$b_l50") | $(ratio "$l99" "$b_l99") |"
}
rate_row() { echo "| $1 | $(rate_of "node-$2") | $(rate_of "link-$2") |"; }
{
	echo "$HEADING"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $machine; xferd $(tree_version); $PIN_DESC." \
		"One node: one xferd, every client on xfer_reg'd malloc memory (CMA), writing into an owner client's region;" \
		"${workers:-?} copy workers (the bulk writes go in parts through them, latency jobs first)." \
		"Over the link: $LINK_DESC, every client on a writing into a memfd region on b." \
		"\`$CMDLINE\`."
	[ "$(nproc)" -le 2 ] && { echo; echo "**$(nproc) CPUs**: the progress threads, the copy workers, the clients and the kernel share them, which hides much of what scheduling gains; the 16-core run is to come."; }
	echo
	echo "| a 64 KiB write, one at a time | one node p50 µs | p99 µs | over the link p50 µs | p99 µs |"
	echo "|---|---|---|---|---|"
	lat_row "alone" idle
	lat_row "behind $BULK_SIZE writes, classes off" off
	lat_row "behind $BULK_SIZE writes, classes on (latency vs bulk)" on
	ratio_row "classes on ÷ alone (goal: p99 ≤ 2×)" on idle
	read -r nl50 nl99 < <(lat_of link-nolane)
	echo "| behind $BULK_SIZE writes, classes on, no latency lane (link_lanes=off) | - | - | $nl50 | $nl99 |"
	echo
	echo "| the bulk client ($BULK_SIZE writes back to back) | one node MB/s | over the link MB/s |"
	echo "|---|---|---|"
	rate_row "alone, default class" bulk-alone
	rate_row "alone, bulk class" bulk-alone-on
	rate_row "beside the latency client, classes off" bulk-off
	rate_row "beside the latency client, classes on" bulk-on
	echo "| beside the latency client, classes on, no latency lane | - | $(rate_of link-bulk-nolane) |"
	echo "| classes on ÷ alone in the bulk class (goal ≥ 0.9×) |" \
		"$(ratio "$(rate_of node-bulk-on)" "$(rate_of node-bulk-alone-on)") |" \
		"$(ratio "$(rate_of link-bulk-on)" "$(rate_of link-bulk-alone-on)") |"
	echo
	echo "| shares over the link ($FAIR_S s, writes of $FAIR_SIZE, 8 in flight each) | result |"
	echo "|---|---|"
	echo "| $N_FAIR tenants of weight 1: writes each | ${eq[*]} |"
	echo "| Jain's fairness index | $jain |"
	echo "| tenants of weights 1 and 3: writes | $w1 : $w3 (1 : $ratio13) |"
	[ -s "$OUT/raw/warnings.txt" ] && { echo; warnings_md; }
} >"$OUT/section.md"
cat "$OUT/section.md"
if [ -z "${NO_REPORT:-}" ]; then
	REPORT=${BENCH_REPORT:-$ROOT/$RESULTS_DIR/$(date -u +%F)-classes.md}
	put_section "$HEADING" "$OUT/section.md" "$REPORT"
	put_summary bench-classes.sh "Classes and tenants (one node, TCP link)" "$REPORT" \
		"$OUT/section.md" "$HEADING" "$machine" "$CMDLINE"
fi
echo PASS
