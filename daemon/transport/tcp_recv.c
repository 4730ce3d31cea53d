/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_recv.c - the TCP mover's receiving side, in the progress thread:
 * the peer's data frames, as the session (link.c) hands them over
 * (tcp_frame): its writes into our regions, its reads of them (served
 * by tcp_send.c), the acks and read data of our own operations, its
 * notifications, aborts and token checks.  Where a frame's payload
 * lands is tcp_sink.c's.
 *
 * A peer's token is resolved in the region table with its key checked
 * once per distinct token; a frame that names memory it may not reach
 * (-EACCES, -ERANGE) breaks the protocol and drops the link, one whose
 * memory went away (-ESTALE) fails its own operation only.
 *
 * Progress thread only; no locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/thread_stats.h"
#include "mem/region.h"
#include "transport/tcp_int.h"

/* A Target received from the peer, as a token of ours; -EPROTO if it is
 * malformed. */
static int token_from(const struct tcp_mover *tm, const Xfer__Peer__Target *t,
		      struct token *out)
{
	if (link_target_valid(t))
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	memcpy(out->instance_id, tm->cfg.self_id, TOKEN_INSTANCE_LEN);
	memcpy(out->key, t->key.data, TOKEN_KEY_LEN);
	out->region = t->region;
	out->offset = t->offset;
	out->length = t->length;
	out->region_length = t->region_length;
	out->mem_kind = t->mem_kind;
	return 0;
}

/* Can the link move r's bytes: itself (tcp_host_reachable), or through
 * staging (with GPUs and a staging pool here)? */
static bool bytes_reachable(const struct tcp_mover *tm, const struct region *r)
{
	return tcp_host_reachable(r) || staged_reachable(tm, r);
}

/* Resolve a peer's token: the key is checked once per distinct token. */
static int resolve(struct tcp_link *tl, const struct token *tok, uint64_t at,
		   uint64_t len, struct region **r, uint64_t *off)
{
	bool known = tl->have_verified &&
		     memcmp(&tl->verified, tok, sizeof(*tok)) == 0;
	int err = regtab_resolve_token(tl->tm->regs, tok, at, len, !known, r,
				       off);
	if (!err && !known) {
		tl->verified = *tok;
		tl->have_verified = true;
	}
	return err;
}

/* resolve() for a frame that moves bytes: -ENOTSUP (that operation
 * fails, not the link) when the link cannot reach the region's memory. */
static int resolve_data(struct tcp_link *tl, const struct token *tok,
			uint64_t at, uint64_t len, struct region **r, uint64_t *off)
{
	int err = resolve(tl, tok, at, len, r, off);

	if (!err && !bytes_reachable(tl->tm, *r)) {
		region_put(*r);
		*r = NULL;
		return -ENOTSUP;
	}
	return err;
}

/* The sender of a notification that came over l: the peer's word for
 * its client and its name, our link's for its node (never the peer's);
 * and its message.  Name and message were checked (link_notify_valid). */
static void note_from(const struct tcp_link *tl,
		      const Xfer__Peer__Sender *snd,
		      const ProtobufCBinaryData *msg, struct notify_note *out)
{
	out->from = (struct xfer_cqe_sender){
		.client = snd ? snd->client : 0,
		.uid = snd ? snd->uid : 0,
		.flags = XFER_SENDER_F_REMOTE,
	};
	memcpy(out->from.node, link_peer_id(tl->l), sizeof(out->from.node));
	out->msg.len = (uint16_t)msg->len;
	if (msg->len)  /* an absent field's data is NULL */
		memcpy(out->msg.data, msg->data, msg->len);
	out->msg.name_len = snd ? (uint8_t)snd->name.len : 0;
	if (out->msg.name_len)
		memcpy(out->msg.name, snd->name.data, snd->name.len);
}

/* --- the peer's writes that failed, acks, notifications --- */

bool tcp_is_failed(struct tcp_link *tl, uint64_t op)
{
	for (size_t i = 0; i < tl->nfailed; i++)
		if (tl->failed[i] == op)
			return true;
	return false;
}

void tcp_forget_failed(struct tcp_link *tl, uint64_t op)
{
	for (size_t i = 0; i < tl->nfailed; i++)
		if (tl->failed[i] == op) {
			tl->failed[i] = tl->failed[--tl->nfailed];
			return;
		}
}

int tcp_remember_failed(struct tcp_link *tl, uint64_t op)
{
	if (tl->nfailed == tl->capfailed) {
		size_t cap = tl->capfailed ? 2 * tl->capfailed : 16;
		if (cap > 65536)
			return -EPROTO;  /* a peer that never ends its writes */
		uint64_t *f = realloc(tl->failed, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		tl->failed = f;
		tl->capfailed = cap;
	}
	tl->failed[tl->nfailed++] = op;
	return 0;
}

/*
 * Notify r's owner of bytes that landed for a peer's write: the write's
 * answer is its bytes, or why the owner will not hear of them (-ENOBUFS:
 * the data is in place, the notification did not fit).
 */
int64_t tcp_notify_result(struct tcp_link *tl, struct region *r,
			  uint64_t value, int64_t bytes,
			  const struct notify_note *from)
{
	int err = tl->tm->hooks.notify_local(tl->tm->hooks.arg, r, value, bytes,
					    from);

	return err ? err : bytes;
}

void tcp_write_ack(struct tcp_link *tl, uint64_t op, int64_t result)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__WriteAck a = XFER__PEER__WRITE_ACK__INIT;

	a.op = op;
	a.result = result;
	m.body_case = XFER__PEER__PEER_MSG__BODY_WRITE_ACK;
	m.write_ack = &a;
	link_put_msg(tl->l, &m, 0);
}

