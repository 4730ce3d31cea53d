/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma.c - one-sided RDMA WRITE and READ between xferds on RC queue
 * pairs (rdma.h says what and why; this file is how).
 *
 * About 1800 lines: the queue pairs' life (set-up over the link,
 * failure, redo), the posting of striped work requests and the reaping
 * of their completions share one ring per queue pair and one generation
 * rule, and the staged operations post on the same rings; the staging
 * part is the piece that could move to a file of its own next.
 *
 * Bookkeeping of a queue pair this side posts on: a ring of the work
 * requests out, oldest first, each with the operation it belongs to (or
 * NULL once that operation was cancelled), its bytes, and a reference to
 * the local region, so that memory the NIC may still touch is never
 * unmapped under it.  The wr_id of a work request names its queue pair's
 * slot in the table below, the slot's generation and the ring position:
 * a completion of a queue pair that was destroyed meanwhile is
 * recognised and ignored.
 *
 * Staged operations (ROUTE_RDMA_STAGED: xfer_reg'd memory, which no NIC
 * registration covers) move through the transport's own staging buffers:
 * one pool (mem/staging.h, not pinned for GPUs) made and registered with
 * every device at start, RDMA_STAGE_BYTES in chunks of at most
 * RDMA_STAGE_CHUNK (smaller when the memlock limit refuses that).  Each
 * staged work request asks for its own completion, so that a chunk comes
 * back the moment its request is done and the next pump refills it while
 * the others are on the wire.  (Posting each chunk the moment it is filled,
 * rather than with the pump's chain, measured slower under Soft-RoCE.)  A
 * WRITE's piece is copied into a send chunk (cma_copy) just before its
 * work request is staged; a READ's piece lands in a receive chunk and is
 * copied out when its completion retires it.  Each work request holds
 * its chunk in its ring entry, so the chunk outlives an operation that
 * ended early (cancelled, past its deadline, its queue pair failed): the
 * completion, or the queue pair's teardown, gives it back.  No chunk
 * free: the operation waits in order (one waiter per half, whose chunk
 * is kept as the spare until the next pump) and never fails for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <event2/event.h>
#include <infiniband/verbs.h>

#include "core/log.h"
#include "peer.pb-c.h"
#include "transport/rdma.h"
#include "transport/rdma_dev.h"
#include "transport/rdma_grant.h"
#include "transport/rdma_mr.h"
#include "mem/cma.h"
#include "mem/region.h"
#include "mem/staging.h"
#include "core/thread_stats.h"
#include "common/container_of.h"
#include "common/wire.h"
#include "xfer_ring.h"
#include "core/xop.h"

#define QP_SLOTS       1024    /* queue pairs at once, both directions */
#define POLL_BATCH     32
#define QP_TIMEOUT     16      /* 4.096 us * 2^16: 268 ms per retry */
#define QP_RETRIES     7
#define RD_ATOMIC_MAX  16      /* READs in flight per queue pair */
#define INLINE_WANTED  64      /* bytes asked for; the device may give less */
#define CONNECT_NS     (5000ull * 1000000)  /* for a QpAccept to come */
/* Passive queue pairs one peer may open here: as many as it could use. */
#define PASSIVE_MAX    (RDMA_PEER_RAILS * RDMA_QPS_MAX)
/* Staging buffers: 32 MiB in flight (half each way) covers a 100 Gb/s
 * link's bandwidth-delay product many times over; halved down to
 * RDMA_STAGE_MIN while registration is refused (memlock). */
#define RDMA_STAGE_BYTES (32u << 20)
#define RDMA_STAGE_CHUNK (256u << 10)
#define RDMA_STAGE_MIN   (2u << 20)

enum qp_state { QP_CONNECTING, QP_READY };

struct posted {
	struct xop *op;           /* NULL: cancelled, only the bytes remain */
	struct region *hold;      /* a reference to the local region */
	struct staging_chunk *chunk; /* staged: its buffer, given back here */
	uint64_t local_off;       /* staged READ: where its bytes go */
	uint64_t deadline_ns;
	uint32_t bytes;
	bool read;
};

struct rpeer;

struct rqp {
	struct rpeer *peer;
	int pair;                 /* index into peer->pair; -1: passive */
	int rail, dev;            /* ours */
	uint32_t peer_rail, slot;
	bool initiator;
	uint64_t epoch;
	uint64_t connect_by_ns;   /* initiator: QpAccept due by then */
	struct ibv_qp *qp;
	uint32_t psn, remote_qpn;
	uint32_t max_inline;
	uint32_t qp_num_was;      /* for the log, once destroyed */
	uint16_t index, gen;      /* in qp_table: the wr_id */
	/* initiator: work requests out are ring[tail..head), the last
	 * nstaged of them not posted yet (wr[0..nstaged)) */
	uint32_t head, tail, nstaged, since_signal;
	struct posted ring[RDMA_QP_DEPTH];
	struct ibv_send_wr wr[RDMA_QP_DEPTH];
	struct ibv_sge sge[RDMA_QP_DEPTH];
	struct rqp *next_dirty;
	bool dirty;
	struct rqp *next_passive;
	/* read by xferctl */
	_Atomic int state;
	_Atomic uint64_t bytes, wrs;
	_Atomic uint32_t outstanding;
	char peer_name[64];
};

struct rail_pair {
	int rail;                 /* ours */
	struct rdma_rail_addr mine;
	struct rdma_peer_rail theirs;
	bool failed;              /* the peer refused, or we could not */
};

struct rpeer {
	uint8_t id[LINK_ID_LEN];
	uint64_t gen;
	char name[64];
	struct rdma_peer_rail rails[RDMA_PEER_RAILS];
	size_t nrails;
	struct rail_pair pair[RDMA_PAIR_MAX];
	size_t npairs;
	struct rqp *out[RDMA_PAIR_MAX][RDMA_QPS_MAX];
	struct rqp *passive;
	unsigned npassive;
	unsigned rr;              /* next queue pair to try */
	uint64_t full_in_pass;    /* its queue pairs had no room in that pump */
	struct rpeer *next;
};

struct rdev {
	struct rdma_dev_verbs v;
	struct event *ev;         /* its completion channel */
	uint32_t outstanding;     /* work requests out (the CQ holds them) */
	uint8_t rd_atomic;
};

struct rdma;

/* Waiting for a staging chunk of one half (at most one waiter each). */
struct stage_wait {
	struct staging_waiter w;
	struct rdma *t;
	struct staging_chunk *spare;  /* handed over, not used yet */
	uint64_t starved;         /* the pump that found none */
};

struct rdma {
	struct event_base *base;
	struct linkset *links;
	struct mover_hooks hooks;
	struct rdma_cfg cfg;
	struct rdev dev[RDMA_DEV_MAX];
	int ndevs;
	struct rpeer *peers;
	struct xop_list waiting;  /* not all posted yet, in order */
	struct rqp *dirty;        /* with staged work requests */
	uint64_t epoch;
	uint64_t outstanding;     /* work requests out, all devices */
	unsigned redone;          /* operations retire() marked for redo */
	/* Test hook (XFERD_TEST_RDMA_SHIFT, unset in use): moved by this
	 * many bytes, every remote address plays a peer that ignores its
	 * token's range, for the owner's NIC to refuse (rdma_grant.h). */
	int64_t test_shift;
	/* Makes the grants of token ranges that peers check (rdma_grant.h). */
	struct rdma_grant_worker *grants;
	uint64_t pass;            /* pumps so far */
	bool submitted;           /* operations came since the last pump */
	/* A queue pair was taken down: its completions may still sit in a
	 * CQ, taking room there until polled away. */
	bool drain;
	/* Staging buffers (NULL: none could be registered: nothing goes
	 * staged), registered whole on every device. */
	struct staging_pool *stage;
	struct ibv_mr *stage_mr[RDMA_DEV_MAX];
	uint32_t stage_chunk;
	struct stage_wait swait[2];   /* by enum staging_half */
};

/* --- state xferctl reads: the queue pair table and rail counters --- */

static pthread_mutex_t qp_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rqp *qp_table[QP_SLOTS];
static uint16_t qp_gen[QP_SLOTS];

static struct {
	_Atomic uint32_t qps;
	_Atomic uint64_t bytes_tx, bytes_rx, wrs, errors;
} rail_stats[RDMA_RAIL_MAX];

static void stat_add64(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static int qp_slot_take(struct rqp *q)
{
	pthread_mutex_lock(&qp_lock);
	for (int i = 0; i < QP_SLOTS; i++) {
		if (qp_table[i])
			continue;
		qp_table[i] = q;
		q->index = (uint16_t)i;
		q->gen = ++qp_gen[i];
		pthread_mutex_unlock(&qp_lock);
		atomic_fetch_add_explicit(&rail_stats[q->rail].qps, 1,
					  memory_order_relaxed);
		return 0;
	}
	pthread_mutex_unlock(&qp_lock);
	return -ENOSPC;
}

static void qp_slot_free(struct rqp *q)
{
	pthread_mutex_lock(&qp_lock);
	qp_table[q->index] = NULL;
	pthread_mutex_unlock(&qp_lock);
	atomic_fetch_sub_explicit(&rail_stats[q->rail].qps, 1,
				  memory_order_relaxed);
}

void rdma_rail_stats(int rail, struct rdma_rail_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (rail < 0 || rail >= RDMA_RAIL_MAX)
		return;
	out->qps = atomic_load(&rail_stats[rail].qps);
	out->bytes_tx = atomic_load(&rail_stats[rail].bytes_tx);
	out->bytes_rx = atomic_load(&rail_stats[rail].bytes_rx);
	out->wrs = atomic_load(&rail_stats[rail].wrs);
	out->errors = atomic_load(&rail_stats[rail].errors);
}

size_t rdma_qp_list(int rail, struct rdma_qp_info *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&qp_lock);
	for (int i = 0; i < QP_SLOTS && n < max; i++) {
		const struct rqp *q = qp_table[i];
		if (!q || (rail >= 0 && q->rail != rail))
			continue;
		out[n] = (struct rdma_qp_info){
			.rail = q->rail,
			.peer_rail = q->peer_rail,
			.slot = q->slot,
			.initiator = q->initiator,
			.qpn = q->qp ? q->qp->qp_num : 0,
			.remote_qpn = q->remote_qpn,
			.state = atomic_load(&q->state) == QP_READY
					 ? "RTS" : "CONNECTING",
			.bytes = atomic_load(&q->bytes),
			.wrs = atomic_load(&q->wrs),
			.outstanding = atomic_load(&q->outstanding),
		};
		snprintf(out[n].peer, sizeof(out[n].peer), "%s", q->peer_name);
		n++;
	}
	pthread_mutex_unlock(&qp_lock);
	return n;
}

/* --- rail pairs --- */

size_t rdma_pair_rails(const struct rdma_rail_addr *mine, size_t nmine,
		       const struct rdma_peer_rail *theirs, size_t ntheirs,
		       int *local, int *peer, size_t max)
{
	bool taken[RDMA_PEER_RAILS] = { false };
	size_t n = 0;

	for (size_t i = 0; i < nmine && n < max; i++) {
		for (size_t j = 0; j < ntheirs && j < RDMA_PEER_RAILS; j++) {
			if (taken[j] ||
			    mine[i].infiniband != theirs[j].infiniband ||
			    !netaddr_same_subnet(&mine[i].addr, &theirs[j].addr))
				continue;
			taken[j] = true;
			local[n] = (int)i;
			peer[n] = (int)j;
			n++;
			break;
		}
	}
	return n;
}

/* --- peers --- */

static struct rpeer *find_peer(struct rdma *t, const uint8_t *id)
{
	for (struct rpeer *p = t->peers; p; p = p->next)
		if (memcmp(p->id, id, LINK_ID_LEN) == 0)
			return p;
	return NULL;
}

static struct rpeer *peer_of(struct rdma *t, const struct xop *op)
{
	return find_peer(t, region_token(op->remote)->instance_id);
}

/* --- ending operations --- */

static void op_end(struct rdma *t, struct xop *op, int64_t result)
{
	t->hooks.op_done(t->hooks.arg, op, result);
}

static void dequeue(struct rdma *t, struct xop *op)
{
	if (op->rdma.queued) {
		TAILQ_REMOVE(&t->waiting, op, q);
		op->rdma.queued = false;
	}
}

/* An operation ends once none of its work requests is out and either
 * all of it was posted or it failed. */
static void op_settle(struct rdma *t, struct xop *op)
{
	if (op->rdma.cancelled)
		return;  /* collected: whoever collected it ends it */
	if (op->rdma.redo && !op->rdma.error && op->rdma.wrs == 0) {
		/* Nothing of it is out any more: from the start, once. */
		op->rdma.redo = false;
		op->rdma.retried = true;
		op->rdma.posted = 0;
		if (!op->rdma.queued) {
			op->rdma.queued = true;
			TAILQ_INSERT_HEAD(&t->waiting, op, q);
		}
		return;
	}
	if (op->rdma.error)
		dequeue(t, op);
	if (op->rdma.wrs || (!op->rdma.error && (op->rdma.redo || op->rdma.posted < op->len)))
		return;
	op_end(t, op, op->rdma.error ? op->rdma.error : (int64_t)op->len);
}

static void op_fail(struct rdma *t, struct xop *op, int err)
{
	if (!op->rdma.error)
		op->rdma.error = err;
	op_settle(t, op);
}

/* --- queue pairs --- */

static const char *peer_label(const struct rqp *q)
{
	return q->peer_name[0] ? q->peer_name : "peer";
}

/* --- staging buffers --- */

/* len bytes between local region r at off and staging memory p: into
 * p (to_chunk) or out of it.  Returns len or -errno (cma.h). */
static int64_t stage_copy(struct region *r, uint64_t off, void *p,
			  uint32_t len, bool to_chunk)
{
	if (region_kind(r) == REGION_CMA)
		return cma_copy(r, !to_chunk, p, off, len);
	/* memfd memory not registered (yet): xferd's own mapping */
	if (to_chunk)
		memcpy(p, region_map_at(r, off), len);
	else
		memcpy(region_map_at(r, off), p, len);
	return len;
}

/* A chunk came back while we waited: kept for the next pump. */
static void stage_ready(struct staging_waiter *w, struct staging_chunk *c)
{
	struct stage_wait *sw = container_of(w, struct stage_wait, w);

	sw->spare = c;
	sw->t->submitted = true;  /* rdma_poll pumps again */
}

/* A chunk of half h, or NULL (then one is on its way: wait). */
static struct staging_chunk *stage_take(struct rdma *t, enum staging_half h)
{
	struct stage_wait *sw = &t->swait[h];
	struct staging_chunk *c = sw->spare;

	if (c) {
		sw->spare = NULL;
		return c;
	}
	if ((c = staging_take(t->stage, h)))
		return c;
	staging_wait(t->stage, h, &sw->w);
	sw->starved = t->pass;
	return NULL;
}

static void stage_close(struct rdma *t)
{
	int rc;

	for (int h = 0; h < 2; h++) {
		if (!t->stage)
			break;
		staging_cancel(t->stage, &t->swait[h].w);
		if (t->swait[h].spare)
			staging_give(t->swait[h].spare);
		t->swait[h].spare = NULL;
	}
	for (int d = 0; d < RDMA_DEV_MAX; d++) {
		if (t->stage_mr[d] && (rc = ibv_dereg_mr(t->stage_mr[d])))
			log_warnx("RDMA: ibv_dereg_mr of the staging buffers: "
				  "%s", strerror(rc));
		t->stage_mr[d] = NULL;
	}
	staging_destroy(t->stage);
	t->stage = NULL;
}

/* Register every chunk of a fresh pool (one mapping) on every device. */
static int stage_register(struct rdma *t)
{
	struct staging_chunk_list all = TAILQ_HEAD_INITIALIZER(all);
	struct staging_chunk *c;
	uint8_t *lo = NULL, *hi = NULL;
	int err = 0;

	for (int h = 0; h < 2; h++)
		while ((c = staging_take(t->stage, (enum staging_half)h))) {
			if (!lo || c->p < lo)
				lo = c->p;
			if (!hi || c->p + c->cap > hi)
				hi = c->p + c->cap;
			TAILQ_INSERT_TAIL(&all, c, q);
		}
	for (int d = 0; d < t->ndevs && lo; d++) {
		if (!t->dev[d].v.pd)
			continue;
		t->stage_mr[d] = ibv_reg_mr(t->dev[d].v.pd, lo,
					    (size_t)(hi - lo),
					    IBV_ACCESS_LOCAL_WRITE);
		if (!t->stage_mr[d]) {
			err = errno ? -errno : -ENOMEM;
			break;
		}
	}
	while ((c = TAILQ_FIRST(&all))) {
		TAILQ_REMOVE(&all, c, q);
		staging_give(c);
	}
	return err;
}

/* The staging buffers, once, at start; without them nothing is staged
 * (xfer_reg'd memory goes over TCP). */
static void stage_open(struct rdma *t)
{
	int err = -ENOMEM;

	for (int h = 0; h < 2; h++)
		t->swait[h] = (struct stage_wait){
			.w = { .ready = stage_ready }, .t = t };
	for (uint32_t bytes = RDMA_STAGE_BYTES; bytes >= RDMA_STAGE_MIN;
	     bytes /= 2) {
		/* at least 4 chunks each way */
		uint32_t chunk = bytes / 8 < RDMA_STAGE_CHUNK ? bytes / 8
							      : RDMA_STAGE_CHUNK;
		if (!(t->stage = staging_create(bytes, chunk, false)))
			continue;
		if (!(err = stage_register(t))) {
			t->stage_chunk = chunk;
			log_info("RDMA staging buffers: %u KiB in chunks of %u "
				 "KiB", bytes >> 10, chunk >> 10);
			return;
		}
		stage_close(t);
	}
	log_warnx("RDMA: no staging buffers (%s; memlock limit?): "
		  "xfer_reg'd memory goes over TCP", strerror(-err));
}

/*
 * The work requests in [tail, upto] are done (err 0) or failed.  When
 * one operation's request broke the queue pair (culprit), the others'
 * requests on it were only flushed: those operations are redone whole
 * (WRITE and READ may be repeated), once, rather than failing because
 * of another client's descriptor.
 */
static void retire(struct rdma *t, struct rqp *q, uint32_t upto, int err,
		   const struct xop *culprit)
{
	while ((int32_t)(upto - q->tail) >= 0 && q->tail != q->head) {
		struct posted *e = &q->ring[q->tail % RDMA_QP_DEPTH];
		struct xop *op = e->op;

		q->tail++;
		t->dev[q->dev].outstanding--;
		t->outstanding--;
		atomic_fetch_sub_explicit(&q->outstanding, 1,
					  memory_order_relaxed);
		if (!err) {
			stat_add64(&q->bytes, e->bytes);
			stat_add64(e->read ? &rail_stats[q->rail].bytes_rx
					   : &rail_stats[q->rail].bytes_tx,
				   e->bytes);
		}
		if (e->chunk) {
			/* A READ's bytes go where they belong only while
			 * its operation still wants them. */
			if (!err && e->read && op && !op->rdma.error) {
				int64_t rc = stage_copy(op->local, e->local_off,
							e->chunk->p, e->bytes,
							false);
				if (rc < 0)
					op->rdma.error = (int)rc;
			}
			staging_give(e->chunk);
			e->chunk = NULL;
		}
		region_put(e->hold);
		e->hold = NULL;
		e->op = NULL;
		if (!op)
			continue;
		op->rdma.wrs--;
		if (err && culprit && op != culprit && !op->rdma.retried) {
			if (!op->rdma.redo)
				t->redone++;
			op->rdma.redo = true;
		}
		else if (err && !op->rdma.error)
			op->rdma.error = err;
		op_settle(t, op);
	}
}

/* The NIC stops working on q's requests; its completions still in a CQ
 * are recognised as stale (the slot's generation moves on). */
static void qp_stop(struct rqp *q)
{
	int rc;

	qp_slot_free(q);
	if (q->qp)
		q->qp_num_was = q->qp->qp_num;
	if (q->qp && (rc = ibv_destroy_qp(q->qp)))
		log_warnx("RDMA: ibv_destroy_qp: %s", strerror(rc));
	q->qp = NULL;
}

static void qp_free(struct rdma *t, struct rqp *q)
{
	(void)t;
	if (q->qp)
		qp_stop(q);
	free(q);
}

/* Take q down: what it has out fails with err, and it is forgotten (the
 * next operation toward its peer opens a new one). */
static void qp_fail_by(struct rdma *t, struct rqp *q, int err,
		       const struct xop *culprit)
{
	struct rpeer *p = q->peer;

	if (q->dirty) {
		/* Staged work requests were never posted: drop them too. */
		for (struct rqp **pp = &t->dirty; *pp; pp = &(*pp)->next_dirty)
			if (*pp == q) {
				*pp = q->next_dirty;
				break;
			}
		q->dirty = false;
	}
	q->nstaged = 0;
	if (q->pair >= 0)
		p->out[q->pair][q->slot] = NULL;
	/* The NIC first: a READ must not land in memory whose operation
	 * already failed back to its client.  Nothing new is posted on q
	 * once it is out of p->out. */
	qp_stop(q);
	t->redone = 0;
	retire(t, q, q->head - 1, err, culprit);
	if (t->redone)
		log_info("RDMA: %u operation%s of other descriptors on QP %u "
			 "to %s redone", t->redone, t->redone == 1 ? "" : "s",
			 q->qp_num_was, peer_label(q));
	free(q);
	t->drain = true;
}

static void qp_fail(struct rdma *t, struct rqp *q, int err)
{
	qp_fail_by(t, q, err, NULL);
}

/* What a new queue pair is, set before xferctl can see it. */
struct qp_role {
	int pair;                 /* -1: passive */
	uint32_t peer_rail, slot;
	uint64_t epoch;
};

static int qp_create(struct rdma *t, struct rpeer *p, int rail,
		     const struct qp_role *role, struct rqp **out)
{
	struct rdma_rail_addr ra;
	struct rqp *q;
	int err;

	if ((err = rdma_dev_rail_addr(rail, &ra)))
		return err;
	if (!(q = calloc(1, sizeof(*q))))
		return -ENOMEM;
	q->peer = p;
	q->pair = role->pair;
	q->initiator = role->pair >= 0;
	q->peer_rail = role->peer_rail;
	q->slot = role->slot;
	q->epoch = role->epoch;
	q->rail = rail;
	q->dev = ra.dev;
	atomic_init(&q->state, QP_CONNECTING);
	snprintf(q->peer_name, sizeof(q->peer_name), "%s", p->name);
	struct ibv_qp_init_attr ia = {
		.send_cq = t->dev[ra.dev].v.cq,
		.recv_cq = t->dev[ra.dev].v.cq,
		.cap = {
			.max_send_wr = RDMA_QP_DEPTH,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = INLINE_WANTED,
		},
		.qp_type = IBV_QPT_RC,
	};
	q->qp = ibv_create_qp(t->dev[ra.dev].v.pd, &ia);
	if (!q->qp) {
		/* Some devices have no inline data at all. */
		ia.cap.max_inline_data = 0;
		q->qp = ibv_create_qp(t->dev[ra.dev].v.pd, &ia);
	}
	if (!q->qp) {
		err = -errno;
		log_warn("RDMA: ibv_create_qp on rail %d", rail);
		free(q);
		return err ? err : -ENOMEM;
	}
	q->max_inline = ia.cap.max_inline_data;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = ra.port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};
	if ((err = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				 IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))) {
		log_warnx("RDMA: QP to INIT: %s", strerror(err));
		ibv_destroy_qp(q->qp);
		free(q);
		return -err;
	}
	uint32_t psn;
	if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn))
		psn = (uint32_t)(uintptr_t)q;
	q->psn = psn & 0xffffff;
	if ((err = qp_slot_take(q))) {
		ibv_destroy_qp(q->qp);
		free(q);
		return err;
	}
	*out = q;
	return 0;
}

