/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_post.c - the RDMA transport's posting and completions: waiting
 * operations cut into striped work requests, chained into one post per
 * queue pair and pump, and the completions that retire them.
 *
 * Progress thread only; no lock (the queue pair table is read here
 * without tables.lock: only this thread changes it).
 *
 * A piece of an operation goes to the next ready queue pair toward its
 * peer with room, round-robin over every queue pair of every rail pair;
 * one work request in RDMA_SIGNAL_EVERY, and the last of each chain,
 * asks for a completion (RC completes in order, so it accounts for those
 * before it).  A staged operation is a stream of the staging pipeline
 * (rdma_staged.c): the pump starts it, and posts the pieces its RDMA
 * stage queued, one staging chunk each, each asking for its own
 * completion, which ends the piece (rdma_piece_retire).
 *
 * Classes (core/traffic_class.h): each pump posts the latency class's
 * operations and pieces first, first come first served, then the rest
 * by tenant: the tenants' shares and caps are rdma_sched.c's decision,
 * this file's steps (post_op_step, post_stream_step) what each turn
 * posts, a tenant's operations and then its streams' pieces in arrival
 * order.  A request of the rest goes only to a queue pair holding fewer
 * than rdma_bulk_depth, a latency one to any with room in its
 * RDMA_QP_DEPTH, so a latency request waits behind at most
 * rdma_bulk_depth bulk ones on its queue pair (RC runs a queue pair's
 * requests in order).  A tenant over its cap waits for pace_ev.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <event2/event.h>
#include <infiniband/verbs.h>

#include "common/clock.h"
#include "core/log.h"
#include "transport/rdma_int.h"
#include "transport/rdma_mr.h"
#include "transport/rdma_sched.h"
#include "mem/region.h"
#include "stage/pipeline.h"
#include "xfer_ring.h"

#define POLL_BATCH     32

/* --- retiring work requests --- */

/*
 * The work requests in [tail, upto] are done (err 0) or failed.  When
 * one operation's request broke the queue pair (culprit), the others'
 * requests on it were only flushed: those operations are redone whole
 * (WRITE and READ may be repeated), once, rather than failing because
 * of another client's descriptor.
 */
void rdma_retire(struct rdma *t, struct rqp *q, uint32_t upto, int err,
		 const struct xop *culprit)
{
	while ((int32_t)(upto - q->tail) >= 0 && q->tail != q->head) {
		struct posted *e = &q->ring[q->tail % RDMA_QP_DEPTH];
		struct xop *op = e->op;

		q->tail++;
		t->dev[q->dev].outstanding--;
		t->outstanding--;
		atomic_fetch_sub_explicit(&q->outstanding, 1,
					  memory_order_relaxed);
		if (!err) {
			stat_add64(&q->bytes, e->bytes);
			struct rail_counters *rc = &t->tables.rail[q->rail];
			stat_add64(e->read ? &rc->bytes_rx : &rc->bytes_tx,
				   e->bytes);
		}
		region_put(e->hold);
		e->hold = NULL;
		e->op = NULL;
		if (e->piece) {
			struct stage_chunk *c = e->piece;
			e->piece = NULL;
			rdma_piece_retire(t, c, err, culprit);
			continue;
		}
		if (!op)
			continue;
		struct rdma_op *ro = rop(op);
		ro->wrs--;
		if (err && culprit && op != culprit && !ro->retried) {
			if (!ro->redo)
				t->redone++;
			ro->redo = true;
		}
		else if (err && !ro->error)
			ro->error = err;
		rdma_op_settle(t, op);
	}
}

/* --- posting --- */

/* Can rail pair rp carry op: the owner's rkey on its device, and ours
 * of the local memory (staged: of the staging buffers)? */
bool rdma_pair_usable(const struct rdma *t, const struct rpeer *p,
		      const struct rail_pair *rp, const struct xop *op,
		      bool staged, uint32_t *lkey, uint32_t *rkey)
{
	const struct region_rdma *rr = region_rdma(op->remote);

	if (rp->failed || rp->theirs.device >= rr->nkeys ||
	    !rr->rkey[rp->theirs.device])
		return false;
	/* A grant ended with the link it was made on. */
	if (rr->grant && rr->link_gen != p->gen)
		return false;
	*rkey = rr->rkey[rp->theirs.device];
	if (staged)
		return rdma_staging_lkey(t->staging, rp->mine.dev, lkey);
	return rdma_mr_keys(op->local, rp->mine.dev, lkey, NULL);
}

