/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec_dlist.c - prepared-list descriptors (XFER_OP_WRITE_DLIST,
 * _READ_DLIST): a list of blocks at each end, registered once
 * (mem/dlist.h), and per descriptor only index pairs in the ring's index
 * area.
 *
 * Both lists are resolved once, their targets once; then the route of
 * one WRITE or READ between the same two regions picks the mover.  A
 * mover that moves a list as one (struct move_list: the GPU's indexed
 * launches, memcpy's loop, CMA's vectored calls) gets it whole; else the
 * pairs are checked and merged into runs contiguous at both ends, which
 * go one by one the way a WRITE or READ would, as one batch (one CQE,
 * the notification after the last byte).
 *
 * Runs in the progress thread only.
 */
#include <stdlib.h>

#include "common/container_of.h"
#include "engine/exec_int.h"
#include "local/local.h"
#include "mem/dlist.h"
#include "mem/region.h"

/* The descriptor's pairs in the ring's index area (untrusted: each is
 * read once by mover_list_pair), or NULL with *err. */
static const uint64_t *dl_area(const struct prog_client *pc,
			       const struct xfer_sqe *sqe, int64_t *err)
{
	const struct ring_view *v = &pc->ring;
	uint64_t at = sqe->local_off;

	if (!v->idx) {
		*err = -EOPNOTSUPP;
		return NULL;
	}
	if (at % sizeof(struct xfer_dlist_pair) || at > v->idx_size ||
	    sqe->len > (v->idx_size - at) / sizeof(struct xfer_dlist_pair)) {
		*err = -EINVAL;
		return NULL;
	}
	return (const uint64_t *)(const void *)((const char *)v->idx + at);
}

/* The executor's side of a move_list: where its segments go. */
struct dl_req {
	struct move_list ml;
	struct progress *p;
	const struct prog_client *pc;
	const struct xfer_sqe *sqe;
};

/*
 * Copy the descriptor's pairs out of the ring, check every one, and
 * merge the runs that are contiguous at both ends into p->exec.segs
 * (ml->segs).  Returns the number of segments (ml->total their bytes),
 * or -errno before anything moved.  Once per descriptor: a second call
 * returns what the first found.
 */
static int64_t dl_segments(struct move_list *ml)
{
	struct dl_req *d = container_of(ml, struct dl_req, ml);
	struct progress *p = d->p;
	int64_t err = 0;

	if (ml->nsegs >= 0)
		return ml->nsegs;
	const uint64_t *area = dl_area(d->pc, d->sqe, &err);
	if (!area)
		return err;
	if (ml->npairs > p->exec.segs_cap) {
		struct dl_seg *s = realloc(p->exec.segs,
					   ml->npairs * sizeof(*s));
		if (!s)
			return -ENOMEM;
		p->exec.segs = s;
		p->exec.segs_cap = ml->npairs;
	}
	struct dl_seg *s = p->exec.segs;
	uint64_t ns = 0, sum = 0;
	for (uint64_t k = 0; k < ml->npairs; k++) {
		struct xfer_dlist_pair pr = mover_list_pair(area, k);
		uint64_t len;
		if ((err = mover_list_check(ml, pr, &len)))
			return err;
		uint64_t lo = ml->lbase + ml->l->off[pr.local];
		uint64_t ro = ml->rbase + ml->r->off[pr.remote];
		if (sum + len < sum)
			return -EOVERFLOW;
		sum += len;
		if (ns && s[ns - 1].loff + s[ns - 1].len == lo &&
		    s[ns - 1].roff + s[ns - 1].len == ro) {
			s[ns - 1].len += len;
			continue;
		}
		s[ns++] = (struct dl_seg){ lo, ro, len };
	}
	ml->segs = s;
	ml->total = sum;
	ml->nsegs = (int64_t)ns;
	return ml->nsegs;
}

/* The list as one, by its route's mover: MOVER_SUBMIT when that mover
 * moves it only segment by segment. */
