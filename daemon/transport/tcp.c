/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp.c - the TCP data path between xferds as a mover, in the progress
 * thread: its ops table, operations waiting for a link to their peer,
 * cancel and deadlines, and each link's life as it concerns data (the
 * session, link.c, calls it as its data client: link_client.h).
 *
 * Per link (struct tcp_link, tcp_int.h):
 *   sendq   operations with frames still to queue, served round-robin
 *           one frame at a time while the socket's output buffer is
 *           below LINK_OUT_HIGH (tcp_send.c);
 *   serveq  reads the peer asked of us, served the same way;
 *   hash    operations with frames on the wire, awaiting their end.
 * The peer's frames are handled in tcp_recv.c, their payloads landed in
 * tcp_sink.c; GPU memory at either end goes through pinned staging
 * chunks, the link being one end of a staging pipeline (tcp_staged.c).
 *
 * Progress thread only; no locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/thread_stats.h"
#include "core/log.h"
#include "mem/region.h"
#include "transport/tcp_int.h"

bool tcp_host_reachable(const struct region *r)
{
	return region_kind(r) == REGION_MEMFD || region_kind(r) == REGION_CMA;
}

void tcp_hash_add(struct tcp_link *tl, struct xop *op)
{
	struct tcp_op *t = tcp_op(op);
	struct xop **b = &tl->hash[t->id % OP_HASH];

	t->hnext = *b;
	*b = op;
	t->in_hash = true;
}

struct xop *tcp_hash_find(struct tcp_link *tl, uint64_t id)
{
	struct xop *op = tl->hash[id % OP_HASH];

	while (op && tcp_op(op)->id != id)
		op = tcp_op(op)->hnext;
	return op;
}

static void hash_del(struct tcp_link *tl, struct xop *op)
{
	struct xop **pp = &tl->hash[tcp_op(op)->id % OP_HASH];

	while (*pp != op)
		pp = &tcp_op(*pp)->hnext;
	*pp = tcp_op(op)->hnext;
	tcp_op(op)->in_hash = false;
}

static bool in_sendq(const struct xop *op)
{
	return !tcp_op_c(op)->sent_all && !tcp_op_c(op)->parked;
}

/* End op: out of every list of tl, Abort if the peer holds half of it. */
void tcp_op_end(struct tcp_link *tl, struct xop *op, int64_t result)
{
	struct tcp_mover *tm = tl->tm;
	struct tcp_op *t = tcp_op(op);

	/* Its staging pipeline goes: chunks in a GPU copy go back when the
	 * copy ends. */
	staged_send_free(t->send);
	t->send = NULL;
	if (t->rx) {
		t->rx->xop = NULL;
		staged_rx_put(t->rx);
		t->rx = NULL;
	}
	if (tl->sink.xop == op) {
		/* The rest of its payload is dropped, not landed in a
		 * buffer its client may already reuse. */
		tl->sink.xop = NULL;
		tcp_sink_drop(tl);
	}
	if (in_sendq(op))
		tcp_sched_remove(tl, op);
	if (t->in_hash) {
		hash_del(tl, op);
		/* The peer saw part of it and will not see the end. */
		if (result < 0 && link_alive(tl->l) &&
		    (op->opcode == XFER_OP_READ || t->done < op->len ||
		     !t->sent_all)) {
			Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
			Xfer__Peer__Abort a = XFER__PEER__ABORT__INIT;
			a.op = t->id;
			m.body_case = XFER__PEER__PEER_MSG__BODY_ABORT;
			m.abort = &a;
			link_put_msg(tl->l, &m, 0);
		}
	}
	stat_add(result < 0 ? &link_stats(tl->l)->errors
			    : &link_stats(tl->l)->ops, 1);
	if (link_is_lane(tl->l))
		stat_add(&link_stats(tl->l)->lane_ops, 1);
	tm->hooks.op_done(tm->hooks.arg, op, result);
}