/* Work requests a queue pair may hold when one of op's class is added:
 * the whole ring for the latency class, rdma_bulk_depth for the rest. */
static uint32_t class_depth(const struct rdma *t, const struct xop *op)
{
	return op->cls == XFER_CLASS_LATENCY ? RDMA_QP_DEPTH
					     : t->cfg.bulk_depth;
}

/* The next ready queue pair toward p with room for op's class,
 * round-robin: first on the rails closest to a GPU region's GPU
 * (rdma_topo.h), then any. */
static struct rqp *next_qp(struct rdma *t, struct rpeer *p,
			   const struct xop *op)
{
	uint32_t depth = class_depth(t, op);
	unsigned n = (unsigned)p->npairs * t->cfg.qps;
	uint32_t prefer = region_kind(op->local) == REGION_CUDA ?
				  rdma_topo_prefer(&t->topo,
						   region_gpu_dev(op->local)) :
				  ~0u;

	unsigned tries = prefer == ~0u ? n : 2 * n;

	for (unsigned k = 0; k < tries; k++) {
		unsigned i = p->rr++ % n;
		struct rqp *q = p->out[i / t->cfg.qps][i % t->cfg.qps];
		if (!q || p->pair[i / t->cfg.qps].failed ||
		    (k < n && q->rail >= 0 && q->rail < 32 &&
		     !(prefer >> q->rail & 1)) ||
		    atomic_load_explicit(&q->state, memory_order_relaxed) !=
			    QP_READY)
			continue;
		if (q->head - q->tail >= depth ||
		    t->dev[q->dev].outstanding >=
			    (uint32_t)t->dev[q->dev].v.cq_depth)
			continue;
		return q;
	}
	return NULL;
}

/* Where byte at of op is in the owner's memory (its region's grant). */
static uint64_t remote_at(const struct rdma *t, const struct xop *op,
			  uint64_t at)
{
	return region_rdma(op->remote)->addr + region_token(op->remote)->offset +
	       op->remote_off + at + (uint64_t)t->test_shift;
}

/* One work request of op's len bytes on q, between local memory at addr
 * and the owner's at raddr, added to the chain its next post sends.  The
 * caller says whose it is in the entry returned. */
static struct posted *chain_wr(struct rdma *t, struct rqp *q,
			       const struct xop *op, uint64_t raddr,
			       uint32_t len, uint64_t addr, uint32_t lkey,
			       uint32_t rkey, bool signal)
{
	bool read = op->opcode == XFER_OP_READ;
	uint32_t pos = q->head++;
	struct posted *e = &q->ring[pos % RDMA_QP_DEPTH];
	struct ibv_sge *sge = &q->sge[q->nstaged];
	struct ibv_send_wr *wr = &q->wr[q->nstaged];

	*e = (struct posted){
		.deadline_ns = op->deadline_ns,
		.bytes = len,
		.read = read,
	};
	*sge = (struct ibv_sge){ .addr = addr, .length = len, .lkey = lkey };
	*wr = (struct ibv_send_wr){
		.wr_id = (uint64_t)q->index << 48 | (uint64_t)q->gen << 32 | pos,
		.sg_list = sge,
		.num_sge = 1,
		.opcode = read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
		.wr.rdma = {
			.remote_addr = raddr,
			.rkey = rkey,
		},
	};
	/* Inline means the CPU reads addr at the post: never GPU memory
	 * (a dma-buf MR's addresses are the GPU's). */
	if (!read && len <= q->max_inline &&
	    region_kind(op->local) != REGION_CUDA)
		wr->send_flags |= IBV_SEND_INLINE;
	if (++q->since_signal >= RDMA_SIGNAL_EVERY || signal) {
		wr->send_flags |= IBV_SEND_SIGNALED;
		q->since_signal = 0;
	}
	q->nstaged++;
	t->dev[q->dev].outstanding++;
	t->outstanding++;
	atomic_fetch_add_explicit(&q->outstanding, 1, memory_order_relaxed);
	if (!q->dirty) {
		q->dirty = true;
		q->next_dirty = t->dirty;
		t->dirty = q;
	}
	return e;
}

