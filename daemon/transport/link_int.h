/* SPDX-License-Identifier: Apache-2.0 */
/*
 * link_int.h - what the peer session (link.c) and the TCP data path
 * (tcp.c) share about a link; nothing else includes it.
 *
 * link.c owns the connection: framing, receiving, one dispatch of every
 * frame type, keepalives, back-pressure, failure and the link's life.
 * tcp.c owns the data frames' meaning: its operations on the link, the
 * reads it serves, where incoming payload lands.  staged.c is the TCP
 * data path's part for GPU memory: pinned staging chunks
 * (mem/staging.h) between GPU copies and the link.  Each side's fields
 * of struct link are marked; each calls the other only through the
 * functions below.  Progress thread only.
 */
#ifndef XFERD_LINK_INT_H
#define XFERD_LINK_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "common/token_codec.h"
#include "core/xop.h"
#include "mem/staging.h"
#include "peer.pb-c.h"
#include "transport/link.h"

#define FRAME_PREFIX 8u                /* u32 header len, u32 payload len */
#define OUT_HIGH     (4u << 20)        /* stop queueing frames above this */
#define OUT_LOW      (1u << 20)        /* and start again below this */
#define OP_HASH      1024u
#define SINGLE_IO    (1u << 20)        /* bytes per write call */
#define SMALL_PAYLOAD 4096u            /* copied rather than referenced */
#define OUT_CAP      (4 * OUT_HIGH)    /* stop reading the peer above this */
#define READS_PER_CALL 32
#define RXBUF        (FRAME_PREFIX + PEER_MAX_HEADER + (256u << 10))
#define MAX_IOV      64

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
	struct xfer_cqe_sender notify_from; /* who notifies (tcp_on_write) */
	struct xop *xop;             /* ReadData: ours; NULL once it ended */
	/* GPU memory (staged.c): the payload goes into receive chunks,
	 * each emptied by an H2D copy. */
	struct staged_rx *srx;       /* a reference */
	struct staging_chunk *chunk; /* being filled, for bytes at chunk->at */
};

/* Bytes of GPU memory on their way out: D2H copies into send chunks,
 * a few ahead of the frames that carry them (staged.c). */
struct staged_send {
	struct link *l;
	struct xop *op;              /* a write of ours, or */
	struct serve *s;             /* a read the peer asked of us */
	struct region *r;            /* a reference */
	uint64_t off, len;           /* the range in r */
	uint64_t next;               /* of the range: next byte to stage */
	uint32_t frame;              /* bytes per chunk */
	struct staging_chunk_list chunks; /* out, in order; n of them */
	unsigned n;
	struct staging_waiter w;     /* for a chunk */
	bool parked;                 /* its owner waits for the front one */
	int err;
};

/*
 * GPU memory on its way in: one per write of the peer into our GPU
 * memory, or read of ours into our GPU memory.  Its end (the write's
 * ack and notification, the read's completion) waits for the last frame
 * and every H2D copy.  Referenced by its owner (the link's list or the
 * read), the sink and each chunk in a copy: it outlives a link or an
 * operation that ended early.
 */
struct staged_rx {
	unsigned refs;
	struct link *l;              /* NULL once the link is gone */
	uint64_t op;                 /* a write: the peer's */
	struct xop *xop;             /* a read: ours, NULL once it ended */
	struct region *r;            /* a reference: where the bytes go */
	unsigned copies;             /* H2D copies in flight */
	bool all_in, ended, listed;
	int err;
	bool notify;
	uint64_t notify_value, total;
	struct xfer_cqe_sender notify_from;
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
	TAILQ_ENTRY(serve) q;
};
TAILQ_HEAD(serve_list, serve);

