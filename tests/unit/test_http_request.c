/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_http_request.c - what the metrics endpoint answers to a request
 * head (ops/http_request.c): each answer, and the heads a hostile peer
 * sends (NULs, no version, extra spaces, LF or CRLF, a head exactly at
 * the limit and one byte past it, query strings, bytes arriving one by
 * one).
 */
#include <stdio.h>
#include <string.h>

#include "ops/http_request.h"
#include "suites.h"

/* The answer to a C string (no NUL in it). */
static enum http_status parse(const char *s, struct http_request *r)
{
	return http_request_parse(s, strlen(s), r);
}

static enum http_status status_of(const char *s)
{
	struct http_request r;

	return parse(s, &r);
}

START_TEST(get_and_head)
{
	struct http_request r;
	const char *get = "GET /metrics HTTP/1.1\r\nHost: x\r\n"
			  "Accept: */*\r\n\r\n";

	ck_assert_int_eq(parse(get, &r), HTTP_OK);
	ck_assert_int_eq(r.status, HTTP_OK);
	ck_assert(!r.head_only);
	ck_assert_uint_eq(r.head_len, strlen(get));
	ck_assert_int_eq(parse("HEAD /metrics HTTP/1.0\r\n\r\n", &r), HTTP_OK);
	ck_assert(r.head_only);
	ck_assert_uint_eq(r.head_len, 26);
	/* No header at all, HTTP/1.0 as curl -0 and old scrapers send. */
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.0\r\n\r\n"), HTTP_OK);
	/* A body or a second request after the head is not read. */
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\r\n\r\nGET / HTTP/1.1",
			       &r), HTTP_OK);
	ck_assert_uint_eq(r.head_len, 25);
	ck_assert_str_eq(http_status_reason(HTTP_OK), "OK");
}
END_TEST

START_TEST(each_error)
{
	struct http_request r;

	ck_assert_int_eq(parse("GET / HTTP/1.1\r\n\r\n", &r), HTTP_NOT_FOUND);
	ck_assert(!r.head_only);
	ck_assert_int_eq(parse("HEAD /other HTTP/1.1\r\n\r\n", &r),
			 HTTP_NOT_FOUND);
	ck_assert(r.head_only);   /* a HEAD gets no body, even a 404 */
	ck_assert_int_eq(parse("POST /metrics HTTP/1.1\r\n\r\n", &r),
			 HTTP_BAD_METHOD);
	ck_assert(!r.head_only);
	ck_assert_int_eq(status_of("get /metrics HTTP/1.1\r\n\r\n"),
			 HTTP_BAD_METHOD);   /* methods are case-sensitive */
	ck_assert_int_eq(status_of("GETX /metrics HTTP/1.1\r\n\r\n"),
			 HTTP_BAD_METHOD);
	ck_assert_int_eq(status_of("GET /metrics HTTP/2.0\r\n\r\n"),
			 HTTP_BAD_VERSION);
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.10\r\n\r\n"),
			 HTTP_BAD_VERSION);
	ck_assert_int_eq(status_of("GET /metrics http/1.1\r\n\r\n"),
			 HTTP_BAD_VERSION);
	/* The version is checked before the method, the method before the
	 * path, as a client fixing one thing at a time expects. */
	ck_assert_int_eq(status_of("PUT /x HTTP/3\r\n\r\n"), HTTP_BAD_VERSION);
	ck_assert_int_eq(status_of("PUT /x HTTP/1.1\r\n\r\n"), HTTP_BAD_METHOD);
	static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc"
				  "\x03\x03 \n\n";   /* a TLS hello */
	ck_assert_int_eq(http_request_parse(tls, sizeof(tls) - 1, &r),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("SSH-2.0-OpenSSH_9.2\r\n\r\n"),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("\r\n\r\n"), HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("\n\n"), HTTP_BAD_REQUEST);
	ck_assert_str_eq(http_status_reason(HTTP_NOT_FOUND), "Not Found");
	ck_assert_str_eq(http_status_reason(HTTP_BAD_METHOD),
			 "Method Not Allowed");
	ck_assert_str_eq(http_status_reason(HTTP_BAD_VERSION),
			 "HTTP Version Not Supported");
	ck_assert_str_eq(http_status_reason(HTTP_BAD_REQUEST), "Bad Request");
	ck_assert_str_eq(http_status_reason(HTTP_HEAD_TOO_LARGE),
			 "Request Header Fields Too Large");
}
END_TEST

