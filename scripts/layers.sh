#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# layers.sh [ROOT] - every #include "..." of the C sources under ROOT
# (default .) points down or sideways, never up.
#
# The floors, bottom to top (a file may include its own floor and those
# below it; main.c alone is above everything):
#
#   0 common   common/, include/, generated *.pb-c.h (shared with libxfer)
#   1 core     daemon/core/   the op, routes, transport ops, counters, log,
#                             the settings' types
#   2 gpu nic  daemon/gpu/, daemon/nic/   devices, addresses
#   3 mem      daemon/mem/    regions, staging, descriptor lists;
#              daemon/stage/  the staging pipeline
#   4 movers   daemon/transport/ (to other nodes), daemon/local/ (same
#              node): every way of moving bytes, behind core/mover.h
#   5 engine   daemon/engine/ executor, progress
#   6 peer     daemon/peer/, daemon/meta/
#   7 front    daemon/ops/ and the files directly in daemon/ (clients,
#              listener, config, budgets), main.c excepted
#   8 main     daemon/main.c
#
# libxfer (client/) may include common/, include/ and itself; common/
# includes only floor 0.  Neither includes daemon/, and the daemon does
# not include client/.  A folder of daemon/ with no floor here fails:
# a new folder is placed on purpose.  An include that resolves to no
# file (search order: the file's folder, then the Makefile's -I list)
# fails too.
#
# Calls that reach upward without an include (an extern declaration in
# a .c file) are not seen here.
#
# Exit 0 clean, 1 an upward (or unresolvable) include, each printed.
set -u

ROOT=${1:-.}
cd "$ROOT" || exit 2

# Every file an include may resolve to, then every quoted include as
# "file:line:text".
{
	find common include client daemon -type f \
		\( -name '*.h' -o -name '*.c' -o -name '*.cu' \) | sort
	echo '--'
	find common client daemon -type f \
		\( -name '*.h' -o -name '*.c' -o -name '*.cu' \) | sort |
	while read -r f; do
		grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
			sed "s|^|$f:|"
	done
} | awk '
BEGIN { files = 1; bad = 0 }
files && $0 == "--" { files = 0; next }
files { exists[$0] = 1; next }

function dirname(p) { sub(/\/[^\/]*$/, "", p); return p }

# The file an include names, in the compiler'"'"'s order: the including
# file'"'"'s folder, then -Iinclude -I. -I$(GEN) -Idaemon -Iclient.
function resolve(f, inc,    c) {
	c = dirname(f) "/" inc
	if (c in exists) return c
	if (("include/" inc) in exists) return "include/" inc
	if (inc in exists) return inc
	if (inc ~ /^[a-z_]+\.pb-c\.h$/) return "gen/" inc
	if (("daemon/" inc) in exists) return "daemon/" inc
	if (("client/" inc) in exists) return "client/" inc
	return ""
}

# The floor of a file, or -1 for client/, -2 for a daemon/ folder with
# no floor.
function floor_of(p) {
	if (p ~ /^(common|include|gen)\//) return 0
	if (p ~ /^client\//) return -1
	if (p ~ /^daemon\/core\//) return 1
	if (p ~ /^daemon\/(gpu|nic)\//) return 2
	if (p ~ /^daemon\/(mem|stage)\//) return 3
	if (p ~ /^daemon\/(transport|local)\//) return 4
	if (p ~ /^daemon\/engine\//) return 5
	if (p ~ /^daemon\/(peer|meta)\//) return 6
	if (p == "daemon/main.c") return 8
	if (p ~ /^daemon\/ops\// || p ~ /^daemon\/[^\/]+$/) return 7
	return -2
}

{
	f = $0; sub(/:.*/, "", f)
	rest = substr($0, length(f) + 2)
	line = rest; sub(/:.*/, "", line)
	inc = rest; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)

	from = floor_of(f)
	if (from == -2) {
		printf "%s: daemon/ folder with no floor in layers.sh\n", f
		bad = 1; next
	}
	to_path = resolve(f, inc)
	if (to_path == "") {
		printf "%s:%s: \"%s\" resolves to no file\n", f, line, inc
		bad = 1; next
	}
	to = floor_of(to_path)
	if (to == -2) {
		printf "%s:%s: %s is in a daemon/ folder with no floor\n", \
			f, line, to_path
		bad = 1; next
	}
	if (from == -1 || to == -1) {
		if (from == to || to == 0) next
		printf "%s:%s: includes %s across libxfer and xferd\n", \
			f, line, to_path
		bad = 1; next
	}
	if (to > from) {
		printf "%s:%s: includes %s (floor %d) from floor %d\n", \
			f, line, to_path, to, from
		bad = 1
	}
}
END { exit bad }
'
