#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_names.sh - names across nodes: uids mean nothing between nodes,
# so another node only ever resolves a name its publisher shared
# (XFER_PUBLISH_SHARED); a private name never leaves its xferd.
#
# Two nodes (namespaces a and b on 10.0.1.0/24), a with b as its
# configured peer; sockets open to every uid, clients run as plain
# numeric uids through setpriv (the same numbers on both nodes: a uid
# of b is still not a uid of a).  On b, uid U publishes "priv" (private)
# and "pub" (shared).  From a, as the same uid U:
#  - "priv", "b/priv" and "b/~U/priv" are -ENOENT (never answered);
#  - "pub", "b/pub" and "b/~U/pub" resolve and a write lands in b's
#    region (verified when notified); "b/~V/pub" (another uid) -ENOENT;
#  - on a, uid S shares "kv2": uid U's bare "kv2" on a is -ENOENT (a bare
#    name is never another local user's, shared or not, and b has none);
#  - a bystander (uid Y) keeps reading its own shared name on b back,
#    verified, through all of it.
# Both xferds stop cleanly.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

command -v setpriv >/dev/null || skip "setpriv missing (util-linux)"
U=62101 V=62102 S=62103 Y=62104
MiB=1048576
# The clients reach the sockets through their directory.
chmod 0755 "$TMP"


topo_two
start_xferd b b 10.0.1.2
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474
chmod 0666 "${XD_SOCK[a]}" "${XD_SOCK[b]}"
node_uid a "$U"
"${ND_ENTER[@]}" test -x "$XNODE" ||
	skip "$XNODE cannot be run by uid $U (a directory's mode?)"

step "bystander (uid $Y): its shared name on b, read back from a all along"
serve_as b "$Y" by --name by --size $MiB --seed 77
node_uid a "$Y"
_nd_bg_start by-read "${ND_ENTER[@]}" "$XNODE" read --socket "${XD_SOCK[a]}" \
	--lookup b/by --size $MiB --seed 77 --repeat 0 --interval-ms 5
bg_wait_line by-read '^read: ' 60

step "uid $U on b: 'priv' private, 'pub' shared"
serve_as b "$U" priv --name priv --private --size $MiB --seed 41 \
	--verify-unchanged
serve_as b "$U" pub --name pub --size $MiB \
	--expect-notify "1:51:0:300000" --expect-notify "2:52:$((MiB / 2)):4096"

step "from a, as uid $U: the private name is not answered"
no_such a "$U" priv
no_such a "$U" b/priv
no_such a "$U" "b/~$U/priv"

step "from a: the shared name resolves, and the bytes land in b's region"
xnode_as_ok a "$U" write --lookup pub --size 300000 --seed 51 --notify 1 \
	--expect-path tcp
expect_notified pub 1
xnode_as_ok a "$U" write --lookup "b/~$U/pub" --size 4096 \
	--offset $((MiB / 2)) --seed 52 --notify 2 --expect-path tcp
expect_notified pub 2
xnode_as_ok a "$V" read --lookup b/pub --size 300000 --seed 51 \
	--expect-path tcp
no_such a "$U" "b/~$V/pub"

step "on a, uid $S shares 'kv2': uid $U's bare 'kv2' does not find it"
serve_as a "$S" kv2 --name kv2 --size $MiB --seed 61 --verify-unchanged
no_such a "$U" kv2
no_such b "$U" kv2
xnode_as_ok a "$U" lookup --lookup "~$S/kv2"

step "everyone stops; the private region was never touched"
reader_verified by-read
for tag in priv kv2; do
	serve_stop "$tag"
	bg_has "$tag" '^region unchanged' || fail "$tag: its region changed"
done
serve_stop pub
serve_stop by
stop_xferd a
stop_xferd b
echo "ok: only shared names cross nodes"
exit 0
