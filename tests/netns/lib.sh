# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# tests/netns/lib.sh - emulated nodes for the multi-node tests: one network
# namespace per node, veth pairs between them, one xferd per namespace and
# test clients (tests/tools/xnode) inside them.
#
# Sourced by tests/integration/netns_*.sh, which run as root from
# tests/run-tests.sh with XFERD_BIN, XFERCTL_BIN and XFER_TEST_TOOLS set.
# Sourcing it checks what is needed (exit 77 with the reason if something
# is missing or `ip netns add` is not permitted), creates $TMP and arms
# the cleanup: on every exit - pass, fail, SIGINT, SIGTERM - every process
# started here is killed, every namespace of this run deleted, and a
# namespace with this run's prefix that is still there afterwards turns
# the result into a failure.  Namespaces left by earlier runs whose shell
# is gone (killed with SIGKILL) are removed on the way in.
#
# Names: a namespace is "xfert-<pid of the test shell>-<node>"; inside
# it, the interface towards node X is "to-X".  Every xferd has its socket
# at $TMP/<name>.sock, its log at $TMP/<name>.log, node_name <name>, and
# listens on port 7474 of the address it was given.
#
# Polling helpers wait with generous deadlines; nothing here sleeps for
# correctness.  XFERT_KEEP=1 keeps $TMP of a failed run.  What does not
# depend on namespaces (xferd by name, xnode, serve_*, expect_notified,
# bg_*, wait_*, run_cmd, step/note/fail/skip) is tests/lib/nodes.sh's.

XT_NAME=$(basename "$0" .sh)
NS_PREFIX="xfert-$$-"
XD_PORT=7474
XNODE_SECS=${XNODE_SECS:-180}
ND_EXIT_POLL=0.02 ND_WAIT_POLL=0.05 ND_STOP_SECS=20 ND_READY_SECS=60
ND_STAMP=

# shellcheck source-path=SCRIPTDIR source=../lib/nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/nodes.sh"

declare -a XT_NAMESPACES=()     # short names, in creation order
declare -A XD_NS=()             # node -> its namespace (short name)
# The names the tests know (netns_races.sh adds its own processes).
# shellcheck disable=SC2034 # namerefs, for the scripts that source this
declare -n XT_PIDS=ND_PIDS XT_RUNS=ND_RUNS

# _nd_enter NODE: ip netns exec into the namespace of NODE's xferd.
_nd_enter() { ND_ENTER=(ip netns exec "$(ns_name "${XD_NS[$1]}")"); }

# --- processes ---------------------------------------------------------

# run_on NODE_NS SECS CMD...: CMD in the namespace, at most SECS (then it
# is killed and counts as a hang: status 124).  Its output goes to
# $LAST_OUT and is shown indented.
run_on() {
	local ns=$1 secs=$2
	shift 2
	run_cmd "$secs" ip netns exec "$(ns_name "$ns")" "$@"
}

# bg_start TAG NS CMD...: CMD in the background in NS, output in
# $TMP/bg-TAG.out.
bg_start() {
	local tag=$1 ns=$2
	shift 2
	_nd_bg_start "$tag" ip netns exec "$(ns_name "$ns")" "$@"
}

# --- namespaces and links ----------------------------------------------

ns_name() { echo "$NS_PREFIX$1"; }

# ns_exec NS CMD...: CMD inside the namespace of node NS.
ns_exec() {
	local ns=$1
	shift
	ip netns exec "$(ns_name "$ns")" "$@"
}

# ns_create NS...: fresh namespaces with lo up and no IPv6 (so that an
# xferd advertises exactly the IPv4 addresses given here).
ns_create() {
	local ns
	for ns in "$@"; do
		ip netns add "$(ns_name "$ns")" ||
			fail "ip netns add $(ns_name "$ns")"
		XT_NAMESPACES+=("$ns")
		# shellcheck disable=SC2016 # $f is the inner shell's
		ns_exec "$ns" sh -c 'for f in all default; do
			echo 1 >/proc/sys/net/ipv6/conf/$f/disable_ipv6; done' \
			2>/dev/null
		ip -n "$(ns_name "$ns")" link set lo up || fail "lo up in $ns"
	done
}

