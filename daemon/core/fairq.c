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
	/* Every flow is looked at until one has credit: a flow in debt by
	 * more than a round's quantum is refilled and passed over as
	 * often as it takes, so the loop is bounded by the debts, which
	 * are bounded by one frame each.  Ineligible flows are passed over
	 * without a refill; n of them in a row since the last refill means
	 * none is eligible. */
	while ((f = TAILQ_FIRST(&q->active)) && skipped < n) {
		if (eligible && !eligible(f, arg)) {
			TAILQ_REMOVE(&q->active, f, ring);
			TAILQ_INSERT_TAIL(&q->active, f, ring);
			skipped++;
			continue;
		}
		if (f->deficit > 0)
			return f;
		f->deficit += (int64_t)f->weight * q->quantum;
		skipped = 0;
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
		/* rate * dt / 1e9 without overflow for dt up to ~584 years
		 * at 1 GB/s: split seconds and the rest. */
		uint64_t dt = now_ns - c->last_ns;
		uint64_t add = (dt / 1000000000u) * c->rate +
			       (dt % 1000000000u) * c->rate / 1000000000u;
		int64_t t = c->tokens + (int64_t)add;
		c->tokens = t > (int64_t)c->burst ? (int64_t)c->burst : t;
		c->last_ns = now_ns;
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
