/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.c - the progress thread: its loop, sleeping and waking, and
 * its life (the movers it is made with).  Its queues to and from the
 * main thread are progress_cmd.c's; what it does with each descriptor is
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
 * Past 800 lines because the thread's life is one piece: the movers'
 * set-up (each route's table filled, the transports' shared resources)
 * sits beside the loop that drives them; the commands it applies are
 * already progress_cmd.c's.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "core/xop.h"
#include "engine/exec_run.h"
#include "engine/progress_int.h"
#include "gpu/gpu.h"
#include "local/local.h"
#include "mem/copy_workers.h"
#include "mem/staging.h"
#include "peer.pb-c.h"
#include "transport/rdma.h"
#include "transport/rdma_grant.h"
#include "transport/tcp.h"
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

/* Run what one client submitted; true if anything was done. */
static bool drain(struct progress *p, struct prog_client *pc)
{
	if (pc->broken)
		return false;
	uint32_t avail = sq_avail(pc);

	if (avail == 0)
		return false;
	if (avail > pc->ring.sq_entries) {
		progress_mark_broken(p, pc, "SQ tail beyond the ring");
		return false;
	}
	/*
	 * Every SQE may end a batch and need a CQE: take only as many as
	 * the CQ has room for, so completions are never dropped.  Counting
	 * by cq_tail also covers notifications a client sends to its own
	 * regions, and by cq_reserved the batches that went out on links.
	 */
	/* (cq_reserved can also drop during the loop, when an async
	 * batch completes into its reserved slot: both differences are
	 * taken modulo 2^32, so that completion counts once.) */
	uint32_t room = exec_cq_room(pc);
	uint32_t n = avail < DRAIN_BUDGET ? avail : DRAIN_BUDGET;
	uint32_t tail0 = pc->cq_tail, res0 = pc->cq_reserved, i;
	for (i = 0; i < n && (pc->cq_tail - tail0) + (pc->cq_reserved - res0) <
				     room && client_may_start(p, pc); i++) {
		struct xfer_sqe sqe;
#ifdef XFERD_STAGE_STAMPS
		pc->stage_taken = (uint32_t)__rdtsc();
#endif
		/* With phase, without the phase bits; a client without phase
		 * that sets them is refused (exec.c). */
		ring_sqe_copy(&pc->ring, pc->sq_head + i, &sqe);
		p->exec.sqe_index = pc->sq_head + i;  /* its message's slot */
		if (!exec_run_step(p, pc, &sqe))
			exec_sqe(p, pc, &sqe);
		if (sqe.len >= PUBLISH_EARLY_BYTES)
			exec_publish(pc);
	}
	exec_run_end(p);  /* the memo is another client's next */
	pc->sq_head += i;
	ring_sq_release(&pc->ring, pc->sq_head);
	/* The GPU copies queued so far are launched after this pass and may
	 * end before the batch's next entries arrive: those get a new op. */
	pc->batch.gpu_op = NULL;
	exec_publish(pc);
	return i > 0;
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

static void on_expire(evutil_socket_t fd, short what, void *arg)
{
	struct progress *p = arg;
	(void)fd, (void)what;

	uint64_t now = now_ns();

	for (int i = 0; i < p->nmovers; i++)
		p->movers[i].ops->expire(p->movers[i].impl, now);
}

/* --- link hooks: from the TCP links to the main thread --- */

static void hook_need_peer(void *arg, const struct token *tok)
{
	struct net_notice *n = calloc(1, sizeof(*n));

	if (!n)
		return;  /* the operations time out */
	n->kind = NET_NEED_PEER;
	memcpy(n->id, tok->instance_id, LINK_ID_LEN);
	n->tok = *tok;
	progress_post_net_notice(arg, n);
}

static void hook_link_down(void *arg, const uint8_t id[LINK_ID_LEN],
			   uint64_t gen, int err, const char *why)
{
	struct progress *p = arg;
	struct net_notice *n = calloc(1, sizeof(*n));

	/* Its queue pairs go with it (the peer's side tears down too). */
	for (int i = 0; i < p->nmovers; i++)
		p->movers[i].ops->peer_down(p->movers[i].impl, id, gen,
						err);
	if (!n)
		return;
	n->kind = NET_LINK_DOWN;
	memcpy(n->id, id, LINK_ID_LEN);
	n->gen = gen;
	n->err = err;
	snprintf(n->why, sizeof(n->why), "%s", why);
	progress_post_net_notice(arg, n);
}

static void hook_ctl_frame(void *arg, const uint8_t id[LINK_ID_LEN],
			   struct Xfer__Peer__PeerMsg *m)
{
	struct net_notice *n = calloc(1, sizeof(*n));

	if (!n) {
		/* The request it answers times out on the main thread. */
		xfer__peer__peer_msg__free_unpacked(m, NULL);
		return;
	}
	n->kind = NET_CTL_FRAME;
	memcpy(n->id, id, LINK_ID_LEN);
	n->msg = m;
	progress_post_net_notice(arg, n);
}

static bool hook_frame(void *arg, const uint8_t id[LINK_ID_LEN],
		       const struct Xfer__Peer__PeerMsg *m)
{
	struct progress *p = arg;

	for (int i = 0; i < p->nmovers; i++)
		if (p->movers[i].ops->frame(p->movers[i].impl, id, m))
			return true;
	return false;
}

static enum describe_result hook_describe(void *arg, struct region *r,
					  const struct describe_req *q,
					  struct Xfer__Peer__RdmaMemory *out,
					  uint32_t *keys, size_t max_keys)
{
	struct progress *p = arg;

	for (int i = 0; i < p->nmovers; i++) {
		enum describe_result d = p->movers[i].ops->describe(
			p->movers[i].impl, r, q, out, keys, max_keys);
		if (d != DESCRIBE_NONE)
			return d;
	}
	return DESCRIBE_NONE;
}

/* A region's last reference goes, on any thread, before it is released:
 * what the NICs granted peers of it ends (ours), or its owner is told to
 * end the grant it made for us (an import's; transport/rdma_grant.h). */
static void hook_region_released(void *arg, const struct region *r)
{
	struct progress *p = arg;
	uint8_t owner[LINK_ID_LEN], msg[64];
	size_t len;

	if (region_kind(r) == REGION_MEMFD)
		rdma_grant_end_region(r);
	else if ((len = rdma_grant_release_msg(r, owner, msg, sizeof(msg))))
		progress_link_send(p, owner, msg, len);
}

static int hook_notify_local(void *arg, struct region *r, uint64_t value,
			     int64_t bytes, const struct notify_note *note)
{
	return exec_notify_owner(arg, r, value, bytes, &note->from,
				 &note->msg);
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

/* The main thread's command doorbell (push()). */
static void on_doorbell(evutil_socket_t fd, short what, void *arg)
{
	uint64_t v;
	(void)what, (void)arg;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("doorbell read");
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
	if (!any_work(p) && arm_transports(p))
		event_base_loop(p->base, EVLOOP_ONCE);
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

/* --- life cycle --- */

void progress_set_instance_id(struct progress *p,
			      const uint8_t id[LINK_ID_LEN])
{
	memcpy(p->instance_id, id, LINK_ID_LEN);
}

/* Route's own copy of its mover's ops, what the mover lacks pointed to
 * the stubs (core/mover.h): every struct mover of the route calls
 * through it.  The tables are xferd's own (test_movers.c fills each):
 * one refused is a build gone wrong, found at start-up. */
static const struct mover_ops *route_ops(struct progress *p,
					 enum path_route route,
					 const struct mover_ops *ops)
{
	if (mover_ops_fill(&p->route_ops[route], ops))
		fatalx("mover %s: no submit or destroy, or not version %d",
		       ops->name ? ops->name : "(unnamed)", MOVER_OPS_VERSION);
	return &p->route_ops[route];
}

/* Mover m (its impl NULL: out of memory) runs route; the GPU mover
 * stays last (exec_cancel_client). */
static int add_local(struct progress *p, const struct mover_ops *ops,
		     void *impl, enum path_route route)
{
	if (!impl)
		return -ENOMEM;
	int at = p->nlocal++;
	if (at && p->local[at - 1].route == ROUTE_GPU) {
		p->local[at] = p->local[at - 1];
		at--;
	}
	p->local[at] = (struct mover){ route_ops(p, route, ops), impl, route };
	p->routes[route] = p->local[at];
	/* Those with a poll of their own run every pass (poll_local). */
	p->nlocal_polled = 0;
	for (int i = 0; i < p->nlocal; i++)
		if (p->local[i].ops->poll != mover_stub_poll)
			p->local_polled[p->nlocal_polled++] = p->local[i];
	return 0;
}

/* memcpy and CMA always; GPU copies where there are GPUs.  The staged
 * mover comes with the staging chunks (progress_enable_staging). */
static int add_local_movers(struct progress *p)
{
	p->res.hooks = (struct local_hooks){
		.op_begin = exec_hook_op_begin,
		.op_abandon = exec_hook_op_abandon,
		.op_done = exec_op_done,
		.forget_batch = exec_forget_batch,
		.arg = p,
	};
	if (add_local(p, &memcpy_mover_ops, memcpy_mover_create(&p->res),
		      ROUTE_MEMCPY) ||
	    add_local(p, &cma_mover_ops, cma_mover_create(&p->res),
		      ROUTE_CMA))
		return -ENOMEM;
	if (p->res.gpu && add_local(p, &gpu_mover_ops,
				    gpu_mover_create(&p->res), ROUTE_GPU))
		return -ENOMEM;
	return 0;
}

/* Each ends what it still holds (-ECANCELED) and goes. */
static void destroy_local_movers(struct progress *p)
{
	for (int i = 0; i < p->nlocal; i++) {
		p->routes[p->local[i].route] = (struct mover){ 0 };
		p->local[i].ops->destroy(p->local[i].impl);
	}
	p->nlocal = p->nlocal_polled = 0;
}

struct progress *progress_create(struct regtab *regs, uint32_t spin_us,
				 int cpu)
{
	struct progress *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->regs = regs;
	p->cpu = cpu;
	atomic_init(&p->spin_us, spin_us);
	atomic_init(&p->max_inflight, UINT32_MAX);
	atomic_init(&p->notify_queue_max, PROGRESS_NOTIFY_QUEUE_MAX);
	atomic_init(&p->notify_uid_max, PROGRESS_NOTIFY_UID_MAX);
	atomic_init(&p->ops_in_flight, 0);
	p->cmds_tail = &p->cmds;
	TAILQ_INIT(&p->exec.deferred);
	pthread_mutex_init(&p->lock, NULL);
	p->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->doorbell < 0)
		goto err_doorbell;
	p->notice_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->notice_efd < 0)
		goto err_notice;
	/* Edge-triggered events (the clients' SQ doorbells, never read):
	 * epoll, whatever EVENT_NO* says. */
	struct event_config *ecfg = event_config_new();
	if (!ecfg)
		goto err_base;
	event_config_require_features(ecfg, EV_FEATURE_ET);
	event_config_set_flag(ecfg, EVENT_BASE_FLAG_IGNORE_ENV);
	p->base = event_base_new_with_config(ecfg);
	event_config_free(ecfg);
	/* Two priorities: a link's latency lane (transport/link_lane.c)
	 * runs before the rest in each turn of the loop. */
	if (!p->base || event_base_priority_init(p->base, 2))
		goto err_base;
	p->ev_doorbell = event_new(p->base, p->doorbell, EV_READ | EV_PERSIST,
				   on_doorbell, p);
	if (!p->ev_doorbell || event_add(p->ev_doorbell, NULL))
		goto err_event;
	/* NULL without GPUs: GPU descriptors then fail with -ENOTSUP. */
	p->res.gpu = gpu_copies_create();
	if (add_local_movers(p))
		goto err_movers;
	return p;

err_movers:
	destroy_local_movers(p);
	gpu_copies_destroy(p->res.gpu);
err_event:
	if (p->ev_doorbell)
		event_free(p->ev_doorbell);
	event_base_free(p->base);
err_base:
	close(p->notice_efd);
err_notice:
	close(p->doorbell);
err_doorbell:
	pthread_mutex_destroy(&p->lock);
	free(p);
	return NULL;
}

int progress_enable_net(struct progress *p, const struct transport_cfg *cfg,
			uint32_t op_timeout_ms)
{
	struct linkset_cfg lcfg = {
		.keepalive_ms = cfg->keepalive_ms,
		.peer_timeout_ms = cfg->peer_timeout_ms,
		.lanes = cfg->link_lanes,
	};
	struct tcp_cfg tcfg = { .tcp_chunk = cfg->tcp_chunk,
				.stage_ahead = cfg->tcp_stage_ahead,
				.bulk_queue = cfg->link_bulk_queue,
				.tenants = cfg->tenants,
				.stats = &p->exec.classes,
				.caps = p->exec.caps };
	const struct rdma_cfg rcfg = { .qps = cfg->rdma_qps,
				       .stripe = cfg->rdma_stripe,
				       .bulk_depth = cfg->rdma_bulk_depth,
				       .landing = cfg->rdma_landing,
				       .landing_chunks = cfg->rdma_landing_chunks,
				       .landing_peers = cfg->rdma_landing_peers,
				       .tenants = cfg->tenants };
	/* Up from the movers to the executor, and from the links' session
	 * to the main thread and the movers' own frames. */
	const struct mover_hooks hooks = {
		.op_done = exec_op_done,
		.reroute = exec_op_reroute,
		.notify_local = hook_notify_local,
		.need_peer = hook_need_peer,
		.describe = hook_describe,
		.arg = p,
	};
	const struct linkset_hooks lhooks = {
		.link_down = hook_link_down,
		.ctl_frame = hook_ctl_frame,
		.frame = hook_frame,
		.arg = p,
	};

	memcpy(tcfg.self_id, cfg->self_id, LINK_ID_LEN);
	memcpy(lcfg.self_id, cfg->self_id, LINK_ID_LEN);
	exec_caps_set(p, &cfg->tenants, cfg->tcp_chunk);
	/* TCP moves data on the links as their data client. */
	struct tcp_mover *tcp = tcp_mover_create(p->regs, &tcfg, &hooks);
	if (!tcp)
		return -ENOMEM;
	p->links = linkset_create(p->base, &lcfg, &lhooks, &tcp_link_client,
				  tcp);
	if (!p->links) {
		tcp_mover_ops.destroy(tcp);
		return -ENOMEM;
	}
	tcp_mover_bind(tcp, p->links);
	p->ev_expire = event_new(p->base, -1, EV_PERSIST, on_expire, p);
	if (!p->ev_expire) {
		tcp_mover_ops.destroy(tcp);
		p->links = NULL;
		return -ENOMEM;
	}
	/* GPU memory to other nodes goes through the staging chunks too. */
	if (p->res.staging)
		tcp_set_staging(tcp, p->res.staging, p->res.gpu);
	/* NULL without RDMA rails: then TCP moves everything.  With GPUs
	 * it stages through the GPU staging pool, registered with its
	 * NICs as well: GPU memory then goes by RDMA too. */
	struct rdma_stage_res sres = { .pool = p->res.staging,
				       .gpu = p->res.gpu, .regs = p->regs };
	memcpy(sres.self_id, cfg->self_id, LINK_ID_LEN);
	p->rdma = rdma_create(p->base, p->links, &rcfg, &hooks, &sres);
	rdma_share_tenants(p->rdma, p->exec.caps, &p->exec.classes);
	if (p->rdma) {
		p->movers[p->nmovers++] = (struct mover){
			route_ops(p, ROUTE_RDMA, &rdma_mover_ops), p->rdma,
			ROUTE_RDMA };
		/* The same queue pairs, through its staging buffers. */
		p->movers[p->nmovers++] = (struct mover){
			route_ops(p, ROUTE_RDMA_STAGED, &rdma_staged_mover_ops),
			p->rdma, ROUTE_RDMA_STAGED };
		/* And through the owner's landing chunks, for memory its
		 * NICs cannot reach (rdma_land.c). */
		p->movers[p->nmovers++] = (struct mover){
			route_ops(p, ROUTE_RDMA_OWNER_STAGED,
				  &rdma_owner_staged_mover_ops),
			p->rdma, ROUTE_RDMA_OWNER_STAGED };
		/* Before the thread runs: any thread may then read it. */
		region_set_release_hook(hook_region_released, p);
	}
	p->movers[p->nmovers++] = (struct mover){
		route_ops(p, ROUTE_LINK, &tcp_mover_ops), tcp, ROUTE_LINK };
	for (int i = 0; i < p->nmovers; i++)
		p->routes[p->movers[i].route] = p->movers[i];
	/* The staged route is the TCP transport's too: it stages what it
	 * moves of GPU memory itself (transport/tcp.c). */
	p->routes[ROUTE_LINK_STAGED] = p->routes[ROUTE_LINK];
	p->exec.op_timeout_ms = op_timeout_ms;
	p->exec.latency_max_bytes = cfg->latency_max_bytes;
	/* The shared resources' classes: the copy workers' tenant weights,
	 * the staging pool's latency reserve (again on every reload). */
	copy_workers_set_weights(p->res.workers, &cfg->tenants);
	staging_set_reserve(p->res.staging, cfg->staging_latency_reserve);
	return 0;
}

void progress_set_dlists(struct progress *p, struct dltab *t)
{
	p->dlists = t;
}

int progress_enable_staging(struct progress *p, uint32_t staging_mb,
			    uint32_t chunk)
{
	/* Without GPUs there is nothing to stage. */
	if (!p->res.gpu)
		return 0;
	chunk = (chunk + 4095u) & ~4095u;
	p->res.staging = staging_create((uint64_t)staging_mb << 20, chunk,
					true);
	if (!p->res.staging) {
		log_warnx("no staging memory (staging_mb %u): GPU memory will "
			  "not reach other nodes nor xfer_reg'd memory",
			  staging_mb);
		return -ENOMEM;
	}
	/* Without it GPU <-> xfer_reg'd memory here fails (-ENOTSUP). */
	if (add_local(p, &gpu_staged_mover_ops,
		      gpu_staged_mover_create(&p->res), ROUTE_GPU_STAGED))
		return -ENOMEM;
	return 0;
}

int progress_enable_copy_workers(struct progress *p, int n,
				 uint64_t cma_split_bytes)
{
	cma_mover_set_split(p->routes[ROUTE_CMA].impl, cma_split_bytes);
	if (n < 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		/* Measured on a 16-core H100 node, xfer_reg'd pinned memory
		 * -> GPU, 256 MiB: 8 workers 21 GB/s, 16 33 GB/s when the
		 * owner is read by process_vm_readv (no_new_privs; through
		 * /proc/PID/mem 10.9 and 12.5).  Idle workers sleep. */
		n = cpus >= 16 ? 16 : cpus >= 2 ? (int)(cpus / 2) : 1;
	}
	if (n == 0)
		return 0;
	p->res.workers = copy_workers_create((unsigned)n);
	if (!p->res.workers) {
		log_warnx("no copy workers: staged and large CMA copies run "
			  "on the progress thread");
		return 0;
	}
	return (int)copy_workers_count(p->res.workers);
}

bool progress_staging_stats(const struct progress *p,
			    struct staging_stats *out)
{
	/* Set before the thread starts, never changed: no lock. */
	staging_get_stats(p->res.staging, out);
	return p->res.staging != NULL;
}

struct rdma *progress_rdma(const struct progress *p)
{
	/* Set before the thread starts, cleared after it stopped. */
	return p ? p->rdma : NULL;
}

int progress_start(struct progress *p)
{
	int err = pthread_create(&p->thread, NULL, progress_main, p);

	if (err)
		return -err;
	p->running = true;
	return 0;
}

void progress_destroy(struct progress *p)
{
	if (!p)
		return;
	if (p->running) {
		progress_push_stop(p);
		pthread_join(p->thread, NULL);
	}
	/* No link sends any more; the grants end with the transport. */
	region_set_release_hook(NULL, NULL);
	/* The thread is gone: its state is ours now.  Operations still out
	 * end here (-ECONNRESET) so their regions are released. */
	/* RDMA first: the links it sends on outlive it, and the links'
	 * last reports (link down) must find it gone, not freed. */
	exec_run_deferred(p);
	/* The same-node movers end what they hold; their chunks go back to
	 * the pool as their copies end (and the split copies free what
	 * their parts share). */
	destroy_local_movers(p);
	copy_workers_destroy(p->res.workers);
	p->res.workers = NULL;
	/* Forgotten before they go: what they report while going (link
	 * down) must not reach one already freed. */
	struct mover gone[MOVERS_MAX];
	int ngone = p->nmovers;
	memcpy(gone, p->movers, sizeof(gone));
	p->nmovers = 0;
	for (int i = 0; i < ngone; i++)
		gone[i].ops->destroy(gone[i].impl);
	memset(p->routes, 0, sizeof(p->routes));
	p->rdma = NULL;
	p->links = NULL;
	/* GPU copies in flight finish before their memory goes. */
	gpu_copies_destroy(p->res.gpu);
	/* After the links (their buffers give chunks back) and the copies
	 * (those still out end here). */
	staging_destroy(p->res.staging);
	exec_xop_cache_free(p);
	free(p->exec.segs);
	regtab_memo_release(&p->exec.memo);
	progress_free_queues(p);
	if (p->ev_expire)
		event_free(p->ev_expire);
	event_free(p->ev_doorbell);
	/* Clients still attached (never detached): their events and queues
	 * go here, the clients (and their wake fds) with the main thread's. */
	for (size_t i = 0; i < p->nclients; i++) {
		struct prog_client *pc = p->clients[i];
		if (pc->ev_wake)
			event_free(pc->ev_wake);
		pc->ev_wake = NULL;
		exec_notify_forget(pc);
	}
	event_base_free(p->base);
	free(p->clients);
	close(p->doorbell);
	close(p->notice_efd);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

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
