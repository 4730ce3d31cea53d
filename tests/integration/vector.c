/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vector.c - linked batches complete with one CQE, and many independent
 * descriptors all complete once each.
 *
 * Shows: a batch of 1000 linked 4 KiB writes scattered to distinct
 * offsets completes with exactly one CQE (the last entry's user_data, the
 * sum of the bytes), every block in place and every gap untouched, for
 * memfd and malloc'd memory; a batch three times the SQ, submitted in
 * pieces while the ring drains, still completes once; a batch with a bad
 * entry completes with the first error, the entries before it moved and
 * those after it moved nothing; and 10000 independent NOPs and small
 * writes, the SQ kept full, each complete exactly once with their own
 * user_data and their bytes in place.
 *
 * The target regions belong to a second context (a second client of
 * xferd) in this process, reached through an imported token, so the test
 * can look at the target bytes directly.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>

#include "testlib.h"

#define BLK      4096u
#define NBATCH   1000u
#define NBIG     3000u             /* > 2 * the default SQ of 1024 */
#define NSLOTS   (2 * NBIG)        /* target slots: every other one is a gap */
#define SRC_LEN  ((size_t)NBIG * BLK)
#define TGT_LEN  ((size_t)NSLOTS * BLK)
#define FENCE    0xfe11ceull

static struct xfer_ctx *ic;            /* initiator */
static struct xfer_ctx *oc;            /* owner of the targets */
static struct tl_buf src[2], tgt[2];   /* by enum tl_kind */
static struct xfer_remote *rtgt[2];

/* Block i goes to slot slot_of(i, n): distinct for i < n because the
 * multiplier is prime to 2 * n for the n used here. */
static uint64_t slot_of(uint64_t i, uint64_t n)
{
	return (i * 7919u) % (2 * n);
}

static struct xfer_sqe *get_sqe_wait(struct xfer_ctx *ctx)
{
	uint64_t deadline = tl_now_ms() + 10000;
	struct xfer_sqe *sqe;

	while (!(sqe = xfer_get_sqe(ctx))) {
		T_ASSERT(tl_now_ms() < deadline, "the SQ never drained");
		sched_yield();
	}
	return sqe;
}

/* Nothing but a NOP submitted after it may complete next: proves a
 * batch produced exactly one CQE. */
static void expect_fence(const char *what)
{
	struct xfer_sqe *sqe = get_sqe_wait(ic);

	xfer_prep_nop(sqe, FENCE);
	struct xfer_cqe c = tl_submit_wait(ic);
	T_ASSERT(c.user_data == FENCE && c.result == 0,
		 "%s: an extra CQE (user_data %llu, result %lld) before the fence",
		 what, (unsigned long long)c.user_data, (long long)c.result);
}

static void fill_target_bg(enum tl_kind k, uint64_t bg)
{
	tl_fill(tgt[k].ptr, TGT_LEN, bg);
}

/* Blocks [0, n) of src seed at slot_of(i, n), all other slots bg;
 * blocks at index >= moved_upto are expected to still hold bg. */
static void check_scatter(enum tl_kind k, uint64_t n, uint64_t moved_upto,
			  uint64_t seed, uint64_t bg, const char *what)
{
	static uint8_t used[NSLOTS];

	memset(used, 0, sizeof(used));
	for (uint64_t i = 0; i < n; i++) {
		uint64_t s = slot_of(i, n);
		T_ASSERT(!used[s], "slot %llu used twice", (unsigned long long)s);
		used[s] = 1;
		const uint8_t *p = tgt[k].ptr + s * BLK;
		size_t bad = i < moved_upto ? tl_check_at(p, BLK, seed, i * BLK)
					    : tl_check_at(p, BLK, bg, s * BLK);
		T_ASSERT(!bad, "%s: block %llu (slot %llu) byte %zu: %s", what,
			 (unsigned long long)i, (unsigned long long)s, bad - 1,
			 i < moved_upto ? "not the source's" : "was written");
	}
	for (uint64_t s = 0; s < NSLOTS; s++) {
		if (used[s])
			continue;
		size_t bad = tl_check_at(tgt[k].ptr + s * BLK, BLK, bg, s * BLK);
		T_ASSERT(!bad, "%s: gap slot %llu byte %zu was written", what,
			 (unsigned long long)s, bad - 1);
	}
}

static void prep_block(struct xfer_sqe *sqe, enum tl_kind sk, enum tl_kind tk,
		       uint64_t i, uint64_t n, bool last)
{
	xfer_prep_write(sqe, src[sk].handle, i * BLK,
			xfer_remote_handle(rtgt[tk]), slot_of(i, n) * BLK, BLK,
			i + 1);
	if (!last)
		xfer_sqe_set_link(sqe);
}

