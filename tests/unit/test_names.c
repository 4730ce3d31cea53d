/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_names.c - the publish/lookup table (daemon/meta/names.c): which names
 * are valid, publish and lookup return the stored bytes, replacing by
 * the owner and refusing everyone else, unpublish, the per-client limit,
 * removing a client's names, users' namespaces and shared names, and a
 * table grown to many thousand names.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "meta/names.h"
#include "suites.h"

/* The publishers' uid, where the test is not about uids. */
#define UID 1000u

/* Token bytes that depend on seed, so that a mix-up shows. */
static size_t fake_token(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 31u + i * 7u + (i >> 8));
	return len;
}

/* Lookup name and insist on exactly want[0, want_len). */
static void expect(const struct names *n, const char *name,
		   const uint8_t *want, size_t want_len)
{
	const void *tok = NULL;
	size_t len = 0;

	ck_assert_msg(names_lookup(n, UID, name, &tok, &len) == 0,
		      "'%s' not found", name);
	ck_assert_uint_eq(len, want_len);
	ck_assert_mem_eq(tok, want, want_len);
}

static void expect_absent(const struct names *n, const char *name)
{
	const void *tok = (const void *)1;
	size_t len = 12345;

	ck_assert_int_eq(names_lookup(n, UID, name, &tok, &len), -ENOENT);
	/* Nothing written on a miss. */
	ck_assert_ptr_eq(tok, (const void *)1);
	ck_assert_uint_eq(len, 12345);
}

START_TEST(valid_names)
{
	char name[NAMES_NAME_MAX + 2];

	ck_assert(names_valid("a"));
	ck_assert(names_valid("Z"));
	ck_assert(names_valid("0"));
	ck_assert(names_valid("kv.layer-3:block_17@rank+2"));
	ck_assert(names_valid("._:@+-"));
	memset(name, 'x', NAMES_NAME_MAX);
	name[NAMES_NAME_MAX] = '\0';
	ck_assert(names_valid(name));

	name[NAMES_NAME_MAX] = 'x';
	name[NAMES_NAME_MAX + 1] = '\0';
	ck_assert(!names_valid(name)); /* 201 bytes */
	ck_assert(!names_valid(NULL));
	ck_assert(!names_valid(""));
	ck_assert(!names_valid("a/b"));
	ck_assert(!names_valid("/"));
	ck_assert(!names_valid("a b"));
	ck_assert(!names_valid("tab\there"));
	ck_assert(!names_valid("nl\n"));
	ck_assert(!names_valid("\x01"));
	ck_assert(!names_valid("del\x7f"));
	ck_assert(!names_valid("caf\xc3\xa9")); /* UTF-8 is not ASCII */
	ck_assert(!names_valid("a,b"));
	ck_assert(!names_valid("a*"));
	ck_assert(!names_valid("[::1]"));
}
END_TEST

START_TEST(publish_lookup_replace)
{
	struct names *n = names_create();
	uint8_t t1[NAMES_TOKEN_MAX], t2[NAMES_TOKEN_MAX], t3[100];

	ck_assert_ptr_nonnull(n);
	ck_assert_uint_eq(names_count(n), 0);
	expect_absent(n, "kv");

	fake_token(t1, 300, 1);
	ck_assert_int_eq(names_publish(n, "kv", 7, UID, 0, t1, 300), 0);
	ck_assert_uint_eq(names_count(n), 1);
	/* The table holds a copy: the caller's buffer may change. */
	uint8_t keep[300];
	memcpy(keep, t1, sizeof(keep));
	memset(t1, 0, sizeof(t1));
	expect(n, "kv", keep, sizeof(keep));

	/* Lookups are exact: case, prefixes and extensions differ. */
	expect_absent(n, "KV");
	expect_absent(n, "k");
	expect_absent(n, "kv.");
	expect_absent(n, "node/kv");

	/* The owner replaces, with a token of another size. */
	fake_token(t2, NAMES_TOKEN_MAX, 2);
	ck_assert_int_eq(names_publish(n, "kv", 7, UID, 0, t2, NAMES_TOKEN_MAX), 0);
	ck_assert_uint_eq(names_count(n), 1);
	expect(n, "kv", t2, NAMES_TOKEN_MAX);

	/* Anyone else is refused and changes nothing. */
	fake_token(t3, sizeof(t3), 3);
	ck_assert_int_eq(names_publish(n, "kv", 8, UID, 0, t3, sizeof(t3)), -EEXIST);
	expect(n, "kv", t2, NAMES_TOKEN_MAX);
	ck_assert_uint_eq(names_count(n), 1);

	/* Another name of the other client is fine. */
	ck_assert_int_eq(names_publish(n, "kv2", 8, UID, 0, t3, sizeof(t3)), 0);
	ck_assert_uint_eq(names_count(n), 2);
	expect(n, "kv2", t3, sizeof(t3));
	expect(n, "kv", t2, NAMES_TOKEN_MAX);
	names_destroy(n);
}
END_TEST

