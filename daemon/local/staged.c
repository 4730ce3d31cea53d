/* SPDX-License-Identifier: Apache-2.0 */
/*
 * staged.c - GPU memory <-> xfer_reg'd host memory on this node,
 * through staging chunks (staged.h), for the staged mover
 * (gpu_staged.c).
 *
 * One lstage per descriptor, beside its xop.  It hands out the
 * descriptor's bytes chunk by chunk, in order, keeping up to LSTAGE_AHEAD
 * chunks in flight; each chunk is one CMA call and one GPU copy:
 *
 *   CMA -> GPU: take a receive chunk, cma_copy into it, queue the H2D
 *               copy; h2d_done gives the chunk back.
 *   GPU -> CMA: take a send chunk, queue the D2H copy; d2h_done copies
 *               the chunk out with cma_copy and gives it back.
 *
 * The CMA copies run on the copy workers (mem/copy_workers.h) when
 * xferd has some: one core copies another process's memory at a fraction
 * of what a copy engine moves, so several chunks are copied at once
 * (cma_read_done / cma_write_done take over from there).  Without
 * workers they run here, at once, as the chunk is staged.
 *
 * The chunk in a GPU copy holds a reference to the GPU region (c->r):
 * a descriptor cancelled meanwhile (its client died) leaves the chunk
 * to its copy, which gives it back when done (c->owner NULL: nothing
 * else is done with its bytes).
 *
 * Re-entrancy: staging_give() may hand the chunk straight to a waiter,
 * another lstage (or a link) that starts work, and may end, inside the
 * call.  So a chunk is given back last, after everything of its lstage
 * was done, and never while that lstage could still be freed by it.
 *
 * Progress thread only.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/container_of.h"
#include "mem/copy_workers.h"
#include "local/local.h"
#include "local/staged.h"
#include "core/xop.h"
#include "gpu/gpu.h"
#include "core/log.h"
#include "mem/cma.h"
#include "mem/region.h"

struct lstage {
	struct lstage_ctx *p;
	struct xop *op;             /* the descriptor; holds both regions */
	struct region *cma, *gpu;   /* op's ends, by kind */
	uint64_t cma_off, gpu_off;
	uint32_t chunk_len;         /* bytes per chunk */
	bool to_gpu;
	uint64_t next;              /* bytes handed to chunks so far */
	unsigned out;               /* chunks in flight */
	int err;                    /* first failure */
	struct staging_chunk_list chunks; /* in flight, for cancel */
	struct staging_waiter w;    /* for a chunk */
	TAILQ_ENTRY(lstage) q;      /* p->lstages */
};

enum staging_half lstage_half(bool to_gpu)
{
	return to_gpu ? STAGING_RECV : STAGING_SEND;
}

uint32_t lstage_chunk_len(uint32_t chunk_bytes)
{
	return chunk_bytes < LSTAGE_CHUNK_MAX ? chunk_bytes : LSTAGE_CHUNK_MAX;
}

static void advance(struct lstage *ls);
static void h2d_done(struct xop *cop, int64_t res);
static void d2h_done(struct xop *cop, int64_t res);

/* Everything handed out came back (or it failed and nothing is out). */
static void maybe_end(struct lstage *ls)
{
	if (ls->out || ls->w.waiting ||
	    (!ls->err && ls->next < ls->op->len))
		return;
	struct lstage_ctx *p = ls->p;
	struct xop *op = ls->op;
	int64_t res = ls->err ? ls->err : (int64_t)op->len;
	TAILQ_REMOVE(&p->lstages, ls, q);
	free(ls);
	p->res->hooks.op_done(p->res->hooks.arg, op, res);
}

static void fail(struct lstage *ls, int err)
{
	if (!ls->err)
		ls->err = err;
}

/* The chunk's GPU copy is over: it is no longer in flight for ls. */
static void chunk_back(struct lstage *ls, struct staging_chunk *c)
{
	TAILQ_REMOVE(&ls->chunks, c, q);
	ls->out--;
}

static void release_copy(struct staging_chunk *c)
{
	c->in_copy = false;
	region_put(c->r);
	c->r = NULL;
	c->owner = NULL;
}