START_TEST(request_line_shape)
{
	/* HTTP/0.9: no version. */
	ck_assert_int_eq(status_of("GET /metrics\r\n\r\n"), HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("GET\r\n\r\n"), HTTP_BAD_REQUEST);
	/* Extra spaces anywhere: a space left in the version, or an empty
	 * target. */
	ck_assert_int_eq(status_of("GET  /metrics HTTP/1.1\r\n\r\n"),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("GET /metrics  HTTP/1.1\r\n\r\n"),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.1 \r\n\r\n"),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.1 x\r\n\r\n"),
			 HTTP_BAD_REQUEST);
	/* A leading space: an empty method, not one we answer. */
	ck_assert_int_eq(status_of(" /metrics HTTP/1.1\r\n\r\n"),
			 HTTP_BAD_METHOD);
	/* Only a space separates: a tab stays in the field it is in. */
	ck_assert_int_eq(status_of("GET\t/metrics HTTP/1.1\r\n\r\n"),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("GET /metrics\t HTTP/1.1\r\n\r\n"),
			 HTTP_NOT_FOUND);
	/* The target is a path, not an absolute URI or '*'. */
	ck_assert_int_eq(status_of("GET http://h/metrics HTTP/1.1\r\n\r\n"),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("OPTIONS * HTTP/1.1\r\n\r\n"),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("GET /metrics/ HTTP/1.1\r\n\r\n"),
			 HTTP_NOT_FOUND);
	ck_assert_int_eq(status_of("GET /METRICS HTTP/1.1\r\n\r\n"),
			 HTTP_NOT_FOUND);
	ck_assert_int_eq(status_of("GET //metrics HTTP/1.1\r\n\r\n"),
			 HTTP_NOT_FOUND);
	ck_assert_int_eq(status_of("GET /metrics#x HTTP/1.1\r\n\r\n"),
			 HTTP_NOT_FOUND);
}
END_TEST

START_TEST(query_strings)
{
	struct http_request r;

	ck_assert_int_eq(status_of("GET /metrics? HTTP/1.1\r\n\r\n"), HTTP_OK);
	ck_assert_int_eq(status_of("GET /metrics?name[]=x&y HTTP/1.1\r\n\r\n"),
			 HTTP_OK);
	ck_assert_int_eq(parse("HEAD /metrics?/other HTTP/1.1\r\n\r\n", &r),
			 HTTP_OK);
	ck_assert(r.head_only);
	/* Only the first '?' starts the query. */
	ck_assert_int_eq(status_of("GET /metrics?a?b HTTP/1.1\r\n\r\n"),
			 HTTP_OK);
	ck_assert_int_eq(status_of("GET /?/metrics HTTP/1.1\r\n\r\n"),
			 HTTP_NOT_FOUND);
	ck_assert_int_eq(status_of("GET /metricsx?a HTTP/1.1\r\n\r\n"),
			 HTTP_NOT_FOUND);
	ck_assert_int_eq(status_of("GET /metrics%3F HTTP/1.1\r\n\r\n"),
			 HTTP_NOT_FOUND);   /* no decoding */
}
END_TEST

