/*
 * peer.c - the other xferds, on the main thread: the TCP listener,
 * connecting (address chosen by subnet), the handshake with optional
 * cluster authentication, duplicate links, and the control requests
 * (lookup, token check, ping) that ride on the links once they are up.
 *
 * A link that finished its handshake is handed to the progress thread
 * (progress_link_attach), which owns it from then on; what it reports
 * back (link down, control frames, operations waiting for a peer) comes
 * in through peers_on_notice().
 *
 * Simultaneous connects: both xferds may connect to each other at once.
 * The link initiated by the lower instance id survives: an acceptor that
 * has its own connect to the same peer in flight keeps whichever of the
 * two that rule picks and closes the other, and both sides apply the same
 * rule, so exactly one link remains.
 *
 * This file is over 800 lines: connection set-up and the requests that
 * wait for it share one peer record and one state machine.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "peer/auth.h"
#include "log.h"
#include "meta/names.h"
#include "peer/peer.h"
#include "peer.pb-c.h"
#include "engine/progress.h"
#include "transport/rdma.h"
#include "transport/rdma_dev.h"
#include "mem/region.h"
#include "transport/link.h"
#include "common/wire.h"
#include "xferd.h"

#define NAME_MAX_LEN CONFIG_HOST_MAX
#define MAX_PEERS    4096           /* peer records kept */
#define BACKOFF_MIN_NS (100ull * 1000000)
#define BACKOFF_MAX_NS (2000ull * 1000000)

enum peer_state { PEER_DOWN, PEER_CONNECTING, PEER_UP };

static const char *const state_names[] = {
	[PEER_DOWN] = "down", [PEER_CONNECTING] = "connecting",
	[PEER_UP] = "up",
};

struct peer;
struct request;
TAILQ_HEAD(request_list, request);

/* Where an xferd can be reached, as it advertised. */
struct addr_set {
	struct netaddr addrs[NETADDR_MAX];
	uint16_t ports[NETADDR_MAX];
	size_t n;
};

/* A TCP connection while its handshake runs. */
struct conn {
	struct peers *ps;
	struct peer *peer;            /* initiator: whom we called */
	struct bufferevent *bev;
	bool initiator;
	int step;                     /* messages seen */
	uint8_t challenge[AUTH_CHALLENGE_LEN];
	uint8_t their_id[LINK_ID_LEN];
	uint8_t their_challenge[AUTH_CHALLENGE_LEN];
	/* An acceptor keeps what Hello said until the proof checked out. */
	char their_name[NAME_MAX_LEN];
	struct addr_set their_addrs;
	/* Its RDMA rails (Hello or Welcome), for the progress thread. */
	struct rdma_peer_rail their_rails[RDMA_PEER_RAILS];
	size_t their_nrails;
	struct event *timeout;
	size_t attempt;               /* which of the peer's addresses */
	char remote[80];
	LIST_ENTRY(conn) link;
};

struct peer {
	uint8_t id[LINK_ID_LEN];
	bool id_known;                /* false: only an address so far */
	char node_name[NAME_MAX_LEN];
	struct netaddr addrs[NETADDR_MAX];
	uint16_t ports[NETADDR_MAX];
	size_t naddrs;
	enum peer_state state;
	struct conn *conn;            /* our outgoing connect, if any */
	bool initiated;               /* the up link is ours */
	char address[80];
	char why[160];
	char last_error[160];
	struct timespec up_since;
	struct link_stats stats;      /* written by the progress thread */
	uint64_t link_gen;            /* of the link last handed over */
	unsigned failures;            /* connects failed in a row */
	uint64_t retry_at_ns;         /* no new connect before (backoff) */
	struct request_list waiting;  /* requests to send once up */
	struct peer *next;
};

enum request_kind { REQ_LOOKUP, REQ_CHECK, REQ_PING };

struct request {
	struct peers *ps;
	enum request_kind kind;
	uint64_t id;
	struct peer *peer;
	uint8_t *msg;                 /* packed PeerMsg to send */
	size_t len;
	bool sent;
	struct event *timeout;
	struct fanout *fan;           /* a lookup asked of several peers */
	union {
		peers_lookup_cb lookup;
		peers_check_cb check;
		peers_ping_cb ping;
	} cb;
	void *arg;
	char who[NAME_MAX_LEN];
	/* A lookup at a node whose name no link has told us yet. */
	char node[NAME_MAX_LEN];
	char name[NAMES_NAME_MAX + 1];
	bool unresolved;
	TAILQ_ENTRY(request) q;       /* peer->waiting, ps->inflight or
				       * ps->unresolved */
};

/* One lookup sent to every configured peer: first token wins. */
struct fanout {
	peers_lookup_cb cb;
	void *arg;
	unsigned outstanding;
	int error;                    /* best error so far */
	bool done;
};

struct peers {
	struct xferd *d;
	char node_name[NAME_MAX_LEN];
	struct netaddr addrs[NETADDR_MAX];
	size_t naddrs;
	struct netaddr local[NETADDR_MAX]; /* all ours, to choose rails */
	size_t nlocal;
	uint16_t port;
	struct evconnlistener *listener;
	struct auth_key *key;
	struct peer *peers;
	size_t npeers;
	uint64_t next_link_gen;
	LIST_HEAD(, conn) conns;
	struct request_list inflight; /* sent, awaiting a reply */
	struct request_list unresolved; /* node name not known yet */
	uint64_t next_request;
};

static void conn_free(struct conn *c);
static void resolve_waiting(struct peers *ps);
static void request_end(struct request *r, int error, const void *data,
			size_t len, uint64_t rtt);
static void connect_peer(struct peers *ps, struct peer *pe);
static void connect_attempt(struct peers *ps, struct peer *pe, size_t attempt);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void id_hex(const uint8_t *id, char out[9])
{
	snprintf(out, 9, "%02x%02x%02x%02x", id[0], id[1], id[2], id[3]);
}

static const char *peer_label(const struct peer *pe, char *buf, size_t len)
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

/* --- the peer table --- */

static struct peer *peer_by_id(struct peers *ps, const uint8_t *id)
{
	for (struct peer *pe = ps->peers; pe; pe = pe->next)
		if (pe->id_known && memcmp(pe->id, id, LINK_ID_LEN) == 0)
			return pe;
	return NULL;
}

static struct peer *peer_by_name(struct peers *ps, const char *name)
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

/* A record nobody needs: down, no connect, nothing waiting on it. */
static bool peer_idle(const struct peer *pe)
{
	return pe->state == PEER_DOWN && !pe->conn &&
	       TAILQ_EMPTY(&pe->waiting);
}

static struct peer *peer_new(struct peers *ps)
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

