#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_auth.sh - cluster authentication between two nodes (a, b on
# 10.0.1.0/24): the cluster_key_file HMAC challenge-response of the link
# handshake.
#
#  - the same key (mode 600) on both: lookups and transfers work;
#  - different keys: the link is refused; a write with b's token and a
#    lookup at b fail quickly with an error (at import or completion, no
#    waiting out a deadline: -ETIMEDOUT does not count), nothing lands in
#    b's region, and both logs say in one clear line that authentication
#    failed;
#  - a key on one side only, either way round: refused the same way, with
#    a clear log line on both sides;
#  - a key file readable by others, or shorter than 16 bytes: xferd does
#    not start and says why, naming the file.
# Every xferd that started stops cleanly.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"
# Keys are this test's subject: no default cluster key (nd_key_args).
ND_CLUSTER_KEY=off

# What a refused link may fail with; not ETIMEDOUT, which would mean the
# client waited for a link that was never coming.
REFUSED=EACCES,EPERM,ECONNREFUSED,ECONNRESET,EPROTO,EHOSTUNREACH,EKEYREJECTED,ENOKEY,ENOTCONN

newkey() { # FILE: 48 random bytes as base64, mode 600
	(umask 077 && head -c 48 /dev/urandom | base64 -w0 >"$1") ||
		fail "cannot write key $1"
	chmod 600 "$1"
}
newkey "$TMP/key1"
newkey "$TMP/key2"

# auth_lines NAME [FROM]: lines of NAME's log (this run, after line FROM)
# about authentication.
auth_lines() {
	xferd_log "$1" | tail -n +$((${2:-0} + 1)) | grep -v '^=== ' | grep -i 'auth'
}
# auth_logged NAME FROM: one of them says it failed or was refused.
auth_logged() {
	auth_lines "$1" "$2" |
		grep -Eiq 'fail|refus|reject|mismatch|denied|invalid|wrong|bad|missing|requir|without|no key|not '
}

# refused KEY_A KEY_B WHAT: a's and b's keys ("" for none); the link must
# be refused and both logs must say why.
refused() {
	local ka=$1 kb=$2 what=$3 oa=() ob=()
	[ -n "$ka" ] && oa=(cluster_key_file="$ka")
	[ -n "$kb" ] && ob=(cluster_key_file="$kb")
	step "$what: the link is refused"
	start_xferd b b 10.0.1.2 "${ob[@]}"
	start_xferd a a 10.0.1.1 peer=10.0.1.2:7474 "${oa[@]}"
	serve_start b t --name t --token-file "$TMP/t.tok" --size 65536 --seed 3 \
		--verify-unchanged
	# Only what the daemons log from here on counts.
	local la lb
	la=$(xferd_log a | wc -l) lb=$(xferd_log b | wc -l)
	XNODE_SECS=60 xnode_ok a write --token-file "$TMP/t.tok" --size 4096 \
		--seed 4 --timeout-ms 10000 --expect-error "$REFUSED"
	XNODE_SECS=60 xnode_ok a lookup --lookup b/t --expect-error "$REFUSED"
	wait_for 10 auth_logged a "$la" ||
		fail "a's log has no line about authentication failing"
	wait_for 10 auth_logged b "$lb" ||
		fail "b's log has no line about authentication failing"
	note "a: $(auth_lines a "$la" | head -n 1)"
	note "b: $(auth_lines b "$lb" | head -n 1)"
	serve_stop t
	stop_xferd a
	stop_xferd b
}

topo_two

step "the same key on both nodes: it works"
start_xferd b b 10.0.1.2 cluster_key_file="$TMP/key1"
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474 cluster_key_file="$TMP/key1"
serve_start b t --name t --size 1048576 --expect-notify "1:11:0:100000"
xnode_ok a write --lookup b/t --size 100000 --seed 11 --notify 1 --expect-path tcp
expect_notified t 1
xnode_ok a read --lookup b/t --size 100000 --seed 11 --expect-path tcp
serve_stop t
for n in a b; do
	! auth_lines $n | grep -Eiq 'fail|refus|reject|mismatch|denied|invalid|wrong' ||
		fail "$n logged an authentication failure with matching keys"
done
stop_xferd a
stop_xferd b

refused "$TMP/key2" "$TMP/key1" "different keys"
refused "$TMP/key1" "" "a key on a only"
refused "" "$TMP/key1" "a key on b only"

# bad_key FILE WHAT: xferd must refuse to start with it, naming the file.
bad_key() {
	step "$2: xferd does not start"
	run_on a 15 "$XFERD" -s "$TMP/bad.sock" -o node_name=bad \
		-o listen=10.0.1.1:7475 -o cluster_key_file="$1"
	rc=$?
	[ $rc -ne 124 ] || fail "xferd runs with $2"
	[ $rc -ne 0 ] || fail "xferd exited 0 with $2"
	grep -qF "$1" "$LAST_OUT" || fail "xferd's message does not name $1"
	note "refused (exit $rc)"
}
newkey "$TMP/key-open"
chmod 644 "$TMP/key-open"
bad_key "$TMP/key-open" "a key file readable by others"
(umask 077 && printf 'short\n' >"$TMP/key-short")
bad_key "$TMP/key-short" "a key of 5 bytes"

echo "pass: cluster authentication"
