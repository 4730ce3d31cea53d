/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster_names.c - shared names in etcd: <prefix>names/<name> holds a
 * name record (record.h) under this node's lease.
 *
 * Only names published shared (NAMES_SHARED) come here: uids mean
 * nothing between nodes, so etcd holds the cluster's one shared
 * namespace, first come first served, and a name its publisher kept
 * private never leaves its xferd.  A record is written with
 * "shared":true, and a lookup takes no record without it: a record of a
 * node that predates shared names is of a name nobody chose to share.
 * A lookup takes no record of this node either: this node's names were
 * looked up in its table, per uid, and another local user's shared
 * name must not answer a bare lookup here.
 *
 * Publish is a transaction: create the key if nobody has it; else read
 * it, and if the record is ours (this instance, or this node's previous
 * one) overwrite it, otherwise the name is another node's: -EEXIST.
 * Unpublish deletes the key only while it is under our lease, so it
 * never removes a name another node took since.  A lookup is one
 * kv/range: no fan-out to peers.  A name record whose node runs another
 * instance now (it restarted, its old lease not yet gone) is not
 * returned: its token is stale.
 *
 * When etcd does not answer, the local table stays as it is and is
 * written again (cnames_write_all) once etcd answers; deletes that did
 * not reach etcd wait in c->deletes.
 *
 * Main thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/token_codec.h"
#include "core/log.h"
#include "meta/cluster_int.h"
#include "meta/names.h"

struct pending_delete {
	SLIST_ENTRY(pending_delete) link;
	char name[NAMES_NAME_MAX + 1];
};

/* One publish (or write-again) waiting for etcd. */
struct publish {
	struct cluster *c;
	uint64_t gen;
	char name[NAMES_NAME_MAX + 1];
	char *value;                  /* the record's JSON */
	cluster_done_cb cb;           /* NULL: a write-again */
	void *arg;
};

static void name_key(const struct cluster *c, const char *name, char *out,
		     size_t len)
{
	snprintf(out, len, "%s" CLUSTER_NAMES "%s", c->cfg.prefix, name);
}

static struct json_object *put_op(struct cluster *c, const char *key,
				  const char *value)
{
	struct json_object *put = cluster_key_json(key, false);
	struct json_object *op = json_object_new_object();

	cluster_add_b64(put, "value", value, strlen(value));
	json_object_object_add(put, "lease", json_object_new_int64(c->lease));
	json_object_object_add(op, "request_put", put);
	return op;
}

static void publish_end(struct publish *p, int err)
{
	if (p->cb)
		p->cb(p->arg, err);
	free(p->value);
	free(p);
}

/* etcd did not answer: keep the name locally, write it again later. */
static void publish_unreached(struct publish *p, int err)
{
	cluster_unreached(p->c, err);
	log_warnx("etcd: '%s' not stored (%s): kept in this xferd, written "
		  "to etcd once it answers", p->name, strerror(-err));
	p->c->names_dirty = true;
	publish_end(p, 0);
}

static void on_overwritten(void *arg, int err, struct json_object *reply)
{
	struct publish *p = arg;
	(void)reply;

	if (err == -ECANCELED)
		return publish_end(p, 0);
	if (err)
		return publish_unreached(p, err);
	publish_end(p, 0);
}

