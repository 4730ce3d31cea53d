/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_dlist_large.c - one KV hand-off larger than the ring's index area:
 * 196608 pairs of 16 KiB blocks (3 GiB) from this process's GPU buffer
 * into another process's, as 24 linked list descriptors of 8192 pairs
 * and one CQE.
 *
 * Shows: the client goes on as xferd takes its descriptors (the index
 * area, 1 MiB by default, holds 16 of them), both ways xfer.h offers
 * when xfer_prep_dlist says -EAGAIN: submit and try the same SQE again
 * (nothing unfilled may reach xferd meanwhile), or fill the SQE as a
 * linked NOP and take another.  xferd holds 8 pinned pair slots a GPU;
 * the descriptors that come while all 8 are busy go block by block (the
 * batch-copy kernels).  Either way the batch ends in exactly one CQE with
 * the byte sum, every block lands in its slot, and every other slot is
 * untouched (all read back through xferd and compared word by word).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpulib.h"

#define BLK       (16u << 10)
#define PER_SQE   8192u                  /* pairs a descriptor */
#define NSQE      24u
#define NPAIRS    (PER_SQE * NSQE)       /* 196608 */
#define NSLOTS    (NPAIRS + NPAIRS / 4)
#define LEN       ((size_t)NSLOTS * BLK)
#define CHUNK     (256u << 20)           /* host staging for fill/check */
#define WORDS     (BLK / 8)
#define FENCE     0xfe11ceull
#define FILLER    0xf111e7ull
#define WANT_UD   0x1a76eull

static struct xfer_ctx *ctx;
static struct gl_owner o;
static uint32_t *lidx, *ridx;
static uint64_t *host;

/* Word w of a block whose pattern is `block` under salt. */
static uint64_t word(uint32_t block, uint32_t w, uint64_t salt)
{
	return (((uint64_t)block << 24) | w) * 0x9e3779b97f4a7c15ull ^ salt;
}

/* Every block of GPU buffer b its own pattern (block s: pattern s). */
static void fill(struct gl_buf *b, uint64_t salt)
{
	uint32_t per = CHUNK / BLK;

	GL_CK(cudaSetDevice(b->dev));
	for (uint32_t s0 = 0; s0 < NSLOTS; s0 += per) {
		uint32_t m = NSLOTS - s0 < per ? NSLOTS - s0 : per;
		for (uint32_t i = 0; i < m; i++)
			for (uint32_t w = 0; w < WORDS; w++)
				host[(size_t)i * WORDS + w] = word(s0 + i, w, salt);
		GL_CK(cudaMemcpy(b->ptr + (size_t)s0 * BLK, host,
				 (size_t)m * BLK, cudaMemcpyHostToDevice));
	}
}

/*
 * b holds, in slot ridx[k], block lidx[k] of salt's pattern, and in
 * every other slot s the background pattern s of bg.  Fails the test at
 * the first wrong block.
 */
static void check(struct gl_buf *b, uint64_t salt, uint64_t bg,
		  const char *what)
{
	uint32_t *src_of = malloc((size_t)NSLOTS * sizeof(*src_of));
	uint32_t per = CHUNK / BLK;

	T_ASSERT(src_of, "malloc");
	memset(src_of, 0xff, (size_t)NSLOTS * sizeof(*src_of));
	for (uint32_t k = 0; k < NPAIRS; k++)
		src_of[ridx[k]] = lidx[k];
	GL_CK(cudaSetDevice(b->dev));
	for (uint32_t s0 = 0; s0 < NSLOTS; s0 += per) {
		uint32_t m = NSLOTS - s0 < per ? NSLOTS - s0 : per;
		GL_CK(cudaMemcpy(host, b->ptr + (size_t)s0 * BLK,
				 (size_t)m * BLK, cudaMemcpyDeviceToHost));
		for (uint32_t i = 0; i < m; i++) {
			uint32_t s = s0 + i, from = src_of[s];
			bool moved = from != UINT32_MAX;
			const uint64_t *got = host + (size_t)i * WORDS;
			for (uint32_t w = 0; w < WORDS; w++) {
				uint64_t want = moved ? word(from, w, salt)
						      : word(s, w, bg);
				T_ASSERT(got[w] == want,
					 "%s: slot %u word %u: %#llx, expected "
					 "%#llx (%s)", what, s, w,
					 (unsigned long long)got[w],
					 (unsigned long long)want,
					 moved ? "block moved here"
					       : "slot not in the request");
			}
		}
	}
	free(src_of);
}

/*
 * The request as NSQE linked descriptors, one CQE.  On -EAGAIN (the
 * index area full until xferd takes what is before): with filler false
 * submit and try the same SQE again; with filler true fill it as a
 * linked NOP and take another.  Returns how often the area was full.
 */
static unsigned submit_request(struct xfer_dlist *l, struct xfer_dlist *r,
			       bool filler, const char *what)
{
	unsigned full = 0;
	uint64_t deadline = tl_now_ms() + 30000;

	for (uint32_t k = 0; k < NPAIRS; k += PER_SQE) {
		struct xfer_sqe *sqe = gl_get_sqe(ctx);
		int rc;
		for (;;) {
			rc = xfer_prep_dlist(ctx, sqe, XFER_OP_WRITE_DLIST, l, r,
					     PER_SQE, lidx + k, ridx + k,
					     WANT_UD);
			if (rc != -EAGAIN)
				break;
			full++;
			T_ASSERT(tl_now_ms() < deadline,
				 "%s: the index area stayed full", what);
			if (filler) {
				xfer_prep_nop(sqe, FILLER);
				xfer_sqe_set_link(sqe);
				T_ASSERT(xfer_submit(ctx) >= 0, "submit");
				sqe = gl_get_sqe(ctx);
				continue;
			}
			T_ASSERT(xfer_submit(ctx) >= 0, "submit");
		}
		T_ASSERT(rc == 0, "%s: xfer_prep_dlist: %s", what,
			 xfer_strerror(rc));
		if (k + PER_SQE < NPAIRS)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ctx) >= 0, "submit");
	return full;
}

