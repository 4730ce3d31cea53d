/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpulib.h - helpers for the GPU test programs (tests/gpu/gpu_*.c).
 *
 * Each program skips (exit 77, saying why) where there is no CUDA driver
 * or too few GPUs, so CI builds and runs them everywhere.  On a GPU
 * machine they move bytes through the shared xferd ($XFERD_SOCKET) and
 * check every byte that arrived by copying the target back to the host.
 *
 * A process that has initialized CUDA cannot use it in a forked child,
 * so the second client of a test (the "owner" of GPU regions) is this
 * same program started again with exec: every test's main() calls
 * gl_owner_entry() first.
 */
#ifndef XFER_GPULIB_H
#define XFER_GPULIB_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "testlib.h"
#include "xfer.h"

/* Memory kinds as tokens carry them (client.proto MemKind). */
#define GL_MEM_MEMFD 1u
#define GL_MEM_CMA   2u
#define GL_MEM_CUDA  3u

/* A CUDA runtime call that must succeed. */
#define GL_CK(expr)                                                           \
	do {                                                                  \
		cudaError_t e_ = (expr);                                      \
		T_ASSERT(e_ == cudaSuccess, "%s -> %s", #expr,                \
			 cudaGetErrorString(e_));                             \
	} while (0)

/*
 * Exit 77 with the reason unless the CUDA driver loads and at least
 * min_gpus GPUs are visible.  Returns the number of GPUs.  Call after
 * gl_owner_entry(), before anything else touches CUDA.
 */
int gl_require_gpus(int min_gpus);

/* What a test buffer is. */
enum gl_kind {
	GL_DEVICE,      /* cudaMalloc */
	GL_VMM,         /* cuMemCreate + cuMemMap, POSIX fd shareable */
	GL_VMM_NOFD,    /* cuMemCreate without a shareable handle type */
	GL_HOST_MEMFD,  /* xfer_alloc_host */
	GL_HOST_MALLOC, /* malloc + xfer_reg (CMA) */
	GL_PINNED,      /* cudaMallocHost */
	GL_MANAGED,     /* cudaMallocManaged */
	GL_POOL,        /* cudaMallocAsync */
};

struct gl_buf {
	enum gl_kind kind;
	int dev;
	uint8_t *ptr;
	size_t len;
	struct xfer_mem *mem;   /* NULL until registered */
	uint64_t handle;
	/* GL_VMM*: the reserved range and the physical allocation. */
	uint64_t va;
	size_t va_len;
	unsigned long long vmm_handle;
};

const char *gl_kind_name(enum gl_kind kind);
bool gl_kind_is_gpu(enum gl_kind kind);

/* Allocate len bytes of kind on GPU dev (ignored for host kinds), not
 * registered.  GL_HOST_MEMFD needs ctx (it allocates and registers). */
void gl_alloc(struct xfer_ctx *ctx, enum gl_kind kind, int dev, size_t len,
	      struct gl_buf *b);
/* xfer_reg the whole buffer; returns its result. */
int gl_reg(struct xfer_ctx *ctx, struct gl_buf *b);
/* Both, failing the test on error. */
void gl_buf_alloc(struct xfer_ctx *ctx, enum gl_kind kind, int dev,
		  size_t len, struct gl_buf *b);
/* Deregister (if registered and dereg) and free. */
void gl_buf_free(struct xfer_ctx *ctx, struct gl_buf *b, bool dereg);
/* GL_VMM: unmap and release the physical memory and map a new
 * allocation at the same address (registration untouched). */
void gl_vmm_remap(struct gl_buf *b);

/* tl_fill_at / tl_check_at on [off, off + len) of b, through a host
 * copy for device memory.  Check returns 0 or the first bad index + 1. */
void gl_fill(struct gl_buf *b, uint64_t off, uint64_t len, uint64_t seed,
	     uint64_t pos);
size_t gl_check(struct gl_buf *b, uint64_t off, uint64_t len, uint64_t seed,
		uint64_t pos);