/* 1000 linked writes, one submission, one CQE. */
static void linked_batch(enum tl_kind sk, enum tl_kind tk)
{
	const uint64_t seed = 0x1000 + sk * 2 + tk, bg = ~seed;
	char what[64];

	snprintf(what, sizeof(what), "batch of %u, %s -> %s", NBATCH,
		 tl_kind_name(sk), tl_kind_name(tk));
	tl_fill(src[sk].ptr, (size_t)NBATCH * BLK, seed);
	fill_target_bg(tk, bg);
	for (uint64_t i = 0; i < NBATCH; i++)
		prep_block(get_sqe_wait(ic), sk, tk, i, NBATCH, i == NBATCH - 1);
	T_ASSERT(xfer_submit(ic) == (int)NBATCH, "%s: not all submitted", what);
	struct xfer_cqe c = tl_wait(ic);
	T_ASSERT(c.user_data == NBATCH, "%s: user_data %llu, want the last's",
		 what, (unsigned long long)c.user_data);
	T_ASSERT(c.result == (int64_t)NBATCH * BLK, "%s: result %lld (%s)", what,
		 (long long)c.result, xfer_strerror((int)c.result));
	T_ASSERT(c.path == tl_path_for(sk, tk), "%s: path %s", what,
		 xfer_path_name(c.path));
	expect_fence(what);
	check_scatter(tk, NBATCH, NBATCH, seed, bg, what);
	printf("%s: one CQE, all blocks: ok\n", what);
}

/* A batch of NBIG entries through an SQ of fewer, in many submissions. */
static void batch_beyond_sq(void)
{
	const uint64_t seed = 0x2000, bg = 0x2001;
	unsigned submits = 0;
	struct xfer_cqe *cqe;

	tl_fill(src[TL_HOST].ptr, SRC_LEN, seed);
	fill_target_bg(TL_HOST, bg);
	for (uint64_t i = 0; i < NBIG; i++) {
		struct xfer_sqe *sqe = xfer_get_sqe(ic);
		if (!sqe) {
			int n = xfer_submit(ic);
			T_ASSERT(n > 0, "xfer_submit -> %d", n);
			submits++;
			/* The batch is not complete: no CQE may come. */
			T_ASSERT(xfer_peek_cqe(ic, &cqe) == -EAGAIN,
				 "a CQE before the batch's last entry");
			sqe = get_sqe_wait(ic);
		}
		prep_block(sqe, TL_HOST, TL_HOST, i, NBIG, i == NBIG - 1);
	}
	T_ASSERT(xfer_submit(ic) > 0, "last submit");
	submits++;
	T_ASSERT(submits >= 3, "the batch took only %u submissions", submits);
	struct xfer_cqe c = tl_wait(ic);
	T_ASSERT(c.user_data == NBIG && c.result == (int64_t)NBIG * BLK,
		 "batch of %u: CQE %llu/%lld (%s)", NBIG,
		 (unsigned long long)c.user_data, (long long)c.result,
		 xfer_strerror((int)c.result));
	expect_fence("batch beyond the SQ");
	check_scatter(TL_HOST, NBIG, NBIG, seed, bg, "batch beyond the SQ");
	printf("batch of %u in %u submissions: one CQE, all blocks: ok\n", NBIG,
	       submits);
}

/* A batch of n whose entry `bad_at` is broken by `breaker`; another
 * broken entry later must not change the error. */
static void batch_with_error(uint64_t n, uint64_t bad_at,
			     void (*breaker)(struct xfer_sqe *), int64_t want,
			     const char *what)
{
	const uint64_t seed = 0x3000 + bad_at, bg = 0x3100 + bad_at;

	tl_fill(src[TL_HOST].ptr, (size_t)n * BLK, seed);
	fill_target_bg(TL_HOST, bg);
	for (uint64_t i = 0; i < n; i++) {
		struct xfer_sqe *sqe = get_sqe_wait(ic);
		prep_block(sqe, TL_HOST, TL_HOST, i, n, i == n - 1);
		if (i == bad_at)
			breaker(sqe);
		else if (i > bad_at && i == (bad_at + n) / 2)
			sqe->remote = 0; /* -EACCES, but after the first */
	}
	T_ASSERT(xfer_submit(ic) == (int)n, "submit");
	struct xfer_cqe c = tl_wait(ic);
	T_ASSERT(c.user_data == n, "%s: user_data %llu", what,
		 (unsigned long long)c.user_data);
	T_ASSERT(c.result == want, "%s: result %lld (%s), want %s", what,
		 (long long)c.result, xfer_strerror((int)c.result),
		 xfer_strerror((int)want));
	expect_fence(what);
	check_scatter(TL_HOST, n, bad_at, seed, bg, what);
	printf("%s: first error, nothing after it moved: ok\n", what);
}

static void break_range(struct xfer_sqe *sqe)
{
	sqe->remote_off = TGT_LEN - BLK + 1;
}

static void break_opcode(struct xfer_sqe *sqe)
{
	sqe->reserved0 = 1;
}

