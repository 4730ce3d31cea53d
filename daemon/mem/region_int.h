/* SPDX-License-Identifier: Apache-2.0 */
/*
 * region_int.h - what a region is inside mem/ (region.c, cma.c): the
 * fields of every memory kind.  Everything outside mem/ goes through the
 * accessors of region.h, so that a kind's state can change without the
 * engines that move its bytes noticing.
 */
#ifndef XFERD_REGION_INT_H
#define XFERD_REGION_INT_H

#include "gpu/gpu.h"
#include "mem/region.h"

struct region {
	/* First: region.h's inline accessors read it through the pointer. */
	struct region_head head;
	int fd;                  /* MEMFD: the sealed memfd */
	struct cma_owner *cma;   /* CMA: the owner process (cma.h), a ref */
	uint64_t addr;           /* CMA: the range's address in the owner */
	uint64_t gpu_ptr;        /* CUDA: the range's address in xferd */
	int gpu_dev;             /* CUDA: xferd's index of its GPU */
	struct rcache *rcache;   /* CUDA: the cache holding the import */
	struct rcache_entry *gpu_import; /* CUDA: a reference */
	struct gpu_alloc_desc *gpu_desc; /* CUDA legacy IPC: to map it again */
	uint64_t gpu_offset;     /* CUDA: of the range in its allocation */
	/* CUDA: mappings opened for other GPUs (progress thread, lazily). */
	uint64_t gpu_on[GPU_MAX];
	struct rcache_entry *gpu_on_entry[GPU_MAX];
	bool gpu_pinned;         /* MEMFD: pinned for GPU copies */
	/* MEMFD: its registration with the RDMA devices (rdma_mr.h), in
	 * rcache; a reference, or NULL.  Set once, maybe while the region
	 * is in use (rdma_register = background): a release store after
	 * the entry is complete, read with acquire (region_nic_mr). */
	_Atomic(struct rcache_entry *) nic_mr;
	/* REMOTE: how the owner's NICs reach it (from its CheckReply). */
	struct region_rdma *rdma;
	uint8_t key[TOKEN_KEY_LEN];
	_Atomic uint32_t refs;
	_Atomic uint32_t imports; /* live imports of it, for xferctl */
};

#endif /* XFERD_REGION_INT_H */
