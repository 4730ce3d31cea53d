/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_staging.c - the pinned staging pool (daemon/mem/staging.c)
 * without GPUs: its halves, exhaustion and waiting (never failing), the
 * order waiters are served in, the latency reserve, and the counts ctl
 * reports.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "local/staged.h"
#include "mem/staging.h"
#include "suites.h"

#define CHUNK 65536u

static struct staging_chunk *handed[32];
static int order[32], nhanded;

struct test_waiter {
	struct staging_waiter w;
	int id;
};

static void on_ready(struct staging_waiter *w, struct staging_chunk *c)
{
	struct test_waiter *tw = (struct test_waiter *)w;

	handed[nhanded] = c;
	order[nhanded++] = tw->id;
}

START_TEST(halves_and_sizes)
{
	/* 1 MiB in 64 KiB chunks: 8 per half. */
	struct staging_pool *sp = staging_create(1u << 20, CHUNK, false);
	struct staging_stats st;

	ck_assert_ptr_nonnull(sp);
	ck_assert_uint_eq(staging_chunk_bytes(sp), CHUNK);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.chunks[STAGING_SEND], 8);
	ck_assert_uint_eq(st.chunks[STAGING_RECV], 8);
	ck_assert_uint_eq(st.free[STAGING_SEND], 8);
	/* Every chunk distinct, writable, of its half. */
	struct staging_chunk *c[8];
	for (int i = 0; i < 8; i++) {
		c[i] = staging_take(sp, STAGING_SEND);
		ck_assert_ptr_nonnull(c[i]);
		ck_assert_uint_eq(c[i]->half, STAGING_SEND);
		ck_assert_uint_eq(c[i]->cap, CHUNK);
		memset(c[i]->p, i, CHUNK);
	}
	for (int i = 0; i < 8; i++)
		ck_assert_uint_eq(c[i]->p[CHUNK - 1], (uint8_t)i);
	/* One half empty leaves the other whole. */
	ck_assert_ptr_null(staging_take(sp, STAGING_SEND));
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.free[STAGING_SEND], 0);
	ck_assert_uint_eq(st.free[STAGING_RECV], 8);
	struct staging_chunk *r = staging_take(sp, STAGING_RECV);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->half, STAGING_RECV);
	staging_give(r);
	for (int i = 0; i < 8; i++)
		staging_give(c[i]);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.free[STAGING_SEND], 8);
	ck_assert_uint_eq(st.free[STAGING_RECV], 8);
	staging_destroy(sp);
	staging_destroy(NULL);
}
END_TEST

START_TEST(tiny_pool_has_two_per_half)
{
	struct staging_pool *sp = staging_create(0, CHUNK, false);
	struct staging_stats st;

	ck_assert_ptr_nonnull(sp);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.chunks[STAGING_SEND], 2);
	ck_assert_uint_eq(st.chunks[STAGING_RECV], 2);
	staging_destroy(sp);
	ck_assert_ptr_null(staging_create(1u << 20, 1000, false));
}
END_TEST

START_TEST(waiters_first_come_first_served)
{
	struct staging_pool *sp = staging_create(4 * CHUNK, CHUNK, false);
	struct staging_chunk *a = staging_take(sp, STAGING_RECV);
	struct staging_chunk *b = staging_take(sp, STAGING_RECV);
	struct test_waiter w[3];
	struct staging_stats st;

	nhanded = 0;
	ck_assert_ptr_null(staging_take(sp, STAGING_RECV));
	for (int i = 0; i < 3; i++) {
		w[i] = (struct test_waiter){ .w.ready = on_ready, .id = i };
		staging_wait(sp, STAGING_RECV, &w[i].w);
	}
	staging_wait(sp, STAGING_RECV, &w[0].w);  /* twice: once in line */
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.waits, 3);
	ck_assert_uint_eq(st.waiting[STAGING_RECV], 3);
	ck_assert_uint_eq(st.waiting[STAGING_SEND], 0);
	/* The second gives up its place. */
	staging_cancel(sp, &w[1].w);
	ck_assert(!w[1].w.waiting);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.waiting[STAGING_RECV], 2);
	/* A chunk back goes to the first in line, never to the free list. */
	staging_give(a);
	ck_assert_int_eq(nhanded, 1);
	ck_assert_int_eq(order[0], 0);
	ck_assert_ptr_eq(handed[0], a);
	ck_assert(handed[0]->taken);
	/* Nobody jumps the queue while someone waits. */
	ck_assert_ptr_null(staging_take(sp, STAGING_RECV));
	staging_give(b);
	ck_assert_int_eq(nhanded, 2);
	ck_assert_int_eq(order[1], 2);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.free[STAGING_RECV], 0);
	ck_assert_uint_eq(st.waiting[STAGING_RECV], 0);
	ck_assert_uint_eq(st.waits, 3);  /* a total, not a gauge */
	/* Nobody waits: back to the free list. */
	staging_give(handed[0]);
	staging_give(handed[1]);
	staging_give(handed[1]);  /* twice is harmless */
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.free[STAGING_RECV], 2);
	ck_assert_int_eq(nhanded, 2);
	staging_destroy(sp);
}
END_TEST

