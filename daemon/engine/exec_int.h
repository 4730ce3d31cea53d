/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec_int.h - what the executor's files share: exec.c (running a
 * descriptor: its route, its mover), completion.c (CQEs, batches,
 * notifications, ops ending) and exec_dlist.c (prepared lists).
 * Nothing else includes it.
 *
 * Progress thread only.
 */
#ifndef XFERD_EXEC_INT_H
#define XFERD_EXEC_INT_H

#include <stdint.h>

#ifdef XFERD_STAGE_STAMPS
#include <x86intrin.h>
#endif

#include "core/mover.h"
#include "core/xop.h"
#include "engine/progress_int.h"

/* --- completion.c --- */

/* Caller made sure there is room (exec_cq_room or a reservation). */
static inline void exec_write_cqe(struct prog_client *pc,
				  const struct xfer_cqe *cqe)
{
#ifdef XFERD_STAGE_STAMPS
	/* bench/stages.h: when the SQE was taken, and now; a completion of
	 * its own has no handle. */
	struct xfer_cqe stamped = *cqe;
	if (!(cqe->flags & XFER_CQE_F_NOTIFY))
		stamped.handle = (uint64_t)pc->stage_taken << 32 |
				 (uint32_t)__rdtsc();
	cqe = &stamped;
#endif
	ring_cqe_write(&pc->ring, pc->cq_tail, cqe);
	pc->cq_tail++;
	pc->cq_dirty = true;
}

static inline void exec_count_completion(struct progress *p,
					 struct prog_client *pc,
					 int64_t result)
{
	if (result < 0) {
		stat_add(&pc->stats.ops_failed, 1);
		stat_add(&p->exec.paths.failed, 1);
	} else {
		stat_add(&pc->stats.bytes_moved, (uint64_t)result);
	}
	stat_add(&pc->stats.ops_completed, 1);
	stat_add(&p->exec.paths.completed, 1);
}

/* The owner of r, when it is attached and may still be notified. */
struct prog_client *exec_notify_owner_of(struct progress *p,
					  const struct region *r);
/*
 * Will one more notification for owner be delivered?  It fits its CQ
 * now, behind nothing held, or its place in the queue is reserved.
 * held: CQ slots of owner the caller fills before exec_notify_deliver()
 * (its own completion, when the sender is the owner).  0, or -ENOBUFS
 * past notify_queue_max (-ENOMEM) for the sender's CQE.
 */
int exec_notify_admit(struct progress *p, struct prog_client *owner,
		      uint32_t held);
/* Who a client of ours is, as a sender (xfer_ring.h). */
struct xfer_cqe_sender exec_sender_of(const struct progress *p,
				      const struct prog_client *pc);
/* Post it, or queue it behind those held (exec_notify_admit said yes);
 * msg (lent; NULL: none) is copied where it is kept. */
void exec_notify_deliver(struct prog_client *owner, const struct region *r,
			 uint64_t value, int64_t bytes,
			 const struct xfer_cqe_sender *from,
			 const struct notify_msg *msg);
/* The message of the descriptor exec_sqe() runs now (NULL: none). */
static inline const struct notify_msg *exec_msg(const struct progress *p)
{
	return p->exec.msg_set ? &p->exec.msg : NULL;
}
/* A copy of it for what carries the notification on (NULL: none, or
 * -ENOMEM in *err). */
static inline struct notify_msg *exec_msg_dup(const struct progress *p,
					      int *err)
{
	return notify_msg_dup(exec_msg(p), err);
}

/* pc's batch goes asynchronous (its CQE comes later: a slot is kept);
 * NULL when out of memory. */
struct abatch *exec_batch_async(struct prog_client *pc);
/*
 * An operation of batch ab between local (may be NULL) and remote,
 * holding a reference to each and counted out (the batch waits for
 * it); NULL when out of memory.  The caller fills in what its mover
 * needs.
 */
struct xop *exec_op_begin(struct progress *p, struct prog_client *pc,
			  struct abatch *ab, uint8_t opcode,
			  struct region *local, struct region *remote);
/* An operation of exec_op_begin() that never went out: undone, no CQE. */
void exec_op_abandon(struct progress *p, struct xop *op);
/* The batch's last SQE was seen and part of it is still out. */
void exec_close_async(struct progress *p, struct prog_client *pc,
		      const struct xfer_sqe *sqe, struct region *target);

/* --- exec.c --- */

/* The facts path_choose() decides on, for a descriptor between local
 * (NULL for NOTIFY) and target. */
struct path_facts exec_facts(struct progress *p, const struct xfer_sqe *sqe,
			     struct region *local, struct region *target);
/*
 * Move sqe's bytes (a WRITE or READ of sqe->len) between local at loff
 * and remote at roff, resolved already, on route: here and now (returns
 * the bytes), or out (*async).  *target: the region to notify.
 */
int64_t exec_move_range(struct progress *p, struct prog_client *pc,
			const struct xfer_sqe *sqe, enum path_route route,
			struct region *local, uint64_t loff,
			struct region *remote, uint64_t roff, uint16_t *path,
			struct region **target, bool *async);

/* --- exec_dlist.c --- */

/* A prepared-list descriptor (XFER_OP_WRITE_DLIST, _READ_DLIST). */
int64_t exec_dlist(struct progress *p, struct prog_client *pc,
		   const struct xfer_sqe *sqe, uint16_t *path,
		   struct region **target, bool *async);

#endif /* XFERD_EXEC_INT_H */
