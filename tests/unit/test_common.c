/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_common.c - the helpers in common/ that both sides share: the
 * published-name rule at its edges (pubname.c), the path-name table
 * (paths.c), the clock conversions (clock.h) and sizes and hex bytes
 * as people write them (numparse.c).
 */
#include <errno.h>
#include <string.h>

#include "common/clock.h"
#include "common/numparse.h"
#include "common/paths.h"
#include "common/pubname.h"
#include "suites.h"

static bool valid(const char *s)
{
	return pubname_valid(s, strlen(s));
}

START_TEST(test_pubname_chars)
{
	ck_assert(valid("a"));
	ck_assert(valid("kv.layer-3:block_17@rank+2"));
	ck_assert(valid("._:@+-"));
	ck_assert(!valid(""));
	ck_assert(!valid("a/b"));
	ck_assert(!valid("a b"));
	ck_assert(!valid("a\tb"));
	ck_assert(!valid("\x7f"));
	ck_assert(!valid("caf\xc3\xa9"));
	ck_assert(!valid("a,b"));
	ck_assert(!pubname_valid(NULL, 1));
	/* The length is what counts, not a NUL: an embedded NUL is bad. */
	ck_assert(!pubname_valid("a\0b", 3));
	ck_assert(pubname_valid("ab/", 2));
}
END_TEST

START_TEST(test_pubname_limits)
{
	char name[PUBNAME_MAX + 2];

	/* The public limit and the common one are the same number. */
	ck_assert_int_eq(PUBNAME_MAX, XFER_NAME_MAX);
	ck_assert_int_eq(PUBNAME_MAX, 200);
	memset(name, 'x', sizeof(name));
	ck_assert(pubname_valid(name, PUBNAME_MAX));
	ck_assert(!pubname_valid(name, PUBNAME_MAX + 1));
	name[PUBNAME_MAX] = '\0';
	ck_assert(pubname_lookup_valid(name));
	name[PUBNAME_MAX] = 'x';
	name[PUBNAME_MAX + 1] = '\0';
	ck_assert(!pubname_lookup_valid(name));
}
END_TEST

START_TEST(test_pubname_lookup)
{
	char s[PUBNAME_NODE_MAX + 8];

	ck_assert(pubname_lookup_valid("kv"));
	ck_assert(pubname_lookup_valid("b/kv"));
	ck_assert(pubname_lookup_valid("10.0.1.2:7474/kv"));
	ck_assert(pubname_lookup_valid("[fe80::1]:7474/kv-7"));
	ck_assert(!pubname_lookup_valid(NULL));
	ck_assert(!pubname_lookup_valid(""));
	ck_assert(!pubname_lookup_valid("/kv"));      /* empty node */
	ck_assert(!pubname_lookup_valid("b/"));       /* empty name */
	ck_assert(!pubname_lookup_valid("a/b/kv"));   /* '/' in the name */
	ck_assert(!pubname_lookup_valid("my node/kv"));
	ck_assert(!pubname_lookup_valid("n\x7f/kv"));
	/* The node part: 79 bytes fit xferd's 80-byte buffers, 80 not. */
	memset(s, 'h', PUBNAME_NODE_MAX);
	strcpy(s + PUBNAME_NODE_MAX, "/kv");
	ck_assert(pubname_lookup_valid(s));
	memset(s, 'h', PUBNAME_NODE_MAX + 1);
	strcpy(s + PUBNAME_NODE_MAX + 1, "/kv");
	ck_assert(!pubname_lookup_valid(s));
	ck_assert(pubname_node_valid("h", 1));
	ck_assert(!pubname_node_valid("h", 0));
	ck_assert(!pubname_node_valid(NULL, 1));
}
END_TEST

