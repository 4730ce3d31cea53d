/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster.c - this node in etcd: a lease, the node record under it, and
 * keeping both alive.
 *
 * Registration, one step after another (each an etcd call):
 *   1. lease/grant (etcd_lease_ttl);
 *   2. kv/range of our node key: a record of another instance of this
 *      node is our previous life (we restarted, its lease has not run
 *      out): lease/revoke it, so its names and record go now and the
 *      other nodes see the restart at once, not a TTL later;
 *   3. kv/put of our record with the lease;
 *   4. every local name again (cluster_names.c), the membership watch
 *      (membership.c), and a keepalive every lease_ttl / 3.
 * A failed step starts over after a backoff (0.1 s doubling to 5 s).  A
 * keepalive that finds the lease gone (etcd was unreachable longer than
 * the TTL) registers again; one that fails is logged once and retried at
 * the next tick.
 *
 * Main thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "common/clock.h"
#include "core/log.h"
#include "meta/cluster_int.h"
#include "peer/peer.h"
#include "transport/rdma_dev.h"

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 5000
#define DESTROY_WAIT_MS 500  /* for the revoke at shutdown */


static void registration_start(struct cluster *c);

/* --- JSON of keys and kvs --- */

void cluster_add_b64(struct json_object *o, const char *field,
		     const void *p, size_t n)
{
	char *b = etcd_b64_encode(p, n);

	json_object_object_add(o, field, json_object_new_string(b ? b : ""));
	free(b);
}

struct json_object *cluster_key_json(const char *key, bool prefix)
{
	struct json_object *o = json_object_new_object();
	size_t n = strlen(key);

	cluster_add_b64(o, "key", key, n);
	if (prefix && n) {
		/* Every key that starts with `key`: up to its last byte + 1
		 * (our prefixes end in '/', never in 0xff). */
		char end[META_PREFIX_MAX + 96];
		memcpy(end, key, n);
		end[n - 1]++;
		cluster_add_b64(o, "range_end", end, n);
	}
	return o;
}

