#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# nixl-build.sh [--tarballs] - NIXL (core, its gtest harness, Python bindings) built
# once per machine from the shared tarballs, for the XFERD plugin and its
# tests.  Prints the cache directory on its last line of stdout; its log
# goes to stderr.
#
# NIXL is a third-party test peer: it is unpacked and built outside the
# clone, in $XFERD_NIXL_CACHE (default /var/cache/xferd-ci)/nixl-KEY/,
# KEY the first 16 hex digits of the sha256 of the two tarballs' sha256s,
# so new tarballs build a new tree and an unchanged pair is built once:
#
#   src/nixl/   the unpacked sources (the harness headers and absl's
#               headers, which NIXL does not install, are read from here)
#   build/      meson's build directory
#   prefix/     the install tree (lib/x86_64-linux-gnu, include,
#               lib/python3/dist-packages/nixl_cu12)
#   .complete   written last: a directory without it is rebuilt
#
# The tarballs: $XFERD_NIXL_SRC, default ../shared/nixl beside the clone
# (nixl-8770b655.tar.gz, nixl-subprojects.tar.gz), or beside the main
# clone when this is a git worktree of it.  Missing tarballs exit
# 1.  The Debian packages it needs come from `make deps` (DEPS_NIXL).
# One flock per key, so concurrent runs build once.
#
# XFERD_NIXL_BUILDTYPE: meson's buildtype, default debug (what the tests
# and the plugin build use); another type is a tree of its own,
# nixl-KEY-TYPE (bench/bench-nixl.sh measures a release NIXL: a debug
# one spends more in its own status calls than the plugin does).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# ../shared/nixl beside this clone, or beside the main clone of which
# this is a git worktree.
default_src() {
	local common
	if [ -d "$ROOT/../shared/nixl" ]; then
		(cd "$ROOT/../shared/nixl" && pwd)
		return
	fi
	common=$(git -C "$ROOT" rev-parse --path-format=absolute \
		--git-common-dir 2>/dev/null) || common=
	if [ -n "$common" ] && [ -d "$common/../../shared/nixl" ]; then
		(cd "$common/../../shared/nixl" && pwd)
		return
	fi
	echo "$ROOT/../shared/nixl"
}
SRC=${XFERD_NIXL_SRC:-$(default_src)}
CACHE=${XFERD_NIXL_CACHE:-/var/cache/xferd-ci}
JOBS=${XFERD_NIXL_JOBS:-2}
CORE=$SRC/nixl-8770b655.tar.gz
SUBS=$SRC/nixl-subprojects.tar.gz

log() { echo "nixl-build: $*" >&2; }

for f in "$CORE" "$SUBS"; do
	[ -f "$f" ] || { log "missing $f (set XFERD_NIXL_SRC)"; exit 1; }
done
# --tarballs: the two tarballs' paths, one a line (nixlbench-build.sh).
if [ "${1:-}" = --tarballs ]; then
	printf '%s\n' "$CORE" "$SUBS"
	exit 0
fi
KEY=$(sha256sum "$CORE" "$SUBS" | awk '{print $1}' | sha256sum | cut -c1-16)
BUILDTYPE=${XFERD_NIXL_BUILDTYPE:-debug}
[ "$BUILDTYPE" = debug ] || KEY=$KEY-$BUILDTYPE
DIR=$CACHE/nixl-$KEY
mkdir -p "$CACHE"
exec 9>"$CACHE/nixl-$KEY.lock"
flock 9
if [ -f "$DIR/.complete" ]; then
	log "cached: $DIR"
	echo "$DIR"
	exit 0
fi

for tool in meson ninja g++ pkg-config; do
	command -v "$tool" >/dev/null || { log "no $tool: run make deps"; exit 1; }
done
log "building NIXL into $DIR (takes minutes the first time)"
start=$(date +%s)
rm -rf "$DIR"
mkdir -p "$DIR/src"
tar xzf "$CORE" -C "$DIR/src"
tar xzf "$SUBS" -C "$DIR/src/nixl/subprojects"

# Debian's python3 (with pybind11), not a pyenv one earlier on PATH; no
# CUDA (an empty CUDA_PATH keeps NIXL from building device code where a
# toolkit is installed but no GPU is); LIBRARY_PATH would leak into links.
nocuda=$DIR/no-cuda
mkdir -p "$nocuda"
(
	unset LIBRARY_PATH
	export PATH=/usr/sbin:/usr/bin:/sbin:/bin CUDA_PATH=$nocuda CUDA_HOME=$nocuda
	cd "$DIR/src/nixl"
	meson setup "$DIR/build" --wrap-mode=nodownload \
		--force-fallback-for=tomlplusplus -Dbuildtype="$BUILDTYPE" \
		-Dwerror=false --prefix="$DIR/prefix" -Denable_plugins=POSIX \
		-Dbuild_examples=false
	ninja -C "$DIR/build" -j"$JOBS" install
) >"$DIR/build.log" 2>&1 || {
	log "build failed; the end of $DIR/build.log:"
	tail -n 40 "$DIR/build.log" >&2
	exit 1
}
[ -f "$DIR/prefix/lib/x86_64-linux-gnu/libnixl.so" ] ||
	{ log "no libnixl.so in $DIR/prefix"; exit 1; }
echo "built in $(($(date +%s) - start)) s from $CORE, $SUBS" >"$DIR/.complete"
log "built in $(($(date +%s) - start)) s"
echo "$DIR"
