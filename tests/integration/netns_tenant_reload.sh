#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_tenant_reload.sh - a reload that changes the tenants while their
# clients move data keeps each tenant's counters under its own name
# (config_tenants_rebase: a tenant's slot is kept by name).
#
# Two nodes (namespaces a and b); a's tenants come from its file:
# "first" (uid 1001, listed first) and "second" (uid 1002, weight 1).
#  - a client of each pushes 1 MiB writes to b; meanwhile a SIGHUP
#    reloads a file without "first" and with second at weight 3.  Both
#    clients go on and finish what they queued; a's xferd lives on.
#  - /metrics: bytes_total of first and of second are each exactly what
#    that client moved (the sum of its results), first is marked
#    removed, nothing is left queued.
#  - once first's client is gone, a reload that adds "third" (uid 1003)
#    gives third first's old slot with its counters from zero: third's
#    bytes are what third's client moved, second's are unchanged, and
#    first is no longer listed.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

MiB=1048576
REGION=$((64 * MiB))
CONF=$TMP/a.conf

cat >"$CONF" <<CONF
[tenant first]
uid = 1001
weight = 1

[tenant second]
uid = 1002
weight = 1
CONF

topo_two
start_xferd b b 10.0.1.2
# a with its tenants in a file (start_xferd passes settings as -o, which
# a reload applies again over the file).
XD_NS[a]=a
# shellcheck disable=SC2046 # two words, no spaces in $TMP
_nd_spawn_xferd a 20 -s "$TMP/a.sock" -l debug -c "$CONF" \
	-o node_name=a -o listen=10.0.1.1:$XD_PORT \
	-o peer=10.0.1.2:$XD_PORT -o metrics_listen=127.0.0.1:9474 \
	$(nd_key_args)
chmod 0755 "$TMP"
chmod 0666 "${XD_SOCK[a]}"

serve_start b tgt --name tgt --size $REGION --kind memfd

bg_as() {
	local tag=$1 uid=$2
	shift 2
	node_uid a "$uid"
	_nd_bg_start "$tag" "${ND_ENTER[@]}" "$XNODE" "$@" \
		--socket "${XD_SOCK[a]}"
}
# moved TAG: the bytes its writes moved (every result, summed).
moved() {
	awk '/^op=/ { for (i = 1; i <= NF; i++) if ($i ~ /^result=/) {
		sub(/^result=/, "", $i); if ($i < 0) bad = 1; s += $i } }
		END { if (bad) print -1; else printf "%d\n", s }' \
		"$TMP/bg-$1.out"
}
metrics() {
	ns_exec a curl -sf http://127.0.0.1:9474/metrics >"$TMP/metrics" ||
		fail "a: no /metrics"
}
# metric NAME TENANT: its value, or "none".
metric() {
	awk -v k="$1{tenant=\"$2\"}" '$1 == k { print $2; f = 1 }
		END { if (!f) print "none" }' "$TMP/metrics"
}
reload_a() {
	local before
	before=$(xferd_log a | grep -c 'configuration reloaded')
	kill -HUP "${XD_PID[a]}"
	reloaded() {
		[ "$(xferd_log a | grep -c 'configuration reloaded')" -gt "$before" ]
	}
	wait_for 20 reloaded || fail "a did not reload: $(xferd_log a | tail -n 3)"
}

step "a reload removes the first tenant and reweights the second under load"
bg_as first 1001 write --lookup b/tgt --size $MiB --offset 0 --seed 1 \
	--kind memfd --repeat 0 --depth 8
bg_as second 1002 write --lookup b/tgt --size $MiB --offset $((8 * MiB)) \
	--seed 2 --kind memfd --repeat 0 --depth 8
bg_wait_line first '^op=20 result=' 60
bg_wait_line second '^op=20 result=' 60
cat >"$CONF" <<CONF
[tenant second]
uid = 1002
weight = 3
CONF
reload_a
bg_running first && bg_running second ||
	fail "a writer ended at the reload"
xferctl_on a config | grep -E '^tenant' | sed 's/^/    | /'
xferctl_on a config | grep -E '^tenant' | grep -q 'second weight=3' ||
	fail "the new weight is not in use"
! xferctl_on a config | grep -E '^tenant' | grep -q 'first' ||
	fail "the removed tenant is still configured"
# Both go on after it: 20 more writes each.
n1=$(grep -c '^op=' "$TMP/bg-first.out")
n2=$(grep -c '^op=' "$TMP/bg-second.out")
bg_wait_line first "^op=$((n1 + 20)) result=" 60
bg_wait_line second "^op=$((n2 + 20)) result=" 60
bg_stop first || fail "first's writer failed"
bg_stop second || fail "second's writer failed"
xferd_running a || fail "a's xferd died"
m1=$(moved first) m2=$(moved second)
note "first moved $m1 bytes, second $m2"
[ "$m1" -gt 0 ] && [ "$m2" -gt 0 ] || fail "a writer failed or moved nothing"

step "/metrics keeps each tenant's bytes under its own name"
metrics
grep -E '^xferd_tenant_(bytes_total|queued_ops|removed)\{' "$TMP/metrics" |
	sed 's/^/    | /'
[ "$(metric xferd_tenant_bytes_total first)" = "$m1" ] ||
	fail "first: bytes_total $(metric xferd_tenant_bytes_total first), moved $m1"
[ "$(metric xferd_tenant_bytes_total second)" = "$m2" ] ||
	fail "second: bytes_total $(metric xferd_tenant_bytes_total second), moved $m2"
[ "$(metric xferd_tenant_removed first)" = 1 ] ||
	fail "first is not marked removed"
[ "$(metric xferd_tenant_removed second)" = 0 ] ||
	fail "second is marked removed"
# xferctl stats says so too.
[ "$(xferctl_on a -j stats | jq -r '.tenants[] | select(.name == "first") | .removed')" = true ] ||
	fail "xferctl stats does not mark first removed"
[ "$(xferctl_on a -j stats | jq -r '.tenants[] | select(.name == "second") | .removed')" = false ] ||
	fail "xferctl stats marks second removed"
for t in default first second; do
	[ "$(metric xferd_tenant_queued_ops $t)" = 0 ] ||
		fail "$t: ops left queued"
done

step "a new tenant takes the freed slot with its own counters"
cat >"$CONF" <<CONF
[tenant second]
uid = 1002
weight = 3

[tenant third]
uid = 1003
CONF
reload_a
node_uid a 1003
xnode_as_ok a 1003 write --lookup b/tgt --size $MiB --offset $((16 * MiB)) \
	--seed 3 --kind memfd --repeat 5
m3=$((5 * MiB))
xnode_as_ok a 1003 read --lookup b/tgt --size $MiB --offset $((16 * MiB)) \
	--seed 3 --kind memfd
m3=$((m3 + MiB))
metrics
grep -E '^xferd_tenant_(bytes_total|removed)\{' "$TMP/metrics" |
	sed 's/^/    | /'
[ "$(metric xferd_tenant_bytes_total first)" = none ] ||
	fail "first is still listed with no client left"
[ "$(metric xferd_tenant_bytes_total third)" = "$m3" ] ||
	fail "third: bytes_total $(metric xferd_tenant_bytes_total third), moved $m3"
[ "$(metric xferd_tenant_bytes_total second)" = "$m2" ] ||
	fail "second: bytes_total $(metric xferd_tenant_bytes_total second), was $m2"
xnode_as_ok a 1002 read --lookup b/tgt --size $MiB --offset $((8 * MiB)) \
	--seed 2 --kind memfd
xferd_running a || fail "a's xferd died"
echo "PASS"