static int cancelled;

/* The stage's end of a chunk (what the pipeline sets as st.end). */
static void chunk_copy_done(struct stage_chunk *c, int64_t res)
{
	if (res == -ECANCELED)
		cancelled++;
	staging_give(staging_chunk_of(c));
}

static const struct stage_ops copy_stage = { .name = "copy" };

/* A chunk still in a stage (a GPU copy) when the pool goes ends through
 * its own completion (the copies were synchronized before). */
START_TEST(destroy_ends_copies)
{
	struct staging_pool *sp = staging_create(4 * CHUNK, CHUNK, false);
	struct staging_chunk *c = staging_take(sp, STAGING_SEND);
	struct test_waiter w = { .w.ready = on_ready, .id = 9 };

	c->st.in = &copy_stage;
	c->st.end = chunk_copy_done;
	staging_take(sp, STAGING_SEND);
	staging_wait(sp, STAGING_SEND, &w.w);
	cancelled = 0;
	nhanded = 0;
	staging_destroy(sp);
	ck_assert_int_eq(cancelled, 1);
	ck_assert_int_eq(nhanded, 0);  /* waiters are dropped, not served */
}
END_TEST

/* The same-node staged path shares the halves with the link: into GPU
 * memory from the receive half, out of it from the send half, in chunks
 * no larger than one bounded CMA call. */
START_TEST(same_node_shares_the_halves)
{
	struct staging_pool *sp = staging_create(4 * CHUNK, CHUNK, false);
	struct test_waiter w = { .w.ready = on_ready, .id = 5 };
	struct staging_stats st;

	ck_assert_int_eq(lstage_half(true), STAGING_RECV);
	ck_assert_int_eq(lstage_half(false), STAGING_SEND);
	ck_assert_uint_eq(lstage_chunk_len(4u << 20), LSTAGE_CHUNK_MAX);
	ck_assert_uint_eq(lstage_chunk_len(CHUNK), CHUNK);
	ck_assert_uint_le(LSTAGE_CHUNK_MAX, 1u << 20);
	/* A link's receive chunks out: CMA -> GPU waits, GPU -> CMA not. */
	struct staging_chunk *a = staging_take(sp, STAGING_RECV);
	struct staging_chunk *b = staging_take(sp, lstage_half(true));
	ck_assert_ptr_null(staging_take(sp, lstage_half(true)));
	nhanded = 0;
	staging_wait(sp, lstage_half(true), &w.w);
	struct staging_chunk *s = staging_take(sp, lstage_half(false));
	ck_assert_ptr_nonnull(s);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.waiting[STAGING_RECV], 1);
	ck_assert_uint_eq(st.waiting[STAGING_SEND], 0);
	ck_assert_uint_eq(st.free[STAGING_SEND], 1);
	staging_give(a);  /* the link's chunk back: to the waiter */
	ck_assert_int_eq(nhanded, 1);
	ck_assert_ptr_eq(handed[0], a);
	staging_give(a);
	staging_give(b);
	staging_give(s);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.free[STAGING_SEND], 2);
	ck_assert_uint_eq(st.free[STAGING_RECV], 2);
	ck_assert_uint_eq(st.waiting[STAGING_RECV], 0);
	staging_destroy(sp);
}
END_TEST

/*
 * The latency reserve: bulk stops at the reserve, latency takes it, a
 * latency waiter is served before a bulk one queued earlier, and a
 * chunk coming back refills the reserve before bulk gets one.
 */
