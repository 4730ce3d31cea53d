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

/* One system call for up to CMA_IOV_MAX ranges: the bytes it moved (the
 * kernel stops at the first range it cannot finish), or -errno. */
static ssize_t copyv_once(const struct region *r, bool to_region,
			  const struct cma_range *v, uint32_t n)
{
	struct iovec l[CMA_IOV_MAX], rv[CMA_IOV_MAX];

	for (uint32_t i = 0; i < n; i++) {
		l[i] = (struct iovec){ v[i].local, v[i].len };
		rv[i] = (struct iovec){
			(void *)(uintptr_t)(r->addr + v[i].off), v[i].len };
	}
	for (;;) {
		ssize_t got = to_region
			? process_vm_writev(r->pid, l, n, rv, n, 0)
			: process_vm_readv(r->pid, l, n, rv, n, 0);
		if (got >= 0 || errno != EINTR)
			return got < 0 ? -errno : got;
	}
}

int64_t cma_copyv(const struct region *r, bool to_region,
		  const struct cma_range *v, uint32_t n)
{
	uint64_t sum = 0;

	if (r->head.kind != REGION_CMA)
		return -EINVAL;
	if (!region_cma_alive(r))
		return -ESRCH;
	for (uint32_t i = 0; i < n;) {
		uint32_t k = n - i < CMA_IOV_MAX ? n - i : CMA_IOV_MAX;
		uint64_t want = 0;
		for (uint32_t j = 0; j < k; j++)
			want += v[i + j].len;
		ssize_t got = copyv_once(r, to_region, v + i, k);
		if (got < 0)
			return got;
		if ((uint64_t)got == want) {
			sum += want;
			i += k;
			continue;
		}
		/* Short: finish range by range from where it stopped, so a
		 * range that cannot be done says why (cma_copy's errno). */
		uint64_t left = (uint64_t)got;
		for (uint32_t j = i; j < i + k; j++) {
			uint64_t skip = left < v[j].len ? left : v[j].len;
			left -= skip;
			if (skip < v[j].len) {
				int64_t rc = cma_copy(r, to_region,
						      (char *)v[j].local + skip,
						      v[j].off + skip,
						      v[j].len - skip);
				if (rc < 0)
					return rc;
			}
			sum += v[j].len;
		}
		i += k;
	}
	return (int64_t)sum;
}
