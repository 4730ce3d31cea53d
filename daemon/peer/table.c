/* SPDX-License-Identifier: Apache-2.0 */
/*
 * table.c - the peer table: one record per other xferd, known by its
 * instance id or, before a handshake told us who answers there, only by
 * an address.  Records are found by id, node name, id prefix or address,
 * merged when an address turns out to be a known id, and replaced when a
 * restarted xferd (a new instance) answers where the old one was.  Also
 * the folder's life cycle (peers_create/start/reload/destroy), what
 * xferctl shows (peers_foreach), and the notices of the progress thread
 * about links (peers_on_notice).
 *
 * Main thread only, no locks.  peer.stats is written by the progress
 * thread (single writer) and read here with relaxed loads: counters for
 * display, no ordering needed.
 *
 * The table is a list: it holds the configured peers and the owners of
 * imported tokens, a handful in practice; MAX_PEERS bounds it against
 * tokens and handshakes from anyone, and a full table forgets idle
 * records that are not known peers (connect.c: known records are the
 * ones xferd dials without a cluster key).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/token_codec.h"
#include "engine/progress.h"
#include "core/log.h"
#include "peer/peer_int.h"

static const char *const state_names[] = {
	[PEER_DOWN] = "down", [PEER_CONNECTING] = "connecting",
	[PEER_UP] = "up",
};

static void id_hex(const uint8_t *id, char out[9])
{
	snprintf(out, 9, "%02x%02x%02x%02x", id[0], id[1], id[2], id[3]);
}

const char *peer_log_name(const struct peer *pe)
{
	static char hex[9];

	if (pe->node_name[0])
		return pe->node_name;
	id_hex(pe->id, hex);   /* main thread only: one buffer will do */
	return hex;
}

const char *peer_label(const struct peer *pe, char *buf, size_t len)
{
	char hex[9];

	if (pe->id_known)
		id_hex(pe->id, hex);
	else
		snprintf(hex, sizeof(hex), "?");
	snprintf(buf, len, "%s (%s)", pe->node_name[0] ? pe->node_name : "?",
		 hex);
	return buf;
}

/* --- finding, creating, merging records --- */

struct peer *peer_by_id(struct peers *ps, const uint8_t *id)
{
	for (struct peer *pe = ps->peers; pe; pe = pe->next)
		if (pe->id_known && memcmp(pe->id, id, LINK_ID_LEN) == 0)
			return pe;
	return NULL;
}

struct peer *peer_by_name(struct peers *ps, const char *name)
{
	for (struct peer *pe = ps->peers; pe; pe = pe->next)
		if (strcmp(pe->node_name, name) == 0)
			return pe;
	return NULL;
}

static struct peer *peer_by_addr(struct peers *ps, const struct netaddr *a,
				 uint16_t port)
{
	for (struct peer *pe = ps->peers; pe; pe = pe->next)
		for (size_t i = 0; i < pe->naddrs; i++)
			if (pe->ports[i] == port && pe->addrs[i].family == a->family &&
			    memcmp(pe->addrs[i].ip, a->ip, 16) == 0)
				return pe;
	return NULL;
}

/* A record nobody needs: down, no connect, nothing waiting on it, and
 * not a known peer (tokens must not push those out). */
static bool peer_idle(const struct peer *pe)
{
	return pe->state == PEER_DOWN && !pe->conn && !pe->known &&
	       TAILQ_EMPTY(&pe->waiting);
}

struct peer *peer_new(struct peers *ps)
{
	/* Records come from tokens, addresses and handshakes of anyone:
	 * bound them, forgetting idle ones first. */
	if (ps->npeers >= MAX_PEERS) {
		for (struct peer **pp = &ps->peers; *pp;) {
			struct peer *pe = *pp;
			if (!peer_idle(pe)) {
				pp = &pe->next;
				continue;
			}
			*pp = pe->next;
			free(pe);
			ps->npeers--;
		}
		if (ps->npeers >= MAX_PEERS)
			return NULL;
	}
	struct peer *pe = calloc(1, sizeof(*pe));

	if (!pe)
		return NULL;
	TAILQ_INIT(&pe->waiting);
	pe->next = ps->peers;
	ps->peers = pe;
	ps->npeers++;
	return pe;
}

