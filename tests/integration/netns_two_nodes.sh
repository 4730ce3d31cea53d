#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_two_nodes.sh - two nodes (namespaces a and b on 10.0.1.0/24), one
# xferd each, and transfers between them on the TCP path.
#
#  - sizes: write, then read back, 1 B, 4 KiB, 1 MiB+7, 64 MiB and
#    256 MiB at odd offsets, into a memfd target from a malloc'd source
#    and into a malloc'd target from a memfd source.  Every completion
#    says path "tcp" and the bytes moved; the reader checks every byte.
#  - notifications: every write carries one; the target process checks
#    the bytes when the notification arrives, so they must be in place by
#    then (its range started as the complement of what must land); a
#    standalone notify arrives with no data.
#  - 1000 descriptors scattered in reverse order: one linked batch (one
#    completion, one notification), one prepared-list descriptor (one
#    completion, one notification after the last byte) and 1000
#    independent ones (1000 completions), all read
#    back the same way.
#  - publish/lookup: "b/NAME" asks b; a plain "NAME" is found through a's
#    configured peer (-o peer=10.0.1.2:7474); "10.0.1.1:7474/NAME" asks a
#    by address; names nobody published are -ENOENT, and b (no configured
#    peers) does not find a's names without a node.
#  - no head-of-line blocking: a 64 B write, submitted while two 256 MiB
#    writes to the same peer are in flight, completes before one of them
#    that was submitted before it.
#  - notification messages and sender names: a write's, a NOTIFY's, a
#    linked batch's, a read's, of a request id's size and of the bound,
#    arrive with the name the sender gave itself; one byte more is
#    refused;
#  - notifications held: an owner on b reads nothing while 10 000
#    notifications from a arrive (all complete at once for a; b holds
#    what the owner's CQ cannot, xferctl clients shows them), then gets
#    every one, in order, and nothing else.
#  - xferctl status counts the tcp path; both daemons stop cleanly.
#  - start order: a started before its configured peer b still finds b's
#    names once b is up (the peer is connected on use, not only at start).
#  - notify_queue_max on b (100, CQs of 16): a's notifications to an owner
#    that reads nothing complete until 16 + 100 are out, then with
#    -ENOBUFS (b answers, the link stays up); a write with notify past
#    the bound lands its bytes and completes with -ENOBUFS; the owner gets
#    exactly the 116, in order.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

MiB=1048576
REGION=$((257 * MiB))
# size@offset: every size of the brief, offsets chosen so that nothing
# lines up with a page or a chunk; the 256 MiB write comes last because it
# covers the others.
CASES=("1@3" "4096@4096" "$((MiB + 7))@12345" "$((64 * MiB))@$((2 * MiB + 1))"
	"$((256 * MiB))@0")
VEC_N=1000
VEC_LEN=$((VEC_N * 4096))
VEC_LINKED_OFF=$((128 * MiB))
VEC_INDEP_OFF=$((136 * MiB))
PLAIN_OFF=$((256 * MiB + 8192))

topo_two
start_xferd b b 10.0.1.2
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474

