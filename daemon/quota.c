/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quota.c - per-client limits (quota.h).
 */
#include <errno.h>

#include "quota.h"

int quota_check_region(const struct xferd_config *cfg,
			const struct client_usage *u, uint64_t length,
			const char **why)
{
	if (length > cfg->max_region_bytes) {
		*why = "region larger than max_region_bytes";
		return -EFBIG;
	}
	if (u->regions >= cfg->max_regions) {
		*why = "too many regions of this client (max_regions)";
		return -ENOSPC;
	}
	return 0;
}

int quota_check_import(const struct xferd_config *cfg,
			const struct client_usage *u, const char **why)
{
	if (u->imports >= cfg->max_imports) {
		*why = "too many imported tokens of this client (max_imports)";
		return -ETOOMANYREFS;
	}
	return 0;
}
