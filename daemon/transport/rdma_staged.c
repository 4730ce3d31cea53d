/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_staged.c - the RDMA transport's staged route (ROUTE_RDMA_STAGED):
 * host memory here that no NIC registration covers (xfer_reg'd, or a
 * memfd not registered yet) goes through the transport's own staging
 * buffers, a CPU copy on this side, toward a region the owner registered.
 *
 * Progress thread only; no lock of its own (the staging pool's, taken
 * inside mem/staging.c, is a leaf).
 *
 * One pool (mem/staging.h, not pinned for GPUs) made and registered with
 * every device at start, RDMA_STAGE_BYTES in chunks of at most
 * RDMA_STAGE_CHUNK (smaller when the memlock limit refuses that).  Each
 * staged work request asks for its own completion, so that a chunk comes
 * back the moment its request is done and the next pump refills it while
 * the others are on the wire.  (Posting each chunk the moment it is filled,
 * rather than with the pump's chain, measured slower under Soft-RoCE.)  A
 * WRITE's piece is copied into a send chunk (cma_copy) just before its
 * work request is chained; a READ's piece lands in a receive chunk and is
 * copied out when its completion retires it.  Each work request holds
 * its chunk in its ring entry, so the chunk outlives an operation that
 * ended early (cancelled, past its deadline, its queue pair failed): the
 * completion, or the queue pair's teardown, gives it back.  No chunk
 * free: the operation waits in order (one waiter per half, whose chunk
 * is kept as the spare until the next pump) and never fails for it.
 *
 * The posting code (rdma_post.c) sees this file through four calls
 * (rdma_int.h): the buffers' key, whether a half is starved this pump,
 * the chunk of a piece, and a retired piece.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "core/log.h"
#include "transport/rdma_int.h"
#include "mem/cma.h"
#include "mem/region.h"
#include "mem/staging.h"
#include "common/container_of.h"
#include "xfer_ring.h"

/* Staging buffers: 32 MiB in flight (half each way) covers a 100 Gb/s
 * link's bandwidth-delay product many times over; halved down to
 * RDMA_STAGE_MIN while registration is refused (memlock). */
#define RDMA_STAGE_BYTES (32u << 20)
#define RDMA_STAGE_CHUNK (256u << 10)
#define RDMA_STAGE_MIN   (2u << 20)

/* Waiting for a staging chunk of one half (at most one waiter each). */
struct stage_wait {
	struct staging_waiter w;
	struct rdma *t;
	struct staging_chunk *spare;  /* handed over, not used yet */
	uint64_t starved;         /* the pump that found none */
};

struct rdma_staging {
	struct staging_pool *pool;
	/* The pool, registered whole on every device. */
	struct ibv_mr *mr[RDMA_DEV_MAX];
	uint32_t chunk;
	struct stage_wait swait[2];   /* by enum staging_half */
};

/* len bytes between local region r at off and staging memory p: into
 * p (to_chunk) or out of it.  Returns len or -errno (cma.h). */
static int64_t stage_copy(struct region *r, uint64_t off, void *p,
			  uint32_t len, bool to_chunk)
{
	if (region_kind(r) == REGION_CMA)
		return cma_copy(r, !to_chunk, p, off, len);
	/* memfd memory not registered (yet): xferd's own mapping */
	if (to_chunk)
		memcpy(p, region_map_at(r, off), len);
	else
		memcpy(region_map_at(r, off), p, len);
	return len;
}

/* A chunk came back while we waited: kept for the next pump. */
static void stage_ready(struct staging_waiter *w, struct staging_chunk *c)
{
	struct stage_wait *sw = container_of(w, struct stage_wait, w);

	sw->spare = c;
	sw->t->submitted = true;  /* rdma_poll pumps again */
}

/* A chunk of half h, or NULL (then one is on its way: wait). */
static struct staging_chunk *stage_take(struct rdma *t, enum staging_half h)
{
	struct rdma_staging *s = t->staging;
	struct stage_wait *sw = &s->swait[h];
	struct staging_chunk *c = sw->spare;

	if (c) {
		sw->spare = NULL;
		return c;
	}
	if ((c = staging_take(s->pool, h)))
		return c;
	staging_wait(s->pool, h, &sw->w);
	sw->starved = t->pass;
	return NULL;
}

void rdma_staging_close(struct rdma_staging *s)
{
	int rc;

	if (!s)
		return;
	for (int h = 0; h < 2; h++) {
		if (!s->pool)
			break;
		staging_cancel(s->pool, &s->swait[h].w);
		if (s->swait[h].spare)
			staging_give(s->swait[h].spare);
		s->swait[h].spare = NULL;
	}
	for (int d = 0; d < RDMA_DEV_MAX; d++) {
		if (s->mr[d] && (rc = ibv_dereg_mr(s->mr[d])))
			log_warnx("RDMA: ibv_dereg_mr of the staging buffers: "
				  "%s", strerror(rc));
		s->mr[d] = NULL;
	}
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

struct rdma_staging *rdma_staging_open(struct rdma *t)
{
	int err = -ENOMEM;

	for (uint32_t bytes = RDMA_STAGE_BYTES; bytes >= RDMA_STAGE_MIN;
	     bytes /= 2) {
		/* at least 4 chunks each way */
		uint32_t chunk = bytes / 8 < RDMA_STAGE_CHUNK ? bytes / 8
							      : RDMA_STAGE_CHUNK;
		struct rdma_staging *s = calloc(1, sizeof(*s));
		if (!s)
			break;
		for (int h = 0; h < 2; h++)
			s->swait[h] = (struct stage_wait){
				.w = { .ready = stage_ready }, .t = t };
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

/* --- as posting sees it (rdma_post.c) --- */

bool rdma_staging_lkey(const struct rdma_staging *s, int dev, uint32_t *lkey)
{
	const struct ibv_mr *mr = s && dev >= 0 && dev < RDMA_DEV_MAX
					  ? s->mr[dev] : NULL;

	if (!mr)
		return false;
	*lkey = mr->lkey;
	return true;
}

bool rdma_staging_starved(const struct rdma *t, bool read)
{
	enum staging_half h = read ? STAGING_RECV : STAGING_SEND;

	return t->staging->swait[h].starved == t->pass;
}

int rdma_staging_piece(struct rdma *t, struct xop *op, uint64_t *len,
		       struct staging_chunk **c)
{
	bool read = op->opcode == XFER_OP_READ;

	if (*len > t->staging->chunk)
		*len = t->staging->chunk;
	if (!(*c = stage_take(t, read ? STAGING_RECV : STAGING_SEND)))
		return 1;
	int64_t rc = read ? 0 : stage_copy(op->local,
					   op->local_off + rop(op)->posted,
					   (*c)->p, (uint32_t)*len, true);
	if (rc < 0) {
		staging_give(*c);
		*c = NULL;
		return (int)rc;
	}
	return 0;
}

void rdma_staging_retire(struct posted *e, struct xop *op, int err)
{
	/* A READ's bytes go where they belong only while its operation
	 * still wants them. */
	if (!err && e->read && op && !rop(op)->error) {
		int64_t rc = stage_copy(op->local, e->local_off, e->chunk->p,
					e->bytes, false);
		if (rc < 0)
			rop(op)->error = (int)rc;
	}
	staging_give(e->chunk);
	e->chunk = NULL;
}

/* --- as a mover (core/mover.h) ---
 *
 * The same transport, its queue pairs and completions, with another way
 * in: the first table (rdma.c) polls, arms, cancels, expires and follows
 * peers for every operation of the transport, staged or not; this one
 * only takes operations. */

/* Through the staging buffers: host memory here that no NIC registration
 * covers (xfer_reg'd, or memfd not registered), toward a region the
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
	if (k != REGION_CMA && (k != REGION_MEMFD || region_nic_mr(op->local)))
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
	.move_now = mover_stub_move_now,
	.move_list = mover_stub_move_list,
	.accepts = rdma_stage_accepts,
	.submit = rdma_stage_submit,
	.cancel_client = stage_cancel_client,
	.expire = stage_expire,
	.poll = mover_stub_poll,
	.arm = mover_stub_arm,
	.needs_loop = mover_stub_needs_loop,
	.peer_up = mover_stub_peer_up,
	.peer_down = mover_stub_peer_down,
	.frame = mover_stub_frame,
	.describe = mover_stub_describe,
	.set_cfg = stage_set_cfg,
	.destroy = stage_destroy,
};
