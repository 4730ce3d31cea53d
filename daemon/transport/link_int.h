/*
 * link_int.h - what the peer session (link.c) and the TCP data path
 * (tcp.c) share about a link; nothing else includes it.
 *
 * link.c owns the connection: framing, receiving, one dispatch of every
 * frame type, keepalives, back-pressure, failure and the link's life.
 * tcp.c owns the data frames' meaning: its operations on the link, the
 * reads it serves, where incoming payload lands.  Each side's fields of
 * struct link are marked; each calls the other only through the
 * functions below.  Progress thread only.
 */
#ifndef XFERD_LINK_INT_H
#define XFERD_LINK_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "common/token_codec.h"
#include "engine/xop.h"
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
	struct xop *xop;             /* ReadData: ours; NULL once it ended */
};

/* A read the peer asked of one of our regions. */
struct serve {
	uint64_t op;
	struct region *r;            /* a reference */
	uint64_t off;                /* in the region */
	uint64_t len, done;
	TAILQ_ENTRY(serve) q;
};
TAILQ_HEAD(serve_list, serve);

struct link {
	/* the session's (link.c) */
	struct linkset *ls;
	struct rpeer *peer;
	uint64_t gen;                /* the main thread's name for it */
	bool read_paused;            /* backpressure: the peer reads too slowly */
	struct bufferevent *bev;     /* NULL once the link failed */
	struct link_stats *stats;
	uint64_t last_rx_ns;
	struct event *tick;

	/* the TCP data path's (tcp.c) */
	uint64_t next_id;
	struct xop_list sendq;
	struct xop *hash[OP_HASH];
	struct serve_list serveq;
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
};

/* --- link.c, for tcp.c --- */

/* Queue bytes / one frame (header, payload length) for the peer;
 * the frame's payload, if any, is the caller's to queue next. */
int link_queue_bytes(struct link *l, const uint8_t *p, size_t n);
int link_put_msg(struct link *l, Xfer__Peer__PeerMsg *m, uint32_t payload);
/* The link is gone (see link.c): every operation on it ends with err. */
void link_fail(struct link *l, int err, const char *why);
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
int tcp_on_write(struct link *l, const Xfer__Peer__WriteChunk *w,
		 uint32_t plen);
int tcp_on_read_request(struct link *l, const Xfer__Peer__ReadRequest *rq);
int tcp_on_read_data(struct link *l, const Xfer__Peer__ReadData *d,
		     uint32_t plen);
int tcp_on_ack(struct link *l, const Xfer__Peer__WriteAck *a);
int tcp_on_notify(struct link *l, const Xfer__Peer__Notify *nt);
void tcp_on_abort(struct link *l, uint64_t op);
void tcp_on_check(struct link *l, const Xfer__Peer__CheckToken *c);
/* n payload bytes from p for the frame being received; then, once all
 * are in, its end. */
void tcp_sink_put(struct rx_sink *k, const uint8_t *p, size_t n);
void tcp_sink_finish(struct link *l);

#endif /* XFERD_LINK_INT_H */