static struct tcp_peer *find_peer(struct tcp_mover *tm, const uint8_t *id,
				  bool create)
{
	struct tcp_peer *tp;

	for (tp = tm->peers; tp; tp = tp->next)
		if (memcmp(tp->id, id, LINK_ID_LEN) == 0)
			return tp;
	if (!create || !(tp = calloc(1, sizeof(*tp))))
		return NULL;
	memcpy(tp->id, id, LINK_ID_LEN);
	TAILQ_INIT(&tp->pending);
	tp->next = tm->peers;
	tm->peers = tp;
	return tp;
}

/* Fail everything of a peer that waits for a link. */
static void fail_pending(struct tcp_mover *tm, struct tcp_peer *tp, int err)
{
	struct xop *op;

	while ((op = TAILQ_FIRST(&tp->pending))) {
		TAILQ_REMOVE(&tp->pending, op, q);
		tcp_op(op)->sent_all = true;  /* not in any sendq */
		tm->hooks.op_done(tm->hooks.arg, op, err);
	}
	tp->asked = false;
}

static void tcp_submit_op(struct tcp_mover *tm, struct xop *op)
{
	const struct token *tok = region_token(op->remote);
	struct tcp_peer *tp = find_peer(tm, tok->instance_id, true);

	if (!tp) {
		tm->hooks.op_done(tm->hooks.arg, op, -ENOMEM);
		return;
	}
	if (tp->tl) {
		/* The latency class on its own connection where there is
		 * one: no bulk byte waits ahead of it in a socket buffer. */
		struct tcp_link *tl = op->cls == XFER_CLASS_LATENCY && tp->lane
					      ? tp->lane : tp->tl;
		tcp_start_op(tl, op);
		tcp_fill(tl);
		return;
	}
	tcp_op(op)->sent_all = true;  /* not in a send queue */
	TAILQ_INSERT_TAIL(&tp->pending, op, q);
	if (!tp->asked) {
		tp->asked = true;
		tm->hooks.need_peer(tm->hooks.arg, tok);
	}
}

/* each_op() on the operations of one link (or lane; NULL: none). */
static unsigned each_link_op(struct tcp_link *tl,
			     bool (*want)(const struct xop *op,
					  const void *arg),
			     const void *arg, int64_t result)
{
	struct xop *op, *next;
	struct xop_list *sq;
	unsigned n = 0;

	if (!tl)
		return 0;
	for (unsigned i = 0; (sq = tcp_sched_queue(tl, i)); i++) {
		for (op = TAILQ_FIRST(sq); op; op = next) {
			next = TAILQ_NEXT(op, q);
			if (want(op, arg)) {
				tcp_op_end(tl, op, result);
				n++;
			}
		}
	}
	for (unsigned b = 0; b < OP_HASH; b++) {
		for (op = tl->hash[b]; op; op = next) {
			next = tcp_op(op)->hnext;
			if (want(op, arg)) {
				tcp_op_end(tl, op, result);
				n++;
			}
		}
	}
	return n;
}

/*
 * End every operation `want` picks with result; returns how many.  The
 * saved `next` pointers stay valid because ending an operation with an
 * error never starts another one nor fails a link: a batch that fails
 * sends no notification.
 */
static unsigned each_op(struct tcp_mover *tm,
			bool (*want)(const struct xop *op, const void *arg),
			const void *arg, int64_t result)
{
	unsigned n = 0;

	for (struct tcp_peer *tp = tm->peers; tp; tp = tp->next) {
		struct xop *op, *next;
		for (op = TAILQ_FIRST(&tp->pending); op; op = next) {
			next = TAILQ_NEXT(op, q);
			if (want(op, arg)) {
				TAILQ_REMOVE(&tp->pending, op, q);
				tm->hooks.op_done(tm->hooks.arg, op, result);
				n++;
			}
		}
		n += each_link_op(tp->tl, want, arg, result);
		n += each_link_op(tp->lane, want, arg, result);
	}
	return n;
}

static bool of_client(const struct xop *op, const void *arg)
{
	return op->pc == arg;
}

static bool expired(const struct xop *op, const void *arg)
{
	return op->deadline_ns <= *(const uint64_t *)arg;
}

/* --- the link's life, as it concerns data (link_client.h) --- */

