/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_land_requester.c - owner-side staging (ROUTE_RDMA_OWNER_STAGED),
 * the requester's side: its mover table (an operation toward memory
 * whose owner lends landing chunks for it), the LandOpen that starts a
 * stream at the owner, the owner's LandGrant and LandDone for it, each
 * grant matched to the piece of our pipeline for the same bytes, and
 * every grant given back (Landed) when its piece is done or the stream
 * is reaped.  The stream itself is rdma_staged.c's, its RDMA stage's
 * remote address taken from a grant; the protocol, the owner's side and
 * the one dispatch of the landing frames (rdma_land_frame) are
 * rdma_land.c's.
 *
 * Progress thread only; no lock.
 */
#include <errno.h>
#include <string.h>

#include "common/clock.h"
#include "core/log.h"
#include "peer.pb-c.h"
#include "transport/rdma_int.h"
#include "xfer_ring.h"

/* --- frames --- */


static void send_landed(struct rdma *t, const uint8_t *peer, uint64_t id,
			uint32_t slot, int err)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Landed l = XFER__PEER__LANDED__INIT;

	l.id = id;
	l.slot = slot;
	l.error = err;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LANDED;
	m.landed = &l;
	rdma_send_msg(t, peer, &m);
}

/* --- the requester's side --- */

static struct rdma_stream *my_stream(struct rdma *t, const uint8_t *from,
				     uint64_t id)
{
	struct rdma_stream *s;

	TAILQ_FOREACH(s, &t->streams, q)
		if (s->owner && s->land_id == id && !s->ended &&
		    memcmp(s->peer, from, LINK_ID_LEN) == 0)
			return s;
	return NULL;
}

void rdma_land_stream_open(struct rdma_stream *s)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LandOpen o = XFER__PEER__LAND_OPEN__INIT;
	Xfer__Peer__Target tg = XFER__PEER__TARGET__INIT;
	const struct xop *op = s->op;
	const struct token *tok = region_token(op->remote);
	uint64_t now = now_ns();
	uint64_t ms = op->deadline_ns > now ? (op->deadline_ns - now) / 1000000
					    : 0;

	link_target_of(tok, &tg);
	o.id = s->land_id;
	o.target = &tg;
	o.at = op->remote_off;
	o.length = op->len;
	o.read = op->opcode == XFER_OP_READ;
	o.chunk = s->land_chunk;  /* the cut of our pipeline */
	o.timeout_ms = ms < UINT32_MAX ? (uint32_t)ms : UINT32_MAX;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LAND_OPEN;
	m.land_open = &o;
	rdma_send_msg(s->t, s->peer, &m);
}

/* A grant of the owner's: for a stream of ours, held until its piece
 * comes; for none (it ended), straight back. */
void rdma_land_on_grant(struct rdma *t, const uint8_t *from,
			const Xfer__Peer__LandGrant *g)
{
	struct rdma_stream *s = my_stream(t, from, g->id);

	if (!s) {
		send_landed(t, from, g->id, g->slot, -ECANCELED);
		return;
	}
	if (s->ngrants >= LAND_GRANTS || g->n_rkeys > REGION_RDMA_KEYS ||
	    g->len == 0 || g->at >= s->op->len ||
	    g->len > s->op->len - g->at) {
		log_warnx("RDMA: %s lent a landing chunk that does not fit "
			  "stream %llu; the stream fails",
			  rdma_find_peer(t, from) ? rdma_find_peer(t, from)->name
						  : "a peer",
			  (unsigned long long)g->id);
		send_landed(t, from, g->id, g->slot, -EPROTO);
		rdma_stream_fail(s, -EPROTO);
		return;
	}
	struct land_grant *lg = &s->grant[s->ngrants++];
	*lg = (struct land_grant){ .slot = g->slot, .len = g->len, .at = g->at,
				   .addr = g->addr,
				   .nkeys = (uint32_t)g->n_rkeys };
	memcpy(lg->rkey, g->rkeys, g->n_rkeys * sizeof(*g->rkeys));
	t->submitted = true;  /* its piece may wait for it: pump */
}

void rdma_land_on_done(struct rdma *t, const uint8_t *from,
		       const Xfer__Peer__LandDone *d)
{
	struct rdma_stream *s = my_stream(t, from, d->id);

	if (!s)
		return;  /* ended here already (a READ's, an abort's) */
	if (d->result < 0) {
		/* The owner cannot serve it now: by the link, if nothing
		 * of it moved yet. */
		if (d->result == -EBUSY && s->posted == 0 && !s->pl_over)
			rdma_stream_close(s, 0, true);
		else
			rdma_stream_fail(s, (int)d->result);
		return;
	}
	if (s->op->opcode != XFER_OP_WRITE)
		return;  /* a READ ends with its own pipeline */
	s->owner_done = true;
	if (s->pl_over)
		rdma_stream_end(s, s->result);
}

