/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_land.c - owner-side staging over RDMA (ROUTE_RDMA_OWNER_STAGED):
 * a region the owner's NICs cannot reach (another process's memory,
 * xfer_reg'd there; GPU memory without a dma-buf registration) moves
 * through chunks of the owner's staging pool that the owner lends the
 * requester for one stream, with a copy on the owner's side.  No new
 * staging: both sides run the staging pipeline (stage/pipeline.h) with
 * stages that exist, and one more, the owner's lend stage, here.
 *
 *   requester (WRITE)  host_stage_read / gpu_stage_d2h -> RDMA WRITE
 *                      into the granted chunk (rdma_staged.c's stage)
 *   owner     (WRITE)  lend (grant, wait for Landed)   -> host_stage_write
 *                                                       / gpu_stage_h2d
 *   owner     (READ)   host_stage_read / gpu_stage_d2h -> lend (grant,
 *                                                       wait for Landed)
 *   requester (READ)   RDMA READ out of the granted chunk -> host_stage_write
 *                                                       / gpu_stage_h2d
 *
 * Both cut the stream alike (chunks of the size the requester asked in
 * LandOpen, at most the owner's landing chunk): each grant names the
 * bytes [at, at + len) of the stream its chunk is for, and the
 * requester's piece for those bytes takes it (rdma_land_match).  The
 * frames (proto/peer.proto, LandOpen .. LandAbort) go on the link.
 *
 * Landing chunks.  Each peer is lent chunks of a landing pool of its
 * own (rdma_land_pool.c), never of the node's staging pool: each chunk
 * is registered alone for remote access, so that the rkey a grant
 * carries reaches that chunk only.  The rkey stays valid after the chunk
 * came back, on any queue pair of the peer, as long as the pool lives
 * (registering per grant costs as much as the copy it serves; memory
 * windows do not fit yet: doc/design.md says why), but the chunk only
 * ever carries that peer's own streams, whose bytes it moves anyway.
 * Within the pool a chunk is confined in time by the protocol: one that
 * comes back without the peer's word (its stream ended here, the peer
 * silent) is taken back only once the peer's queue pairs to us are
 * destroyed, so that nothing it had on the wire lands after.
 *
 * Credits.  A stream has at most LAND_GRANTS_AHEAD chunks out (the
 * pipeline's ahead), a peer at most LAND_STREAMS_PER_PEER streams
 * and at most their product of chunks, those of streams it gave up
 * (LandAbort) but did not return counted (LandOpen past either:
 * LandDone -EBUSY, the requester goes by the link).
 *
 * Failure.  Every lent chunk comes back by exactly one of: the peer's
 * Landed; the peer's link going down (its queue pairs to us destroyed
 * first, rdma.c); LAND_RECLAIM_NS after its stream ended here without
 * it (the peer's queue pairs to us destroyed first); the transport
 * stopping.  A Landed that names a chunk the peer does not hold, or a
 * LandOpen that names memory it may not reach, is refused with
 * LandDone(-EPROTO or the error) and logged; the link stays.  An owner
 * stream ends by its deadline (the requester's, at most LAND_MAX_MS, and
 * LAND_GRACE_NS).  On the requester's side the stream is rdma_staged.c's
 * with its RDMA stage's remote address taken from a grant: its deadline,
 * cancel and peer loss are that file's; every grant it held goes back
 * (Landed) when its piece completes or the stream is reaped.
 *
 * This file is the owner's side (its streams, the lend stage, the
 * landing chunks' deadlines and reclaim) and the one dispatch of the
 * landing frames (rdma_land_frame); the requester's side (LandOpen, its
 * grants matched to pieces, Landed back, its mover table) is
 * rdma_land_requester.c's, and its stream rdma_staged.c's.
 *
 * Progress thread only; no lock (the staging pools' are leaves).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <event2/event.h>
#include <infiniband/verbs.h>

#include "common/clock.h"
#include "core/log.h"
#include "peer.pb-c.h"
#include "stage/pipeline.h"
#include "transport/rdma_int.h"
#include "transport/rdma_land_pool.h"
#include "mem/staging.h"

#define LAND_MAX_MS      (10u * 60 * 1000)       /* a stream's deadline */
#define LAND_GRACE_NS    (2000ull * 1000000)      /* past the requester's */
#define LAND_RECLAIM_NS  (10000ull * 1000000)     /* a silent peer's chunk */
#define LAND_TICK_MS     1000                     /* deadlines, pools */

/* The owner's stream for a peer's LandOpen. */
struct land_stream {
	struct rdma *t;
	uint8_t peer[LINK_ID_LEN];
	uint64_t id;              /* the requester's, on its link */
	struct region *r;         /* a reference, until freed */
	struct land_pool *pool;   /* the peer's: its chunks */
	bool read;
	uint64_t deadline_ns;
	struct pipeline *pl;
	struct host_stage host;
	struct gpu_stage gpu;
	TAILQ_ENTRY(land_stream) q;
};
TAILQ_HEAD(land_stream_list, land_stream);

/* A chunk while lent (its priv area, STAGE_PRIV): outlives its stream. */
struct land_lend {
	struct land_stream *ls;   /* NULL once its stream went */
	uint8_t peer[LINK_ID_LEN];
	uint64_t id;
	uint64_t orphan_ns;       /* when its stream went */
};

struct rdma_land {
	uint32_t chunk;           /* bytes per landing chunk */
	struct land_pools pools;  /* one per peer lent to */
	/* Runs while a pool lives: owner streams' deadlines, chunks kept,
	 * pools to free, whether or not this node has operations of its
	 * own out (rdma_expire runs only then). */
	struct event *tick;
	struct land_stream_list streams;
	struct regtab *regs;
	uint8_t self_id[LINK_ID_LEN];
};

/* --- frames --- */

static void send_done(struct rdma *t, const uint8_t *peer, uint64_t id,
		      int64_t result)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LandDone d = XFER__PEER__LAND_DONE__INIT;

	d.id = id;
	d.result = result;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LAND_DONE;
	m.land_done = &d;
	rdma_send_msg(t, peer, &m);
}

/* --- the landing chunks --- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct rdma *t = arg;
	(void)fd, (void)what;

	rdma_land_expire(t, now_ns());
	rdma_streams_reap(t);
}

/* The tick runs while any pool lives (every owner stream is on one). */
static void tick_arm(struct rdma_land *l)
{
	struct timeval tv = { .tv_sec = LAND_TICK_MS / 1000,
			      .tv_usec = (LAND_TICK_MS % 1000) * 1000 };

	if (!l->tick)
		return;
	if (l->pools.n == 0)
		event_del(l->tick);
	else if (!event_pending(l->tick, EV_TIMEOUT, NULL))
		event_add(l->tick, &tv);
}

struct rdma_land *rdma_land_open(struct rdma *t,
				 const struct rdma_stage_res *res)
{
	struct staging_pool *pool = rdma_staging_pool(t->staging);
	struct rdma_land *l = calloc(1, sizeof(*l));

	if (!l || !res || !res->regs) {
		free(l);
		return NULL;
	}
	TAILQ_INIT(&l->streams);
	l->regs = res->regs;
	memcpy(l->self_id, res->self_id, LINK_ID_LEN);
	/* Chunks the size of the node's: the requesters cut their
	 * streams alike whichever node's pool they stage through. */
	l->chunk = staging_chunk_bytes(pool);
	land_pools_init(&l->pools, l->chunk,
			t->cfg.landing_chunks ? t->cfg.landing_chunks
					      : RDMA_LANDING_CHUNKS,
			t->cfg.landing_peers ? t->cfg.landing_peers
					     : RDMA_LANDING_PEERS,
			rdma_staging_gpu(t->staging) != NULL);
	if (t->base)
		l->tick = event_new(t->base, -1, EV_PERSIST, on_tick, t);
	log_info("RDMA landing chunks: each peer lent chunks of a pool of "
		 "its own (%u of %u KiB; at most %u peers at once) for "
		 "memory the NICs cannot reach", l->pools.per_peer,
		 l->chunk >> 10, l->pools.max);
	return l;
}

void rdma_land_stats(const struct rdma *t, struct rdma_land_stats *out)
{
	const struct rdma_land *l = t ? t->land : NULL;

	memset(out, 0, sizeof(*out));
	if (!l)
		return;
	/* Relaxed: counters for ctl, ordered with nothing. */
	out->lending = true;
	out->max_pools = l->pools.max;
	out->chunk_bytes = l->chunk;
	out->pools = atomic_load_explicit(&l->pools.a_pools,
					  memory_order_relaxed);
	out->chunks = atomic_load_explicit(&l->pools.a_chunks,
					   memory_order_relaxed);
	out->lent = atomic_load_explicit(&l->pools.a_lent,
					 memory_order_relaxed);
	out->bytes = atomic_load_explicit(&l->pools.a_bytes,
					  memory_order_relaxed);
	out->made = atomic_load_explicit(&l->pools.a_made,
					 memory_order_relaxed);
	out->freed = atomic_load_explicit(&l->pools.a_freed,
					  memory_order_relaxed);
	out->refused = atomic_load_explicit(&l->pools.a_refused,
					    memory_order_relaxed);
}

uint32_t rdma_land_offer(const struct rdma *t, const struct region *r)
{
	enum region_kind k = region_kind(r);

	if (!t->land)
		return 0;
	if (k == REGION_CMA || k == REGION_MEMFD ||
	    (k == REGION_CUDA && rdma_staging_gpu(t->staging)))
		return t->land->chunk;
	return 0;
}

/* --- the owner's streams --- */

static void stream_free(struct land_stream *ls)
{
	struct rdma_land *l = ls->t->land;
	struct pipeline *pl = ls->pl;

	TAILQ_REMOVE(&l->streams, ls, q);
	ls->pool->nstreams--;
	ls->pl = NULL;
	/* lend_cancel for each chunk lent: they stay lent */
	pipeline_destroy(pl);
	region_put(ls->r);
	free(ls);
}

/* The pipeline ended: the requester hears the result (a WRITE's bytes
 * are all in the region now). */
static void stream_done(void *arg, int64_t result)
{
	struct land_stream *ls = arg;

	send_done(ls->t, ls->peer, ls->id, result);
	stream_free(ls);
}

static struct land_stream *find_stream(const struct rdma_land *l,
				       const uint8_t *peer, uint64_t id)
{
	struct land_stream *ls;

	TAILQ_FOREACH(ls, &l->streams, q)
		if (ls->id == id && memcmp(ls->peer, peer, LINK_ID_LEN) == 0)
			return ls;
	return NULL;
}

/* The lend stage: c goes to the peer (LandGrant) and stays its until
 * Landed. */
static int lend_start(void *arg, struct stage_chunk *c)
{
	struct land_stream *ls = arg;
	struct rdma_land *l = ls->t->land;
	struct land_pool *p = ls->pool;
	struct land_lend *ll = STAGE_PRIV(c, struct land_lend);
	uint32_t slot = land_pool_slot(p, c), keys[RDMA_DEV_MAX];
	int ndevs = ls->t->ndevs;
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LandGrant g = XFER__PEER__LAND_GRANT__INIT;

	if (slot >= p->nslots || p->lent[slot])
		return -EIO;  /* not of the peer's pool: cannot be */
	*ll = (struct land_lend){ .ls = ls, .id = ls->id };
	memcpy(ll->peer, ls->peer, LINK_ID_LEN);
	land_pool_lend(&l->pools, p, slot, c);
	for (int d = 0; d < ndevs; d++) {
		const struct ibv_mr *mr = p->mr[(size_t)slot * (size_t)ndevs +
						(size_t)d];
		keys[d] = mr ? mr->rkey : 0;
	}
	g.id = ls->id;
	g.slot = slot;
	g.at = c->at;
	g.len = c->len;
	g.addr = (uint64_t)(uintptr_t)c->buf;
	g.rkeys = keys;
	g.n_rkeys = (size_t)ndevs;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LAND_GRANT;
	m.land_grant = &g;
	rdma_send_msg(ls->t, ls->peer, &m);
	return 0;
}

/* The stream went: a lent chunk stays lent (the peer's NIC may still be
 * at it) until Landed, its link going, or the reclaim. */
static void lend_cancel(void *arg, struct stage_chunk *c)
{
	struct land_lend *ll = STAGE_PRIV(c, struct land_lend);
	(void)arg;

	ll->ls = NULL;
	ll->orphan_ns = now_ns();
}

static const struct stage_ops land_stage_lend = {
	.name = "rdma-lend",
	.start = lend_start,
	.cancel = lend_cancel,
};

/* p's lent chunk in slot comes back (result: its stage's). */
static void lend_back(struct rdma_land *l, struct land_pool *p, uint32_t slot,
		      int64_t result)
{
	struct stage_chunk *c = land_pool_back(&l->pools, p, slot, now_ns());

	stage_done(c, result);  /* may end (and free) its stream */
}

/* A peer's LandOpen: resolve its target, open the stream.  Refusals go
 * back as LandDone. */
static void on_open(struct rdma *t, const uint8_t *from,
		    const Xfer__Peer__LandOpen *o)
{
	struct rdma_land *l = t->land;
	const Xfer__Peer__Target *tg = o->target;
	struct land_stream *ls;
	struct land_pool *pool;
	struct region *r = NULL;
	struct token tok;
	uint64_t off;
	unsigned n = 0;
	int err;

	if (!l) {
		send_done(t, from, o->id, -ENOTSUP);
		return;
	}
	/* Chunks of at least a page: a grant and its Landed per byte
	 * would make a slow stream of a small one. */
	if (!tg || link_target_valid(tg) || o->length == 0 ||
	    o->chunk < 4096 || o->chunk > l->chunk ||
	    find_stream(l, from, o->id)) {
		log_warnx("RDMA: a peer's landing stream %llu is malformed; "
			  "refused", (unsigned long long)o->id);
		send_done(t, from, o->id, -EPROTO);
		return;
	}
	TAILQ_FOREACH(ls, &l->streams, q)
		n += memcmp(ls->peer, from, LINK_ID_LEN) == 0;
	/* Chunks of streams it gave up count too: a peer that opens and
	 * aborts streams without giving their chunks back holds no more
	 * than its streams could. */
	pool = land_pool_of(&l->pools, from);
	if (n >= LAND_STREAMS_PER_PEER ||
	    (pool && pool->nlent >= LAND_STREAMS_PER_PEER * LAND_GRANTS_AHEAD)) {
		send_done(t, from, o->id, -EBUSY);
		return;
	}
	memset(&tok, 0, sizeof(tok));
	memcpy(tok.instance_id, l->self_id, TOKEN_INSTANCE_LEN);
	memcpy(tok.key, tg->key.data, TOKEN_KEY_LEN);
	tok.region = tg->region;
	tok.offset = tg->offset;
	tok.length = tg->length;
	tok.region_length = tg->region_length;
	tok.mem_kind = tg->mem_kind;
	if ((err = regtab_resolve_token(l->regs, &tok, o->at, o->length, true,
					&r, &off))) {
		if (err == -EACCES || err == -ERANGE)
			log_warnx("RDMA: a peer's landing stream names memory "
				  "it may not reach (%s); refused",
				  strerror(-err));
		send_done(t, from, o->id, err);
		return;
	}
	/* Its own pool, made now if it has none yet: only once the token
	 * says the peer may reach the memory. */
	if ((err = land_pool_get(&l->pools, t, from, now_ns(), &pool))) {
		region_put(r);
		send_done(t, from, o->id, err);
		return;
	}
	tick_arm(l);
	enum region_kind k = region_kind(r);
	if (!(ls = calloc(1, sizeof(*ls)))) {
		region_put(r);
		send_done(t, from, o->id, -ENOMEM);
		return;
	}
	*ls = (struct land_stream){
		.t = t, .id = o->id, .r = r, .pool = pool, .read = o->read,
		/* Lent chunks are the peer's to read while they fill: the
		 * owner's memory goes in through the checked file, never a
		 * read checked only afterwards (mem/cma.h). */
		.host = { .r = r, .off = off, .shared = true },
	};
	memcpy(ls->peer, from, LINK_ID_LEN);
	uint32_t ms = o->timeout_ms < LAND_MAX_MS ? o->timeout_ms : LAND_MAX_MS;
	ls->deadline_ns = now_ns() + (uint64_t)ms * 1000000 + LAND_GRACE_NS;
	const struct stage_ops *fill = &host_stage_read, *drain = &host_stage_write;
	void *near = &ls->host;
	if (k == REGION_CUDA) {
		if (!rdma_staging_gpu(t->staging)) {
			free(ls);
			region_put(r);
			send_done(t, from, o->id, -ENOTSUP);
			return;
		}
		ls->gpu = (struct gpu_stage){ .g = rdma_staging_gpu(t->staging),
					      .addr = region_gpu_ptr(r) + off,
					      .dev = region_gpu_dev(r) };
		fill = &gpu_stage_d2h;
		drain = &gpu_stage_h2d;
		near = &ls->gpu;
	}
	const struct pipeline_cfg cfg = {
		.pool = pool->sp,   /* the peer's alone */
		.half = o->read ? STAGING_SEND : STAGING_RECV,
		.len = o->length,
		.chunk = o->chunk,
		.ahead = LAND_GRANTS_AHEAD,   /* the stream's credits */
		.fill = o->read ? fill : &land_stage_lend,
		.fill_arg = o->read ? near : (void *)ls,
		.drain = o->read ? &land_stage_lend : drain,
		.drain_arg = o->read ? (void *)ls : near,
		.hold = { r, NULL },
		.done = stream_done,
		.arg = ls,
	};
	if (!(ls->pl = pipeline_create(&cfg))) {
		free(ls);
		region_put(r);
		send_done(t, from, o->id, -ENOMEM);
		return;
	}
	TAILQ_INSERT_TAIL(&l->streams, ls, q);
	pool->nstreams++;
	pool->used_ns = now_ns();
	pipeline_start(ls->pl);  /* may end it (a first copy failed) */
}

/* The peer's word on a chunk lent to it. */
static void on_landed(struct rdma *t, const uint8_t *from,
		      const Xfer__Peer__Landed *m)
{
	struct rdma_land *l = t->land;
	struct land_pool *p = l ? land_pool_of(&l->pools, from) : NULL;
	struct stage_chunk *c = p && m->slot < p->nslots ? p->lent[m->slot]
							 : NULL;
	const struct land_lend *ll = c ? STAGE_PRIV(c, struct land_lend) : NULL;

	if (!ll || ll->id != m->id ||
	    memcmp(ll->peer, from, LINK_ID_LEN) != 0) {
		/* Not a chunk it holds: refused; the stream it names, if
		 * it has one, fails (its bytes can no longer be told). */
		log_warnx("RDMA: a peer returned landing chunk %u of stream "
			  "%llu, which it does not hold; refused", m->slot,
			  (unsigned long long)m->id);
		struct land_stream *ls = l ? find_stream(l, from, m->id) : NULL;
		if (ls)
			pipeline_fail(ls->pl, -EPROTO);  /* may free it */
		else
			send_done(t, from, m->id, -EPROTO);
		return;
	}
	lend_back(l, p, m->slot, m->error < 0 ? m->error : (int64_t)c->len);
}

static void on_abort(struct rdma *t, const uint8_t *from, uint64_t id)
{
	struct land_stream *ls = t->land ? find_stream(t->land, from, id)
					 : NULL;
	struct land_pool *p = ls ? ls->pool : NULL;

	if (!ls)
		return;
	stream_free(ls);  /* its lent chunks come back by Landed */
	log_debug("RDMA: landing stream %llu given up by the peer; %u chunk(s) "
		  "lent to it still", (unsigned long long)id, p->nlent);
}

/* --- the frames, the peers, the deadlines --- */

bool rdma_land_frame(struct rdma *t, const uint8_t id[LINK_ID_LEN],
		     const struct Xfer__Peer__PeerMsg *m)
{
	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_LAND_OPEN:
		on_open(t, id, m->land_open);
		break;
	case XFER__PEER__PEER_MSG__BODY_LANDED:
		on_landed(t, id, m->landed);
		break;
	case XFER__PEER__PEER_MSG__BODY_LAND_ABORT:
		on_abort(t, id, m->land_abort->id);
		break;
	case XFER__PEER__PEER_MSG__BODY_LAND_GRANT:
		rdma_land_on_grant(t, id, m->land_grant);
		break;
	case XFER__PEER__PEER_MSG__BODY_LAND_DONE:
		rdma_land_on_done(t, id, m->land_done);
		break;
	default:
		return false;
	}
	rdma_streams_reap(t);
	return true;
}