struct link {
	/* the session's (link.c) */
	struct linkset *ls;
	struct rpeer *peer;
	uint64_t gen;                /* the main thread's name for it */
	bool read_paused;            /* backpressure: the peer reads too slowly */
	bool corked;                 /* tcp_fill queues frames: no send yet */
	bool cork_used;              /* ... and one went by (link.c send_now) */
	struct bufferevent *bev;     /* NULL once the link failed */
	struct link_stats *stats;
	uint64_t last_rx_ns;
	struct event *tick;

	/* the TCP data path's (tcp.c) */
	uint64_t next_id;
	struct xop_list sendq;
	struct xop *hash[OP_HASH];
	struct serve_list serveq;
	struct serve_list parkedq;   /* staged serves waiting for a chunk */
	struct staged_rx_list rx_writes; /* the peer's writes into GPU memory */
	bool serve_turn;             /* alternate sendq and serveq */
	/* Incoming writes that failed: their remaining chunks are dropped
	 * until their last chunk or an Abort. */
	uint64_t *failed;
	size_t nfailed, capfailed;
	/* The last token whose key checked out (see regtab_resolve_token). */
	struct token verified;
	bool have_verified;

	/* the session's again: receiving */

	/* Receiving is done here, not by the bufferevent: payloads go from
	 * the socket straight into the region (one copy, by the kernel). */
	int fd;
	struct event *ev_read;
	uint8_t *rxbuf;              /* headers and small payloads */
	size_t rx_off, rx_len;       /* unparsed bytes: [rx_off, rx_len) */
	struct rx_sink sink;         /* the payload being received */
	/* No receive chunk for the payload: not read until one comes. */
	bool rx_stalled;
	struct staging_waiter sink_wait;
	/* tcp_fill from the event loop, for wake-ups where filling at once
	 * is not safe (inside a buffer's cleanup). */
	struct event *ev_kick;
	struct link *next_dead;      /* failed, waiting to be freed */
};

/* Another xferd as the progress thread knows it. */
struct rpeer {
	uint8_t id[LINK_ID_LEN];
	struct link *link;           /* NULL until attached */
	/* tcp.c's: operations waiting for a link, and whether the main
	 * thread was asked for one (need_peer) without an answer yet. */
	struct xop_list pending;
	bool asked;
	struct rpeer *next;
};

struct linkset {
	struct event_base *base;
	struct regtab *regs;
	struct linkset_cfg cfg;
	struct linkset_hooks hooks;
	struct rpeer *peers;
	size_t nlinks;
	uint64_t events;
	/* Failed links are freed from the event loop (see fail_link). */
	struct link *dead;
	struct event *ev_reap;
	/* GPU memory to and from other nodes (NULL: refused, -ENOTSUP). */
	struct staging_pool *staging;
	struct gpu_copies *gpu;
};

/* --- link.c, for tcp.c --- */

/* Queue bytes / one frame (header, payload length) for the peer;
 * the frame's payload, if any, is the caller's to queue next. */
int link_queue_bytes(struct link *l, const uint8_t *p, size_t n);
int link_put_msg(struct link *l, Xfer__Peer__PeerMsg *m, uint32_t payload);
/* The same with its payload, len bytes at p of memfd region r, in the
 * header's send when nothing waits (link.c). */
int link_put_msg_mapped(struct link *l, Xfer__Peer__PeerMsg *m,
			struct region *r, const void *p, uint32_t len);
/* Write what is queued now, up to SINGLE_IO bytes in one writev. */
void link_flush(struct link *l);
/* The link is gone (see link.c): every operation on it ends with err. */
void link_fail(struct link *l, int err, const char *why);
/* The sink has a receive chunk again: read on. */
void link_rx_resume(struct link *l);
/* tcp_fill(l) from the event loop, soon. */
void link_kick(struct link *l);
struct rpeer *link_find_peer(struct linkset *ls, const uint8_t *id,
			     bool create);

/* --- tcp.c, for link.c --- */

