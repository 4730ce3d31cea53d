#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# nixlbench-build.sh - NIXL's benchmark, nixlbench, with the XFERD backend
# in its list (tests/nixl/nixlbench-xferd.patch) and its ASIO runtime's
# finishing barrier fixed (tests/nixl/nixlbench-asio-finish.patch), the
# patches applied in that order to the unpacked copy, built once per
# machine against the NIXL that nixl-build.sh builds.  Prints the nixlbench binary on its last line of stdout; its log
# goes to stderr.
#
# nixlbench is its own meson project (benchmark/nixlbench of NIXL's
# tarball) that links the installed NIXL; it is built beside NIXL's tree
# in $XFERD_NIXL_CACHE (default /var/cache/xferd-ci)/nixlbench-KEY/, KEY
# the first 16 hex digits of the sha256 of the tarballs' and the patches'
# sha256s, so a changed patch builds a new tree:
#
#   src/        benchmark/nixlbench, patched, with the asio and
#               tomlplusplus subprojects of the subprojects tarball
#   build/      meson's build directory; build/nixlbench the binary
#   .complete   written last: a directory without it is rebuilt
#
# Without etcd's C++ client nixlbench has only its ASIO runtime (two
# workers meet over TCP: --runtime_type=ASIO).  Missing tarballs exit 1
# (nixl-build.sh says which).  One flock per key.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PATCHES=("$ROOT/tests/nixl/nixlbench-xferd.patch" "$ROOT/tests/nixl/nixlbench-asio-finish.patch")
CACHE=${XFERD_NIXL_CACHE:-/var/cache/xferd-ci}
JOBS=${XFERD_NIXL_JOBS:-2}

log() { echo "nixlbench-build: $*" >&2; }

NIXL_DIR=$("$ROOT/scripts/nixl-build.sh" | tail -n 1) || exit 1
# The tarballs nixl-build.sh built from.
{ read -r CORE; read -r SUBS; } < <("$ROOT/scripts/nixl-build.sh" --tarballs)
KEY=$(sha256sum "$CORE" "$SUBS" "${PATCHES[@]}" | awk '{print $1}' | sha256sum | cut -c1-16)
# Against a NIXL of another buildtype (nixl-build.sh): a tree of its own.
BUILDTYPE=${XFERD_NIXL_BUILDTYPE:-debug}
[ "$BUILDTYPE" = debug ] || KEY=$KEY-$BUILDTYPE
DIR=$CACHE/nixlbench-$KEY
BIN=$DIR/build/nixlbench
exec 9>"$CACHE/nixlbench-$KEY.lock"
flock 9
if [ -f "$DIR/.complete" ] && [ -x "$BIN" ]; then
	log "cached: $DIR"
	echo "$BIN"
	exit 0
fi

log "building nixlbench into $DIR (a few minutes the first time)"
start=$(date +%s)
rm -rf "$DIR"
mkdir -p "$DIR/unpack"
tar xzf "$CORE" -C "$DIR/unpack" nixl/benchmark/nixlbench
mv "$DIR/unpack/nixl/benchmark/nixlbench" "$DIR/src"
rm -rf "$DIR/unpack"
tar xzf "$SUBS" -C "$DIR/src/subprojects" asio-1.30.2 tomlplusplus-3.4.0
for p in "${PATCHES[@]}"; do
	patch -s -p1 -d "$DIR/src" <"$p" >&2 ||
		{ log "$p does not apply to $CORE"; exit 1; }
done

# As nixl-build.sh: Debian's tools, no CUDA, no LIBRARY_PATH.
nocuda=$DIR/no-cuda
mkdir -p "$nocuda"
(
	unset LIBRARY_PATH
	export PATH=/usr/sbin:/usr/bin:/sbin:/bin CUDA_PATH=$nocuda CUDA_HOME=$nocuda
	cd "$DIR/src"
	meson setup "$DIR/build" --wrap-mode=nodownload \
		--force-fallback-for=tomlplusplus,asio -Dbuildtype=release \
		-Dwerror=false -Dnixl_path="$NIXL_DIR/prefix"
	ninja -C "$DIR/build" -j"$JOBS" nixlbench
) >"$DIR/build.log" 2>&1 || {
	log "build failed; the end of $DIR/build.log:"
	tail -n 40 "$DIR/build.log" >&2
	exit 1
}
[ -x "$BIN" ] || { log "no $BIN"; exit 1; }
echo "built in $(($(date +%s) - start)) s" >"$DIR/.complete"
log "built in $(($(date +%s) - start)) s"
echo "$BIN"
