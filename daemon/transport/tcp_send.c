/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_send.c - the TCP mover's sending side, in the progress thread:
 * this side's operations queued on their link and their frames filled,
 * and the reads the peer asked of us served, one frame at a time in the
 * order tcp_sched.c gives (latency first, then round-robin, tenants by
 * weight) while the socket's output buffer is below LINK_OUT_HIGH, or
 * less for bulk while latency traffic runs (the session calls tcp_fill
 * again as it drains).
 *
 * A frame's payload from a memfd region goes to the socket by reference
 * (no copy in xferd); CMA memory is read into a buffer before its
 * frame's header is queued; GPU memory goes as a stream of D2H-filled
 * staging chunks pulled from a pipeline (tcp_staged.c), its op or serve
 * parked off its queue while the next chunk is not ready.
 *
 * Progress thread only; no locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "core/thread_stats.h"
#include "mem/cma.h"
#include "mem/region.h"
#include "transport/tcp_int.h"

/* --- sending this side's operations --- */

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
		/* Not committed yet: no one sees it before the check. */
		int64_t got = cma_read_private(r, v[i].iov_base, off + done,
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
	if (!tcp_host_reachable(r))
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
 * staged bytes (CMA) or a staging chunk (GPU, the caller's: it goes to
 * the socket or back to the pool) are queued behind it.  A failure
 * leaves the stream out of step: the caller ends the link.
 */
static int put_frame(struct tcp_link *tl, Xfer__Peer__PeerMsg *m,
		     struct region *r, uint64_t off, uint64_t n,
		     struct stage_chunk *c, struct evbuffer *staged)
{
	if (!c && !staged && n && region_kind(r) == REGION_MEMFD)
		return link_put_msg_mapped(tl->l, m, r, region_map_at(r, off),
					   (uint32_t)n);
	int err = link_put_msg(tl->l, m, (uint32_t)n);
	if (c && err)
		pipeline_chunk_release(c);
	else if (c)
		err = staged_queue_chunk(tl, c);
	else if (!err && staged)
		err = link_queue_buffer(tl->l, staged);
	if (staged)
		evbuffer_free(staged);
	return err;
}

/* Who notifies with op: the client of ours that submitted it (the peer
 * adds our instance id, the link's), its name; and the message. */
static void sender_to(const struct xop *op, Xfer__Peer__Sender *snd,
		      ProtobufCBinaryData *msg)
{
	const struct notify_msg *m = op->notify_msg;

	xfer__peer__sender__init(snd);
	snd->client = op->sender_client;
	snd->uid = op->sender_uid;
	if (m) {
		snd->name.data = (uint8_t *)m->name;
		snd->name.len = m->name_len;
		msg->data = (uint8_t *)m->data;
		msg->len = m->len;
	}
}

/* Queue the next frame of op; false if op ended meanwhile. */
static bool send_frame(struct tcp_link *tl, struct xop *op)
{
	const struct token *tok = region_token(op->remote);
	struct tcp_op *to = tcp_op(op);
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Target t;
	link_target_of(tok, &t);

	/* In the hash before any frame: if the link fails while we queue,
	 * failing the link ends this operation too. */
	if (!to->in_hash)
		tcp_hash_add(tl, op);
	switch (op->opcode) {
	case XFER_OP_WRITE: {
		Xfer__Peer__WriteChunk w = XFER__PEER__WRITE_CHUNK__INIT;
		Xfer__Peer__Sender snd;
		uint64_t n = op->len - to->done;
		struct stage_chunk *c = NULL;
		if (to->send) {
			/* GPU memory: its next chunk, if its copy is done. */
			int err;
			c = staged_send_next(to->send, &err);
			if (err) {
				tcp_op_end(tl, op, err);
				return false;
			}
			if (!c) {
				to->parked = true;  /* tcp_unpark */
				to->sent_all = false;
				return true;
			}
			n = c->len;
		} else if (n > tl->frame_max) {
			n = tl->frame_max;
		}
		w.op = to->id;
		w.cls = op->cls;
		w.target = &t;
		w.at = op->remote_off + to->done;
		w.last = to->done + n == op->len;
		w.notify = op->notify && w.last;
		w.notify_value = op->notify_value;
		if (w.notify) {
			sender_to(op, &snd, &w.message);
			w.sender = &snd;
		}
		w.total = op->len;
		m.body_case = XFER__PEER__PEER_MSG__BODY_WRITE;
		m.write = &w;
		struct evbuffer *staged = NULL;
		int err = c ? 0 : stage_payload(op->local,
						op->local_off + to->done, n,
						&staged);
		if (err) {
			tcp_op_end(tl, op, err);  /* its client's memory */
			return false;
		}
		if (put_frame(tl, &m, op->local, op->local_off + to->done,
			      n, c, staged)) {
			link_fail(tl->l, -ENOMEM, "cannot queue a frame");
			return false;
		}
		to->done += n;
		to->sent_all = w.last;
		stat_add(&link_stats(tl->l)->bytes_tx, n);
		break;
	}
	case XFER_OP_READ: {
		Xfer__Peer__ReadRequest r = XFER__PEER__READ_REQUEST__INIT;
		r.op = to->id;
		r.source = &t;
		r.at = op->remote_off;
		r.length = op->len;
		r.cls = op->cls;
		m.body_case = XFER__PEER__PEER_MSG__BODY_READ;
		m.read = &r;
		if (link_put_msg(tl->l, &m, 0)) {
			link_fail(tl->l, -ENOMEM, "cannot queue a frame");
			return false;
		}
		to->sent_all = true;
		break;
	}
	case XFER_OP_NOTIFY: {
		Xfer__Peer__Notify nt = XFER__PEER__NOTIFY__INIT;
		Xfer__Peer__Sender snd;
		sender_to(op, &snd, &nt.message);
		nt.sender = &snd;
		nt.op = to->id;
		nt.target = &t;
		nt.value = op->notify_value;
		nt.bytes = op->notify_bytes;
		nt.cls = op->cls;
		m.body_case = XFER__PEER__PEER_MSG__BODY_NOTIFY;
		m.notify = &nt;
		if (link_put_msg(tl->l, &m, 0)) {
			link_fail(tl->l, -ENOMEM, "cannot queue a frame");
			return false;
		}
		to->sent_all = true;
		break;
	}
	}
	return true;
}

/* --- serving the peer's reads --- */

void tcp_serve_free(struct serve *s)
{
	staged_send_free(s->send);
	region_put(s->r);
	free(s);
}

/* A ReadData frame with payload bytes [off, off + payload) of r (see
 * put_frame), or without payload (r NULL). */
static int read_data_frame(struct tcp_link *tl, uint64_t op, uint64_t at,
			   bool last, int64_t result, struct region *r,
			   uint64_t off, uint32_t payload,
			   struct stage_chunk *c, struct evbuffer *staged)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__ReadData d = XFER__PEER__READ_DATA__INIT;

	d.op = op;
	d.at = at;
	d.last = last;
	d.result = result;
	m.body_case = XFER__PEER__PEER_MSG__BODY_READ_DATA;
	m.read_data = &d;
	return r ? put_frame(tl, &m, r, off, payload, c, staged)
		 : link_put_msg(tl->l, &m, 0);
}