/* Two records turned out to be one xferd (an address, then its id). */
static void peer_merge(struct peers *ps, struct peer *keep, struct peer *gone)
{
	struct request *r;

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

/* Drop pe's own connect quietly (another connection serves it). */
static void drop_own_conn(struct peer *pe, struct conn *keep)
{
	struct conn *old = pe->conn;

	if (!old || old == keep)
		return;
	pe->conn = NULL;
	old->peer = NULL;
	conn_free(old);
}

/* Addresses as a peer advertised them (handshake or token). */
static void set_addrs_pb(struct addr_set *out, Xfer__Token__Address **a,
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

static void peer_set_addrs(struct peer *pe, const struct addr_set *a)
{
	if (a->n == 0)
		return;  /* keep what we knew */
	memcpy(pe->addrs, a->addrs, sizeof(pe->addrs));
	memcpy(pe->ports, a->ports, sizeof(pe->ports));
	pe->naddrs = a->n;
}

static void set_addrs_tok(struct peer *pe, const struct token *t)
{
	size_t k = 0;

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

/* Our addresses in protobuf form, for Hello and Welcome. */
struct pb_addrs {
	Xfer__Token__Address a[NETADDR_MAX];
	Xfer__Token__Address *ptr[NETADDR_MAX];
	size_t n;
};

static void our_addrs(const struct peers *ps, struct pb_addrs *out)
{
	out->n = ps->naddrs;
	for (size_t i = 0; i < ps->naddrs; i++) {
		const struct netaddr *na = &ps->addrs[i];
		xfer__token__address__init(&out->a[i]);
		out->a[i].ip.data = (uint8_t *)na->ip;
		out->a[i].ip.len = na->family == AF_INET ? 4 : 16;
		out->a[i].prefix_len = na->prefix_len;
		out->a[i].port = ps->port;
		out->a[i].ifname = (char *)na->ifname;
		out->ptr[i] = &out->a[i];
	}
}

/* Our RDMA rails in protobuf form, for Hello and Welcome. */
struct pb_rails {
	Xfer__Peer__Rail r[RDMA_RAIL_MAX];
	Xfer__Peer__Rail *ptr[RDMA_RAIL_MAX];
	struct rdma_rail_addr a[RDMA_RAIL_MAX];
	size_t n;
};

static void our_rails(struct pb_rails *out)
{
	int n = rdma_dev_rail_count();

	out->n = 0;
	for (int i = 0; i < n && i < RDMA_RAIL_MAX; i++) {
		struct rdma_rail_addr *a = &out->a[out->n];
		Xfer__Peer__Rail *r = &out->r[out->n];
		if (rdma_dev_rail_addr(i, a))
			continue;
		xfer__peer__rail__init(r);
		r->index = (uint32_t)i;
		r->device = (uint32_t)a->dev;
		r->gid.data = a->gid;
		r->gid.len = 16;
		r->lid = a->lid;
		r->mtu = (uint32_t)a->mtu;
		r->infiniband = a->infiniband;
		r->ip.data = a->addr.ip;
		r->ip.len = a->addr.family == AF_INET ? 4 : 16;
		r->prefix_len = a->addr.prefix_len;
		out->ptr[out->n++] = r;
	}
}

/* A peer's rails: the well-formed ones (others are left out, logged). */
static void set_rails_pb(struct conn *c, Xfer__Peer__Rail *const *in,
			 size_t n)
{
	c->their_nrails = 0;
	for (size_t i = 0; i < n && c->their_nrails < RDMA_PEER_RAILS; i++) {
		const Xfer__Peer__Rail *r = in[i];
		struct rdma_peer_rail *o = &c->their_rails[c->their_nrails];
		if (r->gid.len != 16 || (r->ip.len != 4 && r->ip.len != 16) ||
		    r->prefix_len > r->ip.len * 8u || r->mtu < 1 ||
		    r->mtu > 5 || r->lid > 0xffff) {
			log_warnx("peer %s: rail %u is malformed; left out",
				  c->remote, r->index);
			continue;
		}
		*o = (struct rdma_peer_rail){
			.index = r->index,
			.device = r->device,
			.lid = (uint16_t)r->lid,
			.mtu = (int)r->mtu,
			.infiniband = r->infiniband,
			.addr = {
				.family = r->ip.len == 4 ? AF_INET : AF_INET6,
				.prefix_len = r->prefix_len,
			},
		};
		memcpy(o->gid, r->gid.data, 16);
		memcpy(o->addr.ip, r->ip.data, r->ip.len);
		c->their_nrails++;
	}
}

/* --- frames on a handshaking connection --- */

static int conn_send(struct conn *c, Xfer__Peer__PeerMsg *m)
{
	uint8_t buf[8 + 4096];

	m->proto_version = XFER_PROTO_VERSION;
	if (protobuf_c_message_get_packed_size(&m->base) > sizeof(buf) - 8)
		return -EMSGSIZE;
	int n = link_frame_header(&m->base, 0, buf);
	if (n < 0)
		return n;
	return bufferevent_write(c->bev, buf, (size_t)n) ? -ENOMEM : 0;
}

/*
 * Push what the bufferevent still holds to the socket now: the
 * connection is about to be closed or handed over, and a bufferevent
 * that is freed drops its output.  (libevent keeps the front of a socket
 * bufferevent's output for itself, so the bytes are copied out and sent
 * here; the bufferevent is freed right after and never sends them.)  A
 * few hundred bytes into a socket buffer do not block.
 */
static int conn_write_out(struct conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	struct evbuffer_iovec v[8];
	int fd = bufferevent_getfd(c->bev);
	int n = evbuffer_peek(out, -1, NULL, v, 8);

	if (n > 8)
		return -EMSGSIZE;
	for (int i = 0; i < n; i++) {
		const uint8_t *p = v[i].iov_base;
		size_t left = v[i].iov_len;
		while (left) {
			ssize_t k = send(fd, p, left, MSG_NOSIGNAL);
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0)
				return -errno;
			p += k;
			left -= (size_t)k;
		}
	}
	return 0;
}

static void conn_error(struct conn *c, const char *why)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Error e = XFER__PEER__ERROR__INIT;

	e.code = -EPERM;
	e.reason = (char *)why;
	m.body_case = XFER__PEER__PEER_MSG__BODY_ERROR;
	m.error = &e;
	if (conn_send(c, &m) == 0)
		conn_write_out(c);
}

/* Fail what waits for pe and mark it down. */
static void peer_failed_as(struct peers *ps, struct peer *pe, int err,
			   const char *why, bool connect_failed)
{
	char label[128];
	struct request *r;

	pe->state = PEER_DOWN;
	snprintf(pe->last_error, sizeof(pe->last_error), "%s", why);
	/* Back off: a dead peer must not be hammered with connects. */
	if (connect_failed) {
		uint64_t b = BACKOFF_MIN_NS << (pe->failures < 5 ? pe->failures : 5);
		pe->retry_at_ns = now_ns() + (b < BACKOFF_MAX_NS ? b
							   : BACKOFF_MAX_NS);
		pe->failures++;
	}
	if (pe->failures <= 1 && connect_failed)
		log_info("peer %s: %s", peer_label(pe, label, sizeof(label)),
			 why);
	else
		log_debug("peer %s: %s (again)",
			  peer_label(pe, label, sizeof(label)), why);
	while ((r = TAILQ_FIRST(&pe->waiting)))
		request_end(r, err, NULL, 0, 0);
	/* Operations of clients waiting in the progress thread, too. */
	if (pe->id_known)
		progress_link_close(ps->d->progress, pe->id, err, why);
	resolve_waiting(ps);
}

static void peer_failed(struct peers *ps, struct peer *pe, int err,
			const char *why)
{
	peer_failed_as(ps, pe, err, why, true);
}

static void conn_free(struct conn *c)
{
	if (!c)
		return;
	if (c->peer && c->peer->conn == c)
		c->peer->conn = NULL;
	LIST_REMOVE(c, link);
	if (c->timeout)
		event_free(c->timeout);
	if (c->bev)
		bufferevent_free(c->bev);  /* closes the socket */
	free(c);
}

/* Requests that waited for pe's link go out on it now. */
static void send_waiting(struct peers *ps, struct peer *pe)
{
	struct request *r;

	while ((r = TAILQ_FIRST(&pe->waiting))) {
		TAILQ_REMOVE(&pe->waiting, r, q);
		progress_link_send(ps->d->progress, pe->id, r->msg, r->len);
		r->sent = true;
		TAILQ_INSERT_TAIL(&ps->inflight, r, q);
	}
}

/* The handshake is done: the progress thread takes the socket over. */
static void conn_established(struct conn *c, struct peer *pe)
{
	struct peers *ps = c->ps;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t left = evbuffer_get_length(in);
	uint8_t *pending = left ? malloc(left) : NULL;
	char label[128];

	if (left && !pending) {
		conn_free(c);
		peer_failed(ps, pe, -ENOMEM, "out of memory");
		return;
	}
	evbuffer_remove(in, pending, left);
	int fd = bufferevent_getfd(c->bev);
	/* Hand the descriptor over: the bufferevent must not close it. */
	int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0) {
		free(pending);
		conn_free(c);
		peer_failed(ps, pe, -errno, "cannot hand the link over");
		return;
	}
	/* Our own connect lost the race: drop it quietly. */
	drop_own_conn(pe, c);
	pe->initiated = c->initiator;
	snprintf(pe->address, sizeof(pe->address), "%s", c->remote);
	struct rdma_peer_rail rails[RDMA_PEER_RAILS];
	size_t nrails = c->their_nrails;
	memcpy(rails, c->their_rails, nrails * sizeof(rails[0]));
	conn_free(c);
	pe->state = PEER_UP;
	pe->failures = 0;
	pe->last_error[0] = '\0';
	clock_gettime(CLOCK_MONOTONIC, &pe->up_since);
	pe->link_gen = ++ps->next_link_gen;
	progress_link_attach(ps->d->progress, dup_fd, pe->id, pe->link_gen,
			     &pe->stats, pending, left, pe->node_name, rails,
			     nrails);
	free(pending);
	log_info("peer %s: link up via %s (%s, %s)",
		 peer_label(pe, label, sizeof(label)), pe->address,
		 pe->initiated ? "we connected" : "it connected", pe->why);

	send_waiting(ps, pe);
	resolve_waiting(ps);
}

