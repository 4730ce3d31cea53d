#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# man-check.sh [ROOT] [XFERD] - the man pages render without a warning and cover
# what the code has:
#   every page     `man --warnings -l` prints nothing on stderr
#   xferd(8)       every option of daemon/main.c (short and long)
#   xferd.conf(5)  every key the parser knows (scripts/config-keys.sh asks
#                  the xferd binary, XFERD or ROOT/build/xferd; skipped
#                  with a note when there is none)
#   xferctl(1)     every command and long option of tools/xferctl/xferctl.c
#   libxfer(3)     every function <xfer.h> declares (when the page exists)
# Lists each gap and exits 1; 0 when there is none.
set -u
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
XFERD=${2:-$ROOT/build/xferd}
cd "$ROOT" || exit 2
command -v man >/dev/null || { echo "man-check: man is not installed" >&2; exit 2; }

bad=0
gap() { echo "$*"; bad=1; }

# --- rendering -------------------------------------------------------------
pages="daemon/xferd.8 daemon/xferd.conf.5 tools/xferctl/xferctl.1"
[ -f client/libxfer.3 ] && pages="$pages client/libxfer.3"
# Any other page of the tree renders cleanly too.
for p in $(git ls-files '*.[1-8]' 2>/dev/null); do
	case " $pages " in *" $p "*) ;; *) pages="$pages $p" ;; esac
done
for p in $pages; do
	# Warnings of groff (and of man's own preprocessing) go to stderr;
	# a fixed width so that line-breaking warnings do not depend on the
	# terminal.
	w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 "$p" 2>&1 >/dev/null)
	[ -z "$w" ] || gap "$p: $(echo "$w" | head -n 5)"
done

# A name set in bold anywhere in a page: .B name, .BR name, .BI "...name",
# \fBname\fP, as an option \-\-name.
mentions() { # page word
	grep -qE "(^\.(B|BR|BI|IR|RB|TP|SH|SS) .*|\\\\fB[^\\\\]*)$2" "$1"
}

# --- xferd(8): options ------------------------------------------------------
short=$(grep -oE 'getopt_long\(argc, argv, "[^"]+"' daemon/main.c | sed -E 's/.*"(.*)"/\1/' | tr -d :)
[ -n "$short" ] || gap "daemon/main.c: no getopt_long string found (has main.c changed shape?)"
for ((i = 0; i < ${#short}; i++)); do
	o=${short:i:1}
	grep -qE "^\.B[IR]? \\\\-$o( |\$)" daemon/xferd.8 || gap "xferd(8) lacks option -$o"
done
for o in $(grep -oE '\{ "[a-z-]+", (required|no|optional)_argument' daemon/main.c | cut -d'"' -f2); do
	grep -qF -- "\\-\\-${o//-/\\-}" daemon/xferd.8 || gap "xferd(8) lacks option --$o"
done

# --- xferd.conf(5): keys ----------------------------------------------------
if [ -x "$XFERD" ]; then
	keys=$(scripts/config-keys.sh "$XFERD" "$ROOT") || gap "cannot list the parser's keys"
	for k in $keys; do
		grep -qE "^\.(B|BI|BR)? ?$k( |\$)|^\\\\fB(.*\\\\fB)?$k\\\\fP" daemon/xferd.conf.5 ||
			gap "xferd.conf(5) lacks key $k"
	done
else
	echo "man-check: no xferd binary at $XFERD: config keys not checked" >&2
fi

# --- xferctl(1): commands and long options -----------------------------------
cmds=$(sed -n '/^static const struct command commands\[\] = {/,/^};/p' tools/xferctl/xferctl.c |
	grep -oE '^\s*\{ "[a-z-]+"' | cut -d'"' -f2)
[ -n "$cmds" ] || gap "tools/xferctl/xferctl.c: no commands[] table found (has it changed shape?)"
for c in $cmds; do
	grep -qE "^\.B $c( |\$)" tools/xferctl/xferctl.1 || gap "xferctl(1) lacks command $c"
done
for o in $(grep -oE '\{ "[a-z-]+", (required|no|optional)_argument' tools/xferctl/xferctl.c | cut -d'"' -f2); do
	grep -qF -- "\\-\\-${o//-/\\-}" tools/xferctl/xferctl.1 || gap "xferctl(1) lacks option --$o"
done

# --- libxfer(3): the public functions ----------------------------------------
if [ -f client/libxfer.3 ]; then
	for f in $(grep -oE '\bxfer_[a-z0-9_]+\s*\(' include/xfer.h | sed -E 's/\s*\(//' | sort -u); do
		mentions client/libxfer.3 "$f" || gap "libxfer(3) lacks $f"
	done
fi

if [ $bad -ne 0 ]; then
	echo "man-check: the man pages have gaps (above)" >&2
	exit 1
fi
echo "man-check: $(echo $pages | wc -w) pages render cleanly and cover every option, key, command and function"
