/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp.c - the TCP data path between xferds, in the progress thread: the
 * meaning of the data frames on a link (link.c carries them).
 *
 * This file is long (about 1200 lines) because both ends of every data
 * frame type live here: what this xferd sends for its clients'
 * descriptors and what it does with the same frames from the peer.
 * Keeping the two halves of the protocol side by side is what makes it
 * reviewable.
 *
 * Per link:
 *   sendq   operations with frames still to queue, served round-robin
 *           one frame at a time while the socket's output buffer is
 *           below OUT_HIGH (refilled when it drains below OUT_LOW);
 *   serveq  reads the peer asked of us, served the same way;
 *   hash    operations with frames on the wire, awaiting their end.
 * A frame's payload from a memfd region goes to the socket by reference
 * (no copy in xferd); incoming payloads are copied once, from the
 * socket or libevent's buffer into the region.  GPU memory at either
 * end goes through pinned staging chunks (staged.c): a write or served
 * read from GPU memory is a stream of D2H-filled chunks (its op or serve
 * parked off its queue while the next chunk is not ready), a payload
 * into GPU memory lands in receive chunks emptied by H2D copies, and
 * its ack or completion waits for them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "core/thread_stats.h"
#include "core/log.h"
#include "mem/region.h"
#include "transport/link_int.h"
#include "xfer_ring.h"
#include "mem/cma.h"
#include "transport/tcp.h"

static void target_from(const struct token *t, Xfer__Peer__Target *out)
{
	xfer__peer__target__init(out);
	out->region = t->region;
	out->key.data = (uint8_t *)t->key;
	out->key.len = TOKEN_KEY_LEN;
	out->offset = t->offset;
	out->length = t->length;
	out->region_length = t->region_length;
	out->mem_kind = t->mem_kind;
}

/* A Target received from the peer, as a token of ours; -EPROTO if it is
 * malformed. */
int tcp_target_valid(const Xfer__Peer__Target *t)
{
	if (!t || t->key.len != TOKEN_KEY_LEN || t->offset > t->region_length ||
	    t->length > t->region_length - t->offset)
		return -EPROTO;
	return 0;
}

static int token_from(const struct linkset *ls, const Xfer__Peer__Target *t,
		      struct token *out)
{
	if (tcp_target_valid(t))
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	memcpy(out->instance_id, ls->cfg.self_id, TOKEN_INSTANCE_LEN);
	memcpy(out->key, t->key.data, TOKEN_KEY_LEN);
	out->region = t->region;
	out->offset = t->offset;
	out->length = t->length;
	out->region_length = t->region_length;
	out->mem_kind = t->mem_kind;
	return 0;
}

/* Can the link read or write r's bytes itself (xferd's mapping of a
 * memfd, or CMA)?  GPU memory needs a copy through staging first. */
static bool host_reachable(const struct region *r)
{
	return region_kind(r) == REGION_MEMFD || region_kind(r) == REGION_CMA;
}

/* ... or through staging (with GPUs and a staging pool here). */
static bool bytes_reachable(const struct linkset *ls, const struct region *r)
{
	return host_reachable(r) || staged_reachable(ls, r);
}

/* Resolve a peer's token: the key is checked once per distinct token. */
static int resolve(struct link *l, const struct token *tok, uint64_t at,
		   uint64_t len, struct region **r, uint64_t *off)
{
	bool known = l->have_verified &&
		     memcmp(&l->verified, tok, sizeof(*tok)) == 0;
	int err = regtab_resolve_token(l->ls->regs, tok, at, len, !known, r,
				       off);
	if (!err && !known) {
		l->verified = *tok;
		l->have_verified = true;
	}
	return err;
}

/* resolve() for a frame that moves bytes: -ENOTSUP (that operation
 * fails, not the link) when the link cannot reach the region's memory. */
static int resolve_data(struct link *l, const struct token *tok, uint64_t at,
			uint64_t len, struct region **r, uint64_t *off)
{
	int err = resolve(l, tok, at, len, r, off);

	if (!err && !bytes_reachable(l->ls, *r)) {
		region_put(*r);
		*r = NULL;
		return -ENOTSUP;
	}
	return err;
}

static void hash_add(struct link *l, struct xop *op)
{
	struct xop **b = &l->hash[op->tcp.id % OP_HASH];

	op->tcp.hnext = *b;
	*b = op;
	op->tcp.in_hash = true;
}

static struct xop *hash_find(struct link *l, uint64_t id)
{
	struct xop *op = l->hash[id % OP_HASH];

	while (op && op->tcp.id != id)
		op = op->tcp.hnext;
	return op;
}

static void hash_del(struct link *l, struct xop *op)
{
	struct xop **pp = &l->hash[op->tcp.id % OP_HASH];

	while (*pp != op)
		pp = &(*pp)->tcp.hnext;
	*pp = op->tcp.hnext;
	op->tcp.in_hash = false;
}

static bool in_sendq(const struct xop *op)
{
	return !op->tcp.sent_all && !op->tcp.parked;
}

/* The sink no longer lands anything: the rest of its payload is
 * dropped (receive chunk back, reading resumed if it waited for one). */
static void sink_drop(struct link *l)
{
	struct rx_sink *k = &l->sink;

	staged_sink_drop(l);
	staged_rx_put(k->srx);
	k->srx = NULL;
	region_put(k->r);
	k->r = NULL;
}

