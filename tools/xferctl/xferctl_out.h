/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_out.h - how xferctl writes: text cleaned for a terminal, JSON
 * (json-c), numbers for people, aligned tables (libsmartcols).
 *
 * Everything goes to stdout.  Text that came from xferd is untrusted
 * (client names are chosen by other processes, peer names by other
 * nodes): text_clean() and the table replace control characters and
 * invalid UTF-8 with '?'; jv_str() replaces invalid UTF-8 with U+FFFD
 * and json-c escapes the rest.  Every constructor here exits with
 * status 1 when out of memory.
 */
#ifndef XFERCTL_OUT_H
#define XFERCTL_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;
struct libscols_table;
struct libscols_line;
typedef struct json_object json_object;

/* Before anything is written: the locale the tables are measured in. */
void out_init(void);

/* From now on tables print as CSV (RFC 4180: a header line, fields
 * quoted where they hold a comma, a quote or a space at an end) and
 * fmt_bytes, fmt_age and fmt_rtt write exact numbers (bytes,
 * milliseconds, nanoseconds) for the program reading them. */
void out_set_csv(void);
/* Whether out_set_csv was called: printers leave out what is not their
 * table ("no clients", summary lines) so that CSV is one table. */
bool out_csv(void);

/* Copy src (NULL: "") for a terminal: control characters and invalid
 * UTF-8 become '?'; stops before a character that would not fit whole. */
void text_clean(char *dst, size_t len, const char *src);

/* Columns a cleaned string takes: one per character, not per byte. */
int text_width(const char *s);

/* --- JSON: build one object, jv_print() it --- */

/* src (NULL: "") as a JSON string; invalid UTF-8 becomes U+FFFD. */
json_object *jv_str(const char *src);
/* Lower-case hex of len bytes as a JSON string. */
json_object *jv_hex(const uint8_t *data, size_t len);
json_object *jv_u64(uint64_t v);
json_object *jv_bool(bool v);
json_object *jv_obj(void);
json_object *jv_arr(void);
/* Add val (its reference passes to obj / arr). */
void jv_set(json_object *obj, const char *key, json_object *val);
void jv_push(json_object *arr, json_object *val);
/* Print obj on one line, keys in the order they were set; frees obj. */
void jv_print(json_object *obj);

/* "512 B", "1.5 MiB".  Each returns buf. */
const char *fmt_bytes(char *buf, size_t len, uint64_t v);
/* "42s", "5m07s", "2h03m", "3d04h": the two largest units. */
const char *fmt_age(char *buf, size_t len, uint64_t ms);
/* A round trip: "85.2 us", "1.25 ms", "2.00 s". */
const char *fmt_rtt(char *buf, size_t len, uint64_t ns);

/* --- aligned tables --- */

/* Longer cells are cut (whole characters): room for the longest
 * configuration value, every `peer` line of xferd.conf. */
#define CELL_LEN 6144

struct table {
	struct libscols_table *tb;
	struct libscols_line *line;  /* the row table_set() fills */
	unsigned ncols;
	bool kv;                     /* table_init_kv's */
};

/* A table with the NULL-terminated column names as its header, columns
 * two spaces apart; a bit per column in left aligns it left (text),
 * the others right (numbers). */
void table_init(struct table *t, unsigned left, const char *const *header);
/* "key: value" lines, keys right-aligned so that "key: " reads the same
 * for grep: table_kv() adds one. */
void table_init_kv(struct table *t);
void table_kv(struct table *t, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Start a new row; its cells are filled with table_set(), empty ones
 * stay empty. */
void table_row(struct table *t);
/* Set column col of the last row; the text is cleaned for a terminal. */
void table_set(struct table *t, unsigned col, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Print (aligned, or CSV after out_set_csv), then free the table. */
void table_print(struct table *t);

#endif /* XFERCTL_OUT_H */
