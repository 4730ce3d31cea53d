/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_int.h - what the files of the RDMA transport share, and nothing
 * outside them includes (rdma.h is the transport to the rest).
 *
 *   rdma.c         the transport: its ops table, peers coming and going,
 *                  submit, cancel, deadlines, ending operations, life
 *   rdma_qp.c      queue pairs: their life (create, connect over the
 *                  link's QpConnect/QpAccept frames, fail, free) and the
 *                  tables xferctl reads (the queue pairs, rail counters)
 *   rdma_post.c    posting: cutting operations into striped work
 *                  requests, one chain per queue pair and pump, reaping
 *                  completions, retiring what they account for
 *   rdma_sched.c   the order of posting: tenants' shares and caps
 *                  (no verbs; rdma_post.c drives it)
 *   rdma_staged.c  the staged route (ROUTE_RDMA_STAGED): memory that
 *                  no NIC registration covers, through registered
 *                  staging chunks and a CPU or GPU copy on this side, on the
 *                  staging pipeline (stage/pipeline.h): its RDMA WRITE
 *                  and READ stages, and each operation's stream
 *   rdma_land.c    owner-side staging (ROUTE_RDMA_OWNER_STAGED): memory
 *                  the owner's NICs cannot reach, through landing
 *                  chunks the owner lends; the protocol, the owner's
 *                  side (its streams and lend stage) and the one
 *                  dispatch of its frames
 *   rdma_land_requester.c  its requester's side: LandOpen, the owner's
 *                  grants matched to pieces and given back, its mover
 *                  table
 *   rdma_land_pool.c  the owner's landing pools, one per peer lent to
 *
 * Everything here runs in the progress thread, except the tables'
 * readers (rdma_rail_stats, rdma_qp_list: the main thread), which take
 * tables.lock; that lock is a leaf, and the progress thread takes it
 * only to change the queue pair table or a queue pair's remote number.
 *
 * Bookkeeping of a queue pair this side posts on: a ring of the work
 * requests out, oldest first, each with the operation it belongs to (or
 * NULL once that operation was cancelled), its bytes, and a reference to
 * the local region, so that memory the NIC may still touch is never
 * unmapped under it.  The wr_id of a work request names its queue pair's
 * slot in the table (struct rdma_tables), the slot's generation and the
 * ring position: a completion of a queue pair that was destroyed
 * meanwhile is recognised and ignored.
 */
#ifndef XFERD_RDMA_INT_H
#define XFERD_RDMA_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <event2/util.h>
#include <infiniband/verbs.h>

#include "core/stage.h"
#include "core/xop.h"
#include "gpu/stage.h"
#include "transport/rdma_topo.h"
#include "mem/host_stage.h"
#include "mem/region.h"
#include "transport/rdma.h"
#include "transport/rdma_dev.h"
#include "transport/rdma_sched.h"
#include "transport/rdma_topo.h"

#define QP_SLOTS       1024    /* queue pairs at once, both directions */
#define CONNECT_NS     (5000ull * 1000000)  /* for a QpAccept to come */

struct event;
struct pipeline;
struct rdma_staging;
struct rdma_stream;
TAILQ_HEAD(rdma_stream_list, rdma_stream);
struct rdma_grant_worker;

/* RDMA's own state of an operation, in its private area (XOP_PRIV). */
struct rdma_op {
	uint64_t posted;          /* bytes handed to work requests */
	uint32_t wrs;             /* its work requests not completed */
	int error;                /* first failure of one of them */
	bool queued;              /* waiting for queue pair room */
	bool cancelled;
	bool redo;                /* flushed by another's error: again */
	bool retried;             /* was redone once already */
	bool waited;              /* its wait to a first request counted */
	/* Through the staging buffers (ROUTE_RDMA_STAGED): its local
	 * memory is not registered. */
	bool staged;
	/* staged, through the owner's landing chunks (rdma_land.c) */
	bool owner;
	/* staged: its stream, from the pump that starts it to its end */
	struct rdma_stream *stream;
};

static inline struct rdma_op *rop(struct xop *op)
{
	return XOP_PRIV(op, struct rdma_op);
}

enum qp_state { QP_CONNECTING, QP_READY };

struct posted {
	struct xop *op;           /* NULL: cancelled, or a staged piece */
	struct region *hold;      /* a reference to the local region */
	/* Staged: the chunk it moves, the RDMA stage's until this request
	 * is done (rdma_piece_retire); its op is the piece's. */
	struct stage_chunk *piece;
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
	uint16_t index, gen;      /* in the queue pair table: the wr_id */
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

/* Counters of one rail (xferctl rails, the metrics). */
struct rail_counters {
	_Atomic uint32_t qps;
	_Atomic uint64_t bytes_tx, bytes_rx, wrs, errors;
};

/*
 * What xferctl reads (main thread) while the progress thread works: the
 * queue pairs by slot (each slot's generation names it in wr_ids) and
 * the rail counters.  lock guards qp[] and a listed queue pair's
 * remote_qpn and qp against the reader; the progress thread, the only
 * writer, reads qp[] without it.  Counters are relaxed atomics.
 */
struct rdma_tables {
	pthread_mutex_t lock;
	struct rqp *qp[QP_SLOTS];
	uint16_t gen[QP_SLOTS];
	struct rail_counters rail[RDMA_RAIL_MAX];
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
	struct rqp *dirty;        /* with work requests chained, not posted */
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
	/* The bulk class's tenant shares and every class's caps
	 * (rdma_sched.h); a pump when a paced tenant may go again. */
	struct rdma_sched sched;
	struct event *pace_ev;
	bool submitted;           /* operations came since the last pump */
	/* A queue pair was taken down: its completions may still sit in a
	 * CQ, taking room there until polled away. */
	bool drain;
	/* The staging buffers of the staged route (rdma_staged.c); NULL:
	 * none could be registered, nothing goes staged. */
	struct rdma_staging *staging;
	/* Staged operations under way, oldest first, until reaped; those
	 * ended (done, closed) but not reaped yet; their pieces waiting
	 * for queue pair room, all streams together. */
	struct rdma_stream_list streams, ended;
	uint32_t pieces_queued;
	/* Owner-side staging (rdma_land.c): the landing chunks this node
	 * lends and its streams for peers (NULL: it lends none), and the
	 * next id of a landing stream of ours. */
	struct rdma_land *land;
	uint64_t land_seq;
	struct rdma_tables tables;
	/* GPU x rail distances, the rails each GPU prefers (rdma_topo.h). */
	struct rdma_topo topo;
};

static inline void stat_add64(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* --- rdma.c: peers and the end of operations --- */
struct rpeer *rdma_find_peer(struct rdma *t, const uint8_t *id);
struct rpeer *rdma_peer_of(struct rdma *t, const struct xop *op);
void rdma_op_end(struct rdma *t, struct xop *op, int64_t result);
void rdma_dequeue(struct rdma *t, struct xop *op);
/* An operation ends once none of its work requests is out and either
 * all of it was posted or it failed. */
void rdma_op_settle(struct rdma *t, struct xop *op);
void rdma_op_fail(struct rdma *t, struct xop *op, int err);
/* Queue op (submitted to either route) for the next pump. */
void rdma_op_start(struct rdma *t, struct xop *op, bool staged);

/* --- rdma_qp.c: queue pairs --- */
void rdma_tables_init(struct rdma *t);
void rdma_tables_fini(struct rdma *t);
const char *rdma_peer_label(const struct rqp *q);
void rdma_qp_free(struct rdma *t, struct rqp *q);
/* Take q down: what it has out fails with err (culprit: the operation
 * whose request broke it; the others' are redone), and it is forgotten. */
void rdma_qp_fail_by(struct rdma *t, struct rqp *q, int err,
		     const struct xop *culprit);
void rdma_qp_fail(struct rdma *t, struct rqp *q, int err);
/* Rail pair i toward p cannot carry anything any more. */
void rdma_fail_pair(struct rdma *t, struct rpeer *p, size_t i, int err);
/* Every queue pair p should have is open or on its way.  False if no
 * rail pair can carry anything. */
bool rdma_ensure_qps(struct rdma *t, struct rpeer *p);
/* A packed PeerMsg to peer id over its link. */
struct Xfer__Peer__PeerMsg;
void rdma_send_msg(struct rdma *t, const uint8_t *id,
		   struct Xfer__Peer__PeerMsg *m);

/* --- rdma_post.c: posting and completions --- */
/* Can rail pair rp carry op: the owner's rkey on its device, and ours
 * of the local memory (staged: of the staging buffers)? */
bool rdma_pair_usable(const struct rdma *t, const struct rpeer *p,
		      const struct rail_pair *rp, const struct xop *op,
		      bool staged, uint32_t *lkey, uint32_t *rkey);
/* Cut waiting operations into work requests while queue pairs have
 * room; post them. */
void rdma_pump(struct rdma *t);
/* The work requests of q in [tail, upto] are done (err 0) or failed. */
void rdma_retire(struct rdma *t, struct rqp *q, uint32_t upto, int err,
		 const struct xop *culprit);
void rdma_on_channel(evutil_socket_t fd, short what, void *arg);
/* pace_ev: a tenant a cap held back may go again. */
void rdma_on_pace(evutil_socket_t fd, short what, void *arg);

/* --- rdma_staged.c: the staged route on the staging pipeline ---
 *
 * A staged operation is one stream through the staging buffers: a
 * WRITE is filled by host_stage_read (the CPU copy) and drained by the
 * RDMA WRITE stage, a READ filled by the RDMA READ stage and drained by
 * host_stage_write.  Either RDMA stage queues its chunk as a piece of
 * the operation (s->queued) for rdma_pump, which posts it; the piece's
 * completion, or its queue pair's teardown, ends it (rdma_piece_retire).
 *
 * Streams are freed, and their operations ended, only by
 * rdma_streams_reap, which the transport's entry points call last: an
 * end that comes from inside a pipeline (a chunk handed back) only
 * marks the stream, so walking t->streams is always safe. */

/* One chunk of a stream in an RDMA stage: its priv area (STAGE_PRIV). */
struct rdma_piece {
	struct rdma_stream *s;    /* NULL: its stream went; the chunk only
				   * waits for its request to be done */
	TAILQ_ENTRY(rdma_piece) q; /* s->queued while not posted */
	bool queued;
	bool retried;             /* redone once already */
	/* Owner-side staging: the owner's landing chunk granted for it
	 * (rdma_land.c), from the pump that matched it until Landed went
	 * back; kept here, not in s, because it outlives the stream. */
	bool lent;
	uint32_t slot;
	uint64_t land_id;
	uint64_t raddr;
	uint32_t nkeys;
	uint32_t rkey[REGION_RDMA_KEYS];
	uint8_t peer[LINK_ID_LEN];
};
TAILQ_HEAD(rdma_piece_list, rdma_piece);

/* A landing chunk the owner granted a stream, not matched to a piece
 * yet (rdma_land.c). */
#define LAND_GRANTS_AHEAD 4       /* chunks an owner lends one stream */
#define LAND_GRANTS 16            /* held at once by one stream, at most */
#define LAND_STREAMS_PER_PEER 8   /* an owner's streams for one peer */
struct land_grant {
	uint32_t slot, len;
	uint64_t at, addr;
	uint32_t nkeys;
	uint32_t rkey[REGION_RDMA_KEYS];
};

struct rdma_stream {
	struct rdma *t;
	struct xop *op;
	struct pipeline *pl;      /* NULL once closed */
	/* the other end: op's local memory, host or GPU (one of them) */
	struct host_stage host;
	struct gpu_stage gpu;
	struct rdma_piece_list queued; /* pieces for the pump, in order */
	TAILQ_ENTRY(rdma_stream) q;       /* t->streams, until reaped */
	TAILQ_ENTRY(rdma_stream) ended_q; /* t->ended, once it ended */
	uint32_t posted;          /* pieces posted so far */
	int64_t result;           /* once ended */
	bool ended;
	bool reroute;             /* ended to go by another route */
	/* Through the owner's landing chunks (rdma_land.c): its id on the
	 * link, the grants not matched yet, and for a WRITE whether the
	 * owner's LandDone came and whether this side's pipeline is over
	 * (the operation ends when both are). */
	bool owner, owner_done, pl_over;
	uint64_t land_id;
	uint32_t land_chunk;      /* bytes per chunk, the owner's cut too */
	uint8_t peer[LINK_ID_LEN];
	unsigned ngrants;
	struct land_grant grant[LAND_GRANTS];
};

/* Made (or res's GPU pool taken) and registered on every device of t,
 * once, at start: NULL without them (logged; xfer_reg'd memory goes
 * over TCP). */
struct rdma_staging *rdma_staging_open(struct rdma *t,
				       const struct rdma_stage_res *res);
/* Every chunk is back (the queue pairs that held them are gone). */
void rdma_staging_close(struct rdma_staging *s);
/* The pool, and the GPU copies when it is the GPU's (else NULL). */
struct staging_pool *rdma_staging_pool(const struct rdma_staging *s);
struct gpu_copies *rdma_staging_gpu(const struct rdma_staging *s);
/* The local key of the staging buffers on device dev. */
bool rdma_staging_lkey(const struct rdma_staging *s, int dev,
		       uint32_t *lkey);
/* op (dequeued) starts as a stream in t->streams: 0, or -errno and
 * nothing of it started.  Its first pieces may be queued inside. */
int rdma_stream_open(struct rdma *t, struct xop *op);
/* s ends now (pipeline_destroy): with err, or handed back for another
 * route (reroute).  Its pieces on the wire stay out, no longer its. */
void rdma_stream_close(struct rdma_stream *s, int err, bool reroute);
/* s fails with err: its pieces not posted end now, it ends once those
 * on the wire are back. */
void rdma_stream_fail(struct rdma_stream *s, int err);
/* End the operations of the streams that ended (or reroute them).
 * Only where no walk of t->streams is under way.  True if any. */
bool rdma_streams_reap(struct rdma *t);
/* The posted piece in chunk c is done (err 0) or failed (culprit: the
 * operation whose request broke its queue pair; the others' are redone
 * once). */
void rdma_piece_retire(struct rdma *t, struct stage_chunk *c, int err,
		       const struct xop *culprit);
/* The operation of the piece in c, or NULL once its stream went. */
struct xop *rdma_piece_op(struct stage_chunk *c);
/* s's pipeline is over (or s failed) with result: the reap ends it. */
void rdma_stream_end(struct rdma_stream *s, int64_t result);

/* --- rdma_land.c: owner-side staging --- */
struct rdma_land;
/* The owner's state: peers' landing pools (rdma_land_pool.h, made as
 * peers need them, chunks the size of t->staging's) and streams. */
struct rdma_land *rdma_land_open(struct rdma *t,
				 const struct rdma_stage_res *res);
/* Every stream of peers ends, every lent chunk comes back (the queue
 * pairs are gone), every pool goes. */
void rdma_land_close(struct rdma *t);
/* The bytes per landing chunk this node lends for peers' streams into
 * or out of r (memory its NICs cannot reach), or 0: none. */
uint32_t rdma_land_offer(const struct rdma *t, const struct region *r);
/* A landing frame from peer id: true if it was one (handled). */
bool rdma_land_frame(struct rdma *t, const uint8_t id[LINK_ID_LEN],
		     const struct Xfer__Peer__PeerMsg *m);
/* Peer id is gone (its queue pairs to us destroyed): its streams here
 * end, every chunk lent to it comes back and its pool goes. */
void rdma_land_peer_down(struct rdma *t, const uint8_t id[LINK_ID_LEN]);
/* Owner streams past their deadline end; chunks a peer kept past
 * LAND_RECLAIM_NS after their stream ended come back (its queue pairs
 * to us closed first); pools drained or unused go.  True if anything
 * ended. */
bool rdma_land_expire(struct rdma *t, uint64_t now);
/* Peer p's queue pairs toward us (passive) are destroyed: nothing of it
 * reaches our memory any more (rdma.c, for rdma_land_expire). */
void rdma_peer_close_passive(struct rdma *t, struct rpeer *p);

/* --- rdma_land_requester.c: owner-side staging, the requester's side --- */
/* The owner's LandGrant and LandDone (from rdma_land_frame). */
struct Xfer__Peer__LandGrant;
struct Xfer__Peer__LandDone;
void rdma_land_on_grant(struct rdma *t, const uint8_t *from,
			const struct Xfer__Peer__LandGrant *g);
void rdma_land_on_done(struct rdma *t, const uint8_t *from,
		       const struct Xfer__Peer__LandDone *d);
/* s (owner) starts: LandOpen to the owner. */
void rdma_land_stream_open(struct rdma_stream *s);
/* A grant of s for the piece pc (by its chunk's place in the stream),
 * now pc's: false if none came yet. */
bool rdma_land_match(struct rdma_stream *s, struct rdma_piece *pc,
		     struct stage_chunk *c);
/* pc's landing chunk goes back to the owner (Landed; err: unused or
 * failed). */
void rdma_land_piece_done(struct rdma *t, struct rdma_piece *pc, int err);
/* s is being reaped: grants it did not use go back; LandAbort unless it
 * ended well. */
void rdma_land_stream_end(struct rdma_stream *s);

#endif /* XFERD_RDMA_INT_H */
