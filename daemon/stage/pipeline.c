/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pipeline.c - the staging pipeline (pipeline.h): one stream through
 * staging chunks, fill -> chunk -> drain.
 *
 * Every chunk a pipeline took is in exactly one place (c->where):
 *
 *   FILL   in the fill stage            busy list, counted in out
 *   PUSH   the owner writing into it    busy list, counted (push fill)
 *   READY  filled, waiting its turn     ready list (by seq), counted
 *   DRAIN  in the drain stage           busy list, counted
 *   PULLQ  for the owner to pull        pullq, counted (pull drain)
 *
 * and a pulled chunk is no longer the pipeline's at all.  A chunk ends
 * its stage through c->end (chunk_end), which finds its pipeline through
 * c->pl; a pipeline destroyed sets c->pl NULL on the chunks in busy, and
 * chunk_end then only gives the chunk back.
 *
 * Re-entrancy: a stage may end a chunk inside its start; giving a chunk
 * back may hand it to a pool waiter, possibly this pipeline, inside the
 * call.  So every entry point runs between enter() and leave(): nested
 * calls only record that something changed (kick), the outermost one
 * loops step() until nothing did, and only then calls the owner (done
 * or wake), as its very last act, so that the owner may free the
 * pipeline there.
 *
 * Progress thread only, no locks.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/container_of.h"
#include "mem/region.h"
#include "stage/pipeline.h"
#include "xfer_ring.h"

enum chunk_where {
	W_FILL = 1,
	W_PUSH,
	W_READY,
	W_DRAIN,
	W_PULLQ,
};

struct pipeline {
	struct pipeline_cfg cfg;
	uint32_t chunk;              /* bytes per chunk */
	uint64_t next;               /* bytes handed to chunks (or pushed) */
	uint32_t seq_next;           /* seq of the next chunk filled */
	uint32_t seq_drain;          /* ordered: the seq the drain wants */
	unsigned out;                /* chunks counted against ahead */
	int err;                     /* the first failure */
	unsigned depth;              /* enter()s not left yet */
	bool again;                  /* something changed: step() again */
	bool started, ended, pushed_all;
	bool want_wake;              /* the owner was told 0 */
	struct stage_chunk *spare;   /* handed by the pool, not used yet */
	struct stage_chunk *pushing; /* push: the chunk the owner fills */
	struct stage_chunk_list busy, ready, pullq;
	struct staging_waiter w;     /* for a chunk */
};

static void leave(struct pipeline *pl);
static void drain_ready(struct pipeline *pl);

static void enter(struct pipeline *pl)
{
	pl->depth++;
}

static void kick(struct pipeline *pl)
{
	pl->again = true;
}

static void fail(struct pipeline *pl, int err)
{
	if (!pl->err)
		pl->err = err < 0 ? err : -EIO;
	kick(pl);
}

static bool room(const struct pipeline *pl)
{
	return pl->cfg.ahead == 0 || pl->out < pl->cfg.ahead;
}

/* More chunks may still be taken for this stream. */
static bool wants_chunk(const struct pipeline *pl)
{
	if (pl->err || pl->ended)
		return false;
	if (pl->cfg.fill)
		return pl->next < pl->cfg.len;
	return !pl->pushed_all &&
	       (pl->cfg.len == PIPELINE_LEN_OPEN || pl->next < pl->cfg.len);
}

/* c, just taken from the pool, is pl's (not yet counted). */
static void chunk_end(struct stage_chunk *c, int64_t result);

static struct stage_chunk *chunk_init(struct pipeline *pl,
				      struct staging_chunk *sc)
{
	struct stage_chunk *c = &sc->st;

	c->pl = pl;
	c->end = chunk_end;
	c->in = NULL;
	c->len = 0;
	c->at = 0;
	c->where = 0;
	for (int i = 0; i < 2; i++) {
		c->hold[i] = pl->cfg.hold[i];
		if (c->hold[i])
			region_get(c->hold[i]);
	}
	return c;
}

/* c goes back to the pool; its pipeline is done with it.  May hand it
 * to a waiter, which may start work on it inside the call. */
