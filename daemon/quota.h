/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quota.h - what one client, and xferd as a whole, may hold.
 *
 * Each limit is a key of xferd.conf(5) and answers with an error code
 * of its own, so that libxfer's xfer_strerror() names the limit from the
 * code alone (the Status message of the reply names it too):
 *
 *   max_clients              -EUSERS        clients of the whole xferd
 *   max_regions              -ENOSPC        regions of one client
 *   max_client_bytes         -EDQUOT        host memory xferd maps for one
 *                                           client (memfd regions)
 *   max_region_bytes         -EFBIG         bytes of one region
 *   max_imports              -ETOOMANYREFS  imported tokens of one client
 *   max_names                -EMLINK        published names of one client
 *   max_client_fds           -ENFILE        fds xferd holds for one client
 *   (fd_reserve)             -ENFILE        fds of all clients together
 *
 * What all connections of one user hold together is bounded too, each
 * per-client limit with a per-uid one of the same errno
 * (max_connections_per_uid, max_uid_bytes, max_uid_fds,
 * max_regions_per_uid, ...): uid_usage.h has them all, in one table.
 *
 * -EDQUOT and -ENFILE are one resource each (host memory, fds) counted
 * at several levels; the Status message and the log line name the
 * level.  The fd and byte budgets in force are derived at start from
 * RLIMIT_NOFILE, vm.max_map_count and the memory of the machine or of
 * xferd's memory cgroup (budget.h).
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
 * come (a count per client, with an errno of their own).
 *
 * Main thread only.
 */
#ifndef XFERD_QUOTA_H
#define XFERD_QUOTA_H

#include <stdint.h>

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
 * Refusals counted by limit for the operator (xferctl status, /metrics):
 * every answer to a client that carries one of the errnos above is
 * counted by quota_refusal_count() where it is sent (client_reply,
 * refuse), so no limit's check needs a counter of its own.
 */
enum quota_limit {
	QUOTA_CLIENTS,        /* -EUSERS: max_clients, per-uid connections */
	QUOTA_CONNECTIONS,    /* -EMFILE: connections of one uid */
	QUOTA_REGIONS,        /* -ENOSPC: regions, prepared lists */
	QUOTA_BYTES,          /* -EDQUOT: host memory */
	QUOTA_REGION_BYTES,   /* -EFBIG */
	QUOTA_IMPORTS,        /* -ETOOMANYREFS */
	QUOTA_NAMES,          /* -EMLINK */
	QUOTA_FDS,            /* -ENFILE */
	QUOTA_LIMIT__COUNT
};

struct quota_refusals {
	uint64_t by_limit[QUOTA_LIMIT__COUNT];
};

/* The limit err (negative) names, or -1 if it names none. */
int quota_limit_of(int err);
/* "clients", "regions", ... (the label of /metrics). */
const char *quota_limit_name(enum quota_limit l);
/* Count err if it is a limit's.  Main thread. */
void quota_refusal_count(struct quota_refusals *r, int err);

#endif /* XFERD_QUOTA_H */