START_TEST(publish_refuses)
{
	struct names *n = names_create();
	uint8_t tok[NAMES_TOKEN_MAX + 1] = { 1 };
	char longname[NAMES_NAME_MAX + 2];

	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(names_publish(n, longname, 1, UID, 0, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "", 1, UID, 0, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, NULL, 1, UID, 0, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "a/b", 1, UID, 0, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "a\x02", 1, UID, 0, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "ok", 1, UID, 0, tok, 0), -EINVAL);
	ck_assert_int_eq(names_publish(n, "ok", 1, UID, 0, NULL, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "ok", 1, UID, 0, tok, NAMES_TOKEN_MAX + 1),
			 -EINVAL);
	ck_assert_uint_eq(names_count(n), 0);
	expect_absent(n, "ok");

	/* The edges that are inside. */
	longname[NAMES_NAME_MAX] = '\0';
	ck_assert_int_eq(names_publish(n, longname, 1, UID, 0, tok, 1), 0);
	expect(n, longname, tok, 1);
	ck_assert_int_eq(names_publish(n, "ok", 1, UID, 0, tok, NAMES_TOKEN_MAX), 0);
	expect(n, "ok", tok, NAMES_TOKEN_MAX);
	ck_assert_uint_eq(names_count(n), 2);
	names_destroy(n);
}
END_TEST

START_TEST(unpublish)
{
	struct names *n = names_create();
	uint8_t tok[64];

	fake_token(tok, sizeof(tok), 9);
	ck_assert_int_eq(names_publish(n, "a", 1, UID, 0, tok, sizeof(tok)), 0);
	ck_assert_int_eq(names_publish(n, "b", 1, UID, 0, tok, 10), 0);

	ck_assert_int_eq(names_unpublish(n, "a", 2, UID, NULL), -EACCES);
	expect(n, "a", tok, sizeof(tok));
	ck_assert_int_eq(names_unpublish(n, "missing", 1, UID, NULL), -ENOENT);
	ck_assert_int_eq(names_unpublish(n, "", 1, UID, NULL), -ENOENT);
	ck_assert_int_eq(names_unpublish(n, "x/y", 1, UID, NULL), -ENOENT);
	ck_assert_uint_eq(names_count(n), 2);

	ck_assert_int_eq(names_unpublish(n, "a", 1, UID, NULL), 0);
	expect_absent(n, "a");
	expect(n, "b", tok, 10);
	ck_assert_uint_eq(names_count(n), 1);
	ck_assert_int_eq(names_unpublish(n, "a", 1, UID, NULL), -ENOENT);

	/* Once free, the name is anyone's. */
	ck_assert_int_eq(names_publish(n, "a", 2, UID, 0, tok, 5), 0);
	expect(n, "a", tok, 5);
	ck_assert_int_eq(names_publish(n, "a", 1, UID, 0, tok, 6), -EEXIST);

	/* The last name of a client goes, and the client can come back. */
	ck_assert_int_eq(names_unpublish(n, "b", 1, UID, NULL), 0);
	ck_assert_int_eq(names_publish(n, "b", 1, UID, 0, tok, 7), 0);
	expect(n, "b", tok, 7);
	names_destroy(n);
}
END_TEST

