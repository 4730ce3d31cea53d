/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ring_phase.c - per-entry phase of the ring ((F) and (G) of
 * common/ring.h): the stamps never repeat from one lap to the next,
 * across the 32-bit wrap of the indices and the 16-bit wrap of the CQ
 * seq; a zeroed ring never reads as ready; a slot reused after a full
 * lap is not ready until stamped again; what a client writes before
 * xfer_submit is not taken.  One thread, both halves; test_ring.c tests
 * the tails-only protocol.
 */
#include <stdlib.h>
#include <string.h>

#include "common/ring.h"
#include "suites.h"

struct phase_ring {
	struct xfer_ring_offsets off;
	void *mem;
	struct ring_view v;
};

static void phase_ring_open(struct phase_ring *r, uint32_t sq_entries)
{
	ck_assert_int_eq(ring_layout(sq_entries, 0, &r->off), 0);
	r->mem = aligned_alloc(4096, (r->off.map_size + 4095) & ~4095u);
	ck_assert_ptr_nonnull(r->mem);
	memset(r->mem, 0, r->off.map_size);
	*(uint32_t *)((char *)r->mem + r->off.magic) = XFER_RING_MAGIC;
	ck_assert_int_eq(ring_view_init(&r->v, r->mem, r->off.map_size,
					&r->off), 0);
	ck_assert(!r->v.phase);  /* only a negotiation turns it on */
	r->v.phase = true;
}

static void phase_ring_close(struct phase_ring *r)
{
	free(r->mem);
	r->mem = NULL;
}

/* Indices worth checking for a queue of n entries: the start, every
 * lap boundary near the 32-bit wrap, and (CQ) near lap 65535. */
static const uint32_t probe_base[] = {
	0, 1, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu - 70000u,
};

/* The stamp of a lap is never the previous lap's, nor 0, for every
 * ring size and around every wrap. */
START_TEST(stamps_differ_between_laps)
{
	for (uint32_t sq = RING_MIN_SQ_ENTRIES; sq <= RING_MAX_SQ_ENTRIES;
	     sq *= 2) {
		struct ring_view v = {
			.sq_entries = sq, .cq_entries = 2 * sq,
			.sq_shift = (uint8_t)__builtin_ctz(sq),
			.cq_shift = (uint8_t)__builtin_ctz(2 * sq),
		};
		for (size_t b = 0; b < sizeof(probe_base) / sizeof(*probe_base);
		     b++)
			for (uint32_t k = 0; k < 140000u; k += 7) {
				uint32_t i = probe_base[b] + k;
				ck_assert_uint_ne(ring_sq_phase(&v, i), 0);
				ck_assert_uint_ne(ring_sq_phase(&v, i),
						  ring_sq_phase(&v, i - sq));
				ck_assert_uint_eq(ring_sq_phase(&v, i) &
						  ~XFER_SQE_F_PHASE_MASK, 0);
				ck_assert_uint_ne(ring_cq_seq(&v, i),
						  ring_cq_seq(&v, i - 2 * sq));
			}
		/* Across the 32-bit wrap exactly, both queues. */
		for (uint32_t i = UINT32_MAX - 4 * sq; i != 4 * sq; i++) {
			ck_assert_uint_ne(ring_sq_phase(&v, i),
					  ring_sq_phase(&v, i - sq));
			ck_assert_uint_ne(ring_cq_seq(&v, i),
					  ring_cq_seq(&v, i - 2 * sq));
		}
		/* The first lap, what a fresh (zeroed) ring holds. */
		for (uint32_t i = 0; i < 2 * sq; i++) {
			ck_assert_uint_eq(ring_cq_seq(&v, i), 1);
			if (i < sq)
				ck_assert_uint_eq(ring_sq_phase(&v, i),
						  1u << XFER_SQE_PHASE_SHIFT);
		}
	}
}
END_TEST

/* A zeroed ring shows nothing ready on either queue. */
START_TEST(zeroed_ring_not_ready)
{
	struct phase_ring r;

	phase_ring_open(&r, 64);
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, 0, UINT32_MAX), 0);
	for (uint32_t i = 0; i < r.v.sq_entries; i++)
		ck_assert(!ring_sqe_ready(&r.v, i));
	for (uint32_t i = 0; i < r.v.cq_entries; i++)
		ck_assert(!ring_cqe_ready(&r.v, i));
	phase_ring_close(&r);
}
END_TEST

