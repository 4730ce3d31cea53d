/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_quota.c - per-client and per-uid limits (daemon/quota.c,
 * daemon/uid_usage.c, daemon/budget.c): each limit answers with its own
 * code at exactly its value, bytes near UINT64_MAX do not wrap, the
 * per-uid counts are per uid and kind, refuse at the limit, and come back
 * on release; a uid's record lives while it is held; the fd budget keeps
 * its reserve whatever RLIMIT_NOFILE is.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "budget.h"
#include "quota.h"
#include "suites.h"
#include "uid_usage.h"

START_TEST(region_limits)
{
	struct xferd_config cfg;
	struct client_usage u = { 0 };
	const char *why = NULL;

	config_defaults(&cfg);
	cfg.max_regions = 2;
	cfg.max_region_bytes = 600;

	ck_assert_int_eq(quota_check_region(&cfg, &u, 600, &why), 0);
	ck_assert_int_eq(quota_check_region(&cfg, &u, 601, &why), -EFBIG);
	u.regions = 1;
	ck_assert_int_eq(quota_check_region(&cfg, &u, 400, &why), 0);
	u.regions = 2;
	ck_assert_int_eq(quota_check_region(&cfg, &u, 1, &why), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(why, "max_regions"));
}
END_TEST

/* A budget as budget_apply would leave it, without probing. */
static struct budget test_budget(uint64_t all_fds, uint64_t client_fds,
				 uint64_t uid_fds, uint64_t client_bytes,
				 uint64_t uid_bytes)
{
	return (struct budget){ .all_fds = all_fds, .client_fds = client_fds,
				.uid_fds = uid_fds,
				.client_bytes = client_bytes,
				.uid_bytes = uid_bytes };
}

START_TEST(fd_budget)
{
	struct uid_usage_table *t = uid_usage_table_create();
	struct uid_usage *u1000 = uid_usage_get(t, 1000);
	struct uid_usage *u2000 = uid_usage_get(t, 2000);
	struct uid_usage *u3000 = uid_usage_get(t, 3000);
	struct budget b = test_budget(20, 6, 10, 0, 0);
	struct client_usage a = { 0 }, a2 = { 0 }, o = { 0 };
	const char *why = NULL;

	/* Per client: 6. */
	ck_assert_int_eq(budget_take_fds(&b, u1000, &a, 6, &why), 0);
	ck_assert_int_eq(budget_take_fds(&b, u1000, &a, 1, &why), -ENFILE);
	ck_assert_ptr_nonnull(strstr(why, "max_client_fds"));
	/* Per uid: 10, over two clients of it. */
	ck_assert_int_eq(budget_take_fds(&b, u1000, &a2, 4, &why), 0);
	ck_assert_int_eq(budget_take_fds(&b, u1000, &a2, 1, &why), -ENFILE);
	ck_assert_ptr_nonnull(strstr(why, "max_uid_fds"));
	ck_assert_uint_eq(u1000->fds, 10);
	/* All clients: 20; another uid gets the rest, not one more. */
	ck_assert_int_eq(budget_take_fds(&b, u2000, &o, 6, &why), 0);
	struct client_usage o2 = { 0 }, o3 = { 0 };
	ck_assert_int_eq(budget_take_fds(&b, u2000, &o2, 4, &why), 0);
	ck_assert_int_eq(budget_take_fds(&b, u3000, &o3, 1, &why), -ENFILE);
	ck_assert_ptr_nonnull(strstr(why, "fd_reserve"));
	ck_assert_uint_eq(b.fds_used, 20);
	/* Nothing was taken by a refusal. */
	ck_assert_uint_eq(o3.fds, 0);
	ck_assert_uint_eq(u3000->fds, 0);
	/* Given back: room again, for anyone. */
	budget_release_fds(&b, u1000, &a, 6);
	ck_assert_uint_eq(a.fds, 0);
	ck_assert_int_eq(budget_take_fds(&b, u3000, &o3, 6, &why), 0);
	/* Releasing more than was taken takes back what was. */
	budget_release_fds(&b, u1000, &a2, 100);
	ck_assert_uint_eq(u1000->fds, 0);
	ck_assert_uint_eq(b.fds_used, 16);
	budget_release_fds(&b, u2000, &o, 6);
	budget_release_fds(&b, u2000, &o2, 4);
	budget_release_fds(&b, u3000, &o3, 6);
	ck_assert_uint_eq(b.fds_used, 0);
	ck_assert_uint_eq(u2000->fds + u3000->fds, 0);
	uid_usage_put(t, u1000);
	uid_usage_put(t, u2000);
	uid_usage_put(t, u3000);
	uid_usage_table_destroy(t);
}
END_TEST

