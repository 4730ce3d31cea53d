#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# names_squat.sh - a local user cannot take another user's name: names
# live in one namespace per uid (daemon/meta/names.h).
#
# One root xferd whose socket every uid may open; clients run as three
# plain numeric uids through setpriv (no user entries needed):
#   SQUAT   publishes "kv" first (private), its memory full of its own
#           seed; later it squats the bystander's name too
#   VICTIM  looks "kv" up before its own publisher is there: -ENOENT,
#           never the squatter's; then publishes "kv" itself (no
#           -EEXIST), and its own writer's bytes land in its region
#           (verified when notified), none in the squatter's (the
#           squatter checks its region unchanged at the end)
#   BYST    a bystander that reads its own name "by" back, verified, all
#           through the attack and once more after the squat of "by"
# and then the deliberate sharing:
#   - "~SQUAT/kv" (private) is -ENOENT to VICTIM; "~VICTIM/kv" works
#     for VICTIM; root may resolve "~SQUAT/kv" (root reads any memory
#     anyway);
#   - SQUAT shares "pub" (XFER_PUBLISH_SHARED): VICTIM writes into it as
#     "~SQUAT/pub" (verified by SQUAT); a bare "pub" is still -ENOENT to
#     VICTIM (a bare name is never another user's);
#   - VICTIM trying to share the spelling "pub" too is -EEXIST (one uid
#     per shared spelling: what other nodes see must be one name).
# xferd stays up and stops cleanly.
#
# Env (from tests/run-tests.sh): XFERD_BIN, XFERCTL_BIN, XFER_TEST_TOOLS.
# Exit 0 pass, 1 fail, 77 skip.
set -u

# tests/lib/nodes.sh runs its clients where a node lives: here.
_nd_enter() { ND_ENTER=(); }
ND_STAMP=
XNODE_SECS=${XNODE_SECS:-120}
# shellcheck source-path=SCRIPTDIR source=../lib/nodes.sh
. "$(dirname "$0")/../lib/nodes.sh"

_nd_need_binaries
[ "$(id -u)" -eq 0 ] || skip "needs root: xferd as root, clients as other uids"
command -v setpriv >/dev/null || skip "setpriv missing (util-linux)"

SQUAT=61101 VICTIM=61102 BYST=61103
KiB=1024 MiB=1048576

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	_nd_kill_all
	_nd_remove_tmp "$rc" "${XFERT_KEEP:-0}"
	exit "$rc"
}
_nd_traps cleanup
TMP=$(mktemp -d /tmp/xferd-squat.XXXXXX) || fail "mktemp"
# The clients reach the socket through its directory.
chmod 0755 "$TMP"

# as UID CMD...: CMD as that uid and gid, no supplementary groups.
as() {
	local uid=$1
	shift
	setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
}
as "$SQUAT" test -x "$XNODE" ||
	skip "$XNODE cannot be run by uid $SQUAT (a directory's mode?)"

# xnode_as UID COMMAND ARGS...: xnode as UID against the xferd (bounded).
xnode_as() {
	local uid=$1 cmd=$2
	shift 2
	_nd_say -- "[uid $uid] xnode $cmd $*"
	run_cmd "$XNODE_SECS" setpriv --reuid="$uid" --regid="$uid" \
		--clear-groups "$XNODE" "$cmd" --socket "$SOCK" "$@"
}
xnode_as_ok() { xnode_as "$@" || fail "xnode $2 as uid $1 failed (exit $?)"; }

# serve_as UID TAG ARGS...: "xnode serve" as UID in the background;
# returns once it printed "ready".
serve_as() {
	local uid=$1 tag=$2
	shift 2
	_nd_say -- "[uid $uid] xnode serve $* (as $tag)"
	_nd_bg_start "$tag" setpriv --reuid="$uid" --regid="$uid" \
		--clear-groups "$XNODE" serve --socket "$SOCK" "$@"
	bg_wait_line "$tag" '^ready ' "$ND_READY_SECS"
}

step "names_squat: xferd with a socket for every uid, files in $TMP"
xferd_spawn n -s "$TMP/n.sock" -l debug -o listen=off
SOCK=${XD_SOCK[n]}
wait_for 20 _nd_xferd_answers n || fail "xferd does not answer"
chmod 0666 "$SOCK"