void tcp_peer_init(struct rpeer *rp);
void tcp_link_init(struct link *l);
/* The link is up: start the operations that waited for it. */
void tcp_link_up(struct link *l);
/* The link failed: end its operations and those waiting with err. */
void tcp_link_failed(struct link *l, int err);
void tcp_fail_pending(struct linkset *ls, struct rpeer *rp, int err);
void tcp_link_free(struct link *l);
/* Queue frames while the socket's output buffer has room. */
void tcp_fill(struct link *l);
/* The data frames (link.c's dispatch calls them); 0 or -EPROTO. */
/* A data frame's target as the token it stands for: a 16-byte key, a
 * range inside the region.  0 or -EPROTO. */
int tcp_target_valid(const Xfer__Peer__Target *t);
int tcp_on_write(struct link *l, const Xfer__Peer__WriteChunk *w,
		 uint32_t plen);
int tcp_on_read_request(struct link *l, const Xfer__Peer__ReadRequest *rq);
int tcp_on_read_data(struct link *l, const Xfer__Peer__ReadData *d,
		     uint32_t plen);
int tcp_on_ack(struct link *l, const Xfer__Peer__WriteAck *a);
int tcp_on_notify(struct link *l, const Xfer__Peer__Notify *nt);
void tcp_on_abort(struct link *l, uint64_t op);
void tcp_on_check(struct link *l, const Xfer__Peer__CheckToken *c);
/* Up to n payload bytes from p for the frame being received; returns
 * how many it took (fewer: no receive chunk, l->rx_stalled is set);
 * then, once all are in, its end. */
size_t tcp_sink_put(struct link *l, const uint8_t *p, size_t n);
void tcp_sink_finish(struct link *l);
/* Where recv() may put payload bytes itself (memfd mapping, receive
 * chunk): false if not there (or stalled: l->rx_stalled). */
bool tcp_sink_direct(struct link *l, uint8_t **dst, size_t *room);
/* n bytes landed at what tcp_sink_direct said. */
void tcp_sink_landed(struct link *l, size_t n);

/* --- tcp.c, for staged.c --- */

/* A parked staged stream's next chunk is ready (or it failed). */
void tcp_unpark(struct staged_send *ss, bool fill_now);
/* Every byte of srx landed in GPU memory (or failed): ack, notify, end. */
void tcp_rx_complete(struct staged_rx *srx);

/* --- staged.c --- */

/* Can the link move region r's bytes (through staging for GPU memory)? */
bool staged_reachable(const struct linkset *ls, const struct region *r);
/* Stage [off, off + len) of GPU region r; the caller sets op or s. */
struct staged_send *staged_send_new(struct link *l, struct region *r,
				    uint64_t off, uint64_t len);
/* The next chunk with its bytes, taken off ss; NULL: not ready (parked:
 * tcp_unpark follows) or *err. */
struct staging_chunk *staged_send_next(struct staged_send *ss, int *err);
/* Queue c's bytes as a payload, by reference (c goes back to the pool
 * once the socket took them). */
int staged_queue_chunk(struct link *l, struct staging_chunk *c);
/* The stream ended: chunks in a copy go back when it is done. */
void staged_send_free(struct staged_send *ss);
struct staged_rx *staged_rx_new(struct link *l, struct region *r);
void staged_rx_put(struct staged_rx *srx);
/* All its frames are in: end it once its copies are done. */
void staged_rx_all_in(struct staged_rx *srx);
/* The sink's receive side for GPU memory (see tcp_sink_*). */
size_t staged_sink_put(struct link *l, const uint8_t *p, size_t n);
bool staged_sink_direct(struct link *l, uint8_t **dst, size_t *room);
void staged_sink_landed(struct link *l, size_t n);
/* The payload is all in: the last chunk's copy starts. */
void staged_sink_flush(struct link *l);
/* The payload is dropped from here on: the chunk goes back unused. */
void staged_sink_drop(struct link *l);

#endif /* XFERD_LINK_INT_H */
