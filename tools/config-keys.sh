#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# config-keys.sh XFERD [ROOT] - the keys xferd's config parser knows, one
# a line, sorted: what the example configuration and xferd.conf(5) must
# list (tests/integration/conf_example.sh, tools/man-check.sh).
#
# Asked of the parser itself, not read off one coding pattern: every
# word of the config sources (daemon/config.[ch], daemon/*/*config*.[ch],
# and whatever daemon/ compares a key with) is offered to a real xferd
# as "word = @" in a file whose next line is an unknown key, so that
# xferd always stops at load; a word is a key unless xferd calls it an
# unknown key.  A key however it is parsed (a strcmp, a table, a prefix)
# is found as long as its name is written out in those sources.
set -u
XFERD=${1:?usage: config-keys.sh XFERD [ROOT]}
ROOT=${2:-$(cd "$(dirname "$0")/.." && pwd)}
TMP=$(mktemp -d /tmp/xferd-keys.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

{
	cat "$ROOT"/daemon/config.[ch] "$ROOT"/daemon/*/*config*.[ch] 2>/dev/null
	grep -rhoE --include='*.c' 'strcmp\(key, "[a-z0-9_]+"\)' "$ROOT/daemon"
} | grep -oE '\b[a-z][a-z0-9_]{1,47}\b' | sort -u >"$TMP/words"

n=0
while read -r w; do
	printf '%s = @\nzz_not_a_key_zz = 1\n' "$w" >"$TMP/conf"
	out=$("$XFERD" -c "$TMP/conf" -s "$TMP/sock" 2>&1)
	case $out in
	*":1: unknown key '$w'"*) ;;
	*":1: "*|*":2: unknown key 'zz_not_a_key_zz'"*) echo "$w"; n=$((n + 1)) ;;
	*) echo "config-keys: xferd said neither for '$w': $out" >&2; exit 2 ;;
	esac
done <"$TMP/words"
[ $n -gt 0 ] || { echo "config-keys: no keys found" >&2; exit 2; }
