# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# tests/lib/nodes.sh - what the multi-node test libraries share: xferd
# "nodes" started and stopped by name, test clients (tests/tools/xnode)
# against them, background processes, bounded waits, and the report of a
# failure.  Sourced by tests/netns/lib.sh (one network namespace per node)
# and tests/rdma/guest_lib.sh (two xferds in the Soft-RoCE guest), which
# say where a node lives; the test scripts source those, not this.
#
# The sourcing library provides, before any helper here runs:
#   _nd_enter NODE   sets the array ND_ENTER to the command prefix that
#                    runs a command where NODE lives (empty: right here)
#   ND_EXIT_POLL     seconds between two looks in wait_exit
#   ND_WAIT_POLL     seconds between two tries in wait_for
#   ND_STOP_SECS     how long stop_xferd waits after SIGTERM
#   ND_READY_SECS    how long serve_start waits for "ready"
#   ND_STAMP         empty, or a function that prints a time stamp for the
#                    lines of step and of the clients
#   XNODE_SECS       the bound of one xnode run
#   TMP, XFERD, XFERCTL, XNODE (_nd_need_binaries sets the last three)
# Every xferd has its socket at $TMP/<name>.sock and its log at
# $TMP/<name>.log; the output of background process TAG is
# $TMP/bg-TAG.out.

ND_EXIT_POLL=${ND_EXIT_POLL:-0.02}
ND_WAIT_POLL=${ND_WAIT_POLL:-0.05}
ND_STOP_SECS=${ND_STOP_SECS:-20}
ND_READY_SECS=${ND_READY_SECS:-60}
ND_STAMP=${ND_STAMP:-}

declare -a ND_PIDS=()           # every process started in the background
declare -A XD_PID=() XD_SOCK=()
declare -A BG_PID=() BG_OUT=()
ND_RUNS=0                       # bounded runs so far (names their outputs)
LAST_OUT=                       # output file of the last bounded run

skip() { echo "skip: $*"; exit 77; }
note() { echo "   $*"; }

# _nd_say MARK TEXT...: "MARK TEXT", with ND_STAMP's stamp after MARK.
_nd_say() {
	if [ -n "$ND_STAMP" ]; then
		echo "$1 $("$ND_STAMP") ${*:2}"
	else
		echo "$*"
	fi
}

step() { _nd_say '==' "$*"; }

# fail MSG: the reason, then what the daemons and clients said.
fail() {
	echo "FAIL: $*"
	_nd_dump
	exit 1
}

