/* SPDX-License-Identifier: Apache-2.0 */
/*
 * requests.c - questions to other xferds that wait for an answer: a
 * lookup of a published name (at one node, or at every configured peer
 * with the first token winning: the fan-out), the check of an imported
 * token at its owner, and xferctl's ping; and the control frames that
 * answer them or ask us (Lookup).
 *
 * A request goes out at once on a link that is up, else it waits on its
 * peer record until the handshake is done (connect.c, handshake.c), or
 * on ps->unresolved while the node it names is not known yet.  Every
 * request ends exactly once (request_end): answered, timed out
 * (op_timeout_ms), failed with its peer or link, or cancelled.
 *
 * Main thread only, no locks.  Replies arrive as NET_CTL_FRAME notices
 * of the progress thread; request_dispatch is the one receiver of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/wire.h"
#include "engine/progress.h"
#include "core/log.h"
#include "mem/region.h"
#include "peer/peer_int.h"
#include "transport/rdma_grant.h"

/* One lookup sent to every configured peer: first token wins. */
struct fanout {
	peers_lookup_cb cb;
	void *arg;
	unsigned outstanding;
	int error;                    /* best error so far */
	bool done;
};

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

void request_end(struct request *r, int error, const void *data, size_t len,
		 uint64_t rtt)
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
	struct timeval tv = ms_to_timeval(ps->ctx.cfg->op_timeout_ms);

	m->proto_version = XFER_PROTO_VERSION;
	r->ps = ps;
	r->peer = pe;
	r->len = protobuf_c_message_get_packed_size(&m->base);
	r->msg = malloc(r->len);
	r->timeout = evtimer_new(ps->ctx.base, on_request_timeout, r);
	if (!r->msg || !r->timeout || evtimer_add(r->timeout, &tv)) {
		r->sent = false;
		r->peer = NULL;
		request_end(r, -ENOMEM, NULL, 0, 0);
		return;
	}
	protobuf_c_message_pack(&m->base, r->msg);
	/* A dial this request causes: to a record that is not a known
	 * peer, within its user's rate (connect.c).  One the address rule
	 * refuses anyway opens nothing and costs no rate. */
	if (pe->state != PEER_UP && !pe->known && connect_would_dial(ps, pe) &&
	    connect_dial_allowed(ps, pe) && !connect_rate_take(ps, r->uid)) {
		log_info("peer: uid %lld asks for connections to other "
			 "xferds faster than peer_connect_rate (%u/s): refused",
			 (long long)r->uid, ps->ctx.cfg->peer_connect_rate);
		r->peer = NULL;   /* not queued anywhere */
		request_end(r, -EAGAIN, NULL, 0, 0);
		return;
	}
	if (pe->state == PEER_UP) {
		progress_link_send(ps->ctx.progress, pe->id, r->msg, r->len);
		r->sent = true;
		TAILQ_INSERT_TAIL(&ps->inflight, r, q);
		return;
	}
	TAILQ_INSERT_TAIL(&pe->waiting, r, q);
	connect_peer(ps, pe);
}

static struct request *request_new(struct peers *ps, enum request_kind kind,
				   int64_t uid)
{
	struct request *r = calloc(1, sizeof(*r));

	if (r) {
		r->kind = kind;
		r->id = ++ps->next_request;
		r->uid = uid;
	}
	return r;
}

void request_send_waiting(struct peers *ps, struct peer *pe)
{
	struct request *r;

	while ((r = TAILQ_FIRST(&pe->waiting))) {
		TAILQ_REMOVE(&pe->waiting, r, q);
		progress_link_send(ps->ctx.progress, pe->id, r->msg, r->len);
		r->sent = true;
		TAILQ_INSERT_TAIL(&ps->inflight, r, q);
	}
}

void request_link_down(struct peers *ps, struct peer *pe)
{
	for (struct request *r = TAILQ_FIRST(&ps->inflight), *next; r;
	     r = next) {
		next = TAILQ_NEXT(r, q);
		if (r->peer == pe)
			request_end(r, -ECONNRESET, NULL, 0, 0);
	}
}

void request_cancel_all(struct peers *ps)
{
	struct request *r;

	while ((r = TAILQ_FIRST(&ps->inflight)))
		request_end(r, -ECANCELED, NULL, 0, 0);
	while ((r = TAILQ_FIRST(&ps->unresolved)))
		request_end(r, -ECANCELED, NULL, 0, 0);
	for (struct peer *pe = ps->peers; pe; pe = pe->next)
		while ((r = TAILQ_FIRST(&pe->waiting)))
			request_end(r, -ECANCELED, NULL, 0, 0);
}

/* --- lookup --- */

