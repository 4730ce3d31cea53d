/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cma.c - process_vm_readv/writev on a region of another process
 * (cma.h).  Any thread.
 */
#include <errno.h>
#include <sys/uio.h>

#include "mem/cma.h"
#include "mem/region_int.h"

int64_t cma_copy(const struct region *r, bool to_region, void *local,
		 uint64_t off, uint64_t len)
{
	uint64_t done = 0;

	if (r->head.kind != REGION_CMA)
		return -EINVAL;
	if (!region_cma_alive(r))
		return -ESRCH;
	while (done < len) {
		struct iovec l = { .iov_base = (char *)local + done,
				   .iov_len = len - done };
		struct iovec rv = {
			.iov_base = (void *)(uintptr_t)(r->addr + off + done),
			.iov_len = len - done };
		ssize_t n = to_region
			? process_vm_writev(r->pid, &l, 1, &rv, 1, 0)
			: process_vm_readv(r->pid, &l, 1, &rv, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EFAULT;
		done += (uint64_t)n;
	}
	return (int64_t)len;
}