/* Our end of q as the peer needs it (e points into ra). */
static void end_of(const struct rdma *t, const struct rqp *q,
		   const struct rdma_rail_addr *ra, Xfer__Peer__QpEnd *e)
{
	xfer__peer__qp_end__init(e);
	e->qpn = q->qp->qp_num;
	e->psn = q->psn;
	e->gid.data = (uint8_t *)ra->gid;
	e->gid.len = 16;
	e->lid = ra->lid;
	e->mtu = (uint32_t)ra->mtu;
	e->rd_atomic = t->dev[q->dev].rd_atomic;
}

static bool end_valid(const Xfer__Peer__QpEnd *e)
{
	return e && e->gid.len == 16 && e->mtu >= IBV_MTU_256 &&
	       e->mtu <= IBV_MTU_4096 && e->lid <= 0xffff &&
	       e->qpn <= 0xffffff && e->psn <= 0xffffff;
}

/* The other end's attributes (end_valid): INIT -> RTR -> RTS.  Its
 * rd_atomic caps the READs our end keeps in flight. */
static int qp_connect(struct rdma *t, struct rqp *q,
		      const Xfer__Peer__QpEnd *e)
{
	uint8_t ours = t->dev[q->dev].rd_atomic;
	uint8_t out = e->rd_atomic && e->rd_atomic < ours ? (uint8_t)e->rd_atomic
							   : ours;
	int mtu = (int)e->mtu;
	struct rdma_rail_addr ra;
	int err;

	if ((err = rdma_dev_rail_addr(q->rail, &ra)))
		return err;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = (enum ibv_mtu)(mtu < ra.mtu ? mtu : ra.mtu),
		.dest_qp_num = e->qpn,
		.rq_psn = e->psn,
		.max_dest_rd_atomic = t->dev[q->dev].rd_atomic,
		.min_rnr_timer = 12,
		.ah_attr = {
			/* RoCE is routed (UDP/IP): always a GRH; IB within
			 * its subnet is addressed by LID. */
			.is_global = ra.infiniband ? 0 : 1,
			.dlid = (uint16_t)e->lid,
			.port_num = ra.port,
			.grh = {
				.sgid_index = (uint8_t)ra.gid_index,
				.hop_limit = 64,
			},
		},
	};
	memcpy(a.ah_attr.grh.dgid.raw, e->gid.data, 16);
	if ((err = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_AV |
				 IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				 IBV_QP_MIN_RNR_TIMER))) {
		log_warnx("RDMA: QP %u to RTR: %s", q->qp->qp_num,
			  strerror(err));
		return -err;
	}
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS,
		.timeout = QP_TIMEOUT,
		.retry_cnt = QP_RETRIES,
		.rnr_retry = 7,
		.sq_psn = q->psn,
		.max_rd_atomic = out,
	};
	if ((err = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))) {
		log_warnx("RDMA: QP %u to RTS: %s", q->qp->qp_num,
			  strerror(err));
		return -err;
	}
	pthread_mutex_lock(&qp_lock);
	q->remote_qpn = e->qpn;
	pthread_mutex_unlock(&qp_lock);
	atomic_store(&q->state, QP_READY);
	return 0;
}