START_TEST(line_ends)
{
	struct http_request r;

	/* LF alone, as netcat and hand-typed requests send. */
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\nHost: x\n\n", &r),
			 HTTP_OK);
	ck_assert_uint_eq(r.head_len, 31);
	/* CRLF request line, LF empty line: "\n\n" ends the head. */
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\r\n\n", &r), HTTP_OK);
	ck_assert_uint_eq(r.head_len, 24);
	/* "\n\r\n" is not an empty line of either kind: read on. */
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\n\r\n", &r),
			 HTTP_INCOMPLETE);
	ck_assert_uint_eq(r.head_len, 0);
	/* The earlier end wins, whichever kind. */
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\n\nx\r\n\r\n", &r),
			 HTTP_OK);
	ck_assert_uint_eq(r.head_len, 23);
	/* One CR before the LF is the line's end; another is in the line
	 * (here: in the version). */
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.1\r\r\n\r\n"),
			 HTTP_BAD_VERSION);
	/* A lone CR does not end a line: what follows it is in the
	 * version, or with a space in it, a request line of four words. */
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.1\rX:y\r\n\r\n"),
			 HTTP_BAD_VERSION);
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.1\rX: y\r\n\r\n"),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.1\r\r\r\r"),
			 HTTP_INCOMPLETE);
	/* Not a head yet. */
	ck_assert_int_eq(parse("", &r), HTTP_INCOMPLETE);
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.1\r\n"),
			 HTTP_INCOMPLETE);
	ck_assert_int_eq(status_of("GET /metrics HTTP/1.1\r\nHost: x\r\n\r"),
			 HTTP_INCOMPLETE);
}
END_TEST

