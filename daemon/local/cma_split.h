/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cma_split.h - large same-node copies with xfer_reg'd memory (CMA) at
 * one end or both (the other a memfd region), split across the copy
 * workers.
 *
 * One process_vm_readv/writev call moves another process's memory at
 * 3-7 GB/s: the kernel pins the other side's pages one by one (between
 * two CMA ends, through a bounce buffer, it takes two).  Done on the
 * progress thread, a 256 MiB copy takes it away from every other ring
 * for tens of milliseconds, at a fraction of memcpy's speed.  At
 * cma_split_bytes and above (xferd.conf(5)), a descriptor is cut into
 * parts of at least CMA_PART_MIN bytes, one per copy worker at most,
 * which copy at once while the progress thread goes on; the descriptor
 * ends (CQE path cma) when its last part did, with the first part's
 * error if one failed.  Below the size, or with fewer than two workers
 * (one worker would only move the copy to another core while the
 * progress thread polls for its end: slower on a 2-core machine,
 * measured), the copy stays on the progress thread as before.
 *
 * Like a GPU or another node's descriptor, such a descriptor may
 * complete after descriptors submitted behind it (xfer.h).
 *
 * Progress thread only.
 */
#ifndef XFERD_CMA_SPLIT_H
#define XFERD_CMA_SPLIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#define CMA_PART_MIN (2ull << 20)

struct local_res;
struct prog_client;
struct region;
struct xop;

/* The CMA mover's split descriptors not ended yet. */
struct cma_splits {
	TAILQ_HEAD(cma_split_list, cma_split) list;
	const struct local_res *res;  /* copy workers, op_done */
};

void cma_splits_init(struct cma_splits *ss, const struct local_res *res);

/* Whether a copy of len bytes from src at soff to dst at doff can be
 * split: xfer_reg'd memory at one end or both, the other a memfd
 * region; not two overlapping ranges of one process (pure but for the
 * regions' kinds and addresses; tests/unit). */
bool cma_split_fits(const struct region *src, uint64_t soff,
		    const struct region *dst, uint64_t doff, uint64_t len);

/* How many parts a copy of len bytes takes with workers threads
 * (1 to workers; pure, tests/unit). */
unsigned cma_split_parts(uint64_t len, unsigned workers);

/*
 * Move op (pc, batch, opcode, len, local_off, remote_off and references
 * to its local and remote region set by the caller; cma_split_fits) on
 * the copy workers.  It ends later through the op_done hook with path
 * XFER_PATH_CMA.  Returns 0, or -errno and then nothing of it started
 * (the caller still owns op).
 */
int cma_split_submit(struct cma_splits *ss, struct xop *op);

/*
 * End the client's split descriptors now (-ECANCELED; pc NULL: every
 * client's).  Their parts run on to the end, holding their own region
 * references, and free what they share when the last one is done.
 */
void cma_split_cancel_client(struct cma_splits *ss,
			     const struct prog_client *pc);

#endif /* XFERD_CMA_SPLIT_H */