# veth NS_A ADDR_A NS_B ADDR_B: a veth pair "to-B" in A <-> "to-A" in B
# with the addresses (CIDR), both ends up.
veth() {
	local a=$1 aaddr=$2 b=$3 baddr=$4
	ip link add name "to-$b" netns "$(ns_name "$a")" type veth \
		peer name "to-$a" netns "$(ns_name "$b")" ||
		fail "veth $a <-> $b"
	ip -n "$(ns_name "$a")" addr add "$aaddr" dev "to-$b" || fail "addr $aaddr"
	ip -n "$(ns_name "$b")" addr add "$baddr" dev "to-$a" || fail "addr $baddr"
	ip -n "$(ns_name "$a")" link set "to-$b" up || fail "link up in $a"
	ip -n "$(ns_name "$b")" link set "to-$a" up || fail "link up in $b"
	wait_for 10 link_is_up "$a" "to-$b" || fail "to-$b in $a never came up"
	wait_for 10 link_is_up "$b" "to-$a" || fail "to-$a in $b never came up"
	note "link $a/to-$b $aaddr <-> $b/to-$a $baddr"
}

link_is_up() { ip -n "$(ns_name "$1")" -o link show "$2" | grep -q 'state UP'; }

# link_down NS IF / link_up NS IF: the interface of node NS (e.g. to-b).
link_down() {
	ip -n "$(ns_name "$1")" link set "$2" down || fail "link_down $1 $2"
	note "link $1/$2 down"
}
link_up() {
	ip -n "$(ns_name "$1")" link set "$2" up || fail "link_up $1 $2"
	wait_for 10 link_is_up "$1" "$2" || fail "$1/$2 did not come up"
	note "link $1/$2 up"
}

# Two nodes on one /24: a 10.0.1.1 <-> b 10.0.1.2.
topo_two() {
	ns_create a b
	veth a 10.0.1.1/24 b 10.0.1.2/24
}

# The mesh of seed 004: each pair of nodes shares its own subnet, and no
# route leads to a subnet a node is not on.
#   a: 10.0.1.1/24 (to b), 10.0.3.1/24 (to c)
#   b: 10.0.1.2/24 (to a), 10.0.2.1/24 (to c)
#   c: 10.0.2.2/24 (to b), 10.0.3.2/24 (to a)
topo_triangle() {
	ns_create a b c
	veth a 10.0.1.1/24 b 10.0.1.2/24
	veth b 10.0.2.1/24 c 10.0.2.2/24
	veth c 10.0.3.2/24 a 10.0.3.1/24
}

# --- xferd ---------------------------------------------------------------

_xt_tcp_listening() {
	ns_exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q .
}

# start_xferd NS NAME LISTEN [KEY=VALUE...]: xferd in namespace NS as node
# NAME, listening on LISTEN ("ADDR", "ADDR:PORT", "*" for *:7474, "off"),
# with more settings as "-o KEY=VALUE" (a later listen= wins).  Returns
# once its socket answers and, unless off, its TCP port listens.
start_xferd() {
	local ns=$1 name=$2 listen=$3 kv
	shift 3
	case $listen in
	off | *:*) ;;
	'*') listen="*:$XD_PORT" ;;
	*) listen="$listen:$XD_PORT" ;;
	esac
	local args=(-s "$TMP/$name.sock" -l debug -o "node_name=$name"
		-o "listen=$listen")
	# shellcheck disable=SC2207 # two words, no spaces in $TMP
	args+=($(nd_key_args "$@"))
	for kv in "$@"; do
		case $kv in listen=*) listen=${kv#listen=} ;; esac
		args+=(-o "$kv")
	done
	XD_NS[$name]=$ns
	_nd_spawn_xferd "$name" 20 "${args[@]}"
	if [ "$listen" != off ]; then
		wait_for 20 _xt_tcp_listening "$ns" "${listen##*:}" ||
			fail "xferd $name does not listen on TCP $listen"
	fi
	note "xferd $name (pid ${XD_PID[$name]}) in $ns, listen $listen${*:+, $*}"
}

# --- set-up and cleanup --------------------------------------------------