void peer_merge(struct peers *ps, struct peer *keep, struct peer *gone)
{
	struct request *r;

	keep->known |= gone->known;
	while ((r = TAILQ_FIRST(&gone->waiting))) {
		TAILQ_REMOVE(&gone->waiting, r, q);
		r->peer = keep;
		TAILQ_INSERT_TAIL(&keep->waiting, r, q);
	}
	TAILQ_FOREACH(r, &ps->inflight, q)
		if (r->peer == gone)
			r->peer = keep;
	if (gone->conn) {
		/* The caller moved the connection it handles off `gone`. */
		gone->conn->peer = NULL;
		conn_free(gone->conn);
	}
	for (struct peer **pp = &ps->peers; *pp; pp = &(*pp)->next)
		if (*pp == gone) {
			*pp = gone->next;
			break;
		}
	ps->npeers--;
	free(gone);
}

void peer_drop_own_conn(struct peer *pe, struct conn *keep)
{
	struct conn *old = pe->conn;

	if (!old || old == keep)
		return;
	pe->conn = NULL;
	old->peer = NULL;
	conn_free(old);
}

/*
 * An xferd restarted: a new instance answers where `old` was.  Requests
 * that name a node or an address move to the new instance; those tied to
 * the old one (token checks, and the operations of its tokens) fail with
 * -ESTALE.
 */
struct peer *peer_replaced(struct peers *ps, struct peer *old,
			   const uint8_t *id)
{
	struct peer *pe = peer_by_id(ps, id);
	char hex[9];

	if (!pe && !(pe = peer_new(ps)))
		return NULL;
	memcpy(pe->id, id, LINK_ID_LEN);
	pe->id_known = true;
	pe->known |= old->known;
	if (pe->state == PEER_DOWN)
		pe->state = PEER_CONNECTING;
	memcpy(pe->addrs, old->addrs, sizeof(pe->addrs));
	memcpy(pe->ports, old->ports, sizeof(pe->ports));
	pe->naddrs = old->naddrs;
	snprintf(pe->address, sizeof(pe->address), "%s", old->address);
	snprintf(pe->why, sizeof(pe->why), "%s", old->why);
	for (struct request *r = TAILQ_FIRST(&old->waiting), *next; r;
	     r = next) {
		next = TAILQ_NEXT(r, q);
		if (r->kind == REQ_CHECK) {
			request_end(r, -ESTALE, NULL, 0, 0);
			continue;
		}
		TAILQ_REMOVE(&old->waiting, r, q);
		r->peer = pe;
		TAILQ_INSERT_TAIL(&pe->waiting, r, q);
	}
	id_hex(id, hex);
	old->conn = NULL;
	old->node_name[0] = '\0';  /* its name now means the new one */
	old->state = PEER_DOWN;
	snprintf(old->last_error, sizeof(old->last_error),
		 "replaced by instance %s", hex);
	progress_link_close(ps->ctx.progress, old->id, -ESTALE,
			    "that xferd was replaced");
	return pe;
}

struct peer *peer_own_attempt_to(struct peers *ps, const struct addr_set *a)
{
	for (struct peer *pe = ps->peers; pe; pe = pe->next) {
		if (pe->id_known || !pe->conn)
			continue;
		for (size_t i = 0; i < pe->naddrs; i++)
			for (size_t j = 0; j < a->n; j++)
				if (pe->ports[i] == a->ports[j] &&
				    pe->addrs[i].family == a->addrs[j].family &&
				    memcmp(pe->addrs[i].ip, a->addrs[j].ip, 16) == 0)
					return pe;
	}
	return NULL;
}

struct peer *peer_for(struct peers *ps, const char *target)
{
	char host[CONFIG_HOST_MAX];
	uint16_t port;
	struct netaddr na;
	struct peer *pe = peer_by_name(ps, target);

	if (pe)
		return pe;
	size_t n = strlen(target);
	if (n >= 4 && n <= 32) {
		for (pe = ps->peers; pe; pe = pe->next) {
			char hex[33];
			for (int i = 0; i < 16; i++)
				snprintf(hex + 2 * i, 3, "%02x", pe->id[i]);
			if (pe->id_known && strncmp(hex, target, n) == 0)
				return pe;
		}
	}
	if (config_split_hostport(target, host, &port, CONFIG_DEFAULT_PORT) ||
	    netaddr_parse(host, &na))
		return NULL;
	pe = peer_by_addr(ps, &na, port);
	if (pe)
		return pe;
	pe = peer_new(ps);
	if (!pe)
		return NULL;
	na.prefix_len = na.family == AF_INET ? 32 : 128;
	pe->addrs[0] = na;
	pe->ports[0] = port;
	pe->naddrs = 1;
	return pe;
}

