/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster.h - the cluster's metadata in etcd (metadata = etcd): this
 * node's record under a lease it keeps alive, the records of the others
 * (a watch on the prefix), and published names stored under the same
 * lease.  Without metadata = etcd none of this runs and names live only
 * in this xferd's table (names.h), asked of `peer =` lines.
 *
 *   <prefix>nodes/<node>   this node's record (record.h), our lease
 *   <prefix>names/<name>   a published name's record, our lease
 *
 * Main thread only.  The local table stays the truth for local names:
 * a name is published there first, then copied to etcd; when etcd is
 * unreachable, local names still work, remote lookups fail, and once
 * etcd answers again the node record and every local name are written
 * again (a new lease if the old one expired).
 */
#ifndef XFERD_META_CLUSTER_H
#define XFERD_META_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct meta_config;
struct names;
struct peers;
struct cluster;

/* What the cluster is handed by main.c, whose objects these are; each
 * outlives the cluster. */
struct cluster_ctx {
	struct event_base *base;
	/* The etcd settings, copied at creation: a SIGHUP does not change
	 * them (xferd.conf(5)). */
	const struct meta_config *meta;
	const uint8_t *instance_id;   /* this xferd's, TOKEN_INSTANCE_LEN */
	/* This node's addresses and name for its record; the membership
	 * etcd reports goes to its table. */
	struct peers *peers;
	struct names *names;          /* the local names (names.h) */
};

/* NULL (nothing to do) unless metadata = etcd; then the client, or exit
 * with the reason logged (bad TLS files...).  Registration starts here
 * and goes on in the background: xferd does not wait for etcd. */
int cluster_create(const struct cluster_ctx *ctx, struct cluster **out);
/* Revoke our lease (names and record go at once), briefly waiting for
 * etcd; accepts NULL. */
void cluster_destroy(struct cluster *c);

typedef void (*cluster_done_cb)(void *arg, int err);
/*
 * Copy a name just published in the local table to etcd.  Returns 0
 * when there is nothing to wait for (not registered yet: it is written
 * at registration), or 1: cb follows with 0 (stored, or kept locally
 * because etcd did not answer) or -EEXIST (another node's name).
 */
int cluster_publish(struct cluster *c, const char *name, const void *token,
		    size_t len, cluster_done_cb cb, void *arg);
/* The name left the local table: out of etcd too (if ours there). */
void cluster_unpublish(struct cluster *c, const char *name);
/* A client left: its names, before names_remove_client drops them. */
void cluster_client_gone(struct cluster *c, uint64_t client);

typedef void (*cluster_lookup_cb)(void *arg, int error, const void *token,
				  size_t len);
/*
 * One read of etcd for a name of another node.  cb later: 0 and the
 * token, -ENOENT, -EHOSTUNREACH/-ETIMEDOUT (etcd unreachable, logged).
 */
void cluster_lookup(struct cluster *c, const char *name,
		    cluster_lookup_cb cb, void *arg);

/* "node/name" for a node etcd knows: the peer table learns where it is.
 * false if etcd has no such node. */
bool cluster_resolve_node(struct cluster *c, const char *node);

/* How etcd answers, for the operator (xferctl status, /metrics). */
enum cluster_err_kind {
	CLUSTER_ERR_UNREACHABLE,  /* -EHOSTUNREACH: no endpoint connected */
	CLUSTER_ERR_TIMEOUT,      /* -ETIMEDOUT: no answer in time, no leader */
	CLUSTER_ERR_PROTOCOL,     /* -EPROTO: answers that were not etcd's */
	CLUSTER_ERR_DENIED,       /* -EACCES: etcd refused us */
	CLUSTER_ERR_OTHER,
	CLUSTER_ERR__COUNT
};

#define CLUSTER_ENDPOINT_MAX 128

struct cluster_health {
	bool reachable;           /* the last call got an answer */
	bool registered;          /* our record is stored under a lease */
	bool watching;            /* a watch on the nodes is open */
	/* Milliseconds since: etcd last answered, the lease was last
	 * granted or kept alive, the watch last delivered a message; each
	 * UINT64_MAX for never. */
	uint64_t answer_age_ms, lease_age_ms, watch_age_ms;
	uint64_t errors[CLUSTER_ERR__COUNT];  /* calls failed, by kind */
	int last_error;           /* -errno of the last failure; 0: none */
	char endpoint[CLUSTER_ENDPOINT_MAX];  /* the one that answered last */
};

/* Fill h; c may be NULL (h says unreachable, nothing counted). */
void cluster_health_get(const struct cluster *c, struct cluster_health *h);
/* "unreachable", "timeout", ... (the label of /metrics). */
const char *cluster_err_kind_name(enum cluster_err_kind k);

#endif /* XFERD_META_CLUSTER_H */
