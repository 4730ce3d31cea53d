#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rdma.sh - the RDMA stage of `make check`: the tests that need real verbs,
# run in a qemu guest with Soft-RoCE (tests/rdma/vm.sh).
#
# On the host (run by tests/run-tests.sh, or by hand): builds the guest
# (vm.sh build; the kernel is fetched once into $XFER_BUILD/rdma-vm),
# boots it once per rxe setup that GUEST_TESTS uses, runs that setup's
# tests there (this script again: rdma.sh --guest SETUP) and prints the
# timings.  Exit 0 pass, 1 fail, 77 only when qemu cannot run here at all.
# `rdma.sh NAME...` (or RDMA_TESTS="NAME ...") runs only the guest tests
# named (GUEST_TESTS), and boots only the setups they need.  `rdma.sh --bench` runs bench/bench-rdma.sh on $XFER_BUILD instead (the
# RDMA benchmark in the same kind of guest; not part of make check).
#
# Bounds: the stage ends within PER_TEST_TIMEOUT (run-tests.sh's limit
# for it, RDMA_STAGE_TIMEOUT: 720 s) less a margin, whatever hangs; each guest gets what is
# left of that, RXE_VM_TIMEOUT (600 s) at most; each test in a guest
# RDMA_TEST_TIMEOUT (240 s).  A guest boots in 6-10 s under TCG.  Nothing
# outlives the stage: a guest that is stopped takes every process in it
# along.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd -P)
SELF=$ROOT/tests/integration/rdma.sh
VM=$ROOT/tests/rdma/vm.sh
export XFER_ROOT=${XFER_ROOT:-$ROOT}
export XFER_BUILD=${XFER_BUILD:-$ROOT/build}
export XFER_TEST_TOOLS=${XFER_TEST_TOOLS:-$XFER_BUILD/test-tools}
# The guests run the binary itself: the capped launcher of run-tests.sh
# (XFERD_BIN) lives in the host's /tmp, which a guest may not see.
export XFERD_BIN=${XFERD_REAL_BIN:-${XFERD_BIN:-$XFER_BUILD/xferd}}
export XFERCTL_BIN=${XFERCTL_BIN:-$XFER_BUILD/xferctl}
export RXE_VM_DIR=${RXE_VM_DIR:-$XFER_BUILD/rdma-vm}

# The tests run in the guest, three words each: the rxe setup they need
# (single: rxe0 on veth0, both ends of a test on it; pair: rxe1 on veth1
# too, and traffic between them crosses the veth), a name, and a bash
# command line, run in the project directory with XFER_* and RXE_* set
# (vm.sh says which).  Exit 0 pass, 77 skip, anything else fail.  xferd
# runs in the guest's initial network namespace: two nodes are two
# daemons with their own instance ids and ports on 10.0.0.1 (single) or
# on 10.0.0.1 and 10.0.0.2 (pair).  Build nothing with -march=native: the
# guest's CPU lacks AVX-512.
# shellcheck disable=SC2016 # expanded in the guest
GUEST_TESTS=(
	single verbs_smoke '"$XFER_TEST_TOOLS/verbs_smoke"'
	# ibv_reg_dmabuf_mr on a dma-buf (udmabuf, else vgem's: the guest's
	# kernel has no udmabuf) - EOPNOTSUPP on rxe - and the fallback
	single dmabuf_reg 'modprobe -q vgem; "$XFER_TEST_TOOLS/dmabuf_reg"'
	pair verbs_smoke_pair '"$XFER_TEST_TOOLS/verbs_smoke" && crossed_veth'
	single xferd_rails 'bash "$XFER_ROOT/tests/rdma/guest_rails.sh"'
	pair xferd_rails_pair 'bash "$XFER_ROOT/tests/rdma/guest_rails.sh"'
	# xferd's RDMA data path between two xferds (tests/rdma/guest_xfer.sh
	# says what each part checks).  Under TCG on 2 host CPUs: data 20-40 s,
	# stripe, errors, fallback 7-14 s each, peer_death 9 s.
	single xferd_rdma_data 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" data'
	single xferd_rdma_stripe 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" stripe'
	single xferd_rdma_errors 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" errors'
	single xferd_rdma_peer_death 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" peer_death'
	single xferd_rdma_fallback 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" fallback'
	single xferd_rdma_staged 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" staged'
	single xferd_rdma_adaptive 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" adaptive'
	single xferd_rdma_ranges 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" ranges'
	# latency work requests ahead of queued bulk ones (rdma_bulk_depth)
	single xferd_rdma_classes 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" classes'
	# tenants' shares (weights 1:3) and a capped tenant on the send queues
	single xferd_rdma_tenants 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" tenants'
	pair xferd_rdma_data_pair 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" data'
	pair xferd_rdma_stripe_pair 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" stripe'
	single xferd_rdma_owner_staged 'bash "$XFER_ROOT/tests/rdma/guest_xfer.sh" owner_staged'
)

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# --- in the guest ----------------------------------------------------------