/* End op: out of every list of l, Abort if the peer holds half of it. */
static void op_end(struct linkset *ls, struct link *l, struct xop *op,
		   int64_t result)
{
	/* Its staged chunks in a GPU copy go back when the copy ends. */
	staged_send_free(op->tcp.send);
	op->tcp.send = NULL;
	if (op->tcp.rx) {
		op->tcp.rx->xop = NULL;
		staged_rx_put(op->tcp.rx);
		op->tcp.rx = NULL;
	}
	if (l) {
		if (l->sink.xop == op) {
			/* The rest of its payload is dropped, not landed in a
			 * buffer its client may already reuse. */
			l->sink.xop = NULL;
			sink_drop(l);
		}
		if (in_sendq(op))
			TAILQ_REMOVE(&l->sendq, op, q);
		if (op->tcp.in_hash) {
			hash_del(l, op);
			/* The peer saw part of it and will not see the end. */
			if (result < 0 && l->bev &&
			    (op->opcode == XFER_OP_READ || op->tcp.done < op->len ||
			     !op->tcp.sent_all)) {
				Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
				Xfer__Peer__Abort a = XFER__PEER__ABORT__INIT;
				a.op = op->tcp.id;
				m.body_case = XFER__PEER__PEER_MSG__BODY_ABORT;
				m.abort = &a;
				link_put_msg(l, &m, 0);
			}
		}
		stat_add(result < 0 ? &l->stats->errors : &l->stats->ops, 1);
	}
	ls->hooks.op_done(ls->hooks.arg, op, result);
}

/* Fail everything of a peer that waits for a link. */
void tcp_fail_pending(struct linkset *ls, struct rpeer *rp, int err)
{
	struct xop *op;

	while ((op = TAILQ_FIRST(&rp->pending))) {
		TAILQ_REMOVE(&rp->pending, op, q);
		op->tcp.sent_all = true;  /* not in any sendq */
		ls->hooks.op_done(ls->hooks.arg, op, err);
	}
	rp->asked = false;
}

/* --- sending this side's operations --- */

/* Copy len bytes of a CMA region into the output buffer. */
static int add_cma(struct evbuffer *out, const struct region *r,
		   uint64_t off, uint64_t len)
{
	struct evbuffer_iovec v[MAX_IOV];
	int n = evbuffer_reserve_space(out, (ev_ssize_t)len, v, MAX_IOV);

	if (n <= 0)
		return -ENOMEM;
	uint64_t done = 0;
	for (int i = 0; i < n && done < len; i++) {
		size_t take = v[i].iov_len < len - done ? v[i].iov_len
							 : (size_t)(len - done);
		int64_t got = cma_copy(r, false, v[i].iov_base, off + done,
				       take);
		if (got < 0)
			return (int)got;
		v[i].iov_len = take;
		done += take;
	}
	return evbuffer_commit_space(out, v, n) ? -ENOMEM : 0;
}

/*
 * A payload from memory of another process (CMA) is read before its
 * frame's header is queued: if that memory went away, only its own
 * operation fails, not the link.  Memfd payloads cannot fail; memory
 * the link cannot reach (GPU) fails its operation with -ENOTSUP.
 */
static int stage_payload(const struct region *r, uint64_t off, uint64_t len,
			 struct evbuffer **staged)
{
	*staged = NULL;
	if (len == 0)
		return 0;
	if (!host_reachable(r))
		return -ENOTSUP;
	if (region_kind(r) != REGION_CMA)
		return 0;
	struct evbuffer *b = evbuffer_new();
	if (!b)
		return -ENOMEM;
	int err = add_cma(b, r, off, len);
	if (err) {
		evbuffer_free(b);
		return err;
	}
	*staged = b;
	return 0;
}

/*
 * Queue frame m with its payload, [off, off + n) of r: memory xferd maps
 * goes in the header's send (link_put_msg_mapped),
 * staged bytes (CMA) or a staging chunk (GPU) are queued behind it.  A
 * failure leaves the stream out of step: the caller ends the link.
 */
static int put_frame(struct link *l, Xfer__Peer__PeerMsg *m, struct region *r,
		     uint64_t off, uint64_t n, struct staging_chunk *c,
		     struct evbuffer *staged)
{
	if (!c && !staged && n && region_kind(r) == REGION_MEMFD)
		return link_put_msg_mapped(l, m, r, region_map_at(r, off),
					   (uint32_t)n);
	int err = link_put_msg(l, m, (uint32_t)n);
	if (!err && c)
		err = staged_queue_chunk(l, c);
	else if (!err && staged)
		err = evbuffer_add_buffer(bufferevent_get_output(l->bev),
					  staged) ? -ENOMEM : 0;
	if (staged)
		evbuffer_free(staged);
	return err;
}

/* Who notifies with op: the client of ours that submitted it (the peer
 * adds our instance id, the link's). */
static void sender_to(const struct xop *op, Xfer__Peer__Sender *snd)
{
	xfer__peer__sender__init(snd);
	snd->client = op->sender_client;
	snd->uid = op->sender_uid;
}

/* The sender of a notification that came over l: the peer's word for
 * its client, our link's for its node (never the peer's). */
static struct xfer_cqe_sender sender_from(const struct link *l,
					  const Xfer__Peer__Sender *snd)
{
	struct xfer_cqe_sender from = {
		.client = snd ? snd->client : 0,
		.uid = snd ? snd->uid : 0,
		.flags = XFER_SENDER_F_REMOTE,
	};

	memcpy(from.node, l->peer->id, sizeof(from.node));
	return from;
}