static int64_t dl_move_whole(struct progress *p, struct dl_req *d,
			     enum path_route route, uint16_t *path,
			     bool *async)
{
	const struct mover *m = route < ROUTE_NOTSUP ? &p->routes[route]
						     : NULL;
	if (!m || !m->ops)
		return MOVER_SUBMIT;
	int64_t rc = m->ops->move_list(m->impl, &d->ml);
	if (rc == MOVER_SUBMIT)
		return rc;
	if (d->ml.rq.path != XFER_PATH_NONE)
		*path = d->ml.rq.path;
	if (d->ml.rq.async) {
		*async = true;
		return rc;  /* the bytes count when it ends */
	}
	if (rc >= 0) {
		stat_add(&p->exec.paths.bytes[*path], (uint64_t)rc);
		stat_add(&p->exec.paths.ops[*path], 1);
	}
	return rc;
}

int64_t exec_dlist(struct progress *p, struct prog_client *pc,
		   const struct xfer_sqe *sqe, uint16_t *path,
		   struct region **target, bool *async)
{
	struct dl_req d = { .p = p, .pc = pc, .sqe = sqe };
	struct move_list *ml = &d.ml;
	int64_t rc = 0;

	if (sqe->remote_off)
		return -EINVAL;
	ml->l = dltab_get(p->dlists, pc->id, sqe->local);
	ml->r = dltab_get(p->dlists, pc->id, sqe->remote);
	if (!ml->l || !ml->r) {
		rc = -EACCES;  /* not a list of this client (any more) */
		goto out;
	}
	if (ml->l->is_import) {
		rc = -EINVAL;  /* the local list must be of its own memory */
		goto out;
	}
	if ((rc = regtab_resolve_memo(p->regs, &p->exec.memo, pc->id,
				      ml->l->target, 0, ml->l->end, false,
				      &ml->rq.local, &ml->lbase)) ||
	    (rc = regtab_resolve_memo(p->regs, &p->exec.memo, pc->id,
				      ml->r->target, 0, ml->r->end, true,
				      &ml->rq.remote, &ml->rbase)))
		goto out;
	*target = ml->rq.remote;  /* the region notified, as for one WRITE */
	if (sqe->len == 0)
		goto out;

	/* One WRITE or READ stands for every segment. */
	struct xfer_sqe one = *sqe;
	one.opcode = sqe->opcode == XFER_OP_WRITE_DLIST ? XFER_OP_WRITE
							: XFER_OP_READ;
	one.len = 1;
	struct path_facts f = exec_facts(p, &one, ml->rq.local, ml->rq.remote);
	enum path_route route = path_choose(&f);
	int64_t area_err = 0;
	ml->rq.opcode = one.opcode;
	ml->rq.batch_op = &pc->batch.gpu_op;
	ml->area = dl_area(pc, sqe, &area_err);
	ml->npairs = sqe->len;
	ml->segments = dl_segments;
	ml->nsegs = -1;
	rc = dl_move_whole(p, &d, route, path, async);
	if (rc != MOVER_SUBMIT)
		goto out;
	int64_t ns = dl_segments(ml);
	if (ns < 0) {
		rc = ns;
		goto out;
	}
	int64_t moved = 0;
	for (int64_t k = 0; k < ns; k++) {
		const struct dl_seg *s = &ml->segs[k];
		one.len = s->len;
		/* The notification (if any) rides on the last segment. */
		one.flags = k + 1 < ns ? 0 : sqe->flags & XFER_SQE_F_NOTIFY;
		rc = exec_move_range(p, pc, &one, route, ml->rq.local, s->loff,
				     ml->rq.remote, s->roff, path, target,
				     async);
		if (rc < 0)
			goto out;
		moved += rc;
	}
	rc = moved;
out:
	dlist_put(ml->l);
	dlist_put(ml->r);
	return rc;
}
