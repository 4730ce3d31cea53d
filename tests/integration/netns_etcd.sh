#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_etcd.sh - metadata = etcd with a real, single-member etcd: three
# xferd nodes a, b, c on one switch (10.0.9.1-3) with no `peer =` line,
# etcd in a namespace of its own (10.0.9.10).
#  - a publishes; b and c look the name up (one read of etcd) and write
#    into a's region (a verifies the bytes when notified) and read them
#    back; "a/name" works too;
#  - kill -9 of a: its name disappears once its lease (2 s) ran out, and
#    b and c see node a leave;
#  - a restarts: a token of the old instance fails -ESTALE on import, a
#    name published by the new one works;
#  - a, now with a lease of 60 s, is killed and restarted at once: the new
#    instance revokes the old lease, so b sees the restart, the old name
#    is gone and the old token is stale long before 60 s;
#  - records written by hand under the prefix (garbage JSON, wrong types,
#    a 1 MiB value) are ignored with a log line; every xferd keeps
#    running and serving good names;
#  - etcd stopped: lookups of remote names fail -EHOSTUNREACH or
#    -ETIMEDOUT with a log line, local names and transfers on known
#    tokens still work, a name published meanwhile is kept; etcd back:
#    lookups work again and the name published meanwhile is in etcd.
#    xferctl status (text, JSON) and /metrics say etcd is unreachable
#    while it is stopped, and reachable, registered and watched around.
#  - etcd with TLS and client certificates: xferds with a certificate
#    register and move data, one without is refused (a log line).
# Every xferd stops cleanly; a stopped xferd's record leaves etcd.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../netns/etcd.sh
. "$(dirname "$0")/../netns/etcd.sh"

MiB=1048576
ETCD_ASK=e
declare -A IP=([a]=10.0.9.1 [b]=10.0.9.2 [c]=10.0.9.3)

etcd_define e 10.0.9.10
for n in a b c; do
	star_join "$n" "${IP[$n]}/24"
done
etcd_start e
etcd_wait_healthy e
EPS=$(etcd_endpoints e)
# A lookup gives etcd up to 1.5 s (etcd_retry_ms) before it fails.
OPTS=(etcd_timeout_ms=500 etcd_retry_ms=1500)

step "three xferds, no peer lines, metadata = etcd"
for n in a b c; do
	xferd_etcd "$n" "$n" "$EPS" 2 "${OPTS[@]}" metrics_listen=127.0.0.1:9474
done
for n in a b c; do
	wait_for 20 registered "$n" || fail "xferd $n did not register in etcd"
