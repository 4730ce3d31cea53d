/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipeline.h - the staging pipeline: one stream of bytes moved through
 * xferd's pinned staging chunks (mem/staging.h), fill -> chunk -> drain.
 *
 * Wherever two kinds of memory share no mover (GPU memory and another
 * process's memory, GPU memory and a socket, memory no NIC registered
 * and an RDMA work request), a chunk is where they meet.  A stream is
 * cut into chunks; a fill stage puts each chunk's bytes in, a drain
 * stage takes them out, and the chunk goes back to the pool.  The
 * pipeline knows its stages only through struct stage_ops (core/stage.h);
 * each stage lives with its mover:
 *
 *   stage                 file                    fill / drain of
 *   gpu D2H / H2D         gpu/stage.c             GPU memory
 *   host (CMA, memfd)     mem/host_stage.c        another process's memory
 *   tcp send / receive    transport/tcp_staged.c  the link (pull / push)
 *   RDMA WRITE / READ     transport/rdma*         a remote region
 *   lend to a peer        transport/rdma_land.c   the peer's RDMA (owner)
 *
 * and a path that stages is a pairing of two of them, e.g. on this node
 * host fill + gpu H2D drain (local/staged.c), over TCP gpu D2H fill +
 * the link pulling the chunks in order.
 *
 * What it does for every user, once:
 *   - takes chunks from one half of the pool, and when none is free
 *     waits for one first come first served (staging_wait): it never
 *     fails for want of a chunk; a latency-class stream (cfg.cls) may
 *     take the pool's latency reserve and waits in its own queue;
 *   - keeps at most cfg.ahead chunks out at once;
 *   - hands filled chunks to the drain as they come, or in stream order
 *     (cfg.ordered: frames on a socket must go in order);
 *   - remembers the first error, starts nothing after it, and ends
 *     exactly once through cfg.done, after every chunk it handed to a
 *     stage came back;
 *   - one cancel rule: pipeline_destroy() at any time.  Chunks idle in
 *     the pipeline go back to the pool at once; a chunk in a stage stays
 *     that stage's (its cancel() is called where it has one) until the
 *     stage calls stage_done, which then gives it back.  The pipeline
 *     object is freed at once; its chunks do not need it.
 *   - each chunk holds references to the stream's regions (cfg.hold)
 *     from the moment it is taken until it is back in the pool, so a
 *     stage never reaches memory that was freed under it.
 *
 * The owner may itself be one end instead of a stage:
 *   - push fill (cfg.fill NULL): the owner asks for a chunk to fill
 *     (pipeline_push_take), writes into it and says when it is full
 *     (pipeline_push_filled).  "None free" is an answer, not a failure:
 *     the owner stops (a socket stops reading) until cfg.wake.
 *   - pull drain (cfg.drain NULL): the owner takes the next ready chunk
 *     when it has room for it (pipeline_pull; in order when cfg.ordered),
 *     and gives it back when done with it (pipeline_chunk_release), which
 *     may be after the pipeline is gone (a socket buffer's cleanup).  A
 *     pulled chunk no longer counts against cfg.ahead: the owner's own
 *     buffer bounds those.
 *
 * Re-entrancy: a stage may call stage_done inside its start; a pool
 * waiter may be handed a chunk inside another's stage_done; cfg.done and
 * cfg.wake are always the last thing a pipeline call does, so the owner
 * may destroy the pipeline inside either.  cfg.wake and cfg.done may come
 * from inside any call that gives a chunk back to the pool (a GPU
 * completion, a socket buffer's cleanup): an owner that cannot act there
 * should defer.
 *
 * Progress thread only, no locks.
 */
#ifndef XFERD_PIPELINE_H
#define XFERD_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/stage.h"
#include "mem/staging.h"

struct region;

/* cfg.len of a pushed stream whose length the owner does not know yet:
 * it ends with pipeline_push_end(). */
#define PIPELINE_LEN_OPEN UINT64_MAX

struct pipeline_cfg {
	struct staging_pool *pool;
	enum staging_half half;      /* STAGING_SEND out of GPU memory, ... */
	uint64_t len;                /* bytes in the stream, or _LEN_OPEN */
	uint32_t chunk;              /* bytes per chunk; 0 or more than the
				      * pool's: the pool's */
	unsigned ahead;              /* chunks out at once; 0: no bound but
				      * the pool's */
	bool ordered;                /* the drain gets chunks in stream order */
	/* The stream's class (enum xfer_class): XFER_CLASS_LATENCY may
	 * take the pool's latency reserve (mem/staging.h). */
	uint8_t cls;
	const struct stage_ops *fill;  /* NULL: the owner pushes */
	void *fill_arg;
	const struct stage_ops *drain; /* NULL: the owner pulls */
	void *drain_arg;
	/* The pool's clock (enum staging_clock) that counts each chunk's
	 * time in the fill or drain stage; 0 (NONE): not timed. */
	uint8_t fill_clock, drain_clock;
	/* Each chunk holds a reference to these (NULL: none) while taken. */
	struct region *hold[2];
	/* Once: the stream's bytes (len, or what was pushed) or the first
	 * -errno.  NULL: the owner does not ask (a pull drain's owner learns
	 * from pipeline_pull).  It may destroy the pipeline. */
	void (*done)(void *arg, int64_t result);
	/* A push_take or pull that answered 0 would now answer otherwise
	 * (a chunk, or the error).  May destroy the pipeline. */
	void (*wake)(void *arg);
	void *arg;
};

struct pipeline;

/* A pipeline for cfg (copied), not started.  NULL: out of memory. */
struct pipeline *pipeline_create(const struct pipeline_cfg *cfg);
/*
 * Start moving: the fill stage gets its first chunks.  The pipeline may
 * end (cfg.done) inside this call, e.g. a zero-length stream or a first
 * chunk that failed to start.
 */
void pipeline_start(struct pipeline *pl);
/* Fail the stream with err (the first error wins): nothing new starts;
 * cfg.done follows once the chunks in stages came back. */
void pipeline_fail(struct pipeline *pl, int err);
/* The owner goes: see the cancel rule above.  cfg.done never comes
 * after it.  Accepts NULL. */
void pipeline_destroy(struct pipeline *pl);
/* The first error so far, or 0. */
int pipeline_error(const struct pipeline *pl);

/* --- push fill (cfg.fill NULL) --- */

/*
 * The chunk to write the stream's next bytes into: 1 and *c (the same
 * one until it is filled; c->at says where its first byte is in the
 * stream and may be set by the owner; c->len is 0 and grows as the owner
 * writes), 0 when none is free now (cfg.wake comes when one is), or
 * -errno: the stream failed, discard its bytes (a chunk the owner still
 * holds goes back through pipeline_push_filled, as always).  -EPIPE:
 * the stream already has all its bytes.  Never calls the owner back.
 */
int pipeline_push_take(struct pipeline *pl, struct stage_chunk **c);
/*
 * The owner wrote what goes in c (c->len bytes; 0: nothing, c just goes
 * back), or gives it up (result -errno fails the stream).  c may belong
 * to a pipeline already destroyed: then it only goes back to the pool.
 */
void pipeline_push_filled(struct stage_chunk *c, int64_t result);
/* An open-length stream has no more bytes: it ends once the drain
 * emptied every chunk pushed. */
void pipeline_push_end(struct pipeline *pl);

/* --- pull drain (cfg.drain NULL) --- */

/*
 * The next filled chunk (in stream order when cfg.ordered): 1 and *c,
 * now the owner's (give it back with pipeline_chunk_release); 0 when
 * none is ready yet (cfg.wake comes when one is) or every chunk was
 * pulled; -errno: the stream failed.
 */
int pipeline_pull(struct pipeline *pl, struct stage_chunk **c);
/* A pulled chunk goes back to the pool (any time, pipeline or not). */
void pipeline_chunk_release(struct stage_chunk *c);

#endif /* XFERD_PIPELINE_H */
