/* SPDX-License-Identifier: Apache-2.0 */
/*
 * handshake.c - a TCP connection to another xferd while its handshake
 * runs (proto/peer.proto): Hello, Welcome, Ready, Established, with
 * optional cluster authentication (auth.h), and the decision that brings
 * the link up and hands it to the progress thread (progress_link_attach),
 * which owns it from then on.
 *
 * Who answers: Welcome (initiator) or a proven Hello (acceptor) names the
 * peer's instance; the peer record is found, merged with one known only
 * by address, or replaced when a restarted xferd answers (table.c).
 * What a Hello says counts only once its Ready proved it.
 *
 * Simultaneous connects: both xferds may connect to each other at once.
 * The link initiated by the lower instance id survives: an acceptor that
 * has its own connect to the same peer in flight keeps whichever of the
 * two that rule picks and closes the other with an Error that has
 * duplicate_link set, and both sides apply the same rule, so exactly one
 * link remains.  The side that receives that Error ends its connect
 * quietly (-EEXIST): not a failure, the other link carries the peer.
 *
 * A connection that opens with LaneHello instead of Hello is a link's
 * latency lane (transport/link_lane.c): it is handed to the progress
 * thread as it is, which keeps it only if its secret is the one that
 * link offered; no peer record changes.
 *
 * Main thread only, no locks; never blocks (the bufferevent reads and
 * writes in the event loop; conn_write_out sends a few hundred bytes to a
 * socket buffer).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/pubname.h"
#include "common/wire.h"
#include "engine/progress.h"
#include "core/log.h"
#include "peer/peer_int.h"
#include "transport/rdma_dev.h"

/* Frames of the handshake are small; a bigger header is a broken peer. */

/* --- what we say about ourselves, and what a peer said --- */

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
size_t peer_rails_from_pb(struct rdma_peer_rail *out,
			  Xfer__Peer__Rail *const *in, size_t n,
			  const char *remote)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k < RDMA_PEER_RAILS; i++) {
		const Xfer__Peer__Rail *r = in[i];
		struct rdma_peer_rail *o = &out[k];
		if (r->gid.len != 16 || (r->ip.len != 4 && r->ip.len != 16) ||
		    r->prefix_len > r->ip.len * 8u || r->mtu < 1 ||
		    r->mtu > 5 || r->lid > 0xffff) {
			log_warnx("peer %s: rail %u is malformed; left out",
				  remote, r->index);
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
		k++;
	}
	return k;
}

static void conn_set_rails(struct conn *c, Xfer__Peer__Rail *const *in,
			   size_t n)
{
	c->their_nrails = peer_rails_from_pb(c->their_rails, in, n, c->remote);
}

bool peer_intro_valid(const ProtobufCBinaryData *id,
		      const ProtobufCBinaryData *challenge)
{
	return id->len == LINK_ID_LEN && challenge->len == AUTH_CHALLENGE_LEN;
}

/*
 * The node name a Hello or Welcome says: none, or one that a node may
 * have (pubname_node_valid: printable, no spaces; every configured name
 * and host name is).  It goes into the log, the journal's XFERD_PEER,
 * xferctl and "node/name" lookups, so a line break or a control byte
 * there is a broken or hostile peer, refused like any malformed field.
 */
static bool peer_name_valid(const char *name)
{
	return !name || !name[0] || pubname_node_valid(name, strlen(name));
}

/* --- frames on a handshaking connection --- */

static int conn_send(struct conn *c, Xfer__Peer__PeerMsg *m)
{
	uint8_t buf[8 + HANDSHAKE_MAX_HEADER];

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

/*
 * Refuse the link (the caller closes it): `why` is for the peer's log;
 * duplicate says that this is the loser of a simultaneous connect, which
 * the peer must not count as a failure.
 */
static void conn_error(struct conn *c, const char *why, bool duplicate)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Error e = XFER__PEER__ERROR__INIT;

	e.code = -EPERM;
	e.reason = (char *)why;
	e.duplicate_link = duplicate;
	m.body_case = XFER__PEER__PEER_MSG__BODY_ERROR;
	m.error = &e;
	if (conn_send(c, &m) == 0)
		conn_write_out(c);
}

/*
 * Introduce ourselves: Hello from the initiator once connected, Welcome
 * from the acceptor in answer to Hello, with the proof over the
 * initiator's challenge when the cluster authenticates.  The two are
 * generated types of their own with the same fields under the same
 * names; INTRO_FILL is their one list.
 */
