/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ring_phase.c - per-entry phase of the ring ((F) and (G) of
 * common/ring.h): the stamps never repeat from one lap to the next,
 * across the 32-bit wrap of the indices and the 16-bit wrap of the CQ
 * seq; a zeroed ring never reads as ready; a slot reused after a full
 * lap is not ready until stamped again; what a client writes before
 * xfer_submit is not taken; a run waits for its tail; lies are bounded.  One thread, both halves; test_ring.c tests
 * the tails-only protocol.
 */
#include <stdlib.h>
#include <string.h>

#include "common/ring.h"
#include "ring_fixture.h"
#include "suites.h"

static bool by_tail;  /* xferd's mode, for sq_ready() (F); per ring */

/* A fresh ring, as a negotiation with phase leaves it. */
static void phase_ring_open(struct test_ring *r, uint32_t sq_entries)
{
	test_ring_open(r, sq_entries);
	ck_assert(!r->v.phase);  /* only a negotiation turns it on */
	r->v.phase = true;
	by_tail = false;
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

/* With phase, entries published past head (F), as xferd counts them. */

static uint32_t sq_ready(struct test_ring *r, uint32_t head, uint32_t *known)
{
	return ring_sq_phase_avail(&r->v, head, known, &by_tail);
}

/* A zeroed ring shows nothing ready on either queue. */
START_TEST(zeroed_ring_not_ready)
{
	struct test_ring r;

	phase_ring_open(&r, 64);
	for (uint32_t i = 0; i < r.v.sq_entries; i++) {
		uint32_t known = i;
		ck_assert_uint_eq(sq_ready(&r, i, &known), 0);
	}
	for (uint32_t i = 0; i < r.v.cq_entries; i++)
		ck_assert(!ring_cqe_ready(&r.v, i));
	test_ring_close(&r);
}
END_TEST

/*
 * The SQ over many laps, as libxfer and xferd use it: slots handed out
 * (unstamped), written with stale-looking flags, submitted in runs of
 * 1..n (one stamp each, RUN past one), taken in parts.  What was written
 * but not submitted is never taken; what is taken comes in order.
 */
START_TEST(sq_phase_across_laps)
{
	struct test_ring r;
	const uint32_t n = 8;
	uint32_t tail = 0, published = 0, head = 0, known = 0;
	uint64_t produced = 0, consumed = 0;

	phase_ring_open(&r, n);
	for (unsigned round = 0; round < 3000; round++) {
		uint32_t want = 1 + round % n;
		uint32_t space = ring_sq_space(&r.v, tail);
		for (uint32_t i = 0; i < want && i < space; i++) {
			ring_sqe_unstamp(&r.v, tail);
			struct xfer_sqe *e = ring_sqe_at(&r.v, tail);
			/* An application that ORs its flags in keeps the
			 * cleared phase bits cleared. */
			e->opcode = XFER_OP_WRITE;
			e->flags |= XFER_SQE_F_LINK;
			e->user_data = produced++;
			tail++;
		}
		/* Written, not submitted: xferd takes nothing new. */
		ck_assert_uint_eq(sq_ready(&r, head, &known), published - head);
		if (tail != published) {
			ring_sqe_stamp(&r.v, published, tail - published > 1);
			/* Stamped, the tail not stored yet: a lone entry is
			 * there if xferd polls stamps, a run waits for the
			 * tail either way. */
			bool mode = by_tail;
			uint32_t k = known, seen = sq_ready(&r, head, &k);
			if (head == published)
				ck_assert_uint_eq(seen, tail - published > 1 || mode
							? 0 : 1);
			by_tail = mode;
			published = tail;
			ring_sq_publish(&r.v, tail);
		}
		uint32_t avail = sq_ready(&r, head, &known);
		ck_assert_uint_le(avail, tail - head);
		/* Take all but one in odd rounds: the rest stays counted. */
		uint32_t take = round % 2 && avail ? avail - 1 : avail;
		for (uint32_t i = 0; i < take; i++) {
			struct xfer_sqe c;
			ring_sqe_copy(&r.v, head, &c);
			ck_assert_uint_eq(c.user_data, consumed++);
			ck_assert_uint_eq(c.flags & ~XFER_SQE_F_PHASE_BITS,
					  XFER_SQE_F_LINK);
			head++;
		}
		ring_sq_release(&r.v, head);
		/* Take the rest of what the runs published. */
		while ((avail = sq_ready(&r, head, &known)) != 0) {
			struct xfer_sqe c;
			ck_assert_uint_le(avail, n);
			ring_sqe_copy(&r.v, head, &c);
			ck_assert_uint_eq(c.user_data, consumed++);
			head++;
		}
		ck_assert_uint_eq(head, tail);
		ring_sq_release(&r.v, head);
	}
	ck_assert_uint_gt(consumed, 100 * n);  /* many laps */
	test_ring_close(&r);
}
END_TEST

/* The same, one entry a submit, every index near the 32-bit wrap: the
 * ring primed as the laps before would have left it (every slot the
 * start of a submit, stamped, then handed out again or not). */
START_TEST(sq_phase_wraps_uint32)
{
	struct test_ring r;
	const uint32_t n = 16;
	uint32_t start = UINT32_MAX - 3 * n + 5, tail = start, head = start,
		 known = start;

	phase_ring_open(&r, n);
	for (uint32_t i = start - n; i != start; i++)
		ring_sqe_stamp(&r.v, i, false);  /* the lap before start */
	ck_assert_uint_eq(sq_ready(&r, head, &known), 0);
	for (unsigned round = 0; round < 6 * n; round++) {
		ring_sqe_unstamp(&r.v, tail);
		ring_sqe_at(&r.v, tail)->user_data = tail;
		ck_assert_uint_eq(sq_ready(&r, head, &known), 0);
		ring_sqe_stamp(&r.v, tail, false);
		tail++;
		ck_assert_uint_eq(sq_ready(&r, head, &known), 1);
		struct xfer_sqe c;
		ring_sqe_copy(&r.v, head, &c);
		ck_assert_uint_eq(c.user_data, head);
		head++;
		/* The tail never stored: the next slot still is not there. */
		ck_assert_uint_eq(sq_ready(&r, head, &known), 0);
	}
	ck_assert_uint_lt(tail, start);  /* it wrapped */
	test_ring_close(&r);
}
END_TEST

/*
 * Lies: a slot holding the other lap's stamp, or garbage without this
 * lap's phase, is not there; a run whose tail is past the ring is
 * returned as it is (for xferd to refuse) and not remembered; a run
 * stamped before its tail counts 0 until the tail comes.
 */
START_TEST(sq_phase_lies)
{
	struct test_ring r;
	const uint32_t n = 8;
	uint32_t known = 0;

	phase_ring_open(&r, n);
	ring_sqe_at(&r.v, 0)->flags = 3u << XFER_SQE_PHASE_SHIFT; /* lap 1's */
	ck_assert_uint_eq(sq_ready(&r, 0, &known), 0);
	ring_sqe_at(&r.v, 0)->flags = 0xcf;  /* everything but the phase */
	ck_assert_uint_eq(sq_ready(&r, 0, &known), 0);
	ring_sqe_stamp(&r.v, 0, true);
	ck_assert_uint_eq(sq_ready(&r, 0, &known), 0);  /* no tail yet */
	ck_assert_uint_eq(known, 0);
	ring_sq_publish(&r.v, 5 * n);
	ck_assert_uint_eq(sq_ready(&r, 0, &known), 5 * n);
	ck_assert_uint_eq(known, 0);  /* not remembered */
	ring_sq_publish(&r.v, 3);
	ck_assert_uint_eq(sq_ready(&r, 0, &known), 3);
	ck_assert_uint_eq(known, 3);
	/* Inside a known run nothing is read: the slots may say anything. */
	ring_sqe_at(&r.v, 1)->flags = 0xff;
	ring_sqe_at(&r.v, 2)->flags = 0;
	ck_assert_uint_eq(sq_ready(&r, 1, &known), 2);
	ck_assert_uint_eq(sq_ready(&r, 2, &known), 1);
	ck_assert_uint_eq(sq_ready(&r, 3, &known), 0);
	test_ring_close(&r);
}
END_TEST

/* After a run xferd polls sq_tail; the lone entry that then comes is
 * seen by the tail, and the one after it by its stamp alone again. */
START_TEST(sq_phase_mode_switch)
{
	struct test_ring r;
	uint32_t known = 0, head = 0;

	phase_ring_open(&r, 8);
	ring_sqe_stamp(&r.v, 0, true);
	ring_sq_publish(&r.v, 3);
	ck_assert_uint_eq(sq_ready(&r, head, &known), 3);
	ck_assert(by_tail);
	head = 3;
	ring_sqe_stamp(&r.v, 3, false);  /* a lone entry, tail not yet */
	ck_assert_uint_eq(sq_ready(&r, head, &known), 0);
	ring_sq_publish(&r.v, 4);
	ck_assert_uint_eq(sq_ready(&r, head, &known), 1);
	ck_assert(!by_tail);
	head = 4;
	ring_sqe_stamp(&r.v, 4, false);  /* by its stamp alone now */
	ck_assert_uint_eq(sq_ready(&r, head, &known), 1);
	ck_assert(!by_tail);
	test_ring_close(&r);
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
	struct test_ring r;
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
	test_ring_close(&r);
}
END_TEST

/* Without phase the CQE goes in whole, as before (an older client
 * sees seq as the reserved 0). */
START_TEST(cq_write_without_phase)
{
	struct test_ring r;

	phase_ring_open(&r, 8);
	r.v.phase = false;
	ring_cqe_write(&r.v, 3, &(struct xfer_cqe){ .user_data = 9 });
	ck_assert_uint_eq(ring_cqe_at(&r.v, 3)->user_data, 9);
	ck_assert_uint_eq(ring_cqe_at(&r.v, 3)->reserved, 0);
	test_ring_close(&r);
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
	tcase_add_test(tc, sq_phase_lies);
	tcase_add_test(tc, sq_phase_mode_switch);
	tcase_add_test(tc, cq_phase_wraps_seq);
	tcase_add_test(tc, cq_write_without_phase);
	suite_add_tcase(s, tc);
	return s;
}