START_TEST(per_client_limit)
{
	struct names *n = names_create();
	uint8_t tok[16] = { 0x42 };
	char name[32];

	for (unsigned i = 0; i < NAMES_PER_CLIENT_MAX; i++) {
		snprintf(name, sizeof(name), "c1.%u", i);
		ck_assert_int_eq(names_publish(n, name, 1, UID, 0, tok, sizeof(tok)), 0);
	}
	ck_assert_int_eq(names_publish(n, "c1.more", 1, UID, 0, tok, sizeof(tok)),
			 -EMLINK);
	expect_absent(n, "c1.more");
	/* Replacing is not adding. */
	ck_assert_int_eq(names_publish(n, "c1.0", 1, UID, 0, tok, 3), 0);
	expect(n, "c1.0", tok, 3);
	/* The limit is per client. */
	ck_assert_int_eq(names_publish(n, "c2.0", 2, UID, 0, tok, sizeof(tok)), 0);
	ck_assert_uint_eq(names_count(n), NAMES_PER_CLIENT_MAX + 1);
	/* Room again after an unpublish. */
	ck_assert_int_eq(names_unpublish(n, "c1.17", 1, UID, NULL), 0);
	ck_assert_int_eq(names_publish(n, "c1.more", 1, UID, 0, tok, sizeof(tok)), 0);
	ck_assert_int_eq(names_publish(n, "c1.evenmore", 1, UID, 0, tok, sizeof(tok)),
			 -EMLINK);
	names_destroy(n);
}
END_TEST

START_TEST(remove_client)
{
	struct names *n = names_create();
	uint8_t tok[32];
	char name[32];

	/* Three clients, names interleaved in the table. */
	for (unsigned i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%u", i);
		fake_token(tok, sizeof(tok), i);
		ck_assert_int_eq(names_publish(n, name, 1 + i % 3, UID, 0, tok,
					       sizeof(tok)), 0);
	}
	names_remove_client(n, 99);  /* no names: nothing happens */
	ck_assert_uint_eq(names_count(n), 300);

	names_remove_client(n, 2);
	ck_assert_uint_eq(names_count(n), 200);
	for (unsigned i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "n%u", i);
		fake_token(tok, sizeof(tok), i);
		if (i % 3 == 1)
			expect_absent(n, name);
		else
			expect(n, name, tok, sizeof(tok));
	}
	/* Its names are free for others; its own record starts afresh. */
	ck_assert_int_eq(names_publish(n, "n1", 3, UID, 0, tok, 1), 0);
	ck_assert_int_eq(names_publish(n, "n4", 2, UID, 0, tok, 2), 0);
	names_remove_client(n, 2);
	expect_absent(n, "n4");
	expect(n, "n1", tok, 1);

	names_remove_client(n, 1);
	names_remove_client(n, 3);
	ck_assert_uint_eq(names_count(n), 0);
	expect_absent(n, "n0");
	expect_absent(n, "n1");
	names_destroy(n);
}
END_TEST

/* Users' namespaces: the same spelling is two names; a private name is
 * seen by its uid (and root) only; a shared one by every uid as
 * "~uid/name" and in the node's shared namespace, one uid per spelling. */
