/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cma_split.c - large copies with xfer_reg'd memory (CMA) at one end or
 * both, on the copy workers (cma_split.h), for the CMA mover (cma.c).
 *
 * One cma_split per descriptor, with its parts behind it.  The split
 * holds its own references to both regions, so that a part still
 * copying after its descriptor was cancelled (the client died) never
 * copies into or out of memory already unmapped: a memfd region's
 * mapping and a CMA region's pidfd live until the last part is done.
 * Between two CMA ends each part has its own bounce buffer.
 *
 * Progress thread only, but for run(), which a worker calls and which
 * touches only its part and the two regions it holds.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/container_of.h"
#include "core/xop.h"
#include "local/cma_split.h"
#include "local/local.h"
#include "mem/copy_workers.h"
#include "mem/cma.h"
#include "mem/region.h"
#include "xfer_ring.h"

/* Bytes a part of two CMA ends moves through its bounce buffer at a
 * time: one process_vm_readv, then one process_vm_writev. */
#define CMA_BOUNCE (1u << 20)

struct cma_part {
	struct copy_job job;
	struct cma_split *s;
	uint64_t soff, doff;   /* in the source and the destination */
	uint64_t len;
	void *bounce;          /* CMA -> CMA only: CMA_BOUNCE bytes */
};

struct cma_split {
	struct cma_splits *ss;
	struct xop *op;        /* NULL once cancelled */
	struct region *src, *dst; /* references of the split's own */
	unsigned n;            /* parts */
	unsigned out;          /* parts not done */
	int err;               /* first failure */
	TAILQ_ENTRY(cma_split) q; /* ss->list while op is set */
	struct cma_part parts[];
};

static bool host_kind(const struct region *r)
{
	return region_kind(r) == REGION_CMA || region_kind(r) == REGION_MEMFD;
}

bool cma_split_fits(const struct region *src, uint64_t soff,
		    const struct region *dst, uint64_t doff, uint64_t len)
{
	if (!host_kind(src) || !host_kind(dst))
		return false;
	if (region_kind(src) != REGION_CMA || region_kind(dst) != REGION_CMA)
		return region_kind(src) != region_kind(dst);
	/* Two ranges of one process that overlap: parts copied at once
	 * would read bytes another part already wrote. */
	if (region_cma_pid(src) != region_cma_pid(dst))
		return true;
	uint64_t s = region_cma_addr(src) + soff, d = region_cma_addr(dst) + doff;
	return s + len <= d || d + len <= s;
}

unsigned cma_split_parts(uint64_t len, unsigned workers)
{
	uint64_t n = len / CMA_PART_MIN;

	if (n > workers)
		n = workers;
	return n ? (unsigned)n : 1;
}

static int64_t part_run(struct copy_job *j)
{
	struct cma_part *pt = container_of(j, struct cma_part, job);
	const struct region *src = pt->s->src, *dst = pt->s->dst;

	if (region_kind(src) == REGION_MEMFD)
		return cma_copy(dst, true, region_map_at(src, pt->soff),
				pt->doff, pt->len);
	if (region_kind(dst) == REGION_MEMFD)
		return cma_copy(src, false, region_map_at(dst, pt->doff),
				pt->soff, pt->len);
	for (uint64_t at = 0; at < pt->len;) {
		uint64_t n = pt->len - at < CMA_BOUNCE ? pt->len - at : CMA_BOUNCE;
		int64_t rc = cma_read_private(src, pt->bounce, pt->soff + at,
					      n);
		if (rc < 0)
			return rc;
		rc = cma_copy(dst, true, pt->bounce, pt->doff + at, n);
		if (rc < 0)
			return rc;
		at += n;
	}
	return (int64_t)pt->len;
}

static void split_free(struct cma_split *s)
{
	for (unsigned i = 0; i < s->n; i++)
		free(s->parts[i].bounce);
	region_put(s->src);
	region_put(s->dst);
	free(s);
}

static void part_done(struct copy_job *j, int64_t res)
{
	struct cma_part *pt = container_of(j, struct cma_part, job);
	struct cma_split *s = pt->s;

	if (res < 0 && !s->err)
		s->err = (int)res;
	if (--s->out)
		return;
	struct cma_splits *ss = s->ss;
	struct xop *op = s->op;
	if (op)
		TAILQ_REMOVE(&ss->list, s, q);
	int64_t result = s->err ? s->err : op ? (int64_t)op->len : 0;
	split_free(s);
	if (op)
		ss->res->hooks.op_done(ss->res->hooks.arg, op, result);
}

void cma_splits_init(struct cma_splits *ss, const struct local_res *res)
{
	TAILQ_INIT(&ss->list);
	ss->res = res;
}

int cma_split_submit(struct cma_splits *ss, struct xop *op)
{
	struct copy_workers *workers = ss->res->workers;
	unsigned n = cma_split_parts(op->len, copy_workers_count(workers));
	uint64_t loff = op->local_off, roff = op->remote_off;
	struct cma_split *s = calloc(1, sizeof(*s) + n * sizeof(s->parts[0]));
	if (!s)
		return -ENOMEM;
	/* A write goes local -> remote, a read remote -> local. */
	bool write = op->opcode == XFER_OP_WRITE;
	uint64_t soff = write ? loff : roff, doff = write ? roff : loff;

	s->ss = ss;
	s->op = op;
	s->n = n;
	s->src = write ? op->local : op->remote;
	s->dst = write ? op->remote : op->local;
	bool bounce = region_kind(s->src) == REGION_CMA &&
		      region_kind(s->dst) == REGION_CMA;
	/* Parts of whole pages, the last one taking the rest. */
	uint64_t each = (op->len / n) & ~4095ull, at = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t len = i + 1 < n ? each : op->len - at;
		s->parts[i] = (struct cma_part){
			.job = { .run = part_run, .done = part_done,
				 .cls = op->cls, .tenant = op->tenant,
				 .bytes = len },
			.s = s,
			.soff = soff + at,
			.doff = doff + at,
			.len = len,
		};
		if (bounce && !(s->parts[i].bounce = malloc(CMA_BOUNCE))) {
			s->n = i;  /* what split_free frees */
			free(s->parts[i].bounce);
			s->src = s->dst = NULL;  /* no references taken yet */
			split_free(s);
			return -ENOMEM;
		}
		at += len;
	}
	region_get(s->src);
	region_get(s->dst);
	s->out = n;
	op->path = XFER_PATH_CMA;
	TAILQ_INSERT_TAIL(&ss->list, s, q);
	/* Submitted last to first: with no workers a part runs inline and
	 * the last one to end frees s, so no part is read after. */
	for (unsigned i = n; i-- > 0;)
		copy_workers_submit(workers, &s->parts[i].job);
	return 0;
}

void cma_split_cancel_client(struct cma_splits *ss,
			     const struct prog_client *pc)
{
	struct cma_split *s, *next;

	for (s = TAILQ_FIRST(&ss->list); s; s = next) {
		next = TAILQ_NEXT(s, q);
		if (pc && s->op->pc != pc)
			continue;
		TAILQ_REMOVE(&ss->list, s, q);
		struct xop *op = s->op;
		s->op = NULL;  /* its parts run on; the last frees s */
		ss->res->hooks.op_done(ss->res->hooks.arg, op, -ECANCELED);
	}
}
