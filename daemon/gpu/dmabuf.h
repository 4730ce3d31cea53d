/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dmabuf.h - GPU memory toward a NIC: export an imported allocation as a
 * dma-buf and register it with the NIC (GPUDirect RDMA without
 * nvidia-peermem).
 *
 * The driver exports only whole pages, so a range is widened to page
 * boundaries for the export and the NIC registration starts at the
 * range's offset inside the exported pages.
 */
#ifndef XFERD_DMABUF_H
#define XFERD_DMABUF_H

#include <stddef.h>
#include <stdint.h>

struct ibv_pd;
struct ibv_mr;

/* What to export for [ptr, ptr + len): page-aligned base and size, and
 * where ptr lies in it.  -EINVAL for an empty or wrapping range or a
 * page size that is not a power of two. */
struct dmabuf_span {
	uint64_t base;     /* page-aligned */
	uint64_t size;     /* whole pages */
	uint64_t offset;   /* of ptr from base */
};
int dmabuf_span(uint64_t ptr, uint64_t len, uint64_t page,
		struct dmabuf_span *out);

/*
 * Export GPU range [ptr, ptr + len) of the current context as a dma-buf
 * fd (the caller closes it) and its span.  -ENOTSUP without CUDA or when
 * the driver cannot (no dma-buf support).
 */
int gpu_dmabuf_export(uint64_t ptr, uint64_t len, int *fd,
		      struct dmabuf_span *span);

/* The same on GPU dev's context (made current on the calling thread). */
int gpu_dmabuf_export_on(int dev, uint64_t ptr, uint64_t len, int *fd,
			 struct dmabuf_span *span);

/*
 * Register len bytes of dma-buf fd, starting at offset inside it, with
 * the NIC of pd for the given access; the fd may be closed afterwards
 * (the MR keeps the buffer).  iova is the address peers will use.
 */
int nic_reg_dmabuf(struct ibv_pd *pd, int fd, uint64_t offset, size_t len,
		   uint64_t iova, int access, struct ibv_mr **out);

#endif /* XFERD_DMABUF_H */