/* op's next len bytes, zero-copy, on q. */
static void chain_op(struct rdma *t, struct rqp *q, struct xop *op,
		     uint32_t lkey, uint32_t rkey, uint32_t len)
{
	struct rdma_op *ro = rop(op);
	/* GPU memory: its MR's iova is xferd's GPU address (rdma_mr.c) */
	uint64_t addr = region_kind(op->local) == REGION_CUDA
		? region_gpu_ptr(op->local) + op->local_off + ro->posted
		: (uint64_t)(uintptr_t)region_map_at(op->local,
						     op->local_off + ro->posted);
	struct posted *e = chain_wr(t, q, op, remote_at(t, op, ro->posted), len,
				    addr, lkey, rkey, false);

	if (!ro->waited) {
		ro->waited = true;
		rdma_sched_waited(&t->sched, op->cls, op->tenant, op->start_ns);
	}
	region_get(op->local);
	e->op = op;
	e->hold = op->local;
	ro->posted += len;
	ro->wrs++;
}

/* The piece in chunk c of s on q.  Its completion gives the chunk back:
 * each asks for one, so that chunks return one by one, not a batch
 * late. */
static void chain_piece(struct rdma *t, struct rqp *q, struct rdma_stream *s,
			struct stage_chunk *c, uint64_t raddr, uint32_t lkey,
			uint32_t rkey)
{
	struct posted *e = chain_wr(t, q, s->op, raddr, c->len,
				    (uint64_t)(uintptr_t)c->buf, lkey, rkey,
				    true);

	e->piece = c;  /* the chunk holds the local region */
	s->posted++;
	if (!rop(s->op)->waited) {
		rop(s->op)->waited = true;
		rdma_sched_waited(&t->sched, s->op->cls, s->op->tenant,
				  s->op->start_ns);
	}
}

/* Post what q has staged, as one chain; its last work request asks for
 * a completion, so every one is accounted for.  False: the post failed
 * (logged); the caller takes q down. */
static bool post_chain(struct rdma *t, struct rqp *q)
{
	struct ibv_send_wr *bad = NULL;
	uint32_t n = q->nstaged;

	q->nstaged = 0;  /* the device copied the requests: wr[] is free */
	if (n == 0)
		return true;
	for (uint32_t i = 0; i + 1 < n; i++)
		q->wr[i].next = &q->wr[i + 1];
	q->wr[n - 1].next = NULL;
	if (!(q->wr[n - 1].send_flags & IBV_SEND_SIGNALED)) {
		q->wr[n - 1].send_flags |= IBV_SEND_SIGNALED;
		q->since_signal = 0;
	}
	int rc = ibv_post_send(q->qp, q->wr, &bad);
	stat_add64(&q->wrs, n);
	stat_add64(&t->tables.rail[q->rail].wrs, n);
	if (rc) {
		log_warnx("RDMA: ibv_post_send on QP %u to %s: %s",
			  q->qp->qp_num, rdma_peer_label(q), strerror(rc));
		stat_add64(&t->tables.rail[q->rail].errors, 1);
		return false;
	}
	return true;
}

/* Post what each queue pair has staged. */
static void flush(struct rdma *t)
{
	while (t->dirty) {
		struct rqp *q = t->dirty;

		t->dirty = q->next_dirty;
		q->dirty = false;
		if (!post_chain(t, q))
			rdma_qp_fail(t, q, -EIO);
	}
}

/* op cannot go by RDMA after all: handed back (TCP moves it) if
 * nothing of it went out yet, else it fails.  Either way it is no longer this
 * transport's to touch. */
static void to_tcp_or_fail(struct rdma *t, struct xop *op)
{
	struct rdma_op *ro = rop(op);

	if (ro->posted || ro->wrs || ro->error) {
		rdma_op_fail(t, op, -EIO);
		return;
	}
	rdma_dequeue(t, op);
	/* The executor offers it to the next route. */
	t->hooks.reroute(t->hooks.arg, op);
}

/* The same for a stream: handed back while none of it was posted (its
 * chunks only held copies), else it fails. */
static void stream_to_tcp_or_fail(struct rdma_stream *s)
{
	if (s->posted == 0 && !pipeline_error(s->pl))
		rdma_stream_close(s, 0, true);
	else
		rdma_stream_fail(s, -EIO);
}