/* A ReadData frame without payload: the end of a read, or its error. */
void tcp_read_data(struct tcp_link *tl, uint64_t op, uint64_t at, bool last,
		      int64_t result)
{
	read_data_frame(tl, op, at, last, result, NULL, 0, 0, NULL, NULL);
}

enum serve_state { SERVE_MORE, SERVE_DONE, SERVE_PARKED };

/* One ReadData frame of s; SERVE_DONE when s is finished (and freed),
 * SERVE_PARKED when its next staged chunk is not ready yet. */
static enum serve_state serve_frame(struct tcp_link *tl, struct serve *s)
{
	uint64_t n = s->len - s->done;
	struct stage_chunk *c = NULL;
	struct evbuffer *staged = NULL;
	int err = 0;

	if (s->send) {
		c = staged_send_next(s->send, &err);
		if (!c && !err)
			return SERVE_PARKED;
		if (c)
			n = c->len;
	} else if (n > tl->frame_max) {
		n = tl->frame_max;
	}
	bool last = s->done + n == s->len;
	if (!c && !err)
		err = stage_payload(s->r, s->off + s->done, n, &staged);
	if (err) {
		/* The owner's memory went away: this read fails, not the
		 * link. */
		tcp_read_data(tl, s->op, s->done, true, err);
		tcp_serve_free(s);
		return SERVE_DONE;
	}
	if (read_data_frame(tl, s->op, s->done, last, (int64_t)n, s->r,
			    s->off + s->done, (uint32_t)n, c, staged)) {
		tcp_serve_free(s);
		link_fail(tl->l, -ENOMEM, "cannot queue a frame");
		return SERVE_DONE;
	}
	s->done += n;
	stat_add(&link_stats(tl->l)->bytes_tx, n);
	if (!last)
		return SERVE_MORE;
	tcp_serve_free(s);
	return SERVE_DONE;
}

/* One frame of the serve at the head of the serve queue. */
static void fill_serve(struct tcp_link *tl, struct serve *s)
{
	TAILQ_REMOVE(&tl->serveq, s, q);
	switch (serve_frame(tl, s)) {
	case SERVE_MORE:
		tcp_sched_serve(tl, s);
		break;
	case SERVE_PARKED:
		s->parked = true;  /* tcp_unpark */
		TAILQ_INSERT_TAIL(&tl->parkedq, s, q);
		break;
	case SERVE_DONE:
		break;
	}
}