static void handoff(struct gl_buf *src, struct gl_buf *chk,
		    uint64_t rem_handle, struct xfer_dlist *l,
		    struct xfer_dlist *r, bool filler, uint64_t seed)
{
	char what[160];
	const uint64_t salt = seed * 0x100000001b3ull, bg = ~salt;

	snprintf(what, sizeof(what), "%u pairs x %u KiB in %u linked list "
		 "descriptors (%s on a full index area)", NPAIRS, BLK >> 10,
		 NSQE, filler ? "linked NOP filler" : "submit and retry");
	tl_pick(lidx, NPAIRS, NSLOTS, seed);
	tl_pick(ridx, NPAIRS, NSLOTS, seed * 3 + 1);
	/* The other process's buffer gets the background through xferd. */
	fill(chk, bg);
	gl_rw_ok(ctx, XFER_OP_WRITE, chk->handle, 0, rem_handle, 0, LEN,
		 "background into the destination");
	fill(src, salt);

	uint64_t t0 = tl_now_ms();
	unsigned full = submit_request(l, r, filler, what);
	struct xfer_cqe *cp;
	int rc = xfer_wait_cqe(ctx, &cp, 60000);
	T_ASSERT(rc == 0, "%s: no CQE: %s", what, xfer_strerror(rc));
	struct xfer_cqe c = *cp;
	xfer_cq_advance(ctx, 1);
	uint64_t ms = tl_now_ms() - t0;
	T_ASSERT(c.user_data == WANT_UD && c.result == (int64_t)NPAIRS * BLK,
		 "%s: CQE user_data %#llx result %lld (%s), expected %#llx "
		 "and %llu", what, (unsigned long long)c.user_data,
		 (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "bytes",
		 WANT_UD, (unsigned long long)NPAIRS * BLK);
	T_ASSERT(c.path == XFER_PATH_CUDA_IPC, "%s: path %s", what,
		 xfer_path_name(c.path));
	/* Nothing else may complete: the request was one batch. */
	xfer_prep_nop(gl_get_sqe(ctx), FENCE);
	c = tl_submit_wait(ctx);
	T_ASSERT(c.user_data == FENCE, "%s: a second CQE (user_data %#llx, "
		 "result %lld)", what, (unsigned long long)c.user_data,
		 (long long)c.result);

	gl_rw_ok(ctx, XFER_OP_READ, chk->handle, 0, rem_handle, 0, LEN,
		 "reading the destination back");
	check(chk, salt, bg, what);
	printf("%s: index area full %u times, one CQE in %llu ms, every "
	       "block in place: ok\n", what, full, (unsigned long long)ms);
}

int main(int argc, char **argv)
{
	struct gl_buf src, chk;
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;
	uint64_t *offsets;
	struct xfer_dlist *l, *r;

	gl_owner_entry(argc, argv);
	gl_require_gpus(1);
	if (gl_dev_free(0) < 3 * LEN + (2ull << 30)) {
		printf("skip: GPU 0 has %zu MiB free, this needs %zu\n",
		       gl_dev_free(0) >> 20,
		       (size_t)((3 * LEN + (2ull << 30)) >> 20));
		return 77;
	}
	ctx = tl_open();
	gl_owner_start(&o, NULL);
	lidx = malloc(NPAIRS * sizeof(*lidx));
	ridx = malloc(NPAIRS * sizeof(*ridx));
	offsets = malloc((size_t)NSLOTS * sizeof(*offsets));
	host = malloc(CHUNK);
	T_ASSERT(lidx && ridx && offsets && host, "malloc");
	for (uint32_t i = 0; i < NSLOTS; i++)
		offsets[i] = (uint64_t)i * BLK;

	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN, &src);
	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN, &chk);
	int t = gl_owner_alloc(&o, GL_DEVICE, 0, LEN, NULL);
	T_ASSERT(t >= 0, "registration: %s", xfer_strerror(t));
	size_t tlen = gl_owner_export(&o, t, 0, LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	T_OK(xfer_dlist_create(ctx, src.handle, NSLOTS, offsets, NULL, BLK,
			       &l));
	T_OK(xfer_dlist_create(ctx, xfer_remote_handle(rem), NSLOTS, offsets,
			       NULL, BLK, &r));

	handoff(&src, &chk, xfer_remote_handle(rem), l, r, false, 31);
	handoff(&src, &chk, xfer_remote_handle(rem), l, r, true, 47);
	handoff(&src, &chk, xfer_remote_handle(rem), l, r, false, 59);

	T_OK(xfer_dlist_destroy(ctx, l));
	T_OK(xfer_dlist_destroy(ctx, r));
	T_OK(xfer_unimport(ctx, rem));
	gl_owner_stop(&o);
	gl_buf_free(ctx, &src, true);
	gl_buf_free(ctx, &chk, true);
	xfer_close(ctx);
	free(lidx);
	free(ridx);
	free(offsets);
	free(host);
	printf("ok\n");
	return 0;
}