START_TEST(uid_namespaces)
{
	struct names *n = names_create();
	uint8_t ta[24], tb[24], tc[24];
	const void *tok;
	size_t len;
	uint32_t flags;

	fake_token(ta, sizeof(ta), 1);
	fake_token(tb, sizeof(tb), 2);
	fake_token(tc, sizeof(tc), 3);
	/* The squatter (uid 1000, client 1) first, then its victim (2000). */
	ck_assert_int_eq(names_publish(n, "kv", 1, 1000, 0, ta, sizeof(ta)), 0);
	ck_assert_int_eq(names_publish(n, "kv", 2, 2000, 0, tb, sizeof(tb)), 0);
	ck_assert_uint_eq(names_count(n), 2);
	ck_assert_int_eq(names_lookup(n, 2000, "kv", &tok, &len), 0);
	ck_assert_uint_eq(len, sizeof(tb));
	ck_assert_mem_eq(tok, tb, sizeof(tb));
	ck_assert_int_eq(names_lookup(n, 1000, "kv", &tok, &len), 0);
	ck_assert_mem_eq(tok, ta, sizeof(ta));
	ck_assert_int_eq(names_lookup(n, 3000, "kv", &tok, &len), -ENOENT);
	/* Qualified: its own uid and root yes, another uid no. */
	ck_assert_int_eq(names_lookup_as(n, 2000, 1000, "kv", &tok, &len),
			 -ENOENT);
	ck_assert_int_eq(names_lookup_as(n, 1000, 1000, "kv", &tok, &len), 0);
	ck_assert_int_eq(names_lookup_as(n, 0, 1000, "kv", &tok, &len), 0);
	ck_assert_mem_eq(tok, ta, sizeof(ta));
	ck_assert_int_eq(names_lookup_shared(n, "kv", &tok, &len), -ENOENT);
	/* Another client of the same uid still collides. */
	ck_assert_int_eq(names_publish(n, "kv", 3, 2000, 0, tc, sizeof(tc)),
			 -EEXIST);
	ck_assert_int_eq(names_unpublish(n, "kv", 1, 2000, NULL), -EACCES);

	/* Shared: seen by others, qualified, and by other nodes. */
	ck_assert_int_eq(names_publish(n, "kv", 1, 1000, NAMES_SHARED, ta, 9),
			 0);
	ck_assert_int_eq(names_flags(n, 1000, "kv"), (int)NAMES_SHARED);
	ck_assert_int_eq(names_flags(n, 2000, "kv"), 0);
	ck_assert_int_eq(names_flags(n, 3000, "kv"), -ENOENT);
	ck_assert_int_eq(names_lookup_as(n, 2000, 1000, "kv", &tok, &len), 0);
	ck_assert_uint_eq(len, 9);
	ck_assert_int_eq(names_lookup_as(n, PUBNAME_NO_UID, 1000, "kv", &tok,
					 &len), 0);
	ck_assert_int_eq(names_lookup_shared(n, "kv", &tok, &len), 0);
	ck_assert_mem_eq(tok, ta, 9);
	/* ... but a bare lookup of 2000 still finds 2000's own. */
	ck_assert_int_eq(names_lookup(n, 2000, "kv", &tok, &len), 0);
	ck_assert_mem_eq(tok, tb, sizeof(tb));
	/* One uid per shared spelling; the refused publish changes nothing. */
	ck_assert_int_eq(names_publish(n, "kv", 2, 2000, NAMES_SHARED, tc,
				       sizeof(tc)), -EEXIST);
	ck_assert_int_eq(names_flags(n, 2000, "kv"), 0);
	ck_assert_int_eq(names_lookup(n, 2000, "kv", &tok, &len), 0);
	ck_assert_mem_eq(tok, tb, sizeof(tb));
	ck_assert_int_eq(names_lookup_shared(n, "kv", &tok, &len), 0);
	ck_assert_mem_eq(tok, ta, 9);
	ck_assert_int_eq(names_lookup_as(n, 3000, 2000, "kv", &tok, &len),
			 -ENOENT);
	/* Unknown flags. */
	ck_assert_int_eq(names_publish(n, "x", 2, 2000, 0x2, tc, 1), -EINVAL);

	/* Private again: out of the shared namespace. */
	ck_assert_int_eq(names_publish(n, "kv", 1, 1000, 0, ta, 8), 0);
	ck_assert_int_eq(names_lookup_shared(n, "kv", &tok, &len), -ENOENT);
	ck_assert_int_eq(names_lookup_as(n, 2000, 1000, "kv", &tok, &len),
			 -ENOENT);
	/* Now 2000 may share the spelling; 1000's goes on unpublish. */
	ck_assert_int_eq(names_publish(n, "kv", 2, 2000, NAMES_SHARED, tc,
				       sizeof(tc)), 0);
	ck_assert_int_eq(names_lookup_shared(n, "kv", &tok, &len), 0);
	ck_assert_mem_eq(tok, tc, sizeof(tc));
	ck_assert_int_eq(names_unpublish(n, "kv", 2, 2000, &flags), 0);
	ck_assert_uint_eq(flags, NAMES_SHARED);
	ck_assert_int_eq(names_lookup_shared(n, "kv", &tok, &len), -ENOENT);
	ck_assert_int_eq(names_lookup(n, 1000, "kv", &tok, &len), 0);
	ck_assert_mem_eq(tok, ta, 8);

	/* A client's departure takes its shared names too. */
	ck_assert_int_eq(names_publish(n, "s1", 1, 1000, NAMES_SHARED, ta, 3),
			 0);
	ck_assert_int_eq(names_publish(n, "s2", 2, 2000, NAMES_SHARED, tb, 4),
			 0);
	names_remove_client(n, 1);
	ck_assert_int_eq(names_lookup_shared(n, "s1", &tok, &len), -ENOENT);
	ck_assert_int_eq(names_lookup(n, 1000, "kv", &tok, &len), -ENOENT);
	ck_assert_int_eq(names_lookup_shared(n, "s2", &tok, &len), 0);
	ck_assert_int_eq(names_publish(n, "s1", 2, 2000, NAMES_SHARED, tb, 5),
			 0);
	ck_assert_uint_eq(names_count(n), 2);
	names_destroy(n);  /* with shared names in it (ASan checks) */
}
END_TEST

