/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fairq.c - daemon/core/fairq.c: the order and the shares of
 * deficit round robin under scripted arrivals, and the rate cap's
 * bucket on a scripted clock (counts and order, no real clock), and
 * the tenants' config sections (config_tenant.c).
 */
#include <check.h>
#include <string.h>

#include "config.h"
#include "core/fairq.h"
#include "suites.h"

#define FRAME 1000u

/* Send nframes frames of FRAME bytes from whichever flow fairq_next
 * names; sent[i]: bytes of flow i.  Flows stay backlogged. */
static void run(struct fairq *q, struct fq_flow *f, unsigned nflows,
		unsigned nframes, uint64_t *sent)
{
	memset(sent, 0, nflows * sizeof(*sent));
	for (unsigned k = 0; k < nframes; k++) {
		struct fq_flow *g = fairq_next(q, NULL, NULL);
		ck_assert_ptr_nonnull(g);
		fairq_charge(g, FRAME);
		sent[g - f] += FRAME;
	}
}

START_TEST(equal_weights_share_equally)
{
	struct fairq q;
	struct fq_flow f[4];
	uint64_t sent[4];

	fairq_init(&q, FRAME);
	for (int i = 0; i < 4; i++) {
		fq_flow_init(&f[i], 1);
		fairq_activate(&q, &f[i]);
	}
	run(&q, f, 4, 4000, sent);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(sent[i], 1000 * FRAME);
}
END_TEST

START_TEST(weights_one_to_three)
{
	struct fairq q;
	struct fq_flow f[2];
	uint64_t sent[2];

	fairq_init(&q, FRAME);
	fq_flow_init(&f[0], 1);
	fq_flow_init(&f[1], 3);
	fairq_activate(&q, &f[0]);
	fairq_activate(&q, &f[1]);
	run(&q, f, 2, 4000, sent);
	ck_assert_uint_eq(sent[0], 1000 * FRAME);
	ck_assert_uint_eq(sent[1], 3000 * FRAME);
}
END_TEST

/* Frames larger than the quantum: shares hold in bytes all the same. */
START_TEST(large_frames_charge_bytes)
{
	struct fairq q;
	struct fq_flow f[2];
	uint64_t sent[2] = { 0, 0 };

	fairq_init(&q, FRAME / 4);
	fq_flow_init(&f[0], 1);
	fq_flow_init(&f[1], 2);
	fairq_activate(&q, &f[0]);
	fairq_activate(&q, &f[1]);
	for (unsigned k = 0; k < 3000; k++) {
		struct fq_flow *g = fairq_next(&q, NULL, NULL);
		fairq_charge(g, FRAME);
		sent[g - f] += FRAME;
	}
	ck_assert_uint_eq(sent[0], 1000 * FRAME);
	ck_assert_uint_eq(sent[1], 2000 * FRAME);
}
END_TEST

/* Order: one flow arriving among others is served within one round;
 * a flow that empties gives its turn away and keeps no credit. */
START_TEST(arrival_and_departure)
{
	struct fairq q;
	struct fq_flow f[3];

	fairq_init(&q, FRAME);
	for (int i = 0; i < 3; i++)
		fq_flow_init(&f[i], 1);
	fairq_activate(&q, &f[0]);
	fairq_activate(&q, &f[1]);
	ck_assert_ptr_eq(fairq_next(&q, NULL, NULL), &f[0]);
	fairq_charge(&f[0], FRAME);
	fairq_activate(&q, &f[2]);           /* arrives now */
	struct fq_flow *order[4];
	for (int k = 0; k < 4; k++) {
		order[k] = fairq_next(&q, NULL, NULL);
		fairq_charge(order[k], FRAME);
	}
	ck_assert_ptr_eq(order[0], &f[1]);
	ck_assert_ptr_eq(order[1], &f[2]);
	ck_assert_ptr_eq(order[2], &f[0]);
	ck_assert_ptr_eq(order[3], &f[1]);
	fairq_deactivate(&q, &f[1]);         /* its client went */
	ck_assert(!f[1].active);
	ck_assert_int_eq(f[1].deficit, 0);
	for (int k = 0; k < 10; k++) {
		struct fq_flow *g = fairq_next(&q, NULL, NULL);
		ck_assert_ptr_ne(g, &f[1]);
		fairq_charge(g, FRAME);
	}
	fairq_deactivate(&q, &f[0]);
	fairq_deactivate(&q, &f[2]);
	ck_assert_ptr_null(fairq_next(&q, NULL, NULL));
}
END_TEST

static bool not_first(const struct fq_flow *f, void *arg)
{
	return f != arg;
}

static bool none(const struct fq_flow *f, void *arg)
{
	(void)f, (void)arg;
	return false;
}