static void send_lookup(struct peers *ps, struct peer *pe, const char *name,
			int64_t uid, peers_lookup_cb cb, void *arg,
			struct fanout *fan)
{
	struct request *r = request_new(ps, REQ_LOOKUP, uid);
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
			      const char *name, int64_t uid,
			      peers_lookup_cb cb, void *arg)
{
	struct timeval tv = ms_to_timeval(ps->ctx.cfg->op_timeout_ms);

	/* Connecting may fail (or succeed) at once: look again after. */
	peers_start(ps);
	struct peer *pe = peer_by_name(ps, node);
	if (pe) {
		send_lookup(ps, pe, name, uid, cb, arg, NULL);
		return;
	}
	if (!configured_pending(ps)) {
		cb(arg, -EHOSTUNREACH, NULL, 0);
		return;
	}
	struct request *r = request_new(ps, REQ_LOOKUP, uid);
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
	r->timeout = evtimer_new(ps->ctx.base, on_request_timeout, r);
	TAILQ_INSERT_TAIL(&ps->unresolved, r, q);
	if (!r->timeout || evtimer_add(r->timeout, &tv))
		request_end(r, -ENOMEM, NULL, 0, 0);
}

void request_resolve_waiting(struct peers *ps)
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
		int64_t uid = r->uid;
		char name[PUBNAME_QUALIFIED_MAX + 1];
		snprintf(name, sizeof(name), "%s", r->name);
		request_free(r);
		send_lookup(ps, pe, name, uid, cb, arg, NULL);
	}
}

void peers_lookup(struct peers *ps, const char *node, const char *name,
		  int64_t uid, peers_lookup_cb cb, void *arg)
{
	const struct xferd_config *cfg = ps->ctx.cfg;

	if (node) {
		struct peer *pe = peer_for(ps, node);
		if (pe)
			send_lookup(ps, pe, name, uid, cb, arg, NULL);
		else
			lookup_unresolved(ps, node, name, uid, cb, arg);
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
		if (pe) {
			pe->known = true;
			send_lookup(ps, pe, name, uid, cb, arg, f);
		} else
			fanout_result(f, -EHOSTUNREACH, NULL, 0);
	}
}

/* --- token check, ping --- */

void peers_check_token(struct peers *ps, const struct token *tok,
		       int64_t uid, peers_check_cb cb, void *arg)
{
	struct peer *pe = peer_by_id(ps, tok->instance_id);

	if (peer_retired(ps, tok->instance_id)) {
		cb(arg, -ESTALE, NULL);  /* its node restarted (members.c) */
		return;
	}
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
		peer_addrs_from_token(pe, tok);
	struct request *r = request_new(ps, REQ_CHECK, uid);
	if (!r) {
		cb(arg, -ENOMEM, NULL);
		return;
	}
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__CheckToken ck = XFER__PEER__CHECK_TOKEN__INIT;
	Xfer__Peer__Target t = XFER__PEER__TARGET__INIT;
	link_target_of(tok, &t);
	ck.id = r->id;
	ck.target = &t;
	m.body_case = XFER__PEER__PEER_MSG__BODY_CHECK;
	m.check = &ck;
	r->cb.check = cb;
	r->arg = arg;
	request_start(ps, r, pe, &m);
}

void peers_release_grant(struct peers *ps, const uint8_t owner[16],
			 uint64_t grant)
{
	uint8_t buf[64];
	size_t len = rdma_grant_release_pack(grant, buf, sizeof(buf));

	if (grant && len)
		progress_link_send(ps->ctx.progress, owner, buf, len);
}

void peers_ping(struct peers *ps, const char *target, int64_t uid,
		peers_ping_cb cb, void *arg)
{
	struct peer *pe = peer_for(ps, target);
	struct request *r = pe ? request_new(ps, REQ_PING, uid) : NULL;

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

/* --- control frames from the links --- */

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

/*
 * A peer asked for one of our names: "name" in our shared namespace,
 * "~uid/name" if our uid shared it.  A name its publisher kept private
 * is never answered to another node (its uid means nothing there):
 * -ENOENT, as if absent.
 */
static void answer_lookup(struct peers *ps, const uint8_t *id,
			  const Xfer__Peer__Lookup *lk)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LookupReply rep = XFER__PEER__LOOKUP_REPLY__INIT;
	struct pubname_ref ref;
	const void *tok = NULL;
	size_t len = 0;

	rep.id = lk->id;
	if (!lk->name || !pubname_qualified_parse(lk->name, &ref))
		rep.error = -EINVAL;
	else if (ref.uid == PUBNAME_NO_UID)
		rep.error = names_lookup_shared(ps->ctx.names, ref.name, &tok,
						&len);
	else
		rep.error = names_lookup_as(ps->ctx.names, PUBNAME_NO_UID,
					    ref.uid, ref.name, &tok, &len);
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
	progress_link_send(ps->ctx.progress, id, buf, n);
}

/* What an owner said of its region's NIC registration (CheckReply),
 * over the link link_gen (a grant is valid on that link only). */
