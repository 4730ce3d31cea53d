/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kernel.h - the batch-copy kernel's descriptor, shared by the kernel
 * (gpu/kernel.cu) and the host code that fills it (gpu/copy.c).
 */
#ifndef XFERD_CUDA_COPY_H
#define XFERD_CUDA_COPY_H

#include <stdint.h>

struct copy_desc {
	uint64_t src, dst, len;   /* device (or peer) addresses */
};

/* A prepared list transfer: entry `src` of the source list to entry
 * `dst` of the destination list (indices checked by xferd before the
 * launch, and bounded again by the kernel). */
struct copy_pair {
	uint32_t src, dst;
};

#define COPY_BATCH_MAX 1024u      /* descriptors per launch */
/* Pairs one indexed launch takes (a slot of pinned memory); longer
 * transfers go as several launches. */
#define COPY_PAIRS_MAX (1u << 17)
#define COPY_THREADS   512u       /* threads per block */

#endif /* XFERD_CUDA_COPY_H */
