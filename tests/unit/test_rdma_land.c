/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdma_land.c - owner-side staging's frames from a hostile peer
 * (daemon/transport/rdma_land.c), on a real link: the transport's state
 * (struct rdma, made here without devices: its staging pool and landing
 * chunks exist, no NIC registers them), a real linkset with the TCP
 * mover as its data client, and the test playing the peers at the far
 * end of socketpairs, writing frames as another xferd would and reading
 * the replies.  The peer's NIC is played too: the chunks lie in this
 * process, so a WRITE's bytes are copied into a grant's address and a
 * READ's read from it.
 *
 * Every forged frame (a Landed for a chunk the peer does not hold, a
 * slot out of range, a stream that is not its own; a LandGrant nobody
 * asked for or outside its stream; a LandOpen with a chunk of 0 or
 * larger than the owner's, a bad key or range; streams past the per-peer
 * cap) must end in LandDone or Landed with an error, keep the link up,
 * and leave every chunk back in the pool once the honest frames that
 * follow are done; honest streams beside them move their bytes intact.
 *
 * Each peer is lent chunks of a pool of its own: two peers' chunks never
 * meet, a peer's pool goes once its link went and its chunks are back
 * (or once unused), and no more than rdma_cfg.landing_peers pools live
 * at once (a further peer's LandOpen: -EBUSY).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <event2/event.h>

#include "common/token_codec.h"
#include "common/wire.h"
#include "mem/region.h"
#include "mem/staging.h"
#include "peer.pb-c.h"
#include "transport/link.h"
#include "common/clock.h"
#include "transport/rdma_int.h"
#include "transport/rdma_land_pool.h"
#include "transport/tcp.h"
#include "xfer_ring.h"
#include "suites.h"

#define MEM_LEN   (1u << 20)
#define CH        (64u << 10)     /* the requesters' cut */
#define NPEERS    2
#define MAXMSG    256

static const uint8_t self_id[LINK_ID_LEN] = { 0x5e, 0x1f };
static const uint8_t peer_id[NPEERS][LINK_ID_LEN] = { { 0xa1 }, { 0xb2 } };

struct fx {
	struct event_base *base;
	struct regtab *regs;
	struct tcp_mover *tm;
	struct linkset *ls;
	struct rdma *t;
	int fd[NPEERS];           /* the test's ends, one per peer */
	struct link_stats stats[NPEERS];
	unsigned downs;
	struct region *mem;       /* the owner's memfd region */
	struct token tok;         /* a token of all of it */
	uint8_t *src;             /* what honest WRITEs bring */
	/* the replies read so far, per peer, not looked at yet */
	Xfer__Peer__PeerMsg *msg[NPEERS][MAXMSG];
	unsigned nmsg[NPEERS];
	uint8_t rx[NPEERS][1 << 16];
	size_t nrx[NPEERS];
	/* the requester's operations ended */
	int64_t op_result;
	unsigned op_dones;
};

static struct fx *g_fx;

static void hook_link_down(void *arg, const uint8_t id[LINK_ID_LEN],
			   uint64_t gen, int err, const char *why)
{
	struct fx *x = arg;
	(void)id, (void)gen, (void)err, (void)why;
	x->downs++;
}

static void hook_ctl_frame(void *arg, const uint8_t id[LINK_ID_LEN],
			   Xfer__Peer__PeerMsg *m)
{
	(void)arg, (void)id;
	xfer__peer__peer_msg__free_unpacked(m, NULL);
}

/* As the executor's hook_frame: every mover's frame(), here RDMA's. */
static bool hook_frame(void *arg, const uint8_t id[LINK_ID_LEN],
		       const Xfer__Peer__PeerMsg *m)
{
	struct fx *x = arg;

	return rdma_mover_ops.frame(x->t, id, m);
}

static void hook_op_done(void *arg, struct xop *op, int64_t result)
{
	(void)arg, (void)op;
	g_fx->op_result = result;
	g_fx->op_dones++;
}

static void hook_reroute(void *arg, struct xop *op)
{
	(void)arg, (void)op;
	ck_abort_msg("a landing stream was handed to another route");
}

static void pump(struct fx *x)
{
	for (int i = 0; i < 16; i++)
		event_base_loop(x->base, EVLOOP_NONBLOCK);
}

/* The frames peer p received since the last call, kept in x->msg[p]. */
static void recv_frames(struct fx *x, int p)
{
	pump(x);
	for (;;) {
		ssize_t n = read(x->fd[p], x->rx[p] + x->nrx[p],
				 sizeof(x->rx[p]) - x->nrx[p]);
		if (n <= 0)
			break;
		x->nrx[p] += (size_t)n;
	}
	for (;;) {
		uint32_t hlen, plen;
		const char *why = NULL;
		int rc = link_frame_prefix(x->rx[p], x->nrx[p], &hlen, &plen);
		ck_assert_int_ge(rc, 0);
		if (rc == 0)
			break;
		ck_assert_uint_eq(plen, 0);
		Xfer__Peer__PeerMsg *m = link_frame_unpack(
			x->rx[p] + LINK_FRAME_PREFIX, hlen, plen, &why);
		ck_assert_msg(m, "xferd sent a bad frame: %s", why);
		size_t used = LINK_FRAME_PREFIX + hlen;
		memmove(x->rx[p], x->rx[p] + used, x->nrx[p] - used);
		x->nrx[p] -= used;
		if (m->body_case == XFER__PEER__PEER_MSG__BODY_PING ||
		    m->body_case == XFER__PEER__PEER_MSG__BODY_PONG) {
			xfer__peer__peer_msg__free_unpacked(m, NULL);
			continue;
		}
		ck_assert_uint_lt(x->nmsg[p], MAXMSG);
		x->msg[p][x->nmsg[p]++] = m;
	}
}

/* The oldest frame of peer p not looked at yet, of kind body (else the
 * test fails); the caller frees it. */
static Xfer__Peer__PeerMsg *next_frame(struct fx *x, int p,
				       Xfer__Peer__PeerMsg__BodyCase body)
{
	if (!x->nmsg[p])
		recv_frames(x, p);
	ck_assert_msg(x->nmsg[p] > 0, "peer %d: no frame (expected case %d)",
		      p, (int)body);
	Xfer__Peer__PeerMsg *m = x->msg[p][0];
	memmove(&x->msg[p][0], &x->msg[p][1],
		--x->nmsg[p] * sizeof(x->msg[p][0]));
	ck_assert_msg(m->body_case == body, "peer %d: frame case %d, not %d",
		      p, (int)m->body_case, (int)body);
	return m;
}

static void expect_none(struct fx *x, int p)
{
	recv_frames(x, p);
	ck_assert_msg(x->nmsg[p] == 0, "peer %d: an unexpected frame (case %d)",
		      p, x->nmsg[p] ? (int)x->msg[p][0]->body_case : 0);
}

static void expect_done(struct fx *x, int p, uint64_t id, int64_t result)
{
	Xfer__Peer__PeerMsg *m = next_frame(x, p,
					    XFER__PEER__PEER_MSG__BODY_LAND_DONE);
	ck_assert_uint_eq(m->land_done->id, id);
	ck_assert_int_eq(m->land_done->result, result);
	xfer__peer__peer_msg__free_unpacked(m, NULL);
}

static void send_frame(struct fx *x, int p, Xfer__Peer__PeerMsg *m)
{
	static uint8_t buf[LINK_FRAME_PREFIX + PEER_MAX_HEADER];

	m->proto_version = XFER_PROTO_VERSION;
	int n = link_frame_header(&m->base, 0, buf);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(write(x->fd[p], buf, (size_t)n), n);
	pump(x);
}

static void send_open(struct fx *x, int p, uint64_t id, const struct token *tk,
		      uint64_t at, uint64_t len, bool read, uint32_t chunk)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LandOpen o = XFER__PEER__LAND_OPEN__INIT;
	Xfer__Peer__Target tg = XFER__PEER__TARGET__INIT;

	tg.region = tk->region;
	tg.key = (ProtobufCBinaryData){ TOKEN_KEY_LEN, (uint8_t *)tk->key };
	tg.offset = tk->offset;
	tg.length = tk->length;
	tg.region_length = tk->region_length;
	tg.mem_kind = tk->mem_kind;
	o.id = id;
	o.target = &tg;
	o.at = at;
	o.length = len;
	o.read = read;
	o.chunk = chunk;
	o.timeout_ms = 60000;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LAND_OPEN;
	m.land_open = &o;
	send_frame(x, p, &m);
}

