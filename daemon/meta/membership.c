/* SPDX-License-Identifier: Apache-2.0 */
/*
 * membership.c - the other nodes, as etcd has them: one kv/range of
 * <prefix>nodes/ and then a watch from the revision after it.  A PUT of
 * a node whose instance changed is a restart: the old instance is
 * retired in the peer table (peers_member_gone), so what targets it
 * fails -ESTALE at once.  A DELETE is a node that stopped or whose lease
 * ran out; its entry stays (not present) with the instance it had, so
 * that a restart seen as DELETE then PUT (the new instance revoked the
 * old lease first) is still a restart.  When the watch ends (etcd restarted, a member died, the
 * revision was compacted) the range is read again, the table is brought
 * to it (nodes no longer there are dropped), and a new watch starts.
 *
 * A record that does not parse is logged and ignored: whatever is
 * written under the prefix, xferd keeps running on what is valid.
 *
 * The table is a uthash by node name: thousands of nodes, each a few
 * hundred bytes.  Main thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "common/clock.h"
#include "common/htable.h"
#include "core/log.h"
#include "meta/cluster_int.h"
#include "peer/peer.h"

#define RESYNC_MIN_MS 100
#define RESYNC_MAX_MS 5000

struct member {
	UT_hash_handle hh;            /* cluster.members, key: node */
	struct node_record rec;
	bool seen;                    /* in the range being applied */
	/* false: its record went (stopped, lease expired).  The entry
	 * stays so that its next instance is seen as a restart. */
	bool present;
};

static void watch_start(struct cluster *c);

static struct member *member_find(struct cluster *c, const char *node)
{
	struct member *m;

	HASH_FIND_STR(c->members, node, m);
	return m;
}

static void member_left(struct member *m, const char *why)
{
	if (m->present)
		log_info("etcd: node %s left (%s)", m->rec.node, why);
	m->present = false;
}

/* A node record etcd holds under key. */
static void apply_put(struct cluster *c, const char *key, const uint8_t *val,
		      size_t vlen, bool from_range)
{
	size_t plen = strlen(c->cfg.prefix) + strlen(CLUSTER_NODES);
	const char *node = key + plen;
	struct node_record rec;
	const char *why = NULL;
	char hex[33], ohex[33];

	if (!val) {
		log_warnx("etcd: %s: a value of %zu bytes (at most %d): ignored",
			  key, vlen, RECORD_MAX);
		return;
	}
	if (record_node_parse((const char *)val, vlen, &rec, &why)) {
		log_warnx("etcd: %s: not a node record (%s): ignored", key, why);
		return;
	}
	if (strcmp(rec.node, node) != 0) {
		log_warnx("etcd: %s: the record names node '%s': ignored", key,
			  rec.node);
		return;
	}
	record_id_hex(rec.instance, hex);
	if (strcmp(node, c->node) == 0) {
		if (memcmp(rec.instance, c->ctx.instance_id, RECORD_ID_LEN))
			log_warnx("etcd: instance %.8s also calls itself node "
				  "%s: two xferds with one node_name?", hex,
				  node);
		return;
	}
	struct member *m = member_find(c, node);
	if (m) {
		m->seen = true;
		if (memcmp(m->rec.instance, rec.instance, RECORD_ID_LEN)) {
			record_id_hex(m->rec.instance, ohex);
			log_info("etcd: node %s restarted: instance %.8s -> %.8s; "
				 "tokens of the old one are stale", node, ohex,
				 hex);
			peers_member_gone(c->ctx.peers, m->rec.instance,
					  "its node restarted (etcd)");
		} else if (!m->present) {
			log_info("etcd: node %s is back (instance %.8s)", node,
				 hex);
		}
		m->rec = rec;
		m->present = true;
	} else {
		m = calloc(1, sizeof(*m));
		if (!m)
			return;
		m->rec = rec;
		m->seen = true;
		m->present = true;
		HASH_ADD_STR(c->members, rec.node, m);
		if (!htable_added(m)) {
			free(m);
			return;
		}
		char addr[64] = "";
		if (rec.naddrs)
			netaddr_format(&rec.addrs[0], true, addr, sizeof(addr));
		if (from_range)
			log_debug("etcd: node %s (instance %.8s, %s port %u)",
				  node, hex, addr, rec.port);
		else
			log_info("etcd: node %s joined (instance %.8s, %s port "
				 "%u)", node, hex, addr, rec.port);
	}
}

