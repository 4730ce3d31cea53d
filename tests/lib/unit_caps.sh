#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# unit_caps.sh - the capabilities of the packaged unit, read from its
# CapabilityBoundingSet= line, in one place for tests/run-tests.sh (which
# runs every xferd of `make check` with exactly those) and
# tests/integration/unit_security.sh (which checks a running xferd has
# them): the unit file is the one list, so the two cannot drift.
#
#   unit_caps UNIT             "CAP_SETUID CAP_SETGID ..." (one line)
#   unit_caps_setpriv UNIT     "-all,+setuid,+setgid,..." for setpriv
#   unit_caps_launcher UNIT XFERD OUT
#                              OUT: a script that execs XFERD under
#                              setpriv --bounding-set with the unit's
#                              capabilities and its memlock limit
#                              (exec all the way: OUT's pid is xferd's)

unit_caps() {
	local line
	line=$(grep -E '^CapabilityBoundingSet=' "$1" | tail -n 1) || return 1
	line=${line#CapabilityBoundingSet=}
	# shellcheck disable=SC2086 # split the list
	echo $line
}

unit_caps_setpriv() {
	local caps c out=-all
	caps=$(unit_caps "$1") || return 1
	for c in $caps; do
		c=${c#CAP_}
		out+=",+${c,,}"
	done
	echo "$out"
}

unit_caps_launcher() {
	local unit=$1 xferd=$2 out=$3 bound memlock
	bound=$(unit_caps_setpriv "$unit") || return 1
	memlock=$(sed -n 's/^LimitMEMLOCK=//p' "$unit" | tail -n 1)
	[ "$memlock" = infinity ] && memlock=unlimited
	command -v setpriv >/dev/null || return 1
	mkdir -p "$(dirname "$out")" || return 1
	cat >"$out" <<SH || return 1
#!/bin/sh
# xferd with the capabilities of $unit only (tests/lib/unit_caps.sh).
${memlock:+ulimit -l $memlock 2>/dev/null}
exec setpriv --bounding-set=$bound --inh-caps=-all -- "$xferd" "\$@"
SH
	chmod 0755 "$out"
}
