#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_etcd_names.sh - metadata = etcd and users' names: etcd holds the
# cluster's shared names only.  Two xferd nodes a, b on one switch
# (10.0.9.1-2, no `peer =` line), a real single-member etcd (10.0.9.10);
# clients run as plain numeric uids through setpriv.
#  - uid U on b publishes "priv" (private) and "pub" (shared): etcd holds
#    names/pub, marked "shared":true, and no names/priv;
#  - from a (uid U, and another uid): "priv" and "b/priv" are -ENOENT,
#    "pub" resolves through etcd and a write lands in b's region
#    (verified when notified);
#  - on b, another uid's bare "pub" is -ENOENT: etcd's record of b's own
#    name does not answer a lookup on b (a local user's name, shared or
#    not, never answers another's bare lookup);
#  - uid S on a sharing "pub" too is -EEXIST (the cluster has one shared
#    namespace); its private "pub" is fine and stays on a;
#  - a record written by hand without "shared" (as a node that predates
#    shared names writes every name) is not resolved;
#  - a bystander (uid Y) reads its own shared name on b back from a,
#    verified, through all of it.
# Every xferd stops cleanly.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../netns/etcd.sh
. "$(dirname "$0")/../netns/etcd.sh"

command -v setpriv >/dev/null || skip "setpriv missing (util-linux)"
U=63101 V=63102 S=63103 Y=63104
MiB=1048576
ETCD_ASK=e
chmod 0755 "$TMP"

etcd_define e 10.0.9.10
star_join a 10.0.9.1/24
star_join b 10.0.9.2/24
etcd_start e
etcd_wait_healthy e
EPS=$(etcd_endpoints e)
for n in a b; do
	xferd_etcd "$n" "$n" "$EPS" 5 etcd_timeout_ms=500 etcd_retry_ms=1500
done
for n in a b; do
	wait_for 20 registered "$n" || fail "xferd $n did not register in etcd"
done
chmod 0666 "${XD_SOCK[a]}" "${XD_SOCK[b]}"
node_uid a "$U"
"${ND_ENTER[@]}" test -x "$XNODE" ||
	skip "$XNODE cannot be run by uid $U (a directory's mode?)"

step "bystander (uid $Y): its shared name on b, read back from a all along"
serve_as b "$Y" by --name by --size $MiB --seed 77
node_uid a "$Y"
_nd_bg_start by-read "${ND_ENTER[@]}" "$XNODE" read --socket "${XD_SOCK[a]}" \
	--lookup by --size $MiB --seed 77 --repeat 0 --interval-ms 5
bg_wait_line by-read '^read: ' 60

step "uid $U on b: 'priv' private, 'pub' shared; etcd holds 'pub' alone"
serve_as b "$U" priv --name priv --private --size $MiB --seed 41 \
	--verify-unchanged
serve_as b "$U" pub --name pub --size $MiB --expect-notify "1:51:0:300000"

step "from a: the private name is not answered, the shared one is"
no_such a "$U" priv
no_such a "$U" b/priv
no_such a "$V" priv
etcdctl_on e get /xferd/names/pub --print-value-only | tee "$TMP/pub.rec" |
	sed 's/^/    | /'
grep -q '"shared":true' "$TMP/pub.rec" || fail "names/pub is not marked shared"
[ "$(etcd_count /xferd/names/priv)" -eq 0 ] || fail "the private name is in etcd"
xnode_as_ok a "$V" write --lookup pub --size 300000 --seed 51 --notify 1 \
	--expect-path tcp
expect_notified pub 1

step "on b, another uid's bare 'pub' is not uid $U's"
no_such b "$V" pub
xnode_as_ok b "$V" lookup --lookup "~$U/pub"

step "uid $S on a: sharing 'pub' too is -EEXIST, a private 'pub' is fine"
_nd_say -- "[a uid $S] xnode serve --name pub (shared): must be -EEXIST"
node_uid a "$S"
run_cmd 60 "${ND_ENTER[@]}" "$XNODE" serve --socket "${XD_SOCK[a]}" \
	--name pub --size 4096
rc=$?
[ $rc -eq 1 ] && grep -q 'xfer_publish(pub): EEXIST' "$LAST_OUT" ||
	fail "sharing a spelling another node shares: exit $rc, want EEXIST"
serve_as a "$S" spub --name pub --private --size $MiB --seed 61 \
	--verify-unchanged
no_such a "$U" "~$S/pub"
etcdctl_on e get /xferd/names/pub --print-value-only | grep -q '"node":"b"' ||
	fail "names/pub is no longer b's"

step "a record without \"shared\" (a node that predates it) is not resolved"
# Root may resolve any uid's name (it could read the memory anyway).
xnode_ok b lookup --lookup "~$Y/by" --token-file "$TMP/by.tok"
tokb64=$(base64 -w0 <"$TMP/by.tok")
inst=$(etcdctl_on e get /xferd/nodes/b --print-value-only | jq -r .instance)
etcdctl_on e put /xferd/names/old-style \
	"{\"v\":1,\"node\":\"b\",\"instance\":\"$inst\",\"token\":\"$tokb64\"}" \
	>/dev/null || fail "put"
no_such a "$U" old-style
etcdctl_on e put /xferd/names/new-style \
	"{\"v\":1,\"node\":\"b\",\"instance\":\"$inst\",\"token\":\"$tokb64\",\"shared\":true}" \
	>/dev/null || fail "put"
xnode_as_ok a "$U" lookup --lookup new-style

step "everyone stops; the private regions were never touched"
reader_verified by-read
for tag in priv spub; do
	serve_stop "$tag"
	bg_has "$tag" '^region unchanged' || fail "$tag: its region changed"
done
serve_stop pub
serve_stop by
stop_xferd a
stop_xferd b
echo "ok: etcd holds shared names only"
exit 0