START_TEST(latency_reserve)
{
	/* 8 chunks per half, 2 held for latency. */
	struct staging_pool *sp = staging_create(1u << 20, CHUNK, false);
	struct staging_chunk *bulk[8], *lat[2], *c;
	struct test_waiter bw = { .w.ready = on_ready, .id = 1 };
	struct test_waiter lw = { .w.ready = on_ready, .id = 2,
				  .w.latency = true };
	struct staging_stats st;

	nhanded = 0;
	staging_set_reserve(sp, 2);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.reserve[STAGING_SEND], 2);
	ck_assert_uint_eq(st.reserve[STAGING_RECV], 2);
	for (int i = 0; i < 6; i++)
		ck_assert_ptr_nonnull(bulk[i] = staging_take(sp, STAGING_SEND));
	ck_assert_ptr_null(staging_take(sp, STAGING_SEND));
	ck_assert_ptr_null(staging_take_class(sp, STAGING_SEND, false));
	staging_wait(sp, STAGING_SEND, &bw.w);
	/* A bulk waiter does not hold latency back: the reserve is its. */
	ck_assert_ptr_nonnull(lat[0] = staging_take_class(sp, STAGING_SEND,
							  true));
	ck_assert_ptr_nonnull(lat[1] = staging_take_class(sp, STAGING_SEND,
							  true));
	ck_assert_ptr_null(staging_take_class(sp, STAGING_SEND, true));
	staging_wait(sp, STAGING_SEND, &lw.w);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.reserve_used, 2);
	ck_assert_uint_eq(st.waiting[STAGING_SEND], 2);
	/* The other half is untouched. */
	ck_assert_ptr_nonnull(c = staging_take(sp, STAGING_RECV));
	staging_give(c);

	/* First back: to the latency waiter, queued after the bulk one. */
	staging_give(bulk[0]);
	ck_assert_int_eq(nhanded, 1);
	ck_assert_int_eq(order[0], 2);
	ck_assert_ptr_eq(handed[0], bulk[0]);
	/* Next two refill the reserve; the bulk waiter still waits. */
	staging_give(bulk[1]);
	staging_give(lat[0]);
	ck_assert_int_eq(nhanded, 1);
	ck_assert(bw.w.waiting);
	/* The reserve is whole: the next goes to the bulk waiter. */
	staging_give(lat[1]);
	ck_assert_int_eq(nhanded, 2);
	ck_assert_int_eq(order[1], 1);
	ck_assert_ptr_eq(handed[1], lat[1]);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.free[STAGING_SEND], 2);
	ck_assert_uint_eq(st.waiting[STAGING_SEND], 0);
	ck_assert_uint_eq(st.reserve_used, 3);

	/* Lowered: a bulk waiter gets what is free past it at once. */
	ck_assert_ptr_null(staging_take(sp, STAGING_SEND));
	staging_wait(sp, STAGING_SEND, &bw.w);
	staging_set_reserve(sp, 1);
	ck_assert_int_eq(nhanded, 3);
	ck_assert_int_eq(order[2], 1);
	ck_assert_ptr_null(staging_take(sp, STAGING_SEND));
	/* At most half of a half is held back. */
	staging_set_reserve(sp, 64);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.reserve[STAGING_SEND], 4);
	staging_set_reserve(sp, 0);
	ck_assert_ptr_nonnull(c = staging_take(sp, STAGING_SEND));

	/* Everything back. */
	staging_give(c);
	for (int i = 0; i < nhanded; i++)
		staging_give(handed[i]);
	for (int i = 2; i < 6; i++)
		staging_give(bulk[i]);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.free[STAGING_SEND], 8);
	staging_destroy(sp);
}
END_TEST

/* Latency first, not alone: with latency waiters queued all along, a
 * bulk waiter gets every ninth chunk back (after 8 in a row). */
START_TEST(latency_runs_let_bulk_in)
{
	struct staging_pool *sp = staging_create(1u << 20, CHUNK, false);
	struct staging_chunk *held[8];
	struct test_waiter bw = { .w.ready = on_ready, .id = 1 }, lw[12];
	struct staging_stats st;

	nhanded = 0;
	for (int i = 0; i < 8; i++)
		ck_assert_ptr_nonnull(held[i] = staging_take(sp, STAGING_SEND));
	staging_wait(sp, STAGING_SEND, &bw.w);
	for (int i = 0; i < 12; i++) {
		lw[i] = (struct test_waiter){ .w.ready = on_ready,
					      .id = 10 + i,
					      .w.latency = true };
		staging_wait(sp, STAGING_SEND, &lw[i].w);
	}
	/* Each chunk back goes on at once; the ones handed come back too. */
	for (int i = 0; i < 8; i++)
		staging_give(held[i]);
	for (int i = 0; nhanded < 13; i++)
		staging_give(handed[i]);
	static const int want[13] = { 10, 11, 12, 13, 14, 15, 16, 17, 1,
				      18, 19, 20, 21 };
	for (int i = 0; i < 13; i++)
		ck_assert_int_eq(order[i], want[i]);
	for (int i = 5; i < 13; i++)
		staging_give(handed[i]);
	staging_get_stats(sp, &st);
	ck_assert_uint_eq(st.free[STAGING_SEND], 8);
	ck_assert_uint_eq(st.waiting[STAGING_SEND], 0);
	staging_destroy(sp);
}
END_TEST

Suite *staging_suite(void)
{
	Suite *s = suite_create("staging");
	TCase *tc = tcase_create("pool");

	tcase_add_test(tc, halves_and_sizes);
	tcase_add_test(tc, tiny_pool_has_two_per_half);
	tcase_add_test(tc, waiters_first_come_first_served);
	tcase_add_test(tc, destroy_ends_copies);
	tcase_add_test(tc, same_node_shares_the_halves);
	tcase_add_test(tc, latency_reserve);
	tcase_add_test(tc, latency_runs_let_bulk_in);
	suite_add_tcase(s, tc);
	return s;
}
