#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# spdx-check.sh [ROOT] - every source file of the tree names its licence:
# an "SPDX-License-Identifier:" line within its first lines.  Lists each
# file without one and exits 1; exits 0 when all have one.
#
# Source files: C, headers, CUDA, Python, shell, protobuf, Makefiles, man
# pages, and any other executable script (a #! first line).  The tracked
# files when ROOT is a git checkout (so build outputs never count), else
# every file under ROOT.
set -u
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || exit 2
# Within this many lines: after a #! line, a man page's first comments,
# or a file's opening block.
HEAD_LINES=5

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	list() { git ls-files -z --cached --others --exclude-standard; }
else
	list() { find . -type f -not -path './.git/*' -printf '%P\0'; }
fi

is_source() { # path
	case $1 in
	*.c|*.h|*.cu|*.py|*.pyi|*.sh|*.proto|Makefile|*/Makefile|*.mk) return 0 ;;
	*.[1-8]) return 0 ;;  # man pages
	esac
	[ -x "$1" ] && [ "$(head -c 2 "$1")" = '#!' ]
}

missing=0 checked=0
while IFS= read -r -d '' f; do
	[ -f "$f" ] && is_source "$f" || continue
	checked=$((checked + 1))
	if ! head -n "$HEAD_LINES" "$f" | grep -q 'SPDX-License-Identifier:'; then
		echo "$f"
		missing=$((missing + 1))
	fi
done < <(list)

if [ $missing -gt 0 ]; then
	echo "spdx-check: $missing of $checked source files lack an SPDX-License-Identifier line in their first $HEAD_LINES lines" >&2
	exit 1
fi
echo "spdx-check: all $checked source files carry an SPDX-License-Identifier"
