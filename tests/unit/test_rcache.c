/*
 * test_rcache.c - the registration cache: references, release on the
 * last put, one entry per (client, kind, base, id), so that a freed and
 * reallocated buffer at the same address never finds a stale entry.
 */
#include <check.h>
#include <stdlib.h>

#include "mem/rcache.h"
#include "suites.h"

struct counted {
	struct rcache_entry e;   /* first, as the cache expects */
	int *released;
};

static void release(struct rcache_entry *e)
{
	struct counted *c = (struct counted *)e;

	(*c->released)++;
	free(c);
}

static struct counted *entry(uint64_t client, uint64_t base, uint64_t id,
			     int *released)
{
	struct counted *c = calloc(1, sizeof(*c));

	ck_assert_ptr_nonnull(c);
	c->e.key = (struct rcache_key){ .client = client,
					.kind = RCACHE_CUDA_IMPORT,
					.base = base, .id = id };
	c->e.release = release;
	c->released = released;
	return c;
}

START_TEST(get_put_release)
{
	struct rcache *rc = rcache_create();
	int released = 0;
	struct counted *c = entry(1, 0x1000, 7, &released);
	uint32_t n, refs;

	ck_assert_ptr_eq(rcache_insert(rc, &c->e), &c->e);
	struct rcache_entry *again = rcache_get(rc, &c->e.key);
	ck_assert_ptr_eq(again, &c->e);
	rcache_count(rc, &n, &refs);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(refs, 2);
	rcache_put(rc, again);
	ck_assert_int_eq(released, 0);
	rcache_put(rc, &c->e);   /* the last one releases */
	ck_assert_int_eq(released, 1);
	rcache_count(rc, &n, &refs);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(refs, 0);
	rcache_destroy(rc);
}
END_TEST

START_TEST(reused_address_is_a_new_entry)
{
	struct rcache *rc = rcache_create();
	int released = 0;
	struct counted *old = entry(1, 0x1000, 7, &released);
	struct counted *fresh = entry(1, 0x1000, 8, &released);

	rcache_insert(rc, &old->e);
	/* Same client and address, another buffer id: not the old one. */
	ck_assert_ptr_null(rcache_get(rc, &fresh->e.key));
	ck_assert_ptr_eq(rcache_insert(rc, &fresh->e), &fresh->e);
	/* Other clients never share an entry either. */
	struct rcache_key other = old->e.key;
	other.client = 2;
	ck_assert_ptr_null(rcache_get(rc, &other));
	rcache_put(rc, &old->e);
	rcache_put(rc, &fresh->e);
	ck_assert_int_eq(released, 2);
	rcache_destroy(rc);
}
END_TEST

START_TEST(insert_race_keeps_one)
{
	struct rcache *rc = rcache_create();
	int released = 0;
	struct counted *first = entry(3, 0x2000, 1, &released);
	struct counted *second = entry(3, 0x2000, 1, &released);

	ck_assert_ptr_eq(rcache_insert(rc, &first->e), &first->e);
	/* Imported twice at once: the second insert gets the first entry
	 * (a new reference) and the caller releases its own. */
	ck_assert_ptr_eq(rcache_insert(rc, &second->e), &first->e);
	release(&second->e);
	ck_assert_int_eq(released, 1);
	rcache_put(rc, &first->e);
	ck_assert_int_eq(released, 1);
	rcache_put(rc, &first->e);
	ck_assert_int_eq(released, 2);
	rcache_destroy(rc);
}
END_TEST

START_TEST(destroy_releases_the_rest)
{
	struct rcache *rc = rcache_create();
	int released = 0;

	for (uint64_t i = 0; i < 1000; i++)
		rcache_insert(rc, &entry(i % 7, i << 12, i, &released)->e);
	rcache_destroy(rc);
	ck_assert_int_eq(released, 1000);
	rcache_put(NULL, NULL);  /* a NULL entry is nothing to put */
}
END_TEST

Suite *rcache_suite(void)
{
	Suite *s = suite_create("rcache");
	TCase *tc = tcase_create("refs");

	tcase_add_test(tc, get_put_release);
	tcase_add_test(tc, reused_address_is_a_new_entry);
	tcase_add_test(tc, insert_race_keeps_one);
	tcase_add_test(tc, destroy_releases_the_rest);
	suite_add_tcase(s, tc);
	return s;
}
