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
# tests/netns/lib.sh without the namespaces: start_xferd, stop_xferd,
# kill_xferd, xferctl_on, xnode, xnode_ok, serve_start, serve_stop,
# expect_notified, bg_*, wait_for.
#
# Sourcing it checks what is needed (exit 77 with the reason), creates
# $TMP and arms the cleanup: every process started here is killed on any
# exit.  Under TCG a process start costs 0.1-0.5 s: waits poll every
# 100 ms, and what a builtin can do, a builtin does.  Nothing sleeps for
# correctness.  RDMA_TEST_KEEP=1 keeps $TMP of a failed run.

G_NAME=$(basename "$0" .sh)
# shellcheck disable=SC2034 # for the scripts that source this
MiB=1048576

declare -a G_PIDS=()            # every process started in the background
declare -A XD_PID=() XD_SOCK=() XD_IP=() XD_PORT=() XD_DEV=() XD_NETDEV=()
declare -A BG_PID=() BG_OUT=()
G_RUNS=0                        # xnode runs so far (names their outputs)
LAST_OUT=                       # output of the last xnode run

skip() { echo "skip: $*"; exit 77; }
step() { echo "== $(_g_elapsed) $*"; }
note() { echo "   $*"; }

# fail MSG: the reason, then what the daemons and clients said.
fail() {
	echo "FAIL: $*"
	_g_dump
	exit 1
}