static void chunk_back(struct stage_chunk *c)
{
	struct region *hold[2] = { c->hold[0], c->hold[1] };

	c->hold[0] = c->hold[1] = NULL;
	c->pl = NULL;
	c->in = NULL;
	c->where = 0;
	for (int i = 0; i < 2; i++)
		if (hold[i])
			region_put(hold[i]);
	staging_give(staging_chunk_of(c));
}

/* A counted chunk of pl goes back (pl is entered). */
static void drop(struct pipeline *pl, struct stage_chunk *c)
{
	pl->out--;
	kick(pl);
	chunk_back(c);
}

/* The pool handed pl the chunk it waited for. */
static void on_chunk(struct staging_waiter *w, struct staging_chunk *sc)
{
	struct pipeline *pl = container_of(w, struct pipeline, w);

	enter(pl);
	pl->spare = chunk_init(pl, sc);
	kick(pl);
	leave(pl);
}

/* A chunk for pl, or NULL: none now (a waiter is queued). */
static struct stage_chunk *get_chunk(struct pipeline *pl)
{
	struct stage_chunk *c = pl->spare;

	if (c) {
		pl->spare = NULL;
		return c;
	}
	if (pl->w.waiting)
		return NULL;
	struct staging_chunk *sc = staging_take_class(pl->cfg.pool,
						      pl->cfg.half,
						      pl->w.latency);
	if (!sc) {
		staging_wait(pl->cfg.pool, pl->cfg.half, &pl->w);
		return NULL;
	}
	return chunk_init(pl, sc);
}

/* Hand c to stage ops; false: it refused (c is back, pl failed). */
static bool start_stage(struct pipeline *pl, struct stage_chunk *c,
			enum chunk_where where)
{
	const struct stage_ops *ops = where == W_FILL ? pl->cfg.fill
						      : pl->cfg.drain;
	void *arg = where == W_FILL ? pl->cfg.fill_arg : pl->cfg.drain_arg;

	c->where = (uint8_t)where;
	c->in = ops;
	if (where == W_FILL ? pl->cfg.fill_clock : pl->cfg.drain_clock)
		c->stamp = now_ns();
	TAILQ_INSERT_TAIL(&pl->busy, c, q);
	int err = ops->start(arg, c);
	if (!err)
		return true;  /* it may have ended already */
	TAILQ_REMOVE(&pl->busy, c, q);
	c->in = NULL;
	fail(pl, err);
	drop(pl, c);
	return false;
}

/* Start fill stages while there are bytes, room and chunks. */
static void fill_more(struct pipeline *pl)
{
	while (pl->cfg.fill && wants_chunk(pl) && room(pl)) {
		struct stage_chunk *c = get_chunk(pl);
		if (!c)
			return;
		uint64_t n = pl->cfg.len - pl->next;
		if (n > pl->chunk)
			n = pl->chunk;
		c->at = pl->next;
		c->len = (uint32_t)n;
		c->seq = pl->seq_next++;
		pl->next += n;
		pl->out++;
		/* A fill that ended inside its start drains now, not after
		 * the whole window was filled. */
		if (start_stage(pl, c, W_FILL))
			drain_ready(pl);
	}
}

/* Filled chunks to the drain (or the pull queue), in order if asked. */
static void drain_ready(struct pipeline *pl)
{
	struct stage_chunk *c;

	while ((c = TAILQ_FIRST(&pl->ready))) {
		if (!pl->err && pl->cfg.ordered && c->seq != pl->seq_drain)
			return;  /* an earlier chunk is still filling */
		TAILQ_REMOVE(&pl->ready, c, q);
		pl->seq_drain++;
		if (pl->err) {
			drop(pl, c);
		} else if (!pl->cfg.drain) {
			c->where = W_PULLQ;
			TAILQ_INSERT_TAIL(&pl->pullq, c, q);
		} else {
			start_stage(pl, c, W_DRAIN);
		}
	}
}