/* One frame of op, charged to its tenant (tcp_sched.c). */
static void fill_op(struct tcp_link *tl, struct xop *op, uint64_t now)
{
	struct tcp_op *to = tcp_op(op);
	uint64_t before = to->done;
	const unsigned tenant = op->tenant;

	const bool latency = op->cls == XFER_CLASS_LATENCY;

	tcp_sched_take(tl, op);
	to->sent_all = true;  /* out of the queue while we look */
	if (send_frame(tl, op)) {
		/* A read's bytes come back from the peer: they count now. */
		tcp_sched_sent(tl, op, op->opcode == XFER_OP_READ
					       ? op->len : to->done - before,
			       now);
		if (!to->sent_all && !to->parked)
			tcp_sched_push(tl, op);
	}  /* else op ended (or the link: bev is NULL) */
	if (!latency)
		tcp_sched_settle(tl, tenant);
}

/*
 * Queue frames until the output buffer is full enough: latency frames
 * first (this side's and the peer's reads), then the rest round-robin
 * between the serves and this side's operations, shared by tenant
 * (tcp_sched.c).  The frames of one fill are corked and written
 * together at its end (and every SINGLE_IO bytes): one writev for a
 * burst of frames rather than a send each, and no wait for the event
 * loop's next turn.  A lone small frame still goes at once (the
 * session's send_now).
 */
void tcp_fill(void *cl)
{
	struct tcp_link *tl = cl;
	bool was_filling = tl->filling;
	uint64_t now = now_ns(), wait = 0;
	bool flushed = false;
	size_t budget = link_io_budget(tl->l);
	const uint64_t turn = link_turn_ns(tl->l);

	/* A staged owner unparked meanwhile (its chunk came back inside a
	 * buffer's cleanup, say) is picked up by this loop, or kicked. */
	tl->filling = true;
	tcp_sched_tick(tl, now);
	link_cork(tl->l);
	while (link_alive(tl->l) && link_out_bytes(tl->l) < LINK_OUT_HIGH) {
		size_t out = link_out_bytes(tl->l);
		if (out >= budget) {
			/* While the lane is busy, one write call here and
			 * one at the uncork, else as many as a turn allows:
			 * the rest goes as the socket drains (on_writable),
			 * so the thread is back at the rings and the lane
			 * soon. */
			if (flushed && (budget < LINK_SINGLE_IO ||
					now_ns() - now > turn))
				break;
			link_flush(tl->l);
			flushed = true;
		}
		struct serve *s = TAILQ_FIRST(&tl->serveq);
		struct xop *op = tcp_sched_latency(tl, now);
		tl->frame_max = tl->tm->cfg.tcp_chunk;
		if (s && s->cls == XFER_CLASS_LATENCY) {
			fill_serve(tl, s);
			continue;
		}
		if (op) {
			fill_op(tl, op, now);
			continue;
		}
		if (tcp_sched_bulk_full(tl, out))
			break;  /* on_writable calls again as it drains */
		if (tl->class_mode && tl->frame_max > tl->tm->cfg.bulk_queue / 2)
			tl->frame_max = tl->tm->cfg.bulk_queue / 2;
		op = tcp_sched_bulk(tl, now, &wait);
		if (!op && !s)
			break;
		tl->serve_turn = !tl->serve_turn;
		if (s && (tl->serve_turn || !op))
			fill_serve(tl, s);
		else
			fill_op(tl, op, now);
	}
	link_uncork(tl->l);
	tl->frame_max = tl->tm->cfg.tcp_chunk;
	tl->filling = was_filling;
	/* Tenants over their caps: look again when the first may go. */
	if (wait && link_alive(tl->l))
		link_kick_after(tl->l, wait);
}

void tcp_unpark(struct staged_send *ss, bool fill_now)
{
	struct tcp_link *tl = ss->tl;

	if (ss->op) {
		struct xop *op = ss->op;
		if (!tcp_op(op)->parked)
			return;
		tcp_op(op)->parked = false;
		tcp_sched_push(tl, op);
	} else {
		struct serve *s = ss->s;
		if (!s->parked)
			return;
		s->parked = false;
		TAILQ_REMOVE(&tl->parkedq, s, q);
		tcp_sched_serve(tl, s);
	}
	/* Never tcp_fill inside itself: its loop holds queue entries. */
	if (fill_now && !tl->filling)
		tcp_fill(tl);
	else
		link_kick(tl->l);
}

void tcp_start_op(struct tcp_link *tl, struct xop *op)
{
	struct tcp_op *to = tcp_op(op);
	to->id = ++tl->next_id;
	to->done = 0;
	to->sent_all = false;
	to->parked = false;
	to->waited = false;
	/* GPU memory of ours: its chunks start moving now. */
	if (op->local && region_kind(op->local) == REGION_CUDA && op->len) {
		int err = -ENOTSUP;
		if (!staged_reachable(tl->tm, op->local))
			;
		else if (op->opcode == XFER_OP_WRITE &&
			 (to->send = staged_send_new(tl, op->local,
						     op->local_off, op->len)))
			to->send->op = op, err = 0;
		else if (op->opcode == XFER_OP_READ &&
			 (to->rx = staged_rx_new(tl, op->local)))
			to->rx->xop = op, err = 0;
		else
			err = -ENOMEM;
		if (err) {
			to->sent_all = true;  /* in no queue */
			tcp_op_end(tl, op, err);
			return;
		}
	}
	tcp_sched_push(tl, op);
}
