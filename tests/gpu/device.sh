#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# device.sh - build and run xferd's GPU tests and gpubench on a GPU machine.
#
#   tests/gpu/device.sh pack   here, on a machine with the build
#                              dependencies (make deps): put what a GPU
#                              machine may lack into build/device-carry
#   tests/gpu/device.sh [run]  on the GPU machine, from the repository
#                              root: build xferd, the GPU tests,
#                              gpubench and stagebench, run every
#                              $BUILD/tests/gpu_*, then stagebench (the
#                              GPU stages alone, no xferd) and gpubench
#                              against xferd; print a summary.
#                              It builds xnode too, the client of
#                              bench/bench-classes.sh (NETNS=0 there:
#                              these machines have no iproute2)
#
# Its results are recorded by hand in bench/results/device-results.md
# (BENCHMARKS.md summarises them); the logs stay in BUILD or OUT.
#
# The GPU machines this was written for have nvcc, the CUDA runtime,
# libevent, libibverbs and OpenSSL, but neither protobuf-c (headers,
# library, protoc-c) nor check, and no network to install them.  `pack`
# carries the protobuf-c header and static library and the generated
# protocol code (with the checksums of the .proto files it came from);
# `run` builds with them and needs nothing else.  Unit tests (check) are
# not built there.
#
# Each program gets an xferd of its own; after it, xferd must hold no
# import (xferctl gpus) and stop cleanly.
#
# Environment: XFERD_EXTRA (more xferd options, e.g. "-o copy_workers=2"
# for every single-node xferd), BUILD (default /tmp/xferd-gpu), OUT (logs are copied
# there when set), PER_TEST_TIMEOUT (s, default 240), BENCH=0 skips the
# benchmarks (BENCH=staged runs only the two-node one: gpubench
# --remote-socket between two xferds on loopback; BENCH=stage only
# stagebench), ONLY="gpu_remote
# gpu_host" runs just those tests, ONLY=none builds only; MAKE_EXTRA
# (e.g. "STAGE_STAMPS=1") is passed to make.  Exit status: 0 when every test passed
# or skipped, xferd stopped cleanly and every benchmark target held; 1
# otherwise.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=$ROOT/build/device-carry
cd "$ROOT" || exit 1

die() { echo "device.sh: $*" >&2; exit 1; }

