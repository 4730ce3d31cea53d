/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify_msg.h - what a notification carries besides its value and the
 * identity xferd assigns its sender: the sender's message (up to
 * XFER_NOTIFY_MSG_MAX bytes) and the name the sender gave itself (up to
 * XFER_SENDER_NAME_MAX bytes of printable ASCII), both untrusted.
 *
 * A notification on its way (an op, a batch, a held one) keeps them in a
 * struct notify_msg of its own on the heap, or NULL when it has neither
 * (most notifications: no allocation for them); one being delivered now
 * passes a struct notify_note, on the stack, which the deliverer copies
 * what it keeps out of.  Whoever owns a struct notify_msg frees it.
 *
 * Plain data and pure functions: any thread.
 */
#ifndef XFERD_NOTIFY_MSG_H
#define XFERD_NOTIFY_MSG_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_ring.h"

struct notify_msg {
	uint16_t len;                       /* bytes of data */
	uint8_t name_len;                   /* bytes of name */
	char name[XFER_SENDER_NAME_MAX];
	uint8_t data[XFER_NOTIFY_MSG_MAX];
};

/* A notification's sender and what it said, being delivered now. */
struct notify_note {
	struct xfer_cqe_sender from;        /* xferd's record of the sender */
	struct notify_msg msg;              /* len, name_len 0: none */
};

/* A sender name xferd takes: bounded, printable ASCII (0x20-0x7e). */
static inline bool notify_name_ok(const void *name, size_t len)
{
	const unsigned char *s = name;

	if (len > XFER_SENDER_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	return true;
}

static inline bool notify_msg_empty(const struct notify_msg *m)
{
	return !m || (m->len == 0 && m->name_len == 0);
}

/* A heap copy of m for a notification that waits (NULL for none, and
 * for no memory: *err -ENOMEM then). */
static inline struct notify_msg *notify_msg_dup(const struct notify_msg *m,
						int *err)
{
	*err = 0;
	if (notify_msg_empty(m))
		return NULL;
	struct notify_msg *c = malloc(sizeof(*c));
	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	memcpy(c, m, sizeof(*c));
	return c;
}

/* Into a CQ message record (xfer_ring.h); m NULL: none.  Only the bytes
 * that say something are written, the rest of the record stays. */
static inline void notify_msg_to_record(const struct notify_msg *m,
					struct xfer_cqe_message *rec)
{
	if (notify_msg_empty(m)) {
		rec->len = 0;
		rec->name_len = 0;
		return;
	}
	rec->len = m->len;
	rec->name_len = m->name_len;
	memcpy(rec->name, m->name, m->name_len);
	memcpy(rec->data, m->data, m->len);
}

#endif /* XFERD_NOTIFY_MSG_H */