bool rdma_land_match(struct rdma_stream *s, struct rdma_piece *pc,
		     struct stage_chunk *c)
{
	for (unsigned i = 0; i < s->ngrants; i++) {
		struct land_grant *g = &s->grant[i];
		if (g->at != c->at)
			continue;
		if (g->len != c->len) {
			/* The owner cut the stream otherwise: it fails. */
			rdma_stream_fail(s, -EPROTO);
			return false;
		}
		pc->lent = true;
		pc->slot = g->slot;
		pc->land_id = s->land_id;
		pc->raddr = g->addr;
		pc->nkeys = g->nkeys;
		memcpy(pc->rkey, g->rkey, sizeof(pc->rkey));
		memcpy(pc->peer, s->peer, LINK_ID_LEN);
		s->grant[i] = s->grant[--s->ngrants];
		return true;
	}
	return false;
}

void rdma_land_piece_done(struct rdma *t, struct rdma_piece *pc, int err)
{
	pc->lent = false;
	send_landed(t, pc->peer, pc->land_id, pc->slot, err);
}

void rdma_land_stream_end(struct rdma_stream *s)
{
	while (s->ngrants) {
		const struct land_grant *g = &s->grant[--s->ngrants];
		send_landed(s->t, s->peer, s->land_id, g->slot, -ECANCELED);
	}
	if (s->result >= 0 && !s->reroute)
		return;
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LandAbort a = XFER__PEER__LAND_ABORT__INIT;
	a.id = s->land_id;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LAND_ABORT;
	m.land_abort = &a;
	rdma_send_msg(s->t, s->peer, &m);
}

/* --- as a mover (core/mover.h): the requester's way in --- */

/* Memory here that the staging chunks reach (host memory by a CPU copy,
 * GPU memory by the copy engines when the pool is the GPU's), toward a
 * region whose owner lends landing chunks for it, on a rail pair to it
 * with our staging chunks registered. */
static bool land_accepts(void *impl, const struct xop *op)
{
	struct rdma *t = impl;
	const struct region_rdma *rr;
	uint32_t lkey;

	if (!t->staging ||
	    (op->opcode != XFER_OP_WRITE && op->opcode != XFER_OP_READ) ||
	    op->len == 0 || !op->local || !(rr = region_rdma(op->remote)) ||
	    !rr->landing_chunk || rr->nkeys)
		return false;
	enum region_kind k = region_kind(op->local);
	if (!(k == REGION_CMA || k == REGION_MEMFD ||
	      (k == REGION_CUDA && rdma_staging_gpu(t->staging))))
		return false;
	struct rpeer *p = rdma_peer_of(t, op);
	if (!p || p->npairs == 0)
		return false;
	for (size_t i = 0; i < p->npairs; i++)
		if (!p->pair[i].failed &&
		    rdma_staging_lkey(t->staging, p->pair[i].mine.dev, &lkey))
			return true;
	return false;
}

static void land_submit(void *impl, struct xop *op)
{
	rdma_op_start(impl, op, true);
	rop(op)->owner = true;
}

static void land_cancel_client(void *impl, const struct prog_client *pc)
{
	(void)impl, (void)pc;  /* rdma_cancel_client ends them */
}

static bool land_expire(void *impl, uint64_t now)
{
	(void)impl, (void)now;  /* rdma_expire does */
	return false;
}

static void land_set_cfg(void *impl, const struct transport_cfg *cfg)
{
	(void)impl, (void)cfg;
}

static void land_destroy(void *impl)
{
	(void)impl;  /* rdma_destroy, through the first table */
}

const struct mover_ops rdma_owner_staged_mover_ops = {
	.version = MOVER_OPS_VERSION,
	.name = "rdma-owner-staged",
	.move_now = mover_stub_move_now,
	.move_list = mover_stub_move_list,
	.accepts = land_accepts,
	.submit = land_submit,
	.cancel_client = land_cancel_client,
	.expire = land_expire,
	.poll = mover_stub_poll,
	.arm = mover_stub_arm,
	.needs_loop = mover_stub_needs_loop,
	.peer_up = mover_stub_peer_up,
	.peer_down = mover_stub_peer_down,
	.frame = mover_stub_frame,
	.describe = mover_stub_describe,
	.set_cfg = land_set_cfg,
	.destroy = land_destroy,
};
