/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uid_usage.h - what one user (uid) makes xferd hold, over all its
 * connections: the one per-uid record, and its bounds.
 *
 * quota.h bounds each client and xferd as a whole; a user may open
 * max_connections_per_uid clients, so each per-client limit also has a
 * per-uid one, counted here over all connections of the uid.  Each bound
 * is a key of xferd.conf(5) and answers with the errno of the per-client
 * limit of the same kind (xfer_strerror() names both keys); the Status
 * message of the reply, and the log line, name the one that was hit:
 *
 *   key                       errno          counted in     checked by
 *   max_connections_per_uid   -EMFILE        conns[CLIENT]  client.c
 *   max_pending_per_uid       (closed)       conns[PENDING] listener.c
 *   max_ctl_per_uid           -EUSERS+close  conns[CTL]     ops/ctl.c
 *   max_uid_fds               -ENFILE        fds            budget.c
 *   max_uid_bytes             -EDQUOT        host_bytes     budget.c
 *   max_regions_per_uid       -ENOSPC        regions        uid_usage_check
 *   max_imports_per_uid       -ETOOMANYREFS  imports        uid_usage_check
 *   max_names_per_uid         -EMLINK        names          uid_usage_check
 *   dlist_max_per_uid         -ENOSPC        lists.lists    mem/dlist.c
 *   dlist_max_uid_bytes       -ENOBUFS       lists.bytes    mem/dlist.c
 *   notify_queue_max_per_uid  -ENOBUFS       notify.held    engine/
 *                             (to the sender)               notify_queue.h
 *
 * Pending connections (not yet said who they are) over their bound are
 * closed without a word; root's xferctl connections are not counted per
 * uid (root has CTL_ROOT_RESERVE of its own, budget.h).  max_uid_fds and
 * max_uid_bytes in force are derived at start (budget.h).
 *
 * Lifetime.  A record is refcounted: every holder of a pointer to it - a
 * pending connection, a client (from its hello until client_free), an
 * xferctl connection of a non-root user, a handshake under way - took it
 * with uid_usage_get and gives it back with uid_usage_put, so the first
 * pending connection of a user makes it and the last holder frees it.
 * Each holder gives back what it counted before its put; a count left at
 * the last put is logged (a leak in that bookkeeping).  The pointer is
 * stable for as long as it is held, which is what lists and notify need.
 *
 * Threads.  The table, the refcount and every count but lists and
 * notify: main thread only.  lists is changed by the dltab (mem/dlist.h)
 * under its mutex, always from the main thread.  notify is changed by the
 * progress thread only (engine/notify_queue.h), through the notify.pool
 * pointer of each client's queue; the main thread makes and frees it and
 * may read it as a gauge (a relaxed atomic).  A client holds its record
 * until client_free, after NOTICE_DETACHED (the progress thread has let
 * go of the client's queue), so the progress thread never sees it freed.
 * No lock of its own; lock order: none taken here (the dltab's is a
 * leaf).
 */
#ifndef XFERD_UID_USAGE_H
#define XFERD_UID_USAGE_H

#include <stdint.h>
#include <sys/types.h>

#include "common/htable.h"
#include "config.h"
#include "engine/notify_queue.h"
#include "mem/dlist.h"

/* The connections of a uid, by what they are. */
enum uid_conn_kind {
	UID_PENDING,  /* accepted, not yet said who they are (listener.c) */
	UID_CLIENT,   /* libxfer clients (client.c) */
	UID_CTL,      /* xferctl connections (ops/ctl.c) */
	UID_CONN_KINDS
};

struct uid_usage {
	uid_t uid;
	uint32_t refs;            /* holders of this pointer (above) */
	uint32_t conns[UID_CONN_KINDS];
	uint64_t fds;             /* fds xferd holds for its clients */
	uint64_t host_bytes;      /* host memory xferd maps for them */
	uint32_t regions;         /* counted as quota.h counts per client */
	uint32_t imports;
	uint32_t names;
	struct dlist_usage lists; /* charged by the dltab */
	struct nq_pool notify;    /* progress thread */
	UT_hash_handle hh;        /* uid_usage_table, key: uid */
};

struct uid_usage_table;

struct uid_usage_table *uid_usage_table_create(void);
/* Frees what is left (xferd stopping). */
void uid_usage_table_destroy(struct uid_usage_table *t);
/* uid's record, one reference more; made zero when none is held.
 * NULL: out of memory.  Every get has its put. */
struct uid_usage *uid_usage_get(struct uid_usage_table *t, uid_t uid);
/* One more reference to a record already held (no lookup). */
struct uid_usage *uid_usage_hold(struct uid_usage *u);
/* The last put frees it: every count must be back to zero by then.
 * Accepts NULL. */
void uid_usage_put(struct uid_usage_table *t, struct uid_usage *u);

/* Count one more connection of kind unless the uid has max of them
 * already: 0 or -EMFILE.  Release gives back what a take took. */
int uid_conn_take(struct uid_usage *u, enum uid_conn_kind kind,
		  uint32_t max);
void uid_conn_release(struct uid_usage *u, enum uid_conn_kind kind);

/* The bounds uid_usage_check answers (the others: see the table). */
enum uid_bound {
	UID_BOUND_REGIONS,
	UID_BOUND_IMPORTS,
	UID_BOUND_NAMES,
};

/* Room for one more of res for the uid?  0, or the limit's errno with
 * *why naming the per-uid key. */
int uid_usage_check(const struct xferd_config *cfg,
		    const struct uid_usage *u, enum uid_bound res,
		    const char **why);

#endif /* XFERD_UID_USAGE_H */