static void send_landed(struct fx *x, int p, uint64_t id, uint32_t slot,
			int err)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Landed l = XFER__PEER__LANDED__INIT;

	l.id = id;
	l.slot = slot;
	l.error = err;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LANDED;
	m.landed = &l;
	send_frame(x, p, &m);
}

static void send_abort(struct fx *x, int p, uint64_t id)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LandAbort a = XFER__PEER__LAND_ABORT__INIT;

	a.id = id;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LAND_ABORT;
	m.land_abort = &a;
	send_frame(x, p, &m);
}

static void send_grant(struct fx *x, int p, uint64_t id, uint32_t slot,
		       uint64_t at, uint32_t len, size_t nkeys)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LandGrant g = XFER__PEER__LAND_GRANT__INIT;
	uint32_t keys[REGION_RDMA_KEYS + 4] = { 0x1234 };

	ck_assert_uint_le(nkeys, REGION_RDMA_KEYS + 4);
	g.id = id;
	g.slot = slot;
	g.at = at;
	g.len = len;
	g.addr = 0x7f0000000000;
	g.rkeys = keys;
	g.n_rkeys = nkeys;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LAND_GRANT;
	m.land_grant = &g;
	send_frame(x, p, &m);
}

static struct rdma_land_stats land_stats(struct fx *x)
{
	struct rdma_land_stats ls;

	rdma_land_stats(x->t, &ls);
	ck_assert(ls.lending);
	return ls;
}

/* Every chunk is back: the node's pool whole, no landing chunk lent,
 * and each peer's pool (whole, or it would stay) goes when the peer's
 * link does (a next stream of it gets a new one). */
static void assert_pool_whole(struct fx *x)
{
	struct staging_stats st;

	staging_get_stats(rdma_staging_pool(x->t->staging), &st);
	for (int h = 0; h < 2; h++)
		ck_assert_uint_eq(st.free[h], st.chunks[h]);
	ck_assert_uint_eq(land_stats(x).lent, 0);
	for (int p = 0; p < NPEERS; p++)
		rdma_land_peer_down(x->t, peer_id[p]);
	struct rdma_land_stats ls = land_stats(x);
	ck_assert_uint_eq(ls.pools, 0);
	ck_assert_uint_eq(ls.chunks, 0);
	ck_assert_uint_eq(ls.bytes, 0);
	ck_assert_uint_eq(ls.freed, ls.made);
}

