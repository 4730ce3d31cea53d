/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stage.h - what a stage of the staging pipeline (stage/pipeline.h) is:
 * the contract between the pipeline and the code that fills or empties
 * its chunks (a GPU copy, a CMA copy, a socket, an RDMA work request).
 *
 * Here at the bottom, not beside the pipeline, because the stages live
 * with their movers and some movers sit below the pipeline (the GPU copy
 * engine, gpu/stage.c): a stage needs only this file, never the
 * pipeline's.  It ends its work through the chunk itself (stage_done),
 * whose end function the pipeline set, so no call points upward.
 *
 * A stage is a const struct stage_ops and an argument of its own (where
 * its end of the stream is: a GPU address, a region, a link).  The
 * pipeline calls start() with one chunk at a time; the stage owns that
 * chunk, and its priv area, until it calls stage_done() exactly once.
 *
 * Progress thread only (a stage may run its work elsewhere, e.g. on a
 * copy worker, but calls stage_done() on the progress thread).
 */
#ifndef XFERD_STAGE_H
#define XFERD_STAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/xop.h"

struct stage_chunk;
struct pipeline;

struct stage_ops {
	const char *name;   /* for logs: "gpu-d2h", "cma", "tcp-send" */
	/*
	 * Begin this stage's work on c: a fill stage puts c->len bytes of
	 * the stream, those at c->at, into c->buf; a drain stage takes them
	 * out of it.  Returns 0, and then stage_done(c, result) follows
	 * exactly once, later or already inside this call; or -errno, and
	 * then nothing of it started and stage_done never comes.  It must
	 * not destroy the pipeline.
	 */
	int (*start)(void *arg, struct stage_chunk *c);
	/*
	 * The pipeline that gave c is going away (its owner ended: cancel,
	 * timeout, client killed).  Optional (NULL: the work just runs to
	 * its end).  A stage that can stop early stops and calls
	 * stage_done(c, -ECANCELED), now or later; either way it still
	 * calls stage_done exactly once.  arg is still valid during the
	 * call, not after: what the work needs later must be in c->priv.
	 */
	void (*cancel)(void *arg, struct stage_chunk *c);
};

/* Room for a stage's own per-chunk state: enough for an xop (the GPU
 * copy engine takes one per copy) and a little more. */
#define STAGE_PRIV_BYTES (sizeof(struct xop) + 32)

/*
 * One chunk as the pipeline and its stages see it.  It is part of the
 * pool's chunk (mem/staging.h), so it outlives the pipeline that took
 * it: a stage may hold it after its pipeline is gone.
 */
struct stage_chunk {
	/* Set by the pool once. */
	uint8_t *buf;               /* pinned host memory, cap bytes */
	uint32_t cap;
	/* Set by the pipeline before a stage starts. */
	uint32_t len;               /* bytes of payload in buf */
	uint64_t at;                /* where buf[0] is in the stream */

	/* The pipeline's own (stage/pipeline.c); stages leave them be. */
	void (*end)(struct stage_chunk *c, int64_t result);
	struct pipeline *pl;        /* NULL once it went (or not taken) */
	const struct stage_ops *in; /* the stage holding it, or NULL */
	uint32_t seq;               /* its place in the stream */
	uint8_t where;              /* enum in pipeline.c */
	TAILQ_ENTRY(stage_chunk) q; /* a list of its pipeline */
	void *hold[2];              /* region references (pipeline.h) */
	uint64_t stamp;             /* when it entered a timed stage (ns) */

	/* The stage's own while it holds the chunk (STAGE_PRIV). */
	_Alignas(16) unsigned char priv[STAGE_PRIV_BYTES];
};
TAILQ_HEAD(stage_chunk_list, stage_chunk);

/* c's priv area as a stage's own struct type (which must fit). */
#define STAGE_PRIV(c, type)                                              \
	((type *)(void *)((c)->priv +                                    \
			  0 * sizeof(char[sizeof(type) <= STAGE_PRIV_BYTES \
					  ? 1 : -1])))

/* The chunk whose priv area p is (p from STAGE_PRIV). */
#define STAGE_CHUNK_OF_PRIV(p)                                           \
	((struct stage_chunk *)(void *)((unsigned char *)(p) -           \
					 offsetof(struct stage_chunk, priv)))

/*
 * The stage's work on c is over: result >= 0 done (its value is not
 * used: c->len says how many bytes), or -errno.  Once only; c is no
 * longer the stage's after it (it may be handed to someone else inside
 * the call).  Progress thread.
 */
static inline void stage_done(struct stage_chunk *c, int64_t result)
{
	c->end(c, result);
}

#endif /* XFERD_STAGE_H */
