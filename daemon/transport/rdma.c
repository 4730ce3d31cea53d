/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma.c - one-sided RDMA WRITE and READ between xferds on RC queue
 * pairs (rdma.h says what and why): the transport as the progress
 * thread sees it, its ops table, the peers it follows, and the life of
 * an operation in it (submitted, queued, settled, cancelled, expired).
 *
 * Progress thread only (rdma_create and rdma_destroy: the main thread,
 * before the progress thread starts and after it stopped).  No lock here;
 * the tables xferctl reads have their own (rdma_qp.c).
 *
 * The other files of the transport (rdma_int.h lists them): queue pairs
 * in rdma_qp.c, posting and completions in rdma_post.c, the staged route
 * (its operations as streams of the staging pipeline) in rdma_staged.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>
#include <infiniband/verbs.h>

#include "core/log.h"
#include "peer.pb-c.h"
#include "transport/rdma_int.h"
#include "transport/rdma_dev.h"
#include "transport/rdma_grant.h"
#include "mem/region.h"
#include "xfer_ring.h"

#define RD_ATOMIC_MAX  16      /* READs in flight per queue pair */

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

struct rpeer *rdma_find_peer(struct rdma *t, const uint8_t *id)
{
	for (struct rpeer *p = t->peers; p; p = p->next)
		if (memcmp(p->id, id, LINK_ID_LEN) == 0)
			return p;
	return NULL;
}

struct rpeer *rdma_peer_of(struct rdma *t, const struct xop *op)
{
	return rdma_find_peer(t, region_token(op->remote)->instance_id);
}

/* --- ending operations --- */

void rdma_op_end(struct rdma *t, struct xop *op, int64_t result)
{
	t->hooks.op_done(t->hooks.arg, op, result);
}

void rdma_dequeue(struct rdma *t, struct xop *op)
{
	struct rdma_op *ro = rop(op);

	if (ro->queued) {
		TAILQ_REMOVE(&t->waiting, op, q);
		ro->queued = false;
	}
}

/* An operation ends once none of its work requests is out and either
 * all of it was posted or it failed. */
void rdma_op_settle(struct rdma *t, struct xop *op)
{
	struct rdma_op *ro = rop(op);

	if (ro->cancelled)
		return;  /* collected: whoever collected it ends it */
	if (ro->redo && !ro->error && ro->wrs == 0) {
		/* Nothing of it is out any more: from the start, once. */
		ro->redo = false;
		ro->retried = true;
		ro->posted = 0;
		if (!ro->queued) {
			ro->queued = true;
			TAILQ_INSERT_HEAD(&t->waiting, op, q);
		}
		return;
	}
	if (ro->error)
		rdma_dequeue(t, op);
	if (ro->wrs || (!ro->error && (ro->redo || ro->posted < op->len)))
		return;
	rdma_op_end(t, op, ro->error ? ro->error : (int64_t)op->len);
}

void rdma_op_fail(struct rdma *t, struct xop *op, int err)
{
	if (!rop(op)->error)
		rop(op)->error = err;
	rdma_op_settle(t, op);
}

/* --- the transport's operations --- */

static bool rdma_accepts(void *impl, const struct xop *op)
{
	struct rdma *t = impl;
	uint32_t lkey, rkey;

	/* memfd memory with its MR, GPU memory with its dma-buf MR */
	enum region_kind k = op->local ? region_kind(op->local) : 0;
	if ((op->opcode != XFER_OP_WRITE && op->opcode != XFER_OP_READ) ||
	    op->len == 0 || (k != REGION_MEMFD && k != REGION_CUDA) ||
	    !region_nic_mr(op->local) || !region_rdma(op->remote))
		return false;
	struct rpeer *p = rdma_peer_of(t, op);
	if (!p || p->npairs == 0)
		return false;
	for (size_t i = 0; i < p->npairs; i++)
		if (!rdma_pair_usable(t, p, &p->pair[i], op, false, &lkey,
				      &rkey))
			return false;
	return true;
}

void rdma_op_start(struct rdma *t, struct xop *op, bool staged)
{
	op->path = staged ? XFER_PATH_RDMA_STAGED : XFER_PATH_RDMA;
	*rop(op) = (struct rdma_op){ .queued = true, .staged = staged };
	TAILQ_INSERT_TAIL(&t->waiting, op, q);
	t->submitted = true;  /* posted by rdma_poll, after the drain */
}