static void send_msg(struct rdma *t, const uint8_t *id,
		     Xfer__Peer__PeerMsg *m)
{
	uint8_t buf[512];

	m->proto_version = XFER_PROTO_VERSION;
	size_t len = xfer__peer__peer_msg__get_packed_size(m);

	if (len > sizeof(buf))
		return;
	xfer__peer__peer_msg__pack(m, buf);
	linkset_send_ctl(t->links, id, buf, len);
}

/* Open queue pair `slot` of rail pair i toward p: QpConnect, and the
 * rest when QpAccept comes. */
static int open_out(struct rdma *t, struct rpeer *p, int i, uint32_t slot)
{
	struct rail_pair *rp = &p->pair[i];
	const struct qp_role role = { .pair = i, .peer_rail = rp->theirs.index,
				      .slot = slot, .epoch = ++t->epoch };
	struct rqp *q;
	int err = qp_create(t, p, rp->rail, &role, &q);

	if (err)
		return err;
	q->connect_by_ns = now_ns() + CONNECT_NS;
	p->out[i][slot] = q;

	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__QpConnect c = XFER__PEER__QP_CONNECT__INIT;
	c.rail = (uint32_t)rp->rail;
	c.peer_rail = rp->theirs.index;
	c.slot = slot;
	c.epoch = q->epoch;
	Xfer__Peer__QpEnd end;
	end_of(t, q, &rp->mine, &end);
	c.end = &end;
	m.body_case = XFER__PEER__PEER_MSG__BODY_QP_CONNECT;
	m.qp_connect = &c;
	send_msg(t, p->id, &m);
	return 0;
}