/* "[node/][~uid/]name": the uid qualifier takes nothing that was valid. */
START_TEST(test_pubname_uid)
{
	struct pubname_ref r;

	ck_assert(pubname_lookup_parse("kv", &r));
	ck_assert_ptr_null(r.node);
	ck_assert_uint_eq(r.uid, PUBNAME_NO_UID);
	ck_assert_str_eq(r.name, "kv");
	ck_assert_str_eq(r.qname, "kv");

	ck_assert(pubname_lookup_parse("~1000/kv", &r));
	ck_assert_ptr_null(r.node);
	ck_assert_uint_eq(r.uid, 1000);
	ck_assert_str_eq(r.name, "kv");
	ck_assert_str_eq(r.qname, "~1000/kv");
	ck_assert(pubname_lookup_parse("~0/kv", &r));
	ck_assert_uint_eq(r.uid, 0);
	ck_assert(pubname_lookup_parse("~4294967294/kv", &r));
	ck_assert_uint_eq(r.uid, 4294967294u);

	ck_assert(pubname_lookup_parse("b:7474/~7/kv.1", &r));
	ck_assert_uint_eq(r.node_len, 6);
	ck_assert_mem_eq(r.node, "b:7474", 6);
	ck_assert_uint_eq(r.uid, 7);
	ck_assert_str_eq(r.qname, "~7/kv.1");
	ck_assert_str_eq(r.name, "kv.1");
	ck_assert(pubname_lookup_parse("b/kv", &r));
	ck_assert_uint_eq(r.uid, PUBNAME_NO_UID);
	ck_assert_str_eq(r.qname, "kv");

	/* (uid_t)-1 is no uid; one spelling per uid; digits only. */
	ck_assert(!pubname_lookup_valid("~4294967295/kv"));
	ck_assert(!pubname_lookup_valid("~99999999999/kv"));
	ck_assert(!pubname_lookup_valid("~01/kv"));
	ck_assert(!pubname_lookup_valid("~/kv"));
	ck_assert(!pubname_lookup_valid("~-1/kv"));
	ck_assert(!pubname_lookup_valid("~+1/kv"));
	ck_assert(!pubname_lookup_valid("~1x/kv"));
	ck_assert(!pubname_lookup_valid("~alice/kv"));
	ck_assert(!pubname_lookup_valid("~1000"));     /* no name */
	ck_assert(!pubname_lookup_valid("~1000/"));
	ck_assert(!pubname_lookup_valid("~1/~2/kv"));
	ck_assert(!pubname_lookup_valid("b/~1/~2/kv"));
	ck_assert(!pubname_lookup_valid("b/~1/c/kv"));
	ck_assert(!pubname_lookup_valid("b/c/kv"));    /* still invalid */
	ck_assert(!pubname_lookup_valid("~b/kv"));     /* no '~' node */
	ck_assert(!pubname_node_valid("~b", 2));
	ck_assert(!pubname_valid("~1000", 5));          /* nor a name */
	/* A peer is asked for "[~uid/]name": no node there. */
	ck_assert(pubname_qualified_parse("~5/kv", &r));
	ck_assert_uint_eq(r.uid, 5);
	ck_assert(pubname_qualified_parse("kv", &r));
	ck_assert(!pubname_qualified_parse("b/kv", &r));
	ck_assert(!pubname_qualified_parse(NULL, &r));
}
END_TEST

START_TEST(test_path_names)
{
	ck_assert_str_eq(path_name(XFER_PATH_NONE), "none");
	ck_assert_str_eq(path_name(XFER_PATH_MEMCPY), "memcpy");
	ck_assert_str_eq(path_name(XFER_PATH_CMA), "cma");
	ck_assert_str_eq(path_name(XFER_PATH_CUDA_IPC), "cuda-ipc");
	ck_assert_str_eq(path_name(XFER_PATH_RDMA), "rdma");
	ck_assert_str_eq(path_name(XFER_PATH_RDMA_STAGED), "rdma-staged");
	ck_assert_str_eq(path_name(XFER_PATH_CUDA_STAGED), "cuda-staged");
	ck_assert_str_eq(path_name(XFER_PATH_TCP), "tcp");
	ck_assert_str_eq(path_name(XFER_PATH__COUNT), "unknown");
	ck_assert_str_eq(path_name(~0u), "unknown");
}
END_TEST

START_TEST(test_clock)
{
	struct timeval tv = ms_to_timeval(2345);

	ck_assert_int_eq(tv.tv_sec, 2);
	ck_assert_int_eq(tv.tv_usec, 345000);
	tv = ms_to_timeval(999);
	ck_assert_int_eq(tv.tv_sec, 0);
	ck_assert_int_eq(tv.tv_usec, 999000);
	tv = us_to_timeval(3000001);
	ck_assert_int_eq(tv.tv_sec, 3);
	ck_assert_int_eq(tv.tv_usec, 1);

	uint64_t a = now_ns(), b = now_ns();
	ck_assert(a > 0);
	ck_assert(b >= a);   /* monotonic */
}
END_TEST

