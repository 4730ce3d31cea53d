/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host_stage.h - host memory as a stage of the staging pipeline
 * (core/stage.h, stage/pipeline.h): a CPU copy between a chunk and a
 * region of host memory, another process's (REGION_CMA, through
 * process_vm_readv/writev, mem/cma.h) or a memfd region xferd maps.
 *
 * One end of a stream in host memory is a struct host_stage, the
 * stage's argument: the chunk whose bytes are at c->at of the stream
 * moves to or from r at off + c->at.  The copy of another process's
 * memory is slow next to a copy engine (6-10 GB/s a core), so it may run
 * on a copy worker: submit() hands the chunk's job (in its priv area)
 * to one, whose done() on the progress thread calls stage_done; without
 * submit it runs inside start.  A copy cannot be stopped: no cancel.
 * The region stays alive because every chunk holds it (the pipeline's
 * cfg.hold must name it).
 *
 * Progress thread only (the copy itself on a copy worker).
 */
#ifndef XFERD_HOST_STAGE_H
#define XFERD_HOST_STAGE_H

#include <stdint.h>

#include "core/copy_job.h"
#include "core/stage.h"

struct region;

struct host_stage {
	struct region *r;
	uint64_t off;       /* where the stream's byte 0 is in r */
	/* Run j elsewhere (a copy worker); NULL: here, inside start. */
	void (*submit)(void *ctx, struct copy_job *j);
	void *submit_ctx;
	/* Whose copies they are (the operation's class and tenant, core/
	 * traffic_class.h): how the copy workers queue them. */
	uint8_t cls, tenant;
	/* Its chunks are seen by others while they fill (landing chunks
	 * lent to a peer): CMA reads take no fast path (cma_read_private). */
	bool shared;
};

/* Fill: the region -> chunk.  Drain: chunk -> the region. */
extern const struct stage_ops host_stage_read;
extern const struct stage_ops host_stage_write;

#endif /* XFERD_HOST_STAGE_H */
