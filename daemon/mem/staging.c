/* SPDX-License-Identifier: Apache-2.0 */
/*
 * staging.c - the pool of pinned staging chunks (staging.h).
 *
 * Decisions: one mmap for the whole pool, pinned with one
 * gpu_host_register (one registration, not one per chunk: cheaper for
 * the driver and the IOMMU); chunk descriptors in one array beside it;
 * per half a free list (LIFO: the chunk used last is warm in the cache)
 * and two FIFOs of waiters, latency and bulk; the latency reserve is a
 * count of free chunks bulk may not take, not chunks set apart, so that
 * any chunk coming back may refill it.  Progress thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gpu/gpu.h"
#include "core/log.h"
#include "mem/staging.h"

TAILQ_HEAD(waiter_list, staging_waiter);

/* Chunks in a row a latency waiter gets while bulk ones wait, before a
 * bulk waiter gets one: latency first, not alone, so streams of many
 * latency clients (each within latency_max_bytes) slow bulk streams,
 * never stop them. */
#define LATENCY_RUN_MAX 8u

struct staging_pool {
	uint8_t *mem;
	size_t mem_len;
	bool pinned;
	uint32_t chunk;
	struct staging_chunk *chunks;
	uint32_t nchunks;
	struct {
		struct staging_chunk_list free;
		struct waiter_list waiters;   /* bulk (and default) */
		struct waiter_list lwaiters;  /* latency */
		uint32_t total;
		_Atomic uint32_t reserve;   /* written here, read by ctl */
		_Atomic uint32_t nfree;     /* read by ctl */
		_Atomic uint32_t nwaiting;  /* read by ctl */
		/* Chunks handed to latency waiters in a row while bulk
		 * ones waited (LATENCY_RUN_MAX). */
		uint32_t latency_run;
	} half[2];
	_Atomic uint64_t waits;
	_Atomic uint64_t reserve_used;
	/* Added by the progress thread, read by ctl: relaxed, as waits. */
	_Atomic uint64_t clock_n[STAGING_CLOCK__N], clock_ns[STAGING_CLOCK__N];
};

struct staging_pool *staging_create(uint64_t bytes, uint32_t chunk, bool pin)
{
	if (chunk == 0 || chunk % 4096)
		return NULL;
	uint64_t per_half = bytes / 2 / chunk;
	if (per_half < 2)
		per_half = 2;
	if (per_half > (1u << 20))
		return NULL;
	struct staging_pool *sp = calloc(1, sizeof(*sp));
	if (!sp)
		return NULL;
	sp->chunk = chunk;
	sp->nchunks = (uint32_t)(2 * per_half);
	sp->mem_len = (size_t)sp->nchunks * chunk;
	sp->chunks = calloc(sp->nchunks, sizeof(*sp->chunks));
	if (!sp->chunks)
		goto err_chunks;
	sp->mem = mmap(NULL, sp->mem_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (sp->mem == MAP_FAILED)
		goto err_mem;
	if (pin) {
		if (gpu_host_register(sp->mem, sp->mem_len))
			goto err_pin;
		sp->pinned = true;
	}
	for (int h = 0; h < 2; h++) {
		TAILQ_INIT(&sp->half[h].free);
		TAILQ_INIT(&sp->half[h].waiters);
		TAILQ_INIT(&sp->half[h].lwaiters);
		atomic_init(&sp->half[h].reserve, 0);
		sp->half[h].total = (uint32_t)per_half;
		atomic_init(&sp->half[h].nfree, (uint32_t)per_half);
		atomic_init(&sp->half[h].nwaiting, 0);
	}
	for (uint32_t i = 0; i < sp->nchunks; i++) {
		struct staging_chunk *c = &sp->chunks[i];
		c->p = sp->mem + (size_t)i * chunk;
		c->cap = chunk;
		c->st.buf = c->p;
		c->st.cap = chunk;
		c->half = i < per_half ? STAGING_SEND : STAGING_RECV;
		c->pool = sp;
		TAILQ_INSERT_TAIL(&sp->half[c->half].free, c, q);
	}
	return sp;

err_pin:
	munmap(sp->mem, sp->mem_len);
err_mem:
	free(sp->chunks);
err_chunks:
	free(sp);
	return NULL;
}

void staging_destroy(struct staging_pool *sp)
{
	if (!sp)
		return;
	/* Nobody may be handed a chunk any more. */
	for (int h = 0; h < 2; h++) {
		while (!TAILQ_EMPTY(&sp->half[h].lwaiters))
			staging_cancel(sp, TAILQ_FIRST(&sp->half[h].lwaiters));
		while (!TAILQ_EMPTY(&sp->half[h].waiters))
			staging_cancel(sp, TAILQ_FIRST(&sp->half[h].waiters));
	}
	for (uint32_t i = 0; i < sp->nchunks; i++) {
		struct staging_chunk *c = &sp->chunks[i];
		if (c->taken && c->st.in && c->st.end)
			stage_done(&c->st, -ECANCELED);
	}
	/* Every chunk should be back: say so (tests read it). */
	uint32_t out = 0;
	for (uint32_t i = 0; i < sp->nchunks; i++)
		out += sp->chunks[i].taken;
	if (out)
		log_warnx("staging: %u of %u chunks not back at exit", out,
			  sp->nchunks);
	else
		log_info("staging: all %u chunks back at exit", sp->nchunks);
	if (sp->pinned)
		gpu_host_unregister(sp->mem);
	munmap(sp->mem, sp->mem_len);
	free(sp->chunks);
	free(sp);
}

uint32_t staging_chunk_bytes(const struct staging_pool *sp)
{
	return sp->chunk;
}

static void reset(struct staging_chunk *c)
{
	c->taken = true;
	c->st.in = NULL;
	c->st.pl = NULL;
}

static uint32_t nfree(const struct staging_pool *sp, unsigned h)
{
	return atomic_load_explicit(&sp->half[h].nfree, memory_order_relaxed);
}

static uint32_t reserve(const struct staging_pool *sp, unsigned h)
{
	return atomic_load_explicit(&sp->half[h].reserve,
				    memory_order_relaxed);
}

/* The head of h's free list, off it. */
static struct staging_chunk *take_free(struct staging_pool *sp, unsigned h)
{
	struct staging_chunk *c = TAILQ_FIRST(&sp->half[h].free);

