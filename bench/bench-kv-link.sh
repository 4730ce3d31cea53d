#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-kv-link.sh BUILD [kvbench args...] - the KV hand-off over the link
# between two xferds of one host (127.0.0.1), as kvbench --remote-socket
# measures it between two nodes.
#
# Starts xferd a and b on loopback, each the other's configured peer (no
# cluster key), and runs BUILD/kvbench with the prefill side on a and the
# decode side on b: every block crosses their TCP link, staged through
# pinned chunks at both ends (GPU memory -> D2H -> link -> H2D), beside
# memfd -> memfd over the same link.  Works on a machine with one GPU
# (both caches on GPU 0).  Afterwards each xferd's staging clocks
# (xferctl stats: where the staged streams spent their time) are printed.
#
# env: AHEAD (tcp_stage_ahead of both xferds; default: theirs, 4),
#      CPU_A/CPU_B (progress threads; default 2 3 with 6 CPUs or more).
# Exit: kvbench's (0 every byte arrived, 1 not, 77 no GPU).
set -uo pipefail

B=$(cd "${1:?usage: $0 BUILD [kvbench args...]}" && pwd) || exit 1
shift
if [ "$(nproc)" -ge 6 ]; then
	CPU_A=${CPU_A:-2} CPU_B=${CPU_B:-3}
else
	CPU_A=${CPU_A:-1} CPU_B=${CPU_B:-0}
fi
TMP=$(mktemp -d /tmp/kvbench-link.XXXXXX)
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port() { echo $((20000 + RANDOM % 30000)); }
PA=$(port) PB=$(port)
while [ "$PB" = "$PA" ]; do PB=$(port); done
SOCK_A=$TMP/a.sock SOCK_B=$TMP/b.sock
extra=()
[ -n "${AHEAD:-}" ] && extra=(-o "tcp_stage_ahead=$AHEAD")

"$B/xferd" -s "$SOCK_A" -o "listen=127.0.0.1:$PA" -o node_name=a \
	-o "peer=127.0.0.1:$PB" -o progress_cpu="$CPU_A" \
	-o socket_group=none "${extra[@]}" -l warn >>"$TMP/xferd.log" 2>&1 &
PIDS+=($!)
"$B/xferd" -s "$SOCK_B" -o "listen=127.0.0.1:$PB" -o node_name=b \
	-o "peer=127.0.0.1:$PA" -o progress_cpu="$CPU_B" \
	-o socket_group=none "${extra[@]}" -l warn >>"$TMP/xferd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do
	[ -S "$SOCK_A" ] && [ -S "$SOCK_B" ] && break
	sleep 0.05
done
if ! [ -S "$SOCK_A" ] || ! [ -S "$SOCK_B" ]; then
	echo "bench-kv-link: xferd did not start:" >&2
	cat "$TMP/xferd.log" >&2
	exit 1
fi

"$B/kvbench" --socket "$SOCK_A" --remote-socket "$SOCK_B" "$@"
rc=$?
for s in a b; do
	echo
	echo "xferd $s (tcp_stage_ahead ${AHEAD:-default}):"
	"$B/xferctl" -s "$TMP/$s.sock" stats | sed -n '/^STAGING/,/^$/p'
done
if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
	echo "bench-kv-link: xferd log:" >&2
	tail -n 30 "$TMP/xferd.log" >&2
fi
exit "$rc"