_xt_cleanup() {
	local rc=$? ns left
	trap - EXIT INT TERM
	_nd_kill_all
	for ns in "${XT_NAMESPACES[@]}"; do
		ip netns del "$(ns_name "$ns")" 2>/dev/null
	done
	left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NS_PREFIX")
	if [ -n "$left" ]; then
		echo "FAIL: namespaces left behind: $left"
		rc=1
	fi
	_nd_remove_tmp $rc "${XFERT_KEEP:-0}"
	exit $rc
}

# Namespaces of earlier runs whose shell is gone: their processes and
# the namespaces themselves.
_xt_remove_stale() {
	local ns owner pid
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' |
		grep -E '^xfert-[0-9]+-'); do
		owner=${ns#xfert-}
		owner=${owner%%-*}
		[ "$owner" = "$$" ] && continue
		kill -0 "$owner" 2>/dev/null && continue
		echo "removing $ns, left by a run that is gone (pid $owner)"
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
	done
}

_xt_init() {
	local t
	for t in ip ss jq; do
		command -v "$t" >/dev/null || skip "$t is not installed (make deps)"
	done
	_nd_need_binaries
	PEER_FUZZ=${XFER_TEST_TOOLS:-}/peer_fuzz
	[ -x "$PEER_FUZZ" ] || skip "$PEER_FUZZ not built"
	[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"

	_nd_traps _xt_cleanup
	TMP=$(mktemp -d "/tmp/xfert-$$.XXXXXX") || fail "mktemp"
	_xt_remove_stale
	# Permission to create namespaces at all (containers often lack it).
	if ! ip netns add "${NS_PREFIX}probe" 2>"$TMP/probe.err"; then
		skip "cannot create network namespaces here ($(head -n 1 "$TMP/probe.err"))"
	fi
	ip netns del "${NS_PREFIX}probe"
	step "$XT_NAME: namespaces ${NS_PREFIX}*, files in $TMP"
}

_xt_init

# --- clients of other users (setpriv) -------------------------------------

# node_uid NODE UID: ND_ENTER for a client of UID where NODE lives.
node_uid() {
	_nd_enter "$1"
	ND_ENTER+=(setpriv --reuid="$2" --regid="$2" --clear-groups)
}
# xnode_as NODE UID COMMAND ARGS...: xnode as UID on NODE (bounded).
xnode_as() {
	local node=$1 uid=$2 cmd=$3
	shift 3
	_nd_say -- "[$node uid $uid] xnode $cmd $*"
	node_uid "$node" "$uid"
	run_cmd "$XNODE_SECS" "${ND_ENTER[@]}" "$XNODE" "$cmd" \
		--socket "${XD_SOCK[$node]}" "$@"
}
xnode_as_ok() { xnode_as "$@" || fail "xnode $3 on $1 as uid $2 failed (exit $?)"; }
# no_such NODE UID NAME: the lookup is -ENOENT.
no_such() {
	xnode_as "$1" "$2" lookup --lookup "$3" --expect-error ENOENT ||
		fail "uid $2 on $1 resolved '$3'"
}
# serve_as NODE UID TAG ARGS...: "xnode serve" as UID on NODE, in the
# background; returns once it printed "ready".
serve_as() {
	local node=$1 uid=$2 tag=$3
	shift 3
	_nd_say -- "[$node uid $uid] xnode serve $* (as $tag)"
	node_uid "$node" "$uid"
	_nd_bg_start "$tag" "${ND_ENTER[@]}" "$XNODE" serve \
		--socket "${XD_SOCK[$node]}" "$@"
	bg_wait_line "$tag" '^ready ' "$ND_READY_SECS"
}

# reader_verified TAG: the background "xnode read" TAG ran all along, stops
# cleanly and verified at least one read.
reader_verified() {
	local tag=$1 rc
	bg_running "$tag" || fail "the reader $tag stopped"
	bg_stop "$tag"
	rc=$?
	sed 's/^/    | /' "$TMP/bg-$tag.out" | tail -n 2
	[ $rc -eq 0 ] || fail "the reader $tag exited with $rc"
	grep -Eq '^read and verified [1-9][0-9]* op' "$TMP/bg-$tag.out" ||
		fail "the reader $tag completed no verified read"
}