/* Every chunk of p lent whose stream went comes back (all: any). */
static unsigned take_back(struct rdma_land *l, struct land_pool *p, bool all,
			  int64_t result)
{
	unsigned n = 0;

	for (uint32_t s = 0; s < p->nslots; s++) {
		struct stage_chunk *c = p->lent[s];
		const struct land_lend *ll = c ? STAGE_PRIV(c, struct land_lend)
					       : NULL;
		if (!ll || (!all && ll->ls))
			continue;
		lend_back(l, p, s, result);
		n++;
	}
	return n;
}

void rdma_land_peer_down(struct rdma *t, const uint8_t id[LINK_ID_LEN])
{
	struct rdma_land *l = t->land;
	struct land_stream *ls, *next;
	struct land_pool *p;

	if (!l)
		return;
	for (ls = TAILQ_FIRST(&l->streams); ls; ls = next) {
		next = TAILQ_NEXT(ls, q);
		if (memcmp(ls->peer, id, LINK_ID_LEN) == 0)
			stream_free(ls);
	}
	if (!(p = land_pool_of(&l->pools, id)))
		return;
	unsigned n = take_back(l, p, true, -ECONNRESET);
	if (n)
		log_info("RDMA: %u landing chunk%s lent to a peer that went "
			 "are back", n, n == 1 ? "" : "s");
	/* Its pool goes with it (now, or once its last copy ended): a
	 * later link of the peer gets a new one, new keys. */
	land_pool_gone(&l->pools, p, t);
	tick_arm(l);
}