static void count_name(void *arg, const char *name, const void *token,
		       size_t len)
{
	(void)name, (void)token, (void)len;
	(*(unsigned *)arg)++;
}

/* What etcd gets: shared names only. */
START_TEST(foreach_shared)
{
	struct names *n = names_create();
	uint8_t tok[8] = { 1 };
	unsigned seen = 0;

	ck_assert_int_eq(names_publish(n, "p", 1, 10, 0, tok, 8), 0);
	ck_assert_int_eq(names_publish(n, "s", 1, 10, NAMES_SHARED, tok, 8), 0);
	ck_assert_int_eq(names_publish(n, "t", 2, 20, NAMES_SHARED, tok, 8), 0);
	ck_assert_int_eq(names_publish(n, "q", 2, 20, 0, tok, 8), 0);
	names_foreach_shared(n, count_name, &seen);
	ck_assert_uint_eq(seen, 2);
	seen = 0;
	names_foreach_client_shared(n, 1, count_name, &seen);
	ck_assert_uint_eq(seen, 1);
	seen = 0;
	names_foreach_client_shared(n, 3, count_name, &seen);
	ck_assert_uint_eq(seen, 0);
	names_destroy(n);
}
END_TEST

START_TEST(many_names)
{
	enum { CLIENTS = 8, PER = 3000 };
	struct names *n = names_create();
	uint8_t tok[40], want[40];
	char name[48];

	/* Far beyond the first bucket array: the table grows under it. */
	for (unsigned c = 0; c < CLIENTS; c++)
		for (unsigned i = 0; i < PER; i++) {
			size_t len = 1 + (c * PER + i) % sizeof(tok);
			snprintf(name, sizeof(name), "cl%u.%u", c, i);
			fake_token(tok, len, c * PER + i);
			ck_assert_int_eq(names_publish(n, name, 100 + c, UID, 0, tok,
						       len), 0);
		}
	ck_assert_uint_eq(names_count(n), CLIENTS * PER);
	for (unsigned c = 0; c < CLIENTS; c++)
		for (unsigned i = 0; i < PER; i++) {
			snprintf(name, sizeof(name), "cl%u.%u", c, i);
			size_t len = 1 + (c * PER + i) % sizeof(want);
			fake_token(want, len, c * PER + i);
			expect(n, name, want, len);
		}
	for (unsigned c = 0; c < CLIENTS; c += 2)
		names_remove_client(n, 100 + c);
	ck_assert_uint_eq(names_count(n), CLIENTS / 2 * PER);
	for (unsigned c = 0; c < CLIENTS; c++) {
		snprintf(name, sizeof(name), "cl%u.%u", c, PER - 1);
		if (c % 2 == 0) {
			expect_absent(n, name);
		} else {
			size_t len = 1 + (c * PER + PER - 1) % sizeof(want);
			fake_token(want, len, c * PER + PER - 1);
			expect(n, name, want, len);
		}
	}
	/* Destroying a full table frees everything (ASan build checks). */
	names_destroy(n);
	names_destroy(NULL);
}
END_TEST

Suite *names_suite(void)
{
	Suite *s = suite_create("names");
	TCase *tc = tcase_create("table");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, valid_names);
	tcase_add_test(tc, publish_lookup_replace);
	tcase_add_test(tc, publish_refuses);
	tcase_add_test(tc, unpublish);
	tcase_add_test(tc, per_client_limit);
	tcase_add_test(tc, remove_client);
	tcase_add_test(tc, uid_namespaces);
	tcase_add_test(tc, foreach_shared);
	tcase_add_test(tc, many_names);
	suite_add_tcase(s, tc);
	return s;
}
