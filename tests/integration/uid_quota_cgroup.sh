#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# uid_quota_cgroup.sh - the lists attack of uid_quota.c (one uid, 24
# contexts, lists until refused) with xferd in a 1 GiB memory cgroup
# (v1, /sys/fs/cgroup/memory): xferd must survive it with its default
# limits (dlist_max_uid_bytes), and the bystander keep moving verified
# bytes.  Without a per-uid bound the attacker's 1.5 GiB of lists get
# xferd OOM-killed.
#
# Plain builds only: under ASan xferd's own memory is several times its
# real size and a 1 GiB limit measures nothing.
#
# Env (from tests/run-tests.sh): XFERD_BIN, XFER_BUILD.  Exit 0 pass,
# 1 fail, 77 skip.
set -u

BUILD=${XFER_BUILD:-}
PROG=$BUILD/tests/uid_quota

[ -n "${XFERD_BIN:-}" ] && [ -x "$XFERD_BIN" ] || { echo "skip: XFERD_BIN not set (run through make check)"; exit 77; }
[ -x "$PROG" ] || { echo "skip: $PROG not built"; exit 77; }
case $BUILD in
*build-asan*) echo "skip: an ASan build (a 1 GiB memory limit means nothing under ASan)"; exit 77 ;;
esac
if grep -q libasan "$XFERD_BIN" 2>/dev/null || ldd "$XFERD_BIN" 2>/dev/null | grep -q libasan; then
	echo "skip: $XFERD_BIN is built with ASan"; exit 77
fi
exec "$PROG" --cgroup