static void on_published(void *arg, int err, struct json_object *reply)
{
	struct publish *p = arg;
	struct cluster *c = p->c;
	struct json_object *ok, *resps;
	struct name_record rec = { .node = "?" };
	const char *why;
	char key[META_PREFIX_MAX + NAMES_NAME_MAX + 16];

	if (err == -ECANCELED)
		return publish_end(p, 0);
	if (err)
		return publish_unreached(p, err);
	cluster_reached(c);
	if (p->gen != c->gen) {
		/* Registered again meanwhile: written again with the new
		 * lease by cnames_write_all. */
		return publish_end(p, 0);
	}
	if (json_object_object_get_ex(reply, "succeeded", &ok) &&
	    json_object_get_boolean(ok))
		return publish_end(p, 0);
	/* Somebody has the key: whose record is it? */
	bool ours = false;
	if (json_object_object_get_ex(reply, "responses", &resps) &&
	    json_object_is_type(resps, json_type_array) &&
	    json_object_array_length(resps) == 1) {
		struct json_object *rr, *kvs;
		struct json_object *r0 = json_object_array_get_idx(resps, 0);
		if (json_object_object_get_ex(r0, "response_range", &rr) &&
		    json_object_object_get_ex(rr, "kvs", &kvs) &&
		    json_object_is_type(kvs, json_type_array) &&
		    json_object_array_length(kvs) == 1) {
			char *k;
			uint8_t *v;
			size_t vlen;
			if (cluster_kv(json_object_array_get_idx(kvs, 0), &k, &v,
				       &vlen, RECORD_MAX, NULL) == 0) {
				/* Ours, our previous life's, or garbage
				 * (a record nobody can use is no owner). */
				ours = !v || record_name_parse((char *)v, vlen,
							       &rec, &why) ||
				       strcmp(rec.node, c->node) == 0;
				free(k);
				free(v);
			}
		} else {
			ours = true;  /* gone again meanwhile */
		}
	}
	if (!ours) {
		log_info("etcd: '%s' is published by node %s", p->name,
			 rec.node);
		return publish_end(p, -EEXIST);
	}
	name_key(c, p->name, key, sizeof(key));
	struct json_object *txn = json_object_new_object();
	struct json_object *ops = json_object_new_array();
	json_object_array_add(ops, put_op(c, key, p->value));
	json_object_object_add(txn, "success", ops);
	etcd_call(c->etcd, "kv/txn", txn, on_overwritten, p);
}

static int publish_start(struct cluster *c, const char *name,
			 const void *token, size_t len, cluster_done_cb cb,
			 void *arg)
{
	struct publish *p = calloc(1, sizeof(*p));
	struct name_record rec = { .token_len = len };
	char key[META_PREFIX_MAX + NAMES_NAME_MAX + 16];

	if (!p || len > sizeof(rec.token)) {
		free(p);
		return -ENOMEM;
	}
	snprintf(rec.node, sizeof(rec.node), "%s", c->node);
	rec.shared = true;
	memcpy(rec.instance, c->ctx.instance_id, RECORD_ID_LEN);
	memcpy(rec.token, token, len);
	p->value = record_name_encode(&rec);
	if (!p->value) {
		free(p);
		return -ENOMEM;
	}
	p->c = c;
	p->gen = c->gen;
	p->cb = cb;
	p->arg = arg;
	snprintf(p->name, sizeof(p->name), "%s", name);
	name_key(c, name, key, sizeof(key));

	/* if create_revision(key) == 0 then put else range */
	struct json_object *txn = json_object_new_object();
	struct json_object *cmp = cluster_key_json(key, false);
	struct json_object *cmps = json_object_new_array();
	struct json_object *ok = json_object_new_array();
	struct json_object *ko = json_object_new_array();
	struct json_object *rng = json_object_new_object();
	json_object_object_add(cmp, "target", json_object_new_string("CREATE"));
	json_object_object_add(cmp, "create_revision", json_object_new_int(0));
	json_object_array_add(cmps, cmp);
	json_object_object_add(txn, "compare", cmps);
	json_object_array_add(ok, put_op(c, key, p->value));
	json_object_object_add(txn, "success", ok);
	json_object_object_add(rng, "request_range", cluster_key_json(key, false));
	json_object_array_add(ko, rng);
	json_object_object_add(txn, "failure", ko);
	etcd_call(c->etcd, "kv/txn", txn, on_published, p);
	return 0;
}

