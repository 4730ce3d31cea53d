#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_etcd_cluster.sh - metadata = etcd on a three-member etcd cluster
# (e1, e2, e3 at 10.0.9.11-13, each in a namespace of its own) and two
# xferd nodes a and b (10.0.9.1-2) that list all three endpoints.
#  - a publishes; b looks the name up in a loop of 60 lookups while the
#    etcd leader is killed (SIGKILL) after the tenth: not one lookup may
#    fail - each may take up to etcd_retry_ms (3 s, the documented
#    window: the next endpoint at once, then a backoff, while the others
#    elect a leader);
#  - a name published after the kill, with two members left, is found;
#  - every member stopped: lookups fail -EHOSTUNREACH or -ETIMEDOUT with
#    a log line, a name of b itself still resolves on b;
#  - the members restarted (on their data): lookups work again, data
#    moves, and the xferds stop cleanly.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../netns/etcd.sh
. "$(dirname "$0")/../netns/etcd.sh"

MiB=1048576
MEMBERS=(e1 e2 e3)
LOOKUPS=60
KILL_AFTER=10

etcd_define e1 10.0.9.11 e2 10.0.9.12 e3 10.0.9.13
star_join a 10.0.9.1/24
star_join b 10.0.9.2/24
for m in "${MEMBERS[@]}"; do
	etcd_start "$m"
done
etcd_wait_healthy "${MEMBERS[@]}"
EPS=$(etcd_endpoints "${MEMBERS[@]}")
OPTS=(etcd_timeout_ms=500 etcd_retry_ms=3000)

step "two xferds on a three-member etcd cluster"
xferd_etcd a a "$EPS" 5 "${OPTS[@]}"
xferd_etcd b b "$EPS" 5 "${OPTS[@]}"
for n in a b; do
	wait_for 20 registered "$n" || fail "xferd $n did not register in etcd"
done
serve_start a kv --name kv --size $MiB --expect-notify "1:101:0:400000" \
	--expect-notify "2:102:$((512 * 1024)):400000"
xnode_ok b write --lookup kv --size 400000 --seed 101 --notify 1 \
	--expect-path tcp
expect_notified kv 1

leader=$(etcd_leader "${MEMBERS[@]}") || fail "no etcd leader"
[ -n "$leader" ] || fail "no etcd leader"
step "$LOOKUPS lookups on b; the leader $leader is killed after $KILL_AFTER"
# One xnode per lookup, in b's namespace; the first failure ends the loop.
cat >"$TMP/lookups.sh" <<EOF
#!/bin/bash
for i in \$(seq $LOOKUPS); do
	[ "\$i" -eq $((KILL_AFTER + 1)) ] && { echo "half"; sleep 0.2; }
	if ! "$XNODE" lookup --socket "${XD_SOCK[b]}" --lookup kv >"$TMP/lk.out" 2>&1; then
		echo "FAIL lookup \$i: \$(tail -n 2 "$TMP/lk.out")"
		exit 1
	fi
done
echo "lookups done: $LOOKUPS"
EOF
chmod +x "$TMP/lookups.sh"
bg_start lookups b "$TMP/lookups.sh"
bg_wait_line lookups '^half' 60
etcd_kill "$leader"
bg_wait lookups 120 || fail "a lookup failed: $(tail -n 3 "${BG_OUT[lookups]}")"
tail -n 1 "${BG_OUT[lookups]}" | sed 's/^/    | /'
left=()
for m in "${MEMBERS[@]}"; do
	[ "$m" = "$leader" ] || left+=("$m")
done
etcd_wait_healthy "${left[@]}"
note "new leader: $(etcd_leader "${left[@]}")"

step "two members left: a new name is published and found"
serve_start a kv2 --name kv2 --size $MiB --expect-notify "3:103:0:300000"
xnode_ok b write --lookup kv2 --size 300000 --seed 103 --notify 3 \
	--expect-path tcp
expect_notified kv2 3
serve_start b kv-b --name kv-b --size $MiB

step "every member stopped: remote lookups fail, local names work"
for m in "${left[@]}"; do
	etcd_kill "$m"
done
xnode_ok b lookup --lookup kv --expect-error EHOSTUNREACH,ETIMEDOUT
wait_for 10 xferd_log_has b "etcd: lookup of 'kv' failed" ||
	fail "b did not log the failed lookup"
xnode_ok b lookup --lookup kv-b

step "the members restarted: lookups work again"
for m in "${MEMBERS[@]}"; do
	etcd_start "$m"
done
etcd_wait_healthy "${MEMBERS[@]}"
_found() { xnode "$1" lookup --lookup "$2" >/dev/null; }
wait_for 30 _found b kv || fail "b: kv not found after etcd came back"
wait_for 30 _found a kv-b || fail "a: kv-b not found after etcd came back"
xnode_ok b write --lookup kv --size 400000 --offset $((512 * 1024)) \
	--seed 102 --notify 2 --expect-path tcp
expect_notified kv 2
serve_stop kv
serve_stop kv2
bg_stop kv-b

step "the xferds stop cleanly"
stop_xferd a
stop_xferd b
for m in "${MEMBERS[@]}"; do
	etcd_kill "$m"
done
echo "pass: lookups ride out the loss of the etcd leader"
