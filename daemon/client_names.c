/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_names.c - a client's publish, unpublish and lookup: names in
 * its uid's namespace of this xferd (meta/names.h), shared ones in etcd
 * too (meta/cluster.h); a lookup this xferd cannot answer goes to etcd
 * or to the peers, and its answer comes later.
 *
 * Thread: the main thread only; answers from etcd and the peers come
 * back on it and find the client by its id (client_by_id), never by a
 * pointer kept.  No lock of its own (the name table's leaf lock is taken
 * inside names_*).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "common/pubname.h"
#include "core/log.h"
#include "meta/cluster.h"
#include "meta/names.h"
#include "peer/peer.h"
#include "uid_usage.h"
#include "xferd.h"

/* --- publish and lookup --- */

/* A publish that waits for etcd (metadata = etcd): whom to answer. */
struct publish_wait {
	struct xferd *d;
	uint64_t client;
	uint64_t seq;
	char name[NAMES_NAME_MAX + 1];
};

/* The user's count of names follows the table: what this client holds
 * now (a publish may replace a token under a name it has). */
void client_names_recount(struct client *c)
{
	uint32_t now = (uint32_t)names_client_count(c->d->names, c->pc.id);

	c->uu->names = c->uu->names - c->names + now;
	c->names = now;
}

static void on_cluster_published(void *arg, int error)
{
	struct publish_wait *w = arg;
	struct client *c = client_by_id(w->d, w->client);

	if (c) {
		/* Another node has the name: it is not ours here either. */
		if (error) {
			names_unpublish(w->d->names, w->name, c->pc.id,
					(uint32_t)c->uid, NULL);
			client_names_recount(c);
		}
		if (client_reply(c, w->seq, error,
				 error == -EEXIST ? "name published by another node"
				 : error ? strerror(-error) : NULL))
			client_drop(c, "cannot send reply");
	}
	free(w);
}

static int publish_in_cluster(struct client *c, uint64_t seq,
			      const Xfer__Client__PublishRequest *req)
{
	struct publish_wait *w = malloc(sizeof(*w));

	if (!w)
		return client_reply(c, seq, 0, NULL); /* local only, for now */
	*w = (struct publish_wait){ .d = c->d, .client = c->pc.id, .seq = seq };
	snprintf(w->name, sizeof(w->name), "%s", req->name);
	if (cluster_publish(c->d->cluster, req->name, req->token.data,
			    req->token.len, on_cluster_published, w) == 1)
		return 0;
	free(w);
	return client_reply(c, seq, 0, NULL);
}

/*
 * The name goes into the namespace of the client's uid (SO_PEERCRED at
 * connect): another user's name of the same spelling is no conflict.
 * Only a shared name leaves this xferd (etcd, other nodes' lookups).
 */
int client_publish(struct client *c, uint64_t seq,
		   const Xfer__Client__PublishRequest *req)
{
	/* Name, flags and token length: checked by client_msg_check.  The
	 * table keeps opaque bytes: a token is checked where it is used,
	 * on import at the xferd that owns it. */
	bool shared = req->flags & NAMES_SHARED;
	const char *why = NULL;
	/* A shared name published again private leaves etcd too. */
	int was = names_flags(c->d->names, (uint32_t)c->uid, req->name);
	int err = names_publish(c->d->names, req->name, c->pc.id,
				(uint32_t)c->uid, req->flags, req->token.data,
				req->token.len);
	/* A new name (not a new token under one it has) past its user's
	 * bound: taken back. */
	if (!err && names_client_count(c->d->names, c->pc.id) > c->names &&
	    (err = uid_usage_check(&c->d->cfg, c->uu, UID_BOUND_NAMES, &why))) {
		names_unpublish(c->d->names, req->name, c->pc.id,
				(uint32_t)c->uid, NULL);
		was = 0;
	}
	client_names_recount(c);
	if (!err)
		log_debug("client %llu (uid %u): published '%s'%s (%zu bytes)",
			  (unsigned long long)c->pc.id, (unsigned)c->uid,
			  req->name, shared ? " shared" : "", req->token.len);
	if (!err && was > 0 && (was & NAMES_SHARED) && !shared)
		cluster_unpublish(c->d->cluster, req->name);
	if (!err && shared && c->d->cluster)
		return publish_in_cluster(c, seq, req);
	return client_reply(c, seq, err,
			    why ? why
			    : err == -EEXIST
			    ? (shared ? "name published by another client of "
					"this user, or shared by another user"
				      : "name published by another client")
			    : err == -EMLINK
			    ? "too many published names of this client (max_names)"
			    : err ? strerror(-err) : NULL);
}

