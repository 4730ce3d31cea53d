/* SPDX-License-Identifier: Apache-2.0 */
/*
 * linked_run.c - runs of small linked writes and reads between two memfd
 * regions (the executor's run path, engine/exec_run.h) move the same
 * bytes and end with the same CQE as descriptor by descriptor.
 *
 * Shows: a linked batch of 600 writes whose sizes cycle through every
 * case of the inline copy (0 to 200 bytes and 4 KiB) lands every range
 * and touches no gap, with one CQE of the summed bytes; the same as
 * reads; a batch that switches between two targets and back, with class
 * and notify flags in the middle, lands in both; a bad entry in the
 * middle of a run (past the grant at either end, an import as the local
 * handle, a malformed entry) completes with the first error, the entries
 * before it moved and none after it; one region at both ends (memmove);
 * a target unimported between the two submissions of one batch fails the
 * entries after it; and a run is no leak of state into the next batch.
 *
 * The target regions belong to a second context (a second client of
 * xferd) in this process, reached through imported tokens.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>

#include "testlib.h"

#define N        600u
#define SLOT     8192u                 /* each entry's place at both ends */
#define LEN      ((size_t)2 * N * SLOT)
#define FENCE    0xfe11ceull

static struct xfer_ctx *ic;            /* initiator */
static struct xfer_ctx *oc;            /* owner of the targets */
static struct tl_buf src, tgt[2];
static struct xfer_remote *rtgt[2];
static unsigned sq_size;               /* the SQ's free space when empty */

/* Entry i's size: every branch of the inline copy, 0 and a large one. */
static uint64_t size_of(uint64_t i)
{
	static const uint64_t sizes[] = { 64, 1, 7, 8, 9, 15, 16, 17, 31, 32,
					  33, 63, 65, 100, 200, 0, 4096, 48 };
	return sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
}

/* Entry i's offset at the target end: distinct slots, scattered. */
static uint64_t toff_of(uint64_t i)
{
	return ((i * 7919u) % (2 * N)) * SLOT + (i % 3);
}