/* Every queue pair p should have is open or on its way.  False if no
 * rail pair can carry anything. */
static bool ensure_qps(struct rdma *t, struct rpeer *p)
{
	bool any = false;

	for (size_t i = 0; i < p->npairs; i++) {
		struct rail_pair *rp = &p->pair[i];
		if (rp->failed)
			continue;
		for (uint32_t s = 0; s < t->cfg.qps; s++) {
			if (p->out[i][s])
				continue;
			int err = open_out(t, p, (int)i, s);
			if (err) {
				log_warnx("RDMA: rail %d to %s: cannot open "
					  "a queue pair: %s; TCP instead",
					  rp->rail, p->name, strerror(-err));
				rp->failed = true;
				break;
			}
		}
		any |= !rp->failed;
	}
	return any;
}

/* --- posting --- */

/* Can rail pair rp carry op: the owner's rkey on its device, and ours
 * of the local memory (staged: of the staging buffers)? */
static bool pair_usable(const struct rdma *t, const struct rpeer *p,
			const struct rail_pair *rp, const struct xop *op,
			bool staged, uint32_t *lkey, uint32_t *rkey)
{
	const struct region_rdma *rr = region_rdma(op->remote);

	if (rp->failed || rp->theirs.device >= rr->nkeys ||
	    !rr->rkey[rp->theirs.device])
		return false;
	/* A grant ended with the link it was made on. */
	if (rr->grant && rr->link_gen != p->gen)
		return false;
	*rkey = rr->rkey[rp->theirs.device];
	if (staged) {
		const struct ibv_mr *mr = t->stage_mr[rp->mine.dev];
		if (!mr)
			return false;
		*lkey = mr->lkey;
		return true;
	}
	return rdma_mr_keys(op->local, rp->mine.dev, lkey, NULL);
}

/* The next ready queue pair toward p with room, round-robin. */
static struct rqp *next_qp(struct rdma *t, struct rpeer *p)
{
	unsigned n = (unsigned)p->npairs * t->cfg.qps;

	for (unsigned k = 0; k < n; k++) {
		unsigned i = p->rr++ % n;
		struct rqp *q = p->out[i / t->cfg.qps][i % t->cfg.qps];
		if (!q || p->pair[i / t->cfg.qps].failed ||
		    atomic_load_explicit(&q->state, memory_order_relaxed) !=
			    QP_READY)
			continue;
		if (q->head - q->tail >= RDMA_QP_DEPTH ||
		    t->dev[q->dev].outstanding >=
			    (uint32_t)t->dev[q->dev].v.cq_depth)
			continue;
		return q;
	}
	return NULL;
}

/* One work request of op's next len bytes on q; from or into chunk c
 * when staged (a WRITE's bytes already copied in). */
static void stage(struct rdma *t, struct rqp *q, struct xop *op,
		  uint32_t lkey, uint32_t rkey, uint32_t len,
		  struct staging_chunk *c)
{
	bool read = op->opcode == XFER_OP_READ;
	uint32_t pos = q->head++;
	struct posted *e = &q->ring[pos % RDMA_QP_DEPTH];
	struct ibv_sge *sge = &q->sge[q->nstaged];
	struct ibv_send_wr *wr = &q->wr[q->nstaged];
	const struct token *tok = region_token(op->remote);

	region_get(op->local);
	*e = (struct posted){
		.op = op,
		.hold = op->local,
		.deadline_ns = op->deadline_ns,
		.bytes = len,
		.read = read,
		.chunk = c,
		.local_off = op->local_off + op->rdma.posted,
	};
	*sge = (struct ibv_sge){
		.addr = c ? (uint64_t)(uintptr_t)c->p
			  : (uint64_t)(uintptr_t)region_map_at(
				    op->local, op->local_off + op->rdma.posted),
		.length = len,
		.lkey = lkey,
	};
	*wr = (struct ibv_send_wr){
		.wr_id = (uint64_t)q->index << 48 | (uint64_t)q->gen << 32 | pos,
		.sg_list = sge,
		.num_sge = 1,
		.opcode = read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
		.wr.rdma = {
			.remote_addr = region_rdma(op->remote)->addr + tok->offset +
				       op->remote_off + op->rdma.posted +
				       (uint64_t)t->test_shift,
			.rkey = rkey,
		},
	};
	if (!read && len <= q->max_inline)
		wr->send_flags |= IBV_SEND_INLINE;
	/* A staged request's completion gives its chunk back: each asks
	 * for one, so that chunks return one by one, not a batch late. */
	if (++q->since_signal >= RDMA_SIGNAL_EVERY || c) {
		wr->send_flags |= IBV_SEND_SIGNALED;
		q->since_signal = 0;
	}
	q->nstaged++;
	op->rdma.posted += len;
	op->rdma.wrs++;
	t->dev[q->dev].outstanding++;
	t->outstanding++;
	atomic_fetch_add_explicit(&q->outstanding, 1, memory_order_relaxed);
	if (!q->dirty) {
		q->dirty = true;
		q->next_dirty = t->dirty;
		t->dirty = q;
	}
}

