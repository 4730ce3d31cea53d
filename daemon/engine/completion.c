/* SPDX-License-Identifier: Apache-2.0 */
/*
 * completion.c - how descriptors end: CQEs, batches, notifications of
 * region owners, and the ops movers end later (exec.c starts them).
 *
 * A batch (SQEs linked with XFER_SQE_F_LINK) completes with one CQE:
 * at once if all of it ran in the pass (exec.c writes that CQE), else
 * when its last op ends (exec_op_done, from any mover's op_done hook);
 * its CQ slot is reserved the moment it first goes asynchronous, so
 * late completions never find the CQ full.  Ops come from a cache of
 * ended ones.
 *
 * Runs in the progress thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/exec_int.h"
#include "mem/region.h"

/* --- completions --- */

void exec_publish(struct prog_client *pc)
{
	if (!pc->cq_dirty)
		return;
	pc->cq_dirty = false;
	/* (G): the entries written since the last publish get their seq
	 * now, where cq_tail moves, the last first (the client at its head
	 * then finds the whole run). */
	if (pc->ring.phase) {
		for (uint32_t t = pc->cq_tail; t != pc->cq_stamped; t--)
			ring_cqe_stamp(&pc->ring, t - 1);
		pc->cq_stamped = pc->cq_tail;
	}
	if (ring_cq_publish(&pc->ring, pc->cq_tail))
		ring_client(pc->cq_sock);
}

/*
 * A notification's CQE and, before it, the sender and message records of
 * its slot: the release store of cq_tail in exec_publish() publishes
 * them all (C in common/ring.h; the client reads them after its
 * acquire), and on a ring with phase already the CQE's seq (G).  Completions of a client's own descriptors (exec_write_cqe)
 * leave the records alone.  A ring without a message area (a client
 * that did not ask for messages) gets the CQE and sender as before.
 */
static void write_notify_cqe(struct prog_client *pc,
			     const struct xfer_cqe *cqe,
			     const struct xfer_cqe_sender *from,
			     const struct notify_msg *msg)
{
	struct xfer_cqe_sender *rec = ring_cq_sender_at(&pc->ring, pc->cq_tail);
	struct xfer_cqe_message *mrec = ring_cq_msg_at(&pc->ring, pc->cq_tail);

	if (rec)
		*rec = *from;
	/* Only a record that says something is written (and flagged): a
	 * flood of plain notifications leaves the message area's pages
	 * untouched, as much memory as before it existed. */
	if (mrec && !notify_msg_empty(msg)) {
		struct xfer_cqe flagged = *cqe;
		notify_msg_to_record(msg, mrec);
		flagged.flags |= XFER_CQE_F_MSG;
		exec_write_cqe(pc, &flagged);
		return;
	}
	exec_write_cqe(pc, cqe);
}

/*
 * Room on the CQ for more completions.  The client's head is read again
 * only when the one seen last leaves less than half the CQ free: it
 * lies on a line the client writes at every consume, and reading it at
 * every pass put one more cache-line transfer in each round trip.  A
 * head seen earlier can only understate the room.
 */
uint32_t exec_cq_room(struct prog_client *pc)
{
	uint32_t used = pc->cq_tail - pc->cq_head_seen;

	if (used > pc->ring.cq_entries / 2) {
		pc->cq_head_seen = ring_cq_head(&pc->ring);
		used = pc->cq_tail - pc->cq_head_seen;
		if (used > pc->ring.cq_entries)
			return 0;  /* a corrupt head stalls only its client */
	}
	uint32_t space = pc->ring.cq_entries - used;
	return space > pc->cq_reserved ? space - pc->cq_reserved : 0;
}

/* --- notifications for region owners --- */

/*
 * A notification (XFER_CQE_F_NOTIFY) goes on its owner's CQ when that
 * has room and no older one is held; else it waits in the owner's
 * notify_queue (engine/notify_queue.h) and exec_notify_flush() posts it,
 * in order, as the owner consumes CQEs.  Past notify_queue_max held for
 * the owner, or notify_queue_max_per_uid for all clients of its user,
 * the sender's descriptor fails with -ENOBUFS: never silently dropped.
 * Delivery is two steps, exec_notify_admit() before the sender's own CQE is
 * written (so that CQE can carry the refusal) and exec_notify_deliver()
 * after it (so a client notifying itself sees its completion first).
 */