static bool auth_ok(struct peers *ps, bool their_auth, struct conn *c)
{
	if (their_auth == (ps->key != NULL))
		return true;
	const char *why = ps->key
		? "cluster authentication required here, the peer has no key"
		: "the peer requires cluster authentication, no key here";
	log_warnx("peer %s: refused: %s", c->remote, why);
	conn_error(c, why);
	return false;
}

/*
 * An xferd restarted: a new instance answers where `old` was.  Requests
 * that name a node or an address move to the new instance; those tied to
 * the old one (token checks, and the operations of its tokens) fail with
 * -ESTALE.  Returns the new instance's record.
 */
static struct peer *peer_replaced(struct peers *ps, struct peer *old,
				  const uint8_t *id)
{
	struct peer *pe = peer_by_id(ps, id);
	char hex[9];

	if (!pe && !(pe = peer_new(ps)))
		return NULL;
	memcpy(pe->id, id, LINK_ID_LEN);
	pe->id_known = true;
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
	progress_link_close(ps->d->progress, old->id, -ESTALE,
			    "that xferd was replaced");
	return pe;
}

/* Acceptor: Hello arrived. */
static int on_hello(struct conn *c, const Xfer__Peer__Hello *h)
{
	struct peers *ps = c->ps;
	char label[128];

	if (h->instance_id.len != LINK_ID_LEN ||
	    h->challenge.len != AUTH_CHALLENGE_LEN)
		return -EPROTO;
	if (!auth_ok(ps, h->auth, c))
		return -EPERM;
	if (memcmp(h->instance_id.data, ps->d->instance_id, LINK_ID_LEN) == 0) {
		conn_error(c, "connected to itself");
		return -ELOOP;
	}
	memcpy(c->their_id, h->instance_id.data, LINK_ID_LEN);
	memcpy(c->their_challenge, h->challenge.data, AUTH_CHALLENGE_LEN);

	struct peer *pe = peer_by_id(ps, c->their_id);
	if (pe && pe->conn && pe->state == PEER_CONNECTING &&
	    memcmp(ps->d->instance_id, c->their_id, LINK_ID_LEN) < 0) {
		/* Both connected at once and ours (lower id) wins. */
		log_debug("peer %s: duplicate link refused (ours wins)",
			  peer_label(pe, label, sizeof(label)));
		conn_error(c, "duplicate link");
		return -EEXIST;
	}
	if (pe && pe->conn && pe->state == PEER_CONNECTING) {
		/* Both connected at once and theirs (lower id) wins: our
		 * connect ends quietly; this one will carry the link. */
		drop_own_conn(pe, NULL);
		pe->state = PEER_DOWN;
	}
	/* What it says about itself counts only once its proof checked
	 * out (on_ready): an impostor must not rename or readdress a peer. */
	snprintf(c->their_name, sizeof(c->their_name), "%s",
		 h->node_name ? h->node_name : "");
	set_addrs_pb(&c->their_addrs, h->addresses, h->n_addresses);
	set_rails_pb(c, h->rails, h->n_rails);

	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Welcome w = XFER__PEER__WELCOME__INIT;
	struct pb_addrs addrs;
	struct pb_rails rails;
	uint8_t proof[AUTH_PROOF_LEN];
	our_addrs(ps, &addrs);
	our_rails(&rails);
	w.n_rails = rails.n;
	w.rails = rails.ptr;
	w.instance_id.data = ps->d->instance_id;
	w.instance_id.len = LINK_ID_LEN;
	w.node_name = ps->node_name;
	w.n_addresses = addrs.n;
	w.addresses = addrs.ptr;
	w.challenge.data = c->challenge;
	w.challenge.len = AUTH_CHALLENGE_LEN;
	w.auth = ps->key != NULL;
	if (ps->key) {
		auth_proof(ps->key, AUTH_ACCEPTOR, c->their_challenge,
			   ps->d->instance_id, c->their_id, proof);
		w.proof.data = proof;
		w.proof.len = AUTH_PROOF_LEN;
	}
	m.body_case = XFER__PEER__PEER_MSG__BODY_WELCOME;
	m.welcome = &w;
	return conn_send(c, &m);
}