static int conn_send_intro(struct conn *c)
{
	struct peers *ps = c->ps;
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Hello h = XFER__PEER__HELLO__INIT;
	Xfer__Peer__Welcome w = XFER__PEER__WELCOME__INIT;
	uint8_t proof[AUTH_PROOF_LEN];
	struct pb_addrs addrs;
	struct pb_rails rails;

	our_addrs(ps, &addrs);
	our_rails(&rails);
#define INTRO_FILL(msg) do {                                    \
		(msg).instance_id.data = (uint8_t *)ps->ctx.instance_id; \
		(msg).instance_id.len = LINK_ID_LEN;            \
		(msg).node_name = ps->node_name;                \
		(msg).n_addresses = addrs.n;                    \
		(msg).addresses = addrs.ptr;                    \
		(msg).challenge.data = c->challenge;            \
		(msg).challenge.len = AUTH_CHALLENGE_LEN;       \
		(msg).auth = ps->key != NULL;                   \
		(msg).n_rails = rails.n;                        \
		(msg).rails = rails.ptr;                        \
	} while (0)
	if (c->initiator) {
		INTRO_FILL(h);
		/* We dial a lane when offered one (link_lane.c). */
		h.lanes = ps->ctx.cfg->link_lanes;
		m.body_case = XFER__PEER__PEER_MSG__BODY_HELLO;
		m.hello = &h;
	} else {
		INTRO_FILL(w);
		if (ps->key) {
			auth_proof(ps->key, AUTH_ACCEPTOR, c->their_challenge,
				   ps->ctx.instance_id, c->their_id, proof);
			w.proof.data = proof;
			w.proof.len = AUTH_PROOF_LEN;
		}
		m.body_case = XFER__PEER__PEER_MSG__BODY_WELCOME;
		m.welcome = &w;
	}
#undef INTRO_FILL
	return conn_send(c, &m);
}

void conn_free(struct conn *c)
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

/* c's socket for the progress thread, and the bytes already read past
 * the handshake (*pending, malloc'd or NULL): 0 or -errno. */
static int conn_take_socket(struct conn *c, int *fd, uint8_t **pending,
			    size_t *left)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);

	*left = evbuffer_get_length(in);
	*pending = *left ? malloc(*left) : NULL;
	if (*left && !*pending)
		return -ENOMEM;
	evbuffer_remove(in, *pending, *left);
	/* Hand the descriptor over: the bufferevent must not close it. */
	*fd = fcntl(bufferevent_getfd(c->bev), F_DUPFD_CLOEXEC, 0);
	if (*fd < 0) {
		int err = -errno;
		free(*pending);
		return err;
	}
	return 0;
}

/* The handshake is done: the progress thread takes the socket over. */
static void conn_established(struct conn *c, struct peer *pe)
{
	struct peers *ps = c->ps;
	uint8_t *pending;
	size_t left;
	char label[128];
	int dup_fd, err = conn_take_socket(c, &dup_fd, &pending, &left);

	if (err) {
		conn_free(c);
		connect_failed(ps, pe, err, "cannot hand the link over");
		return;
	}
	/* Our own connect lost the race: drop it quietly. */
	peer_drop_own_conn(pe, c);
	pe->initiated = c->initiator;
	snprintf(pe->address, sizeof(pe->address), "%s", c->remote);
	struct rdma_peer_rail rails[RDMA_PEER_RAILS];
	size_t nrails = c->their_nrails;
	memcpy(rails, c->their_rails, nrails * sizeof(rails[0]));
	bool initiator = c->initiator, offer_lane = !initiator && c->their_lanes;
	conn_free(c);
	pe->state = PEER_UP;
	pe->links_up++;
	pe->failures = 0;
	pe->last_error[0] = '\0';
	clock_gettime(CLOCK_MONOTONIC, &pe->up_since);
	pe->link_gen = ++ps->next_link_gen;
	progress_link_attach(ps->ctx.progress, dup_fd, pe->id, pe->link_gen,
			     &pe->stats, pending, left, pe->node_name, rails,
			     nrails, initiator, offer_lane);
	free(pending);
	log_info_f(&((struct log_fields){ .peer = peer_log_name(pe) }),
		   "peer %s: link up via %s (%s, %s)",
		   peer_label(pe, label, sizeof(label)), pe->address,
		   pe->initiated ? "we connected" : "it connected", pe->why);

	request_send_waiting(ps, pe);
	request_resolve_waiting(ps);
}

bool peer_lane_hello_valid(const Xfer__Peer__LaneHello *h)
{
	return h->instance_id.len == LINK_ID_LEN &&
	       h->secret.len == LINK_LANE_SECRET;
}

/*
 * Acceptor: the connection opened with LaneHello, so it is the latency
 * lane of a link (transport/link_lane.c), not a link: the progress
 * thread compares its secret with that link's offer, and keeps or
 * closes it.  Returns 1 (handed over, c is gone) or -errno.
 */
