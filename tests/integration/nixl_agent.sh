#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nixl_agent.sh - two processes with NIXL's Python API (nixl_agent,
# backend XFERD) on the shared xferd ($XFERD_SOCKET): metadata exchange,
# prepped WRITE with a notification, READs, bytes checked
# (tests/nixl/agent.py).  Debian's python3 with NIXL's cached bindings.
# Skips under ASan; fails without NIXL's tarballs or build.
set -u
. "$(dirname "$0")/../nixl/env.sh"
export PYTHONPATH=$NIXL_DIR/prefix/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}
exec /usr/bin/python3 "$ROOT/tests/nixl/agent.py"