pack() {
	local gen="" libdir
	for p in client ctl token peer; do
		gen="$gen build/gen/$p.pb-c.c build/gen/$p.pb-c.h"
	done
	# shellcheck disable=SC2086
	make --no-print-directory $gen || die "generating the protocol code"
	libdir=$(pkg-config --variable=libdir libprotobuf-c 2>/dev/null)
	[ -f "$libdir/libprotobuf-c.a" ] || libdir=/usr/lib/x86_64-linux-gnu
	[ -f "$libdir/libprotobuf-c.a" ] || die "no libprotobuf-c.a (make deps)"
	rm -rf "$CARRY"
	mkdir -p "$CARRY/include/protobuf-c" "$CARRY/lib" "$CARRY/gen"
	cp /usr/include/protobuf-c/protobuf-c.h "$CARRY/include/protobuf-c/"
	cp "$libdir/libprotobuf-c.a" "$CARRY/lib/"
	cp build/gen/*.pb-c.[ch] "$CARRY/gen/"
	# uthash (headers only); xferctl's json-c (static) and libsmartcols
	# (headers, and its shared library to link against: the GPU machine
	# has libsmartcols.so.1 at run time, util-linux needs it).
	cp /usr/include/ut*.h "$CARRY/include/" 2>/dev/null
	rm -f "$CARRY"/include/utmp*.h "$CARRY/include/utime.h"
	[ -f "$CARRY/include/uthash.h" ] || die "no uthash.h (make deps)"
	mkdir -p "$CARRY/include/json-c" "$CARRY/include/libsmartcols"
	cp /usr/include/json-c/*.h "$CARRY/include/json-c/"
	cp /usr/include/libsmartcols/libsmartcols.h "$CARRY/include/libsmartcols/"
	cp "$libdir/libjson-c.a" "$CARRY/lib/" ||
		die "no libjson-c.a (make deps)"
	cp -L "$libdir/libsmartcols.so" "$CARRY/lib/libsmartcols.so" ||
		die "no libsmartcols.so (make deps)"
	sha256sum proto/*.proto >"$CARRY/proto.sha256"
	echo "packed $(du -sh "$CARRY" | cut -f1) into $CARRY;" \
		"carry build/device-carry to the GPU machine"
}

BUILD=${BUILD:-/tmp/xferd-gpu}
PER_TEST_TIMEOUT=${PER_TEST_TIMEOUT:-240}
TMP=$(mktemp -d /tmp/xferd-gpu-run.XXXXXX)
daemon_pid=''
daemon_for=''
pass=0 fail=0 skip=0 failed=()

cleanup() {
	[ -n "$daemon_pid" ] && kill -9 "$daemon_pid" 2>/dev/null
	if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
		cp "$TMP"/*.log "$TMP"/*.txt "$TMP"/*.out "$OUT"/ 2>/dev/null
	fi
	rm -rf "$TMP"
}

result() { # name rc seconds
	case $2 in
	0) pass=$((pass + 1)); printf 'PASS  %-24s %5ss\n' "$1" "$3" ;;
	77) skip=$((skip + 1)); printf 'SKIP  %-24s %5ss\n' "$1" "$3" ;;
	*) fail=$((fail + 1)); failed+=("$1")
	   printf 'FAIL  %-24s %5ss (exit %s)\n' "$1" "$3" "$2" ;;
	esac
}

build() {
	local targets
	[ -d "$CARRY" ] || die "no $CARRY: run 'tests/gpu/device.sh pack'" \
		"where the build dependencies are, and carry build/device-carry"
	sha256sum --quiet -c "$CARRY/proto.sha256" ||
		die "the carried protocol code is stale: pack again"
	mkdir -p "$BUILD/gen"
	cp "$CARRY"/gen/* "$BUILD/gen/"
	# Newer than the .proto files, so that make never wants protoc-c.
	touch "$BUILD"/gen/*
	targets="$BUILD/xferd $BUILD/xferctl $BUILD/gpubench $BUILD/stagebench $BUILD/kvbench $BUILD/dlistbench $BUILD/xferbench $BUILD/tcpbase $BUILD/test-tools/xnode"
	for src in tests/gpu/gpu_*.c; do
		targets="$targets $BUILD/tests/$(basename "$src" .c)"
	done
	echo "== build ($BUILD)"
	# Empty package lists: nothing is installed (there is no network).
	# shellcheck disable=SC2086
	CPPFLAGS="-I$CARRY/include" LDFLAGS="-L$CARRY/lib" \
		make --no-print-directory -j"$(nproc)" BUILD="$BUILD" \
		PROTOC=false DEPS_BUILD= DEPS_TEST= DEPS_BENCH= DEPS_RDMA= DEPS_PYTHON= DEPS_NIXL= \
		EXTRA_DEPS= XFERCTL_CFLAGS="-I$CARRY/include/libsmartcols" \
		XFERCTL_LIBS="-lsmartcols -l:libjson-c.a" \
		ETCD_CFLAGS= ETCD_LIBS="-l:libjson-c.a -levent_openssl -lssl -lcrypto" \
		${MAKE_EXTRA:-} $targets >"$TMP/build.log" 2>&1
	local rc=$?
	if [ $rc -ne 0 ]; then
		tail -n 60 "$TMP/build.log"
		die "build failed"
	fi
	grep -E 'warning:|error:' "$TMP/build.log" | head -20
	[ -x "$BUILD/tests/gpu_same_device" ] ||
		die "no GPU tests were built: is CUDA at \$CUDA_HOME?"
}

# One xferd per program, so that a fault in one cannot spill into the
# next; its log goes into xferd.log.
start_xferd() { # name
	export XFERD_SOCKET="$TMP/xferd.sock" XFERD_BIN="$BUILD/xferd"
	rm -f "$XFERD_SOCKET"
	# A deeper SQ than the default lets gpubench keep two 1000-entry
	# batches queued.
	# shellcheck disable=SC2086 # XFERD_EXTRA: "-o key=value ..."
	"$BUILD/xferd" -s "$XFERD_SOCKET" -l debug -o listen=off \
		-o sq_entries=4096 ${XFERD_EXTRA:-} >"$TMP/xferd.cur" 2>&1 &
	daemon_pid=$!
	daemon_for=$1
	for _ in $(seq 300); do
		[ -S "$XFERD_SOCKET" ] && return 0
		kill -0 "$daemon_pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$TMP/xferd.cur"
	die "xferd did not start"
}

# Every client has gone: xferd must hold no import any more.
check_imports() {
	local out
	for _ in $(seq 40); do
		out=$("$BUILD/xferctl" gpus 2>&1)
		echo "$out" | grep -Eq '^(imports: 0 allocations|no GPUs)' &&
			return 0
		sleep 0.05
	done
	printf "    | %s\n" "$out"
	result "no-imports-after-$daemon_for" 1 0
}

stop_xferd() {
	local rc
	[ -n "$daemon_pid" ] || return
	if kill -0 "$daemon_pid" 2>/dev/null; then
		check_imports
		kill -TERM "$daemon_pid"
		wait "$daemon_pid"
		rc=$?
	else
		wait "$daemon_pid"
		rc=$?
		echo "    | xferd died during $daemon_for:"
		tail -n 20 "$TMP/xferd.cur" | sed 's/^/    | /'
	fi
	daemon_pid=
	[ $rc -eq 0 ] || result "xferd-after-$daemon_for" $rc 0
	{ echo "=== xferd for $daemon_for (exit $rc)"; cat "$TMP/xferd.cur"; } \
		>>"$TMP/xferd.log"
	grep -E ' (warn|fatal)' "$TMP/xferd.cur" | head -n 5 |
		sed 's/^/    | xferd: /'
}

run_tests() {
	local prog name start rc
	echo "== GPU tests"
	for prog in "$BUILD"/tests/gpu_*; do
		name=$(basename "$prog")
		if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then
			continue
		fi
		start_xferd "$name"
		start=$(date +%s)
		timeout -k 5 "$PER_TEST_TIMEOUT" "$prog" >"$TMP/$name.out" 2>&1
		rc=$?
		result "$name" $rc $(($(date +%s) - start))
		if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
			sed 's/^/    | /' "$TMP/$name.out" | tail -n 25
		else
			tail -n 1 "$TMP/$name.out" | sed 's/^/    | /'
		fi
		{ echo "=== $name (exit $rc)"; cat "$TMP/$name.out"; } \
			>>"$TMP/tests.log"
		stop_xferd
	done
}

run_bench() {
	[ "${BENCH:-1}" = 0 ] && return
	[ "${BENCH:-1}" = staged ] && { run_bench_staged; return; }
	run_stagebench
	[ "${BENCH:-1}" = stage ] && return
	echo "== gpubench"
	start_xferd gpubench
	timeout -k 5 300 "$BUILD/gpubench" --socket "$XFERD_SOCKET" \
		--out "$TMP/gpubench.txt" 2>&1 | tee "$TMP/gpubench.log" |
		grep -v '^RES '
	local rc=${PIPESTATUS[0]}
	result gpubench "$rc" 0
	stop_xferd
	run_bench_staged
}

# The GPU stages alone (D2H, H2D into pinned chunks of 256 KiB to 8 MiB)
# against cudaMemcpyAsync between the same buffers; no xferd.  A row
# below 0.9 is reported, not failed: a benchmark asserts nothing.
run_stagebench() {
	local rc
	echo "== stagebench (the GPU stages alone)"
	timeout -k 5 120 "$BUILD/stagebench" 2>&1 | tee "$TMP/stagebench.txt"
	rc=${PIPESTATUS[0]}
	result stagebench "$rc" 0
	awk '$1 ~ /^stage-/ && $4 < 0.9 { print "    | below 0.9: " $0 }' \
		"$TMP/stagebench.txt"
}

# Two xferds on this machine as two nodes (own sockets, own TCP ports on
# loopback): gpubench's staged-path mode between them.
run_bench_staged() {
	local port=$((20000 + $$ % 20000)) pa pb rc
	echo "== gpubench, two nodes (the staged path over the TCP link)"
	# Each the other's configured peer: without a cluster key xferd
	# dials known peers only.
	"$BUILD/xferd" -s "$TMP/a.sock" -o node_name=a \
		-o listen=127.0.0.1:$port -o peer=127.0.0.1:$((port + 1)) \
		>"$TMP/xferd-a.log" 2>&1 &
	pa=$!
	"$BUILD/xferd" -s "$TMP/b.sock" -o node_name=b \
		-o listen=127.0.0.1:$((port + 1)) -o peer=127.0.0.1:$port \
		>"$TMP/xferd-b.log" 2>&1 &
	pb=$!
	for _ in $(seq 300); do
		[ -S "$TMP/a.sock" ] && [ -S "$TMP/b.sock" ] && break
		sleep 0.1
	done
	timeout -k 5 300 "$BUILD/gpubench" --socket "$TMP/a.sock" \
		--remote-socket "$TMP/b.sock" --reps 5 \
		--out "$TMP/gpubench-staged.txt" 2>&1 |
		tee "$TMP/gpubench-staged.log" | grep -v '^RES '
	rc=${PIPESTATUS[0]}
	result gpubench-staged "$rc" 0
	kill -TERM "$pa" "$pb"
	wait "$pa" "$pb"
	{ echo "=== xferd a"; cat "$TMP/xferd-a.log"
	  echo "=== xferd b"; cat "$TMP/xferd-b.log"; } >>"$TMP/xferd.log"
}

# The Python package with the GPU machine's own python3 and PyTorch:
# its GPU tests (CUDA and pinned tensors, torch.equal) and the KV
# connector example on CUDA tensors.  Skipped where python3 has no torch
# with CUDA or no headers to build the extension.
run_python() {
	local py=${DEVICE_PYTHON:-python3} rc start
	[ "${PYTHON_TESTS:-1}" = 0 ] && return
	echo "== Python package (torch)"
	if ! "$py" -c 'import torch; assert torch.cuda.is_available()' \
		2>/dev/null; then
		echo "    | skip: no torch with CUDA in $py"
		return
	fi
	(cd python && LDFLAGS="-L$CARRY/lib" XFER_BUILD="$BUILD" "$py" \
		setup.py -q build --build-base "$BUILD/python/tmp" \
		--build-lib "$BUILD/python/lib" --force) \
		>"$TMP/python-build.log" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		tail -n 15 "$TMP/python-build.log" | sed 's/^/    | /'
		result python-build $rc 0
		return
	fi
	export PYTHONPATH=$BUILD/python/lib XFER_BUILD=$BUILD
	export XFERD_BIN=$BUILD/xferd
	start_xferd python
	if "$py" -c 'import pytest, numpy' 2>/dev/null; then
		start=$(date +%s)
		(unset XFERD_SOCKET; timeout -k 5 300 "$py" -m pytest -q \
			-p no:cacheprovider tests/python/test_gpu.py) \
			>"$TMP/python-gpu.out" 2>&1
		rc=$?
		result python-gpu-tests $rc $(($(date +%s) - start))
		tail -n 5 "$TMP/python-gpu.out" | sed 's/^/    | /'
	else
		echo "    | pytest or numpy missing in $py: only the example runs"
	fi
	start=$(date +%s)
	timeout -k 5 120 "$py" python/examples/kv_connector.py \
		--socket "$XFERD_SOCKET" --device cuda >"$TMP/kv-cuda.out" 2>&1
	rc=$?
	result kv-connector-cuda $rc $(($(date +%s) - start))
	tail -n 4 "$TMP/kv-cuda.out" | sed 's/^/    | /'
	stop_xferd
}

run() {
	trap cleanup EXIT
	echo "== machine"
	nvidia-smi -L 2>&1
	nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 |
		head -1 | sed 's/^/driver /'
	nvidia-smi topo -m 2>&1 | grep -E '^(GPU[0-9]|\s+GPU0)' | cut -c1-60
	build
	start_xferd gpus
	echo "== xferd's GPUs"
	"$BUILD/xferctl" gpus 2>&1
	"$BUILD/xferctl" status 2>&1 | grep -E '^ *staging'
	stop_xferd
	run_tests
	run_python
	run_bench
	echo "== $pass passed, $fail failed, $skip skipped"
	[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
}

case ${1:-run} in
pack) pack ;;
run) run ;;
*) die "usage: $0 [pack|run]" ;;
esac