static void *tcp_link_new(void *arg, struct link *l,
			  const uint8_t id[LINK_ID_LEN])
{
	struct tcp_mover *tm = arg;
	struct tcp_peer *tp = find_peer(tm, id, true);
	struct tcp_link *tl = tp ? calloc(1, sizeof(*tl)) : NULL;

	if (!tl)
		return NULL;
	tl->tm = tm;
	tl->l = l;
	tl->peer = tp;
	tcp_sched_init(tl);
	TAILQ_INIT(&tl->serveq);
	TAILQ_INIT(&tl->parkedq);
	TAILQ_INIT(&tl->rx_writes);
	return tl;
}

static void tcp_link_up(void *cl)
{
	struct tcp_link *tl = cl;
	struct tcp_peer *tp = tl->peer;
	struct xop *op;

	if (link_is_lane(tl->l)) {
		/* Ready: the latency class's from now on.  What waits
		 * for a link waits for the link itself. */
		tp->lane = tl;
		return;
	}
	tp->tl = tl;
	tp->asked = false;
	while ((op = TAILQ_FIRST(&tp->pending))) {
		TAILQ_REMOVE(&tp->pending, op, q);
		tcp_start_op(tl, op);
	}
}

static void tcp_link_failed(void *cl, int err)
{
	struct tcp_link *tl = cl;
	struct xop *op;

	bool lane = link_is_lane(tl->l);

	if (tl->peer->tl == tl)
		tl->peer->tl = NULL;
	if (tl->peer->lane == tl)
		tl->peer->lane = NULL;
	struct xop_list *sq;
	for (unsigned i = 0; (sq = tcp_sched_queue(tl, i)); i++)
		while ((op = TAILQ_FIRST(sq)))
			tcp_op_end(tl, op, err);
	for (unsigned b = 0; b < OP_HASH; b++)
		while ((op = tl->hash[b]))
			tcp_op_end(tl, op, err);
	/* What waits for a link waits for the link, not its lane. */
	if (!lane)
		fail_pending(tl->tm, tl->peer, err);
}

static void tcp_link_free(void *cl)
{
	struct tcp_link *tl = cl;
	struct serve *s;

	/* Both queues until both are empty: a serve's chunks back in the
	 * pool may unpark another (tcp_unpark moves it to serveq). */
	while ((s = TAILQ_FIRST(&tl->serveq)) ||
	       (s = TAILQ_FIRST(&tl->parkedq))) {
		TAILQ_REMOVE(s->parked ? &tl->parkedq : &tl->serveq, s, q);
		tcp_serve_free(s);
	}
	/* The peer's writes into our GPU memory: their pipelines go, their
	 * copies still out end on their own, without an ack (the link is
	 * gone). */
	tcp_sink_drop(tl);
	struct staged_rx *srx;
	while ((srx = TAILQ_FIRST(&tl->rx_writes))) {
		TAILQ_REMOVE(&tl->rx_writes, srx, q);
		srx->listed = false;
		srx->tl = NULL;
		staged_rx_put(srx);
	}
	free(tl->failed);
	free(tl);
}

static void tcp_peer_failed(void *arg, const uint8_t id[LINK_ID_LEN], int err)
{
	struct tcp_mover *tm = arg;
	struct tcp_peer *tp = find_peer(tm, id, false);

	if (tp)
		fail_pending(tm, tp, err);
}

const struct link_client_ops tcp_link_client = {
	.link_new = tcp_link_new,
	.link_up = tcp_link_up,
	.link_failed = tcp_link_failed,
	.link_free = tcp_link_free,
	.peer_failed = tcp_peer_failed,
	.fill = tcp_fill,
	.frame = tcp_frame,
	.payload = tcp_payload,
	.sink_put = tcp_sink_put,
	.sink_direct = tcp_sink_direct,
	.sink_landed = tcp_sink_landed,
	.sink_finish = tcp_sink_finish,
};