	if (!c)
		return NULL;
	TAILQ_REMOVE(&sp->half[h].free, c, q);
	atomic_fetch_sub_explicit(&sp->half[h].nfree, 1, memory_order_relaxed);
	reset(c);
	return c;
}

struct staging_chunk *staging_take_class(struct staging_pool *sp,
					 enum staging_half h, bool latency)
{
	if (!TAILQ_EMPTY(&sp->half[h].lwaiters))
		return NULL;  /* they were first */
	if (latency) {
		/* Bulk waiters do not hold it back: what is free is the
		 * reserve, or about to go to them when it is refilled. */
		if (nfree(sp, h) <= reserve(sp, h) && nfree(sp, h))
			atomic_fetch_add_explicit(&sp->reserve_used, 1,
						  memory_order_relaxed);
		return take_free(sp, h);
	}
	if (!TAILQ_EMPTY(&sp->half[h].waiters))
		return NULL;
	if (nfree(sp, h) <= reserve(sp, h))
		return NULL;  /* the latency class's */
	return take_free(sp, h);
}

struct staging_chunk *staging_take(struct staging_pool *sp,
				   enum staging_half h)
{
	return staging_take_class(sp, h, false);
}

void staging_wait(struct staging_pool *sp, enum staging_half h,
		  struct staging_waiter *w)
{
	if (w->waiting)
		return;
	w->waiting = true;
	w->half = (uint8_t)h;
	TAILQ_INSERT_TAIL(w->latency ? &sp->half[h].lwaiters
				     : &sp->half[h].waiters, w, q);
	/* Counters for ctl only: relaxed, nothing is ordered by them. */
	atomic_fetch_add_explicit(&sp->half[h].nwaiting, 1,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&sp->waits, 1, memory_order_relaxed);
}

void staging_cancel(struct staging_pool *sp, struct staging_waiter *w)
{
	if (!w->waiting)
		return;
	TAILQ_REMOVE(w->latency ? &sp->half[w->half].lwaiters
				: &sp->half[w->half].waiters, w, q);
	atomic_fetch_sub_explicit(&sp->half[w->half].nwaiting, 1,
				  memory_order_relaxed);
	w->waiting = false;
}

/* Hand c (taken) to w, first in its queue. */
static void hand(struct staging_pool *sp, struct staging_waiter *w,
		 struct staging_chunk *c)
{
	staging_cancel(sp, w);
	reset(c);
	w->ready(w, c);
}

void staging_give(struct staging_chunk *c)
{
	struct staging_pool *sp = c->pool;
	unsigned h = c->half;
	struct staging_waiter *w = TAILQ_FIRST(&sp->half[h].lwaiters);

	if (!c->taken)
		return;
	/* Straight to a waiter, it never shows as free: latency first
	 * (a bulk waiter's turn after LATENCY_RUN_MAX of them), bulk once
	 * the reserve is whole. */
	struct staging_waiter *b = TAILQ_FIRST(&sp->half[h].waiters);
	if (w && !(b && sp->half[h].latency_run >= LATENCY_RUN_MAX)) {
		sp->half[h].latency_run = b ? sp->half[h].latency_run + 1 : 0;
		atomic_fetch_add_explicit(&sp->reserve_used, 1,
					  memory_order_relaxed);
		hand(sp, w, c);
		return;
	}
	if (b && (w || nfree(sp, h) >= reserve(sp, h))) {
		sp->half[h].latency_run = 0;
		hand(sp, b, c);
		return;
	}
	c->taken = false;
	TAILQ_INSERT_HEAD(&sp->half[c->half].free, c, q);
	atomic_fetch_add_explicit(&sp->half[c->half].nfree, 1,
				  memory_order_relaxed);
}

void staging_set_reserve(struct staging_pool *sp, uint32_t chunks)
{
	if (!sp)
		return;
	for (unsigned h = 0; h < 2; h++) {
		uint32_t r = chunks < sp->half[h].total / 2
				     ? chunks : sp->half[h].total / 2;
		atomic_store_explicit(&sp->half[h].reserve, r,
				      memory_order_relaxed);
		/* Fewer held back: bulk waiters get what is free past it. */
		struct staging_waiter *w;
		while ((w = TAILQ_FIRST(&sp->half[h].waiters)) &&
		       TAILQ_EMPTY(&sp->half[h].lwaiters) &&
		       nfree(sp, h) > reserve(sp, h))
			hand(sp, w, take_free(sp, h));
	}
}

void staging_get_stats(const struct staging_pool *sp,
		       struct staging_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!sp)
		return;
	out->chunk_bytes = sp->chunk;
	for (int h = 0; h < 2; h++) {
		out->chunks[h] = sp->half[h].total;
		out->free[h] = atomic_load_explicit(&sp->half[h].nfree,
						    memory_order_relaxed);
		out->waiting[h] = atomic_load_explicit(&sp->half[h].nwaiting,
						       memory_order_relaxed);
		out->reserve[h] = reserve(sp, h);
	}
	out->waits = atomic_load_explicit(&sp->waits, memory_order_relaxed);
	out->reserve_used = atomic_load_explicit(&sp->reserve_used,
						 memory_order_relaxed);
	for (int k = 0; k < STAGING_CLOCK__N; k++) {
		out->clock_n[k] = atomic_load_explicit(&sp->clock_n[k],
						       memory_order_relaxed);
		out->clock_ns[k] = atomic_load_explicit(&sp->clock_ns[k],
							memory_order_relaxed);
	}
}

const char *staging_clock_name(enum staging_clock k)
{
	static const char *const names[STAGING_CLOCK__N] = {
		[STAGING_CLOCK_D2H] = "d2h",
		[STAGING_CLOCK_H2D] = "h2d",
		[STAGING_CLOCK_SEND_IDLE] = "send_idle",
		[STAGING_CLOCK_RECV_STALL] = "recv_stall",
	};

	return k > STAGING_CLOCK_NONE && k < STAGING_CLOCK__N ? names[k] : "";
}

void staging_clock_add(struct staging_pool *sp, enum staging_clock k,
		       uint64_t ns)
{
	if (!sp || k <= STAGING_CLOCK_NONE || k >= STAGING_CLOCK__N)
		return;
	/* Counters only: ctl may read n and ns of different events. */
	atomic_fetch_add_explicit(&sp->clock_n[k], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sp->clock_ns[k], ns, memory_order_relaxed);
}