/* Queue the next frame of op; false if op ended meanwhile. */
static bool send_frame(struct link *l, struct xop *op)
{
	const struct token *tok = region_token(op->remote);
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Target t;
	target_from(tok, &t);

	/* In the hash before any frame: if the link fails while we queue,
	 * failing the link ends this operation too. */
	if (!op->tcp.in_hash)
		hash_add(l, op);
	switch (op->opcode) {
	case XFER_OP_WRITE: {
		Xfer__Peer__WriteChunk w = XFER__PEER__WRITE_CHUNK__INIT;
		Xfer__Peer__Sender snd;
		uint64_t n = op->len - op->tcp.done;
		struct staging_chunk *c = NULL;
		if (op->tcp.send) {
			/* GPU memory: its next chunk, if its copy is done. */
			int err;
			c = staged_send_next(op->tcp.send, &err);
			if (err) {
				op_end(l->ls, l, op, err);
				return false;
			}
			if (!c) {
				op->tcp.parked = true;  /* tcp_unpark */
				op->tcp.sent_all = false;
				return true;
			}
			n = c->len;
		} else if (n > l->ls->cfg.tcp_chunk) {
			n = l->ls->cfg.tcp_chunk;
		}
		w.op = op->tcp.id;
		w.target = &t;
		w.at = op->remote_off + op->tcp.done;
		w.last = op->tcp.done + n == op->len;
		w.notify = op->notify && w.last;
		w.notify_value = op->notify_value;
		if (w.notify) {
			sender_to(op, &snd);
			w.sender = &snd;
		}
		w.total = op->len;
		m.body_case = XFER__PEER__PEER_MSG__BODY_WRITE;
		m.write = &w;
		struct evbuffer *staged = NULL;
		int err = c ? 0 : stage_payload(op->local,
						op->local_off + op->tcp.done, n,
						&staged);
		if (err) {
			op_end(l->ls, l, op, err);  /* its client's memory */
			return false;
		}
		if (put_frame(l, &m, op->local, op->local_off + op->tcp.done,
			      n, c, staged)) {
			link_fail(l, -ENOMEM, "cannot queue a frame");
			return false;
		}
		op->tcp.done += n;
		op->tcp.sent_all = w.last;
		stat_add(&l->stats->bytes_tx, n);
		break;
	}
	case XFER_OP_READ: {
		Xfer__Peer__ReadRequest r = XFER__PEER__READ_REQUEST__INIT;
		r.op = op->tcp.id;
		r.source = &t;
		r.at = op->remote_off;
		r.length = op->len;
		m.body_case = XFER__PEER__PEER_MSG__BODY_READ;
		m.read = &r;
		if (link_put_msg(l, &m, 0)) {
			link_fail(l, -ENOMEM, "cannot queue a frame");
			return false;
		}
		op->tcp.sent_all = true;
		break;
	}
	case XFER_OP_NOTIFY: {
		Xfer__Peer__Notify nt = XFER__PEER__NOTIFY__INIT;
		Xfer__Peer__Sender snd;
		sender_to(op, &snd);
		nt.sender = &snd;
		nt.op = op->tcp.id;
		nt.target = &t;
		nt.value = op->notify_value;
		nt.bytes = op->notify_bytes;
		m.body_case = XFER__PEER__PEER_MSG__BODY_NOTIFY;
		m.notify = &nt;
		if (link_put_msg(l, &m, 0)) {
			link_fail(l, -ENOMEM, "cannot queue a frame");
			return false;
		}
		op->tcp.sent_all = true;
		break;
	}
	}
	return true;
}

/* --- serving the peer's reads --- */

static void serve_free(struct serve *s)
{
	staged_send_free(s->send);
	region_put(s->r);
	free(s);
}

/* A ReadData frame with payload bytes [off, off + payload) of r (see
 * put_frame), or without payload (r NULL). */
static int read_data_frame(struct link *l, uint64_t op, uint64_t at,
			   bool last, int64_t result, struct region *r,
			   uint64_t off, uint32_t payload,
			   struct staging_chunk *c, struct evbuffer *staged)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__ReadData d = XFER__PEER__READ_DATA__INIT;

	d.op = op;
	d.at = at;
	d.last = last;
	d.result = result;
	m.body_case = XFER__PEER__PEER_MSG__BODY_READ_DATA;
	m.read_data = &d;
	return r ? put_frame(l, &m, r, off, payload, c, staged)
		 : link_put_msg(l, &m, 0);
}

/* A ReadData frame without payload: the end of a read, or its error. */
static void read_data(struct link *l, uint64_t op, uint64_t at, bool last,
		      int64_t result)
{
	read_data_frame(l, op, at, last, result, NULL, 0, 0, NULL, NULL);
}

enum serve_state { SERVE_MORE, SERVE_DONE, SERVE_PARKED };

/* One ReadData frame of s; SERVE_DONE when s is finished (and freed),
 * SERVE_PARKED when its next staged chunk is not ready yet. */
static enum serve_state serve_frame(struct link *l, struct serve *s)
{
	uint64_t n = s->len - s->done;
	struct staging_chunk *c = NULL;
	struct evbuffer *staged = NULL;
	int err = 0;