for kind in memfd malloc; do
	if [ $kind = memfd ]; then lkind=malloc base=100; else lkind=memfd base=200; fi
	tag=t-$kind
	# notification value v = base + i, seed = 10 * base + i
	exp=()
	for i in "${!CASES[@]}"; do
		size=${CASES[$i]%@*} off=${CASES[$i]#*@}
		exp+=(--expect-notify "$((base + i)):$((10 * base + i)):$off:$size")
	done
	exp+=(--expect-notify "$((base + 10)):$((10 * base + 10)):$VEC_LINKED_OFF:$VEC_LEN")
	exp+=(--expect-notify "$((base + 11))")
	exp+=(--expect-notify "$((base + 14)):$((10 * base + 14)):$VEC_LINKED_OFF:$VEC_LEN")
	[ $kind = memfd ] &&
		exp+=(--expect-notify "$((base + 12)):$((10 * base + 12)):$PLAIN_OFF:4096")

	step "target $kind on b ($REGION bytes), sources $lkind on a"
	serve_start b "$tag" --name "$tag" --size $REGION --kind $kind "${exp[@]}"

	for i in "${!CASES[@]}"; do
		size=${CASES[$i]%@*} off=${CASES[$i]#*@}
		v=$((base + i)) seed=$((10 * base + i))
		step "$kind target: $size bytes at offset $off, a -> b and back"
		xnode_ok a write --lookup "b/$tag" --size "$size" --offset "$off" \
			--seed $seed --kind $lkind --notify $v --expect-path tcp
		expect_notified "$tag" $v
		xnode_ok a read --lookup "b/$tag" --size "$size" --offset "$off" \
			--seed $seed --kind $lkind --expect-path tcp
	done

	step "$kind target: $VEC_N linked descriptors (one batch, one notification)"
	v=$((base + 10)) seed=$((10 * base + 10))
	xnode_ok a write --lookup "b/$tag" --size $VEC_LEN --offset $VEC_LINKED_OFF \
		--vector $VEC_N --linked --seed $seed --kind $lkind --notify $v \
		--expect-path tcp
	grep -q '^wrote 1 op(s), ' "$LAST_OUT" || fail "the linked batch did not complete as one op"
	expect_notified "$tag" $v
	xnode_ok a read --lookup "b/$tag" --size $VEC_LEN --offset $VEC_LINKED_OFF \
		--vector $VEC_N --linked --seed $seed --kind $lkind --expect-path tcp

	step "$kind target: the same $VEC_N blocks as one prepared-list descriptor (one notification, after the last byte)"
	v=$((base + 14)) seed=$((10 * base + 14))
	xnode_ok a write --lookup "b/$tag" --size $VEC_LEN --offset $VEC_LINKED_OFF \
		--vector $VEC_N --dlist --seed $seed --kind $lkind --notify $v \
		--expect-path tcp
	grep -q '^wrote 1 op(s), ' "$LAST_OUT" || fail "the list descriptor did not complete as one op"
	expect_notified "$tag" $v
	xnode_ok a read --lookup "b/$tag" --size $VEC_LEN --offset $VEC_LINKED_OFF \
		--vector $VEC_N --dlist --seed $seed --kind $lkind --expect-path tcp

	step "$kind target: $VEC_N independent descriptors"
	seed=$((10 * base + 13))
	xnode_ok a write --lookup "b/$tag" --size $VEC_LEN --offset $VEC_INDEP_OFF \
		--vector $VEC_N --seed $seed --kind $lkind --expect-path tcp
	grep -q "^wrote $VEC_N op(s), " "$LAST_OUT" || fail "not $VEC_N completions"
	xnode_ok a read --lookup "b/$tag" --size $VEC_LEN --offset $VEC_INDEP_OFF \
		--vector $VEC_N --seed $seed --kind $lkind --expect-path tcp
	grep -q "^read and verified $VEC_N op(s), " "$LAST_OUT" || fail "not $VEC_N completions"

	step "$kind target: a standalone notification"
	xnode_ok a notify --lookup "b/$tag" --notify $((base + 11))
	expect_notified "$tag" $((base + 11))

	if [ $kind = memfd ]; then
		step "plain name: a finds b's '$tag' through its configured peer"
		v=$((base + 12)) seed=$((10 * base + 12))
		xnode_ok a write --lookup "$tag" --size 4096 --offset $PLAIN_OFF \
			--seed $seed --notify $v --expect-path tcp
		expect_notified "$tag" $v
		xnode_ok a read --lookup "$tag" --size 4096 --offset $PLAIN_OFF \
			--seed $seed --expect-path tcp
	fi
	serve_stop "$tag"
done

step "lookup: names nobody published, names of the other node"
xnode_ok a lookup --lookup b/no-such-name --expect-error ENOENT
xnode_ok a lookup --lookup no-such-name --expect-error ENOENT
serve_start a t-a --name t-a --size $MiB --kind memfd \
	--expect-notify "300:3000:5:70000"
xnode_ok b lookup --lookup 10.0.1.1:7474/t-a
# b has no configured peers: a plain name is only looked up locally.
xnode_ok b lookup --lookup t-a --expect-error ENOENT
step "the other direction: b -> a by address"
xnode_ok b write --lookup 10.0.1.1:7474/t-a --size 70000 --offset 5 --seed 3000 \
	--notify 300 --expect-path tcp
expect_notified t-a 300
xnode_ok b read --lookup 10.0.1.1:7474/t-a --size 70000 --offset 5 --seed 3000 \
	--expect-path tcp
serve_stop t-a

step "notification messages and sender names over TCP: a write's, a read's, a NOTIFY's"
# A vLLM-like request id, and one of XFER_NOTIFY_MSG_MAX (256) bytes.
MSG_REQ="cmpl-5b1e7c1d2f0a4b8c9d3e6f7a8b9c0d1e-0:kv-send"
MSG_MAX=$(printf 'm%.0s' $(seq 256))
serve_start b t-msg --name t-msg --size $MiB --kind memfd \
	--expect-notify "401:4010:3:70000" --expect-notify "402" \
	--expect-notify "403:4030:0:8192" \
	--expect-msg "$MSG_REQ" --expect-sender-name "agent a/prefill"
xnode_ok a write --lookup b/t-msg --size 70000 --offset 3 --seed 4010 \
	--notify 401 --notify-msg "$MSG_REQ" --sender-name "agent a/prefill" \
	--expect-path tcp
xnode_ok a notify --lookup b/t-msg --notify 402 --notify-msg "$MSG_REQ" \
	--sender-name "agent a/prefill"
xnode_ok a write --lookup b/t-msg --size 8192 --vector 4 --linked --seed 4030 \
	--notify 403 --notify-msg "$MSG_REQ" --sender-name "agent a/prefill" \
	--expect-path tcp
expect_notified t-msg 401
expect_notified t-msg 402
expect_notified t-msg 403
serve_stop t-msg
serve_start b t-msg2 --name t-msg2 --size 4096 --kind memfd \
	--expect-notify "404" --expect-notify "405" \
	--expect-msg "$MSG_MAX" --expect-sender-name ""
xnode_ok a notify --lookup b/t-msg2 --notify 404 --notify-msg "$MSG_MAX"
xnode_ok a write --lookup b/t-msg2 --size 4096 --seed 4050 --expect-path tcp
xnode_ok a read --lookup b/t-msg2 --size 4096 --seed 4050 --notify 405 \
	--notify-msg "$MSG_MAX" --expect-path tcp
expect_notified t-msg2 404
expect_notified t-msg2 405
xnode a notify --lookup b/t-msg2 --notify 1 --notify-msg "${MSG_MAX}x" &&
	fail "a message of 257 bytes was accepted"
grep -q "xfer_sqe_set_message" "$LAST_OUT" ||
	fail "a message of 257 bytes: $(tail -n 2 "$LAST_OUT")"
serve_stop t-msg2

step "a 64 B write while 256 MiB writes to the same peer are in flight"
serve_start b t-big --name t-big --size $((256 * MiB)) --kind memfd
serve_start b t-small --name t-small --size 4096 --kind memfd \
	--expect-notify "77:777:0:64"
# Two in flight at all times, until SIGTERM.
bg_start big a "$XNODE" write --socket "${XD_SOCK[a]}" --lookup b/t-big \
	--size $((256 * MiB)) --seed 9 --repeat 0 --depth 2 --timeout-ms 120000 \
	--expect-path tcp
bg_wait_line big '^submitted op=2 ' 120
xnode_ok a write --lookup b/t-small --size 64 --seed 777 --notify 77 \
	--expect-path tcp
small=$(grep -E '^op=1 ' "$LAST_OUT")
expect_notified t-small 77
bg_running big || fail "the 256 MiB writer ended early: $(tail -n 3 "${BG_OUT[big]}")"
bg_stop big
rc=$?
sed 's/^/    | /' "${BG_OUT[big]}" | grep -v '^    | submitted' | tail -n 8
[ $rc -eq 0 ] || fail "the 256 MiB writer exited with $rc"
s_sub=$(sed -E 's/.* submit_us=([0-9]+).*/\1/' <<<"$small")
s_done=$(sed -E 's/.* complete_us=([0-9]+).*/\1/' <<<"$small")
[[ $s_sub =~ ^[0-9]+$ && $s_done =~ ^[0-9]+$ ]] || fail "no times for the 64 B write: '$small'"
# A big write submitted before the small one and completed after it.
around=$(awk -v s="$s_sub" -v d="$s_done" '
	/^op=[0-9]+ result=/ {
		for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		if (f["submit_us"] + 0 <= s + 0 && f["complete_us"] + 0 >= d + 0) {
			print f["op"]; exit
		}
	}' "${BG_OUT[big]}")
[ -n "$around" ] || fail "the 64 B write (submitted $s_sub us, done $s_done us) " \
	"waited for the 256 MiB writes: none in flight around it"
note "the 64 B write completed in $(((s_done - s_sub) / 1000)) ms while 256 MiB write $around was in flight"
serve_stop t-small
serve_stop t-big

step "10000 notifications from a to an owner on b that reads nothing meanwhile"
NSEQ=10000
serve_start b seq --name seq --size 4096 --expect-sequence "50000:$NSEQ" \
	--hold-file "$TMP/seq.go"
xnode_ok a notify --lookup b/seq --notify 50000 --repeat $NSEQ --depth 64
grep -q "^notified $NSEQ: $NSEQ accepted, 0 refused" "$LAST_OUT" ||
	fail "a's notifications: $(tail -n 2 "$LAST_OUT")"
out=$(xferctl_on b --json clients) || fail "xferctl clients on b"
jq -e '[.clients[].notify_queued] | add > 0' <<<"$out" >/dev/null ||
	fail "b holds no notifications for the owner: $out"
note "b holds $(jq '[.clients[].notify_queued] | add' <<<"$out") for the owner (its CQ is full)"
touch "$TMP/seq.go"
bg_wait_line seq '^(FAIL|sequence of )' 120
bg_has seq "^sequence of $NSEQ notification\(s\) from 50000 in order" ||
	fail "the owner on b: $(tail -n 3 "${BG_OUT[seq]}")"
serve_stop seq

step "xferctl: the tcp path is counted"
out=$(xferctl_on a --json status) || fail "xferctl status on a"
jq -e '[.paths[] | select(.path == "tcp")] | length == 1 and .[0].ops > 0' \
	<<<"$out" >/dev/null || fail "a's status shows no tcp ops: $out"

step "both daemons stop cleanly"
stop_xferd a
stop_xferd b

step "start order: a starts before its configured peer b, then finds b's names"
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474
start_xferd b b 10.0.1.2
serve_start b late --name late --size 4096 --expect-notify "9:99:0:4096"
xnode_ok a write --lookup b/late --size 4096 --seed 99 --notify 9 --expect-path tcp
expect_notified late 9
xnode_ok a lookup --lookup late
serve_stop late
stop_xferd a
stop_xferd b

step "notify_queue_max 100 on b: past it, a's descriptors get ENOBUFS from b"
start_xferd b b 10.0.1.2 notify_queue_max=100 sq_entries=8
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474
# 16 fit the owner's CQ, 100 are held, the rest are refused.
serve_start b nq --name nq --size 65536 --expect-sequence 60000:116 \
	--hold-file "$TMP/nq.go"
xnode_ok a notify --lookup b/nq --notify 60000 --repeat 150 --depth 8 \
	--expect-error ENOBUFS --accepted 116
xnode_ok a write --lookup b/nq --size 4096 --offset 8192 --seed 61 \
	--notify 61000 --expect-error ENOBUFS --expect-path tcp
note "the write past the bound completed with ENOBUFS; its bytes:"
xnode_ok a read --lookup b/nq --size 4096 --offset 8192 --seed 61 --expect-path tcp
out=$(xferctl_on b --json clients) || fail "xferctl clients on b"
jq -e '[.clients[] | select(.notify_queued > 0)] | length == 1 and
	.[0].notify_queued == 100 and .[0].notify_refused == 35' \
	<<<"$out" >/dev/null || fail "b's clients: $out"
touch "$TMP/nq.go"
bg_wait_line nq '^(FAIL|sequence of )' 60
bg_has nq '^sequence of 116 notification\(s\) from 60000 in order' ||
	fail "the owner on b: $(tail -n 3 "${BG_OUT[nq]}")"
serve_stop nq
stop_xferd a
stop_xferd b
echo "pass: two nodes over TCP"
