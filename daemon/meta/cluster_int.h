/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster_int.h - what the files of the etcd backend share; nothing
 * outside daemon/meta/ includes it (cluster.h is the public face).
 *
 *   cluster.c        cluster_…     the lease, this node's record, the
 *                                  registration and its repair
 *   membership.c     membership_…  the other nodes: a watch on
 *                                  <prefix>nodes/, their table, restarts
 *   cluster_names.c  cnames_…      published names in etcd: publish,
 *                                  unpublish, lookup, writing them again
 *   etcd.c           etcd_…        the HTTP/JSON client (etcd.h)
 *   record.c         record_…      the JSON of the records (record.h)
 *
 * Main thread only.  A callback of etcd.c may come after the state it
 * was started for changed (a new lease, shutdown): each checks c->gen
 * or -ECANCELED before it acts.
 */
#ifndef XFERD_META_CLUSTER_INT_H
#define XFERD_META_CLUSTER_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "meta/cluster.h"
#include "meta/etcd.h"
#include "meta/meta_config.h"
#include "meta/record.h"

struct event;
struct member;
struct json_object;

enum cluster_state {
	CLUSTER_IDLE,       /* waiting to (re)register */
	CLUSTER_GRANTING,   /* lease/grant out */
	CLUSTER_CLAIMING,   /* reading and replacing our old record */
	CLUSTER_UP,         /* record stored, lease kept alive */
};

struct cluster {
	struct cluster_ctx ctx;       /* what main.c handed over */
	struct etcd *etcd;
	struct meta_config cfg;
	char node[RECORD_NODE_MAX];
	char node_key[META_PREFIX_MAX + 96];  /* <prefix>nodes/<node> */
	enum cluster_state state;
	uint64_t gen;                 /* bumped with every registration */
	int64_t lease;                /* 0: none */
	bool reachable;               /* the last call got an answer */
	bool names_dirty;             /* a name write failed: write again */
	bool keepalive_out;
	unsigned failures;            /* registrations failed in a row */
	struct event *retry;          /* the next registration */
	struct event *keepalive;      /* every lease_ttl / 3 */
	/* membership.c */
	struct member *members;       /* uthash by node name */
	struct etcd_watch *watch;
	int64_t watch_rev;            /* watch from here */
	unsigned watch_failures;
	struct event *resync;         /* read the nodes again, then watch */
	bool resync_out;
	/* For cluster_health_get(): CLOCK_MONOTONIC ms, 0 for never. */
	uint64_t answered_ms, lease_renewed_ms, watch_msg_ms;
	uint64_t errors[CLUSTER_ERR__COUNT];
	int last_error;
	/* cluster_names.c: names whose delete did not reach etcd */
	SLIST_HEAD(, pending_delete) deletes;
};

/* etcd's keys of ours: "<prefix>nodes/<node>", "<prefix>names/<name>". */
#define CLUSTER_NODES "nodes/"
#define CLUSTER_NAMES "names/"

/* A kv of a range or watch reply: its key and value decoded, the value
 * at most max bytes (else *value NULL and *vlen the size it had).  0 or
 * -EINVAL (malformed kv). */
int cluster_kv(struct json_object *kv, char **key, uint8_t **value,
	       size_t *vlen, size_t max, int64_t *lease);
/* "{"key": b64(key)[, "range_end": b64(prefix end)]}" helpers. */
struct json_object *cluster_key_json(const char *key, bool prefix);
void cluster_add_b64(struct json_object *o, const char *field,
		     const void *p, size_t n);

/* etcd did not answer a call (err) / answered one: logged once per
 * change; an answer writes what waited for it (names, deletes). */
void cluster_unreached(struct cluster *c, int err);
/* Count a failed call by kind (cluster_health_get), without the state
 * change of cluster_unreached. */
void cluster_count_error(struct cluster *c, int err);
void cluster_reached(struct cluster *c);

/* --- membership.c --- */
void membership_start(struct cluster *c);
void membership_stop(struct cluster *c);
/* The instance etcd says node runs now; NULL if it has no record. */
const uint8_t *membership_instance(struct cluster *c, const char *node);
bool membership_resolve(struct cluster *c, const char *node);
/* The etcd watch may have missed something (an outage): read again. */
void membership_resync(struct cluster *c);

/* --- cluster_names.c --- */
/* Every local name into etcd (after a registration, or when a write
 * failed while etcd was away). */
void cnames_write_all(struct cluster *c);
/* Deletes that did not reach etcd, now. */
void cnames_flush_deletes(struct cluster *c);
void cnames_free(struct cluster *c);

#endif /* XFERD_META_CLUSTER_INT_H */
