#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-rdma.sh BUILD - xferd between two nodes over RDMA (Soft-RoCE in the
# qemu guest of tests/rdma/vm.sh), beside perftest on the same rxe
# devices -> a section of bench/results/
#
# On the host this script builds and boots the guest (vm.sh; the kernel
# is fetched once into BUILD/rdma-vm) and runs itself in there
# (bench-rdma.sh --guest OUT).  In the guest, two xferds stand in for two
# nodes as in the RDMA tests (tests/rdma/guest_lib.sh): both on rxe0
# (RDMA_BENCH_SETUP=single, the default), or a on 10.0.0.1 and b on
# 10.0.0.2 with rxe0 and rxe1 joined by a veth (pair; but both xferds see
# both devices and use both, each to itself: the run warns when xferd's
# bytes did not stay on a's device, since perftest's cross the veth).
# xferbench runs against a: its
# initiator talks to a's xferd and its target process to b's
# (--target-socket), so every byte goes between the two xferds over RDMA
# (a write a -> b, a read b -> a; path "rdma", checked).  perftest runs
# on the same devices in the same direction: server on b's device, client
# on a's (ib_write_bw / ib_read_bw: the client writes to / reads from the
# server; ib_write_lat: a ping-pong).  PASSES interleaved passes, each:
# perftest bw (write, read) for every size, xferbench bw write and read,
# ib_write_lat, xferbench lat (8 B, polling), then xferctl's view of both
# daemons.  Nothing else runs in the guest.
#
# The guest writes its raw logs into BUILD/bench/rdma-<timestamp>/ (BUILD
# must lie inside the project: the guest mounts only that read-write); the
# host then writes section.md there and puts the section
# "## RDMA (Soft-RoCE)" into the day's file, bench/results/YYYY-MM-DD.md,
# replacing the one already in it, and its bandwidth table into its part
# of the summary, BENCHMARKS.md, as bench/bench-tcp.sh does with its own.
# Needs root, qemu, rdma-core and perftest (`make deps` installs them).  Not part of `make check`;
# `tests/integration/rdma.sh --bench` runs it on XFER_BUILD.
#
# Under TCG every number is the emulation's: Soft-RoCE is a kernel driver
# doing RoCE in software, on emulated CPUs.  What carries over to hardware
# is the ratio: xferd's overhead over raw verbs on the same device.
#
# env: PASSES=3, RDMA_BENCH_SETUP=single|pair, SIZES="64K 1M 16M 64M",
#      TIME_MS=1500, REPS=3 (xferbench: samples of TIME_MS per size),
#      PT_BYTES=128M (perftest: bytes per bw run; -n = PT_BYTES / size /
#      PT_QPS, 5 at least), PT_QPS=2 (perftest's -q: as many queue pairs
#      as xferd's rdma_qps default), LAT_ITERS=2000, RUN_TIMEOUT=180 (s, every process),
#      CPU_A=1, CPU_B=0 (the initiator and perftest's client / the
#      target process and perftest's server), XFERD_CPU_A=0,
#      XFERD_CPU_B=0 (the xferds' progress threads; "none": unpinned).
#      With the guest's 2 vCPUs the initiator, which polls, gets one to
#      itself, as perftest's client does; b's xferd has nothing to do for
#      one-sided operations.
#      STAGES_BUILD=DIR (inside the project: a build of
#      `make BUILD=DIR STAGE_STAMPS=1 DIR/xferd DIR/xferbench`): after the
#      passes, the 8 B round trip again against a pair of its xferds,
#      split into stages (xferbench lat --stages; raw/stages.log),
#      RXE_VM_TIMEOUT (the whole guest; default from PASSES),
#      BENCH_REPORT=FILE (instead of the day's file), BENCH_SUMMARY=FILE
#      (instead of BENCHMARKS.md), NO_REPORT=1.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
SELF=$ROOT/bench/bench-rdma.sh
VM=$ROOT/tests/rdma/vm.sh
HEADING="## RDMA (Soft-RoCE)"
PASSES=${PASSES:-3}
SIZES=${SIZES:-"64K 1M 16M 64M"}
TIME_MS=${TIME_MS:-1500}
REPS=${REPS:-3}
PT_BYTES=${PT_BYTES:-128M}
PT_QPS=${PT_QPS:-2}
LAT_ITERS=${LAT_ITERS:-2000}
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
CPU_A=${CPU_A:-1}
CPU_B=${CPU_B:-0}
XFERD_CPU_A=${XFERD_CPU_A:-0}
XFERD_CPU_B=${XFERD_CPU_B:-0}
SETUP=${RDMA_BENCH_SETUP:-single}
export PASSES SIZES TIME_MS REPS PT_BYTES PT_QPS LAT_ITERS RUN_TIMEOUT CPU_A CPU_B \
	XFERD_CPU_A XFERD_CPU_B
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$ROOT/bench/bench-lib.sh"

