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

int quota_limit_of(int err)
{
	switch (-err) {
	case EUSERS:       return QUOTA_CLIENTS;
	case EMFILE:       return QUOTA_CONNECTIONS;
	case ENOSPC:       return QUOTA_REGIONS;
	case EDQUOT:       return QUOTA_BYTES;
	case EFBIG:        return QUOTA_REGION_BYTES;
	case ETOOMANYREFS: return QUOTA_IMPORTS;
	case EMLINK:       return QUOTA_NAMES;
	case ENFILE:       return QUOTA_FDS;
	default:           return -1;
	}
}

const char *quota_limit_name(enum quota_limit l)
{
	static const char *const names[QUOTA_LIMIT__COUNT] = {
		[QUOTA_CLIENTS] = "clients",
		[QUOTA_CONNECTIONS] = "connections",
		[QUOTA_REGIONS] = "regions",
		[QUOTA_BYTES] = "bytes",
		[QUOTA_REGION_BYTES] = "region_bytes",
		[QUOTA_IMPORTS] = "imports",
		[QUOTA_NAMES] = "names",
		[QUOTA_FDS] = "fds",
	};

	return (unsigned)l < QUOTA_LIMIT__COUNT ? names[l] : "other";
}

void quota_refusal_count(struct quota_refusals *r, int err)
{
	int l = quota_limit_of(err);

	if (l >= 0)
		r->by_limit[l]++;
}