/* Initiator: Welcome arrived. */
static int on_welcome(struct conn *c, const Xfer__Peer__Welcome *w)
{
	struct peers *ps = c->ps;
	struct peer *pe = c->peer;

	if (!pe)
		return -ECANCELED;
	if (w->instance_id.len != LINK_ID_LEN ||
	    w->challenge.len != AUTH_CHALLENGE_LEN)
		return -EPROTO;
	if (!auth_ok(ps, w->auth, c))
		return -EPERM;
	if (ps->key && !auth_verify(ps->key, AUTH_ACCEPTOR, c->challenge,
				    w->instance_id.data, ps->d->instance_id,
				    w->proof.data, w->proof.len)) {
		log_warnx("peer %s: refused: its cluster key differs from ours",
			  c->remote);
		conn_error(c, "authentication failed: cluster keys differ");
		return -EPERM;
	}
	if (memcmp(w->instance_id.data, ps->d->instance_id, LINK_ID_LEN) == 0) {
		conn_error(c, "connected to itself");
		return -ELOOP;
	}
	if (pe->id_known &&
	    memcmp(pe->id, w->instance_id.data, LINK_ID_LEN) != 0) {
		/* Another instance answers there: the old one is gone. */
		pe = peer_replaced(ps, pe, w->instance_id.data);
		if (!pe)
			return -ENOMEM;
		c->peer = pe;
		if (pe->state != PEER_UP)
			pe->conn = c;
	}
	if (!pe->id_known) {
		struct peer *known = peer_by_id(ps, w->instance_id.data);
		if (known) {
			/* We knew it by id already: one record.  c moves to
			 * it first, so that the merge does not free c. */
			pe->conn = NULL;
			peer_merge(ps, known, pe);
			drop_own_conn(known, c);
			if (known->state != PEER_UP)
				known->conn = c;
			c->peer = known;
			pe = known;
		} else {
			memcpy(pe->id, w->instance_id.data, LINK_ID_LEN);
			pe->id_known = true;
		}
	}
	if (pe->state == PEER_UP) {
		/* Linked meanwhile (its connect to us won): use that link. */
		send_waiting(ps, pe);
		return -EEXIST;
	}
	snprintf(pe->node_name, sizeof(pe->node_name), "%s",
		 w->node_name ? w->node_name : "");
	struct addr_set as;
	set_addrs_pb(&as, w->addresses, w->n_addresses);
	peer_set_addrs(pe, &as);
	set_rails_pb(c, w->rails, w->n_rails);

	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Ready r = XFER__PEER__READY__INIT;
	uint8_t proof[AUTH_PROOF_LEN];
	if (ps->key) {
		auth_proof(ps->key, AUTH_INITIATOR, w->challenge.data,
			   ps->d->instance_id, pe->id, proof);
		r.proof.data = proof;
		r.proof.len = AUTH_PROOF_LEN;
	}
	m.body_case = XFER__PEER__PEER_MSG__BODY_READY;
	m.ready = &r;
	return conn_send(c, &m);
}

/* A record known only by address whose connect to one of addrs is in
 * flight: our side of a simultaneous connect, before its Welcome. */
static struct peer *own_attempt_to(struct peers *ps, const struct addr_set *a)
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

/* Acceptor: Ready arrived; answer Established and hand over. */
static int on_ready(struct conn *c, const Xfer__Peer__Ready *r)
{
	struct peers *ps = c->ps;

	if (ps->key && !auth_verify(ps->key, AUTH_INITIATOR, c->challenge,
				    c->their_id, ps->d->instance_id,
				    r->proof.data, r->proof.len)) {
		log_warnx("peer %s: refused: its cluster key differs from ours",
			  c->remote);
		conn_error(c, "authentication failed: cluster keys differ");
		return -EPERM;
	}
	struct peer *pe = peer_by_id(ps, c->their_id);
	struct peer *mine = pe ? pe : own_attempt_to(ps, &c->their_addrs);
	/*
	 * Both connected at once: the link initiated by the lower instance
	 * id survives, on both sides.  Ours (in flight or up) wins here if
	 * our id is the lower one; then this one is refused.
	 */
	if (mine && (mine->conn || (mine->state == PEER_UP && mine->initiated)) &&
	    memcmp(ps->d->instance_id, c->their_id, LINK_ID_LEN) < 0) {
		conn_error(c, "duplicate link");
		return -EEXIST;
	}
	if (!pe && mine) {
		/* Our connect to its address learns who answers there. */
		pe = mine;
		memcpy(pe->id, c->their_id, LINK_ID_LEN);
		pe->id_known = true;
	}
	if (!pe) {
		pe = peer_new(ps);
		if (!pe)
			return -ENOMEM;
		memcpy(pe->id, c->their_id, LINK_ID_LEN);
		pe->id_known = true;
	}
	snprintf(pe->node_name, sizeof(pe->node_name), "%s", c->their_name);
	peer_set_addrs(pe, &c->their_addrs);
	snprintf(pe->why, sizeof(pe->why), "it connected from %s", c->remote);
	c->peer = pe;
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Established e = XFER__PEER__ESTABLISHED__INIT;
	m.body_case = XFER__PEER__PEER_MSG__BODY_ESTABLISHED;
	m.established = &e;
	int err = conn_send(c, &m);
	if (!err)
		err = conn_write_out(c);
	if (err)
		return err;
	conn_established(c, c->peer);
	return 1;  /* c is gone */
}

/* Next handshake message; >0 when c was handed over (and is gone). */
static int conn_step(struct conn *c, const Xfer__Peer__PeerMsg *m)
{
	if (m->proto_version != XFER_PROTO_VERSION)
		return -EPROTO;
	if (m->body_case == XFER__PEER__PEER_MSG__BODY_ERROR) {
		const char *why = m->error->reason ? m->error->reason : "?";
		/* Lost a simultaneous connect: the other link will do. */
		if (strcmp(why, "duplicate link") == 0)
			return -EEXIST;
		log_warnx("peer %s refused the link: %s", c->remote, why);
		return -ECONNREFUSED;
	}
	int expect = c->initiator
		? (c->step == 0 ? XFER__PEER__PEER_MSG__BODY_WELCOME
				: XFER__PEER__PEER_MSG__BODY_ESTABLISHED)
		: (c->step == 0 ? XFER__PEER__PEER_MSG__BODY_HELLO
				: XFER__PEER__PEER_MSG__BODY_READY);
	if ((int)m->body_case != expect) {
		log_debug("peer %s: handshake step %d: got message %d, expected %d",
			  c->remote, c->step, (int)m->body_case, expect);
		return -EPROTO;
	}
	c->step++;
	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_HELLO:
		return on_hello(c, m->hello);
	case XFER__PEER__PEER_MSG__BODY_WELCOME:
		return on_welcome(c, m->welcome);
	case XFER__PEER__PEER_MSG__BODY_READY:
		return on_ready(c, m->ready);
	case XFER__PEER__PEER_MSG__BODY_ESTABLISHED:
		if (!c->peer)
			return -ECANCELED;
		conn_established(c, c->peer);
		return 1;
	default:
		return -EPROTO;
	}
}