static uint64_t soff_of(uint64_t i)
{
	return i * SLOT + (i % 5);
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

/* Only a NOP submitted after it completes next: the batch had one CQE. */
static void expect_fence(const char *what)
{
	xfer_prep_nop(get_sqe_wait(ic), FENCE);
	struct xfer_cqe c = tl_submit_wait(ic);
	T_ASSERT(c.user_data == FENCE && c.result == 0,
		 "%s: an extra CQE (user_data %llu, result %lld) before the fence",
		 what, (unsigned long long)c.user_data, (long long)c.result);
}

/* Every byte of buf: where an entry i < moved_upto with its bytes at
 * off_of(i) of the entry side, seed's pattern at the entry's source
 * position; everywhere else bg. */
static void check_landed(const uint8_t *buf, uint64_t (*off_of)(uint64_t),
			 uint64_t (*from_of)(uint64_t), const bool *to_this,
			 uint64_t moved_upto, uint64_t seed, uint64_t bg,
			 const char *what)
{
	static uint8_t mark[LEN];

	memset(mark, 0, sizeof(mark));
	for (uint64_t i = 0; i < moved_upto; i++) {
		if (to_this && !to_this[i])
			continue;
		uint64_t o = off_of(i), n = size_of(i);
		size_t bad = tl_check_at(buf + o, n, seed, from_of(i));
		T_ASSERT(!bad, "%s: entry %llu (%llu B at %llu) byte %zu wrong",
			 what, (unsigned long long)i, (unsigned long long)n,
			 (unsigned long long)o, bad - 1);
		memset(mark + o, 1, n);
	}
	for (size_t b = 0; b < LEN; b++) {
		if (mark[b])
			continue;
		size_t end = b;
		while (end < LEN && !mark[end])
			end++;
		size_t bad = tl_check_at(buf + b, end - b, bg, b);
		T_ASSERT(!bad, "%s: byte %zu outside every moved entry written",
			 what, b + bad - 1);
		b = end;
	}
}

static uint64_t sum_sizes(uint64_t n)
{
	uint64_t s = 0;

	for (uint64_t i = 0; i < n; i++)
		s += size_of(i);
	return s;
}

static void wait_batch(uint64_t want_user, int64_t want, const char *what)
{
	struct xfer_cqe c = tl_wait(ic);

	T_ASSERT(c.user_data == want_user, "%s: user_data %llu, want %llu",
		 what, (unsigned long long)c.user_data,
		 (unsigned long long)want_user);
	T_ASSERT(c.result == want, "%s: result %lld (%s), want %lld", what,
		 (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "bytes",
		 (long long)want);
	if (want > 0)
		T_ASSERT(c.path == XFER_PATH_MEMCPY, "%s: path %s", what,
			 xfer_path_name(c.path));
	expect_fence(what);
}

/* N linked writes (or reads) of cycling sizes between src and tgt[0]. */
static void run_batch(bool write, const char *what)
{
	const uint64_t seed = write ? 0x5100 : 0x5200, bg = ~seed;
	uint64_t rh = xfer_remote_handle(rtgt[0]);

	tl_fill(write ? src.ptr : tgt[0].ptr, LEN, seed);
	tl_fill(write ? tgt[0].ptr : src.ptr, LEN, bg);
	for (uint64_t i = 0; i < N; i++) {
		struct xfer_sqe *sqe = get_sqe_wait(ic);
		if (write)
			xfer_prep_write(sqe, src.handle, soff_of(i), rh,
					toff_of(i), size_of(i), i + 1);
		else
			xfer_prep_read(sqe, src.handle, soff_of(i), rh,
				       toff_of(i), size_of(i), i + 1);
		if (i + 1 < N)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ic) == (int)N, "%s: submit", what);
	wait_batch(N, (int64_t)sum_sizes(N), what);
	if (write)
		check_landed(tgt[0].ptr, toff_of, soff_of, NULL, N, seed, bg,
			     what);
	else
		check_landed(src.ptr, soff_of, toff_of, NULL, N, seed, bg,
			     what);
	printf("%s: one CQE, every range, no gap touched: ok\n", what);
}

/* Entries switch targets in runs of 7, with a class or a notification
 * on some linked entries (which leave the run to exec_sqe). */
static void switching_targets(void)
{
	const char *what = "two targets, flags in the middle";
	const uint64_t seed = 0x5300, bg = 0x5301;
	static bool to0[N], to1[N];

	tl_fill(src.ptr, LEN, seed);
	tl_fill(tgt[0].ptr, LEN, bg);
	tl_fill(tgt[1].ptr, LEN, bg);
	for (uint64_t i = 0; i < N; i++) {
		unsigned t = (i / 7) % 2;
		struct xfer_sqe *sqe = get_sqe_wait(ic);
		xfer_prep_write(sqe, src.handle, soff_of(i),
				xfer_remote_handle(rtgt[t]), toff_of(i),
				size_of(i), i + 1);
		to0[i] = t == 0, to1[i] = t == 1;
		if (i % 50 == 10)
			xfer_sqe_set_class(sqe, XFER_CLASS_BULK);
		if (i % 50 == 30)
			xfer_sqe_set_notify(sqe, i);
		if (i + 1 < N)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ic) == (int)N, "%s: submit", what);
	wait_batch(N, (int64_t)sum_sizes(N), what);
	check_landed(tgt[0].ptr, toff_of, soff_of, to0, N, seed, bg, what);
	check_landed(tgt[1].ptr, toff_of, soff_of, to1, N, seed, bg, what);
	/* A notification rides only on a batch's last entry: the owner got
	 * none of those in the middle. */
	struct xfer_cqe *c;
	T_ASSERT(xfer_peek_cqe(oc, &c) == -EAGAIN,
		 "%s: the owner got a notification", what);
	printf("%s: both targets, every range: ok\n", what);
}

static void break_remote_range(struct xfer_sqe *sqe)
{
	sqe->remote_off = LEN - sqe->len + 1;
	if (!sqe->len)
		sqe->remote_off = LEN + 1;
}

static void break_local_range(struct xfer_sqe *sqe)
{
	sqe->local_off = LEN;
	sqe->len = 1;
}

static void break_handle(struct xfer_sqe *sqe)
{
	sqe->local = xfer_remote_handle(rtgt[0]);
}

static void break_opcode(struct xfer_sqe *sqe)
{
	sqe->reserved0 = 1;
}

/* A run with entry bad_at broken: the first error, nothing after it. */
static void bad_in_run(uint64_t bad_at, void (*breaker)(struct xfer_sqe *),
		       int64_t want, const char *what)
{
	const uint64_t seed = 0x5400 + bad_at, bg = 0x5500 + bad_at;
	uint64_t rh = xfer_remote_handle(rtgt[0]);

	tl_fill(src.ptr, LEN, seed);
	tl_fill(tgt[0].ptr, LEN, bg);
	for (uint64_t i = 0; i < N; i++) {
		struct xfer_sqe *sqe = get_sqe_wait(ic);
		xfer_prep_write(sqe, src.handle, soff_of(i), rh, toff_of(i),
				size_of(i), i + 1);
		if (i + 1 < N)
			xfer_sqe_set_link(sqe);
		if (i == bad_at)
			breaker(sqe);
	}
	T_ASSERT(xfer_submit(ic) == (int)N, "%s: submit", what);
	wait_batch(N, want, what);
	check_landed(tgt[0].ptr, toff_of, soff_of, NULL, bad_at, seed, bg,
		     what);
	printf("%s: first error, entries before moved, none after: ok\n",
	       what);
}

/* One region at both ends: first half of src onto its second half,
 * in pieces of cycling sizes. */
