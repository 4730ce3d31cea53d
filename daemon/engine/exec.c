/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec.c - executing descriptors: each one's route, and the mover that
 * route indexes.
 *
 * For a WRITE or READ the executor resolves both regions, gathers the
 * facts of the descriptor and asks path_choose() (core/path.h) for a
 * route; p->routes[route] is the mover (core/mover.h) that moves it.
 * A same-node mover (daemon/local/) moves it in move_now(): at once,
 * or as an op that ends later through exec_op_done; a transport's
 * move_now() says MOVER_SUBMIT and the executor makes the op and
 * submit()s it (go_remote).  The executor keeps no mover's state: it
 * routes, and completion.c tracks batches, completions and
 * notifications; prepared lists are exec_dlist.c's.  A linked WRITE/READ
 * that went to the memcpy route arms a run (exec_run.h): drain() moves
 * the next SQEs naming the same two handles without coming here.
 *
 * Runs in the progress thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "core/path.h"
#include "engine/exec_int.h"
#include "engine/exec_run.h"
#include "mem/region.h"

/* Could RDMA move this descriptor now: zero-copy (ROUTE_RDMA: both ends
 * registered, a rail pair to the owner) or through its staging buffers
 * (ROUTE_RDMA_STAGED)?  Asked before anything of it is set up. */
static bool rdma_can_move(struct progress *p, enum path_route how,
			  const struct xfer_sqe *sqe, struct region *local,
			  struct region *remote)
{
	const struct mover *t = &p->routes[how];
	if (!t->ops || !local)
		return false;
	const struct xop probe = { .opcode = sqe->opcode, .local = local,
				   .remote = remote, .len = sqe->len };
	return t->ops->accepts(t->impl, &probe);
}

/*
 * Send a WRITE, READ or NOTIFY to another xferd.  The notification of
 * the batch's last entry rides on its frame when nothing else of the
 * batch is still out (the peer notifies after the data landed); else it
 * waits for the whole batch (batch_complete).
 */
/*
 * op's class and tenant: the SQE's class bits, else its context's
 * default.  The latency class is bounded: a descriptor whose bytes, with
 * those of its batch's latency entries before it, or with those of its
 * client's latency operations still out, pass latency_max_bytes goes as
 * bulk (marking everything latency gains nothing, in one batch or
 * across many); its bytes count against its tenant's share either way.
 */
void exec_op_set_class(struct progress *p, struct prog_client *pc,
		       const struct xfer_sqe *sqe, struct xop *op, uint64_t len)
{
	unsigned cls = (sqe->flags & XFER_SQE_F_CLASS_MASK) >>
		       XFER_SQE_CLASS_SHIFT;

	if (cls == XFER_CLASS_DEFAULT)
		cls = pc->cls;
	if (cls == XFER_CLASS_LATENCY) {
		pc->batch.latency_bytes += len;
		if (pc->batch.latency_bytes > p->exec.latency_max_bytes ||
		    pc->latency_inflight + len > p->exec.latency_max_bytes) {
			cls = XFER_CLASS_BULK;
			stat_add(&p->exec.classes.demoted, 1);
		} else if (!op->latency_charged) {
			/* Given back when the op is freed (exec_xop_put). */
			op->latency_charged = len;
			pc->latency_inflight += len;
		}
	}
	op->cls = (uint8_t)cls;
	op->tenant = pc->tenant < TENANT_MAX ? pc->tenant : 0;
}

/*
 * Bursts of a frame and 20 ms of the rate, so that a paced tenant still
 * sends whole frames.  A bucket whose rate and burst stay the same
 * keeps its tokens over a reload (rate_cap_set).
 */
void exec_caps_set(struct progress *p, const struct tenant_table *tt,
		   uint32_t frame)
{
	uint64_t now = now_ns();

	for (uint32_t i = 0; i < TENANT_MAX; i++) {
		uint64_t rate = i < tt->n ? tt->t[i].rate : 0;
		rate_cap_set(&p->exec.caps[i], rate, frame + rate / 50, now);
	}
}