/* A token of [off, off + len) of x->mem, as the owner gives it out. */
static struct token token_of(struct fx *x, uint64_t off, uint64_t len)
{
	struct token tk = {
		.region = region_handle(x->mem),
		.offset = off,
		.length = len,
		.region_length = MEM_LEN,
		.mem_kind = (uint32_t)region_kind(x->mem),
	};

	memcpy(tk.instance_id, self_id, TOKEN_INSTANCE_LEN);
	token_sign(&tk, region_key(x->mem));
	return tk;
}

/* max_pools: peers lent to at once (rdma_landing_peers). */
static void fx_init_pools(struct fx *x, uint32_t max_pools)
{
	const struct linkset_cfg lcfg = { .keepalive_ms = 60000,
					  .peer_timeout_ms = 120000 };
	const struct linkset_hooks lh = { .link_down = hook_link_down,
					  .ctl_frame = hook_ctl_frame,
					  .frame = hook_frame, .arg = x };
	const struct mover_hooks mh = { .op_done = hook_op_done,
					.reroute = hook_reroute, .arg = x };
	struct tcp_cfg tcfg = { .tcp_chunk = 1u << 20 };
	/* Pools that hold every chunk the credits allow each way: the
	 * flood below holds LAND_STREAMS_PER_PEER streams' chunks. */
	const struct rdma_cfg rcfg = {
		.qps = 1, .stripe = 1u << 20, .landing = true,
		.landing_chunks = 2 * LAND_STREAMS_PER_PEER * LAND_GRANTS_AHEAD,
		.landing_peers = max_pools };

	memset(x, 0, sizeof(*x));
	g_fx = x;
	memcpy(tcfg.self_id, self_id, LINK_ID_LEN);
	ck_assert_ptr_nonnull(x->base = event_base_new());
	ck_assert_ptr_nonnull(x->regs = regtab_create());
	ck_assert_ptr_nonnull(x->tm = tcp_mover_create(x->regs, &tcfg, &mh));
	ck_assert_ptr_nonnull(x->ls = linkset_create(x->base, &lcfg, &lh,
						     &tcp_link_client, x->tm));
	tcp_mover_bind(x->tm, x->ls);

	/* The transport as rdma_create makes it, with no device. */
	struct rdma *t = calloc(1, sizeof(*t));
	ck_assert_ptr_nonnull(t);
	t->base = x->base;
	t->links = x->ls;
	t->hooks = mh;
	TAILQ_INIT(&t->waiting);
	TAILQ_INIT(&t->streams);
	TAILQ_INIT(&t->ended);
	rdma_tables_init(t);
	rdma_set_cfg(t, &rcfg);
	struct rdma_stage_res res = { .regs = x->regs };
	memcpy(res.self_id, self_id, LINK_ID_LEN);
	ck_assert_ptr_nonnull(t->staging = rdma_staging_open(t, &res));
	ck_assert_ptr_nonnull(t->land = rdma_land_open(t, &res));
	x->t = t;

	for (int p = 0; p < NPEERS; p++) {
		int sv[2];
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK,
					    0, sv), 0);
		linkset_attach(x->ls, sv[0], peer_id[p], 1, &x->stats[p], NULL,
			       0, false, false);
		x->fd[p] = sv[1];
	}

	int fd = memfd_create("land", MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, MEM_LEN), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	ck_assert_int_eq(region_create_memfd(fd, MEM_LEN, 1, &x->mem), 0);
	regtab_add_region(x->regs, x->mem);  /* the table's reference */
	x->tok = token_of(x, 0, MEM_LEN);
	ck_assert_uint_eq(rdma_land_offer(t, x->mem), staging_chunk_bytes(
		rdma_staging_pool(t->staging)));
	x->src = malloc(MEM_LEN);
	for (uint32_t i = 0; i < MEM_LEN; i++)
		x->src[i] = (uint8_t)(i * 7 + 3);
	pump(x);
}

static void fx_init(struct fx *x)
{
	fx_init_pools(x, NPEERS);
}

static void fx_fini(struct fx *x)
{
	ck_assert_uint_eq(x->downs, 0);  /* every link stayed up */
	for (int p = 0; p < NPEERS; p++) {
		expect_none(x, p);
		close(x->fd[p]);
	}
	pump(x);
	rdma_destroy(x->t);
	tcp_mover_ops.destroy(x->tm);
	regtab_destroy(x->regs);
	event_base_free(x->base);
	free(x->src);
}

/* An honest requester's side of owner stream id on peer p: each grant
 * carried out (a WRITE's bytes from x->src at dst, a READ's checked
 * against the region) and returned, until LandDone. */
