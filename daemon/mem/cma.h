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

#endif /* XFERD_CMA_H */
