/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu.h - GPU memory as libxfer sees it: is a pointer device memory, and
 * if so, which allocation holds it and how xferd can import that.
 *
 * Only libxfer's registration uses this.  The CUDA driver is looked up at
 * run time and only in a process that has loaded it already: a process
 * that never used CUDA has no device memory, and libxfer never pulls the
 * driver into it.  Built without CUDA headers, every pointer is host
 * memory.
 */
#ifndef XFER_CLIENT_GPU_H
#define XFER_CLIENT_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPU_UUID_LEN       16
#define GPU_IPC_HANDLE_LEN 64

/* The allocation behind a registered range (client.proto CudaAlloc). */
struct gpu_alloc {
	uint32_t device;                        /* ordinal in this process */
	uint8_t uuid[GPU_UUID_LEN];             /* names the GPU in xferd */
	uint64_t base, size;                    /* the allocation */
	uint64_t offset;                        /* of the range within it */
	uint64_t buffer_id;                     /* never reused in a process */
	bool vmm;                               /* cuMemCreate memory */
	uint8_t ipc_handle[GPU_IPC_HANDLE_LEN]; /* legacy: handle of base */
	int fd;                                 /* vmm: shareable handle */
};

/*
 * Classify [ptr, ptr + len).  Returns 0 when it is host memory (what the
 * driver does not call device memory, pinned host memory included), 1
 * when it is device memory described in *a, or -ENOTSUP for device
 * memory xferd cannot import: managed memory, stream-ordered pool memory
 * (cudaMallocAsync), VMM memory created without a POSIX fd handle type,
 * a range that runs past its allocation.  With 1 and a->fd >= 0 the
 * caller owns a->fd and closes it.  Thread-safe; blocks only inside
 * driver calls.
 */
int gpu_probe(const void *ptr, size_t len, struct gpu_alloc *a);

/*
 * Page-lock [ptr, ptr + len) for CUDA in this process (cuMemHostRegister,
 * portable to every context), or undo it.  Under the thread's current
 * context, else an active primary context; never loads, initializes or
 * creates anything.  0, -ENODEV (no driver loaded or no context), -ENOMEM
 * (the driver's pinned memory limit), -EIO (any other refusal).  Blocks
 * while the driver pins the pages.
 */
/* 1: the range was pinned already (by the application: leave it be). */
int client_cuda_host_register(void *ptr, size_t len);
int client_cuda_host_unregister(void *ptr);

#endif /* XFER_CLIENT_GPU_H */