/* The owner of r, when it is attached and may still be notified. */
struct prog_client *exec_notify_owner_of(struct progress *p,
					  const struct region *r)
{
	struct prog_client *owner = progress_find_client(p, region_owner(r));

	return owner && !owner->broken ? owner : NULL;
}

/*
 * Will one more notification for owner be delivered?  It fits its CQ
 * now, behind nothing held, or its place in the queue is reserved.
 * held: CQ slots of owner the caller fills before exec_notify_deliver() (its
 * own completion, when the sender is the owner).  0, or -ENOBUFS past
 * notify_queue_max (-ENOMEM) for the sender's CQE.
 */
int exec_notify_admit(struct progress *p, struct prog_client *owner,
		      uint32_t held)
{
	if (nq_len(&owner->notify) == 0 && exec_cq_room(owner) > held)
		return 0;
	/* Relaxed: settings, changed only by a reload. */
	int err = nq_reserve(&owner->notify,
			     atomic_load_explicit(&p->notify_queue_max,
						  memory_order_relaxed),
			     atomic_load_explicit(&p->notify_uid_max,
						  memory_order_relaxed));
	if (err)
		stat_add(&owner->stats.notify_refused, 1);
	return err;
}

/* Who a client of ours is, as a sender (xfer_ring.h). */
struct xfer_cqe_sender exec_sender_of(const struct progress *p,
				      const struct prog_client *pc)
{
	struct xfer_cqe_sender from = {
		.client = pc->id,
		.uid = pc->uid,
	};

	memcpy(from.node, p->instance_id, sizeof(from.node));
	return from;
}

/* Post it, or queue it behind those held (exec_notify_admit() said yes). */
void exec_notify_deliver(struct prog_client *owner, const struct region *r,
			 uint64_t value, int64_t bytes,
			 const struct xfer_cqe_sender *from,
			 const struct notify_msg *msg)
{
	const struct xfer_cqe cqe = {
		.user_data = value,
		.result = bytes,
		.flags = XFER_CQE_F_NOTIFY,
		.handle = region_handle(r),
	};

	if (nq_len(&owner->notify) == 0 && exec_cq_room(owner) > 0) {
		write_notify_cqe(owner, &cqe, from, msg);
		exec_publish(owner);
		return;
	}
	/* Admitted, its place is there: no limit and no allocation here
	 * but its message's (only if either ever failed would one be
	 * lost, and counted).  An owner that takes no messages gets
	 * none kept for it. */
	int err = 0;
	struct notify_msg *kept = owner->ring.cq_msgs ? notify_msg_dup(msg, &err)
						      : NULL;
	if (err || nq_reserve(&owner->notify, UINT32_MAX, UINT32_MAX)) {
		free(kept);
		atomic_fetch_add_explicit(owner->ring.cq_overflow, 1,
					  memory_order_relaxed);
		return;
	}
	nq_push(&owner->notify, &cqe, from, kept);
	/* Relaxed: a gauge for xferctl. */
	atomic_store_explicit(&owner->stats.notify_queued,
			      nq_len(&owner->notify), memory_order_relaxed);
}

int exec_notify_owner(struct progress *p, const struct region *r,
		      uint64_t value, int64_t bytes,
		      const struct xfer_cqe_sender *from,
		      const struct notify_msg *msg)
{
	struct prog_client *owner = exec_notify_owner_of(p, r);

	if (!owner)
		return 0;  /* it is going: nobody waits for it any more */
	int err = exec_notify_admit(p, owner, 0);
	if (err)
		return err;
	exec_notify_deliver(owner, r, value, bytes, from, msg);
	return 0;
}

bool exec_notify_flush(struct progress *p, struct prog_client *pc)
{
	(void)p;
	if (nq_len(&pc->notify) == 0 || pc->broken)
		return false;
	uint32_t room = exec_cq_room(pc), n = 0;
	for (; n < room && nq_len(&pc->notify); n++) {
		const struct nq_entry *e = nq_front(&pc->notify);
		write_notify_cqe(pc, &e->cqe, &e->from, e->msg);
		nq_pop(&pc->notify);
	}
	if (n == 0)
		return false;
	atomic_store_explicit(&pc->stats.notify_queued, nq_len(&pc->notify),
			      memory_order_relaxed);
	exec_publish(pc);
	return true;
}

void exec_notify_forget(struct prog_client *pc)
{
	nq_free(&pc->notify);
	atomic_store_explicit(&pc->stats.notify_queued, 0,
			      memory_order_relaxed);
}

