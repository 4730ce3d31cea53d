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
 *   max_client_bytes         -EDQUOT        host memory xferd maps for one
 *                                           client (memfd regions)
 *   max_uid_bytes            -EDQUOT        the same, summed over one uid
 *   max_region_bytes         -EFBIG         bytes of one region
 *   max_imports              -ETOOMANYREFS  imported tokens of one client
 *   max_names                -EMLINK        published names of one client
 *   max_client_fds           -ENFILE        fds xferd holds for one client
 *   max_uid_fds              -ENFILE        the same, summed over one uid
 *   (fd_reserve)             -ENFILE        fds of all clients together
 *
 * The two -EDQUOT and the three -ENFILE are one resource each (host
 * memory, fds) counted at three levels; the Status message and the log
 * line name the level.  The fd and byte budgets in force are derived at
 * start from RLIMIT_NOFILE, vm.max_map_count and the memory of the
 * machine or of xferd's memory cgroup (budget.h).
 *
 * xferctl connections are bounded too (max_ctl_connections in all,
 * max_ctl_per_uid each, closed after ctl_idle_timeout_ms idle; root has
 * CTL_ROOT_RESERVE more of its own so that diagnostics work while users
 * are at the limit): over the limit, an Error of -EUSERS and a close.
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
	uint64_t host_bytes;     /* memfd regions: xferd maps them */
	uint32_t imports;
	uint32_t fds;            /* fds xferd holds for it (budget.h) */
};

/* Room for one more region of length bytes (count and size; its host
 * bytes and fds are taken with budget.h)?  0, or the limit's errno with
 * *why naming it. */
int quota_check_region(const struct xferd_config *cfg,
			const struct client_usage *u, uint64_t length,
			const char **why);
/* Room for one more import?  0 or -ETOOMANYREFS with *why. */
int quota_check_import(const struct xferd_config *cfg,
			const struct client_usage *u, const char **why);

/*
 * Connections per uid, in three counts: those that have not said who
 * they are yet (pending, bounded so that one user cannot fill xferd's fd
 * table with silent connections), clients and xferctl connections.
 */
enum uid_conn_kind {
	UID_PENDING,
	UID_CLIENT,
	UID_CTL,
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

/*
 * Amounts per uid, summed over its clients: the per-uid bound of a
 * per-client quota.  A new per-uid bound takes a resource of its own
 * here; an entry lives while any of its counts is not zero.
 */
enum uid_res {
	UID_RES_FDS,          /* fds xferd holds for its clients */
	UID_RES_HOST_BYTES,   /* host memory xferd maps for its clients */
	UID_RES_KINDS
};
/* Add n to uid's res unless that makes more than max: 0, -EDQUOT (over
 * max: the caller maps it to its limit's errno) or -ENOMEM. */
int uid_res_take(struct uid_table *t, uid_t uid, enum uid_res res,
		 uint64_t n, uint64_t max);
void uid_res_release(struct uid_table *t, uid_t uid, enum uid_res res,
		     uint64_t n);
uint64_t uid_res_count(const struct uid_table *t, uid_t uid,
		       enum uid_res res);

#endif /* XFERD_QUOTA_H */
