#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# conf_example.sh - etc/xferd.conf (the example installed as
# /etc/xferd/xferd.conf) and xferd.conf(5) list every key the parser
# knows, and the example's values are what xferd accepts.
#
# The parser's keys come from the parser itself (scripts/config-keys.sh
# offers it every word of the config sources): a key added there and
# forgotten in the example or the man page fails here.  The example's
# lines with a value, uncommented, are given to a real xferd, which must
# start with them and stop cleanly.
#
# Env (from tests/run-tests.sh): XFERD_BIN, XFER_ROOT.  Exit 0 pass,
# 1 fail, 77 skip.
set -u

ROOT=${XFER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
XFERD=${XFERD_BIN:-}
EXAMPLE=$ROOT/etc/xferd.conf
MAN=$ROOT/daemon/xferd.conf.5

fail() { echo "FAIL: $*"; exit 1; }

# "key = value" or "#key = value" (no space after the #: "# " starts
# prose): the key.
example_keys() {
	sed -nE 's/^#?([a-z0-9_]+) ?=.*/\1/p' "$EXAMPLE" | sort -u
}

[ -n "$XFERD" ] && [ -x "$XFERD" ] || { echo "skip: XFERD_BIN not set (run through make check)"; exit 77; }
keys=$("$ROOT/scripts/config-keys.sh" "$XFERD" "$ROOT") || fail "cannot list the parser's keys"
in_example=$(example_keys)
bad=0
for k in $keys; do
	echo "$in_example" | grep -qx "$k" ||
		{ echo "etc/xferd.conf lacks key $k (add it, commented, with its default)"; bad=1; }
	# A key opens an entry: .BI key, .BR key, .B key, or a line of
	# \fBkey\fP, \fBkey2\fP.
	grep -qE "^\.(B|BI|BR)? ?$k( |$)|^\\\\fB(.*\\\\fB)?$k\\\\fP" "$MAN" ||
		{ echo "xferd.conf(5) lacks key $k"; bad=1; }
done
for k in $in_example; do
	echo "$keys" | grep -qx "$k" ||
		{ echo "etc/xferd.conf names key $k, which the parser does not know"; bad=1; }
done
[ $bad -eq 0 ] || fail "the example or the man page is out of step with the parser"
echo "ok: all $(echo "$keys" | wc -l) keys in the example and the man page"

TMP=$(mktemp -d /tmp/xferd-conf.XXXXXX)
pid=''
cleanup() {
	[ -n "$pid" ] && { kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
	rm -rf "$TMP"
}
trap cleanup EXIT
# Every default with a value, as the only settings.
sed -nE 's/^#([a-z0-9_]+ = .+)$/\1/p' "$EXAMPLE" >"$TMP/xferd.conf"
n=$(wc -l <"$TMP/xferd.conf")
[ "$n" -ge 20 ] || fail "only $n default values in the example"
# Private socket, no TCP listener: the file's socket and listen lines
# are overridden (and were parsed all the same).
"$XFERD" -c "$TMP/xferd.conf" -s "$TMP/xferd.sock" -o listen=off \
	>"$TMP/xferd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	[ -S "$TMP/xferd.sock" ] && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
[ -S "$TMP/xferd.sock" ] || { cat "$TMP/xferd.log"; fail "xferd did not start with the example's $n values"; }
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=''
[ $rc -eq 0 ] || { cat "$TMP/xferd.log"; fail "xferd exited $rc"; }
echo "ok: xferd starts with the example's $n default values"
