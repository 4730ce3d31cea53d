/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_int.h - what the files of the TCP mover share; nothing else
 * includes it.
 *
 *   tcp.c       the mover: its ops table, operations waiting for a link,
 *               cancel and deadlines, each link's life as it concerns
 *               data (the session's data client, link_client.h)
 *   tcp_send.c  the sending side: this side's operations queued, frames
 *               filled round-robin, the peer's reads served
 *   tcp_recv.c  the receiving side: the peer's data frames (writes,
 *               reads, acks, notifications, aborts, token checks)
 *   tcp_sink.c  where an incoming payload lands, and what its end does
 *   tcp_staged.c  GPU memory: the link's ends of the staging pipeline
 *               (stage/pipeline.h), paired with the GPU copies' stages
 *
 * The session (link.c) owns the connection; the mover's state of a link
 * is struct tcp_link, which the session holds for it as an opaque
 * pointer.  Progress thread only.
 */
#ifndef XFERD_TCP_INT_H
#define XFERD_TCP_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "common/token_codec.h"
#include "core/fairq.h"
#include "core/notify_msg.h"
#include "core/traffic_class.h"
#include "core/xop.h"
#include "gpu/stage.h"
#include "peer.pb-c.h"
#include "stage/pipeline.h"
#include "transport/link_client.h"
#include "transport/tcp.h"
#include "xfer_ring.h"

#define OP_HASH      1024u
#define MAX_IOV      64

struct tcp_link;

/* The mover's state of an operation it holds (xop.h's private area). */
struct tcp_op {
	uint64_t id;                 /* on its link */
	uint64_t done;               /* bytes sent (write) or received (read) */
	bool sent_all;               /* every frame of it is queued */
	bool in_hash;
	bool parked;                 /* staged: off the send queue until
				      * its next chunk is ready */
	bool waited;                 /* its wait time is counted */
	struct xop *hnext;           /* in-flight hash chain */
	/* Staged (GPU memory): its chunks out (a write) or landing (a
	 * read); tcp_staged.c. */
	struct staged_send *send;
	struct staged_rx *rx;
};

static inline struct tcp_op *tcp_op(struct xop *op)
{
	return XOP_PRIV(op, struct tcp_op);
}

static inline const struct tcp_op *tcp_op_c(const struct xop *op)
{
	return XOP_PRIV(op, const struct tcp_op);
}

/* Where the payload of the frame being received goes, and what to do
 * once it is all there. */
struct rx_sink {
	bool active;
	uint64_t left;               /* payload bytes still to come */
	uint64_t len;                /* of the whole payload */
	struct region *r;            /* a reference; NULL: drop the bytes */
	uint64_t off;                /* of the next byte in r */
	int err;                     /* first failure to land the bytes */
	bool is_write;               /* else ReadData of ours */
	uint64_t op;                 /* the peer's (write) */
	bool last, notify;
	uint64_t notify_value, total;
	struct notify_note notify_from; /* who notifies, what it says */
	struct xop *xop;             /* ReadData: ours; NULL once it ended */
	/* GPU memory (tcp_staged.c): the payload is pushed into receive
	 * chunks of srx's pipeline, each emptied by an H2D copy. */
	struct staged_rx *srx;       /* a reference */
	struct stage_chunk *chunk;   /* being filled, for bytes at chunk->at
				      * of r */
};

/* Bytes of GPU memory on their way out: a pipeline of D2H copies into
 * send chunks, a few ahead of the frames that pull them (tcp_staged.c). */
struct staged_send {
	struct tcp_link *tl;
	struct xop *op;              /* a write of ours, or */
	struct serve *s;             /* a read the peer asked of us */
	struct pipeline *pl;         /* fill gpu-d2h, drain: the owner pulls */
	struct gpu_stage gpu;        /* the D2H stage's end: the range's GPU
				      * address */
	bool parked;                 /* its owner waits for the next one */
	uint64_t parked_at;          /* since when (ns): STAGING_CLOCK_SEND_IDLE */
};