static void exec_op_classify(struct progress *p, struct prog_client *pc,
			     const struct xfer_sqe *sqe, struct xop *op)
{
	exec_op_set_class(p, pc, sqe, op, op->len);
	op->start_ns = now_ns();
	op->class_counted = true;
	struct class_counters *cc[2] = { &p->exec.classes.cls[op->cls],
					 &p->exec.classes.tenant[op->tenant] };
	for (int i = 0; i < 2; i++) {
		stat_add(&cc[i]->queued_ops, 1);
		stat_add(&cc[i]->queued_bytes, op->len);
	}
}

static int64_t go_remote(struct progress *p, struct prog_client *pc,
			 const struct xfer_sqe *sqe, const struct mover *via,
			 struct region *local, uint64_t loff,
			 struct region *remote, uint64_t roff, bool *async)
{
	struct abatch *ab = exec_batch_async(pc);
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
	case NOTIFY_AFTER_BATCH: {
		int err;
		struct notify_msg *msg = exec_msg_dup(p, &err);
		if (err)
			return err;
		region_get(remote);
		ab->notify_target = remote;
		ab->notify_value = sqe->notify_value;
		ab->notify_msg = msg;
		if (sqe->opcode == XFER_OP_NOTIFY)
			return 0;
		break;
	}
	}
	/* A NOTIFY carries its message on its own frame, like a write's
	 * notification on the write's last one. */
	int err = 0;
	struct notify_msg *msg = wants_notify || sqe->opcode == XFER_OP_NOTIFY
					 ? exec_msg_dup(p, &err) : NULL;
	if (err)
		return err;
	struct xop *op = exec_op_begin(p, pc, ab, sqe->opcode, local, remote);
	if (!op) {
		free(msg);
		return -ENOMEM;
	}
	op->notify_msg = msg;
	op->local_off = loff;
	op->remote_off = roff;
	op->len = sqe->opcode == XFER_OP_NOTIFY ? 0 : sqe->len;
	op->notify = wants_notify;
	op->notify_value = sqe->notify_value;
	op->deadline_ns = now_ns() + 1000000ull * timeout;
	exec_op_classify(p, pc, sqe, op);
	*async = true;
	via->ops->submit(via->impl, op);
	return 0;
}

/* --- executing one descriptor --- */

/* The facts of another xferd's region: what RDMA can do for it now. */
static __attribute__((noinline)) void remote_facts(struct progress *p,
						   const struct xfer_sqe *sqe,
						   struct region *local,
						   struct region *target,
						   struct path_facts *f)
{
	f->owner_mem = (enum region_kind)region_token(target)->mem_kind;
	const struct region_rdma *rr = region_rdma(target);
	/* rkeys of the owner's GPU memory exist only as a dma-buf grant
	 * (landing chunks lent for it are no rkeys of it) */
	f->owner_dmabuf = f->owner_mem == REGION_CUDA && rr && rr->nkeys;
	f->rdma = rdma_can_move(p, ROUTE_RDMA, sqe, local, target);
	f->rdma_staged = !f->rdma && rdma_can_move(p, ROUTE_RDMA_STAGED, sqe,
						   local, target);
	f->rdma_owner_staged = !f->rdma && !f->rdma_staged && rr &&
			       rr->landing_chunk &&
			       rdma_can_move(p, ROUTE_RDMA_OWNER_STAGED, sqe,
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
		.gpus = p->res.gpu != NULL,
		.links = p->nmovers > 0,
	};
	if (region_kind(target) == REGION_REMOTE)
		remote_facts(p, sqe, local, target, &f);
	return f;
}

struct path_facts exec_facts(struct progress *p, const struct xfer_sqe *sqe,
			     struct region *local, struct region *target)
{
	return facts_of(p, sqe, local, target);
}

/*
 * Move sqe's bytes (a WRITE or READ of sqe->len) between local at loff
 * and remote at roff, resolved already, on route: here and now (returns
 * the bytes), or out (*async).  *target: the region to notify.
 * Inline: for two memfd regions this and the memcpy are the whole
 * descriptor.
 */
