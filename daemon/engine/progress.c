/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.c - the progress thread's loop: taking each client's SQEs
 * (drain), letting the movers run (poll), sleeping until a doorbell, a
 * link or a timer rings and waking, and the settings and gauges the
 * main thread writes and reads while it runs.  Its making, its movers'
 * set-up and its end are progress_life.c's; its queues to and from the
 * main thread progress_cmd.c's; what it does with each descriptor is
 * the executor's (exec.c); every way of moving bytes, on this node or to
 * another, it drives through the movers' ops table (core/mover.h); the
 * links to other xferds are in transport/link.c.
 *
 * Lock order: p->lock (command and notice queues) is never held while
 * the region table's lock is taken, nor the other way round.
 *
 * Sleeping: the thread's event base watches its command doorbell (an
 * eventfd only the main thread writes) and every client's SQ doorbell,
 * edge-triggered, never read (progress.h); no client holds a file
 * description the thread reads or writes.
 *
 * The progress thread only, but for the settings and gauges (relaxed
 * atomics, any thread) and progress_start (the main thread).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core/xop.h"
#include "engine/exec_run.h"
#include "engine/progress_int.h"
#include "gpu/gpu.h"
#include "mem/copy_workers.h"
#include "transport/link.h"
#ifdef XFERD_STAGE_STAMPS
#include <x86intrin.h>
#endif

/* SQEs taken from one client before looking at the next (fairness);
 * as large as a typical KV-cache vector, so that one pass sees all of it
 * and its GPU copies go out as one launch. */
#define DRAIN_BUDGET 1024u
/*
 * The completion of a copy at least this large is published at once, not
 * with the rest of the drain: the client refills its window while the
 * next copies run, instead of both sides waiting for a wake-up between
 * rounds (one across vCPUs can take milliseconds).  Smaller copies keep
 * one publication, and its fence, per drain.
 */
#define PUBLISH_EARLY_BYTES (256u << 10)
/* While busy with rings, look at the links at least this often. */
#define NET_POLL_NS 2000u
/*
 * While idle with links up but no operation of ours out on them, this
 * often: the event loop's turn (epoll_wait) costs a few hundred ns, and
 * run at every idle pass it made an SQE wait that long for the thread to
 * come round (a same-node 8 B round trip on a node with a link: 0.30 µs,
 * not 0.16).  A peer's request waits up to this much more instead; the
 * answer to an operation of ours is looked for at every pass.
 */
#define NET_IDLE_POLL_NS 500u
/* Deadlines of operations on links are checked this often. */
#define EXPIRE_NS (20u * 1000000u)


struct prog_client *progress_find_client(struct progress *p, uint64_t id)
{
	for (size_t i = 0; i < p->nclients; i++)
		if (p->clients[i]->id == id)
			return p->clients[i];
	return NULL;
}

/* Below max_inflight: may take more of its SQEs. */
static bool client_may_start(struct progress *p,
			     const struct prog_client *pc)
{
	return pc->ops_out <
	       atomic_load_explicit(&p->max_inflight, memory_order_relaxed);
}

/*
 * SQEs the client published past our head, untrusted (may exceed
 * sq_entries): by the stamp of the slot at our head (F) where it
 * negotiated phase, so the poll of an idle ring reads the slot it then
 * copies and not the line of sq_tail too; else by sq_tail (A).  Every
 * look at a client's SQ (drain, work, sleep) goes through here, so a
 * client whose sq_tail and stamps disagree is seen one way only and
 * cannot keep this thread spinning.  A client's stamp precedes its
 * fence of (E) as its tail does, so the sleeper's look by stamp loses
 * no wake-up.
 */
static uint32_t sq_avail(struct prog_client *pc)
{
	if (pc->ring.phase)
		return ring_sq_phase_avail(&pc->ring, pc->sq_head,
					   &pc->sq_known, &pc->sq_by_tail);
	return ring_sq_avail(&pc->ring, pc->sq_head);
}

