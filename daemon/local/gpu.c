/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu.c - the GPU mover (ROUTE_GPU): copies with GPU memory at one end
 * or both, on this node, queued on the GPU copy engine (gpu/copy.c);
 * an op ends when the events of all its copies fired (CQE path
 * cuda-ipc).
 *
 * The copies of one batch between the same two regions share one op (a
 * KV-cache vector is a thousand of them): one completion and one pair of
 * region references for all of them (move_req.batch_op).  A prepared
 * list between two GPU regions goes as indexed kernel launches, the
 * lists' offsets uploaded to the GPU once.  Its pairs are copied out of
 * the client's ring once, into xferd's pinned slot that the kernel
 * reads; between lists of one length for every entry that copy is
 * checked by one pass for its largest indices (a few ns a thousand
 * pairs), not pair by pair, and the kernel bounds every index again.
 *
 * This mover also runs the copy engine for everyone (poll: launch what
 * the pass queued, end what finished): the staging chunks' copies
 * (mem/staging.h) end through their own on_done from there.
 *
 * Progress thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "core/log.h"
#include "core/xop.h"
#include "gpu/gpu.h"
#include "gpu/kernel.h"
#include "local/local.h"
#include "mem/dlist.h"
#include "mem/region.h"
#include "xfer_ring.h"

struct gpu_mover {
	const struct local_res *res;
};

/* The GPU mover's part of an op (XOP_PRIV): the copy engine's first. */
struct gpu_mover_op {
	struct gpu_op copies;
	/* An indexed copy of two prepared lists: held until it ends (the
	 * kernel reads their offsets). */
	struct dlist *lists[2];
#ifdef XFERD_STAGE_STAMPS
	/* Where a list's time goes (logged when it ends): taken, pairs
	 * checked, launched (now_ns). */
	uint64_t stamp[3];
#endif
};

/*
 * Where a copy endpoint is for a copy that runs on GPU dev: a device
 * address valid there (*gpu the GPU it is memory of), or xferd's pinned
 * mapping of a memfd region (*gpu -1).
 */
static int gpu_end(struct region *r, uint64_t off, int dev, uint64_t *addr,
		   int *gpu)
{
	switch (region_kind(r)) {
	case REGION_CUDA:
		/* Mapped for dev itself when possible: then the copy is
		 * local to dev and may go in the batch kernel. */
		if (region_gpu_addr(r, dev, off, addr) == 0) {
			*gpu = dev;
			return 0;
		}
		*addr = region_gpu_ptr(r) + off;
		*gpu = region_gpu_dev(r);  /* a peer copy between contexts */
		return 0;
	case REGION_MEMFD: {
		/* Pinned on first use: DMA straight from the mapping. */
		int err = region_gpu_pin(r);
		if (err)
			return err;
		*addr = (uint64_t)(uintptr_t)region_map_at(r, off);
		*gpu = -1;
		return 0;
	}
	default:
		/* xfer_reg'd host memory lives in another process: no DMA. */
		return -ENOTSUP;
	}
}

/*
 * One copy: the GPU that runs it is the destination's (reading from a
 * peer over NVLink), or the source's when the destination is host
 * memory.
 */
static int64_t gpu_move_now(void *mv, struct move_req *rq)
{
	struct gpu_mover *m = mv;
	const struct local_hooks *h = &m->res->hooks;
	struct gpu_copies *g = m->res->gpu;
	bool write = rq->opcode == XFER_OP_WRITE;
	struct region *src = write ? rq->local : rq->remote;
	struct region *dst = write ? rq->remote : rq->local;
	uint64_t soff = write ? rq->loff : rq->roff;
	uint64_t doff = write ? rq->roff : rq->loff;
	uint64_t sa, da;
	int sgpu, dgpu, err;

	if (!g)
		return -ENOTSUP;
	int dev = region_kind(dst) == REGION_CUDA ? region_gpu_dev(dst)
						 : region_gpu_dev(src);
	if ((err = gpu_end(src, soff, dev, &sa, &sgpu)) ||
	    (err = gpu_end(dst, doff, dev, &da, &dgpu)))
		return err;
	if (rq->len == 0)
		return 0;
	struct xop *op = *rq->batch_op;
	if (!op || op->local != rq->local || op->remote != rq->remote) {
		op = h->op_begin(h->arg, rq);
		if (!op)
			return -ENOMEM;
		op->path = XFER_PATH_CUDA_IPC;
		*rq->batch_op = op;
	}
	err = gpu_copy(g, op, da, dgpu, sa, sgpu, rq->len);
	if (err && gpu_op_of(op)->parts == 0) {
		/* Nothing of it is out: it ends here, not through poll. */
		*rq->batch_op = NULL;
		h->op_abandon(h->arg, op);
		return err;
	}
	if (err) {
		gpu_op_of(op)->error = err;  /* the batch fails with it */
		return err;
	}
	op->len += rq->len;
	rq->async = true;
	return 0;
}