/* Some queue pair toward p is still on its way: posting now would put
 * a first large transfer on the one that happened to be ready first. */
static bool connecting(const struct rdma *t, const struct rpeer *p)
{
	for (size_t i = 0; i < p->npairs; i++)
		for (uint32_t s = 0; s < t->cfg.qps; s++)
			if (p->out[i][s] &&
			    atomic_load_explicit(&p->out[i][s]->state,
						 memory_order_relaxed) ==
				    QP_CONNECTING)
				return true;
	return false;
}

/* Streams through p's landing chunks under way: an owner serves at most
 * LAND_STREAMS_PER_PEER of a peer at once, the others wait here. */
static bool owner_streams_full(const struct rdma *t, const struct rpeer *p)
{
	const struct rdma_stream *s;
	unsigned n = 0;

	TAILQ_FOREACH(s, &t->streams, q)
		if (s->owner && !s->ended &&
		    memcmp(s->peer, p->id, LINK_ID_LEN) == 0)
			n++;
	return n >= LAND_STREAMS_PER_PEER;
}

/* What one step of posting did to an operation or stream. */
enum step {
	STEP_POSTED,   /* one request of it went; more wait */
	STEP_LAST,     /* its last went (or its stream started), or it
			* has nothing queued: out of the waiting */
	STEP_WAIT,     /* nothing can go now (no room toward its peer,
			* queue pairs connecting, no grant yet) */
	STEP_GONE,     /* it failed or went to another route: others
			* may have ended with it */
};

/* One work request of op, or its stream started (staged); *bytes: what
 * the request moves. */
static enum step post_op_step(struct rdma *t, struct xop *op,
			      uint64_t *bytes)
{
	struct rdma_op *ro = rop(op);
	struct rpeer *p = rdma_peer_of(t, op);
	uint32_t lkey, rkey;

	*bytes = 0;
	if (!p) {
		rdma_op_fail(t, op, -ECONNRESET);
		return STEP_GONE;
	}
	if (p->full_in_pass == t->pass)
		return STEP_WAIT;  /* no room toward p: its later ops wait too */
	if (!rdma_ensure_qps(t, p)) {
		to_tcp_or_fail(t, op);
		return STEP_GONE;
	}
	if (connecting(t, p))
		return STEP_WAIT;
	if (ro->staged) {
		if (ro->owner && owner_streams_full(t, p))
			return STEP_WAIT;  /* in order, after those */
		/* Its pieces come as the pipeline fills chunks; posted as
		 * its stream's. */
		rdma_dequeue(t, op);
		int err = rdma_stream_open(t, op);
		if (err) {
			rdma_op_fail(t, op, err);
			return STEP_GONE;
		}
		return STEP_LAST;
	}
	struct rqp *q = next_qp(t, p, op);
	if (!q) {
		p->full_in_pass = t->pass;
		return STEP_WAIT;
	}
	if (!rdma_pair_usable(t, p, &p->pair[q->pair], op, false, &lkey,
			      &rkey)) {
		/* Its import lost its keys (a remote access error): the
		 * owner must be asked over TCP. */
		to_tcp_or_fail(t, op);
		return STEP_GONE;
	}
	uint64_t left = op->len - ro->posted;
	uint64_t len = left < t->cfg.stripe ? left : t->cfg.stripe;
	chain_op(t, q, op, lkey, rkey, (uint32_t)len);
	*bytes = len;
	if (ro->posted < op->len)
		return STEP_POSTED;
	rdma_dequeue(t, op);
	return STEP_LAST;
}

static bool stream_has_piece(const struct rdma_stream *s)
{
	return !s->ended && !TAILQ_EMPTY(&s->queued);
}

/* The next piece s queued, into or out of the owner's memory, or
 * (owner-side staging) the landing chunk the owner granted for its
 * bytes: a piece whose grant has not come waits, and those after it
 * (grants come in stream order).  Failing or closing s leaves it in
 * t->streams (the reap removes it). */
