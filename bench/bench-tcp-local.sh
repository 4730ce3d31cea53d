#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-tcp-local.sh BUILD [OLD_BUILD] - two xferds on one host's loopback
# beside plain TCP (bench/tcpbase) on the same loopback, interleaved.
#
# The variant of bench-tcp.sh for machines without iproute2, iperf3 or
# UCX (the GPU machines): no namespaces, the two xferds listen on
# 127.0.0.1 with ports of their own and xferbench's initiator talks to
# one, its target to the other (--target-socket), so every byte crosses
# the TCP link between them.  The baseline is tcpbase: an 8 B ping-pong
# with both ends busy-polling, and a stream of send()s of each size,
# pinned to the CPUs of the two progress threads.  With OLD_BUILD, the
# old xferd runs too, in the same passes.
#
# Prints a markdown table of medians (and min-max) over PASSES passes, and
# the ratios: xferd's round trip over tcpbase's, xferd's bandwidth over a
# tcpbase stream of the same size.  Raw output in BUILD/bench/tcp-local-*/.
#
# env: PASSES=5, SIZES="64K 1M 16M 256M", TIME_MS=300, REPS=5,
#      LAT_ITERS=20000, CPU_A/CPU_B (progress threads of a and b),
#      CPU_I/CPU_T (xferbench's initiator and target); defaults 2 3 4 5
#      with 6 CPUs or more, else 1 0 1 0.
set -uo pipefail

NEW=$(cd "${1:?usage: $0 BUILD [OLD_BUILD]}" && pwd) || exit 1
OLD=${2:+$(cd "$2" && pwd)}
PASSES=${PASSES:-5}
SIZES=${SIZES:-"64K 1M 16M 256M"}
TIME_MS=${TIME_MS:-300}
REPS=${REPS:-5}
LAT_ITERS=${LAT_ITERS:-20000}
if [ "$(nproc)" -ge 6 ]; then
	CPU_A=${CPU_A:-2} CPU_B=${CPU_B:-3} CPU_I=${CPU_I:-4} CPU_T=${CPU_T:-5}
else
	CPU_A=${CPU_A:-1} CPU_B=${CPU_B:-0} CPU_I=${CPU_I:-1} CPU_T=${CPU_T:-0}
fi
OUT="$NEW/bench/tcp-local-$(date +%Y%m%d-%H%M%S)"
TMP=$(mktemp -d /tmp/xferbench-tcp-local.XXXXXX)
PIDS=()
mkdir -p "$OUT"

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Without iproute2's ss (the GPU machines have none), ports are taken on
# trust and listeners given a moment.
listening() { command -v ss >/dev/null && ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 30000))
		listening "$p" || break
	done
	echo "$p"
}

# xferd_pair BUILD: a and b on loopback; sets SOCK_A SOCK_B.
xferd_pair() {
	local b=$1 pa pb
	pa=$(free_port) pb=$(free_port)
	SOCK_A=$TMP/a.sock SOCK_B=$TMP/b.sock
	rm -f "$SOCK_A" "$SOCK_B"
	# Each the other's configured peer: without a cluster key xferd
	# dials known peers only.
	"$b/xferd" -s "$SOCK_A" -o "listen=127.0.0.1:$pa" -o node_name=a \
		-o "peer=127.0.0.1:$pb" \
		-o progress_cpu="$CPU_A" -o socket_group=none -l warn >>"$OUT/xferd.log" 2>&1 &
	PIDS+=($!)
	"$b/xferd" -s "$SOCK_B" -o "listen=127.0.0.1:$pb" -o node_name=b \
		-o "peer=127.0.0.1:$pa" \
		-o progress_cpu="$CPU_B" -o socket_group=none -l warn >>"$OUT/xferd.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 200); do
		[ -S "$SOCK_A" ] && [ -S "$SOCK_B" ] && return 0
		sleep 0.05
	done
	echo "bench-tcp-local: xferd did not start (see $OUT/xferd.log)" >&2
	exit 1
}

stop_all() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	PIDS=()
}