static inline __attribute__((always_inline)) int64_t
move_range(struct progress *p, struct prog_client *pc,
	   const struct xfer_sqe *sqe, enum path_route route,
	   struct region *local, uint64_t loff, struct region *remote,
	   uint64_t roff, uint16_t *path, struct region **target, bool *async)
{
	if (route >= ROUTE_NOTSUP)
		return route == ROUTE_NOTSUP ? -ENOTSUP : -EHOSTUNREACH;
	const struct mover *m = &p->routes[route];
	/* A same-node mover notifies after its bytes: the caller tells
	 * the target's owner (a transport's peer does that itself). */
	if (!m->ops) {
		*target = remote;  /* no such mover here (no staging) */
		return -ENOTSUP;
	}
	struct move_req rq = {
		.opcode = sqe->opcode,
		.local = local,
		.remote = remote,
		.loff = loff,
		.roff = roff,
		.len = sqe->len,
		.batch_op = &pc->batch.gpu_op,
	};
	int64_t rc = m->ops->move_now(m->impl, &rq);
	if (rc == MOVER_SUBMIT)
		return go_remote(p, pc, sqe, m, local, loff, remote, roff,
				 async);
	*target = remote;
	if (rq.async) {
		*async = true;
		return rc;
	}
	if (rq.path != XFER_PATH_NONE)
		*path = rq.path;
	if (rc > 0) {
		stat_add(&p->exec.paths.bytes[rq.path], (uint64_t)rc);
		stat_add(&p->exec.paths.ops[rq.path], 1);
	}
	return rc;
}

int64_t exec_move_range(struct progress *p, struct prog_client *pc,
			const struct xfer_sqe *sqe, enum path_route route,
			struct region *local, uint64_t loff,
			struct region *remote, uint64_t roff, uint16_t *path,
			struct region **target, bool *async)
{
	return move_range(p, pc, sqe, route, local, loff, remote, roff, path,
			  target, async);
}

/* The memo's slot that resolved handle of client (as
 * regtab_resolve_memo matched it), or -1. */
static int memo_slot_of(const struct regtab_memo *m, uint64_t client,
			uint64_t handle, bool allow_import)
{
	for (int i = 0; i < REGTAB_MEMO_SLOTS; i++)
		if (m->slot[i].region && m->slot[i].handle == handle &&
		    m->slot[i].client == client &&
		    (allow_import || !m->slot[i].is_import))
			return i;
	return -1;
}

void exec_run_arm(struct progress *p, struct prog_client *pc,
		  const struct xfer_sqe *sqe, const struct region *local,
		  const struct region *remote)
{
	const struct regtab_memo *m = &p->exec.memo;
	struct exec_run *r = &p->exec.run;

	/* Only what the run's step would take again: a linked, plain
	 * descriptor of a batch that has not failed and waits for no op;
	 * two regions (one region at both ends is memmove's). */
	if (sqe->flags != XFER_SQE_F_LINK || sqe->msg_len || local == remote ||
	    pc->batch.error || pc->batch.ab ||
	    (sqe->opcode != XFER_OP_WRITE && sqe->opcode != XFER_OP_READ))
		return;
	int ls = memo_slot_of(m, pc->id, sqe->local, false);
	int rs = memo_slot_of(m, pc->id, sqe->remote, true);
	if (ls < 0 || rs < 0 || m->slot[ls].region != local ||
	    m->slot[rs].region != remote)
		return;
	r->pc = pc;
	r->gen = m->gen;
	r->opcode = sqe->opcode;
	r->local = sqe->local;
	r->remote = sqe->remote;
	r->llimit = m->slot[ls].limit;
	r->rlimit = m->slot[rs].limit;
	r->lmap = region_map_at(local, m->slot[ls].base);
	r->rmap = region_map_at(remote, m->slot[rs].base);
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
	enum path_route route = path_choose(&f);
	rc = move_range(p, pc, sqe, route, local, loff, remote, roff, path,
			target, async);
	if (route == ROUTE_MEMCPY && rc >= 0 && !*async)
		exec_run_arm(p, pc, sqe, local, remote);
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
	return go_remote(p, pc, sqe, &p->routes[route], NULL, 0, remote, 0,
			 async);
}

