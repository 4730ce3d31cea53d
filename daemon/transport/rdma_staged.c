/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_staged.c - the RDMA transport's staged route (ROUTE_RDMA_STAGED):
 * memory here that no NIC registration covers (xfer_reg'd host memory,
 * a memfd not registered yet, GPU memory without a dma-buf registration)
 * goes through registered staging chunks, a copy on this side, toward a
 * region the owner registered.
 *
 * Progress thread only; no lock of its own (the staging pool's, taken
 * inside mem/staging.c, is a leaf).
 *
 * One pool, registered with every device at start, half for writes,
 * half for reads.  On a node with GPUs it is the GPU staging pool
 * (progress_enable_staging: pinned for the GPUs, chunks of tcp_chunk),
 * which the transport registers with its NICs too, so that one pool is
 * both and GPU memory stages through it; elsewhere, or when that
 * registration is refused, the transport makes its own (not pinned for
 * GPUs) of RDMA_STAGE_BYTES in chunks of at most RDMA_STAGE_CHUNK
 * (smaller when the memlock limit refuses that), and GPU memory then
 * has no RDMA route (the link stages it).  Each staged operation is a
 * stream of the staging pipeline (stage/pipeline.h) over it, in chunks
 * of min(rdma_stripe, chunk), as many out at once as the half holds;
 * its pairing of stages depends only on the local memory's kind:
 *
 *   WRITE  host_stage_read (cma_copy, or memcpy for memfd) -> RDMA WRITE
 *          gpu_stage_d2h (GPU memory)                      -> RDMA WRITE
 *   READ   RDMA READ -> host_stage_write
 *          RDMA READ -> gpu_stage_h2d (GPU memory)
 *
 * The two RDMA stages are this file's: a chunk handed to one becomes a
 * piece of its operation, queued (s->queued) for the next pump, which
 * chains it onto a queue pair with the others (rdma_post.c: posting each
 * chunk the moment it is filled, rather than with the pump's chain,
 * measured slower under Soft-RoCE).  Each piece asks for its own
 * completion, so that its chunk comes back the moment it is done and the
 * pipeline refills it while the others are on the wire; its completion,
 * or its queue pair's teardown, ends the stage (rdma_piece_retire).  The
 * copies run inline, on the progress thread, as they always did here.
 *
 * Ending early (cancel, deadline, client or peer gone) is the pipeline's
 * one cancel rule: the stream is destroyed, a piece not posted yet ends
 * at once, one on the wire stays the NIC's, its chunk given back by its
 * completion or its queue pair's teardown; a READ's bytes that land then
 * go nowhere (the pipeline that would copy them out is gone), so a late
 * staged READ needs no queue pair closed.  A chunk never lacks: the
 * pipeline waits for one, in order, and never fails for it.
 *
 * The owner's memory that its NICs cannot reach goes by the same
 * streams toward chunks the owner lends (ROUTE_RDMA_OWNER_STAGED): the
 * RDMA stages take their remote address from the owner's grants, and a
 * WRITE ends when the owner says its copies are done (rdma_land.c).
 *
 * Lifetime: a stream is freed, and its operation ended, only in
 * rdma_streams_reap (rdma_int.h says why).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "core/log.h"
#include "gpu/stage.h"
#include "transport/rdma_int.h"
#include "mem/host_stage.h"
#include "mem/region.h"
#include "mem/staging.h"
#include "stage/pipeline.h"
#include "xfer_ring.h"

/* Staging buffers: 32 MiB in flight (half each way) covers a 100 Gb/s
 * link's bandwidth-delay product many times over; halved down to
 * RDMA_STAGE_MIN while registration is refused (memlock). */
#define RDMA_STAGE_BYTES (32u << 20)
#define RDMA_STAGE_CHUNK (256u << 10)
#define RDMA_STAGE_MIN   (2u << 20)

struct rdma_staging {
	struct staging_pool *pool;
	/* The pool, registered whole on every device. */
	struct ibv_mr *mr[RDMA_DEV_MAX];
	uint32_t chunk;
	/* The pool is the GPU staging pool (not ours to destroy), pinned
	 * for the copy engines of gpu: GPU memory stages through it. */
	struct gpu_copies *gpu;
	bool shared;
};

