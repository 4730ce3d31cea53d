/* SPDX-License-Identifier: Apache-2.0 */
/*
 * path_local.h - the same-node host path: both regions on this node.
 *
 * memfd <-> memfd: memcpy between xferd's own mappings (one copy, no
 * syscall).  Anything involving xfer_reg'd memory: process_vm_readv/writev
 * straight between the mapping and the other process (one copy); between
 * two xfer_reg'd regions through a staging buffer (two copies).
 */
#ifndef XFERD_PATH_LOCAL_H
#define XFERD_PATH_LOCAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "xfer_ring.h"

#include "mem/region.h"

/* Bounce buffer for CMA -> CMA copies, one per progress thread. */
struct local_staging {
	void *buf;
	size_t len;
};

int local_staging_init(struct local_staging *st, size_t len);
void local_staging_fini(struct local_staging *st);

/*
 * Copy len bytes from src at soff to dst at doff (ranges already checked
 * against the regions).  Returns len or -errno (-ESRCH: the other process
 * is gone; -EFAULT: its memory is no longer mapped).  *path says which
 * path moved the data.
 */
int64_t local_copy_cma(struct local_staging *st, const struct region *src,
		       uint64_t soff, const struct region *dst, uint64_t doff,
		       uint64_t len, uint16_t *path);

/* Inline: memfd to memfd is one memcpy, and the call around it cost
 * half as much again for small writes (callgrind). */
static inline int64_t local_copy(struct local_staging *st,
				 const struct region *src, uint64_t soff,
				 const struct region *dst, uint64_t doff,
				 uint64_t len, uint16_t *path)
{
	if (region_kind(src) != REGION_MEMFD || region_kind(dst) != REGION_MEMFD)
		return local_copy_cma(st, src, soff, dst, doff, len, path);
	*path = XFER_PATH_MEMCPY;
	/* Both ranges may be in one region: memmove then. */
	if (src == dst)
		memmove(region_map_at(dst, doff), region_map_at(src, soff), len);
	else
		memcpy(region_map_at(dst, doff), region_map_at(src, soff), len);
	return (int64_t)len;
}

#endif /* XFERD_PATH_LOCAL_H */
