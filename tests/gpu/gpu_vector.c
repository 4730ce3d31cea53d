/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_vector.c - a KV-cache-shaped batch: 1000 blocks of 64 KiB in one
 * linked vector, between GPU buffers of two processes.
 *
 * Shows: 1000 linked writes scattered over another client's GPU buffer
 * complete with exactly one CQE (the last entry's user_data, the sum of
 * the bytes, XFER_PATH_CUDA_IPC), every block lands in its slot and
 * every slot between them is untouched; the same from host memory into
 * GPU memory, as a gather (1000 linked reads) back into this client's
 * GPU buffer, and, with two GPUs, across GPUs.
 */
#include <sched.h>
#include <string.h>

#include "gpulib.h"

#define BLK     (64u << 10)
#define NBLK    1000u
#define NSLOTS  (2 * NBLK)
#define SRC_LEN ((size_t)NBLK * BLK)
#define TGT_LEN ((size_t)NSLOTS * BLK)
#define FENCE   0xfe11ceull

static struct xfer_ctx *ctx;
static struct gl_owner o;

/* Distinct for i < NBLK: 7919 is prime to 2 * NBLK. */
static uint64_t slot_of(uint64_t i)
{
	return (i * 7919u) % NSLOTS;
}

/* The batch's CQE, then nothing but the fence NOP. */
static void expect_one_cqe(unsigned op, const char *what)
{
	struct xfer_cqe *cp;
	int rc = xfer_wait_cqe(ctx, &cp, 30000);
	T_ASSERT(rc == 0, "%s: no CQE: %s", what, xfer_strerror(rc));
	struct xfer_cqe c = *cp;
	xfer_cq_advance(ctx, 1);
	T_ASSERT(c.user_data == NBLK && c.result == (int64_t)SRC_LEN,
		 "%s: CQE user_data %llu result %lld (%s), expected %u and %zu",
		 what, (unsigned long long)c.user_data, (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "bytes", NBLK,
		 SRC_LEN);
	T_ASSERT(c.path == XFER_PATH_CUDA_IPC, "%s: path %s", what,
		 xfer_path_name(c.path));
	xfer_prep_nop(gl_get_sqe(ctx), FENCE);
	c = tl_submit_wait(ctx);
	T_ASSERT(c.user_data == FENCE, "%s: a second CQE (user_data %llu) for "
		 "one %s batch", what, (unsigned long long)c.user_data,
		 op == XFER_OP_READ ? "read" : "write");
}

/* Scatter local l's blocks into owner region t (on GPU rdev). */
static void scatter(struct gl_buf *l, int t, int rdev, uint64_t seed)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;
	char what[96];

	snprintf(what, sizeof(what), "%u x %u KiB, %s (GPU %d) -> GPU %d",
		 NBLK, BLK >> 10, gl_kind_name(l->kind), l->dev, rdev);
	const uint64_t bg = ~seed;
	gl_fill(l, 0, SRC_LEN, seed, 0);
	gl_owner_fill(&o, t, 0, TGT_LEN, bg, 0);
	size_t tlen = gl_owner_export(&o, t, 0, TGT_LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	for (uint64_t i = 0; i < NBLK; i++) {
		struct xfer_sqe *sqe = gl_get_sqe(ctx);
		xfer_prep_write(sqe, l->handle, i * BLK,
				xfer_remote_handle(rem), slot_of(i) * BLK, BLK,
				i + 1);
		if (i + 1 < NBLK)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ctx) >= 0, "submit");
	expect_one_cqe(XFER_OP_WRITE, what);

	static uint8_t used[NSLOTS];
	memset(used, 0, sizeof(used));
	for (uint64_t i = 0; i < NBLK; i++) {
		uint64_t s = slot_of(i);
		used[s] = 1;
		size_t bad = gl_owner_check(&o, t, s * BLK, BLK, seed, i * BLK);
		T_ASSERT(!bad, "%s: block %llu (slot %llu) byte %zu", what,
			 (unsigned long long)i, (unsigned long long)s, bad - 1);
	}
	for (uint64_t s = 0; s < NSLOTS; s++) {
		if (used[s])
			continue;
		size_t bad = gl_owner_check(&o, t, s * BLK, BLK, bg, s * BLK);
		T_ASSERT(!bad, "%s: gap slot %llu byte %zu was written", what,
			 (unsigned long long)s, bad - 1);
	}
	T_OK(xfer_unimport(ctx, rem));
	printf("%s: one CQE, every block in place: ok\n", what);
}

/* Gather owner region t's scattered blocks back into local l. */
static void gather(struct gl_buf *l, int t, int rdev, uint64_t seed)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;
	char what[96];

	snprintf(what, sizeof(what), "%u x %u KiB, %s (GPU %d) <- GPU %d",
		 NBLK, BLK >> 10, gl_kind_name(l->kind), l->dev, rdev);
	/* Slot s holds the bytes block i must get. */
	for (uint64_t i = 0; i < NBLK; i++)
		gl_owner_fill(&o, t, slot_of(i) * BLK, BLK, seed, i * BLK);
	gl_fill(l, 0, SRC_LEN, ~seed, 0);
	size_t tlen = gl_owner_export(&o, t, 0, TGT_LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	for (uint64_t i = 0; i < NBLK; i++) {
		struct xfer_sqe *sqe = gl_get_sqe(ctx);
		xfer_prep_read(sqe, l->handle, i * BLK, xfer_remote_handle(rem),
			       slot_of(i) * BLK, BLK, i + 1);
		if (i + 1 < NBLK)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ctx) >= 0, "submit");
	expect_one_cqe(XFER_OP_READ, what);
	size_t bad = gl_check(l, 0, SRC_LEN, seed, 0);
	T_ASSERT(!bad, "%s: byte %zu (block %zu)", what, bad - 1,
		 (bad - 1) / BLK);
	T_OK(xfer_unimport(ctx, rem));
	printf("%s: one CQE, every block in place: ok\n", what);
}

int main(int argc, char **argv)
{
	struct gl_buf dev0, host;

	gl_owner_entry(argc, argv);
	int ngpus = gl_require_gpus(1);
	ctx = tl_open();
	gl_owner_start(&o, NULL);

	gl_buf_alloc(ctx, GL_DEVICE, 0, SRC_LEN, &dev0);
	gl_buf_alloc(ctx, GL_HOST_MEMFD, 0, SRC_LEN, &host);
	int t0 = gl_owner_alloc(&o, GL_DEVICE, 0, TGT_LEN, NULL);
	T_ASSERT(t0 >= 0, "registration: %s", xfer_strerror(t0));

	scatter(&dev0, t0, 0, 11);
	scatter(&host, t0, 0, 12);
	gather(&dev0, t0, 0, 13);
	if (ngpus > 1) {
		int t1 = gl_owner_alloc(&o, GL_DEVICE, ngpus - 1, TGT_LEN, NULL);
		T_ASSERT(t1 >= 0, "registration: %s", xfer_strerror(t1));
		scatter(&dev0, t1, ngpus - 1, 14);
		gather(&dev0, t1, ngpus - 1, 15);
	} else {
		printf("one GPU: the cross-GPU vector is not run\n");
	}

	gl_owner_stop(&o);
	gl_buf_free(ctx, &dev0, true);
	gl_buf_free(ctx, &host, true);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