/* --- ops: what movers end later --- */

#define XOP_CACHE_MAX 4096u

struct xop *exec_xop_get(struct progress *p)
{
	struct xop *op = p->exec.xop_cache;

	if (!op)
		return calloc(1, sizeof(*op));
	p->exec.xop_cache = op->next_free;
	p->exec.nxop_cache--;
	memset(op, 0, sizeof(*op));
	return op;
}

void exec_xop_put(struct progress *p, struct xop *op)
{
	/* Its client outlives its ops (ops_out): no dangling pc here. */
	if (op->latency_charged && op->pc)
		op->pc->latency_inflight -= op->latency_charged;
	op->latency_charged = 0;
	free(op->notify_msg);
	op->notify_msg = NULL;
	if (p->exec.nxop_cache >= XOP_CACHE_MAX) {
		free(op);
		return;
	}
	op->next_free = p->exec.xop_cache;
	p->exec.xop_cache = op;
	p->exec.nxop_cache++;
}

void exec_xop_cache_free(struct progress *p)
{
	while (p->exec.xop_cache) {
		struct xop *op = p->exec.xop_cache;
		p->exec.xop_cache = op->next_free;
		free(op);
	}
	p->exec.nxop_cache = 0;
}

struct abatch *exec_batch_async(struct prog_client *pc)
{
	struct abatch *ab = pc->batch.ab;

	if (ab)
		return ab;
	ab = calloc(1, sizeof(*ab));
	if (!ab)
		return NULL;
	ab->pc = pc;
	ab->start_ns = pc->batch.start_ns;
	stat_add(&pc->stats.batches_out, 1);
	/* The CQE of this batch will come later: keep its slot. */
	pc->cq_reserved++;
	pc->batch.ab = ab;
	return ab;
}

/*
 * A NOTIFY to the owner of another xferd's region, sent after this pass
 * (exec_run_deferred): completions make them from inside a transport,
 * where a link failing at once would tear down what it is walking.
 */
static struct xop *notify_later(struct progress *p, struct prog_client *pc,
				struct region *target, uint64_t value,
				uint64_t bytes, uint64_t deadline_ns,
				uint16_t path, struct notify_msg **msg)
{
	struct xop *op = exec_xop_get(p);

	if (!op)
		return NULL;  /* *msg stays its caller's */
	region_get(target);
	*op = (struct xop){
		.opcode = XFER_OP_NOTIFY,
		.remote = target,
		.notify_value = value,
		.notify_bytes = bytes,
		.sender_client = pc->id,
		.sender_uid = pc->uid,
		.deadline_ns = deadline_ns,
		.path = path,
		.notify_msg = *msg,
	};
	*msg = NULL;  /* the op's now */
	progress_op_started(p);
	TAILQ_INSERT_TAIL(&p->exec.deferred, op, q);
	return op;
}

/*
 * The notification of a batch whose data went to another node, sent now
 * that all of it landed; the batch ends with its answer (the owner's
 * xferd may refuse it: -ENOBUFS).  False if it could not be sent.
 */
static bool notify_batch_remote(struct progress *p, struct abatch *ab)
{
	/* The batch's path stays the one that moved its data. */
	struct xop *op = notify_later(p, ab->pc, ab->notify_target,
				      ab->notify_value, ab->bytes,
				      now_ns() + 1000000ull * p->exec.op_timeout_ms,
				      ab->path, &ab->notify_msg);

	if (!op)
		return false;
	op->pc = ab->pc;
	op->batch = ab;
	ab->pending++;
	ab->pc->ops_out++;  /* exec_op_done() counts it back */
	region_put(ab->notify_target);
	ab->notify_target = NULL;
	return true;
}

