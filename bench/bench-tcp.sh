#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-tcp.sh BUILD - xferd between two nodes over TCP, beside iperf3 and
# UCX tcp on the same link -> a section of bench/results/
#
# Two network namespaces, a and b, joined by a veth pair, stand in for two
# nodes; one xferd runs in each.  xferbench runs in a: its initiator talks
# to a's xferd and its target process to b's (--target-socket; a Unix
# socket is a path, reachable from any namespace), so every byte crosses
# the TCP link between the two xferds.  PASSES interleaved passes, each:
# a noise probe, UCX_TLS=tcp ucx_perftest (tag_bw, ucp_put_lat), iperf3
# single stream, then xferbench bw write and read and 8 B lat (polling and
# sleeping), then xferctl's view of both daemons.
#
# Raw logs go to BUILD/bench/tcp-<timestamp>/, the section to section.md
# there.  The section "## Between two nodes (TCP over veth)" is then
# appended to the day's file, bench/results/YYYY-MM-DD.md, or replaces the
# one already in it, so this script composes with bench/bench.sh and can
# also run alone; its goals table replaces its part of the summary,
# BENCHMARKS.md (bench-lib.sh: results_file, put_summary).  Needs root
# (namespaces).  Installs nothing: `make bench` installs iperf3 and
# ucx-utils; without them their columns say "not run".
#
# env: PASSES=3, RUN_TIMEOUT=60 (s, every single process), IPERF_T=5 (s),
#      TIME_MS=300, REPS=5, SIZES="64K 1M 16M 256M", LAT_ITERS=20000,
#      CPU_A=1, CPU_B=0 (progress_cpu of a's and b's xferd, or "none"),
#      VETH_MTU=1500, NO_UCX=1, NO_IPERF=1, BENCH_REPORT=FILE (instead of
#      the day's file), BENCH_SUMMARY=FILE (instead of BENCHMARKS.md),
#      NO_REPORT=1 (only section.md).
set -uo pipefail

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "bench-tcp: no build dir '$1'" >&2; exit 1; }
PASSES=${PASSES:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-60}
IPERF_T=${IPERF_T:-5}
TIME_MS=${TIME_MS:-300}
REPS=${REPS:-5}
SIZES=${SIZES:-"64K 1M 16M 256M"}
UCX_SIZES="65536 1048576 16777216"
LAT_ITERS=${LAT_ITERS:-20000}
CPU_A=${CPU_A:-1}
CPU_B=${CPU_B:-0}
MTU=${VETH_MTU:-1500}
HEADING="## Between two nodes (TCP over veth)"
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$ROOT/bench/bench-lib.sh"
REPORT=$(results_file)

TS=$(date +%Y%m%d-%H%M%S)
OUT="$BUILD/bench/tcp-$TS"
mkdir -p "$OUT/raw"
TMP=$(mktemp -d /tmp/xferbench-tcp.XXXXXX)

# Names carry this shell's PID, so that leftovers of a killed run can be
# told from another run's and removed.
NS_PREFIX="xbtcp-$$-"
NS_A="${NS_PREFIX}a" NS_B="${NS_PREFIX}b"
IF_A="xbtcpa$$" IF_B="xbtcpb$$"
IP_A=10.79.0.1 IP_B=10.79.0.2
PORT=7474
SOCK_A="$TMP/a.sock" SOCK_B="$TMP/b.sock"
PID_A='' PID_B='' SRV_PID=''

# stop_pid PID: SIGTERM, up to 5 s, then SIGKILL.  PID is one of our
# `timeout` wrappers: it passes SIGTERM on to its command, and it leads a
# process group of its own, which SIGKILL takes down whole.
stop_pid() {
	local pid=$1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
	kill "$pid" 2>/dev/null
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && { kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null; }
	wait "$pid" 2>/dev/null
}

cleanup() {
	stop_pid "$FG_PID"
	stop_pid "$SRV_PID"
	stop_pid "$PID_A"
	stop_pid "$PID_B"
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ "$(id -u)" -eq 0 ] || { log "network namespaces need root"; exit 1; }
for p in xferd xferbench xferctl; do
	[ -x "$BUILD/$p" ] || { log "missing $BUILD/$p: build it first (make bench does)"; exit 1; }
	# A private copy: a rebuild during the run cannot mix versions.
	cp "$BUILD/$p" "$TMP/$p"