static enum step post_stream_step(struct rdma *t, struct rdma_stream *s,
				  uint64_t *bytes)
{
	struct xop *op = s->op;
	uint32_t lkey, rkey;

	*bytes = 0;
	if (!stream_has_piece(s))
		return STEP_LAST;
	/* Its fill failed: what it queued goes nowhere. */
	int err = pipeline_error(s->pl);
	if (err) {
		rdma_stream_fail(s, err);
		return STEP_GONE;
	}
	struct rpeer *p = rdma_peer_of(t, op);
	if (!p) {
		rdma_stream_close(s, -ECONNRESET, false);
		return STEP_GONE;
	}
	if (p->full_in_pass == t->pass)
		return STEP_WAIT;
	if (!rdma_ensure_qps(t, p)) {
		stream_to_tcp_or_fail(s);
		return STEP_GONE;
	}
	if (connecting(t, p))
		return STEP_WAIT;
	struct rdma_piece *pc = TAILQ_FIRST(&s->queued);
	struct stage_chunk *c = STAGE_CHUNK_OF_PRIV(pc);
	if (s->owner && !pc->lent && !rdma_land_match(s, pc, c))
		return STEP_WAIT;
	struct rqp *q = next_qp(t, p, op);
	if (!q) {
		p->full_in_pass = t->pass;
		return STEP_WAIT;
	}
	uint64_t raddr;
	if (s->owner) {
		uint32_t theirs = p->pair[q->pair].theirs.device;
		if (!rdma_staging_lkey(t->staging, q->dev, &lkey) ||
		    theirs >= pc->nkeys || !pc->rkey[theirs]) {
			/* The owner's chunk is not registered on that
			 * device: the peer's rails disagree with it. */
			rdma_stream_fail(s, -EIO);
			return STEP_GONE;
		}
		rkey = pc->rkey[theirs];
		raddr = pc->raddr;
	} else {
		if (!rdma_pair_usable(t, p, &p->pair[q->pair], op, true,
				      &lkey, &rkey)) {
			/* As for zero-copy: the owner must be asked over
			 * TCP. */
			stream_to_tcp_or_fail(s);
			return STEP_GONE;
		}
		raddr = remote_at(t, op, c->at);
	}
	pc->queued = false;
	TAILQ_REMOVE(&s->queued, pc, q);
	t->pieces_queued--;
	chain_piece(t, q, s, c, raddr, lkey, rkey);
	*bytes = c->len;
	return stream_has_piece(s) ? STEP_POSTED : STEP_LAST;
}

static bool is_latency(const struct xop *op)
{
	return op->cls == XFER_CLASS_LATENCY;
}

/* The latency class, first come first served: each operation, then
 * each stream's pieces, while queue pairs have room (the whole depth)
 * and its tenant is within its cap. */
static void post_latency(struct rdma *t)
{
	struct xop *op, *next;
	struct rdma_stream *s;
	uint64_t bytes;
	enum step st = STEP_WAIT;

	for (op = TAILQ_FIRST(&t->waiting); op; op = next) {
		next = TAILQ_NEXT(op, q);
		if (!is_latency(op))
			continue;
		while (rdma_sched_may(&t->sched, op->tenant)) {
			st = post_op_step(t, op, &bytes);
			rdma_sched_charge(&t->sched, op->tenant, bytes);
			if (st != STEP_POSTED)
				break;
		}
		/* Others may have ended with it: from the head again (each
		 * time one fewer waits). */
		if (st == STEP_GONE)
			next = TAILQ_FIRST(&t->waiting);
		st = STEP_WAIT;
	}
	TAILQ_FOREACH(s, &t->streams, q) {
		if (!is_latency(s->op))
			continue;
		while (stream_has_piece(s) &&
		       rdma_sched_may(&t->sched, s->op->tenant)) {
			st = post_stream_step(t, s, &bytes);
			rdma_sched_charge(&t->sched, s->op->tenant, bytes);
			if (st != STEP_POSTED)
				break;
		}
	}
}

/*
 * The bulk class's pass: where each tenant is in the waiting
 * operations and then the streams, in arrival order.  A cursor only
 * moves forward, so a pass walks each list once per tenant at most; an
 * operation that failed or went to another route may have taken
 * others with it (their clients' ends), so then the tenants' cursors
 * start again from the head (ops_fresh).
 */
struct bulk_pass {
	struct rdma *t;
	struct xop *op[TENANT_MAX];
	struct rdma_stream *s[TENANT_MAX];
	bool ops_fresh[TENANT_MAX], s_fresh[TENANT_MAX];
};