/* Export [off, off + len) of a registered b into tok; returns size. */
size_t gl_export(const struct gl_buf *b, uint64_t off, uint64_t len,
		 void *tok);
/* The memory kind a token says its region is (client.proto MemKind). */
uint32_t gl_token_mem_kind(const void *tok, size_t len);
/* Free bytes on GPU dev (cudaMemGetInfo). */
size_t gl_dev_free(int dev);

/* --- one transfer --- */

/* A free SQE of ctx, submitting what is queued until one is free (10 s,
 * then the test fails): for vectors longer than the SQ. */
struct xfer_sqe *gl_get_sqe(struct xfer_ctx *ctx);

/* Submit one write or read and wait for its CQE (30 s); returns it. */
struct xfer_cqe gl_rw(struct xfer_ctx *ctx, unsigned op, uint64_t local,
		      uint64_t local_off, uint64_t remote, uint64_t remote_off,
		      uint64_t len);
/* As gl_rw, and the CQE must say len bytes over XFER_PATH_CUDA_IPC. */
void gl_rw_ok(struct xfer_ctx *ctx, unsigned op, uint64_t local,
	      uint64_t local_off, uint64_t remote, uint64_t remote_off,
	      uint64_t len, const char *what);

/* --- a second client process that owns regions --- */

struct gl_owner;

#define GL_OWNER_MAX 16

struct gl_owner {
	pid_t pid;
	int to, from;
};

/* Run the owner if this process was started as one (never returns
 * then); otherwise return at once. */
void gl_owner_entry(int argc, char **argv);
/* Start an owner on socket (NULL: tl_socket()). */
void gl_owner_start(struct gl_owner *o, const char *socket);
/* The owner allocates and registers; returns the region's index, or the
 * registration's negative errno.  *ptr (may be NULL) gets the address. */
int gl_owner_alloc(struct gl_owner *o, enum gl_kind kind, int dev,
		   size_t len, uint64_t *ptr);
/* The owner exports [off, off + len) of region idx; returns the size. */
size_t gl_owner_export(struct gl_owner *o, int idx, uint64_t off,
		       uint64_t len, void *tok);
void gl_owner_fill(struct gl_owner *o, int idx, uint64_t off, uint64_t len,
		   uint64_t seed, uint64_t pos);
size_t gl_owner_check(struct gl_owner *o, int idx, uint64_t off,
		      uint64_t len, uint64_t seed, uint64_t pos);
/* Free region idx, deregistering it first if dereg; returns the
 * deregistration's result. */
int gl_owner_free(struct gl_owner *o, int idx, bool dereg);
/* GL_VMM region idx: deregister, remap new memory at the same address,
 * register again; returns the registration's result. */
int gl_owner_vmm_remap(struct gl_owner *o, int idx);
/* The owner imports tok and submits count writes of len bytes from
 * region idx to it without waiting for them; returns how many. */
int gl_owner_flood(struct gl_owner *o, int idx, const void *tok,
		   size_t tlen, uint64_t len, unsigned count);
/* Close its context and reap it; fails unless it exited 0. */
void gl_owner_stop(struct gl_owner *o);
/* SIGKILL it and reap it. */
void gl_owner_kill(struct gl_owner *o);

/*
 * Unaligned sub-ranges of owner region idx (rlen bytes): for each of a
 * fixed set of ranges (1 byte, odd offsets and lengths, the last bytes),
 * the owner exports a token for just that range; this process writes
 * into it from src and reads it back into dst at odd offsets, and checks
 * that the bytes arrived and that the bytes beside the range did not
 * change, and that one byte more than the token grants is -ERANGE.  src
 * and dst hold at least rlen + 8 bytes.
 */
void gl_subranges(struct xfer_ctx *ctx, struct gl_owner *o, int idx,
		  uint64_t rlen, struct gl_buf *src, struct gl_buf *dst,
		  const char *what);

#endif /* XFER_GPULIB_H */
