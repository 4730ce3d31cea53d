#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-rdma-dlist.sh - prepared lists over RDMA (Soft-RoCE in the qemu
# guest of tests/rdma/vm.sh) beside ib_write_bw moving the same total
# size per message, in one guest run.
#
#   bench/bench-rdma-dlist.sh            on the host: boots the guest,
#                                        runs itself there, prints a table
#
# In the guest (single setup: both xferds on rxe0): dlistbench writes
# 1000 blocks of each size scattered over a's memfd region into 1000
# scattered slots of b's (one list descriptor per transfer, and the same
# blocks as 1000 linked SQEs), path rdma; then ib_write_bw on the same
# device, two queue pairs as xferd's rdma_qps, with messages of one
# block (what the list posts: one work request per block) and of the
# whole list's size capped at 1 MiB.  Under TCG the numbers are the emulation's;
# the ratio is what carries over.
#
# env: SIZES=4K,64K, TIME_MS=1500, REPS=3, PT_BYTES=163840000 (bytes each
# ib_write_bw run moves, at least 100 messages), RXE_VM_TIMEOUT=480
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
export XFER_ROOT=$ROOT XFER_BUILD=${XFER_BUILD:-$ROOT/build}
export XFERD_BIN=$XFER_BUILD/xferd XFERCTL_BIN=$XFER_BUILD/xferctl
export XFER_TEST_TOOLS=$XFER_BUILD/test-tools
SIZES=${SIZES:-4K,64K} TIME_MS=${TIME_MS:-1500} REPS=${REPS:-3}
PT_BYTES=${PT_BYTES:-163840000}
export SIZES TIME_MS REPS PT_BYTES

bytes() {
	case $1 in
	*K) echo $((${1%K} * 1024)) ;;
	*M) echo $((${1%M} * 1048576)) ;;
	*) echo "$1" ;;
	esac
}

iters() { # MESSAGE_BYTES: ib_write_bw's iterations for PT_BYTES
	local n=$((PT_BYTES / $1))
	echo $((n < 100 ? 100 : n))
}

guest() {
	# shellcheck source=../tests/rdma/guest_lib.sh
	G_NAME=bench-rdma-dlist . "$ROOT/tests/rdma/guest_lib.sh"
	start_xferd a
	start_xferd b
	echo "== dlistbench a -> b (rdma), 1000 blocks per transfer"
	"$XFER_BUILD/dlistbench" --socket "$TMP/a.sock" \
		--target-socket "$TMP/b.sock" --blocks 1000 --sizes "$SIZES" \
		--time-ms "$TIME_MS" --reps "$REPS" || fail "dlistbench"
	local s port=18515 msg
	for s in ${SIZES//,/ }; do
		# Two baselines: messages of one block (the same work requests
		# a list posts, each its own message) and messages of the
		# list's total, capped at 1 MiB, xferd's rdma_stripe
		# (rdma_rxe under emulation stalls in retries on messages of
		# several MiB).
		for msg in $(bytes "$s") $(($(bytes "$s") * 1000 > 1048576 ?
					   1048576 : $(bytes "$s") * 1000)); do
			port=$((port + 1))
			timeout 150 ib_write_bw -d "$RXE_DEV" -x "$RXE_GID_INDEX" \
				-i 1 -p $port -s "$msg" -n "$(iters "$msg")" -q 2 -F --report_gbits \
				>"$TMP/srv.$msg.log" 2>&1 &
			sleep 1
			echo "== ib_write_bw, messages of $msg bytes (blocks of $s)"
			timeout 120 ib_write_bw -d "$RXE_DEV" -x "$RXE_GID_INDEX" -i 1 \
				-p $port -s "$msg" -n "$(iters "$msg")" -q 2 -F \
				--report_gbits "$RXE_IP" 2>&1 |
				awk '/BW average/ { h = 1; next }
				h && $1 ~ /^[0-9]+$/ {
					printf "ib_write_bw %s B: %.3f GB/s\n", $1, $4 / 8
					exit }'
			wait
		done
	done
}

if [ "${1:-}" = --guest ]; then
	guest
	exit $?
fi
[ -x "$XFER_BUILD/dlistbench" ] || { echo "build first (make)" >&2; exit 1; }
"$ROOT/tests/rdma/vm.sh" build || exit 1
RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-480} \
	"$ROOT/tests/rdma/vm.sh" run bash "$ROOT/bench/bench-rdma-dlist.sh" --guest