static struct xop *bulk_op_from(struct xop *op, unsigned tenant)
{
	while (op && (is_latency(op) || op->tenant != tenant))
		op = TAILQ_NEXT(op, q);
	return op;
}

static struct rdma_stream *bulk_stream_from(struct rdma_stream *s,
					    unsigned tenant)
{
	while (s && (is_latency(s->op) || s->op->tenant != tenant ||
		     !stream_has_piece(s)))
		s = TAILQ_NEXT(s, q);
	return s;
}

/* rdma_sched_post_fn: one request of tenant's, its operations first. */
static int64_t bulk_post(void *arg, unsigned tenant)
{
	struct bulk_pass *b = arg;
	struct rdma *t = b->t;
	uint64_t bytes;

	for (;;) {
		if (b->ops_fresh[tenant]) {
			b->ops_fresh[tenant] = false;
			b->op[tenant] = bulk_op_from(TAILQ_FIRST(&t->waiting),
						     tenant);
		}
		struct xop *op = b->op[tenant];
		if (!op)
			break;
		struct xop *next = bulk_op_from(TAILQ_NEXT(op, q), tenant);
		switch (post_op_step(t, op, &bytes)) {
		case STEP_POSTED:
			return (int64_t)bytes;
		case STEP_LAST:
			b->op[tenant] = next;
			/* A stream it started may have pieces already. */
			b->s_fresh[tenant] = true;
			return (int64_t)bytes;
		case STEP_WAIT:
			b->op[tenant] = next;
			continue;
		case STEP_GONE:
			for (unsigned i = 0; i < TENANT_MAX; i++)
				b->ops_fresh[i] = true;
			return 0;
		}
	}
	for (;;) {
		if (b->s_fresh[tenant]) {
			b->s_fresh[tenant] = false;
			b->s[tenant] = bulk_stream_from(TAILQ_FIRST(&t->streams),
							tenant);
		}
		struct rdma_stream *s = b->s[tenant];
		if (!s)
			return -1;
		switch (post_stream_step(t, s, &bytes)) {
		case STEP_POSTED:
			return (int64_t)bytes;
		case STEP_LAST:
			b->s[tenant] = bulk_stream_from(TAILQ_NEXT(s, q), tenant);
			return (int64_t)bytes;
		case STEP_WAIT:
		case STEP_GONE:
			/* Streams stay listed until the reap: the walk goes
			 * on from s. */
			b->s[tenant] = bulk_stream_from(TAILQ_NEXT(s, q), tenant);
			continue;
		}
	}
}

/* The rest (default and bulk) by tenant shares (rdma_sched.h), each
 * request only to a queue pair holding fewer than rdma_bulk_depth. */
static void post_bulk(struct rdma *t)
{
	struct bulk_pass b = { .t = t };
	uint32_t waiting = 0;
	struct xop *op;
	struct rdma_stream *s;

	TAILQ_FOREACH(op, &t->waiting, q)
		if (!is_latency(op))
			waiting |= 1u << op->tenant;
	TAILQ_FOREACH(s, &t->streams, q)
		if (!is_latency(s->op) && stream_has_piece(s))
			waiting |= 1u << s->op->tenant;
	for (unsigned i = 0; i < TENANT_MAX; i++)
		b.ops_fresh[i] = b.s_fresh[i] = true;
	rdma_sched_bulk(&t->sched, waiting, bulk_post, &b);
}

/* Post what waits, the latency class first (with the whole depth of a
 * queue pair), then the rest (up to rdma_bulk_depth) by tenant: a peer
 * full for latency is full for the rest too, so one pass marker serves
 * both.  A tenant a cap held back is pumped for again once its bucket
 * refills (pace_ev). */
void rdma_pump(struct rdma *t)
{
	t->pass++;
	t->submitted = false;
	rdma_sched_begin(&t->sched, now_ns());
	post_latency(t);
	post_bulk(t);
	flush(t);
	uint64_t wait = rdma_sched_pace_ns(&t->sched);
	if (wait && t->pace_ev) {
		uint64_t us = (wait + 999) / 1000;
		struct timeval tv = { .tv_sec = (time_t)(us / 1000000),
				      .tv_usec = (suseconds_t)(us % 1000000) };
		event_add(t->pace_ev, &tv);
	}
	rdma_streams_reap(t);
}

