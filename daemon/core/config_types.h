/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config_types.h - the types of xferd's settings: struct xferd_config
 * and the metadata backend's struct meta_config, with their sizes.  No
 * code, no state.
 *
 * Here, below every layer that reads settings, so that peer/ and meta/
 * can be handed a pointer to them; the parser that fills them (the key
 * table, the file) is config.c (config.h), and meta_config.c for the
 * etcd keys.  main.c owns the one live copy and replaces it on SIGHUP.
 */
#ifndef XFERD_CORE_CONFIG_TYPES_H
#define XFERD_CORE_CONFIG_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "core/traffic_class.h"

#define META_ENDPOINTS_MAX  16    /* etcd endpoints */
#define META_ENDPOINTS_LEN  1024  /* the comma-separated list, bytes */
#define META_PREFIX_MAX     128
#define META_FILE_MAX       256

enum meta_backend { META_LOCAL, META_ETCD };

/* The etcd v3 JSON gateway's path prefix: etcd 3.4 and 3.5 serve /v3,
 * 3.3 /v3beta, 3.2 /v3alpha; `auto` tries them in that order. */
enum meta_api { META_API_AUTO, META_API_V3, META_API_V3BETA,
		META_API_V3ALPHA };

struct meta_config {
	enum meta_backend backend;
	char endpoints[META_ENDPOINTS_LEN]; /* "http://10.0.0.1:2379,..." */
	char prefix[META_PREFIX_MAX];       /* keys start with it: "/xferd/" */
	uint32_t lease_ttl_s;      /* node record and names live this long
				    * after the last keepalive */
	uint32_t timeout_ms;       /* one request at one endpoint */
	uint32_t retry_ms;         /* one call tries the endpoints this long */
	enum meta_api api;
	char cert[META_FILE_MAX];  /* TLS client certificate ("" = none) */
	char key[META_FILE_MAX];   /* its private key */
	char ca[META_FILE_MAX];    /* CA bundle ("" = the system's) */
};

#define CONFIG_DEFAULT_PATH "/etc/xferd/xferd.conf"
#define CONFIG_PATH_MAX     108 /* sizeof(sockaddr_un.sun_path) */
#define CONFIG_FILE_MAX     256
#define CONFIG_HOST_MAX     80  /* "host:port", "[v6]:port", a node name */
#define CONFIG_MAX_PEERS    64
#define CONFIG_GROUP_MAX    33  /* a group name (32) and its NUL */
#define CONFIG_DEFAULT_PORT 7474

struct xferd_config {
	char socket_path[CONFIG_PATH_MAX]; /* "" = the default path */
	/* group owning the socket xferd binds ("none": leave it) */
	char socket_group[CONFIG_GROUP_MAX];
	uint32_t sq_entries;       /* ring size a client gets by default */
	uint32_t max_sq_entries;   /* largest ring a client may ask for */
	/* KiB of each ring for the index pairs of prepared lists */
	uint32_t ring_index_kb;
	uint32_t dlist_max_entries;    /* entries of one prepared list */
	uint32_t dlist_max_per_client; /* prepared lists of one client */
	uint32_t dlist_max_client_entries; /* entries of all its lists */
	uint32_t spin_us;          /* progress thread polls this long idle */
	int progress_cpu;          /* pin the progress thread; -1 = no */
	/* Threads copying xfer_reg'd memory into and out of staging
	 * (mem/copy_workers.h); -1 = chosen from the CPU count. */
	int copy_workers;
	/* memfd <-> CMA copies of this many bytes and more go to the copy
	 * workers in parts (local/cma_split.h); 0: never. */
	uint64_t cma_split_bytes;
	int log_level;             /* enum log_level */
	uint32_t max_clients;
	uint64_t max_region_bytes;
	/* The registration cache's limits (core/rcache.h); 0: none. */
	uint32_t rcache_max_entries;
	uint64_t rcache_max_bytes;

