#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# prometheus.sh - a real Prometheus server (Debian's) scrapes a private
# xferd every second; after a known transfer (xferbench lat: 1002 writes
# of 8 bytes, memcpy) its HTTP API must return the bytes and ops that
# transfer moved, the same numbers `xferctl stats --json` gives, and
# `xferctl top -n` prints them as rates.
#
# Env (from tests/run-tests.sh): XFERD_BIN, XFERCTL_BIN, XFERBENCH_BIN.
# Exit 0 pass, 1 fail, 77 skip.
set -u

XFERD=${XFERD_BIN:-} XFERCTL=${XFERCTL_BIN:-} XB=${XFERBENCH_BIN:-}
ITERS=1000 WARMUP=1 SIZE=8

skip() { echo "skip: $*"; exit 77; }
for b in "$XFERD" "$XFERCTL" "$XB"; do
	[ -n "$b" ] && [ -x "$b" ] || skip "XFERD_BIN, XFERCTL_BIN, XFERBENCH_BIN not set (run through make check)"
done
for c in prometheus promtool curl jq python3; do
	command -v $c >/dev/null || skip "$c not installed (make deps)"
done

TMP=$(mktemp -d /tmp/xferd-prom.XXXXXX)
daemon_pid='' prom_pid=''
cleanup() {
	for p in $prom_pid $daemon_pid; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	echo "--- xferd log (tail)"; tail -n 20 "$TMP/xferd.log" 2>/dev/null
	echo "--- prometheus log (tail)"; tail -n 20 "$TMP/prom.log" 2>/dev/null
	exit 1
}

# Two free loopback ports, picked by the kernel.
read -r P_XFERD P_PROM < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

SOCK=$TMP/xferd.sock
"$XFERD" -s "$SOCK" -o listen=off -o metrics_listen=127.0.0.1:$P_XFERD \
	>"$TMP/xferd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || fail "xferd did not start"

"$XB" --socket "$SOCK" lat --iters $ITERS --warmup $WARMUP --size $SIZE \
	>"$TMP/bench.log" 2>&1 || fail "xferbench lat: $(tail -n 3 "$TMP/bench.log")"
# xferbench lat writes once more first (transfer_once: the bytes it then
# verifies), then warmup + iters times.
OPS=$((1 + ITERS + WARMUP)) BYTES=$(((1 + ITERS + WARMUP) * SIZE))

# xferctl stats says what the test did.
json=$("$XFERCTL" -s "$SOCK" --json stats) || fail "xferctl stats --json"
got=$(jq -r '.paths[] | select(.path == "memcpy") | "\(.ops) \(.bytes) \(.completions)"' <<<"$json")
[ "$got" = "$OPS $BYTES $OPS" ] || fail "xferctl stats: memcpy ops bytes completions '$got', want '$OPS $BYTES $OPS'"
"$XFERCTL" -s "$SOCK" stats | grep -Eq "^memcpy +$OPS +" ||
	fail "xferctl stats text: no memcpy row with $OPS ops"
top=$("$XFERCTL" -s "$SOCK" -n 2 -d 0.1 top) || fail "xferctl top -n 2"
[ "$(grep -c '^xferctl top' <<<"$top")" = 2 ] || fail "xferctl top -n 2: not two frames: $top"
grep -q $'\033' <<<"$top" && fail "xferctl top -n: escape codes in batch mode"
grep -Eq '^memcpy +0 ' <<<"$top" || fail "xferctl top: no idle memcpy row: $top"

# The scrape passes promtool.
curl -sf "http://127.0.0.1:$P_XFERD/metrics" >"$TMP/scrape.txt" || fail "scrape"
promtool check metrics <"$TMP/scrape.txt" >"$TMP/promtool.log" 2>&1 ||
	fail "promtool check metrics: $(cat "$TMP/promtool.log")"

cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: xferd
    static_configs:
      - targets: ['127.0.0.1:$P_XFERD']
YML
promtool check config "$TMP/prometheus.yml" >"$TMP/promtool.log" 2>&1 ||
	fail "promtool check config: $(cat "$TMP/promtool.log")"
prometheus --config.file="$TMP/prometheus.yml" \
	--storage.tsdb.path="$TMP/data" \
	--web.listen-address="127.0.0.1:$P_PROM" >"$TMP/prom.log" 2>&1 &
prom_pid=$!

query() { # PROMQL -> the first result's value, or nothing
	curl -sf --get "http://127.0.0.1:$P_PROM/api/v1/query" \
		--data-urlencode "query=$1" 2>/dev/null |
		jq -r '.data.result[0].value[1] // empty' 2>/dev/null
}

# Wait (at most a minute: Prometheus starts, then scrapes every second)
# for the series to arrive; then it must hold what the transfer moved.
bytes='' ops='' up=''
for _ in $(seq 600); do
	kill -0 $prom_pid 2>/dev/null || fail "prometheus exited"
	bytes=$(query 'xferd_path_bytes_total{job="xferd",path="memcpy"}')
	[ -n "$bytes" ] && break
	sleep 0.1
done
[ -n "$bytes" ] || fail "Prometheus never had xferd_path_bytes_total"
ops=$(query 'xferd_path_ops_total{job="xferd",path="memcpy"}')
up=$(query 'up{job="xferd"}')
lat=$(query 'xferd_completion_latency_seconds_count{job="xferd",path="memcpy"}')
[ "$up" = 1 ] || fail "up{job=xferd} is '$up'"
[ "$bytes" = "$BYTES" ] || fail "Prometheus: memcpy bytes $bytes, the transfer moved $BYTES"
[ "$ops" = "$OPS" ] || fail "Prometheus: memcpy ops $ops, the transfer did $OPS"
[ "$lat" = "$OPS" ] || fail "Prometheus: memcpy latency count $lat, want $OPS"
echo "ok: Prometheus $(prometheus --version 2>&1 | head -n 1 | awk '{print $3}') scraped $bytes bytes in $ops ops on memcpy"
