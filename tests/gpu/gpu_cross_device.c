/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_cross_device.c - GPU memory of two processes on two GPUs.
 *
 * Shows: 256 MiB written from a client's buffer on the first GPU into
 * another client's buffer on the last GPU and read back, and the same
 * the other way round, every byte checked and every CQE on
 * XFER_PATH_CUDA_IPC; unaligned sub-ranges across the GPUs land exactly
 * where their tokens say; one process moves bytes between its own
 * regions on two GPUs.  Needs two GPUs (else 77).
 */
#include <string.h>

#include "gpulib.h"

#define LEN (256u << 20)
#define SUB (16u << 20)

static struct xfer_ctx *ctx;
static struct gl_owner o;

/* Whole-region write and read between local GPU ldev and owner GPU rdev. */
static void both_ways(int ldev, int rdev, uint64_t seed)
{
	struct gl_buf src, dst;
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;
	char what[64];

	snprintf(what, sizeof(what), "GPU %d <-> GPU %d, %u MiB", ldev, rdev,
		 LEN >> 20);
	gl_buf_alloc(ctx, GL_DEVICE, ldev, LEN, &src);
	gl_buf_alloc(ctx, GL_DEVICE, ldev, LEN, &dst);
	int t = gl_owner_alloc(&o, GL_DEVICE, rdev, LEN, NULL);
	T_ASSERT(t >= 0, "%s: the other client's registration: %s", what,
		 xfer_strerror(t));
	size_t tlen = gl_owner_export(&o, t, 0, LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));

	gl_fill(&src, 0, LEN, seed, 0);
	gl_owner_fill(&o, t, 0, LEN, seed + 1, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(rem), 0,
		 LEN, what);
	size_t bad = gl_owner_check(&o, t, 0, LEN, seed, 0);
	T_ASSERT(!bad, "%s: write, byte %zu", what, bad - 1);

	gl_owner_fill(&o, t, 0, LEN, seed + 2, 0);
	gl_rw_ok(ctx, XFER_OP_READ, dst.handle, 0, xfer_remote_handle(rem), 0,
		 LEN, what);
	bad = gl_check(&dst, 0, LEN, seed + 2, 0);
	T_ASSERT(!bad, "%s: read, byte %zu", what, bad - 1);

	T_OK(xfer_unimport(ctx, rem));
	T_OK(gl_owner_free(&o, t, true));
	gl_buf_free(ctx, &src, true);
	gl_buf_free(ctx, &dst, true);
	printf("%s: write and read ok\n", what);
}

int main(int argc, char **argv)
{
	gl_owner_entry(argc, argv);
	int ngpus = gl_require_gpus(2);
	const int last = ngpus - 1;
	ctx = tl_open();
	gl_owner_start(&o, NULL);

	both_ways(0, last, 100);
	both_ways(last, 0, 200);

	/* Unaligned sub-ranges of a region on the other GPU. */
	struct gl_buf src, dst;
	gl_buf_alloc(ctx, GL_DEVICE, 0, SUB + 8, &src);
	gl_buf_alloc(ctx, GL_DEVICE, 0, SUB + 8, &dst);
	int t = gl_owner_alloc(&o, GL_DEVICE, last, SUB, NULL);
	T_ASSERT(t >= 0, "registration on GPU %d: %s", last, xfer_strerror(t));
	gl_subranges(ctx, &o, t, SUB, &src, &dst, "across GPUs");

	/* One process, its own regions on two GPUs. */
	struct gl_buf far;
	gl_buf_alloc(ctx, GL_DEVICE, last, SUB + 8, &far);
	gl_fill(&src, 0, SUB, 300, 0);
	gl_fill(&far, 0, SUB, 301, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 1, far.handle, 2, SUB - 5,
		 "own regions across GPUs");
	size_t bad = gl_check(&far, 2, SUB - 5, 300, 1);
	T_ASSERT(!bad, "own regions across GPUs: byte %zu", bad - 1);
	T_ASSERT(!gl_check(&far, 0, 2, 301, 0) &&
		 !gl_check(&far, SUB - 3, 3, 301, SUB - 3),
		 "own regions across GPUs: bytes beside the range changed");
	gl_fill(&src, 0, SUB, 302, 0);
	gl_rw_ok(ctx, XFER_OP_READ, src.handle, 7, far.handle, 2, SUB - 5,
		 "own regions across GPUs, read");
	bad = gl_check(&src, 7, SUB - 5, 300, 1);
	T_ASSERT(!bad, "own regions across GPUs, read: byte %zu", bad - 1);
	printf("one process, two GPUs: ok\n");

	gl_owner_stop(&o);
	gl_buf_free(ctx, &far, true);
	gl_buf_free(ctx, &src, true);
	gl_buf_free(ctx, &dst, true);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