static int on_lane_hello(struct conn *c, const Xfer__Peer__LaneHello *h)
{
	struct peers *ps = c->ps;
	uint8_t *pending;
	size_t left;
	int fd;

	if (!peer_lane_hello_valid(h))
		return -EPROTO;
	int err = conn_take_socket(c, &fd, &pending, &left);
	if (err)
		return err;
	progress_lane_attach(ps->ctx.progress, fd, h->instance_id.data,
			     h->secret.data, pending, left);
	free(pending);
	conn_free(c);
	return 1;
}

static bool auth_ok(struct peers *ps, bool their_auth, struct conn *c)
{
	if (their_auth == (ps->key != NULL))
		return true;
	const char *why = ps->key
		? "cluster authentication required here, the peer has no key"
		: "the peer requires cluster authentication, no key here";
	log_warnx("peer %s: refused: %s", c->remote, why);
	conn_error(c, why, false);
	return false;
}

/* --- the steps --- */

/* Acceptor: Hello arrived. */
static int on_hello(struct conn *c, const Xfer__Peer__Hello *h)
{
	struct peers *ps = c->ps;
	char label[128];

	if (!peer_intro_valid(&h->instance_id, &h->challenge) ||
	    !peer_name_valid(h->node_name))
		return -EPROTO;
	if (!auth_ok(ps, h->auth, c))
		return -EPERM;
	if (memcmp(h->instance_id.data, ps->ctx.instance_id, LINK_ID_LEN) == 0) {
		conn_error(c, "connected to itself", false);
		return -ELOOP;
	}
	memcpy(c->their_id, h->instance_id.data, LINK_ID_LEN);
	memcpy(c->their_challenge, h->challenge.data, AUTH_CHALLENGE_LEN);

	struct peer *pe = peer_by_id(ps, c->their_id);
	if (pe && pe->conn && pe->state == PEER_CONNECTING &&
	    memcmp(ps->ctx.instance_id, c->their_id, LINK_ID_LEN) < 0) {
		/* Both connected at once and ours (lower id) wins. */
		log_debug("peer %s: duplicate link refused (ours wins)",
			  peer_label(pe, label, sizeof(label)));
		conn_error(c, "duplicate link", true);
		return -EEXIST;
	}
	if (pe && pe->conn && pe->state == PEER_CONNECTING) {
		/* Both connected at once and theirs (lower id) wins: our
		 * connect ends quietly; this one will carry the link. */
		peer_drop_own_conn(pe, NULL);
		pe->state = PEER_DOWN;
	}
	/* What it says about itself counts only once its proof checked
	 * out (on_ready): an impostor must not rename or readdress a peer. */
	snprintf(c->their_name, sizeof(c->their_name), "%s",
		 h->node_name ? h->node_name : "");
	peer_addrs_from_pb(&c->their_addrs, h->addresses, h->n_addresses);
	conn_set_rails(c, h->rails, h->n_rails);
	c->their_lanes = h->lanes;
	return conn_send_intro(c);  /* Welcome */
}

/* Initiator: Welcome arrived. */
static int on_welcome(struct conn *c, const Xfer__Peer__Welcome *w)
{
	struct peers *ps = c->ps;
	struct peer *pe = c->peer;

	if (!pe)
		return -ECANCELED;
	if (!peer_intro_valid(&w->instance_id, &w->challenge) ||
	    !peer_name_valid(w->node_name))
		return -EPROTO;
	if (!auth_ok(ps, w->auth, c))
		return -EPERM;
	if (ps->key && !auth_verify(ps->key, AUTH_ACCEPTOR, c->challenge,
				    w->instance_id.data, ps->ctx.instance_id,
				    w->proof.data, w->proof.len)) {
		log_warnx("peer %s: refused: its cluster key differs from ours",
			  c->remote);
		conn_error(c, "authentication failed: cluster keys differ",
			   false);
		return -EPERM;
	}
	if (memcmp(w->instance_id.data, ps->ctx.instance_id, LINK_ID_LEN) == 0) {
		conn_error(c, "connected to itself", false);
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
			peer_drop_own_conn(known, c);
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
		request_send_waiting(ps, pe);
		return -EEXIST;
	}
	snprintf(pe->node_name, sizeof(pe->node_name), "%s",
		 w->node_name ? w->node_name : "");
	struct addr_set as;
	peer_addrs_from_pb(&as, w->addresses, w->n_addresses);
	peer_set_addrs(pe, &as);
	conn_set_rails(c, w->rails, w->n_rails);

	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Ready r = XFER__PEER__READY__INIT;
	uint8_t proof[AUTH_PROOF_LEN];
	if (ps->key) {
		auth_proof(ps->key, AUTH_INITIATOR, w->challenge.data,
			   ps->ctx.instance_id, pe->id, proof);
		r.proof.data = proof;
		r.proof.len = AUTH_PROOF_LEN;
	}
	m.body_case = XFER__PEER__PEER_MSG__BODY_READY;
	m.ready = &r;
	return conn_send(c, &m);
}