void rdma_staging_close(struct rdma_staging *s)
{
	int rc;

	if (!s)
		return;
	/* A shared pool's chunks may still be in GPU copies: the NICs no
	 * longer touch them (the queue pairs are gone), the pool's owner
	 * takes them back. */
	for (int d = 0; d < RDMA_DEV_MAX; d++) {
		if (s->mr[d] && (rc = ibv_dereg_mr(s->mr[d])))
			log_warnx("RDMA: ibv_dereg_mr of the staging buffers: "
				  "%s", strerror(rc));
		s->mr[d] = NULL;
	}
	if (!s->shared)
		staging_destroy(s->pool);
	free(s);
}

/* Register every chunk of s's fresh pool (one mapping) on every device
 * of t. */
static int stage_register(struct rdma_staging *s, const struct rdma *t)
{
	struct staging_chunk_list all = TAILQ_HEAD_INITIALIZER(all);
	struct staging_chunk *c;
	uint8_t *lo = NULL, *hi = NULL;
	int err = 0;

	for (int h = 0; h < 2; h++)
		while ((c = staging_take(s->pool, (enum staging_half)h))) {
			if (!lo || c->p < lo)
				lo = c->p;
			if (!hi || c->p + c->cap > hi)
				hi = c->p + c->cap;
			TAILQ_INSERT_TAIL(&all, c, q);
		}
	for (int d = 0; d < t->ndevs && lo; d++) {
		if (!t->dev[d].v.pd)
			continue;
		s->mr[d] = ibv_reg_mr(t->dev[d].v.pd, lo, (size_t)(hi - lo),
				      IBV_ACCESS_LOCAL_WRITE);
		if (!s->mr[d]) {
			err = errno ? -errno : -ENOMEM;
			break;
		}
	}
	while ((c = TAILQ_FIRST(&all))) {
		TAILQ_REMOVE(&all, c, q);
		staging_give(c);
	}
	return err;
}

/* The GPU staging pool, registered with the NICs: GPU memory and host
 * memory then stage through the same chunks.  NULL if it cannot be. */
static struct rdma_staging *open_shared(struct rdma *t,
					const struct rdma_stage_res *res)
{
	struct rdma_staging *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return NULL;
	s->pool = res->pool;
	s->shared = true;
	s->gpu = res->gpu;
	s->chunk = staging_chunk_bytes(res->pool);
	if ((err = stage_register(s, t))) {
		log_warnx("RDMA: the GPU staging chunks cannot be registered "
			  "with the NICs (%s; memlock limit?): GPU memory to "
			  "other nodes goes over TCP", strerror(-err));
		rdma_staging_close(s);
		return NULL;
	}
	log_info("RDMA staging: the GPU staging chunks (%u KiB each), "
		 "registered with the NICs: GPU and host memory stage "
		 "through them", s->chunk >> 10);
	return s;
}

struct rdma_staging *rdma_staging_open(struct rdma *t,
				       const struct rdma_stage_res *res)
{
	struct rdma_staging *shared;
	int err = -ENOMEM;

	if (res && res->pool && res->gpu && (shared = open_shared(t, res)))
		return shared;
	for (uint32_t bytes = RDMA_STAGE_BYTES; bytes >= RDMA_STAGE_MIN;
	     bytes /= 2) {
		/* at least 4 chunks each way */
		uint32_t chunk = bytes / 8 < RDMA_STAGE_CHUNK ? bytes / 8
							      : RDMA_STAGE_CHUNK;
		struct rdma_staging *s = calloc(1, sizeof(*s));
		if (!s)
			break;
		if (!(s->pool = staging_create(bytes, chunk, false))) {
			free(s);
			continue;
		}
		if (!(err = stage_register(s, t))) {
			s->chunk = chunk;
			log_info("RDMA staging buffers: %u KiB in chunks of %u "
				 "KiB", bytes >> 10, chunk >> 10);
			return s;
		}
		rdma_staging_close(s);
	}
	log_warnx("RDMA: no staging buffers (%s; memlock limit?): "
		  "xfer_reg'd memory goes over TCP", strerror(-err));
	return NULL;
}