/* One round of moving things on (pl is entered). */
static void step(struct pipeline *pl)
{
	struct stage_chunk *c;

	if (pl->err) {
		staging_cancel(pl->cfg.pool, &pl->w);
		while ((c = TAILQ_FIRST(&pl->pullq))) {
			TAILQ_REMOVE(&pl->pullq, c, q);
			drop(pl, c);
		}
	}
	drain_ready(pl);
	fill_more(pl);
	if (!wants_chunk(pl)) {
		staging_cancel(pl->cfg.pool, &pl->w);
		if ((c = pl->spare)) {
			pl->spare = NULL;
			chunk_back(c);  /* never counted */
		}
	}
}

/* Every chunk pushed, or handed to the fill stage: nothing more comes. */
static bool all_in(const struct pipeline *pl)
{
	if (pl->cfg.fill)
		return pl->next >= pl->cfg.len;
	return !pl->pushing &&
	       (pl->pushed_all || (pl->cfg.len != PIPELINE_LEN_OPEN &&
				   pl->next >= pl->cfg.len));
}

/* What the owner was told 0 about has changed. */
static bool owner_can(const struct pipeline *pl)
{
	if (pl->err)
		return true;
	if (!pl->cfg.fill &&
	    (pl->spare || (room(pl) && !pl->w.waiting && wants_chunk(pl))))
		return true;
	return !pl->cfg.drain && !TAILQ_EMPTY(&pl->pullq);
}

/* The outermost call is over: tell the owner, last of all. */
static void finish(struct pipeline *pl)
{
	if (!pl->ended && pl->started && pl->out == 0 && !pl->spare &&
	    (pl->err || all_in(pl))) {
		pl->ended = true;
		pl->want_wake = false;
		staging_cancel(pl->cfg.pool, &pl->w);
		int64_t res = pl->err ? pl->err
			    : pl->cfg.fill ? (int64_t)pl->cfg.len
					   : (int64_t)pl->next;
		if (pl->cfg.done)
			pl->cfg.done(pl->cfg.arg, res);  /* may free pl */
		return;
	}
	if (pl->want_wake && owner_can(pl)) {
		pl->want_wake = false;
		if (pl->cfg.wake)
			pl->cfg.wake(pl->cfg.arg);       /* may free pl */
	}
}

static void leave(struct pipeline *pl)
{
	if (pl->depth > 1) {
		pl->depth--;
		return;
	}
	while (pl->again) {
		pl->again = false;
		step(pl);
	}
	pl->depth = 0;
	finish(pl);
}

/* Put c in the ready list, by seq (it usually goes last). */
static void ready_insert(struct pipeline *pl, struct stage_chunk *c)
{
	struct stage_chunk *before = TAILQ_LAST(&pl->ready, stage_chunk_list);

	c->where = W_READY;
	while (before && (int32_t)(before->seq - c->seq) > 0)
		before = TAILQ_PREV(before, stage_chunk_list, q);
	if (before)
		TAILQ_INSERT_AFTER(&pl->ready, before, c, q);
	else
		TAILQ_INSERT_HEAD(&pl->ready, c, q);
}

/* stage_done(): a stage (or the pushing owner) is through with c. */
static void chunk_end(struct stage_chunk *c, int64_t result)
{
	struct pipeline *pl = c->pl;

	if (!pl) {
		chunk_back(c);  /* its pipeline went: nothing more to do */
		return;
	}
	enter(pl);
	TAILQ_REMOVE(&pl->busy, c, q);
	c->in = NULL;
	if (c->where == W_FILL || c->where == W_DRAIN) {
		uint8_t k = c->where == W_FILL ? pl->cfg.fill_clock
					       : pl->cfg.drain_clock;
		if (k)
			staging_clock_add(pl->cfg.pool, k, now_ns() - c->stamp);
	}
	if (c->where == W_PUSH) {
		pl->pushing = NULL;
		if (result >= 0)
			pl->next += c->len;
	}
	if (result < 0) {
		fail(pl, (int)result);
		drop(pl, c);
	} else if (c->where == W_DRAIN || c->len == 0) {
		drop(pl, c);
	} else {
		if (c->where == W_PUSH)
			c->seq = pl->seq_next++;
		ready_insert(pl, c);
		kick(pl);
	}
	leave(pl);
}

struct pipeline *pipeline_create(const struct pipeline_cfg *cfg)
{
	struct pipeline *pl = calloc(1, sizeof(*pl));

