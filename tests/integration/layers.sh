#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# layers.sh - the daemon's layers point one way: scripts/layers.sh finds
# no include that reaches up a floor, and it does find one when it is
# there (each case puts one bad include into a copy of the sources and
# requires the script to fail and name that file).
#
# Env (from tests/run-tests.sh): XFER_ROOT.  Exit 0 pass, 1 fail.
set -u

ROOT=${XFER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
CHECK=$ROOT/scripts/layers.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

out=$(sh "$CHECK" "$ROOT") || fail "the tree has upward includes:
$out"
echo "ok: no upward include in $ROOT"

# inject FILE INCLUDE: a fresh copy with FILE given one more include;
# the script must fail and name FILE.
inject() {
	rm -rf "$TMP/tree" && mkdir "$TMP/tree" || fail "mkdir"
	(cd "$ROOT" && cp -r common include client daemon "$TMP/tree/") ||
		fail "copying the sources"
	printf '#include "%s"\n' "$2" >> "$TMP/tree/$1" || fail "no $1"
	if out=$(sh "$CHECK" "$TMP/tree"); then
		fail "$1 including $2 passed the check"
	fi
	case $out in
	*"$1:"*) echo "ok: $1 -> $2 refused: $out" ;;
	*) fail "$1 -> $2 failed without naming $1: $out" ;;
	esac
}

inject daemon/mem/staging.h engine/progress.h      # mem -> engine
inject daemon/mem/copy_workers.c local/local.h     # mem -> movers
inject daemon/local/cma.c engine/progress_int.h    # movers -> engine
inject daemon/gpu/copy.c mem/region.h               # gpu -> mem
inject daemon/core/mover.h transport/rdma.h     # core -> movers
inject daemon/transport/rdma.c peer/peer.h          # movers -> peer
inject daemon/engine/exec.c ops/stats.h             # engine -> ops
inject daemon/peer/table.c client.h                 # peer -> front
inject daemon/peer/peer_int.h xferd.h               # peer -> front
inject daemon/meta/cluster.c config.h               # meta -> front
inject daemon/ops/stats.c main.c                    # ops -> main
inject common/wire.c mem/region.h                   # common -> daemon
inject client/ctx.c daemon/core/log.h               # libxfer -> daemon
inject daemon/core/log.c no/such.h                  # unresolvable

# A daemon/ folder the script has no floor for.
rm -rf "$TMP/tree" && mkdir "$TMP/tree" &&
	(cd "$ROOT" && cp -r common include client daemon "$TMP/tree/") &&
	mkdir "$TMP/tree/daemon/newfloor" &&
	echo '#include "core/log.h"' > "$TMP/tree/daemon/newfloor/x.c" ||
	fail "making a new folder"
if out=$(sh "$CHECK" "$TMP/tree"); then
	fail "a folder with no floor passed the check"
fi
echo "ok: a folder with no floor refused: $out"
exit 0
