/*
 * xferctl_out.h - how xferctl writes: text cleaned for a terminal, JSON
 * strings, numbers for people, aligned tables.
 *
 * Everything goes to stdout.  Text that came from xferd is untrusted
 * (client names are chosen by other processes, peer names by other
 * nodes): text_clean() and the table replace control characters and
 * invalid UTF-8 with '?', json_string() escapes them.
 */
#ifndef XFERCTL_OUT_H
#define XFERCTL_OUT_H

#include <stddef.h>
#include <stdint.h>

/* Copy src (NULL: "") for a terminal: control characters and invalid
 * UTF-8 become '?'; stops before a character that would not fit whole. */
void text_clean(char *dst, size_t len, const char *src);

/* Columns a cleaned string takes: one per character, not per byte. */
int text_width(const char *s);

/* src (NULL: "") as a quoted JSON string; invalid UTF-8 becomes U+FFFD. */
void json_string(const char *src);

/* Lower-case hex of len bytes, no quotes, no separators. */
void print_hex(const uint8_t *data, size_t len);

/* "512 B", "1.5 MiB".  Each returns buf. */
const char *fmt_bytes(char *buf, size_t len, uint64_t v);
/* "42s", "5m07s", "2h03m", "3d04h": the two largest units. */
const char *fmt_age(char *buf, size_t len, uint64_t ms);
/* A round trip: "85.2 us", "1.25 ms", "2.00 s". */
const char *fmt_rtt(char *buf, size_t len, uint64_t ns);

/* --- aligned tables --- */

#define TABLE_MAX_COLS 12
#define CELL_LEN 128 /* longer cells are cut (whole characters) */

struct table {
	unsigned ncols;
	unsigned left;             /* bit per column: align left (text) */
	size_t nrows;              /* filled so far, header included */
	char (*cells)[CELL_LEN];   /* row-major; row 0 is the header */
};

/* A table for `rows` rows below the header (NULL-terminated column
 * names); exits with status 1 when out of memory. */
void table_init(struct table *t, size_t rows, unsigned left,
		const char *const *header);
/* Start a new row; its cells are filled with table_set(), empty ones
 * stay empty. */
void table_row(struct table *t);
/* Set column col of the last row; the text is cleaned for a terminal. */
void table_set(struct table *t, unsigned col, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Print with columns two spaces apart, then free the cells. */
void table_print(struct table *t);

#endif /* XFERCTL_OUT_H */