START_TEST(byte_budget)
{
	struct uid_usage_table *t = uid_usage_table_create();
	struct uid_usage *u7 = uid_usage_get(t, 7), *u8 = uid_usage_get(t, 8);
	struct budget b = test_budget(0, 0, 0, 1000, 1500);
	struct client_usage a = { 0 }, a2 = { 0 };
	const char *why = NULL;

	ck_assert_int_eq(budget_take_bytes(&b, u7, &a, 1000, &why), 0);
	ck_assert_int_eq(budget_take_bytes(&b, u7, &a, 1, &why), -EDQUOT);
	ck_assert_ptr_nonnull(strstr(why, "max_client_bytes"));
	ck_assert_int_eq(budget_take_bytes(&b, u7, &a2, 501, &why),
			 -EDQUOT);
	ck_assert_ptr_nonnull(strstr(why, "max_uid_bytes"));
	ck_assert_int_eq(budget_take_bytes(&b, u7, &a2, 500, &why), 0);
	/* No wrap-around near the top. */
	b.client_bytes = UINT64_MAX - 5;
	b.uid_bytes = UINT64_MAX;
	struct client_usage big = { .host_bytes = UINT64_MAX - 10 };
	ck_assert_int_eq(budget_take_bytes(&b, u8, &big, 5, &why), 0);
	ck_assert_int_eq(budget_take_bytes(&b, u8, &big, 1, &why), -EDQUOT);
	ck_assert_int_eq(budget_take_bytes(&b, u8, &big, UINT64_MAX, &why),
			 -EDQUOT);
	budget_release_bytes(&b, u7, &a, 1000);
	budget_release_bytes(&b, u7, &a2, 500);
	budget_release_bytes(&b, u8, &big, 5);
	ck_assert_uint_eq(u7->host_bytes, 0);
	ck_assert_uint_eq(u8->host_bytes, 0);
	uid_usage_put(t, u7);
	uid_usage_put(t, u8);
	uid_usage_table_destroy(t);
}
END_TEST

/* The reserve comes out of RLIMIT_NOFILE first; a user gets half. */
START_TEST(budget_plan)
{
	struct xferd_config cfg;
	struct budget b = { .nofile = 20000, .fds_at_start = 30,
			    .maps_free = 65000, .memory = 16ull << 30 };

	config_defaults(&cfg);
	budget_apply(&b, &cfg);
	ck_assert_uint_eq(b.reserve, 256 + 1024 + 128 + 64 + CTL_ROOT_RESERVE);
	ck_assert_uint_eq(b.all_fds, 20000 - 30 - b.reserve);
	ck_assert_uint_eq(b.uid_fds, b.all_fds / 2);
	ck_assert_uint_eq(b.client_fds, 8192);
	ck_assert_uint_eq(b.uid_bytes, 8ull << 30);
	ck_assert_uint_eq(b.client_bytes, 8ull << 30);
	/* Mappings bound it too. */
	b.maps_free = 5000;
	budget_apply(&b, &cfg);
	ck_assert_uint_eq(b.all_fds, 5000 - b.reserve);
	/* Too few fds for the reserve: clients still get half. */
	b = (struct budget){ .nofile = 40, .fds_at_start = 15,
			     .maps_free = UINT64_MAX };
	budget_apply(&b, &cfg);
	ck_assert_uint_eq(b.reserve, 12);
	ck_assert_uint_eq(b.all_fds, 13);
	ck_assert_uint_eq(b.uid_fds, 13);
	/* Configured values win when lower. */
	cfg.max_uid_bytes = 1 << 20;
	cfg.max_client_bytes = 4096;
	budget_apply(&b, &cfg);
	ck_assert_uint_eq(b.uid_bytes, 1 << 20);
	ck_assert_uint_eq(b.client_bytes, 4096);
}
END_TEST

START_TEST(import_limit)
{
	struct xferd_config cfg;
	struct client_usage u = { .imports = 2 };
	const char *why = NULL;

	config_defaults(&cfg);
	cfg.max_imports = 3;
	ck_assert_int_eq(quota_check_import(&cfg, &u, &why), 0);
	u.imports = 3;
	ck_assert_int_eq(quota_check_import(&cfg, &u, &why), -ETOOMANYREFS);
	ck_assert_ptr_nonnull(strstr(why, "max_imports"));
}
END_TEST