/* Post what q has staged, as one chain; its last work request asks for
 * a completion, so every one is accounted for.  False: the post failed
 * (logged); the caller takes q down. */
static bool post_chain(struct rqp *q)
{
	struct ibv_send_wr *bad = NULL;
	uint32_t n = q->nstaged;

	q->nstaged = 0;  /* the device copied the requests: wr[] is free */
	if (n == 0)
		return true;
	for (uint32_t i = 0; i + 1 < n; i++)
		q->wr[i].next = &q->wr[i + 1];
	q->wr[n - 1].next = NULL;
	if (!(q->wr[n - 1].send_flags & IBV_SEND_SIGNALED)) {
		q->wr[n - 1].send_flags |= IBV_SEND_SIGNALED;
		q->since_signal = 0;
	}
	int rc = ibv_post_send(q->qp, q->wr, &bad);
	stat_add64(&q->wrs, n);
	stat_add64(&rail_stats[q->rail].wrs, n);
	if (rc) {
		log_warnx("RDMA: ibv_post_send on QP %u to %s: %s",
			  q->qp->qp_num, peer_label(q), strerror(rc));
		stat_add64(&rail_stats[q->rail].errors, 1);
		return false;
	}
	return true;
}

/* Post what each queue pair has staged. */
static void flush(struct rdma *t)
{
	while (t->dirty) {
		struct rqp *q = t->dirty;

		t->dirty = q->next_dirty;
		q->dirty = false;
		if (!post_chain(q))
			qp_fail(t, q, -EIO);
	}
}

/* Rail pair i toward p cannot carry anything: its queue pairs close
 * and it is not used again while the link lasts. */
static void fail_pair(struct rdma *t, struct rpeer *p, size_t i, int err)
{
	p->pair[i].failed = true;
	for (uint32_t s = 0; s < RDMA_QPS_MAX; s++)
		if (p->out[i][s])
			qp_fail(t, p->out[i][s], err);
}

/* op cannot go by RDMA after all: handed back (TCP moves it) if
 * nothing of it went out yet, else it fails.  Either way it is no longer this
 * transport's to touch. */
static void to_tcp_or_fail(struct rdma *t, struct xop *op)
{
	if (op->rdma.posted || op->rdma.wrs || op->rdma.error) {
		op_fail(t, op, -EIO);
		return;
	}
	dequeue(t, op);
	/* The executor offers it to the next route. */
	t->hooks.reroute(t->hooks.arg, op);
}

/* Some queue pair toward p is still on its way: posting now would put
 * a first large transfer on the one that happened to be ready first. */
static bool connecting(const struct rdma *t, const struct rpeer *p)
{
	for (size_t i = 0; i < p->npairs; i++)
		for (uint32_t s = 0; s < t->cfg.qps; s++)
			if (p->out[i][s] &&
			    atomic_load_explicit(&p->out[i][s]->state,
						 memory_order_relaxed) ==
				    QP_CONNECTING)
				return true;
	return false;
}

/* Cut waiting operations into work requests while queue pairs have
 * room; post them. */
static void pump(struct rdma *t)
{
	struct xop *op, *next;

	t->pass++;
	t->submitted = false;
	for (op = TAILQ_FIRST(&t->waiting); op; op = next) {
		next = TAILQ_NEXT(op, q);
		struct rpeer *p = peer_of(t, op);
		if (!p) {
			op_fail(t, op, -ECONNRESET);
			continue;
		}
		if (p->full_in_pass == t->pass)
			continue;  /* no room toward p: its later ops wait too */
		if (!ensure_qps(t, p)) {
			to_tcp_or_fail(t, op);
			continue;
		}
		if (connecting(t, p))
			continue;
		bool read = op->opcode == XFER_OP_READ;
		enum staging_half h = read ? STAGING_RECV : STAGING_SEND;
		/* Staged operations take chunks in order: none overtakes
		 * one that found no chunk in this pump. */
		if (op->rdma.staged && t->swait[h].starved == t->pass)
			continue;
		bool gone = false;
		while (op->rdma.posted < op->len) {
			struct rqp *q = next_qp(t, p);
			struct staging_chunk *c = NULL;
			uint32_t lkey, rkey;
			if (!q) {
				p->full_in_pass = t->pass;
				break;
			}
			if (!pair_usable(t, p, &p->pair[q->pair], op,
					 op->rdma.staged, &lkey, &rkey)) {
				/* Its import lost its keys (a remote access
				 * error): the owner must be asked over TCP. */
				to_tcp_or_fail(t, op);
				gone = true;
				break;
			}
			uint64_t left = op->len - op->rdma.posted;
			uint64_t len = left < t->cfg.stripe ? left : t->cfg.stripe;
			if (op->rdma.staged) {
				if (len > t->stage_chunk)
					len = t->stage_chunk;
				if (!(c = stage_take(t, h)))
					break;  /* the spare comes: waits */
				int64_t rc = read ? 0 : stage_copy(op->local,
					op->local_off + op->rdma.posted, c->p,
					(uint32_t)len, true);
				if (rc < 0) {
					staging_give(c);
					op_fail(t, op, (int)rc);
					gone = true;
					break;
				}
			}
			stage(t, q, op, lkey, rkey, (uint32_t)len, c);
		}
		if (!gone && op->rdma.posted == op->len)
			dequeue(t, op);
	}
	flush(t);
}

/* --- completions --- */

static void on_wc(struct rdma *t, const struct ibv_wc *wc)
{
	unsigned slot = (unsigned)(wc->wr_id >> 48);
	uint16_t gen = (uint16_t)(wc->wr_id >> 32);
	struct rqp *q = slot < QP_SLOTS ? qp_table[slot] : NULL;

	/* The table changes on this thread only: no lock to read it. */
	if (!q || q->gen != gen)
		return;  /* of a queue pair taken down meanwhile */
	if (wc->status != IBV_WC_SUCCESS) {
		/* wc->opcode is undefined in a failed completion. */
		const struct posted *e =
			&q->ring[(uint32_t)wc->wr_id % RDMA_QP_DEPTH];
		log_warnx("RDMA: %s on QP %u to %s (rail %d): %s "
			  "(vendor error 0x%x); queue pair closed",
			  e->read ? "READ" : "WRITE",
			  q->qp->qp_num, peer_label(q), q->rail,
			  ibv_wc_status_str(wc->status), wc->vendor_err);
		stat_add64(&rail_stats[q->rail].errors, 1);
		/* The owner no longer grants that memory (deregistered):
		 * later uses of the import go by TCP, which says why. */
		if ((wc->status == IBV_WC_REM_ACCESS_ERR ||
		     wc->status == IBV_WC_REM_INV_REQ_ERR) && e->op &&
		    region_rdma(e->op->remote))
			region_rdma(e->op->remote)->nkeys = 0;
		/* A flushed request broke nothing: it only says the QP is
		 * in error already.  Another's request did the harm. */
		qp_fail_by(t, q, -EIO,
			   wc->status == IBV_WC_WR_FLUSH_ERR ? NULL : e->op);
		return;
	}
	retire(t, q, (uint32_t)wc->wr_id, 0, NULL);
}

bool rdma_poll(struct rdma *t)
{
	struct ibv_wc wc[POLL_BATCH];
	bool progress = false;

	if (!t)
		return false;
	/* What this pass's drain submitted goes out now, chained: one post
	 * per queue pair for a whole vector, not one per descriptor. */
	if (t->submitted) {
		pump(t);
		progress = true;
	}
	if (t->outstanding == 0 && !t->drain)
		return progress;
	bool drained = t->outstanding == 0;
	for (int d = 0; d < t->ndevs; d++) {
		int n = ibv_poll_cq(t->dev[d].v.cq, POLL_BATCH, wc);
		if (n < 0) {
			log_warnx("RDMA: ibv_poll_cq failed");
			continue;
		}
		for (int i = 0; i < n; i++)
			on_wc(t, &wc[i]);
		progress |= n > 0;
		drained &= n == 0;
	}
	if (drained)
		t->drain = false;
	if (progress && !TAILQ_EMPTY(&t->waiting))
		pump(t);
	return progress;
}

