/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dmabuf.c - dma-buf export of GPU memory and its NIC registration.
 */
#include <errno.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "gpu/cuda_drv.h"
#include "gpu/dmabuf.h"
#include "gpu/gpu.h"
#include "core/log.h"

int dmabuf_span(uint64_t ptr, uint64_t len, uint64_t page,
		struct dmabuf_span *out)
{
	if (len == 0 || page == 0 || (page & (page - 1)) ||
	    ptr + len < ptr || ptr + len > UINT64_MAX - page)
		return -EINVAL;
	uint64_t base = ptr & ~(page - 1);
	uint64_t end = (ptr + len + page - 1) & ~(page - 1);

	*out = (struct dmabuf_span){ .base = base, .size = end - base,
				     .offset = ptr - base };
	return 0;
}

int gpu_dmabuf_export(uint64_t ptr, uint64_t len, int *fd,
		      struct dmabuf_span *span)
{
#ifdef HAVE_CUDA
	static __typeof__(cuMemGetHandleForAddressRange) *get_handle;
	/* GPU pages for dma-buf export are 64 KiB; a host page would not
	 * do. */
	int err = dmabuf_span(ptr, len, 65536, span);

	if (err)
		return err;
	if (!get_handle && cu.get_proc_address)
		cu.get_proc_address("cuMemGetHandleForAddressRange",
				    (void **)&get_handle, 12000,
				    CU_GET_PROC_ADDRESS_DEFAULT, NULL);
	if (!get_handle)
		return -ENOTSUP;
	int h = -1;
	CUresult r = get_handle(&h, span->base, span->size,
				CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (r) {
		log_warnx("dma-buf export: %s", cu_err(r));
		return -ENOTSUP;
	}
	*fd = h;
	return 0;
#else
	(void)ptr, (void)len, (void)fd, (void)span;
	return -ENOTSUP;
#endif
}

int gpu_dmabuf_export_on(int dev, uint64_t ptr, uint64_t len, int *fd,
			 struct dmabuf_span *span)
{
#ifdef HAVE_CUDA
	if (dev < 0 || dev >= gpu_count() || gpu_set_current(dev))
		return -ENOTSUP;
#else
	(void)dev;
#endif
	return gpu_dmabuf_export(ptr, len, fd, span);
}

int nic_reg_dmabuf(struct ibv_pd *pd, int fd, uint64_t offset, size_t len,
		   uint64_t iova, int access, struct ibv_mr **out)
{
	if (!pd || fd < 0 || len == 0)
		return -EINVAL;
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, offset, len, iova, fd, access);
	if (!mr)
		return errno ? -errno : -EIO;
	*out = mr;
	return 0;
}