/* One kv of a range or an event: ours (under nodes/) or ignored. */
static void apply_kv(struct cluster *c, struct json_object *kv, bool deleted,
		     bool from_range)
{
	char *key;
	uint8_t *val;
	size_t vlen;
	size_t plen = strlen(c->cfg.prefix) + strlen(CLUSTER_NODES);

	if (cluster_kv(kv, &key, &val, &vlen, RECORD_MAX, NULL)) {
		log_warnx("etcd: a malformed key or value under %s: ignored",
			  c->cfg.prefix);
		return;
	}
	if (strncmp(key, c->cfg.prefix, strlen(c->cfg.prefix)) ||
	    strncmp(key + strlen(c->cfg.prefix), CLUSTER_NODES,
		    strlen(CLUSTER_NODES)) ||
	    !key[plen] || strchr(key + plen, '/')) {
		log_warnx("etcd: %.200s: not a node key: ignored", key);
	} else if (deleted) {
		struct member *m = member_find(c, key + plen);
		if (m)
			member_left(m, "its record is gone: stopped, or its "
				    "lease expired");
	} else {
		apply_put(c, key, val, vlen, from_range);
	}
	free(key);
	free(val);
}

/* --- the watch --- */

static void schedule_resync(struct cluster *c)
{
	unsigned shift = c->watch_failures < 6 ? c->watch_failures : 6;
	uint64_t ms = (uint64_t)RESYNC_MIN_MS << shift;
	struct timeval tv;

	if (ms > RESYNC_MAX_MS)
		ms = RESYNC_MAX_MS;
	c->watch_failures++;
	tv = ms_to_timeval(ms);
	evtimer_add(c->resync, &tv);
}

static void on_watch(void *arg, int err, struct json_object *msg)
{
	struct cluster *c = arg;
	struct json_object *result, *events, *b;
	int64_t rev = 0;

	if (err) {
		c->watch = NULL;
		log_debug("etcd: the watch ended (%s); reading the nodes again",
			  strerror(-err));
		schedule_resync(c);
		return;
	}
	if (!json_object_object_get_ex(msg, "result", &result) ||
	    !json_object_is_type(result, json_type_object)) {
		/* {"error": ...}: the gateway's way of ending a stream. */
		etcd_watch_close(c->watch);
		c->watch = NULL;
		schedule_resync(c);
		return;
	}
	if (json_object_object_get_ex(result, "canceled", &b) &&
	    json_object_get_boolean(b)) {
		/* Compacted past our revision, or etcd refused it. */
		log_info("etcd: the watch was cancelled; reading the nodes "
			 "again");
		etcd_watch_close(c->watch);
		c->watch = NULL;
		schedule_resync(c);
		return;
	}
	c->watch_failures = 0;
	c->watch_msg_ms = now_ns() / 1000000;
	if (json_object_object_get_ex(result, "events", &events) &&
	    json_object_is_type(events, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(events); i++) {
			struct json_object *ev = json_object_array_get_idx(events, i);
			struct json_object *kv, *type;
			if (!json_object_object_get_ex(ev, "kv", &kv))
				continue;
			bool del = json_object_object_get_ex(ev, "type", &type) &&
				   json_object_is_type(type, json_type_string) &&
				   strcmp(json_object_get_string(type),
					  "DELETE") == 0;
			apply_kv(c, kv, del, false);
			int64_t mod = 0;
			if (etcd_json_i64(kv, "mod_revision", &mod) == 0 &&
			    mod >= c->watch_rev)
				c->watch_rev = mod + 1;
		}
	}
	struct json_object *header;
	if (json_object_object_get_ex(result, "header", &header) &&
	    etcd_json_i64(header, "revision", &rev) == 0 &&
	    rev >= c->watch_rev && !json_object_object_get_ex(result, "events",
							     NULL))
		c->watch_rev = rev + 1;
}

