/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memcpy.c - the memcpy mover (ROUTE_MEMCPY): both regions memfd
 * regions, mapped here; one copy, no syscall, no op.  Also a prepared
 * list's segments in one loop.
 *
 * Progress thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "local/local.h"
#include "mem/region.h"
#include "xfer_ring.h"

struct memcpy_mover {
	const struct local_res *res;
};

void local_refuse_op(void *m, struct xop *op)
{
	const struct local_res *res = *(const struct local_res **)m;

	res->hooks.op_done(res->hooks.arg, op, -ENOTSUP);
}

static int64_t memcpy_move_now(void *m, struct move_req *rq)
{
	(void)m;
	if (rq->len == 0)
		return 0;
	bool write = rq->opcode == XFER_OP_WRITE;
	const struct region *src = write ? rq->local : rq->remote;
	const struct region *dst = write ? rq->remote : rq->local;
	void *s = region_map_at(src, write ? rq->loff : rq->roff);
	void *d = region_map_at(dst, write ? rq->roff : rq->loff);

	rq->path = XFER_PATH_MEMCPY;
	/* Both ranges may be in one region: memmove then. */
	if (src == dst)
		memmove(d, s, rq->len);
	else
		memcpy(d, s, rq->len);
	return (int64_t)rq->len;
}

static int64_t memcpy_move_list(void *m, struct move_list *ml)
{
	(void)m;
	/* One region at both ends: segment by segment (memmove). */
	if (ml->rq.local == ml->rq.remote)
		return MOVER_SUBMIT;
	int64_t ns = ml->segments(ml);
	if (ns < 0)
		return ns;
	/* Both mapped here: nothing per segment but the copy (a 4 KiB
	 * block's copy takes ~100 ns; counting each would show). */
	bool write = ml->rq.opcode == XFER_OP_WRITE;
	for (int64_t k = 0; k < ns; k++) {
		const struct dl_seg *s = &ml->segs[k];
		void *l = region_map_at(ml->rq.local, s->loff);
		void *r = region_map_at(ml->rq.remote, s->roff);
		memcpy(write ? r : l, write ? l : r, s->len);
	}
	ml->rq.path = XFER_PATH_MEMCPY;
	return (int64_t)ml->total;
}

void *memcpy_mover_create(const struct local_res *res)
{
	struct memcpy_mover *m = calloc(1, sizeof(*m));

	if (m)
		m->res = res;
	return m;
}

static void memcpy_destroy(void *m)
{
	free(m);
}

const struct mover_ops memcpy_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "memcpy",
	.move_now = memcpy_move_now,
	.move_list = memcpy_move_list,
	.submit = local_refuse_op,
	.destroy = memcpy_destroy,
};
