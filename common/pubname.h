/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pubname.h - what a published name (xfer_publish) and the node part of
 * a lookup ("node/name") may be: one rule for libxfer, which refuses a
 * bad name without a round trip, and for xferd, which refuses it from
 * any client or peer.
 */
#ifndef XFER_COMMON_PUBNAME_H
#define XFER_COMMON_PUBNAME_H

#include <stdbool.h>
#include <stddef.h>

#include "xfer.h"

/* Bytes of a name, without the NUL (the wire's string is unbounded; the
 * integration tests pin 200 as accepted and 201 as -EINVAL). */
#define PUBNAME_MAX XFER_NAME_MAX
/* Bytes of the node part: a node name, "host:port" or "[v6]:port" that
 * fits xferd's CONFIG_HOST_MAX (80) buffers with the NUL. */
#define PUBNAME_NODE_MAX 79

/* 1-PUBNAME_MAX bytes of [A-Za-z0-9._:@+-]: no '/', no spaces, ASCII. */
bool pubname_valid(const char *name, size_t len);
/* 1-PUBNAME_NODE_MAX bytes of printable ASCII without spaces. */
bool pubname_node_valid(const char *node, size_t len);
/* "name", or "node/name" with a valid node; NUL-terminated, not NULL. */
bool pubname_lookup_valid(const char *s);

#endif /* XFER_COMMON_PUBNAME_H */