/* Queue the chunk's GPU copy (its bytes are in it for an H2D copy). */
static int start_gpu_copy(struct lstage *ls, struct staging_chunk *c)
{
	struct lstage_ctx *p = ls->p;

	c->xop.len = c->len;
	gpu_op_of(&c->xop)->on_done = ls->to_gpu ? h2d_done : d2h_done;
	region_get(ls->gpu);
	c->r = ls->gpu;
	c->in_copy = true;
	uint64_t gaddr = region_gpu_ptr(ls->gpu) + ls->gpu_off + c->at;
	int dev = region_gpu_dev(ls->gpu);
	int err = ls->to_gpu
		? gpu_copy(p->res->gpu, &c->xop, gaddr, dev,
			   (uint64_t)(uintptr_t)c->p, -1, c->len)
		: gpu_copy(p->res->gpu, &c->xop, (uint64_t)(uintptr_t)c->p, -1,
			   gaddr, dev, c->len);
	if (err)
		release_copy(c);  /* c->owner stays: the caller decides */
	return err;
}

static int64_t cma_run(struct copy_job *j)
{
	struct staging_chunk *c = container_of(j, struct staging_chunk,
					       cma_job);
	/* A receive chunk is filled from the region, a send chunk
	 * emptied into it. */
	return cma_copy(c->cma_r, c->half == STAGING_SEND, c->p, c->cma_off,
			c->len);
}

/* The chunk's CMA copy on a worker is over: its region goes back. */
static struct lstage *cma_over(struct staging_chunk *c)
{
	c->in_cma = false;
	region_put(c->cma_r);
	c->cma_r = NULL;
	return c->owner;
}

/* CMA -> GPU: the chunk holds its bytes; on to the H2D copy. */
static void cma_read_done(struct copy_job *j, int64_t res)
{
	struct staging_chunk *c = container_of(j, struct staging_chunk,
					       cma_job);
	struct lstage *ls = cma_over(c);

	if (!ls) {
		staging_give(c);  /* its descriptor was cancelled */
		return;
	}
	int err = res < 0 ? (int)res : ls->err ? ls->err : start_gpu_copy(ls, c);
	if (!err)
		return;           /* h2d_done takes it from here */
	c->owner = NULL;
	chunk_back(ls, c);
	fail(ls, err);
	advance(ls);
	staging_give(c);
}

/* GPU -> CMA: the chunk's bytes are out in the region. */
static void cma_write_done(struct copy_job *j, int64_t res)
{
	struct staging_chunk *c = container_of(j, struct staging_chunk,
					       cma_job);
	struct lstage *ls = cma_over(c);

	c->owner = NULL;
	if (ls) {
		chunk_back(ls, c);
		if (res < 0)
			fail(ls, (int)res);
		advance(ls);
	}
	staging_give(c);
}

/* Hand chunk c's CMA copy to a worker (c stays in ls's list). */
static void start_cma_copy(struct lstage *ls, struct staging_chunk *c)
{
	region_get(ls->cma);
	c->cma_r = ls->cma;
	c->cma_off = ls->cma_off + c->at;
	c->in_cma = true;
	c->owner = ls;
	c->cma_job.run = cma_run;
	c->cma_job.done = ls->to_gpu ? cma_read_done : cma_write_done;
	copy_workers_submit(ls->p->res->workers, &c->cma_job);
}

static void h2d_done(struct xop *cop, int64_t res)
{
	struct staging_chunk *c = container_of(cop, struct staging_chunk, xop);
	struct lstage *ls = c->owner;

	release_copy(c);
	if (ls) {
		chunk_back(ls, c);
		if (res < 0)
			fail(ls, (int)res);
		advance(ls);   /* may end and free ls */
	}
	staging_give(c);       /* last: it may start someone else's work */
}

static void d2h_done(struct xop *cop, int64_t res)
{
	struct staging_chunk *c = container_of(cop, struct staging_chunk, xop);
	struct lstage *ls = c->owner;

	release_copy(c);
	if (ls && res >= 0 && !ls->err && copy_workers_count(ls->p->res->workers)) {
		start_cma_copy(ls, c);  /* cma_write_done gives it back */
		return;
	}
	if (ls) {
		chunk_back(ls, c);
		if (res < 0) {
			fail(ls, (int)res);
		} else if (!ls->err) {
			int64_t rc = cma_copy(ls->cma, true, c->p,
					      ls->cma_off + c->at, c->len);
			if (rc < 0)
				fail(ls, (int)rc);
		}
		advance(ls);
	}
	staging_give(c);
}

/* Move the next bytes of ls through chunk c.  False: it failed, and c
 * is still the caller's to give back. */
