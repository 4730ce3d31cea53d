# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# tests/netns/etcd.sh - real etcd servers for the tests of metadata = etcd
# (tests/integration/netns_etcd*.sh), sourced after tests/netns/lib.sh.
#
# Every node here sits on one switch: a namespace "hub" with a bridge,
# and one veth per node into it, all on 10.0.9.0/24 - an etcd cluster
# and the xferds that use it all reach each other, as in a data centre.
# etcd members run in namespaces of their own, so that one is killed
# (SIGKILL) without touching the others.  Their data is in $TMP/etcd-NAME,
# their log in $TMP/etcd-NAME.log (shown when a test fails).
#
# Short timings keep the tests fast: etcd's heartbeat 50 ms and election
# 500 ms; the xferds' lease TTL is the test's choice.

ETCD_CLIENT_PORT=2379
ETCD_PEER_PORT=2380
declare -A ETCD_IP=()           # member -> address
ETCD_CLUSTER=                   # --initial-cluster of every member

_etcd_init() {
	command -v etcd >/dev/null || skip "etcd is not installed (make deps: etcd-server)"
	command -v etcdctl >/dev/null || skip "etcdctl is not installed (make deps: etcd-client)"
	ns_create hub
	ip -n "$(ns_name hub)" link add br0 type bridge 2>"$TMP/br.err" ||
		skip "no bridge in a namespace here ($(head -n 1 "$TMP/br.err"))"
	ip -n "$(ns_name hub)" link set br0 up || fail "br0 up"
}

# star_join NS ADDR/LEN: namespace NS (created here) on the switch.
star_join() {
	local ns=$1 addr=$2
	ns_create "$ns"
	ip link add name to-hub netns "$(ns_name "$ns")" type veth \
		peer name "to-$ns" netns "$(ns_name hub)" || fail "veth $ns <-> hub"
	ip -n "$(ns_name hub)" link set "to-$ns" master br0 up || fail "port $ns"
	ip -n "$(ns_name "$ns")" addr add "$addr" dev to-hub || fail "addr $addr"
	ip -n "$(ns_name "$ns")" link set to-hub up || fail "to-hub up in $ns"
	wait_for 10 link_is_up "$ns" to-hub || fail "to-hub in $ns never came up"
}

# etcd_define NAME IP...: the members of the cluster (each in namespace
# NAME, on the switch at IP).
etcd_define() {
	local name ip
	ETCD_CLUSTER=
	while [ $# -ge 2 ]; do
		name=$1 ip=$2
		shift 2
		ETCD_IP[$name]=$ip
		star_join "$name" "$ip/24"
		ETCD_CLUSTER+="${ETCD_CLUSTER:+,}$name=http://$ip:$ETCD_PEER_PORT"
	done
}

# etcd_endpoints MEMBER...: "http://IP:2379,..." for xferd's etcd_endpoints.
etcd_endpoints() {
	local m out=
	for m in "$@"; do
		out+="${out:+,}http://${ETCD_IP[$m]}:$ETCD_CLIENT_PORT"
	done
	echo "$out"
}

# etcdctl_on MEMBER ARGS...: etcdctl (v3 API) against that member, run in
# its namespace.
etcdctl_on() {
	local m=$1
	shift
	ETCDCTL_API=3 ns_exec "$m" etcdctl --dial-timeout=2s --command-timeout=3s \
		--endpoints "$(etcd_endpoints "$m")" "$@"
}

_etcd_healthy() { etcdctl_on "$1" endpoint health >/dev/null 2>&1; }

# etcd_start MEMBER: start (or restart, on its data) one member; returns
# at once (etcd_wait_healthy waits, once a quorum can be up).
etcd_start() {
	local m=$1 ip=${ETCD_IP[$1]}
	echo "=== $(date +%T.%N) start" >>"$TMP/etcd-$m.log"
	_nd_bg_start "etcd-$m" ip netns exec "$(ns_name "$m")" etcd \
		--name "$m" --data-dir "$TMP/etcd-$m" \
		--listen-client-urls "http://$ip:$ETCD_CLIENT_PORT" \
		--advertise-client-urls "http://$ip:$ETCD_CLIENT_PORT" \
		--listen-peer-urls "http://$ip:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://$ip:$ETCD_PEER_PORT" \
		--initial-cluster "$ETCD_CLUSTER" --initial-cluster-state new \
		--initial-cluster-token "xfert-$$" \
		--heartbeat-interval 50 --election-timeout 500 \
		--logger zap --log-outputs "$TMP/etcd-$m.log"
}

etcd_wait_healthy() {
	local m
	for m in "$@"; do
		wait_for 30 _etcd_healthy "$m" ||
			fail "etcd member $m is not healthy: $(tail -n 5 "$TMP/etcd-$m.log")"
	done
	note "etcd healthy: $*"
}

# etcd_kill MEMBER: SIGKILL, no goodbye to the others.
etcd_kill() {
	bg_stop "etcd-$1" KILL
	note "etcd member $1 killed (SIGKILL)"
}

# etcd_leader MEMBER...: the name of the member that leads now (asked
# of the first that answers).
etcd_leader() {
	local m out id
	for m in "$@"; do
		out=$(etcdctl_on "$m" endpoint status -w json 2>/dev/null) || continue
		id=$(jq -r '.[0].Status.leader' <<<"$out") || continue
		out=$(etcdctl_on "$m" member list -w json 2>/dev/null) || continue
		jq -r --argjson id "$id" '.members[] | select(.ID == $id) | .name' \
			<<<"$out"
		return 0
	done
	return 1
}

# etcd_count PREFIX: how many keys etcd holds under PREFIX.
etcd_count() {
	etcdctl_on "$ETCD_ASK" get --prefix --keys-only "$1" | grep -c .
}

# xferd_etcd NS NAME ENDPOINTS TTL [KEY=VALUE...]: xferd on the switch
# with metadata = etcd and no `peer =` line.
xferd_etcd() {
	local ns=$1 name=$2 eps=$3 ttl=$4
	shift 4
	start_xferd "$ns" "$name" '*' metadata=etcd "etcd_endpoints=$eps" \
		"etcd_lease_ttl=$ttl" "$@"
}

# registered NAME: xferd NAME's current run stored its node record.
registered() { xferd_log_has "$1" 'etcd: node [^ ]+ registered'; }

_etcd_dump() {
	local f
	for f in "$TMP"/etcd-*.log; do
		[ -e "$f" ] || continue
		echo "--- $(basename "$f") (last 10 lines)"
		tail -n 10 "$f"
	done
}

_etcd_init