_g_dump() {
	local f
	[ -n "${TMP:-}" ] && [ -d "$TMP" ] || return 0
	for f in "$TMP"/*.log; do
		[ -e "$f" ] || continue
		echo "--- $(basename "$f") (last 40 lines)"
		tail -n 40 "$f"
	done
	for f in "$TMP"/bg-*.out; do
		[ -e "$f" ] || continue
		echo "--- $(basename "$f" .out) (last 15 lines)"
		tail -n 15 "$f"
	done
}

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
G_T0=$(now_ms)
# [12.3s] since the script started: the steps' own timings, under TCG.
_g_elapsed() {
	local ms=$(($(now_ms) - G_T0))
	printf '[%d.%ds]' $((ms / 1000)) $((ms % 1000 / 100))
}

# --- processes ---------------------------------------------------------

# True while PID, a child of this shell, runs (not a zombie, not reaped
# and reused by someone else).
_g_running() {
	local st rest
	{ read -r st </proc/"$1"/stat; } 2>/dev/null || return 1
	rest=${st##*) }
	# shellcheck disable=SC2086 # split the fields on purpose
	set -- $rest
	[ "$1" != Z ] && [ "$2" = "$$" ]
}

# wait_exit PID SECS: its exit status; after SECS it is killed (SIGKILL)
# and the status is 124.
wait_exit() {
	local pid=$1 deadline=$(($(now_ms) + $2 * 1000))
	while _g_running "$pid"; do
		if [ "$(now_ms)" -ge "$deadline" ]; then
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			return 124
		fi
		sleep 0.05
	done
	wait "$pid" 2>/dev/null
}

# wait_for SECS CMD...: run CMD every 100 ms until it succeeds; 1 if it
# never did within SECS.
wait_for() {
	local deadline=$(($(now_ms) + $1 * 1000))
	shift
	until "$@"; do
		[ "$(now_ms)" -lt "$deadline" ] || return 1
		sleep 0.1
	done
}

# run_cmd SECS CMD...: CMD, at most SECS (then it is killed and counts as
# a hang: status 124).  Its output goes to $LAST_OUT and is shown
# indented.
run_cmd() {
	local secs=$1 pid rc
	shift
	G_RUNS=$((G_RUNS + 1))
	LAST_OUT=$TMP/run-$G_RUNS.out
	"$@" >"$LAST_OUT" 2>&1 </dev/null &
	pid=$!
	G_PIDS+=("$pid")
	wait_exit "$pid" "$secs"
	rc=$?
	sed 's/^/    | /' "$LAST_OUT"
	[ $rc -eq 124 ] && echo "    | (killed: still running after ${secs}s)"
	return $rc
}

# bg_start TAG CMD...: CMD in the background, output in $TMP/bg-TAG.out.
bg_start() {
	local tag=$1
	shift
	BG_OUT[$tag]=$TMP/bg-$tag.out
	: >"${BG_OUT[$tag]}"
	"$@" >"${BG_OUT[$tag]}" 2>&1 </dev/null &
	BG_PID[$tag]=$!
	G_PIDS+=("$!")
}

# bg_stop TAG [SIGNAL]: signal it (TERM), wait (30 s), return its status.
bg_stop() {
	local tag=$1 sig=${2:-TERM} rc
	[ -n "${BG_PID[$tag]:-}" ] || return 0
	kill -"$sig" "${BG_PID[$tag]}" 2>/dev/null
	wait_exit "${BG_PID[$tag]}" 30
	rc=$?
	unset "BG_PID[$tag]"
	return $rc
}

# bg_wait TAG SECS: wait for it to end by itself; its status.
bg_wait() {
	local tag=$1 rc
	wait_exit "${BG_PID[$tag]}" "$2"
	rc=$?
	unset "BG_PID[$tag]"
	return $rc
}

bg_running() { [ -n "${BG_PID[$1]:-}" ] && _g_running "${BG_PID[$1]}"; }

# bg_has TAG ERE: a line of its output matches.
bg_has() { grep -Eq -- "$2" "${BG_OUT[$1]}"; }

_g_line_or_gone() { # TAG ERE
	bg_has "$1" "$2" && return 0
	bg_running "$1" || bg_has "$1" "$2" || fail \
		"$1 ended without a line /$2/: $(tail -n 5 "${BG_OUT[$1]}")"
	return 1
}

# bg_wait_line TAG ERE SECS: until a line matches; fails the test if the
# process ends first or the line never comes.
bg_wait_line() {
	wait_for "$3" _g_line_or_gone "$1" "$2" ||
		fail "$1: no line /$2/ within ${3}s"
}

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

_g_xferd_answers() {
	local name=$1
	_g_running "${XD_PID[$name]}" ||
		fail "xferd $name exited during start-up: $(tail -n 5 "$TMP/$name.log")"
	"$XFERCTL" -s "${XD_SOCK[$name]}" status >/dev/null 2>&1
}

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
	# Two nodes in one guest: in the pair setup each has its own NIC.
	[ "$G_SETUP" = pair ] && args+=(-o "rdma_devices=${XD_DEV[$name]}")
	for kv in "$@"; do
		args+=(-o "$kv")
	done
	XD_SOCK[$name]=$TMP/$name.sock
	rm -f "${XD_SOCK[$name]}"
	echo "=== $(date +%T.%N) start: xferd ${args[*]}" >>"$TMP/$name.log"
	"$XFERD" "${args[@]}" >>"$TMP/$name.log" 2>&1 </dev/null &
	XD_PID[$name]=$!
	G_PIDS+=("$!")
	wait_for 30 _g_xferd_answers "$name" ||
		fail "xferd $name: its socket does not answer"
	wait_for 30 _g_tcp_listening "${XD_PORT[$name]}" "$name" ||
		fail "xferd $name does not listen on TCP $(addr "$name")"
	note "xferd $name (pid ${XD_PID[$name]}) at $(addr "$name")${*:+, $*}"
}

xferd_running() { [ -n "${XD_PID[$1]:-}" ] && _g_running "${XD_PID[$1]}"; }

_g_log_clean() {
	! grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' "$TMP/$1.log" ||
		fail "sanitizer report in xferd $1's log"
}

# stop_xferd NAME: SIGTERM; it must exit 0 within 30 s.
stop_xferd() {
	local name=$1 rc
	[ -n "${XD_PID[$name]:-}" ] || fail "stop_xferd: no xferd $name"
	xferd_running "$name" || fail "xferd $name died before it was stopped"
	kill -TERM "${XD_PID[$name]}"
	wait_exit "${XD_PID[$name]}" 30
	rc=$?
	unset "XD_PID[$name]"
	[ $rc -eq 124 ] && fail "xferd $name still running 30 s after SIGTERM"
	[ $rc -eq 0 ] || fail "xferd $name exited with $rc after SIGTERM"
	_g_log_clean "$name"
	note "xferd $name stopped cleanly"
}

# kill_xferd NAME: SIGKILL, no questions.
kill_xferd() {
	local name=$1
	[ -n "${XD_PID[$name]:-}" ] || fail "kill_xferd: no xferd $name"
	kill -KILL "${XD_PID[$name]}" 2>/dev/null
	wait_exit "${XD_PID[$name]}" 10
	unset "XD_PID[$name]"
	note "xferd $name killed (SIGKILL)"
}

# xferctl_on NAME ARGS...: xferctl against node NAME's xferd.
xferctl_on() { "$XFERCTL" -s "${XD_SOCK[$1]}" "${@:2}"; }

# xferd_log NAME: the log of its current (or last) run only.
xferd_log() {
	awk '/^=== .* start: /{n = 0} {l[n++] = $0} END{for (i = 0; i < n; i++) print l[i]}' \
		"$TMP/$1.log"
}

# xferd_log_has NAME ERE: a line of its current run matches (any case).
xferd_log_has() { xferd_log "$1" | grep -Eiq -- "$2"; }

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

# --- clients -------------------------------------------------------------

XNODE_SECS=${XNODE_SECS:-120}

# xnode NODE COMMAND ARGS...: xnode against NODE's xferd; at most
# $XNODE_SECS.  Its status; its output in $LAST_OUT.
xnode() {
	local node=$1 cmd=$2
	shift 2
	echo "-- $(_g_elapsed) [$node] xnode $cmd $*"
	run_cmd "$XNODE_SECS" "$XNODE" "$cmd" --socket "${XD_SOCK[$node]}" "$@"
}

# xnode_ok NODE COMMAND ARGS...: as xnode; it must exit 0.
xnode_ok() { xnode "$@" || fail "xnode $2 on $1 failed (exit $?)"; }

# serve_start NODE TAG ARGS...: "xnode serve" on NODE in the background
# (output $TMP/bg-TAG.out); returns once it printed "ready".
serve_start() {
	local node=$1 tag=$2
	shift 2
	echo "-- $(_g_elapsed) [$node] xnode serve $* (as $tag)"
	bg_start "$tag" "$XNODE" serve --socket "${XD_SOCK[$node]}" "$@"
	bg_wait_line "$tag" '^ready ' 90
	sed -n 's/^/    | /; /^    | ready /p' "${BG_OUT[$tag]}"
}

# serve_stop TAG: SIGTERM; its output; it must exit 0 (every expected
# notification came and was verified).
serve_stop() {
	local tag=$1 rc
	bg_stop "$tag"
	rc=$?
	sed 's/^/    | /' "${BG_OUT[$tag]}" | tail -n 20
	[ $rc -eq 0 ] || fail "serve $tag exited with $rc"
}

# expect_notified TAG VALUE: the serve process TAG verified notification
# VALUE (decimal) - the bytes were in place when it arrived.
expect_notified() {
	bg_wait_line "$1" "^(FAIL )?notify value=$2[ :]" 60
	if bg_has "$1" "^FAIL notify value=$2[ :]"; then
		fail "$1: $(grep -E "^FAIL notify value=$2[ :]" "${BG_OUT[$1]}")"
	fi
	bg_has "$1" "^notify value=$2 bytes=-?[0-9]+ (verified|ok)( |$)" ||
		fail "$1: $(grep -E "^notify value=$2 " "${BG_OUT[$1]}")"
	note "$1 saw notification $2 with the data in place"
}

# --- set-up and cleanup --------------------------------------------------

_g_cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	for pid in "${G_PIDS[@]}"; do
		_g_running "$pid" && kill -KILL "$pid" 2>/dev/null
	done
	for pid in "${G_PIDS[@]}"; do
		wait_exit "$pid" 5 >/dev/null 2>&1
	done
	if [ -n "${TMP:-}" ] && [ -d "$TMP" ]; then
		if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ "${RDMA_TEST_KEEP:-0}" = 1 ]; then
			echo "kept $TMP"
		else
			rm -rf "$TMP"
		fi
	fi
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
	XFERD=${XFERD_BIN:-}
	XFERCTL=${XFERCTL_BIN:-}
	XNODE=${XFER_TEST_TOOLS:-}/xnode
	if [ -z "$XFERD" ] || [ ! -x "$XFERD" ]; then
		skip "XFERD_BIN not set (run through make check)"
	fi
	if [ -z "$XFERCTL" ] || [ ! -x "$XFERCTL" ]; then
		skip "XFERCTL_BIN not set (run through make check)"
	fi
	[ -x "$XNODE" ] || skip "$XNODE not built"
	trap _g_cleanup EXIT
	trap 'echo "interrupted"; exit 130' INT
	trap 'echo "terminated"; exit 143' TERM
	TMP=$(mktemp -d "/tmp/$G_NAME.XXXXXX") || fail "mktemp"
	step "$G_NAME ($G_SETUP setup): a at $(addr a) on ${XD_DEV[a]}," \
		"b at $(addr b) on ${XD_DEV[b]}; files in $TMP"
}

_g_init
