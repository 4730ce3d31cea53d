/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_land_pool.c - landing pools, one per peer an owner lends chunks
 * to (rdma_land_pool.h says what and why).
 *
 * Decisions: a pool is a staging pool of its own (mem/staging.h: one
 * mapping, pinned for the GPUs where the node's pool is, two halves, so
 * that a peer's reads and writes never wait on each other), made on the
 * progress thread when the peer first needs it: its cost (mapping,
 * pinning, one registration per chunk and NIC) is paid once per peer and
 * link, not per grant.  Each chunk is its own memory region, so an rkey
 * reaches one chunk; the pool's registrations all go before its memory
 * does, so that no rkey of it outlives it.  A pool whose peer went waits
 * for chunks still in a copy (a GPU copy, a copy worker's) before it
 * goes: those copies end by themselves and give their chunks back.
 *
 * Progress thread only, no lock; the counters are atomics for ctl.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "core/log.h"
#include "mem/staging.h"
#include "transport/rdma_int.h"
#include "transport/rdma_land_pool.h"

#define RELAXED memory_order_relaxed

void land_pools_init(struct land_pools *ps, uint32_t chunk, uint32_t per_peer,
		     uint32_t max, bool pin)
{
	memset(ps, 0, sizeof(*ps));
	TAILQ_INIT(&ps->all);
	ps->chunk = chunk;
	ps->per_peer = per_peer < 4 ? 4 : per_peer;  /* two per half */
	ps->max = max < 1 ? 1 : max;
	ps->pin = pin;
}

static void count(struct land_pools *ps, const struct land_pool *p, int sign)
{
	uint64_t bytes = (uint64_t)p->nslots * ps->chunk;

	if (sign > 0) {
		atomic_fetch_add_explicit(&ps->a_pools, 1, RELAXED);
		atomic_fetch_add_explicit(&ps->a_chunks, p->nslots, RELAXED);
		atomic_fetch_add_explicit(&ps->a_bytes, bytes, RELAXED);
		atomic_fetch_add_explicit(&ps->a_made, 1, RELAXED);
	} else {
		atomic_fetch_sub_explicit(&ps->a_pools, 1, RELAXED);
		atomic_fetch_sub_explicit(&ps->a_chunks, p->nslots, RELAXED);
		atomic_fetch_sub_explicit(&ps->a_bytes, bytes, RELAXED);
		atomic_fetch_add_explicit(&ps->a_freed, 1, RELAXED);
	}
}

/* Every chunk of p is in its free lists (none in a copy or lent). */
static bool pool_whole(const struct land_pool *p)
{
	struct staging_stats st;

	staging_get_stats(p->sp, &st);
	return st.free[0] == st.chunks[0] && st.free[1] == st.chunks[1];
}

/* p's registrations go, then (whole, or at_exit with nothing left to
 * end its copies) its memory.  A chunk still in a copy at exit keeps
 * the mapping: the copy may still write it. */
static void pool_free(struct land_pools *ps, struct land_pool *p, int ndevs,
		      bool listed)
{
	for (size_t i = 0; p->mr && i < (size_t)p->nslots * (size_t)ndevs; i++)
		if (p->mr[i])
			ibv_dereg_mr(p->mr[i]);
	if (p->sp && pool_whole(p))
		staging_destroy(p->sp);
	else if (p->sp)
		log_warnx("RDMA: %s's landing pool has chunks in copies at "
			  "exit; its memory stays mapped", p->name);
	if (listed) {
		TAILQ_REMOVE(&ps->all, p, q);
		ps->n--;
		count(ps, p, -1);
		ps->cap_logged = false;  /* room again: say the next one */
	}
	free(p->mr);
	free(p->lent);
	free(p);
}

/* A pool for peer: its memory, every chunk registered alone. */
static int pool_make(struct land_pools *ps, struct rdma *t,
		     const uint8_t *peer, struct land_pool **out)
{
	struct staging_chunk_list all = TAILQ_HEAD_INITIALIZER(all);
	struct staging_chunk *c;
	struct land_pool *p = calloc(1, sizeof(*p));
	const struct rpeer *rp = rdma_find_peer(t, peer);
	int ndevs = t->ndevs ? t->ndevs : 1, err = 0;
	uint8_t *lo = NULL;
	uint32_t n = 0;

	if (!p)
		return -ENOMEM;
	memcpy(p->peer, peer, LINK_ID_LEN);
	snprintf(p->name, sizeof(p->name), "%s", rp ? rp->name : "a peer");
	if (!(p->sp = staging_create((uint64_t)ps->per_peer * ps->chunk,
				     ps->chunk, ps->pin))) {
		pool_free(ps, p, ndevs, false);
		return -ENOMEM;
	}
	/* Every chunk, to find the mapping's start and count them: the
	 * pool is one mapping cut in equal chunks (mem/staging.c). */
	for (int h = 0; h < 2; h++)
		while ((c = staging_take(p->sp, (enum staging_half)h))) {
			if (!lo || c->p < lo)
				lo = c->p;
			n++;
			TAILQ_INSERT_TAIL(&all, c, q);
		}
	p->base = lo;
	p->nslots = n;
	p->mr = calloc((size_t)n * (size_t)ndevs, sizeof(*p->mr));
	p->lent = calloc(n ? n : 1, sizeof(*p->lent));
	if (!p->mr || !p->lent)
		err = -ENOMEM;
	TAILQ_FOREACH(c, &all, q) {
		uint32_t slot = (uint32_t)((c->p - lo) / ps->chunk);
		for (int d = 0; d < t->ndevs && !err; d++) {
			if (!t->dev[d].v.pd)
				continue;
			struct ibv_mr *mr = ibv_reg_mr(
				t->dev[d].v.pd, c->p, c->cap,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ);
			if (!mr)
				err = errno ? -errno : -ENOMEM;
			p->mr[(size_t)slot * (size_t)ndevs + (size_t)d] = mr;
		}
	}
	while ((c = TAILQ_FIRST(&all))) {
		TAILQ_REMOVE(&all, c, q);
		staging_give(c);
	}
	if (err) {
		pool_free(ps, p, ndevs, false);
		return err;
	}
	*out = p;
	return 0;
}

struct land_pool *land_pool_of(struct land_pools *ps, const uint8_t *peer)
{
	struct land_pool *p;

	TAILQ_FOREACH(p, &ps->all, q)
		if (!p->gone && memcmp(p->peer, peer, LINK_ID_LEN) == 0)
			return p;
	return NULL;
}

int land_pool_get(struct land_pools *ps, struct rdma *t, const uint8_t *peer,
		  uint64_t now, struct land_pool **out)
{
	struct land_pool *p = land_pool_of(ps, peer);
	int err;

	if (p) {
		*out = p;
		return 0;
	}
	if (ps->n >= ps->max) {
		atomic_fetch_add_explicit(&ps->a_refused, 1, RELAXED);
		if (!ps->cap_logged)
			log_warnx("RDMA: landing pools for %u peers already "
				  "(rdma_landing_peers): another peer's "
				  "streams go by the link", ps->max);
		ps->cap_logged = true;
		return -EBUSY;
	}
	if (now < ps->retry_ns)
		return -EBUSY;
	if ((err = pool_make(ps, t, peer, &p))) {
		log_warnx("RDMA: no landing pool for a peer (%s; memlock "
			  "limit?): its streams go by the link",
			  strerror(-err));
		ps->retry_ns = now + LAND_POOL_RETRY_NS;
		return -EBUSY;
	}
	p->used_ns = now;
	TAILQ_INSERT_TAIL(&ps->all, p, q);
	ps->n++;
	count(ps, p, 1);
	log_info("RDMA: landing pool for %s made: %u chunks of %u KiB, "
		 "lent to it alone", p->name, p->nslots, ps->chunk >> 10);
	*out = p;
	return 0;
}

uint32_t land_pool_slot(const struct land_pool *p, const struct stage_chunk *c)
{
	const struct staging_chunk *sc =
		container_of(c, struct staging_chunk, st);

	if (sc->pool != p->sp || c->buf < p->base)
		return p->nslots;
	return (uint32_t)((uint64_t)(c->buf - p->base) / sc->cap);
}

void land_pool_lend(struct land_pools *ps, struct land_pool *p, uint32_t slot,
		    struct stage_chunk *c)
{
	p->lent[slot] = c;
	p->nlent++;
	atomic_fetch_add_explicit(&ps->a_lent, 1, RELAXED);
}

struct stage_chunk *land_pool_back(struct land_pools *ps, struct land_pool *p,
				   uint32_t slot, uint64_t now)
{
	struct stage_chunk *c = p->lent[slot];

	p->lent[slot] = NULL;
	p->nlent--;
	p->used_ns = now;
	atomic_fetch_sub_explicit(&ps->a_lent, 1, RELAXED);
	return c;
}

static void pool_went(struct land_pools *ps, struct land_pool *p,
		      struct rdma *t, const char *why)
{
	log_info("RDMA: landing pool for %s freed (%s): %u chunks, their "
		 "keys gone", p->name, why, p->nslots);
	pool_free(ps, p, t->ndevs ? t->ndevs : 1, true);
}

void land_pool_gone(struct land_pools *ps, struct land_pool *p,
		    struct rdma *t)
{
	p->gone = true;
	if (pool_whole(p))
		pool_went(ps, p, t, "its peer went");
}

bool land_pools_sweep(struct land_pools *ps, struct rdma *t, uint64_t now)
{
	struct land_pool *p, *next;
	bool any = false;

	for (p = TAILQ_FIRST(&ps->all); p; p = next) {
		next = TAILQ_NEXT(p, q);
		if (p->nlent || p->nstreams || !pool_whole(p))
			continue;
		if (p->gone)
			pool_went(ps, p, t, "its peer went");
		else if (p->used_ns + LAND_POOL_IDLE_NS <= now)
			pool_went(ps, p, t, "unused");
		else
			continue;
		any = true;
	}
	return any;
}

void land_pools_fini(struct land_pools *ps, struct rdma *t)
{
	struct land_pool *p;

	while ((p = TAILQ_FIRST(&ps->all)))
		pool_went(ps, p, t, "exit");
}
