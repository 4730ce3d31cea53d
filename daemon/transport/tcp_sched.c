/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_sched.c - the order in which a link's frames go out: classes and
 * tenants (core/traffic_class.h) on the TCP link.
 *
 * This side's operations wait in one queue for the latency class and
 * one per tenant for the rest (the default class and bulk), shared by
 * weight with deficit round robin over bytes (core/fairq.h); within a
 * queue, operations take turns a frame at a time, as the link always
 * did.  A tenant over its byte-rate cap is passed over until its bucket
 * refills (paced, never failed).  Latency frames go first.
 *
 * While latency traffic runs on a link (ours, or the peer's frames
 * saying so; class_mode), little bulk may wait ahead of a latency
 * frame: bulk frames are cut to bulk_queue / 2 bytes, queued only while
 * xferd's output holds less than that, and the kernel keeps no more
 * unsent (TCP_NOTSENT_LOWAT): at most bulk_queue bytes, one default
 * chunk, end to end.  Without latency traffic the link queues as
 * before (LINK_OUT_HIGH, the kernel's own buffers), which a link
 * carrying only bulk moves fastest.
 *
 * Progress thread only; no locks.
 */
#include "core/thread_stats.h"
#include "transport/tcp_int.h"

/* Class mode lasts this long after the last latency frame. */
#define CLASS_HOLD_NS 1000000000ull

static bool is_latency(const struct xop *op)
{
	return op->cls == XFER_CLASS_LATENCY;
}

void tcp_sched_init(struct tcp_link *tl)
{
	TAILQ_INIT(&tl->sendq);
	fairq_init(&tl->fq, tl->tm->cfg.tcp_chunk);
	for (unsigned i = 0; i < TENANT_MAX; i++) {
		fq_flow_init(&tl->flows[i].f, 1);
		TAILQ_INIT(&tl->flows[i].q);
	}
	tl->frame_max = tl->tm->cfg.tcp_chunk;
}

void tcp_sched_push(struct tcp_link *tl, struct xop *op)
{
	if (is_latency(op)) {
		TAILQ_INSERT_TAIL(&tl->sendq, op, q);
		tcp_sched_latency_seen(tl, now_ns());
		return;
	}
	struct tcp_flow *fl = &tl->flows[op->tenant];
	TAILQ_INSERT_TAIL(&fl->q, op, q);
	if (!fl->f.active) {
		/* Weights may change with a reload: taken when it starts. */
		fl->f.weight = tl->tm->cfg.tenants.t[op->tenant].weight;
		fairq_activate(&tl->fq, &fl->f);
	}
}

void tcp_sched_take(struct tcp_link *tl, struct xop *op)
{
	if (is_latency(op))
		TAILQ_REMOVE(&tl->sendq, op, q);
	else
		TAILQ_REMOVE(&tl->flows[op->tenant].q, op, q);
}

void tcp_sched_settle(struct tcp_link *tl, unsigned tenant)
{
	struct tcp_flow *fl = &tl->flows[tenant];

	/* Its share goes to the others at once (a client gone, say). */
	if (TAILQ_EMPTY(&fl->q))
		fairq_deactivate(&tl->fq, &fl->f);
}

void tcp_sched_remove(struct tcp_link *tl, struct xop *op)
{
	tcp_sched_take(tl, op);
	if (!is_latency(op))
		tcp_sched_settle(tl, op->tenant);
}

struct xop_list *tcp_sched_queue(struct tcp_link *tl, unsigned i)
{
	if (i == 0)
		return &tl->sendq;
	return i <= TENANT_MAX ? &tl->flows[i - 1].q : NULL;
}

void tcp_sched_latency_seen(struct tcp_link *tl, uint64_t now)
{
	tl->latency_until_ns = now + CLASS_HOLD_NS;
	if (tl->class_mode || !link_alive(tl->l))
		return;
	tl->class_mode = true;
	link_set_notsent_lowat(tl->l, tl->tm->cfg.bulk_queue / 2);
}

void tcp_sched_tick(struct tcp_link *tl, uint64_t now)
{
	if (!tl->class_mode || now < tl->latency_until_ns ||
	    !TAILQ_EMPTY(&tl->sendq))
		return;
	tl->class_mode = false;
	if (link_alive(tl->l))
		link_set_notsent_lowat(tl->l, 0);  /* the system's again */
}

static bool within_cap(struct tcp_mover *tm, unsigned tenant, uint64_t now)
{
	bool ok = !tm->cfg.caps || rate_cap_ok(&tm->cfg.caps[tenant], now);

	if (!ok && tm->cfg.stats)
		stat_add(&tm->cfg.stats->paced[tenant], 1);
	return ok;
}

struct xop *tcp_sched_latency(struct tcp_link *tl, uint64_t now)
{
	struct xop *op;

	TAILQ_FOREACH(op, &tl->sendq, q)
		if (within_cap(tl->tm, op->tenant, now))
			return op;
	return NULL;
}

struct cap_args {
	struct tcp_link *tl;
	uint64_t now;
};

static bool flow_eligible(const struct fq_flow *f, void *arg)
{
	struct cap_args *a = arg;
	const struct tcp_flow *fl = (const struct tcp_flow *)(const void *)f;
	unsigned tenant = (unsigned)(fl - a->tl->flows);

	return within_cap(a->tl->tm, tenant, a->now);
}

struct xop *tcp_sched_bulk(struct tcp_link *tl, uint64_t now,
			   uint64_t *wait_ns)
{
	struct cap_args a = { tl, now };
	struct fq_flow *f = fairq_next(&tl->fq, flow_eligible, &a);

	*wait_ns = 0;
	if (f)
		return TAILQ_FIRST(&((struct tcp_flow *)(void *)f)->q);
	/* All active tenants are over their caps: the soonest refill. */
	for (unsigned i = 0; tl->tm->cfg.caps && i < TENANT_MAX; i++) {
		if (!tl->flows[i].f.active)
			continue;
		uint64_t w = rate_cap_wait_ns(&tl->tm->cfg.caps[i]);
		if (w && (!*wait_ns || w < *wait_ns))
			*wait_ns = w;
	}
	return NULL;
}

void tcp_sched_sent(struct tcp_link *tl, struct xop *op, uint64_t bytes,
		    uint64_t now)
{
	struct tcp_op *to = tcp_op(op);
	struct class_stats *cs = tl->tm->cfg.stats;

	/* Latency bytes count against the tenant's share too. */
	fairq_charge(&tl->flows[op->tenant].f, bytes);
	if (tl->tm->cfg.caps)
		rate_cap_charge(&tl->tm->cfg.caps[op->tenant], bytes);
	if (to->waited || !cs)
		return;
	to->waited = true;
	uint64_t w = now > op->start_ns ? now - op->start_ns : 0;
	unsigned b = class_wait_bucket(w);
	stat_add(&cs->cls[op->cls].wait[b], 1);
	stat_add(&cs->cls[op->cls].wait_sum_ns, w);
	stat_add(&cs->tenant[op->tenant].wait[b], 1);
	stat_add(&cs->tenant[op->tenant].wait_sum_ns, w);
}

bool tcp_sched_bulk_full(const struct tcp_link *tl, size_t out)
{
	return tl->class_mode && out >= tl->tm->cfg.bulk_queue / 2;
}

void tcp_sched_serve(struct tcp_link *tl, struct serve *s)
{
	if (s->cls != XFER_CLASS_LATENCY) {
		TAILQ_INSERT_TAIL(&tl->serveq, s, q);
		return;
	}
	tcp_sched_latency_seen(tl, now_ns());
	struct serve *at = TAILQ_FIRST(&tl->serveq);
	while (at && at->cls == XFER_CLASS_LATENCY)
		at = TAILQ_NEXT(at, q);
	if (at)
		TAILQ_INSERT_BEFORE(at, s, q);
	else
		TAILQ_INSERT_TAIL(&tl->serveq, s, q);
}
