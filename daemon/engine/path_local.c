/* SPDX-License-Identifier: Apache-2.0 */
/*
 * path_local.c - same-node host copies: memcpy and CMA.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/path_local.h"
#include "mem/cma.h"
#include "xfer_ring.h"

int local_staging_init(struct local_staging *st, size_t len)
{
	st->buf = malloc(len);
	st->len = st->buf ? len : 0;
	return st->buf ? 0 : -ENOMEM;
}

void local_staging_fini(struct local_staging *st)
{
	free(st->buf);
	st->buf = NULL;
	st->len = 0;
}

static void *map_at(const struct region *r, uint64_t off)
{
	return region_map_at(r, off);
}

/* CMA -> CMA through the staging buffer.  When both ranges are in one
 * process and overlap with the target above the source, copy the chunks
 * from the end so no chunk reads bytes an earlier chunk overwrote. */
static int64_t cma_to_cma(struct local_staging *st, const struct region *src,
			  uint64_t soff, const struct region *dst,
			  uint64_t doff, uint64_t len)
{
	uint64_t s = region_cma_addr(src) + soff, d = region_cma_addr(dst) + doff;
	bool backwards = region_cma_pid(src) == region_cma_pid(dst) && d > s && d < s + len;

	for (uint64_t done = 0; done < len;) {
		uint64_t n = len - done < st->len ? len - done : st->len;
		uint64_t at = backwards ? len - done - n : done;
		int64_t rc = cma_copy(src, false, st->buf, soff + at, n);
		if (rc < 0)
			return rc;
		rc = cma_copy(dst, true, st->buf, doff + at, n);
		if (rc < 0)
			return rc;
		done += n;
	}
	return (int64_t)len;
}

int64_t local_copy_cma(struct local_staging *st, const struct region *src,
		       uint64_t soff, const struct region *dst, uint64_t doff,
		       uint64_t len, uint16_t *path)
{
	*path = XFER_PATH_CMA;
	if (region_kind(src) == REGION_MEMFD)
		return cma_copy(dst, true, map_at(src, soff), doff, len);
	if (region_kind(dst) == REGION_MEMFD)
		return cma_copy(src, false, map_at(dst, doff), soff, len);
	return cma_to_cma(st, src, soff, dst, doff, len);
}