bool rdma_busy(const struct rdma *t)
{
	return t && t->outstanding > 0;
}

bool rdma_arm(struct rdma *t)
{
	if (!t || t->outstanding == 0)
		return true;
	for (int d = 0; d < t->ndevs; d++)
		if (t->dev[d].outstanding &&
		    ibv_req_notify_cq(t->dev[d].v.cq, 0))
			log_warnx("RDMA: ibv_req_notify_cq failed");
	/* Completions that came before the request raise no event. */
	return !rdma_poll(t);
}

static void on_channel(evutil_socket_t fd, short what, void *arg)
{
	struct rdev *d = arg;
	struct ibv_cq *cq;
	void *ctx;
	(void)fd, (void)what;

	while (ibv_get_cq_event(d->v.channel, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
	/* The thread's loop polls the CQ next. */
}

/* --- the transport's operations --- */

static bool rdma_accepts(void *impl, const struct xop *op)
{
	struct rdma *t = impl;
	uint32_t lkey, rkey;

	if ((op->opcode != XFER_OP_WRITE && op->opcode != XFER_OP_READ) ||
	    op->len == 0 || !op->local || region_kind(op->local) != REGION_MEMFD ||
	    !region_nic_mr(op->local) || !region_rdma(op->remote))
		return false;
	struct rpeer *p = peer_of(t, op);
	if (!p || p->npairs == 0)
		return false;
	for (size_t i = 0; i < p->npairs; i++)
		if (!pair_usable(t, p, &p->pair[i], op, false, &lkey, &rkey))
			return false;
	return true;
}

/* Through the staging buffers: host memory here that no NIC registration
 * covers (xfer_reg'd, or memfd not registered), toward a region the
 * owner registered (its rkeys), on every rail pair to it. */
static bool rdma_stage_accepts(void *impl, const struct xop *op)
{
	struct rdma *t = impl;
	uint32_t lkey, rkey;

	if (!t->stage ||
	    (op->opcode != XFER_OP_WRITE && op->opcode != XFER_OP_READ) ||
	    op->len == 0 || !op->local || !region_rdma(op->remote))
		return false;
	enum region_kind k = region_kind(op->local);
	if (k != REGION_CMA && (k != REGION_MEMFD || region_nic_mr(op->local)))
		return false;
	struct rpeer *p = peer_of(t, op);
	if (!p || p->npairs == 0)
		return false;
	for (size_t i = 0; i < p->npairs; i++)
		if (!pair_usable(t, p, &p->pair[i], op, true, &lkey, &rkey))
			return false;
	return true;
}

static void rdma_submit(void *impl, struct xop *op)
{
	struct rdma *t = impl;

	op->path = XFER_PATH_RDMA;
	op->rdma.staged = false;
	op->rdma.posted = 0;
	op->rdma.wrs = 0;
	op->rdma.error = 0;
	op->rdma.cancelled = false;
	op->rdma.redo = false;
	op->rdma.retried = false;
	op->rdma.queued = true;
	TAILQ_INSERT_TAIL(&t->waiting, op, q);
	t->submitted = true;  /* posted by rdma_poll, after the drain */
}

static void rdma_stage_submit(void *impl, struct xop *op)
{
	rdma_submit(impl, op);
	op->path = XFER_PATH_RDMA_STAGED;
	op->rdma.staged = true;
}

/* Collect op (once) for ending with an error after the walk. */
static void collect(struct rdma *t, struct xop_list *l, struct xop *op)
{
	if (op->rdma.cancelled)
		return;
	op->rdma.cancelled = true;
	dequeue(t, op);
	TAILQ_INSERT_TAIL(l, op, q);
}

static void rdma_cancel_client(void *impl, const struct prog_client *pc)
{
	struct rdma *t = impl;
	struct xop_list l = TAILQ_HEAD_INITIALIZER(l);
	struct xop *op, *next;

	/* Work requests out stay out (the NIC may still be at them, and
	 * their entries keep the local region): they just no longer
	 * belong to an operation. */
	for (struct rpeer *p = t->peers; p; p = p->next)
		for (size_t i = 0; i < p->npairs; i++)
			for (uint32_t s = 0; s < RDMA_QPS_MAX; s++) {
				struct rqp *q = p->out[i][s];
				for (uint32_t k = q ? q->tail : 0;
				     q && k != q->head; k++) {
					struct posted *e =
						&q->ring[k % RDMA_QP_DEPTH];
					if (!e->op || e->op->pc != pc)
						continue;
					e->op->rdma.wrs--;
					collect(t, &l, e->op);
					e->op = NULL;
				}
			}
	for (op = TAILQ_FIRST(&t->waiting); op; op = next) {
		next = TAILQ_NEXT(op, q);
		if (op->pc == pc)
			collect(t, &l, op);
	}
	while ((op = TAILQ_FIRST(&l))) {
		TAILQ_REMOVE(&l, op, q);
		op_end(t, op, -ECANCELED);
	}
}

/*
 * Deadlines.  A WRITE past its deadline is let go of: its work requests
 * stay out (their entries keep the local region) and it fails now.  A
 * READ past its deadline closes its queue pair, so that no data lands
 * after its client was told it failed.  A queue pair whose QpAccept did
 * not come in time gives its rail pair up.  (A peer that stops
 * answering fails the queue pair by itself: RC retries run out.)
 */
static bool rdma_expire(void *impl, uint64_t now)
{
	struct rdma *t = impl;
	struct xop_list late = TAILQ_HEAD_INITIALIZER(late);
	struct xop *op, *next;
	bool any = false;

	for (struct rpeer *p = t->peers; p; p = p->next)
		for (size_t i = 0; i < p->npairs; i++)
			for (uint32_t s = 0; s < RDMA_QPS_MAX; s++) {
				struct rqp *q = p->out[i][s];
				if (q && atomic_load(&q->state) == QP_CONNECTING &&
				    q->connect_by_ns <= now) {
					log_warnx("RDMA: %s did not accept a queue "
						  "pair on rail %d in time; TCP "
						  "instead", p->name, q->rail);
					fail_pair(t, p, i, -ETIMEDOUT);
					any = true;
					break;
				}
				for (uint32_t k = q ? q->tail : 0;
				     q && k != q->head; k++) {
					struct posted *e =
						&q->ring[k % RDMA_QP_DEPTH];
					if (!e->op || e->deadline_ns > now)
						continue;
					if (e->read) {
						log_warnx("RDMA: READ on QP %u to "
							  "%s past its deadline; "
							  "queue pair closed",
							  q->qp->qp_num,
							  peer_label(q));
						qp_fail(t, q, -ETIMEDOUT);
						any = true;
						break;
					}
					e->op->rdma.wrs--;
					collect(t, &late, e->op);
					e->op = NULL;
				}
			}
	for (op = TAILQ_FIRST(&t->waiting); op; op = next) {
		next = TAILQ_NEXT(op, q);
		if (op->deadline_ns <= now)
			collect(t, &late, op);
	}
	while ((op = TAILQ_FIRST(&late))) {
		TAILQ_REMOVE(&late, op, q);
		op->rdma.cancelled = false;
		if (!op->rdma.error)
			op->rdma.error = -ETIMEDOUT;
		op_settle(t, op);
		any = true;
	}
	if (!TAILQ_EMPTY(&t->waiting))
		pump(t);
	return any;
}


/* --- peers coming and going --- */

static void peer_teardown(struct rdma *t, struct rpeer *p, int err)
{
	struct xop *op, *next;

	for (size_t i = 0; i < RDMA_PAIR_MAX; i++)
		for (uint32_t s = 0; s < RDMA_QPS_MAX; s++)
			if (p->out[i][s])
				qp_fail(t, p->out[i][s], err);
	while (p->passive) {
		struct rqp *q = p->passive;
		p->passive = q->next_passive;
		qp_free(t, q);
	}
	p->npassive = 0;
	for (op = TAILQ_FIRST(&t->waiting); op; op = next) {
		next = TAILQ_NEXT(op, q);
		if (peer_of(t, op) == p)
			op_fail(t, op, err);
	}
}

static void peer_remove(struct rdma *t, struct rpeer *p, int err)
{
	/* Still listed during the teardown: it finds p's operations. */
	peer_teardown(t, p, err);
	for (struct rpeer **pp = &t->peers; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	free(p);
}

void rdma_peer_up(struct rdma *t, const uint8_t id[LINK_ID_LEN], uint64_t gen,
		  const char *name, const struct rdma_peer_rail *rails,
		  size_t nrails)
{
	struct rdma_rail_addr mine[RDMA_RAIL_MAX];
	int nmine = rdma_dev_rail_count(), local[RDMA_PAIR_MAX],
	    peer[RDMA_PAIR_MAX];
	struct rpeer *p;

	if (!t)
		return;
	if ((p = find_peer(t, id)))
		peer_remove(t, p, -ECONNRESET);  /* an earlier link's */
	if (!(p = calloc(1, sizeof(*p)))) {
		log_warnx("RDMA: out of memory: %s over TCP only", name);
		return;
	}
	memcpy(p->id, id, LINK_ID_LEN);
	p->gen = gen;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->nrails = nrails < RDMA_PEER_RAILS ? nrails : RDMA_PEER_RAILS;
	if (p->nrails)  /* rails is NULL for a peer without any */
		memcpy(p->rails, rails, p->nrails * sizeof(*rails));
	for (int i = 0; i < nmine; i++)
		rdma_dev_rail_addr(i, &mine[i]);
	size_t n = rdma_pair_rails(mine, (size_t)nmine, p->rails, p->nrails,
				   local, peer, RDMA_PAIR_MAX);
	for (size_t i = 0; i < n; i++) {
		p->pair[i] = (struct rail_pair){
			.rail = local[i],
			.mine = mine[local[i]],
			.theirs = p->rails[peer[i]],
		};
		char a[64], b[64];
		netaddr_format(&mine[local[i]].addr, true, a, sizeof(a));
		netaddr_format(&p->rails[peer[i]].addr, true, b, sizeof(b));
		log_info("RDMA: %s reached over rail %d (%s) to its rail %u "
			 "(%s)", p->name, local[i], a, p->rails[peer[i]].index,
			 b);
	}
	p->npairs = n;
	if (n == 0)
		log_info("RDMA: no common rail with %s (it advertised %zu): "
			 "TCP", p->name, p->nrails);
	p->next = t->peers;
	t->peers = p;
}

void rdma_peer_down(struct rdma *t, const uint8_t id[LINK_ID_LEN],
		    uint64_t gen, int err)
{
	struct rpeer *p = t ? find_peer(t, id) : NULL;

	/* What the peer was granted on that link ends with it; its
	 * imports know (region_rdma.link_gen) and go by TCP. */
	if (t)
		rdma_grant_end_link(id, gen);
	if (p && p->gen == gen)
		peer_remove(t, p, err);
}

/* --- queue pair handshake frames --- */

static void on_connect(struct rdma *t, struct rpeer *p,
		       const Xfer__Peer__QpConnect *c)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__QpAccept a = XFER__PEER__QP_ACCEPT__INIT;
	Xfer__Peer__QpEnd end;
	struct rdma_rail_addr ra;
	struct rqp *q = NULL;
	int err = 0;

	a.rail = c->rail;
	a.peer_rail = c->peer_rail;
	a.slot = c->slot;
	a.epoch = c->epoch;
	bool known = false;
	for (size_t i = 0; i < p->nrails; i++)
		known |= p->rails[i].index == c->rail;
	if (!end_valid(c->end) ||
	    c->slot >= RDMA_QPS_MAX || !known ||
	    rdma_dev_rail_addr((int)c->peer_rail, &ra))
		err = -EINVAL;
	/* A new attempt for a slot replaces the old one (whose sender's
	 * end is gone). */
	for (struct rqp **pp = &p->passive; !err && *pp;
	     pp = &(*pp)->next_passive) {
		struct rqp *o = *pp;
		if (o->peer_rail == c->rail && o->rail == (int)c->peer_rail &&
		    o->slot == c->slot) {
			*pp = o->next_passive;
			p->npassive--;
			qp_free(t, o);
			break;
		}
	}
	if (!err && p->npassive >= PASSIVE_MAX)
		err = -ENOSPC;
	const struct qp_role role = { .pair = -1, .peer_rail = c->rail,
				      .slot = c->slot, .epoch = c->epoch };
	if (!err && !(err = qp_create(t, p, (int)c->peer_rail, &role, &q))) {
		err = qp_connect(t, q, c->end);
		if (err) {
			qp_free(t, q);
		} else {
			q->next_passive = p->passive;
			p->passive = q;
			p->npassive++;
			end_of(t, q, &ra, &end);
			a.end = &end;
		}
	}
	if (err)
		log_warnx("RDMA: queue pair from %s (its rail %u to our %u): "
			  "%s", p->name, c->rail, c->peer_rail, strerror(-err));
	a.error = err;
	m.body_case = XFER__PEER__PEER_MSG__BODY_QP_ACCEPT;
	m.qp_accept = &a;
	send_msg(t, p->id, &m);
}

static void on_accept(struct rdma *t, struct rpeer *p,
		      const Xfer__Peer__QpAccept *a)
{
	struct rqp *q = NULL;
	size_t i;

	for (i = 0; i < p->npairs && a->slot < RDMA_QPS_MAX; i++)
		if (p->pair[i].rail == (int)a->rail &&
		    p->pair[i].theirs.index == a->peer_rail) {
			q = p->out[i][a->slot];
			break;
		}
	if (!q || q->epoch != a->epoch ||
	    atomic_load(&q->state) != QP_CONNECTING)
		return;  /* an answer to an attempt given up */
	int err = a->error;
	if (!err && !end_valid(a->end))
		err = -EPROTO;
	if (!err)
		err = qp_connect(t, q, a->end);
	if (err) {
		log_warnx("RDMA: %s refused a queue pair on rail %d: %s; "
			  "TCP instead", p->name, q->rail,
			  strerror(err < 0 ? -err : err));
		fail_pair(t, p, i, -EIO);
	}
	pump(t);
}

void rdma_on_frame(struct rdma *t, const uint8_t id[LINK_ID_LEN],
		   const Xfer__Peer__PeerMsg *m)
{
	struct rpeer *p = t ? find_peer(t, id) : NULL;

	if (!p) {
		log_debug("RDMA: queue pair frame from a peer without rails here");
		return;
	}
	if (m->body_case == XFER__PEER__PEER_MSG__BODY_QP_CONNECT)
		on_connect(t, p, m->qp_connect);
	else if (m->body_case == XFER__PEER__PEER_MSG__BODY_QP_ACCEPT)
		on_accept(t, p, m->qp_accept);
}

/* --- life cycle --- */

static void on_grant_made(void *arg, struct rdma_grant_job *j);

struct rdma *rdma_create(struct event_base *base, struct linkset *links,
			 const struct rdma_cfg *cfg,
			 const struct mover_hooks *hooks)
{
	int ndevs = rdma_dev_count();
	struct rdma *t;

	if (ndevs == 0 || rdma_dev_rail_count() == 0)
		return NULL;
	if (!(t = calloc(1, sizeof(*t))))
		return NULL;
	t->base = base;
	t->links = links;
	t->hooks = *hooks;
	TAILQ_INIT(&t->waiting);
	rdma_set_cfg(t, cfg);
	const char *shift = getenv("XFERD_TEST_RDMA_SHIFT");
	if (shift && *shift) {
		t->test_shift = strtoll(shift, NULL, 0);
		log_warnx("RDMA: remote addresses moved by %lld bytes "
			  "(XFERD_TEST_RDMA_SHIFT, a test hook)",
			  (long long)t->test_shift);
	}
	for (int d = 0; d < ndevs && d < RDMA_DEV_MAX; d++) {
		struct rdev *rd = &t->dev[d];
		struct ibv_device_attr da;

		if (rdma_dev_verbs(d, &rd->v))
			continue;
		rd->rd_atomic = 1;
		if (ibv_query_device(rd->v.ctx, &da) == 0) {
			int n = da.max_qp_rd_atom < da.max_qp_init_rd_atom
					? da.max_qp_rd_atom
					: da.max_qp_init_rd_atom;
			rd->rd_atomic = (uint8_t)(n > RD_ATOMIC_MAX
							  ? RD_ATOMIC_MAX
							  : n > 0 ? n : 1);
		}
		int fl = fcntl(rd->v.channel->fd, F_GETFL);
		if (fl < 0 || fcntl(rd->v.channel->fd, F_SETFL,
				    fl | O_NONBLOCK) < 0)
			log_warn("RDMA: completion channel");
		rd->ev = event_new(base, rd->v.channel->fd, EV_READ | EV_PERSIST,
				   on_channel, rd);
		if (!rd->ev || event_add(rd->ev, NULL))
			log_warnx("RDMA: cannot watch a completion channel");
		t->ndevs = d + 1;
	}
	/* Without it, peers reach our memory over TCP only. */
	t->grants = rdma_grant_worker_create(base, on_grant_made, t);
	if (!t->grants)
		log_warnx("RDMA: no grant worker: peers reach this node's "
			  "memory over TCP");
	log_info("RDMA data path: %d device%s, %u queue pair%s per rail pair, "
		 "stripe %llu bytes", t->ndevs, t->ndevs == 1 ? "" : "s",
		 t->cfg.qps, t->cfg.qps == 1 ? "" : "s",
		 (unsigned long long)t->cfg.stripe);
	stage_open(t);
	return t;
}

void rdma_set_cfg(struct rdma *t, const struct rdma_cfg *cfg)
{
	if (!t)
		return;
	t->cfg = *cfg;
	if (t->cfg.qps < 1)
		t->cfg.qps = 1;
	if (t->cfg.qps > RDMA_QPS_MAX)
		t->cfg.qps = RDMA_QPS_MAX;
	if (t->cfg.stripe < 4096)
		t->cfg.stripe = 4096;
	if (t->cfg.stripe > (1u << 30))
		t->cfg.stripe = 1u << 30;
}

void rdma_destroy(struct rdma *t)
{
	if (!t)
		return;
	while (t->peers)
		peer_remove(t, t->peers, -ECONNRESET);
	/* Every grant ends; checks still out get no answer (their links
	 * are going down with us). */
	rdma_grant_worker_destroy(t->grants);
	/* Every chunk is back: the queue pairs that held them are gone. */
	stage_close(t);
	for (int d = 0; d < t->ndevs; d++) {
		if (!t->dev[d].ev)
			continue;
		event_free(t->dev[d].ev);
		/* Events taken but not acknowledged block ibv_destroy_cq. */
		struct ibv_cq *cq;
		void *ctx;
		while (ibv_get_cq_event(t->dev[d].v.channel, &cq, &ctx) == 0)
			ibv_ack_cq_events(cq, 1);
	}
	free(t);
}

/* --- as a transport (transport.h) --- */

static bool tr_poll(void *impl)
{
	return rdma_poll(impl);
}

static bool tr_arm(void *impl)
{
	return rdma_arm(impl);
}

static void tr_peer_up(void *impl, const struct peer_info *peer)
{
	rdma_peer_up(impl, peer->id, peer->gen, peer->name, peer->rails,
		     peer->nrails);
}

static void tr_peer_down(void *impl, const uint8_t id[LINK_ID_LEN],
			 uint64_t gen, int err)
{
	rdma_peer_down(impl, id, gen, err);
}

static bool tr_frame(void *impl, const uint8_t id[LINK_ID_LEN],
		     const Xfer__Peer__PeerMsg *m)
{
	if (m->body_case == XFER__PEER__PEER_MSG__BODY_RELEASE_GRANT) {
		/* A grant it does not have (ended with an older link, or
		 * never made): nothing to do. */
		if (!rdma_grant_release(id, m->release_grant->grant))
			log_debug("RDMA: release of grant %llu, not held",
				  (unsigned long long)m->release_grant->grant);
		return true;
	}
	if (m->body_case != XFER__PEER__PEER_MSG__BODY_QP_CONNECT &&
	    m->body_case != XFER__PEER__PEER_MSG__BODY_QP_ACCEPT)
		return false;
	rdma_on_frame(impl, id, m);
	return true;
}

/* For a peer's one-sided access to q's range of region r: the address
 * of r in xferd and the rkeys of a grant of that range alone
 * (rdma_grant.h), one per device (0: not registered there), in a reply
 * sent when the grant worker made it (on_grant_made).  None for a peer
 * without rail pairs to us: it could not use them. */
static enum describe_result tr_describe(void *impl, struct region *r,
					const struct describe_req *q,
					Xfer__Peer__RdmaMemory *out,
					uint32_t *keys, size_t max_keys)
{
	struct rdma *t = impl;
	struct rpeer *p = find_peer(t, q->peer);
	struct rdma_grant_job *j;
	int n = rdma_dev_count();
	(void)out, (void)keys;

	if (!t->grants || !p || p->gen != q->link_gen || p->npairs == 0 ||
	    !region_nic_mr(r) || !(j = calloc(1, sizeof(*j))))
		return DESCRIBE_NONE;
	region_get(r);
	j->r = r;
	j->q = *q;
	memcpy(j->peer, q->peer, LINK_ID_LEN);
	j->q.peer = j->peer;
	j->nkeys = (size_t)n < max_keys ? (size_t)n : max_keys;
	if (j->nkeys > RDMA_DEV_MAX)
		j->nkeys = RDMA_DEV_MAX;
	rdma_grant_worker_submit(t->grants, j);
	return DESCRIBE_LATER;
}

/* A grant asked for by tr_describe is made (or could not be): the
 * check's reply goes to the peer, on the link it asked on.  If that link
 * went meanwhile, the grant ends here: nobody can release it. */
static void on_grant_made(void *arg, struct rdma_grant_job *j)
{
	struct rdma *t = arg;
	struct rpeer *p = find_peer(t, j->peer);
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__CheckReply rep = XFER__PEER__CHECK_REPLY__INIT;
	Xfer__Peer__RdmaMemory mem = XFER__PEER__RDMA_MEMORY__INIT;

	if (!p || p->gen != j->q.link_gen) {
		if (j->grant)
			rdma_grant_release(j->peer, j->grant);
		return;
	}
	rep.id = j->q.check_id;
	if (j->grant) {
		mem.addr = (uint64_t)(uintptr_t)region_map_at(j->r, 0);
		mem.rkeys = j->keys;
		mem.n_rkeys = j->nkeys;
		mem.grant = j->grant;
		rep.rdma = &mem;
	}
	m.body_case = XFER__PEER__PEER_MSG__BODY_CHECK_REPLY;
	m.check_reply = &rep;
	send_msg(t, j->peer, &m);
}

static void tr_set_cfg(void *impl, const struct transport_cfg *cfg)
{
	rdma_set_cfg(impl, &(struct rdma_cfg){ .qps = cfg->rdma_qps,
					       .stripe = cfg->rdma_stripe });
}

static void tr_destroy(void *impl)
{
	rdma_destroy(impl);
}

const struct mover_ops rdma_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "rdma",
	.accepts = rdma_accepts,
	.submit = rdma_submit,
	.cancel_client = rdma_cancel_client,
	.expire = rdma_expire,
	.poll = tr_poll,
	.arm = tr_arm,
	.needs_loop = mover_stub_needs_loop,
	.peer_up = tr_peer_up,
	.peer_down = tr_peer_down,
	.frame = tr_frame,
	.describe = tr_describe,
	.set_cfg = tr_set_cfg,
	.destroy = tr_destroy,
};

/* --- the staged route (ROUTE_RDMA_STAGED) ---
 *
 * The same transport, its queue pairs and completions, with another way
 * in: the first table polls, arms, cancels, expires and follows peers
 * for every operation of the transport, staged or not; this one only
 * takes operations. */

static void stage_cancel_client(void *impl, const struct prog_client *pc)
{
	(void)impl, (void)pc;  /* rdma_cancel_client ends them */
}

static bool stage_expire(void *impl, uint64_t now)
{
	(void)impl, (void)now;  /* rdma_expire does */
	return false;
}

static void stage_set_cfg(void *impl, const struct transport_cfg *cfg)
{
	(void)impl, (void)cfg;
}

static void stage_destroy(void *impl)
{
	(void)impl;  /* rdma_destroy, through the first table */
}

const struct mover_ops rdma_staged_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "rdma-staged",
	.accepts = rdma_stage_accepts,
	.submit = rdma_stage_submit,
	.cancel_client = stage_cancel_client,
	.expire = stage_expire,
	.poll = mover_stub_poll,
	.arm = mover_stub_arm,
	.needs_loop = mover_stub_needs_loop,
	.peer_up = mover_stub_peer_up,
	.peer_down = mover_stub_peer_down,
	.frame = mover_stub_frame,
	.describe = mover_stub_describe,
	.set_cfg = stage_set_cfg,
	.destroy = stage_destroy,
};
