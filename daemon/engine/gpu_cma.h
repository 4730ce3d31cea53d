/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_cma.h - GPU memory and xfer_reg'd host memory (CMA) on this node,
 * through xferd's pinned staging chunks: a pairing of two stages of the
 * staging pipeline (stage/pipeline.h).  CQE path cuda-staged.
 *
 * No copy engine reaches another process's memory, and no CMA call
 * reaches GPU memory; a pinned chunk is where the two meet:
 *
 *   CMA -> GPU   host_stage_read fills a receive chunk, gpu_stage_h2d
 *                empties it
 *   GPU -> CMA   gpu_stage_d2h fills a send chunk, host_stage_write
 *                empties it
 *
 * A descriptor goes in chunks of at most LSTAGE_CHUNK_MAX bytes (so one
 * CMA copy stays short), up to LSTAGE_AHEAD of them in flight, in any
 * order, and ends once every chunk did.  When the pool is busy it waits
 * for a chunk (FIFO); it never fails for it.  The CMA copies run on the
 * copy workers when xferd has some (engine/copy_workers.h).
 *
 * Progress thread only.
 */
#ifndef XFERD_GPU_CMA_H
#define XFERD_GPU_CMA_H

#include <stdbool.h>
#include <stdint.h>

#include "mem/staging.h"

#define LSTAGE_CHUNK_MAX (1u << 20)
#define LSTAGE_AHEAD 8u

struct progress;
struct prog_client;
struct xop;

/*
 * Move op (pc, batch, opcode, len, and references to its local and
 * remote region set by the caller; one end CUDA, the other CMA): local
 * at loff, remote at roff.  It ends later through exec_op_done, with
 * path XFER_PATH_CUDA_STAGED (or already inside this call, when its
 * first chunk fails).  Returns 0, or -errno and then nothing of it
 * started (the caller still owns op).
 */
int lstage_submit(struct progress *p, struct xop *op, uint64_t loff,
		  uint64_t roff);
/*
 * End the client's staged descriptors now (-ECANCELED; pc NULL: every
 * client's).  Their chunks in a copy finish on their own, holding their
 * region references, and go back to the pool then.
 */
void lstage_cancel_client(struct progress *p, struct prog_client *pc);

/* The half of the pool a direction takes its chunks from, and the bytes
 * one of its chunks carries (pure; tests/unit/test_staging.c). */
enum staging_half lstage_half(bool to_gpu);
uint32_t lstage_chunk_len(uint32_t chunk_bytes);

#endif /* XFERD_GPU_CMA_H */