void rdma_on_pace(evutil_socket_t fd, short what, void *arg)
{
	struct rdma *t = arg;
	(void)fd, (void)what;

	if (!TAILQ_EMPTY(&t->waiting) || t->pieces_queued)
		rdma_pump(t);
}

/* --- completions --- */

static void on_wc(struct rdma *t, const struct ibv_wc *wc)
{
	unsigned slot = (unsigned)(wc->wr_id >> 48);
	uint16_t gen = (uint16_t)(wc->wr_id >> 32);
	struct rqp *q = slot < QP_SLOTS ? t->tables.qp[slot] : NULL;

	/* The table changes on this thread only: no lock to read it. */
	if (!q || q->gen != gen)
		return;  /* of a queue pair taken down meanwhile */
	if (wc->status != IBV_WC_SUCCESS) {
		/* wc->opcode is undefined in a failed completion. */
		const struct posted *e =
			&q->ring[(uint32_t)wc->wr_id % RDMA_QP_DEPTH];
		struct xop *op = e->op ? e->op
			       : e->piece ? rdma_piece_op(e->piece) : NULL;
		log_warnx("RDMA: %s on QP %u to %s (rail %d): %s "
			  "(vendor error 0x%x); queue pair closed",
			  e->read ? "READ" : "WRITE",
			  q->qp->qp_num, rdma_peer_label(q), q->rail,
			  ibv_wc_status_str(wc->status), wc->vendor_err);
		stat_add64(&t->tables.rail[q->rail].errors, 1);
		/* The owner no longer grants that memory (deregistered):
		 * later uses of the import go by TCP, which says why. */
		if ((wc->status == IBV_WC_REM_ACCESS_ERR ||
		     wc->status == IBV_WC_REM_INV_REQ_ERR) && op &&
		    region_rdma(op->remote))
			region_rdma(op->remote)->nkeys = 0;
		/* A flushed request broke nothing: it only says the QP is
		 * in error already.  Another's request did the harm. */
		rdma_qp_fail_by(t, q, -EIO,
			   wc->status == IBV_WC_WR_FLUSH_ERR ? NULL : op);
		return;
	}
	rdma_retire(t, q, (uint32_t)wc->wr_id, 0, NULL);
}

bool rdma_poll(struct rdma *t)
{
	struct ibv_wc wc[POLL_BATCH];
	bool progress = false;

	if (!t)
		return false;
	/* What this pass's drain submitted goes out now, chained: one post
	 * per queue pair for a whole vector, not one per descriptor. */
	if (t->submitted) {
		rdma_pump(t);
		progress = true;
	}
	if (t->outstanding == 0 && !t->drain)
		return rdma_streams_reap(t) || progress;
	bool drained = t->outstanding == 0;
	for (int d = 0; d < t->ndevs; d++) {
		int n = ibv_poll_cq(t->dev[d].v.cq, POLL_BATCH, wc);
		if (n < 0) {
			log_warnx("RDMA: ibv_poll_cq failed");
			continue;
		}
		for (int i = 0; i < n; i++)
			on_wc(t, &wc[i]);
		progress |= n > 0;
		drained &= n == 0;
	}
	if (drained)
		t->drain = false;
	if (progress && (!TAILQ_EMPTY(&t->waiting) || t->pieces_queued))
		rdma_pump(t);
	/* Streams that ended in a completion end their operations. */
	progress |= rdma_streams_reap(t);
	return progress;
}

bool rdma_busy(const struct rdma *t)
{
	return t && t->outstanding > 0;
}

bool rdma_arm(struct rdma *t)
{
	if (!t || t->outstanding == 0)
		return true;
	for (int d = 0; d < t->ndevs; d++)
		if (t->dev[d].outstanding &&
		    ibv_req_notify_cq(t->dev[d].v.cq, 0))
			log_warnx("RDMA: ibv_req_notify_cq failed");
	/* Completions that came before the request raise no event. */
	return !rdma_poll(t);
}

void rdma_on_channel(evutil_socket_t fd, short what, void *arg)
{
	struct rdev *d = arg;
	struct ibv_cq *cq;
	void *ctx;
	(void)fd, (void)what;

	while (ibv_get_cq_event(d->v.channel, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
	/* The thread's loop polls the CQ next. */
}

