#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# demo.sh BUILD - `make demo`: start xferd with its embedded defaults, let
# two client processes exchange verified data through it, show
# `xferctl status`, and stop xferd cleanly.
set -eu
BUILD=${1:-build}
XFERD="$BUILD/xferd" XFERCTL="$BUILD/xferctl" DEMO="$BUILD/xferdemo"

if [ "$(id -u)" = 0 ] || [ -z "${XDG_RUNTIME_DIR:-}" ]; then
	sock=/run/xferd/xferd.sock
else
	sock=$XDG_RUNTIME_DIR/xferd.sock
fi
args=()
# An xferd already serving the default socket (say, the system's) is left
# alone: the demo then runs its own on a private socket.
if "$XFERCTL" --socket "$sock" status >/dev/null 2>&1; then
	dir=$(mktemp -d /tmp/xferd-demo.XXXXXX)
	sock=$dir/xferd.sock
	args=(-s "$sock")
	echo "== an xferd already runs on the default socket; using $sock"
fi
export XFERD_SOCKET=$sock
log=$(mktemp /tmp/xferd-demo-log.XXXXXX)

echo "== starting xferd ${args[*]:-(embedded defaults)}"
"$XFERD" "${args[@]}" 2>"$log" &
pid=$!
cleanup() {
	kill -9 $pid 2>/dev/null || true
	rm -f "$log"
	if [ -n "${dir:-}" ]; then rm -rf "$dir"; fi
	return 0
}
trap cleanup EXIT
for _ in $(seq 100); do
	"$XFERCTL" status >/dev/null 2>&1 && break
	kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
	sleep 0.1
done

echo "== two clients exchange data"
"$DEMO"

echo "== xferctl status"
"$XFERCTL" status

echo "== stopping xferd (SIGTERM)"
kill -TERM $pid
wait $pid
echo "== xferd log"
sed 's/^/   /' "$log"
echo "== demo done: data verified, xferd stopped cleanly"
