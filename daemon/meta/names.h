/* SPDX-License-Identifier: Apache-2.0 */
/*
 * names.h - the publish/lookup table: (uid, name) -> token, per xferd.
 *
 * Main thread only.  A name belongs to the client that published it and
 * goes when that client disconnects; it lives in the namespace of that
 * client's uid (SO_PEERCRED), so two users never compete for a name and
 * a bare lookup never finds another user's name.  A name published
 * shared (NAMES_SHARED) is also in the node's shared namespace: other
 * local users find it as "~uid/name", other nodes by its bare name
 * (uids mean nothing between nodes); a shared spelling belongs to one
 * uid at a time.
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
/* Publish flags (= XFER_PUBLISH_*). */
#define NAMES_SHARED 0x1u          /* other users and other nodes see it */
#define NAMES_FLAGS  NAMES_SHARED  /* every flag this table knows */
_Static_assert(NAMES_SHARED == XFER_PUBLISH_SHARED, "one flag, two names");

struct names;

struct names *names_create(void);
void names_destroy(struct names *n);

/* NUL-terminated pubname_valid(): 1-NAMES_NAME_MAX bytes of
 * [A-Za-z0-9._:@+-]. */
bool names_valid(const char *name);

/*
 * Store (or, for the same client, replace) a token under name in uid's
 * namespace, with flags (NAMES_*).  -EINVAL for a bad name, token size
 * or flag, -EEXIST if another client of uid owns the name or, with
 * NAMES_SHARED, another uid shares a name of this spelling (the name
 * is then unchanged), -EMLINK beyond the limit of names per client
 * (names_set_limit).
 */
int names_publish(struct names *n, const char *name, uint64_t client,
		  uint32_t uid, uint32_t flags, const void *token,
		  size_t len);
/* -ENOENT if uid has no such name, -EACCES if another client of uid
 * has it.  *flags (may be NULL): the flags it had. */
int names_unpublish(struct names *n, const char *name, uint64_t client,
		    uint32_t uid, uint32_t *flags);
/* uid's own name.  Points into the table: valid until the next change.
 * -ENOENT. */
int names_lookup(const struct names *n, uint32_t uid, const char *name,
		 const void **token, size_t *len);
/* "~owner/name" asked by caller: owner's name if it is caller's own,
 * shared, or caller is root (who could read the memory anyway);
 * otherwise -ENOENT, as if absent (a private name is not revealed). */
int names_lookup_as(const struct names *n, uint32_t caller, uint32_t owner,
		    const char *name, const void **token, size_t *len);
/* The node's shared namespace: what other nodes may see.  -ENOENT. */
int names_lookup_shared(const struct names *n, const char *name,
			const void **token, size_t *len);
/* The flags of uid's name, or -ENOENT. */
int names_flags(const struct names *n, uint32_t uid, const char *name);
void names_remove_client(struct names *n, uint64_t client);
/* Names one client may publish (max_names); names already published
 * above a lowered limit stay. */
void names_set_limit(struct names *n, uint32_t per_client);
size_t names_count(const struct names *n);
/* Names of one client (for its user's count, uid_usage.h). */
size_t names_client_count(const struct names *n, uint64_t client);

/* Every shared name (of one client), with its token: for the copies of
 * the shared namespace elsewhere (meta/cluster_names.c: etcd).  fn must
 * not change the table. */
typedef void (*names_fn)(void *arg, const char *name, const void *token,
			 size_t len);
void names_foreach_shared(const struct names *n, names_fn fn, void *arg);
void names_foreach_client_shared(const struct names *n, uint64_t client,
				 names_fn fn, void *arg);

/* Every name of one client, without its token (xferctl names lists
 * names, never the capabilities they stand for).  fn must not change
 * the table. */
typedef void (*names_entry_fn)(void *arg, const char *name, uint32_t uid,
			       uint32_t flags, size_t token_len);
void names_foreach_client(const struct names *n, uint64_t client,
			  names_entry_fn fn, void *arg);

#endif /* XFERD_NAMES_H */
