/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdma_sched.c - daemon/transport/rdma_sched.c: the order in which
 * the RDMA pump posts the tenants' bulk work requests, under scripted
 * arrivals and queue pair room (no NIC, no clock: the caps' clock is
 * scripted, and the asserts are counts and order).
 */
#include <check.h>
#include <string.h>

#include "transport/rdma_sched.h"
#include "suites.h"

#define STRIPE 16384u

/* A scripted pump: each tenant's requests waiting (their sizes, all
 * STRIPE here but where said), the room the queue pairs have this pass,
 * and the order in which tenants posted. */
struct script {
	unsigned left[TENANT_MAX];    /* requests waiting */
	uint32_t size[TENANT_MAX];    /* bytes each (0: STRIPE) */
	unsigned starts[TENANT_MAX];  /* 0-byte steps first (streams opened) */
	unsigned room;                /* requests the queue pairs take */
	unsigned order[4096];
	unsigned n;
	uint64_t bytes[TENANT_MAX];
};

static int64_t post(void *arg, unsigned tenant)
{
	struct script *sc = arg;

	if (sc->starts[tenant]) {
		sc->starts[tenant]--;
		return 0;
	}
	if (!sc->left[tenant] || !sc->room)
		return -1;
	sc->left[tenant]--;
	sc->room--;
	uint32_t b = sc->size[tenant] ? sc->size[tenant] : STRIPE;
	sc->bytes[tenant] += b;
	if (sc->n < sizeof(sc->order) / sizeof(sc->order[0]))
		sc->order[sc->n++] = tenant;
	return b;
}

static uint32_t waiting(const struct script *sc)
{
	uint32_t m = 0;

	for (unsigned i = 0; i < TENANT_MAX; i++)
		if (sc->left[i] || sc->starts[i])
			m |= 1u << i;
	return m;
}

static void tenants(struct rdma_sched *s, uint32_t w1, uint32_t w2)
{
	struct tenant_table tt;

	memset(&tt, 0, sizeof(tt));
	tt.n = 3;
	tt.t[0].weight = 1;
	tt.t[1].weight = w1;
	tt.t[2].weight = w2;
	rdma_sched_init(s, STRIPE);
	rdma_sched_set_tenants(s, &tt, STRIPE);
}

/* Pumps of room requests each until nothing waits; returns the pumps. */
static unsigned drain(struct rdma_sched *s, struct script *sc, unsigned room,
		      uint64_t now)
{
	unsigned pumps = 0;

	while (waiting(sc) && pumps < 10000) {
		sc->room = room;
		rdma_sched_begin(s, now);
		rdma_sched_bulk(s, waiting(sc), post, sc);
		pumps++;
	}
	return pumps;
}

START_TEST(one_tenant_is_arrival_order)
{
	struct rdma_sched s;
	struct script sc;

	/* No tenants configured: everyone is tenant 0, its requests go
	 * as they come, as many as there is room for. */
	memset(&sc, 0, sizeof(sc));
	tenants(&s, 1, 1);
	sc.left[0] = 10;
	sc.room = 4;
	rdma_sched_begin(&s, 0);
	rdma_sched_bulk(&s, waiting(&sc), post, &sc);
	ck_assert_uint_eq(sc.n, 4);
	ck_assert_uint_eq(sc.left[0], 6);
	ck_assert_uint_eq(drain(&s, &sc, 4, 0), 2);
	ck_assert_uint_eq(sc.bytes[0], 10ull * STRIPE);
}
END_TEST

