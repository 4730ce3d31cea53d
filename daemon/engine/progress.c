/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.c - the progress thread: its loop, its queues to and from the
 * main thread, sleeping and waking.  What it does with each descriptor
 * is in exec.c; the transports it drives through their ops table
 * (core/mover.h), the links to other xferds in transport/link.c.
 *
 * Lock order: p->lock (command and notice queues) is never held while
 * the region table's lock is taken, nor the other way round.
 *
 * Sleeping: the thread's event base watches its command doorbell (an
 * eventfd only the main thread writes) and every client's SQ doorbell,
 * edge-triggered, never read (progress.h); no client holds a file
 * description the thread reads or writes.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "gpu/gpu.h"
#include "mem/staging.h"
#include "engine/path_staged.h"
#include "engine/copy_workers.h"
#include "engine/path_cma.h"
#include "engine/progress_int.h"
#include "core/xop.h"
#include "peer.pb-c.h"
#include "transport/rdma_grant.h"
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
#define STAGING_BYTES (4u << 20)
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
/* Send buffer of xferd's end of a CQ doorbell pair: a few datagrams
 * queue, the next send finds EAGAIN, which says the client's end is
 * readable already.  (The kernel doubles it and rounds it up to its
 * minimum.) */
#define CQ_SNDBUF 4096

enum cmd_kind {
	CMD_ATTACH, CMD_DETACH, CMD_STOP,
	CMD_LINK_ATTACH, CMD_LINK_CLOSE, CMD_LINK_SEND, CMD_NET_CFG,
};

struct cmd {
	enum cmd_kind kind;
	struct prog_client *pc;
	/* links */
	uint8_t id[LINK_ID_LEN];
	uint64_t gen;
	int fd, err;
	char why[128];
	struct link_stats *stats;
	uint8_t *data;
	size_t len;
	struct transport_cfg net;
	uint32_t op_timeout_ms;
	char name[64];                     /* the peer's node name */
	struct rdma_peer_rail *rails;      /* its RDMA rails */
	size_t nrails;
	struct cmd *next;
};

struct notice {
	enum notice_kind kind;
	struct prog_client *pc;
	struct notice *next;
};

static void post_notice(struct progress *p, struct prog_client *pc,
			enum notice_kind kind)
{
	struct notice *n = malloc(sizeof(*n));

	if (!n)
		abort();
	n->kind = kind;
	n->pc = pc;
	pthread_mutex_lock(&p->lock);
	n->next = p->notices;
	p->notices = n;
	pthread_mutex_unlock(&p->lock);
	ring_eventfd(p->notice_efd);
}

static void post_net_notice(struct progress *p, struct net_notice *n)
{
	pthread_mutex_lock(&p->lock);
	n->next = p->net_notices;
	p->net_notices = n;
	pthread_mutex_unlock(&p->lock);
	ring_eventfd(p->notice_efd);
}

static void mark_broken(struct progress *p, struct prog_client *pc,
			const char *why)
{
	if (pc->broken)
		return;
	pc->broken = why;
	post_notice(p, pc, NOTICE_BROKEN);
}

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

/* Run what one client submitted; true if anything was done. */
static bool drain(struct progress *p, struct prog_client *pc)
{
	uint32_t avail = ring_sq_avail(&pc->ring, pc->sq_head);

	if (avail == 0 || pc->broken)
		return false;
	if (avail > pc->ring.sq_entries) {
		mark_broken(p, pc, "SQ tail beyond the ring");
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
		ring_sqe_copy(&pc->ring, pc->sq_head + i, &sqe);
		exec_sqe(p, pc, &sqe);
		if (sqe.len >= PUBLISH_EARLY_BYTES)
			exec_publish(pc);
	}
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
	post_net_notice(arg, n);
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
	post_net_notice(arg, n);
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
	post_net_notice(arg, n);
}

static void net_notice_free(struct net_notice *n)
{
	if (n->msg)
		xfer__peer__peer_msg__free_unpacked(n->msg, NULL);
	free(n);
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
			     int64_t bytes, const struct xfer_cqe_sender *from)
{
	return exec_notify_owner(arg, r, value, bytes, from);
}

/* --- commands from the main thread --- */