static const char *conn_err_text(int err)
{
	switch (err) {
	case -EPROTO: return "handshake protocol error";
	case -EPERM: return "authentication failed";
	case -ECONNREFUSED: return "refused by the peer";
	case -ESTALE: return "a different xferd answers at that address";
	case -ELOOP: return "that address is this xferd";
	case -EEXIST: return "duplicate link";
	case -ETIMEDOUT: return "handshake timed out";
	default: return strerror(-err);
	}
}

/* The handshake failed: for our connect, the peer fails (or the next
 * address is tried); an accepted connection just closes. */
static void conn_failed(struct conn *c, int err)
{
	struct peers *ps = c->ps;
	struct peer *pe = c->peer;
	bool ours = c->initiator && pe && pe->conn == c;
	size_t next = c->attempt + 1;

	if (!c->initiator && err != -EEXIST)
		log_info("connection from %s closed: %s", c->remote,
			 conn_err_text(err));
	conn_free(c);
	if (!ours)
		return;
	/* Unreachable addresses: try the peer's next one. */
	if ((err == -ECONNREFUSED || err == -EHOSTUNREACH || err == -ENETUNREACH ||
	     err == -ETIMEDOUT) && next < pe->naddrs && pe->state != PEER_UP) {
		log_info("peer %s: %s, trying its next address", pe->address,
			 conn_err_text(err));
		pe->state = PEER_DOWN;
		pe->conn = NULL;
		connect_attempt(ps, pe, next);
		return;
	}
	if (pe->state != PEER_UP && err != -EEXIST)
		peer_failed(ps, pe, err == -EPERM ? -EACCES : err,
			    conn_err_text(err));
	else if (err == -EEXIST && pe->state == PEER_CONNECTING)
		pe->state = PEER_DOWN;  /* the other link is on its way */
}

static void on_conn_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (evbuffer_get_length(in) >= 8) {
		uint32_t hlen, plen;
		uint8_t prefix[8];
		evbuffer_copyout(in, prefix, 8);
		memcpy(&hlen, prefix, 4);
		memcpy(&plen, prefix + 4, 4);
		if (hlen == 0 || hlen > 4096 || plen) {
			log_debug("peer %s: bad handshake frame (%u, %u)",
				  c->remote, hlen, plen);
			conn_failed(c, -EPROTO);
			return;
		}
		if (evbuffer_get_length(in) < 8 + (size_t)hlen)
			return;
		evbuffer_drain(in, 8);
		Xfer__Peer__PeerMsg *m = xfer__peer__peer_msg__unpack(
			NULL, hlen, evbuffer_pullup(in, hlen));
		evbuffer_drain(in, hlen);
		int rc = m ? conn_step(c, m) : -EPROTO;
		if (rc == -EPROTO)
			log_debug("peer %s: handshake message %d refused (step %d)",
				  c->remote, m ? (int)m->body_case : -1, c->step);
		if (m)
			xfer__peer__peer_msg__free_unpacked(m, NULL);
		if (rc > 0)
			return;   /* handed over; c is gone */
		if (rc < 0) {
			conn_failed(c, rc);
			return;
		}
	}
}

static void on_conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	(void)bev;

	if (what & BEV_EVENT_CONNECTED) {
		/* Our connect went through: say hello. */
		struct peers *ps = c->ps;
		Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
		Xfer__Peer__Hello h = XFER__PEER__HELLO__INIT;
		struct pb_addrs addrs;
		struct pb_rails rails;
		int one = 1;
		setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY,
			   &one, sizeof(one));
		our_addrs(ps, &addrs);
		our_rails(&rails);
		h.n_rails = rails.n;
		h.rails = rails.ptr;
		h.instance_id.data = ps->d->instance_id;
		h.instance_id.len = LINK_ID_LEN;
		h.node_name = ps->node_name;
		h.n_addresses = addrs.n;
		h.addresses = addrs.ptr;
		h.challenge.data = c->challenge;
		h.challenge.len = AUTH_CHALLENGE_LEN;
		h.auth = ps->key != NULL;
		m.body_case = XFER__PEER__PEER_MSG__BODY_HELLO;
		m.hello = &h;
		if (conn_send(c, &m))
			conn_failed(c, -ENOMEM);
		return;
	}
	int err = -ECONNRESET;
	if (what & BEV_EVENT_ERROR) {
		int e = EVUTIL_SOCKET_ERROR();
		err = e ? -e : -ECONNRESET;
	}
	conn_failed(c, err);
}

static void on_conn_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	conn_failed(arg, -ETIMEDOUT);
}

static struct conn *conn_new(struct peers *ps, int fd, bool initiator)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct timeval tv = {
		.tv_sec = ps->d->cfg.connect_timeout_ms / 1000,
		.tv_usec = (ps->d->cfg.connect_timeout_ms % 1000) * 1000,
	};

	if (!c) {
		close(fd);
		return NULL;
	}
	c->ps = ps;
	c->initiator = initiator;
	LIST_INSERT_HEAD(&ps->conns, c, link);
	c->bev = bufferevent_socket_new(ps->d->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->timeout = evtimer_new(ps->d->base, on_conn_timeout, c);
	if (!c->bev || !c->timeout || auth_challenge(c->challenge) ||
	    evtimer_add(c->timeout, &tv)) {
		if (!c->bev && fd >= 0)
			close(fd);
		conn_free(c);
		return NULL;
	}
	bufferevent_setcb(c->bev, on_conn_read, NULL, on_conn_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	return c;
}

/* --- connecting --- */

static void connect_peer(struct peers *ps, struct peer *pe)
{
	if (pe->state != PEER_DOWN || pe->conn)
		return;
	if (pe->failures && now_ns() < pe->retry_at_ns) {
		/* Failed a moment ago: fail again at once, without a connect. */
		char why[sizeof(pe->last_error)];
		snprintf(why, sizeof(why), "%s", pe->last_error[0]
			 ? pe->last_error : "unreachable (retrying later)");
		peer_failed_as(ps, pe, -EHOSTUNREACH, why, false);
		return;
	}
	connect_attempt(ps, pe, 0);
}

/*
 * Connect to one of pe's addresses: attempt 0 is the one the subnet rule
 * picks, later attempts (after failures) the others in turn.
 */
static void connect_attempt(struct peers *ps, struct peer *pe, size_t attempt)
{
	struct netaddr_choice ch;
	struct sockaddr_storage ss;
	socklen_t sl;
	char ip[48], label[128];

	if (netaddr_choose(ps->local, ps->nlocal, pe->addrs, pe->naddrs, &ch)) {
		peer_failed(ps, pe, -EHOSTUNREACH,
			    "no address of the peer can be reached from here");
		return;
	}
	size_t idx = ((size_t)ch.peer + attempt) % pe->naddrs;
	const struct netaddr *dst = &pe->addrs[idx];
	int fd = socket(dst->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	if (fd < 0) {
		peer_failed(ps, pe, -errno, "socket() failed");
		return;
	}
	/* Leave from the local address on the peer's subnet: that is the
	 * rail the two nodes share. */
	if (ch.local >= 0 && idx == (size_t)ch.peer) {
		netaddr_to_sockaddr(&ps->local[ch.local], 0, &ss, &sl);
		if (bind(fd, (struct sockaddr *)&ss, sl))
			log_debug("bind to the local rail address failed: %s",
				  strerror(errno));
	}
	netaddr_format(dst, false, ip, sizeof(ip));
	snprintf(pe->address, sizeof(pe->address),
		 dst->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip,
		 pe->ports[idx]);
	snprintf(pe->why, sizeof(pe->why), "%s",
		 idx == (size_t)ch.peer ? ch.why : "no common subnet: routed");
	struct conn *c = conn_new(ps, fd, true);
	if (!c) {
		peer_failed(ps, pe, -ENOMEM, "out of memory");
		return;
	}
	c->peer = pe;
	c->attempt = attempt;
	snprintf(c->remote, sizeof(c->remote), "%s", pe->address);
	pe->conn = c;
	pe->state = PEER_CONNECTING;
	netaddr_to_sockaddr(dst, pe->ports[idx], &ss, &sl);
	log_debug("peer %s: connecting to %s (%s)",
		  peer_label(pe, label, sizeof(label)), pe->address, pe->why);
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&ss, (int)sl))
		conn_failed(c, -ECONNREFUSED);
}

