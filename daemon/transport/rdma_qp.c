/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_qp.c - the RDMA transport's queue pairs: their life (created,
 * connected over the link's QpConnect and QpAccept frames, taken down on
 * failure, freed) and the tables xferctl reads about them.
 *
 * Progress thread, except rdma_rail_stats and rdma_qp_list (the main
 * thread, for xferctl and the metrics).  Lock: tables.lock, a leaf
 * (rdma_int.h says what it guards).
 *
 * Only the side that opened a queue pair (the initiator) posts on it;
 * the passive end is kept for the peer and freed with its link or when
 * the peer opens that slot again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <infiniband/verbs.h>

#include "core/log.h"
#include "peer.pb-c.h"
#include "transport/rdma_int.h"
#include "transport/rdma_dev.h"
#include "core/thread_stats.h"
#include "common/wire.h"

#define QP_TIMEOUT     16      /* 4.096 us * 2^16: 268 ms per retry */
#define QP_RETRIES     7
#define INLINE_WANTED  64      /* bytes asked for; the device may give less */
/* Passive queue pairs one peer may open here: as many as it could use. */
#define PASSIVE_MAX    (RDMA_PEER_RAILS * RDMA_QPS_MAX)

/* --- the tables xferctl reads: queue pairs by slot, rail counters --- */

void rdma_tables_init(struct rdma *t)
{
	pthread_mutex_init(&t->tables.lock, NULL);
}

void rdma_tables_fini(struct rdma *t)
{
	pthread_mutex_destroy(&t->tables.lock);
}

static int qp_slot_take(struct rdma *t, struct rqp *q)
{
	struct rdma_tables *tb = &t->tables;

	pthread_mutex_lock(&tb->lock);
	for (int i = 0; i < QP_SLOTS; i++) {
		if (tb->qp[i])
			continue;
		tb->qp[i] = q;
		q->index = (uint16_t)i;
		q->gen = ++tb->gen[i];
		pthread_mutex_unlock(&tb->lock);
		atomic_fetch_add_explicit(&tb->rail[q->rail].qps, 1,
					  memory_order_relaxed);
		return 0;
	}
	pthread_mutex_unlock(&tb->lock);
	return -ENOSPC;
}

static void qp_slot_free(struct rdma *t, struct rqp *q)
{
	struct rdma_tables *tb = &t->tables;

	pthread_mutex_lock(&tb->lock);
	tb->qp[q->index] = NULL;
	pthread_mutex_unlock(&tb->lock);
	atomic_fetch_sub_explicit(&tb->rail[q->rail].qps, 1,
				  memory_order_relaxed);
}

void rdma_rail_stats(const struct rdma *t, int rail,
		     struct rdma_rail_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!t || rail < 0 || rail >= RDMA_RAIL_MAX)
		return;
	const struct rail_counters *c = &t->tables.rail[rail];
	out->qps = atomic_load(&c->qps);
	out->bytes_tx = atomic_load(&c->bytes_tx);
	out->bytes_rx = atomic_load(&c->bytes_rx);
	out->wrs = atomic_load(&c->wrs);
	out->errors = atomic_load(&c->errors);
}

size_t rdma_qp_list(struct rdma *t, int rail, struct rdma_qp_info *out,
		    size_t max)
{
	size_t n = 0;

	if (!t)
		return 0;
	pthread_mutex_lock(&t->tables.lock);
	for (int i = 0; i < QP_SLOTS && n < max; i++) {
		const struct rqp *q = t->tables.qp[i];
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
	pthread_mutex_unlock(&t->tables.lock);
	return n;
}

/* --- queue pairs --- */

const char *rdma_peer_label(const struct rqp *q)
{
	return q->peer_name[0] ? q->peer_name : "peer";
}

/* The NIC stops working on q's requests; its completions still in a CQ
 * are recognised as stale (the slot's generation moves on). */
static void qp_stop(struct rdma *t, struct rqp *q)
{
	int rc;

	qp_slot_free(t, q);
	if (q->qp)
		q->qp_num_was = q->qp->qp_num;
	if (q->qp && (rc = ibv_destroy_qp(q->qp)))
		log_warnx("RDMA: ibv_destroy_qp: %s", strerror(rc));
	q->qp = NULL;
}

void rdma_qp_free(struct rdma *t, struct rqp *q)
{
	if (q->qp)
		qp_stop(t, q);
	free(q);
}

/* Take q down: what it has out fails with err, and it is forgotten (the
 * next operation toward its peer opens a new one). */
void rdma_qp_fail_by(struct rdma *t, struct rqp *q, int err,
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
	qp_stop(t, q);
	t->redone = 0;
	rdma_retire(t, q, q->head - 1, err, culprit);
	if (t->redone)
		log_info("RDMA: %u operation%s of other descriptors on QP %u "
			 "to %s redone", t->redone, t->redone == 1 ? "" : "s",
			 q->qp_num_was, rdma_peer_label(q));
	free(q);
	t->drain = true;
}

void rdma_qp_fail(struct rdma *t, struct rqp *q, int err)
{
	rdma_qp_fail_by(t, q, err, NULL);
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
	if ((err = qp_slot_take(t, q))) {
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
	pthread_mutex_lock(&t->tables.lock);
	q->remote_qpn = e->qpn;
	pthread_mutex_unlock(&t->tables.lock);
	atomic_store(&q->state, QP_READY);
	return 0;
}

void rdma_send_msg(struct rdma *t, const uint8_t *id,
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
	rdma_send_msg(t, p->id, &m);
	return 0;
}

/* Every queue pair p should have is open or on its way.  False if no
 * rail pair can carry anything. */
bool rdma_ensure_qps(struct rdma *t, struct rpeer *p)
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

/* Rail pair i toward p cannot carry anything: its queue pairs close
 * and it is not used again while the link lasts. */
void rdma_fail_pair(struct rdma *t, struct rpeer *p, size_t i, int err)
{
	p->pair[i].failed = true;
	for (uint32_t s = 0; s < RDMA_QPS_MAX; s++)
		if (p->out[i][s])
			rdma_qp_fail(t, p->out[i][s], err);
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
			rdma_qp_free(t, o);
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
			rdma_qp_free(t, q);
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
	rdma_send_msg(t, p->id, &m);
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
		rdma_fail_pair(t, p, i, -EIO);
	}
	rdma_pump(t);
}

void rdma_on_frame(struct rdma *t, const uint8_t id[LINK_ID_LEN],
		   const Xfer__Peer__PeerMsg *m)
{
	struct rpeer *p = t ? rdma_find_peer(t, id) : NULL;

	if (!p) {
		log_debug("RDMA: queue pair frame from a peer without rails here");
		return;
	}
	if (m->body_case == XFER__PEER__PEER_MSG__BODY_QP_CONNECT)
		on_connect(t, p, m->qp_connect);
	else if (m->body_case == XFER__PEER__PEER_MSG__BODY_QP_ACCEPT)
		on_accept(t, p, m->qp_accept);
}