/*
 * GPU memory on its way in: one per write of the peer into our GPU
 * memory, or read of ours into our GPU memory; a pipeline the sink
 * pushes into, drained by H2D copies.  Its end (the write's ack and
 * notification, the read's completion) waits for the last frame and the
 * pipeline's done.  Referenced by its owner (the link's list or the
 * read) and the sink; chunks in a copy need it not (the pipeline's
 * cancel rule).
 */
struct staged_rx {
	unsigned refs;
	struct tcp_link *tl;         /* NULL once the link is gone */
	uint64_t op;                 /* a write: the peer's */
	struct xop *xop;             /* a read: ours, NULL once it ended */
	struct region *r;            /* a reference: where the bytes go */
	struct pipeline *pl;         /* push fill, drain gpu-h2d */
	struct gpu_stage gpu;        /* the H2D stage's end: r's byte 0 */
	uint64_t stalled_at;         /* the link stopped reading for a chunk
				      * (ns), or 0: STAGING_CLOCK_RECV_STALL */
	bool all_in;                 /* its last frame is in */
	bool landed;                 /* the pipeline's done came */
	bool ended, listed;
	int err;
	bool notify;
	uint64_t notify_value, total;
	struct notify_note notify_from;
	TAILQ_ENTRY(staged_rx) q;    /* the link's rx_writes */
};
TAILQ_HEAD(staged_rx_list, staged_rx);

/* A read the peer asked of one of our regions. */
struct serve {
	uint64_t op;
	struct region *r;            /* a reference */
	uint64_t off;                /* in the region */
	uint64_t len, done;
	struct staged_send *send;    /* GPU memory: staged */
	bool parked;                 /* in parkedq, not serveq */
	uint8_t cls;                 /* the asker's class (enum xfer_class) */
	TAILQ_ENTRY(serve) q;
};
TAILQ_HEAD(serve_list, serve);

/* The mover's state of one link (the session's client state). */
struct tcp_link {
	struct tcp_mover *tm;
	struct link *l;              /* the session's */
	struct tcp_peer *peer;
	uint64_t next_id;
	/* This side's operations with frames to queue (tcp_sched.c): the
	 * latency class's, first come first served, and every other's in
	 * one queue per tenant, shared by weight (fq). */
	struct xop_list sendq;
	struct tcp_flow {
		struct fq_flow f;
		struct xop_list q;
	} flows[TENANT_MAX];
	struct fairq fq;
	/* While latency traffic runs on the link (until latency_until_ns,
	 * renewed by each latency frame either way) bulk frames are cut
	 * to half of bulk_queue and queued only while xferd's queue holds
	 * less than that, the kernel's likewise (TCP_NOTSENT_LOWAT). */
	bool class_mode;
	uint64_t latency_until_ns;
	uint32_t frame_max;          /* the frame being queued, at most */
	struct xop *hash[OP_HASH];
	struct serve_list serveq;    /* latency-class serves first */
	struct serve_list parkedq;   /* staged serves waiting for a chunk */
	struct staged_rx_list rx_writes; /* the peer's writes into GPU memory */
	bool serve_turn;             /* alternate sendq and serveq */
	bool filling;                /* in tcp_fill: wake-ups only kick */
	/* Incoming writes that failed: their remaining chunks are dropped
	 * until their last chunk or an Abort. */
	uint64_t *failed;
	size_t nfailed, capfailed;
	/* The last token whose key checked out (see regtab_resolve_token). */
	struct token verified;
	bool have_verified;
	struct rx_sink sink;         /* the payload being received */
};

/* Another xferd as the mover knows it. */
struct tcp_peer {
	uint8_t id[LINK_ID_LEN];
	struct tcp_link *tl;         /* NULL while it has no link up */
	/* The link's latency lane, while one is up (link_lane.c): where
	 * the latency class's operations go. */
	struct tcp_link *lane;
	/* Operations waiting for a link, and whether the main thread was
	 * asked for one (need_peer) without an answer yet. */
	struct xop_list pending;
	bool asked;
	struct tcp_peer *next;
};