/* List l's offsets on GPU dev, uploaded on first use; NULL if that
 * cannot be done (then its transfers go block by block). */
static struct gpu_list *dl_on_gpu(struct dlist *l, int dev)
{
	if (!l->gpu) {
		l->gpu = calloc((size_t)gpu_count(), sizeof(*l->gpu));
		if (!l->gpu)
			return NULL;
	}
	if (!l->gpu[dev] &&
	    gpu_list_upload(dev, l->off, l->lens, l->n, &l->gpu[dev]))
		l->gpu[dev] = NULL;
	return l->gpu[dev];
}

/*
 * The pairs of ml into pinned slots of GPU dev (*nslots of them, in
 * slots[]), as source -> destination entries, each checked: 0 with
 * *total the bytes, -errno (-ERANGE, -EINVAL: a bad pair, nothing to
 * launch), or 1 when no slot is free (then block by block).  Slots taken
 * stay in slots[] either way: the caller releases them on failure.
 */
static int64_t list_pairs(struct gpu_copies *g, int dev,
			  const struct move_list *ml, bool write, int *slots,
			  unsigned *nslots, uint64_t *total)
{
	/* One length for every entry of both lists: no pair can differ in
	 * length, so the only check is each index against its list. */
	bool one_len = !ml->l->lens && !ml->r->lens &&
		       ml->l->len == ml->r->len;
	uint32_t lmax = 0, rmax = 0;

	for (uint64_t first = 0; first < ml->npairs; first += COPY_PAIRS_MAX) {
		uint64_t n = ml->npairs - first < COPY_PAIRS_MAX
				     ? ml->npairs - first : COPY_PAIRS_MAX;
		struct copy_pair *buf;
		if (*nslots == 8 ||
		    !(buf = gpu_pairs_reserve(g, dev, &slots[*nslots])))
			return 1;
		(*nslots)++;
		if (!one_len) {
			for (uint64_t k = 0; k < n; k++) {
				struct xfer_dlist_pair pr =
					mover_list_pair(ml->area, first + k);
				uint64_t len;
				int64_t err = mover_list_check(ml, pr, &len);
				if (err)
					return err;
				*total += len;
				buf[k] = write ? (struct copy_pair){ pr.local,
								     pr.remote }
					       : (struct copy_pair){ pr.remote,
								     pr.local };
			}
			continue;
		}
		/* The ring is the client's and may change while read: it is
		 * read once, here, and only xferd's copy is checked and
		 * launched.  The same layout as struct xfer_dlist_pair:
		 * local is the source of a WRITE, the destination of a
		 * READ. */
		_Static_assert(sizeof(struct copy_pair) ==
				       sizeof(struct xfer_dlist_pair),
			       "a pair is copied as it is in the ring");
		memcpy(buf, ml->area + first, n * sizeof(*buf));
		uint32_t smax = 0, dmax = 0;
		for (uint64_t k = 0; k < n; k++) {
			smax = buf[k].src > smax ? buf[k].src : smax;
			dmax = buf[k].dst > dmax ? buf[k].dst : dmax;
		}
		lmax = smax > lmax ? smax : lmax;
		rmax = dmax > rmax ? dmax : rmax;
		if (!write)
			for (uint64_t k = 0; k < n; k++)
				buf[k] = (struct copy_pair){ buf[k].dst,
							     buf[k].src };
	}
	if (!one_len)
		return 0;
	if (lmax >= ml->l->n || rmax >= ml->r->n)
		return -ERANGE;
	/* At most 2^32 pairs, each within a region: no overflow. */
	*total = ml->npairs * ml->l->len;
	return 0;
}

/*
 * Both lists over GPU memory that the destination's GPU reaches
 * directly: one indexed kernel launch per COPY_PAIRS_MAX pairs, the
 * pairs resolved on the GPU against the lists uploaded once.  Returns
 * 0 with ml->rq.async (the op ends later), MOVER_SUBMIT when this way is
 * not open (nothing done: the executor goes block by block), or -errno.
 */
