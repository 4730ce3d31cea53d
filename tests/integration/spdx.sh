#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# spdx.sh - every source file of the tree names its licence
# (scripts/spdx-check.sh lists the ones that do not).
set -u
ROOT=${XFER_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
exec "$ROOT/scripts/spdx-check.sh" "$ROOT"