	if (s->send) {
		c = staged_send_next(s->send, &err);
		if (!c && !err)
			return SERVE_PARKED;
		if (c)
			n = c->len;
	} else if (n > l->ls->cfg.tcp_chunk) {
		n = l->ls->cfg.tcp_chunk;
	}
	bool last = s->done + n == s->len;
	if (!c && !err)
		err = stage_payload(s->r, s->off + s->done, n, &staged);
	if (err) {
		/* The owner's memory went away: this read fails, not the
		 * link. */
		read_data(l, s->op, s->done, true, err);
		serve_free(s);
		return SERVE_DONE;
	}
	if (read_data_frame(l, s->op, s->done, last, (int64_t)n, s->r,
			    s->off + s->done, (uint32_t)n, c, staged)) {
		serve_free(s);
		link_fail(l, -ENOMEM, "cannot queue a frame");
		return SERVE_DONE;
	}
	s->done += n;
	stat_add(&l->stats->bytes_tx, n);
	if (!last)
		return SERVE_MORE;
	serve_free(s);
	return SERVE_DONE;
}

/*
 * Queue frames round-robin until the output buffer is full enough.  The
 * frames of one fill are corked and written together at its end (and
 * every SINGLE_IO bytes): one writev for a burst of frames rather than a
 * send each, and no wait for the event loop's next turn.  A lone small
 * frame still goes at once (send_now in link.c).
 */
void tcp_fill(struct link *l)
{
	struct evbuffer *out;

	l->corked = true;
	l->cork_used = false;
	while (l->bev && (out = bufferevent_get_output(l->bev)) &&
	       evbuffer_get_length(out) < OUT_HIGH) {
		struct xop *op = TAILQ_FIRST(&l->sendq);
		struct serve *s = TAILQ_FIRST(&l->serveq);
		if (!op && !s)
			break;
		if (evbuffer_get_length(out) >= SINGLE_IO)
			link_flush(l);
		l->serve_turn = !l->serve_turn;
		if (s && (l->serve_turn || !op)) {
			TAILQ_REMOVE(&l->serveq, s, q);
			switch (serve_frame(l, s)) {
			case SERVE_MORE:
				TAILQ_INSERT_TAIL(&l->serveq, s, q);
				break;
			case SERVE_PARKED:
				s->parked = true;  /* tcp_unpark */
				TAILQ_INSERT_TAIL(&l->parkedq, s, q);
				break;
			case SERVE_DONE:
				break;
			}
			continue;
		}
		TAILQ_REMOVE(&l->sendq, op, q);
		op->tcp.sent_all = true;  /* out of the queue while we look */
		if (!send_frame(l, op))
			continue;  /* op ended (or the link: bev is NULL) */
		if (!op->tcp.sent_all && !op->tcp.parked)
			TAILQ_INSERT_TAIL(&l->sendq, op, q);
	}
	l->corked = false;
	link_flush(l);
}

void tcp_unpark(struct staged_send *ss, bool fill_now)
{
	struct link *l = ss->l;

	if (ss->op) {
		struct xop *op = ss->op;
		if (!op->tcp.parked)
			return;
		op->tcp.parked = false;
		TAILQ_INSERT_TAIL(&l->sendq, op, q);
	} else {
		struct serve *s = ss->s;
		if (!s->parked)
			return;
		s->parked = false;
		TAILQ_REMOVE(&l->parkedq, s, q);
		TAILQ_INSERT_TAIL(&l->serveq, s, q);
	}
	if (fill_now)
		tcp_fill(l);
	else
		link_kick(l);
}

static void tcp_start_op(struct link *l, struct xop *op)
{
	op->tcp.id = ++l->next_id;
	op->tcp.done = 0;
	op->tcp.sent_all = false;
	op->tcp.parked = false;
	/* GPU memory of ours: its chunks start moving now. */
	if (op->local && region_kind(op->local) == REGION_CUDA && op->len) {
		int err = -ENOTSUP;
		if (!staged_reachable(l->ls, op->local))
			;
		else if (op->opcode == XFER_OP_WRITE &&
			 (op->tcp.send = staged_send_new(l, op->local,
							  op->local_off,
							  op->len)))
			op->tcp.send->op = op, err = 0;
		else if (op->opcode == XFER_OP_READ &&
			 (op->tcp.rx = staged_rx_new(l, op->local)))
			op->tcp.rx->xop = op, err = 0;
		else
			err = -ENOMEM;
		if (err) {
			op->tcp.sent_all = true;  /* in no queue */
			op_end(l->ls, l, op, err);
			return;
		}
	}
	TAILQ_INSERT_TAIL(&l->sendq, op, q);
}

/* --- receiving: the peer's frames --- */

static bool is_failed(struct link *l, uint64_t op)
{
	for (size_t i = 0; i < l->nfailed; i++)
		if (l->failed[i] == op)
			return true;
	return false;
}

static void forget_failed(struct link *l, uint64_t op)
{
	for (size_t i = 0; i < l->nfailed; i++)
		if (l->failed[i] == op) {
			l->failed[i] = l->failed[--l->nfailed];
			return;
		}
}

