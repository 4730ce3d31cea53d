/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify_queue.h - notifications xferd holds for one client until its CQ
 * has room for them.
 *
 * A notification (XFER_CQE_F_NOTIFY) for a region's owner is posted on
 * the owner's CQ when it fits; when the CQ is full, or when older ones
 * wait already, it waits here, in xferd's memory, and is posted in
 * arrival order as the owner consumes CQEs.  The queue is bounded (the
 * config key notify_queue_max); the caller reserves a place before it
 * commits to delivering, so that the sender of one that does not fit
 * can be told (-ENOBUFS) instead of the notification vanishing.
 *
 * Every queue of one user's clients (their uid) also draws on one
 * struct nq_pool, so that a user with many clients that never read
 * their CQs holds at most notify_queue_max_per_uid notifications in
 * xferd, not notify_queue_max times its clients.
 *
 * Progress thread only; no locking.  A pool is the one exception to
 * "only": the main thread makes and frees it (uid_usage.h), with no
 * queue using it then (it outlives every client of its user, and the
 * progress thread lets a client's queue go, nq_free, before the main
 * thread frees the client), and may read held, a relaxed atomic, as a
 * gauge.
 */
#ifndef XFERD_NOTIFY_QUEUE_H
#define XFERD_NOTIFY_QUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "xfer_ring.h"

/* What the queues of one user hold together. */
struct nq_pool {
	/* Written by the progress thread only; relaxed (a count, and a
	 * gauge for the main thread). */
	_Atomic uint32_t held;
};

struct notify_msg;

/* A held notification: its CQE, who sent it (xfer_ring.h) and its
 * message and sender name (core/notify_msg.h; owned, NULL: none). */
struct nq_entry {
	struct xfer_cqe cqe;
	struct xfer_cqe_sender from;
	struct notify_msg *msg;
};

/* A ring of entries that grows by doubling while it is used and is freed
 * once empty after a burst (only the first small ring stays).  Zeroed:
 * empty, in no pool. */
struct notify_queue {
	struct nq_entry *q;
	uint32_t head;   /* index of the oldest, modulo cap */
	uint32_t count;
	uint32_t cap;    /* a power of two, or 0 */
	/* Set before the owner is attached (then fixed); NULL: none. */
	struct nq_pool *pool;
};

static inline uint32_t nq_len(const struct notify_queue *q)
{
	return q->count;
}

/*
 * Make sure one more notification fits, while at most max are held in
 * q and at most pool_max in its pool: 0, -ENOBUFS (max or pool_max are
 * held already) or -ENOMEM.  After 0, nq_push() of one notification
 * cannot fail.
 */
int nq_reserve(struct notify_queue *q, uint32_t max, uint32_t pool_max);
/* Append cqe from sender behind the others, taking msg (NULL: none);
 * the caller reserved its place. */
void nq_push(struct notify_queue *q, const struct xfer_cqe *cqe,
	     const struct xfer_cqe_sender *from, struct notify_msg *msg);
/* The oldest notification; only when nq_len() > 0. */
const struct nq_entry *nq_front(const struct notify_queue *q);
/* Drop the oldest one (posted by the caller), freeing its message. */
void nq_pop(struct notify_queue *q);
/* Drop everything (its owner went); the queue is empty after, still in
 * its pool. */
void nq_free(struct notify_queue *q);

#endif /* XFERD_NOTIFY_QUEUE_H */