static void on_accept(struct evconnlistener *lst, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	struct peers *ps = arg;
	struct netaddr na;
	uint16_t port = 0;
	char ip[48];
	int one = 1;
	(void)lst, (void)salen;

	evutil_make_socket_nonblocking(fd);
	evutil_make_socket_closeonexec(fd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct conn *c = conn_new(ps, fd, false);
	if (!c)
		return;
	if (netaddr_from_sockaddr(sa, &na, &port) == 0) {
		netaddr_format(&na, false, ip, sizeof(ip));
		snprintf(c->remote, sizeof(c->remote), "%s:%u", ip, port);
	}
}

/* --- requests --- */

static void request_free(struct request *r)
{
	if (r->timeout)
		event_free(r->timeout);
	free(r->msg);
	free(r);
}

static void fanout_result(struct fanout *f, int error, const void *data,
			  size_t len)
{
	if (!f->done && error == 0) {
		f->done = true;
		f->cb(f->arg, 0, data, len);
	} else if (error && f->error != -ENOENT) {
		f->error = error;  /* -ENOENT beats "could not ask" */
	}
	if (--f->outstanding == 0) {
		if (!f->done)
			f->cb(f->arg, f->error ? f->error : -ENOENT, NULL, 0);
		free(f);
	}
}

/* r answered (or failed): unlink it, call back, free. */
static void request_end(struct request *r, int error, const void *data,
			size_t len, uint64_t rtt)
{
	struct peers *ps = r->ps;

	if (r->sent)
		TAILQ_REMOVE(&ps->inflight, r, q);
	else if (r->unresolved)
		TAILQ_REMOVE(&ps->unresolved, r, q);
	else if (r->peer)
		TAILQ_REMOVE(&r->peer->waiting, r, q);
	switch (r->kind) {
	case REQ_LOOKUP:
		if (r->fan)
			fanout_result(r->fan, error, data, len);
		else
			r->cb.lookup(r->arg, error, data, len);
		break;
	case REQ_CHECK:
		r->cb.check(r->arg, error,
			    len == sizeof(struct region_rdma) ? data : NULL);
		break;
	case REQ_PING:
		r->cb.ping(r->arg, error, rtt, r->who);
		break;
	}
	request_free(r);
}

static void on_request_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	request_end(arg, -ETIMEDOUT, NULL, 0, 0);
}

/* Queue r on peer pe: sent now if the link is up, else once it is. */
static void request_start(struct peers *ps, struct request *r,
			  struct peer *pe, Xfer__Peer__PeerMsg *m)
{
	struct timeval tv = { .tv_sec = ps->d->cfg.op_timeout_ms / 1000,
			      .tv_usec = (ps->d->cfg.op_timeout_ms % 1000) * 1000 };

	m->proto_version = XFER_PROTO_VERSION;
	r->ps = ps;
	r->peer = pe;
	r->len = protobuf_c_message_get_packed_size(&m->base);
	r->msg = malloc(r->len);
	r->timeout = evtimer_new(ps->d->base, on_request_timeout, r);
	if (!r->msg || !r->timeout || evtimer_add(r->timeout, &tv)) {
		r->sent = false;
		r->peer = NULL;
		request_end(r, -ENOMEM, NULL, 0, 0);
		return;
	}
	protobuf_c_message_pack(&m->base, r->msg);
	if (pe->state == PEER_UP) {
		progress_link_send(ps->d->progress, pe->id, r->msg, r->len);
		r->sent = true;
		TAILQ_INSERT_TAIL(&ps->inflight, r, q);
		return;
	}
	TAILQ_INSERT_TAIL(&pe->waiting, r, q);
	connect_peer(ps, pe);
}

static struct request *request_new(struct peers *ps, enum request_kind kind)
{
	struct request *r = calloc(1, sizeof(*r));

	if (r) {
		r->kind = kind;
		r->id = ++ps->next_request;
	}
	return r;
}

/* A peer named by a node name, an instance id prefix, or host[:port]. */
static struct peer *peer_for(struct peers *ps, const char *target)
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

static void send_lookup(struct peers *ps, struct peer *pe, const char *name,
			peers_lookup_cb cb, void *arg, struct fanout *fan)
{
	struct request *r = request_new(ps, REQ_LOOKUP);
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Lookup lk = XFER__PEER__LOOKUP__INIT;

	if (!r) {
		if (fan)
			fanout_result(fan, -ENOMEM, NULL, 0);
		else
			cb(arg, -ENOMEM, NULL, 0);
		return;
	}
	r->cb.lookup = cb;
	r->arg = arg;
	r->fan = fan;
	lk.id = r->id;
	lk.name = (char *)name;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LOOKUP;
	m.lookup = &lk;
	request_start(ps, r, pe, &m);
}

/* Is a connection to a configured peer still being made? */
static bool configured_pending(struct peers *ps)
{
	for (struct peer *pe = ps->peers; pe; pe = pe->next)
		if (pe->state == PEER_CONNECTING)
			return true;
	return false;
}

/*
 * A node name no link has told us: it may be a configured peer that is
 * not connected yet (it started later than we did).  Connect to those
 * and wait until a handshake brings the name, or all of them failed.
 */
static void lookup_unresolved(struct peers *ps, const char *node,
			      const char *name, peers_lookup_cb cb, void *arg)
{
	struct timeval tv = { .tv_sec = ps->d->cfg.op_timeout_ms / 1000,
			      .tv_usec = (ps->d->cfg.op_timeout_ms % 1000) * 1000 };

	/* Connecting may fail (or succeed) at once: look again after. */
	peers_start(ps);
	struct peer *pe = peer_by_name(ps, node);
	if (pe) {
		send_lookup(ps, pe, name, cb, arg, NULL);
		return;
	}
	if (!configured_pending(ps)) {
		cb(arg, -EHOSTUNREACH, NULL, 0);
		return;
	}
	struct request *r = request_new(ps, REQ_LOOKUP);
	if (!r) {
		cb(arg, -ENOMEM, NULL, 0);
		return;
	}
	r->ps = ps;
	r->cb.lookup = cb;
	r->arg = arg;
	r->unresolved = true;
	snprintf(r->node, sizeof(r->node), "%s", node);
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->timeout = evtimer_new(ps->d->base, on_request_timeout, r);
	TAILQ_INSERT_TAIL(&ps->unresolved, r, q);
	if (!r->timeout || evtimer_add(r->timeout, &tv))
		request_end(r, -ENOMEM, NULL, 0, 0);
}