static void watch_start(struct cluster *c)
{
	char prefix[META_PREFIX_MAX + 16];
	struct json_object *body = json_object_new_object();
	struct json_object *req;

	snprintf(prefix, sizeof(prefix), "%s" CLUSTER_NODES, c->cfg.prefix);
	req = cluster_key_json(prefix, true);
	if (!body || !req) {
		json_object_put(body);
		json_object_put(req);
		schedule_resync(c);
		return;
	}
	json_object_object_add(req, "start_revision",
			       json_object_new_int64(c->watch_rev));
	json_object_object_add(body, "create_request", req);
	c->watch = etcd_watch_open(c->etcd, body, on_watch, c);
	if (!c->watch)
		schedule_resync(c);
}

/* --- the range --- */

static void on_range(void *arg, int err, struct json_object *reply)
{
	struct cluster *c = arg;
	struct json_object *kvs, *header;
	struct member *m, *tmp;
	int64_t rev = 0;

	if (err == -ECANCELED)
		return;
	c->resync_out = false;
	if (err)
		cluster_unreached(c, err);
	if (err || !json_object_object_get_ex(reply, "header", &header) ||
	    etcd_json_i64(header, "revision", &rev) || rev <= 0) {
		if (!err)
			log_warnx("etcd: a range answer without a revision");
		schedule_resync(c);
		return;
	}
	cluster_reached(c);
	HASH_ITER(hh, c->members, m, tmp)
		m->seen = false;
	if (json_object_object_get_ex(reply, "kvs", &kvs) &&
	    json_object_is_type(kvs, json_type_array))
		for (size_t i = 0; i < json_object_array_length(kvs); i++)
			apply_kv(c, json_object_array_get_idx(kvs, i), false,
				 true);
	/* Deleted while we were not watching. */
	HASH_ITER(hh, c->members, m, tmp)
		if (!m->seen)
			member_left(m, "its record is gone");
	log_debug("etcd: %u other nodes known at revision %lld",
		  HASH_COUNT(c->members), (long long)rev);
	c->watch_rev = rev + 1;
	if (c->watch)
		etcd_watch_close(c->watch);
	watch_start(c);
}

static void read_nodes(struct cluster *c)
{
	char prefix[META_PREFIX_MAX + 16];

	if (c->resync_out)
		return;
	snprintf(prefix, sizeof(prefix), "%s" CLUSTER_NODES, c->cfg.prefix);
	c->resync_out = true;
	etcd_call(c->etcd, "kv/range", cluster_key_json(prefix, true),
		  on_range, c);
}

static void on_resync(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	read_nodes(arg);
}

void membership_start(struct cluster *c)
{
	if (!c->resync) {
		c->resync = evtimer_new(c->ctx.base, on_resync, c);
		if (!c->resync) {
			log_warnx("etcd: out of memory; no membership watch");
			return;
		}
	}
	read_nodes(c);
}

void membership_resync(struct cluster *c)
{
	if (!c->resync)
		return;
	if (c->watch) {
		etcd_watch_close(c->watch);
		c->watch = NULL;
	}
	read_nodes(c);
}

void membership_stop(struct cluster *c)
{
	struct member *m, *tmp;

	etcd_watch_close(c->watch);
	c->watch = NULL;
	if (c->resync) {
		event_free(c->resync);
		c->resync = NULL;
	}
	HASH_ITER(hh, c->members, m, tmp) {
		HASH_DEL(c->members, m);
		free(m);
	}
}

const uint8_t *membership_instance(struct cluster *c, const char *node)
{
	struct member *m = member_find(c, node);

	return m && m->present ? m->rec.instance : NULL;
}

bool membership_resolve(struct cluster *c, const char *node)
{
	struct member *m = member_find(c, node);

	if (!m || !m->present)
		return false;
	peers_member_seen(c->ctx.peers, node, m->rec.instance, m->rec.addrs,
			  m->rec.ports, m->rec.naddrs);
	return true;
}
