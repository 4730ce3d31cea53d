#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# netns_python.sh - the Python examples across two nodes: namespaces a
# and b on 10.0.1.0/24 (tests/netns/lib.sh), one xferd each.
#
#  - kv_connector.py: the prefill process on b publishes its paged KV
#    cache; the decode process on a looks up "b/NAME", pulls its blocks in
#    one vector read over the link (path tcp) and checks every byte; the
#    prefill exits on decode's notification.
#  - stream.py: the receiver on b, the sender on a, found through each
#    xferd's configured peer; both check the bytes.
#
# Exit 0 pass, 1 fail, 77 skip.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${XFER_BUILD:-$ROOT/build}
PY=/usr/bin/python3
ls "$BUILD"/python/lib/xferd/_core*.so >/dev/null 2>&1 || {
	echo "skip: the Python extension is not built in $BUILD (ASan builds leave it out)"
	exit 77
}
"$PY" -c 'import numpy' 2>/dev/null || { echo "skip: python3-numpy missing"; exit 77; }
# shellcheck source-path=SCRIPTDIR source=../netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"

EX=$ROOT/python/examples
PYENV=(env "PYTHONPATH=$BUILD/python/lib")

topo_two
start_xferd b b 10.0.1.2 peer=10.0.1.1:7474
start_xferd a a 10.0.1.1 peer=10.0.1.2:7474

step "kv_connector: prefill on b, decode on a pulls blocks over the link"
name=kv-py-$$
bg_start prefill b "${PYENV[@]}" "$PY" "$EX/kv_connector.py" --role prefill \
	--socket "$TMP/b.sock" --name "$name"
bg_wait_line prefill "published as" 30
run_on a 60 "${PYENV[@]}" "$PY" "$EX/kv_connector.py" --role decode \
	--socket "$TMP/a.sock" --name "$name" --lookup "b/$name" ||
	fail "decode on a failed"
grep -q "in one batch via tcp" "$LAST_OUT" || fail "decode did not go by tcp"
grep -q "every byte checked: ok" "$LAST_OUT" || fail "decode did not check"
bg_wait prefill 30 || fail "prefill on b failed: $(tail -n 5 "${BG_OUT[prefill]}")"

step "stream: receiver on b, sender on a"
name=stream-py-$$
bg_start rx b "${PYENV[@]}" "$PY" "$EX/stream.py" --role receiver \
	--socket "$TMP/b.sock" --name "$name" --count 300 --size 32768
run_on a 60 "${PYENV[@]}" "$PY" "$EX/stream.py" --role sender \
	--socket "$TMP/a.sock" --name "$name" --count 300 --size 32768 ||
	fail "sender on a failed"
grep -q "read back: ok" "$LAST_OUT" || fail "the sender did not check"
bg_wait rx 30 || fail "receiver on b failed: $(tail -n 5 "${BG_OUT[rx]}")"
grep -q "300 messages of 32768 B checked" "${BG_OUT[rx]}" ||
	fail "the receiver did not check"

stop_xferd a
stop_xferd b
echo "pass"