/* A handshake finished or failed: retry lookups waiting for a name. */
static void resolve_waiting(struct peers *ps)
{
	bool pending = configured_pending(ps);

	for (struct request *r = TAILQ_FIRST(&ps->unresolved), *next; r;
	     r = next) {
		next = TAILQ_NEXT(r, q);
		struct peer *pe = peer_by_name(ps, r->node);
		if (!pe && pending)
			continue;
		TAILQ_REMOVE(&ps->unresolved, r, q);
		r->unresolved = false;
		if (!pe) {
			r->peer = NULL;
			request_end(r, -EHOSTUNREACH, NULL, 0, 0);
			continue;
		}
		peers_lookup_cb cb = r->cb.lookup;
		void *arg = r->arg;
		char name[NAMES_NAME_MAX + 1];
		snprintf(name, sizeof(name), "%s", r->name);
		request_free(r);
		send_lookup(ps, pe, name, cb, arg, NULL);
	}
}

void peers_lookup(struct peers *ps, const char *node, const char *name,
		  peers_lookup_cb cb, void *arg)
{
	const struct xferd_config *cfg = &ps->d->cfg;

	if (node) {
		struct peer *pe = peer_for(ps, node);
		if (pe)
			send_lookup(ps, pe, name, cb, arg, NULL);
		else
			lookup_unresolved(ps, node, name, cb, arg);
		return;
	}
	if (cfg->npeers == 0) {
		cb(arg, -ENOENT, NULL, 0);
		return;
	}
	struct fanout *f = calloc(1, sizeof(*f));
	if (!f) {
		cb(arg, -ENOMEM, NULL, 0);
		return;
	}
	f->cb = cb;
	f->arg = arg;
	f->outstanding = cfg->npeers;
	for (uint32_t i = 0; i < cfg->npeers; i++) {
		struct peer *pe = peer_for(ps, cfg->peers[i]);
		if (pe)
			send_lookup(ps, pe, name, cb, arg, f);
		else
			fanout_result(f, -EHOSTUNREACH, NULL, 0);
	}
}

void peers_check_token(struct peers *ps, const struct token *tok,
		       peers_check_cb cb, void *arg)
{
	struct peer *pe = peer_by_id(ps, tok->instance_id);

	if (!pe) {
		pe = peer_new(ps);
		if (!pe) {
			cb(arg, -ENOMEM, NULL);
			return;
		}
		memcpy(pe->id, tok->instance_id, LINK_ID_LEN);
		pe->id_known = true;
	}
	if (pe->state != PEER_UP)
		set_addrs_tok(pe, tok);
	struct request *r = request_new(ps, REQ_CHECK);
	if (!r) {
		cb(arg, -ENOMEM, NULL);
		return;
	}
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__CheckToken ck = XFER__PEER__CHECK_TOKEN__INIT;
	Xfer__Peer__Target t = XFER__PEER__TARGET__INIT;
	t.region = tok->region;
	t.key.data = (uint8_t *)tok->key;
	t.key.len = TOKEN_KEY_LEN;
	t.offset = tok->offset;
	t.length = tok->length;
	t.region_length = tok->region_length;
	t.mem_kind = tok->mem_kind;
	ck.id = r->id;
	ck.target = &t;
	m.body_case = XFER__PEER__PEER_MSG__BODY_CHECK;
	m.check = &ck;
	r->cb.check = cb;
	r->arg = arg;
	request_start(ps, r, pe, &m);
}

void peers_ping(struct peers *ps, const char *target, peers_ping_cb cb,
		void *arg)
{
	struct peer *pe = peer_for(ps, target);
	struct request *r = pe ? request_new(ps, REQ_PING) : NULL;

	if (!r) {
		cb(arg, pe ? -ENOMEM : -EHOSTUNREACH, 0, target);
		return;
	}
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Ping ping = XFER__PEER__PING__INIT;
	ping.nonce = r->id;
	ping.sent_ns = now_ns();
	m.body_case = XFER__PEER__PEER_MSG__BODY_PING;
	m.ping = &ping;
	r->cb.ping = cb;
	r->arg = arg;
	snprintf(r->who, sizeof(r->who), "%s", target);
	request_start(ps, r, pe, &m);
}

/* The request `id` sent to the peer `from`: a reply from anyone else
 * (ids are sequential, easy to guess) must not answer it. */
static struct request *inflight(struct peers *ps, uint64_t id,
				enum request_kind kind, const uint8_t *from)
{
	struct request *r;

	TAILQ_FOREACH(r, &ps->inflight, q)
		if (r->id == id && r->kind == kind && r->peer &&
		    memcmp(r->peer->id, from, LINK_ID_LEN) == 0)
			return r;
	return NULL;
}

/* A peer's errno, trusted only within the range errnos have. */
static int peer_errno(int32_t e)
{
	return e <= 0 && e > -4096 ? e : -EPROTO;
}

/* A peer asked for one of our names. */
static void answer_lookup(struct peers *ps, const uint8_t *id,
			  const Xfer__Peer__Lookup *lk)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LookupReply rep = XFER__PEER__LOOKUP_REPLY__INIT;
	const void *tok = NULL;
	size_t len = 0;

	rep.id = lk->id;
	rep.error = lk->name && names_valid(lk->name)
		? names_lookup(ps->d->names, lk->name, &tok, &len) : -EINVAL;
	rep.token.data = (uint8_t *)tok;
	rep.token.len = rep.error ? 0 : len;
	m.proto_version = XFER_PROTO_VERSION;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LOOKUP_REPLY;
	m.lookup_reply = &rep;
	uint8_t buf[1024];
	size_t n = protobuf_c_message_get_packed_size(&m.base);
	if (n > sizeof(buf))
		return;
	protobuf_c_message_pack(&m.base, buf);
	progress_link_send(ps->d->progress, id, buf, n);
}


/* What an owner said of its region's NIC registration (CheckReply). */
static bool check_reply_rdma(const Xfer__Peer__CheckReply *rep,
			     struct region_rdma *out)
{
	const Xfer__Peer__RdmaMemory *m = rep->rdma;

	if (rep->error || !m || m->n_rkeys == 0 ||
	    m->n_rkeys > REGION_RDMA_KEYS)
		return false;
	*out = (struct region_rdma){ .addr = m->addr,
				     .nkeys = (uint32_t)m->n_rkeys };
	for (size_t i = 0; i < m->n_rkeys; i++)
		out->rkey[i] = m->rkeys[i];
	return true;
}