# xferd_pass TAG BUILD PASS
xferd_pass() {
	local tag=$1 b=$2 pass=$3 csv
	csv=$(echo "$SIZES" | tr ' ' ',')
	xferd_pair "$b"
	local xs=(--socket "$SOCK_A" --target-socket "$SOCK_B" --cpu "$CPU_I" --target-cpu "$CPU_T")
	{
		"$b/xferbench" "${xs[@]}" lat --size 8 --iters "$LAT_ITERS"
		"$b/xferbench" "${xs[@]}" bw --op write --sizes "$csv" --time-ms "$TIME_MS" --reps "$REPS"
		"$b/xferbench" "${xs[@]}" bw --op read --sizes "$csv" --time-ms "$TIME_MS" --reps "$REPS"
	} >"$OUT/$tag.pass$pass.log" 2>&1
	stop_all
	awk -v t="$tag" '/^RES xferbench_lat .* lat_p(50|99) / { print t, $5, $6 }
		/^RES xferbench_bw .* bw_median / { sub(/memfd_/, "", $3); print t, $3 "_" $4, $6 }' \
		"$OUT/$tag.pass$pass.log" >>"$OUT/all.txt"
}

tcpbase_pass() {
	local pass=$1 port s
	port=$(free_port)
	"$NEW/tcpbase" server --port "$port" --cpu "$CPU_B" >"$OUT/tcpbase_server.log" 2>&1 &
	PIDS+=($!)
	if command -v ss >/dev/null; then
		for _ in $(seq 100); do listening "$port" && break; sleep 0.02; done
	else
		sleep 0.3
	fi
	{
		"$NEW/tcpbase" pingpong --connect "127.0.0.1:$port" --cpu "$CPU_A" --iters "$LAT_ITERS"
		for s in $SIZES; do
			"$NEW/tcpbase" stream --connect "127.0.0.1:$port" --cpu "$CPU_A" --size "$s" --time-ms "$TIME_MS"
		done
	} >"$OUT/tcpbase.pass$pass.log" 2>&1
	stop_all
	awk '/^RES tcpbase_lat .* lat_p(50|99) / { print "tcp", $4, $5 }
		/^RES tcpbase_bw / { print "tcp", $3, $5 }' "$OUT/tcpbase.pass$pass.log" >>"$OUT/all.txt"
}

: >"$OUT/all.txt"
for (( pass = 1; pass <= PASSES; pass++ )); do
	echo "bench-tcp-local: pass $pass/$PASSES" >&2
	tcpbase_pass "$pass"
	xferd_pass new "$NEW" "$pass"
	[ -n "$OLD" ] && xferd_pass old "$OLD" "$pass"
done

# Medians; tcpbase's stream rows are named by bytes, xferbench's by label.
awk -v sizes="$SIZES" -v old="${OLD:+1}" -v passes="$PASSES" '
function label(s,   n) {
	n = substr(s, 1, length(s) - 1)
	if (s ~ /K$/) return n "KiB"
	if (s ~ /M$/) return n "MiB"
	return s
}
function bytes(s,   n) {
	n = substr(s, 1, length(s) - 1)
	if (s ~ /K$/) return n * 1024
	if (s ~ /M$/) return n * 1048576
	return s
}
function med(k,   n, i, j, t, a) {
	n = split(v[k], a, " ")
	if (n == 0) return ""
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	lo[k] = a[1]; hi[k] = a[n]
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(k,   m) { m = med(k); return m == "" ? "–" : sprintf("%.3g (%.3g–%.3g)", m, lo[k], hi[k]) }
function ratio(a, b,   x, y) { x = med(a); y = med(b); return x == "" || y == "" || y == 0 ? "–" : sprintf("%.2f", x / y) }
{ v[$1 "|" $2] = v[$1 "|" $2] " " $3 }
END {
	printf "| row (medians of %d passes, min–max) | plain TCP (tcpbase) | xferd |%s xferd ÷ TCP |\n", passes, old ? " xferd before |" : ""
	printf "|---|---:|---:|%s---:|\n", old ? "---:|" : ""
	split("p50 p99", P, " ")
	for (i = 1; i <= 2; i++) {
		k = "lat_" P[i]
		printf "| 8 B round trip %s (µs) | %s | %s |%s %s |\n", P[i], cell("tcp|" k), cell("new|" k),
			old ? " " cell("old|" k) " |" : "", ratio("new|" k, "tcp|" k)
	}
	n = split(sizes, S, " ")
	for (op = 1; op <= 2; op++) {
		o = op == 1 ? "write" : "read"
		for (i = 1; i <= n; i++) {
			k = o "_" label(S[i]); t = "tcp|" bytes(S[i]) "B"
			printf "| %s %s (GB/s) | %s | %s |%s %s |\n", o, label(S[i]), cell(t), cell("new|" k),
				old ? " " cell("old|" k) " |" : "", ratio("new|" k, t)
		}
	}
}' "$OUT/all.txt" | tee "$OUT/table.md"
echo "bench-tcp-local: raw output in $OUT" >&2