static int remember_failed(struct link *l, uint64_t op)
{
	if (l->nfailed == l->capfailed) {
		size_t cap = l->capfailed ? 2 * l->capfailed : 16;
		if (cap > 65536)
			return -EPROTO;  /* a peer that never ends its writes */
		uint64_t *f = realloc(l->failed, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		l->failed = f;
		l->capfailed = cap;
	}
	l->failed[l->nfailed++] = op;
	return 0;
}

/*
 * Notify r's owner of bytes that landed for a peer's write: the write's
 * answer is its bytes, or why the owner will not hear of them (-ENOBUFS:
 * the data is in place, the notification did not fit).
 */
static int64_t notify_result(struct link *l, struct region *r, uint64_t value,
			     int64_t bytes, const struct xfer_cqe_sender *from)
{
	int err = l->ls->hooks.notify_local(l->ls->hooks.arg, r, value, bytes,
					    from);

	return err ? err : bytes;
}

static void write_ack(struct link *l, uint64_t op, int64_t result)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__WriteAck a = XFER__PEER__WRITE_ACK__INIT;

	a.op = op;
	a.result = result;
	m.body_case = XFER__PEER__PEER_MSG__BODY_WRITE_ACK;
	m.write_ack = &a;
	link_put_msg(l, &m, 0);
}

/* The payload of the current frame goes to region r at off (r NULL:
 * dropped, reporting err at the end). */
static void sink_start(struct link *l, uint32_t plen, struct region *r,
		       uint64_t off, int err)
{
	struct rx_sink *k = &l->sink;

	k->active = true;
	k->left = k->len = plen;
	k->r = r;
	k->off = off;
	k->err = err;
	stat_add(&l->stats->bytes_rx, plen);
}

/* Up to n bytes of payload from p. */
size_t tcp_sink_put(struct link *l, const uint8_t *p, size_t n)
{
	struct rx_sink *k = &l->sink;

	if (k->r && !k->err && k->srx)
		return staged_sink_put(l, p, n);
	if (k->r && !k->err) {
		if (region_kind(k->r) == REGION_MEMFD) {
			memcpy(region_map_at(k->r, k->off), p, n);
		} else if (!host_reachable(k->r)) {
			k->err = -ENOTSUP;
		} else {
			int64_t put = cma_copy(k->r, true, (void *)p, k->off, n);
			if (put < 0)
				k->err = (int)put;
		}
	}
	k->off += n;
	k->left -= n;
	return n;
}

bool tcp_sink_direct(struct link *l, uint8_t **dst, size_t *room)
{
	struct rx_sink *k = &l->sink;

	if (!k->active || !k->r || k->err || k->left == 0 ||
	    l->rx_off != l->rx_len)
		return false;
	if (k->srx)
		return staged_sink_direct(l, dst, room);
	if (region_kind(k->r) != REGION_MEMFD)
		return false;
	*dst = region_map_at(k->r, k->off);
	*room = (size_t)k->left;
	return true;
}

void tcp_sink_landed(struct link *l, size_t n)
{
	struct rx_sink *k = &l->sink;

	if (k->srx) {
		staged_sink_landed(l, n);
		return;
	}
	k->off += n;
	k->left -= n;
}

/* Every byte of srx landed in GPU memory, or failed to. */
void tcp_rx_complete(struct staged_rx *srx)
{
	struct link *l = srx->l;

	if (srx->xop) {
		/* Our read: it ends now (its link is up: else it had ended). */
		struct xop *op = srx->xop;
		srx->xop = NULL;
		op->tcp.rx = NULL;
		op_end(l->ls, l, op, srx->err ? srx->err : (int64_t)op->len);
		staged_rx_put(srx);  /* the read's reference */
		return;
	}
	if (!srx->listed)
		return;  /* the link went, or the peer aborted it */
	TAILQ_REMOVE(&l->rx_writes, srx, q);
	srx->listed = false;
	if (l->bev) {
		int64_t result = srx->err ? srx->err : (int64_t)srx->total;
		/* Before the ack: it says whether the owner will hear. */
		if (!srx->err && srx->notify)
			result = notify_result(l, srx->r, srx->notify_value,
					       result, &srx->notify_from);
		write_ack(l, srx->op, result);
	}
	staged_rx_put(srx);  /* the list's */
}

/* The peer's write op into our GPU memory r: its landing state. */
static struct staged_rx *rx_write_of(struct link *l, uint64_t op,
				     struct region *r)
{
	struct staged_rx *srx;

	TAILQ_FOREACH(srx, &l->rx_writes, q)
		if (srx->op == op)
			return srx;
	if (!(srx = staged_rx_new(l, r)))
		return NULL;
	srx->op = op;
	srx->listed = true;
	TAILQ_INSERT_TAIL(&l->rx_writes, srx, q);
	return srx;
}