static bool check_reply_rdma(const Xfer__Peer__CheckReply *rep,
			     uint64_t link_gen, struct region_rdma *out)
{
	const Xfer__Peer__RdmaMemory *m = rep->rdma;

	if (rep->error || !m || m->n_rkeys > REGION_RDMA_KEYS)
		return false;
	/* No rkeys: the owner lends landing chunks for it, or nothing. */
	if (m->n_rkeys == 0) {
		if (!m->landing_chunk || m->grant)
			return false;
		*out = (struct region_rdma){ .landing_chunk = m->landing_chunk,
					     .link_gen = link_gen };
		return true;
	}
	*out = (struct region_rdma){ .addr = m->addr,
				     .nkeys = (uint32_t)m->n_rkeys,
				     .grant = m->grant,
				     .link_gen = link_gen };
	for (size_t i = 0; i < m->n_rkeys; i++)
		out->rkey[i] = m->rkeys[i];
	return true;
}

/*
 * The one receiver of the control frames a link hands to the main thread:
 * every PeerMsg body has its case here.  The link (transport/tcp.c)
 * checked the version and that no payload came with the frame, serves
 * the data path, Ping and keepalive Pongs itself, and forwards only
 * Lookup, LookupReply, CheckReply and the Pong of an xferctl ping.
 * Anything else here is not the peer's fault (the link accepted the
 * frame) but the two threads disagreeing on who serves what: logged and
 * dropped, the link stays.
 */
void request_dispatch(struct peers *ps, const uint8_t *from,
		      const Xfer__Peer__PeerMsg *m)
{
	struct request *r;

	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_LOOKUP:
		answer_lookup(ps, from, m->lookup);
		return;
	case XFER__PEER__PEER_MSG__BODY_LOOKUP_REPLY:
		r = inflight(ps, m->lookup_reply->id, REQ_LOOKUP, from);
		if (r)
			request_end(r, peer_errno(m->lookup_reply->error),
				    m->lookup_reply->token.data,
				    m->lookup_reply->token.len, 0);
		return;
	case XFER__PEER__PEER_MSG__BODY_CHECK_REPLY:
		r = inflight(ps, m->check_reply->id, REQ_CHECK, from);
		if (r) {
			struct region_rdma rr;
			bool has = check_reply_rdma(m->check_reply,
						    r->peer->link_gen, &rr);
			request_end(r, peer_errno(m->check_reply->error),
				    has ? &rr : NULL, has ? sizeof(rr) : 0, 0);
		} else if (m->check_reply->rdma &&
			   m->check_reply->rdma->grant) {
			/* Answered too late: nobody takes the grant. */
			peers_release_grant(ps, from,
					    m->check_reply->rdma->grant);
		}
		return;
	case XFER__PEER__PEER_MSG__BODY_PONG:
		r = inflight(ps, m->pong->nonce, REQ_PING, from);
		if (r)
			request_end(r, 0, NULL, 0,
				    now_ns() - m->pong->sent_ns);
		return;
	/* The handshake's, only before the hand-over (handshake.c). */
	case XFER__PEER__PEER_MSG__BODY_HELLO:
	case XFER__PEER__PEER_MSG__BODY_WELCOME:
	case XFER__PEER__PEER_MSG__BODY_READY:
	case XFER__PEER__PEER_MSG__BODY_ESTABLISHED:
	/* The progress thread's (transport/tcp.c, transport/rdma.c). */
	case XFER__PEER__PEER_MSG__BODY_PING:
	case XFER__PEER__PEER_MSG__BODY_WRITE:
	case XFER__PEER__PEER_MSG__BODY_WRITE_ACK:
	case XFER__PEER__PEER_MSG__BODY_ABORT:
	case XFER__PEER__PEER_MSG__BODY_READ:
	case XFER__PEER__PEER_MSG__BODY_READ_DATA:
	case XFER__PEER__PEER_MSG__BODY_NOTIFY:
	case XFER__PEER__PEER_MSG__BODY_CHECK:
	case XFER__PEER__PEER_MSG__BODY_QP_CONNECT:
	case XFER__PEER__PEER_MSG__BODY_QP_ACCEPT:
	case XFER__PEER__PEER_MSG__BODY_RELEASE_GRANT:
	case XFER__PEER__PEER_MSG__BODY_LAND_OPEN:
	case XFER__PEER__PEER_MSG__BODY_LAND_GRANT:
	case XFER__PEER__PEER_MSG__BODY_LANDED:
	case XFER__PEER__PEER_MSG__BODY_LAND_DONE:
	case XFER__PEER__PEER_MSG__BODY_LAND_ABORT:
	case XFER__PEER__PEER_MSG__BODY_ERROR:
	case XFER__PEER__PEER_MSG__BODY__NOT_SET:
	default:
		break;
	}
	log_warnx("peer link: message %d handed to the main thread; dropped",
		  (int)m->body_case);
}
