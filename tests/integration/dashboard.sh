#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# dashboard.sh - the shipped Grafana dashboard and alert rules work on
# real data: promtool checks the rules; two xferds (a link between them)
# move bytes locally and over TCP, with one failed write; a real
# Prometheus scrapes both, loads the rules, and every panel's query of
# monitoring/grafana/xferd.json, run through its HTTP API, must return a
# non-empty result.  A panel whose metrics this machine cannot export
# (RDMA rails, GPU staging, etcd: no sample in any scrape) is
# listed as skipped, with the family it needs.
#
# Env (from tests/run-tests.sh): XFERD_BIN, XFERBENCH_BIN, XFER_TEST_TOOLS.
# Exit 0 pass, 1 fail, 77 skip.
set -u

XFERD=${XFERD_BIN:-} XB=${XFERBENCH_BIN:-} XNODE=${XFER_TEST_TOOLS:-}/xnode
ROOT=${XFER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
DASH=$ROOT/monitoring/grafana/xferd.json
RULES=$ROOT/monitoring/prometheus/xferd-rules.yml

skip() { echo "skip: $*"; exit 77; }
for b in "$XFERD" "$XB" "$XNODE"; do
	[ -n "$b" ] && [ -x "$b" ] || skip "XFERD_BIN, XFERBENCH_BIN, XFER_TEST_TOOLS not set (run through make check)"
done
for c in prometheus promtool curl jq python3; do
	command -v $c >/dev/null || skip "$c not installed (make deps)"
done

TMP=$(mktemp -d /tmp/xferd-dash.XXXXXX)
pids=''
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	for f in a.log b.log prom.log serve.log; do
		echo "--- $f (tail)"; tail -n 15 "$TMP/$f" 2>/dev/null
	done
	exit 1
}

promtool check rules "$RULES" >"$TMP/rules.log" 2>&1 ||
	fail "promtool check rules: $(cat "$TMP/rules.log")"
jq -e '.panels | length > 0' "$DASH" >/dev/null || fail "$DASH: no panels"

read -r PA PB MA MB PP < <(python3 -c '
import socket
s = [socket.socket() for _ in range(5)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')

start() { # NAME ARGS...
	local name=$1
	shift
	"$XFERD" -s "$TMP/$name.sock" -o node_name="$name" "$@" \
		>"$TMP/$name.log" 2>&1 &
	pids="$pids $!"
	for _ in $(seq 100); do [ -S "$TMP/$name.sock" ] && return; sleep 0.05; done
	fail "xferd $name did not start"
}
start a -o listen=127.0.0.1:$PA -o metrics_listen=127.0.0.1:$MA
start b -o listen=127.0.0.1:$PB -o peer=127.0.0.1:$PA -o metrics_listen=127.0.0.1:$MB

cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ['$RULES']
scrape_configs:
  - job_name: xferd
    static_configs:
      - targets: ['127.0.0.1:$MA', '127.0.0.1:$MB']
YML
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/data" \
	--web.listen-address="127.0.0.1:$PP" >"$TMP/prom.log" 2>&1 &
prom=$!
pids="$pids $prom"

# Traffic for a few seconds, so that every rate() has samples: a
# serving a region, b writing into it over TCP (and once out of range),
# a local client on a.
XFERD_SOCKET=$TMP/a.sock "$XNODE" serve --name dash --size 1M \
	>"$TMP/serve.log" 2>&1 &
pids="$pids $!"
for _ in $(seq 100); do grep -q '^ready' "$TMP/serve.log" && break; sleep 0.05; done
grep -q '^ready' "$TMP/serve.log" || fail "xnode serve did not start"
XFERD_SOCKET=$TMP/b.sock "$XNODE" write --lookup dash --size 4096 \
	--expect-path tcp >"$TMP/w1.log" 2>&1 || fail "write a/dash from b: $(tail -n 3 "$TMP/w1.log")"
XFERD_SOCKET=$TMP/b.sock "$XNODE" write --lookup dash --size 4096 \
	--offset 2M --expect-error ERANGE,EINVAL,EFAULT,any >"$TMP/w2.log" 2>&1 ||
	fail "an out-of-range write did not fail: $(tail -n 3 "$TMP/w2.log")"
"$XB" --socket "$TMP/a.sock" rate --time-ms 1000 --reps 4 >"$TMP/rate.log" 2>&1 &
bench=$!
for _ in $(seq 4); do
	XFERD_SOCKET=$TMP/b.sock "$XNODE" write --lookup dash --size 64K \
		--repeat 200 >>"$TMP/w3.log" 2>&1 || fail "writes over TCP: $(tail -n 3 "$TMP/w3.log")"
	sleep 0.5
done
wait $bench || fail "xferbench rate: $(tail -n 3 "$TMP/rate.log")"

api() { # PROMQL -> the JSON answer of /api/v1/query
	curl -sf --get "http://127.0.0.1:$PP/api/v1/query" --data-urlencode "query=$1"
}
# Every target scraped after the traffic, twice.
for _ in $(seq 100); do
	n=$(api 'count(up{job="xferd"} == 1)' | jq -r '.data.result[0].value[1] // 0')
	[ "$n" = 2 ] && break
	sleep 0.1
done
[ "$n" = 2 ] || fail "Prometheus does not scrape both xferds"
sleep 2

curl -sf "http://127.0.0.1:$MA/metrics" "http://127.0.0.1:$MB/metrics" >"$TMP/scrape.txt" ||
	fail "scrape"
# A family with samples (rails and the like write HELP and TYPE alone
# when there are none).
exported() { grep -qE "^$1(_bucket|_sum|_count)?[{ ]" "$TMP/scrape.txt"; }

ok=0 skipped=0 failed=0
while IFS=$'\t' read -r title expr; do
	q=${expr//\$__rate_interval/1m}
	q=${q//\$instance/.*}
	missing=''
	for fam in $(grep -oE '\b(xferd|process)_[a-z_]+' <<<"$q" |
		     sed -E 's/_(bucket|sum|count)$//' | sort -u); do
		exported "$fam" || missing="$missing $fam"
	done
	if [ -n "$missing" ]; then
		echo "skipped: panel '$title': not exported here:$missing"
		skipped=$((skipped + 1))
		continue
	fi
	r=$(api "$q") || { echo "FAIL: panel '$title': Prometheus refused: $q"; failed=$((failed + 1)); continue; }
	if [ "$(jq '.data.result | length' <<<"$r")" -gt 0 ]; then
		ok=$((ok + 1))
	else
		echo "FAIL: panel '$title': empty result for $q"
		failed=$((failed + 1))
	fi
done < <(jq -r '.panels[] | .title as $t | .targets[] | [$t, .expr] | @tsv' "$DASH")
[ "$failed" = 0 ] || fail "$failed panels without data"
[ "$ok" -gt 0 ] || fail "no panel was checked"
rules=$(curl -sf "http://127.0.0.1:$PP/api/v1/rules" | jq '[.data.groups[].rules[]] | length')
[ "$rules" = "$(grep -c -- '- alert:' "$RULES")" ] || fail "Prometheus loaded $rules rules"
echo "pass: $ok panels with data, $skipped skipped (hardware or etcd), $rules alert rules loaded"
