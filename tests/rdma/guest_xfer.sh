#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# guest_xfer.sh PART... - the RDMA data path between two xferds, in the
# Soft-RoCE guest (tests/integration/rdma.sh runs it there, one PART per
# test; tests/rdma/guest_lib.sh says where the two nodes a and b live in
# the single and the pair setup).  Every byte is checked by xnode, every
# memory is memfd (xfer_alloc_host: the RDMA path needs it at the
# initiator), every completion must say path "rdma" unless said otherwise.
#
#   data        a -> b writes, then reads back, of 1 B, 4 KiB, 1 MiB+7 and
#               64 MiB at odd offsets, each with a notification that b's
#               client checks the bytes against when it arrives; 1000
#               descriptors as one linked batch (one completion, one
#               notification), as one prepared-list descriptor (one
#               completion, one notification), and as
#               1000 independent ones; a standalone
#               notification; b -> a as well.  xferctl status counts the
#               rdma path; in the pair setup the bytes crossed the veth.
#   stripe      fresh xferds with rdma_qps=2; once a small write has
#               opened a's queue pairs toward b (2 in RTS), one 64 MiB
#               write: a's `xferctl --json rails` shows a rail with
#               qps >= 2, and at least 2 of the queue pairs toward b each
#               carried part of that write, all of it together.
#   errors      stale rkey: b's client frees its region (it exits) while
#               a streams writes into it; the writes fail with EIO or
#               ESTALE, in time, while another client's writes to a
#               live region on the same queue pairs all succeed (redone
#               if the failure flushed them); a write with the old token
#               fails too;
#               the next write to a fresh region succeeds on rdma (the
#               QP is re-created) and is verified.  Out of bounds: writes
#               and reads past a token's range fail with ERANGE at a and
#               change no byte of b's region; both xferds stay up, and a
#               write inside the range still goes on rdma.
#   peer_death  b's xferd is killed (SIGKILL) in the middle of a stream of
#               writes from a: every write completes (ECONNRESET,
#               ETIMEDOUT or EIO; a write that RDMA gave back to the
#               link after the kill, and so waited for a new link:
#               ECONNREFUSED from the connect, or EHOSTUNREACH from one
#               made within the backoff after it) within its 3 s
#               deadline plus grace, a
#               answers xferctl status and marks b down, b's client
#               learns that its xferd went away; b restarts (a new
#               instance) and a's next write reaches it on rdma again.
#   fallback    b runs with rdma=off (it lists and advertises no rails):
#               transfers both ways complete on path tcp, a's status
#               counts no rdma op and a never reached b over a rail.
#
#   staged      xfer_reg'd (malloc, CMA) memory on the initiator, memfd at
#               the owner: writes (notified) and reads back of 1 B, 4 KiB+1,
#               1 MiB+7 and 64 MiB (more than the staging buffers hold:
#               it waits for chunks) at odd offsets, 1000 independent
#               descriptors, b -> a as well; every completion says
#               rdma-staged, xferctl status counts it, and every staging
#               chunk is back when xferd stops.
#   adaptive    a runs with rdma_register = background and every
#               registration held back 2 s (XFERD_TEST_REG_DELAY_MS): a
#               write from a memfd region just registered goes
#               rdma-staged (b checks the bytes); reads every 100 ms from
#               one region go rdma-staged until its registration lands,
#               then rdma to the end (bytes checked).  Then a restarted
#               without CAP_IPC_LOCK and a memlock limit of 16 MiB: a
#               12 MiB region's registration fails (one log line) and its
#               write and read go rdma-staged, verified.
#
#   owner_staged  xfer_reg'd (malloc, CMA) memory at the owner, which its
#               NICs cannot reach: b lends landing chunks for it (its log
#               says so).  Writes (notified) from a's memfd and malloc
#               memory and reads back of 1 B and 256 KiB (the chunk) - 1,
#               256 KiB, + 1 and 9 MiB + 3 (many chunks) at odd offsets,
#               through a landing pool b makes for a alone (its log and
#               xferctl status say so; lending is on by default),
#               bytes checked at both ends, every completion on
#               rdma-staged (never tcp); a prepared list of 200 blocks;
#               then a's client writing a stream of 16 MiB writes is
#               killed (SIGKILL) mid-stream: b takes every landing chunk
#               back (a later write and read still verified, and at exit
#               every staging chunk of b is back); a stopped, b frees a's
#               pool (log, xferctl status), both xferds stop cleanly.
#
#   ranges      the owner's NIC holds a peer to its token's range: b hands
#               a the rkeys of a registration of the token's range alone
#               (xferctl rails: token-mr, a grant made).  a runs with
#               XFERD_TEST_RDMA_SHIFT (a test hook: every RDMA remote
#               address moved), so that a write or read a checks as inside
#               the token [1 MiB, +2 MiB) of b's 4 MiB region reaches b's
#               NIC as just past the range's end, then (shift -4096) just
#               before its start: each fails with EIO (a remote access
#               error, which a logs) and b's whole region is unchanged,
#               byte for byte; both xferds stay up, and b's grants all end
#               once a's clients are gone.  a restarted without the hook:
#               a write and read inside the range go on rdma, verified.
#               A stream from a holds a grant; a's xferd killed (SIGKILL):
#               b's grants end with the link.
#   classes     a runs with rdma_bulk_depth=2 and rdma_stripe=16K: a bulk
#               client queues 64 writes of 1 MiB (64 work requests each)
#               at once; then a latency client writes 64 KiB.  Of the bulk
#               writes submitted before the latency one and not yet done
#               when it was submitted (at least 8), most end after it
#               (order only: the clients' CLOCK_MONOTONIC stamps of
#               submission and completion, compared, never timed); every
#               write succeeds on rdma and reads back verified.
#   tenants     a runs with rdma_bulk_depth=2, rdma_stripe=16K and the
#               tenants heavy (uid 1001, weight 3), light (uid 1002,
#               weight 1) and capped (uid 1003, 1 MiB a second).  light
#               keeps 32 bulk writes of 1 MiB queued (160 in all), then
#               heavy queues 16: heavy's all end before light's last,
#               light keeps progressing meanwhile, and at most 2/3 as
#               many of light's writes end while heavy's run as heavy's
#               (weights 1:3: about 1/3; arrival order: 32, the ones
#               queued ahead; order and counts from the clients' stamps,
#               never timed); a's per-tenant wait counts (xferctl stats)
#               have heavy's RDMA writes.  capped writes 4 MiB
#               in 4: every write succeeds on rdma and a counts it paced.
#               Every write reads back verified.
#
# Every part ends with both xferds stopping cleanly (SIGTERM, exit 0).
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=guest_lib.sh
. "$(dirname "$0")/guest_lib.sh"