static void one_region(void)
{
	const char *what = "one region at both ends";
	const uint64_t seed = 0x5600;
	const uint64_t half = LEN / 2;
	uint64_t off = 0, i = 0, total = 0;

	tl_fill(src.ptr, LEN, seed);
	while (off + size_of(i) <= half && i < N) {
		struct xfer_sqe *sqe = get_sqe_wait(ic);
		xfer_prep_write(sqe, src.handle, off, src.handle, half + off,
				size_of(i), i + 1);
		off += size_of(i), total += size_of(i), i++;
		if (i < N && off + size_of(i) <= half)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ic) == (int)i, "%s: submit", what);
	wait_batch(i, (int64_t)total, what);
	size_t bad = tl_check_at(src.ptr + half, off, seed, 0);
	T_ASSERT(!bad, "%s: byte %zu of the copy wrong", what, bad - 1);
	bad = tl_check_at(src.ptr + half + off, half - off, seed, half + off);
	T_ASSERT(!bad, "%s: byte %zu past the copy written", what, bad - 1);
	printf("%s: %llu entries, every byte: ok\n", what,
	       (unsigned long long)i);
}

/* One batch in two submissions, its target unimported between them:
 * the entries of the second submission fail and move nothing. */
static void unimport_mid_batch(void)
{
	const char *what = "target unimported between submissions";
	const uint64_t seed = 0x5700, bg = 0x5701, half = N / 2;
	uint8_t tok[XFER_TOKEN_MAX];
	uint64_t rh = xfer_remote_handle(rtgt[1]);

	tl_fill(src.ptr, LEN, seed);
	tl_fill(tgt[1].ptr, LEN, bg);
	for (uint64_t i = 0; i < N; i++) {
		if (i == half) {
			T_ASSERT(xfer_submit(ic) == (int)half, "%s: submit",
				 what);
			/* Until xferd took the first half off the SQ. */
			uint64_t deadline = tl_now_ms() + 10000;
			while (xfer_sq_space(ic) < sq_size) {
				T_ASSERT(tl_now_ms() < deadline,
					 "%s: the SQ never drained", what);
				sched_yield();
			}
			struct xfer_cqe *c;
			T_ASSERT(xfer_peek_cqe(ic, &c) == -EAGAIN,
				 "%s: a CQE before the batch's end", what);
			T_OK(xfer_unimport(ic, rtgt[1]));
		}
		struct xfer_sqe *sqe = get_sqe_wait(ic);
		xfer_prep_write(sqe, src.handle, soff_of(i), rh, toff_of(i),
				size_of(i), i + 1);
		if (i + 1 < N)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ic) == (int)(N - half), "%s: submit", what);
	struct xfer_cqe c = tl_wait(ic);
	T_ASSERT(c.user_data == N && c.result < 0,
		 "%s: CQE %llu/%lld, want the last's and an error", what,
		 (unsigned long long)c.user_data, (long long)c.result);
	expect_fence(what);
	check_landed(tgt[1].ptr, toff_of, soff_of, NULL, half, seed, bg, what);
	printf("%s: %s, the first half landed, nothing after: ok\n", what,
	       xfer_strerror((int)c.result));
	T_OK(xfer_import(ic, tok, tl_export(&tgt[1], tok), &rtgt[1]));
}

int main(void)
{
	struct xfer_cqe *c;
	uint8_t tok[XFER_TOKEN_MAX];

	tl_socket();
	ic = tl_open();
	oc = tl_open();
	sq_size = xfer_sq_space(ic);
	T_ASSERT(sq_size >= N, "an SQ of %u entries, fewer than a batch", sq_size);
	tl_buf_alloc(ic, TL_HOST, LEN, &src);
	for (unsigned k = 0; k < 2; k++) {
		tl_buf_alloc(oc, TL_HOST, LEN, &tgt[k]);
		T_OK(xfer_import(ic, tok, tl_export(&tgt[k], tok), &rtgt[k]));
	}

	run_batch(true, "linked writes of 0 to 4096 B");
	run_batch(false, "linked reads of 0 to 4096 B");
	switching_targets();
	bad_in_run(300, break_remote_range, -ERANGE,
		   "entry 300 past the target's grant");
	bad_in_run(301, break_local_range, -ERANGE,
		   "entry 301 past the source's grant");
	bad_in_run(2, break_handle, -EACCES,
		   "entry 2's local an import");
	bad_in_run(450, break_opcode, -EINVAL, "entry 450 malformed");
	/* The batch state is reset: the next run succeeds again. */
	run_batch(true, "linked writes after the failures");
	one_region();
	unimport_mid_batch();
	run_batch(true, "linked writes after the unimport");

	/* The owner saw none of this as notifications. */
	T_ASSERT(xfer_peek_cqe(oc, &c) == -EAGAIN, "owner got a CQE");
	for (unsigned k = 0; k < 2; k++) {
		T_OK(xfer_unimport(ic, rtgt[k]));
		tl_buf_free(oc, &tgt[k]);
	}
	tl_buf_free(ic, &src);
	xfer_close(ic);
	xfer_close(oc);
	return 0;
}
