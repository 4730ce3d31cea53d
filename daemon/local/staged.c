/* SPDX-License-Identifier: Apache-2.0 */
/*
 * staged.c - GPU memory <-> xfer_reg'd host memory on this node, through
 * the staging pipeline (staged.h): the body of the staged mover
 * (gpu_staged.c).
 *
 * One lstage per descriptor: its pipeline and the two ends it pairs, a
 * host stage on the CMA region and a GPU stage on the GPU region.  Every
 * chunk holds a reference to both regions (cfg.hold) from the moment it
 * is taken until it is back in the pool, so a descriptor cancelled
 * meanwhile (its client died) may go at once: its chunks still in a copy
 * finish on their own and go back then (the pipeline's cancel rule).
 *
 * Progress thread only.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/xop.h"
#include "gpu/stage.h"
#include "local/local.h"
#include "local/staged.h"
#include "mem/copy_workers.h"
#include "mem/host_stage.h"
#include "mem/region.h"
#include "stage/pipeline.h"

struct lstage {
	struct lstage_ctx *p;
	struct xop *op;             /* the descriptor; holds both regions */
	struct pipeline *pl;
	struct host_stage host;     /* the CMA end */
	struct gpu_stage gpu;       /* the GPU end */
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

/* The CMA copies on the copy workers (inline when there are none). */
static void submit_cma(void *workers, struct copy_job *j)
{
	copy_workers_submit(workers, j);
}

/* Every chunk came back: the descriptor ends. */
static void lstage_done(void *arg, int64_t result)
{
	struct lstage *ls = arg;
	struct lstage_ctx *p = ls->p;
	struct xop *op = ls->op;

	TAILQ_REMOVE(&p->lstages, ls, q);
	pipeline_destroy(ls->pl);
	free(ls);
	p->res->hooks.op_done(p->res->hooks.arg, op, result);
}

void lstage_init(struct lstage_ctx *p, const struct local_res *res)
{
	TAILQ_INIT(&p->lstages);
	p->res = res;
}

int lstage_submit(struct lstage_ctx *p, struct xop *op)
{
	const struct local_res *res = p->res;
	uint64_t loff = op->local_off, roff = op->remote_off;

	if (!res->gpu || !res->staging)
		return -ENOTSUP;
	struct lstage *ls = calloc(1, sizeof(*ls));
	if (!ls)
		return -ENOMEM;
	bool local_gpu = region_kind(op->local) == REGION_CUDA;
	bool write = op->opcode == XFER_OP_WRITE;
	/* A write goes local -> remote, a read remote -> local. */
	bool to_gpu = write != local_gpu;
	struct region *cma = local_gpu ? op->remote : op->local;
	struct region *gpu = local_gpu ? op->local : op->remote;
	uint64_t gpu_off = local_gpu ? loff : roff;

	*ls = (struct lstage){
		.p = p,
		.op = op,
		.host = {
			.r = cma,
			.off = local_gpu ? roff : loff,
			.submit = submit_cma,
			.submit_ctx = res->workers,
			.cls = op->cls,
			.tenant = op->tenant,
		},
		.gpu = {
			.g = res->gpu,
			.addr = region_gpu_ptr(gpu) + gpu_off,
			.dev = region_gpu_dev(gpu),
			.cls = op->cls,
		},
	};
	struct pipeline_cfg cfg = {
		.pool = res->staging,
		.half = lstage_half(to_gpu),
		.cls = op->cls,
		.len = op->len,
		.chunk = lstage_chunk_len(staging_chunk_bytes(res->staging)),
		.ahead = LSTAGE_AHEAD,
		.fill = to_gpu ? &host_stage_read : &gpu_stage_d2h,
		.fill_arg = to_gpu ? (void *)&ls->host : (void *)&ls->gpu,
		.drain = to_gpu ? &gpu_stage_h2d : &host_stage_write,
		.drain_arg = to_gpu ? (void *)&ls->gpu : (void *)&ls->host,
		.hold = { cma, gpu },
		.done = lstage_done,
		.arg = ls,
	};
	if (!(ls->pl = pipeline_create(&cfg))) {
		free(ls);
		return -ENOMEM;
	}
	op->path = XFER_PATH_CUDA_STAGED;
	TAILQ_INSERT_TAIL(&p->lstages, ls, q);
	pipeline_start(ls->pl);  /* may end it already (a failed first chunk) */
	return 0;
}

void lstage_cancel_client(struct lstage_ctx *p, const struct prog_client *pc)
{
	struct lstage *ls, *next;

	for (ls = TAILQ_FIRST(&p->lstages); ls; ls = next) {
		next = TAILQ_NEXT(ls, q);
		if (pc && ls->op->pc != pc)
			continue;
		TAILQ_REMOVE(&p->lstages, ls, q);
		/* Its chunks in a copy run on and go back when it ends. */
		pipeline_destroy(ls->pl);
		struct xop *op = ls->op;
		free(ls);
		/* Ends its batch at most, never another lstage: next is
		 * still there. */
		p->res->hooks.op_done(p->res->hooks.arg, op, -ECANCELED);
	}
}