static void serve_grants(struct fx *x, int p, uint64_t id, uint64_t dst,
			 uint64_t len, bool read)
{
	uint64_t moved = 0;

	for (;;) {
		if (!x->nmsg[p])
			recv_frames(x, p);
		ck_assert_uint_gt(x->nmsg[p], 0);
		if (x->msg[p][0]->body_case ==
		    XFER__PEER__PEER_MSG__BODY_LAND_DONE)
			break;
		Xfer__Peer__PeerMsg *m = next_frame(
			x, p, XFER__PEER__PEER_MSG__BODY_LAND_GRANT);
		const Xfer__Peer__LandGrant *g = m->land_grant;
		ck_assert_uint_eq(g->id, id);
		ck_assert_uint_le(g->len, CH);
		ck_assert_uint_le(g->at + g->len, len);
		uint8_t *chunk = (uint8_t *)(uintptr_t)g->addr;
		if (read)
			ck_assert_mem_eq(chunk, (uint8_t *)region_map_at(
					 x->mem, dst + g->at), g->len);
		else
			memcpy(chunk, x->src + dst + g->at, g->len);
		moved += g->len;
		send_landed(x, p, id, g->slot, 0);
		xfer__peer__peer_msg__free_unpacked(m, NULL);
	}
	ck_assert_uint_eq(moved, len);
	expect_done(x, p, id, (int64_t)len);
}

/* Honest streams move their bytes: the baseline the forged frames are
 * told from. */
START_TEST(honest_streams)
{
	struct fx x;

	fx_init(&x);
	send_open(&x, 0, 1, &x.tok, 1000, 300001, false, CH);
	serve_grants(&x, 0, 1, 1000, 300001, false);
	ck_assert_mem_eq(region_map_at(x.mem, 1000), x.src + 1000, 300001);
	send_open(&x, 1, 2, &x.tok, 999, 200000, true, CH);
	serve_grants(&x, 1, 2, 999, 200000, true);
	assert_pool_whole(&x);
	fx_fini(&x);
}
END_TEST

/* LandOpen that no honest requester sends: refused one by one, the link
 * stays, an honest stream follows. */
START_TEST(bad_opens_refused)
{
	struct fx x;
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LandOpen o = XFER__PEER__LAND_OPEN__INIT;

	fx_init(&x);
	uint32_t owner_chunk = rdma_land_offer(x.t, x.mem);
	send_open(&x, 0, 10, &x.tok, 0, 4096, false, 0);
	expect_done(&x, 0, 10, -EPROTO);
	send_open(&x, 0, 11, &x.tok, 0, 4096, false, owner_chunk + 1);
	expect_done(&x, 0, 11, -EPROTO);
	send_open(&x, 0, 12, &x.tok, 0, 4096, true, UINT32_MAX);
	expect_done(&x, 0, 12, -EPROTO);
	send_open(&x, 0, 13, &x.tok, 0, 0, false, CH);
	expect_done(&x, 0, 13, -EPROTO);
	/* No target at all. */
	o.id = 14;
	o.length = 4096;
	o.chunk = CH;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LAND_OPEN;
	m.land_open = &o;
	send_frame(&x, 0, &m);
	expect_done(&x, 0, 14, -EPROTO);
	/* A key of another range, a range past the token's, a widened
	 * token, a region that is not there. */
	struct token narrow = token_of(&x, 4096, 8192), forged = narrow;
	forged.length = MEM_LEN - 4096;
	send_open(&x, 0, 15, &forged, 0, 65536, false, CH);
	expect_done(&x, 0, 15, -EACCES);
	send_open(&x, 0, 16, &narrow, 4096, 8192, false, CH);
	expect_done(&x, 0, 16, -ERANGE);
	send_open(&x, 0, 17, &narrow, UINT64_MAX - 10, 20, true, CH);
	expect_done(&x, 0, 17, -ERANGE);
	struct token gone = x.tok;
	gone.region += 1000;
	send_open(&x, 0, 18, &gone, 0, 4096, false, CH);
	expect_done(&x, 0, 18, -ESTALE);
	/* An id already open on this link: the second is refused, the
	 * first goes on. */
	send_open(&x, 0, 19, &narrow, 0, 8192, false, 4096);
	send_open(&x, 0, 19, &narrow, 0, 8192, false, 4096);
	Xfer__Peer__PeerMsg *g1 = next_frame(&x, 0,
					     XFER__PEER__PEER_MSG__BODY_LAND_GRANT);
	Xfer__Peer__PeerMsg *g2 = next_frame(&x, 0,
					     XFER__PEER__PEER_MSG__BODY_LAND_GRANT);
	expect_done(&x, 0, 19, -EPROTO);
	memcpy((void *)(uintptr_t)g1->land_grant->addr, x.src, 4096);
	memcpy((void *)(uintptr_t)g2->land_grant->addr, x.src + 4096, 4096);
	send_landed(&x, 0, 19, g1->land_grant->slot, 0);
	send_landed(&x, 0, 19, g2->land_grant->slot, 0);
	xfer__peer__peer_msg__free_unpacked(g1, NULL);
	xfer__peer__peer_msg__free_unpacked(g2, NULL);
	expect_done(&x, 0, 19, 8192);
	ck_assert_mem_eq(region_map_at(x.mem, 4096), x.src, 8192);
	/* The same link, an honest stream. */
	send_open(&x, 0, 20, &x.tok, 0, 100000, false, CH);
	serve_grants(&x, 0, 20, 0, 100000, false);
	ck_assert_mem_eq(region_map_at(x.mem, 0), x.src, 100000);
	assert_pool_whole(&x);
	fx_fini(&x);
}
END_TEST

/* Grants of a WRITE stream id on peer p, LAND_GRANTS_AHEAD of them. */
static void take_grants(struct fx *x, int p, uint64_t id,
			Xfer__Peer__PeerMsg **g, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		g[i] = next_frame(x, p, XFER__PEER__PEER_MSG__BODY_LAND_GRANT);
		ck_assert_uint_eq(g[i]->land_grant->id, id);
	}
}

