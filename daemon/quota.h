/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quota.h - what one client, and one user, may hold of xferd.
 *
 * Each limit is a key of xferd.conf(5) and answers with an error code
 * of its own, so that libxfer's xfer_strerror() names the limit from the
 * code alone (the Status message of the reply names it too):
 *
 *   max_connections_per_uid  -EMFILE        client connections of one uid
 *   max_clients              -EUSERS        clients of the whole xferd
 *   max_regions              -ENOSPC        regions of one client
 *   max_client_bytes         -EDQUOT        bytes in the regions of one client
 *   max_region_bytes         -EFBIG         bytes of one region
 *   max_imports              -ETOOMANYREFS  imported tokens of one client
 *   max_names                -EMLINK        published names of one client
 *
 * Two more bound a client without an error: max_inflight (operations out
 * on links: its ring is not drained further until some end) and the
 * handshake deadline (a connection that says nothing is closed).
 * Prepared descriptor lists and streams get theirs here too when they
 * come (a count per client, with an errno of their own).  What all
 * clients of one user hold together is bounded in uid_usage.h.
 *
 * Main thread only.
 */
#ifndef XFERD_QUOTA_H
#define XFERD_QUOTA_H

#include <stdint.h>
#include <sys/types.h>

#include "config.h"

/* What one client holds against its limits, counted from the moment a
 * request is accepted (a registration or import still out counts). */
struct client_usage {
	uint32_t regions;
	uint64_t region_bytes;
	uint32_t imports;
};

/* Room for one more region of length bytes?  0, or the limit's errno
 * with *why naming it. */
int quota_check_region(const struct xferd_config *cfg,
			const struct client_usage *u, uint64_t length,
			const char **why);
/* Room for one more import?  0 or -ETOOMANYREFS with *why. */
int quota_check_import(const struct xferd_config *cfg,
			const struct client_usage *u, const char **why);

/*
 * Connections per uid, in two counts: those that have not said who they
 * are yet (pending, bounded so that one user cannot fill xferd's fd
 * table with silent connections) and clients.  xferctl connections are
 * not counted: diagnostics must work while a user is at a limit.
 */
enum uid_conn_kind {
	UID_PENDING,
	UID_CLIENT,
	UID_CONN_KINDS
};
struct uid_table;

struct uid_table *uid_table_create(void);
void uid_table_destroy(struct uid_table *t);
/* Count one more connection of uid unless that makes more than max:
 * 0, -EMFILE (at the limit) or -ENOMEM. */
int uid_conn_take(struct uid_table *t, uid_t uid, enum uid_conn_kind kind,
		  uint32_t max);
void uid_conn_release(struct uid_table *t, uid_t uid,
		      enum uid_conn_kind kind);
uint32_t uid_conn_count(const struct uid_table *t, uid_t uid,
			enum uid_conn_kind kind);

#endif /* XFERD_QUOTA_H */
