/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_quota.c - per-client and per-uid limits (daemon/quota.c): each
 * limit answers with its own code at exactly its value, bytes near
 * UINT64_MAX do not wrap, and the per-uid counts are per uid and kind,
 * refuse at the limit, and come back on release.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "quota.h"
#include "suites.h"

START_TEST(region_limits)
{
	struct xferd_config cfg;
	struct client_usage u = { 0 };
	const char *why = NULL;

	config_defaults(&cfg);
	cfg.max_regions = 2;
	cfg.max_client_bytes = 1000;
	cfg.max_region_bytes = 600;

	ck_assert_int_eq(quota_check_region(&cfg, &u, 600, &why), 0);
	ck_assert_int_eq(quota_check_region(&cfg, &u, 601, &why), -EFBIG);
	u = (struct client_usage){ .regions = 1, .region_bytes = 600 };
	ck_assert_int_eq(quota_check_region(&cfg, &u, 400, &why), 0);
	ck_assert_int_eq(quota_check_region(&cfg, &u, 401, &why), -EDQUOT);
	ck_assert_ptr_nonnull(strstr(why, "max_client_bytes"));
	u.regions = 2;
	ck_assert_int_eq(quota_check_region(&cfg, &u, 1, &why), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(why, "max_regions"));

	/* No byte limit; and none that wraps around near the top. */
	cfg.max_client_bytes = 0;
	cfg.max_region_bytes = UINT64_MAX;
	u = (struct client_usage){ .region_bytes = UINT64_MAX - 10 };
	ck_assert_int_eq(quota_check_region(&cfg, &u, 100, &why), 0);
	cfg.max_client_bytes = UINT64_MAX - 5;
	ck_assert_int_eq(quota_check_region(&cfg, &u, 5, &why), 0);
	ck_assert_int_eq(quota_check_region(&cfg, &u, 6, &why), -EDQUOT);
	ck_assert_int_eq(quota_check_region(&cfg, &u, UINT64_MAX, &why),
			 -EDQUOT);
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
	struct uid_table *t = uid_table_create();

	ck_assert_ptr_nonnull(t);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(uid_conn_take(t, 1000, UID_CLIENT, 3), 0);
	ck_assert_int_eq(uid_conn_take(t, 1000, UID_CLIENT, 3), -EMFILE);
	/* Another kind, another uid: counted apart. */
	ck_assert_int_eq(uid_conn_take(t, 1000, UID_PENDING, 1), 0);
	ck_assert_int_eq(uid_conn_take(t, 1000, UID_PENDING, 1), -EMFILE);
	ck_assert_int_eq(uid_conn_take(t, 1001, UID_CLIENT, 3), 0);
	ck_assert_uint_eq(uid_conn_count(t, 1000, UID_CLIENT), 3);
	ck_assert_uint_eq(uid_conn_count(t, 1001, UID_CLIENT), 1);
	/* Room again after a release; a release of nothing is harmless. */
	uid_conn_release(t, 1000, UID_CLIENT);
	ck_assert_int_eq(uid_conn_take(t, 1000, UID_CLIENT, 3), 0);
	uid_conn_release(t, 4242, UID_CLIENT);
	uid_conn_release(t, 1001, UID_CLIENT);
	uid_conn_release(t, 1001, UID_CLIENT);
	ck_assert_uint_eq(uid_conn_count(t, 1001, UID_CLIENT), 0);
	/* A limit of 0 refuses even the first. */
	ck_assert_int_eq(uid_conn_take(t, 7, UID_CLIENT, 0), -EMFILE);
	uid_table_destroy(t);
	uid_table_destroy(NULL);
}
END_TEST

Suite *quota_suite(void)
{
	Suite *s = suite_create("quota");
	TCase *tc = tcase_create("limits");

	tcase_add_test(tc, region_limits);
	tcase_add_test(tc, import_limit);
	tcase_add_test(tc, uid_counts);
	suite_add_tcase(s, tc);
	return s;
}
