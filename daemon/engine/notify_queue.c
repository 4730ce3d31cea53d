/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify_queue.c - the per-client queue of notifications that did not
 * fit its CQ yet (notify_queue.h).  Progress thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/notify_queue.h"

/* First allocation: small, most queues see short bursts. */
#define NQ_MIN_CAP 64u

/* Relaxed: only this thread writes held; it is a count, ordering
 * nothing else. */
static void pool_add(struct notify_queue *q, int32_t n)
{
	if (q->pool)
		atomic_fetch_add_explicit(&q->pool->held, (uint32_t)n,
					  memory_order_relaxed);
}

int nq_reserve(struct notify_queue *q, uint32_t max, uint32_t pool_max)
{
	if (q->count >= max)
		return -ENOBUFS;
	if (q->pool && atomic_load_explicit(&q->pool->held,
					    memory_order_relaxed) >= pool_max)
		return -ENOBUFS;
	if (q->count < q->cap)
		return 0;
	uint32_t cap = q->cap ? 2 * q->cap : NQ_MIN_CAP;
	if (cap < q->cap)
		return -ENOMEM;  /* 2^32 entries: never reached in practice */
	struct nq_entry *n = malloc((size_t)cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	/* Unwrapped into the new ring, oldest first. */
	uint32_t first = q->cap - q->head < q->count ? q->cap - q->head
						      : q->count;
	if (q->count) {
		memcpy(n, q->q + q->head, (size_t)first * sizeof(*n));
		memcpy(n + first, q->q, (size_t)(q->count - first) * sizeof(*n));
	}
	free(q->q);
	q->q = n;
	q->head = 0;
	q->cap = cap;
	return 0;
}

void nq_push(struct notify_queue *q, const struct xfer_cqe *cqe,
	     const struct xfer_cqe_sender *from, struct notify_msg *msg)
{
	q->q[(q->head + q->count) & (q->cap - 1)] = (struct nq_entry){
		.cqe = *cqe,
		.from = *from,
		.msg = msg,
	};
	q->count++;
	pool_add(q, 1);
}

const struct nq_entry *nq_front(const struct notify_queue *q)
{
	return &q->q[q->head];
}

void nq_pop(struct notify_queue *q)
{
	free(q->q[q->head].msg);
	q->head = (q->head + 1) & (q->cap - 1);
	pool_add(q, -1);
	/* Emptied after a burst: its memory goes back; the first small
	 * ring stays, so an owner just behind does not malloc each time. */
	if (--q->count == 0 && q->cap > NQ_MIN_CAP)
		nq_free(q);
}

void nq_free(struct notify_queue *q)
{
	struct nq_pool *pool = q->pool;

	pool_add(q, -(int32_t)q->count);
	for (uint32_t i = 0; i < q->count; i++)
		free(q->q[(q->head + i) & (q->cap - 1)].msg);
	free(q->q);
	*q = (struct notify_queue){ .pool = pool };
}
