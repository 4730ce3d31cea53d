/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress_cmd.c - the progress thread's queues to and from the main
 * thread: commands in (clients attach and detach, links come and go,
 * settings), notices out (a client broken or detached, what the links
 * report), and each client's doorbells.
 *
 * Threads: progress_attach() and the other commands, progress_take_*()
 * and the doorbells run on the main thread; applying the commands and
 * posting the notices on the progress thread.
 *
 * Lock order: p->lock (command and notice queues) is never held while
 * the region table's lock is taken, nor the other way round.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "engine/progress_int.h"
#include "mem/copy_workers.h"
#include "mem/staging.h"
#include "peer.pb-c.h"
#include "transport/rdma.h"
#include "transport/tcp.h"

/* Send buffer of xferd's end of a CQ doorbell pair: a few datagrams
 * queue, the next send finds EAGAIN, which says the client's end is
 * readable already.  (The kernel doubles it and rounds it up to its
 * minimum.) */
#define CQ_SNDBUF 4096

enum cmd_kind {
	CMD_ATTACH, CMD_DETACH, CMD_STOP,
	CMD_LINK_ATTACH, CMD_LANE_ATTACH, CMD_LINK_CLOSE, CMD_LINK_SEND,
	CMD_NET_CFG,
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
	bool initiator, offer_lane;        /* linkset_attach's */
	uint8_t secret[LINK_LANE_SECRET];  /* a lane's (LaneHello) */
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

void progress_post_net_notice(struct progress *p, struct net_notice *n)
{
	pthread_mutex_lock(&p->lock);
	n->next = p->net_notices;
	p->net_notices = n;
	pthread_mutex_unlock(&p->lock);
	ring_eventfd(p->notice_efd);
}

void progress_mark_broken(struct progress *p, struct prog_client *pc,
			  const char *why)
{
	if (pc->broken)
		return;
	pc->broken = why;
	post_notice(p, pc, NOTICE_BROKEN);
}
static void net_notice_free(struct net_notice *n)
{
	if (n->msg)
		xfer__peer__peer_msg__free_unpacked(n->msg, NULL);
	free(n);
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
		progress_mark_broken(p, pc, "no room for its wake-up event");
}

static void free_cmd(struct cmd *c)
{
	free(c->rails);
	free(c->data);
	free(c);
}

bool progress_apply_cmds(struct progress *p)
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
				       c->data, c->len, c->initiator,
				       c->offer_lane);
			break;
		}
		case CMD_LANE_ATTACH:
			linkset_attach_lane(p->links, c->fd, c->id, c->secret,
					    c->data, c->len);
			break;
		case CMD_LINK_CLOSE:
			linkset_close(p->links, c->id, c->err, c->why);
			break;
		case CMD_LINK_SEND:
			linkset_send_ctl(p->links, c->id, c->data, c->len);
			break;
		case CMD_NET_CFG:
			exec_caps_set(p, &c->net.tenants, c->net.tcp_chunk);
			for (int i = 0; i < p->nmovers; i++)
				p->movers[i].ops->set_cfg(
					p->movers[i].impl, &c->net);
			p->exec.op_timeout_ms = c->op_timeout_ms;
			p->exec.latency_max_bytes = c->net.latency_max_bytes;
			copy_workers_set_weights(p->res.workers,
						 &c->net.tenants);
			/* Slots a reload gave to another tenant: no op of
			 * theirs is left (main.c held them otherwise), and
			 * this thread is their counters' one writer. */
			for (unsigned t = 0; t < TENANT_MAX; t++) {
				if (!(c->net.tenants.fresh & (1u << t)))
					continue;
				class_counters_zero(&p->exec.classes.tenant[t]);
				atomic_store_explicit(
					&p->exec.classes.paced[t], 0,
					memory_order_relaxed);
			}
			staging_set_reserve(p->res.staging,
					    c->net.staging_latency_reserve);
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

/* A copy of len bytes at data for the progress thread (none for 0). */
static void cmd_set_data(struct cmd *c, const void *data, size_t len)
{
	if (!len)
		return;
	c->data = malloc(len);
	if (!c->data)
		abort();  /* as new_cmd */
	memcpy(c->data, data, len);
	c->len = len;
}

static void push_cmd(struct progress *p, enum cmd_kind kind,
		     struct prog_client *pc)
{
	struct cmd *c = new_cmd(kind);

	c->pc = pc;
	push(p, c);
}

void progress_push_stop(struct progress *p)
{
	push_cmd(p, CMD_STOP, NULL);
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
			  const struct rdma_peer_rail *rails, size_t nrails,
			  bool initiator, bool offer_lane)
{
	struct cmd *c = new_cmd(CMD_LINK_ATTACH);

	c->initiator = initiator;
	c->offer_lane = offer_lane;

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
	cmd_set_data(c, pending, pending_len);
	push(p, c);
}

void progress_lane_attach(struct progress *p, int fd,
			  const uint8_t id[LINK_ID_LEN],
			  const uint8_t secret[LINK_LANE_SECRET],
			  const void *pending, size_t pending_len)
{
	struct cmd *c = new_cmd(CMD_LANE_ATTACH);

	c->fd = fd;
	memcpy(c->id, id, LINK_ID_LEN);
	memcpy(c->secret, secret, LINK_LANE_SECRET);
	cmd_set_data(c, pending, pending_len);
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
	cmd_set_data(c, msg, len);
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


void progress_free_queues(struct progress *p)
{
	/* Commands queued behind STOP were never applied. */
	for (struct cmd *c = p->cmds, *next; c; c = next) {
		next = c->next;
		if (c->kind == CMD_LINK_ATTACH || c->kind == CMD_LANE_ATTACH)
			close(c->fd);
		free_cmd(c);
	}
	p->cmds = NULL;
	for (struct notice *n = p->notices, *next; n; n = next) {
		next = n->next;
		free(n);
	}
	p->notices = NULL;
	for (struct net_notice *n = p->net_notices, *next; n; n = next) {
		next = n->next;
		net_notice_free(n);
	}
	p->net_notices = NULL;
}
