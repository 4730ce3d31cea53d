/* SPDX-License-Identifier: Apache-2.0 */
/*
 * expo_check.h - a strict reader of the Prometheus text exposition
 * format (0.0.4) for the tests of ops/metrics_text.c: the unit tests and
 * the fuzz harness hold the writer's output to it.
 *
 * Returns 0 when every line is a comment (# HELP / # TYPE with a valid
 * name) or a sample of a family whose TYPE came before it, with valid
 * label names, properly escaped label values and a number; else the
 * 1-based number of the first bad line.
 */
#ifndef XFER_EXPO_CHECK_H
#define XFER_EXPO_CHECK_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline bool expo_name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       c == ':' || (!first && c >= '0' && c <= '9');
}

/* A metric or label name at *p; advances past it. */
static inline bool expo_name(const char **p, const char *end)
{
	const char *s = *p;

	if (s >= end || !expo_name_char(*s, true))
		return false;
	while (s < end && expo_name_char(*s, false))
		s++;
	*p = s;
	return true;
}

static inline bool expo_value(const char *s, const char *end)
{
	char buf[64], *e;
	size_t n = (size_t)(end - s);

	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (!strcmp(buf, "+Inf") || !strcmp(buf, "-Inf") || !strcmp(buf, "NaN"))
		return true;
	strtod(buf, &e);
	return *e == '\0';
}

static inline bool expo_sample(const char *s, const char *end,
			       const char *typed, size_t typed_len)
{
	const char *name = s;

	if (!expo_name(&s, end))
		return false;
	/* Its family: the TYPE line's name, or that plus a histogram's
	 * _bucket, _sum, _count. */
	size_t n = (size_t)(s - name);
	if (!typed || n < typed_len || strncmp(name, typed, typed_len))
		return false;
	const char *suf = name + typed_len;
	size_t sl = n - typed_len;
	if (sl && !(sl == 7 && !memcmp(suf, "_bucket", 7)) &&
	    !(sl == 4 && !memcmp(suf, "_sum", 4)) &&
	    !(sl == 6 && !memcmp(suf, "_count", 6)))
		return false;
	if (s < end && *s == '{') {
		s++;
		while (s < end && *s != '}') {
			if (!expo_name(&s, end) || s >= end || *s++ != '=' ||
			    s >= end || *s++ != '"')
				return false;
			while (s < end && *s != '"') {
				if (*s == '\\') {
					s++;
					if (s >= end || (*s != '\\' && *s != '"' &&
							 *s != 'n'))
						return false;
				}
				s++;
			}
			if (s >= end)
				return false;
			s++;  /* the closing quote */
			if (s < end && *s == ',')
				s++;
		}
		if (s >= end)
			return false;
		s++;
	}
	if (s >= end || *s++ != ' ')
		return false;
	return expo_value(s, end);
}

static inline size_t expo_check(const char *text, size_t len)
{
	const char *typed = NULL, *end = text + len;
	size_t typed_len = 0, lineno = 0;

	for (const char *s = text; s < end;) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		lineno++;
		if (!nl)
			return lineno;   /* every line ends with a newline */
		for (const char *c = s; c < nl; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t')
				return lineno;
		if (nl - s >= 7 && !strncmp(s, "# TYPE ", 7)) {
			const char *p = s + 7;
			typed = p;
			if (!expo_name(&p, nl) || *p != ' ')
				return lineno;
			typed_len = (size_t)(p - typed);
			p++;
			if (strncmp(p, "counter\n", 8) && strncmp(p, "gauge\n", 6) &&
			    strncmp(p, "histogram\n", 10))
				return lineno;
		} else if (nl - s >= 7 && !strncmp(s, "# HELP ", 7)) {
			const char *p = s + 7;
			if (!expo_name(&p, nl) || *p != ' ')
				return lineno;
		} else if (!expo_sample(s, nl, typed, typed_len)) {
			return lineno;
		}
		s = nl + 1;
	}
	return 0;
}

#endif /* XFER_EXPO_CHECK_H */
