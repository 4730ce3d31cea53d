/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fairq.c - deficit round robin between flows and the token bucket of
 * a rate cap (fairq.h).  Pure: no clock, no allocation, no lock; the
 * caller's thread.
 */
#include <stddef.h>

#include "core/fairq.h"

void fairq_init(struct fairq *q, uint32_t quantum)
{
	TAILQ_INIT(&q->active);
	q->quantum = quantum ? quantum : 1;
}

void fq_flow_init(struct fq_flow *f, uint32_t weight)
{
	f->deficit = 0;
	f->weight = weight ? weight : 1;
	f->active = false;
}

void fairq_activate(struct fairq *q, struct fq_flow *f)
{
	if (f->active)
		return;
	f->active = true;
	f->in_turn = false;
	f->deficit = 0;
	TAILQ_INSERT_TAIL(&q->active, f, ring);
}

void fairq_deactivate(struct fairq *q, struct fq_flow *f)
{
	if (!f->active)
		return;
	f->active = false;
	f->deficit = 0;
	TAILQ_REMOVE(&q->active, f, ring);
}

struct fq_flow *fairq_next(struct fairq *q,
			   bool (*eligible)(const struct fq_flow *f,
					    void *arg),
			   void *arg)
{
	struct fq_flow *f;
	unsigned skipped = 0, n = 0;

	TAILQ_FOREACH(f, &q->active, ring)
		n++;
	/*
	 * The head flow's turn: it gets weight * quantum at its start
	 * (in_turn), sends while its deficit is positive, and goes to the
	 * back when it ran out, carrying what is left (a debt, when its
	 * last frame was larger).  A flow deep in debt is passed over for
	 * as many turns as it takes: bounded, since every turn adds a
	 * quantum and a debt is one frame at most.  Ineligible flows end
	 * their turn untouched; n of them in a row since the last refill
	 * means none is eligible.
	 */
	while ((f = TAILQ_FIRST(&q->active)) && skipped < n) {
		if (eligible && !eligible(f, arg)) {
			f->in_turn = false;
			TAILQ_REMOVE(&q->active, f, ring);
			TAILQ_INSERT_TAIL(&q->active, f, ring);
			skipped++;
			continue;
		}
		if (!f->in_turn) {
			f->in_turn = true;
			f->deficit += (int64_t)f->weight * q->quantum;
			skipped = 0;
		}
		if (f->deficit > 0)
			return f;
		f->in_turn = false;
		TAILQ_REMOVE(&q->active, f, ring);
		TAILQ_INSERT_TAIL(&q->active, f, ring);
	}
	return NULL;
}

void fairq_charge(struct fq_flow *f, uint64_t bytes)
{
	f->deficit -= (int64_t)bytes;
}

void rate_cap_set(struct rate_cap *c, uint64_t rate, uint64_t burst,
		  uint64_t now_ns)
{
	if (c->rate != rate || c->burst != burst) {
		c->rate = rate;
		c->burst = burst;
		c->tokens = (int64_t)burst;
	}
	c->last_ns = now_ns;
}

bool rate_cap_ok(struct rate_cap *c, uint64_t now_ns)
{
	if (!c->rate)
		return true;
	if (now_ns > c->last_ns) {
		/* Whole bytes only, and the clock moves by their time alone,
		 * so that rounding loses nothing however often it is asked. */
		unsigned __int128 dt = now_ns - c->last_ns;
		uint64_t add = (uint64_t)(dt * c->rate / 1000000000u);
		int64_t t = c->tokens + (int64_t)add;
		if (t >= (int64_t)c->burst) {
			c->tokens = (int64_t)c->burst;
			c->last_ns = now_ns;
		} else {
			c->tokens = t;
			c->last_ns += (uint64_t)((unsigned __int128)add *
						 1000000000u / c->rate);
		}
	}
	return c->tokens > 0;
}

void rate_cap_charge(struct rate_cap *c, uint64_t bytes)
{
	if (c->rate)
		c->tokens -= (int64_t)bytes;
}

uint64_t rate_cap_wait_ns(const struct rate_cap *c)
{
	if (!c->rate || c->tokens > 0)
		return 0;
	return ((uint64_t)(-c->tokens) + 1) * 1000000000u / c->rate + 1;
}