START_TEST(uid_counts)
{
	struct uid_usage_table *t = uid_usage_table_create();

	ck_assert_ptr_nonnull(t);
	struct uid_usage *u = uid_usage_get(t, 1000);
	struct uid_usage *v = uid_usage_get(t, 1001);
	ck_assert_ptr_nonnull(u);
	ck_assert_ptr_nonnull(v);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(uid_conn_take(u, UID_CLIENT, 3), 0);
	ck_assert_int_eq(uid_conn_take(u, UID_CLIENT, 3), -EMFILE);
	/* Another kind, another uid: counted apart. */
	ck_assert_int_eq(uid_conn_take(u, UID_PENDING, 1), 0);
	ck_assert_int_eq(uid_conn_take(u, UID_PENDING, 1), -EMFILE);
	ck_assert_int_eq(uid_conn_take(v, UID_CLIENT, 3), 0);
	ck_assert_uint_eq(u->conns[UID_CLIENT], 3);
	ck_assert_uint_eq(v->conns[UID_CLIENT], 1);
	ck_assert_uint_eq(u->conns[UID_CTL], 0);
	/* Room again after a release; a release of nothing is harmless. */
	uid_conn_release(u, UID_CLIENT);
	ck_assert_int_eq(uid_conn_take(u, UID_CLIENT, 3), 0);
	uid_conn_release(v, UID_CLIENT);
	uid_conn_release(v, UID_CLIENT);
	ck_assert_uint_eq(v->conns[UID_CLIENT], 0);
	/* A limit of 0 refuses even the first. */
	ck_assert_int_eq(uid_conn_take(v, UID_CTL, 0), -EMFILE);
	uid_usage_put(t, v);
	for (int i = 0; i < 3; i++)
		uid_conn_release(u, UID_CLIENT);
	uid_conn_release(u, UID_PENDING);
	uid_usage_put(t, u);
	uid_usage_table_destroy(t);
	uid_usage_table_destroy(NULL);
}
END_TEST

/* One record per uid, shared by its holders (the lists and the notify
 * pool rely on the pointer), freed with the last of them and made anew,
 * zero, on the next get. */
START_TEST(uid_record_lifetime)
{
	struct uid_usage_table *t = uid_usage_table_create();
	struct xferd_config cfg;
	const char *why = NULL;

	config_defaults(&cfg);
	cfg.max_regions_per_uid = 2;
	struct uid_usage *pending = uid_usage_get(t, 1000);
	ck_assert_ptr_nonnull(pending);
	ck_assert_int_eq(uid_conn_take(pending, UID_PENDING, 8), 0);
	struct uid_usage *client = uid_usage_get(t, 1000);
	ck_assert_ptr_eq(client, pending);
	ck_assert_ptr_eq(uid_usage_hold(client), pending);
	ck_assert_uint_eq(client->refs, 3);
	ck_assert_ptr_ne(uid_usage_get(t, 1001), client);
	/* The pending connection goes: the client still holds it all. */
	uid_conn_release(pending, UID_PENDING);
	uid_usage_put(t, pending);
	client->regions = 2;
	ck_assert_int_eq(uid_usage_check(&cfg, client, UID_BOUND_REGIONS,
					 &why), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(why, "max_regions_per_uid"));
	client->regions = 1;
	ck_assert_int_eq(uid_usage_check(&cfg, client, UID_BOUND_REGIONS,
					 &why), 0);
	client->regions = 0;
	uid_usage_put(t, client);
	uid_usage_put(t, client);
	/* Freed; a new holder starts from zero. */
	struct uid_usage *again = uid_usage_get(t, 1000);
	ck_assert_uint_eq(again->refs, 1);
	ck_assert_uint_eq(again->regions, 0);
	ck_assert_uint_eq(again->conns[UID_PENDING], 0);
	uid_usage_put(t, again);
	uid_usage_put(t, NULL);
	/* 1001 is still held: destroy frees it. */
	uid_usage_table_destroy(t);
}
END_TEST

Suite *quota_suite(void)
{
	Suite *s = suite_create("quota");
	TCase *tc = tcase_create("limits");

	tcase_add_test(tc, region_limits);
	tcase_add_test(tc, import_limit);
	tcase_add_test(tc, uid_counts);
	tcase_add_test(tc, uid_record_lifetime);
	tcase_add_test(tc, fd_budget);
	tcase_add_test(tc, byte_budget);
	tcase_add_test(tc, budget_plan);
	suite_add_tcase(s, tc);
	return s;
}