/* A flow over its cap is passed over; the others take its turns. */
START_TEST(ineligible_flows_are_skipped)
{
	struct fairq q;
	struct fq_flow f[2];

	fairq_init(&q, FRAME);
	fq_flow_init(&f[0], 1);
	fq_flow_init(&f[1], 1);
	fairq_activate(&q, &f[0]);
	fairq_activate(&q, &f[1]);
	for (int k = 0; k < 10; k++) {
		struct fq_flow *g = fairq_next(&q, not_first, &f[0]);
		ck_assert_ptr_eq(g, &f[1]);
		fairq_charge(g, FRAME);
	}
	ck_assert_ptr_null(fairq_next(&q, none, NULL));
}
END_TEST

START_TEST(rate_cap_paces)
{
	struct rate_cap c = { 0 };
	uint64_t t = 1000000000ull;   /* a scripted clock, ns */

	rate_cap_set(&c, 1000000, 100000, t);   /* 1 MB/s, 100 kB burst */
	ck_assert(rate_cap_ok(&c, t));
	rate_cap_charge(&c, 150000);             /* in debt by 50 kB */
	ck_assert(!rate_cap_ok(&c, t));
	uint64_t w = rate_cap_wait_ns(&c);
	ck_assert_uint_ge(w, 50000000ull);       /* 50 ms at 1 MB/s */
	ck_assert_uint_le(w, 50100000ull);
	ck_assert(!rate_cap_ok(&c, t + w / 2));
	ck_assert(rate_cap_ok(&c, t + w));
	/* Idle time refills no more than the burst. */
	ck_assert(rate_cap_ok(&c, t + 100ull * 1000000000u));
	ck_assert_int_eq(c.tokens, 100000);
	/* No cap: always. */
	struct rate_cap none_c = { 0 };
	rate_cap_charge(&none_c, 1u << 30);
	ck_assert(rate_cap_ok(&none_c, t));
}
END_TEST

START_TEST(tenant_sections)
{
	struct xferd_config c;
	char err[256];

	config_defaults(&c);
	ck_assert_int_eq(c.tenants.n, 1);
	ck_assert_int_eq(config_parse_line(&c, "[tenant prefill]", err,
					   sizeof(err)), 0);
	ck_assert_int_eq(config_parse_line(&c, "weight = 3", err,
					   sizeof(err)), 0);
	ck_assert_int_eq(config_parse_line(&c, "uid = 1000,1001", err,
					   sizeof(err)), 0);
	ck_assert_int_eq(config_parse_line(&c, "rate = 100M", err,
					   sizeof(err)), 0);
	ck_assert_int_ne(config_parse_line(&c, "tcp_chunk = 4096", err,
					   sizeof(err)), 0);
	ck_assert_int_eq(config_parse_line(&c, "[global]", err,
					   sizeof(err)), 0);
	ck_assert_int_eq(config_parse_line(&c, "tcp_chunk = 4096", err,
					   sizeof(err)), 0);
	ck_assert_int_eq(config_set(&c, "tenant", "decode weight=1 gid=50",
				    err, sizeof(err)), 0);
	ck_assert_int_ne(config_set(&c, "tenant", "x weight=0", err,
				    sizeof(err)), 0);
	ck_assert_int_ne(config_parse_line(&c, "[tenant bad name]", err,
					   sizeof(err)), 0);
	ck_assert_int_eq(c.tenants.n, 3);
	ck_assert_int_eq(c.tenants.t[1].weight, 3);
	ck_assert_uint_eq(c.tenants.t[1].rate, 100u << 20);
	ck_assert_int_eq(tenant_match(&c.tenants, 1001, 7), 1);
	ck_assert_int_eq(tenant_match(&c.tenants, 5, 50), 2);
	ck_assert_int_eq(tenant_match(&c.tenants, 5, 7), 0);
	char buf[CONFIG_VALUE_MAX];
	config_tenant_get(&c, buf, sizeof(buf));
	ck_assert_str_eq(buf, "default weight=1; prefill weight=3 "
			 "uid=1000,1001 rate=104857600; decode weight=1 gid=50");
}
END_TEST

Suite *fairq_suite(void)
{
	Suite *s = suite_create("fairq");
	TCase *tc = tcase_create("drr");

	tcase_add_test(tc, equal_weights_share_equally);
	tcase_add_test(tc, weights_one_to_three);
	tcase_add_test(tc, large_frames_charge_bytes);
	tcase_add_test(tc, arrival_and_departure);
	tcase_add_test(tc, ineligible_flows_are_skipped);
	tcase_add_test(tc, rate_cap_paces);
	tcase_add_test(tc, tenant_sections);
	suite_add_tcase(s, tc);
	return s;
}
