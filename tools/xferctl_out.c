/*
 * xferctl_out.c - how xferctl writes: cleaned text, JSON strings, numbers
 * for people, aligned tables.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xferctl_out.h"

/* --- text that came from elsewhere --- */

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when invalid
 * (stray continuation, overlong form, surrogate, beyond U+10FFFF). */
static size_t utf8_len(const unsigned char *s)
{
	static const uint32_t least[] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t n = s[0] < 0x80 ? 1 : s[0] < 0xc0 ? 0 : s[0] < 0xe0 ? 2
		 : s[0] < 0xf0 ? 3 : s[0] < 0xf8 ? 4 : 0;
	uint32_t cp = s[0] & (0xff >> (n + 1));

	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (n == 0 || cp < least[n] || (cp >= 0xd800 && cp <= 0xdfff) ||
	    cp > 0x10ffff)
		return 0;
	return n;
}

void text_clean(char *dst, size_t len, const char *src)
{
	const unsigned char *s = (const unsigned char *)(src ? src : "");
	size_t o = 0;

	while (*s) {
		size_t n = utf8_len(s);
		bool bad = n == 0 || *s < 0x20 || *s == 0x7f;
		size_t need = bad ? 1 : n;

		if (o + need >= len)
			break;
		if (bad)
			dst[o] = '?';
		else
			memcpy(dst + o, s, n);
		o += need;
		s += bad ? 1 : n;
	}
	dst[o] = '\0';
}

int text_width(const char *s)
{
	int w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

void json_string(const char *src)
{
	const unsigned char *s = (const unsigned char *)(src ? src : "");

	putchar('"');
	while (*s) {
		size_t n = utf8_len(s);

		if (n == 0) {
			fputs("\\ufffd", stdout); /* not UTF-8: the replacement */
			s++;
			continue;
		}
		switch (*s) {
		case '"': fputs("\\\"", stdout); break;
		case '\\': fputs("\\\\", stdout); break;
		case '\b': fputs("\\b", stdout); break;
		case '\f': fputs("\\f", stdout); break;
		case '\n': fputs("\\n", stdout); break;
		case '\r': fputs("\\r", stdout); break;
		case '\t': fputs("\\t", stdout); break;
		default:
			if (*s < 0x20 || *s == 0x7f)
				printf("\\u%04x", *s);
			else
				fwrite(s, 1, n, stdout);
		}
		s += n;
	}
	putchar('"');
}

void print_hex(const uint8_t *data, size_t len)
{
	for (size_t i = 0; i < len; i++)
		printf("%02x", data[i]);
}

/* --- numbers for people --- */

const char *fmt_bytes(char *buf, size_t len, uint64_t v)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB",
					      "PiB", "EiB" };
	double x = (double)v;
	unsigned u = 0;

	if (v < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", v);
		return buf;
	}
	x /= 1024;
	while (x >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		x /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", x, units[u]);
	return buf;
}

const char *fmt_age(char *buf, size_t len, uint64_t ms)
{
	uint64_t s = ms / 1000;

	if (s < 60)
		snprintf(buf, len, "%" PRIu64 "s", s);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600,
			 s / 60 % 60);
	else
		snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400,
			 s / 3600 % 24);
	return buf;
}

const char *fmt_rtt(char *buf, size_t len, uint64_t ns)
{
	if (ns < 1000000)
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
	return buf;
}

/* --- aligned tables --- */

void table_row(struct table *t)
{
	t->nrows++;
}

void table_set(struct table *t, unsigned col, const char *fmt, ...)
{
	char raw[CELL_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	text_clean(t->cells[(t->nrows - 1) * t->ncols + col], CELL_LEN, raw);
}

void table_init(struct table *t, size_t rows, unsigned left,
		const char *const *header)
{
	*t = (struct table){ .left = left };
	while (t->ncols < TABLE_MAX_COLS && header[t->ncols])
		t->ncols++;
	t->cells = calloc((rows + 1) * t->ncols, CELL_LEN);
	if (!t->cells) {
		fprintf(stderr, "xferctl: out of memory\n");
		exit(1);
	}
	table_row(t);
	for (unsigned c = 0; c < t->ncols; c++)
		table_set(t, c, "%s", header[c]);
}

void table_print(struct table *t)
{
	int width[TABLE_MAX_COLS] = { 0 };

	for (size_t r = 0; r < t->nrows; r++)
		for (unsigned c = 0; c < t->ncols; c++) {
			int w = text_width(t->cells[r * t->ncols + c]);
			if (w > width[c])
				width[c] = w;
		}
	for (size_t r = 0; r < t->nrows; r++) {
		for (unsigned c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c];
			int pad = width[c] - text_width(cell);
			bool left = t->left & 1u << c, last = c + 1 == t->ncols;

			if (!left)
				printf("%*s", pad, "");
			fputs(cell, stdout);
			if (left && !last)
				printf("%*s", pad, "");
			if (!last)
				fputs("  ", stdout);
		}
		putchar('\n');
	}
	free(t->cells);
	t->cells = NULL;
}
