/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec.c - executing descriptors and posting their completions.
 *
 * A descriptor whose both ends are on this node moves its data here and
 * now (path_local.c).  One whose remote end is another xferd's region
 * becomes an operation (xop.h) of a transport (core/mover.h):
 * RDMA where both ends are registered with NICs that reach each other,
 * else TCP; it ends later.  A batch
 * (SQEs linked with XFER_SQE_F_LINK) completes with one CQE either way:
 * at once if all of it ran here, else when its last operation ends; its
 * CQ slot is reserved the moment it first goes asynchronous, so late
 * completions never find the CQ full.
 *
 * Runs in the progress thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/kernel.h"
#include "core/path.h"
#ifdef XFERD_STAGE_STAMPS
#include <x86intrin.h>
#endif
#include "engine/copy_workers.h"
#include "engine/path_cma.h"
#include "engine/gpu_cma.h"
#include "engine/progress_int.h"
#include "core/xop.h"
#include "mem/cma.h"
#include "mem/dlist.h"

/* --- completions --- */

void exec_publish(struct prog_client *pc)
{
	if (!pc->cq_dirty)
		return;
	pc->cq_dirty = false;
	if (ring_cq_publish(&pc->ring, pc->cq_tail))
		ring_client(pc->cq_sock);
}

/*
 * A notification's CQE and, before it, the sender record of its slot:
 * the release store of cq_tail in exec_publish() publishes both (C in
 * common/ring.h; the client reads both after its acquire).  Completions
 * of a client's own descriptors (write_cqe) leave the record alone.
 */
static void write_cqe(struct prog_client *pc, const struct xfer_cqe *cqe);
static void write_notify_cqe(struct prog_client *pc,
			     const struct xfer_cqe *cqe,
			     const struct xfer_cqe_sender *from)
{
	struct xfer_cqe_sender *rec = ring_cq_sender_at(&pc->ring, pc->cq_tail);

	if (rec)
		*rec = *from;
	write_cqe(pc, cqe);
}

/* Caller made sure there is room (exec_cq_room or a reservation). */
static void write_cqe(struct prog_client *pc, const struct xfer_cqe *cqe)
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
	*ring_cqe_at(&pc->ring, pc->cq_tail) = *cqe;
	pc->cq_tail++;
	pc->cq_dirty = true;
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
 * Delivery is two steps, notify_admit() before the sender's own CQE is
 * written (so that CQE can carry the refusal) and notify_deliver()
 * after it (so a client notifying itself sees its completion first).
 */

/* The owner of r, when it is attached and may still be notified. */
static struct prog_client *notify_owner(struct progress *p,
					const struct region *r)
{
	struct prog_client *owner = progress_find_client(p, region_owner(r));

	return owner && !owner->broken ? owner : NULL;
}

/*
 * Will one more notification for owner be delivered?  It fits its CQ
 * now, behind nothing held, or its place in the queue is reserved.
 * held: CQ slots of owner the caller fills before notify_deliver() (its
 * own completion, when the sender is the owner).  0, or -ENOBUFS past
 * notify_queue_max (-ENOMEM) for the sender's CQE.
 */