static int64_t gpu_move_list(void *mv, struct move_list *ml)
{
	struct gpu_mover *m = mv;
	const struct local_hooks *h = &m->res->hooks;
	struct gpu_copies *g = m->res->gpu;
	bool write = ml->rq.opcode == XFER_OP_WRITE;
	struct region *src = write ? ml->rq.local : ml->rq.remote;
	struct region *dst = write ? ml->rq.remote : ml->rq.local;
	struct dlist *sl = write ? ml->l : ml->r, *dl = write ? ml->r : ml->l;
	uint64_t sbase, dbase;
	int64_t err = 0;

	if (!g || region_kind(src) != REGION_CUDA ||
	    region_kind(dst) != REGION_CUDA)
		return MOVER_SUBMIT;
	int dev = region_gpu_dev(dst);
	if (region_gpu_addr(src, dev, write ? ml->lbase : ml->rbase, &sbase) ||
	    region_gpu_addr(dst, dev, write ? ml->rbase : ml->lbase, &dbase))
		return MOVER_SUBMIT;
	struct gpu_list *sg = dl_on_gpu(sl, dev), *dg = dl_on_gpu(dl, dev);
	if (!sg || !dg)
		return MOVER_SUBMIT;
	ml->rq.path = XFER_PATH_CUDA_IPC;
	if (!ml->area)
		return ml->segments(ml);  /* says why there are no pairs */
	/* Every pair checked before anything is launched. */
	int slots[8];
	unsigned nslots = 0;
	uint64_t total = 0;
#ifdef XFERD_STAGE_STAMPS
	uint64_t t_taken = now_ns();
#endif
	err = list_pairs(g, dev, ml, write, slots, &nslots, &total);
	if (err) {
		for (unsigned i = 0; i < nslots; i++)
			gpu_pairs_release(g, dev, slots[i]);
		if (err > 0)
			ml->rq.path = XFER_PATH_NONE;
		return err > 0 ? MOVER_SUBMIT : err;
	}
#ifdef XFERD_STAGE_STAMPS
	uint64_t t_checked = now_ns();
#endif
	struct xop *op = h->op_begin(h->arg, &ml->rq);
	if (!op) {
		for (unsigned i = 0; i < nslots; i++)
			gpu_pairs_release(g, dev, slots[i]);
		return -ENOMEM;
	}
	struct gpu_mover_op *gop = XOP_PRIV(op, struct gpu_mover_op);
	op->path = XFER_PATH_CUDA_IPC;
	op->len = total;
	dlist_get(ml->l);
	dlist_get(ml->r);
	gop->lists[0] = ml->l;
	gop->lists[1] = ml->r;
	for (unsigned i = 0; i < nslots; i++) {
		uint64_t first = (uint64_t)i * COPY_PAIRS_MAX;
		uint32_t n = (uint32_t)(ml->npairs - first < COPY_PAIRS_MAX
					? ml->npairs - first : COPY_PAIRS_MAX);
		if (gpu_copy_indexed(g, op, dev, slots[i], sbase, sg,
				     dbase, dg, sl->len, n))
			err = -EIO;
	}
	if (gop->copies.parts == 0) {
		/* Nothing went: it ends here. */
		dlist_put(gop->lists[0]);
		dlist_put(gop->lists[1]);
		h->op_abandon(h->arg, op);
		return -EIO;
	}
	if (err)
		gop->copies.error = (int)err;  /* the parts out end it, failed */
#ifdef XFERD_STAGE_STAMPS
	gop->stamp[0] = t_taken;
	gop->stamp[1] = t_checked;
	gop->stamp[2] = now_ns();
#endif
	ml->rq.async = true;
	return 0;
}

/* All of an op's copies ended: its lists go, then the op. */
static void gpu_op_ended(void *arg, struct xop *op, int64_t res)
{
	struct gpu_mover *m = arg;
	struct gpu_mover_op *gop = XOP_PRIV(op, struct gpu_mover_op);

#ifdef XFERD_STAGE_STAMPS
	if (gop->lists[0])
		log_info("stages gpu-list bytes %llu check_ns %llu launch_ns "
			 "%llu run_ns %llu", (unsigned long long)op->len,
			 (unsigned long long)(gop->stamp[1] - gop->stamp[0]),
			 (unsigned long long)(gop->stamp[2] - gop->stamp[1]),
			 (unsigned long long)(now_ns() - gop->stamp[2]));
#endif
	dlist_put(gop->lists[0]);
	dlist_put(gop->lists[1]);
	m->res->hooks.op_done(m->res->hooks.arg, op, res);
}

/*
 * Launch the GPU copies this pass queued (together: many small ones go
 * as one kernel) and end those whose events fired.  True while copies
 * are out, so the thread keeps polling rather than sleeping.
 */
static bool gpu_poll(void *mv)
{
	struct gpu_mover *m = mv;

	gpu_copies_flush(m->res->gpu);
	gpu_copies_poll(m->res->gpu, gpu_op_ended, m);
	return gpu_copies_busy(m->res->gpu);
}

/* Its GPU copies run on (their regions are held) but end into nothing:
 * its batches are freed without a completion. */
static void gpu_cancel_client(void *mv, const struct prog_client *pc)
{
	struct gpu_mover *m = mv;

	gpu_copies_forget_client(m->res->gpu, pc, m->res->hooks.forget_batch,
				 m->res->hooks.arg);
}

void *gpu_mover_create(const struct local_res *res)
{
	struct gpu_mover *m = calloc(1, sizeof(*m));

	if (m)
		m->res = res;
	return m;
}

static void gpu_destroy(void *mv)
{
	free(mv);
}

const struct mover_ops gpu_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "gpu",
	.move_now = gpu_move_now,
	.move_list = gpu_move_list,
	.submit = local_refuse_op,
	.cancel_client = gpu_cancel_client,
	.poll = gpu_poll,
	.destroy = gpu_destroy,
};
