/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rcache.c - the registration cache: references, release on the
 * last put, one entry per (client, kind, base, id), so that a freed and
 * reallocated buffer at the same address never finds a stale entry; the
 * limits: kept entries stay unused on an LRU list and go oldest first
 * when the cache is above its entry or byte limit, held ones never.
 */
#include <check.h>
#include <stdlib.h>

#include "core/rcache.h"
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

/* Order in which entries were released, by their id. */
static uint64_t gone_ids[16];
static int ngone;

static void release_noting(struct rcache_entry *e)
{
	gone_ids[ngone++] = e->key.id;
	free(e);
}

static struct rcache_entry *kept(uint64_t client, uint64_t id,
				 uint64_t bytes)
{
	struct rcache_entry *e = calloc(1, sizeof(*e));

	ck_assert_ptr_nonnull(e);
	e->key = (struct rcache_key){ .client = client,
				      .kind = RCACHE_NIC_MR,
				      .base = id << 12, .id = id };
	e->release = release_noting;
	e->bytes = bytes;
	e->keep = true;
	return e;
}

START_TEST(lru_evicts_the_oldest_unused)
{
	struct rcache *rc = rcache_create();
	struct rcache_entry *e[5];
	struct rcache_stats st;

	ngone = 0;
	rcache_set_limits(rc, 3, 0);
	for (int i = 0; i < 4; i++)
		ck_assert_ptr_eq(rcache_insert(rc, e[i] = kept(1, i, 10)), e[i]);
	/* Above the limit, but everything is held: nothing goes. */
	rcache_get_stats(rc, &st);
	ck_assert_uint_eq(st.entries, 4);
	ck_assert_uint_eq(st.bytes, 40);
	ck_assert_uint_eq(st.unused, 0);
	ck_assert_int_eq(ngone, 0);
	/* The first one let go is evicted at once (still 4 > 3). */
	rcache_put(rc, e[0]);
	ck_assert_int_eq(ngone, 1);
	ck_assert_uint_eq(gone_ids[0], 0);
	/* At the limit: the next ones stay, unused. */
	rcache_put(rc, e[1]);
	rcache_put(rc, e[2]);
	rcache_get_stats(rc, &st);
	ck_assert_uint_eq(st.entries, 3);
	ck_assert_uint_eq(st.unused, 2);
	ck_assert_int_eq(ngone, 1);
	/* A lookup makes 1 held again, and the most recently used. */
	struct rcache_key k1 = { .client = 1, .kind = RCACHE_NIC_MR,
				 .base = 1 << 12, .id = 1 };
	ck_assert_ptr_eq(rcache_get(rc, &k1), e[1]);
	rcache_put(rc, e[1]);
	/* A fourth entry: the least recently used unused one goes (2). */
	ck_assert_ptr_eq(rcache_insert(rc, e[4] = kept(1, 4, 10)), e[4]);
	ck_assert_int_eq(ngone, 2);
	ck_assert_uint_eq(gone_ids[1], 2);
	struct rcache_key k2 = k1;
	k2.base = 2 << 12, k2.id = 2;
	ck_assert_ptr_null(rcache_get(rc, &k2));
	rcache_get_stats(rc, &st);
	ck_assert_uint_eq(st.entries, 3);
	ck_assert_uint_eq(st.unused, 1);
	ck_assert_uint_eq(st.hits, 1);
	ck_assert_uint_eq(st.misses, 1);
	ck_assert_uint_eq(st.evictions, 2);
	ck_assert_uint_eq(st.max_entries, 3);
	/* Lowering the limit evicts at once; held ones stay. */
	rcache_set_limits(rc, 1, 0);
	ck_assert_int_eq(ngone, 3);
	ck_assert_uint_eq(gone_ids[2], 1);
	rcache_get_stats(rc, &st);
	ck_assert_uint_eq(st.entries, 2);  /* 3 and 4, both held */
	rcache_put(rc, e[3]);
	ck_assert_int_eq(ngone, 4);        /* 2 > 1: at once */
	rcache_put(rc, e[4]);              /* 1 = 1: kept */
	ck_assert_int_eq(ngone, 4);
	rcache_destroy(rc);                /* releases the unused too */
	ck_assert_int_eq(ngone, 5);
}
END_TEST

START_TEST(byte_limit_and_client_exit)
{
	struct rcache *rc = rcache_create();
	struct rcache_stats st;

	ngone = 0;
	rcache_set_limits(rc, 0, 100);
	struct rcache_entry *a = kept(1, 1, 60), *b = kept(2, 2, 30);
	rcache_insert(rc, a);
	rcache_insert(rc, b);
	rcache_put(rc, a);
	rcache_put(rc, b);
	rcache_get_stats(rc, &st);
	ck_assert_uint_eq(st.bytes, 90);
	ck_assert_uint_eq(st.unused, 2);
	/* 60 more bytes: over 100, the oldest unused (a) goes. */
	struct rcache_entry *c = kept(1, 3, 60);
	rcache_insert(rc, c);
	ck_assert_int_eq(ngone, 1);
	ck_assert_uint_eq(gone_ids[0], 1);
	rcache_get_stats(rc, &st);
	ck_assert_uint_eq(st.bytes, 90);
	/* Client 2 exits: its unused entries go, client 1's held one not. */
	rcache_drop_client(rc, 2);
	ck_assert_int_eq(ngone, 2);
	ck_assert_uint_eq(gone_ids[1], 2);
	rcache_drop_client(rc, 1);
	ck_assert_int_eq(ngone, 2);
	rcache_put(rc, c);
	rcache_drop_client(rc, 1);
	ck_assert_int_eq(ngone, 3);
	rcache_get_stats(rc, &st);
	ck_assert_uint_eq(st.entries, 0);
	ck_assert_uint_eq(st.bytes, 0);
	ck_assert_uint_eq(st.unused, 0);
	ck_assert_uint_eq(st.max_bytes, 100);
	/* Not kept: released at its last put whatever the room. */
	int released = 0;
	struct counted *plain = entry(1, 0x1000, 9, &released);
	rcache_insert(rc, &plain->e);
	rcache_put(rc, &plain->e);
	ck_assert_int_eq(released, 1);
	rcache_destroy(rc);
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
	tcase_add_test(tc, lru_evicts_the_oldest_unused);
	tcase_add_test(tc, byte_limit_and_client_exit);
	suite_add_tcase(s, tc);
	return s;
}