/* --- the frames --- */

static int on_write(struct tcp_link *tl, const Xfer__Peer__WriteChunk *w,
		    uint32_t plen)
{
	struct token tok;
	struct region *r = NULL;
	uint64_t off = 0;
	int err = 0;

	if (plen > w->total)
		return -EPROTO;  /* a chunk larger than its whole operation */
	if (link_notify_valid(w->sender, &w->message))
		return -EPROTO;
	tl->sink = (struct rx_sink){ .is_write = true, .op = w->op,
				    .last = w->last, .notify = w->notify,
				    .notify_value = w->notify_value,
				    .total = w->total };
	if (w->notify)
		note_from(tl, w->sender, &w->message, &tl->sink.notify_from);
	if (!tcp_is_failed(tl, w->op)) {
		if (token_from(tl->tm, w->target, &tok))
			return -EPROTO;
		err = resolve_data(tl, &tok, w->at, plen, &r, &off);
		if (err == -EACCES || err == -ERANGE)
			return -EPROTO;
	}
	/* An error here (-ESTALE) fails this operation only. */
	tcp_sink_start(tl, plen, r, off, err);
	if (r && region_kind(r) == REGION_CUDA) {
		/* Our GPU memory: through receive chunks (tcp_staged.c). */
		struct staged_rx *srx = tcp_rx_write_of(tl, w->op, r);
		if (!srx) {
			tl->sink.err = -ENOMEM;
			return 0;
		}
		/* Its chunks land at offsets of the region its first frame
		 * named: an honest peer names one region per write. */
		if (srx->r != r)
			return -EPROTO;
		srx->refs++;
		tl->sink.srx = srx;
	}
	return 0;
}

static int on_read_request(struct tcp_link *tl,
			   const Xfer__Peer__ReadRequest *rq)
{
	struct token tok;
	struct region *r;
	uint64_t off;

	if (token_from(tl->tm, rq->source, &tok))
		return -EPROTO;
	int err = resolve_data(tl, &tok, rq->at, rq->length, &r, &off);
	if (err == -EACCES || err == -ERANGE)
		return -EPROTO;
	if (err) {
		tcp_read_data(tl, rq->op, 0, true, err);
		return 0;
	}
	struct serve *s = calloc(1, sizeof(*s));
	if (!s) {
		region_put(r);
		tcp_read_data(tl, rq->op, 0, true, -ENOMEM);
		return 0;
	}
	*s = (struct serve){ .op = rq->op, .r = r, .off = off,
			     .len = rq->length };
	if (region_kind(r) == REGION_CUDA && rq->length) {
		/* Our GPU memory: staged, a few chunks ahead. */
		s->send = staged_send_new(tl, r, off, rq->length);
		if (!s->send) {
			tcp_serve_free(s);
			tcp_read_data(tl, rq->op, 0, true, -ENOMEM);
			return 0;
		}
		s->send->s = s;
	}
	TAILQ_INSERT_TAIL(&tl->serveq, s, q);
	return 0;
}

/* Payload of a read of ours follows. */
static int on_read_data(struct tcp_link *tl, const Xfer__Peer__ReadData *d,
			uint32_t plen)
{
	struct xop *op = tcp_hash_find(tl, d->op);

	tl->sink = (struct rx_sink){ .last = d->last };
	if (!op || op->opcode != XFER_OP_READ) {
		/* It timed out or was cancelled meanwhile: drop the bytes. */
		tcp_sink_start(tl, plen, NULL, 0, 0);
		return 0;
	}
	struct tcp_op *to = tcp_op(op);
	if (d->result < 0) {
		if (plen)
			return -EPROTO;
		tcp_op_end(tl, op, d->result);
		return 0;
	}
	if (d->at != to->done || plen > op->len - to->done ||
	    (uint64_t)d->result != plen || (d->last && to->done + plen != op->len))
		return -EPROTO;
	region_get(op->local);
	tl->sink.xop = op;
	tcp_sink_start(tl, plen, op->local, op->local_off + to->done, 0);
	if (to->rx) {
		to->rx->refs++;
		tl->sink.srx = to->rx;
	}
	return 0;
}

static int on_ack(struct tcp_link *tl, const Xfer__Peer__WriteAck *a)
{
	struct xop *op = tcp_hash_find(tl, a->op);

	if (!op)
		return 0;  /* ended already (deadline) */
	if (op->opcode == XFER_OP_READ)
		return -EPROTO;
	if (a->result >= 0 && !tcp_op(op)->sent_all)
		return -EPROTO;  /* success before the last chunk */
	tcp_op_end(tl, op, a->result >= 0 ? (int64_t)op->len : a->result);
	return 0;
}