step "bystander (uid $BYST): its own name 'by', read back verified, all along"
serve_as "$BYST" by-serve --name by --private --size $MiB --seed 77
_nd_bg_start by-read setpriv --reuid="$BYST" --regid="$BYST" --clear-groups \
	"$XNODE" read --socket "$SOCK" --lookup by --size $MiB --seed 77 \
	--repeat 0 --interval-ms 5
bg_wait_line by-read '^read: ' 30

step "the squatter (uid $SQUAT) publishes 'kv' first"
serve_as "$SQUAT" squat-kv --name kv --private --size $MiB --seed 11 \
	--verify-unchanged

step "the victim (uid $VICTIM) looks 'kv' up before its publisher is there"
xnode_as "$VICTIM" lookup --lookup kv --expect-error ENOENT ||
	fail "the victim's lookup of 'kv' resolved another user's name"

step "the victim publishes 'kv' itself and writes into it"
serve_as "$VICTIM" victim-kv --name kv --private --size $MiB \
	--expect-notify "1:21:$((64 * KiB)):500000"
xnode_as_ok "$VICTIM" write --lookup kv --size 500000 \
	--offset $((64 * KiB)) --seed 21 --notify 1
expect_notified victim-kv 1
xnode_as_ok "$VICTIM" read --lookup kv --size 500000 \
	--offset $((64 * KiB)) --seed 21
xnode_as_ok "$VICTIM" lookup --lookup "~$VICTIM/kv"

step "qualified names: another user's private name is not visible"
xnode_as "$VICTIM" lookup --lookup "~$SQUAT/kv" --expect-error ENOENT ||
	fail "uid $VICTIM resolved uid $SQUAT's private 'kv'"
xnode_as "$BYST" lookup --lookup "~$VICTIM/kv" --expect-error ENOENT ||
	fail "uid $BYST resolved uid $VICTIM's private 'kv'"
_nd_say -- "[root] xnode lookup --lookup ~$SQUAT/kv"
run_cmd "$XNODE_SECS" "$XNODE" lookup --socket "$SOCK" \
	--lookup "~$SQUAT/kv" || fail "root could not resolve ~$SQUAT/kv"

step "deliberate sharing: 'pub' of uid $SQUAT, shared"
serve_as "$SQUAT" squat-pub --name pub --size $MiB \
	--expect-notify "2:31:4096:8192"
xnode_as "$VICTIM" lookup --lookup pub --expect-error ENOENT ||
	fail "a bare lookup of uid $VICTIM resolved uid $SQUAT's shared 'pub'"
xnode_as_ok "$VICTIM" write --lookup "~$SQUAT/pub" --size 8192 \
	--offset 4096 --seed 31 --notify 2
expect_notified squat-pub 2
_nd_say -- "[uid $VICTIM] xnode serve --name pub (shared): must be -EEXIST"
run_cmd 60 setpriv --reuid="$VICTIM" --regid="$VICTIM" --clear-groups \
	"$XNODE" serve --socket "$SOCK" --name pub --size 4096
rc=$?
[ $rc -eq 1 ] && grep -q 'xfer_publish(pub): EEXIST' "$LAST_OUT" ||
	fail "sharing a spelling another uid shares: exit $rc, want EEXIST"

step "the squatter takes the bystander's name too: the bystander is not moved"
serve_as "$SQUAT" squat-by --name by --private --size $MiB --seed 12 \
	--verify-unchanged
xnode_as_ok "$BYST" read --lookup by --size $MiB --seed 77
xnode_as_ok "$BYST" write --lookup by --size 4096 --offset $((MiB - 4096)) \
	--seed 77

step "everyone stops: nothing landed in the squatter's memory"
bg_running by-read || fail "the bystander's reader stopped: $(tail -n 3 "$TMP/bg-by-read.out")"
bg_stop by-read
rc=$?
sed 's/^/    | /' "$TMP/bg-by-read.out" | tail -n 3
[ $rc -eq 0 ] || fail "the bystander's reader exited with $rc"
grep -Eq '^read and verified [1-9][0-9]* op' "$TMP/bg-by-read.out" ||
	fail "the bystander completed no verified read"
for tag in squat-kv squat-by; do
	serve_stop "$tag"
	bg_has "$tag" '^region unchanged' || fail "$tag: its region changed"
done
serve_stop victim-kv
serve_stop squat-pub
serve_stop by-serve
stop_xferd n
echo "ok: names are per uid; sharing is deliberate"
exit 0