struct tcp_mover *tcp_mover_create(struct regtab *regs,
				   const struct tcp_cfg *cfg,
				   const struct mover_hooks *hooks)
{
	struct tcp_mover *tm = calloc(1, sizeof(*tm));

	if (!tm)
		return NULL;
	tm->regs = regs;
	tm->cfg = *cfg;
	tm->hooks = *hooks;
	return tm;
}

void tcp_mover_bind(struct tcp_mover *tm, struct linkset *ls)
{
	tm->ls = ls;
}

void tcp_set_staging(struct tcp_mover *tm, struct staging_pool *sp,
		     struct gpu_copies *gpu)
{
	tm->staging = sp;
	tm->gpu = gpu;
}

/* --- as a mover (core/mover.h): the path of last resort --- */

static bool tcp_accepts(void *impl, const struct xop *op)
{
	(void)impl, (void)op;
	return true;
}

static void tcp_submit(void *impl, struct xop *op)
{
	memset(tcp_op(op), 0, sizeof(struct tcp_op));
	/* A notification after RDMA data keeps the path that moved it. */
	if (op->path == XFER_PATH_NONE)
		op->path = (op->local && region_kind(op->local) == REGION_CUDA) ||
				   (op->opcode != XFER_OP_NOTIFY &&
				    region_token(op->remote)->mem_kind == REGION_CUDA)
			   ? XFER_PATH_TCP_STAGED : XFER_PATH_TCP;
	tcp_submit_op(impl, op);
}

static void tcp_cancel_client(void *impl, const struct prog_client *pc)
{
	each_op(impl, of_client, pc, -ECANCELED);
}

static bool tcp_expire(void *impl, uint64_t now)
{
	struct tcp_mover *tm = impl;
	bool any = each_op(tm, expired, &now, -ETIMEDOUT) > 0;

	/* Nothing waits for a link any more: the next operation asks the
	 * main thread again (its answer may have been lost). */
	for (struct tcp_peer *tp = tm->peers; tp; tp = tp->next)
		if (!tp->tl && TAILQ_EMPTY(&tp->pending))
			tp->asked = false;
	return any;
}

/* Its progress happens in the thread's event loop: report it. */
static bool tcp_poll(void *impl)
{
	struct tcp_mover *tm = impl;

	return linkset_take_events(tm->ls) > 0;
}

static bool tcp_needs_loop(const void *impl)
{
	const struct tcp_mover *tm = impl;

	return linkset_active(tm->ls);
}

static void tcp_set_cfg(void *impl, const struct transport_cfg *cfg)
{
	struct tcp_mover *tm = impl;
	struct linkset_cfg c = {
		.keepalive_ms = cfg->keepalive_ms,
		.peer_timeout_ms = cfg->peer_timeout_ms,
		.lanes = cfg->link_lanes,
	};

	tm->cfg.tcp_chunk = cfg->tcp_chunk;
	tm->cfg.stage_ahead = cfg->tcp_stage_ahead;
	tm->cfg.bulk_queue = cfg->link_bulk_queue;
	tm->cfg.tenants = cfg->tenants;
	memcpy(tm->cfg.self_id, cfg->self_id, LINK_ID_LEN);
	memcpy(c.self_id, cfg->self_id, LINK_ID_LEN);
	linkset_set_cfg(tm->ls, &c);
}

/* The links first: failing them ends their operations through tm, and
 * the operations still waiting for a link end after. */
static void tcp_destroy(void *impl)
{
	struct tcp_mover *tm = impl;

	if (!tm)
		return;
	linkset_destroy(tm->ls);
	for (struct tcp_peer *tp = tm->peers, *next; tp; tp = next) {
		next = tp->next;
		fail_pending(tm, tp, -ECONNRESET);
		free(tp);
	}
	free(tm);
}

const struct mover_ops tcp_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "tcp",
	.accepts = tcp_accepts,
	.submit = tcp_submit,
	.cancel_client = tcp_cancel_client,
	.expire = tcp_expire,
	.poll = tcp_poll,
	.needs_loop = tcp_needs_loop,
	/* No peer_up, peer_down, frame: its links come and go through the
	 * session (tcp_link_client). */
	.set_cfg = tcp_set_cfg,
	.destroy = tcp_destroy,
};