static void free_grants(Xfer__Peer__PeerMsg **g, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		xfer__peer__peer_msg__free_unpacked(g[i], NULL);
}

/* Landed frames for chunks the peer does not hold. */
START_TEST(forged_landed_refused)
{
	struct fx x;
	Xfer__Peer__PeerMsg *a[LAND_GRANTS_AHEAD], *c[LAND_GRANTS_AHEAD];
	const uint64_t len = LAND_GRANTS_AHEAD * CH;

	fx_init(&x);
	/* Stream 30 of peer 0, its chunks out. */
	send_open(&x, 0, 30, &x.tok, 0, len, false, CH);
	take_grants(&x, 0, 30, a, LAND_GRANTS_AHEAD);
	expect_none(&x, 0);
	/* A slot past the pool, a slot not lent, for no stream: refused,
	 * nothing else moves. */
	send_landed(&x, 0, 99, UINT32_MAX, 0);
	expect_done(&x, 0, 99, -EPROTO);
	uint32_t free_slot = 0;
	for (bool used = true; used; free_slot++) {
		used = false;
		for (unsigned i = 0; i < LAND_GRANTS_AHEAD; i++)
			used |= a[i]->land_grant->slot == free_slot;
		if (!used)
			break;
	}
	send_landed(&x, 0, 98, free_slot, 0);
	expect_done(&x, 0, 98, -EPROTO);
	/* Another peer returns stream 30's chunk, under 30's id: it is
	 * not its; stream 30 goes on. */
	send_landed(&x, 1, 30, a[0]->land_grant->slot, 0);
	expect_done(&x, 1, 30, -EPROTO);
	expect_none(&x, 0);
	/* Peer 0 returns 30's chunk under its stream 31's id: 31 fails,
	 * the chunk stays 30's; 31's own chunks come back by their
	 * Landed. */
	send_open(&x, 0, 31, &x.tok, len, len, false, CH);
	take_grants(&x, 0, 31, c, LAND_GRANTS_AHEAD);
	send_landed(&x, 0, 31, a[1]->land_grant->slot, 0);
	expect_none(&x, 0);  /* it ends once its chunks are back */
	for (unsigned i = 0; i < LAND_GRANTS_AHEAD; i++)
		send_landed(&x, 0, 31, c[i]->land_grant->slot, -ECANCELED);
	expect_done(&x, 0, 31, -EPROTO);
	free_grants(c, LAND_GRANTS_AHEAD);
	/* Stream 30, honest, ends with its bytes. */
	for (unsigned i = 0; i < LAND_GRANTS_AHEAD; i++) {
		const Xfer__Peer__LandGrant *g = a[i]->land_grant;
		memcpy((void *)(uintptr_t)g->addr, x.src + g->at, g->len);
		send_landed(&x, 0, 30, g->slot, 0);
	}
	free_grants(a, LAND_GRANTS_AHEAD);
	expect_done(&x, 0, 30, (int64_t)len);
	ck_assert_mem_eq(region_map_at(x.mem, 0), x.src, len);
	/* A slot past the pool under a stream's own id: that stream fails;
	 * the same chunk returned twice: the second is refused too. */
	send_open(&x, 0, 32, &x.tok, 0, len, true, CH);
	take_grants(&x, 0, 32, c, LAND_GRANTS_AHEAD);
	send_landed(&x, 0, 32, UINT32_MAX, 0);
	expect_none(&x, 0);
	for (unsigned i = 0; i < LAND_GRANTS_AHEAD; i++)
		send_landed(&x, 0, 32, c[i]->land_grant->slot, 0);
	expect_done(&x, 0, 32, -EPROTO);
	send_landed(&x, 0, 32, c[0]->land_grant->slot, 0);
	expect_done(&x, 0, 32, -EPROTO);
	free_grants(c, LAND_GRANTS_AHEAD);
	assert_pool_whole(&x);
	fx_fini(&x);
}
END_TEST

/* A flood of streams: past LAND_STREAMS_PER_PEER open, or as many
 * streams' chunks held after giving the streams up, LandOpen is
 * refused with -EBUSY; the other peer is not held back; the peer's
 * link going returns every chunk. */
START_TEST(stream_flood_capped)
{
	struct fx x;
	Xfer__Peer__PeerMsg *g[LAND_STREAMS_PER_PEER][LAND_GRANTS_AHEAD];
	const uint64_t len = 8 * CH;

	fx_init(&x);
	for (unsigned s = 0; s < LAND_STREAMS_PER_PEER; s++) {
		send_open(&x, 0, 100 + s, &x.tok, 0, len, true, CH);
		take_grants(&x, 0, 100 + s, g[s], LAND_GRANTS_AHEAD);
	}
	for (unsigned s = 0; s < 4; s++) {
		send_open(&x, 0, 200 + s, &x.tok, 0, len, true, CH);
		expect_done(&x, 0, 200 + s, -EBUSY);
	}
	send_open(&x, 1, 300, &x.tok, 0, 100000, true, CH);
	serve_grants(&x, 1, 300, 0, 100000, true);
	/* Given up, their chunks kept: still held, still refused. */
	for (unsigned s = 0; s < LAND_STREAMS_PER_PEER; s++)
		send_abort(&x, 0, 100 + s);
	expect_none(&x, 0);
	send_open(&x, 0, 201, &x.tok, 0, len, true, CH);
	expect_done(&x, 0, 201, -EBUSY);
	/* One stream's chunks back: room for one more. */
	for (unsigned i = 0; i < LAND_GRANTS_AHEAD; i++)
		send_landed(&x, 0, 100, g[0][i]->land_grant->slot, -ECANCELED);
	send_open(&x, 0, 202, &x.tok, 0, 4096, true, CH);
	serve_grants(&x, 0, 202, 0, 4096, true);
	/* The peer goes (its queue pairs to us with it): the rest back. */
	rdma_land_peer_down(x.t, peer_id[0]);
	assert_pool_whole(&x);
	/* A stale Landed after that: refused, the link stays. */
	send_landed(&x, 0, 101, g[1][0]->land_grant->slot, 0);
	expect_done(&x, 0, 101, -EPROTO);
	for (unsigned s = 0; s < LAND_STREAMS_PER_PEER; s++)
		free_grants(g[s], LAND_GRANTS_AHEAD);
	fx_fini(&x);
}
END_TEST