/*
 * Run what one client submitted, up to DRAIN_BUDGET; true if anything
 * was done.  sq_avail() is asked again after each count it gave: with
 * phase a count covers one submit (a lone entry, or a run), and a client
 * that submits one entry at a time (a window of writes refilled as each
 * completes) has several such submits waiting.  Taking one a pass left
 * the rest in the ring for as long as a pass runs (a link's fill, say),
 * so such a client had one operation out instead of its window.
 */
static bool drain(struct progress *p, struct prog_client *pc)
{
	if (pc->broken)
		return false;
	/*
	 * Every SQE may end a batch and need a CQE: take only as many as
	 * the CQ has room for, so completions are never dropped.  Counting
	 * by cq_tail also covers notifications a client sends to its own
	 * regions, and by cq_reserved the batches that went out on links.
	 */
	/* (cq_reserved can also drop during the loop, when an async
	 * batch completes into its reserved slot: both differences are
	 * taken modulo 2^32, so that completion counts once.) */
	uint32_t room = 0, tail0 = pc->cq_tail, res0 = pc->cq_reserved;
	uint32_t taken = 0;
	bool looked = false, blocked = false;

	while (!blocked && !pc->broken && taken < DRAIN_BUDGET) {
		uint32_t avail = sq_avail(pc), i;
		if (avail == 0)
			break;
		/* The slots taken so far go back to the client only at the
		 * end (ring_sq_release): an honest client has published at
		 * most the rest of the ring past them. */
		if (avail > pc->ring.sq_entries - taken) {
			progress_mark_broken(p, pc, "SQ tail beyond the ring");
			break;
		}
		if (!looked)  /* an idle client's CQ is not looked at */
			room = exec_cq_room(pc);
		looked = true;
		uint32_t n = avail < DRAIN_BUDGET - taken ? avail
							  : DRAIN_BUDGET - taken;
		for (i = 0; i < n; i++) {
			if ((pc->cq_tail - tail0) + (pc->cq_reserved - res0) >=
				    room ||
			    !client_may_start(p, pc)) {
				blocked = true;
				break;
			}
			struct xfer_sqe sqe;
#ifdef XFERD_STAGE_STAMPS
			pc->stage_taken = (uint32_t)__rdtsc();
#endif
			/* With phase, without the phase bits; a client
			 * without phase that sets them is refused (exec.c). */
			ring_sqe_copy(&pc->ring, pc->sq_head + i, &sqe);
			p->exec.sqe_index = pc->sq_head + i;  /* its message */
			if (!exec_run_step(p, pc, &sqe))
				exec_sqe(p, pc, &sqe);
			if (sqe.len >= PUBLISH_EARLY_BYTES)
				exec_publish(pc);
		}
		pc->sq_head += i;
		taken += i;
	}
	if (!looked)
		return false;
	exec_run_end(p);  /* the memo is another client's next */
	ring_sq_release(&pc->ring, pc->sq_head);
	/* The GPU copies queued so far are launched after this pass and may
	 * end before the batch's next entries arrive: those get a new op. */
	pc->batch.gpu_op = NULL;
	exec_publish(pc);
	return taken > 0;
}

/* --- operations out on links: the deadline timer runs while any is --- */

void progress_op_started(struct progress *p)
{
	if (p->async_ops++ == 0 && p->ev_expire) {
		struct timeval tv = us_to_timeval(EXPIRE_NS / 1000);
		event_add(p->ev_expire, &tv);
	}
	/* Relaxed: a gauge for xferctl, ordered with nothing. */
	atomic_store_explicit(&p->ops_in_flight, p->async_ops,
			      memory_order_relaxed);
}

void progress_op_ended(struct progress *p)
{
	if (--p->async_ops == 0 && p->ev_expire)
		event_del(p->ev_expire);
	atomic_store_explicit(&p->ops_in_flight, p->async_ops,
			      memory_order_relaxed);
}

