#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-metrics.sh BUILD [OLD_BUILD] - what the metrics cost, in one run.
#
# 1. Interleaved passes of the same-node 8 B round trip (xferbench lat)
#    and the 64 B batched rate (xferbench rate, batches of 64), each
#    against a fresh xferd of BUILD with metrics_listen = off, then one
#    with the endpoint on and scraped every second by curl (and, with
#    OLD_BUILD, a build before the metrics: what recording the latency
#    histograms costs).  The order of the variants rotates every pass.
# 2. Scrape time: one xferd with 64 client processes connected and 16
#    other xferds linked to it (loopback), 200 scrapes by curl: median,
#    p99 and size of the answer; and the same through xferctl stats.
#
# Prints a table of medians (and the ratio to "off") and writes it to
# BUILD/bench-metrics.md.  env: PASSES=5, ITERS=100000.
set -uo pipefail

NEW=$(cd "${1:?usage: $0 BUILD [OLD_BUILD]}" && pwd) || exit 1
OLD=${2:+$(cd "$2" && pwd)}
PASSES=${PASSES:-5}
ITERS=${ITERS:-100000}
TMP=$(mktemp -d /tmp/xferbench-metrics.XXXXXX)
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_ports() { # N: N free loopback ports
	python3 -c '
import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]))]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])' "$1"
}

wait_sock() {
	for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done
	echo "no socket $1" >&2
	exit 1
}

# run_variant TAG BUILD PASS [XFERD ARGS...]
run_variant() {
	local tag=$1 b=$2 pass=$3 sock="$TMP/$1.sock" scraper='' port=''
	shift 3
	if [ "$tag" = on ]; then
		port=$(free_ports 1)
		set -- "$@" -o metrics_listen=127.0.0.1:"$port"
	fi
	"$b/xferd" -s "$sock" -o progress_cpu=0 -o listen=off -l warn "$@" \
		>"$TMP/$tag.log" 2>&1 &
	local dpid=$!
	wait_sock "$sock"
	if [ -n "$port" ]; then
		( while :; do curl -sf -o /dev/null "http://127.0.0.1:$port/metrics"; sleep 1; done ) &
		scraper=$!
	fi
	{
		"$b/xferbench" --socket "$sock" --cpu 1 lat --size 8 --iters "$ITERS"
		"$b/xferbench" --socket "$sock" --cpu 1 rate --size 64 --batch 64 \
			--time-ms 1000 --reps 3
	} 2>&1 | grep '^RES ' | sed "s/^RES /RES $tag /" >>"$TMP/all.res"
	[ -n "$scraper" ] && { kill "$scraper"; wait "$scraper" 2>/dev/null; }
	kill "$dpid"
	wait "$dpid" 2>/dev/null
	rm -f "$sock"
	echo "pass $pass: $tag done" >&2
}

variants=(off on)
[ -n "$OLD" ] && variants+=(old)
for pass in $(seq "$PASSES"); do
	n=${#variants[@]}
	for k in $(seq 0 $((n - 1))); do
		tag=${variants[$(((k + pass) % n))]}
		b=$NEW; [ "$tag" = old ] && b=$OLD
		run_variant "$tag" "$b" "$pass"
	done
done

table=$(awk -v variants="${variants[*]}" '
	$5 == "8B" && $6 == "lat_p50" || $5 == "64B" && $6 == "rate_median" {
		key = $3 " " $5 " " $6; unit[key] = $8
		v[$2, key, ++n[$2, key]] = $7; keys[key] = 1 }
	function median(tag, key,   m, i, j, t, a) {
		m = n[tag, key]; if (!m) return ""
		for (i = 1; i <= m; i++) a[i] = v[tag, key, i]
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
			if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	END {
		nv = split(variants, vs, " ")
		for (key in keys) {
			off = median("off", key)
			line = "| " key
			for (i = 1; i <= nv; i++) {
				m = median(vs[i], key)
				line = line sprintf(" | %.4g %s", m, unit[key])
				if (vs[i] != "off" && off > 0)
					line = line sprintf(" (%.3f)", m / off)
			}
			print line " |"
		}
	}' "$TMP/all.res" | sort)

# --- scrape time: 64 clients, 16 peers ---
read -r -a ports < <(free_ports 18)
MP=${ports[0]} LP=${ports[1]}
"$NEW/xferd" -s "$TMP/main.sock" -o node_name=main -o listen=127.0.0.1:"$LP" \
	-o metrics_listen=127.0.0.1:"$MP" -l warn >"$TMP/main.log" 2>&1 &
pids+=($!)
wait_sock "$TMP/main.sock"
for i in $(seq 1 16); do
	"$NEW/xferd" -s "$TMP/p$i.sock" -o node_name=peer$i \
		-o listen=127.0.0.1:"${ports[$((i + 1))]}" -o peer=127.0.0.1:"$LP" \
		-l warn >"$TMP/p$i.log" 2>&1 &
	pids+=($!)
done
HOLDER=$NEW/tests/xferctl_holder
for i in $(seq 1 64); do
	XFERD_SOCKET=$TMP/main.sock "$HOLDER" --hold 120 --alloc 65536 \
		>"$TMP/h$i.log" 2>&1 &
	pids+=($!)
done
clients=0 peers=0
for _ in $(seq 300); do
	js=$("$NEW/xferctl" -s "$TMP/main.sock" --json stats 2>/dev/null)
	clients=$(jq '.clients | map(.connections) | add + 0' <<<"$js" 2>/dev/null)
	clients=$((clients + $(jq '.other_clients.connections // 0' <<<"$js" 2>/dev/null)))
	peers=$(jq '[.peers[] | select(.state == "up")] | length' <<<"$js" 2>/dev/null)
	[ "${clients:-0}" -ge 64 ] && [ "${peers:-0}" -ge 16 ] && break
	sleep 0.1
done
for i in $(seq 200); do
	curl -sf -o "$TMP/scrape.txt" -w '%{time_total}\n' \
		"http://127.0.0.1:$MP/metrics"
done >"$TMP/scrape.times"
size=$(wc -c <"$TMP/scrape.txt")
series=$(grep -vc '^#' "$TMP/scrape.txt")
st=$(sort -n "$TMP/scrape.times" | awk '{a[NR] = $1} END {
	printf "median %.2f ms, p99 %.2f ms", a[int((NR + 1) / 2)] * 1000, a[int(NR * 0.99)] * 1000 }')
t0=$(date +%s%N)
for i in $(seq 50); do "$NEW/xferctl" -s "$TMP/main.sock" stats >/dev/null; done
t1=$(date +%s%N)
ctl_ms=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.2f", d / 50 / 1e6 }')

header="| benchmark | off |"
sep="|---|---|"
[ "${variants[*]}" != off ] && for v in "${variants[@]:1}"; do
	header="$header $v |"; sep="$sep---|"; done
report=$(printf '%s\n%s\n%s\n\nscrape with %s clients and %s peers up: %s (curl, 200 scrapes); %s bytes, %s series; xferctl stats: %s ms per call (50 calls, process start included)\n' \
	"$header" "$sep" "$table" "$clients" "$peers" "$st" "$size" "$series" "$ctl_ms")
echo "$report"
echo "$report" >"$NEW/bench-metrics.md"
