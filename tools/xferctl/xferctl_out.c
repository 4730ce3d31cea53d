/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_out.c - how xferctl writes: cleaned text, numbers for people,
 * aligned tables (libsmartcols) and JSON (json-c).
 *
 * Why two libraries: libsmartcols lays out the tables, but its --json
 * is one array of flat rows under one name, pretty-printed over many
 * lines.  status, gpus and rails answer with scalars beside their
 * arrays and rails nests each rail's queue pairs, and xferctl(1)
 * promises one JSON object on one line: json-c builds those shapes
 * (and the flat ones, so that every command's JSON comes out alike).
 * CSV (--csv) is written here from the same tables.
 */
#include <inttypes.h>
#include <locale.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <libsmartcols.h>

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

/* Fatal: xferctl has nothing to show without memory. */
static void *need(void *p)
{
	if (!p) {
		fprintf(stderr, "xferctl: out of memory\n");
		exit(1);
	}
	return p;
}

/* --- JSON --- */

json_object *jv_str(const char *src)
{
	const unsigned char *s = (const unsigned char *)(src ? src : "");
	size_t len = strlen((const char *)s), o = 0;
	/* Each byte becomes at most U+FFFD's three. */
	char *buf = need(malloc(3 * len + 1));

	/* json-c escapes quotes, backslashes and control characters but
	 * passes other bytes through: invalid UTF-8 would make the output
	 * invalid JSON.  It becomes U+FFFD here. */
	while (*s) {
		size_t n = utf8_len(s);

		if (n == 0) {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			s++;
			continue;
		}
		memcpy(buf + o, s, n);
		o += n;
		s += n;
	}
	buf[o] = '\0';
	json_object *j = need(json_object_new_string_len(buf, (int)o));
	free(buf);
	return j;
}

json_object *jv_hex(const uint8_t *data, size_t len)
{
	char *buf = need(malloc(2 * len + 1));

	buf[0] = '\0';
	for (size_t i = 0; i < len; i++)
		snprintf(buf + 2 * i, 3, "%02x", data[i]);
	json_object *j = need(json_object_new_string(buf));
	free(buf);
	return j;
}

json_object *jv_u64(uint64_t v)
{
	return need(json_object_new_uint64(v));
}

json_object *jv_bool(bool v)
{
	return need(json_object_new_boolean(v));
}

json_object *jv_obj(void)
{
	return need(json_object_new_object());
}

json_object *jv_arr(void)
{
	return need(json_object_new_array());
}

void jv_set(json_object *obj, const char *key, json_object *val)
{
	if (json_object_object_add(obj, key, val)) {
		fprintf(stderr, "xferctl: out of memory\n");
		exit(1);
	}
}

void jv_push(json_object *arr, json_object *val)
{
	if (json_object_array_add(arr, val)) {
		fprintf(stderr, "xferctl: out of memory\n");
		exit(1);
	}
}

void jv_print(json_object *obj)
{
	puts(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
					    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(obj);
}

/* --- numbers for people --- */

/* What the whole run writes: one choice, made before anything is
 * printed (out_set_csv). */
static struct {
	bool csv;             /* tables as CSV, numbers exact */
	bool cells_utf8;      /* cells may hold UTF-8 beyond ASCII */
} out;

void out_set_csv(void)
{
	out.csv = true;
}

bool out_csv(void)
{
	return out.csv;
}

const char *fmt_bytes(char *buf, size_t len, uint64_t v)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB",
					      "PiB", "EiB" };
	double x = (double)v;
	unsigned u = 0;

	if (v < 1024 || out.csv) {
		if (out.csv) {
			snprintf(buf, len, "%" PRIu64, v);
			return buf;
		}
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

	if (out.csv)
		snprintf(buf, len, "%" PRIu64, ms);
	else if (s < 60)
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
	if (out.csv)
		snprintf(buf, len, "%" PRIu64, ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
	return buf;
}

/* --- aligned tables --- */

void out_init(void)
{
	/* Cells are UTF-8 (text_clean makes them so) whatever the
	 * environment says: libsmartcols measures them by LC_CTYPE, and
	 * with a byte >= 0x80 in the C locale 2.38 loops for ever in
	 * mbrtowc.  glibc has C.UTF-8 built in since 2.35; where no UTF-8
	 * locale is to be had, cells keep to ASCII ('?' for the rest). */
	if (!setlocale(LC_CTYPE, "C.UTF-8"))
		setlocale(LC_CTYPE, "");
	out.cells_utf8 = MB_CUR_MAX > 1;
}

/* A cleaned cell, ASCII only where out_init found no UTF-8 locale. */
static void cell_clean(char *dst, size_t len, const char *raw)
{
	text_clean(dst, len, raw);
	if (out.cells_utf8)
		return;
	char *o = dst;
	for (const unsigned char *s = (const unsigned char *)dst; *s;) {
		size_t n = *s < 0x80 ? 1 : utf8_len(s);
		*o++ = *s < 0x80 ? (char)*s : '?';
		s += n ? n : 1;
	}
	*o = '\0';
}

static struct libscols_table *table_new(const char *sep)
{
	struct libscols_table *tb = need(scols_new_table());

	/* Cells are cleaned by text_clean() already: smartcols' own
	 * encoding would show a name's "\x" as "\x5cx". */
	scols_table_enable_noencoding(tb, 1);
	/* Never cut or wrap to the terminal: a script reading a pipe and a
	 * person reading a terminal see the same columns. */
	scols_table_set_termforce(tb, SCOLS_TERMFORCE_NEVER);
	scols_table_set_column_separator(tb, sep);
	return tb;
}

void table_init(struct table *t, unsigned left, const char *const *header)
{
	*t = (struct table){ .tb = table_new("  ") };
	while (header[t->ncols]) {
		bool l = left & 1u << t->ncols;
		need(scols_table_new_column(t->tb, header[t->ncols], 0,
					    l ? 0 : SCOLS_FL_RIGHT));
		t->ncols++;
	}
}

void table_init_kv(struct table *t)
{
	*t = (struct table){ .tb = table_new(" "), .ncols = 2, .kv = true };
	scols_table_enable_noheadings(t->tb, 1);
	need(scols_table_new_column(t->tb, "KEY", 0, SCOLS_FL_RIGHT));
	need(scols_table_new_column(t->tb, "VALUE", 0, 0));
}

void table_row(struct table *t)
{
	t->line = need(scols_table_new_line(t->tb, NULL));
}

void table_set(struct table *t, unsigned col, const char *fmt, ...)
{
	char raw[CELL_LEN], clean[CELL_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	cell_clean(clean, sizeof(clean), raw);
	if (col < t->ncols && scols_line_set_data(t->line, col, clean)) {
		fprintf(stderr, "xferctl: out of memory\n");
		exit(1);
	}
}

void table_kv(struct table *t, const char *key, const char *fmt, ...)
{
	char raw[CELL_LEN], clean[CELL_LEN];
	va_list ap;

	table_row(t);
	table_set(t, 0, "%s:", key);
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	cell_clean(clean, sizeof(clean), raw);
	if (scols_line_set_data(t->line, 1, clean)) {
		fprintf(stderr, "xferctl: out of memory\n");
		exit(1);
	}
}

/* One CSV field; n: its length (a kv key without its ':'). */
static void csv_field(const char *s, size_t n, bool last)
{
	bool quote = n && (s[0] == ' ' || s[n - 1] == ' ' ||
			   memchr(s, ',', n) || memchr(s, '"', n));

	if (quote)
		putchar('"');
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"')
			putchar('"');
		putchar(s[i]);
	}
	if (quote)
		putchar('"');
	putchar(last ? '\n' : ',');
}

static void csv_print(const struct table *t)
{
	struct libscols_iter *it = need(scols_new_iter(SCOLS_ITER_FORWARD));
	struct libscols_column *cl;
	struct libscols_line *ln;
	unsigned c = 0;

	/* The key: value tables have no heading of their own. */
	while (scols_table_next_column(t->tb, it, &cl) == 0) {
		struct libscols_cell *h = scols_column_get_header(cl);
		const char *title = t->kv ? (c ? "value" : "key")
				  : h ? scols_cell_get_data(h) : NULL;
		title = title ? title : "";
		c++;
		csv_field(title, strlen(title), c == t->ncols);
	}
	scols_reset_iter(it, SCOLS_ITER_FORWARD);
	while (scols_table_next_line(t->tb, it, &ln) == 0) {
		for (c = 0; c < t->ncols; c++) {
			struct libscols_cell *ce = scols_line_get_cell(ln, c);
			const char *v = ce ? scols_cell_get_data(ce) : NULL;
			size_t n = v ? strlen(v) : 0;
			if (t->kv && c == 0 && n && v[n - 1] == ':')
				n--;
			csv_field(v ? v : "", n, c + 1 == t->ncols);
		}
	}
	scols_free_iter(it);
}

void table_print(struct table *t)
{
	if (out.csv)
		csv_print(t);
	else
		scols_print_table(t->tb);
	scols_unref_table(t->tb);
	t->tb = NULL;
}