	if (!pl)
		return NULL;
	pl->cfg = *cfg;
	uint32_t max = staging_chunk_bytes(cfg->pool);
	pl->chunk = cfg->chunk && cfg->chunk < max ? cfg->chunk : max;
	TAILQ_INIT(&pl->busy);
	TAILQ_INIT(&pl->ready);
	TAILQ_INIT(&pl->pullq);
	pl->w.ready = on_chunk;
	pl->w.latency = cfg->cls == XFER_CLASS_LATENCY;
	return pl;
}

void pipeline_start(struct pipeline *pl)
{
	enter(pl);
	pl->started = true;
	kick(pl);
	leave(pl);
}

void pipeline_fail(struct pipeline *pl, int err)
{
	enter(pl);
	fail(pl, err);
	leave(pl);
}

int pipeline_error(const struct pipeline *pl)
{
	return pl->err;
}

void pipeline_destroy(struct pipeline *pl)
{
	struct stage_chunk_list idle = TAILQ_HEAD_INITIALIZER(idle);
	struct stage_chunk_list held = TAILQ_HEAD_INITIALIZER(held);
	struct stage_chunk *c;

	if (!pl)
		return;
	staging_cancel(pl->cfg.pool, &pl->w);
	/* Unhook every chunk from pl first: what follows may reuse them. */
	TAILQ_CONCAT(&idle, &pl->ready, q);
	TAILQ_CONCAT(&idle, &pl->pullq, q);
	if (pl->spare)
		TAILQ_INSERT_TAIL(&idle, pl->spare, q);
	TAILQ_CONCAT(&held, &pl->busy, q);
	TAILQ_FOREACH(c, &held, q)
		c->pl = NULL;
	const struct stage_ops *fill = pl->cfg.fill, *drain = pl->cfg.drain;
	void *fill_arg = pl->cfg.fill_arg, *drain_arg = pl->cfg.drain_arg;
	free(pl);
	/* Chunks in a stage stay its own; it may hurry. */
	while ((c = TAILQ_FIRST(&held))) {
		TAILQ_REMOVE(&held, c, q);
		const struct stage_ops *ops = c->where == W_FILL ? fill
					    : c->where == W_DRAIN ? drain
								  : NULL;
		if (ops && ops->cancel)
			ops->cancel(ops == fill ? fill_arg : drain_arg, c);
	}
	while ((c = TAILQ_FIRST(&idle))) {
		TAILQ_REMOVE(&idle, c, q);
		chunk_back(c);
	}
}

int pipeline_push_take(struct pipeline *pl, struct stage_chunk **out)
{
	struct stage_chunk *c = pl->pushing;

	if (pl->err)
		return pl->err;
	if (c) {
		*out = c;
		return 1;
	}
	if (!wants_chunk(pl))
		return -EPIPE;  /* the stream is whole: no more bytes */
	if (!room(pl) || !(c = get_chunk(pl))) {
		pl->want_wake = true;
		return 0;
	}
	c->at = pl->next;
	c->len = 0;
	c->where = W_PUSH;
	TAILQ_INSERT_TAIL(&pl->busy, c, q);
	pl->out++;
	pl->pushing = c;
	*out = c;
	return 1;
}

void pipeline_push_filled(struct stage_chunk *c, int64_t result)
{
	chunk_end(c, result);
}

void pipeline_push_end(struct pipeline *pl)
{
	enter(pl);
	pl->pushed_all = true;
	kick(pl);
	leave(pl);
}

int pipeline_pull(struct pipeline *pl, struct stage_chunk **out)
{
	struct stage_chunk *c;

	if (pl->err)
		return pl->err;
	if (!(c = TAILQ_FIRST(&pl->pullq))) {
		pl->want_wake = !pl->ended;
		return 0;
	}
	enter(pl);
	TAILQ_REMOVE(&pl->pullq, c, q);
	pl->out--;
	pl->want_wake = false;
	c->pl = NULL;  /* the owner's now */
	c->where = 0;
	*out = c;
	kick(pl);      /* room for the next fill */
	leave(pl);     /* may end pl: the last chunk was pulled */
	return 1;
}

void pipeline_chunk_release(struct stage_chunk *c)
{
	chunk_back(c);
}
