#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# config-keys.sh XFERD [ROOT] - the keys xferd's config parser knows, one
# a line, sorted: what the example configuration and xferd.conf(5) must
# list (tests/integration/conf_example.sh, scripts/man-check.sh).
#
# Asked of the parser itself: `xferd --list-keys` prints the key table
# that config_set() walks (daemon/config.c), so a key the parser takes is
# a key listed here, however it is parsed.  ROOT is accepted for the
# callers and not needed.
set -u
XFERD=${1:?usage: config-keys.sh XFERD [ROOT]}
out=$("$XFERD" --list-keys) || { echo "config-keys: $XFERD --list-keys failed" >&2; exit 2; }
keys=$(printf '%s\n' "$out" | cut -f1 | sort -u)
[ -n "$keys" ] || { echo "config-keys: no keys found" >&2; exit 2; }
bad=$(printf '%s\n' "$keys" | grep -vxE '[a-z][a-z0-9_]{1,47}')
[ -z "$bad" ] || { echo "config-keys: not a key name: $bad" >&2; exit 2; }
printf '%s\n' "$keys"