static int on_notify(struct tcp_link *tl, const Xfer__Peer__Notify *nt)
{
	struct token tok;
	struct region *r;
	uint64_t off;

	if (token_from(tl->tm, nt->target, &tok) ||
	    link_notify_valid(nt->sender, &nt->message))
		return -EPROTO;
	int err = resolve(tl, &tok, 0, 0, &r, &off);
	if (err == -EACCES || err == -ERANGE)
		return -EPROTO;
	if (!err) {
		/* A refusal (-ENOBUFS: its owner holds notify_queue_max
		 * already) is this operation's answer, not the link's. */
		struct notify_note note;
		note_from(tl, nt->sender, &nt->message, &note);
		err = tl->tm->hooks.notify_local(tl->tm->hooks.arg, r, nt->value,
						(int64_t)nt->bytes, &note);
		region_put(r);
	}
	tcp_write_ack(tl, nt->op, err);
	return 0;
}

static void on_abort(struct tcp_link *tl, uint64_t op)
{
	tcp_forget_failed(tl, op);
	struct serve *s;
	TAILQ_FOREACH(s, &tl->serveq, q) {
		if (s->op == op) {
			TAILQ_REMOVE(&tl->serveq, s, q);
			tcp_serve_free(s);
			return;
		}
	}
	TAILQ_FOREACH(s, &tl->parkedq, q) {
		if (s->op == op) {
			TAILQ_REMOVE(&tl->parkedq, s, q);
			tcp_serve_free(s);
			return;
		}
	}
	/* A write into our GPU memory: no ack for it; copies still out
	 * end on their own. */
	struct staged_rx *srx;
	TAILQ_FOREACH(srx, &tl->rx_writes, q) {
		if (srx->op == op) {
			if (tl->sink.srx == srx)
				tcp_sink_drop(tl);
			TAILQ_REMOVE(&tl->rx_writes, srx, q);
			srx->listed = false;
			staged_rx_put(srx);
			return;
		}
	}
}

static void on_check(struct tcp_link *tl, const Xfer__Peer__CheckToken *c)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__CheckReply rep = XFER__PEER__CHECK_REPLY__INIT;
	Xfer__Peer__RdmaMemory mem = XFER__PEER__RDMA_MEMORY__INIT;
	uint32_t rkeys[REGION_RDMA_KEYS];
	struct token tok;
	struct region *r;
	uint64_t off;

	rep.id = c->id;
	rep.error = token_from(tl->tm, c->target, &tok) ? -EINVAL : 0;
	if (!rep.error) {
		/* Always the full key check: this is what it is for. */
		rep.error = regtab_resolve_token(tl->tm->regs, &tok, 0, 0, true,
						 &r, &off);
	}
	if (!rep.error) {
		/* How the other transports reach the token's range (RDMA:
		 * the rkeys of a grant of it to this peer, on this link). */
		const struct describe_req q = {
			.peer = link_peer_id(tl->l), .link_gen = link_gen(tl->l),
			.check_id = c->id, .off = off, .len = tok.length,
		};
		enum describe_result d = tl->tm->hooks.describe(
			tl->tm->hooks.arg, r, &q, &mem, rkeys, REGION_RDMA_KEYS);
		region_put(r);
		if (d == DESCRIBE_LATER)
			return;  /* that transport answers */
		if (d == DESCRIBE_FILLED)
			rep.rdma = &mem;
	}
	m.body_case = XFER__PEER__PEER_MSG__BODY_CHECK_REPLY;
	m.check_reply = &rep;
	link_put_msg(tl->l, &m, 0);
}

/* The data frames of the session's one dispatch (link.c). */
int tcp_frame(void *cl, const Xfer__Peer__PeerMsg *m, uint32_t plen,
	      const char **why)
{
	struct tcp_link *tl = cl;

	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_WRITE:
		*why = "bad write (key, range or size)";
		return on_write(tl, m->write, plen);
	case XFER__PEER__PEER_MSG__BODY_WRITE_ACK:
		*why = "bad write acknowledgement";
		return on_ack(tl, m->write_ack);
	case XFER__PEER__PEER_MSG__BODY_READ:
		*why = "bad read request (key or range)";
		return on_read_request(tl, m->read);
	case XFER__PEER__PEER_MSG__BODY_READ_DATA:
		*why = "bad read data";
		return on_read_data(tl, m->read_data, plen);
	case XFER__PEER__PEER_MSG__BODY_NOTIFY:
		*why = "bad notify (key or range)";
		return on_notify(tl, m->notify);
	case XFER__PEER__PEER_MSG__BODY_ABORT:
		on_abort(tl, m->abort->op);
		return 0;
	case XFER__PEER__PEER_MSG__BODY_CHECK:
		on_check(tl, m->check);
		return 0;
	default:
		*why = "unexpected message on an established link";
		return -EPROTO;
	}
}