struct tcp_mover {
	struct regtab *regs;
	struct tcp_cfg cfg;
	struct mover_hooks hooks;
	struct linkset *ls;          /* the session it is the client of */
	struct tcp_peer *peers;
	/* GPU memory to and from other nodes (NULL: refused, -ENOTSUP). */
	struct staging_pool *staging;
	struct gpu_copies *gpu;
};

/* --- tcp.c --- */

/* End op: out of every list of tl, Abort if the peer holds half of it. */
void tcp_op_end(struct tcp_link *tl, struct xop *op, int64_t result);
void tcp_hash_add(struct tcp_link *tl, struct xop *op);
struct xop *tcp_hash_find(struct tcp_link *tl, uint64_t id);
/* Can the link read or write r's bytes itself (xferd's mapping of a
 * memfd, or CMA)?  GPU memory needs a copy through staging first. */
bool tcp_host_reachable(const struct region *r);

/* --- tcp_sched.c --- */

void tcp_sched_init(struct tcp_link *tl);
/* op (not in any queue) goes to the tail of its class's or tenant's. */
void tcp_sched_push(struct tcp_link *tl, struct xop *op);
/* op leaves its queue for good (ended, sent, parked): a tenant left
 * with nothing queued gives its share to the others. */
void tcp_sched_remove(struct tcp_link *tl, struct xop *op);
/* op leaves its queue while one frame of it is queued on the link; its
 * tenant keeps its turn and what it has left of its share, so that a
 * tenant with one operation queued still gets its weight.  Then
 * tcp_sched_push (more frames) and tcp_sched_settle, always. */
void tcp_sched_take(struct tcp_link *tl, struct xop *op);
void tcp_sched_settle(struct tcp_link *tl, unsigned tenant);
/* Queue i of the link (0: latency, 1..TENANT_MAX: the tenants'), NULL
 * past the last: for walks that end operations. */
struct xop_list *tcp_sched_queue(struct tcp_link *tl, unsigned i);
/* Latency traffic on the link (ours or the peer's): class mode on. */
void tcp_sched_latency_seen(struct tcp_link *tl, uint64_t now);
/* Class mode off once latency traffic stopped (at each fill). */
void tcp_sched_tick(struct tcp_link *tl, uint64_t now);
/* The next latency op whose tenant is within its cap, or NULL. */
struct xop *tcp_sched_latency(struct tcp_link *tl, uint64_t now);
/* The next bulk op by weighted share (its tenant within its cap), or
 * NULL; *wait_ns: when a capped tenant may go again (0: none waits). */
struct xop *tcp_sched_bulk(struct tcp_link *tl, uint64_t now,
			   uint64_t *wait_ns);
/* op's frame of bytes went out: its tenant's share and cap, and its
 * wait time at its first frame. */
void tcp_sched_sent(struct tcp_link *tl, struct xop *op, uint64_t bytes,
		    uint64_t now);
/* Does bulk wait for xferd's queue to drain below out bytes? */
bool tcp_sched_bulk_full(const struct tcp_link *tl, size_t out);
/* Serve s goes in the serve queue, latency serves ahead of the rest. */
void tcp_sched_serve(struct tcp_link *tl, struct serve *s);

/* --- tcp_send.c --- */

/* Queue frames while the socket's output buffer has room. */
void tcp_fill(void *cl);
/* op goes on tl's send queue (its staging starts), or ends at once. */
void tcp_start_op(struct tcp_link *tl, struct xop *op);
/* A parked staged stream's next chunk is ready (or it failed). */
void tcp_unpark(struct staged_send *ss, bool fill_now);
/* A ReadData frame without payload: the end of a read, or its error. */
void tcp_read_data(struct tcp_link *tl, uint64_t op, uint64_t at, bool last,
		   int64_t result);
