/* SPDX-License-Identifier: Apache-2.0 */
/*
 * local.h - the same-node movers: how they are made and what they share.
 *
 * Four movers behind core/mover.h move bytes between two regions of this
 * node, one per route of path_choose():
 *
 *   ROUTE_MEMCPY      memcpy.c     memfd <-> memfd, xferd's own mappings
 *   ROUTE_CMA         cma.c        process_vm_readv/writev; large copies
 *                                  in parts on the copy workers
 *                                  (cma_split.c)
 *   ROUTE_GPU         gpu.c        copies on the GPU copy engine
 *                                  (gpu/copy.c), indexed list copies
 *   ROUTE_GPU_STAGED  gpu_staged.c CMA and GPU copies meeting in pinned
 *                                  staging chunks (staged.c)
 *
 * memcpy and CMA move inside move_now() and make no op (the 8 B round
 * trip and the 64 B rate run through them).  The others start an op
 * through hooks.op_begin and end it through hooks.op_done; the executor
 * does the rest (batches, completions, notifications).  Every mover's
 * impl starts with a pointer to the struct local_res it was made with.
 *
 * Progress thread only (but for the copy workers' jobs, see cma_split.c
 * and staged.c).
 */
#ifndef XFERD_LOCAL_H
#define XFERD_LOCAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/mover.h"
#include "core/xop.h"
#include "mem/dlist.h"
#include "xfer_ring.h"

struct abatch;
struct gpu_copies;
struct staging_pool;
struct copy_workers;

/* What a same-node mover asks of the executor (engine/exec.c). */
struct local_hooks {
	/* An op for rq's descriptor: counted out in its batch (which waits
	 * for it), holding references to rq->local and rq->remote, opcode
	 * rq->opcode, everything else zero; NULL: out of memory. */
	struct xop *(*op_begin)(void *arg, const struct move_req *rq);
	/* An op of op_begin() that never went out: undone, no completion. */
	void (*op_abandon)(void *arg, struct xop *op);
	/* An op ended (its path stamped): into its batch. */
	void (*op_done)(void *arg, struct xop *op, int64_t result);
	/* A batch of a departed client whose GPU copies are still out:
	 * freed without a completion. */
	void (*forget_batch)(void *arg, struct abatch *ab);
	void *arg;
};

/* What the same-node movers share; the progress thread's, filled in
 * before it starts (the staging pool and the copy workers come after
 * the movers are made, so movers read them here when they run). */
struct local_res {
	struct local_hooks hooks;
	struct gpu_copies *gpu;       /* NULL: no GPUs */
	struct staging_pool *staging; /* NULL: no staging chunks */
	struct copy_workers *workers; /* NULL: none, jobs run inline */
};

extern const struct mover_ops memcpy_mover_ops;
extern const struct mover_ops cma_mover_ops;
extern const struct mover_ops gpu_mover_ops;
extern const struct mover_ops gpu_staged_mover_ops;

/* Each returns its impl for struct mover, or NULL (out of memory); its
 * ops' destroy() frees it. */
void *memcpy_mover_create(const struct local_res *res);
void *cma_mover_create(const struct local_res *res);
void *gpu_mover_create(const struct local_res *res);
void *gpu_staged_mover_create(const struct local_res *res);
/* CMA copies of this many bytes and more go in parts to the copy
 * workers (0: never); before the progress thread starts. */
void cma_mover_set_split(void *cma_mover, uint64_t bytes);

/* submit() of a same-node mover: never asked (its move_now() never
 * says MOVER_SUBMIT); an op that came anyway ends with -ENOTSUP. */
void local_refuse_op(void *m, struct xop *op);

/* --- prepared lists (struct move_list) --- */

/* The pair at k of the descriptor's index area, read once. */
static inline struct xfer_dlist_pair mover_list_pair(const uint64_t *area,
						     uint64_t k)
{
	uint64_t w = __atomic_load_n(&area[k], __ATOMIC_RELAXED);
	struct xfer_dlist_pair pr;

	memcpy(&pr, &w, sizeof(pr));
	return pr;
}

/* Check one pair: both indices in their lists, the same length. */
static inline int64_t mover_list_check(const struct move_list *ml,
				       struct xfer_dlist_pair pr,
				       uint64_t *len)
{
	if (pr.local >= ml->l->n || pr.remote >= ml->r->n)
		return -ERANGE;
	*len = dlist_len(ml->l, pr.local);
	return *len == dlist_len(ml->r, pr.remote) ? 0 : -EINVAL;
}

#endif /* XFERD_LOCAL_H */
