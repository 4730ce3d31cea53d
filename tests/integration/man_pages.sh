#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# man_pages.sh - scripts/man-check.sh in make check: every man page renders
# without a warning (man --warnings) and covers every option, config key,
# xferctl command and libxfer function.  Exit 0 pass, 1 fail, 77 skip.
ROOT=${XFER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
command -v man >/dev/null || { echo "skip: man is not installed (make deps: man-db)"; exit 77; }
exec "$ROOT/scripts/man-check.sh" "$ROOT" "${XFERD_BIN:-$ROOT/build/xferd}"