[ $# -ge 1 ] || { echo "usage: guest_xfer.sh data|stripe|errors|peer_death|fallback|staged|adaptive|ranges|owner_staged|classes|tenants..." >&2; exit 2; }

# rails_json NODE: a's view of the rails, as JSON, shown compactly.
rails_json() {
	local out
	out=$(xferctl_on "$1" --json rails) || fail "xferctl --json rails on $1: exit $?"
	printf '%s\n' "$out"
}

# status_path_ops NODE PATH: ops that node NODE counts on PATH (0: none).
status_path_ops() {
	local out
	out=$(xferctl_on "$1" --json status) || fail "xferctl status on $1"
	jq -r --arg p "$2" '[.paths[] | select(.path == $p) | .ops] | add // 0' <<<"$out"
}

# qps_ready NODE PEER N: NODE has N or more queue pairs of its own toward
# PEER in RTS.
qps_ready() {
	local out
	out=$(xferctl_on "$1" --json rails) || return 1
	jq -e --arg p "$2" --argjson n "$3" '[.rails[] | (.qp // [])[] |
		select(.peer == $p and (.initiator // true) and .state == "RTS")] |
		length >= $n' <<<"$out" >/dev/null
}

# qp_bytes NODE PEER: {"DEVICE/QPN": bytes} of NODE's queue pairs toward
# PEER, as JSON.
qp_bytes() {
	local out
	out=$(xferctl_on "$1" --json rails) || fail "xferctl --json rails on $1"
	jq -c --arg p "$2" '[.rails[] | .device as $d | (.qp // [])[] |
		select(.peer == $p and (.initiator // true)) |
		{key: "\($d)/\(.qpn)", value: .bytes}] | from_entries' <<<"$out"
}

# landing_pools NODE: the landing pools NODE lends from now (xferctl status).
landing_pools() {
	local out
	out=$(xferctl_on "$1" --json status) || fail "xferctl status on $1"
	jq -r '.landing.pools // "none"' <<<"$out"
}

# no_link_up NODE PEER: NODE's xferctl shows no link to PEER that is up.
no_link_up() {
	local out
	out=$(xferctl_on "$1" --json peers) || return 1
	jq -e --arg p "$2" '[.peers[] | select(.node_name == $p and .state == "up")] |
		length == 0' <<<"$out" >/dev/null
}

# --- data ------------------------------------------------------------------

part_data() {
	local REGION=$((80 * MiB)) VEC_N=1000 VEC_LEN=$((1000 * 4096))
	local VEC_LINKED_OFF=$((68 * MiB)) VEC_INDEP_OFF=$((72 * MiB))
	# size@offset: nothing lines up with a page; the ranges do not overlap.
	local CASES=("1@3" "4096@4097" "$((MiB + 7))@12345"
		"$((64 * MiB))@$((2 * MiB + 1))")
	local exp=() i size off v seed rx0 rx1 big=$((64 * MiB)) ops

	start_xferd b
	start_xferd a
	# notification v = 100 + i, seed = 1000 + i
	for i in "${!CASES[@]}"; do
		exp+=(--expect-notify "$((100 + i)):$((1000 + i)):${CASES[i]#*@}:${CASES[i]%@*}")
	done
	exp+=(--expect-notify "110:1010:$VEC_LINKED_OFF:$VEC_LEN" --expect-notify 111)
	exp+=(--expect-notify "114:1014:$VEC_LINKED_OFF:$VEC_LEN")
	step "target: memfd region of $REGION bytes on b; sources memfd on a"
	serve_start b t --name t --size $REGION --kind memfd "${exp[@]}"

	for i in "${!CASES[@]}"; do
		size=${CASES[i]%@*} off=${CASES[i]#*@}
		v=$((100 + i)) seed=$((1000 + i))
		step "$size bytes at offset $off: a -> b (notified), then read back"
		rx0=$(rx_packets b)
		xnode_ok a write --lookup "$(addr b)/t" --size "$size" --offset "$off" \
			--seed $seed --kind memfd --notify $v --expect-path rdma
		rx1=$(rx_packets b)
		expect_notified t $v
		# The 64 MiB went as RoCE packets of 4 KiB at most (1 KiB with
		# the veth's MTU of 1500) to b's side, and come back to a's.
		if [ "$size" = $big ]; then
			note "$(rx_where b) received $((rx1 - rx0)) packets during the write"
			[ $((rx1 - rx0)) -ge $((big / 4096)) ] ||
				fail "$(rx_where b) received only $((rx1 - rx0)) packets for" \
					"$big bytes; a's rails toward b:" \
					"$(xferd_log a | grep -o 'RDMA: b reached over.*' | tr '\n' ';')"
			rx0=$(rx_packets a)
		fi
		xnode_ok a read --lookup "$(addr b)/t" --size "$size" --offset "$off" \
			--seed $seed --kind memfd --expect-path rdma
		if [ "$size" = $big ]; then
			rx1=$(rx_packets a)
			note "$(rx_where a) received $((rx1 - rx0)) packets during the read"
			[ $((rx1 - rx0)) -ge $((big / 4096)) ] ||
				fail "$(rx_where a) received only $((rx1 - rx0)) packets for $big bytes"
		fi
	done

	step "$VEC_N linked descriptors (one batch, one notification)"
	xnode_ok a write --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_LINKED_OFF \
		--vector $VEC_N --linked --seed 1010 --kind memfd --notify 110 \
		--expect-path rdma
	grep -q '^wrote 1 op(s), ' "$LAST_OUT" || fail "the linked batch did not complete as one op"
	expect_notified t 110
	xnode_ok a read --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_LINKED_OFF \
		--vector $VEC_N --linked --seed 1010 --kind memfd --expect-path rdma

	step "the same $VEC_N blocks as one prepared-list descriptor (its notification after the last work request)"
	xnode_ok a write --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_LINKED_OFF \
		--vector $VEC_N --dlist --seed 1014 --kind memfd --notify 114 \
		--expect-path rdma
	grep -q '^wrote 1 op(s), ' "$LAST_OUT" || fail "the list descriptor did not complete as one op"
	expect_notified t 114
	xnode_ok a read --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_LINKED_OFF \
		--vector $VEC_N --dlist --seed 1014 --kind memfd --expect-path rdma

	step "$VEC_N independent descriptors"
	xnode_ok a write --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_INDEP_OFF \
		--vector $VEC_N --seed 1013 --kind memfd --expect-path rdma
	grep -q "^wrote $VEC_N op(s), " "$LAST_OUT" || fail "not $VEC_N completions"
	xnode_ok a read --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_INDEP_OFF \
		--vector $VEC_N --seed 1013 --kind memfd --expect-path rdma
	grep -q "^read and verified $VEC_N op(s), " "$LAST_OUT" || fail "not $VEC_N completions"

	step "a standalone notification"
	xnode_ok a notify --lookup "$(addr b)/t" --notify 111
	expect_notified t 111
	serve_stop t

	step "the other direction: b -> a, 1 MiB+7 at offset 5 (notified, with a message and a sender name), read back"
	# The notification follows the RDMA data on the link: its message too.
	local req="cmpl-5b1e7c1d2f0a4b8c9d3e6f7a8b9c0d1e-0:kv-send"
	serve_start a t-a --name t-a --size $((2 * MiB)) --kind memfd \
		--expect-notify "200:2000:5:$((MiB + 7))" --expect-msg "$req" \
		--expect-sender-name "decode b"
	xnode_ok b write --lookup "$(addr a)/t-a" --size $((MiB + 7)) --offset 5 \
		--seed 2000 --kind memfd --notify 200 --notify-msg "$req" \
		--sender-name "decode b" --expect-path rdma
	expect_notified t-a 200
	xnode_ok b read --lookup "$(addr a)/t-a" --size $((MiB + 7)) --offset 5 \
		--seed 2000 --kind memfd --expect-path rdma
	serve_stop t-a

	step "xferctl: the rdma path is counted"
	ops=$(status_path_ops a rdma)
	[ "$ops" -gt 0 ] || fail "a's status counts no rdma ops: $(xferctl_on a --json status)"
	note "a counts $ops rdma op(s), b $(status_path_ops b rdma)"
	note "a's rails: $(rails_json a)"
	stop_xferd a
	stop_xferd b
}

# --- stripe ----------------------------------------------------------------

part_stripe() {
	local size=$((64 * MiB)) out before after
	start_xferd b rdma_qps=2
	start_xferd a rdma_qps=2
	serve_start b t --name t --size $((size + MiB)) --kind memfd \
		--expect-notify "1:77:4099:$size"

	# Queue pairs open on first use, without waiting for the peer; an
	# operation goes on those ready by then.  So: open them first.
	step "rdma_qps=2: a 4 KiB write opens a's queue pairs toward b"
	xnode_ok a write --lookup "$(addr b)/t" --size 4096 --seed 76 --kind memfd \
		--expect-path rdma
	wait_for 20 qps_ready a b 2 ||
		fail "a has not 2 queue pairs toward b in RTS: $(rails_json a)"
	before=$(qp_bytes a b)
	note "a's queue pairs toward b, bytes so far: $before"

	step "one 64 MiB write a -> b, spread over the queue pairs"
	xnode_ok a write --lookup "$(addr b)/t" --size $size --offset 4099 \
		--seed 77 --kind memfd --notify 1 --expect-path rdma
	expect_notified t 1
	out=$(rails_json a)
	after=$(qp_bytes a b)
	note "a's rails: $out"
	note "a's queue pairs toward b, bytes now: $after"
	# A rail with 2+ live queue pairs; 2+ queue pairs toward b carried
	# part of this one write, and together all of it (lookups and imports
	# go over TCP: nothing else moved meanwhile).
	jq -e '[.rails[] | select((.qps // 0) >= 2)] | length >= 1' <<<"$out" >/dev/null ||
		fail "no rail of a has 2 or more queue pairs"
	jq -e -n --argjson b "$before" --argjson a "$after" --argjson size $size '
		[$a | to_entries[] | .value - ($b[.key] // 0)] as $d |
		([$d[] | select(. > 0)] | length) >= 2 and ($d | add) >= $size' >/dev/null ||
		fail "the 64 MiB write did not go over 2 or more queue pairs toward b"

	step "read back, every byte checked"
	xnode_ok a read --lookup "$(addr b)/t" --size $size --offset 4099 \
		--seed 77 --kind memfd --expect-path rdma
	serve_stop t
	stop_xferd a
	stop_xferd b
}

# --- errors ----------------------------------------------------------------

part_errors() {
	local rc
	start_xferd b
	start_xferd a

	step "stale rkey: b's client frees its region while a streams writes into it"
	serve_start b s1 --name s1 --token-file "$TMP/s1.tok" --size $((8 * MiB)) --kind memfd
	xnode_ok a write --token-file "$TMP/s1.tok" --size $MiB --seed 1 --kind memfd \
		--expect-path rdma
	bg_start st1 "$XNODE" stream --socket "${XD_SOCK[a]}" --token-file "$TMP/s1.tok" \
		--size $MiB --offset 4096 --seed 2 --kind memfd --depth 2 --timeout-ms 5000 \
		--grace-ms 10000 --until-error --max-ms 60000 --expect-error EIO,ESTALE
	bg_wait_line st1 '^streaming: first write ok' 60
	bg_has st1 '^streaming: first write ok, path rdma$' ||
		fail "the stream's first write did not go on rdma: $(grep '^streaming' "${BG_OUT[st1]}")"
	# Another client of a writes to a live region of b meanwhile, on the
	# same queue pairs: the other client's failure must not fail it.
	serve_start b s3 --name s3 --token-file "$TMP/s3.tok" --size $((32 * MiB)) --kind memfd
	bg_start inn "$XNODE" write --socket "${XD_SOCK[a]}" --token-file "$TMP/s3.tok" \
		--size $((32 * MiB)) --seed 12 --kind memfd --repeat 8 --depth 4 \
		--expect-path rdma
	bg_wait_line inn '^write:' 60
	serve_stop s1
	note "b's client exited: its region is freed"
	bg_wait st1 60
	rc=$?
	sed 's/^/    | /' "${BG_OUT[st1]}" | tail -n 12
	[ $rc -ne 124 ] || fail "the stream still runs 60 s after the region was freed"
	[ $rc -eq 0 ] || fail "the writes into the freed region did not all fail with EIO/ESTALE in time (exit $rc)"
	xferd_log a | grep -E 'RDMA: (WRITE|READ) on QP' | sed 's/^/   a: /' | head -n 3
	bg_wait inn 120
	rc=$?
	sed 's/^/    | /' "${BG_OUT[inn]}" | tail -n 4
	[ $rc -eq 0 ] || fail "the other client's writes meanwhile failed (exit $rc)"
	# Whether the failure caught some of them in flight (and they were
	# redone) is up to timing; with 4 in flight it usually does.
	xferd_log a | grep -E 'RDMA: .* redone' | sed 's/^/   a: /' | head -n 3
	xnode_ok a read --token-file "$TMP/s3.tok" --size $((32 * MiB)) --seed 12 \
		--kind memfd --expect-path rdma
	serve_stop s3
	note "the other client's 8 x 32 MiB all landed"

	step "stale rkey: a write with the old token fails"
	XNODE_SECS=40 xnode_ok a write --token-file "$TMP/s1.tok" --size 4096 --seed 3 \
		--kind memfd --timeout-ms 5000 --expect-error EIO,ESTALE
	xferd_running a || fail "a's xferd died"
	xferd_running b || fail "b's xferd died"

	step "a fresh region: the next write goes on rdma again (QP re-created)"
	serve_start b s2 --name s2 --size $((8 * MiB)) --kind memfd \
		--expect-notify "5:55:8193:$((2 * MiB + 3))"
	xnode_ok a write --lookup "$(addr b)/s2" --size $((2 * MiB + 3)) --offset 8193 \
		--seed 55 --kind memfd --notify 5 --expect-path rdma
	expect_notified s2 5
	xnode_ok a read --lookup "$(addr b)/s2" --size $((2 * MiB + 3)) --offset 8193 \
		--seed 55 --kind memfd --expect-path rdma
	serve_stop s2

	step "out of bounds: a token for [1 MiB, +2 MiB) of a 4 MiB region (seed 9)"
	serve_start b r1 --name r1 --size $((4 * MiB)) --kind memfd --seed 9 \
		--export-range "$MiB:$((2 * MiB))" --verify-unchanged
	# offset:size pairs, relative to the token: across its end, at its end,
	# larger than it, and far beyond (the offset alone past the region).
	local oob
	for oob in "$((2 * MiB - 100)):4096" "$((2 * MiB)):1" "0:$((2 * MiB + 1))" \
		"$((3 * MiB)):4096"; do
		xnode_ok a write --lookup "$(addr b)/r1" --offset "${oob%:*}" --size "${oob#*:}" \
			--seed 10 --kind memfd --expect-error ERANGE
		xnode_ok a read --lookup "$(addr b)/r1" --offset "${oob%:*}" --size "${oob#*:}" \
			--seed 10 --kind memfd --expect-error ERANGE
	done
	xferd_running a || fail "a's xferd died"
	xferd_running b || fail "b's xferd died"
	xferctl_on a status >/dev/null || fail "a does not answer xferctl status"
	xferctl_on b status >/dev/null || fail "b does not answer xferctl status"
	note "both xferds answer"
	serve_stop r1
	note "b's region is unchanged"
	step "inside a token's range, its last 4 KiB: rdma, notified, verified"
	# A token for [0, 2 MiB) of 4 MiB: xnode's byte rule goes by region
	# offset, so the range starts at 0 here.
	serve_start b r2 --name r2 --size $((4 * MiB)) --kind memfd \
		--export-range "0:$((2 * MiB))" \
		--expect-notify "6:66:$((2 * MiB - 4096)):4096"
	xnode_ok a write --lookup "$(addr b)/r2" --offset $((2 * MiB - 4096)) --size 4096 \
		--seed 66 --kind memfd --notify 6 --expect-path rdma
	expect_notified r2 6
	xnode_ok a read --lookup "$(addr b)/r2" --offset $((2 * MiB - 4096)) --size 4096 \
		--seed 66 --kind memfd --expect-path rdma
	serve_stop r2
	stop_xferd a
	stop_xferd b
}

# --- peer_death --------------------------------------------------------------

part_peer_death() {
	local TIMING=(keepalive_ms=200 peer_timeout_ms=2000 connect_timeout_ms=2000)
	local rc old new
	start_xferd b "${TIMING[@]}"
	start_xferd a "${TIMING[@]}"
	serve_start b t --name t --token-file "$TMP/t-old.tok" --size $((32 * MiB)) --kind memfd

	step "sanity: a -> b on rdma"
	xnode_ok a write --lookup "$(addr b)/t" --size $MiB --seed 1 --kind memfd \
		--timeout-ms 5000 --expect-path rdma

	step "b's xferd is killed (SIGKILL) in the middle of a stream of writes"
	bg_start s-kill "$XNODE" stream --socket "${XD_SOCK[a]}" --lookup "$(addr b)/t" \
		--size $((4 * MiB)) --seed 7 --kind memfd --depth 4 --timeout-ms 3000 \
		--grace-ms 10000 --until-error --max-ms 60000 \
		--expect-error ECONNRESET,ETIMEDOUT,ECONNREFUSED,EHOSTUNREACH,EIO
	bg_wait_line s-kill '^streaming: first write ok' 60
	bg_has s-kill '^streaming: first write ok, path rdma$' ||
		fail "the stream's first write did not go on rdma: $(grep '^streaming' "${BG_OUT[s-kill]}")"
	note "writes are flowing; now: kill -9 b's xferd"
	kill_xferd b
	bg_wait s-kill 90
	rc=$?
	sed 's/^/    | /' "${BG_OUT[s-kill]}" | tail -n 12
	[ $rc -ne 124 ] || fail "the stream still runs 90 s after b's xferd was killed"
	[ $rc -eq 0 ] || fail "the writes did not all end in time with a link's error (exit $rc)"

	step "a survived: it answers and marks b down"
	xferd_running a || fail "a's xferd died"
	xferctl_on a status >/dev/null || fail "a does not answer xferctl status"
	wait_for 20 no_link_up a b || fail "a still shows its link to b up"
	note "a answers xferctl status and shows b down"
	bg_wait t 30
	rc=$?
	[ $rc -ne 124 ] || fail "b's client still waits 30 s after its xferd died"
	bg_has t '^FAIL: xferd went away' ||
		fail "b's client did not learn that its xferd went away"
	note "b's client noticed its xferd died and exited"

	step "b restarts (a new instance): a's next write reaches it on rdma"
	start_xferd b "${TIMING[@]}"
	serve_start b t2 --name t --size $((32 * MiB)) --kind memfd \
		--expect-notify "5:55:4097:$((3 * MiB))"
	old=$(grep -o 'instance=[0-9a-f]*' "${BG_OUT[t]}" | head -n 1)
	new=$(grep -o 'instance=[0-9a-f]*' "${BG_OUT[t2]}" | head -n 1)
	if [ -z "$old" ] || [ "$old" = "$new" ]; then
		fail "the restarted xferd has the same instance ($old, $new)"
	fi
	xnode_ok a write --lookup "$(addr b)/t" --size $((3 * MiB)) --offset 4097 --seed 55 \
		--kind memfd --notify 5 --timeout-ms 10000 --expect-path rdma
	expect_notified t2 5
	xnode_ok a read --lookup "$(addr b)/t" --size $((3 * MiB)) --offset 4097 --seed 55 \
		--kind memfd --timeout-ms 10000 --expect-path rdma
	step "a token of the dead instance fails, in time"
	XNODE_SECS=40 xnode_ok a write --token-file "$TMP/t-old.tok" --size $MiB \
		--seed 66 --kind memfd --timeout-ms 3000 --expect-error any
	serve_stop t2
	stop_xferd a
	stop_xferd b
}

# --- staged ------------------------------------------------------------------

part_staged() {
	local REGION=$((80 * MiB)) VEC_N=1000 VEC_LEN=$((1000 * 4096))
	local VEC_OFF=$((70 * MiB))
	local CASES=("1@3" "4097@4099" "$((MiB + 7))@12345"
		"$((64 * MiB))@$((2 * MiB + 1))")
	local exp=() i size off v seed ops

	start_xferd b
	start_xferd a
	xferd_log_has a 'RDMA staging buffers' ||
		fail "a made no staging buffers: $(xferd_log a | grep RDMA)"
	for i in "${!CASES[@]}"; do
		exp+=(--expect-notify "$((300 + i)):$((3000 + i)):${CASES[i]#*@}:${CASES[i]%@*}")
	done
	step "target: memfd region of $REGION bytes on b; sources xfer_reg'd on a"
	serve_start b t --name t --size $REGION --kind memfd "${exp[@]}"
	for i in "${!CASES[@]}"; do
		size=${CASES[i]%@*} off=${CASES[i]#*@}
		v=$((300 + i)) seed=$((3000 + i))
		step "$size bytes at offset $off: a (malloc) -> b, then read back"
		xnode_ok a write --lookup "$(addr b)/t" --size "$size" --offset "$off" \
			--seed $seed --kind malloc --notify $v --expect-path rdma-staged
		expect_notified t $v
		xnode_ok a read --lookup "$(addr b)/t" --size "$size" --offset "$off" \
			--seed $seed --kind malloc --expect-path rdma-staged
	done
	step "$VEC_N blocks from malloc'd memory as one prepared-list descriptor"
	xnode_ok a write --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_OFF \
		--vector $VEC_N --dlist --seed 3011 --kind malloc --expect-path rdma-staged
	xnode_ok a read --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_OFF \
		--vector $VEC_N --dlist --seed 3011 --kind malloc --expect-path rdma-staged
	step "$VEC_N independent descriptors from malloc'd memory"
	xnode_ok a write --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_OFF \
		--vector $VEC_N --seed 3010 --kind malloc --expect-path rdma-staged
	grep -q "^wrote $VEC_N op(s), " "$LAST_OUT" || fail "not $VEC_N completions"
	xnode_ok a read --lookup "$(addr b)/t" --size $VEC_LEN --offset $VEC_OFF \
		--vector $VEC_N --seed 3010 --kind malloc --expect-path rdma-staged
	serve_stop t

	step "the other direction: b (malloc) -> a, 1 MiB+7 at offset 5, read back"
	serve_start a t-a --name t-a --size $((2 * MiB)) --kind memfd \
		--expect-notify "400:4000:5:$((MiB + 7))"
	xnode_ok b write --lookup "$(addr a)/t-a" --size $((MiB + 7)) --offset 5 \
		--seed 4000 --kind malloc --notify 400 --expect-path rdma-staged
	expect_notified t-a 400
	xnode_ok b read --lookup "$(addr a)/t-a" --size $((MiB + 7)) --offset 5 \
		--seed 4000 --kind malloc --expect-path rdma-staged
	serve_stop t-a

	ops=$(status_path_ops a rdma-staged)
	[ "$ops" -gt 0 ] || fail "a's status counts no rdma-staged ops: $(xferctl_on a --json status)"
	note "a counts $ops rdma-staged op(s), b $(status_path_ops b rdma-staged)"
	stop_xferd a
	stop_xferd b
	for n in a b; do
		xferd_log_has $n 'staging: all [0-9]* chunks back at exit' ||
			fail "$n: staging chunks not all back: $(xferd_log $n | grep 'staging:')"
	done
}

# --- owner_staged ------------------------------------------------------------

part_owner_staged() {
	local KiB=1024
	local C=$((256 * KiB)) REGION=$((24 * MiB)) i size off v seed kind
	local CASES=("1@3" "$((C - 1))@4097" "$C@$((C + 5))" "$((C + 1))@12345"
		"$((9 * MiB + 3))@$((2 * MiB + 1))")
	local exp=()

	# Lending is on by default, each peer from a pool of its own
	# (doc/security.md, "Landing chunks").
	start_xferd b
	start_xferd a
	xferd_log_has b 'RDMA landing chunks' ||
		fail "b lends no landing chunks: $(xferd_log b | grep RDMA)"
	[ "$(landing_pools b)" = 0 ] || fail "b has a landing pool before any stream"
	for i in "${!CASES[@]}"; do
		exp+=(--expect-notify "$((700 + i)):$((7000 + i)):${CASES[i]#*@}:${CASES[i]%@*}")
	done
	step "target: xfer_reg'd (malloc) region of $REGION bytes on b"
	serve_start b t --name t --size $REGION --kind malloc "${exp[@]}"
	for i in "${!CASES[@]}"; do
		size=${CASES[i]%@*} off=${CASES[i]#*@}
		v=$((700 + i)) seed=$((7000 + i))
		kind=memfd
		[ $((i % 2)) -eq 1 ] && kind=malloc
		step "$size bytes at offset $off: a ($kind) -> b's CMA memory, read back"
		xnode_ok a write --lookup "$(addr b)/t" --size "$size" --offset "$off" \
			--seed $seed --kind $kind --notify $v --expect-path rdma-staged
		expect_notified t $v
		xnode_ok a read --lookup "$(addr b)/t" --size "$size" --offset "$off" \
			--seed $seed --kind $kind --expect-path rdma-staged
	done
	xferd_log_has b 'landing pool for .* made' ||
		fail "b made no landing pool for a: $(xferd_log b | grep -i landing)"
	[ "$(landing_pools b)" = 1 ] ||
		fail "b does not show one landing pool: $(xferctl_on b --json status)"
	note "b: $(xferctl_on b status | grep 'staging landing')"
	step "200 blocks as one prepared-list descriptor into b's CMA memory"
	xnode_ok a write --lookup "$(addr b)/t" --size $((200 * 4096)) \
		--offset $((16 * MiB)) --vector 200 --dlist --seed 7100 --kind memfd \
		--expect-path rdma-staged
	xnode_ok a read --lookup "$(addr b)/t" --size $((200 * 4096)) \
		--offset $((16 * MiB)) --vector 200 --dlist --seed 7100 --kind memfd \
		--expect-path rdma-staged

	step "a's client killed (SIGKILL) in the middle of a stream of writes"
	bg_start w-kill "$XNODE" write --socket "${XD_SOCK[a]}" --lookup "$(addr b)/t" \
		--size $((16 * MiB)) --seed 7200 --kind malloc --repeat 200 --depth 4 \
		--expect-path rdma-staged
	bg_wait_line w-kill '^op=2 result=16777216 ' 120
	bg_stop w-kill KILL
	note "killed; b must take every chunk it lent back"
	# a gives its streams up (LandAbort); each chunk b lent comes back
	# with the Landed of the piece on the wire or of the unused grant.
	for i in $(seq 50); do
		xferd_log b | grep -q 'landing stream [0-9]* given up' && break
		sleep 0.2
	done
	xferd_log_has b 'landing stream [0-9]* given up' ||
		fail "b saw no landing stream given up after a's client was killed"
	xnode_ok a write --lookup "$(addr b)/t" --size $((3 * MiB + 1)) --offset 7 \
		--seed 7300 --kind memfd --expect-path rdma-staged
	xnode_ok a read --lookup "$(addr b)/t" --size $((3 * MiB + 1)) --offset 7 \
		--seed 7300 --kind memfd --expect-path rdma-staged
	serve_stop t
	[ "$(status_path_ops a tcp)" -eq 0 ] ||
		fail "a moved bytes over tcp: $(xferctl_on a --json status)"
	# Every chunk b lent came back while the link was up: none is left
	# for a's going (peer down) or b's exit to take back.  a's pool goes
	# with a's link.
	stop_xferd a
	for i in $(seq 100); do
		[ "$(landing_pools b)" = 0 ] && break
		sleep 0.2
	done
	[ "$(landing_pools b)" = 0 ] ||
		fail "b kept a's landing pool after a went: $(xferctl_on b --json status)"
	xferd_log_has b 'landing pool for .* freed \(its peer went\)' ||
		fail "b did not free a's landing pool: $(xferd_log b | grep -i landing)"
	note "b: $(xferctl_on b status | grep 'staging landing')"
	stop_xferd b
	! xferd_log b | grep -E 'lent to a peer that went|still lent at exit|kept a landing chunk' ||
		fail "b's landing chunks did not all come back from a"
	for n in a b; do
		xferd_log_has $n 'staging: all [0-9]* chunks back at exit' ||
			fail "$n: staging chunks not all back: $(xferd_log $n | grep -E 'staging:|landing')"
	done
}

# --- adaptive ----------------------------------------------------------------

part_adaptive() {
	local big=$((12 * MiB + 5)) big_off=$((8 * MiB + 1))

	start_xferd b
	G_XFERD_WRAP=(env XFERD_TEST_REG_DELAY_MS=2000)
	start_xferd a rdma_register=background
	G_XFERD_WRAP=()
	serve_start b t --name t --size $((32 * MiB)) --kind memfd \
		--expect-notify "600:6000:3:$((MiB + 7))" \
		--expect-notify "601:6001:$big_off:$big"
	step "a write from a region whose registration is pending: staged"
	xnode_ok a write --lookup "$(addr b)/t" --size $((MiB + 7)) --offset 3 \
		--seed 6000 --kind memfd --notify 600 --expect-path rdma-staged
	expect_notified t 600
	step "reads every 100 ms from one region: staged, zero-copy once registered"
	xnode_ok a read --lookup "$(addr b)/t" --size $((MiB + 7)) --offset 3 \
		--seed 6000 --kind memfd --repeat 40 --interval-ms 100 \
		--expect-paths rdma-staged,rdma
	note "$(grep -c 'path=rdma-staged ' "$LAST_OUT") read(s) staged, then" \
		"$(grep -c 'path=rdma ' "$LAST_OUT") zero-copy"
	stop_xferd a

	step "a without CAP_IPC_LOCK, memlock 16 MiB: registration fails, staged"
	G_XFERD_WRAP=(prlimit --memlock=$((16 * MiB)) setpriv --bounding-set=-ipc_lock)
	start_xferd a
	G_XFERD_WRAP=()
	xferd_log_has a 'RDMA staging buffers' ||
		fail "a made no staging buffers: $(xferd_log a | grep RDMA)"
	xnode_ok a write --lookup "$(addr b)/t" --size $big --offset $big_off \
		--seed 6001 --kind memfd --notify 601 --expect-path rdma-staged
	expect_notified t 601
	xnode_ok a read --lookup "$(addr b)/t" --size $big --offset $big_off \
		--seed 6001 --kind memfd --expect-path rdma-staged
	[ "$(xferd_log a | grep -c 'not registered with the RDMA NICs')" -ge 1 ] ||
		fail "no log line for the failed registration"
	note "$(xferd_log a | grep -m1 'not registered with the RDMA NICs')"
	serve_stop t
	stop_xferd a
	stop_xferd b
}

# --- ranges ------------------------------------------------------------------

# grants NODE [FIELD]: the token ranges NODE granted now (FIELD grants) or
# since start (grants_made), over its rails' devices (one in this guest).
grants() {
	local out
	out=$(xferctl_on "$1" --json rails) || return 1
	jq -r --arg f "${2:-grants}" '[.rails[] | {(.device): .[$f]}] | add |
		[.[]] | add // 0' <<<"$out"
}
grants_are() { [ "$(grants "$1")" = "$2" ]; }
grants_at_least() { [ "$(grants "$1")" -ge "$2" ] 2>/dev/null; }

part_ranges() {
	local shift made0 out
	start_xferd b
	out=$(rails_json b)
	jq -e '.rails | length > 0 and all(.token_ranges == "token-mr")' \
		<<<"$out" >/dev/null || fail "b's rails do not say token-mr: $out"
	note "b's rails: $(jq -c '[.rails[] | {device, token_ranges, windows,
		grants}]' <<<"$out")"
	step "a token for [1 MiB, +2 MiB) of b's 4 MiB region (seed 9)"
	serve_start b r1 --name r1 --size $((4 * MiB)) --kind memfd --seed 9 \
		--export-range "$MiB:$((2 * MiB))" --verify-unchanged
	# The token's first 4 KiB, as a checks it; what b's NIC sees: the
	# 4 KiB just past the range's end, then the page before its start.
	for shift in $((2 * MiB)) -4096; do
		step "a sends every RDMA address moved by $shift bytes"
		G_XFERD_WRAP=(env "XFERD_TEST_RDMA_SHIFT=$shift")
		start_xferd a
		G_XFERD_WRAP=()
		made0=$(grants b grants_made)
		xnode_ok a write --lookup "$(addr b)/r1" --size 4096 --seed 10 \
			--kind memfd --expect-error EIO
		xnode_ok a read --lookup "$(addr b)/r1" --size 4096 --seed 10 \
			--kind memfd --expect-error EIO
		[ "$(grants b grants_made)" -ge $((made0 + 2)) ] ||
			fail "b made no grant for a's imports: $(rails_json b)"
		xferd_log_has a 'RDMA: (WRITE|READ) on QP .*remote access error' ||
			fail "a logged no remote access error: $(xferd_log a | grep 'RDMA:')"
		note "$(xferd_log a | grep -m1 -E 'RDMA: (WRITE|READ) on QP')"
		xferd_running a || fail "a's xferd died"
		xferd_running b || fail "b's xferd died"
		xferctl_on b status >/dev/null || fail "b does not answer xferctl status"
		# a's clients are gone: their imports, and b's grants, end.
		wait_for 30 grants_are b 0 ||
			fail "b still grants $(grants b) range(s) after a's clients left"
		note "b granted $(($(grants b grants_made) - made0)) range(s), all ended"
		stop_xferd a
	done
	serve_stop r1
	note "b's region is unchanged, inside and outside the token's range"

	step "a without the hook: inside the range, rdma, verified"
	start_xferd a
	# xnode's byte rule goes by region offset: this range starts at 0.
	serve_start b r2 --name r2 --size $((4 * MiB)) --kind memfd \
		--export-range "0:$((2 * MiB))" \
		--expect-notify "7:77:$((2 * MiB - 4096)):4096"
	xnode_ok a write --lookup "$(addr b)/r2" --offset $((2 * MiB - 4096)) \
		--size 4096 --seed 77 --kind memfd --notify 7 --expect-path rdma
	expect_notified r2 7
	xnode_ok a read --lookup "$(addr b)/r2" --offset $((2 * MiB - 4096)) \
		--size 4096 --seed 77 --kind memfd --expect-path rdma

	step "a grant ends with its link: a's xferd killed under a stream"
	bg_start st "$XNODE" stream --socket "${XD_SOCK[a]}" --lookup "$(addr b)/r2" \
		--size 4096 --seed 78 --kind memfd --depth 1 --until-error \
		--max-ms 60000 --expect-error any
	bg_wait_line st '^streaming: first write ok' 60
	grants_at_least b 1 || fail "b grants nothing to a's streaming client"
	kill_xferd a
	wait_for 30 grants_are b 0 ||
		fail "b still grants $(grants b) range(s) after a's xferd died"
	note "b's grants ended with the link"
	bg_wait st 60 >/dev/null
	serve_stop r2
	stop_xferd b
}

# --- fallback ----------------------------------------------------------------

part_fallback() {
	local out
	start_xferd b rdma=off
	start_xferd a
	out=$(rails_json b)
	note "b's rails (rdma=off): $out"
	jq -e '.rails | length == 0' <<<"$out" >/dev/null || fail "b lists rails with rdma=off"

	serve_start b t --name t --size $((8 * MiB)) --kind memfd \
		--expect-notify "1:11:3:$((MiB + 7))" --expect-notify "2:12:$((2 * MiB + 5)):4096"
	serve_start a t-a --name t-a --size $((4 * MiB)) --kind memfd \
		--expect-notify "3:13:7:$((MiB + 7))"
	step "a (rdma on) -> b (rdma=off): tcp"
	xnode_ok a write --lookup "$(addr b)/t" --size $((MiB + 7)) --offset 3 --seed 11 \
		--kind memfd --notify 1 --expect-path tcp
	expect_notified t 1
	xnode_ok a read --lookup "$(addr b)/t" --size $((MiB + 7)) --offset 3 --seed 11 \
		--kind memfd --expect-path tcp
	xnode_ok a write --lookup "$(addr b)/t" --size 4096 --offset $((2 * MiB + 5)) \
		--seed 12 --kind memfd --notify 2 --expect-path tcp
	expect_notified t 2
	step "b (rdma=off) -> a (rdma on): tcp"
	xnode_ok b write --lookup "$(addr a)/t-a" --size $((MiB + 7)) --offset 7 --seed 13 \
		--kind memfd --notify 3 --expect-path tcp
	expect_notified t-a 3
	xnode_ok b read --lookup "$(addr a)/t-a" --size $((MiB + 7)) --offset 7 --seed 13 \
		--kind memfd --expect-path tcp
	serve_stop t
	serve_stop t-a
	[ "$(status_path_ops a rdma)" = 0 ] || fail "a counts rdma ops toward an rdma=off peer"
	[ "$(status_path_ops a tcp)" -gt 0 ] || fail "a counts no tcp ops"
	note "a counts $(status_path_ops a tcp) tcp op(s) and no rdma op"
	! xferd_log_has a 'RDMA: b reached over' ||
		fail "a reached b over a rail: $(xferd_log a | grep 'RDMA: b reached over')"
	stop_xferd a
	stop_xferd b
}

# --- classes -----------------------------------------------------------------

part_classes() {
	local N=64 lat_sub lat_done ahead passed
	start_xferd b
	start_xferd a rdma_bulk_depth=2 rdma_stripe=16K
	serve_start b t --name t --size $((8 * MiB)) --kind memfd
	step "a's queue pairs toward b opened"
	xnode_ok a write --lookup "$(addr b)/t" --size 4096 --offset $((6 * MiB)) \
		--seed 30 --kind memfd --expect-path rdma
	step "a latency write among $N queued bulk writes of 1 MiB (bulk depth 2)"
	bg_start bulk "$XNODE" write --socket "${XD_SOCK[a]}" \
		--lookup "$(addr b)/t" --size "$MiB" --offset 0 --seed 31 \
		--kind memfd --class bulk --repeat $N --depth $N --expect-path rdma \
		--timeout-ms 120000
	bg_wait_line bulk "^submitted op=$N " 120
	bg_start lat "$XNODE" write --socket "${XD_SOCK[a]}" \
		--lookup "$(addr b)/t" --size 65536 --offset $((4 * MiB)) --seed 32 \
		--kind memfd --class latency --repeat 1 --expect-path rdma \
		--timeout-ms 120000
	bg_wait lat 200 || fail "the latency write failed: $(tail -n 3 "$TMP/bg-lat.out")"
	bg_wait bulk 200 || fail "the bulk writes failed: $(tail -n 3 "$TMP/bg-bulk.out")"
	[ "$(grep -c '^op=.* result=1048576 path=rdma ' "$TMP/bg-bulk.out")" = $N ] ||
		fail "not $N bulk writes of 1 MiB on rdma"
	lat_sub=$(sed -n 's/^op=1 result=65536 path=rdma submit_us=\([0-9]*\) .*/\1/p' "$TMP/bg-lat.out")
	lat_done=$(sed -n 's/^op=1 result=65536 path=rdma .*complete_us=\([0-9]*\).*/\1/p' "$TMP/bg-lat.out")
	[ -n "$lat_sub" ] && [ -n "$lat_done" ] || fail "no latency completion on rdma"
	# Bulk writes submitted before the latency one and still out then;
	# of those, the ones that ended after it.
	read -r ahead passed < <(awk -v s="$lat_sub" -v d="$lat_done" '
		/^op=/ { for (i = 1; i <= NF; i++) { split($i, kv, "=")
			if (kv[1] == "submit_us") su = kv[2]
			if (kv[1] == "complete_us") cu = kv[2] }
		  if (su < s && cu > s) { a++; if (cu > d) p++ } }
		END { print a + 0, p + 0 }' "$TMP/bg-bulk.out")
	note "$ahead bulk writes were out when the latency write was submitted; $passed of them ended after it"
	[ "$ahead" -ge 8 ] || fail "only $ahead bulk writes were queued ahead: nothing to tell"
	[ $((passed * 2)) -gt "$ahead" ] ||
		fail "the latency write waited behind most bulk writes: $passed of $ahead ended after it"
	xnode_ok a read --lookup "$(addr b)/t" --size "$MiB" --offset 0 --seed 31 \
		--kind memfd --expect-path rdma
	xnode_ok a read --lookup "$(addr b)/t" --size 65536 --offset $((4 * MiB)) \
		--seed 32 --kind memfd --expect-path rdma
	serve_stop t
	stop_xferd a
	stop_xferd b
}

# --- tenants -----------------------------------------------------------------

# as_uid UID CMD...: CMD as a plain numeric uid (no user entry needed).
as_uid() {
	local uid=$1
	shift
	setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
}

# stamps TAG FIELD: FIELD (submit_us, complete_us) of each op of bg TAG.
stamps() {
	sed -n "s/^op=.* $2=\([0-9]*\).*/\1/p" "$TMP/bg-$1.out"
}

# tenant_stat NODE TENANT JQ: JQ of TENANT's entry in NODE's stats.
tenant_stat() {
	local out
	out=$(xferctl_on "$1" --json stats) || fail "xferctl stats on $1"
	jq -r --arg t "$2" "[.tenants[] | select(.name == \$t) | $3] | add // 0" <<<"$out"
}

part_tenants() {
	local N=16 h_sub h_end l_end h l w paced
	command -v setpriv >/dev/null || skip "setpriv missing (util-linux)"
	start_xferd b
	start_xferd a rdma_bulk_depth=2 rdma_stripe=16K \
		"tenant=heavy weight=3 uid=1001" "tenant=light weight=1 uid=1002" \
		"tenant=capped uid=1003 rate=1M"
	# Clients of other users (the tenants) reach a's socket.
	chmod 0755 "$TMP"
	chmod 0666 "${XD_SOCK[a]}"
	serve_start b t --name t --size $((8 * MiB)) --kind memfd
	step "a's queue pairs toward b opened"
	xnode_ok a write --lookup "$(addr b)/t" --size 4096 --offset $((6 * MiB)) \
		--seed 40 --kind memfd --expect-path rdma
	# light keeps 2N writes queued, 10N in all: it still has writes
	# waiting when heavy's all ended, whatever heavy's start-up took.
	step "light (weight 1) keeps $((2 * N)) bulk writes of 1 MiB queued, then heavy (weight 3) queues $N"
	bg_start light as_uid 1002 "$XNODE" write --socket "${XD_SOCK[a]}" \
		--lookup "$(addr b)/t" --size "$MiB" --offset 0 --seed 41 \
		--kind memfd --class bulk --repeat $((10 * N)) --depth $((2 * N)) \
		--expect-path rdma --timeout-ms 200000
	bg_wait_line light "^submitted op=$((2 * N)) " 120
	bg_start heavy as_uid 1001 "$XNODE" write --socket "${XD_SOCK[a]}" \
		--lookup "$(addr b)/t" --size "$MiB" --offset $((2 * MiB)) --seed 42 \
		--kind memfd --class bulk --repeat $N --depth $N --expect-path rdma \
		--timeout-ms 200000
	bg_wait heavy 300 || fail "heavy's writes failed: $(tail -n 3 "$TMP/bg-heavy.out")"
	bg_wait light 300 || fail "light's writes failed: $(tail -n 3 "$TMP/bg-light.out")"
	[ "$(grep -c '^op=.* result=1048576 path=rdma ' "$TMP/bg-heavy.out")" = $N ] ||
		fail "not $N writes of 1 MiB on rdma by heavy"
	[ "$(grep -c '^op=.* result=1048576 path=rdma ' "$TMP/bg-light.out")" = $((10 * N)) ] ||
		fail "not $((10 * N)) writes of 1 MiB on rdma by light"
	h_sub=$(stamps heavy submit_us | sort -n | head -n 1)
	h_end=$(stamps heavy complete_us | sort -n | tail -n 1)
	l_end=$(stamps light complete_us | sort -n | tail -n 1)
	[ -n "$h_sub" ] && [ -n "$h_end" ] && [ -n "$l_end" ] || fail "no stamps"
	h=$N
	l=$(stamps light complete_us | awk -v s="$h_sub" -v e="$h_end" \
		'$1 > s && $1 <= e { n++ } END { print n + 0 }')
	note "light's writes ending while heavy's $N ran: $l; light's last ended $((l_end - h_end)) us after heavy's"
	[ "$h_end" -lt "$l_end" ] ||
		fail "heavy (weight 3) ended after light, which came first: arrival order, not shares"
	[ "$l" -ge 1 ] || fail "light made no progress while heavy ran"
	[ $((l * 3)) -le $((h * 2)) ] ||
		fail "light got $l writes to heavy's $h: not near 1:3"
	w=$(tenant_stat a heavy '(.wait | add)')
	[ "$w" -ge "$N" ] || fail "a counts $w waits of heavy's RDMA writes, not $N"
	xnode_ok a read --lookup "$(addr b)/t" --size "$MiB" --offset 0 --seed 41 \
		--kind memfd --expect-path rdma
	xnode_ok a read --lookup "$(addr b)/t" --size "$MiB" --offset $((2 * MiB)) \
		--seed 42 --kind memfd --expect-path rdma
	step "a capped tenant (1 MiB a second) is paced, not failed"
	as_uid 1003 "$XNODE" write --socket "${XD_SOCK[a]}" \
		--lookup "$(addr b)/t" --size "$MiB" --offset $((4 * MiB)) --seed 43 \
		--kind memfd --class bulk --repeat 4 --expect-path rdma \
		--timeout-ms 60000 >"$TMP/capped.out" 2>&1 ||
		fail "the capped tenant's writes failed: $(tail -n 3 "$TMP/capped.out")"
	[ "$(grep -c '^op=.* result=1048576 path=rdma ' "$TMP/capped.out")" = 4 ] ||
		fail "not 4 writes of 1 MiB on rdma by capped"
	paced=$(tenant_stat a capped .paced)
	note "capped: paced $paced times"
	[ "$paced" -gt 0 ] || fail "the capped tenant was never paced"
	xnode_ok a read --lookup "$(addr b)/t" --size "$MiB" --offset $((4 * MiB)) \
		--seed 43 --kind memfd --expect-path rdma
	serve_stop t
	stop_xferd a
	stop_xferd b
}

for part; do
	case $part in
	data | stripe | errors | peer_death | fallback | staged | adaptive | ranges | owner_staged | classes | tenants) "part_$part" ;;
	*) fail "unknown part '$part'" ;;
	esac
done
echo "pass: $* ($G_SETUP setup, $(_g_elapsed))"