static void batch_complete(struct progress *p, struct abatch *ab)
{
	struct prog_client *pc = ab->pc;
	struct prog_client *owner = NULL;

	if (!ab->error && ab->notify_target) {
		if (region_kind(ab->notify_target) != REGION_REMOTE) {
			owner = exec_notify_owner_of(p, ab->notify_target);
			/* Admitted before cq_reserved drops: the slot kept
			 * for this CQE is not counted as room. */
			int err = owner ? exec_notify_admit(p, owner, 0) : 0;
			if (err) {
				ab->error = err;
				owner = NULL;
			}
		} else if (notify_batch_remote(p, ab)) {
			return;
		} else {
			ab->error = -ENOMEM;
		}
	}
	int64_t result = ab->error ? ab->error : (int64_t)ab->bytes;

	pc->cq_reserved--;
	exec_write_cqe(pc, &(struct xfer_cqe){
		.user_data = ab->user_data,
		.result = result,
		.path = ab->path,
	});
	exec_publish(pc);
	if (owner) {
		const struct xfer_cqe_sender from = exec_sender_of(p, pc);
		exec_notify_deliver(owner, ab->notify_target, ab->notify_value,
			       result, &from, ab->notify_msg);
	}
	region_put(ab->notify_target);
	free(ab->notify_msg);
	exec_count_completion(p, pc, result);
	completion_record(&p->exec.paths.done, ab->path, result, ab->start_ns);
	stat_add(&pc->stats.batches_back, 1);
	free(ab);
}

/*
 * One-sided RDMA left the owner unaware that data arrived: its
 * notification follows on the link, sent only now that the last work
 * request completed, and the batch waits for it.
 */
static void notify_after_rdma(struct progress *p, struct xop *done)
{
	/* The batch's path stays the one that moved its data; its message
	 * goes with the notification. */
	struct xop *op = notify_later(p, done->pc, done->remote,
				      done->notify_value, done->len,
				      done->deadline_ns, done->path,
				      &done->notify_msg);

	if (!op) {
		if (!done->batch->error)
			done->batch->error = -ENOMEM;
		return;
	}
	op->pc = done->pc;
	op->batch = done->batch;
	done->batch->pending++;
	done->batch->pc->ops_out++;  /* exec_op_done() counts it back */
}

void exec_run_deferred(struct progress *p)
{
	struct xop *op;
	const struct mover *link = &p->routes[ROUTE_LINK];

	while ((op = TAILQ_FIRST(&p->exec.deferred))) {
		TAILQ_REMOVE(&p->exec.deferred, op, q);
		link->ops->submit(link->impl, op);
	}
}

void exec_op_reroute(void *arg, struct xop *op)
{
	struct progress *p = arg;
	struct path_facts f = {
		.opcode = op->opcode,
		.local = op->local ? region_kind(op->local) : 0,
		.target = REGION_REMOTE,
		.owner_mem = (enum region_kind)region_token(op->remote)->mem_kind,
		.gpus = p->res.gpu != NULL,
		.links = p->nmovers > 0,
		.rdma = false,  /* what just gave it back */
	};
	enum path_route route = path_choose(&f);
	const struct mover *t = route < ROUTE_NOTSUP ? &p->routes[route] : NULL;

	if (!t || !t->ops) {
		exec_op_done(p, op, -EHOSTUNREACH);
		return;
	}
	op->path = XFER_PATH_NONE;
	memset(op->priv, 0, sizeof(op->priv));  /* the next mover's */
	t->ops->submit(t->impl, op);
}

void exec_op_done(void *arg, struct xop *op, int64_t result)
{
	struct progress *p = arg;
	struct abatch *ab = op->batch;

	if (result >= 0 && op->notify && ab &&
	    (op->path == XFER_PATH_RDMA || op->path == XFER_PATH_RDMA_STAGED))
		notify_after_rdma(p, op);

	if (result > 0) {
		stat_add(&p->exec.paths.bytes[op->path], (uint64_t)result);
		stat_add(&p->exec.paths.ops[op->path], 1);
	}
	if (op->class_counted) {
		struct class_counters *cc[2] = {
			&p->exec.classes.cls[op->cls],
			&p->exec.classes.tenant[op->tenant] };
		for (int i = 0; i < 2; i++) {
			stat_add(&cc[i]->queued_ops, (uint64_t)-1);
			stat_add(&cc[i]->queued_bytes, (uint64_t)-op->len);
			stat_add(&cc[i]->ops, 1);
			if (result > 0)
				stat_add(&cc[i]->bytes, (uint64_t)result);
		}
	}
	uint16_t path = op->path;
	region_put(op->local);
	region_put(op->remote);
	exec_xop_put(p, op);
	progress_op_ended(p);
	if (!ab)
		return;
	if (result < 0 && !ab->error)
		ab->error = result;
	else if (result > 0)
		ab->bytes += (uint64_t)result;
	ab->path = path;
	ab->pc->ops_out--;
	if (--ab->pending == 0 && ab->closed)
		batch_complete(p, ab);
}

