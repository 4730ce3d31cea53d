#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# build-deb.sh OUTDIR - the Debian packages of this tree (`make deb`):
# dpkg-buildpackage -us -uc -b in a copy of the sources under OUTDIR, so
# that debian/rules' clean never touches this checkout's build/, and the
# .debs (and .buildinfo, .changes) land in OUTDIR, not in the parent
# directory.  Then lintian on them: an error fails the build.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: build-deb.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
VERSION=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
SRC=$OUT/xferd-$VERSION

rm -rf "$SRC"
mkdir -p "$SRC"
cd "$ROOT"
# The sources: what git tracks or would (not ignored), else everything
# but build outputs.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' |
		tar --null -T - -cf - | tar -xf - -C "$SRC"
else
	tar --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$SRC"
fi

rm -f "$OUT"/*.deb "$OUT"/*.changes "$OUT"/*.buildinfo
cd "$SRC"
echo "== dpkg-buildpackage -us -uc -b in $SRC"
dpkg-buildpackage -us -uc -b >"$OUT/build.log" 2>&1 ||
	{ tail -n 60 "$OUT/build.log"; echo "build-deb: dpkg-buildpackage failed (log: $OUT/build.log)"; exit 1; }
ls "$OUT"/*.deb

echo "== lintian (errors fail)"
if command -v lintian >/dev/null; then
	# --fail-on error: warnings and info are printed, not fatal.
	lintian --fail-on error --tag-display-limit 0 "$OUT"/*.changes
else
	echo "build-deb: lintian missing (make deb installs it)"; exit 1
fi