struct staging_pool *rdma_staging_pool(const struct rdma_staging *s)
{
	return s->pool;
}

struct gpu_copies *rdma_staging_gpu(const struct rdma_staging *s)
{
	return s->gpu;
}

bool rdma_staging_lkey(const struct rdma_staging *s, int dev, uint32_t *lkey)
{
	const struct ibv_mr *mr = s && dev >= 0 && dev < RDMA_DEV_MAX
					  ? s->mr[dev] : NULL;

	if (!mr)
		return false;
	*lkey = mr->lkey;
	return true;
}

/* --- the RDMA WRITE and READ stages (core/stage.h) ---
 *
 * The stage's argument is the stream; its per-chunk state, the piece,
 * is in the chunk's priv area and outlives the stream while the piece is
 * on the wire. */

static void piece_queue(struct rdma_stream *s, struct rdma_piece *pc)
{
	pc->queued = true;
	TAILQ_INSERT_TAIL(&s->queued, pc, q);
	s->t->pieces_queued++;
	s->t->submitted = true;  /* rdma_poll pumps */
}

static void piece_unqueue(struct rdma_stream *s, struct rdma_piece *pc)
{
	pc->queued = false;
	TAILQ_REMOVE(&s->queued, pc, q);
	s->t->pieces_queued--;
}

/* c's bytes (c->len at c->at of the stream) go to the remote region
 * (WRITE) or come from it (READ) by a work request of the next pump. */
static int piece_start(void *arg, struct stage_chunk *c)
{
	struct rdma_stream *s = arg;
	struct rdma_piece *pc = STAGE_PRIV(c, struct rdma_piece);

	*pc = (struct rdma_piece){ .s = s };
	piece_queue(s, pc);
	return 0;
}

/* A piece not posted ends with err; the owner's landing chunk it was
 * matched to (a piece redone) goes back. */
static void piece_end_queued(struct rdma_stream *s, struct rdma_piece *pc,
			     int err)
{
	piece_unqueue(s, pc);
	if (pc->lent)
		rdma_land_piece_done(s->t, pc, err);
	stage_done(STAGE_CHUNK_OF_PRIV(pc), err);
}

/* The stream goes: a piece not posted ends now; one on the wire is the
 * NIC's until its completion or its queue pair's teardown. */
static void piece_cancel(void *arg, struct stage_chunk *c)
{
	struct rdma_stream *s = arg;
	struct rdma_piece *pc = STAGE_PRIV(c, struct rdma_piece);

	pc->s = NULL;
	if (pc->queued)
		piece_end_queued(s, pc, -ECANCELED);
}

static const struct stage_ops rdma_stage_write = {
	.name = "rdma-write",
	.start = piece_start,
	.cancel = piece_cancel,
};

static const struct stage_ops rdma_stage_read = {
	.name = "rdma-read",
	.start = piece_start,
	.cancel = piece_cancel,
};

struct xop *rdma_piece_op(struct stage_chunk *c)
{
	const struct rdma_piece *pc = STAGE_PRIV(c, struct rdma_piece);

	return pc->s ? pc->s->op : NULL;
}

void rdma_piece_retire(struct rdma *t, struct stage_chunk *c, int err,
		       const struct xop *culprit)
{
	struct rdma_piece *pc = STAGE_PRIV(c, struct rdma_piece);
	struct rdma_stream *s = pc->s;

	/* Only flushed by another operation's broken request: again, on
	 * another queue pair, once. */
	if (err && s && culprit && s->op != culprit && !pc->retried &&
	    !pipeline_error(s->pl)) {
		pc->retried = true;
		t->redone++;
		piece_queue(s, pc);
		return;
	}
	/* The owner's landing chunk: its bytes are in (or out), or it
	 * comes back unused; before the chunk here is given back. */
	if (pc->lent)
		rdma_land_piece_done(t, pc, err);
	stage_done(c, err ? err : (int64_t)c->len);
	/* s is not freed before the reap: its other pieces not posted
	 * end with it. */
	if (err && s)
		rdma_stream_fail(s, err);
}

