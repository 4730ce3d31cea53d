/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_request.c - the request head of the metrics endpoint, from bytes
 * to the answer (see http_request.h).  Anyone who reaches the port
 * chooses these bytes: every read stays inside [buf, buf + len), nothing
 * is written but *out, and no answer needs more than the first
 * HTTP_HEAD_MAX + 1 bytes, so a peer cannot make the server hold more.
 *
 * State-free, no allocation, no locks: any thread.
 */
#include <string.h>

#include "ops/http_request.h"

/* The length of the head: up to the end of its first empty line, which
 * must end within the first `scan` bytes; 0 if there is none. */
static size_t head_end(const char *buf, size_t scan)
{
	const char *p = buf, *end = buf + scan;

	while ((p = memchr(p, '\n', (size_t)(end - p)))) {
		size_t i = (size_t)(p - buf);

		if (i >= 1 && buf[i - 1] == '\n')
			return i + 1;                         /* "\n\n" */
		if (i >= 3 && !memcmp(buf + i - 3, "\r\n\r\n", 4))
			return i + 1;
		p++;
	}
	return 0;
}

static bool span_is(const char *p, size_t n, const char *s)
{
	return n == strlen(s) && !memcmp(p, s, n);
}

/* The request line (line, n: without its end) to an answer. */
static enum http_status request_line(const char *line, size_t n,
				     bool *head_only)
{
	const char *end = line + n, *sp1, *sp2, *target, *version, *q;
	size_t method_len, target_len, version_len;

	*head_only = false;
	if (memchr(line, '\0', n))
		return HTTP_BAD_REQUEST;
	sp1 = memchr(line, ' ', n);
	if (!sp1)
		return HTTP_BAD_REQUEST;
	target = sp1 + 1;
	sp2 = memchr(target, ' ', (size_t)(end - target));
	if (!sp2)
		return HTTP_BAD_REQUEST;
	version = sp2 + 1;
	method_len = (size_t)(sp1 - line);
	target_len = (size_t)(sp2 - target);
	version_len = (size_t)(end - version);
	/* One space between the three and none after: an extra space
	 * leaves a space in the version, or an empty target. */
	if (memchr(version, ' ', version_len) || target_len == 0 ||
	    target[0] != '/')
		return HTTP_BAD_REQUEST;
	if (!span_is(version, version_len, "HTTP/1.0") &&
	    !span_is(version, version_len, "HTTP/1.1"))
		return HTTP_BAD_VERSION;
	bool head = span_is(line, method_len, "HEAD");
	if (!head && !span_is(line, method_len, "GET"))
		return HTTP_BAD_METHOD;
	*head_only = head;
	/* The query string, whatever it says, does not change the answer. */
	q = memchr(target, '?', target_len);
	if (q)
		target_len = (size_t)(q - target);
	return span_is(target, target_len, "/metrics") ? HTTP_OK :
							   HTTP_NOT_FOUND;
}

enum http_status http_request_parse(const char *buf, size_t len,
				    struct http_request *out)
{
	size_t scan = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
	size_t head = head_end(buf, scan), n;
	const char *eol;

	*out = (struct http_request){ .status = HTTP_INCOMPLETE };
	if (!head) {
		if (len > HTTP_HEAD_MAX)
			out->status = HTTP_HEAD_TOO_LARGE;
		return out->status;
	}
	out->head_len = head;
	/* The head ends in "\n": its first line does too. */
	eol = memchr(buf, '\n', head);
	n = (size_t)(eol - buf);
	if (n && buf[n - 1] == '\r')
		n--;
	out->status = request_line(buf, n, &out->head_only);
	return out->status;
}

const char *http_status_reason(enum http_status status)
{
	switch (status) {
	case HTTP_OK:
		return "OK";
	case HTTP_BAD_REQUEST:
		return "Bad Request";
	case HTTP_NOT_FOUND:
		return "Not Found";
	case HTTP_BAD_METHOD:
		return "Method Not Allowed";
	case HTTP_HEAD_TOO_LARGE:
		return "Request Header Fields Too Large";
	case HTTP_BAD_VERSION:
		return "HTTP Version Not Supported";
	case HTTP_INCOMPLETE:
		break;
	}
	return "";
}
