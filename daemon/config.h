/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - xferd settings: embedded defaults, /etc/xferd/xferd.conf,
 * command-line flags, in that order of precedence (last wins).
 *
 * The file is "key = value" lines; '#' starts a comment.  Every line is
 * validated: an unknown key, a malformed or out-of-range value is an
 * error that names the file, the line and the reason.  See xferd.conf(5).
 */
#ifndef XFERD_CONFIG_H
#define XFERD_CONFIG_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "meta/meta_config.h"

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
	 * (engine/copy_workers.h); -1 = chosen from the CPU count. */
	int copy_workers;
	/* memfd <-> CMA copies of this many bytes and more go to the copy
	 * workers in parts (engine/path_cma.h); 0: never. */
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
	/* MiB of pinned host memory for GPU memory to and from other nodes */
	uint32_t staging_mb;
	bool rdma;                 /* use the RDMA NICs (else TCP only) */
	/* "mlx5_0,mlx5_1": only these devices ("" = all) */
	char rdma_devices[CONFIG_HOST_MAX];
	uint32_t rdma_qps;         /* RC queue pairs per peer and rail pair */
	uint32_t rdma_stripe;      /* bytes per RDMA work request, at most */
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
};

/*
 * Split "host:port", "[v6]:port", "host" (port = default_port) into its
 * parts.  Returns 0 or -EINVAL.  host must hold CONFIG_HOST_MAX bytes.
 */
int config_split_hostport(const char *s, char *host, uint16_t *port,
			  uint16_t default_port);

void config_defaults(struct xferd_config *cfg);

/*
 * Apply one "key = value" setting.  Returns 0, or -EINVAL with a reason
 * in err (cfg unchanged).
 */
int config_set(struct xferd_config *cfg, const char *key, const char *value,
	       char *err, size_t errlen);

/*
 * The keys config_set knows, one line each: "key<TAB>form<TAB>doc"
 * (`xferd --list-keys`, what scripts/config-keys.sh reads).
 */
void config_keys_print(FILE *f);

/* The i-th key of the table; NULL past the last. */
const char *config_key_name(size_t i);

/*
 * Apply one line of a config file (comments and blank lines are fine).
 * Returns 0 or -EINVAL with a reason in err.
 */
int config_parse_line(struct xferd_config *cfg, const char *line, char *err,
		      size_t errlen);

/*
 * Read a whole file into cfg.  On any error cfg is left unchanged and
 * err says "path:line: reason".  Returns 0, -ENOENT when the file does
 * not exist, -EINVAL on a bad line, or another -errno.
 */
int config_load(struct xferd_config *cfg, const char *path, char *err,
		size_t errlen);

#endif /* XFERD_CONFIG_H */