static void remove_client(struct progress *p, struct prog_client *pc)
{
	/* Its operations on links end first (their CQEs land in a ring
	 * that is still mapped); whatever it still had queued in the SQ is
	 * cancelled: never executed. */
	exec_cancel_client(p, pc);
	exec_notify_forget(pc);
	for (size_t i = 0; i < p->nclients; i++) {
		if (p->clients[i] != pc)
			continue;
		p->clients[i] = p->clients[--p->nclients];
		break;
	}
	if (pc->ev_wake) {
		event_free(pc->ev_wake);
		pc->ev_wake = NULL;
	}
	/* The DEAD flag (and the doorbell) stop a client that polls or
	 * sleeps. */
	atomic_fetch_or_explicit(pc->ring.sq_flags, XFER_SQ_DEAD,
				 memory_order_release);
	ring_client(pc->cq_sock);
	post_notice(p, pc, NOTICE_DETACHED);
}

/*
 * The client rang its SQ doorbell: the pass that follows looks at its
 * ring.  Nothing to read: the event is edge-triggered, each write of
 * the client is one edge, and the eventfd is never read here, since
 * the client shares its file description and could make a read block
 * (O_NONBLOCK is a flag of the description).  Its counter only grows;
 * a client that saturates it (or reads it) stops its own wake-ups, no
 * one else's.  A client that writes without pause costs this thread at
 * most one wake-up per sleep.
 */
static void on_client_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
}

static void add_client(struct progress *p, struct prog_client *pc)
{
	if (p->nclients == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		void *a = realloc(p->clients, cap * sizeof(*p->clients));
		if (!a)
			abort();
		p->clients = a;
		p->cap = cap;
	}
	p->clients[p->nclients++] = pc;
	if (pc->sq_efd < 0)
		return;
	/* EV_ET: the base was made with EV_FEATURE_ET (progress_create). */
	pc->ev_wake = event_new(p->base, pc->sq_efd,
				EV_READ | EV_PERSIST | EV_ET, on_client_wake,
				pc);
	/* Without it the client's doorbell would go unheard while the
	 * thread sleeps: drop it rather than serve it late. */
	if (!pc->ev_wake || event_add(pc->ev_wake, NULL))
		mark_broken(p, pc, "no room for its wake-up event");
}

static void free_cmd(struct cmd *c)
{
	free(c->rails);
	free(c->data);
	free(c);
}

/* Returns false when asked to stop. */
static bool apply_cmds(struct progress *p)
{
	pthread_mutex_lock(&p->lock);
	struct cmd *c = p->cmds;
	p->cmds = NULL;
	p->cmds_tail = &p->cmds;
	atomic_store_explicit(&p->cmds_pending, false, memory_order_relaxed);
	pthread_mutex_unlock(&p->lock);

	bool keep_going = true;
	for (struct cmd *next; c; c = next) {
		next = c->next;
		switch (c->kind) {
		case CMD_ATTACH:
			add_client(p, c->pc);
			break;
		case CMD_DETACH:
			remove_client(p, c->pc);
			break;
		case CMD_STOP:
			keep_going = false;
			break;
		case CMD_LINK_ATTACH: {
			struct peer_info peer = { .gen = c->gen,
						  .name = c->name,
						  .rails = c->rails,
						  .nrails = c->nrails };
			memcpy(peer.id, c->id, LINK_ID_LEN);
			/* RDMA first: the link dispatches what it already
			 * holds (a QpConnect) as it is attached, and reports
			 * its failure (link down) to RDMA too. */
			for (int i = 0; i < p->nmovers; i++)
				p->movers[i].ops->peer_up(
					p->movers[i].impl, &peer);
			linkset_attach(p->links, c->fd, c->id, c->gen, c->stats,
				       c->data, c->len);
			break;
		}
		case CMD_LINK_CLOSE:
			linkset_close(p->links, c->id, c->err, c->why);
			break;
		case CMD_LINK_SEND:
			linkset_send_ctl(p->links, c->id, c->data, c->len);
			break;
		case CMD_NET_CFG:
			for (int i = 0; i < p->nmovers; i++)
				p->movers[i].ops->set_cfg(
					p->movers[i].impl, &c->net);
			p->exec.op_timeout_ms = c->op_timeout_ms;
			break;
		}
		free_cmd(c);
	}
	return keep_going;
}

static void push(struct progress *p, struct cmd *c)
{
	pthread_mutex_lock(&p->lock);
	*p->cmds_tail = c;
	p->cmds_tail = &c->next;
	atomic_store_explicit(&p->cmds_pending, true, memory_order_relaxed);
	pthread_mutex_unlock(&p->lock);
	ring_eventfd(p->doorbell);
}

