/* SPDX-License-Identifier: Apache-2.0 */
/*
 * staging.h - xferd's pinned staging chunks: where GPU memory meets what
 * no GPU copy reaches (the staged paths, DESIGN.md section 4.4).
 *
 * One allocation of pinned host memory, made once at start on every node
 * with GPUs (config staging_mb), cut into chunks of one link frame each
 * (tcp_chunk).  It is split in two halves: chunks that carry bytes out
 * of GPU memory (a D2H copy fills them) and chunks that carry bytes into
 * GPU memory (an H2D copy empties them).  The users are staging
 * pipelines (stage/pipeline.h), two of them on each half:
 *
 *   half   the link (transport/)             this node (local/staged.c)  
 *   SEND   D2H, then the socket takes it     D2H, then CMA writes it out
 *   RECV   the socket fills it, then H2D     CMA reads it in, then H2D
 *
 * A chunk of one half never waits for a chunk of the other, so two nodes
 * sending GPU memory to each other cannot deadlock on staging: a send
 * chunk comes back once the socket took its bytes, a receive chunk once
 * its H2D copy finished, neither of which needs the other half.  The
 * same-node path needs nothing but its own copies (GPU and copy
 * workers) to give its chunks back, so sharing the halves with the link
 * adds waiting, never a cycle; a third share would only split the pool
 * into smaller pieces that sit idle while the other one is busy.
 *
 * Bounded and never failing: when a half has no free chunk the asker
 * queues a waiter and is handed a chunk, first come first served, the
 * moment one comes back.  A waiter queued means nobody else takes a
 * chunk of that half past it (staging_take() says no), so a stream of
 * small requests cannot starve a waiter.
 *
 * A reserve for the latency class (staging_set_reserve, config
 * staging_latency_reserve): the last few free chunks of each half go
 * only to latency-class streams.  Bulk streams that use up the rest
 * wait as above; a latency stream takes a reserved chunk, or when even
 * those are out waits in a queue of its own that is served before the
 * bulk one.  A chunk that comes back goes to a latency waiter first,
 * then refills the reserve, then goes to the first bulk waiter.  So a
 * latency stream waits for a chunk only while more latency chunks than
 * the reserve are out at once, never behind bulk streams.  Bulk keeps at
 * least half of each half, so it never stops for the reserve's sake.
 *
 * A chunk carries the per-chunk state of the staging pipeline that took
 * it (struct stage_chunk, core/stage.h; stage/pipeline.h), which outlives
 * that pipeline: a descriptor may end early (timeout, failed link,
 * client killed) while a stage still works on its chunk, holding the
 * references to the memory it reads or writes, and the stage gives the
 * chunk back when its work ends.
 *
 * Progress thread only, no locks; the counters are atomics for ctl.
 */
#ifndef XFERD_STAGING_H
#define XFERD_STAGING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "common/container_of.h"
#include "core/stage.h"

enum staging_half {
	STAGING_SEND = 0,   /* GPU memory -> chunk -> the link or CMA */
	STAGING_RECV = 1,   /* the link or CMA -> chunk -> GPU memory */
};

struct staging_pool;

struct staging_chunk {
	uint8_t *p;                  /* pinned host memory, cap bytes */
	uint32_t cap;
	uint8_t half;
	bool taken;
	/* The staging pipeline's, while taken (stage/pipeline.h). */
	struct stage_chunk st;
	struct staging_pool *pool;
	TAILQ_ENTRY(staging_chunk) q; /* the free list, or its user's list */
};
TAILQ_HEAD(staging_chunk_list, staging_chunk);

/* Someone waiting for a chunk of one half: ready() hands it one. */
struct staging_waiter {
	void (*ready)(struct staging_waiter *w, struct staging_chunk *c);
	bool waiting;
	bool latency;                /* set by its owner: may use the reserve */
	uint8_t half;
	TAILQ_ENTRY(staging_waiter) q;
};