	/* other nodes */
	char listen[CONFIG_HOST_MAX];   /* "*:7474", "ADDR:PORT" or "off" */
	char node_name[CONFIG_HOST_MAX]; /* "" = the host name */
	char peers[CONFIG_MAX_PEERS][CONFIG_HOST_MAX]; /* "host[:port]" */
	uint32_t npeers;
	char cluster_key_file[CONFIG_FILE_MAX]; /* "" = no authentication */
	uint32_t keepalive_ms;     /* ping an idle link this often */
	uint32_t peer_timeout_ms;  /* a link silent this long is dead */
	uint32_t connect_timeout_ms;
	uint32_t op_timeout_ms;    /* default deadline of a remote descriptor */
	uint32_t tcp_chunk;        /* bytes per data frame on a link */
	/* D2H copies out at once per GPU stream sent on a link */
	uint32_t tcp_stage_ahead;
	/* MiB of pinned host memory for GPU memory to and from other nodes */
	uint32_t staging_mb;
	/* Staging chunks per half only the latency class takes */
	uint32_t staging_latency_reserve;
	bool rdma;                 /* use the RDMA NICs (else TCP only) */
	/* "mlx5_0,mlx5_1": only these devices ("" = all) */
	char rdma_devices[CONFIG_HOST_MAX];
	uint32_t rdma_qps;         /* RC queue pairs per peer and rail pair */
	uint32_t rdma_stripe;      /* bytes per RDMA work request, at most */
	uint32_t rdma_bulk_depth;  /* non-latency WRs a queue pair holds */
	bool rdma_landing;         /* lend landing chunks to peers (on) */
	uint32_t rdma_landing_chunks; /* chunks of one peer's landing pool */
	uint32_t rdma_landing_peers;  /* peers' landing pools at once */
	/* rdma_register = background: a memfd region's reply goes before
	 * its NIC registration is done (staged until then) */
	bool rdma_reg_background;
	/* where published names and node records live (meta_config.h) */
	struct meta_config meta;
	/* The Prometheus endpoint: "ADDR:PORT", "*:PORT" or "off" */
	char metrics_listen[CONFIG_HOST_MAX];
	/* Its bounds (ops/metrics.c): connections at once (one more closes
	 * the oldest), and each one's absolute deadline */
	uint32_t metrics_max_connections;
	/* Connections to other xferds one user's requests may cause, a
	 * second (twice that at once) (peer/connect.c) */
	uint32_t peer_connect_rate;
	uint32_t metrics_timeout_ms;
	int log_target;            /* enum log_target */

	/* What one connection, client and user may hold (quota.h). */
	uint32_t max_connections_per_uid; /* clients of one uid */
	uint32_t max_pending_per_uid; /* connections not yet handshaken */
	uint32_t handshake_timeout_ms; /* to send the first packet */
	uint32_t listen_backlog;
	uint32_t max_regions;      /* per client */
	/* Host memory xferd maps for a client / for a uid (its memfd
	 * regions); 0: auto, from the machine's memory (budget.h). */
	uint64_t max_client_bytes;
	uint64_t max_uid_bytes;
	/* fds xferd holds for a client / for a uid, and those it keeps
	 * for itself beyond the reserve for connections (budget.h). */
	uint32_t max_client_fds;
	uint32_t max_uid_fds;
	uint32_t fd_reserve;
	uint32_t max_pending;      /* non-root connections not handshaken */
	/* xferctl connections: in all (root has more), per uid, and how
	 * long one may sit idle. */
	uint32_t max_ctl_connections;
	uint32_t max_ctl_per_uid;
	uint32_t ctl_idle_timeout_ms;
	uint32_t max_imports;      /* per client */
	uint32_t max_names;        /* published names per client */
	uint32_t max_inflight;     /* a client's operations out on links */
	/* Notifications held for one client whose CQ is full. */
	uint32_t notify_queue_max;

	/* What all clients of one user hold together (uid_usage.h). */
	uint32_t max_regions_per_uid;
	uint32_t max_imports_per_uid;
	uint32_t max_names_per_uid;
	uint32_t dlist_max_per_uid;      /* prepared lists */
	uint64_t dlist_max_uid_bytes;    /* xferd's memory for them */
	uint32_t notify_queue_max_per_uid;

	/* Classes and tenants (core/traffic_class.h). */
	uint64_t latency_max_bytes;  /* latency descriptors up to this */
	uint32_t link_bulk_queue;    /* bulk bytes ahead of a latency frame */
	bool link_lanes;             /* a latency lane per link (on) */
	struct tenant_table tenants;
};

#endif /* XFERD_CORE_CONFIG_TYPES_H */
