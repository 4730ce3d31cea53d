#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-etcd.sh BUILD - how many nodes one etcd serves for xferd's
# metadata (metadata = etcd): for each N in NODES, a fresh single-member
# etcd (defaults: heartbeat 100 ms, election 1 s) on 127.0.0.1, one real
# xferd registered in it, and bench/etcdbench.py, which adds N simulated
# nodes with NAMES names each, keeps their leases alive, and measures
# lookups through the xferd.  One JSON line per N on stdout, then a
# Markdown table (for bench/results/).  Not a test; no root needed.
#
# env: NODES="100 1000", NAMES=100, LOOKUPS=2000 (per client),
#      CLIENTS=4, TTL=10, REST=10 (s of etcd at rest, measured),
#      PORT=23791
set -uo pipefail

BUILD=$(cd "${1:-build}" && pwd) || exit 1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NODES=${NODES:-"100 1000"}
NAMES=${NAMES:-100}
LOOKUPS=${LOOKUPS:-2000}
CLIENTS=${CLIENTS:-4}
TTL=${TTL:-10}
REST=${REST:-10}
PORT=${PORT:-23791}
TMP=$(mktemp -d /tmp/bench-etcd.XXXXXX)
ETCD_PID='' XFERD_PID=''

cleanup() {
	[ -n "$XFERD_PID" ] && kill "$XFERD_PID" 2>/dev/null && wait "$XFERD_PID"
	[ -n "$ETCD_PID" ] && kill "$ETCD_PID" 2>/dev/null && wait "$ETCD_PID"
	XFERD_PID='' ETCD_PID=''
}
trap 'cleanup; rm -rf "$TMP"' EXIT

command -v etcd >/dev/null || { echo "bench-etcd: etcd not installed (make deps)" >&2; exit 1; }
[ -d "$BUILD/python/lib" ] || { echo "bench-etcd: make python first" >&2; exit 1; }

results=()
for n in $NODES; do
	rm -rf "$TMP/etcd"
	etcd --data-dir "$TMP/etcd" --listen-client-urls "http://127.0.0.1:$PORT" \
		--advertise-client-urls "http://127.0.0.1:$PORT" \
		--listen-peer-urls "http://127.0.0.1:$((PORT + 1))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((PORT + 1))" \
		--initial-cluster "default=http://127.0.0.1:$((PORT + 1))" \
		--logger zap --log-outputs "$TMP/etcd.log" &
	ETCD_PID=$!
	for _ in $(seq 100); do
		ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$PORT" \
			endpoint health >/dev/null 2>&1 && break
		sleep 0.1
	done
	"$BUILD/xferd" -s "$TMP/xferd.sock" -l warn -o listen=127.0.0.1:17999 \
		-o node_name=bench-xferd -o metadata=etcd \
		-o "etcd_endpoints=http://127.0.0.1:$PORT" -o etcd_prefix=/bench \
		>"$TMP/xferd.log" 2>&1 &
	XFERD_PID=$!
	sleep 1
	line=$(PYTHONPATH="$BUILD/python/lib" /usr/bin/python3 "$ROOT/bench/etcdbench.py" \
		--etcd "http://127.0.0.1:$PORT" --etcd-pid "$ETCD_PID" \
		--socket "$TMP/xferd.sock" --nodes "$n" --names "$NAMES" \
		--ttl "$TTL" --lookups "$LOOKUPS" --clients "$CLIENTS" --rest "$REST")
	echo "$line"
	results+=("$line")
	cleanup
done

echo
echo "| nodes | keys | etcd CPU at rest | lookup p50 / p99 (1 client) | lookups/s ($CLIENTS clients) | p50 / p99 then | etcd CPU then | etcd CPU per lookup |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in "${results[@]}"; do
	jq -r '"| \(.nodes) | \(.keys) | \(.etcd_cpu_at_rest_pct) % | \(.lookup_p50_us) / \(.lookup_p99_us) us | \(.lookups_per_s) | \(.parallel_p50_us) / \(.parallel_p99_us) us | \(.etcd_cpu_pct_during) % | \(.etcd_cpu_us_per_lookup) us |"' <<<"$r"
done
