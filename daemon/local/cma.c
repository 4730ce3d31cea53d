/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cma.c - the CMA mover (ROUTE_CMA): xfer_reg'd memory (another
 * process's) at one end or both, the other end a memfd region mapped
 * here.
 *
 * memfd <-> CMA is one process_vm_readv/writev straight between the
 * mapping and the other process (one copy); CMA <-> CMA goes through a
 * bounce buffer (two copies).  From cma_split_bytes up, with two copy
 * workers or more, a copy goes in parts on the workers instead, as an
 * op that ends later (cma_split.c).  A prepared list between a memfd
 * region and a CMA one moves CMA_IOV_MAX segments a call.
 *
 * Progress thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "local/cma_split.h"
#include "local/local.h"
#include "mem/cma.h"
#include "mem/copy_workers.h"
#include "mem/region.h"
#include "xfer_ring.h"

/* The bounce buffer of CMA -> CMA copies. */
#define CMA_BOUNCE_BYTES (4u << 20)

struct cma_mover {
	const struct local_res *res;
	struct cma_splits splits;  /* descriptors out on the copy workers */
	uint64_t split_bytes;      /* from this size up (0: never) */
	void *bounce;              /* CMA -> CMA, CMA_BOUNCE_BYTES */
	size_t bounce_len;
};

/* CMA -> CMA through the bounce buffer.  When both ranges are in one
 * process and overlap with the target above the source, copy the chunks
 * from the end so no chunk reads bytes an earlier chunk overwrote. */
static int64_t cma_to_cma(struct cma_mover *m, const struct region *src,
			  uint64_t soff, const struct region *dst,
			  uint64_t doff, uint64_t len)
{
	uint64_t s = region_cma_addr(src) + soff, d = region_cma_addr(dst) + doff;
	bool backwards = region_cma_pid(src) == region_cma_pid(dst) && d > s && d < s + len;

	for (uint64_t done = 0; done < len;) {
		uint64_t n = len - done < m->bounce_len ? len - done
							 : m->bounce_len;
		uint64_t at = backwards ? len - done - n : done;
		int64_t rc = cma_read_private(src, m->bounce, soff + at, n);
		if (rc < 0)
			return rc;
		rc = cma_copy(dst, true, m->bounce, doff + at, n);
		if (rc < 0)
			return rc;
		done += n;
	}
	return (int64_t)len;
}

/* Copy len bytes from src at soff to dst at doff (ranges already checked
 * against the regions).  Returns len or -errno (-ESRCH: the other
 * process is gone; -EFAULT: its memory is no longer mapped). */
static int64_t cma_copy_range(struct cma_mover *m, const struct region *src,
			      uint64_t soff, const struct region *dst,
			      uint64_t doff, uint64_t len)
{
	if (region_kind(src) == REGION_MEMFD)
		return cma_copy(dst, true, region_map_at(src, soff), doff, len);
	if (region_kind(dst) == REGION_MEMFD)
		return cma_copy(src, false, region_map_at(dst, doff), soff, len);
	return cma_to_cma(m, src, soff, dst, doff, len);
}

/* In parts on the copy workers (cma_split.c), as an op ending later. */
static int64_t cma_move_split(struct cma_mover *m, struct move_req *rq)
{
	const struct local_hooks *h = &m->res->hooks;
	struct xop *op = h->op_begin(h->arg, rq);

	if (!op)
		return -ENOMEM;
	op->len = rq->len;
	op->local_off = rq->loff;
	op->remote_off = rq->roff;
	int err = cma_split_submit(&m->splits, op);
	if (err) {
		h->op_abandon(h->arg, op);
		return err;
	}
	rq->async = true;
	return 0;
}

static int64_t cma_move_now(void *mv, struct move_req *rq)
{
	struct cma_mover *m = mv;
	bool write = rq->opcode == XFER_OP_WRITE;

	if (rq->len == 0)
		return 0;
	if (m->split_bytes && rq->len >= m->split_bytes &&
	    copy_workers_count(m->res->workers) >= 2 &&
	    (write ? cma_split_fits(rq->local, rq->loff, rq->remote, rq->roff,
				    rq->len)
		   : cma_split_fits(rq->remote, rq->roff, rq->local, rq->loff,
				    rq->len)))
		return cma_move_split(m, rq);
	rq->path = XFER_PATH_CMA;
	return write ? cma_copy_range(m, rq->local, rq->loff, rq->remote,
				      rq->roff, rq->len)
		     : cma_copy_range(m, rq->remote, rq->roff, rq->local,
				      rq->loff, rq->len);
}

/*
 * A list's segments between a memfd region (mapped here) and an
 * xfer_reg'd one (another process's memory), CMA_IOV_MAX segments a
 * process_vm_writev/readv instead of one call each.  Other pairs of
 * ends go segment by segment.
 */
static int64_t cma_move_list(void *mv, struct move_list *ml)
{
	(void)mv;
	bool local_mapped = region_kind(ml->rq.local) == REGION_MEMFD;
	const struct region *mapped = local_mapped ? ml->rq.local
						   : ml->rq.remote;
	const struct region *other = local_mapped ? ml->rq.remote
						  : ml->rq.local;
	struct cma_range v[CMA_IOV_MAX];
	int64_t ns = ml->segments(ml);

	if (ns < 0)
		return ns;
	if (region_kind(mapped) != REGION_MEMFD ||
	    region_kind(other) != REGION_CMA)
		return MOVER_SUBMIT;
	ml->rq.path = XFER_PATH_CMA;
	/* Into the other process when the data flows local -> remote and
	 * it is the remote end, or remote -> local and it is the local. */
	bool to_other = (ml->rq.opcode == XFER_OP_WRITE) == local_mapped;
	for (int64_t k = 0; k < ns;) {
		uint32_t n = 0;
		for (; k < ns && n < CMA_IOV_MAX; k++, n++) {
			const struct dl_seg *sg = &ml->segs[k];
			v[n] = (struct cma_range){
				region_map_at(mapped, local_mapped ? sg->loff
								   : sg->roff),
				local_mapped ? sg->roff : sg->loff, sg->len };
		}
		int64_t rc = cma_copyv(other, to_other, v, n);
		if (rc < 0)
			return rc;
	}
	return (int64_t)ml->total;
}

static void cma_cancel_client(void *mv, const struct prog_client *pc)
{
	struct cma_mover *m = mv;

	cma_split_cancel_client(&m->splits, pc);
}

void *cma_mover_create(const struct local_res *res)
{
	struct cma_mover *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->bounce = malloc(CMA_BOUNCE_BYTES);
	if (!m->bounce) {
		free(m);
		return NULL;
	}
	m->bounce_len = CMA_BOUNCE_BYTES;
	m->res = res;
	cma_splits_init(&m->splits, res);
	return m;
}

void cma_mover_set_split(void *mv, uint64_t bytes)
{
	struct cma_mover *m = mv;

	m->split_bytes = bytes;
}

/* Split copies still out end (-ECANCELED); their parts run on, holding
 * their own references, until the copy workers are gone. */
static void cma_destroy(void *mv)
{
	struct cma_mover *m = mv;

	cma_split_cancel_client(&m->splits, NULL);
	free(m->bounce);
	free(m);
}

const struct mover_ops cma_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "cma",
	.move_now = cma_move_now,
	.move_list = cma_move_list,
	.submit = local_refuse_op,
	.cancel_client = cma_cancel_client,
	.destroy = cma_destroy,
};
