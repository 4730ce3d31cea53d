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
# correctness.  XFERT_KEEP=1 keeps $TMP of a failed run.

XT_NAME=$(basename "$0" .sh)
NS_PREFIX="xfert-$$-"
XD_PORT=7474

declare -a XT_NAMESPACES=()     # short names, in creation order
declare -a XT_PIDS=()           # every process started in the background
declare -A XD_PID=() XD_NS=() XD_SOCK=()
declare -A BG_PID=() BG_OUT=()
XT_RUNS=0                       # xnode runs so far (names their outputs)
LAST_OUT=                       # output file of the last run_on/xnode

skip() { echo "skip: $*"; exit 77; }
step() { echo "== $*"; }
note() { echo "   $*"; }

# fail MSG: the reason, then what the daemons and clients said.
fail() {
	echo "FAIL: $*"
	_xt_dump
	exit 1
}

_xt_dump() {
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

# --- processes ---------------------------------------------------------

# True while PID, a child of this shell, runs (not a zombie, not reaped
# and reused by someone else).
_xt_running() {
	local st rest
	{ read -r st </proc/"$1"/stat; } 2>/dev/null || return 1
	rest=${st##*) }
	# shellcheck disable=SC2086 # split the fields on purpose
	set -- $rest
	[ "$1" != Z ] && [ "$2" = "$$" ]
}

_xt_now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# wait_exit PID SECS: its exit status; after SECS it is killed (SIGKILL)
# and the status is 124.
wait_exit() {
	local pid=$1 deadline=$(($(_xt_now_ms) + $2 * 1000))
	while _xt_running "$pid"; do
		if [ "$(_xt_now_ms)" -ge "$deadline" ]; then
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			return 124
		fi
		sleep 0.02
	done
	wait "$pid" 2>/dev/null
}

# wait_for SECS CMD...: run CMD every 50 ms until it succeeds; 1 if it
# never did within SECS.
wait_for() {
	local deadline=$(($(_xt_now_ms) + $1 * 1000))
	shift
	until "$@"; do
		[ "$(_xt_now_ms)" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# run_on NODE_NS SECS CMD...: CMD in the namespace, at most SECS (then it
# is killed and counts as a hang: status 124).  Its output goes to
# $LAST_OUT and is shown indented.
run_on() {
	local ns=$1 secs=$2 pid rc
	shift 2
	XT_RUNS=$((XT_RUNS + 1))
	LAST_OUT=$TMP/run-$XT_RUNS.out
	ip netns exec "$(ns_name "$ns")" "$@" >"$LAST_OUT" 2>&1 </dev/null &
	pid=$!
	XT_PIDS+=("$pid")
	wait_exit "$pid" "$secs"
	rc=$?
	sed 's/^/    | /' "$LAST_OUT"
	[ $rc -eq 124 ] && echo "    | (killed: still running after ${secs}s)"
	return $rc
}

# bg_start TAG NS CMD...: CMD in the background in NS, output in
# $TMP/bg-TAG.out.
bg_start() {
	local tag=$1 ns=$2
	shift 2
	BG_OUT[$tag]=$TMP/bg-$tag.out
	: >"${BG_OUT[$tag]}"
	ip netns exec "$(ns_name "$ns")" "$@" >"${BG_OUT[$tag]}" 2>&1 </dev/null &
	BG_PID[$tag]=$!
	XT_PIDS+=("$!")
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

bg_running() { [ -n "${BG_PID[$1]:-}" ] && _xt_running "${BG_PID[$1]}"; }

# bg_has TAG ERE: a line of its output matches.
bg_has() { grep -Eq -- "$2" "${BG_OUT[$1]}"; }

_xt_line_or_gone() { # TAG ERE
	bg_has "$1" "$2" && return 0
	bg_running "$1" || bg_has "$1" "$2" || fail \
		"$1 ended without a line /$2/: $(tail -n 5 "${BG_OUT[$1]}")"
	return 1
}

# bg_wait_line TAG ERE SECS: until a line matches; fails the test if the
# process ends first or the line never comes.
bg_wait_line() {
	wait_for "$3" _xt_line_or_gone "$1" "$2" ||
		fail "$1: no line /$2/ within ${3}s"
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

_xt_xferd_answers() {
	local name=$1
	_xt_running "${XD_PID[$name]}" ||
		fail "xferd $name exited during start-up: $(tail -n 5 "$TMP/$name.log")"
	"$XFERCTL" -s "${XD_SOCK[$name]}" status >/dev/null 2>&1
}

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
	for kv in "$@"; do
		case $kv in listen=*) listen=${kv#listen=} ;; esac
		args+=(-o "$kv")
	done
	XD_NS[$name]=$ns XD_SOCK[$name]=$TMP/$name.sock
	rm -f "${XD_SOCK[$name]}"
	echo "=== $(date +%T.%N) start: xferd ${args[*]}" >>"$TMP/$name.log"
	# ip netns exec execs xferd: $! is xferd itself (not so through a
	# shell function, which would run in a subshell).
	ip netns exec "$(ns_name "$ns")" "$XFERD" "${args[@]}" \
		>>"$TMP/$name.log" 2>&1 </dev/null &
	XD_PID[$name]=$!
	XT_PIDS+=("$!")
	wait_for 20 _xt_xferd_answers "$name" ||
		fail "xferd $name: its socket does not answer"
	if [ "$listen" != off ]; then
		wait_for 20 _xt_tcp_listening "$ns" "${listen##*:}" ||
			fail "xferd $name does not listen on TCP $listen"
	fi
	note "xferd $name (pid ${XD_PID[$name]}) in $ns, listen $listen${*:+, $*}"
}

xferd_running() { [ -n "${XD_PID[$1]:-}" ] && _xt_running "${XD_PID[$1]}"; }

_xt_log_clean() {
	! grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' "$TMP/$1.log" ||
		fail "sanitizer report in xferd $1's log"
}

# stop_xferd NAME: SIGTERM; it must exit 0 within 20 s.
stop_xferd() {
	local name=$1 rc
	[ -n "${XD_PID[$name]:-}" ] || fail "stop_xferd: no xferd $name"
	xferd_running "$name" || fail "xferd $name died before it was stopped"
	kill -TERM "${XD_PID[$name]}"
	wait_exit "${XD_PID[$name]}" 20
	rc=$?
	unset "XD_PID[$name]"
	[ $rc -eq 124 ] && fail "xferd $name still running 20 s after SIGTERM"
	[ $rc -eq 0 ] || fail "xferd $name exited with $rc after SIGTERM"
	_xt_log_clean "$name"
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

# --- clients -------------------------------------------------------------

XNODE_SECS=${XNODE_SECS:-180}

# xnode NODE COMMAND ARGS...: xnode in NODE's namespace against its xferd;
# at most $XNODE_SECS.  Its status; its output in $LAST_OUT.
xnode() {
	local node=$1 cmd=$2
	shift 2
	echo "-- [$node] xnode $cmd $*"
	run_on "${XD_NS[$node]}" "$XNODE_SECS" "$XNODE" "$cmd" \
		--socket "${XD_SOCK[$node]}" "$@"
}

# xnode_ok NODE COMMAND ARGS...: as xnode; it must exit 0.
xnode_ok() { xnode "$@" || fail "xnode $2 on $1 failed (exit $?)"; }

# serve_start NODE TAG ARGS...: "xnode serve" on NODE in the background
# (output $TMP/bg-TAG.out); returns once it printed "ready".
serve_start() {
	local node=$1 tag=$2
	shift 2
	echo "-- [$node] xnode serve $* (as $tag)"
	bg_start "$tag" "${XD_NS[$node]}" "$XNODE" serve \
		--socket "${XD_SOCK[$node]}" "$@"
	bg_wait_line "$tag" '^ready ' 60
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

_xt_cleanup() {
	local rc=$? pid ns left
	trap - EXIT INT TERM
	for pid in "${XT_PIDS[@]}"; do
		_xt_running "$pid" && kill -KILL "$pid" 2>/dev/null
	done
	for pid in "${XT_PIDS[@]}"; do
		wait_exit "$pid" 5 >/dev/null 2>&1
	done
	for ns in "${XT_NAMESPACES[@]}"; do
		ip netns del "$(ns_name "$ns")" 2>/dev/null
	done
	left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NS_PREFIX")
	if [ -n "$left" ]; then
		echo "FAIL: namespaces left behind: $left"
		rc=1
	fi
	if [ -n "${TMP:-}" ] && [ -d "$TMP" ]; then
		if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ "${XFERT_KEEP:-0}" = 1 ]; then
			echo "kept $TMP"
		else
			rm -rf "$TMP"
		fi
	fi
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
	XFERD=${XFERD_BIN:-}
	XFERCTL=${XFERCTL_BIN:-}
	XNODE=${XFER_TEST_TOOLS:-}/xnode
	PEER_FUZZ=${XFER_TEST_TOOLS:-}/peer_fuzz
	if [ -z "$XFERD" ] || [ ! -x "$XFERD" ]; then
		skip "XFERD_BIN not set (run through make check)"
	fi
	if [ -z "$XFERCTL" ] || [ ! -x "$XFERCTL" ]; then
		skip "XFERCTL_BIN not set (run through make check)"
	fi
	[ -x "$XNODE" ] || skip "$XNODE not built"
	[ -x "$PEER_FUZZ" ] || skip "$PEER_FUZZ not built"
	[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"

	trap _xt_cleanup EXIT
	trap 'echo "interrupted"; exit 130' INT
	trap 'echo "terminated"; exit 143' TERM
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
