/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_register.c - what xfer_reg makes of each kind of memory a CUDA
 * program holds.
 *
 * Shows: memory xferd cannot import is refused with -ENOTSUP by libxfer
 * itself, before anything reaches xferd: a range that runs past its
 * cudaMalloc allocation, cudaMallocAsync pool memory, managed memory, VMM
 * memory created without a shareable handle type.  cudaMalloc memory
 * registers as GPU memory (its tokens say MEM_CUDA), and so do a range
 * inside an allocation (what a caching allocator hands out), VMM memory
 * created with a POSIX fd handle type, and cudaMalloc memory registered
 * from a thread that has no CUDA context current.  Pinned host memory
 * (cudaMallocHost) and malloc'd memory stay host memory (CMA) and their
 * bytes move.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "gpulib.h"

#define LEN (4u << 20)

static struct xfer_ctx *ctx;

static void expect_refused(enum gl_kind kind, size_t len, size_t reg_len)
{
	struct gl_buf b;
	struct xfer_mem *mem = NULL;

	gl_alloc(ctx, kind, 0, len, &b);
	int rc = xfer_reg(ctx, b.ptr, reg_len, &mem);
	T_ASSERT(rc == -ENOTSUP,
		 "registering %zu bytes of %s memory (%zu allocated): %d (%s), "
		 "expected -ENOTSUP", reg_len, gl_kind_name(kind), len, rc,
		 xfer_strerror(rc));
	gl_buf_free(ctx, &b, false);
	printf("refused as expected: %s, %zu of %zu bytes\n",
	       gl_kind_name(kind), reg_len, len);
}

static uint32_t kind_of(const struct gl_buf *b, uint64_t off, uint64_t len)
{
	uint8_t tok[XFER_TOKEN_MAX];

	return gl_token_mem_kind(tok, gl_export(b, off, len, tok));
}

/* Registration from a thread on which CUDA was never used. */
static void *reg_in_thread(void *arg)
{
	struct gl_buf *b = arg;

	b->handle = (uint64_t)gl_reg(ctx, b);
	return NULL;
}

/* Host memory of a CUDA program still moves by CMA. */
static void host_moves(enum gl_kind kind)
{
	struct gl_buf src, dst;

	gl_buf_alloc(ctx, kind, 0, LEN, &src);
	gl_buf_alloc(ctx, GL_HOST_MEMFD, 0, LEN, &dst);
	T_ASSERT(kind_of(&src, 0, LEN) == GL_MEM_CMA,
		 "%s memory registered as kind %u, expected CMA",
		 gl_kind_name(kind), kind_of(&src, 0, LEN));
	gl_fill(&src, 0, LEN, 71, 0);
	memset(dst.ptr, 0, LEN);
	struct xfer_cqe c = gl_rw(ctx, XFER_OP_WRITE, src.handle, 3, dst.handle,
				  5, LEN - 8);
	T_ASSERT(c.result == (int64_t)(LEN - 8) && c.path == XFER_PATH_CMA,
		 "%s -> host memfd: %lld (%s) path %s", gl_kind_name(kind),
		 (long long)c.result, xfer_strerror((int)c.result),
		 xfer_path_name(c.path));
	T_ASSERT(!tl_check_at(dst.ptr + 5, LEN - 8, 71, 3),
		 "%s -> host memfd: bytes", gl_kind_name(kind));
	gl_buf_free(ctx, &src, true);
	gl_buf_free(ctx, &dst, true);
	printf("%s memory moves as host memory (cma)\n", gl_kind_name(kind));
}

int main(int argc, char **argv)
{
	gl_owner_entry(argc, argv);
	gl_require_gpus(1);
	ctx = tl_open();

	/* Refused by libxfer: these pass whatever xferd supports. */
	expect_refused(GL_DEVICE, LEN, LEN + 1);
	expect_refused(GL_POOL, LEN, LEN);
	expect_refused(GL_MANAGED, LEN, LEN);
	expect_refused(GL_VMM_NOFD, LEN, LEN);
	{
		/* A range that starts inside and ends outside. */
		struct gl_buf b;
		struct xfer_mem *mem;
		gl_alloc(ctx, GL_DEVICE, 0, LEN, &b);
		int rc = xfer_reg(ctx, b.ptr + LEN - 4096, 8192, &mem);
		T_ASSERT(rc == -ENOTSUP, "a range past the allocation's end: %d",
			 rc);
		gl_buf_free(ctx, &b, false);
	}

	/* Host memory of a CUDA program. */
	host_moves(GL_PINNED);
	host_moves(GL_HOST_MALLOC);

	/* GPU memory, accepted by xferd. */
	struct gl_buf dev, vmm, inner, other;
	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN, &dev);
	T_ASSERT(kind_of(&dev, 0, LEN) == GL_MEM_CUDA,
		 "cudaMalloc memory registered as kind %u",
		 kind_of(&dev, 0, LEN));
	T_ASSERT(kind_of(&dev, 17, 1000) == GL_MEM_CUDA, "sub-range token kind");
	printf("cudaMalloc memory registers as GPU memory\n");

	/* A block inside the allocation, as a caching allocator gives. */
	inner = dev;
	inner.ptr = dev.ptr + 65536 + 3;
	inner.len = LEN / 2;
	inner.mem = NULL;
	T_OK(gl_reg(ctx, &inner));
	T_ASSERT(kind_of(&inner, 0, inner.len) == GL_MEM_CUDA,
		 "inner range kind");
	T_OK(xfer_dereg(ctx, inner.mem));
	printf("a range inside an allocation registers as GPU memory\n");

	gl_buf_alloc(ctx, GL_VMM, 0, LEN + 4096, &vmm);
	T_ASSERT(kind_of(&vmm, 0, vmm.len) == GL_MEM_CUDA, "VMM memory kind");
	printf("VMM memory with a POSIX fd handle registers as GPU memory\n");

	gl_alloc(ctx, GL_DEVICE, 0, LEN, &other);
	pthread_t th;
	T_ASSERT(pthread_create(&th, NULL, reg_in_thread, &other) == 0,
		 "pthread_create");
	pthread_join(th, NULL);
	T_ASSERT(other.mem, "registering from a thread without a CUDA "
		 "context: %s", xfer_strerror((int)other.handle));
	other.handle = xfer_mem_handle(other.mem);
	T_ASSERT(kind_of(&other, 0, LEN) == GL_MEM_CUDA,
		 "kind when registered from another thread");
	printf("registration from a thread without a CUDA context works\n");

	gl_buf_free(ctx, &other, true);
	gl_buf_free(ctx, &vmm, true);
	gl_buf_free(ctx, &dev, true);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