# bytes SIZE: "64K" -> 65536.
bytes() {
	local s=$1
	case $s in
	*K) echo $((${s%K} << 10)) ;;
	*M) echo $((${s%M} << 20)) ;;
	*G) echo $((${s%G} << 30)) ;;
	*) echo "$s" ;;
	esac
}

# label SIZE: "64K" -> "64KiB", as xferbench names sizes.
label() {
	local s=$1
	case $s in
	*K) echo "${s%K}KiB" ;;
	*M) echo "${s%M}MiB" ;;
	*G) echo "${s%G}GiB" ;;
	*) echo "${s}B" ;;
	esac
}

# --- in the guest ------------------------------------------------------------

G_PIDS=()

guest_cleanup() {
	local p
	trap '' TERM INT
	[ -n "$FG_PID" ] && kill "$FG_PID" 2>/dev/null
	for p in "${G_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${G_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	rm -rf "${GTMP:-/nonexistent}"
}

# cmdline CMD...: note the command once in raw/commands.txt, with the
# private paths replaced by names.
cmdline() {
	local line="$*"
	line=${line//$GTMP\//}
	note_command "$line"
}

# PIN_A, PIN_B: a taskset prefix for a's and b's side, or nothing.
PIN_A=() PIN_B=()

listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# wait_listen PORT: until something listens on it (10 s at most).
wait_listen() {
	local i
	for ((i = 0; i < 200; i++)); do
		listening "$1" && return 0
		sleep 0.05
	done
	return 1
}

# start_xferd NAME IP PORT CPU PEER: XD_PID once its socket answers and its
# port listens.  PEER (ip:port): the other node, a configured peer (without
# a cluster key xferd dials known peers only).
start_xferd() {
	local name=$1 ip=$2 port=$3 cpu=$4 peer=$5 i
	local args=(-s "$GTMP/$name.sock" -o "listen=$ip:$port" -o "peer=$peer"
		-o "node_name=$name" -l warn)
	[ "$cpu" != none ] && args+=(-o "progress_cpu=$cpu")
	cmdline "$XFERD" "${args[@]}"
	"$XFERD" "${args[@]}" >"$OUT/raw/xferd_$name.log" 2>&1 &
	XD_PID=$!
	G_PIDS+=("$XD_PID")
	for ((i = 0; i < 300; i++)); do
		kill -0 "$XD_PID" 2>/dev/null || break
		"$XCTL" -s "$GTMP/$name.sock" status >/dev/null 2>&1 && listening "$port" && return 0
		sleep 0.1
	done
	log "xferd $name did not start:"
	cat "$OUT/raw/xferd_$name.log" >&2
	exit 1
}

# pt_run PASS TOOL TITLE SLOG CLOG: one perftest run on PT_PORT: the
# server PT_SRV (b's side) in the background, its output appended to SLOG
# under "=== pass PASS TITLE", then the client PT_CLI (a's side) with its
# output in CLOG; the client's status.
PT_SRV=() PT_CLI=()
pt_run() {
	local pass=$1 tool=$2 title=$3 slog=$4 clog=$5 rc spid
	echo "=== pass $pass $title" >>"$slog"
	timeout -k 5 "$RUN_TIMEOUT" "${PT_SRV[@]}" >>"$slog" 2>&1 &
	spid=$!
	G_PIDS+=("$spid")
	wait_listen "$PT_PORT" || warn "pass $pass: $tool server not listening"
	cmdline "${PT_SRV[@]/#$PT_PORT/PORT}" "&"
	cmdline "${PT_CLI[@]/#$PT_PORT/PORT}"
	waitrun "$clog" timeout -k 5 "$RUN_TIMEOUT" "${PT_CLI[@]}"
	rc=$?
	wait "$spid" 2>/dev/null
	return $rc
}

# pt_bw PASS TOOL SIZE: one perftest bandwidth run, b's device serving,
# a's device the client; RES lines to raw/passN.res.
PT_PORT=18600
pt_bw() {
	local pass=$1 tool=$2 size=$3 n rc lbl
	local slog="$OUT/raw/${tool}_server.log" clog
	lbl=$(label "$size")
	clog="$OUT/raw/$tool.$lbl.pass$pass.log"
	n=$(($(bytes "$PT_BYTES") / $(bytes "$size") / PT_QPS))
	[ $n -ge 5 ] || n=5
	PT_PORT=$((PT_PORT + 1))
	PT_SRV=("${PIN_B[@]}" "$tool" -d "$B_DEV" -x "$B_GID" -i 1 -p "$PT_PORT"
		-s "$(bytes "$size")" -n "$n" -q "$PT_QPS" -F --report_gbits)
	PT_CLI=("${PIN_A[@]}" "$tool" -d "$A_DEV" -x "$A_GID" -i 1 -p "$PT_PORT"
		-s "$(bytes "$size")" -n "$n" -q "$PT_QPS" -F --report_gbits "$B_IP")
	pt_run "$pass" "$tool" "$tool $lbl" "$slog" "$clog"
	rc=$?
	# " #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]"
	# then one line of numbers.
	if [ $rc -ne 0 ] || ! awk -v t="$tool" -v l="$lbl" '
		/BW average\[Gb\/sec\]/ { hdr = 1; next }
		hdr && $1 ~ /^[0-9]+$/ {
			printf "RES perftest %s %s bw_avg %.6g GB/s\n", t, l, $4 / 8
			printf "RES perftest %s %s bw_peak %.6g GB/s\n", t, l, $3 / 8
			ok = 1; exit
		}
		END { exit !ok }' "$clog" >>"$OUT/raw/pass$pass.res"; then
		warn "pass $pass: $tool $lbl failed (rc $rc): $(grep -v '^ *$' "$clog" | tail -n 1)"
	fi
}

# pt_lat PASS: ib_write_lat, 8 B.
pt_lat() {
	local pass=$1 rc clog="$OUT/raw/ib_write_lat.pass$1.log"
	PT_PORT=$((PT_PORT + 1))
	PT_SRV=("${PIN_B[@]}" ib_write_lat -d "$B_DEV" -x "$B_GID" -i 1 -p "$PT_PORT"
		-s 8 -n "$LAT_ITERS" -F)
	PT_CLI=("${PIN_A[@]}" ib_write_lat -d "$A_DEV" -x "$A_GID" -i 1 -p "$PT_PORT"
		-s 8 -n "$LAT_ITERS" -F "$B_IP")
	pt_run "$pass" ib_write_lat ib_write_lat "$OUT/raw/ib_write_lat_server.log" "$clog"
	rc=$?
	# "#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%"
	if [ $rc -ne 0 ] || ! awk '
		/t_typical/ { hdr = 1; next }
		hdr && $1 ~ /^[0-9]+$/ {
			printf "RES perftest ib_write_lat 8B lat_min %s us\n", $3
			printf "RES perftest ib_write_lat 8B lat_max %s us\n", $4
			printf "RES perftest ib_write_lat 8B lat_typical %s us\n", $5
			printf "RES perftest ib_write_lat 8B lat_avg %s us\n", $6
			printf "RES perftest ib_write_lat 8B lat_p99 %s us\n", $8
			printf "RES perftest ib_write_lat 8B lat_p999 %s us\n", $9
			ok = 1; exit
		}
		END { exit !ok }' "$clog" >>"$OUT/raw/pass$pass.res"; then
		warn "pass $pass: ib_write_lat failed (rc $rc): $(grep -v '^ *$' "$clog" | tail -n 1)"
	fi
}

# xb PASS NAME ARGS...: xferbench (a's side, target at b), RES lines to
# raw/passN.res.
xb() {
	local pass=$1 name=$2 rc
	shift 2
	local cmd=("$XB" --socket "$GTMP/a.sock" --target-socket "$GTMP/b.sock")
	[ "$CPU_A" != none ] && cmd+=(--cpu "$CPU_A")
	[ "$CPU_B" != none ] && cmd+=(--target-cpu "$CPU_B")
	cmd+=("$@")
	cmdline "${cmd[@]}"
	waitrun "$OUT/raw/$name.pass$pass.log" timeout -k 5 "$RUN_TIMEOUT" "${cmd[@]}"
	rc=$?
	grep '^RES ' "$OUT/raw/$name.pass$pass.log" >>"$OUT/raw/pass$pass.res"
	[ $rc -eq 0 ] ||
		warn "pass $pass: xferbench $name exited $rc (124: timeout): $(grep -v '^RES' "$OUT/raw/$name.pass$pass.log" | tail -n 1)"
	# The path of every row (bw: "  64KiB ... rdma, 16, 123"; lat: "path
	# rdma)" in its header): numbers over TCP would be no RDMA benchmark.
	grep -Eo '(^  [0-9]+[KMG]?i?B .* ([a-z-]+),|path [a-z-]+\))' "$OUT/raw/$name.pass$pass.log" |
		sed -E 's/^  ([0-9]+[KMG]?i?B) .* ([a-z-]+),$/\1 \2/; s/^path ([a-z-]+)\)$/8B \1/' |
		while read -r sz path; do
			echo "$pass $name $sz $path" >>"$OUT/raw/paths.txt"
			[ "$path" = rdma ] || warn "pass $pass: xferbench $name $sz went on path $path, not rdma"
		done
}

xferctl_view() {
	local pass=$1 n
	for n in a b; do
		"$XCTL" -s "$GTMP/$n.sock" --json status >"$OUT/raw/xferctl_status_$n.pass$pass.json" 2>&1 ||
			warn "pass $pass: xferctl status on $n failed"
		"$XCTL" -s "$GTMP/$n.sock" --json rails >"$OUT/raw/xferctl_rails_$n.pass$pass.json" 2>&1 ||
			warn "pass $pass: xferctl rails on $n failed"
	done
	cmdline "$XCTL" -s "{a,b}.sock" --json status
	cmdline "$XCTL" -s "{a,b}.sock" --json rails
}

guest_main() {
	OUT=$1
	local p pass t0 t1 s sizes_csv n rc
	[ "${RXE_VM_GUEST:-}" = 1 ] || { log "--guest: not in the RDMA guest"; exit 1; }
	GTMP=$(mktemp -d /tmp/bench-rdma.XXXXXX)
	trap guest_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	mkdir -p "$OUT/raw"
	for p in xferd xferbench xferctl; do
		# A private copy: a rebuild on the host cannot mix versions.
		cp "$XFER_BUILD/$p" "$GTMP/$p" || { log "missing $XFER_BUILD/$p"; exit 1; }
	done
	XFERD=$GTMP/xferd XB=$GTMP/xferbench XCTL=$GTMP/xferctl
	for t in ib_write_bw ib_read_bw ib_write_lat ss jq; do
		command -v "$t" >/dev/null || { log "$t is missing (make deps installs perftest)"; exit 1; }
	done
	if [ "$(nproc)" -lt 2 ]; then
		CPU_A=none CPU_B=none XFERD_CPU_A=none XFERD_CPU_B=none
	fi
	[ "$CPU_A" = none ] || PIN_A=(taskset -c "$CPU_A")
	[ "$CPU_B" = none ] || PIN_B=(taskset -c "$CPU_B")
	# From the guest (tests/rdma/vm.sh).
	# shellcheck disable=SC2153
	A_DEV=$RXE_DEV A_GID=$RXE_GID_INDEX A_IP=$RXE_IP A_PORT=7474
	if [ -n "${RXE_DEV2:-}" ]; then
		B_DEV=$RXE_DEV2 B_GID=$RXE_GID_INDEX2 B_IP=$RXE_IP2 B_PORT=7474
	else
		B_DEV=$A_DEV B_GID=$A_GID B_IP=$A_IP B_PORT=7475
	fi
	start_xferd b "$B_IP" "$B_PORT" "$XFERD_CPU_B" "$A_IP:$A_PORT"
	PID_B=$XD_PID
	start_xferd a "$A_IP" "$A_PORT" "$XFERD_CPU_A" "$B_IP:$B_PORT"
	PID_A=$XD_PID
	{
		echo "guest: $(nproc) vCPUs, $(free -m | awk '/Mem:/{print $2 " MiB"}'), kernel $(uname -r)"
		echo "setup: a = xferd at $A_IP:$A_PORT with $A_DEV (GID $A_GID), b = xferd at $B_IP:$B_PORT with $B_DEV (GID $B_GID)"
		echo "rxe: $(ibv_devinfo -d "$A_DEV" -i 1 | awk '/active_mtu/{print "active MTU " $2 " " $3}'), veth MTU $(cat /sys/class/net/veth0/mtu)"
		echo "perftest: $(ib_write_bw --version 2>&1 | head -n 1)"
		echo "pinning: initiator and perftest client CPU $CPU_A, target and perftest server CPU $CPU_B, progress threads of xferd a CPU $XFERD_CPU_A, b CPU $XFERD_CPU_B"
		echo "xferd: $("$XFERD" -V 2>&1 | head -n 1)"
	} >"$OUT/guest.txt"
	"$XCTL" -s "$GTMP/a.sock" --json rails >"$OUT/raw/rails_a.json" 2>&1
	"$XCTL" -s "$GTMP/b.sock" --json rails >"$OUT/raw/rails_b.json" 2>&1
	log "guest: a on $A_DEV, b on $B_DEV; $PASSES passes; logs in $OUT"

	sizes_csv=$(echo "$SIZES" | tr ' ' ',')
	t0=$(date +%s)
	for ((pass = 1; pass <= PASSES; pass++)); do
		: >"$OUT/raw/pass$pass.res"
		log "pass $pass/$PASSES: perftest ib_write_bw, ib_read_bw ($SIZES)"
		for s in $SIZES; do
			pt_bw "$pass" ib_write_bw "$s"
			pt_bw "$pass" ib_read_bw "$s"
		done
		log "pass $pass/$PASSES: xferbench bw write, read"
		xb "$pass" bw_write bw --op write --sizes "$sizes_csv" --time-ms "$TIME_MS" --reps "$REPS"
		xb "$pass" bw_read bw --op read --sizes "$sizes_csv" --time-ms "$TIME_MS" --reps "$REPS"
		log "pass $pass/$PASSES: ib_write_lat, xferbench lat 8 B"
		pt_lat "$pass"
		xb "$pass" lat lat --size 8 --iters "$LAT_ITERS" --warmup $((LAT_ITERS / 10))
		xferctl_view "$pass"
		for n in a b; do
			[ "$n" = a ] && p=$PID_A || p=$PID_B
			kill -0 "$p" 2>/dev/null || { warn "xferd $n died; see raw/xferd_$n.log"; exit 1; }
		done
	done
	t1=$(date +%s)
	echo "$((t1 - t0))" >"$OUT/raw/seconds"
	# Pair setup: perftest's bytes go rxe0 <-> rxe1 over the veth; xferd's
	# must too, or the comparison is void.
	if [ "$SETUP" = pair ]; then
		jq -r --arg d "$A_DEV" '.rails[] | select(.device != $d and
			((.bytes_tx // 0) + (.bytes_rx // 0)) > 0) |
			"xferd a moved \(.bytes_tx) B out, \(.bytes_rx) B in over \(.device), not only over \($d): not all of its traffic crossed the veth"' \
			"$OUT/raw/xferctl_rails_a.pass$PASSES.json" 2>/dev/null |
			while read -r line; do warn "$line"; done
	fi
	for n in a b; do
		[ "$n" = a ] && p=$PID_A || p=$PID_B
		kill -TERM "$p"
		wait "$p"
		rc=$?
		[ $rc -eq 0 ] || warn "xferd $n exited $rc after SIGTERM"
		[ -s "$OUT/raw/xferd_$n.log" ] &&
			warn "xferd $n logged $(wc -l <"$OUT/raw/xferd_$n.log") line(s) at level warn or above, first: $(head -n 1 "$OUT/raw/xferd_$n.log")"
	done
	G_PIDS=()
	log "guest: passes done in $((t1 - t0)) s"
	[ -n "${STAGES_BUILD:-}" ] && stages_run
	return 0
}

# The 8 B round trip against a pair of stamping xferds (STAGES_BUILD),
# split at their stamps: the client's and a's part, the RDMA write and
# its completion, and the way back (bench/stages.h).
stages_run() {
	local p
	for p in xferd xferbench; do
		cp "$STAGES_BUILD/$p" "$GTMP/stages-$p" || { warn "missing $STAGES_BUILD/$p"; return; }
	done
	XFERD=$GTMP/stages-xferd XB=$GTMP/stages-xferbench
	start_xferd b "$B_IP" "$B_PORT" "$XFERD_CPU_B" "$A_IP:$A_PORT"
	start_xferd a "$A_IP" "$A_PORT" "$XFERD_CPU_A" "$B_IP:$B_PORT"
	log "guest: xferbench lat --stages against stamping xferds"
	local xcpu=$XFERD_CPU_A
	[ "$xcpu" = none ] && xcpu=0
	# "Pass" stages: its RES lines stay out of the passes' medians.
	xb stages stages lat --size 8 --iters "$LAT_ITERS" \
		--warmup $((LAT_ITERS / 10)) --stages --xferd-cpu "$xcpu"
	mv "$OUT/raw/stages.passstages.log" "$OUT/raw/stages.log"
	for p in "${G_PIDS[@]}"; do kill -TERM "$p"; wait "$p"; done
	G_PIDS=()
}

# --- on the host ---------------------------------------------------------------

report() {
	local secs
	secs=$(cat "$OUT/raw/seconds" 2>/dev/null || echo "?")
	for ((pass = 1; pass <= PASSES; pass++)); do
		res_rows "$pass" "$OUT/raw/pass$pass.res"
	done >"$OUT/all.tsv"
	# xferd's own view per pass and node: "pass node paths ops_failed rails".
	for ((pass = 1; pass <= PASSES; pass++)); do
		for n in a b; do
			st="$OUT/raw/xferctl_status_$n.pass$pass.json" ra="$OUT/raw/xferctl_rails_$n.pass$pass.json"
			paths=$(xferctl_paths "$st")
			failed=$(xferctl_failed "$st")
			rails=$(jq -r '[.rails[]? | "\(.device): \(.qps // "?") QPs, tx \(.bytes_tx // "?") B, rx \(.bytes_rx // "?") B, \(.errors // "?") errors" +
				(if (.qp // []) | length > 0 then " (" + ([.qp[] | "\(.peer) \(.qpn) \(.state) \(.bytes) B"] | join(", ")) + ")" else "" end)] |
				join("; ")' "$ra" 2>/dev/null || echo "?")
			printf '%s\t%s\t%s\t%s\t%s\n' "$pass" "$n" "$paths" "$failed" "${rails:-none}"
		done
	done >"$OUT/xferctl.tsv"

	{
	cat <<EOF
$HEADING

Generated by \`bench/bench-rdma.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'); $PASSES interleaved passes, $secs s
in a qemu guest ($ACCEL). Raw logs: \`${OUT#"$ROOT"/}/\`.

Soft-RoCE (\`rdma_rxe\`) in the qemu guest of \`tests/rdma/vm.sh\`, $SETUP setup: $(if [ "$SETUP" = pair ]; then
	echo "rxe0 on 10.0.0.1 and rxe1 on 10.0.0.2, the two ends of a veth pair, so every packet crosses the veth"
else
	echo "both ends on rxe0 (10.0.0.1), which loops the packets back inside"
fi).
Two xferds stand in for two nodes: a with rxe0, b with $( [ "$SETUP" = pair ] && echo rxe1 || echo "rxe0 too (port 7475)" ). \`xferbench\` runs
against a: its initiator talks to a's xferd and its target process to b's (\`--target-socket\`),
so every byte goes between the two xferds over RDMA (path \`rdma\`, checked on every row):
a write moves data a → b, a read b → a. perftest runs on the same devices the same way:
server on b's device, client on a's, $PT_QPS queue pairs (\`-q\`; xferd's \`rdma_qps\` is 2 by
default), \`-n\` = $PT_BYTES ÷ size ÷ $PT_QPS per queue pair (5 at least), \`--report_gbits\`
(Gbit/s ÷ 8 = GB/s). Order within a pass: ib_write_bw and ib_read_bw for every size,
xferbench bw write, read, ib_write_lat, xferbench lat (polling).

**These are emulated numbers**: RoCE done in software by the guest kernel, on CPUs that
qemu emulates$( [ "$ACCEL" = tcg ] && echo " (TCG: no hardware virtualization)" ). They say nothing about a real NIC; the ratio
xferd ÷ perftest says how much the daemon costs over raw verbs on the same device.

Every cell is **median (min–max) across the $PASSES passes**; a ratio is taken within each pass
before the median. GB/s = 10^9 B/s. An xferd bandwidth figure is the median of $REPS samples of
$TIME_MS ms within the pass; perftest's is its \`BW average\`.

EOF
	warnings_md
	awk -v P="$PASSES" -v sizes="$SIZES" -v fmt_int=1 -v fmt_tiny=1 -v lbl_bytes=1 "$BENCH_AWK"'
END {
	print "### Bandwidth (GB/s)"
	print ""
	print "| size | xferd write a → b | ib_write_bw | write ÷ perftest | xferd read b → a | ib_read_bw | read ÷ perftest |"
	print "|---|---|---|---|---|---|---|"
	ns = split(sizes, S, " ")
	for (i = 1; i <= ns; i++) {
		s = lbl(S[i])
		kw = "xferbench_bw|memfd_write|" s "|bw_median"
		kr = "xferbench_bw|memfd_read|" s "|bw_median"
		pw = "perftest|ib_write_bw|" s "|bw_avg"
		pr = "perftest|ib_read_bw|" s "|bw_avg"
		printf "| %s | %s | %s | %s | %s | %s | %s |\n", s, cell(kw, 1), cell(pw, 1), \
			ratio(kw, 1, pw, 1), cell(kr, 1), cell(pr, 1), ratio(kr, 1, pr, 1)
	}
	print ""
	print "### Latency: 8 B writes, one at a time (µs)"
	print ""
	print "xferd: submit → completion of one write at a time (a'"'"'s xferd posts an RDMA WRITE to b'"'"'s"
	print "memory and completes once the NIC acknowledged it: one round trip). `ib_write_lat` is a"
	print "ping-pong of writes and prints half its round trip; doubled, it is the round trip to"
	print "compare with."
	print ""
	print "| | p50 | p99 | p99.9 | min | mean | max |"
	print "|---|---|---|---|---|---|---|"
	L = "xferbench_lat|memfd_write|8B|"
	T = "perftest|ib_write_lat|8B|"
	printf "| xferd, polling (xfer_peek_cqe) | %s | %s | %s | %s | %s | %s |\n", cell(L "lat_p50", 1), \
		cell(L "lat_p99", 1), cell(L "lat_p999", 1), cell(L "lat_min", 1), cell(L "lat_mean", 1), cell(L "lat_max", 1)
	printf "| ib_write_lat, as printed (half a round trip; p50 = t_typical) | %s | %s | %s | %s | %s | %s |\n", \
		cell(T "lat_typical", 1), cell(T "lat_p99", 1), cell(T "lat_p999", 1), cell(T "lat_min", 1), \
		cell(T "lat_avg", 1), cell(T "lat_max", 1)
	printf "| ib_write_lat, round trip (2×) | %s | %s | %s | %s | %s | %s |\n", \
		cell(T "lat_typical", 2), cell(T "lat_p99", 2), cell(T "lat_p999", 2), cell(T "lat_min", 2), \
		cell(T "lat_avg", 2), cell(T "lat_max", 2)
	print ""
	printf "xferd p50 ÷ ib_write_lat round trip p50: %s.\n", ratio(L "lat_p50", 1, T "lat_typical", 2)
	print ""
}' "$OUT/all.tsv"
	cat <<EOF
### xferd's own view (xferctl after each pass)

Counters are cumulative since the xferds started; only the initiating side counts an
operation. Rails: live QPs, bytes sent and received, errors, and each QP (peer, QPN,
state, bytes).

| pass | node | paths (ops) | ops failed | rails |
|---|---|---|---|---|
$(xferctl_table "$OUT/xferctl.tsv")

### Machine

\`\`\`
$(cat "$OUT/machine.txt")
$(cat "$OUT/guest.txt" 2>/dev/null)
\`\`\`

### Commands (in the guest)

Every process ran under \`timeout $RUN_TIMEOUT\`; a.sock/b.sock are the xferds' sockets, PORT a
fresh port.

\`\`\`sh
$(cat "$OUT/raw/commands.txt" 2>/dev/null)
\`\`\`
EOF
	} >"$OUT/section.md"
	log "wrote $OUT/section.md"
}

host_main() {
	local build=${1:-build} rc t0
	BUILD=$(cd "$build" 2>/dev/null && pwd -P) || { log "no build dir '$build'"; exit 1; }
	case $BUILD/ in
	"$ROOT"/*) ;;
	*) log "$BUILD is outside $ROOT: the guest could not write its results there"; exit 1 ;;
	esac
	REPORT=$(results_file)
	for p in xferd xferbench xferctl; do
		[ -x "$BUILD/$p" ] || { log "missing $BUILD/$p: build it first (make BUILD=${build})"; exit 1; }
	done
	case $SETUP in single | pair) ;; *) log "RDMA_BENCH_SETUP must be single or pair"; exit 1 ;; esac
	export XFER_BUILD=$BUILD XFER_ROOT=$ROOT
	export RXE_VM_DIR=${RXE_VM_DIR:-$BUILD/rdma-vm}
	OUT=$BUILD/bench/rdma-$(date +%Y%m%d-%H%M%S)
	mkdir -p "$OUT/raw"
	if ! reason=$("$VM" probe); then
		log "cannot run the guest: $reason"
		exit 1
	fi
	"$VM" build || { log "could not build the guest (tests/rdma/vm.sh build)"; exit 1; }
	{
		echo "date: $(date -Is)"
		echo "host cpu: $(cpu_model) ($(nproc) CPUs online$(lscpu | sed -n 's/^Hypervisor vendor: */, /p') guest)"
		echo "host kernel: $(uname -r), $(os_name)"
		echo "qemu: $(qemu-system-x86_64 --version | head -n 1), guest $(cat "$RXE_VM_DIR/kernel-package" 2>/dev/null)"
		echo "tree: $(tree_version)"
	} >"$OUT/machine.txt"
	log "guest ($SETUP setup): $PASSES passes of sizes $SIZES"
	t0=$(date +%s)
	# About 3 minutes a pass under TCG with the default sizes.  vm.sh's
	# last line on stderr names the accelerator ("vm: 9.7 s wall (tcg)").
	env -u XFERD_SOCKET RXE_VM_SETUP="$SETUP" \
		RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-$((PASSES * 400 + 120))}" \
		"$VM" run bash "$SELF" --guest "$OUT" 2> >(tee "$OUT/raw/vm.log" >&2)
	rc=$?
	log "guest done in $(($(date +%s) - t0)) s (exit $rc)"
	ACCEL=$(sed -n 's/^vm: .* wall (\([a-z]*\)).*/\1/p' "$OUT/raw/vm.log" | tail -n 1)
	ACCEL=${ACCEL:-unknown}
	echo "accel: $ACCEL" >>"$OUT/machine.txt"
	[ $rc -eq 0 ] || { log "the guest run failed: no report"; exit 1; }
	report
	[ -n "${NO_REPORT:-}" ] && exit 0
	put_section "$HEADING" "$OUT/section.md" "$REPORT"
	log "wrote its section of $REPORT"
	put_summary bench-rdma.sh "RDMA (Soft-RoCE)" "$REPORT" "$OUT/section.md" "### Bandwidth (GB/s)" \
		"Soft-RoCE in a qemu guest ($ACCEL, $SETUP setup) on $(machine_cpu)" "make bench (bench/bench-rdma.sh)"
}

if [ "${1:-}" = --guest ]; then
	guest_main "$2"
else
	host_main "$@"
fi