/* The whole payload is in: acknowledge, notify, end our read. */
void tcp_sink_finish(struct link *l)
{
	struct rx_sink *k = &l->sink;

	k->active = false;
	if (k->srx) {
		/* GPU memory: the last chunk's copy starts; what ends
		 * waits for every copy (tcp_rx_complete). */
		struct staged_rx *srx = k->srx;
		staged_sink_flush(l);
		k->srx = NULL;
		struct xop *op = k->xop;
		k->xop = NULL;
		region_put(k->r);
		k->r = NULL;
		if (k->err && !srx->err)
			srx->err = k->err;
		if (op)
			op->tcp.done += k->len;
		if (k->is_write && k->last) {
			srx->total = k->total;
			srx->notify = k->notify;
			srx->notify_value = k->notify_value;
			srx->notify_from = k->notify_from;
		}
		if (k->last)
			staged_rx_all_in(srx);
		staged_rx_put(srx);  /* the sink's */
		return;
	}
	if (k->is_write) {
		if (!k->r && !k->err) {
			/* An operation that had failed before: drop silently. */
			if (k->last)
				forget_failed(l, k->op);
		} else if (k->err) {
			write_ack(l, k->op, k->err);
			if (!k->last && remember_failed(l, k->op))
				link_fail(l, -EPROTO, "too many failed writes");
		} else if (k->last) {
			int64_t result = (int64_t)k->total;
			if (k->notify)
				result = notify_result(l, k->r, k->notify_value,
						       result, &k->notify_from);
			write_ack(l, k->op, result);
		}
	} else if (k->xop) {
		struct xop *op = k->xop;
		op->tcp.done += k->len;
		if (k->err)
			op_end(l->ls, l, op, k->err);  /* our client's memory went */
		else if (k->last)
			op_end(l->ls, l, op, (int64_t)op->len);
	}
	region_put(k->r);
	k->r = NULL;
	k->xop = NULL;
}

/* A WriteChunk of the peer; its plen payload bytes follow. */
int tcp_on_write(struct link *l, const Xfer__Peer__WriteChunk *w,
		    uint32_t plen)
{
	struct token tok;
	struct region *r = NULL;
	uint64_t off = 0;
	int err = 0;

	if (plen > w->total)
		return -EPROTO;  /* a chunk larger than its whole operation */
	l->sink = (struct rx_sink){ .is_write = true, .op = w->op,
				    .last = w->last, .notify = w->notify,
				    .notify_value = w->notify_value,
				    .total = w->total };
	if (w->notify)
		l->sink.notify_from = sender_from(l, w->sender);
	if (!is_failed(l, w->op)) {
		if (token_from(l->ls, w->target, &tok))
			return -EPROTO;
		err = resolve_data(l, &tok, w->at, plen, &r, &off);
		if (err == -EACCES || err == -ERANGE)
			return -EPROTO;
	}
	/* An error here (-ESTALE) fails this operation only. */
	sink_start(l, plen, r, off, err);
	if (r && region_kind(r) == REGION_CUDA) {
		/* Our GPU memory: through receive chunks (staged.c). */
		struct staged_rx *srx = rx_write_of(l, w->op, r);
		if (!srx) {
			l->sink.err = -ENOMEM;
			return 0;
		}
		srx->refs++;
		l->sink.srx = srx;
	}
	return 0;
}

int tcp_on_read_request(struct link *l, const Xfer__Peer__ReadRequest *rq)
{
	struct token tok;
	struct region *r;
	uint64_t off;

	if (token_from(l->ls, rq->source, &tok))
		return -EPROTO;
	int err = resolve_data(l, &tok, rq->at, rq->length, &r, &off);
	if (err == -EACCES || err == -ERANGE)
		return -EPROTO;
	if (err) {
		read_data(l, rq->op, 0, true, err);
		return 0;
	}
	struct serve *s = calloc(1, sizeof(*s));
	if (!s) {
		region_put(r);
		read_data(l, rq->op, 0, true, -ENOMEM);
		return 0;
	}
	*s = (struct serve){ .op = rq->op, .r = r, .off = off,
			     .len = rq->length };
	if (region_kind(r) == REGION_CUDA && rq->length) {
		/* Our GPU memory: staged, a few chunks ahead. */
		s->send = staged_send_new(l, r, off, rq->length);
		if (!s->send) {
			serve_free(s);
			read_data(l, rq->op, 0, true, -ENOMEM);
			return 0;
		}
		s->send->s = s;
	}
	TAILQ_INSERT_TAIL(&l->serveq, s, q);
	return 0;
}

/* Payload of a read of ours follows. */
int tcp_on_read_data(struct link *l, const Xfer__Peer__ReadData *d,
			uint32_t plen)
{
	struct xop *op = hash_find(l, d->op);

	l->sink = (struct rx_sink){ .last = d->last };
	if (!op || op->opcode != XFER_OP_READ) {
		/* It timed out or was cancelled meanwhile: drop the bytes. */
		sink_start(l, plen, NULL, 0, 0);
		return 0;
	}
	if (d->result < 0) {
		if (plen)
			return -EPROTO;
		op_end(l->ls, l, op, d->result);
		return 0;
	}
	if (d->at != op->tcp.done || plen > op->len - op->tcp.done ||
	    (uint64_t)d->result != plen || (d->last && op->tcp.done + plen != op->len))
		return -EPROTO;
	region_get(op->local);
	l->sink.xop = op;
	sink_start(l, plen, op->local, op->local_off + op->tcp.done, 0);
	if (op->tcp.rx) {
		op->tcp.rx->refs++;
		l->sink.srx = op->tcp.rx;
	}
	return 0;
}

int tcp_on_ack(struct link *l, const Xfer__Peer__WriteAck *a)
{
	struct xop *op = hash_find(l, a->op);

	if (!op)
		return 0;  /* ended already (deadline) */
	if (op->opcode == XFER_OP_READ)
		return -EPROTO;
	if (a->result >= 0 && !op->tcp.sent_all)
		return -EPROTO;  /* success before the last chunk */
	op_end(l->ls, l, op, a->result >= 0 ? (int64_t)op->len : a->result);
	return 0;
}

