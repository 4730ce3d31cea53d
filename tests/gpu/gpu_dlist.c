/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_dlist.c - prepared descriptor lists between GPU buffers of two
 * processes: a KV-cache transfer of thousands of blocks as one SQE.
 *
 * Shows: a list over every block of this client's GPU buffer and one
 * over the other process's (through its token) are made once; one
 * WRITE_DLIST of random index pairs scatters 4096 blocks of 16 KiB with
 * exactly one CQE (the byte sum, XFER_PATH_CUDA_IPC), every block lands
 * in its slot and every other slot is untouched; a READ_DLIST gathers
 * them back; the same from host memory (xfer_alloc_host) into GPU
 * memory; lists over the same buffer used again with other pairs; and,
 * with two GPUs, across GPUs.  A list whose region is gone fails cleanly.
 */
#include <string.h>

#include "gpulib.h"

#define BLK     (16u << 10)
#define NSLOTS  8192u
#define NPAIRS  4096u
#define LEN     ((size_t)NSLOTS * BLK)
#define FENCE   0xfe11ceull

static struct xfer_ctx *ctx;
static struct gl_owner o;
static uint64_t offsets[NSLOTS];
static uint32_t lidx[NPAIRS], ridx[NPAIRS];

/* One dlist SQE and its one CQE (then nothing but the fence NOP). */
static void run_dlist(unsigned op, struct xfer_dlist *l, struct xfer_dlist *r,
		      const char *what)
{
	struct xfer_sqe *sqe = gl_get_sqe(ctx);
	int rc = xfer_prep_dlist(ctx, sqe, op, l, r, NPAIRS, lidx, ridx, 77);
	T_ASSERT(rc == 0, "%s: xfer_prep_dlist: %s", what, xfer_strerror(rc));
	T_ASSERT(xfer_submit(ctx) >= 0, "submit");
	struct xfer_cqe *cp;
	rc = xfer_wait_cqe(ctx, &cp, 30000);
	T_ASSERT(rc == 0, "%s: no CQE: %s", what, xfer_strerror(rc));
	struct xfer_cqe c = *cp;
	xfer_cq_advance(ctx, 1);
	T_ASSERT(c.user_data == 77 && c.result == (int64_t)NPAIRS * BLK,
		 "%s: CQE user_data %llu result %lld (%s), expected 77 and %zu",
		 what, (unsigned long long)c.user_data, (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "bytes",
		 (size_t)NPAIRS * BLK);
	T_ASSERT(c.path == XFER_PATH_CUDA_IPC, "%s: path %s", what,
		 xfer_path_name(c.path));
	xfer_prep_nop(gl_get_sqe(ctx), FENCE);
	c = tl_submit_wait(ctx);
	T_ASSERT(c.user_data == FENCE, "%s: a second CQE (user_data %llu)",
		 what, (unsigned long long)c.user_data);
}

static struct xfer_dlist *make_list(uint64_t handle)
{
	struct xfer_dlist *dl;
	int rc = xfer_dlist_create(ctx, handle, NSLOTS, offsets, NULL, BLK, &dl);
	T_ASSERT(rc == 0, "xfer_dlist_create: %s", xfer_strerror(rc));
	T_ASSERT(xfer_dlist_count(dl) == NSLOTS, "list count %u",
		 xfer_dlist_count(dl));
	return dl;
}

/* Block lidx[i] of local l -> slot ridx[i] of owner region t. */
static void scatter(struct gl_buf *l, int t, int rdev, uint64_t seed)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;
	char what[128];

	snprintf(what, sizeof(what), "dlist %u x %u KiB, %s (GPU %d) -> GPU %d",
		 NPAIRS, BLK >> 10, gl_kind_name(l->kind), l->dev, rdev);
	tl_pick(lidx, NPAIRS, NSLOTS, seed);
	tl_pick(ridx, NPAIRS, NSLOTS, seed * 3 + 1);
	const uint64_t bg = ~seed;
	gl_fill(l, 0, LEN, seed, 0);
	gl_owner_fill(&o, t, 0, LEN, bg, 0);
	size_t tlen = gl_owner_export(&o, t, 0, LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	struct xfer_dlist *ld = make_list(l->handle);
	struct xfer_dlist *rd = make_list(xfer_remote_handle(rem));
	run_dlist(XFER_OP_WRITE_DLIST, ld, rd, what);

	static uint8_t used[NSLOTS];
	memset(used, 0, sizeof(used));
	for (uint32_t i = 0; i < NPAIRS; i++) {
		uint64_t s = ridx[i];
		used[s] = 1;
		size_t bad = gl_owner_check(&o, t, s * BLK, BLK, seed,
					    (uint64_t)lidx[i] * BLK);
		T_ASSERT(!bad, "%s: pair %u (block %u -> slot %llu) byte %zu",
			 what, i, lidx[i], (unsigned long long)s, bad - 1);
	}
	for (uint64_t s = 0; s < NSLOTS; s++) {
		if (used[s])
			continue;
		size_t bad = gl_owner_check(&o, t, s * BLK, BLK, bg, s * BLK);
		T_ASSERT(!bad, "%s: slot %llu byte %zu was written", what,
			 (unsigned long long)s, bad - 1);
	}
	printf("%s: one CQE, every block in place: ok\n", what);

	/* The same lists again, gathering: slot ridx[i] -> block lidx[i]. */
	snprintf(what, sizeof(what), "dlist %u x %u KiB, %s (GPU %d) <- GPU %d",
		 NPAIRS, BLK >> 10, gl_kind_name(l->kind), l->dev, rdev);
	gl_fill(l, 0, LEN, bg, 0);
	run_dlist(XFER_OP_READ_DLIST, ld, rd, what);
	memset(used, 0, sizeof(used));
	for (uint32_t i = 0; i < NPAIRS; i++) {
		used[lidx[i]] = 1;
		size_t bad = gl_check(l, (uint64_t)lidx[i] * BLK, BLK, seed,
				      (uint64_t)lidx[i] * BLK);
		T_ASSERT(!bad, "%s: block %u byte %zu", what, lidx[i], bad - 1);
	}
	for (uint64_t s = 0; s < NSLOTS; s++) {
		if (used[s])
			continue;
		size_t bad = gl_check(l, s * BLK, BLK, bg, s * BLK);
		T_ASSERT(!bad, "%s: block %llu byte %zu was written", what,
			 (unsigned long long)s, bad - 1);
	}
	printf("%s: one CQE, every block in place: ok\n", what);
	T_OK(xfer_dlist_destroy(ctx, ld));
	T_OK(xfer_dlist_destroy(ctx, rd));
	T_OK(xfer_unimport(ctx, rem));
}

/* A list over an import that went: -ESTALE or -EACCES, nothing moved. */
static void dead_list(struct gl_buf *l, int t)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;

	gl_owner_fill(&o, t, 0, LEN, 5, 0);
	size_t tlen = gl_owner_export(&o, t, 0, LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	struct xfer_dlist *ld = make_list(l->handle);
	struct xfer_dlist *rd = make_list(xfer_remote_handle(rem));
	T_OK(xfer_unimport(ctx, rem));
	tl_pick(lidx, NPAIRS, NSLOTS, 9);
	tl_pick(ridx, NPAIRS, NSLOTS, 10);
	struct xfer_sqe *sqe = gl_get_sqe(ctx);
	int rc = xfer_prep_dlist(ctx, sqe, XFER_OP_WRITE_DLIST, ld, rd, NPAIRS,
				 lidx, ridx, 5);
	T_ASSERT(rc == 0, "xfer_prep_dlist: %s", xfer_strerror(rc));
	struct xfer_cqe c = tl_submit_wait(ctx);
	T_ASSERT(c.result < 0, "a list of a removed import moved %lld bytes",
		 (long long)c.result);
	size_t bad = gl_owner_check(&o, t, 0, LEN, 5, 0);
	T_ASSERT(!bad, "the target changed at byte %zu", bad - 1);
	printf("list of a removed import: %s, nothing moved: ok\n",
	       xfer_strerror((int)c.result));
	xfer_dlist_destroy(ctx, ld);
	xfer_dlist_destroy(ctx, rd);
}

int main(int argc, char **argv)
{
	struct gl_buf dev0, host;

	gl_owner_entry(argc, argv);
	int ngpus = gl_require_gpus(1);
	ctx = tl_open();
	gl_owner_start(&o, NULL);
	for (uint32_t i = 0; i < NSLOTS; i++)
		offsets[i] = (uint64_t)i * BLK;

	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN, &dev0);
	gl_buf_alloc(ctx, GL_HOST_MEMFD, 0, LEN, &host);
	int t0 = gl_owner_alloc(&o, GL_DEVICE, 0, LEN, NULL);
	T_ASSERT(t0 >= 0, "registration: %s", xfer_strerror(t0));

	scatter(&dev0, t0, 0, 11);
	scatter(&dev0, t0, 0, 21);   /* the same buffers, other pairs */
	scatter(&host, t0, 0, 12);
	if (ngpus > 1) {
		int t1 = gl_owner_alloc(&o, GL_DEVICE, ngpus - 1, LEN, NULL);
		T_ASSERT(t1 >= 0, "registration: %s", xfer_strerror(t1));
		scatter(&dev0, t1, ngpus - 1, 14);
	} else {
		printf("one GPU: the cross-GPU list is not run\n");
	}
	dead_list(&dev0, t0);

	gl_owner_stop(&o);
	gl_buf_free(ctx, &dev0, true);
	gl_buf_free(ctx, &host, true);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
