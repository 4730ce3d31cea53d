#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nixlbench.sh - NIXL's own benchmark, nixlbench (with XFERD in its list:
# scripts/nixlbench-build.sh), XFERD DRAM -> DRAM between two workers on
# the shared xferd ($XFERD_SOCKET): WRITE then READ, 4 KiB to 1 MiB, a
# few iterations, with nixlbench's consistency check (the target checks
# the bytes written, the initiator those read).  The workers meet over
# TCP on 127.0.0.1 (its ASIO runtime: the first binds, the second
# connects).  Its target counts notifications from "initiator", an agent
# whose metadata it never loads: the plugin's published agent names.
# Skips under ASan; fails without NIXL's tarballs or build.
set -u
. "$(dirname "$0")/../nixl/env.sh"
NIXLBENCH=$("$ROOT/scripts/nixlbench-build.sh" | tail -n 1) && [ -x "$NIXLBENCH" ] ||
	{ echo "FAIL: no nixlbench (scripts/nixlbench-build.sh failed above)"; exit 1; }
TMP=$(mktemp -d /tmp/nixlbench.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT

# A port nobody listens on now (a worker that cannot bind connects
# instead, so a port taken by another pair would join it).
free_port() {
	/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

fail=0
for op in WRITE READ; do
	port=$(free_port)
	args=(--runtime_type=ASIO --asio_address=127.0.0.1 --asio_port="$port"
	      --backend=XFERD --initiator_seg_type=DRAM --target_seg_type=DRAM
	      --op_type="$op" --start_block_size=4096 --max_block_size=1048576
	      --num_iter=64 --warmup_iter=8 --large_blk_iter_ftr=4
	      --total_buffer_size=$((16 << 20)) --check_consistency)
	pids=()
	timeout 120 "$NIXLBENCH" "${args[@]}" >"$TMP/$op.0" 2>&1 &
	pids+=($!)
	for _ in $(seq 50); do
		grep -q "Waiting for all processes" "$TMP/$op.0" && break
		sleep 0.1
	done
	timeout 120 "$NIXLBENCH" "${args[@]}" >"$TMP/$op.1" 2>&1 &
	pids+=($!)
	rc=0
	for p in "${pids[@]}"; do wait "$p" || rc=$?; done
	pids=()
	# The initiator's table: one row per size, 4 KiB to 1 MiB.
	rows=$(cat "$TMP/$op.0" "$TMP/$op.1" | awk '$1 ~ /^[0-9]+$/ && $2 == 1 && NF >= 10' | wc -l)
	if [ "$rc" -ne 0 ] || [ "$rows" -ne 9 ] ||
		grep -q "Consistency check failed" "$TMP/$op.0" "$TMP/$op.1"; then
		echo "FAIL: nixlbench XFERD $op: rc $rc, $rows of 9 sizes"
		tail -n 15 "$TMP/$op.0" "$TMP/$op.1"
		fail=1
		continue
	fi
	echo "ok: nixlbench XFERD DRAM -> DRAM $op, 9 sizes, consistency checked"
	cat "$TMP/$op.0" "$TMP/$op.1" | awk '$1 ~ /^[0-9]+$/ && $2 == 1 && NF >= 10 { printf "  %8s B  %s GB/s  %s us\n", $1, $3, $4 }'
done
exit $fail