static void rdma_submit(void *impl, struct xop *op)
{
	rdma_op_start(impl, op, false);
}

/* Collect op (once) for ending with an error after the walk. */
static void collect(struct rdma *t, struct xop_list *l, struct xop *op)
{
	if (rop(op)->cancelled)
		return;
	rop(op)->cancelled = true;
	rdma_dequeue(t, op);
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
					rop(e->op)->wrs--;
					collect(t, &l, e->op);
					e->op = NULL;
				}
			}
	for (op = TAILQ_FIRST(&t->waiting); op; op = next) {
		next = TAILQ_NEXT(op, q);
		if (op->pc == pc)
			collect(t, &l, op);
	}
	/* Staged: the pipeline's cancel rule (rdma_staged.c). */
	struct rdma_stream *s;
	TAILQ_FOREACH(s, &t->streams, q)
		if (!s->ended && s->op->pc == pc)
			rdma_stream_close(s, -ECANCELED, false);
	while ((op = TAILQ_FIRST(&l))) {
		TAILQ_REMOVE(&l, op, q);
		rdma_op_end(t, op, -ECANCELED);
	}
	rdma_streams_reap(t);
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
					rdma_fail_pair(t, p, i, -ETIMEDOUT);
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
							  rdma_peer_label(q));
						rdma_qp_fail(t, q, -ETIMEDOUT);
						any = true;
						break;
					}
					rop(e->op)->wrs--;
					collect(t, &late, e->op);
					e->op = NULL;
				}
			}
	for (op = TAILQ_FIRST(&t->waiting); op; op = next) {
		next = TAILQ_NEXT(op, q);
		if (op->deadline_ns <= now)
			collect(t, &late, op);
	}
	/* A staged operation fails at once, READ or WRITE: what its pieces
	 * on the wire bring lands in staging chunks, never in its memory. */
	struct rdma_stream *s;
	TAILQ_FOREACH(s, &t->streams, q)
		if (!s->ended && s->op->deadline_ns <= now) {
			rdma_stream_close(s, -ETIMEDOUT, false);
			any = true;
		}
	while ((op = TAILQ_FIRST(&late))) {
		TAILQ_REMOVE(&late, op, q);
		rop(op)->cancelled = false;
		if (!rop(op)->error)
			rop(op)->error = -ETIMEDOUT;
		rdma_op_settle(t, op);
		any = true;
	}
	any |= rdma_land_expire(t, now);
	if (!TAILQ_EMPTY(&t->waiting) || t->pieces_queued)
		rdma_pump(t);
	rdma_streams_reap(t);
	return any;
}


/* --- peers coming and going --- */

void rdma_peer_close_passive(struct rdma *t, struct rpeer *p)
{
	while (p->passive) {
		struct rqp *q = p->passive;
		p->passive = q->next_passive;
		rdma_qp_free(t, q);
	}
	p->npassive = 0;
}