/* --- streams --- */

void rdma_stream_end(struct rdma_stream *s, int64_t result)
{
	if (s->ended)
		return;
	s->ended = true;
	s->result = result;
	TAILQ_INSERT_TAIL(&s->t->ended, s, ended_q);
}

/* The pipeline ended (every chunk back): the reap ends the operation.
 * A WRITE through the owner's landing chunks waits for the owner's
 * copies out of them too (LandDone, rdma_land.c). */
static void stream_done(void *arg, int64_t result)
{
	struct rdma_stream *s = arg;

	if (s->owner && result >= 0 && s->op->opcode == XFER_OP_WRITE &&
	    !s->owner_done) {
		s->pl_over = true;
		s->result = result;
		return;
	}
	rdma_stream_end(s, result);
}

int rdma_stream_open(struct rdma *t, struct xop *op)
{
	bool read = op->opcode == XFER_OP_READ;
	bool gpu = region_kind(op->local) == REGION_CUDA;
	struct rdma_stream *s = calloc(1, sizeof(*s));
	uint32_t max = t->staging->chunk;
	bool owner = rop(op)->owner;

	if (!s)
		return -ENOMEM;
	*s = (struct rdma_stream){
		.t = t,
		.op = op,
		.host = { .r = op->local, .off = op->local_off },
	};
	/* The local end: a CPU copy of host memory, or the copy engine on
	 * GPU memory (accepts() took GPU memory only with a GPU pool). */
	const struct stage_ops *near_fill = &host_stage_read;
	const struct stage_ops *near_drain = &host_stage_write;
	void *near = &s->host;
	if (gpu) {
		s->gpu = (struct gpu_stage){
			.g = t->staging->gpu,
			.addr = region_gpu_ptr(op->local) + op->local_off,
			.dev = region_gpu_dev(op->local),
			.cls = op->cls,
		};
		near_fill = &gpu_stage_d2h;
		near_drain = &gpu_stage_h2d;
		near = &s->gpu;
	}
	TAILQ_INIT(&s->queued);
	/* a work request per chunk, of a stripe at most; through the
	 * owner's landing chunks, the same cut as the owner's (its chunk
	 * at most), so that each of its grants matches one of ours */
	uint32_t chunk = t->cfg.stripe < max ? (uint32_t)t->cfg.stripe : max;
	if (owner) {
		uint32_t lc = region_rdma(op->remote)->landing_chunk;
		chunk = lc < chunk ? lc : chunk;
		s->owner = true;
		s->land_id = ++t->land_seq;
		s->land_chunk = chunk;
		memcpy(s->peer, region_token(op->remote)->instance_id,
		       LINK_ID_LEN);
	}
	const struct pipeline_cfg cfg = {
		.pool = t->staging->pool,
		.half = read ? STAGING_RECV : STAGING_SEND,
		.cls = op->cls,
		.len = op->len,
		.chunk = chunk,
		/* the owner lends a few chunks at once: more of ours out
		 * would only wait for its grants */
		.ahead = owner ? 2 * LAND_GRANTS_AHEAD : 0,
		.fill = read ? &rdma_stage_read : near_fill,
		.fill_arg = read ? (void *)s : near,
		.drain = read ? near_drain : &rdma_stage_write,
		.drain_arg = read ? near : (void *)s,
		/* every chunk holds the local region: a GPU copy or a CPU
		 * copy of it may outlive the stream */
		.hold = { op->local, NULL },
		.done = stream_done,
		.arg = s,
	};
	if (!(s->pl = pipeline_create(&cfg))) {
		free(s);
		return -ENOMEM;
	}
	rop(op)->stream = s;
	TAILQ_INSERT_TAIL(&t->streams, s, q);
	if (owner)
		rdma_land_stream_open(s);
	pipeline_start(s->pl);
	return 0;
}

