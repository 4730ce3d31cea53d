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

#endif /* XFERD_META_CLUSTER_H */