static struct cmd *new_cmd(enum cmd_kind kind)
{
	struct cmd *c = calloc(1, sizeof(*c));

	if (!c)
		abort();  /* a few bytes; treat like the rest of malloc */
	c->kind = kind;
	c->fd = -1;
	return c;
}

static void push_cmd(struct progress *p, enum cmd_kind kind,
		     struct prog_client *pc)
{
	struct cmd *c = new_cmd(kind);

	c->pc = pc;
	push(p, c);
}

void progress_attach(struct progress *p, struct prog_client *pc)
{
	push_cmd(p, CMD_ATTACH, pc);
}

void progress_detach(struct progress *p, struct prog_client *pc)
{
	push_cmd(p, CMD_DETACH, pc);
}

void progress_link_attach(struct progress *p, int fd,
			  const uint8_t id[LINK_ID_LEN], uint64_t gen,
			  struct link_stats *stats, const void *pending,
			  size_t pending_len, const char *name,
			  const struct rdma_peer_rail *rails, size_t nrails)
{
	struct cmd *c = new_cmd(CMD_LINK_ATTACH);

	snprintf(c->name, sizeof(c->name), "%s", name);
	if (nrails) {
		c->rails = malloc(nrails * sizeof(*rails));
		if (!c->rails)
			abort();
		memcpy(c->rails, rails, nrails * sizeof(*rails));
		c->nrails = nrails;
	}
	c->fd = fd;
	c->gen = gen;
	memcpy(c->id, id, LINK_ID_LEN);
	c->stats = stats;
	if (pending_len) {
		c->data = malloc(pending_len);
		if (!c->data)
			abort();
		memcpy(c->data, pending, pending_len);
		c->len = pending_len;
	}
	push(p, c);
}

void progress_link_close(struct progress *p, const uint8_t id[LINK_ID_LEN],
			 int err, const char *why)
{
	struct cmd *c = new_cmd(CMD_LINK_CLOSE);

	memcpy(c->id, id, LINK_ID_LEN);
	c->err = err;
	snprintf(c->why, sizeof(c->why), "%s", why);
	push(p, c);
}

void progress_link_send(struct progress *p, const uint8_t id[LINK_ID_LEN],
			const void *msg, size_t len)
{
	struct cmd *c = new_cmd(CMD_LINK_SEND);

	memcpy(c->id, id, LINK_ID_LEN);
	c->data = malloc(len);
	if (!c->data)
		abort();
	memcpy(c->data, msg, len);
	c->len = len;
	push(p, c);
}

void progress_net_cfg(struct progress *p, const struct transport_cfg *cfg,
		      uint32_t op_timeout_ms)
{
	struct cmd *c = new_cmd(CMD_NET_CFG);

	c->net = *cfg;
	c->op_timeout_ms = op_timeout_ms;
	push(p, c);
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
	return ring_sq_avail(&pc->ring, pc->sq_head) && exec_cq_room(pc) &&
	       client_may_start(p, pc);
}

static bool any_work(struct progress *p)
{
	if (atomic_load_explicit(&p->cmds_pending, memory_order_relaxed) ||
	    (p->gpu && gpu_copies_busy(p->gpu)))
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
				ring_sq_avail(&pc->ring, pc->sq_head)) &&
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
 * Launch the GPU copies this pass queued (together: many small ones go
 * as one kernel) and end those whose events fired.  True while copies
 * are out, so the thread keeps polling rather than sleeping.
 */
static bool poll_gpu(struct progress *p)
{
	if (!p->gpu)
		return false;
	gpu_copies_flush(p->gpu);
	gpu_copies_poll(p->gpu, exec_op_done, p);
	return gpu_copies_busy(p->gpu);
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
		    !apply_cmds(p))
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
		busy |= poll_gpu(p);
		/* CMA copies on the workers: keep polling while any is out. */
		copy_workers_poll(p->workers);
		busy |= copy_workers_busy(p->workers);
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
	TAILQ_INIT(&p->exec.lstages);
	TAILQ_INIT(&p->exec.cma_splits);
	pthread_mutex_init(&p->lock, NULL);
	p->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->doorbell < 0)
		goto err_doorbell;
	p->notice_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->notice_efd < 0)
		goto err_notice;
	if (local_staging_init(&p->exec.staging, STAGING_BYTES))
		goto err_staging;
	/* Edge-triggered events (the clients' SQ doorbells, never read):
	 * epoll, whatever EVENT_NO* says. */
	struct event_config *ecfg = event_config_new();
	if (!ecfg)
		goto err_base;
	event_config_require_features(ecfg, EV_FEATURE_ET);
	event_config_set_flag(ecfg, EVENT_BASE_FLAG_IGNORE_ENV);
	p->base = event_base_new_with_config(ecfg);
	event_config_free(ecfg);
	if (!p->base)
		goto err_base;
	p->ev_doorbell = event_new(p->base, p->doorbell, EV_READ | EV_PERSIST,
				   on_doorbell, p);
	if (!p->ev_doorbell || event_add(p->ev_doorbell, NULL))
		goto err_event;
	/* NULL without GPUs: GPU descriptors then fail with -ENOTSUP. */
	p->gpu = gpu_copies_create();
	return p;

