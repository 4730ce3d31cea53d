/* SPDX-License-Identifier: Apache-2.0 */
/*
 * names.h - the publish/lookup table: name -> token, per xferd.
 *
 * Main thread only.  A name belongs to the client that published it and
 * goes when that client disconnects.
 */
#ifndef XFERD_NAMES_H
#define XFERD_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pubname.h"

#define NAMES_NAME_MAX  PUBNAME_MAX  /* bytes, without the NUL */
#define NAMES_TOKEN_MAX 512  /* = XFER_TOKEN_MAX */
#define NAMES_PER_CLIENT_MAX 4096  /* until names_set_limit */

struct names;

struct names *names_create(void);
void names_destroy(struct names *n);

/* NUL-terminated pubname_valid(): 1-NAMES_NAME_MAX bytes of
 * [A-Za-z0-9._:@+-]. */
bool names_valid(const char *name);

/*
 * Store (or, for the same client, replace) a token.  -EINVAL for a bad
 * name or token size, -EEXIST if another client owns the name, -EMLINK
 * beyond the limit of names per client (names_set_limit).
 */
int names_publish(struct names *n, const char *name, uint64_t client,
		  const void *token, size_t len);
/* -ENOENT if absent, -EACCES if another client's. */
int names_unpublish(struct names *n, const char *name, uint64_t client);
/* Points into the table: valid until the next change.  -ENOENT. */
int names_lookup(const struct names *n, const char *name,
		 const void **token, size_t *len);
void names_remove_client(struct names *n, uint64_t client);
/* Names one client may publish (max_names); names already published
 * above a lowered limit stay. */
void names_set_limit(struct names *n, uint32_t per_client);
size_t names_count(const struct names *n);
/* Names of one client (for its user's count, uid_usage.h). */
size_t names_client_count(const struct names *n, uint64_t client);

/* Every name (of one client), with its token: for the copies of the
 * table elsewhere (meta/cluster_names.c).  fn must not change the table. */
typedef void (*names_fn)(void *arg, const char *name, const void *token,
			 size_t len);
void names_foreach(const struct names *n, names_fn fn, void *arg);
void names_foreach_client(const struct names *n, uint64_t client,
			  names_fn fn, void *arg);

#endif /* XFERD_NAMES_H */