int cluster_kv(struct json_object *kv, char **key, uint8_t **value,
	       size_t *vlen, size_t max, int64_t *lease)
{
	struct json_object *k, *v;
	uint8_t *raw = NULL;
	size_t n = 0;

	*key = NULL;
	*value = NULL;
	*vlen = 0;
	if (!json_object_is_type(kv, json_type_object) ||
	    !json_object_object_get_ex(kv, "key", &k) ||
	    !json_object_is_type(k, json_type_string) ||
	    etcd_b64_decode(json_object_get_string(k), 1024, &raw, &n))
		return -EINVAL;
	*key = realloc(raw, n + 1);
	if (!*key) {
		free(raw);
		return -EINVAL;
	}
	(*key)[n] = '\0';
	if (memchr(*key, '\0', n))
		goto bad;
	if (lease && etcd_json_i64(kv, "lease", lease))
		goto bad;
	/* A deleted key has no value. */
	if (!json_object_object_get_ex(kv, "value", &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		goto bad;
	size_t b64 = (size_t)json_object_get_string_len(v);
	const char *s = json_object_get_string(v);
	if (b64 % 4)
		goto bad;
	*vlen = b64 / 4 * 3 - (b64 && s[b64 - 1] == '=') -
		(b64 > 1 && s[b64 - 2] == '=');
	if (*vlen > max)
		return 0;  /* too large: the caller says so */
	if (etcd_b64_decode(json_object_get_string(v), max, value, vlen))
		goto bad;
	return 0;
bad:
	free(*key);
	*key = NULL;
	return -EINVAL;
}

/* --- registration --- */

static void retry_later(struct cluster *c, const char *why, int err)
{
	unsigned shift = c->failures < 6 ? c->failures : 6;
	uint64_t ms = (uint64_t)RETRY_MIN_MS << shift;
	struct timeval tv;

	if (ms > RETRY_MAX_MS)
		ms = RETRY_MAX_MS;
	cluster_count_error(c, err);
	if (c->failures++ == 0 || c->reachable)
		log_warnx("etcd: %s: %s; trying again (every %llu ms at most)",
			  why, strerror(-err), (unsigned long long)RETRY_MAX_MS);
	if (err == -ETIMEDOUT || err == -EHOSTUNREACH)
		c->reachable = false;
	c->state = CLUSTER_IDLE;
	c->gen++;
	tv = ms_to_timeval(ms);
	evtimer_add(c->retry, &tv);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	registration_start(arg);
}

/* The record of this node: its addresses and port as tokens carry them,
 * its RDMA rails as the handshake announces them. */
static char *our_record(struct cluster *c)
{
	struct node_record r = { 0 };
	const struct netaddr *addrs;
	uint16_t port;
	size_t n = peers_advertised(c->ctx.peers, &addrs, &port);

	snprintf(r.node, sizeof(r.node), "%s", c->node);
	memcpy(r.instance, c->ctx.instance_id, RECORD_ID_LEN);
	r.port = port;
	for (size_t i = 0; i < n && i < NETADDR_MAX; i++) {
		r.addrs[i] = addrs[i];
		r.ports[i] = port;
	}
	r.naddrs = n < NETADDR_MAX ? n : NETADDR_MAX;
	int nrails = rdma_dev_rail_count();
	for (int i = 0; i < nrails && r.nrails < RECORD_RAILS; i++) {
		struct rdma_rail_addr a;
		if (rdma_dev_rail_addr(i, &a))
			continue;
		struct record_rail *rl = &r.rails[r.nrails++];
		rl->index = (uint32_t)i;
		memcpy(rl->gid, a.gid, 16);
		rl->addr = a.addr;
		rl->lid = a.lid;
		rl->mtu = a.mtu >= 1 && a.mtu <= 5 ? (uint32_t)a.mtu : 1;
		rl->infiniband = a.infiniband;
	}
	return record_node_encode(&r);
}

/* A callback of a step of registration `gen`: still the one running? */
struct step {
	struct cluster *c;
	uint64_t gen;
};

static struct step *step_new(struct cluster *c)
{
	struct step *s = malloc(sizeof(*s));

	if (s)
		*s = (struct step){ .c = c, .gen = c->gen };
	return s;
}

/* The step's cluster if it still waits for this answer, else NULL (the
 * step is freed either way). */
static struct cluster *step_take(struct step *s, int err)
{
	struct cluster *c = s->c;
	bool current = err != -ECANCELED && s->gen == c->gen;

	free(s);
	return current ? c : NULL;
}

static void on_put_record(void *arg, int err, struct json_object *reply)
{
	struct cluster *c = step_take(arg, err);
	struct timeval tv;
	(void)reply;

	if (!c)
		return;
	if (err) {
		retry_later(c, "cannot store this node's record", err);
		return;
	}
	if (!c->reachable || c->failures)
		log_info("etcd: reachable again at %s", etcd_current(c->etcd));
	c->reachable = true;
	c->failures = 0;
	c->state = CLUSTER_UP;
	log_info("etcd: node %s registered at %s (lease %llx, ttl %u s)",
		 c->node, etcd_current(c->etcd), (unsigned long long)c->lease,
		 c->cfg.lease_ttl_s);
	tv = ms_to_timeval(c->cfg.lease_ttl_s * 1000ull / 3);
	evtimer_add(c->keepalive, &tv);
	c->names_dirty = false;
	cnames_write_all(c);
	cnames_flush_deletes(c);
	membership_start(c);
}

static void put_record(struct cluster *c)
{
	struct json_object *body = cluster_key_json(c->node_key, false);
	char *rec = our_record(c);
	struct step *s = step_new(c);

	if (!body || !rec || !s) {
		json_object_put(body);
		free(rec);
		free(s);
		retry_later(c, "cannot build this node's record", -ENOMEM);
		return;
	}
	cluster_add_b64(body, "value", rec, strlen(rec));
	json_object_object_add(body, "lease", json_object_new_int64(c->lease));
	free(rec);
	etcd_call(c->etcd, "kv/put", body, on_put_record, s);
}

static void on_revoked(void *arg, int err, struct json_object *reply)
{
	struct cluster *c = step_take(arg, err);
	(void)reply;

	if (!c)
		return;
	/* A lease already gone is fine: the record and names went with it. */
	if (err && err != -EPROTO) {
		retry_later(c, "cannot revoke our previous lease", err);
		return;
	}
	put_record(c);
}

/* Our node key as etcd has it: ours already, our previous life's, or
 * nothing. */
static void on_old_record(void *arg, int err, struct json_object *reply)
{
	struct cluster *c = step_take(arg, err);
	struct json_object *kvs;
	struct node_record old;
	const char *why = NULL;

	if (!c)
		return;
	if (err) {
		retry_later(c, "cannot read this node's record", err);
		return;
	}
	if (json_object_object_get_ex(reply, "kvs", &kvs) &&
	    json_object_is_type(kvs, json_type_array) &&
	    json_object_array_length(kvs) > 0) {
		char *key;
		uint8_t *val;
		size_t vlen;
		int64_t lease = 0;
		if (cluster_kv(json_object_array_get_idx(kvs, 0), &key, &val,
			       &vlen, RECORD_MAX, &lease) == 0) {
			bool parsed = val && record_node_parse((char *)val, vlen,
							       &old, &why) == 0;
			bool mine = parsed && memcmp(old.instance,
						     c->ctx.instance_id,
						     RECORD_ID_LEN) == 0;
			free(key);
			free(val);
			if (!mine && lease && lease != c->lease) {
				char hex[33] = "?";
				if (parsed)
					record_id_hex(old.instance, hex);
				log_info("etcd: the record of node %s is of "
					 "instance %.8s (a previous run): its "
					 "lease %llx revoked, its names go now",
					 c->node, hex,
					 (unsigned long long)lease);
				struct json_object *body = json_object_new_object();
				struct step *s = step_new(c);
				if (!body || !s) {
					json_object_put(body);
					free(s);
					retry_later(c, "out of memory", -ENOMEM);
					return;
				}
				json_object_object_add(body, "ID",
						       json_object_new_int64(lease));
				etcd_call(c->etcd, "lease/revoke", body,
					  on_revoked, s);
				return;
			}
		}
	}
	put_record(c);
}

static void on_granted(void *arg, int err, struct json_object *reply)
{
	struct cluster *c = step_take(arg, err);
	int64_t id = 0, ttl = 0;

	if (!c)
		return;
	if (!err && (etcd_json_i64(reply, "ID", &id) ||
		     etcd_json_i64(reply, "TTL", &ttl) || id == 0 || ttl <= 0))
		err = -EPROTO;
	if (err) {
		retry_later(c, "cannot get a lease", err);
		return;
	}
	c->lease = id;
	c->lease_renewed_ms = now_ns() / 1000000;
	c->state = CLUSTER_CLAIMING;
	struct step *s = step_new(c);
	if (!s) {
		retry_later(c, "out of memory", -ENOMEM);
		return;
	}
	etcd_call(c->etcd, "kv/range", cluster_key_json(c->node_key, false),
		  on_old_record, s);
}

static void registration_start(struct cluster *c)
{
	struct json_object *body = json_object_new_object();
	struct step *s;

	c->gen++;
	c->lease = 0;
	c->keepalive_out = false;  /* an old one's answer is ignored */
	c->state = CLUSTER_GRANTING;
	evtimer_del(c->keepalive);
	s = step_new(c);
	if (!body || !s) {
		json_object_put(body);
		free(s);
		retry_later(c, "out of memory", -ENOMEM);
		return;
	}
	json_object_object_add(body, "TTL",
			       json_object_new_int64(c->cfg.lease_ttl_s));
	etcd_call(c->etcd, "lease/grant", body, on_granted, s);
}

/* --- keepalive --- */

void cluster_count_error(struct cluster *c, int err)
{
	enum cluster_err_kind k;

	switch (err) {
	case -ECANCELED: case -ENOMEM: case 0:
		return;   /* ours, not etcd's */
	case -EHOSTUNREACH: k = CLUSTER_ERR_UNREACHABLE; break;
	case -ETIMEDOUT:    k = CLUSTER_ERR_TIMEOUT; break;
	case -EPROTO:       k = CLUSTER_ERR_PROTOCOL; break;
	case -EACCES:       k = CLUSTER_ERR_DENIED; break;
	default:            k = CLUSTER_ERR_OTHER; break;
	}
	c->errors[k]++;
	c->last_error = err;
}

void cluster_unreached(struct cluster *c, int err)
{
	if (err == -ECANCELED || err == -ENOMEM)
		return;
	cluster_count_error(c, err);
	if (c->reachable)
		log_warnx("etcd: unreachable (%s, last tried %s): lookups of "
			  "other nodes' names fail until it answers; local "
			  "names still work", strerror(-err),
			  etcd_current(c->etcd));
	c->reachable = false;
}

void cluster_reached(struct cluster *c)
{
	c->answered_ms = now_ns() / 1000000;
	if (!c->reachable)
		log_info("etcd: reachable again at %s", etcd_current(c->etcd));
	c->reachable = true;
	if (c->state != CLUSTER_UP)
		return;
	if (c->names_dirty) {
		c->names_dirty = false;
		cnames_write_all(c);
	}
	cnames_flush_deletes(c);
}

static void on_keepalive(void *arg, int err, struct json_object *reply)
{
	struct cluster *c = step_take(arg, err);
	struct json_object *result;
	int64_t ttl = 0;

	if (!c)
		return;
	c->keepalive_out = false;
	if (err) {
		cluster_unreached(c, err);
		/* The watch's connection may be as dead: read again. */
		membership_resync(c);
		return;
	}
	/* {"result": {"ID": ..., "TTL": ...}}: no TTL, the lease is gone. */
	if (!json_object_object_get_ex(reply, "result", &result) ||
	    etcd_json_i64(result, "TTL", &ttl) || ttl <= 0) {
		log_warnx("etcd: lease %llx expired (etcd was out of reach "
			  "longer than etcd_lease_ttl); registering again",
			  (unsigned long long)c->lease);
		c->reachable = true;
		registration_start(c);
		return;
	}
	bool was = c->reachable;
	c->lease_renewed_ms = now_ns() / 1000000;
	cluster_reached(c);
	if (!was)
		membership_resync(c);
}

static void on_keepalive_timer(evutil_socket_t fd, short what, void *arg)
{
	struct cluster *c = arg;
	struct timeval tv = ms_to_timeval(c->cfg.lease_ttl_s * 1000ull / 3);
	(void)fd, (void)what;

	if (c->state != CLUSTER_UP)
		return;
	evtimer_add(c->keepalive, &tv);
	if (c->keepalive_out)
		return;  /* the last one is still trying */
	struct json_object *body = json_object_new_object();
	struct step *s = step_new(c);
	if (!body || !s) {
		json_object_put(body);
		free(s);
		return;
	}
	json_object_object_add(body, "ID", json_object_new_int64(c->lease));
	c->keepalive_out = true;
	etcd_call(c->etcd, "lease/keepalive", body, on_keepalive, s);
}

/* --- life cycle --- */

int cluster_create(const struct cluster_ctx *ctx, struct cluster **out)
{
	struct cluster *c;
	char err[512];

	*out = NULL;
	if (ctx->meta->backend != META_ETCD)
		return 0;
	if (meta_config_check(ctx->meta, err, sizeof(err))) {
		log_warnx("%s", err);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ctx = *ctx;
	c->cfg = *ctx->meta;
	c->reachable = true;
	SLIST_INIT(&c->deletes);
	snprintf(c->node, sizeof(c->node), "%s", peers_node_name(ctx->peers));
	snprintf(c->node_key, sizeof(c->node_key), "%s" CLUSTER_NODES "%s",
		 c->cfg.prefix, c->node);
	c->etcd = etcd_create(ctx->base, &c->cfg, err, sizeof(err));
	if (!c->etcd) {
		log_warnx("etcd: %s", err);
		free(c);
		return -EINVAL;
	}
	c->retry = evtimer_new(ctx->base, on_retry, c);
	c->keepalive = evtimer_new(ctx->base, on_keepalive_timer, c);
	if (!c->retry || !c->keepalive) {
		cluster_destroy(c);
		return -ENOMEM;
	}
	log_info("metadata = etcd: %s, prefix %s, node %s, lease ttl %u s",
		 c->cfg.endpoints, c->cfg.prefix, c->node, c->cfg.lease_ttl_s);
	registration_start(c);
	*out = c;
	return 0;
}

static void on_final_revoke(void *arg, int err, struct json_object *reply)
{
	bool *done = arg;
	(void)err, (void)reply;

	*done = true;
}

static void on_destroy_wait(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	*(bool *)arg = true;
}

void cluster_destroy(struct cluster *c)
{
	if (!c)
		return;
	membership_stop(c);
	/* Our names and record go now rather than a TTL later: one try,
	 * bounded, on a loop that runs little else by then (xferd stopped
	 * accepting and said goodbye to its clients). */
	if (c->etcd && c->state == CLUSTER_UP) {
		struct json_object *body = json_object_new_object();
		bool done = false, waited = false;
		struct timeval tv = ms_to_timeval(DESTROY_WAIT_MS);
		struct event *t = evtimer_new(c->ctx.base, on_destroy_wait,
					      &waited);
		if (body && t && evtimer_add(t, &tv) == 0) {
			json_object_object_add(body, "ID",
					       json_object_new_int64(c->lease));
			etcd_call(c->etcd, "lease/revoke", body,
				  on_final_revoke, &done);
			body = NULL;
			while (!done && !waited)
				event_base_loop(c->ctx.base, EVLOOP_ONCE);
		}
		json_object_put(body);
		if (t)
			event_free(t);
		if (done)
			log_info("etcd: lease %llx revoked",
				 (unsigned long long)c->lease);
	}
	c->gen++;
	etcd_destroy(c->etcd);
	cnames_free(c);
	if (c->retry)
		event_free(c->retry);
	if (c->keepalive)
		event_free(c->keepalive);
	free(c);
}

bool cluster_resolve_node(struct cluster *c, const char *node)
{
	return c && membership_resolve(c, node);
}

/* --- health, for xferctl status and /metrics --- */

static uint64_t age_ms(uint64_t now, uint64_t then)
{
	return then ? now - then : UINT64_MAX;
}

const char *cluster_err_kind_name(enum cluster_err_kind k)
{
	static const char *const names[CLUSTER_ERR__COUNT] = {
		[CLUSTER_ERR_UNREACHABLE] = "unreachable",
		[CLUSTER_ERR_TIMEOUT] = "timeout",
		[CLUSTER_ERR_PROTOCOL] = "protocol",
		[CLUSTER_ERR_DENIED] = "denied",
		[CLUSTER_ERR_OTHER] = "other",
	};

	return (unsigned)k < CLUSTER_ERR__COUNT ? names[k] : "other";
}

void cluster_health_get(const struct cluster *c, struct cluster_health *h)
{
	uint64_t now = now_ns() / 1000000;

	memset(h, 0, sizeof(*h));
	h->answer_age_ms = h->lease_age_ms = h->watch_age_ms = UINT64_MAX;
	if (!c)
		return;
	h->reachable = c->reachable;
	h->registered = c->state == CLUSTER_UP && c->lease;
	h->watching = c->watch != NULL;
	h->answer_age_ms = age_ms(now, c->answered_ms);
	h->lease_age_ms = c->lease ? age_ms(now, c->lease_renewed_ms)
				   : UINT64_MAX;
	h->watch_age_ms = age_ms(now, c->watch_msg_ms);
	memcpy(h->errors, c->errors, sizeof(h->errors));
	h->last_error = c->last_error;
	snprintf(h->endpoint, sizeof(h->endpoint), "%s",
		 etcd_current(c->etcd) ? etcd_current(c->etcd) : "");
}