uint64_t progress_ops_in_flight(const struct progress *p)
{
	return atomic_load_explicit(&p->ops_in_flight, memory_order_relaxed);
}

/* --- sleeping --- */

/* SQEs waiting, CQ room to complete them and room under max_inflight,
 * or notifications held for it and CQ room to post them: work we can do
 * now.  (At max_inflight an ending operation wakes the thread, as at a
 * full CQ the client's doorbell does.) */
static bool client_has_work(struct progress *p, struct prog_client *pc)
{
	if (pc->broken)
		return false;
	if (nq_len(&pc->notify) && exec_cq_room(pc))
		return true;
	return sq_avail(pc) && exec_cq_room(pc) &&
	       client_may_start(p, pc);
}

static bool any_work(struct progress *p)
{
	if (atomic_load_explicit(&p->cmds_pending, memory_order_relaxed) ||
	    (p->res.gpu && gpu_copies_busy(p->res.gpu)))
		return true;
	for (size_t i = 0; i < p->nclients; i++)
		if (client_has_work(p, p->clients[i]))
			return true;
	return false;
}

/*
 * Before sleeping: every client must ring when it submits, and a client
 * whose SQEs or held notifications wait for CQ room must ring when it
 * consumes CQEs (XFER_SQ_CQ_WAIT), or a full CQ would keep this thread
 * spinning, or the notifications held until the client submits again.
 */
static void set_wakeup(struct progress *p, bool on)
{
	const uint32_t flags = XFER_SQ_NEED_WAKEUP | XFER_SQ_CQ_WAIT;

	for (size_t i = 0; i < p->nclients; i++) {
		struct prog_client *pc = p->clients[i];
		if (!on) {
			ring_flag_clear(pc->ring.sq_flags, flags);
			continue;
		}
		bool stalled = !pc->broken &&
			       (nq_len(&pc->notify) ||
				sq_avail(pc)) &&
			       !exec_cq_room(pc);
		ring_flag_set(pc->ring.sq_flags,
			      stalled ? flags : XFER_SQ_NEED_WAKEUP);
	}
}
/* Every transport armed its completion events, and none saw work come
 * in meanwhile. */
static bool arm_transports(struct progress *p)
{
	for (int i = 0; i < p->nmovers; i++)
		if (!p->movers[i].ops->arm(p->movers[i].impl))
			return false;
	return true;
}

/* Sleep until a doorbell, a link or a timer has something. */
static void sleep_until_rung(struct progress *p)
{
	/* An idle xferd keeps no region alive, mapped or not. */
	regtab_memo_release(&p->exec.memo);
	/* (E) in ring.h: flags first, then one more look at every tail. */
	set_wakeup(p, true);
	/* Work requests out: their completions ring the CQ's channel. */
	if (!any_work(p) && arm_transports(p)) {
		if (p->links)
			linkset_turn_begin(p->links);
		event_base_loop(p->base, EVLOOP_ONCE);
	}
	set_wakeup(p, false);
}

/*
 * Let the same-node movers run (the GPU mover launches the copies this
 * pass queued and ends those done); true while they have work out, so
 * the thread keeps polling rather than sleeping.  Only those with a
 * poll of their own are in p->local_polled: memcpy and CMA cost the
 * loop nothing.
 */
static bool poll_local(struct progress *p)
{
	bool busy = false;

	for (int i = 0; i < p->nlocal_polled; i++)
		busy |= p->local_polled[i].ops->poll(p->local_polled[i].impl);
	return busy;
}

static bool transports_need_loop(const struct progress *p)
{
	for (int i = 0; i < p->nmovers; i++)
		if (p->movers[i].ops->needs_loop(p->movers[i].impl))
			return true;
	return false;
}

