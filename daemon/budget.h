/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.h - the fds and host memory xferd lets its clients make it
 * hold, derived from the machine at start.
 *
 * fds.  At start xferd raises its RLIMIT_NOFILE soft limit to the hard
 * one.  Of what is left beyond the fds it holds at start, a reserve is
 * never given to clients: fd_reserve for xferd's own use (peer links,
 * the metrics port, files it opens, one packet's fds in passing),
 * max_pending non-root and max_pending_per_uid root connections that have
 * not said who they are, and max_ctl_connections + CTL_ROOT_RESERVE
 * xferctl connections.  Every fd xferd holds for a client - its socket,
 * its two doorbells, its pidfd, its /proc/PID/mem once it registers CMA
 * memory, a memfd region's fd, a CUDA VMM fd until it is imported -
 * comes out of the
 * rest (all_fds) and counts against max_client_fds and max_uid_fds.  So
 * however many clients and users there are, accepting and answering
 * xferctl always has its fds.  Each memfd region and each ring is also a
 * mapping, held with one of those fds: all_fds is also kept below
 * vm.max_map_count less xferd's mappings at start and the same reserve,
 * so that clients cannot make xferd's own mmap fail (threads, rings).
 * One uid gets at most half of all_fds (all of it when that is tiny), so
 * that another user still gets in.
 *
 * Host memory.  A memfd region is mapped by xferd: pages it faults in
 * (a copy into a hole of a sparse memfd, pinning for a NIC or a GPU) are
 * charged to xferd's memory cgroup, not the client's.  Its length counts
 * against max_client_bytes and max_uid_bytes from registration on,
 * faulted or not.  "auto" (0) derives them from the memory of the
 * machine, or of xferd's memory cgroup when that is less: max_uid_bytes
 * half of it, max_client_bytes max_uid_bytes.  GPU memory and CMA ranges
 * are not counted: xferd never maps them.
 *
 * Over a budget the client's request fails with -ENFILE (fds) or
 * -EDQUOT (bytes), the message naming the level (quota.h, uid_usage.h).
 *
 * Main thread only.
 */
#ifndef XFERD_BUDGET_H
#define XFERD_BUDGET_H

#include <stdint.h>

#include "config.h"
#include "quota.h"
#include "uid_usage.h"

/* xferctl connections root has beyond max_ctl_connections. */
#define CTL_ROOT_RESERVE 16

struct budget {
	/* Facts of the machine, probed once at start. */
	uint64_t nofile;        /* RLIMIT_NOFILE, after raising it */
	uint64_t fds_at_start;
	uint64_t maps_free;     /* vm.max_map_count less the mappings then */
	uint64_t memory;        /* bytes: the machine's or cgroup's, less */
	/* In force (budget_apply). */
	uint64_t reserve;       /* fds never given to clients */
	uint64_t all_fds;       /* for the fds of all clients together */
	uint64_t client_fds, uid_fds;
	uint64_t client_bytes, uid_bytes;
	/* In use: fds held for all clients. */
	uint64_t fds_used;
};

/* Probe the machine (raising RLIMIT_NOFILE), then budget_apply.  Logs
 * the budgets in force. */
void budget_init(struct budget *b, const struct xferd_config *cfg);
/* The budgets for cfg on the machine probed (at start and on reload). */
void budget_apply(struct budget *b, const struct xferd_config *cfg);

/*
 * Take n fds / bytes for a client whose usage is u, of a user whose
 * usage is uu (uid_usage.h): counted in both and, for fds, for all
 * clients; or nothing taken and -ENFILE / -EDQUOT with *why naming the
 * limit.  Release gives back what a take took.
 */
int budget_take_fds(struct budget *b, struct uid_usage *uu,
		    struct client_usage *u, uint32_t n, const char **why);
void budget_release_fds(struct budget *b, struct uid_usage *uu,
			struct client_usage *u, uint32_t n);
int budget_take_bytes(struct budget *b, struct uid_usage *uu,
		      struct client_usage *u, uint64_t n, const char **why);
void budget_release_bytes(struct budget *b, struct uid_usage *uu,
			  struct client_usage *u, uint64_t n);

/* The memory of this machine, or of the memory cgroup of this process
 * when that is less (cgroup v1 or v2); 0 if neither can be read. */
uint64_t budget_memory_size(void);

#endif /* XFERD_BUDGET_H */