bool rdma_land_expire(struct rdma *t, uint64_t now)
{
	struct rdma_land *l = t->land;
	struct land_stream *ls, *next;
	struct land_pool *p;
	bool any = false;

	if (!l)
		return false;
	for (ls = TAILQ_FIRST(&l->streams); ls; ls = next) {
		next = TAILQ_NEXT(ls, q);
		if (ls->deadline_ns > now)
			continue;
		send_done(t, ls->peer, ls->id, -ETIMEDOUT);
		stream_free(ls);
		any = true;
	}
	/* A chunk whose stream went long ago and that its peer never gave
	 * back: once that peer's queue pairs to us are gone, nothing of it
	 * can reach the chunk any more. */
	TAILQ_FOREACH(p, &l->pools.all, q) {
		for (uint32_t s = 0; s < p->nslots; s++) {
			struct stage_chunk *c = p->lent[s];
			struct land_lend *ll = c ? STAGE_PRIV(c, struct land_lend)
						 : NULL;
			if (!ll || ll->ls || ll->orphan_ns + LAND_RECLAIM_NS > now)
				continue;
			struct rpeer *rp = rdma_find_peer(t, p->peer);
			log_warnx("RDMA: %s kept a landing chunk past its "
				  "stream; its queue pairs to us are closed, the "
				  "chunk taken back", p->name);
			if (rp)
				rdma_peer_close_passive(t, rp);
			take_back(l, p, false, -ETIMEDOUT);
			any = true;
			break;
		}
	}
	any |= land_pools_sweep(&l->pools, t, now);
	tick_arm(l);
	return any;
}

void rdma_land_close(struct rdma *t)
{
	struct rdma_land *l = t->land;
	struct land_stream *ls;
	struct land_pool *p;
	unsigned n = 0;

	if (!l)
		return;
	while ((ls = TAILQ_FIRST(&l->streams)))
		stream_free(ls);
	/* The queue pairs are gone: every chunk is ours. */
	TAILQ_FOREACH(p, &l->pools.all, q)
		n += take_back(l, p, true, -ECONNRESET);
	if (n)
		log_warnx("RDMA: %u landing chunk(s) still lent at exit", n);
	land_pools_fini(&l->pools, t);
	if (l->tick)
		event_free(l->tick);
	free(l);
	t->land = NULL;
}