/* --- addresses of a record --- */

void peer_addrs_from_pb(struct addr_set *out, Xfer__Token__Address **a,
			size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k < NETADDR_MAX; i++) {
		struct netaddr na = { 0 };
		if (a[i]->ip.len == 4)
			na.family = AF_INET;
		else if (a[i]->ip.len == 16)
			na.family = AF_INET6;
		else
			continue;
		unsigned max = a[i]->ip.len * 8;
		if (a[i]->prefix_len > max || a[i]->port == 0 ||
		    a[i]->port > 65535)
			continue;
		memcpy(na.ip, a[i]->ip.data, a[i]->ip.len);
		na.prefix_len = a[i]->prefix_len;
		out->addrs[k] = na;
		out->ports[k] = (uint16_t)a[i]->port;
		k++;
	}
	out->n = k;
}

void peer_set_addrs(struct peer *pe, const struct addr_set *a)
{
	if (a->n == 0)
		return;  /* keep what we knew */
	memcpy(pe->addrs, a->addrs, sizeof(pe->addrs));
	memcpy(pe->ports, a->ports, sizeof(pe->ports));
	pe->naddrs = a->n;
}

void peer_addrs_from_token(struct peer *pe, const struct token *t)
{
	size_t k = 0;

	/* A known peer is reached where the configuration, etcd or its own
	 * handshake says: a token (anyone's) must not redirect it. */
	if (pe->known && pe->naddrs)
		return;
	for (size_t i = 0; i < t->naddrs && k < NETADDR_MAX; i++) {
		const struct token_addr *a = &t->addrs[i];
		if (!token_addr_valid(a) || a->port == 0)
			continue;
		pe->addrs[k] = (struct netaddr){
			.family = a->ip_len == 4 ? AF_INET : AF_INET6,
			.prefix_len = a->prefix_len,
		};
		memcpy(pe->addrs[k].ip, a->ip, a->ip_len);
		pe->ports[k] = a->port;
		k++;
	}
	if (k)
		pe->naddrs = k;
	/* Only addresses, never who they are: that comes with a handshake. */
	if (t->node_name[0] && !pe->node_name[0])
		snprintf(pe->node_name, sizeof(pe->node_name), "%s",
			 t->node_name);
}

/* --- what the progress thread says about links --- */

void peers_on_notice(const struct net_notice *n, void *arg)
{
	struct peers *ps = arg;
	struct peer *pe;

	switch (n->kind) {
	case NET_NEED_PEER:
		if (peer_retired(ps, n->id)) {
			progress_link_close(ps->ctx.progress, n->id, -ESTALE,
					    "that xferd's node restarted");
			return;
		}
		pe = peer_by_id(ps, n->id);
		if (!pe) {
			pe = peer_new(ps);
			if (!pe) {
				progress_link_close(ps->ctx.progress, n->id,
						    -ENOMEM, "out of memory");
				return;
			}
			memcpy(pe->id, n->id, LINK_ID_LEN);
			pe->id_known = true;
		}
		if (pe->state == PEER_UP) {
			/* The link came up after the progress thread asked. */
			return;
		}
		peer_addrs_from_token(pe, &n->tok);
		connect_peer(ps, pe);
		break;
	case NET_LINK_DOWN:
		pe = peer_by_id(ps, n->id);
		/* A link that was replaced says so too: only the current
		 * one's end means the peer is down. */
		if (!pe || pe->state != PEER_UP || n->gen != pe->link_gen)
			break;
		pe->state = PEER_DOWN;
		snprintf(pe->last_error, sizeof(pe->last_error), "%s", n->why);
		log_info_f(&((struct log_fields){
				   .peer = peer_log_name(pe),
				   .err = n->err < 0 ? -n->err : n->err }),
			   "peer %s: link down: %s", peer_log_name(pe), n->why);
		request_link_down(ps, pe);
		break;
	case NET_CTL_FRAME:
		request_dispatch(ps, n->id, n->msg);
		break;
	}
}

/* --- life cycle --- */