struct xop *exec_op_begin(struct progress *p, struct prog_client *pc,
			  struct abatch *ab, uint8_t opcode,
			  struct region *local, struct region *remote)
{
	struct xop *op = exec_xop_get(p);

	if (!op)
		return NULL;
	if (local)
		region_get(local);
	region_get(remote);
	*op = (struct xop){
		.pc = pc,
		.batch = ab,
		.opcode = opcode,
		.local = local,
		.remote = remote,
		.sender_client = pc->id,
		.sender_uid = pc->uid,
	};
	ab->pending++;
	pc->ops_out++;
	progress_op_started(p);
	return op;
}

void exec_op_abandon(struct progress *p, struct xop *op)
{
	op->batch->pending--;
	op->batch->pc->ops_out--;
	progress_op_ended(p);
	region_put(op->local);
	region_put(op->remote);
	exec_xop_put(p, op);
}

/* The batch's last SQE was seen and part of it is out on links. */
void exec_close_async(struct progress *p, struct prog_client *pc,
		      const struct xfer_sqe *sqe, struct region *target)
{
	struct abatch *ab = pc->batch.ab;

	pc->batch.ab = NULL;
	pc->batch.gpu_op = NULL;
	if (pc->batch.error && !ab->error)
		ab->error = pc->batch.error;
	ab->bytes += pc->batch.bytes;
	if (ab->path == XFER_PATH_NONE)
		ab->path = pc->batch.path;
	ab->closed = true;
	ab->user_data = sqe->user_data;
	/* A local notification target of the last entry: after the rest. */
	if (target && !ab->notify_target &&
	    notify_choose(sqe, false, true) == NOTIFY_AFTER_BATCH) {
		int err;
		region_get(target);
		ab->notify_target = target;
		ab->notify_value = sqe->notify_value;
		ab->notify_msg = exec_msg_dup(p, &err);
		if (err && !ab->error)
			ab->error = err;
	}
	if (ab->pending == 0)
		batch_complete(p, ab);
}

/* --- hooks of the same-node movers (local/local.h) --- */

/* An op for the descriptor exec_sqe() runs now (p->exec.running). */
struct xop *exec_hook_op_begin(void *arg, const struct move_req *rq)
{
	struct progress *p = arg;
	struct prog_client *pc = p->exec.running;
	struct abatch *ab = exec_batch_async(pc);
	struct xop *op = ab ? exec_op_begin(p, pc, ab, rq->opcode, rq->local,
					    rq->remote)
			    : NULL;

	/* Its class and tenant, for the queues it meets here (the copy
	 * workers, the staging pool, the GPU's streams). */
	if (op && p->exec.running_sqe)
		exec_op_set_class(p, pc, p->exec.running_sqe, op, rq->len);
	return op;
}

void exec_hook_op_abandon(void *arg, struct xop *op)
{
	exec_op_abandon(arg, op);
}

/* A batch of a departed client whose GPU copies are still out: freed
 * now, without a completion (nobody reads its ring any more).  The
 * batch still open is dropped by exec_cancel_client itself. */
void exec_forget_batch(void *arg, struct abatch *ab)
{
	(void)arg;
	if (ab == ab->pc->batch.ab)
		return;
	region_put(ab->notify_target);
	free(ab->notify_msg);
	free(ab);
}

void exec_cancel_client(struct progress *p, struct prog_client *pc)
{
	/* Its notifications waiting to go out go to the link, which ends
	 * them with the rest. */
	exec_run_deferred(p);
	/* Every mover ends what it holds of it.  The GPU copies run on
	 * (their regions are held) but end into nothing: the GPU mover,
	 * last of the same-node ones (progress_life.c keeps it there), frees
	 * their batches (exec_forget_batch), which ops the others end here
	 * may still count.  The ring and pc are freed once the main thread
	 * hears that the client was detached. */
	for (int i = 0; i < p->nmovers; i++)
		p->movers[i].ops->cancel_client(p->movers[i].impl, pc);
	for (int i = 0; i < p->nlocal; i++)
		p->local[i].ops->cancel_client(p->local[i].impl, pc);
	/* A batch left open (its last SQE never came) ends with nothing
	 * out any more: drop it without a completion. */
	struct abatch *ab = pc->batch.ab;
	pc->batch.gpu_op = NULL;
	if (ab) {
		pc->batch.ab = NULL;
		pc->cq_reserved--;
		region_put(ab->notify_target);
		free(ab->notify_msg);
		free(ab);
	}
}