int tcp_on_notify(struct link *l, const Xfer__Peer__Notify *nt)
{
	struct token tok;
	struct region *r;
	uint64_t off;

	if (token_from(l->ls, nt->target, &tok))
		return -EPROTO;
	int err = resolve(l, &tok, 0, 0, &r, &off);
	if (err == -EACCES || err == -ERANGE)
		return -EPROTO;
	if (!err) {
		/* A refusal (-ENOBUFS: its owner holds notify_queue_max
		 * already) is this operation's answer, not the link's. */
		const struct xfer_cqe_sender from = sender_from(l, nt->sender);
		err = l->ls->hooks.notify_local(l->ls->hooks.arg, r, nt->value,
						(int64_t)nt->bytes, &from);
		region_put(r);
	}
	write_ack(l, nt->op, err);
	return 0;
}

void tcp_on_abort(struct link *l, uint64_t op)
{
	forget_failed(l, op);
	struct serve *s;
	TAILQ_FOREACH(s, &l->serveq, q) {
		if (s->op == op) {
			TAILQ_REMOVE(&l->serveq, s, q);
			serve_free(s);
			return;
		}
	}
	TAILQ_FOREACH(s, &l->parkedq, q) {
		if (s->op == op) {
			TAILQ_REMOVE(&l->parkedq, s, q);
			serve_free(s);
			return;
		}
	}
	/* A write into our GPU memory: no ack for it; copies still out
	 * end on their own. */
	struct staged_rx *srx;
	TAILQ_FOREACH(srx, &l->rx_writes, q) {
		if (srx->op == op) {
			if (l->sink.srx == srx)
				sink_drop(l);
			TAILQ_REMOVE(&l->rx_writes, srx, q);
			srx->listed = false;
			staged_rx_put(srx);
			return;
		}
	}
}

void tcp_on_check(struct link *l, const Xfer__Peer__CheckToken *c)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__CheckReply rep = XFER__PEER__CHECK_REPLY__INIT;
	Xfer__Peer__RdmaMemory mem = XFER__PEER__RDMA_MEMORY__INIT;
	uint32_t rkeys[REGION_RDMA_KEYS];
	struct token tok;
	struct region *r;
	uint64_t off;

	rep.id = c->id;
	rep.error = token_from(l->ls, c->target, &tok) ? -EINVAL : 0;
	if (!rep.error) {
		/* Always the full key check: this is what it is for. */
		rep.error = regtab_resolve_token(l->ls->regs, &tok, 0, 0, true,
						 &r, &off);
	}
	if (!rep.error) {
		/* How the other transports reach the token's range (RDMA:
		 * the rkeys of a grant of it to this peer, on this link). */
		const struct describe_req q = {
			.peer = l->peer->id, .link_gen = l->gen,
			.check_id = c->id, .off = off, .len = tok.length,
		};
		enum describe_result d = l->ls->hooks.describe(
			l->ls->hooks.arg, r, &q, &mem, rkeys, REGION_RDMA_KEYS);
		region_put(r);
		if (d == DESCRIBE_LATER)
			return;  /* that transport answers */
		if (d == DESCRIBE_FILLED)
			rep.rdma = &mem;
	}
	m.body_case = XFER__PEER__PEER_MSG__BODY_CHECK_REPLY;
	m.check_reply = &rep;
	link_put_msg(l, &m, 0);
}

static void linkset_submit(struct linkset *ls, struct xop *op)
{
	const struct token *tok = region_token(op->remote);
	struct rpeer *rp = link_find_peer(ls, tok->instance_id, true);

	if (!rp) {
		ls->hooks.op_done(ls->hooks.arg, op, -ENOMEM);
		return;
	}
	if (rp->link) {
		tcp_start_op(rp->link, op);
		tcp_fill(rp->link);
		return;
	}
	op->tcp.sent_all = true;  /* not in a send queue */
	TAILQ_INSERT_TAIL(&rp->pending, op, q);
	if (!rp->asked) {
		rp->asked = true;
		ls->hooks.need_peer(ls->hooks.arg, tok);
	}
}

/*
 * End every operation `want` picks with result; returns how many.  The
 * saved `next` pointers stay valid because ending an operation with an
 * error never starts another one nor fails a link: a batch that fails
 * sends no notification.
 */
static unsigned each_op(struct linkset *ls,
			bool (*want)(const struct xop *op, const void *arg),
			const void *arg, int64_t result)
{
	unsigned n = 0;

	for (struct rpeer *rp = ls->peers; rp; rp = rp->next) {
		struct xop *op, *next;
		for (op = TAILQ_FIRST(&rp->pending); op; op = next) {
			next = TAILQ_NEXT(op, q);
			if (want(op, arg)) {
				TAILQ_REMOVE(&rp->pending, op, q);
				ls->hooks.op_done(ls->hooks.arg, op, result);
				n++;
			}
		}
		struct link *l = rp->link;
		if (!l)
			continue;
		for (op = TAILQ_FIRST(&l->sendq); op; op = next) {
			next = TAILQ_NEXT(op, q);
			if (want(op, arg)) {
				op_end(ls, l, op, result);
				n++;
			}
		}
		for (unsigned b = 0; b < OP_HASH; b++) {
			for (op = l->hash[b]; op; op = next) {
				next = op->tcp.hnext;
				if (want(op, arg)) {
					op_end(ls, l, op, result);
					n++;
				}
			}
		}
	}
	return n;
}