/* The requester's side: a READ through peer 0's landing chunks, the
 * test its owner.  It opens with LandOpen; grants nobody asked for come
 * straight back; a grant outside the stream fails it. */
struct req {
	struct xop op;
	struct region *local, *remote;
	uint64_t land_id;
};

static void req_open(struct fx *x, struct req *r, uint64_t len)
{
	struct region_rdma rr = { .landing_chunk = CH, .link_gen = 1 };
	struct token tk = x->tok;
	uint64_t h, glen, off;

	memset(r, 0, sizeof(*r));
	memcpy(tk.instance_id, peer_id[0], TOKEN_INSTANCE_LEN);
	ck_assert_int_eq(regtab_add_remote_import(x->regs, 7, &tk, &rr, &h,
						  &glen), 0);
	ck_assert_int_eq(regtab_resolve(x->regs, 7, h, 0, len, true,
					&r->remote, &off), 0);
	ck_assert_int_eq(regtab_resolve(x->regs, 1, region_handle(x->mem), 0,
					len, false, &r->local, &off), 0);
	r->op = (struct xop){ .opcode = XFER_OP_READ, .local = r->local,
			      .remote = r->remote, .len = len,
			      .deadline_ns = UINT64_MAX };
	rop(&r->op)->owner = true;
	x->op_dones = 0;
	ck_assert_int_eq(rdma_stream_open(x->t, &r->op), 0);
	Xfer__Peer__PeerMsg *m = next_frame(x, 0,
					    XFER__PEER__PEER_MSG__BODY_LAND_OPEN);
	const Xfer__Peer__LandOpen *o = m->land_open;
	ck_assert_uint_eq(o->length, len);
	ck_assert(o->read);
	ck_assert_uint_eq(o->chunk, CH);
	ck_assert_uint_eq(o->target->region, x->tok.region);
	r->land_id = o->id;
	xfer__peer__peer_msg__free_unpacked(m, NULL);
}

static void req_fini(struct req *r)
{
	region_put(r->local);
	region_put(r->remote);
}

/* The stream failed on a bad grant: the grant back with -EPROTO, the
 * stream given up (LandAbort), the operation ended with -EPROTO. */
static void expect_failed(struct fx *x, struct req *r, uint32_t slot)
{
	Xfer__Peer__PeerMsg *m = next_frame(x, 0,
					    XFER__PEER__PEER_MSG__BODY_LANDED);
	ck_assert_uint_eq(m->landed->id, r->land_id);
	ck_assert_uint_eq(m->landed->slot, slot);
	ck_assert_int_eq(m->landed->error, -EPROTO);
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	m = next_frame(x, 0, XFER__PEER__PEER_MSG__BODY_LAND_ABORT);
	ck_assert_uint_eq(m->land_abort->id, r->land_id);
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	ck_assert_uint_eq(x->op_dones, 1);
	ck_assert_int_eq(x->op_result, -EPROTO);
	ck_assert(TAILQ_EMPTY(&x->t->streams));
	ck_assert_uint_eq(x->t->pieces_queued, 0);
}