static void on_ctl_frame(struct peers *ps, const struct net_notice *n)
{
	Xfer__Peer__PeerMsg *m = xfer__peer__peer_msg__unpack(NULL, n->len,
							      n->data);
	struct request *r;

	if (!m)
		return;
	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_LOOKUP:
		answer_lookup(ps, n->id, m->lookup);
		break;
	case XFER__PEER__PEER_MSG__BODY_LOOKUP_REPLY:
		r = inflight(ps, m->lookup_reply->id, REQ_LOOKUP, n->id);
		if (r)
			request_end(r, peer_errno(m->lookup_reply->error),
				    m->lookup_reply->token.data,
				    m->lookup_reply->token.len, 0);
		break;
	case XFER__PEER__PEER_MSG__BODY_CHECK_REPLY:
		r = inflight(ps, m->check_reply->id, REQ_CHECK, n->id);
		if (r) {
			struct region_rdma rr;
			bool has = check_reply_rdma(m->check_reply, &rr);
			request_end(r, peer_errno(m->check_reply->error),
				    has ? &rr : NULL, has ? sizeof(rr) : 0, 0);
		}
		break;
	case XFER__PEER__PEER_MSG__BODY_PONG:
		r = inflight(ps, m->pong->nonce, REQ_PING, n->id);
		if (r)
			request_end(r, 0, NULL, 0, now_ns() - m->pong->sent_ns);
		break;
	default:
		break;
	}
	xfer__peer__peer_msg__free_unpacked(m, NULL);
}

void peers_on_notice(const struct net_notice *n, void *arg)
{
	struct peers *ps = arg;
	struct peer *pe;

	switch (n->kind) {
	case NET_NEED_PEER:
		pe = peer_by_id(ps, n->id);
		if (!pe) {
			pe = peer_new(ps);
			if (!pe) {
				progress_link_close(ps->d->progress, n->id,
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
		set_addrs_tok(pe, &n->tok);
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
		/* Requests out on that link will not be answered. */
		for (struct request *r = TAILQ_FIRST(&ps->inflight), *next; r;
		     r = next) {
			next = TAILQ_NEXT(r, q);
			if (r->peer == pe)
				request_end(r, -ECONNRESET, NULL, 0, 0);
		}
		break;
	case NET_CTL_FRAME:
		on_ctl_frame(ps, n);
		break;
	}
}

/* --- set-up --- */

/* Which addresses we advertise: the listen address, or all of ours. */
static void learn_addresses(struct peers *ps, const char *host)
{
	int n = netaddr_local(ps->local, NETADDR_MAX, true);

	ps->nlocal = n > 0 ? (size_t)n : 0;
	ps->naddrs = 0;
	if (strcmp(host, "*") != 0 && strcmp(host, "0.0.0.0") != 0 &&
	    strcmp(host, "::") != 0) {
		struct netaddr want;
		if (netaddr_parse(host, &want))
			return;
		ps->addrs[0] = want;
		ps->addrs[0].prefix_len = want.family == AF_INET ? 32 : 128;
		/* Its prefix comes from the interface that has it. */
		for (size_t i = 0; i < ps->nlocal; i++)
			if (ps->local[i].family == want.family &&
			    memcmp(ps->local[i].ip, want.ip, 16) == 0)
				ps->addrs[0] = ps->local[i];
		ps->naddrs = 1;
		return;
	}
	for (size_t i = 0; i < ps->nlocal; i++)
		if (!netaddr_is_loopback(&ps->local[i]))
			ps->addrs[ps->naddrs++] = ps->local[i];
}

static int listen_tcp(struct peers *ps)
{
	const char *spec = ps->d->cfg.listen;
	char host[CONFIG_HOST_MAX];
	struct sockaddr_storage ss;
	socklen_t sl;
	struct netaddr na = { .family = AF_INET6 };

	if (strcmp(spec, "off") == 0) {
		learn_addresses(ps, "*");
		return 0;
	}
	if (config_split_hostport(spec, host, &ps->port, CONFIG_DEFAULT_PORT))
		return -EINVAL;
	learn_addresses(ps, host);
	if (strcmp(host, "*") != 0 && netaddr_parse(host, &na)) {
		log_warnx("listen: '%s' is not an IP address", host);
		return -EINVAL;
	}
	netaddr_to_sockaddr(&na, ps->port, &ss, &sl);
	ps->listener = evconnlistener_new_bind(
		ps->d->base, on_accept, ps,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
		128, (struct sockaddr *)&ss, (int)sl);
	if (!ps->listener) {
		log_warn("cannot listen on %s (setting 'listen')", spec);
		return -EADDRINUSE;
	}
	log_info("listening for peers on %s (node %s)", spec, ps->node_name);
	return 0;
}

int peers_create(struct xferd *d, struct peers **out)
{
	struct peers *ps = calloc(1, sizeof(*ps));
	char err[512];
	int rc;

	if (!ps)
		return -ENOMEM;
	ps->d = d;
	LIST_INIT(&ps->conns);
	TAILQ_INIT(&ps->inflight);
	TAILQ_INIT(&ps->unresolved);
	if (d->cfg.node_name[0])
		snprintf(ps->node_name, sizeof(ps->node_name), "%s",
			 d->cfg.node_name);
	else if (gethostname(ps->node_name, sizeof(ps->node_name) - 1))
		snprintf(ps->node_name, sizeof(ps->node_name), "localhost");
	if (d->cfg.cluster_key_file[0]) {
		rc = auth_key_load(d->cfg.cluster_key_file, &ps->key, err,
				   sizeof(err));
		if (rc) {
			log_warnx("cluster key: %s", err);
			free(ps);
			return rc;
		}
	}
	rc = listen_tcp(ps);
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
	const struct xferd_config *cfg = &ps->d->cfg;

	for (uint32_t i = 0; i < cfg->npeers; i++) {
		struct peer *pe = peer_for(ps, cfg->peers[i]);
		if (pe)
			connect_peer(ps, pe);
	}
}

void peers_reload(struct peers *ps)
{
	char err[512];

	if (!ps)
		return;
	if (ps->d->cfg.cluster_key_file[0]) {
		struct auth_key *key;
		if (auth_key_load(ps->d->cfg.cluster_key_file, &key, err,
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
	struct request *r;

	if (!ps)
		return;
	while ((r = TAILQ_FIRST(&ps->inflight)))
		request_end(r, -ECANCELED, NULL, 0, 0);
	while ((r = TAILQ_FIRST(&ps->unresolved)))
		request_end(r, -ECANCELED, NULL, 0, 0);
	for (struct peer *pe = ps->peers; pe; pe = pe->next)
		while ((r = TAILQ_FIRST(&pe->waiting)))
			request_end(r, -ECANCELED, NULL, 0, 0);
	while ((c = LIST_FIRST(&ps->conns))) {
		c->peer = NULL;
		conn_free(c);
	}
	for (struct peer *pe = ps->peers, *next; pe; pe = next) {
		next = pe->next;
		free(pe);
	}
	if (ps->listener)
		evconnlistener_free(ps->listener);
	auth_key_free(ps->key);
	free(ps);
}

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
		};
		memcpy(v.instance_id, pe->id, LINK_ID_LEN);
		fn(&v, arg);
	}
}
