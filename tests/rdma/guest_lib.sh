# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# tests/rdma/guest_lib.sh - two xferd "nodes" in the Soft-RoCE guest, and
# test clients (tests/tools/xnode) against them.  Sourced by the guest
# tests (guest_xfer.sh) that tests/integration/rdma.sh runs in the guest.
#
# rdma_rxe (6.1) works in the initial network namespace only, so the two
# nodes are two xferds there, told apart by socket, port and node name:
#   single setup: a on 10.0.0.1:7474, b on 10.0.0.1:7475 (both use rxe0,
#                 which loops the packets back inside)
#   pair setup:   a on 10.0.0.1:7474 with rxe0, b on 10.0.0.2:7474 with
#                 rxe1 (rdma_devices: each node opens its own device
#                 only, so the packets cross the veth)
# Every xferd has its socket at $TMP/<name>.sock, its log at
# $TMP/<name>.log and node_name <name>.  The helpers are those of
# tests/netns/lib.sh without the namespaces, from tests/lib/nodes.sh:
# stop_xferd, kill_xferd, xferctl_on, xnode, xnode_ok, serve_start,
# serve_stop, expect_notified, bg_*, wait_for, run_cmd; start_xferd is
# this file's.
#
# Sourcing it checks what is needed (exit 77 with the reason), creates
# $TMP and arms the cleanup: every process started here is killed on any
# exit.  Under TCG a process start costs 0.1-0.5 s: waits poll every
# 100 ms, and what a builtin can do, a builtin does.  Nothing sleeps for
# correctness.  RDMA_TEST_KEEP=1 keeps $TMP of a failed run.

G_NAME=$(basename "$0" .sh)
# shellcheck disable=SC2034 # for the scripts that source this
MiB=1048576
XNODE_SECS=${XNODE_SECS:-120}
ND_EXIT_POLL=0.05 ND_WAIT_POLL=0.1 ND_STOP_SECS=30 ND_READY_SECS=90
ND_STAMP=_g_elapsed

# shellcheck source-path=SCRIPTDIR source=../lib/nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/nodes.sh"

declare -A XD_IP=() XD_PORT=() XD_DEV=() XD_NETDEV=()
# The names this file had before tests/lib/nodes.sh.
# shellcheck disable=SC2034 # namerefs, for the scripts that source this
declare -n G_PIDS=ND_PIDS G_RUNS=ND_RUNS

# _nd_enter NODE: every node runs right here, in the one namespace.
# G_XFERD_WRAP: a command (env, prlimit, setpriv...) that execs the next
# xferd started; empty by default.
G_XFERD_WRAP=()
_nd_enter() { ND_ENTER=("${G_XFERD_WRAP[@]}"); }

G_T0=$(now_ms)
# [12.3s] since the script started: the steps' own timings, under TCG.
_g_elapsed() {
	local ms=$(($(now_ms) - G_T0))
	printf '[%d.%ds]' $((ms / 1000)) $((ms % 1000 / 100))
}

# bg_start TAG CMD...: CMD in the background, output in $TMP/bg-TAG.out.
bg_start() { _nd_bg_start "$@"; }

# --- the two nodes -----------------------------------------------------

# Where node a and node b live in this guest's setup (see the top).
# (tests/rdma/guest-setup: rxe0 on veth0, rxe1 on veth1.)
XD_IP[a]=${RXE_IP:-10.0.0.1} XD_PORT[a]=7474 XD_DEV[a]=${RXE_DEV:-rxe0}
XD_NETDEV[a]=veth0
if [ -n "${RXE_DEV2:-}" ]; then
	G_SETUP=pair
	XD_IP[b]=${RXE_IP2:-10.0.0.2} XD_PORT[b]=7474 XD_DEV[b]=$RXE_DEV2
	XD_NETDEV[b]=veth1
else
	G_SETUP=single
	XD_IP[b]=${XD_IP[a]} XD_PORT[b]=7475 XD_DEV[b]=${XD_DEV[a]}
	XD_NETDEV[b]=veth0
fi

# addr NODE: "IP:PORT" of its TCP listener (a lookup prefix: "$(addr b)/t").
addr() { echo "${XD_IP[$1]}:${XD_PORT[$1]}"; }

_g_tcp_listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q "${XD_IP[$2]}:$1"; }

# start_xferd NAME [KEY=VALUE...]: node NAME's xferd (a or b), listening at
# its address, with more settings as "-o KEY=VALUE" (after the defaults:
# a later key wins).  Returns once its socket answers and its TCP port
# listens.
start_xferd() {
	local name=$1 kv
	shift
	local args=(-s "$TMP/$name.sock" -l debug -o "node_name=$name"
		-o "listen=$(addr "$name")")
	# shellcheck disable=SC2207 # two words, no spaces in $TMP
	args+=($(nd_key_args "$@"))
	# Two nodes in one guest: in the pair setup each has its own NIC.
	[ "$G_SETUP" = pair ] && args+=(-o "rdma_devices=${XD_DEV[$name]}")
	for kv in "$@"; do
		args+=(-o "$kv")
	done
	_nd_spawn_xferd "$name" 30 "${args[@]}"
	wait_for 30 _g_tcp_listening "${XD_PORT[$name]}" "$name" ||
		fail "xferd $name does not listen on TCP $(addr "$name")"
	note "xferd $name (pid ${XD_PID[$name]}) at $(addr "$name")${*:+, $*}"
}

# rx_packets NODE: packets that reached NODE's side so far.  In the
# single setup that is what rxe0 received (it loops everything back
# inside); in the pair setup what NODE's end of the veth received, so
# that traffic between the two rxe devices counts only if it really
# crossed the veth (rxe loops packets between its own GIDs back without
# it).
rx_packets() {
	local n f
	if [ "$G_SETUP" = pair ]; then
		f=/sys/class/net/${XD_NETDEV[$1]}/statistics/rx_packets
	else
		f=/sys/class/infiniband/${XD_DEV[$1]}/ports/1/hw_counters/rcvd_pkts
	fi
	read -r n <"$f" || n=0
	echo "$n"
}

# rx_where NODE: what rx_packets counts, for messages.
rx_where() {
	if [ "$G_SETUP" = pair ]; then
		echo "${XD_NETDEV[$1]} (${XD_DEV[$1]}'s netdev)"
	else
		echo "${XD_DEV[$1]}"
	fi
}

# --- set-up and cleanup --------------------------------------------------

_g_cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	_nd_kill_all
	_nd_remove_tmp $rc "${RDMA_TEST_KEEP:-0}"
	exit $rc
}

_g_init() {
	local t
	[ "${RXE_VM_GUEST:-}" = 1 ] ||
		skip "not in the RDMA test guest (tests/rdma/vm.sh)"
	if [ -z "${RXE_DEV:-}" ] || [ -z "${RXE_IP:-}" ] || [ -z "${RXE_GID_INDEX:-}" ]; then
		skip "RXE_DEV, RXE_IP or RXE_GID_INDEX not set by the guest"
	fi
	for t in ss jq; do
		command -v "$t" >/dev/null || skip "$t is not installed (make deps)"
	done
	_nd_need_binaries
	_nd_traps _g_cleanup
	TMP=$(mktemp -d "/tmp/$G_NAME.XXXXXX") || fail "mktemp"
	step "$G_NAME ($G_SETUP setup): a at $(addr a) on ${XD_DEV[a]}," \
		"b at $(addr b) on ${XD_DEV[b]}; files in $TMP"
}

_g_init
