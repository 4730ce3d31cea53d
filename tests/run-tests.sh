#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run-tests.sh BUILD - every test of `make check`.
#
# 1. the check unit suites;
# 2. one shared xferd on a private socket, then every integration test
#    against it: $BUILD/tests/<prog> (C programs) and
#    tests/integration/*.sh.  A test exits 0 (pass), 77 (skip, says why)
#    or anything else (fail).  Tests that need a daemon of their own (to
#    kill it, or count its fds) start it themselves from $XFERD_BIN;
# 3. the shared xferd must have survived everything and stop cleanly.
set -u
BUILD=${1:-build}
BUILD=$(cd "$BUILD" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d /tmp/xferd-tests.XXXXXX)
PER_TEST_TIMEOUT=${PER_TEST_TIMEOUT:-300}
# The RDMA stage runs everything emulated in qemu guests (about 2-3
# minutes, twice that under ASan): its own bound, which rdma.sh reads as
# PER_TEST_TIMEOUT to share it out between its guests.
RDMA_STAGE_TIMEOUT=${RDMA_STAGE_TIMEOUT:-720}
pass=0 fail=0 skip=0 failed=()
daemon_pid=

cleanup() {
	[ -n "$daemon_pid" ] && kill -9 "$daemon_pid" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

result() { # name rc seconds
	case $2 in
	0) pass=$((pass + 1)); printf 'PASS  %-28s %5ss\n' "$1" "$3" ;;
	77) skip=$((skip + 1)); printf 'SKIP  %-28s %5ss\n' "$1" "$3" ;;
	*) fail=$((fail + 1)); failed+=("$1")
	   printf 'FAIL  %-28s %5ss (exit %s)\n' "$1" "$3" "$2" ;;
	esac
}

run_one() { # name command...
	local name=$1 log="$TMP/$1.log" start rc
	shift
	start=$(date +%s)
	timeout -k 5 "$PER_TEST_TIMEOUT" "$@" >"$log" 2>&1
	rc=$?
	result "$name" $rc $(($(date +%s) - start))
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		sed 's/^/    | /' "$log" | tail -n 40
	elif [ $rc -eq 77 ]; then
		tail -n 1 "$log" | sed 's/^/    | /'
	fi
}

echo "== unit tests"
run_one unit "$BUILD/tests/unit_tests"

echo "== integration tests"
export XFERD_BIN="$BUILD/xferd" XFERCTL_BIN="$BUILD/xferctl" \
	XFERBENCH_BIN="$BUILD/xferbench" XFER_BUILD="$BUILD" XFER_ROOT="$ROOT" \
	XFER_TEST_TOOLS="$BUILD/test-tools"
# As root, every xferd of the run (the shared one, and those tests start
# from $XFERD_BIN) gets exactly the capabilities of the packaged unit:
# $XFERD_BIN becomes a launcher that execs xferd under
# `setpriv --bounding-set` with the list read from systemd/xferd.service
# (tests/lib/unit_caps.sh), so a capability xferd needs and the unit
# lacks fails here.  XFERD_REAL_BIN is the binary itself.
export XFERD_REAL_BIN="$BUILD/xferd"
# shellcheck source=lib/unit_caps.sh
. "$ROOT/tests/lib/unit_caps.sh"
if [ "$(id -u)" = 0 ] && [ -z "${XFER_NO_CAP_BOUND:-}" ]; then
	unit_caps_launcher "$ROOT/systemd/xferd.service" "$XFERD_REAL_BIN" \
		"$TMP/bin/xferd" || { echo "cannot make the capped launcher"; exit 1; }
	export XFERD_BIN="$TMP/bin/xferd" XFERD_CAPS=$(unit_caps "$ROOT/systemd/xferd.service")
	echo "xferd runs with the unit's capabilities only: $XFERD_CAPS"
fi
export XFERD_SOCKET="$TMP/xferd.sock"
# No TCP listener: tests that span nodes start their own daemons.
"$XFERD_BIN" -s "$XFERD_SOCKET" -l debug -o listen=off >"$TMP/xferd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
	[ -S "$XFERD_SOCKET" ] && break
	sleep 0.1
done
if [ ! -S "$XFERD_SOCKET" ]; then
	echo "xferd did not start:"; cat "$TMP/xferd.log"; exit 1
fi

for prog in "$BUILD"/tests/*; do
	name=$(basename "$prog")
	[ -x "$prog" ] && [ "$name" != unit_tests ] || continue
	run_one "$name" "$prog"
done
for script in "$ROOT"/tests/integration/*.sh "$ROOT"/tests/python/*.sh; do
	[ -e "$script" ] || continue
	name=$(basename "$script" .sh)
	if [ "$name" = rdma ]; then
		saved=$PER_TEST_TIMEOUT
		export PER_TEST_TIMEOUT=$RDMA_STAGE_TIMEOUT
		run_one "$name" bash "$script"
		PER_TEST_TIMEOUT=$saved
		continue
	fi
	run_one "$name" bash "$script"
done

echo "== shared xferd after all tests"
if kill -0 "$daemon_pid" 2>/dev/null; then
	kill -TERM "$daemon_pid"
	wait "$daemon_pid"
	rc=$?
	daemon_pid=
	result xferd-clean-exit $rc 0
else
	wait "$daemon_pid"
	result xferd-survived $? 0
	daemon_pid=
fi
if grep -Eq 'AddressSanitizer|runtime error:|LeakSanitizer' "$TMP/xferd.log"; then
	result xferd-sanitizers 1 0
	grep -E -A20 'AddressSanitizer|runtime error:|LeakSanitizer' \
		"$TMP/xferd.log" | head -60
fi
[ $fail -eq 0 ] || { echo "xferd log (tail):"; tail -n 30 "$TMP/xferd.log"; }

echo "== $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