/*
 * The SQ over many laps: what a client wrote but did not stamp yet
 * (xfer_prep_* clears the phase bits) is not taken; a stamped run is
 * taken in order; a slot written again a lap later keeps the old lap's
 * stamp, which is not ready.
 */
START_TEST(sq_phase_across_laps)
{
	struct phase_ring r;
	const uint32_t n = 8;
	uint32_t tail = 0, head = 0;
	uint64_t produced = 0, consumed = 0;

	phase_ring_open(&r, n);
	for (unsigned round = 0; round < 1000; round++) {
		uint32_t want = 1 + round % n;
		uint32_t space = ring_sq_space(&r.v, tail);
		uint32_t from = tail;
		for (uint32_t i = 0; i < want && i < space; i++) {
			struct xfer_sqe *s = ring_sqe_at(&r.v, tail);
			/* The slot holds its previous lap: not ready. */
			ck_assert(!ring_sqe_ready(&r.v, tail));
			*s = (struct xfer_sqe){ .opcode = XFER_OP_WRITE,
						.flags = XFER_SQE_F_LINK,
						.user_data = produced++ };
			ck_assert(!ring_sqe_ready(&r.v, tail));
			tail++;
		}
		/* Written, not submitted: xferd takes nothing new. */
		ck_assert_uint_eq(ring_sq_ready_run(&r.v, head, n), from - head);
		for (uint32_t i = from; i != tail; i++)
			ring_sqe_stamp(&r.v, i);
		ring_sq_publish(&r.v, tail);
		uint32_t run = ring_sq_ready_run(&r.v, head, UINT32_MAX);
		ck_assert_uint_eq(run, tail - head);
		/* Take all but one in odd rounds: the rest stays ready. */
		uint32_t take = round % 2 && run ? run - 1 : run;
		for (uint32_t i = 0; i < take; i++) {
			struct xfer_sqe c;
			ring_sqe_copy(&r.v, head, &c);
			ck_assert_uint_eq(c.user_data, consumed++);
			ck_assert_uint_eq(c.flags & ~XFER_SQE_F_PHASE_MASK,
					  XFER_SQE_F_LINK);
			head++;
		}
		ring_sq_release(&r.v, head);
		ck_assert_uint_eq(ring_sq_ready_run(&r.v, head, n), run - take);
	}
	ck_assert_uint_gt(consumed, 100 * n);  /* many laps */
	phase_ring_close(&r);
}
END_TEST

/* The same, with every index near the 32-bit wrap: the ring primed as
 * the laps before would have left it. */
START_TEST(sq_phase_wraps_uint32)
{
	struct phase_ring r;
	const uint32_t n = 16;
	uint32_t start = UINT32_MAX - 3 * n + 5, tail = start, head = start;

	phase_ring_open(&r, n);
	for (uint32_t i = start - n; i != start; i++)
		ring_sqe_stamp(&r.v, i);  /* the lap before start */
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, head, n), 0);
	for (unsigned round = 0; round < 6 * n; round++) {
		*ring_sqe_at(&r.v, tail) = (struct xfer_sqe){
			.user_data = tail };
		ck_assert(!ring_sqe_ready(&r.v, tail));
		ring_sqe_stamp(&r.v, tail);
		tail++;
		ck_assert_uint_eq(ring_sq_ready_run(&r.v, head, n), 1);
		struct xfer_sqe c;
		ring_sqe_copy(&r.v, head, &c);
		ck_assert_uint_eq(c.user_data, head);
		head++;
		ck_assert_uint_eq(ring_sq_ready_run(&r.v, head, n), 0);
	}
	ck_assert_uint_lt(tail, start);  /* it wrapped */
	phase_ring_close(&r);
}
END_TEST

