#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# guest_rails.sh - xferd's RDMA NIC discovery on real verbs devices, in the
# Soft-RoCE guest (tests/integration/rdma.sh runs it there).
#
# xferd starts and `xferctl rails` lists exactly the guest's rxe devices
# (rxe0; rxe1 too in the pair setup): port 1, ACTIVE, Ethernet, RoCEv2,
# the IPv4-mapped GID at $RXE_GID_INDEX ($RXE_GID_INDEX2) that is
# ::ffff:$RXE_IP, the address $RXE_IP/24 on the netdev the kernel names
# for that GID, and the active MTU ibv_devinfo reports; token ranges
# held by per-token registrations (token-mr), no grant yet, and in JSON
# the memory windows ibv_devinfo -v lists for the device.  The text table
# says the same as --json, the log has one "rail" line per rail and no
# RDMA warning, and xferd stops cleanly (exit 0) after closing its
# devices.
#
# Env: RXE_VM_GUEST, RXE_DEV, RXE_IP, RXE_GID_INDEX (and RXE_DEV2,
# RXE_IP2, RXE_GID_INDEX2 in the pair setup) from the guest; XFERD_BIN,
# XFERCTL_BIN from rdma.sh.  Exit 0 pass, 1 fail, 77 skip.
set -u

XFERD=${XFERD_BIN:-}
XFERCTL=${XFERCTL_BIN:-}

skip() { echo "skip: $*"; exit 77; }
[ "${RXE_VM_GUEST:-}" = 1 ] ||
	skip "not in the RDMA test guest (tests/rdma/vm.sh)"
[ -n "$XFERD" ] && [ -x "$XFERD" ] ||
	skip "XFERD_BIN not set (run through make check)"
[ -n "$XFERCTL" ] && [ -x "$XFERCTL" ] ||
	skip "XFERCTL_BIN not set (run through make check)"
[ -n "${RXE_DEV:-}" ] && [ -n "${RXE_IP:-}" ] && [ -n "${RXE_GID_INDEX:-}" ] ||
	skip "RXE_DEV, RXE_IP or RXE_GID_INDEX not set by the guest"

TMP=$(mktemp -d /tmp/guest-rails.XXXXXX)
SOCK=$TMP/xferd.sock
LOG=$TMP/xferd.log
daemon_pid=''

cleanup() {
	if [ -n "$daemon_pid" ]; then
		kill -9 "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	echo "--- last xferctl output:"; printf '%s\n' "${out-}"
	[ -f "$LOG" ] && { echo "--- xferd log:"; cat "$LOG"; }
	exit 1
}

# The rails the guest set up: "DEV IP GID_INDEX" each.
want=("$RXE_DEV $RXE_IP $RXE_GID_INDEX")
if [ -n "${RXE_DEV2:-}" ]; then
	[ -n "${RXE_IP2:-}" ] && [ -n "${RXE_GID_INDEX2:-}" ] ||
		fail "RXE_DEV2 set without RXE_IP2 and RXE_GID_INDEX2"
	want+=("$RXE_DEV2 $RXE_IP2 $RXE_GID_INDEX2")
fi

# Under emulation every process start costs 0.1-0.5 s: what shell
# builtins can do, they do.
shopt -s extglob

# --- start ----------------------------------------------------------------

# No TCP listener: discovery does not depend on it.
"$XFERD" -s "$SOCK" -l debug -o listen=off >"$LOG" 2>&1 &
daemon_pid=$!
for ((i = 0; i < 300; i++)); do
	[ -S "$SOCK" ] && "$XFERCTL" -s "$SOCK" status >/dev/null 2>&1 && break
	kill -0 "$daemon_pid" 2>/dev/null || fail "xferd died at start"
	sleep 0.1
done
[ $i -lt 300 ] || fail "xferd did not answer in 30 s"

# --- xferctl rails --------------------------------------------------------

out=$("$XFERCTL" -s "$SOCK" rails 2>&1) || fail "xferctl rails: exit $?"
text=$out
# One line per row, cells tab-separated: columns are 2+ spaces apart.
mapfile -t rows <<<"$text"
# The rails table ends at the first empty line (the queue pairs and the
# GPU-NIC lines follow it).
for i in "${!rows[@]}"; do
	[ -z "${rows[i]}" ] && { rows=("${rows[@]:0:i}"); break; }
