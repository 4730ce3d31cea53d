#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_classes.sh - traffic classes and tenants on the TCP link between
# two nodes (namespaces a and b, one xferd each; a's tenants: heavy
# uid 1001 weight 3, light uid 1002 weight 1, capped uid 1003 at 8 MiB/s).
#
#  - a latency client keeps completing while a bulk client pushes 64 MiB
#    writes back to back over the same link: 200 writes of 64 KiB finish
#    while the bulk writer still runs; the bytes are read back and
#    checked (latency reads, verified).
#  - tenants 3:1: two bulk writers of 4 MiB (heavy and light) both
#    complete writes during 6 s,
#    with the heavier one not held back (the shares: test_fairq.c).
#  - a capped tenant is paced, not failed: 12 writes of 4 MiB at 8 MiB/s
#    all succeed (about 5 s; at least 3 s) and read back verified.
#  - killing a client mid-queue frees its share: heavy is killed (SIGKILL)
#    with writes out; light goes on completing, a's xferd lives on.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

MiB=1048576
REGION=$((160 * MiB))
BULK_OFF=0 LAT_OFF=$((64 * MiB)) HEAVY_OFF=$((72 * MiB))
LIGHT_OFF=$((80 * MiB)) CAP_OFF=$((88 * MiB))

topo_two
start_xferd b b 10.0.1.2
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474 metrics_listen=127.0.0.1:9474 \
	"tenant=heavy weight=3 uid=1001" \
	"tenant=light weight=1 uid=1002" "tenant=capped uid=1003 rate=8M"
# Clients of other users (the tenants) reach a's socket.
chmod 0755 "$TMP"
chmod 0666 "${XD_SOCK[a]}"
xferctl_on a config | grep -E '^tenant' | sed 's/^/    | /'
xferctl_on a config | grep -q 'heavy weight=3 uid=1001' ||
	fail "xferctl config does not show the tenants"

serve_start b tgt --name tgt --size $REGION --kind memfd

# bg_as TAG UID ARGS...: xnode on a as UID, in the background.
bg_as() {
	local tag=$1 uid=$2
	shift 2
	node_uid a "$uid"
	_nd_bg_start "$tag" "${ND_ENTER[@]}" "$XNODE" "$@" \
		--socket "${XD_SOCK[a]}"
}
ops_of() { grep -c '^op=.* result=[0-9]' "$TMP/bg-$1.out"; }

step "a latency client completes while a bulk client saturates the link"
bg_as bulk 0 write --lookup b/tgt --size $((64 * MiB)) --offset $BULK_OFF \
	--seed 1 --kind memfd --class bulk --repeat 0
bg_wait_line bulk '^op=1 result=' 60
xnode_ok a write --lookup b/tgt --size $((64 * 1024)) --offset $LAT_OFF \
	--seed 2 --kind memfd --class latency --repeat 200 --expect-path tcp
bg_running bulk || fail "the bulk writer stopped"
xnode_ok a read --lookup b/tgt --size $((64 * 1024)) --offset $LAT_OFF \
	--seed 2 --kind memfd --class latency --repeat 20 --expect-path tcp
bg_stop bulk || fail "the bulk writer failed"
note "bulk: $(ops_of bulk) writes of 64 MiB meanwhile"
xnode_ok a read --lookup b/tgt --size $((64 * MiB)) --offset $BULK_OFF \
	--seed 1 --kind memfd

step "a's /metrics counts the latency and bulk classes and names the tenants"
ns_exec a curl -sf http://127.0.0.1:9474/metrics >"$TMP/metrics" ||
	fail "a: no /metrics"
grep -E '^xferd_class_(ops|bytes)_total\{class="(latency|bulk)"\}' \
	"$TMP/metrics" | sed 's/^/    | /'
for c in latency bulk; do
	for m in ops_total bytes_total wait_seconds_count; do
		grep -qE "^xferd_class_$m\\{class=\"$c\"\\} [1-9]" \
			"$TMP/metrics" || fail "a: xferd_class_$m of $c is 0"
	done
done
for t in default heavy light capped; do
	grep -q "^xferd_tenant_ops_total{tenant=\"$t\"}" "$TMP/metrics" ||
		fail "a: no tenant $t in /metrics"
done

step "tenants with weights 3:1 both progress, near 3:1"
bg_as heavy 1001 write --lookup b/tgt --size $((4 * MiB)) \
	--offset $HEAVY_OFF --seed 3 --kind memfd --repeat 0 --depth 16
bg_as light 1002 write --lookup b/tgt --size $((4 * MiB)) \
	--offset $LIGHT_OFF --seed 4 --kind memfd --repeat 0 --depth 16
sleep 6
bg_stop heavy || fail "heavy failed"
bg_stop light || fail "light failed"
h=$(ops_of heavy) l=$(ops_of light)
note "heavy $h, light $l writes of 4 MiB"
[ "$l" -gt 0 ] && [ "$h" -gt 0 ] || fail "a tenant made no progress"
# The shares follow the weights only while the link is what both wait
# for; on a loaded machine the CPUs may be, and then they come out
# nearer 1:1.  So this checks that both progress and that the heavier
# one is not held back; the shares themselves are the scheduler's unit
# tests' (tests/unit/test_fairq.c) and the benchmark's (bench-classes.sh).
[ $((h * 10)) -ge $((l * 8)) ] ||
	fail "the weight-3 tenant got less than the weight-1 one: $h:$l"
xnode_as_ok a 1001 read --lookup b/tgt --size $((4 * MiB)) \
	--offset $HEAVY_OFF --seed 3 --kind memfd
xnode_as_ok a 1002 read --lookup b/tgt --size $((4 * MiB)) \
	--offset $LIGHT_OFF --seed 4 --kind memfd

step "a capped tenant is paced, not failed"
t0=$(now_ms)
xnode_as_ok a 1003 write --lookup b/tgt --size $((4 * MiB)) \
	--offset $CAP_OFF --seed 5 --kind memfd --repeat 12 --timeout-ms 60000
t=$(($(now_ms) - t0))
note "12 x 4 MiB at 8 MiB/s took $t ms"
[ "$t" -ge 3000 ] || fail "the capped tenant was not paced ($t ms)"
xnode_as_ok a 1003 read --lookup b/tgt --size $((4 * MiB)) \
	--offset $CAP_OFF --seed 5 --kind memfd

step "killing a client mid-queue frees its share"
bg_as heavy2 1001 write --lookup b/tgt --size $((4 * MiB)) \
	--offset $HEAVY_OFF --seed 3 --kind memfd --repeat 0 --depth 8
bg_as light2 1002 write --lookup b/tgt --size $((4 * MiB)) \
	--offset $LIGHT_OFF --seed 4 --kind memfd --repeat 0 --depth 16
bg_wait_line heavy2 '^op=2 result=' 60
bg_stop heavy2 KILL
before=$(ops_of light2)
light_more() { [ "$(ops_of light2)" -ge $((before + 5)) ]; }
wait_for 30 light_more || fail "light made no progress after heavy died"
bg_stop light2 || fail "light failed"
xferd_running a || fail "a's xferd died"
xnode_as_ok a 1002 read --lookup b/tgt --size $((4 * MiB)) \
	--offset $LIGHT_OFF --seed 4 --kind memfd
echo "PASS"
