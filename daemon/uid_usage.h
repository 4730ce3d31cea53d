/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uid_usage.h - what all clients of one user (uid) hold of xferd
 * together, against per-uid bounds.
 *
 * quota.h bounds each client; a user may open max_connections_per_uid
 * clients, so each per-client limit also has a per-uid one, counted over
 * all clients of the uid (xferd.conf(5)):
 *
 *   max_regions_per_uid       -ENOSPC        regions
 *   max_imports_per_uid       -ETOOMANYREFS  imported tokens
 *   max_names_per_uid         -EMLINK        published names
 *   dlist_max_per_uid         -ENOSPC        prepared lists
 *   dlist_max_uid_bytes       -ENOBUFS       xferd's memory for those lists
 *   notify_queue_max_per_uid  -ENOBUFS       notifications held for the
 *                                            uid's clients (to the sender)
 *
 * The errno is the per-client limit's own (xfer_strerror() names both
 * keys); the Status message of the reply names the one that was hit.
 *
 * Threads.  The table, its entries and every counter but notify: main
 * thread only.  lists is changed by the dltab (mem/dlist.h) under its
 * mutex, always from the main thread.  notify is changed by the progress
 * thread only (engine/notify_queue.h), through the notify.pool pointer of
 * each client's queue; the main thread makes and frees it and may read
 * it as a gauge (a relaxed atomic).  An entry lives from its user's first
 * client's accept until that user's last client is freed (client_free,
 * after NOTICE_DETACHED: the progress thread has let go of the client's
 * queue), so the progress thread never sees it freed.  No lock of its
 * own; lock order: none taken here (the dltab's is a leaf).
 */
#ifndef XFERD_UID_USAGE_H
#define XFERD_UID_USAGE_H

#include <stdint.h>
#include <sys/types.h>

#include "common/htable.h"
#include "config.h"
#include "engine/notify_queue.h"
#include "mem/dlist.h"

struct uid_usage {
	uid_t uid;
	uint32_t refs;            /* clients of the uid that hold it */
	uint32_t regions;         /* counted as quota.h counts per client */
	uint32_t imports;
	uint32_t names;
	struct dlist_usage lists; /* charged by the dltab */
	struct nq_pool notify;    /* progress thread */
	UT_hash_handle hh;        /* uid_usage_table, key: uid */
};

enum uid_bound {
	UID_BOUND_REGIONS,
	UID_BOUND_IMPORTS,
	UID_BOUND_NAMES,
};

struct uid_usage_table;

struct uid_usage_table *uid_usage_table_create(void);
/* Frees what is left (xferd stopping). */
void uid_usage_table_destroy(struct uid_usage_table *t);
/* uid's usage, made zero on its first client; NULL: out of memory.
 * Every get has its put. */
struct uid_usage *uid_usage_get(struct uid_usage_table *t, uid_t uid);
/* The last put frees it: every counter must be back to zero by then
 * (a client gives back what it held before it is freed). */
void uid_usage_put(struct uid_usage_table *t, struct uid_usage *u);

/* Room for one more of res for the uid?  0, or the limit's errno with
 * *why naming the per-uid key. */
int uid_usage_check(const struct xferd_config *cfg,
		    const struct uid_usage *u, enum uid_bound res,
		    const char **why);

#endif /* XFERD_UID_USAGE_H */