done
for i in "${!rows[@]}"; do
	rows[i]=${rows[i]##+( )}
	rows[i]=${rows[i]//  *( )/$'\t'}
done
[ "${rows[0]}" = $'DEVICE\tPORT\tSTATE\tLINK\tMTU\tGID\tADDRESS\tNETDEV\tQPS\tTX\tRX\tERRORS\tRANGES\tGRANTS' ] ||
	fail "rails: table header"
[ ${#rows[@]} = $((${#want[@]} + 1)) ] ||
	fail "rails: want header + ${#want[@]} rows"

mapfile -t log <"$LOG"
want_json=''
for w in "${want[@]}"; do
	read -r dev ip gidx <<<"$w"
	# What the kernel and rdma-core say, to compare with: the GID's
	# netdev, and the port's active MTU.
	read -r netdev <"/sys/class/infiniband/$dev/ports/1/gid_attrs/ndevs/$gidx" ||
		fail "$dev: no netdev for GID $gidx in sysfs"
	info=$(ibv_devinfo -d "$dev" -i 1)
	[[ $info =~ active_mtu:[[:space:]]+([0-9]+) ]] ||
		fail "$dev: ibv_devinfo gave no active_mtu"
	mtu=${BASH_REMATCH[1]}
	# The memory windows its capability flags name, in xferd's words.
	windows=''
	while read -r flag; do
		case $flag in
		MEM_WINDOW) windows+=,type1 ;;
		MEM_WINDOW_TYPE_2A) windows+=,type2a ;;
		MEM_WINDOW_TYPE_2B) windows+=,type2b ;;
		esac
	done <<<"$(ibv_devinfo -v -d "$dev")"
	windows=${windows#,}
	echo "$dev: GID[$gidx] ::ffff:$ip on $netdev, active MTU $mtu," \
		"windows ${windows:-none}"

	row=''
	for r in "${rows[@]:1}"; do
		[ "${r%%$'\t'*}" = "$dev" ] && row=$r
	done
	# No peer yet: no queue pairs, nothing moved.
	printf -v want_row '%s\t1\tACTIVE\tEthernet\t%s\t[%s] ::ffff:%s\t%s/24\t%s\t0\t0 B\t0 B\t0\ttoken-mr\t0' \
		"$dev" "$mtu" "$gidx" "$ip" "$ip" "$netdev"
	[ "$row" = "$want_row" ] || fail "rails: $dev row '$row'"

	line="rail $dev/1: ACTIVE, RoCEv2, MTU $mtu, GID[$gidx] ::ffff:$ip,"
	line+=" $netdev $ip/24"
	found=0
	for l in "${log[@]}"; do
		[[ $l == *"xferd info: $line" ]] && found=1
	done
	[ $found = 1 ] || fail "xferd's log has no line '$line'"

	printf -v item '{"device":"%s","ip":"%s","gid_index":%s,"netdev":"%s","mtu":%s,"windows":"%s"}' \
		"$dev" "$ip" "$gidx" "$netdev" "$mtu" "${windows:-none}"
	want_json+=${want_json:+,}$item
done

if command -v jq >/dev/null; then
	out=$("$XFERCTL" -s "$SOCK" --json rails 2>&1) ||
		fail "xferctl --json rails: exit $?"
	# One JSON value, one rail per device set up, each as the table says.
	jq -e -s --argjson want "[$want_json]" '
		length == 1 and (.[0].rails as $rails |
		($rails | length) == ($want | length) and
		all($want[]; . as $w |
			[$rails[] | select(.device == $w.device)] | length == 1 and
			(.[0] | .port == 1 and .state == "ACTIVE" and
			 .link_layer == "Ethernet" and .transport == "RoCEv2" and
			 .gid_index == $w.gid_index and .gid == "::ffff:" + $w.ip and
			 .ip == $w.ip and .prefix_len == 24 and
			 .netdev == $w.netdev and .mtu == $w.mtu and .lid == 0 and
			 .token_ranges == "token-mr" and .windows == $w.windows and
			 .grants == 0 and .grants_made == 0)))' \
		>/dev/null <<<"$out" || fail "rails --json, want $want_json"
else
	echo "note: no jq here: the table alone is checked"
fi

n=${#want[@]} counted=0
for l in "${log[@]}"; do
	[[ $l == *"xferd "@(warn|error):*@(RDMA|rail|rxe|ibv_)* ]] &&
		fail "RDMA warning in xferd's log: $l"
	[[ $l == *"xferd info: $n RDMA rail"?(s)" on $n device"?(s) ]] &&
		counted=1
done
[ $counted = 1 ] || fail "xferd's log does not count $n rails"

# --- stop -----------------------------------------------------------------

kill -TERM "$daemon_pid"
wait "$daemon_pid"
rc=$?
daemon_pid=
[ $rc -eq 0 ] || fail "xferd exited $rc after SIGTERM"
mapfile -t log <"$LOG"
[[ ${log[-1]} == *"xferd info: stopped" ]] ||
	fail "xferd's log does not end in 'stopped'"

echo "--- xferctl rails"
printf '%s\n' "$text"
echo "pass: ${#want[@]} rail(s) found, listed and closed"
exit 0