int client_unpublish(struct client *c, uint64_t seq,
		     const Xfer__Client__UnpublishRequest *req)
{
	uint32_t flags = 0;
	int err = names_unpublish(c->d->names, req->name, c->pc.id,
				  (uint32_t)c->uid, &flags);
	client_names_recount(c);
	if (!err && (flags & NAMES_SHARED))
		cluster_unpublish(c->d->cluster, req->name);
	return client_reply(c, seq, err,
			    err == -ENOENT ? "no such name"
			    : err == -EACCES ? "name published by another client"
			    : err ? strerror(-err) : NULL);
}

static int reply_token(struct client *c, uint64_t seq, const void *token,
		       size_t len)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__LookupReply rep = XFER__CLIENT__LOOKUP_REPLY__INIT;

	rep.token.data = (uint8_t *)token;
	rep.token.len = len;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP_REPLY;
	m.lookup_reply = &rep;
	return client_send(c, &m, NULL, 0);
}

/* A lookup handed to the peers: whom to answer, and to what. */
struct lookup_wait {
	struct xferd *d;
	uint64_t client;
	uint64_t seq;
};

static void on_peer_lookup(void *arg, int error, const void *token,
			   size_t len)
{
	struct lookup_wait *w = arg;
	struct client *c = client_by_id(w->d, w->client);
	int err;

	if (!c)
		goto out; /* it left before the answer came */
	if (error > 0)
		error = -EIO;
	if (!error && (!token || len == 0 || len > NAMES_TOKEN_MAX))
		error = -EPROTO;
	if (error)
		err = client_reply(c, w->seq, error,
				   error == -ENOENT ? "no such name"
				   : error == -EPROTO ? "malformed answer from a peer"
				   : strerror(-error));
	else
		err = reply_token(c, w->seq, token, len);
	if (err)
		client_drop(c, "cannot send reply");
out:
	free(w);
}

/*
 * "name": the caller's own name in this xferd's table (never another
 * user's: that is what keeps a squatter's name from answering), then
 * the shared names of every configured peer (or etcd's); "~uid/name":
 * that uid's name here, if the caller may see it (names_lookup_as);
 * "node/..." : only that node, which answers shared names alone (as
 * here if it is this one).  An answer from the peers comes later,
 * through on_peer_lookup.
 */
int client_lookup(struct client *c, uint64_t seq,
		  const Xfer__Client__LookupRequest *req)
{
	struct xferd *d = c->d;
	struct pubname_ref ref;
	char node[CONFIG_HOST_MAX];
	const void *token;
	size_t len;
	int err;

	/* Well-formed: client_msg_check. */
	if (!pubname_lookup_parse(req->name, &ref))
		return client_reply(c, seq, -EINVAL, "malformed lookup");
	if (ref.node) {
		memcpy(node, ref.node, ref.node_len);
		node[ref.node_len] = '\0';
	}
	if (!ref.node || strcmp(node, peers_node_name(d->peers)) == 0) {
		err = ref.uid == PUBNAME_NO_UID
			? names_lookup(d->names, (uint32_t)c->uid, ref.name,
				       &token, &len)
			: names_lookup_as(d->names, (uint32_t)c->uid, ref.uid,
					  ref.name, &token, &len);
		if (err == 0)
			return reply_token(c, seq, token, len);
		/* "~uid/name" is this node's uid; with no peers configured,
		 * nobody else could have it. */
		if (ref.node || ref.uid != PUBNAME_NO_UID ||
		    (d->cfg.npeers == 0 && !d->cluster))
			return client_reply(c, seq, -ENOENT, "no such name");
	}

	struct lookup_wait *w = malloc(sizeof(*w));
	if (!w)
		return client_reply(c, seq, -ENOMEM, "out of memory");
	*w = (struct lookup_wait){ .d = d, .client = c->pc.id, .seq = seq };
	/* With etcd: one read there for "name" (other nodes' shared names);
	 * a node it knows gets a peer record for "node/name". */
	if (d->cluster && !ref.node) {
		cluster_lookup(d->cluster, ref.name, on_peer_lookup, w);
		return 0;
	}
	if (d->cluster)
		cluster_resolve_node(d->cluster, node);
	/* The peer is asked for "[~uid/]name": its uid, its shared names. */
	peers_lookup(d->peers, ref.node ? node : NULL, ref.qname, c->uid,
		     on_peer_lookup, w);
	return 0;
}