done
XFERD="$TMP/xferd" XB="$TMP/xferbench" XCTL="$TMP/xferctl"
for t in ip ss jq; do
	command -v "$t" >/dev/null || { log "$t is missing (make deps installs it)"; exit 1; }
done
HAVE_UCX=1 HAVE_IPERF=1
if [ -n "${NO_UCX:-}" ]; then
	HAVE_UCX=0
elif ! command -v ucx_perftest >/dev/null; then
	HAVE_UCX=0
	warn "ucx_perftest not found: UCX not run (apt-get install ucx-utils; make bench does)"
fi
if [ -n "${NO_IPERF:-}" ]; then
	HAVE_IPERF=0
elif ! command -v iperf3 >/dev/null; then
	HAVE_IPERF=0
	warn "iperf3 not found: iperf3 not run (apt-get install iperf3; make bench does)"
fi
sizes_csv=$(echo "$SIZES" | tr ' ' ',')

# Namespaces of earlier runs of this script whose shell is gone.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^xbtcp-[0-9]+-'); do
	owner=${ns#xbtcp-}
	owner=${owner%%-*}
	[ "$owner" = "$$" ] && continue
	kill -0 "$owner" 2>/dev/null && continue
	log "removing $ns, left by a run that is gone (pid $owner)"
	for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
	ip netns del "$ns" 2>/dev/null
done

# cmdline CMD...: note the command once in raw/commands.txt, with the
# private paths replaced by names.
cmdline() {
	local line="$*"
	line=${line//$SOCK_A/A.sock}
	line=${line//$SOCK_B/B.sock}
	line=${line//$TMP\//}
	line=${line//$NS_A/NS_A}
	line=${line//$NS_B/NS_B}
	line=${line//$IF_A/VETH_A}
	line=${line//$IF_B/VETH_B}
	note_command "$line"
}

# run NAME PASS CMD...: under timeout; RES lines to raw/passN.res, the
# output to raw/NAME.passN.log.
run() {
	local name=$1 pass=$2 rc
	shift 2
	cmdline "$@"
	waitrun "$OUT/raw/$name.pass$pass.log" timeout -k 5 "$RUN_TIMEOUT" "$@"
	rc=$?
	grep '^RES ' "$OUT/raw/$name.pass$pass.log" >> "$OUT/raw/pass$pass.res"
	if [ $rc -ne 0 ]; then
		warn "pass $pass: $name exited $rc (124: timeout): $(grep -v '^RES' "$OUT/raw/$name.pass$pass.log" | tail -1)"
	fi
	return $rc
}

# wait_listen NS PORT: until something listens on the TCP port in NS.
wait_listen() {
	for _ in $(seq 250); do
		ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
		sleep 0.02
	done
	return 1
}

# --- two nodes -------------------------------------------------------------

# ns_up NS IF ADDR: lo and the veth end up, no IPv6 (xferd then
# advertises exactly the one IPv4 address).
ns_up() {
	# shellcheck disable=SC2016 # $f is the inner shell's
	ip netns exec "$1" sh -c 'for f in all default; do
		echo 1 > /proc/sys/net/ipv6/conf/$f/disable_ipv6; done' 2>/dev/null
	ip -n "$1" link set lo up &&
	ip -n "$1" addr add "$3/24" dev "$2" &&
	ip -n "$1" link set "$2" up
}

if ! { ip netns add "$NS_A" && ip netns add "$NS_B"; }; then log "cannot create network namespaces"; exit 1; fi
ip link add name "$IF_A" netns "$NS_A" mtu "$MTU" type veth \
	peer name "$IF_B" netns "$NS_B" mtu "$MTU" || { log "cannot create the veth pair"; exit 1; }
if ! { ns_up "$NS_A" "$IF_A" "$IP_A" && ns_up "$NS_B" "$IF_B" "$IP_B"; }; then log "cannot set up the veth pair"; exit 1; fi
for _ in $(seq 100); do
	ip -n "$NS_A" -o link show "$IF_A" | grep -q 'state UP' &&
		ip -n "$NS_B" -o link show "$IF_B" | grep -q 'state UP' && break
	sleep 0.05
done
{
	echo "# a"; ip -n "$NS_A" -br addr; echo "# b"; ip -n "$NS_B" -br addr
	echo "# veth"; ip -n "$NS_A" -d link show "$IF_A"
	echo "# offloads"; ip netns exec "$NS_A" ethtool -k "$IF_A" 2>/dev/null | grep -E '^(tcp-segmentation|generic-(segmentation|receive))'
} > "$OUT/netns_setup.txt" 2>&1

# start_xferd NS NAME ADDR CPU SOCK LOG PEER: sets XD_PID (the timeout
# wrapper, whose child is xferd) once the socket answers and the port
# listens.  PEER: the other node's address, a configured peer (without a
# cluster key xferd dials known peers only).
start_xferd() {
	local ns=$1 name=$2 addr=$3 cpu=$4 sock=$5 log=$6 peer=$7
	local args=(-s "$sock" -o "listen=$addr:$PORT" -o "peer=$peer:$PORT"
		-o "node_name=$name" -l warn)
	[ "$cpu" != none ] && args+=(-o "progress_cpu=$cpu")
	cmdline ip netns exec "$ns" "$XFERD" "${args[@]}"
	timeout -k 5 $((PASSES * 240 + 120)) ip netns exec "$ns" "$XFERD" "${args[@]}" > "$log" 2>&1 &
	XD_PID=$!
	for _ in $(seq 200); do
		kill -0 "$XD_PID" 2>/dev/null || break
		timeout 5 "$XCTL" -s "$sock" status > /dev/null 2>&1 && wait_listen "$ns" "$PORT" && return 0
		sleep 0.05
	done
	log "xferd $name did not start:"
	cat "$log" >&2
	exit 1
}
start_xferd "$NS_B" b "$IP_B" "$CPU_B" "$SOCK_B" "$OUT/raw/xferd_b.log" "$IP_A"; PID_B=$XD_PID
start_xferd "$NS_A" a "$IP_A" "$CPU_A" "$SOCK_A" "$OUT/raw/xferd_a.log" "$IP_B"; PID_A=$XD_PID
# Debian's ip execs the command: the wrapper's child is xferd itself.
XPID_A=$(pgrep -P "$PID_A" | head -1) XPID_B=$(pgrep -P "$PID_B" | head -1)

# --- machine ---------------------------------------------------------------

{
	echo "date: $(date -Is)"
	echo "cpu: $(machine_cpu)"
	echo "kernel: $(uname -r)"
	echo "os: $(os_name)"
	echo "memory: $(free -g | awk '/Mem:/{print $2 " GiB"}')"
	echo "link: veth pair between two network namespaces, MTU $MTU$(ip netns exec "$NS_A" ethtool -k "$IF_A" 2>/dev/null | awk -F': ' '/^tcp-segmentation-offload/{print ", TSO " $2}')"
	echo "tcp: congestion control $(cat /proc/sys/net/ipv4/tcp_congestion_control), rmem $(tr '\t' ' ' < /proc/sys/net/ipv4/tcp_rmem), wmem $(tr '\t' ' ' < /proc/sys/net/ipv4/tcp_wmem)"
	echo "iperf3: $( [ $HAVE_IPERF = 1 ] && iperf3 --version | head -1 || echo "not available")"
	echo "ucx: $(ucx_version)"
	echo "xferd: $(xferd_version "$XFERD")"
} > "$OUT/machine.txt"
log "xferd a (pid $XPID_A, $IP_A, progress CPU $CPU_A), b (pid $XPID_B, $IP_B, progress CPU $CPU_B); $PASSES passes; logs in $OUT"

# --- the baselines -----------------------------------------------------------

# iperf_once PASS: one single-stream run a -> b; server in b on CPU 0,
# client in a on CPU 1, as in the baseline suite.  -J: JSON, parsed here.
IPERF_PORT=5201
iperf_once() {
	local pass=$1 rc
	local clog="$OUT/raw/iperf.pass$pass.json"
	IPERF_PORT=$((IPERF_PORT + 1))
	local srv=(ip netns exec "$NS_B" iperf3 -s -1 -B "$IP_B" -p "$IPERF_PORT" -A 0)
	local cli=(ip netns exec "$NS_A" iperf3 -c "$IP_B" -p "$IPERF_PORT" -t "$IPERF_T" -P 1 -A 1 -J)
	timeout -k 5 "$RUN_TIMEOUT" "${srv[@]}" > "$OUT/raw/iperf_server.pass$pass.log" 2>&1 &
	SRV_PID=$!
	wait_listen "$NS_B" "$IPERF_PORT" || warn "pass $pass: iperf3 server not listening"
	cmdline "${srv[@]/#$IPERF_PORT/PORT}" "&"
	cmdline "${cli[@]/#$IPERF_PORT/PORT}"
	waitrun "$clog" timeout -k 5 "$RUN_TIMEOUT" "${cli[@]}"
	rc=$?
	stop_pid "$SRV_PID"
	SRV_PID=
	if [ $rc -ne 0 ] || ! jq -e '.end.sum_received.bits_per_second' "$clog" > /dev/null 2>&1; then
		warn "pass $pass: iperf3 failed (rc $rc): $(jq -r '.error // empty' "$clog" 2>/dev/null | head -1)"
		return 1
	fi
	jq -r '"RES iperf3 veth_a-b P1 recv_gbps \(.end.sum_received.bits_per_second / 1e9) Gbit/s",
	       "RES iperf3 veth_a-b P1 retransmits \(.end.sum_sent.retransmits // 0) count"' \
		"$clog" >> "$OUT/raw/pass$pass.res"
}

# ucx_once PASS TEST SIZE ITERS WARMUP: one fresh server in b (CPU 0) and
# one client in a (CPU 1) over UCX_TLS=tcp on the veth; the client is the
# sender of tag_bw, so the data goes a -> b like iperf3's.  ucx_perftest's
# "MB/s" are MiB/s; ucp_put_lat prints half the round trip.
UCX_PORT=13500
ucx_once() {
	local pass=$1 test=$2 size=$3 n=$4 w=$5 crc
	local slog="$OUT/raw/ucx_server.log" clog="$OUT/raw/ucx_$test.$size.pass$pass.log"
	UCX_PORT=$((UCX_PORT + 1))
	local srv=(ip netns exec "$NS_B" env UCX_TLS=tcp UCX_NET_DEVICES="$IF_B" UCX_WARN_UNUSED_ENV_VARS=n
		stdbuf -oL ucx_perftest -p "$UCX_PORT" -c 0)
	local cli=(ip netns exec "$NS_A" env UCX_TLS=tcp UCX_NET_DEVICES="$IF_A" UCX_WARN_UNUSED_ENV_VARS=n
		ucx_perftest "$IP_B" -p "$UCX_PORT" -c 1 -t "$test" -s "$size" -n "$n" -w "$w")
	echo "=== pass $pass $test $size" >> "$slog"
	timeout -k 5 "$RUN_TIMEOUT" "${srv[@]}" >> "$slog" 2>&1 &
	SRV_PID=$!
	wait_listen "$NS_B" "$UCX_PORT" || warn "pass $pass: ucx_perftest server not listening"
	cmdline "${srv[@]/#$UCX_PORT/PORT}" "&"
	cmdline "${cli[@]/#$UCX_PORT/PORT}"
	waitrun "$clog" timeout -k 5 "$RUN_TIMEOUT" "${cli[@]}"
	crc=$?
	for _ in $(seq 100); do kill -0 "$SRV_PID" 2>/dev/null || break; sleep 0.05; done
	stop_pid "$SRV_PID"
	SRV_PID=
	ucx_results "$pass" tcp "$test" "$size" "$clog" "$crc" lat_p50 lat_overall bw_overall
}

# xferctl_view PASS: what both daemons say after the pass.
xferctl_view() {
	local pass=$1 n s
	for n in a b; do
		[ $n = a ] && s=$SOCK_A || s=$SOCK_B
		timeout 10 "$XCTL" -s "$s" status --json > "$OUT/raw/xferctl_status_$n.pass$pass.json" 2>&1 ||
			warn "pass $pass: xferctl status on $n failed"
		timeout 10 "$XCTL" -s "$s" peers --json > "$OUT/raw/xferctl_peers_$n.pass$pass.json" 2>&1 ||
			warn "pass $pass: xferctl peers on $n failed"
	done
	cmdline "$XCTL" -s "{A,B}.sock" status --json
	cmdline "$XCTL" -s "{A,B}.sock" peers --json
}

# --- the passes ---------------------------------------------------------------

XS=(--socket "$SOCK_A" --target-socket "$SOCK_B" --cpu 1 --target-cpu 0)
INA=(ip netns exec "$NS_A")
T0=$(date +%s)
for (( pass = 1; pass <= PASSES; pass++ )); do
	: > "$OUT/raw/pass$pass.res"
	probe "before_pass$pass"
	if [ $HAVE_UCX = 1 ]; then
		log "pass $pass/$PASSES: UCX tcp tag_bw, ucp_put_lat"
		# -n/-w as the baseline suite uses over veth
		ucx_once "$pass" tag_bw 65536 5000 100
		ucx_once "$pass" tag_bw 1048576 500 20
		ucx_once "$pass" tag_bw 16777216 50 5
		ucx_once "$pass" ucp_put_lat 8 20000 1000
	fi
	if [ $HAVE_IPERF = 1 ]; then
		log "pass $pass/$PASSES: iperf3 a -> b, ${IPERF_T} s"
		iperf_once "$pass"
	fi
	log "pass $pass/$PASSES: xferbench bw write, read"
	run bw_write "$pass" "${INA[@]}" "$XB" "${XS[@]}" bw --op write --sizes "$sizes_csv" --time-ms "$TIME_MS" --reps "$REPS"
	run bw_read "$pass" "${INA[@]}" "$XB" "${XS[@]}" bw --op read --sizes "$sizes_csv" --time-ms "$TIME_MS" --reps "$REPS"
	log "pass $pass/$PASSES: xferbench lat 8 B, polling and sleeping"
	run lat_poll "$pass" "${INA[@]}" "$XB" "${XS[@]}" lat --size 8 --iters "$LAT_ITERS"
	run lat_sleep "$pass" "${INA[@]}" "$XB" "${XS[@]}" lat --size 8 --iters "$LAT_ITERS" --sleep
	xferctl_view "$pass"
	for x in "$PID_A" "$PID_B"; do
		kill -0 "$x" 2>/dev/null || { warn "an xferd died; see $OUT/raw/xferd_*.log"; exit 1; }
	done
done
probe end
T1=$(date +%s)
log "passes done in $((T1 - T0)) s"

# Stop both daemons the way a node would: one SIGTERM to xferd itself (the
# wrapper would pass it on twice, to its child and to its process group),
# and they must exit 0; the wrapper returns xferd's status.
for n in a b; do
	if [ $n = a ]; then p=$PID_A x=$XPID_A; else p=$PID_B x=$XPID_B; fi
	kill "${x:-$p}" 2>/dev/null
	for _ in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$p" 2>/dev/null; then
		warn "xferd $n still running 20 s after SIGTERM"
		kill -9 -- "-$p" 2>/dev/null
	fi
	wait "$p"
	rc=$?
	[ $rc -eq 0 ] || warn "xferd $n exited $rc after SIGTERM"
	[ $n = a ] && PID_A= || PID_B=
done
for n in a b; do
	if [ -s "$OUT/raw/xferd_$n.log" ]; then
		warn "xferd $n logged $(wc -l < "$OUT/raw/xferd_$n.log") line(s) at level warn or above, first: $(head -1 "$OUT/raw/xferd_$n.log")"
	fi
done

# --- the report --------------------------------------------------------------

# Every RES line tagged with its pass: "pass bench variant param metric
# value unit".  The two lat runs print the same variant: tell them apart.
for (( pass = 1; pass <= PASSES; pass++ )); do
	res_rows "$pass" "$OUT/raw/pass$pass.res"
	for m in poll sleep; do
		awk -v p="$pass" -v m="$m" '$1 == "RES" { print p, $2, $3 "_" m, $4, $5, $6, $7 }' \
			"$OUT/raw/lat_$m.pass$pass.log" 2>/dev/null
	done
done | awk '$2 != "xferbench_lat" || $3 ~ /_(poll|sleep)$/' > "$OUT/all.tsv"
res_rows 0 "$OUT/raw/probe.res" >> "$OUT/all.tsv"

# xferd's own view, one line per pass and node: "pass node paths
# ops_failed peer_state peer_errors rtt_us address why".
for (( pass = 1; pass <= PASSES; pass++ )); do
	for n in a b; do
		st="$OUT/raw/xferctl_status_$n.pass$pass.json" pe="$OUT/raw/xferctl_peers_$n.pass$pass.json"
		paths=$(xferctl_paths "$st")
		failed=$(xferctl_failed "$st")
		peer=$(jq -r '[.peers[]? | "\(.node_name) \(.state), \(.errors) errors, rtt \(if (.rtt_ns // 0) > 0 then "\(.rtt_ns / 1000) µs" else "not measured" end), \(.address) (\(.why))" + (if (.last_error // "") != "" then ", last error: \(.last_error)" else "" end)] | join(";")' "$pe" 2>/dev/null || echo "?")
		printf '%s\t%s\t%s\t%s\t%s\n' "$pass" "$n" "$paths" "$failed" "${peer:-none}"
	done
done > "$OUT/xferctl.tsv"

{
cat <<EOF
$HEADING

Generated by \`bench/bench-tcp.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'); $PASSES interleaved passes, $((T1 - T0)) s.
Raw logs: \`${OUT#"$ROOT"/}/\`.

Two network namespaces, a ($IP_A) and b ($IP_B), joined by a veth pair (MTU $MTU),
stand in for two nodes; one xferd runs in each (\`listen=ADDR:$PORT\`, progress thread on
CPU $CPU_A in a and CPU $CPU_B in b). \`xferbench\` runs in a: its initiator (CPU 1) talks to a's
xferd and its target process (CPU 0, asleep) to b's (\`--target-socket\`), so every byte
crosses the TCP link between the two xferds (path \`tcp\`). A write moves data a → b, a
read b → a. iperf3 (server in b on CPU 0, client in a on CPU 1) and UCX \`ucx_perftest\`
with \`UCX_TLS=tcp\` (server in b, client in a, the sender of \`tag_bw\`) run over the same
veth, a → b, in every pass. Order within a pass: noise probe, UCX, iperf3, xferd write,
read, lat (polling), lat (\`--sleep\`).

Every cell is **median (min–max) across the $PASSES passes**; a ratio is taken within each
pass before the median. GB/s = 10^9 B/s; iperf3's Gbit/s ÷ 8 = GB/s; UCX prints MiB/s
("MB/s"), converted here. An xferd bandwidth figure is the median of $REPS samples of
$TIME_MS ms within the pass. This is a benchmark, not a test: the machine is a shared VM,
and the noise probe below says how busy it was.

$(warnings_md)
EOF
awk -v P="$PASSES" -v sizes="$SIZES" -v ucx_sizes="$UCX_SIZES" -v have_ucx="$HAVE_UCX" \
    -v have_iperf="$HAVE_IPERF" -v iperf_t="$IPERF_T" -v fmt_int=1 "$BENCH_AWK"'
END {
	MIB = 0.001048576
	IP = "iperf3|veth_a-b|P1|recv_gbps"
	UL = "ucx|tcp/ucp_put_lat|8B|lat_p50"
	LP = "xferbench_lat|memfd_write_poll|8B|"
	LS = "xferbench_lat|memfd_write_sleep|8B|"
	W16 = "xferbench_bw|memfd_write|16MiB|bw_median"

	print "### Goals"
	print ""
	print "| goal | result | |"
	print "|---|---|---|"
	r = have_iperf ? ratio(W16, 1, IP, 1 / 8) : "iperf3 not run"; rm = gmed
	printf "| write 16 MiB ≥ 0.9× iperf3 single stream (same pass) | %s | %s |\n", r, rm == "" ? "no data" : goal(rm >= 0.9)
	c = cell(LP "lat_p50", 1); m = gmed
	printf "| 8 B write round trip ≤ 15 µs (p50, polling) | %s µs | %s |\n", c, m == "" ? "no data" : goal(m <= 15)
	c = cell(LS "lat_p50", 1); m = gmed
	printf "| 8 B write round trip ≤ 15 µs (p50, xfer_wait_cqe) | %s µs | %s |\n", c, m == "" ? "no data" : goal(m <= 15)
	print ""

	print "### Bandwidth between the nodes (GB/s)"
	print ""
	if (have_iperf) {
		printf "iperf3 single stream a → b (%s s): **%s Gbit/s** = %s GB/s, %s retransmits per run.\n", \
			iperf_t, cell(IP, 1), cell(IP, 1 / 8), cell("iperf3|veth_a-b|P1|retransmits", 1)
		print ""
	}
	print "| size | xferd write a → b | / iperf3 | xferd read b → a | / iperf3 | UCX tcp tag_bw a → b | write / UCX | goal |"
	print "|---|---|---|---|---|---|---|---|"
	ns = split(sizes, S, " ")
	for (i = 1; i <= ns; i++) {
		s = lbl(S[i])
		kw = "xferbench_bw|memfd_write|" s "|bw_median"
		kr = "xferbench_bw|memfd_read|" s "|bw_median"
		ku = "ucx|tcp/tag_bw|" s "|bw_overall"
		u = have_ucx ? cell(ku, MIB) : "not run"
		rw = have_iperf ? ratio(kw, 1, IP, 1 / 8) : "–"; rwm = gmed
		rr = have_iperf ? ratio(kr, 1, IP, 1 / 8) : "–"
		g = "–"
		if (s == "16MiB")
			g = rwm == "" ? "no data" : goal(rwm >= 0.9) " (≥ 0.9× iperf3)"
		printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", s, cell(kw, 1), rw, cell(kr, 1), rr, u, \
			have_ucx ? ratio(kw, 1, ku, MIB) : "–", g
	}
	print ""
	print "### Latency: one 8 B write at a time, submit → completion (µs)"
	print ""
	print "A full round trip: a'"'"'s xferd sends the write to b'"'"'s, which answers once the bytes are"
	print "in place. UCX'"'"'s `ucp_put_lat` prints half a round trip; it is doubled to compare."
	print ""
	print "| | p50 | p99 | p99.9 | min | mean | max |"
	print "|---|---|---|---|---|---|---|"
	printf "| xferd, polling (xfer_peek_cqe) | %s | %s | %s | %s | %s | %s |\n", cell(LP "lat_p50", 1), \
		cell(LP "lat_p99", 1), cell(LP "lat_p999", 1), cell(LP "lat_min", 1), cell(LP "lat_mean", 1), cell(LP "lat_max", 1)
	printf "| xferd, xfer_wait_cqe (--sleep) | %s | %s | %s | %s | %s | %s |\n", cell(LS "lat_p50", 1), \
		cell(LS "lat_p99", 1), cell(LS "lat_p999", 1), cell(LS "lat_min", 1), cell(LS "lat_mean", 1), cell(LS "lat_max", 1)
	if (have_ucx) {
		printf "| UCX tcp ucp_put_lat, one way (as printed) | %s | | | | | |\n", cell(UL, 1)
		printf "| UCX tcp ucp_put_lat, round trip (2×) | %s | | | | | |\n", cell(UL, 2)
	}
	print ""
	if (have_ucx) {
		printf "xferd p50 / UCX round trip p50: polling %s, xfer_wait_cqe %s.\n", \
			ratio(LP "lat_p50", 1, UL, 2), ratio(LS "lat_p50", 1, UL, 2)
		print ""
	}
	print "### Noise probe"
	print ""
	print "Share of both CPUs busy with other work or stolen by the host during 1 s while the"
	print "benchmark was idle, before each pass and at the end:"
	print ""
	print "| probe | busy % | steal % | load average (1 min) |"
	print "|---|---|---|---|"
	for (p = 1; p <= P + 1; p++) {
		t = p <= P ? "before_pass" p : "end"
		printf "| %s | %s | %s | %s |\n", t, cell("probe|" t "|noise|busy_pct", 1), \
			cell("probe|" t "|noise|steal_pct", 1), cell("probe|" t "|noise|loadavg1", 1)
	}
	print ""
}' "$OUT/all.tsv"
cat <<EOF
### xferd's own view (xferctl after each pass)

Counters are cumulative since the xferds started; only the initiating side counts an
operation. Peer: name, state, errors, round trip, the address in use and why.

| pass | node | paths (ops) | ops failed | peer |
|---|---|---|---|---|
$(xferctl_table "$OUT/xferctl.tsv")

Top CPU consumers at each probe (%CPU over each process's lifetime):

\`\`\`
$(cat "$OUT/raw/load.txt")
\`\`\`

### Machine

\`\`\`
$(cat "$OUT/machine.txt")
\`\`\`

### Commands

Every process ran under \`timeout $RUN_TIMEOUT\` (the xferds under one as long as the run).
NS_A/NS_B are the namespaces, VETH_A/VETH_B the veth ends, A.sock/B.sock the xferds'
sockets, PORT a fresh port.

\`\`\`sh
$(cat "$OUT/raw/commands.txt")
\`\`\`
EOF
} > "$OUT/section.md"
log "wrote $OUT/section.md"

[ -n "${NO_REPORT:-}" ] && exit 0
put_section "$HEADING" "$OUT/section.md" "$REPORT"
log "wrote its section of $REPORT"
put_summary bench-tcp.sh "Between two nodes (TCP over veth)" "$REPORT" "$OUT/section.md" \
	"### Goals" "$(machine_cpu), $(os_name), two network namespaces" "make bench (bench/bench-tcp.sh)"