int cluster_publish(struct cluster *c, const char *name, const void *token,
		    size_t len, cluster_done_cb cb, void *arg)
{
	/* A delete of this name still waiting must not undo it later. */
	for (struct pending_delete **pd = &SLIST_FIRST(&c->deletes); *pd;) {
		struct pending_delete *d = *pd;
		if (strcmp(d->name, name) == 0) {
			*pd = SLIST_NEXT(d, link);
			free(d);
		} else {
			pd = &SLIST_NEXT(d, link);
		}
	}
	if (c->state != CLUSTER_UP)
		return 0;  /* written at registration */
	if (!c->reachable) {
		/* Known down: do not make the client wait out the retries. */
		c->names_dirty = true;
		return 0;
	}
	return publish_start(c, name, token, len, cb, arg) ? 0 : 1;
}

static void write_one(void *arg, const char *name, const void *token,
		      size_t len)
{
	if (publish_start(arg, name, token, len, NULL, NULL))
		((struct cluster *)arg)->names_dirty = true;
}

static void count_one(void *arg, const char *name, const void *token,
		      size_t len)
{
	(void)name, (void)token, (void)len;
	(*(size_t *)arg)++;
}

void cnames_write_all(struct cluster *c)
{
	size_t n = 0;

	names_foreach_shared(c->ctx.names, count_one, &n);
	if (n)
		log_info("etcd: writing %zu shared local names", n);
	names_foreach_shared(c->ctx.names, write_one, c);
}

/* --- unpublish --- */

static void delete_later(struct cluster *c, const char *name)
{
	struct pending_delete *d = calloc(1, sizeof(*d));

	if (!d)
		return;  /* it goes with our lease at the latest */
	snprintf(d->name, sizeof(d->name), "%s", name);
	SLIST_INSERT_HEAD(&c->deletes, d, link);
}

struct unpublish {
	struct cluster *c;
	char name[NAMES_NAME_MAX + 1];
};

static void on_deleted(void *arg, int err, struct json_object *reply)
{
	struct unpublish *u = arg;
	(void)reply;

	if (err && err != -ECANCELED && err != -EPROTO) {
		const void *tok;
		size_t len;
		/* Unless published again meanwhile (then it is written). */
		if (names_lookup_shared(u->c->ctx.names, u->name, &tok,
					&len))
			delete_later(u->c, u->name);
	}
	free(u);
}

static void delete_start(struct cluster *c, const char *name)
{
	struct unpublish *u = calloc(1, sizeof(*u));
	char key[META_PREFIX_MAX + NAMES_NAME_MAX + 16];

	if (!u) {
		delete_later(c, name);
		return;
	}
	u->c = c;
	snprintf(u->name, sizeof(u->name), "%s", name);
	name_key(c, name, key, sizeof(key));
	/* if lease(key) == ours then delete */
	struct json_object *txn = json_object_new_object();
	struct json_object *cmp = cluster_key_json(key, false);
	struct json_object *cmps = json_object_new_array();
	struct json_object *ok = json_object_new_array();
	struct json_object *del = json_object_new_object();
	json_object_object_add(cmp, "target", json_object_new_string("LEASE"));
	json_object_object_add(cmp, "lease", json_object_new_int64(c->lease));
	json_object_array_add(cmps, cmp);
	json_object_object_add(txn, "compare", cmps);
	json_object_object_add(del, "request_delete_range",
			       cluster_key_json(key, false));
	json_object_array_add(ok, del);
	json_object_object_add(txn, "success", ok);
	etcd_call(c->etcd, "kv/txn", txn, on_deleted, u);
}

void cluster_unpublish(struct cluster *c, const char *name)
{
	if (!c || c->state != CLUSTER_UP)
		return;  /* not in etcd (or it goes with an expired lease) */
	if (!c->reachable) {
		delete_later(c, name);
		return;
	}
	delete_start(c, name);
}

static void unpublish_one(void *arg, const char *name, const void *token,
			  size_t len)
{
	(void)token, (void)len;
	cluster_unpublish(arg, name);
}

void cluster_client_gone(struct cluster *c, uint64_t client)
{
	if (c)
		names_foreach_client_shared(c->ctx.names, client,
					    unpublish_one, c);
}