done
# etcd's health as the operator sees it: xferctl status and /metrics.
scrape() { ns_exec "$1" curl -sf http://127.0.0.1:9474/metrics; }
etcd_says() { # NODE true|false: status --json and /metrics agree
	local j want=0
	[ "$2" = true ] && want=1
	j=$(xferctl_on "$1" --json status) || return 1
	jq -e --argjson r "$2" '.etcd.reachable == $r' <<<"$j" >/dev/null &&
		scrape "$1" | grep -qx "xferd_etcd_reachable $want"
}
wait_for 10 etcd_says a true ||
	fail "a: etcd not reachable in xferctl status / metrics"
j=$(xferctl_on a --json status)
jq -e '.etcd.registered and .etcd.watching and .etcd.lease_age_ms != null
	and .etcd.lease_age_ms < 2000' <<<"$j" >/dev/null ||
	fail "a: etcd health after registering: $(jq -c .etcd <<<"$j")"
xferctl_on a status | grep -Eq '^ *etcd: reachable, registered' ||
	fail "a: xferctl status text: $(xferctl_on a status | grep etcd)"
scrape a | grep -Eq '^xferd_etcd_lease_age_seconds [0-9.]+$' ||
	fail "a: no xferd_etcd_lease_age_seconds in /metrics"
_nodes_are() { [ "$(etcd_count /xferd/nodes/)" -eq "$1" ]; }
wait_for 10 _nodes_are 3 ||
	fail "etcd does not hold three node records"
etcdctl_on e get /xferd/nodes/a --print-value-only | sed 's/^/    | /'

step "publish on a, lookup and transfer from b and c"
serve_start a kv-a --name kv-a --size $((4 * MiB)) \
	--expect-notify "21:121:$MiB:500000" --expect-notify "31:131:$((2 * MiB)):500000"
etcdctl_on e get /xferd/names/kv-a --print-value-only | grep -q '"node":"a"' ||
	fail "the name record of kv-a is not in etcd"
xnode_ok b write --lookup kv-a --size 500000 --offset $MiB --seed 121 \
	--notify 21 --expect-path tcp
expect_notified kv-a 21
xnode_ok b read --lookup kv-a --size 500000 --offset $MiB --seed 121 \
	--expect-path tcp
xnode_ok c write --lookup kv-a --size 500000 --offset $((2 * MiB)) \
	--seed 131 --notify 31 --expect-path tcp
expect_notified kv-a 31
xnode_ok c read --lookup a/kv-a --size 500000 --offset $((2 * MiB)) \
	--seed 131 --expect-path tcp
xnode_ok b lookup --lookup nobody-has-this --expect-error ENOENT
xnode_ok c lookup --lookup kv-a --token-file "$TMP/old.tok"

step "kill -9 a: its name goes with its lease"
kill_xferd a
bg_stop kv-a KILL
_gone() { xnode b lookup --lookup kv-a --expect-error ENOENT >/dev/null; }
wait_for 20 _gone || fail "kv-a still found 20 s after a died (lease 2 s)"
note "kv-a gone from etcd"
wait_for 10 xferd_log_has b 'etcd: node a left' ||
	fail "b did not see node a leave"
wait_for 10 xferd_log_has c 'etcd: node a left' ||
	fail "c did not see node a leave"

step "a restarts: the old token is stale, a new name works"
xferd_etcd a a "$EPS" 60 "${OPTS[@]}" metrics_listen=127.0.0.1:9474
wait_for 20 registered a || fail "a did not register again"
xnode_ok c write --token-file "$TMP/old.tok" --size 4096 --seed 1 \
	--expect-error ESTALE
serve_start a kv-a2 --name kv-a2 --size $MiB --expect-notify "22:122:0:300000"
xnode_ok b write --lookup kv-a2 --size 300000 --seed 122 --notify 22 \
	--expect-path tcp
expect_notified kv-a2 22
xnode_ok b lookup --lookup kv-a2 --token-file "$TMP/old2.tok"

step "a (lease 60 s) killed and restarted at once: the restart is seen now"
kill_xferd a
bg_stop kv-a2 KILL
xferd_etcd a a "$EPS" 60 "${OPTS[@]}" metrics_listen=127.0.0.1:9474
wait_for 20 registered a || fail "a did not register again"
xferd_log_has a 'previous run.*revoked' ||
	fail "a did not revoke its previous lease"
wait_for 10 xferd_log_has b 'etcd: node a restarted' ||
	fail "b did not see a's restart"
xnode_ok b lookup --lookup kv-a2 --expect-error ENOENT
xnode_ok b write --token-file "$TMP/old2.tok" --size 4096 --seed 1 \
	--expect-error ESTALE
note "well before the 60 s lease: the old name is gone, its token stale"

step "malformed records under the prefix are ignored"
etcdctl_on e put /xferd/nodes/junk 'not json {' >/dev/null || fail "put"
etcdctl_on e put /xferd/nodes/d \
	'{"v":1,"node":"d","instance":7,"port":"x","addrs":{}}' >/dev/null ||
	fail "put"
etcdctl_on e put /xferd/nodes/e \
	'{"v":1,"node":"other","instance":"00112233445566778899aabbccddeeff","port":1,"addrs":[{"ip":"1.2.3.4","prefix":24,"port":1}]}' \
	>/dev/null || fail "put"
head -c $MiB /dev/zero | tr '\0' '[' >"$TMP/huge"
etcdctl_on e put /xferd/nodes/huge <"$TMP/huge" >/dev/null || fail "put huge"
etcdctl_on e put /xferd/names/bad-name '{"v":1,"node":"a","instance":"zz","token":5}' \
	>/dev/null || fail "put"
etcdctl_on e put /xferd/names/bad-token \
	'{"v":1,"node":"a","instance":"00112233445566778899aabbccddeeff","token":"AAAA"}' \
	>/dev/null || fail "put"
for n in b c; do
	wait_for 10 xferd_log_has "$n" 'nodes/junk: not a node record' ||
		fail "$n: no log line for nodes/junk"
	wait_for 10 xferd_log_has "$n" 'nodes/d: not a node record' ||
		fail "$n: no log line for nodes/d"
	wait_for 10 xferd_log_has "$n" "nodes/e: the record names node 'other'" ||
		fail "$n: no log line for nodes/e"
	wait_for 10 xferd_log_has "$n" 'nodes/huge: a value of' ||
		fail "$n: no log line for nodes/huge"
done
xnode_ok b lookup --lookup bad-name --expect-error ENOENT
xnode_ok b lookup --lookup bad-token --expect-error ENOENT
xferd_log_has b "'bad-name': not a name record" || fail "b: no log line for bad-name"
xferd_log_has b "'bad-token': the record's token" || fail "b: no log line for bad-token"
serve_start a kv-a3 --name kv-a3 --size $MiB --expect-notify "33:133:0:200000"
xnode_ok c write --lookup kv-a3 --size 200000 --seed 133 --notify 33 \
	--expect-path tcp
expect_notified kv-a3 33
xnode_ok c lookup --lookup kv-a3 --token-file "$TMP/a3.tok"
for n in a b c; do
	xferd_running "$n" || fail "xferd $n died"
	xferctl_on "$n" status >/dev/null || fail "xferd $n does not answer"
done
for k in nodes/junk nodes/d nodes/e nodes/huge names/bad-name names/bad-token; do
	etcdctl_on e del "/xferd/$k" >/dev/null || fail "etcdctl del /xferd/$k"
done

step "etcd stopped: remote lookups fail, local names and known tokens work"
etcd_kill e
xnode_ok c lookup --lookup kv-a3 --expect-error EHOSTUNREACH,ETIMEDOUT
wait_for 10 xferd_log_has c "etcd: lookup of 'kv-a3' failed" ||
	fail "c did not log the failed lookup"
serve_start b kv-b --name kv-b --size $MiB --expect-notify "12:112:0:100000"
xnode_ok b lookup --lookup kv-b
xnode_ok c write --token-file "$TMP/a3.tok" --size 4096 --offset 500000 \
	--seed 9 --expect-path tcp
xnode_ok c read --token-file "$TMP/a3.tok" --size 4096 --offset 500000 \
	--seed 9 --expect-path tcp
wait_for 10 xferd_log_has a 'etcd: unreachable' ||
	fail "a did not log that etcd is unreachable"
wait_for 10 etcd_says a false ||
	fail "a: status / metrics do not say etcd is unreachable: $(xferctl_on a status | grep etcd)"
xferctl_on a status | grep -Eq '^ *etcd: unreachable' ||
	fail "a: xferctl status text: $(xferctl_on a status | grep etcd)"
scrape a | grep -Eq '^xferd_etcd_errors_total\{kind="(unreachable|timeout)"\} [1-9]' ||
	fail "a: no etcd error counted in /metrics: $(scrape a | grep etcd_errors)"

step "etcd back: lookups work again, what was published meanwhile is there"
etcd_start e
etcd_wait_healthy e
_found() { xnode "$1" lookup --lookup "$2" >/dev/null; }
wait_for 30 _found c kv-a3 || fail "c: kv-a3 not found after etcd came back"
wait_for 30 _found a kv-b || fail "a: kv-b (published during the outage) not found"
wait_for 10 etcd_says a true ||
	fail "a: etcd answers again, status / metrics do not say so"
xnode_ok a write --lookup kv-b --size 100000 --seed 112 --notify 12 \
	--expect-path tcp
expect_notified kv-b 12
serve_stop kv-b
serve_stop kv-a3

step "every xferd stops cleanly; their records leave etcd"
for n in a b c; do
	stop_xferd "$n"
done
wait_for 10 _nodes_are 0 ||
	fail "node records left in etcd: $(etcdctl_on e get --prefix --keys-only /xferd/)"
etcd_kill e

step "TLS: etcd asks for client certificates; a and c have one"
pki=$TMP/pki
mkdir -p "$pki"
_cert() { # NAME EXT: a key and a certificate signed by the test CA
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "/CN=$1" 2>/dev/null &&
	printf '%b' "$2" >"$pki/$1.ext" &&
	openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" \
		-CAcreateserial -out "$pki/$1.pem" -days 1 -extfile "$pki/$1.ext" \
		2>/dev/null
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$pki/ca.key" -out "$pki/ca.pem" -days 1 -subj /CN=xfert-ca \
	2>/dev/null || fail "openssl: CA"
# etcd's JSON gateway dials etcd itself with this one: clientAuth too.
_cert etcd "subjectAltName=IP:10.0.9.10\nextendedKeyUsage=serverAuth,clientAuth\n" ||
	fail "openssl: server certificate"
_cert client "extendedKeyUsage=clientAuth\n" || fail "openssl: client certificate"
rm -rf "$TMP/etcd-e"
_nd_bg_start etcd-tls ip netns exec "$(ns_name e)" etcd --name e \
	--data-dir "$TMP/etcd-e" \
	--listen-client-urls https://10.0.9.10:2379 \
	--advertise-client-urls https://10.0.9.10:2379 \
	--listen-peer-urls http://10.0.9.10:2380 \
	--initial-advertise-peer-urls http://10.0.9.10:2380 \
	--initial-cluster e=http://10.0.9.10:2380 \
	--cert-file "$pki/etcd.pem" --key-file "$pki/etcd.key" \
	--client-cert-auth --trusted-ca-file "$pki/ca.pem" \
	--logger zap --log-outputs "$TMP/etcd-tls.log"
TLS=(etcd_ca="$pki/ca.pem" etcd_cert="$pki/client.pem" etcd_key="$pki/client.key")
xferd_etcd a a https://10.0.9.10:2379 5 "${OPTS[@]}" "${TLS[@]}"
xferd_etcd c c https://10.0.9.10:2379 5 "${OPTS[@]}" "${TLS[@]}"
xferd_etcd b b https://10.0.9.10:2379 5 "${OPTS[@]}" etcd_ca="$pki/ca.pem"
wait_for 30 registered a || fail "a did not register over TLS"
wait_for 30 registered c || fail "c did not register over TLS"
serve_start a kv-tls --name kv-tls --size $MiB --expect-notify "13:113:0:100000"
xnode_ok c write --lookup kv-tls --size 100000 --seed 113 --notify 13 \
	--expect-path tcp
expect_notified kv-tls 13
serve_stop kv-tls
wait_for 10 xferd_log_has b 'etcd: cannot get a lease' ||
	fail "b, without a client certificate, did not say it cannot register"
registered b && fail "b registered without a client certificate"
xferd_log_has b 'etcd: https://10.0.9.10:2379: TLS: ' ||
	fail "b does not say that TLS failed"
xferd_log b | grep 'TLS: ' | head -n 1 | sed 's/^/    | /'
for n in a b c; do
	stop_xferd "$n"
done
bg_stop etcd-tls KILL
echo "pass: names and membership in etcd, no peer lines"
