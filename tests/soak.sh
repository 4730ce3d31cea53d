#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# soak.sh BUILD [MINUTES] - the storm of tests/integration/netns_storm.sh
# for MINUTES (default $SOAK_MINUTES, else 30), a summary line a minute,
# then its fault cases and checks as in `make check`.  Not part of check:
# `make soak`.  Exit status: the test's.
set -u
BUILD=$(cd "${1:-build}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MINUTES=${2:-${SOAK_MINUTES:-30}}

export XFERD_BIN="$BUILD/xferd" XFERCTL_BIN="$BUILD/xferctl" \
	XFER_BUILD="$BUILD" XFER_ROOT="$ROOT" XFER_TEST_TOOLS="$BUILD/test-tools"
export STORM_SECS=$((MINUTES * 60)) STORM_REPORT_SECS=60
echo "soak: the storm for $MINUTES minute(s)"
exec bash "$ROOT/tests/integration/netns_storm.sh"
