/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_common.c - the helpers in common/ that both sides share: the
 * published-name rule at its edges (pubname.c), the path-name table
 * (paths.c) and the clock conversions (clock.h).
 */
#include <string.h>

#include "common/clock.h"
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
	suite_add_tcase(s, tc);
	return s;
}
