#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-rdma-staged.sh BUILD - the staged RDMA path beside zero-copy RDMA,
# in the Soft-RoCE guest of tests/rdma/vm.sh (single setup: two xferds
# on rxe0, as in the RDMA tests).
#
# xferbench bw against a, its target process at b, in one run, three
# pairings, WRITE and READ, at SIZES:
#   staged        a's memory malloc'd and xfer_reg'd (CMA), b's memfd
#                 (registered there): path rdma-staged, through a's
#                 staging buffers
#   zero-copy     both memfd: path rdma
#   owner-staged  a's memory memfd, b's malloc'd and xfer_reg'd (CMA,
#                 which b's NIC cannot reach): path rdma-staged, through
#                 the landing chunks b lends (transport/rdma_land.c), a
#                 copy on b's side
# ROUNDS interleaved rounds; the table shows each row's median over
# them, and each staged row / zero-copy.  Prints markdown on stdout (the
# numbers for bench/results/); not part of make check.
#
# Under TCG every number is the emulation's (Soft-RoCE on emulated CPUs);
# the ratio is what carries over: the cost of the copy on this side.
#
# env: SIZES=1M,16M, TIME_MS=1000, REPS=3, ROUNDS=3, RXE_VM_TIMEOUT=400.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
SIZES=${SIZES:-1M,16M}
TIME_MS=${TIME_MS:-1000}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-3}
export SIZES TIME_MS REPS ROUNDS

if [ "${1:-}" != --guest ]; then
	BUILD=$(cd "${1:-$ROOT/build}" && pwd -P)
	export XFER_ROOT=$ROOT XFER_BUILD=$BUILD
	export XFER_TEST_TOOLS=$BUILD/test-tools XFERD_BIN=$BUILD/xferd
	export XFERCTL_BIN=$BUILD/xferctl RXE_VM_DIR=$BUILD/rdma-vm
	"$ROOT/tests/rdma/vm.sh" build >&2 || exit 1
	exec env RXE_VM_SETUP=single RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-400}" \
		"$ROOT/tests/rdma/vm.sh" run bash "$0" --guest
fi

# --- in the guest: two xferds as in the RDMA tests ---
# shellcheck source-path=SCRIPTDIR source=../tests/rdma/guest_lib.sh
. "$ROOT/tests/rdma/guest_lib.sh"
start_xferd b rdma_landing=on  # b lends landing chunks (off by default)
start_xferd a
res=$TMP/bench.res
: >"$res"
for ((r = 1; r <= ROUNDS; r++)); do
	for op in write read; do
		# pairing: a's memory (--local-kind), b's (--kind)
		for pk in staged:malloc:memfd zero:memfd:memfd owner:memfd:malloc; do
			IFS=: read -r pr lk tk <<<"$pk"
			out=$TMP/xb.$op.$pr.$r
			"$XFER_BUILD/xferbench" --socket "$TMP/a.sock" \
				--target-socket "$TMP/b.sock" bw --op $op --kind $tk \
				--local-kind $lk --sizes "$SIZES" --time-ms "$TIME_MS" \
				--reps "$REPS" >"$out" 2>&1 ||
				fail "xferbench $op $pr: $(tail -n 3 "$out")"
			grep '^RES xferbench_bw .* bw_median ' "$out" |
				awk -v op=$op -v pr=$pr '{ print op, pr, $4, $6 }' >>"$res"
			# every row's path, as xferbench prints it
			grep -Eo '^  [0-9]+[KMG]?i?B .* ([a-z-]+),' "$out" |
				sed -E 's/.* ([a-z-]+),$/\1/' | sort -u |
				sed "s/^/$op $pr path /" >>"$TMP/paths"
		done
	done
done
echo "paths seen: $(sort -u "$TMP/paths" | tr '\n' ';')" >&2
for want in 'staged path rdma-staged$' 'zero path rdma$' 'owner path rdma-staged$'; do
	grep -q "$want" "$TMP/paths" && ! grep "${want% path*} path" "$TMP/paths" |
		grep -vq "$want" ||
		fail "not the paths compared: $(sort -u "$TMP/paths" | tr '\n' ';')"
done
xferd_log_has b 'RDMA landing chunks' || fail "b lends no landing chunks"
echo "| op | size | a CMA, rdma-staged (GB/s) | memfd, rdma (GB/s) | b CMA, owner-staged (GB/s) | staged ÷ zero-copy | owner-staged ÷ zero-copy |"
echo "|---|---|---:|---:|---:|---:|---:|"
# medians over the rounds
sort -k1,1 -k3,3 -k2,2 "$res" | awk '
	function median(s,   a, n, i, j, t) {
		n = split(s, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ k = $1 " " $3; v[k, $2] = v[k, $2] " " $4; keys[k] = 1 }
	END {
		for (k in keys) {
			split(k, p, " ")
			s = median(v[k, "staged"]); z = median(v[k, "zero"])
			o = median(v[k, "owner"])
			printf "| %s | %s | %.3f | %.3f | %.3f | %.2f | %.2f |\n",
			       p[1], p[2], s, z, o, (z > 0 ? s / z : 0),
			       (z > 0 ? o / z : 0)
		}
	}' | sort
stop_xferd a
stop_xferd b