err_event:
	if (p->ev_doorbell)
		event_free(p->ev_doorbell);
	event_base_free(p->base);
err_base:
	local_staging_fini(&p->exec.staging);
err_staging:
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
	const struct linkset_cfg lcfg = {
		.keepalive_ms = cfg->keepalive_ms,
		.peer_timeout_ms = cfg->peer_timeout_ms,
	};
	struct tcp_cfg tcfg = { .tcp_chunk = cfg->tcp_chunk };
	const struct rdma_cfg rcfg = { .qps = cfg->rdma_qps,
				       .stripe = cfg->rdma_stripe };
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
	if (p->staging)
		tcp_set_staging(tcp, p->staging, p->gpu);
	/* NULL without RDMA rails: then TCP moves everything. */
	p->rdma = rdma_create(p->base, p->links, &rcfg, &hooks);
	if (p->rdma) {
		p->movers[p->nmovers++] = (struct mover){
			&rdma_mover_ops, p->rdma, ROUTE_RDMA };
		/* The same queue pairs, through its staging buffers. */
		p->movers[p->nmovers++] = (struct mover){
			&rdma_staged_mover_ops, p->rdma, ROUTE_RDMA_STAGED };
		/* Before the thread runs: any thread may then read it. */
		region_set_release_hook(hook_region_released, p);
	}
	p->movers[p->nmovers++] = (struct mover){
		&tcp_mover_ops, tcp, ROUTE_LINK };
	p->exec.op_timeout_ms = op_timeout_ms;
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
	if (!p->gpu)
		return 0;
	chunk = (chunk + 4095u) & ~4095u;
	p->staging = staging_create((uint64_t)staging_mb << 20, chunk, true);
	if (!p->staging) {
		log_warnx("no staging memory (staging_mb %u): GPU memory will "
			  "not reach other nodes nor xfer_reg'd memory",
			  staging_mb);
		return -ENOMEM;
	}
	return 0;
}

int progress_enable_copy_workers(struct progress *p, int n,
				 uint64_t cma_split_bytes)
{
	p->exec.cma_split_bytes = cma_split_bytes;
	if (n < 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		/* Measured on a 16-core H100 node: 1 worker 6.5 GB/s, 2 12,
		 * 4 17, 8 26-34 (pinned memory <-> GPU, 256 MiB). */
		n = cpus >= 16 ? 8 : cpus >= 2 ? (int)(cpus / 2) : 1;
	}
	if (n == 0)
		return 0;
	p->workers = copy_workers_create((unsigned)n);
	if (!p->workers) {
		log_warnx("no copy workers: staged and large CMA copies run "
			  "on the progress thread");
		return 0;
	}
	return (int)copy_workers_count(p->workers);
}

