#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# nonroot.sh - clients that are not root, against a root xferd whose
# socket belongs to a group (socket_group): a member connects and moves
# verified bytes on both same-node paths (memcpy between memfds, and cma:
# xferd, as root, reaches the member's malloc'd memory with
# process_vm_readv/writev); a non-member is refused by the socket's mode
# and told what to do, by libxfer (xfer_strerror) and by xferctl.
#
# The users and the group are made for the test (useradd, groupadd) and
# removed again; the clients run as them through setpriv.
#
# Env (from tests/run-tests.sh): XFERD_BIN, XFERCTL_BIN, XFER_BUILD.
# Exit 0 pass, 1 fail, 77 skip.
set -u

XFERD=${XFERD_BIN:-}
XFERCTL=${XFERCTL_BIN:-}
DEMO=${XFER_BUILD:-}/xferdemo

skip() { echo "skip: $*"; exit 77; }
fail() { echo "FAIL: $*"; [ -f "${TMP:-}/xferd.log" ] && sed 's/^/  xferd| /' "$TMP/xferd.log" | tail -n 20; exit 1; }

[ -n "$XFERD" ] && [ -x "$XFERD" ] || skip "XFERD_BIN not set (run through make check)"
[ -n "$XFERCTL" ] && [ -x "$XFERCTL" ] || skip "XFERCTL_BIN not set (run through make check)"
[ -x "$DEMO" ] || skip "$DEMO not built"
[ "$(id -u)" -eq 0 ] || skip "needs root to create users and run xferd as root"
for tool in useradd userdel groupadd groupdel setpriv; do
	command -v $tool >/dev/null || skip "$tool missing"
done

# Short names unique to this run: user names are at most 32 characters.
GROUP=xft$$g MEMBER=xft$$m STRANGER=xft$$s
TMP=$(mktemp -d /tmp/xferd-nonroot.XXXXXX)
# The clients must reach the socket through its directory.
chmod 0755 "$TMP"
SOCK=$TMP/xferd.sock
daemon_pid=''

cleanup() {
	if [ -n "$daemon_pid" ]; then
		kill -9 "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	userdel "$MEMBER" 2>/dev/null
	userdel "$STRANGER" 2>/dev/null
	groupdel "$GROUP" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

groupadd "$GROUP" || fail "groupadd $GROUP"
useradd -M -N -g nogroup -G "$GROUP" -s /usr/sbin/nologin "$MEMBER" ||
	fail "useradd $MEMBER"
useradd -M -N -g nogroup -s /usr/sbin/nologin "$STRANGER" ||
	fail "useradd $STRANGER"

as() { # user command...
	local user=$1
	shift
	setpriv --reuid="$user" --regid=nogroup --init-groups "$@"
}
# The binaries must be runnable by the throwaway users.
as "$MEMBER" test -x "$DEMO" -a -x "$XFERCTL" ||
	skip "$DEMO or $XFERCTL cannot be run by another user (a directory's mode?)"

"$XFERD" -s "$SOCK" -l info -o listen=off -o socket_group="$GROUP" \
	>"$TMP/xferd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
	[ -S "$SOCK" ] && grep -q "may connect to" "$TMP/xferd.log" && break
	kill -0 "$daemon_pid" 2>/dev/null || fail "xferd exited"
	sleep 0.1
done
[ -S "$SOCK" ] || fail "xferd did not listen on $SOCK"

# --- the socket: root:GROUP 0660 ---------------------------------------
mode=$(stat -c '%a %U %G' "$SOCK")
[ "$mode" = "660 root $GROUP" ] || fail "socket is '$mode', want '660 root $GROUP'"
grep -q "members of group $GROUP may connect to $SOCK" "$TMP/xferd.log" ||
	fail "xferd did not log the socket's group"
echo "ok: socket is $mode"

# --- a member: connects, moves verified bytes on memcpy and cma --------
out=$(as "$MEMBER" "$DEMO" --socket "$SOCK" --size 1048576 2>&1) ||
	{ echo "$out"; fail "the member's clients failed"; }
echo "$out" | sed 's/^/  member| /'
for target in shared "malloc'd"; do
	echo "$out" | grep -q "all 1048576 bytes in my $target memory verified" ||
		fail "the member's $target memory was not verified"
done
echo "$out" | grep -q "wrote 1048576 bytes to the owner's shared memory via memcpy" ||
	fail "no memcpy write between the member's memfds"
echo "$out" | grep -q "wrote 1048576 bytes to the owner's malloc'd memory via cma" ||
	fail "no cma write into the member's malloc'd memory"
echo "$out" | grep -q "read 1048576 bytes back via cma: identical" ||
	fail "no cma read from the member's malloc'd memory"
# xferctl too: the control channel is open to the group.
as "$MEMBER" "$XFERCTL" --socket "$SOCK" status >"$TMP/status" 2>&1 ||
	{ cat "$TMP/status"; fail "xferctl status as a member failed"; }
echo "ok: a member of $GROUP moved verified bytes (memcpy and cma)"

# --- a non-member: refused, told to join the group ---------------------
out=$(as "$STRANGER" "$DEMO" --socket "$SOCK" --size 4096 2>&1) &&
	{ echo "$out"; fail "a non-member got through"; }
echo "$out" | sed 's/^/  stranger| /'
echo "$out" | grep -q "open: permission denied on the xferd socket: add the user to group xferd (socket_group" ||
	fail "a non-member's xfer_open error does not say what to do"
out=$(as "$STRANGER" "$XFERCTL" --socket "$SOCK" status 2>&1) &&
	fail "xferctl as a non-member got through"
echo "$out" | sed 's/^/  stranger| /'
echo "$out" | grep -q "^xferctl: permission denied on $SOCK .*add the user to group xferd" ||
	fail "xferctl's error for a non-member does not say what to do"
echo "ok: a non-member is refused with what to do"

# --- xferd is unharmed ----------------------------------------------------
kill -0 "$daemon_pid" 2>/dev/null || fail "xferd died"
"$XFERCTL" --socket "$SOCK" status >/dev/null || fail "xferd no longer answers"
kill -TERM "$daemon_pid"
wait "$daemon_pid"
rc=$?
daemon_pid=''
[ $rc -eq 0 ] || fail "xferd exited $rc on SIGTERM"
echo "ok: xferd stopped cleanly"
