#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nixl_harness.sh - NIXL's own plugin harness (transfer_handler.h) against
# the XFERD engine, local agents, DRAM -> DRAM (tests/nixl/harness.cpp),
# on the shared xferd ($XFERD_SOCKET).  Skips under ASan; fails without
# NIXL's tarballs or build.
set -u
. "$(dirname "$0")/../nixl/env.sh"
[ -x "$NIXL_PLUGIN_DIR/xferd_harness" ] ||
	{ echo "FAIL: no $NIXL_PLUGIN_DIR/xferd_harness (make nixl-plugin)"; exit 1; }
exec "$NIXL_PLUGIN_DIR/xferd_harness"