void tcp_serve_free(struct serve *s);

/* --- tcp_recv.c --- */

int tcp_frame(void *cl, const Xfer__Peer__PeerMsg *m, uint32_t plen,
	      const char **why);
void tcp_write_ack(struct tcp_link *tl, uint64_t op, int64_t result);
bool tcp_is_failed(struct tcp_link *tl, uint64_t op);
void tcp_forget_failed(struct tcp_link *tl, uint64_t op);
int tcp_remember_failed(struct tcp_link *tl, uint64_t op);
/* Notify r's owner of bytes that landed for a peer's write: the write's
 * answer is its bytes, or why the owner will not hear of them. */
int64_t tcp_notify_result(struct tcp_link *tl, struct region *r,
			  uint64_t value, int64_t bytes,
			  const struct notify_note *from);

/* --- tcp_sink.c (the session's sink_* calls, link_client.h) --- */

/* The payload of the current frame goes to region r at off (r NULL:
 * dropped, reporting err at the end). */
void tcp_sink_start(struct tcp_link *tl, uint32_t plen, struct region *r,
		    uint64_t off, int err);
/* The sink no longer lands anything: the rest of its payload is
 * dropped (receive chunk back, reading resumed if it waited for one). */
void tcp_sink_drop(struct tcp_link *tl);
bool tcp_payload(void *cl, uint64_t *left);
size_t tcp_sink_put(void *cl, const uint8_t *p, size_t n);
bool tcp_sink_direct(void *cl, uint8_t **dst, size_t *room);
void tcp_sink_landed(void *cl, size_t n);
void tcp_sink_finish(void *cl);
/* The peer's write op into our GPU memory r: its landing state. */
struct staged_rx *tcp_rx_write_of(struct tcp_link *tl, uint64_t op,
				  struct region *r);
/* Every byte of srx landed in GPU memory (or failed): ack, notify, end. */
void tcp_rx_complete(struct staged_rx *srx);

/* --- tcp_staged.c --- */

/* Can the link move region r's bytes (through staging for GPU memory)? */
bool staged_reachable(const struct tcp_mover *tm, const struct region *r);
/* Stage [off, off + len) of GPU region r; the caller sets op or s. */
struct staged_send *staged_send_new(struct tcp_link *tl, struct region *r,
				    uint64_t off, uint64_t len);
/* The next chunk with its bytes, in order, now the caller's (queue it,
 * or pipeline_chunk_release); NULL: not ready (parked: tcp_unpark
 * follows) or *err. */
struct stage_chunk *staged_send_next(struct staged_send *ss, int *err);
/* Queue c's bytes as a payload, by reference (c goes back to the pool
 * once the socket took them, or at once if it cannot be queued). */
int staged_queue_chunk(struct tcp_link *tl, struct stage_chunk *c);
/* The stream ended (any time): chunks in a copy go back when it is
 * done. */
void staged_send_free(struct staged_send *ss);
struct staged_rx *staged_rx_new(struct tcp_link *tl, struct region *r);
void staged_rx_put(struct staged_rx *srx);
/* All its frames are in: end it once its copies are done (maybe now). */
void staged_rx_all_in(struct staged_rx *srx);
/* The sink's receive side for GPU memory (see tcp_sink_*). */
size_t staged_sink_put(struct tcp_link *tl, const uint8_t *p, size_t n);
bool staged_sink_direct(struct tcp_link *tl, uint8_t **dst, size_t *room);
void staged_sink_landed(struct tcp_link *tl, size_t n);
/* The payload is all in: the last chunk's copy starts. */
void staged_sink_flush(struct tcp_link *tl);
/* The payload is dropped from here on: the chunk goes back unused. */
void staged_sink_drop(struct tcp_link *tl);

#endif /* XFERD_TCP_INT_H */
