/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dlist.c - prepared lists (mem/dlist.h): entries checked against
 * their range (empty entries, overflow, past the end), the table's
 * handles (never a region handle), ownership, the per-client bounds, and
 * lists going with their target and their client.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "mem/dlist.h"
#include "suites.h"

START_TEST(entries_checked)
{
	uint64_t off[3] = { 0, 100, 200 }, lens[3] = { 10, 100, 56 }, end = 0;

	ck_assert_int_eq(dlist_check(3, off, lens, 0, 256, &end), 0);
	ck_assert_uint_eq(end, 256);
	ck_assert_int_eq(dlist_check(3, off, NULL, 56, 256, &end), 0);
	ck_assert_uint_eq(end, 256);
	ck_assert_int_eq(dlist_check(3, off, NULL, 57, 256, &end), -ERANGE);
	ck_assert_int_eq(dlist_check(3, off, lens, 0, 255, &end), -ERANGE);
	lens[1] = 0;
	ck_assert_int_eq(dlist_check(3, off, lens, 0, 256, &end), -EINVAL);
	ck_assert_int_eq(dlist_check(3, off, NULL, 0, 256, &end), -EINVAL);
	/* off + len wrapping around 2^64 is outside, not small. */
	uint64_t wrap[1] = { UINT64_MAX - 4 };
	ck_assert_int_eq(dlist_check(1, wrap, NULL, 10, UINT64_MAX, &end),
			 -ERANGE);
	uint64_t far[1] = { 300 };
	ck_assert_int_eq(dlist_check(1, far, NULL, 1, 256, &end), -ERANGE);
}
END_TEST

static uint64_t add(struct dltab *t, uint64_t owner, uint64_t target,
		    uint32_t max, int want)
{
	uint64_t *off = calloc(4, sizeof(*off)), h = 0;
	int rc = dltab_add(t, owner, target, false, 4, off, NULL, 8, 8,
			   (struct dlist_limits){ .lists = max,
						  .entries = 1000 }, &h);
	ck_assert_int_eq(rc, want);
	if (rc)
		free(off);
	return h;
}

START_TEST(table)
{
	struct dltab *t = dltab_create();

	uint64_t a = add(t, 1, 10, 3, 0), b = add(t, 1, 11, 3, 0);
	uint64_t c = add(t, 2, 10, 3, 0);
	ck_assert(a & DLIST_HANDLE_BIT);
	ck_assert(a != b && b != c);
	add(t, 1, 12, 3, 0);
	add(t, 1, 13, 3, -ENOSPC);  /* the client's bound */
	ck_assert_uint_eq(dltab_count(t, 1), 3);
	ck_assert_uint_eq(dltab_count(t, 0), 4);

	/* Only its owner reaches a list; a region handle is never one. */
	ck_assert_ptr_null(dltab_get(t, 2, a));
	ck_assert_ptr_null(dltab_get(t, 1, a & ~DLIST_HANDLE_BIT));
	struct dlist *l = dltab_get(t, 1, a);
	ck_assert_ptr_nonnull(l);
	ck_assert_uint_eq(l->n, 4);
	ck_assert_uint_eq(dlist_len(l, 3), 8);
	ck_assert_int_eq(dltab_remove(t, 2, a), -EACCES);

	/* Removed while held: the holder's reference stays good. */
	ck_assert_int_eq(dltab_remove(t, 1, a), 0);
	ck_assert_ptr_null(dltab_get(t, 1, a));
	ck_assert_uint_eq(l->off[3], 0);
	dlist_put(l);
	ck_assert_int_eq(dltab_remove(t, 1, a), -EACCES);

	/* Lists go with their target, and with their client. */
	dltab_remove_target(t, 1, 11);
	ck_assert_ptr_null(dltab_get(t, 1, b));
	ck_assert_uint_eq(dltab_count(t, 1), 1);
	ck_assert_uint_eq(dltab_count(t, 2), 1);
	dltab_remove_client(t, 2);
	ck_assert_ptr_null(dltab_get(t, 2, c));
	ck_assert_uint_eq(dltab_count(t, 0), 1);
	dltab_destroy(t);
}
END_TEST

/* The entries of all of a client's lists are bounded too: many lists
 * of few entries pass, one entry past the bound does not. */
START_TEST(entries_bounded)
{
	struct dltab *t = dltab_create();
	struct dlist_limits max = { .lists = 100, .entries = 10 };
	uint64_t h;

	for (int i = 0; i < 2; i++) {
		uint64_t *off = calloc(4, sizeof(*off));
		ck_assert_int_eq(dltab_add(t, 1, 10, false, 4, off, NULL, 8, 8,
					   max, &h), 0);
	}
	uint64_t *off = calloc(3, sizeof(*off));
	ck_assert_int_eq(dltab_add(t, 1, 10, false, 3, off, NULL, 8, 8, max,
				   &h), -ENOBUFS);
	ck_assert_int_eq(dltab_add(t, 2, 10, false, 3, off, NULL, 8, 8, max,
				   &h), 0);  /* another client's own budget */
	off = calloc(2, sizeof(*off));
	ck_assert_int_eq(dltab_add(t, 1, 10, false, 2, off, NULL, 8, 8, max,
				   &h), 0);
	ck_assert_uint_eq(dltab_entries(t, 1), 10);
	ck_assert_uint_eq(dltab_entries(t, 0), 13);
	/* Removing lists gives their entries back. */
	ck_assert_int_eq(dltab_remove(t, 1, h), 0);
	ck_assert_uint_eq(dltab_entries(t, 1), 8);
	dltab_destroy(t);
}
END_TEST

Suite *dlist_suite(void)
{
	Suite *s = suite_create("dlist");
	TCase *tc = tcase_create("dlist");

	tcase_add_test(tc, entries_checked);
	tcase_add_test(tc, table);
	tcase_add_test(tc, entries_bounded);
	suite_add_tcase(s, tc);
	return s;
}
