/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_sched.h - the order in which the RDMA pump posts: tenants'
 * shares and caps (core/traffic_class.h) on the RDMA send queues, the
 * decision alone, no verbs, so that a unit test scripts it
 * (tests/unit/test_rdma_sched.c) and rdma_post.c drives it.
 *
 * The same meaning as on the TCP link (tcp_sched.c): the latency class
 * goes first, first come first served; the rest (default and bulk)
 * waits per tenant, the tenants sharing by weight with deficit round
 * robin over the bytes of each work request posted (core/fairq.h, a
 * quantum of rdma_stripe per unit of weight); within a tenant, its
 * operations and staged pieces go in arrival order, as before.  A
 * tenant over its byte-rate cap is passed over (paced, never failed):
 * the pass says when its bucket refills and the transport pumps again
 * then (an event timer).  Latency bytes count against the tenant's
 * share and cap too.  The buckets are the tenants' over all links, the
 * executor's, which the TCP mover charges too, so a cap holds whichever
 * way the bytes go.
 *
 * Progress thread only; no locks.  The caller owns the struct.
 */
#ifndef XFERD_RDMA_SCHED_H
#define XFERD_RDMA_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "core/fairq.h"
#include "core/traffic_class.h"

struct rdma_sched {
	struct fairq fq;
	struct fq_flow flow[TENANT_MAX];
	uint32_t weight[TENANT_MAX];  /* as configured, taken at activation */
	struct rate_cap *caps;        /* [TENANT_MAX]; NULL: no caps */
	struct class_stats *stats;    /* paced and wait counts; may be NULL */
	/* This pass: now, tenants with nothing more to post (their queue
	 * pairs full, or all of it out), tenants a cap held back (counted
	 * once a pass). */
	uint64_t now;
	uint32_t stuck, held;
};

/* quantum: bytes a turn per unit of weight (the stripe). */
void rdma_sched_init(struct rdma_sched *s, uint32_t quantum);
/* Weights from tt (slots past tt->n: 1), and the quantum; a tenant's
 * share takes its weight when its queue starts, as on the link. */
void rdma_sched_set_tenants(struct rdma_sched *s,
			    const struct tenant_table *tt, uint32_t quantum);
/* A pump's pass starts at now: no tenant held or stuck yet. */
void rdma_sched_begin(struct rdma_sched *s, uint64_t now);
/* May tenant post now (within its cap)?  False counts it paced (once
 * a pass) and remembers it for rdma_sched_pace_ns. */
bool rdma_sched_may(struct rdma_sched *s, unsigned tenant);
/* tenant posted a work request of bytes (either class). */
void rdma_sched_charge(struct rdma_sched *s, unsigned tenant,
		       uint64_t bytes);

/*
 * Posts one request of tenant's bulk work: its bytes (> 0), 0 for a
 * step that moved none (a staged stream started), or -1 when tenant can
 * post nothing more in this pass (its queue pairs are full, or it has
 * nothing left).
 */
typedef int64_t (*rdma_sched_post_fn)(void *arg, unsigned tenant);

/*
 * The bulk class's pass: tenants with work (bit i of waiting: tenant
 * i) take turns by weight, a request at a time, until every one is
 * stuck or over its cap.  Tenants not in waiting leave the round (and
 * their deficit).
 */
void rdma_sched_bulk(struct rdma_sched *s, uint32_t waiting,
		     rdma_sched_post_fn post, void *arg);
/* Nanoseconds until the first tenant a cap held back in this pass may
 * go again (0: none was held). */
uint64_t rdma_sched_pace_ns(const struct rdma_sched *s);
/* An operation of class cls, tenant, started at start_ns, posted its
 * first request: its wait, in the class and tenant histograms. */
void rdma_sched_waited(struct rdma_sched *s, unsigned cls, unsigned tenant,
		       uint64_t start_ns);

#endif /* XFERD_RDMA_SCHED_H */