static void break_handle(struct xfer_sqe *sqe)
{
	sqe->local = xfer_remote_handle(rtgt[TL_HOST]);
}

/* 10000 independent entries, the SQ kept full, every CQE reaped. */
static void many_independent(void)
{
	enum { N = 10000, SMALL = 64 };
	static uint8_t seen[N];
	const uint64_t seed = 0x4000;
	unsigned next = 0, done = 0, full = 0;

	memset(seen, 0, sizeof(seen));
	tl_fill(src[TL_HOST].ptr, (size_t)N * SMALL, seed);
	memset(tgt[TL_HOST].ptr, 0, (size_t)N * SMALL);
	uint64_t deadline = tl_now_ms() + 120000;
	while (done < N) {
		T_ASSERT(tl_now_ms() < deadline, "%u of %u completed", done, N);
		struct xfer_sqe *sqe;
		while (next < N && (sqe = xfer_get_sqe(ic))) {
			/* Even: NOP; odd: a small write to its own place. */
			if (next % 2 == 0)
				xfer_prep_nop(sqe, next);
			else
				xfer_prep_write(sqe, src[TL_HOST].handle,
						(uint64_t)next * SMALL,
						xfer_remote_handle(rtgt[TL_HOST]),
						(uint64_t)next * SMALL, SMALL, next);
			next++;
		}
		if (next < N)
			full++;
		int rc = xfer_submit(ic);
		T_ASSERT(rc >= 0, "xfer_submit -> %d", rc);

		struct xfer_cqe *c;
		unsigned got = 0;
		while (xfer_peek_cqe(ic, &c) == 0 ||
		       (got == 0 && xfer_wait_cqe(ic, &c, 10000) == 0)) {
			uint64_t u = c->user_data;
			T_ASSERT(u < N, "unknown user_data %llu",
				 (unsigned long long)u);
			T_ASSERT(!seen[u], "user_data %llu completed twice",
				 (unsigned long long)u);
			int64_t want = u % 2 ? SMALL : 0;
			unsigned path = u % 2 ? XFER_PATH_MEMCPY : XFER_PATH_NONE;
			T_ASSERT(c->result == want && c->path == path,
				 "entry %llu: result %lld path %s",
				 (unsigned long long)u, (long long)c->result,
				 xfer_path_name(c->path));
			seen[u] = 1;
			xfer_cq_advance(ic, 1);
			done++;
			got++;
		}
		T_ASSERT(got > 0 || done == N, "no completion for 10 s");
	}
	for (unsigned i = 0; i < N; i++) {
		const uint8_t *p = tgt[TL_HOST].ptr + (size_t)i * SMALL;
		if (i % 2) {
			T_ASSERT(!tl_check_at(p, SMALL, seed, (uint64_t)i * SMALL),
				 "write %u: wrong bytes", i);
		} else {
			for (unsigned j = 0; j < SMALL; j++)
				T_ASSERT(p[j] == 0, "NOP %u's bytes written", i);
		}
	}
	printf("%u independent entries (SQ full %u times): each completed once: ok\n",
	       N, full);
}

int main(void)
{
	struct xfer_cqe *c;
	uint8_t tok[XFER_TOKEN_MAX];

	tl_socket();
	ic = tl_open();
	oc = tl_open();
	for (unsigned k = 0; k < 2; k++) {
		tl_buf_alloc(ic, k, SRC_LEN, &src[k]);
		tl_buf_alloc(oc, k, TGT_LEN, &tgt[k]);
		T_OK(xfer_import(ic, tok, tl_export(&tgt[k], tok), &rtgt[k]));
	}

	linked_batch(TL_HOST, TL_HOST);
	linked_batch(TL_MALLOC, TL_MALLOC);
	linked_batch(TL_HOST, TL_MALLOC);
	/* The ring is empty: its free space is its size. */
	unsigned sq = xfer_sq_space(ic);
	if (2 * sq < NBIG)
		batch_beyond_sq();
	else
		printf("batch beyond the SQ: not run, this xferd's SQ has %u entries\n",
		       sq);
	batch_with_error(64, 20, break_range, -ERANGE, "batch of 64, entry 20 out of range");
	batch_with_error(64, 0, break_opcode, -EINVAL, "batch of 64, entry 0 malformed");
	batch_with_error(64, 63, break_handle, -EACCES, "batch of 64, last entry's local an import");
	/* The batch state is reset: the next one succeeds again. */
	linked_batch(TL_HOST, TL_HOST);
	many_independent();

	/* The owner saw none of this as notifications. */
	T_ASSERT(xfer_peek_cqe(oc, &c) == -EAGAIN, "owner got a CQE");
	for (unsigned k = 0; k < 2; k++) {
		T_OK(xfer_unimport(ic, rtgt[k]));
		tl_buf_free(ic, &src[k]);
		tl_buf_free(oc, &tgt[k]);
	}
	xfer_close(ic);
	xfer_close(oc);
	return 0;
}