/* Acceptor: Ready arrived; answer Established and hand over. */
static int on_ready(struct conn *c, const Xfer__Peer__Ready *r)
{
	struct peers *ps = c->ps;

	if (ps->key && !auth_verify(ps->key, AUTH_INITIATOR, c->challenge,
				    c->their_id, ps->ctx.instance_id,
				    r->proof.data, r->proof.len)) {
		log_warnx("peer %s: refused: its cluster key differs from ours",
			  c->remote);
		conn_error(c, "authentication failed: cluster keys differ",
			   false);
		return -EPERM;
	}
	struct peer *pe = peer_by_id(ps, c->their_id);
	struct peer *mine = pe ? pe : peer_own_attempt_to(ps, &c->their_addrs);
	/*
	 * Both connected at once: the link initiated by the lower instance
	 * id survives, on both sides.  Ours (in flight or up) wins here if
	 * our id is the lower one; then this one is refused.
	 */
	if (mine && (mine->conn || (mine->state == PEER_UP && mine->initiated)) &&
	    memcmp(ps->ctx.instance_id, c->their_id, LINK_ID_LEN) < 0) {
		conn_error(c, "duplicate link", true);
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

/* The peer refused the link (Error). */
static int on_error(struct conn *c, const Xfer__Peer__Error *e)
{
	const char *why = e->reason ? e->reason : "?";

	if (e->duplicate_link) {
		/* Lost a simultaneous connect: the other link will do. */
		log_debug("peer %s closed a duplicate link: %s", c->remote,
			  why);
		return -EEXIST;
	}
	log_warnx("peer %s refused the link: %s", c->remote, why);
	return -ECONNREFUSED;
}

/*
 * The receiver of a handshaking connection: the next message, checked
 * against the step it must be; >0 when c was handed over (and is gone).
 */
int peer_hs_expect(bool initiator, int step)
{
	return initiator ? (step == 0 ? XFER__PEER__PEER_MSG__BODY_WELCOME
				      : XFER__PEER__PEER_MSG__BODY_ESTABLISHED)
			 : (step == 0 ? XFER__PEER__PEER_MSG__BODY_HELLO
				      : XFER__PEER__PEER_MSG__BODY_READY);
}

static int conn_step(struct conn *c, const Xfer__Peer__PeerMsg *m)
{
	if (m->proto_version != XFER_PROTO_VERSION)
		return -EPROTO;
	if (m->body_case == XFER__PEER__PEER_MSG__BODY_ERROR)
		return on_error(c, m->error);
	if (!c->initiator && c->step == 0 &&
	    m->body_case == XFER__PEER__PEER_MSG__BODY_LANE_HELLO)
		return on_lane_hello(c, m->lane_hello);
	int expect = peer_hs_expect(c->initiator, c->step);
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

void conn_failed(struct conn *c, int err)
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
		connect_failed(ps, pe, err == -EPERM ? -EACCES : err,
			       conn_err_text(err));
	else if (err == -EEXIST && pe->state == PEER_CONNECTING)
		pe->state = PEER_DOWN;  /* the other link is on its way */
}

/* --- libevent callbacks --- */

int peer_hs_prefix(const uint8_t prefix[8], uint32_t *hlen, uint32_t *plen)
{
	memcpy(hlen, prefix, 4);
	memcpy(plen, prefix + 4, 4);
	return *hlen == 0 || *hlen > HANDSHAKE_MAX_HEADER || *plen ? -EPROTO
								     : 0;
}

static void on_conn_read(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (evbuffer_get_length(in) >= 8) {
		uint32_t hlen, plen;
		uint8_t prefix[8];
		evbuffer_copyout(in, prefix, 8);
		if (peer_hs_prefix(prefix, &hlen, &plen)) {
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

	if (what & BEV_EVENT_CONNECTED) {
		/* Our connect went through: say hello. */
		int one = 1;
		setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY,
			   &one, sizeof(one));
		if (conn_send_intro(c))
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

struct conn *conn_new(struct peers *ps, int fd, bool initiator)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct timeval tv = ms_to_timeval(ps->ctx.cfg->connect_timeout_ms);

	if (!c) {
		close(fd);
		return NULL;
	}
	c->ps = ps;
	c->initiator = initiator;
	LIST_INSERT_HEAD(&ps->conns, c, link);
	c->bev = bufferevent_socket_new(ps->ctx.base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->timeout = evtimer_new(ps->ctx.base, on_conn_timeout, c);
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
