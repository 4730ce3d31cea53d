/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pubname.h - what a published name (xfer_publish) and a lookup
 * ("[node/][~uid/]name") may be: one rule for libxfer, which refuses a
 * bad name without a round trip, and for xferd, which refuses it from
 * any client or peer.
 *
 * Names belong to the uid that published them (meta/names.h).  "~uid/"
 * qualifies a name with its owner's numeric uid: '~' can start neither
 * a name nor a node part, and a name has no '/', so every lookup string
 * that was valid before means what it meant, and "a/b/c" stays invalid
 * unless b is "~uid".
 */
#ifndef XFER_COMMON_PUBNAME_H
#define XFER_COMMON_PUBNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xfer.h"

/* Bytes of a name, without the NUL (the wire's string is unbounded; the
 * integration tests pin 200 as accepted and 201 as -EINVAL). */
#define PUBNAME_MAX XFER_NAME_MAX
/* Bytes of the node part: a node name, "host:port" or "[v6]:port" that
 * fits xferd's CONFIG_HOST_MAX (80) buffers with the NUL. */
#define PUBNAME_NODE_MAX 79

/* "~4294967294/": the most a uid qualifier adds to a name. */
#define PUBNAME_UID_MAX 12
/* A lookup's name part with its qualifier, without the NUL. */
#define PUBNAME_QUALIFIED_MAX (PUBNAME_MAX + PUBNAME_UID_MAX)
/* No uid qualifier: (uid_t)-1, which no process can have. */
#define PUBNAME_NO_UID 0xffffffffu

/* A lookup string taken apart; pointers into the string parsed. */
struct pubname_ref {
	const char *node;     /* NULL, or node_len bytes */
	size_t node_len;
	const char *qname;    /* "[~uid/]name": what a peer is asked */
	uint32_t uid;         /* PUBNAME_NO_UID without "~uid/" */
	const char *name;     /* the bare name, NUL-terminated */
};

/* 1-PUBNAME_MAX bytes of [A-Za-z0-9._:@+-]: no '/', no spaces, ASCII. */
bool pubname_valid(const char *name, size_t len);
/* 1-PUBNAME_NODE_MAX bytes of printable ASCII without spaces, not
 * starting with '~' (that is a uid qualifier). */
bool pubname_node_valid(const char *node, size_t len);
/* "[node/][~uid/]name" with a valid node, a decimal uid below
 * PUBNAME_NO_UID and a valid name; NUL-terminated, not NULL. */
bool pubname_lookup_valid(const char *s);
/* The same rule, taking s apart into *out (also when false: then out
 * is undefined). */
bool pubname_lookup_parse(const char *s, struct pubname_ref *out);
/* "[~uid/]name" alone, as a peer is asked (no node part). */
bool pubname_qualified_parse(const char *s, struct pubname_ref *out);

#endif /* XFER_COMMON_PUBNAME_H */