START_TEST(weights_one_to_three)
{
	struct rdma_sched s;
	struct script sc;

	/* Tenant 1 (weight 1) came first with everything queued, tenant 2
	 * (weight 3) after: while both wait, 3 of 4 requests are 2's. */
	memset(&sc, 0, sizeof(sc));
	tenants(&s, 1, 3);
	sc.left[1] = 400;
	sc.left[2] = 400;
	for (int pump = 0; pump < 50; pump++) {
		sc.room = 8;
		rdma_sched_begin(&s, 0);
		rdma_sched_bulk(&s, waiting(&sc), post, &sc);
	}
	ck_assert_uint_eq(sc.n, 400);
	ck_assert_uint_eq(sc.bytes[1] + sc.bytes[2], 400ull * STRIPE);
	ck_assert_uint_eq(sc.bytes[2], 3 * sc.bytes[1]);
	/* Both progress in every window of 8: order, not a clock. */
	for (unsigned k = 0; k + 8 <= sc.n; k += 8) {
		unsigned one = 0;
		for (unsigned j = k; j < k + 8; j++)
			one += sc.order[j] == 1;
		ck_assert_uint_eq(one, 2);
	}
}
END_TEST

START_TEST(weights_hold_when_room_runs_out)
{
	struct rdma_sched s;
	struct script sc;

	/* The queue pairs take one or two requests a pump (a completion
	 * or two frees them): the shares are still 1:3, in every window. */
	for (unsigned room = 1; room <= 3; room++) {
		memset(&sc, 0, sizeof(sc));
		tenants(&s, 1, 3);
		sc.left[1] = 1000;
		sc.left[2] = 1000;
		for (int pump = 0; pump < 400 / (int)room; pump++) {
			sc.room = room;
			rdma_sched_begin(&s, 0);
			rdma_sched_bulk(&s, waiting(&sc), post, &sc);
		}
		ck_assert_uint_eq(sc.n, 400 / room * room);
		for (unsigned k = 0; k + 4 <= sc.n; k += 4) {
			unsigned one = 0;
			for (unsigned j = k; j < k + 4; j++)
				one += sc.order[j] == 1;
			ck_assert_msg(one == 1, "room %u, window at %u: %u of 4",
				      room, k, one);
		}
	}
}
END_TEST

START_TEST(shares_are_in_bytes)
{
	struct rdma_sched s;
	struct script sc;

	/* Equal weights, requests of 4K against 16K: equal bytes. */
	memset(&sc, 0, sizeof(sc));
	tenants(&s, 1, 1);
	sc.left[1] = 1000;
	sc.size[1] = 4096;
	sc.left[2] = 1000;
	for (int pump = 0; pump < 20; pump++) {
		sc.room = 10;
		rdma_sched_begin(&s, 0);
		rdma_sched_bulk(&s, waiting(&sc), post, &sc);
	}
	ck_assert_uint_eq(sc.bytes[1], sc.bytes[2]);
	ck_assert_uint_eq(sc.n, 200);
	ck_assert_uint_eq(1000 - sc.left[1], 4 * (1000 - sc.left[2]));
}
END_TEST

START_TEST(a_tenant_that_leaves_gives_its_share)
{
	struct rdma_sched s;
	struct script sc;

	memset(&sc, 0, sizeof(sc));
	tenants(&s, 1, 3);
	sc.left[1] = 100;
	sc.left[2] = 6;
	drain(&s, &sc, 8, 0);
	ck_assert_uint_eq(sc.left[1], 0);
	ck_assert_uint_eq(sc.left[2], 0);
	/* 2's six went in the first two turns of 3; 1 had the rest alone,
	 * never waiting for 2's share. */
	unsigned last2 = 0;
	for (unsigned k = 0; k < sc.n; k++)
		if (sc.order[k] == 2)
			last2 = k;
	ck_assert_uint_le(last2, 7);
	/* A step that posts nothing (a stream started) keeps the turn. */
	memset(&sc, 0, sizeof(sc));
	tenants(&s, 1, 1);
	sc.starts[1] = 3;
	sc.left[1] = 1;
	sc.left[2] = 1;
	drain(&s, &sc, 8, 0);
	ck_assert_uint_eq(sc.n, 2);
	ck_assert_uint_eq(sc.order[0], 1);
}
END_TEST