static void peer_teardown(struct rdma *t, struct rpeer *p, int err)
{
	struct xop *op, *next;

	for (size_t i = 0; i < RDMA_PAIR_MAX; i++)
		for (uint32_t s = 0; s < RDMA_QPS_MAX; s++)
			if (p->out[i][s])
				rdma_qp_fail(t, p->out[i][s], err);
	rdma_peer_close_passive(t, p);
	/* Its queue pairs to us are gone: what we lent it is ours again. */
	rdma_land_peer_down(t, p->id);
	struct rdma_stream *s;
	TAILQ_FOREACH(s, &t->streams, q)
		if (!s->ended && rdma_peer_of(t, s->op) == p)
			rdma_stream_close(s, err, false);
	for (op = TAILQ_FIRST(&t->waiting); op; op = next) {
		next = TAILQ_NEXT(op, q);
		if (rdma_peer_of(t, op) == p)
			rdma_op_fail(t, op, err);
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
	rdma_streams_reap(t);
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
	if ((p = rdma_find_peer(t, id)))
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
	struct rpeer *p = t ? rdma_find_peer(t, id) : NULL;

	/* What the peer was granted on that link ends with it; its
	 * imports know (region_rdma.link_gen) and go by TCP. */
	if (t)
		rdma_grant_end_link(id, gen);
	if (p && p->gen == gen)
		peer_remove(t, p, err);
}

/* --- life cycle --- */

static void on_grant_made(void *arg, struct rdma_grant_job *j);

const struct rdma_topo *rdma_topo(const struct rdma *t)
{
	return t ? &t->topo : NULL;
}

struct rdma *rdma_create(struct event_base *base, struct linkset *links,
			 const struct rdma_cfg *cfg,
			 const struct mover_hooks *hooks,
			 const struct rdma_stage_res *res)
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
	TAILQ_INIT(&t->streams);
	TAILQ_INIT(&t->ended);
	rdma_tables_init(t);
	rdma_sched_init(&t->sched, (uint32_t)cfg->stripe);
	rdma_set_cfg(t, cfg);
	/* Without it a paced tenant waits for the next completion or
	 * deadline pass to be pumped again. */
	t->pace_ev = evtimer_new(base, rdma_on_pace, t);
	if (!t->pace_ev)
		log_warnx("RDMA: no pacing timer: capped tenants resume late");
	rdma_topo_probe(&t->topo, "/");
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
				   rdma_on_channel, rd);
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
	t->staging = rdma_staging_open(t, res);
	if (t->staging && t->cfg.landing)
		t->land = rdma_land_open(t, res);
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
	if (t->cfg.bulk_depth < 1 || t->cfg.bulk_depth > RDMA_QP_DEPTH)
		t->cfg.bulk_depth = RDMA_QP_DEPTH;
	/* A turn of weight 1 is one stripe, a request at most. */
	rdma_sched_set_tenants(&t->sched, &t->cfg.tenants,
			       (uint32_t)t->cfg.stripe);
}

void rdma_share_tenants(struct rdma *t, struct rate_cap *caps,
			struct class_stats *stats)
{
	if (!t)
		return;
	t->sched.caps = caps;
	t->sched.stats = stats;
}

void rdma_destroy(struct rdma *t)
{
	if (!t)
		return;
	while (t->peers)
		peer_remove(t, t->peers, -ECONNRESET);
	/* Every stream had a peer and ended with it; should one be left,
	 * it ends here, before its pool goes. */
	struct rdma_stream *s;
	TAILQ_FOREACH(s, &t->streams, q)
		rdma_stream_close(s, -ECONNRESET, false);
	rdma_streams_reap(t);
	/* Every grant ends; checks still out get no answer (their links
	 * are going down with us). */
	rdma_grant_worker_destroy(t->grants);
	/* Every chunk is back: the queue pairs that held them are gone. */
	rdma_land_close(t);
	rdma_staging_close(t->staging);
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
	if (t->pace_ev)
		event_free(t->pace_ev);
	rdma_tables_fini(t);
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
	if (rdma_land_frame(impl, id, m))
		return true;
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
	struct rpeer *p = rdma_find_peer(t, q->peer);
	struct rdma_grant_job *j;
	int n = rdma_dev_count();
	(void)keys;

	if (!p || p->gen != q->link_gen || p->npairs == 0)
		return DESCRIBE_NONE;
	/* Memory our NICs cannot reach: we lend landing chunks for it. */
	if (!region_nic_mr(r)) {
		out->landing_chunk = rdma_land_offer(t, r);
		return out->landing_chunk ? DESCRIBE_FILLED : DESCRIBE_NONE;
	}
	if (!t->grants || !(j = calloc(1, sizeof(*j))))
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
	struct rpeer *p = rdma_find_peer(t, j->peer);
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
	rdma_send_msg(t, j->peer, &m);
}

static void tr_set_cfg(void *impl, const struct transport_cfg *cfg)
{
	rdma_set_cfg(impl, &(struct rdma_cfg){
				   .qps = cfg->rdma_qps,
				   .stripe = cfg->rdma_stripe,
				   .bulk_depth = cfg->rdma_bulk_depth,
				   /* read at start only (rdma_land_open) */
				   .landing = cfg->rdma_landing,
				   .landing_chunks = cfg->rdma_landing_chunks,
				   .landing_peers = cfg->rdma_landing_peers,
				   .tenants = cfg->tenants });
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
	.peer_up = tr_peer_up,
	.peer_down = tr_peer_down,
	.frame = tr_frame,
	.describe = tr_describe,
	.set_cfg = tr_set_cfg,
	.destroy = tr_destroy,
};
