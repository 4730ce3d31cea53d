/* SPDX-License-Identifier: Apache-2.0 */
/*
 * staged.h - the same-node staged path: GPU memory and xfer_reg'd
 * host memory (CMA) on this node, through xferd's pinned staging chunks
 * (mem/staging.h).  CQE path cuda-staged.
 *
 * No copy engine reaches another process's memory, and no CMA call
 * reaches GPU memory; a pinned chunk is where the two meet, a pairing
 * of two stages of the staging pipeline (stage/pipeline.h):
 *
 *   CMA -> GPU   host_stage_read fills a receive chunk, gpu_stage_h2d
 *                empties it
 *   GPU -> CMA   gpu_stage_d2h fills a send chunk, host_stage_write
 *                empties it
 *
 * The CMA copies run on the copy workers when there are some.  A
 * descriptor goes in chunks of at most LSTAGE_CHUNK_MAX bytes, up to
 * LSTAGE_AHEAD of them in flight, and ends once every chunk did.  When
 * the pool is busy it waits for a chunk (FIFO); it never fails for it.
 *
 * Progress thread only.
 */
#ifndef XFERD_LOCAL_STAGED_H
#define XFERD_LOCAL_STAGED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "mem/staging.h"

#define LSTAGE_CHUNK_MAX (1u << 20)
#define LSTAGE_AHEAD 8u

struct local_res;
struct prog_client;
struct xop;

/* The staged mover's descriptors not ended yet, and what they use (the
 * GPU copies, the staging pool, the copy workers, op_done). */
struct lstage_ctx {
	const struct local_res *res;
	TAILQ_HEAD(lstage_list, lstage) lstages;
};

void lstage_init(struct lstage_ctx *p, const struct local_res *res);

/*
 * Move op (pc, batch, opcode, len, local_off, remote_off and references
 * to its local and remote region set by the caller; one end CUDA, the
 * other CMA).  It ends later through the op_done hook, with path
 * XFER_PATH_CUDA_STAGED.  Returns 0, or -errno and then nothing of it
 * started (the caller still owns op).
 */
int lstage_submit(struct lstage_ctx *p, struct xop *op);
/*
 * End the client's staged descriptors now (-ECANCELED; pc NULL: every
 * client's).  Their chunks in a GPU copy finish on their own, holding
 * their region references, and go back to the pool then.
 */
void lstage_cancel_client(struct lstage_ctx *p, const struct prog_client *pc);

/* The half of the pool a direction takes its chunks from, and the bytes
 * one of its chunks carries (pure; tests/unit/test_staging.c). */
enum staging_half lstage_half(bool to_gpu);
uint32_t lstage_chunk_len(uint32_t chunk_bytes);

#endif /* XFERD_LOCAL_STAGED_H */