static int64_t sqe_check(const struct xfer_sqe *sqe)
{
	if (sqe->opcode >= XFER_OP__COUNT || (sqe->flags & ~XFER_SQE_F__ALL) ||
	    ((sqe->flags & XFER_SQE_F_CLASS_MASK) >> XFER_SQE_CLASS_SHIFT) >=
		    XFER_CLASS__COUNT)
		return -EINVAL;
	if (sqe->opcode == XFER_OP_NOTIFY && (sqe->flags & XFER_SQE_F_NOTIFY))
		return -EINVAL;   /* NOTIFY already is the notification */
	/* A message only with a notification. */
	if (sqe->msg_len && sqe->opcode != XFER_OP_NOTIFY &&
	    !(sqe->flags & XFER_SQE_F_NOTIFY))
		return -EINVAL;
	return 0;
}

/*
 * The notification's message and sender name of the descriptor in SQ
 * slot index, into p->exec.msg: the message is copied out of the
 * client's ring once, its length (from our copy of the SQE) bounded by
 * the slot first; the name is the one the client gave at its hello,
 * checked then.  -EINVAL for a message where the ring has no message
 * area (a client that did not ask for them), -EMSGSIZE past the bound.
 */
static int64_t take_msg(struct progress *p, const struct prog_client *pc,
			const struct xfer_sqe *sqe)
{
	p->exec.msg_set = false;
	if (sqe->opcode != XFER_OP_NOTIFY && !(sqe->flags & XFER_SQE_F_NOTIFY))
		return 0;
	if (sqe->msg_len) {
		const uint8_t *slot = ring_sq_msg_at(&pc->ring, p->exec.sqe_index);
		if (!slot)
			return -EINVAL;
		if (sqe->msg_len > pc->ring.sq_msg_size ||
		    sqe->msg_len > XFER_NOTIFY_MSG_MAX)
			return -EMSGSIZE;
		memcpy(p->exec.msg.data, slot, sqe->msg_len);
	} else if (!pc->name_len) {
		return 0;  /* neither: nothing to carry */
	}
	p->exec.msg.len = sqe->msg_len;
	p->exec.msg.name_len = pc->name_len;
	memcpy(p->exec.msg.name, pc->name, pc->name_len);
	p->exec.msg_set = true;
	return 0;
}

void exec_sqe(struct progress *p, struct prog_client *pc,
	      const struct xfer_sqe *sqe)
{
	struct region *target = NULL;  /* lent by p->exec.memo */
	uint16_t path = XFER_PATH_NONE;
	bool async = false;
	int64_t rc = sqe_check(sqe);

	exec_run_end(p);  /* this descriptor may arm the next */
	if (!rc)
		rc = take_msg(p, pc, sqe);
	else
		p->exec.msg_set = false;

	regtab_memo_sync(p->regs, &p->exec.memo);
	p->exec.running = pc;
	p->exec.running_sqe = sqe;
	if (!pc->batch.open) {
		pc->batch.error = 0, pc->batch.bytes = 0,
		pc->batch.path = XFER_PATH_NONE;
		pc->batch.start_ns = p->exec.pass.start_ns;
		pc->batch.latency_bytes = 0;
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
		exec_close_async(p, pc, sqe, target);
		return;
	}
	int64_t result = pc->batch.error ? pc->batch.error
					 : (int64_t)pc->batch.bytes;
	struct prog_client *owner = NULL;
	if (!pc->batch.error && target &&
	    notify_choose(sqe, false, false) == NOTIFY_NOW &&
	    (owner = exec_notify_owner_of(p, target))) {
		/* A client notifying itself: its own CQE comes first. */
		int err = exec_notify_admit(p, owner, owner == pc);
		if (err) {
			result = err;  /* the data landed, the notification not */
			owner = NULL;
		}
	}
	/* Own completion first: drain() reserved its slot, and a client
	 * notifying itself must not take that slot. */
	exec_write_cqe(pc, &(struct xfer_cqe){
		.user_data = sqe->user_data,
		.result = result,
		.path = pc->batch.path,
	});
	if (owner) {
		const struct xfer_cqe_sender from = exec_sender_of(p, pc);
		exec_notify_deliver(owner, target, sqe->notify_value,
			       (int64_t)pc->batch.bytes, &from, exec_msg(p));
	}
	exec_count_completion(p, pc, result);
	completion_pass_add(&p->exec.pass, &p->exec.paths.done, pc->batch.path,
			    result, pc->batch.start_ns);
}
