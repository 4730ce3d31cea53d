/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_same_device.c - GPU memory of two processes on one GPU.
 *
 * Shows: a client's cudaMalloc buffer written into and read from another
 * client's cudaMalloc buffer on the same GPU through xferd, every byte
 * checked on the GPU after the move and every CQE on XFER_PATH_CUDA_IPC;
 * unaligned sub-ranges of the other client's buffer, through tokens for
 * just those ranges, land exactly there and nowhere beside them; a range
 * registered inside an allocation (as a caching allocator hands out)
 * moves the bytes of that range; and a process moves bytes between two
 * GPU regions of its own.
 */
#include <string.h>

#include "gpulib.h"

#define LEN (16u << 20)

int main(int argc, char **argv)
{
	struct gl_buf src, dst;
	struct gl_owner o;
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;

	gl_owner_entry(argc, argv);
	gl_require_gpus(1);
	struct xfer_ctx *ctx = tl_open();
	gl_owner_start(&o, NULL);

	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN + 8, &src);
	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN + 8, &dst);
	int t = gl_owner_alloc(&o, GL_DEVICE, 0, LEN, NULL);
	T_ASSERT(t >= 0, "the other client's registration: %s",
		 xfer_strerror(t));

	/* The whole region, both ways. */
	size_t tlen = gl_owner_export(&o, t, 0, LEN, tok);
	T_ASSERT(gl_token_mem_kind(tok, tlen) == GL_MEM_CUDA, "token kind");
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	gl_fill(&src, 0, LEN, 1, 0);
	gl_owner_fill(&o, t, 0, LEN, 2, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(rem), 0,
		 LEN, "write, whole region");
	size_t bad = gl_owner_check(&o, t, 0, LEN, 1, 0);
	T_ASSERT(!bad, "write, whole region: byte %zu", bad - 1);
	gl_owner_fill(&o, t, 0, LEN, 3, 0);
	gl_rw_ok(ctx, XFER_OP_READ, dst.handle, 0, xfer_remote_handle(rem), 0,
		 LEN, "read, whole region");
	bad = gl_check(&dst, 0, LEN, 3, 0);
	T_ASSERT(!bad, "read, whole region: byte %zu", bad - 1);
	printf("whole region, write and read: ok\n");

	gl_subranges(ctx, &o, t, LEN, &src, &dst, "same GPU");

	/* A range inside an allocation: its offset must be honoured. */
	struct gl_buf inner = src;
	inner.ptr = src.ptr + 333;
	inner.len = 1u << 20;
	inner.mem = NULL;
	T_OK(gl_reg(ctx, &inner));
	gl_fill(&src, 0, LEN, 4, 0);
	gl_owner_fill(&o, t, 0, 2u << 20, 5, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, inner.handle, 0, xfer_remote_handle(rem),
		 100, inner.len, "write from a range inside an allocation");
	bad = gl_owner_check(&o, t, 100, inner.len, 4, 333);
	T_ASSERT(!bad, "range inside an allocation: byte %zu", bad - 1);
	T_ASSERT(!gl_owner_check(&o, t, 0, 100, 5, 0) &&
		 !gl_owner_check(&o, t, 100 + inner.len, 4096, 5,
				 100 + inner.len),
		 "range inside an allocation: bytes beside it changed");
	T_OK(xfer_dereg(ctx, inner.mem));
	printf("a range inside an allocation: ok\n");

	/* Between two regions of this process. */
	gl_fill(&src, 0, LEN, 6, 0);
	gl_fill(&dst, 0, LEN, 7, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 11, dst.handle, 13, LEN - 24,
		 "write between own regions");
	bad = gl_check(&dst, 13, LEN - 24, 6, 11);
	T_ASSERT(!bad, "own regions: byte %zu", bad - 1);
	T_ASSERT(!gl_check(&dst, 0, 13, 7, 0), "own regions: bytes before");
	printf("between two regions of one process: ok\n");

	T_OK(xfer_unimport(ctx, rem));
	gl_owner_stop(&o);
	gl_buf_free(ctx, &src, true);
	gl_buf_free(ctx, &dst, true);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
