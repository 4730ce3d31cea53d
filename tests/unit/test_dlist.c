/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dlist.c - prepared lists (mem/dlist.h): entries checked against
 * their range (empty entries, overflow, past the end), the table's
 * handles (never a region handle), ownership, the per-client and
 * per-user bounds, lists going with their target and their client, and
 * work under the table's mutex that follows the lists concerned only.
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

/* The lists of all clients of one user are bounded together: in count
 * (-ENOSPC) and in bytes (-ENOBUFS), each client within its own
 * bounds; removing, by handle, target or client, gives the charge
 * back. */
START_TEST(uid_bounded)
{
	struct dltab *t = dltab_create();
	struct dlist_usage uid = { 0 }, other = { 0 };
	struct dlist_limits max = {
		.lists = 100, .entries = 1000, .uid = &uid, .uid_lists = 3,
		.uid_bytes = 3 * dlist_bytes(4, false),
	};
	uint64_t h[3];

	/* Three clients of the user, one list each: the user's count. */
	for (int i = 0; i < 3; i++) {
		uint64_t *off = calloc(4, sizeof(*off));
		ck_assert_int_eq(dltab_add(t, 10 + i, 7, false, 4, off, NULL,
					   8, 8, max, &h[i]), 0);
	}
	ck_assert_uint_eq(uid.lists, 3);
	ck_assert_uint_eq(uid.bytes, 3 * dlist_bytes(4, false));
	uint64_t *off = calloc(4, sizeof(*off)), x;
	ck_assert_int_eq(dltab_add(t, 13, 7, false, 4, off, NULL, 8, 8, max,
				   &x), -ENOSPC);
	/* Another user is not touched by it. */
	struct dlist_limits max2 = max;
	max2.uid = &other;
	ck_assert_int_eq(dltab_add(t, 20, 7, false, 4, off, NULL, 8, 8, max2,
				   &x), 0);
	ck_assert_uint_eq(other.lists, 1);
	/* Bytes: room for lists, not for their memory. */
	max.uid_lists = 100;
	off = calloc(1, sizeof(*off));
	ck_assert_int_eq(dltab_add(t, 13, 7, false, 1, off, NULL, 8, 8, max,
				   &x), -ENOBUFS);
	/* Every way out gives back. */
	ck_assert_int_eq(dltab_remove(t, 10, h[0]), 0);
	dltab_remove_target(t, 11, 7);
	dltab_remove_client(t, 12);
	ck_assert_uint_eq(uid.lists, 0);
	ck_assert_uint_eq(uid.bytes, 0);
	ck_assert_int_eq(dltab_add(t, 13, 7, false, 1, off, NULL, 8, 8, max,
				   &x), 0);
	ck_assert_uint_eq(uid.lists, 1);
	dltab_destroy(t);
}
END_TEST

/* The work under the table's mutex (which the progress thread takes for
 * every list descriptor) follows the lists concerned, not all lists:
 * with 65536 lists of another client held, adding a list, removing it,
 * removing a target and a client visit only their own lists. */
START_TEST(work_is_local)
{
	struct dltab *t = dltab_create();
	const struct dlist_limits max = { .lists = 1u << 20,
					  .entries = 1u << 24 };
	uint64_t h;

	for (int i = 0; i < 65536; i++) {
		uint64_t *off = calloc(1, sizeof(*off));
		ck_assert_int_eq(dltab_add(t, 1, 100 + (i & 7), false, 1, off,
					   NULL, 8, 8, max, &h), 0);
	}
	uint64_t v0 = dltab_visits(t);
	for (int round = 0; round < 100; round++) {
		uint64_t *off = calloc(2, sizeof(*off));
		ck_assert_int_eq(dltab_add(t, 2, 5, false, 2, off, NULL, 8, 8,
					   max, &h), 0);
		ck_assert_uint_eq(dltab_count(t, 2), 1);
		ck_assert_uint_eq(dltab_entries(t, 2), 2);
		ck_assert_int_eq(dltab_remove(t, 2, h), 0);
	}
	ck_assert_uint_eq(dltab_visits(t), v0);
	/* A target's removal visits its 3 lists; a client's, its 2. */
	for (int i = 0; i < 3; i++) {
		uint64_t *off = calloc(1, sizeof(*off));
		ck_assert_int_eq(dltab_add(t, 2, 5, false, 1, off, NULL, 8, 8,
					   max, &h), 0);
	}
	for (int i = 0; i < 2; i++) {
		uint64_t *off = calloc(1, sizeof(*off));
		ck_assert_int_eq(dltab_add(t, 2, 6, false, 1, off, NULL, 8, 8,
					   max, &h), 0);
	}
	dltab_remove_target(t, 2, 5);
	ck_assert_uint_eq(dltab_visits(t), v0 + 3);
	dltab_remove_client(t, 2);
	ck_assert_uint_eq(dltab_visits(t), v0 + 5);
	ck_assert_uint_eq(dltab_count(t, 2), 0);
	/* Another client's target of the same number is its own. */
	dltab_remove_target(t, 3, 100);
	ck_assert_uint_eq(dltab_count(t, 1), 65536);
	ck_assert_uint_eq(dltab_count(t, 0), 65536);
	ck_assert_uint_eq(dltab_entries(t, 0), 65536);
	dltab_remove_target(t, 1, 100);
	ck_assert_uint_eq(dltab_visits(t), v0 + 5 + 8192);
	ck_assert_uint_eq(dltab_count(t, 1), 65536 - 8192);
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
	tcase_add_test(tc, uid_bounded);
	tcase_add_test(tc, work_is_local);
	suite_add_tcase(s, tc);
	return s;
}
