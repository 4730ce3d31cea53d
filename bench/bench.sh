#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench.sh BUILD - xferbench beside its same-run baselines -> bench/results/
#
# Starts a private xferd (progress thread on CPU 0) and runs PASSES
# interleaved passes.  Each pass: the single-thread memcpy baseline,
# xferbench bw (memfd and malloc/CMA), lat and rate, then UCX posix
# (ucx_perftest) as the external peer.  A noise probe runs before every
# pass and at the end, since this machine is shared.  After the last pass
# the idle xferd's RSS is read.  Raw logs go to BUILD/bench/<timestamp>/,
# the report to the day's file, bench/results/YYYY-MM-DD.md (its part
# between the "make bench" marker comments, replaced by a later run the
# same day; bench-tcp.sh and bench-rdma.sh add their sections there), and
# the goals table to its part of the summary, BENCHMARKS.md (bench-lib.sh:
# results_file, put_summary).  GPU results come from a GPU machine
# (tests/gpu/device.sh): bench/results/device-results.md.
#
# Installs nothing: `make bench` installs ucx-utils first; without
# ucx_perftest the UCX columns say "not run".
#
# env: PASSES=3, RUN_TIMEOUT=120 (s, every single process), TIME_MS=300,
#      REPS=7, SIZES="4K 64K 1M 16M 256M", NO_UCX=1 to skip UCX,
#      BENCH_REPORT=FILE (instead of the day's file), BENCH_SUMMARY=FILE
#      (instead of BENCHMARKS.md), NO_REPORT=1 (only BUILD/bench/...).
set -uo pipefail

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "bench: no build dir '$1'" >&2; exit 1; }
XFERD="$BUILD/xferd"
XB="$BUILD/xferbench"
PASSES=${PASSES:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
TIME_MS=${TIME_MS:-300}
REPS=${REPS:-7}
SIZES=${SIZES:-"4K 64K 1M 16M 256M"}
CMA_SIZES="1M 16M 256M"
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$ROOT/bench/bench-lib.sh"
REPORT=$(results_file)
HEADING="## Same node (\`make bench\`)"

TS=$(date +%Y%m%d-%H%M%S)
OUT="$BUILD/bench/$TS"
mkdir -p "$OUT/raw"
TMP=$(mktemp -d /tmp/xferbench.XXXXXX)
SOCK="$TMP/xferd.sock"
DPID='' UCX_SPID=''

cleanup() {
	# Only what this script started, by PID.
	[ -n "$UCX_SPID" ] && kill "$UCX_SPID" 2>/dev/null
	if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
		kill "$DPID" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$DPID" 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for p in "$XFERD" "$XB"; do
	[ -x "$p" ] || { log "missing $p: build it first (make bench does)"; exit 1; }
done
HAVE_UCX=1
if [ -n "${NO_UCX:-}" ]; then
	HAVE_UCX=0
	log "UCX skipped (NO_UCX set)"
elif ! command -v ucx_perftest >/dev/null; then
	HAVE_UCX=0
	log "ucx_perftest NOT FOUND: the UCX baseline will not run."
	log "  install Debian's ucx-utils (make bench does: apt-get install ucx-utils)"
fi
# shellcheck disable=SC2086 # unquoted: any run of blanks is one separator
sizes_csv=$(echo $SIZES | tr ' ' ',')
# shellcheck disable=SC2086
cma_csv=$(echo $CMA_SIZES | tr ' ' ',')

# run NAME PASS CMD... : under timeout; RES lines to raw/passN.res, the
# whole output to raw/NAME.passN.log, the command to raw/commands.txt.
run() {
	local name=$1 pass=$2 rc
	shift 2
	note_command "$*"
	timeout -k 5 "$RUN_TIMEOUT" "$@" > "$OUT/raw/$name.pass$pass.log" 2>&1
	rc=$?
	grep '^RES ' "$OUT/raw/$name.pass$pass.log" >> "$OUT/raw/pass$pass.res"
	if [ $rc -ne 0 ]; then
		warn "pass $pass: $name exited $rc (124: timeout): $(grep -v '^RES' "$OUT/raw/$name.pass$pass.log" | tail -1)"
	fi
	return $rc
}

# xferd's resident memory and the CPU it used during 1 s of idling.
daemon_idle() {
	local tag=$1 t0 t1
	t0=$(awk '{print $14 + $15}' "/proc/$DPID/stat")
	sleep 1
	t1=$(awk '{print $14 + $15}' "/proc/$DPID/stat")
	"$XB" rss --pid "$DPID" | sed "s/^RES xferd idle /RES xferd $tag /" > "$OUT/raw/rss_$tag.log"
	grep '^RES' "$OUT/raw/rss_$tag.log" >> "$OUT/raw/rss.res"
	echo "RES xferd $tag cpu cpu_pct $(( (t1 - t0) * 100 / $(getconf CLK_TCK) )) %" >> "$OUT/raw/rss.res"
}

# ucx_once PASS TEST SIZE ITERS WARMUP: one fresh server (CPU 0) and one
# client (CPU 1) over UCX_TLS=posix.  ucx_perftest prints MB/s meaning
# MiB/s, and ucp_put_lat's latency is half the round trip.
UCX_PORT=$((13500 + RANDOM % 400))
ucx_once() {
	local pass=$1 test=$2 size=$3 n=$4 w=$5 i crc
	local env=(UCX_TLS=posix UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n)
	local slog="$OUT/raw/ucx_server.log" clog="$OUT/raw/ucx_$test.$size.pass$pass.log"
	for (( i = 0; i < 100; i++ )); do
		UCX_PORT=$(( UCX_PORT >= 13999 ? 13500 : UCX_PORT + 1 ))
		port_listening "$UCX_PORT" || break
	done
	: > "$slog"
	env "${env[@]}" timeout "$RUN_TIMEOUT" stdbuf -oL ucx_perftest -p "$UCX_PORT" -c 0 > "$slog" 2>&1 &
	UCX_SPID=$!
	for (( i = 0; i < 200; i++ )); do
		grep -q "Waiting for connection" "$slog" && break
		port_listening "$UCX_PORT" && break
		kill -0 "$UCX_SPID" 2>/dev/null || break
		sleep 0.02
	done
	local cmd=(ucx_perftest localhost -p "$UCX_PORT" -c 1 -t "$test" -s "$size" -n "$n" -w "$w")
	local line="env ${env[*]} ucx_perftest -p PORT -c 0 & env ${env[*]} ucx_perftest localhost -p PORT -c 1 -t $test -s $size -n $n -w $w"
	note_command "$line"
	env "${env[@]}" timeout "$RUN_TIMEOUT" "${cmd[@]}" > "$clog" 2>&1
	crc=$?
	for (( i = 0; i < 100; i++ )); do kill -0 "$UCX_SPID" 2>/dev/null || break; sleep 0.05; done
	kill "$UCX_SPID" 2>/dev/null
	wait "$UCX_SPID" 2>/dev/null
	UCX_SPID=
	ucx_results "$pass" posix "$test" "$size" "$clog" "$crc" lat_p50 bw_overall rate_overall
}

# --- machine --------------------------------------------------------------

{
	echo "date: $(date -Is)"
	echo "cpu: $(machine_cpu)"
	echo "caches: $(lscpu | awk -F: '/^L[123][di ]* cache/{gsub(/^ +/, "", $2); s = s (s ? "; " : "") $1 " " $2} END{print s}')"
	echo "kernel: $(uname -r)"
	echo "os: $(os_name)"
	echo "memory: $(free -g | awk '/Mem:/{print $2 " GiB"}'), THP $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
	echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
	echo "compiler: $(${CC:-cc} --version 2>/dev/null | head -1), glibc $(ldd --version | head -1 | awk '{print $NF}')"
	echo "glibc memcpy: $(/lib64/ld-linux-x86-64.so.2 --list-tunables 2>/dev/null | awk '/non_temporal_threshold/{print "non-temporal threshold " $2}')"
	echo "ucx: $(ucx_version)"
	echo "xferd: $(xferd_version "$XFERD")"
} > "$OUT/machine.txt"

# --- the private xferd ----------------------------------------------------

timeout -k 5 $((PASSES * 300 + 120)) "$XFERD" -s "$SOCK" -o progress_cpu=0 -o listen=off -l warn > "$OUT/raw/xferd.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
[ -S "$SOCK" ] || { log "xferd did not start:"; cat "$OUT/raw/xferd.log" >&2; exit 1; }
# The timeout wrapper is our child; xferd is its child.
XPID=$(pgrep -P "$DPID" -x xferd || true)
[ -n "$XPID" ] && DPID=$XPID
echo "$XFERD -s SOCKET -o progress_cpu=0 -o listen=off -l warn" >> "$OUT/raw/commands.txt"
log "xferd pid $DPID on $SOCK; $PASSES passes; logs in $OUT"
daemon_idle fresh

XS=(--socket "$SOCK")
T0=$(date +%s)
for (( pass = 1; pass <= PASSES; pass++ )); do
	probe "before_pass$pass" "$DPID"
	log "pass $pass/$PASSES: memcpy baseline"
	run memcpy "$pass" "$XB" --cpu 0 memcpy --sizes "$sizes_csv" --time-ms "$TIME_MS" --reps "$REPS"
	run memcpy_memfd "$pass" "$XB" --cpu 0 memcpy --kind memfd --sizes 16M,256M --time-ms "$TIME_MS" --reps "$REPS"
	log "pass $pass/$PASSES: xferbench bw memfd"
	run bw_memfd "$pass" "$XB" "${XS[@]}" --cpu 1 bw --kind memfd --op write --sizes "$sizes_csv" --time-ms "$TIME_MS" --reps "$REPS"
	log "pass $pass/$PASSES: xferbench bw malloc (CMA)"
	run bw_malloc "$pass" "$XB" "${XS[@]}" --cpu 1 bw --kind malloc --op write --sizes "$cma_csv" --time-ms "$TIME_MS" --reps "$REPS"
	run bw_memfd_malloc "$pass" "$XB" "${XS[@]}" --cpu 1 bw --local-kind memfd --kind malloc --op write --sizes "$cma_csv" --time-ms "$TIME_MS" --reps "$REPS"
	log "pass $pass/$PASSES: xferbench lat, rate"
	run lat "$pass" "$XB" "${XS[@]}" --cpu 1 lat --size 8 --iters 200000
	run rate "$pass" "$XB" "${XS[@]}" --cpu 1 rate --size 64 --batch 64 --time-ms 1000 --reps 3
	if [ $HAVE_UCX = 1 ]; then
		log "pass $pass/$PASSES: UCX posix"
		ucx_once "$pass" ucp_put_bw 1048576 3000 100
		ucx_once "$pass" ucp_put_bw 16777216 200 10
		ucx_once "$pass" ucp_put_lat 8 200000 10000
		ucx_once "$pass" ucp_put_bw 64 1000000 10000
	fi
	kill -0 "$DPID" 2>/dev/null || { warn "xferd died; see $OUT/raw/xferd.log"; exit 1; }
done
probe end "$DPID"
T1=$(date +%s)
daemon_idle idle
log "done in $((T1 - T0)) s; writing $REPORT"

# --- the report -----------------------------------------------------------

# Every RES line tagged with its pass: "pass bench variant param metric value unit".
for (( pass = 1; pass <= PASSES; pass++ )); do
	res_rows "$pass" "$OUT/raw/pass$pass.res"
done > "$OUT/all.tsv"
res_rows 0 "$OUT/raw/rss.res" "$OUT/raw/probe.res" >> "$OUT/all.tsv"

{
cat <<EOF
$HEADING

Generated by \`make bench\` (\`bench/bench.sh\`) on $(date -u '+%Y-%m-%d %H:%M UTC'); $PASSES interleaved passes, $((T1 - T0)) s.
Raw logs: \`${OUT#"$ROOT"/}/\`.

Every cell is **median (min–max) across the $PASSES passes**; within a pass, a bandwidth
figure is itself the median of $REPS samples of $TIME_MS ms, and a ratio is taken within
each pass (xferd against the baseline run shortly before it in the same pass) before the
median across passes. GB/s = 10^9 B/s. This is a benchmark, not a test: the
machine is a shared VM and the noise probe below says how busy it was.

$(warnings_md)
## Machine

\`\`\`
$(cat "$OUT/machine.txt")
\`\`\`

## Setup

* One private \`xferd\` with its progress thread pinned to CPU 0 (\`-o progress_cpu=0\`, spin 50 µs).
* Two client processes through it: \`xferbench\` (initiator, CPU 1) and a forked
  target that owns the destination region, exports a token over a pipe and sleeps.
* memcpy baseline: \`xferbench memcpy\`, one thread on CPU 0 (the core that does xferd's
  copies), two distinct pre-touched buffers, the same sampling as \`xferbench bw\`.
* UCX: \`ucx_perftest\` from Debian's ucx-utils with \`UCX_TLS=posix\` (server CPU 0,
  client CPU 1). Its "MB/s" are MiB/s and are converted to GB/s here; its
  \`ucp_put_lat\` is half a round trip, while xferd's latency is submit → completion, a full
  round trip between two processes, so it is set against 2× UCX's figure.

EOF
awk -v P="$PASSES" -v sizes="$SIZES" -v cma_sizes="$CMA_SIZES" -v have_ucx="$HAVE_UCX" "$BENCH_AWK"'
END {
	MIB = 0.001048576
	ns = split(sizes, S, " ")
	print "## Bandwidth: same-node WRITE between two processes, memfd regions (GB/s)"
	print ""
	print "| size | memcpy (CPU 0) | xferd write | xferd / memcpy | UCX posix put_bw | xferd / UCX | goal |"
	print "|---|---|---|---|---|---|---|"
	for (i = 1; i <= ns; i++) {
		s = lbl(S[i])
		km = "memcpy|malloc|" s "|bw_median"
		kx = "xferbench_bw|memfd_write|" s "|bw_median"
		ku = "ucx|posix/ucp_put_bw|" s "|bw_overall"
		r = ratio(kx, 1, km, 1); rm = gmed
		ucx = have_ucx ? cell(ku, MIB) : "not run"
		ru = have_ucx ? ratio(kx, 1, ku, MIB) : "–"
		g = "–"
		if (s == "16MiB" || s == "256MiB")
			g = rm == "" ? "no data" : goal(rm >= 0.9) " (≥ 0.9× memcpy)"
		printf "| %s | %s | %s | %s | %s | %s | %s |\n", s, cell(km, 1), cell(kx, 1), r, ucx, ru, g
	}
	print ""
	print "memcpy between two memfd mappings (what xferd copies between), same core, same sampling:"
	print ""
	print "| size | memcpy, malloc buffers | memcpy, memfd mappings | xferd write | xferd / memcpy(memfd) |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= ns; i++) {
		s = lbl(S[i])
		kf = "memcpy|memfd|" s "|bw_median"
		if (!((1 SUBSEP kf) in V)) continue
		printf "| %s | %s | %s | %s | %s |\n", s, cell("memcpy|malloc|" s "|bw_median", 1), cell(kf, 1), \
			cell("xferbench_bw|memfd_write|" s "|bw_median", 1), ratio("xferbench_bw|memfd_write|" s "|bw_median", 1, kf, 1)
	}
	print ""
	print "## Bandwidth through CMA: registered malloc memory (GB/s)"
	print ""
	print "malloc → malloc is two CMA copies through xferd'"'"'s staging buffer (process_vm_readv, then"
	print "process_vm_writev); memfd → malloc is one process_vm_writev."
	print ""
	print "| size | memcpy (CPU 0) | xferd malloc → malloc | / memcpy | xferd memfd → malloc | / memcpy |"
	print "|---|---|---|---|---|---|"
	nc = split(cma_sizes, C, " ")
	for (i = 1; i <= nc; i++) {
		s = lbl(C[i])
		km = "memcpy|malloc|" s "|bw_median"
		ka = "xferbench_bw|malloc_write|" s "|bw_median"
		kb = "xferbench_bw|memfd-malloc_write|" s "|bw_median"
		printf "| %s | %s | %s | %s | %s | %s |\n", s, cell(km, 1), cell(ka, 1), ratio(ka, 1, km, 1), cell(kb, 1), ratio(kb, 1, km, 1)
	}
	print ""
	print "## Latency: one 8 B write at a time, submit → completion, both sides polling (µs)"
	print ""
	print "| | p50 | p99 | p99.9 | min | mean | max |"
	print "|---|---|---|---|---|---|---|"
	k = "xferbench_lat|memfd_write|8B|"
	printf "| xferd | %s | %s | %s | %s | %s | %s |\n", cell(k "lat_p50", 1), cell(k "lat_p99", 1), cell(k "lat_p999", 1), \
		cell(k "lat_min", 1), cell(k "lat_mean", 1), cell(k "lat_max", 1)
	ku = "ucx|posix/ucp_put_lat|8B|lat_p50"
	if (have_ucx) {
		printf "| UCX posix ucp_put_lat, one way (as printed) | %s | | | | | |\n", cell(ku, 1)
		printf "| UCX posix ucp_put_lat, round trip (2×) | %s | | | | | |\n", cell(ku, 2)
	}
	print ""
	p50 = medof(k "lat_p50", 1); p99 = medof(k "lat_p99", 1)
	print "| quantity | value | goal |"
	print "|---|---|---|"
	printf "| p50 | %s µs | %s (≤ 1 µs) |\n", cell(k "lat_p50", 1), p50 == "" ? "no data" : goal(p50 <= 1)
	printf "| p99 | %s µs | %s (≤ 5 µs) |\n", cell(k "lat_p99", 1), p99 == "" ? "no data" : goal(p99 <= 5)
	if (have_ucx)
		printf "| xferd p50 / UCX round trip p50 | %s | – |\n", ratio(k "lat_p50", 1, ku, 2)
	print ""
	print "## Small-operation rate: 64 B writes, batches of 64 independent SQEs, one xfer_submit per batch"
	print ""
	kr = "xferbench_rate|memfd_write_b64|64B|rate_median"
	rr = medof(kr, 1)
	print "| quantity | M writes/s | goal |"
	print "|---|---|---|"
	printf "| xferd, 64 B, batch 64 | %s | %s (≥ 2 M/s) |\n", cell(kr, 1), rr == "" ? "no data" : goal(rr >= 2)
	if (have_ucx)
		printf "| UCX posix ucp_put_bw 64 B message rate, for scale | %s | – |\n", cell("ucx|posix/ucp_put_bw|64B|rate_overall", 1e-6)
	print ""
	print "## Idle xferd"
	print ""
	print "| when | VmRSS KiB | RssAnon KiB | RssShmem KiB | CPU over 1 s idle | goal |"
	print "|---|---|---|---|---|---|"
	for (t = 1; t <= 2; t++) {
		w = t == 1 ? "fresh" : "idle"
		rss = medof("xferd|" w "|VmRSS|rss", 1)
		printf "| %s | %s | %s | %s | %s %% | %s |\n", \
			w == "fresh" ? "just started" : "after the benchmark, clients gone", \
			cell("xferd|" w "|VmRSS|rss", 1), cell("xferd|" w "|RssAnon|rss", 1), \
			cell("xferd|" w "|RssShmem|rss", 1), cell("xferd|" w "|cpu|cpu_pct", 1), \
			w == "fresh" ? "–" : rss == "" ? "no data" : goal(rss * 1024 <= 16e6) " (≤ 16 MB)"
	}
	print ""
	print "## Goals"
	print ""
	print "| goal | result | |"
	print "|---|---|---|"
	r = ratio("xferbench_bw|memfd_write|16MiB|bw_median", 1, "memcpy|malloc|16MiB|bw_median", 1); rm = gmed
	printf "| write 16 MiB ≥ 0.9× memcpy | %s | %s |\n", r, rm == "" ? "no data" : goal(rm >= 0.9)
	r = ratio("xferbench_bw|memfd_write|256MiB|bw_median", 1, "memcpy|malloc|256MiB|bw_median", 1); rm = gmed
	printf "| write 256 MiB ≥ 0.9× memcpy | %s | %s |\n", r, rm == "" ? "no data" : goal(rm >= 0.9)
	printf "| 8 B p50 ≤ 1 µs | %s µs | %s |\n", cell(k "lat_p50", 1), p50 == "" ? "no data" : goal(p50 <= 1)
	printf "| 8 B p99 ≤ 5 µs | %s µs | %s |\n", cell(k "lat_p99", 1), p99 == "" ? "no data" : goal(p99 <= 5)
	printf "| 64 B batched ≥ 2 M ops/s | %s M/s | %s |\n", cell(kr, 1), rr == "" ? "no data" : goal(rr >= 2)
	rss = medof("xferd|idle|VmRSS|rss", 1)
	printf "| idle xferd RSS ≤ 16 MB | %s KiB | %s |\n", cell("xferd|idle|VmRSS|rss", 1), rss == "" ? "no data" : goal(rss * 1024 <= 16e6)
	print ""
	print "## Noise probe"
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
}' "$OUT/all.tsv"
cat <<EOF

Top CPU consumers at each probe (%CPU over each process's lifetime):

\`\`\`
$(cat "$OUT/raw/load.txt")
\`\`\`

## Commands

Every process ran under \`timeout $RUN_TIMEOUT\`; SOCKET is a private temporary socket, PORT a free local port.

\`\`\`sh
$(sed "s|$SOCK|SOCKET|g; s|$ROOT/||g" "$OUT/raw/commands.txt")
\`\`\`
EOF
} > "$OUT/report.md"
log "wrote $OUT/report.md"

[ -n "${NO_REPORT:-}" ] && exit 0
put_between "make bench" "$OUT/report.md" "$REPORT"
log "wrote its part of $REPORT"
put_summary "make bench" "Same node (\`make bench\`)" "$REPORT" "$OUT/report.md" "## Goals" \
	"$(machine_cpu), $(os_name)" "make bench (bench/bench.sh)"