static bool of_client(const struct xop *op, const void *arg)
{
	return op->pc == arg;
}

static void linkset_cancel_client(struct linkset *ls, const struct prog_client *pc)
{
	each_op(ls, of_client, pc, -ECANCELED);
}

static bool expired(const struct xop *op, const void *arg)
{
	return op->deadline_ns <= *(const uint64_t *)arg;
}

static bool linkset_expire(struct linkset *ls, uint64_t now)
{
	bool any = each_op(ls, expired, &now, -ETIMEDOUT) > 0;

	/* Nothing waits for a link any more: the next operation asks the
	 * main thread again (its answer may have been lost). */
	for (struct rpeer *rp = ls->peers; rp; rp = rp->next)
		if (!rp->link && TAILQ_EMPTY(&rp->pending))
			rp->asked = false;
	return any;
}

/* --- the link's life, as it concerns data (link_int.h) --- */

void tcp_peer_init(struct rpeer *rp)
{
	TAILQ_INIT(&rp->pending);
}

void tcp_link_init(struct link *l)
{
	TAILQ_INIT(&l->sendq);
	TAILQ_INIT(&l->serveq);
	TAILQ_INIT(&l->parkedq);
	TAILQ_INIT(&l->rx_writes);
}

void tcp_link_up(struct link *l)
{
	struct xop *op;

	while ((op = TAILQ_FIRST(&l->peer->pending))) {
		TAILQ_REMOVE(&l->peer->pending, op, q);
		tcp_start_op(l, op);
	}
}

void tcp_link_failed(struct link *l, int err)
{
	struct xop *op;

	while ((op = TAILQ_FIRST(&l->sendq)))
		op_end(l->ls, l, op, err);
	for (unsigned b = 0; b < OP_HASH; b++)
		while ((op = l->hash[b]))
			op_end(l->ls, l, op, err);
	tcp_fail_pending(l->ls, l->peer, err);
}

void tcp_link_free(struct link *l)
{
	struct serve *s;

	while ((s = TAILQ_FIRST(&l->serveq))) {
		TAILQ_REMOVE(&l->serveq, s, q);
		serve_free(s);
	}
	while ((s = TAILQ_FIRST(&l->parkedq))) {
		TAILQ_REMOVE(&l->parkedq, s, q);
		serve_free(s);
	}
	/* The peer's writes into our GPU memory: their copies still out
	 * end without an ack (the link is gone). */
	sink_drop(l);
	struct staged_rx *srx;
	while ((srx = TAILQ_FIRST(&l->rx_writes))) {
		TAILQ_REMOVE(&l->rx_writes, srx, q);
		srx->listed = false;
		srx->l = NULL;
		staged_rx_put(srx);
	}
	free(l->failed);
}

void tcp_set_staging(struct linkset *ls, struct staging_pool *sp,
		     struct gpu_copies *gpu)
{
	ls->staging = sp;
	ls->gpu = gpu;
}

/* --- as a transport (transport.h): the path of last resort --- */

static bool tcp_accepts(void *impl, const struct xop *op)
{
	(void)impl, (void)op;
	return true;
}

static void tcp_submit(void *impl, struct xop *op)
{
	memset(&op->tcp, 0, sizeof(op->tcp));
	/* A notification after RDMA data keeps the path that moved it. */
	if (op->path == XFER_PATH_NONE)
		op->path = (op->local && region_kind(op->local) == REGION_CUDA) ||
				   (op->opcode != XFER_OP_NOTIFY &&
				    region_token(op->remote)->mem_kind == REGION_CUDA)
			   ? XFER_PATH_TCP_STAGED : XFER_PATH_TCP;
	linkset_submit(impl, op);
}

static void tcp_cancel_client(void *impl, const struct prog_client *pc)
{
	linkset_cancel_client(impl, pc);
}

static bool tcp_expire(void *impl, uint64_t now_ns)
{
	return linkset_expire(impl, now_ns);
}

/* Its progress happens in the thread's event loop: report it. */
static bool tcp_poll(void *impl)
{
	return linkset_take_events(impl) > 0;
}

static bool tcp_needs_loop(const void *impl)
{
	return linkset_active(impl);
}

static void tcp_set_cfg(void *impl, const struct transport_cfg *cfg)
{
	struct linkset_cfg c = {
		.keepalive_ms = cfg->keepalive_ms,
		.peer_timeout_ms = cfg->peer_timeout_ms,
		.tcp_chunk = cfg->tcp_chunk,
	};
	memcpy(c.self_id, cfg->self_id, LINK_ID_LEN);
	linkset_set_cfg(impl, &c);
}

static void tcp_destroy(void *impl)
{
	linkset_destroy(impl);
}

const struct mover_ops tcp_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "tcp",
	.move_now = mover_stub_move_now,
	.move_list = mover_stub_move_list,
	.accepts = tcp_accepts,
	.submit = tcp_submit,
	.cancel_client = tcp_cancel_client,
	.expire = tcp_expire,
	.poll = tcp_poll,
	.arm = mover_stub_arm,
	.needs_loop = tcp_needs_loop,
	/* Its links come and go through linkset_attach/_close. */
	.peer_up = mover_stub_peer_up,
	.peer_down = mover_stub_peer_down,
	.frame = mover_stub_frame,
	.describe = mover_stub_describe,
	.set_cfg = tcp_set_cfg,
	.destroy = tcp_destroy,
};
