/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fairq.h - weighted fair queuing between flows (deficit round robin)
 * and a byte-rate cap per flow (a token bucket): the decision alone, no
 * queue of items and no clock of its own, so that a mover's queue (the
 * TCP link's bulk frames: one flow per tenant) uses it and a unit test
 * scripts it (tests/unit/test_fairq.c).
 *
 * A flow is active while its owner has something queued for it.
 * fairq_next() names the flow to send from: the head of the active
 * ring, which gets weight * quantum bytes at the start of its turn and
 * keeps the turn while its deficit is positive, then goes to the back.  The sender
 * charges what it sent (fairq_charge), so shares are in bytes,
 * whatever the frames' sizes: over a busy period each active flow gets
 * weight / (sum of active weights) of the bytes, within one frame plus
 * one quantum.  A flow that empties leaves the ring and its deficit
 * (DRR: an idle flow saves no credit), so a departed client's share
 * goes to the others at once.
 *
 * Callers own the structs; one thread (the progress thread).
 */
#ifndef XFERD_CORE_FAIRQ_H
#define XFERD_CORE_FAIRQ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

struct fq_flow {
	int64_t deficit;          /* bytes it may still send this round */
	uint32_t weight;          /* >= 1 */
	bool active;
	bool in_turn;             /* its quantum of this turn was given */
	TAILQ_ENTRY(fq_flow) ring;
};

struct fairq {
	TAILQ_HEAD(, fq_flow) active;
	uint32_t quantum;         /* bytes per round per unit of weight */
};

void fairq_init(struct fairq *q, uint32_t quantum);
void fq_flow_init(struct fq_flow *f, uint32_t weight);
/* f has something queued now (a no-op if it had already). */
void fairq_activate(struct fairq *q, struct fq_flow *f);
/* f has nothing queued any more. */
void fairq_deactivate(struct fairq *q, struct fq_flow *f);
/*
 * The flow to send from next, or NULL when none is active or none is
 * eligible: eligible(f, arg) false (over its rate cap, say) skips f for
 * this call without touching its deficit.  NULL eligible: all are.
 */
struct fq_flow *fairq_next(struct fairq *q,
			   bool (*eligible)(const struct fq_flow *f,
					    void *arg),
			   void *arg);
/* f sent bytes. */
void fairq_charge(struct fq_flow *f, uint64_t bytes);

/*
 * A byte-rate cap: rate bytes a second, bursts of up to burst bytes.
 * The bucket may go into debt by the last frame's size (a frame is not
 * cut for it); a flow in debt waits until the time rate_cap_wait_ns
 * says.
 */
struct rate_cap {
	uint64_t rate;            /* bytes a second; 0: no cap */
	uint64_t burst;
	int64_t tokens;
	uint64_t last_ns;
};

void rate_cap_set(struct rate_cap *c, uint64_t rate, uint64_t burst,
		  uint64_t now_ns);
/* Refill to now; may it send? */
bool rate_cap_ok(struct rate_cap *c, uint64_t now_ns);
void rate_cap_charge(struct rate_cap *c, uint64_t bytes);
/* Nanoseconds until it may send again (0: now). */
uint64_t rate_cap_wait_ns(const struct rate_cap *c);

#endif /* XFERD_CORE_FAIRQ_H */