static bool stage_chunk(struct lstage *ls, struct staging_chunk *c)
{
	uint64_t n = ls->op->len - ls->next;

	if (n > ls->chunk_len)
		n = ls->chunk_len;
	c->at = ls->next;
	c->len = (uint32_t)n;
	if (ls->to_gpu && copy_workers_count(ls->p->res->workers)) {
		/* In flight from now on: cma_read_done goes on. */
		TAILQ_INSERT_TAIL(&ls->chunks, c, q);
		ls->out++;
		ls->next += n;
		start_cma_copy(ls, c);
		return true;
	}
	if (ls->to_gpu) {
		int64_t rc = cma_copy(ls->cma, false, c->p,
				      ls->cma_off + c->at, n);
		if (rc < 0) {
			fail(ls, (int)rc);
			return false;
		}
	}
	c->owner = ls;
	int err = start_gpu_copy(ls, c);
	if (err) {
		c->owner = NULL;
		fail(ls, err);
		return false;
	}
	TAILQ_INSERT_TAIL(&ls->chunks, c, q);
	ls->out++;
	ls->next += n;
	return true;
}

static void chunk_ready(struct staging_waiter *w, struct staging_chunk *c)
{
	struct lstage *ls = container_of(w, struct lstage, w);

	if (ls->err || !stage_chunk(ls, c)) {
		advance(ls);
		staging_give(c);  /* ls waits for nothing now: not to it */
		return;
	}
	advance(ls);
}

/* Start chunks while there are bytes, room and free chunks; else wait
 * for one; end ls when all is done. */
static void advance(struct lstage *ls)
{
	struct staging_pool *sp = ls->p->res->staging;

	while (!ls->err && !ls->w.waiting && ls->out < LSTAGE_AHEAD &&
	       ls->next < ls->op->len) {
		struct staging_chunk *c =
			staging_take(sp, lstage_half(ls->to_gpu));
		if (!c) {
			staging_wait(sp, lstage_half(ls->to_gpu), &ls->w);
			break;
		}
		if (!stage_chunk(ls, c))
			staging_give(c);  /* ls is not waiting: not to it */
	}
	if (ls->err)
		staging_cancel(sp, &ls->w);
	maybe_end(ls);
}

void lstage_init(struct lstage_ctx *p, const struct local_res *res)
{
	TAILQ_INIT(&p->lstages);
	p->res = res;
}

int lstage_submit(struct lstage_ctx *p, struct xop *op)
{
	uint64_t loff = op->local_off, roff = op->remote_off;

	if (!p->res->gpu || !p->res->staging)
		return -ENOTSUP;
	struct lstage *ls = calloc(1, sizeof(*ls));
	if (!ls)
		return -ENOMEM;
	bool local_gpu = region_kind(op->local) == REGION_CUDA;
	bool write = op->opcode == XFER_OP_WRITE;
	*ls = (struct lstage){
		.p = p,
		.op = op,
		.cma = local_gpu ? op->remote : op->local,
		.gpu = local_gpu ? op->local : op->remote,
		.cma_off = local_gpu ? roff : loff,
		.gpu_off = local_gpu ? loff : roff,
		.chunk_len = lstage_chunk_len(staging_chunk_bytes(p->res->staging)),
		/* A write goes local -> remote, a read remote -> local. */
		.to_gpu = write != local_gpu,
	};
	TAILQ_INIT(&ls->chunks);
	ls->w.ready = chunk_ready;
	op->path = XFER_PATH_CUDA_STAGED;
	TAILQ_INSERT_TAIL(&p->lstages, ls, q);
	advance(ls);  /* may end it already (a failed first chunk) */
	return 0;
}

void lstage_cancel_client(struct lstage_ctx *p, const struct prog_client *pc)
{
	struct lstage *ls, *next;
	struct staging_chunk *c;

	for (ls = TAILQ_FIRST(&p->lstages); ls; ls = next) {
		next = TAILQ_NEXT(ls, q);
		if (pc && ls->op->pc != pc)
			continue;
		staging_cancel(p->res->staging, &ls->w);
		/* Their copies run on and give them back. */
		while ((c = TAILQ_FIRST(&ls->chunks))) {
			TAILQ_REMOVE(&ls->chunks, c, q);
			c->owner = NULL;
		}
		TAILQ_REMOVE(&p->lstages, ls, q);
		struct xop *op = ls->op;
		free(ls);
		/* Ends its batch at most, never another lstage: next is
		 * still there. */
		p->res->hooks.op_done(p->res->hooks.arg, op, -ECANCELED);
	}
}
