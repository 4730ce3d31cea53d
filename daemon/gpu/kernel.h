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

#define COPY_BATCH_MAX 1024u      /* descriptors per launch */
#define COPY_THREADS   512u       /* threads per block */

#endif /* XFERD_CUDA_COPY_H */