/* A run is never longer than the ring, whatever the client stamps. */
START_TEST(sq_ready_run_bounded)
{
	struct phase_ring r;
	const uint32_t n = 8;

	phase_ring_open(&r, n);
	for (uint32_t i = 0; i < n; i++)
		ring_sqe_stamp(&r.v, i);
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, 0, UINT32_MAX), n);
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, 0, 3), 3);
	/* Lap 1 would need phase 3: the slots say 1, nothing is ready. */
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, n, UINT32_MAX), 0);
	/* Lap 1 stamped everywhere: lap 0's entries are gone, lap 1's are
	 * there, and the run stops where lap 2 would begin. */
	for (uint32_t i = n; i < 2 * n; i++)
		ring_sqe_stamp(&r.v, i);
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, 4, UINT32_MAX), 0);
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, n + 4, UINT32_MAX), 4);
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, n, UINT32_MAX), n);
	/* Garbage in the phase bits (0, or the other lap's) reads as not
	 * published, never as more. */
	ring_sqe_at(&r.v, n + 2)->flags = 0;
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, n, UINT32_MAX), 2);
	ring_sqe_at(&r.v, n + 2)->flags = 0xff;
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, n, UINT32_MAX), n);
	ring_sqe_at(&r.v, n + 2)->flags = 1u << XFER_SQE_PHASE_SHIFT;
	ck_assert_uint_eq(ring_sq_ready_run(&r.v, n, UINT32_MAX), 2);
	phase_ring_close(&r);
}
END_TEST

/*
 * The CQ through more than 2^16 laps (the seq wraps) on the smallest
 * ring: before xferd writes an entry its slot is not ready, after it is,
 * with the entry's fields as written; never the seq xferd got from the
 * caller's struct.
 */
START_TEST(cq_phase_wraps_seq)
{
	struct phase_ring r;
	uint32_t tail = 0, head = 0, stamped = 0;

	phase_ring_open(&r, RING_MIN_SQ_ENTRIES);
	const uint32_t cn = r.v.cq_entries;
	const uint32_t total = cn * 65536u * 2 + 3 * cn + 5;

	while (head != total) {
		/* xferd: fill what the CQ has room for, in steps of 1-3. */
		uint32_t room = ring_cq_space(&r.v, tail);
		uint32_t step = 1 + tail % 3;
		for (uint32_t i = 0; i < step && i < room && tail != total; i++) {
			ck_assert(!ring_cqe_ready(&r.v, tail));
			ring_cqe_write(&r.v, tail, &(struct xfer_cqe){
				.user_data = tail, .result = -(int64_t)tail,
				.path = XFER_PATH_MEMCPY, .seq = 0x5a5a,
				.handle = ~(uint64_t)tail });
			/* written, not yet visible: seq comes at publish */
			ck_assert(!ring_cqe_ready(&r.v, tail));
			tail++;
		}
		/* publish as exec_publish does: the last first */
		for (uint32_t t = tail; t != stamped; t--)
			ring_cqe_stamp(&r.v, t - 1);
		stamped = tail;
		ring_cq_publish(&r.v, tail);
		/* client: take what is there, by seq alone */
		while (ring_cqe_ready(&r.v, head)) {
			const struct xfer_cqe *c = ring_cqe_at(&r.v, head);
			ck_assert_uint_eq(c->user_data, head);
			ck_assert_int_eq(c->result, -(int64_t)head);
			ck_assert_uint_eq(c->handle, ~(uint64_t)head);
			head++;
			if (head % 2 == 0)
				ring_cq_release(&r.v, head);
		}
		ck_assert_uint_eq(head, tail);
		ring_cq_release(&r.v, head);
	}
	ck_assert_uint_eq(ring_cq_avail(&r.v, head), 0);
	phase_ring_close(&r);
}
END_TEST

/* Without phase the CQE goes in whole, as before (an older client
 * sees seq as the reserved 0). */
START_TEST(cq_write_without_phase)
{
	struct phase_ring r;

	phase_ring_open(&r, 8);
	r.v.phase = false;
	ring_cqe_write(&r.v, 3, &(struct xfer_cqe){ .user_data = 9 });
	ck_assert_uint_eq(ring_cqe_at(&r.v, 3)->user_data, 9);
	ck_assert_uint_eq(ring_cqe_at(&r.v, 3)->reserved, 0);
	phase_ring_close(&r);
}
END_TEST

Suite *ring_phase_suite(void)
{
	Suite *s = suite_create("ring_phase");
	TCase *tc = tcase_create("phase");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, stamps_differ_between_laps);
	tcase_add_test(tc, zeroed_ring_not_ready);
	tcase_add_test(tc, sq_phase_across_laps);
	tcase_add_test(tc, sq_phase_wraps_uint32);
	tcase_add_test(tc, sq_ready_run_bounded);
	tcase_add_test(tc, cq_phase_wraps_seq);
	tcase_add_test(tc, cq_write_without_phase);
	suite_add_tcase(s, tc);
	return s;
}