/* Let the transports run; true if they did anything. */
static bool poll_net(struct progress *p, bool busy)
{
	bool any = false;

	/* Nothing out and no link: nothing to poll (a node that only
	 * copies locally pays nothing here). */
	if (!p->async_ops && !transports_need_loop(p))
		return false;
	/* Links, and operations waiting for one (their deadlines, the
	 * reaping of failed links) need the event loop to run. */
	uint64_t now = now_ns();
	uint64_t every = busy ? NET_POLL_NS
			      : p->async_ops ? 0 : NET_IDLE_POLL_NS;
	if (now - p->last_net_poll_ns >= every) {
		p->last_net_poll_ns = now;
		if (p->links)
			linkset_turn_begin(p->links);
		event_base_loop(p->base, EVLOOP_NONBLOCK);
	}
	for (int i = 0; i < p->nmovers; i++)
		any |= p->movers[i].ops->poll(p->movers[i].impl);
	return any;
}

static void *progress_main(void *arg)
{
	struct progress *p = arg;
	uint64_t idle_since = p->exec.pass.start_ns = now_ns();

	if (p->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(p->cpu, &set);
		if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
			log_warnx("progress: cannot pin to CPU %d", p->cpu);
	}
	for (;;) {
		if (atomic_load_explicit(&p->cmds_pending, memory_order_relaxed) &&
		    !progress_apply_cmds(p))
			break;
		bool busy = false;
		for (size_t i = 0; i < p->nclients; i++) {
			struct prog_client *pc = p->clients[i];
			/* Held notifications first: they are older than
			 * anything its SQEs would complete now. */
			if (nq_len(&pc->notify))
				busy |= exec_notify_flush(p, pc);
			busy |= drain(p, pc);
		}
		if (!TAILQ_EMPTY(&p->exec.deferred)) {
			exec_run_deferred(p);
			busy = true;
		}
		busy |= poll_net(p, busy);
		busy |= poll_local(p);
		/* CMA copies on the workers: keep polling while any is out. */
		copy_workers_poll(p->res.workers);
		busy |= copy_workers_busy(p->res.workers);
		if (busy) {
			idle_since = now_ns();
			completion_pass_end(&p->exec.pass, &p->exec.paths.done,
					    idle_since);
			continue;
		}
		uint64_t spin = 1000ull *
			atomic_load_explicit(&p->spin_us, memory_order_relaxed);
		/* Each clock reading starts the next pass (latency). */
		p->exec.pass.start_ns = now_ns();
		if (p->exec.pass.start_ns - idle_since < spin) {
			cpu_relax_hint();
			continue;
		}
		sleep_until_rung(p);
		idle_since = p->exec.pass.start_ns = now_ns();
	}
	return NULL;
}

/* --- the thread's start (its making and end: progress_life.c) --- */

int progress_start(struct progress *p)
{
	int err = pthread_create(&p->thread, NULL, progress_main, p);

	if (err)
		return -err;
	p->running = true;
	return 0;
}

/* --- settings and gauges: written and read by the main thread --- */

void progress_set_spin(struct progress *p, uint32_t spin_us)
{
	atomic_store_explicit(&p->spin_us, spin_us, memory_order_relaxed);
}

void progress_set_max_inflight(struct progress *p, uint32_t max)
{
	/* Relaxed: a plain setting, read once per drain. */
	atomic_store_explicit(&p->max_inflight, max, memory_order_relaxed);
}

void progress_set_notify_queue_max(struct progress *p, uint32_t max)
{
	/* Relaxed: a plain setting, read once per notification held. */
	atomic_store_explicit(&p->notify_queue_max, max, memory_order_relaxed);
}

void progress_set_notify_uid_max(struct progress *p, uint32_t max)
{
	/* Relaxed: as notify_queue_max. */
	atomic_store_explicit(&p->notify_uid_max, max, memory_order_relaxed);
}

const struct path_stats *progress_path_stats(const struct progress *p)
{
	return &p->exec.paths;
}

const struct class_stats *progress_class_stats(const struct progress *p)
{
	return &p->exec.classes;
}