void cnames_flush_deletes(struct cluster *c)
{
	struct pending_delete *d;

	if (c->state != CLUSTER_UP)
		return;
	while ((d = SLIST_FIRST(&c->deletes))) {
		SLIST_REMOVE_HEAD(&c->deletes, link);
		delete_start(c, d->name);
		free(d);
	}
}

void cnames_free(struct cluster *c)
{
	struct pending_delete *d;

	while ((d = SLIST_FIRST(&c->deletes))) {
		SLIST_REMOVE_HEAD(&c->deletes, link);
		free(d);
	}
}

/* --- lookup --- */

struct lookup {
	struct cluster *c;
	char name[NAMES_NAME_MAX + 1];
	cluster_lookup_cb cb;
	void *arg;
};

static void on_lookup(void *arg, int err, struct json_object *reply)
{
	struct lookup *l = arg;
	struct cluster *c = l->c;
	struct json_object *kvs;
	struct name_record rec;
	struct token tok;
	const char *why = NULL;
	char *key = NULL;
	uint8_t *val = NULL;
	size_t vlen;

	if (err) {
		if (err != -ECANCELED)
			log_warnx("etcd: lookup of '%s' failed: %s", l->name,
				  strerror(-err));
		if (err == -ETIMEDOUT || err == -EHOSTUNREACH)
			cluster_unreached(c, err);
		goto out;
	}
	cluster_reached(c);
	err = -ENOENT;
	if (!json_object_object_get_ex(reply, "kvs", &kvs) ||
	    !json_object_is_type(kvs, json_type_array) ||
	    json_object_array_length(kvs) == 0)
		goto out;
	if (cluster_kv(json_object_array_get_idx(kvs, 0), &key, &val, &vlen,
		       RECORD_MAX, NULL) || !val) {
		log_warnx("etcd: '%s': a malformed or oversized record: "
			  "ignored", l->name);
		goto out;
	}
	if (record_name_parse((char *)val, vlen, &rec, &why)) {
		log_warnx("etcd: '%s': not a name record (%s): ignored",
			  l->name, why);
		goto out;
	}
	if (token_decode(rec.token, rec.token_len, &tok) ||
	    memcmp(tok.instance_id, rec.instance, RECORD_ID_LEN)) {
		log_warnx("etcd: '%s': the record's token is not a token of "
			  "instance it names: ignored", l->name);
		goto out;
	}
	if (!rec.shared) {
		log_debug("etcd: '%s' of node %s is not marked shared (a node "
			  "that predates shared names): ignored", l->name,
			  rec.node);
		goto out;
	}
	if (strcmp(rec.node, c->node) == 0) {
		log_debug("etcd: '%s' is a name of this node: not another "
			  "user's here", l->name);
		goto out;
	}
	const uint8_t *now = membership_instance(c, rec.node);
	if (now && memcmp(now, rec.instance, RECORD_ID_LEN)) {
		log_debug("etcd: '%s' is of a previous run of node %s",
			  l->name, rec.node);
		goto out;
	}
	l->cb(l->arg, 0, rec.token, rec.token_len);
	free(key);
	free(val);
	free(l);
	return;
out:
	free(key);
	free(val);
	l->cb(l->arg, err, NULL, 0);
	free(l);
}

void cluster_lookup(struct cluster *c, const char *name,
		    cluster_lookup_cb cb, void *arg)
{
	struct lookup *l = calloc(1, sizeof(*l));
	char key[META_PREFIX_MAX + NAMES_NAME_MAX + 16];

	if (!l) {
		cb(arg, -ENOMEM, NULL, 0);
		return;
	}
	l->c = c;
	l->cb = cb;
	l->arg = arg;
	snprintf(l->name, sizeof(l->name), "%s", name);
	name_key(c, name, key, sizeof(key));
	etcd_call(c->etcd, "kv/range", cluster_key_json(key, false), on_lookup,
		  l);
}