int peers_create(const struct peers_ctx *ctx, struct peers **out)
{
	struct peers *ps = calloc(1, sizeof(*ps));
	char err[512];
	int rc;

	if (!ps)
		return -ENOMEM;
	ps->ctx = *ctx;
	for (size_t i = 0; i < PEERS_DIAL_UIDS; i++)
		ps->dial_rate[i].uid = -1;
	LIST_INIT(&ps->conns);
	TAILQ_INIT(&ps->inflight);
	TAILQ_INIT(&ps->unresolved);
	if (ctx->cfg->node_name[0])
		snprintf(ps->node_name, sizeof(ps->node_name), "%s",
			 ctx->cfg->node_name);
	else if (gethostname(ps->node_name, sizeof(ps->node_name) - 1))
		snprintf(ps->node_name, sizeof(ps->node_name), "localhost");
	if (ctx->cfg->cluster_key_file[0]) {
		rc = auth_key_load(ctx->cfg->cluster_key_file, &ps->key, err,
				   sizeof(err));
		if (rc) {
			log_warnx("cluster key: %s", err);
			free(ps);
			return rc;
		}
	}
	rc = listen_open(ps);
	if (rc) {
		auth_key_free(ps->key);
		free(ps);
		return rc;
	}
	*out = ps;
	return 0;
}

/* Configured peers are connected at start, so that their node names are
 * known for "node/name" lookups. */
void peers_start(struct peers *ps)
{
	const struct xferd_config *cfg = ps->ctx.cfg;

	for (uint32_t i = 0; i < cfg->npeers; i++) {
		struct peer *pe = peer_for(ps, cfg->peers[i]);
		if (!pe)
			continue;
		pe->known = true;
		connect_peer(ps, pe);
	}
}

void peers_reload(struct peers *ps)
{
	char err[512];

	if (!ps)
		return;
	if (ps->ctx.cfg->cluster_key_file[0]) {
		struct auth_key *key;
		if (auth_key_load(ps->ctx.cfg->cluster_key_file, &key, err,
				  sizeof(err)) == 0) {
			auth_key_free(ps->key);
			ps->key = key;
		} else {
			log_warnx("cluster key not reloaded: %s", err);
		}
	} else {
		auth_key_free(ps->key);
		ps->key = NULL;
	}
	peers_start(ps);
}

void peers_destroy(struct peers *ps)
{
	struct conn *c;

	if (!ps)
		return;
	request_cancel_all(ps);
	while ((c = LIST_FIRST(&ps->conns))) {
		c->peer = NULL;
		conn_free(c);
	}
	for (struct peer *pe = ps->peers, *next; pe; pe = next) {
		next = pe->next;
		free(pe);
	}
	listen_close(ps);
	auth_key_free(ps->key);
	free(ps);
}

/* --- what others see of the table --- */

size_t peers_advertised(const struct peers *ps, const struct netaddr **addrs,
			uint16_t *port)
{
	*addrs = ps->addrs;
	*port = ps->port;
	return ps->listener ? ps->naddrs : 0;
}

const char *peers_node_name(const struct peers *ps)
{
	return ps->node_name;
}

void peers_foreach(struct peers *ps,
		   void (*fn)(const struct peer_view *v, void *arg), void *arg)
{
	for (struct peer *pe = ps->peers; pe; pe = pe->next) {
		if (!pe->id_known)
			continue;
		struct peer_view v = {
			.node_name = pe->node_name,
			.addrs = pe->addrs,
			.naddrs = pe->naddrs,
			.address = pe->address,
			.why = pe->why,
			.state = state_names[pe->state],
			.initiated = pe->initiated,
			.rtt_ns = atomic_load_explicit(&pe->stats.rtt_ns,
						       memory_order_relaxed),
			.lane_up = atomic_load_explicit(&pe->stats.lane_up,
							memory_order_relaxed),
			.lane_ops = atomic_load_explicit(&pe->stats.lane_ops,
							 memory_order_relaxed),
			.bytes_tx = atomic_load_explicit(&pe->stats.bytes_tx,
							 memory_order_relaxed),
			.bytes_rx = atomic_load_explicit(&pe->stats.bytes_rx,
							 memory_order_relaxed),
			.ops = atomic_load_explicit(&pe->stats.ops,
						    memory_order_relaxed),
			.errors = atomic_load_explicit(&pe->stats.errors,
						       memory_order_relaxed),
			.up_ms = pe->state == PEER_UP
					 ? xferd_ms_since(&pe->up_since) : 0,
			.last_error = pe->last_error,
			.links_up = pe->links_up,
		};
		memcpy(v.instance_id, pe->id, LINK_ID_LEN);
		fn(&v, arg);
	}
}