START_TEST(test_numparse_size)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 },
		{ "123", 123 },
		{ "64K", 64ull << 10 }, { "64k", 64ull << 10 },
		{ "16M", 16ull << 20 }, { "16m", 16ull << 20 },
		{ "2G", 2ull << 30 }, { "2g", 2ull << 30 },
		{ "3T", 3ull << 40 }, { "3t", 3ull << 40 },
		{ "0K", 0 },
		{ "007", 7 },
		{ "18446744073709551615", UINT64_MAX },
		{ "16777215T", 16777215ull << 40 },
		{ "17179869183G", 17179869183ull << 30 },
	};
	static const char *bad[] = {
		"", " 1", "-1", "+1", "K", "1.5G", "1KB", "1 K", "1P", "1e3",
		"0x10", "12abc", "1K ", "18446744073709551616",
		"99999999999999999999999", "16777216T", "17179869184G",
		"17592186044416M", "18014398509481984K",
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 42;
		ck_assert_msg(numparse_size(ok[i].s, 0, &v) == 0,
			      "'%s' rejected", ok[i].s);
		ck_assert_msg(v == ok[i].v, "'%s' -> %llu", ok[i].s,
			      (unsigned long long)v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 42;
		ck_assert_msg(numparse_size(bad[i], 0, &v) == -EINVAL,
			      "'%s' accepted as %llu", bad[i],
			      (unsigned long long)v);
		ck_assert_uint_eq(v, 42);
	}
}
END_TEST

/* The tools' spellings: "8B", "4KiB"; and hex or octal where asked. */
START_TEST(test_numparse_size_flags)
{
	uint64_t v = 0;

	ck_assert_int_eq(numparse_size("8B", NUMPARSE_BYTE_UNIT, &v), 0);
	ck_assert_uint_eq(v, 8);
	ck_assert_int_eq(numparse_size("4KiB", NUMPARSE_BYTE_UNIT, &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(numparse_size("16MB", NUMPARSE_BYTE_UNIT, &v), 0);
	ck_assert_uint_eq(v, 16u << 20);
	ck_assert_int_eq(numparse_size("8iB", NUMPARSE_BYTE_UNIT, &v), -EINVAL);
	ck_assert_int_eq(numparse_size("4KiB", 0, &v), -EINVAL);
	ck_assert_int_eq(numparse_size("0x10", NUMPARSE_ANY_BASE, &v), 0);
	ck_assert_uint_eq(v, 16);
	ck_assert_int_eq(numparse_size("0x10K", NUMPARSE_ANY_BASE, &v), 0);
	ck_assert_uint_eq(v, 16u << 10);
	ck_assert_int_eq(numparse_size("010", NUMPARSE_ANY_BASE, &v), 0);
	ck_assert_uint_eq(v, 8);
	ck_assert_int_eq(numparse_size("-1", NUMPARSE_ANY_BASE, &v), -EINVAL);
	ck_assert_int_eq(numparse_size(" 1", NUMPARSE_ANY_BASE, &v), -EINVAL);
}
END_TEST

START_TEST(test_numparse_hex_byte)
{
	ck_assert_int_eq(numparse_hex_byte("00"), 0);
	ck_assert_int_eq(numparse_hex_byte("3f"), 0x3f);
	ck_assert_int_eq(numparse_hex_byte("A9"), 0xa9);
	ck_assert_int_eq(numparse_hex_byte("fF"), 0xff);
	ck_assert_int_eq(numparse_hex_byte("g0"), -1);
	ck_assert_int_eq(numparse_hex_byte("0g"), -1);
	ck_assert_int_eq(numparse_hex_byte("0:"), -1);
	ck_assert_int_eq(numparse_hex_byte("\0"), -1);  /* s[1] not read */
	ck_assert_int_eq(numparse_hex_byte("1"), -1);    /* 1 then the NUL */
}
END_TEST

Suite *common_suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc = tcase_create("helpers");

	tcase_add_test(tc, test_pubname_chars);
	tcase_add_test(tc, test_pubname_limits);
	tcase_add_test(tc, test_pubname_lookup);
	tcase_add_test(tc, test_pubname_uid);
	tcase_add_test(tc, test_path_names);
	tcase_add_test(tc, test_clock);
	tcase_add_test(tc, test_numparse_size);
	tcase_add_test(tc, test_numparse_size_flags);
	tcase_add_test(tc, test_numparse_hex_byte);
	suite_add_tcase(s, tc);
	return s;
}