static int notify_admit(struct progress *p, struct prog_client *owner,
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
static struct xfer_cqe_sender sender_of(const struct progress *p,
					const struct prog_client *pc)
{
	struct xfer_cqe_sender from = {
		.client = pc->id,
		.uid = pc->uid,
	};

	memcpy(from.node, p->instance_id, sizeof(from.node));
	return from;
}

/* Post it, or queue it behind those held (notify_admit() said yes). */
static void notify_deliver(struct prog_client *owner, const struct region *r,
			   uint64_t value, int64_t bytes,
			   const struct xfer_cqe_sender *from)
{
	const struct xfer_cqe cqe = {
		.user_data = value,
		.result = bytes,
		.flags = XFER_CQE_F_NOTIFY,
		.handle = region_handle(r),
	};

	if (nq_len(&owner->notify) == 0 && exec_cq_room(owner) > 0) {
		write_notify_cqe(owner, &cqe, from);
		exec_publish(owner);
		return;
	}
	/* Admitted, its place is there: no limit and no allocation here.
	 * (Only if that ever failed would one be lost, and counted.) */
	if (nq_reserve(&owner->notify, UINT32_MAX, UINT32_MAX)) {
		atomic_fetch_add_explicit(owner->ring.cq_overflow, 1,
					  memory_order_relaxed);
		return;
	}
	nq_push(&owner->notify, &cqe, from);
	/* Relaxed: a gauge for xferctl. */
	atomic_store_explicit(&owner->stats.notify_queued,
			      nq_len(&owner->notify), memory_order_relaxed);
}

int exec_notify_owner(struct progress *p, const struct region *r,
		      uint64_t value, int64_t bytes,
		      const struct xfer_cqe_sender *from)
{
	struct prog_client *owner = notify_owner(p, r);

	if (!owner)
		return 0;  /* it is going: nobody waits for it any more */
	int err = notify_admit(p, owner, 0);
	if (err)
		return err;
	notify_deliver(owner, r, value, bytes, from);
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
		write_notify_cqe(pc, &e->cqe, &e->from);
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

static void count_completion(struct progress *p, struct prog_client *pc,
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

/* --- operations out of this thread (links, GPU copies) --- */

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

static struct abatch *batch_async(struct prog_client *pc)
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

/* The transport a route runs on (NULL: this xferd has none such). */
static const struct mover *transport_for(struct progress *p,
					     enum path_route route)
{
	/* The staged route is the TCP transport's too: it stages what it
	 * moves of GPU memory itself (transport/tcp.c). */
	if (route == ROUTE_LINK_STAGED)
		route = ROUTE_LINK;
	for (int i = 0; i < p->nmovers; i++)
		if (p->movers[i].route == route)
			return &p->movers[i];
	return NULL;
}

/* Could RDMA move this descriptor now: zero-copy (ROUTE_RDMA: both ends
 * registered, a rail pair to the owner) or through its staging buffers
 * (ROUTE_RDMA_STAGED)?  Asked before anything of it is set up. */
static bool rdma_can_move(struct progress *p, enum path_route how,
			  const struct xfer_sqe *sqe, struct region *local,
			  struct region *remote)
{
	const struct mover *t = transport_for(p, how);
	if (!t || !local)
		return false;
	const struct xop probe = { .opcode = sqe->opcode, .local = local,
				   .remote = remote, .len = sqe->len };
	return t->ops->accepts(t->impl, &probe);
}

/*
 * A NOTIFY to the owner of another xferd's region, sent after this pass
 * (exec_run_deferred): completions make them from inside a transport,
 * where a link failing at once would tear down what it is walking.
 */
static struct xop *notify_later(struct progress *p, struct prog_client *pc,
				struct region *target, uint64_t value,
				uint64_t bytes, uint64_t deadline_ns,
				uint16_t path)
{
	struct xop *op = exec_xop_get(p);

	if (!op)
		return NULL;
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
	};
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
				      ab->path);

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
			owner = notify_owner(p, ab->notify_target);
			/* Admitted before cq_reserved drops: the slot kept
			 * for this CQE is not counted as room. */
			int err = owner ? notify_admit(p, owner, 0) : 0;
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
	write_cqe(pc, &(struct xfer_cqe){
		.user_data = ab->user_data,
		.result = result,
		.path = ab->path,
	});
	exec_publish(pc);
	if (owner) {
		const struct xfer_cqe_sender from = sender_of(p, pc);
		notify_deliver(owner, ab->notify_target, ab->notify_value,
			       result, &from);
	}
	region_put(ab->notify_target);
	count_completion(p, pc, result);
	completion_record(&p->exec.paths.done, ab->path, result, ab->start_ns);
	stat_add(&pc->stats.batches_back, 1);
	free(ab);
}

/*
 * One-sided RDMA left the owner unaware that data arrived: its
 * notification follows on the link, sent only now that the last work
 * request completed, and the batch waits for it.
 */
static void notify_after_rdma(struct progress *p, const struct xop *done)
{
	/* The batch's path stays the one that moved its data. */
	struct xop *op = notify_later(p, done->pc, done->remote,
				      done->notify_value, done->len,
				      done->deadline_ns, done->path);

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

	const struct mover *link = transport_for(p, ROUTE_LINK);

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
		.gpus = p->gpu != NULL,
		.links = p->nmovers > 0,
		.rdma = false,  /* what just gave it back */
	};
	const struct mover *t = transport_for(p, path_choose(&f));

	if (!t) {
		exec_op_done(p, op, -EHOSTUNREACH);
		return;
	}
	op->path = XFER_PATH_NONE;
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
	uint16_t path = op->path;
	region_put(op->local);
	region_put(op->remote);
	dlist_put(op->gpu.lists[0]);
	dlist_put(op->gpu.lists[1]);
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

/*
 * An operation of batch ab for descriptor sqe between local (may be
 * NULL) and remote, holding a reference to each and counted out (the
 * batch waits for it); NULL when out of memory.  The caller fills in
 * what its engine needs.
 */
static struct xop *op_begin(struct progress *p, struct prog_client *pc,
			    struct abatch *ab, const struct xfer_sqe *sqe,
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
		.opcode = sqe->opcode,
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

/* An operation of op_begin() that never went out: undone, no CQE. */
static void op_abandon(struct progress *p, struct xop *op)
{
	op->batch->pending--;
	op->batch->pc->ops_out--;
	progress_op_ended(p);
	region_put(op->local);
	region_put(op->remote);
	exec_xop_put(p, op);
}

/*
 * Send a WRITE, READ or NOTIFY to another xferd.  The notification of
 * the batch's last entry rides on its frame when nothing else of the
 * batch is still out (the peer notifies after the data landed); else it
 * waits for the whole batch (batch_complete).
 */
static int64_t go_remote(struct progress *p, struct prog_client *pc,
			 const struct xfer_sqe *sqe, const struct mover *via,
			 struct region *local, uint64_t loff,
			 struct region *remote, uint64_t roff, bool *async)
{
	struct abatch *ab = batch_async(pc);
	if (!ab)
		return -ENOMEM;
	uint32_t timeout = sqe->timeout_ms ? sqe->timeout_ms : p->exec.op_timeout_ms;
	bool pending = ab->pending != 0 || pc->batch.error;
	bool wants_notify = false;

	switch (notify_choose(sqe, true, pending)) {
	case NOTIFY_NONE:
	case NOTIFY_NOW:
		break;
	case NOTIFY_WITH_DATA:
		wants_notify = true;  /* the owner notifies after the data */
		break;
	case NOTIFY_AFTER_BATCH:
		region_get(remote);
		ab->notify_target = remote;
		ab->notify_value = sqe->notify_value;
		if (sqe->opcode == XFER_OP_NOTIFY)
			return 0;
		break;
	}
	struct xop *op = op_begin(p, pc, ab, sqe, local, remote);
	if (!op)
		return -ENOMEM;
	op->local_off = loff;
	op->remote_off = roff;
	op->len = sqe->opcode == XFER_OP_NOTIFY ? 0 : sqe->len;
	op->notify = wants_notify;
	op->notify_value = sqe->notify_value;
	op->deadline_ns = now_ns() + 1000000ull * timeout;
	*async = true;
	via->ops->submit(via->impl, op);
	return 0;
}

/*
 * Where a copy endpoint is for a copy that runs on GPU dev: a device
 * address valid there (*gpu the GPU it is memory of), or xferd's pinned
 * mapping of a memfd region (*gpu -1).
 */
static int gpu_end(struct region *r, uint64_t off, int dev, uint64_t *addr,
		   int *gpu)
{
	switch (region_kind(r)) {
	case REGION_CUDA:
		/* Mapped for dev itself when possible: then the copy is
		 * local to dev and may go in the batch kernel. */
		if (region_gpu_addr(r, dev, off, addr) == 0) {
			*gpu = dev;
			return 0;
		}
		*addr = region_gpu_ptr(r) + off;
		*gpu = region_gpu_dev(r);  /* a peer copy between contexts */
		return 0;
	case REGION_MEMFD: {
		/* Pinned on first use: DMA straight from the mapping. */
		int err = region_gpu_pin(r);
		if (err)
			return err;
		*addr = (uint64_t)(uintptr_t)region_map_at(r, off);
		*gpu = -1;
		return 0;
	}
	default:
		/* xfer_reg'd host memory lives in another process: no DMA. */
		return -ENOTSUP;
	}
}

/*
 * A copy with GPU memory at one end or both, on this node: queued on
 * the GPU copy engine (gpu/copy.c), it ends when its event fires.  The
 * GPU that runs it is the destination's (reading from a peer over
 * NVLink), or the source's when the destination is host memory.
 */
static int64_t go_gpu(struct progress *p, struct prog_client *pc,
		      const struct xfer_sqe *sqe, struct region *local,
		      uint64_t loff, struct region *remote, uint64_t roff,
		      bool *async)
{
	bool write = sqe->opcode == XFER_OP_WRITE;
	struct region *src = write ? local : remote, *dst = write ? remote : local;
	uint64_t soff = write ? loff : roff, doff = write ? roff : loff;
	uint64_t sa, da;
	int sgpu, dgpu, err;

	if (!p->gpu)
		return -ENOTSUP;
	/* The destination's GPU runs the copy, pulling from a peer; the
	 * source's when the destination is host memory. */
	int dev = region_kind(dst) == REGION_CUDA ? region_gpu_dev(dst)
						 : region_gpu_dev(src);
	if ((err = gpu_end(src, soff, dev, &sa, &sgpu)) ||
	    (err = gpu_end(dst, doff, dev, &da, &dgpu)))
		return err;
	if (sqe->len == 0)
		return 0;
	struct abatch *ab = batch_async(pc);
	if (!ab)
		return -ENOMEM;
	/*
	 * The copies of one batch between the same two regions share one
	 * operation (a KV-cache vector is a thousand of them): one
	 * completion and one pair of region references for all of them.
	 */
	struct xop *op = pc->batch.gpu_op;
	if (!op || op->local != local || op->remote != remote) {
		op = op_begin(p, pc, ab, sqe, local, remote);
		if (!op)
			return -ENOMEM;
		op->path = XFER_PATH_CUDA_IPC;
		pc->batch.gpu_op = op;
	}
	err = gpu_copy(p->gpu, op, da, dgpu, sa, sgpu, sqe->len);
	if (err && op->gpu.parts == 0) {
		/* Nothing of it is out: it ends here, not through poll. */
		pc->batch.gpu_op = NULL;
		op_abandon(p, op);
		return err;
	}
	if (err) {
		op->gpu.error = err;  /* the batch fails with it */
		return err;
	}
	op->len += sqe->len;
	*async = true;
	return 0;
}

/*
 * A same-node descriptor whose bytes an engine of this node moves later
 * as one operation: begun here, handed to submit (lstage_submit,
 * cma_split_submit), which ends it through exec_op_done; undone if
 * submit refuses it.
 */
static int64_t go_local_async(struct progress *p, struct prog_client *pc,
			      const struct xfer_sqe *sqe,
			      struct region *local, uint64_t loff,
			      struct region *remote, uint64_t roff,
			      bool *async,
			      int (*submit)(struct progress *, struct xop *,
					    uint64_t, uint64_t))
{
	struct abatch *ab = batch_async(pc);
	if (!ab)
		return -ENOMEM;
	struct xop *op = op_begin(p, pc, ab, sqe, local, remote);
	if (!op)
		return -ENOMEM;
	op->len = sqe->len;
	int err = submit(p, op, loff, roff);
	if (err) {
		op_abandon(p, op);
		return err;
	}
	*async = true;
	return 0;
}

/*
 * GPU memory and xfer_reg'd host memory on this node: through staging
 * chunks (gpu_cma.c), one operation per descriptor that ends when
 * its last chunk did.
 */
static int64_t go_gpu_staged(struct progress *p, struct prog_client *pc,
			     const struct xfer_sqe *sqe, struct region *local,
			     uint64_t loff, struct region *remote,
			     uint64_t roff, bool *async)
{
	if (!p->gpu || !p->staging)
		return -ENOTSUP;
	if (sqe->len == 0)
		return 0;
	return go_local_async(p, pc, sqe, local, loff, remote, roff, async,
			      lstage_submit);
}

/* --- executing one descriptor --- */

/* The facts path_choose() decides on, for a descriptor between local
 * (NULL for NOTIFY) and target. */
/* The facts of another xferd's region: what RDMA can do for it now. */
static __attribute__((noinline)) void remote_facts(struct progress *p,
						   const struct xfer_sqe *sqe,
						   struct region *local,
						   struct region *target,
						   struct path_facts *f)
{
	f->owner_mem = (enum region_kind)region_token(target)->mem_kind;
	f->rdma = rdma_can_move(p, ROUTE_RDMA, sqe, local, target);
	f->rdma_staged = !f->rdma && rdma_can_move(p, ROUTE_RDMA_STAGED, sqe,
						   local, target);
}

/* Inline: for two regions of this node it is a few loads (callgrind:
 * the call and its returned struct cost more than the facts). */
static inline __attribute__((always_inline)) struct path_facts
facts_of(struct progress *p, const struct xfer_sqe *sqe, struct region *local,
	 struct region *target)
{
	struct path_facts f = {
		.opcode = sqe->opcode,
		.local = local ? region_kind(local) : 0,
		.target = region_kind(target),
		.gpus = p->gpu != NULL,
		.links = p->nmovers > 0,
	};
	if (region_kind(target) == REGION_REMOTE)
		remote_facts(p, sqe, local, target, &f);
	return f;
}

/*
 * Move sqe's bytes (a WRITE or READ of sqe->len) between local at loff
 * and remote at roff, resolved already, on route: here and now (returns
 * the bytes), or out (*async).  *target: the region to notify.
 */
static inline __attribute__((always_inline)) int64_t
move_range(struct progress *p, struct prog_client *pc,
			  const struct xfer_sqe *sqe, enum path_route route,
			  struct region *local, uint64_t loff,
			  struct region *remote, uint64_t roff, uint16_t *path,
			  struct region **target, bool *async)
{
	bool write = sqe->opcode == XFER_OP_WRITE;
	int64_t rc;

	switch (route) {
	case ROUTE_RDMA:
	case ROUTE_RDMA_STAGED:
	case ROUTE_LINK:
	case ROUTE_LINK_STAGED:
		return go_remote(p, pc, sqe, transport_for(p, route), local,
				 loff, remote, roff, async);
	case ROUTE_GPU:
		*target = remote;  /* notified once the copy is done */
		return go_gpu(p, pc, sqe, local, loff, remote, roff, async);
	case ROUTE_GPU_STAGED:
		*target = remote;  /* notified once every chunk is done */
		return go_gpu_staged(p, pc, sqe, local, loff, remote, roff,
				     async);
	case ROUTE_MEMCPY:
	case ROUTE_CMA:
		break;
	case ROUTE_NOTSUP:
		return -ENOTSUP;
	case ROUTE_UNREACHABLE:
		return -EHOSTUNREACH;
	}
	*target = remote;  /* the caller notifies its owner */
	if (sqe->len == 0)
		return 0;
	if (route == ROUTE_CMA && p->exec.cma_split_bytes &&
	    sqe->len >= p->exec.cma_split_bytes &&
	    copy_workers_count(p->workers) >= 2 &&
	    (write ? cma_split_fits(local, loff, remote, roff, sqe->len)
		   : cma_split_fits(remote, roff, local, loff, sqe->len)))
		/* In parts on the copy workers (path_cma.c). */
		return go_local_async(p, pc, sqe, local, loff, remote, roff,
				      async, cma_split_submit);
	rc = write ? local_copy(&p->exec.staging, local, loff, remote, roff,
				sqe->len, path)
		   : local_copy(&p->exec.staging, remote, roff, local, loff,
				sqe->len, path);
	if (rc > 0) {
		stat_add(&p->exec.paths.bytes[*path], (uint64_t)rc);
		stat_add(&p->exec.paths.ops[*path], 1);
	}
	return rc;
}

static int64_t exec_copy(struct progress *p, struct prog_client *pc,
			 const struct xfer_sqe *sqe, uint16_t *path,
			 struct region **target, bool *async)
{
	struct region *local = NULL, *remote = NULL;
	uint64_t loff, roff;
	int64_t rc;

	rc = regtab_resolve_memo(p->regs, &p->exec.memo, pc->id, sqe->local,
				 sqe->local_off, sqe->len, false, &local,
				 &loff);
	if (rc)
		return rc;
	rc = regtab_resolve_memo(p->regs, &p->exec.memo, pc->id, sqe->remote,
				 sqe->remote_off, sqe->len, true, &remote,
				 &roff);
	if (rc)
		return rc;
	struct path_facts f = facts_of(p, sqe, local, remote);
	return move_range(p, pc, sqe, path_choose(&f), local, loff, remote,
			  roff, path, target, async);
}

/* --- prepared lists (XFER_OP_WRITE_DLIST, _READ_DLIST) --- */

/* A run of a list descriptor that is contiguous at both ends. */
struct dl_seg {
	uint64_t loff, roff, len;
};

/* The lists a descriptor names, and their targets resolved. */
struct dl_ends {
	struct dlist *l, *r;       /* references */
	struct region *local, *remote; /* lent by the memo */
	uint64_t lbase, rbase;     /* of the lists' ranges in the regions */
};

/* The pair at k of the descriptor's index area, read once. */
static inline struct xfer_dlist_pair dl_pair(const uint64_t *area, uint64_t k)
{
	uint64_t w = __atomic_load_n(&area[k], __ATOMIC_RELAXED);
	struct xfer_dlist_pair pr;

	memcpy(&pr, &w, sizeof(pr));
	return pr;
}

/* The descriptor's pairs in the ring's index area (untrusted: each is
 * read once by dl_pair), or NULL with *err. */
static const uint64_t *dl_area(const struct prog_client *pc,
			       const struct xfer_sqe *sqe, int64_t *err)
{
	const struct ring_view *v = &pc->ring;
	uint64_t at = sqe->local_off;

	if (!v->idx) {
		*err = -EOPNOTSUPP;
		return NULL;
	}
	if (at % sizeof(struct xfer_dlist_pair) || at > v->idx_size ||
	    sqe->len > (v->idx_size - at) / sizeof(struct xfer_dlist_pair)) {
		*err = -EINVAL;
		return NULL;
	}
	return (const uint64_t *)(const void *)((const char *)v->idx + at);
}

/* Check one pair: both indices in their lists, the same length. */
static inline int64_t dl_check_pair(const struct dl_ends *e,
				    struct xfer_dlist_pair pr, uint64_t *len)
{
	if (pr.local >= e->l->n || pr.remote >= e->r->n)
		return -ERANGE;
	*len = dlist_len(e->l, pr.local);
	return *len == dlist_len(e->r, pr.remote) ? 0 : -EINVAL;
}

/*
 * Copy the descriptor's pairs out of the ring, check every one, and
 * merge the runs that are contiguous at both ends into p->exec.segs.
 * Returns the number of segments (*total their bytes), or -errno before
 * anything moved.
 */
static int64_t dl_segments(struct progress *p, const struct prog_client *pc,
			   const struct xfer_sqe *sqe, const struct dl_ends *e,
			   uint64_t *total)
{
	int64_t err = 0;
	const uint64_t *area = dl_area(pc, sqe, &err);

	if (!area)
		return err;
	if (sqe->len > p->exec.segs_cap) {
		struct dl_seg *s = realloc(p->exec.segs,
					   sqe->len * sizeof(*s));
		if (!s)
			return -ENOMEM;
		p->exec.segs = s;
		p->exec.segs_cap = sqe->len;
	}
	struct dl_seg *s = p->exec.segs;
	uint64_t ns = 0, sum = 0;
	for (uint64_t k = 0; k < sqe->len; k++) {
		struct xfer_dlist_pair pr = dl_pair(area, k);
		uint64_t len;
		if ((err = dl_check_pair(e, pr, &len)))
			return err;
		uint64_t lo = e->lbase + e->l->off[pr.local];
		uint64_t ro = e->rbase + e->r->off[pr.remote];
		if (sum + len < sum)
			return -EOVERFLOW;
		sum += len;
		if (ns && s[ns - 1].loff + s[ns - 1].len == lo &&
		    s[ns - 1].roff + s[ns - 1].len == ro) {
			s[ns - 1].len += len;
			continue;
		}
		s[ns++] = (struct dl_seg){ lo, ro, len };
	}
	*total = sum;
	return (int64_t)ns;
}

/* List l's offsets on GPU dev, uploaded on first use; NULL if that
 * cannot be done (then its transfers go block by block). */
static struct gpu_list *dl_on_gpu(struct dlist *l, int dev)
{
	if (!l->gpu) {
		l->gpu = calloc((size_t)gpu_count(), sizeof(*l->gpu));
		if (!l->gpu)
			return NULL;
	}
	if (!l->gpu[dev] &&
	    gpu_list_upload(dev, l->off, l->lens, l->n, &l->gpu[dev]))
		l->gpu[dev] = NULL;
	return l->gpu[dev];
}

/*
 * Both lists over GPU memory that the destination's GPU reaches
 * directly: one indexed kernel launch per COPY_PAIRS_MAX pairs, the
 * pairs resolved on the GPU against the lists uploaded once.  Returns
 * the bytes queued (the op ends later), 0 when this way is not open
 * (nothing done: the caller goes block by block), or -errno.
 */
static int64_t dl_gpu_indexed(struct progress *p, struct prog_client *pc,
			      const struct xfer_sqe *sqe,
			      const struct dl_ends *e, bool *async)
{
	bool write = sqe->opcode == XFER_OP_WRITE_DLIST;
	struct region *src = write ? e->local : e->remote;
	struct region *dst = write ? e->remote : e->local;
	struct dlist *sl = write ? e->l : e->r, *dl = write ? e->r : e->l;
	uint64_t sbase, dbase;
	int64_t err = 0;

	if (!p->gpu || region_kind(src) != REGION_CUDA ||
	    region_kind(dst) != REGION_CUDA)
		return 0;
	int dev = region_gpu_dev(dst);
	if (region_gpu_addr(src, dev, write ? e->lbase : e->rbase, &sbase) ||
	    region_gpu_addr(dst, dev, write ? e->rbase : e->lbase, &dbase))
		return 0;
	struct gpu_list *sg = dl_on_gpu(sl, dev), *dg = dl_on_gpu(dl, dev);
	const uint64_t *area = dl_area(pc, sqe, &err);
	if (!sg || !dg || !area)
		return area ? 0 : err;
	/* Every pair checked before anything is launched. */
	int slots[8];
	struct copy_pair *bufs[8];
	unsigned nslots = 0;
	uint64_t total = 0;
	for (uint64_t k = 0; k < sqe->len; k++) {
		if (k % COPY_PAIRS_MAX == 0) {
			if (nslots == 8 ||
			    !(bufs[nslots] = gpu_pairs_reserve(p->gpu, dev,
							       &slots[nslots]))) {
				err = 1;  /* no room: block by block */
				break;
			}
			nslots++;
		}
		struct xfer_dlist_pair pr = dl_pair(area, k);
		uint64_t len;
		if ((err = dl_check_pair(e, pr, &len)))
			break;
		total += len;
		bufs[nslots - 1][k % COPY_PAIRS_MAX] = write
			? (struct copy_pair){ pr.local, pr.remote }
			: (struct copy_pair){ pr.remote, pr.local };
	}
	if (err) {
		for (unsigned i = 0; i < nslots; i++)
			gpu_pairs_release(p->gpu, dev, slots[i]);
		return err > 0 ? 0 : err;
	}
	struct abatch *ab = batch_async(pc);
	struct xop *op = ab ? op_begin(p, pc, ab, sqe, e->local, e->remote)
			    : NULL;
	if (!op) {
		for (unsigned i = 0; i < nslots; i++)
			gpu_pairs_release(p->gpu, dev, slots[i]);
		return -ENOMEM;
	}
	op->opcode = write ? XFER_OP_WRITE : XFER_OP_READ;
	op->path = XFER_PATH_CUDA_IPC;
	op->len = total;
	dlist_get(e->l);
	dlist_get(e->r);
	op->gpu.lists[0] = e->l;
	op->gpu.lists[1] = e->r;
	for (unsigned i = 0; i < nslots; i++) {
		uint64_t first = (uint64_t)i * COPY_PAIRS_MAX;
		uint32_t n = (uint32_t)(sqe->len - first < COPY_PAIRS_MAX
					? sqe->len - first : COPY_PAIRS_MAX);
		if (gpu_copy_indexed(p->gpu, op, dev, slots[i], sbase, sg,
				     dbase, dg, sl->len, n))
			err = -EIO;
	}
	if (op->gpu.parts == 0) {
		op_abandon(p, op);  /* nothing went: it ends here */
		return -EIO;
	}
	if (err)
		op->gpu.error = (int)err;  /* the parts out end it, failed */
	*async = true;
	return (int64_t)total;
}

/*
 * A list's segments between a memfd region (mapped here) and an
 * xfer_reg'd one (another process's memory), CMA_IOV_MAX segments a
 * process_vm_writev/readv instead of one call each.  Returns the bytes
 * or -errno; false in *done when this is not such a pair (nothing done).
 */
static int64_t dl_copy_cma(struct progress *p, const struct dl_ends *e,
			   bool write, int64_t ns, uint64_t total, bool *done)
{
	bool local_mapped = region_kind(e->local) == REGION_MEMFD;
	const struct region *mapped = local_mapped ? e->local : e->remote;
	const struct region *other = local_mapped ? e->remote : e->local;
	struct cma_range v[CMA_IOV_MAX];

	*done = region_kind(mapped) == REGION_MEMFD &&
		region_kind(other) == REGION_CMA;
	if (!*done)
		return 0;
	/* Into the other process when the data flows local -> remote and
	 * it is the remote end, or remote -> local and it is the local. */
	bool to_other = write == local_mapped;
	for (int64_t k = 0; k < ns;) {
		uint32_t n = 0;
		for (; k < ns && n < CMA_IOV_MAX; k++, n++) {
			const struct dl_seg *sg = &p->exec.segs[k];
			v[n] = (struct cma_range){
				region_map_at(mapped, local_mapped ? sg->loff
								   : sg->roff),
				local_mapped ? sg->roff : sg->loff, sg->len };
		}
		int64_t rc = cma_copyv(other, to_other, v, n);
		if (rc < 0)
			return rc;
	}
	stat_add(&p->exec.paths.bytes[XFER_PATH_CMA], total);
	stat_add(&p->exec.paths.ops[XFER_PATH_CMA], 1);
	return (int64_t)total;
}

/*
 * A prepared-list descriptor: both lists resolved once, their targets
 * once, every pair checked before anything moves; then the segments go
 * the way one WRITE or READ between the same two regions would, as one
 * batch (one CQE, the notification after the last byte).
 */
static int64_t exec_dlist(struct progress *p, struct prog_client *pc,
			  const struct xfer_sqe *sqe, uint16_t *path,
			  struct region **target, bool *async)
{
	struct dl_ends e = { 0 };
	int64_t rc = 0;

	if (sqe->remote_off)
		return -EINVAL;
	e.l = dltab_get(p->dlists, pc->id, sqe->local);
	e.r = dltab_get(p->dlists, pc->id, sqe->remote);
	if (!e.l || !e.r) {
		rc = -EACCES;  /* not a list of this client (any more) */
		goto out;
	}
	if (e.l->is_import) {
		rc = -EINVAL;  /* the local list must be of its own memory */
		goto out;
	}
	if ((rc = regtab_resolve_memo(p->regs, &p->exec.memo, pc->id,
				      e.l->target, 0, e.l->end, false,
				      &e.local, &e.lbase)) ||
	    (rc = regtab_resolve_memo(p->regs, &p->exec.memo, pc->id,
				      e.r->target, 0, e.r->end, true,
				      &e.remote, &e.rbase)))
		goto out;
	*target = e.remote;  /* the region notified, as for one WRITE */
	if (sqe->len == 0)
		goto out;

	/* One WRITE or READ stands for every segment. */
	struct xfer_sqe one = *sqe;
	one.opcode = sqe->opcode == XFER_OP_WRITE_DLIST ? XFER_OP_WRITE
							: XFER_OP_READ;
	one.len = 1;
	struct path_facts f = facts_of(p, &one, e.local, e.remote);
	enum path_route route = path_choose(&f);
	if (route == ROUTE_GPU) {
		rc = dl_gpu_indexed(p, pc, sqe, &e, async);
		if (rc) {
			*path = XFER_PATH_CUDA_IPC;
			rc = rc > 0 ? 0 : rc;  /* the bytes count when it ends */
			goto out;
		}
	}
	uint64_t total;
	int64_t ns = dl_segments(p, pc, sqe, &e, &total);
	if (ns < 0) {
		rc = ns;
		goto out;
	}
	int64_t moved = 0;
	if (route == ROUTE_MEMCPY && e.local != e.remote) {
		/* Both mapped here: nothing per segment but the copy (a 4 KiB
		 * block's copy takes ~100 ns; counting each would show). */
		bool write = one.opcode == XFER_OP_WRITE;
		for (int64_t k = 0; k < ns; k++) {
			const struct dl_seg *s = &p->exec.segs[k];
			void *l = region_map_at(e.local, s->loff);
			void *r = region_map_at(e.remote, s->roff);
			memcpy(write ? r : l, write ? l : r, s->len);
		}
		*path = XFER_PATH_MEMCPY;
		stat_add(&p->exec.paths.bytes[*path], total);
		stat_add(&p->exec.paths.ops[*path], 1);
		rc = (int64_t)total;
		goto out;
	}
	if (route == ROUTE_CMA) {
		bool done;
		rc = dl_copy_cma(p, &e, one.opcode == XFER_OP_WRITE, ns, total,
				 &done);
		if (done) {
			*path = XFER_PATH_CMA;
			goto out;
		}
	}
	for (int64_t k = 0; k < ns; k++) {
		const struct dl_seg *s = &p->exec.segs[k];
		one.len = s->len;
		/* The notification (if any) rides on the last segment. */
		one.flags = k + 1 < ns ? 0 : sqe->flags & XFER_SQE_F_NOTIFY;
		rc = move_range(p, pc, &one, route, e.local, s->loff, e.remote,
				s->roff, path, target, async);
		if (rc < 0)
			goto out;
		moved += rc;
	}
	rc = moved;
out:
	dlist_put(e.l);
	dlist_put(e.r);
	return rc;
}

static int64_t exec_notify_only(struct progress *p, struct prog_client *pc,
				const struct xfer_sqe *sqe,
				struct region **target, bool *async)
{
	uint64_t off;
	int64_t rc = regtab_resolve_memo(p->regs, &p->exec.memo, pc->id,
					 sqe->remote, 0, 0, true, target, &off);

	if (rc || region_kind(*target) != REGION_REMOTE)
		return rc;
	struct path_facts f = facts_of(p, sqe, NULL, *target);
	enum path_route route = path_choose(&f);
	struct region *remote = *target;
	*target = NULL;
	if (route == ROUTE_UNREACHABLE)
		return -EHOSTUNREACH;
	return go_remote(p, pc, sqe, transport_for(p, route), NULL, 0, remote,
			 0, async);
}

static int64_t sqe_check(const struct xfer_sqe *sqe)
{
	if (sqe->opcode >= XFER_OP__COUNT || (sqe->flags & ~XFER_SQE_F__ALL) ||
	    sqe->reserved0)
		return -EINVAL;
	if (sqe->opcode == XFER_OP_NOTIFY && (sqe->flags & XFER_SQE_F_NOTIFY))
		return -EINVAL;   /* NOTIFY already is the notification */
	return 0;
}

/* The batch's last SQE was seen and part of it is out on links. */
static void close_async(struct progress *p, struct prog_client *pc,
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
		region_get(target);
		ab->notify_target = target;
		ab->notify_value = sqe->notify_value;
	}
	if (ab->pending == 0)
		batch_complete(p, ab);
}

void exec_sqe(struct progress *p, struct prog_client *pc,
	      const struct xfer_sqe *sqe)
{
	struct region *target = NULL;  /* lent by p->exec.memo */
	uint16_t path = XFER_PATH_NONE;
	bool async = false;
	int64_t rc = sqe_check(sqe);

	regtab_memo_sync(p->regs, &p->exec.memo);
	if (!pc->batch.open) {
		pc->batch.error = 0, pc->batch.bytes = 0,
		pc->batch.path = XFER_PATH_NONE;
		pc->batch.start_ns = p->exec.pass.start_ns;
	}
	/* After a failure the rest of a batch moves nothing. */
	if (!rc && !pc->batch.error) {
		switch (sqe->opcode) {
		case XFER_OP_NOP:
			break;
		case XFER_OP_WRITE:
		case XFER_OP_READ:
			rc = exec_copy(p, pc, sqe, &path, &target, &async);
			break;
		case XFER_OP_NOTIFY:
			rc = exec_notify_only(p, pc, sqe, &target, &async);
			break;
		case XFER_OP_WRITE_DLIST:
		case XFER_OP_READ_DLIST:
			rc = exec_dlist(p, pc, sqe, &path, &target, &async);
			break;
		}
	}
	if (rc < 0 && !pc->batch.error)
		pc->batch.error = rc;
	else if (rc > 0)
		pc->batch.bytes += (uint64_t)rc;
	if (path != XFER_PATH_NONE)
		pc->batch.path = path;

	pc->batch.open = (sqe->flags & XFER_SQE_F_LINK) != 0;
	if (pc->batch.open)
		return;
	if (pc->batch.ab) {
		close_async(p, pc, sqe, target);
		return;
	}
	int64_t result = pc->batch.error ? pc->batch.error
					 : (int64_t)pc->batch.bytes;
	struct prog_client *owner = NULL;
	if (!pc->batch.error && target &&
	    notify_choose(sqe, false, false) == NOTIFY_NOW &&
	    (owner = notify_owner(p, target))) {
		/* A client notifying itself: its own CQE comes first. */
		int err = notify_admit(p, owner, owner == pc);
		if (err) {
			result = err;  /* the data landed, the notification not */
			owner = NULL;
		}
	}
	/* Own completion first: drain() reserved its slot, and a client
	 * notifying itself must not take that slot. */
	write_cqe(pc, &(struct xfer_cqe){
		.user_data = sqe->user_data,
		.result = result,
		.path = pc->batch.path,
	});
	if (owner) {
		const struct xfer_cqe_sender from = sender_of(p, pc);
		notify_deliver(owner, target, sqe->notify_value,
			       (int64_t)pc->batch.bytes, &from);
	}
	count_completion(p, pc, result);
	completion_pass_add(&p->exec.pass, &p->exec.paths.done, pc->batch.path,
			    result, pc->batch.start_ns);
}

/* A batch of a departed client whose GPU copies are still out: freed
 * now, without a completion (nobody reads its ring any more).  The
 * batch still open is dropped by exec_cancel_client itself. */
static void forget_batch(void *arg, struct abatch *ab)
{
	struct prog_client *pc = arg;

	if (ab == pc->batch.ab)
		return;
	region_put(ab->notify_target);
	free(ab);
}

void exec_cancel_client(struct progress *p, struct prog_client *pc)
{
	/* Its notifications waiting to go out go to the link, which ends
	 * them with the rest. */
	exec_run_deferred(p);
	for (int i = 0; i < p->nmovers; i++)
		p->movers[i].ops->cancel_client(p->movers[i].impl, pc);
	lstage_cancel_client(p, pc);
	cma_split_cancel_client(p, pc);
	/* Its GPU copies run on (their regions are held) but end into
	 * nothing: the ring and pc are freed once the main thread hears
	 * that the client was detached. */
	gpu_copies_forget_client(p->gpu, pc, forget_batch, pc);
	/* A batch left open (its last SQE never came) ends with nothing
	 * out any more: drop it without a completion. */
	struct abatch *ab = pc->batch.ab;
	pc->batch.gpu_op = NULL;
	if (ab) {
		pc->batch.ab = NULL;
		pc->cq_reserved--;
		region_put(ab->notify_target);
		free(ab);
	}
}
