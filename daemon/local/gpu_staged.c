/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_staged.c - the staged mover (ROUTE_GPU_STAGED): GPU memory and
 * xfer_reg'd host memory on this node, which no single engine reaches,
 * meet in pinned staging chunks: one op per descriptor, moved chunk by
 * chunk by staged.c, ending when its last chunk did (CQE path
 * cuda-staged).
 *
 * Made only where there are GPUs and a staging pool.
 *
 * Progress thread only.
 */
#include <errno.h>
#include <stdlib.h>

#include "local/local.h"
#include "local/staged.h"

struct gpu_staged_mover {
	const struct local_res *res;
	struct lstage_ctx lstages;
};

static int64_t staged_move_now(void *mv, struct move_req *rq)
{
	struct gpu_staged_mover *m = mv;
	const struct local_hooks *h = &m->res->hooks;

	if (rq->len == 0)
		return 0;
	struct xop *op = h->op_begin(h->arg, rq);
	if (!op)
		return -ENOMEM;
	op->len = rq->len;
	op->local_off = rq->loff;
	op->remote_off = rq->roff;
	int err = lstage_submit(&m->lstages, op);
	if (err) {
		h->op_abandon(h->arg, op);
		return err;
	}
	rq->async = true;
	return 0;
}

static void staged_cancel_client(void *mv, const struct prog_client *pc)
{
	struct gpu_staged_mover *m = mv;

	lstage_cancel_client(&m->lstages, pc);
}

void *gpu_staged_mover_create(const struct local_res *res)
{
	struct gpu_staged_mover *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->res = res;
	lstage_init(&m->lstages, res);
	return m;
}

/* Descriptors still out end (-ECANCELED); their chunks in a copy go
 * back to the pool as the copies end. */
static void staged_destroy(void *mv)
{
	struct gpu_staged_mover *m = mv;

	lstage_cancel_client(&m->lstages, NULL);
	free(m);
}

const struct mover_ops gpu_staged_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "gpu-staged",
	.move_now = staged_move_now,
	.submit = local_refuse_op,
	.cancel_client = staged_cancel_client,
	.destroy = staged_destroy,
};