bool progress_staging_stats(const struct progress *p,
			    struct staging_stats *out)
{
	/* Set before the thread starts, never changed: no lock. */
	staging_get_stats(p->staging, out);
	return p->staging != NULL;
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
		push_cmd(p, CMD_STOP, NULL);
		pthread_join(p->thread, NULL);
	}
	/* No link sends any more; the grants end with the transport. */
	region_set_release_hook(NULL, NULL);
	/* The thread is gone: its state is ours now.  Operations still out
	 * end here (-ECONNRESET) so their regions are released. */
	/* RDMA first: the links it sends on outlive it, and the links'
	 * last reports (link down) must find it gone, not freed. */
	exec_run_deferred(p);
	lstage_cancel_client(p, NULL);
	cma_split_cancel_client(p, NULL);
	/* Their chunks go back to the pool as their copies end (and the
	 * split copies free what their parts share). */
	copy_workers_destroy(p->workers);
	p->workers = NULL;
	/* Forgotten before they go: what they report while going (link
	 * down) must not reach one already freed. */
	struct mover gone[MOVERS_MAX];
	int ngone = p->nmovers;
	memcpy(gone, p->movers, sizeof(gone));
	p->nmovers = 0;
	for (int i = 0; i < ngone; i++)
		gone[i].ops->destroy(gone[i].impl);
	p->rdma = NULL;
	p->links = NULL;
	/* GPU copies in flight finish before their memory goes. */
	gpu_copies_destroy(p->gpu);
	/* After the links (their buffers give chunks back) and the copies
	 * (those still out end here). */
	staging_destroy(p->staging);
	exec_xop_cache_free(p);
	free(p->exec.segs);
	regtab_memo_release(&p->exec.memo);
	/* Commands queued behind STOP were never applied. */
	for (struct cmd *c = p->cmds, *next; c; c = next) {
		next = c->next;
		if (c->kind == CMD_LINK_ATTACH)
			close(c->fd);
		free_cmd(c);
	}
	for (struct notice *n = p->notices, *next; n; n = next) {
		next = n->next;
		free(n);
	}
	for (struct net_notice *n = p->net_notices, *next; n; n = next) {
		next = n->next;
		net_notice_free(n);
	}
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
	local_staging_fini(&p->exec.staging);
	close(p->doorbell);
	close(p->notice_efd);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int progress_doorbells(struct prog_client *pc, int *client_cq)
{
	const int size = CQ_SNDBUF;
	int sv[2], err;

	pc->cq_sock = -1;
	/* Why an eventfd for the SQ, only watched: a datagram socket there
	 * (read by this thread) made a same-node round trip whose client
	 * waits with xfer_wait_cqe sleep the thread at every turn, about
	 * 1 -> 15 us; an eventfd's edge costs nothing to take. */
	pc->sq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pc->sq_efd < 0)
		goto fail;
	/* Datagrams for the CQ, not a stream or a pipe: a client that
	 * closes or shuts down its end leaves ours quiet, and no send of
	 * ours ever raises SIGPIPE.  Ours is shut for reading: nothing a
	 * client writes to its end queues in xferd (it gets EPIPE). */
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
		       sv))
		goto fail;
	pc->cq_sock = sv[0];
	*client_cq = sv[1];
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	if (shutdown(sv[0], SHUT_RD)) {
		close(sv[1]);
		goto fail;
	}
	return 0;

fail:
	err = -errno;
	progress_doorbells_close(pc);
	return err;
}

void progress_doorbells_close(struct prog_client *pc)
{
	if (pc->sq_efd >= 0)
		close(pc->sq_efd);
	if (pc->cq_sock >= 0)
		close(pc->cq_sock);
	pc->sq_efd = pc->cq_sock = -1;
}

void progress_wake_client(const struct prog_client *pc)
{
	ring_client(pc->cq_sock);
}

int progress_notice_fd(const struct progress *p)
{
	return p->notice_efd;
}

void progress_take_notices(struct progress *p,
			   void (*fn)(struct prog_client *pc,
				      enum notice_kind kind, void *arg),
			   void *arg)
{
	uint64_t v;

	if (read(p->notice_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("notice read");
	pthread_mutex_lock(&p->lock);
	struct notice *n = p->notices;
	p->notices = NULL;
	pthread_mutex_unlock(&p->lock);

	/* The list is newest first; BROKEN before DETACHED of one client
	 * matters, so deliver oldest first. */
	struct notice *rev = NULL;
	for (struct notice *next; n; n = next) {
		next = n->next;
		n->next = rev;
		rev = n;
	}
	for (struct notice *next; rev; rev = next) {
		next = rev->next;
		fn(rev->pc, rev->kind, arg);
		free(rev);
	}
}

void progress_take_net_notices(struct progress *p,
			       void (*fn)(const struct net_notice *n, void *arg),
			       void *arg)
{
	pthread_mutex_lock(&p->lock);
	struct net_notice *n = p->net_notices;
	p->net_notices = NULL;
	pthread_mutex_unlock(&p->lock);

	struct net_notice *rev = NULL;  /* oldest first, as above */
	for (struct net_notice *next; n; n = next) {
		next = n->next;
		n->next = rev;
		rev = n;
	}
	for (struct net_notice *next; rev; rev = next) {
		next = rev->next;
		fn(rev, arg);
		net_notice_free(rev);
	}
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