# crossed_veth: rxe1 and veth1 received packets (the pair setup really
# sent the traffic through the veth, not through rxe's loopback).
crossed_veth() {
	local rxe veth
	read -r rxe </sys/class/infiniband/rxe1/ports/1/hw_counters/rcvd_pkts
	read -r veth </sys/class/net/veth1/statistics/rx_packets
	echo "rxe1 received $rxe RoCE packets, veth1 $veth packets"
	[ "$rxe" -gt 0 ] && [ "$veth" -gt 0 ]
}

# chosen NAME: no names were given, or NAME is one of them.
chosen() { [ ${#ONLY[@]} -eq 0 ] || [[ " ${ONLY[*]} " == *" $1 "* ]]; }

guest_main() {
	local setup=$1 i name cmd start rc fail=0
	export -f crossed_veth
	for ((i = 0; i < ${#GUEST_TESTS[@]}; i += 3)); do
		[ "${GUEST_TESTS[i]}" = "$setup" ] || continue
		name=${GUEST_TESTS[i + 1]} cmd=${GUEST_TESTS[i + 2]}
		chosen "$name" || continue
		echo "== $name"
		start=$(now_ms)
		timeout -k 5 "${RDMA_TEST_TIMEOUT:-240}" bash -c "$cmd" </dev/null
		rc=$?
		case $rc in
		0) printf 'PASS  %s %ss\n' "$name" "$(secs $(($(now_ms) - start)))" ;;
		77) printf 'SKIP  %s\n' "$name" ;;
		*) printf 'FAIL  %s (exit %s)\n' "$name" "$rc"; fail=1 ;;
		esac
	done
	return $fail
}

# --- on the host -----------------------------------------------------------

vm_pid=
stop_vm() {
	# vm.sh stops its guest when signalled and waits for qemu to go.
	[ -n "$vm_pid" ] || return 0
	trap '' TERM INT
	kill -TERM "$vm_pid" 2>/dev/null
	wait "$vm_pid" 2>/dev/null
	vm_pid=
}

host_main() {
	local stage_start deadline start rc left setup setups=() fail=0 i reason
	local summary
	stage_start=$(now_ms)
	deadline=$((stage_start + (${PER_TEST_TIMEOUT:-300} - 15) * 1000))
	trap stop_vm EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT

	if ! reason=$("$VM" probe); then
		echo "skip: $reason"
		exit 77
	fi
	start=$(now_ms)
	"$VM" build || { echo "FAIL: could not build the guest (tests/rdma/vm.sh build)"; exit 1; }
	summary="build $(secs $(($(now_ms) - start)))s"

	for ((i = 0; i < ${#GUEST_TESTS[@]}; i += 3)); do
		chosen "${GUEST_TESTS[i + 1]}" || continue
		[[ " ${setups[*]} " == *" ${GUEST_TESTS[i]} "* ]] ||
			setups+=("${GUEST_TESTS[i]}")
	done
	for setup in "${setups[@]}"; do
		left=$(((deadline - $(now_ms)) / 1000))
		[ "$left" -le "${RXE_VM_TIMEOUT:-600}" ] || left=${RXE_VM_TIMEOUT:-600}
		if [ "$left" -lt 30 ]; then
			echo "FAIL: no time left for the $setup guest (PER_TEST_TIMEOUT)"
			fail=1
			break
		fi
		echo "== guest: $setup setup (at most ${left}s)"
		start=$(now_ms)
		# The host's shared daemon is no use in there.
		env -u XFERD_SOCKET RXE_VM_SETUP="$setup" RXE_VM_TIMEOUT="$left" \
			"$VM" run bash "$SELF" --guest "$setup" "${ONLY[@]}" &
		vm_pid=$!
		wait "$vm_pid"
		rc=$?
		vm_pid=
		summary+=", $setup guest $(secs $(($(now_ms) - start)))s"
		case $rc in
		0) ;;
		124) echo "FAIL: the $setup guest ran out of time"; fail=1 ;;
		125) echo "FAIL: the $setup guest died"; fail=1 ;;
		*) fail=1 ;;
		esac
	done
	echo "rdma stage: $summary; total $(secs $(($(now_ms) - stage_start)))s"
	return $fail
}

if [ "${1:-}" = --guest ]; then
	ONLY=("${@:3}")
	guest_main "$2"
elif [ "${1:-}" = --bench ]; then
	# Not a test: xferd beside perftest in the same guest, into
	# bench/results/ and BENCHMARKS.md (bench/bench-rdma.sh says how).
	exec "$ROOT/bench/bench-rdma.sh" "$XFER_BUILD"
else
	ONLY=("$@")
	# RDMA_TESTS="NAME ...": the same as naming them.
	[ $# -eq 0 ] && [ -n "${RDMA_TESTS:-}" ] && read -ra ONLY <<< "$RDMA_TESTS"
	host_main
fi
