/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_names.c - the publish/lookup table (daemon/meta/names.c): which names
 * are valid, publish and lookup return the stored bytes, replacing by
 * the owner and refusing everyone else, unpublish, the per-client limit,
 * removing a client's names, and a table grown to many thousand names.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "meta/names.h"
#include "suites.h"

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

	ck_assert_msg(names_lookup(n, name, &tok, &len) == 0,
		      "'%s' not found", name);
	ck_assert_uint_eq(len, want_len);
	ck_assert_mem_eq(tok, want, want_len);
}

static void expect_absent(const struct names *n, const char *name)
{
	const void *tok = (const void *)1;
	size_t len = 12345;

	ck_assert_int_eq(names_lookup(n, name, &tok, &len), -ENOENT);
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
	ck_assert_int_eq(names_publish(n, "kv", 7, t1, 300), 0);
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
	ck_assert_int_eq(names_publish(n, "kv", 7, t2, NAMES_TOKEN_MAX), 0);
	ck_assert_uint_eq(names_count(n), 1);
	expect(n, "kv", t2, NAMES_TOKEN_MAX);

	/* Anyone else is refused and changes nothing. */
	fake_token(t3, sizeof(t3), 3);
	ck_assert_int_eq(names_publish(n, "kv", 8, t3, sizeof(t3)), -EEXIST);
	expect(n, "kv", t2, NAMES_TOKEN_MAX);
	ck_assert_uint_eq(names_count(n), 1);

	/* Another name of the other client is fine. */
	ck_assert_int_eq(names_publish(n, "kv2", 8, t3, sizeof(t3)), 0);
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
	ck_assert_int_eq(names_publish(n, longname, 1, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "", 1, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, NULL, 1, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "a/b", 1, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "a\x02", 1, tok, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "ok", 1, tok, 0), -EINVAL);
	ck_assert_int_eq(names_publish(n, "ok", 1, NULL, 10), -EINVAL);
	ck_assert_int_eq(names_publish(n, "ok", 1, tok, NAMES_TOKEN_MAX + 1),
			 -EINVAL);
	ck_assert_uint_eq(names_count(n), 0);
	expect_absent(n, "ok");

	/* The edges that are inside. */
	longname[NAMES_NAME_MAX] = '\0';
	ck_assert_int_eq(names_publish(n, longname, 1, tok, 1), 0);
	expect(n, longname, tok, 1);
	ck_assert_int_eq(names_publish(n, "ok", 1, tok, NAMES_TOKEN_MAX), 0);
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
	ck_assert_int_eq(names_publish(n, "a", 1, tok, sizeof(tok)), 0);
	ck_assert_int_eq(names_publish(n, "b", 1, tok, 10), 0);

	ck_assert_int_eq(names_unpublish(n, "a", 2), -EACCES);
	expect(n, "a", tok, sizeof(tok));
	ck_assert_int_eq(names_unpublish(n, "missing", 1), -ENOENT);
	ck_assert_int_eq(names_unpublish(n, "", 1), -ENOENT);
	ck_assert_int_eq(names_unpublish(n, "x/y", 1), -ENOENT);
	ck_assert_uint_eq(names_count(n), 2);

	ck_assert_int_eq(names_unpublish(n, "a", 1), 0);
	expect_absent(n, "a");
	expect(n, "b", tok, 10);
	ck_assert_uint_eq(names_count(n), 1);
	ck_assert_int_eq(names_unpublish(n, "a", 1), -ENOENT);

	/* Once free, the name is anyone's. */
	ck_assert_int_eq(names_publish(n, "a", 2, tok, 5), 0);
	expect(n, "a", tok, 5);
	ck_assert_int_eq(names_publish(n, "a", 1, tok, 6), -EEXIST);

	/* The last name of a client goes, and the client can come back. */
	ck_assert_int_eq(names_unpublish(n, "b", 1), 0);
	ck_assert_int_eq(names_publish(n, "b", 1, tok, 7), 0);
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
		ck_assert_int_eq(names_publish(n, name, 1, tok, sizeof(tok)), 0);
	}
	ck_assert_int_eq(names_publish(n, "c1.more", 1, tok, sizeof(tok)),
			 -EMLINK);
	expect_absent(n, "c1.more");
	/* Replacing is not adding. */
	ck_assert_int_eq(names_publish(n, "c1.0", 1, tok, 3), 0);
	expect(n, "c1.0", tok, 3);
	/* The limit is per client. */
	ck_assert_int_eq(names_publish(n, "c2.0", 2, tok, sizeof(tok)), 0);
	ck_assert_uint_eq(names_count(n), NAMES_PER_CLIENT_MAX + 1);
	/* Room again after an unpublish. */
	ck_assert_int_eq(names_unpublish(n, "c1.17", 1), 0);
	ck_assert_int_eq(names_publish(n, "c1.more", 1, tok, sizeof(tok)), 0);
	ck_assert_int_eq(names_publish(n, "c1.evenmore", 1, tok, sizeof(tok)),
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
		ck_assert_int_eq(names_publish(n, name, 1 + i % 3, tok,
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
	ck_assert_int_eq(names_publish(n, "n1", 3, tok, 1), 0);
	ck_assert_int_eq(names_publish(n, "n4", 2, tok, 2), 0);
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
			ck_assert_int_eq(names_publish(n, name, 100 + c, tok,
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
	tcase_add_test(tc, many_names);
	suite_add_tcase(s, tc);
	return s;
}
