/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_http_request.c - the request head of the metrics endpoint as
 * metrics.c hands it over: the first bytes of a connection, from anyone
 * who reaches the port, to http_request_parse()
 * (daemon/ops/http_request.c).
 *
 * Invariants: the answer is one of the statuses the endpoint sends; it
 * comes only once a head has ended (or HTTP_HEAD_MAX bytes have come
 * without one: 431), and then from the head alone: the same for the
 * head without what follows it, none for the head less one byte, the
 * same for the first HTTP_HEAD_MAX + 1 bytes; 200 only for GET or HEAD
 * of /metrics; head_only only for HEAD.
 */
#include <string.h>

#include "fuzz.h"
#include "ops/http_request.h"

static int starts(const uint8_t *data, size_t size, const char *s)
{
	size_t n = strlen(s);

	return size >= n && !memcmp(data, s, n);
}

static int same(const struct http_request *a, const struct http_request *b)
{
	return a->status == b->status && a->head_only == b->head_only &&
	       a->head_len == b->head_len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct http_request r, again;
	enum http_status st = http_request_parse(buf, size, &r);

	FUZZ_ASSERT(st == r.status);
	switch (st) {
	case HTTP_INCOMPLETE:
		FUZZ_ASSERT(size <= HTTP_HEAD_MAX && r.head_len == 0 &&
			    !r.head_only);
		return 0;
	case HTTP_HEAD_TOO_LARGE:
		FUZZ_ASSERT(size > HTTP_HEAD_MAX && r.head_len == 0 &&
			    !r.head_only);
		/* Bytes past the limit do not matter. */
		http_request_parse(buf, HTTP_HEAD_MAX + 1, &again);
		FUZZ_ASSERT(same(&r, &again));
		http_request_parse(buf, HTTP_HEAD_MAX, &again);
		FUZZ_ASSERT(again.status == HTTP_INCOMPLETE);
		return 0;
	case HTTP_OK:
		FUZZ_ASSERT(starts(data, size, "GET /metrics") ||
			    starts(data, size, "HEAD /metrics"));
		break;
	case HTTP_NOT_FOUND:
		FUZZ_ASSERT(starts(data, size, "GET /") ||
			    starts(data, size, "HEAD /"));
		break;
	case HTTP_BAD_REQUEST:
	case HTTP_BAD_METHOD:
	case HTTP_BAD_VERSION:
		FUZZ_ASSERT(!r.head_only);
		break;
	default:
		FUZZ_ASSERT(0);   /* a status the endpoint does not send */
	}
	FUZZ_ASSERT(*http_status_reason(st));
	FUZZ_ASSERT(r.head_only == (st != HTTP_BAD_REQUEST &&
				    st != HTTP_BAD_METHOD &&
				    st != HTTP_BAD_VERSION &&
				    starts(data, size, "HEAD ")));
	/* A head that ended within the limit, at an empty line. */
	FUZZ_ASSERT(r.head_len >= 2 && r.head_len <= size &&
		    r.head_len <= HTTP_HEAD_MAX);
	FUZZ_ASSERT(!memcmp(buf + r.head_len - 2, "\n\n", 2) ||
		    (r.head_len >= 4 &&
		     !memcmp(buf + r.head_len - 4, "\r\n\r\n", 4)));
	/* Decided by the head alone, and not before it ended. */
	http_request_parse(buf, r.head_len, &again);
	FUZZ_ASSERT(same(&r, &again));
	http_request_parse(buf, r.head_len - 1, &again);
	FUZZ_ASSERT(again.status == HTTP_INCOMPLETE);
	if (size > HTTP_HEAD_MAX + 1) {
		http_request_parse(buf, HTTP_HEAD_MAX + 1, &again);
		FUZZ_ASSERT(same(&r, &again));
	}
	return 0;
}
