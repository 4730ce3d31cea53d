#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nixl_agent_netns.sh - NIXL's Python API with backend XFERD between two
# nodes (namespaces a and b, one xferd each, tests/netns/lib.sh), shaped
# like vLLM's NixlConnector (tests/nixl/agent.py): the target on b
# registers its KV blocks and listens on a side channel (TCP), the
# initiator on a connects; they exchange agent metadata and block
# descriptors, the initiator WRITEs blocks into b with a notification
# (which b's agent names "initiator") and READs others back through
# prepped lists and once unprepped; both check every byte, and every
# request of the initiator went over xferd's TCP path (the plugin's debug
# log).  Skips under ASan; fails without NIXL's tarballs or build.
set -u
. "$(dirname "$0")/../nixl/env.sh"
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"
PYPATH=$NIXL_DIR/prefix/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}
AGENT=$ROOT/tests/nixl/agent.py

topo_two
start_xferd b b 10.0.1.2
start_xferd a a 10.0.1.1

# agent_on NODE ROLE: agent.py ROLE in NODE's namespace on NODE's xferd.
agent_on() {
	bg_start "$2" "$1" env XFERD_SOCKET="$TMP/$1.sock" \
		NIXL_PLUGIN_DIR="$NIXL_PLUGIN_DIR" LD_LIBRARY_PATH="$LD_LIBRARY_PATH" \
		PYTHONPATH="$PYPATH" NIXL_LOG_LEVEL=DEBUG \
		/usr/bin/python3 "$AGENT" "$2" 10.0.1.2:7575
}

step "target on b, initiator on a"
agent_on b target
bg_wait_line target "listening on" 30
agent_on a initiator
bg_wait initiator 90 || fail "initiator failed: $(tail -n 20 "$TMP/bg-initiator.out")"
bg_wait target 30 || fail "target failed: $(tail -n 20 "$TMP/bg-target.out")"
bg_has target "notification \[b'cmpl-5b1e7c1d2f0a4b8c9d3e6f7a8b9c0d1e-0:kv-send-w1'\] from initiator, 3 blocks checked" ||
	fail "target: $(tail -n 5 "$TMP/bg-target.out")"
bg_has initiator "READ unprepped: checked" ||
	fail "initiator: $(tail -n 5 "$TMP/bg-initiator.out")"
note "$(grep -h '^target:\|^initiator:' "$TMP/bg-target.out" "$TMP/bg-initiator.out")"

step "every request of the initiator over tcp"
paths=$(grep -o 'bytes via [a-z-]*' "$TMP/bg-initiator.out" | sort | uniq -c)
note "${paths:-no request logged}"
[ -n "$paths" ] && ! grep -v 'via tcp$' <<<"$paths" | grep -q . ||
	fail "requests not all over tcp: $paths"

stop_xferd a
stop_xferd b
echo "PASS"