START_TEST(a_capped_tenant_is_paced_not_failed)
{
	struct rdma_sched s;
	struct script sc;
	struct rate_cap caps[TENANT_MAX];
	struct class_stats stats;
	const uint64_t rate = 10 * STRIPE;  /* 10 requests a second */

	memset(&sc, 0, sizeof(sc));
	memset(caps, 0, sizeof(caps));
	memset(&stats, 0, sizeof(stats));
	tenants(&s, 1, 1);
	s.caps = caps;
	s.stats = &stats;
	rate_cap_set(&caps[1], rate, STRIPE, 0);
	sc.left[1] = 30;
	sc.left[2] = 30;
	/* One pump at t = 0: 1 sends its burst (one request, into debt by
	 * none), then is held; 2 takes the rest of the room. */
	sc.room = 20;
	rdma_sched_begin(&s, 0);
	rdma_sched_bulk(&s, waiting(&sc), post, &sc);
	ck_assert_uint_eq(30 - sc.left[1], 1);
	ck_assert_uint_eq(30 - sc.left[2], 19);
	ck_assert_uint_eq(atomic_load(&stats.paced[1]), 1);
	ck_assert_uint_eq(atomic_load(&stats.paced[2]), 0);
	uint64_t wait = rdma_sched_pace_ns(&s);
	ck_assert_uint_gt(wait, 0);
	ck_assert_uint_le(wait, 100000000ull + 1000);
	/* Pumped again once the bucket refills (the timer's job): one
	 * more each time, none ever refused for good. */
	uint64_t now = 0;
	unsigned pumps = 0;
	while (sc.left[1] && pumps < 1000) {
		now += rdma_sched_pace_ns(&s) ? rdma_sched_pace_ns(&s)
					      : 100000000ull;
		sc.room = 20;
		rdma_sched_begin(&s, now);
		rdma_sched_bulk(&s, waiting(&sc), post, &sc);
		pumps++;
	}
	ck_assert_uint_eq(sc.left[1], 0);
	ck_assert_uint_eq(sc.bytes[1], 30ull * STRIPE);
	/* 29 requests at 10 a second: about 2.9 s of scripted clock. */
	ck_assert_uint_ge(now, 2800000000ull);
	ck_assert_uint_le(now, 3100000000ull);
	ck_assert_uint_ge(atomic_load(&stats.paced[1]), 29);
	/* Latency bytes count against the cap as well. */
	ck_assert(!rdma_sched_may(&s, 1));
	rdma_sched_begin(&s, now + 1000000000ull);
	ck_assert(rdma_sched_may(&s, 1));
	rdma_sched_charge(&s, 1, 10 * STRIPE);
	ck_assert(!rdma_sched_may(&s, 1));
	ck_assert_uint_ge(rdma_sched_pace_ns(&s), 900000000ull);
}
END_TEST

START_TEST(stuck_tenant_lets_others_go)
{
	struct rdma_sched s;
	struct script sc;

	/* Tenant 1's queue pairs are full (it posts nothing: -1 at once),
	 * tenant 2 takes the room; the pass ends without spinning. */
	memset(&sc, 0, sizeof(sc));
	tenants(&s, 3, 1);
	sc.left[2] = 5;
	sc.room = 100;
	rdma_sched_begin(&s, 0);
	rdma_sched_bulk(&s, waiting(&sc) | 1u << 1, post, &sc);
	ck_assert_uint_eq(sc.left[2], 0);
	ck_assert_uint_eq(sc.n, 5);
}
END_TEST

Suite *rdma_sched_suite(void)
{
	Suite *s = suite_create("rdma_sched");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, one_tenant_is_arrival_order);
	tcase_add_test(tc, weights_one_to_three);
	tcase_add_test(tc, weights_hold_when_room_runs_out);
	tcase_add_test(tc, shares_are_in_bytes);
	tcase_add_test(tc, a_tenant_that_leaves_gives_its_share);
	tcase_add_test(tc, a_capped_tenant_is_paced_not_failed);
	tcase_add_test(tc, stuck_tenant_lets_others_go);
	suite_add_tcase(s, tc);
	return s;
}
