/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_request.h - what the metrics endpoint answers to the bytes a
 * peer has sent so far: the decision of ops/metrics.c, apart from the
 * sockets so that the unit tests and tests/fuzz/fuzz_http_request.c
 * can give it any bytes.
 *
 * State-free, no allocation, no locks: callable from any thread
 * (metrics.c calls it on the main thread).
 */
#ifndef XFERD_HTTP_REQUEST_H
#define XFERD_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

/* The longest request head, its empty line included.  A scraper sends a
 * few hundred bytes of headers and no body. */
#define HTTP_HEAD_MAX 8192

/* The answer, as its HTTP status code; 0: no answer yet. */
enum http_status {
	HTTP_INCOMPLETE = 0,      /* no empty line yet: read on */
	HTTP_OK = 200,            /* GET or HEAD /metrics */
	HTTP_BAD_REQUEST = 400,   /* not a request line */
	HTTP_NOT_FOUND = 404,     /* a path other than /metrics */
	HTTP_BAD_METHOD = 405,    /* neither GET nor HEAD */
	HTTP_HEAD_TOO_LARGE = 431,/* no empty line in HTTP_HEAD_MAX bytes */
	HTTP_BAD_VERSION = 505,   /* neither HTTP/1.0 nor HTTP/1.1 */
};

struct http_request {
	enum http_status status;
	bool head_only;    /* HEAD: the answer's headers, no body (200, 404) */
	size_t head_len;   /* bytes of the head, its empty line included;
			    * 0 unless a head was found */
};

/*
 * Decide the answer to the first len bytes of a connection (buf need not
 * be NUL-terminated and may hold NULs).  The head ends at the first
 * empty line ("\r\n\r\n" or "\n\n") that ends within HTTP_HEAD_MAX
 * bytes; the request line is its first line (up to "\n", one "\r"
 * before it dropped): METHOD SP TARGET SP VERSION, nothing else, no
 * NUL.  Checks go 400, 505, 405, then the path (what precedes "?") is
 * /metrics (200) or not (404).  Header lines are not looked at.
 *
 * Returns the status, also in out->status: HTTP_INCOMPLETE while len <=
 * HTTP_HEAD_MAX and no head has ended, HTTP_HEAD_TOO_LARGE past it.
 * The answer depends on the first HTTP_HEAD_MAX + 1 bytes only.
 */
enum http_status http_request_parse(const char *buf, size_t len,
				    struct http_request *out);

/* The reason phrase of a status this file returns ("OK", "Not Found"). */
const char *http_status_reason(enum http_status status);

#endif /* XFERD_HTTP_REQUEST_H */
