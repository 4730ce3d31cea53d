/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cma.h - bytes of another process's memory (an xfer_reg'd region),
 * moved with process_vm_readv/writev: one rule for every path that does
 * it (same node, the TCP data path, staging).
 */
#ifndef XFERD_CMA_H
#define XFERD_CMA_H

#include <stdbool.h>
#include <stdint.h>

#include "mem/region.h"

/*
 * Copy len bytes between local memory and [off, off + len) of CMA region
 * r: into r when to_region, else out of it.  Short transfers are
 * repeated until done: the kernel copies page by page and stops early
 * only at an unmapped page, which then fails the next call.  Returns len,
 * or -ESRCH (the owner exited: its pid may be another process's now),
 * -EFAULT (its memory is no longer mapped) or another -errno.
 */
int64_t cma_copy(const struct region *r, bool to_region, void *local,
		 uint64_t off, uint64_t len);

/* One range of a vectored copy: len bytes at local, at off of the region. */
struct cma_range {
	void *local;
	uint64_t off, len;
};

/*
 * cma_copy for n ranges of one region at once: up to CMA_IOV_MAX ranges
 * a system call instead of one each (a prepared list of a thousand 4 KiB
 * blocks pays the call, not the bytes).  Returns the sum of the lengths,
 * or -errno as cma_copy (the ranges before the failing one were copied).
 */
#define CMA_IOV_MAX 256
int64_t cma_copyv(const struct region *r, bool to_region,
		  const struct cma_range *v, uint32_t n);

#endif /* XFERD_CMA_H */