START_TEST(nul_bytes)
{
	static const char in_method[] = "GE\0T /metrics HTTP/1.1\r\n\r\n";
	static const char in_target[] = "GET /metrics\0 HTTP/1.1\r\n\r\n";
	static const char in_version[] = "GET /metrics HTTP/1.1\0\r\n\r\n";
	static const char in_path[] = "GET /met\0rics HTTP/1.1\r\n\r\n";
	static const char in_header[] = "GET /metrics HTTP/1.1\r\nX: \0\r\n\r\n";
	static const char first[] = "\0GET /metrics HTTP/1.1\r\n\r\n";
	struct http_request r;

	/* sizeof - 1: the literal's own terminating NUL is not sent. */
	ck_assert_int_eq(http_request_parse(in_method, sizeof(in_method) - 1,
					    &r), HTTP_BAD_REQUEST);
	ck_assert_int_eq(http_request_parse(in_target, sizeof(in_target) - 1,
					    &r), HTTP_BAD_REQUEST);
	ck_assert_int_eq(http_request_parse(in_version,
					    sizeof(in_version) - 1, &r),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(http_request_parse(in_path, sizeof(in_path) - 1, &r),
			 HTTP_BAD_REQUEST);
	ck_assert_int_eq(http_request_parse(first, sizeof(first) - 1, &r),
			 HTTP_BAD_REQUEST);
	/* Header lines are not looked at: a NUL there changes nothing. */
	ck_assert_int_eq(http_request_parse(in_header, sizeof(in_header) - 1,
					    &r), HTTP_OK);
	ck_assert_uint_eq(r.head_len, sizeof(in_header) - 1);
	/* Only len bytes are read: what follows them does not count. */
	ck_assert_int_eq(http_request_parse("GET /metrics HTTP/1.1\n\nGET",
					    21, &r), HTTP_INCOMPLETE);
}
END_TEST

/* A request for /metrics whose head is exactly `total` bytes, padded
 * with one header line, ending with `eol` lines. */
static size_t head_of(char *buf, size_t total, const char *eol)
{
	size_t e = strlen(eol);
	size_t n = (size_t)sprintf(buf, "GET /metrics HTTP/1.1%sX: ", eol);

	ck_assert(total >= n + 2 * e);
	memset(buf + n, 'a', total - n - 2 * e);
	memcpy(buf + total - 2 * e, eol, e);
	memcpy(buf + total - e, eol, e);
	return total;
}

static char big[HTTP_HEAD_MAX * 2];

START_TEST(head_limit)
{
	static const char *eols[] = { "\r\n", "\n" };
	struct http_request r;

	for (unsigned i = 0; i < 2; i++) {
		/* Exactly the limit: answered, even with more bytes after
		 * it (a body, a pipelined request). */
		size_t n = head_of(big, HTTP_HEAD_MAX, eols[i]);
		ck_assert_int_eq(http_request_parse(big, n, &r), HTTP_OK);
		ck_assert_uint_eq(r.head_len, HTTP_HEAD_MAX);
		memset(big + n, 'b', sizeof(big) - n);
		ck_assert_int_eq(http_request_parse(big, n + 1, &r), HTTP_OK);
		ck_assert_int_eq(http_request_parse(big, sizeof(big), &r),
				 HTTP_OK);
		/* One byte short of it: still reading. */
		ck_assert_int_eq(http_request_parse(big, n - 1, &r),
				 HTTP_INCOMPLETE);

		/* One byte past the limit: 431 as soon as byte
		 * HTTP_HEAD_MAX + 1 is there, before the head ends. */
		n = head_of(big, HTTP_HEAD_MAX + 1, eols[i]);
		ck_assert_int_eq(http_request_parse(big, HTTP_HEAD_MAX, &r),
				 HTTP_INCOMPLETE);
		ck_assert_int_eq(http_request_parse(big, n, &r),
				 HTTP_HEAD_TOO_LARGE);
		ck_assert_uint_eq(r.head_len, 0);
		ck_assert_int_eq(http_request_parse(big, sizeof(big), &r),
				 HTTP_HEAD_TOO_LARGE);
	}
	/* No line end at all. */
	memset(big, 'G', sizeof(big));
	ck_assert_int_eq(http_request_parse(big, HTTP_HEAD_MAX, &r),
			 HTTP_INCOMPLETE);
	ck_assert_int_eq(http_request_parse(big, HTTP_HEAD_MAX + 1, &r),
			 HTTP_HEAD_TOO_LARGE);
	/* A request line as long as the whole head may be. */
	memcpy(big, "GET /", 5);
	memcpy(big + HTTP_HEAD_MAX - 13, " HTTP/1.1\r\n\r\n", 13);
	ck_assert_int_eq(http_request_parse(big, HTTP_HEAD_MAX, &r),
			 HTTP_NOT_FOUND);
}
END_TEST

/* Bytes arrive one at a time (a slow or hostile peer): no answer until
 * the head has ended, then the same answer as all at once. */
START_TEST(byte_by_byte)
{
	static const char *heads[] = {
		"GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n",
		"HEAD /x?y HTTP/1.0\n\n",
		"DELETE /metrics HTTP/1.1\r\n\r\n",
		"GET /metrics HTTP/9\r\n\r\n",
		"garbage\n\n",
	};
	struct http_request r, whole;

	for (unsigned i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		size_t n = strlen(heads[i]);

		http_request_parse(heads[i], n, &whole);
		ck_assert_int_ne(whole.status, HTTP_INCOMPLETE);
		for (size_t k = 0; k < n; k++)
			ck_assert_int_eq(http_request_parse(heads[i], k, &r),
					 HTTP_INCOMPLETE);
		ck_assert_int_eq(http_request_parse(heads[i], n, &r),
				 whole.status);
		ck_assert_int_eq(r.head_only, whole.head_only);
		ck_assert_uint_eq(r.head_len, n);
	}
}
END_TEST

Suite *http_request_suite(void)
{
	Suite *s = suite_create("http_request");
	TCase *tc = tcase_create("answer");

	tcase_add_test(tc, get_and_head);
	tcase_add_test(tc, each_error);
	tcase_add_test(tc, request_line_shape);
	tcase_add_test(tc, query_strings);
	suite_add_tcase(s, tc);
	tc = tcase_create("framing");
	tcase_add_test(tc, line_ends);
	tcase_add_test(tc, nul_bytes);
	tcase_add_test(tc, head_limit);
	tcase_add_test(tc, byte_by_byte);
	suite_add_tcase(s, tc);
	return s;
}
