/* SPDX-License-Identifier: Apache-2.0 */
/*
 * link_client.h - the link's data client: the table through which the
 * session (link.c) hands the mover that moves data on a link (the TCP
 * mover, tcp*.c) its frames, its payload bytes and the link's life, and
 * what that mover may ask of a link in return.
 *
 * The session owns the connection: framing, receiving, one dispatch of
 * every frame type, keepalives, back-pressure, the link's life and
 * failure.  It knows no data-path function by name; the client was given
 * to linkset_create (link.h) and keeps its own state per link, which the
 * session holds for it as an opaque pointer (`cl` below).  struct link
 * stays the session's: the client reaches it only through the functions
 * here.  Progress thread only.
 */
#ifndef XFERD_LINK_CLIENT_H
#define XFERD_LINK_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/link.h"

struct link;
struct region;
struct evbuffer;
struct Xfer__Peer__PeerMsg;

#define LINK_OUT_HIGH   (4u << 20)   /* stop queueing frames above this */
/* Bytes per write call, and per read call, at most: LINK_SINGLE_IO, or
 * LINK_LANE_IO while the link's latency lane carries traffic (and for
 * LINK_LANE_HOLD_NS after): each call is about as long as a lane's frame
 * may wait for the progress thread (link_lane.c).  link_io_budget(). */
#define LINK_SINGLE_IO  (1u << 20)
#define LINK_LANE_IO    (256u << 10)
/* The links' callbacks in one turn of the event loop, and one fill of a
 * link's output, run this long at most (link_turn_over): a latency write
 * waits up to one turn before the thread takes it from its ring, so the
 * turn is shorter while the link's lane carries traffic (link_turn_ns). */
#define LINK_TURN_NS      500000ull
#define LINK_TURN_LANE_NS 100000ull
#define LINK_LANE_HOLD_NS 1000000000ull

/*
 * What the session calls of its data client.  arg is the client_arg of
 * linkset_create; cl is what link_new returned for that link.
 */
struct link_client_ops {
	/* --- the link's life --- */
	/* A link to peer id is being set up: the client's state for it,
	 * or NULL (no memory: the link fails before it is up). */
	void *(*link_new)(void *arg, struct link *l,
			  const uint8_t id[LINK_ID_LEN]);
	/* The link is up: start what waited for it. */
	void (*link_up)(void *cl);
	/* The link failed: end its operations (and those waiting for a
	 * link to its peer) with err.  Nothing more is sent on it. */
	void (*link_failed)(void *cl, int err);
	/* The link is freed (from the event loop, after link_failed). */
	void (*link_free)(void *cl);
	/* No link to id will come now (set-up failed, or the main thread
	 * gave up on it): end what waits for one with err. */
	void (*peer_failed)(void *arg, const uint8_t id[LINK_ID_LEN], int err);
	/* The socket has room: queue frames (link_out_bytes). */
	void (*fill)(void *cl);

	/* --- receiving --- */
	/* A data frame (WriteChunk, WriteAck, ReadRequest, ReadData,
	 * Notify, Abort, CheckToken) with plen payload bytes to follow,
	 * checked by link_frame_unpack already.  A frame with payload
	 * starts a payload (payload() below) for them.  0, or -EPROTO with
	 * *why: the peer broke the protocol, the link is dropped. */
	int (*frame)(void *cl, const struct Xfer__Peer__PeerMsg *m,
		     uint32_t plen, const char **why);
	/* Is a payload being received?  *left: its bytes still to come. */
	bool (*payload)(void *cl, uint64_t *left);
	/* Up to n payload bytes at p: returns how many it took (fewer: no
	 * room to land them yet, and it called link_rx_stall). */
	size_t (*sink_put)(void *cl, const uint8_t *p, size_t n);
	/* Where recv() may put payload bytes itself (a region's mapping, a
	 * receive chunk), asked only when nothing is buffered: false if
	 * nowhere (or stalled: link_rx_stall). */
	bool (*sink_direct)(void *cl, uint8_t **dst, size_t *room);
	/* n bytes landed where sink_direct said. */
	void (*sink_landed)(void *cl, size_t n);
	/* The whole payload is in (maybe none: plen 0): its end. */
	void (*sink_finish)(void *cl);
};

/* --- what the client asks of a link --- */

/* Queue one frame (header, payload length) for the peer; the frame's
 * payload, if any, is the caller's to queue next.  0 or -errno (the
 * stream is out of step: the caller fails the link). */
int link_put_msg(struct link *l, struct Xfer__Peer__PeerMsg *m,
		 uint32_t payload);
/* The same with its payload, len bytes at p of memfd region r, in the
 * header's send when nothing waits; r is held while the bytes wait. */
int link_put_msg_mapped(struct link *l, struct Xfer__Peer__PeerMsg *m,
			struct region *r, const void *p, uint32_t len);
/* Payload bytes by reference: done(p, n, arg) once the socket took
 * them (or the link is gone).  On failure done is not called. */
int link_queue_ref(struct link *l, const void *p, size_t n,
		   void (*done)(const void *p, size_t n, void *arg),
		   void *arg);
/* Payload bytes of buffer b, moved (b is left empty). */
int link_queue_buffer(struct link *l, struct evbuffer *b);
/* Bytes queued and not yet taken by the socket. */
size_t link_out_bytes(const struct link *l);
/* Cork: frames queued until link_uncork are written together (a lone
 * small first frame still goes at once); uncork writes them. */
void link_cork(struct link *l);
void link_uncork(struct link *l);
/* Bytes per read or write call on l now (LINK_SINGLE_IO or, with its
 * lane busy, LINK_LANE_IO). */
size_t link_io_budget(struct link *l);
/* How long a turn of the event loop, or a fill, may give l now:
 * LINK_TURN_NS, or LINK_TURN_LANE_NS while its lane is busy. */
uint64_t link_turn_ns(struct link *l);
/* Write what is queued now, up to link_io_budget() bytes in one writev. */
void link_flush(struct link *l);
/* Has the link not failed? */
bool link_alive(const struct link *l);
/* The link is gone: link_failed follows at once (the struct is freed
 * later, from the event loop). */
void link_fail(struct link *l, int err, const char *why);
/* fill() from the event loop, soon: for wake-ups where filling at once
 * is not safe (inside a buffer's cleanup). */
void link_kick(struct link *l);
/* fill() from the event loop after ns nanoseconds (a paced tenant),
 * unless a kick comes first. */
void link_kick_after(struct link *l, uint64_t ns);
/* The kernel keeps at most bytes unsent on the socket (TCP_NOTSENT_LOWAT;
 * 0: the system's default again), so that little waits ahead of the
 * next frame.  Best effort: a failure is logged once and ignored. */
void link_set_notsent_lowat(struct link *l, uint32_t bytes);
/* Back-pressure of the receiving side: no room to land payload bytes
 * (no receive chunk), so the peer's bytes wait in the socket until
 * link_rx_resume. */
void link_rx_stall(struct link *l);
bool link_rx_stalled(const struct link *l);
void link_rx_resume(struct link *l);
/* The peer's counters (single writer: this thread). */
struct link_stats *link_stats(const struct link *l);
/* The peer's instance id (LINK_ID_LEN bytes) and the main thread's
 * name of this link (its gen). */
const uint8_t *link_peer_id(const struct link *l);
uint64_t link_gen(const struct link *l);
/* Is l a latency lane (link_lane.c: a second connection to its peer
 * that carries only the latency class)?  Known from link_new on. */
bool link_is_lane(const struct link *l);

#endif /* XFERD_LINK_CLIENT_H */
