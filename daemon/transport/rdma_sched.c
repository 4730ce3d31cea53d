/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_sched.c - tenants' shares and caps on the RDMA send queues
 * (rdma_sched.h): deficit round robin between the tenants' bulk work,
 * a request at a time, and their byte-rate caps.  Pure but for the
 * counters: no verbs, no clock (the caller gives now), no allocation.
 *
 * Progress thread only; no locks.
 */
#include "core/thread_stats.h"
#include "transport/rdma_sched.h"

void rdma_sched_init(struct rdma_sched *s, uint32_t quantum)
{
	fairq_init(&s->fq, quantum);
	for (unsigned i = 0; i < TENANT_MAX; i++) {
		fq_flow_init(&s->flow[i], 1);
		s->weight[i] = 1;
	}
	s->caps = NULL;
	s->stats = NULL;
	s->now = 0;
	s->stuck = s->held = 0;
}

void rdma_sched_set_tenants(struct rdma_sched *s,
			    const struct tenant_table *tt, uint32_t quantum)
{
	s->fq.quantum = quantum ? quantum : 1;
	for (unsigned i = 0; i < TENANT_MAX; i++)
		s->weight[i] = i < tt->n && tt->t[i].weight ? tt->t[i].weight
							    : 1;
}

void rdma_sched_begin(struct rdma_sched *s, uint64_t now)
{
	s->now = now;
	s->stuck = s->held = 0;
}

bool rdma_sched_may(struct rdma_sched *s, unsigned tenant)
{
	if (!s->caps || rate_cap_ok(&s->caps[tenant], s->now))
		return true;
	/* Counted once a pass: a pass asks again at every turn. */
	if (!(s->held & 1u << tenant) && s->stats)
		stat_add(&s->stats->paced[tenant], 1);
	s->held |= 1u << tenant;
	return false;
}

void rdma_sched_charge(struct rdma_sched *s, unsigned tenant,
		       uint64_t bytes)
{
	fairq_charge(&s->flow[tenant], bytes);
	if (s->caps)
		rate_cap_charge(&s->caps[tenant], bytes);
}

static unsigned tenant_of(const struct rdma_sched *s, const struct fq_flow *f)
{
	return (unsigned)(f - s->flow);
}

/* In this pass's turns: not stuck, and within its cap. */
static bool eligible(const struct fq_flow *f, void *arg)
{
	struct rdma_sched *s = arg;
	unsigned i = tenant_of(s, f);

	return !(s->stuck & 1u << i) && rdma_sched_may(s, i);
}

void rdma_sched_bulk(struct rdma_sched *s, uint32_t waiting,
		     rdma_sched_post_fn post, void *arg)
{
	struct fq_flow *f;

	for (unsigned i = 0; i < TENANT_MAX; i++) {
		struct fq_flow *g = &s->flow[i];
		if (!(waiting & 1u << i)) {
			/* An idle tenant saves no credit (DRR). */
			fairq_deactivate(&s->fq, g);
		} else if (!g->active) {
			/* Weights may change with a reload: taken when it
			 * starts, as on the link. */
			g->weight = s->weight[i];
			fairq_activate(&s->fq, g);
		}
	}
	/*
	 * A tenant that can post nothing more is out of room, not of
	 * share: the queue pairs fill in most passes.  Its turn did not
	 * happen, so the quantum fairq_next just gave it is taken back,
	 * and the first one stuck in a pass is where the next pass starts,
	 * its turn as it was: otherwise whoever is at the head when room
	 * runs out would lose its turn in every pass (shares would follow
	 * the order of completions, not the weights).
	 */
	struct fq_flow *first = NULL;
	int64_t deficit[TENANT_MAX];
	bool in_turn[TENANT_MAX], first_in_turn = false;

	for (;;) {
		for (unsigned i = 0; i < TENANT_MAX; i++) {
			deficit[i] = s->flow[i].deficit;
			in_turn[i] = s->flow[i].in_turn;
		}
		if (!(f = fairq_next(&s->fq, eligible, s)))
			break;
		unsigned i = tenant_of(s, f);
		int64_t bytes = post(arg, i);

		if (bytes > 0)
			rdma_sched_charge(s, i, (uint64_t)bytes);
		if (bytes >= 0)
			continue;
		s->stuck |= 1u << i;
		f->deficit = deficit[i];
		f->in_turn = in_turn[i];
		if (!first) {
			first = f;
			first_in_turn = in_turn[i];
		}
	}
	if (first) {
		TAILQ_REMOVE(&s->fq.active, first, ring);
		TAILQ_INSERT_HEAD(&s->fq.active, first, ring);
		first->in_turn = first_in_turn;
	}
}

uint64_t rdma_sched_pace_ns(const struct rdma_sched *s)
{
	uint64_t wait = 0;

	for (unsigned i = 0; s->caps && i < TENANT_MAX; i++) {
		if (!(s->held & 1u << i))
			continue;
		uint64_t w = rate_cap_wait_ns(&s->caps[i]);
		if (w && (!wait || w < wait))
			wait = w;
	}
	/* Held, yet refilled by now (it was asked before a refill): at
	 * once, rather than never. */
	return s->held && !wait ? 1 : wait;
}

void rdma_sched_waited(struct rdma_sched *s, unsigned cls, unsigned tenant,
		       uint64_t start_ns)
{
	struct class_stats *cs = s->stats;

	if (!cs || cls >= XFER_CLASS__COUNT || tenant >= TENANT_MAX)
		return;
	uint64_t w = s->now > start_ns ? s->now - start_ns : 0;
	unsigned b = class_wait_bucket(w);
	stat_add(&cs->cls[cls].wait[b], 1);
	stat_add(&cs->cls[cls].wait_sum_ns, w);
	stat_add(&cs->tenant[tenant].wait[b], 1);
	stat_add(&cs->tenant[tenant].wait_sum_ns, w);
}