_nd_dump() {
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

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

# True while PID, a child of this shell, runs (not a zombie, not reaped
# and reused by someone else).
_nd_running() {
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
	while _nd_running "$pid"; do
		if [ "$(now_ms)" -ge "$deadline" ]; then
			kill -KILL "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			return 124
		fi
		sleep "$ND_EXIT_POLL"
	done
	wait "$pid" 2>/dev/null
}

# wait_for SECS CMD...: run CMD every ND_WAIT_POLL seconds until it
# succeeds; 1 if it never did within SECS.
wait_for() {
	local deadline=$(($(now_ms) + $1 * 1000))
	shift
	until "$@"; do
		[ "$(now_ms)" -lt "$deadline" ] || return 1
		sleep "$ND_WAIT_POLL"
	done
}

# run_cmd SECS CMD...: CMD, at most SECS (then it is killed and counts as
# a hang: status 124).  Its output goes to $LAST_OUT and is shown
# indented.  CMD is a program, not a shell function, so that $! is the
# process itself and the kill reaches it.
run_cmd() {
	local secs=$1 pid rc
	shift
	ND_RUNS=$((ND_RUNS + 1))
	LAST_OUT=$TMP/run-$ND_RUNS.out
	"$@" >"$LAST_OUT" 2>&1 </dev/null &
	pid=$!
	ND_PIDS+=("$pid")
	wait_exit "$pid" "$secs"
	rc=$?
	sed 's/^/    | /' "$LAST_OUT"
	[ $rc -eq 124 ] && echo "    | (killed: still running after ${secs}s)"
	return $rc
}

# _nd_bg_start TAG CMD...: CMD (a program) in the background, output in
# $TMP/bg-TAG.out.
_nd_bg_start() {
	local tag=$1
	shift
	BG_OUT[$tag]=$TMP/bg-$tag.out
	: >"${BG_OUT[$tag]}"
	"$@" >"${BG_OUT[$tag]}" 2>&1 </dev/null &
	BG_PID[$tag]=$!
	ND_PIDS+=("$!")
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

bg_running() { [ -n "${BG_PID[$1]:-}" ] && _nd_running "${BG_PID[$1]}"; }

# bg_has TAG ERE: a line of its output matches.
bg_has() { grep -Eq -- "$2" "${BG_OUT[$1]}"; }

_nd_line_or_gone() { # TAG ERE
	bg_has "$1" "$2" && return 0
	bg_running "$1" || bg_has "$1" "$2" || fail \
		"$1 ended without a line /$2/: $(tail -n 5 "${BG_OUT[$1]}")"
	return 1
}

# bg_wait_line TAG ERE SECS: until a line matches; fails the test if the
# process ends first or the line never comes.
bg_wait_line() {
	wait_for "$3" _nd_line_or_gone "$1" "$2" ||
		fail "$1: no line /$2/ within ${3}s"
}

# --- xferd ---------------------------------------------------------------

# nd_key_args KV...: "-o cluster_key_file=..." of the test's cluster key
# (made on first use, one for all the test's nodes), unless one of KV
# sets cluster_key_file already or ND_CLUSTER_KEY=off.  Without a key
# xferd dials only configured peers and etcd members: the tests that
# pass tokens as files or look names up at "host:port/name" need one
# (with it any address may be dialed: the handshake proves the peer).
nd_key_args() {
	local kv key=$TMP/cluster.key
	[ "${ND_CLUSTER_KEY:-on}" = off ] && return 0
	for kv in "$@"; do
		case $kv in cluster_key_file=*) return 0 ;; esac
	done
	if [ ! -s "$key" ]; then
		head -c 32 /dev/urandom >"$key" && chmod 600 "$key" ||
			fail "cannot write the test's cluster key $key"
	fi
	echo "-o" "cluster_key_file=$key"
}

_nd_xferd_answers() {
	local name=$1
	_nd_running "${XD_PID[$name]}" ||
		fail "xferd $name exited during start-up: $(tail -n 5 "$TMP/$name.log")"
	"$XFERCTL" -s "${XD_SOCK[$name]}" status >/dev/null 2>&1
}

# xferd_spawn NAME ARGS...: node NAME's xferd with ARGS (which name
# $TMP/NAME.sock as its socket), started where the node lives; no wait.
xferd_spawn() {
	local name=$1
	shift
	XD_SOCK[$name]=$TMP/$name.sock
	rm -f "${XD_SOCK[$name]}"
	echo "=== $(date +%T.%N) start: xferd $*" >>"$TMP/$name.log"
	_nd_enter "$name"
	# ip netns exec execs xferd: $! is xferd itself (not so through a
	# shell function, which would run in a subshell).
	"${ND_ENTER[@]}" "$XFERD" "$@" >>"$TMP/$name.log" 2>&1 </dev/null &
	XD_PID[$name]=$!
	ND_PIDS+=("$!")
}

# _nd_spawn_xferd NAME SECS ARGS...: xferd_spawn; returns once the socket
# answers (SECS at most, else the test fails).
_nd_spawn_xferd() {
	local name=$1 secs=$2
	shift 2
	xferd_spawn "$name" "$@"
	wait_for "$secs" _nd_xferd_answers "$name" ||
		fail "xferd $name: its socket does not answer"
}

xferd_running() { [ -n "${XD_PID[$1]:-}" ] && _nd_running "${XD_PID[$1]}"; }

_nd_log_clean() {
	! grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' "$TMP/$1.log" ||
		fail "sanitizer report in xferd $1's log"
}

# stop_xferd NAME: SIGTERM; it must exit 0 within ND_STOP_SECS.
stop_xferd() {
	local name=$1 rc
	[ -n "${XD_PID[$name]:-}" ] || fail "stop_xferd: no xferd $name"
	xferd_running "$name" || fail "xferd $name died before it was stopped"
	kill -TERM "${XD_PID[$name]}"
	wait_exit "${XD_PID[$name]}" "$ND_STOP_SECS"
	rc=$?
	unset "XD_PID[$name]"
	[ $rc -eq 124 ] && fail "xferd $name still running $ND_STOP_SECS s after SIGTERM"
	[ $rc -eq 0 ] || fail "xferd $name exited with $rc after SIGTERM"
	_nd_log_clean "$name"
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

# xnode NODE COMMAND ARGS...: xnode where NODE lives, against its xferd;
# at most $XNODE_SECS.  Its status; its output in $LAST_OUT.
xnode() {
	local node=$1 cmd=$2
	shift 2
	_nd_say -- "[$node] xnode $cmd $*"
	_nd_enter "$node"
	run_cmd "$XNODE_SECS" "${ND_ENTER[@]}" "$XNODE" "$cmd" \
		--socket "${XD_SOCK[$node]}" "$@"
}

# xnode_ok NODE COMMAND ARGS...: as xnode; it must exit 0.
xnode_ok() { xnode "$@" || fail "xnode $2 on $1 failed (exit $?)"; }

# serve_start NODE TAG ARGS...: "xnode serve" on NODE in the background
# (output $TMP/bg-TAG.out); returns once it printed "ready".
serve_start() {
	local node=$1 tag=$2
	shift 2
	_nd_say -- "[$node] xnode serve $* (as $tag)"
	_nd_enter "$node"
	_nd_bg_start "$tag" "${ND_ENTER[@]}" "$XNODE" serve \
		--socket "${XD_SOCK[$node]}" "$@"
	bg_wait_line "$tag" '^ready ' "$ND_READY_SECS"
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

# _nd_need_binaries: XFERD, XFERCTL and XNODE from the environment that
# tests/run-tests.sh exports; skip (77) without them.
_nd_need_binaries() {
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
}

# _nd_traps CLEANUP: CLEANUP on every exit; SIGINT and SIGTERM exit.
_nd_traps() {
	# shellcheck disable=SC2064 # CLEANUP is a function's name, given now
	trap "$1" EXIT
	trap 'echo "interrupted"; exit 130' INT
	trap 'echo "terminated"; exit 143' TERM
}

# _nd_kill_all: every process started here, killed and reaped.
_nd_kill_all() {
	local pid
	for pid in "${ND_PIDS[@]}"; do
		_nd_running "$pid" && kill -KILL "$pid" 2>/dev/null
	done
	for pid in "${ND_PIDS[@]}"; do
		wait_exit "$pid" 5 >/dev/null 2>&1
	done
}

# _nd_remove_tmp RC KEEP: $TMP goes, unless the run failed (RC not 0 or
# 77) and KEEP is 1.
_nd_remove_tmp() {
	[ -n "${TMP:-}" ] && [ -d "$TMP" ] || return 0
	if [ "$1" -ne 0 ] && [ "$1" -ne 77 ] && [ "$2" = 1 ]; then
		echo "kept $TMP"
	else
		rm -rf "$TMP"
	fi
}
