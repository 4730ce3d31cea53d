#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-rate.sh BUILD [BASE_XFERD] - the small-write rate and the 8 B round
# trip beside UCX posix, in interleaved passes.
#
# Each pass runs, one after the other: xferbench rate (64 B writes in
# linked batches of 64 and 256, one CQE per batch, and in batches of 64
# independent SQEs) and lat (8 B), through BUILD's xferd and, when
# given, through BASE_XFERD (another tree's xferd, for a before/after);
# then ucx_perftest ucp_put_bw 64 B and ucp_put_lat 8 B over
# UCX_TLS=posix.  Ratios are taken within a pass.  Each xferd is private,
# its progress thread on CPU 0; clients on CPU 1 (as bench.sh).  Prints
# a markdown report to stdout; raw logs in BUILD/bench/rate-<timestamp>/.
#
# env: PASSES=5, TIME_MS=500, REPS=3, RUN_TIMEOUT=120
set -uo pipefail

BUILD=$(cd "${1:-build}" && pwd) || exit 1
BASE=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
XB="$BUILD/xferbench"
PASSES=${PASSES:-5}
TIME_MS=${TIME_MS:-500}
REPS=${REPS:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$ROOT/bench/bench-lib.sh"

OUT="$BUILD/bench/rate-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT/raw"
TMP=$(mktemp -d /tmp/xferbench-rate.XXXXXX)
declare -A DPID
UCX_SPID=''

cleanup() {
	[ -n "$UCX_SPID" ] && kill "$UCX_SPID" 2>/dev/null
	for v in "${!DPID[@]}"; do kill "${DPID[$v]}" 2>/dev/null; done
	sleep 0.3
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_xferd VARIANT BINARY
start_xferd() {
	local v=$1 bin=$2
	"$bin" -s "$TMP/$v.sock" -o progress_cpu=0 -o listen=off -l warn > "$OUT/raw/xferd.$v.log" 2>&1 &
	DPID[$v]=$!
	for _ in $(seq 100); do [ -S "$TMP/$v.sock" ] && break; sleep 0.05; done
	[ -S "$TMP/$v.sock" ] || { log "xferd $v did not start"; exit 1; }
}

# xrun VARIANT PASS NAME ARGS...: xferbench through VARIANT's xferd; its
# RES lines tagged with the variant.
xrun() {
	local v=$1 pass=$2 name=$3
	shift 3
	note_command "xferbench --socket SOCKET --cpu 1 $*"
	timeout -k 5 "$RUN_TIMEOUT" taskset -c 1 "$XB" --socket "$TMP/$v.sock" --cpu 1 "$@" \
		> "$OUT/raw/$name.$v.pass$pass.log" 2>&1 ||
		warn "pass $pass: $name ($v) exited $?"
	awk -v v="$v" '$1 == "RES" { $2 = $2 "@" v; print }' "$OUT/raw/$name.$v.pass$pass.log" >> "$OUT/raw/pass$pass.res"
}

UCX_PORT=$((14000 + RANDOM % 400))
ucx_once() {
	local pass=$1 test=$2 size=$3 n=$4 w=$5 i
	local env=(UCX_TLS=posix UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n)
	local clog="$OUT/raw/ucx_$test.$size.pass$pass.log"
	for (( i = 0; i < 100; i++ )); do
		UCX_PORT=$(( UCX_PORT >= 14399 ? 14000 : UCX_PORT + 1 ))
		port_listening "$UCX_PORT" || break
	done
	env "${env[@]}" timeout "$RUN_TIMEOUT" ucx_perftest -p "$UCX_PORT" -c 0 > "$OUT/raw/ucx_server.log" 2>&1 &
	UCX_SPID=$!
	for (( i = 0; i < 200; i++ )); do
		port_listening "$UCX_PORT" && break
		sleep 0.02
	done
	note_command "env ${env[*]} ucx_perftest -p PORT -c 0 & env ${env[*]} ucx_perftest localhost -p PORT -c 1 -t $test -s $size -n $n -w $w"
	env "${env[@]}" timeout "$RUN_TIMEOUT" ucx_perftest localhost -p "$UCX_PORT" -c 1 -t "$test" -s "$size" -n "$n" -w "$w" > "$clog" 2>&1
	local crc=$?
	wait "$UCX_SPID" 2>/dev/null
	UCX_SPID=
	ucx_results "$pass" posix "$test" "$size" "$clog" "$crc" lat_p50 rate_overall
}

command -v ucx_perftest >/dev/null || { log "no ucx_perftest (Debian's ucx-utils)"; exit 1; }
HAVE_UCX=1
VARIANTS=(new)
start_xferd new "$BUILD/xferd"
if [ -n "$BASE" ]; then
	VARIANTS+=(base)
	start_xferd base "$BASE"
fi

for (( pass = 1; pass <= PASSES; pass++ )); do
	probe "pass$pass"
	log "pass $pass/$PASSES"
	# The order of the variants alternates between passes.
	order=("${VARIANTS[@]}")
	(( pass % 2 == 0 )) && [ ${#VARIANTS[@]} -eq 2 ] && order=(base new)
	for v in "${order[@]}"; do
		for b in 64 256; do
			xrun "$v" "$pass" "rate_l$b" rate --size 64 --batch "$b" --linked --time-ms "$TIME_MS" --reps "$REPS"
		done
		xrun "$v" "$pass" rate_i64 rate --size 64 --batch 64 --time-ms "$TIME_MS" --reps "$REPS"
		xrun "$v" "$pass" lat lat --size 8 --iters 200000
	done
	ucx_once "$pass" ucp_put_bw 64 2000000 10000
	ucx_once "$pass" ucp_put_lat 8 200000 10000
done
probe end

for (( pass = 1; pass <= PASSES; pass++ )); do res_rows "$pass" "$OUT/raw/pass$pass.res"; done > "$OUT/all.tsv"
res_rows 0 "$OUT/raw/probe.res" >> "$OUT/all.tsv"

# --- the report: median (min-max) over passes; ratios within a pass ------
{
	echo "Machine: $(machine_cpu); $(uname -r); UCX $(ucx_version); load average at the start of each pass and at the end: $(awk '$2 == "probe" && $5 == "loadavg1" { printf "%s%s", s, $6; s = ", " }' "$OUT/all.tsv")."
	echo
	echo "$PASSES interleaved passes; each cell median (min–max) over the passes; a ratio is taken within each pass. Raw: \`${OUT#"$ROOT"/}\`."
	echo
	awk -v P="$PASSES" -v variants="${VARIANTS[*]}" '
	function med(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function cell(k, f,   n, p, a, lo, hi) {
		n = 0
		for (p = 1; p <= P; p++) if ((p, k) in V) a[++n] = V[p, k] * f
		if (!n) return "–"
		lo = a[1]; hi = a[1]
		for (p = 1; p <= n; p++) { if (a[p] < lo) lo = a[p]; if (a[p] > hi) hi = a[p] }
		return sprintf("%.3g (%.3g–%.3g)", med(a, n), lo, hi)
	}
	function ratio(k1, f1, k2, f2,   n, p, a, lo, hi) {
		n = 0
		for (p = 1; p <= P; p++) if ((p, k1) in V && (p, k2) in V && V[p, k2] > 0) a[++n] = V[p, k1] * f1 / (V[p, k2] * f2)
		if (!n) return "–"
		lo = a[1]; hi = a[1]
		for (p = 1; p <= n; p++) { if (a[p] < lo) lo = a[p]; if (a[p] > hi) hi = a[p] }
		return sprintf("%.2f× (%.2f–%.2f)", med(a, n), lo, hi)
	}
	{ V[$1, $2 "|" $3 "|" $4 "|" $5] = $6 }
	END {
		nv = split(variants, vs, " ")
		ucxbw = "ucx|posix/ucp_put_bw|64B|rate_overall"
		ucxlat = "ucx|posix/ucp_put_lat|8B|lat_p50"
		print "| 64 B writes | " (nv == 2 ? "before (M/s) | " : "") "xferd (M/s) | UCX put_bw (M/s) | xferd / UCX" (nv == 2 ? " | xferd / before" : "") " |"
		print "|---|" (nv == 2 ? "---|" : "") "---|---|---|" (nv == 2 ? "---|" : "")
		split("b64_linked b256_linked b64", kinds, " ")
		split("linked batches of 64|linked batches of 256|batches of 64 independent SQEs", names, "|")
		for (i = 1; i <= 3; i++) {
			kn = "xferbench_rate@new|memfd_write_" kinds[i] "|64B|rate_median"
			kb = "xferbench_rate@base|memfd_write_" kinds[i] "|64B|rate_median"
			printf "| %s | %s%s | %s | %s%s |\n", names[i], nv == 2 ? cell(kb, 1) " | " : "", cell(kn, 1),
				cell(ucxbw, 1e-6), ratio(kn, 1, ucxbw, 1e-6), nv == 2 ? " | " ratio(kn, 1, kb, 1) : ""
		}
		print ""
		print "| 8 B | " (nv == 2 ? "before p50 (µs) | " : "") "xferd round trip p50 (µs) | UCX put_lat p50 ×2 (µs) | xferd / UCX" (nv == 2 ? " | before / UCX" : "") " |"
		print "|---|" (nv == 2 ? "---|" : "") "---|---|---|" (nv == 2 ? "---|" : "")
		kn = "xferbench_lat@new|memfd_write|8B|lat_p50"
		kb = "xferbench_lat@base|memfd_write|8B|lat_p50"
		printf "| write, submit → CQE | %s%s | %s | %s%s |\n", nv == 2 ? cell(kb, 1) " | " : "", cell(kn, 1),
			cell(ucxlat, 2), ratio(kn, 1, ucxlat, 2), nv == 2 ? " | " ratio(kb, 1, ucxlat, 2) : ""
	}' "$OUT/all.tsv"
	echo
	echo "Commands (SOCKET: a private xferd's, \`xferd -s SOCKET -o progress_cpu=0 -o listen=off -l warn\`; clients under \`taskset -c 1\`):"
	echo
	echo '```sh'
	cat "$OUT/raw/commands.txt"
	echo '```'
	[ -s "$OUT/raw/warnings.txt" ] && { echo; warnings_md; }
} | tee "$OUT/report.md"