void rdma_stream_close(struct rdma_stream *s, int err, bool reroute)
{
	struct pipeline *pl = s->pl;

	if (s->ended)
		return;
	s->ended = true;
	s->result = err;
	s->reroute = reroute;
	s->pl = NULL;
	TAILQ_INSERT_TAIL(&s->t->ended, s, ended_q);
	pipeline_destroy(pl);  /* piece_cancel for each chunk in our stage */
}

void rdma_stream_fail(struct rdma_stream *s, int err)
{
	struct rdma_piece *pc;

	if (s->ended)
		return;
	/* A WRITE whose pipeline is over waits only for the owner. */
	if (s->pl_over) {
		rdma_stream_end(s, err);
		return;
	}
	pipeline_fail(s->pl, err);
	/* s stays (only the reap frees it) while its pipeline ends. */
	while ((pc = TAILQ_FIRST(&s->queued)))
		piece_end_queued(s, pc, err);
}

bool rdma_streams_reap(struct rdma *t)
{
	struct rdma_stream *s;
	bool any = false;

	while ((s = TAILQ_FIRST(&t->ended))) {
		TAILQ_REMOVE(&t->ended, s, ended_q);
		TAILQ_REMOVE(&t->streams, s, q);
		pipeline_destroy(s->pl);  /* over already, or NULL */
		struct xop *op = s->op;
		int64_t result = s->result;
		bool reroute = s->reroute;
		if (s->owner)
			rdma_land_stream_end(s);
		free(s);
		rop(op)->stream = NULL;
		if (reroute)
			t->hooks.reroute(t->hooks.arg, op);  /* to TCP */
		else
			rdma_op_end(t, op, result);
		any = true;
	}
	return any;
}

/* --- as a mover (core/mover.h) ---
 *
 * The same transport, its queue pairs and completions, with another way
 * in: the first table (rdma.c) polls, arms, cancels, expires and follows
 * peers for every operation of the transport, staged or not; this one
 * only takes operations. */

/* Through the staging buffers: memory here that no NIC registration
 * covers (xfer_reg'd, a memfd not registered, GPU memory without its
 * dma-buf registration when the pool is the GPU's), toward a region the
 * owner registered (its rkeys), on every rail pair to it. */
static bool rdma_stage_accepts(void *impl, const struct xop *op)
{
	struct rdma *t = impl;
	uint32_t lkey, rkey;

	if (!t->staging ||
	    (op->opcode != XFER_OP_WRITE && op->opcode != XFER_OP_READ) ||
	    op->len == 0 || !op->local || !region_rdma(op->remote))
		return false;
	enum region_kind k = region_kind(op->local);
	bool unregistered = !region_nic_mr(op->local);
	if (!(k == REGION_CMA ||
	      (k == REGION_MEMFD && unregistered) ||
	      (k == REGION_CUDA && unregistered && t->staging->gpu)))
		return false;
	struct rpeer *p = rdma_peer_of(t, op);
	if (!p || p->npairs == 0)
		return false;
	for (size_t i = 0; i < p->npairs; i++)
		if (!rdma_pair_usable(t, p, &p->pair[i], op, true, &lkey,
				      &rkey))
			return false;
	return true;
}

static void rdma_stage_submit(void *impl, struct xop *op)
{
	rdma_op_start(impl, op, true);
}

static void stage_cancel_client(void *impl, const struct prog_client *pc)
{
	(void)impl, (void)pc;  /* rdma_cancel_client ends them */
}

static bool stage_expire(void *impl, uint64_t now)
{
	(void)impl, (void)now;  /* rdma_expire does */
	return false;
}

static void stage_set_cfg(void *impl, const struct transport_cfg *cfg)
{
	(void)impl, (void)cfg;
}

static void stage_destroy(void *impl)
{
	(void)impl;  /* rdma_destroy, through the first table */
}

const struct mover_ops rdma_staged_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "rdma-staged",
	.accepts = rdma_stage_accepts,
	.submit = rdma_stage_submit,
	.cancel_client = stage_cancel_client,
	.expire = stage_expire,
	.set_cfg = stage_set_cfg,
	.destroy = stage_destroy,
};
