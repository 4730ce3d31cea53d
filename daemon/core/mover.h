/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mover.h - what the progress thread asks of a way to move bytes: one
 * table of operations per mover.
 *
 * Two kinds of mover sit behind this one table: transports to other
 * nodes (daemon/transport/: TCP, RDMA, RDMA through staging buffers)
 * and same-node movers (daemon/local/: memcpy, CMA, GPU copies, GPU
 * memory through staging chunks).  The progress thread (engine/) drives
 * them only through it; it never calls a mover's own functions.  The
 * executor (engine/exec.c) asks path_choose() (core/path.h) for a route
 * and hands the descriptor to the mover the route indexes in its table.
 *
 * A same-node mover moves a range in move_now(): at once (memcpy, CMA:
 * the bytes, no op made), or by starting an op (xop.h) through the
 * begin hook it was created with (GPU copies, staging, CMA split on the
 * copy workers), which ends later.  A transport's move_now() is the
 * stub, MOVER_SUBMIT: the executor makes the op and submit()s it.
 * Either way the mover stamps its path (XFER_PATH_*) and ends an op
 * exactly once through the op_done hook (struct mover_hooks, or
 * the local movers' own hooks).  A transport that took an
 * operation and then finds it cannot move it (an RDMA rail pair that
 * never connected) hands it back through the reroute hook, and the
 * executor offers it to the next route; no mover calls another.
 *
 * A mover's table names only what the mover has, and carries the
 * version of this header it was written for.  Registration
 * (engine/progress_life.c, before the progress thread starts) copies it into
 * the route's own table with mover_ops_fill(), which points every entry
 * the mover left NULL to a stub (mover_stub_*): as in UCX's uct and
 * NCCL's net plugins, the table the progress thread calls through is
 * whole, so it calls every entry without looking.
 *
 * The link to each peer (transport/link.c, the session: framing,
 * keepalives, one dispatch of every frame) is not a mover: the TCP
 * mover moves data on it as its data client (transport/link_client.h),
 * and RDMA sets up its queue pairs through it (frames to each mover's
 * frame() below, sent with linkset_send_ctl).
 */
#ifndef XFERD_MOVER_H
#define XFERD_MOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/path.h"
#include "core/traffic_class.h"

#define MOVER_OPS_VERSION 2
#define LINK_ID_LEN 16            /* an xferd instance id */
#define LINK_LANE_SECRET 16       /* a latency lane's secret (transport/link_lane.c) */

struct xop;
struct prog_client;
struct region;
struct dlist;
struct rdma_peer_rail;
struct Xfer__Peer__PeerMsg;
struct Xfer__Peer__RdmaMemory;

/* Settings of every transport (xferd.conf(5)); each reads its own. */
struct transport_cfg {
	uint8_t self_id[LINK_ID_LEN];
	uint32_t keepalive_ms;
	uint32_t peer_timeout_ms;
	uint32_t tcp_chunk;       /* bytes per TCP data frame */
	uint32_t tcp_stage_ahead; /* D2H chunks out per staged send */
	uint32_t staging_mb;      /* pinned staging for GPU memory (tcp.c) */
	uint32_t rdma_qps;        /* queue pairs per rail pair */
	uint64_t rdma_stripe;     /* bytes per RDMA work request, at most */
	uint32_t rdma_bulk_depth; /* non-latency WRs a queue pair holds */
	bool rdma_landing;        /* lend landing chunks to peers */
	uint32_t rdma_landing_chunks; /* per peer's landing pool */
	uint32_t rdma_landing_peers;  /* landing pools at once */
	/* Classes and tenants (core/traffic_class.h): bulk bytes that may
	 * wait ahead of a latency frame on a link, and the tenants'
	 * weights and caps. */
	uint32_t link_bulk_queue;
	bool link_lanes;          /* a latency lane per link */
	uint64_t latency_max_bytes;
	struct tenant_table tenants;
	/* Staging chunks per half held back for the latency class
	 * (mem/staging.h). */
	uint32_t staging_latency_reserve;
};

/* A peer whose link came up: what the main thread knows of it. */
struct peer_info {
	uint8_t id[LINK_ID_LEN];
	uint64_t gen;             /* names this link in peer_down */
	const char *name;         /* its node name */
	const struct rdma_peer_rail *rails;
	size_t nrails;
};

/* A peer's token check, as describe() sees it: the peer, the link it
 * came on, the check's id (for a reply sent later) and the token's range
 * in the region. */
struct describe_req {
	const uint8_t *peer;      /* LINK_ID_LEN bytes */
	uint64_t link_gen;
	uint64_t check_id;
	uint64_t off, len;
};

enum describe_result {
	DESCRIBE_NONE,            /* nothing: the peer goes by the link */
	DESCRIBE_FILLED,          /* the reply says how to reach it */
	DESCRIBE_LATER,           /* the transport replies itself, later */
};

/* move_now(), move_list(): not in this call; the executor makes an op
 * and submit()s it (a transport), or goes segment by segment (a list). */
#define MOVER_SUBMIT INT64_MIN

/* One range of a descriptor on this node, resolved and checked, as the
 * executor hands it to a mover (on its stack: nothing allocated). */
struct move_req {
	uint8_t opcode;           /* XFER_OP_WRITE (local -> remote), _READ */
	struct region *local;     /* lent by the executor for the call */
	struct region *remote;    /* the other end (on this node) */
	uint64_t loff, roff, len;
	/* The op of this batch the mover may add its copy to (the GPU
	 * mover: a vector of a thousand copies is one op), or NULL. */
	struct xop **batch_op;
	uint16_t path;            /* out: XFER_PATH_* of bytes moved now */
	bool async;               /* out: an op of it is out, ends later */
};

/* A run of a prepared-list descriptor contiguous at both ends. */
struct dl_seg {
	uint64_t loff, roff, len;
};

/*
 * A prepared-list descriptor (XFER_OP_WRITE_DLIST, _READ_DLIST): both
 * lists and their targets resolved; rq has the direction and the
 * regions (its offsets and len unused).  Its index pairs are in the
 * client's ring (untrusted: read each once, mover_list_pair); a mover
 * that moves runs rather than pairs asks segments(), which checks every
 * pair and merges them into segs (nsegs, total bytes), or -errno.
 */
struct move_list {
	struct move_req rq;
	/* npairs struct xfer_dlist_pair; NULL when the ring has no index
	 * area or they are not in it: segments() then says why. */
	const uint64_t *area;
	uint64_t npairs;
	struct dlist *l, *r;      /* the local and remote lists */
	uint64_t lbase, rbase;    /* of their ranges in the regions */
	int64_t (*segments)(struct move_list *ml);
	const struct dl_seg *segs;
	int64_t nsegs;            /* < 0: not asked yet */
	uint64_t total;
};

struct mover_ops {
	uint32_t version;         /* MOVER_OPS_VERSION */
	const char *name;

	/* --- same-node ranges --- */
	/* Move rq's range: the bytes moved now (rq->path), or 0 with
	 * rq->async (an op is out), or -errno; MOVER_SUBMIT: make an op and
	 * submit() it. */
	int64_t (*move_now)(void *t, struct move_req *rq);
	/* Move a prepared list as one: bytes now, or 0 with ml->rq.async,
	 * or -errno (ml->rq.path set when it was this mover's to move);
	 * MOVER_SUBMIT: segment by segment through move_now(). */
	int64_t (*move_list)(void *t, struct move_list *ml);

	/* --- operations --- */
	/* Can this transport move op now (its memory, the peer's rails)? */
	bool (*accepts)(void *t, const struct xop *op);
	/* Start op; it ends through op_done (maybe at once). */
	void (*submit)(void *t, struct xop *op);
	/* End every operation of pc with -ECANCELED (it is going away). */
	void (*cancel_client)(void *t, const struct prog_client *pc);
	/* Fail operations past their deadline; true if any ended. */
	bool (*expire)(void *t, uint64_t now_ns);

	/* --- the progress loop --- */
	/* Reap completions; true if anything progressed. */
	bool (*poll)(void *t);
	/* Before the thread sleeps: arm completion events; false if work
	 * came in meanwhile (then it must not sleep). */
	bool (*arm)(void *t);
	/* Does it need the thread's event loop to run (sockets, timers)? */
	bool (*needs_loop)(const void *t);

	/* --- peers --- */
	void (*peer_up)(void *t, const struct peer_info *peer);
	void (*peer_down)(void *t, const uint8_t id[LINK_ID_LEN], uint64_t gen,
			  int err);
	/* A control frame of its own from the peer's link (true: taken). */
	bool (*frame)(void *t, const uint8_t id[LINK_ID_LEN],
		      const struct Xfer__Peer__PeerMsg *m);
	/* What q's peer needs to reach q's range of local region r without
	 * us (RDMA: address and the rkeys of a grant of that range), put in
	 * a token check's reply (DESCRIBE_FILLED), or none (DESCRIBE_NONE);
	 * or DESCRIBE_LATER: the transport sends the reply itself, later
	 * (slow work off this thread), with a reference to r of its own. */
	enum describe_result (*describe)(void *t, struct region *r,
					 const struct describe_req *q,
					 struct Xfer__Peer__RdmaMemory *out,
					 uint32_t *keys, size_t max_keys);
	void (*set_cfg)(void *t, const struct transport_cfg *cfg);
	void (*destroy)(void *t);
};

/*
 * How a mover reaches the executor above it, given at its creation
 * (movers include nothing above their floor).  Progress thread only.
 */
struct token;
struct notify_note;
struct mover_hooks {
	/* An operation ended: bytes moved, or a negative errno. */
	void (*op_done)(void *arg, struct xop *op, int64_t result);
	/* A mover cannot move op after all: offer it to the next route. */
	void (*reroute)(void *arg, struct xop *op);
	/* A peer's data landed in (or was read from) local region r and it
	 * asked for the owner to be notified; note: the peer's client that
	 * sent it, with the link's instance id as its node, its name and
	 * its message (core/notify_msg.h), lent for the call.  0: delivered
	 * or held for the owner; -ENOBUFS (-ENOMEM): refused, which the
	 * peer's descriptor ends with (the link stays up). */
	int (*notify_local)(void *arg, struct region *r, uint64_t value,
			    int64_t bytes, const struct notify_note *note);
	/* Ops wait for a link to this instance: ask the main thread to
	 * connect, using the addresses in tok. */
	void (*need_peer)(void *arg, const struct token *tok);
	/* Fill a token check's reply with how the movers reach q's range
	 * of r (each mover's describe, above), or leave the reply to one
	 * of them. */
	enum describe_result (*describe)(void *arg, struct region *r,
					 const struct describe_req *q,
					 struct Xfer__Peer__RdmaMemory *out,
					 uint32_t *keys, size_t max_keys);
	void *arg;
};

struct mover {
	const struct mover_ops *ops;  /* its route's own copy, whole */
	void *impl;
	enum path_route route;  /* the route (core/path.h) it runs */
};

/*
 * out = in, with every entry in left NULL pointed to its stub below.
 * submit and destroy have none (an op given to a mover must end, and
 * what created impl frees it): a table without them, without a name or
 * of another version is refused (-EINVAL, out untouched).
 */
int mover_ops_fill(struct mover_ops *out, const struct mover_ops *in);

/* Stubs for what a mover lacks (mover_ops_fill). */
int64_t mover_stub_move_now(void *t, struct move_req *rq);
int64_t mover_stub_move_list(void *t, struct move_list *ml);
bool mover_stub_accepts(void *t, const struct xop *op);
void mover_stub_cancel_client(void *t, const struct prog_client *pc);
bool mover_stub_expire(void *t, uint64_t now_ns);
void mover_stub_set_cfg(void *t, const struct transport_cfg *cfg);
bool mover_stub_poll(void *t);
bool mover_stub_arm(void *t);
bool mover_stub_needs_loop(const void *t);
void mover_stub_peer_up(void *t, const struct peer_info *peer);
void mover_stub_peer_down(void *t, const uint8_t id[LINK_ID_LEN],
			      uint64_t gen, int err);
bool mover_stub_frame(void *t, const uint8_t id[LINK_ID_LEN],
			  const struct Xfer__Peer__PeerMsg *m);
enum describe_result mover_stub_describe(void *t, struct region *r,
					     const struct describe_req *q,
					     struct Xfer__Peer__RdmaMemory *out,
					     uint32_t *keys, size_t max_keys);

#endif /* XFERD_MOVER_H */