/*
 * Where staged streams spend their time, for a reader who asks why GPU
 * memory on a link is slower than host memory: each clock counts events
 * and their nanoseconds, summed over every stream since start.  The
 * pipeline counts its stages' (pipeline_cfg.fill_clock, drain_clock),
 * the link its own waits (transport/tcp_staged.c).
 */
enum staging_clock {
	STAGING_CLOCK_NONE,       /* not counted */
	STAGING_CLOCK_D2H,        /* a send chunk in its D2H copy */
	STAGING_CLOCK_H2D,        /* a receive chunk in its H2D copy */
	STAGING_CLOCK_SEND_IDLE,  /* the link waiting for a ready send chunk */
	STAGING_CLOCK_RECV_STALL, /* the link not reading: no receive chunk */
	STAGING_CLOCK__N,
};

/* "d2h", "h2d", "send_idle", "recv_stall" (ctl, /metrics); "" NONE. */
const char *staging_clock_name(enum staging_clock k);

/* For xferctl status (read from the main thread). */
struct staging_stats {
	uint32_t chunk_bytes;
	uint32_t chunks[2], free[2];   /* per half */
	uint32_t waiting[2];           /* waiters queued now, per half */
	uint32_t reserve[2];           /* chunks held for the latency class */
	uint64_t waits;                /* times a waiter had to queue */
	/* Chunks the latency class got from the reserve: ones a bulk
	 * stream could not have taken then. */
	uint64_t reserve_used;
	uint64_t clock_n[STAGING_CLOCK__N], clock_ns[STAGING_CLOCK__N];
};

/*
 * bytes of pinned memory (rounded down to whole chunks, at least two per
 * half) in chunks of chunk bytes.  pin: register it for GPU copies
 * (gpu_host_register); without GPUs there is nothing to pin for.
 * Returns NULL when out of memory or the pinning failed.
 */
struct staging_pool *staging_create(uint64_t bytes, uint32_t chunk, bool pin);
/*
 * Chunks still in a stage (a pipeline's, st.in) are ended with
 * -ECANCELED first: the caller destroyed what runs them (the GPU copy
 * engine, after synchronizing its streams; the links; the copy
 * workers), which will never end them.  Accepts NULL.
 */
void staging_destroy(struct staging_pool *sp);
uint32_t staging_chunk_bytes(const struct staging_pool *sp);

/* A free chunk of half h for a bulk stream, or NULL: none free but the
 * reserve, or waiters come first. */
struct staging_chunk *staging_take(struct staging_pool *sp,
				   enum staging_half h);
/* The same for a latency stream (latency true), which may take the
 * reserve and comes after latency waiters only. */
struct staging_chunk *staging_take_class(struct staging_pool *sp,
					 enum staging_half h, bool latency);
/* Chunks per half held back for the latency class (at most half of a
 * half; 0 at creation).  Lowering it may hand chunks to bulk waiters
 * at once (their ready()).  Accepts NULL. */
void staging_set_reserve(struct staging_pool *sp, uint32_t chunks);
/* Queue w for a chunk of half h; w->ready(w, chunk) once one is back.
 * w->latency says which queue. */
void staging_wait(struct staging_pool *sp, enum staging_half h,
		  struct staging_waiter *w);
/* w no longer wants one (its stream ended); no-op if not waiting. */
void staging_cancel(struct staging_pool *sp, struct staging_waiter *w);
/* Give c back: to the first waiter of its half, else the free list. */
void staging_give(struct staging_chunk *c);
void staging_get_stats(const struct staging_pool *sp,
		       struct staging_stats *out);
/* One event of clock k that took ns (NULL sp or STAGING_CLOCK_NONE:
 * nothing).  Progress thread. */
void staging_clock_add(struct staging_pool *sp, enum staging_clock k,
		       uint64_t ns);

/* The pool's chunk that a pipeline's chunk is. */
static inline struct staging_chunk *staging_chunk_of(struct stage_chunk *c)
{
	return container_of(c, struct staging_chunk, st);
}

#endif /* XFERD_STAGING_H */