START_TEST(forged_grants_refused)
{
	struct fx x;
	struct req r;
	const uint64_t len = 3 * CH + 5;

	fx_init(&x);
	/* No stream of ours: back unused. */
	send_grant(&x, 0, 4242, 3, 0, CH, 1);
	Xfer__Peer__PeerMsg *m = next_frame(&x, 0,
					    XFER__PEER__PEER_MSG__BODY_LANDED);
	ck_assert_uint_eq(m->landed->id, 4242);
	ck_assert_uint_eq(m->landed->slot, 3);
	ck_assert_int_eq(m->landed->error, -ECANCELED);
	xfer__peer__peer_msg__free_unpacked(m, NULL);

	/* Past the stream's end, empty, too long, too many keys. */
	static const struct { uint64_t at; uint32_t len; size_t nkeys; } bad[] = {
		{ 3 * CH + 5, 1, 1 },
		{ 0, 0, 1 },
		{ 3 * CH, CH, 1 },
		{ 3 * CH + 4, UINT32_MAX, 1 },
		{ UINT64_MAX, 2, 1 },
		{ 0, CH, REGION_RDMA_KEYS + 1 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		req_open(&x, &r, len);
		/* Another peer's grant under our stream's id: not for it;
		 * the stream goes on. */
		send_grant(&x, 1, r.land_id, 5, 0, CH, 1);
		m = next_frame(&x, 1, XFER__PEER__PEER_MSG__BODY_LANDED);
		ck_assert_int_eq(m->landed->error, -ECANCELED);
		xfer__peer__peer_msg__free_unpacked(m, NULL);
		ck_assert_uint_eq(x.op_dones, 0);
		send_grant(&x, 0, r.land_id, 9, bad[i].at, bad[i].len,
			   bad[i].nkeys);
		expect_failed(&x, &r, 9);
		req_fini(&r);
		assert_pool_whole(&x);
	}
	/* A good grant held, then a bad one: both go back. */
	req_open(&x, &r, len);
	send_grant(&x, 0, r.land_id, 1, CH, CH, 1);
	send_grant(&x, 0, r.land_id, 2, 0, 0, 1);
	m = next_frame(&x, 0, XFER__PEER__PEER_MSG__BODY_LANDED);
	ck_assert_uint_eq(m->landed->slot, 2);
	ck_assert_int_eq(m->landed->error, -EPROTO);
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	m = next_frame(&x, 0, XFER__PEER__PEER_MSG__BODY_LANDED);
	ck_assert_uint_eq(m->landed->slot, 1);
	ck_assert_int_eq(m->landed->error, -ECANCELED);
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	m = next_frame(&x, 0, XFER__PEER__PEER_MSG__BODY_LAND_ABORT);
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	ck_assert_int_eq(x.op_result, -EPROTO);
	req_fini(&r);
	assert_pool_whole(&x);
	fx_fini(&x);
}
END_TEST

/* Grants of stream id on peer p, n of them, their chunks noted in
 * at[] (each a whole landing chunk of bytes chunk). */
static void note_chunks(struct fx *x, int p, uint64_t id, uint64_t *at,
			Xfer__Peer__PeerMsg **g, unsigned n)
{
	take_grants(x, p, id, g, n);
	for (unsigned i = 0; i < n; i++)
		at[i] = g[i]->land_grant->addr;
}

static bool overlaps(uint64_t a, uint64_t b, uint32_t len)
{
	return a < b + len && b < a + len;
}

/* Two peers, each with a WRITE and a READ stream out at once: no chunk
 * of one is a chunk of the other (nor of the node's staging pool), and
 * every stream still moves its bytes. */
START_TEST(peers_disjoint_chunks)
{
	struct fx x;
	enum { N = LAND_GRANTS_AHEAD };
	Xfer__Peer__PeerMsg *g[NPEERS][2][N];
	uint64_t at[NPEERS][2][N];
	const uint64_t len = N * CH;
	struct staging_chunk *sc[64];
	unsigned nsc = 0;

	fx_init(&x);
	uint32_t chunk = rdma_land_offer(x.t, x.mem);
	for (int p = 0; p < NPEERS; p++) {
		uint64_t off = (uint64_t)p * 2 * len;
		send_open(&x, p, 10, &x.tok, off, len, false, CH);
		note_chunks(&x, p, 10, at[p][0], g[p][0], N);
		send_open(&x, p, 11, &x.tok, off + len, len, true, CH);
		note_chunks(&x, p, 11, at[p][1], g[p][1], N);
	}
	struct rdma_land_stats ls = land_stats(&x);
	ck_assert_uint_eq(ls.pools, NPEERS);
	ck_assert_uint_eq(ls.made, NPEERS);
	ck_assert_uint_eq(ls.lent, NPEERS * 2 * N);
	ck_assert_uint_eq(ls.bytes, (uint64_t)ls.chunks * chunk);
	/* The node's own staging chunks, all of them. */
	struct staging_pool *node = rdma_staging_pool(x.t->staging);
	for (int h = 0; h < 2; h++)
		while (nsc < 64 && (sc[nsc] = staging_take(node, h)))
			nsc++;
	for (int p = 0; p < NPEERS; p++)
		for (int d = 0; d < 2; d++)
			for (unsigned i = 0; i < N; i++) {
				uint64_t a = at[p][d][i];
				for (unsigned k = 0; k < nsc; k++)
					ck_assert(!overlaps(a, (uintptr_t)sc[k]->p,
							    chunk));
				for (int q = 0; q < NPEERS; q++)
					for (int e = 0; e < 2; e++)
						for (unsigned j = 0; j < N; j++)
							if (q != p || e != d || j != i)
								ck_assert(!overlaps(
									a, at[q][e][j], chunk));
			}
	for (unsigned k = 0; k < nsc; k++)
		staging_give(sc[k]);
	/* The streams end honestly, bytes checked. */
	for (int p = 0; p < NPEERS; p++) {
		uint64_t off = (uint64_t)p * 2 * len;
		for (unsigned i = 0; i < N; i++) {
			const Xfer__Peer__LandGrant *w = g[p][0][i]->land_grant;
			const Xfer__Peer__LandGrant *r = g[p][1][i]->land_grant;
			memcpy((void *)(uintptr_t)w->addr, x.src + off + w->at,
			       w->len);
			send_landed(&x, p, 10, w->slot, 0);
			ck_assert_mem_eq((void *)(uintptr_t)r->addr,
					 region_map_at(x.mem, off + len + r->at),
					 r->len);
			send_landed(&x, p, 11, r->slot, 0);
		}
		free_grants(g[p][0], N);
		free_grants(g[p][1], N);
	}
	for (int p = 0; p < NPEERS; p++) {
		/* WRITE's LandDone and READ's, in the order they ended. */
		for (int k = 0; k < 2; k++) {
			Xfer__Peer__PeerMsg *m = next_frame(
				&x, p, XFER__PEER__PEER_MSG__BODY_LAND_DONE);
			ck_assert(m->land_done->id == 10 || m->land_done->id == 11);
			ck_assert_int_eq(m->land_done->result, (int64_t)len);
			xfer__peer__peer_msg__free_unpacked(m, NULL);
		}
		ck_assert_mem_eq(region_map_at(x.mem, (uint64_t)p * 2 * len),
				 x.src + (uint64_t)p * 2 * len, len);
	}
	assert_pool_whole(&x);
	fx_fini(&x);
}
END_TEST

/* A peer's pool goes once its link went and every chunk is back; a
 * stale Landed for it is refused; the peer's next stream gets a new
 * pool; an unused pool goes after LAND_POOL_IDLE_NS. */
START_TEST(pool_freed_with_peer)
{
	struct fx x;
	Xfer__Peer__PeerMsg *g[LAND_GRANTS_AHEAD];
	const uint64_t len = 8 * CH;

	fx_init(&x);
	send_open(&x, 0, 40, &x.tok, 0, len, false, CH);
	take_grants(&x, 0, 40, g, LAND_GRANTS_AHEAD);
	struct rdma_land_stats ls = land_stats(&x);
	ck_assert_uint_eq(ls.pools, 1);
	ck_assert_uint_eq(ls.lent, LAND_GRANTS_AHEAD);
	ck_assert_uint_gt(ls.bytes, 0);
	/* Its link goes: chunks back, the pool with them. */
	rdma_land_peer_down(x.t, peer_id[0]);
	ls = land_stats(&x);
	ck_assert_uint_eq(ls.pools, 0);
	ck_assert_uint_eq(ls.lent, 0);
	ck_assert_uint_eq(ls.bytes, 0);
	ck_assert_uint_eq(ls.freed, 1);
	send_landed(&x, 0, 40, g[0]->land_grant->slot, 0);
	expect_done(&x, 0, 40, -EPROTO);
	free_grants(g, LAND_GRANTS_AHEAD);
	/* A new link of it: a new pool, an honest stream. */
	send_open(&x, 0, 41, &x.tok, 4096, 300000, false, CH);
	serve_grants(&x, 0, 41, 4096, 300000, false);
	ck_assert_mem_eq(region_map_at(x.mem, 4096), x.src + 4096, 300000);
	ls = land_stats(&x);
	ck_assert_uint_eq(ls.pools, 1);
	ck_assert_uint_eq(ls.made, 2);
	/* Unused: it stays a while, then goes. */
	rdma_land_expire(x.t, now_ns());
	ck_assert_uint_eq(land_stats(&x).pools, 1);
	rdma_land_expire(x.t, now_ns() + LAND_POOL_IDLE_NS + 1000000000ull);
	ls = land_stats(&x);
	ck_assert_uint_eq(ls.pools, 0);
	ck_assert_uint_eq(ls.freed, 2);
	assert_pool_whole(&x);
	fx_fini(&x);
}
END_TEST

/* One pool at most: a second peer's LandOpen is refused -EBUSY while
 * the first peer's pool lives, served once it went. */
START_TEST(pool_cap)
{
	struct fx x;

	fx_init_pools(&x, 1);
	send_open(&x, 0, 50, &x.tok, 0, 100000, true, CH);
	serve_grants(&x, 0, 50, 0, 100000, true);
	send_open(&x, 1, 51, &x.tok, 0, 100000, true, CH);
	expect_done(&x, 1, 51, -EBUSY);
	send_open(&x, 1, 52, &x.tok, 0, 4096, false, CH);
	expect_done(&x, 1, 52, -EBUSY);
	struct rdma_land_stats ls = land_stats(&x);
	ck_assert_uint_eq(ls.pools, 1);
	ck_assert_uint_eq(ls.max_pools, 1);
	ck_assert_uint_eq(ls.refused, 2);
	/* The first peer is not held back by the cap. */
	send_open(&x, 0, 53, &x.tok, 0, 4096, false, CH);
	serve_grants(&x, 0, 53, 0, 4096, false);
	rdma_land_peer_down(x.t, peer_id[0]);
	send_open(&x, 1, 54, &x.tok, 0, 100000, true, CH);
	serve_grants(&x, 1, 54, 0, 100000, true);
	ck_assert_uint_eq(land_stats(&x).made, 2);
	send_open(&x, 0, 55, &x.tok, 0, 4096, true, CH);
	expect_done(&x, 0, 55, -EBUSY);
	assert_pool_whole(&x);
	fx_fini(&x);
}
END_TEST

Suite *rdma_land_suite(void)
{
	Suite *s = suite_create("rdma_land");
	TCase *tc = tcase_create("frames");

	tcase_add_test(tc, honest_streams);
	tcase_add_test(tc, bad_opens_refused);
	tcase_add_test(tc, forged_landed_refused);
	tcase_add_test(tc, stream_flood_capped);
	tcase_add_test(tc, forged_grants_refused);
	tcase_add_test(tc, peers_disjoint_chunks);
	tcase_add_test(tc, pool_freed_with_peer);
	tcase_add_test(tc, pool_cap);
	suite_add_tcase(s, tc);
	return s;
}
