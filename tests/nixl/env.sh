# SPDX-License-Identifier: Apache-2.0
# env.sh - what the NIXL tests share (sourced): skip under ASan, find
# NIXL's cached build (scripts/nixl-build.sh, which builds it if absent
# and fails without the tarballs) and the built plugin, or fail.
# Sets NIXL_DIR, NIXL_PLUGIN_DIR, LD_LIBRARY_PATH.
ROOT=${XFER_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${XFER_BUILD:-$ROOT/build}
case $BUILD in
*build-asan*)
	echo "skip: NIXL is not built with ASan (its tests run in the plain pass)"
	exit 77 ;;
esac
NIXL_DIR=$("$ROOT/scripts/nixl-build.sh") ||
	{ echo "FAIL: no NIXL build (scripts/nixl-build.sh failed above)"; exit 1; }
export NIXL_PLUGIN_DIR=$BUILD/nixl
[ -f "$NIXL_PLUGIN_DIR/libplugin_XFERD.so" ] ||
	{ echo "FAIL: no $NIXL_PLUGIN_DIR/libplugin_XFERD.so (make nixl-plugin)"; exit 1; }
export LD_LIBRARY_PATH=$NIXL_DIR/prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
