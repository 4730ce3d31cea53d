/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h - one snapshot of everything xferd counts, gathered in one
 * place for every reader: xferctl status and stats (ops/ctl.c) and the
 * Prometheus endpoint (ops/metrics.c, written by ops/metrics_text.c).
 *
 * The snapshot is plain data with bounded size (label sets are capped
 * here, once, so that no reader can grow them): the busiest
 * STATS_CLIENTS_TOP clients by bytes and the rest summed as one "other",
 * at most STATS_PEERS_MAX peers.  Strings in it are copies, so it
 * outlives the clients and peers it describes.
 */
#ifndef XFERD_STATS_H
#define XFERD_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/completion_stats.h"
#include "core/traffic_class.h"
#include "mem/staging.h"
#include "meta/cluster.h"
#include "quota.h"
#include "transport/rdma.h"
#include "xfer_ring.h"

struct xferd;

#define STATS_CLIENTS_TOP 16
#define STATS_PEERS_MAX   64
#define STATS_RAILS_MAX   32
#define STATS_ERRNOS_MAX  32    /* distinct errno values kept per path */
#define STATS_NAME_LEN    80

struct stats_errno {
	int err;                /* positive errno; 0: beyond ERRNO_SLOTS */
	uint64_t count;
};

struct stats_path {
	uint64_t ops, bytes;    /* descriptors and bytes that moved on it */
	/* Completions (CQEs) on it: latency histogram, per bucket (not
	 * cumulative), bucket LAT_BOUNDS for above 10 s. */
	uint64_t lat[LAT_BOUNDS + 1];
	uint64_t lat_count, lat_sum_ns;
	struct stats_errno errors[STATS_ERRNOS_MAX];
	unsigned nerrors;
};

/* One row per (uid, name): a series per process would make a new one
 * for every short-lived client; per-pid detail is in xferctl clients. */
struct stats_client {
	uint32_t uid;           /* 0 for "other" */
	uint32_t pid;           /* its lowest pid (one of its processes);
				 * 0 for "other" */
	char name[STATS_NAME_LEN]; /* what the client said it is (its comm) */
	uint64_t ops, failed, bytes, in_flight;
	/* Notifications held for it (its CQ was full) now, and refused
	 * to their senders past notify_queue_max (-ENOBUFS). */
	uint64_t notify_queued, notify_refused;
	uint32_t count;         /* connections summed in this row */
	uint32_t processes;     /* pids summed in this row */
};

/* The standard process_* series (from /proc/self). */
struct stats_process {
	uint64_t rss_bytes, vsize_bytes;
	uint64_t open_fds, max_fds;     /* RLIMIT_NOFILE's soft limit */
	uint64_t cpu_ns;                /* user + system */
	uint64_t start_time_ms;         /* Unix time, ms */
};

struct stats_peer {
	char name[STATS_NAME_LEN];  /* node name, or its id prefix */
	char state[16];             /* "up", "connecting", "down" */
	uint64_t rtt_ns, bytes_tx, bytes_rx, ops, errors, reconnects;
};

struct stats_rail {
	char device[STATS_NAME_LEN];
	uint32_t port;
	uint32_t qps;
	uint64_t bytes_tx, bytes_rx, wrs, errors;
};

/* A class's or a tenant's counters (core/traffic_class.h): wait[b]
 * per bucket, not cumulative, bucket b for waits below 2^b us, the last
 * for the rest. */
struct stats_class {
	char name[TENANT_NAME_MAX];
	uint64_t queued_ops, queued_bytes;  /* handed to a mover, not ended */
	uint64_t ops, bytes;                /* ended */
	uint64_t wait[CLASS_WAIT_BUCKETS];
	uint64_t wait_count, wait_sum_ns;
	uint64_t paced;                     /* tenants: times a cap held back */
	uint64_t removed;                   /* tenants: gone from the file,
					     * kept while clients of it remain */
};

struct stats_snapshot {
	const char *version;
	uint8_t instance_id[16];
	uint32_t pid;
	uint64_t uptime_ms;
	uint64_t rss_bytes;
	struct stats_process proc;
	uint32_t clients, regions, imports;
	uint64_t ops_completed, ops_failed;   /* CQEs of submissions */

	struct stats_path paths[XFER_PATH__COUNT]; /* [XFER_PATH_NONE]: no data */

	struct stats_client top[STATS_CLIENTS_TOP];
	unsigned ntop;
	struct stats_client other;   /* count 0: nobody beyond the top */
	/* Every client's, not only the top's. */
	uint64_t notify_queued, notify_refused;

	struct stats_peer peers[STATS_PEERS_MAX];
	unsigned npeers, peers_left_out;

	struct stats_rail rails[STATS_RAILS_MAX];
	unsigned nrails;

	struct {
		uint32_t entries, unused, max_entries, pending;
		uint64_t bytes, hits, misses, evictions, max_bytes;
	} rcache;

	bool staging;                /* false: no pool (staging_none says why) */
	const char *staging_none;
	struct {
		uint32_t chunk_bytes;
		uint32_t chunks[2], in_use[2], waiting[2]; /* send, recv */
		uint32_t reserve[2];     /* held for the latency class */
		uint64_t reserve_used;
		uint64_t waits;
		/* enum staging_clock: events and their ns, since start */
		uint64_t clock_n[STAGING_CLOCK__N], clock_ns[STAGING_CLOCK__N];
	} pool;

	/* The landing pools (transport/rdma.h); lending false: none. */
	struct rdma_land_stats landing;

	uint32_t gpus, gpu_imports, gpu_import_refs;

	/* Per class (enum xfer_class) and per configured tenant (at
	 * most TENANT_MAX: bounded labels); latency descriptors moved as
	 * bulk. */
	struct stats_class classes[XFER_CLASS__COUNT];
	struct stats_class tenants[TENANT_MAX];
	unsigned ntenants;
	uint64_t demoted;

	/* Requests refused by a limit of quota.h, per limit. */
	uint64_t refusals[QUOTA_LIMIT__COUNT];
	/* CMA reads by process_vm_readv (no_new_privs owners): done, and
	 * refused by the check after them. */
	uint64_t cma_fast_done, cma_fast_refused;

	bool etcd;                   /* metadata = etcd */
	struct cluster_health meta;
};

/* Fill s from the running daemon.  Main thread; never blocks. */
void stats_collect(struct xferd *d, struct stats_snapshot *s);

/* Sum a path's histogram into s (from the progress thread's counters);
 * exposed for the unit tests. */
void stats_fill_path(struct stats_path *s, const struct completion_stats *cs,
		     unsigned path);

#endif /* XFERD_STATS_H */
