/* SPDX-License-Identifier: Apache-2.0 */
/*
 * link_int.h - what the session's files share; nothing else includes it.
 *
 *   link.c       a link: receiving, dispatch, back-pressure,
 *                keepalives, its life and failure
 *   link_send.c  a link's sending side: frames queued and written in
 *                order, mapped payloads by reference, corking
 *   link_lane.c  a link's latency lane: the second connection that
 *                carries the latency class's data frames (offered,
 *                dialed, accepted, ready)
 *
 * struct link stays private to these files: the data client reaches
 * it only through link_client.h.  Progress thread only; no locks.
 */
#ifndef XFERD_LINK_INT_H
#define XFERD_LINK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/link_client.h"

#define LANE_SECRET_LEN LINK_LANE_SECRET

struct event;
struct bufferevent;
struct Xfer__Peer__PeerMsg;

struct link {
	struct linkset *ls;
	struct rpeer *peer;
	void *cl;                    /* the data client's state for it */
	uint64_t gen;                /* the main thread's name for it */
	bool read_paused;            /* backpressure: the peer reads too slowly */
	bool corked;                 /* link_cork: no send yet */
	bool lowat_failed;           /* link_set_notsent_lowat: logged */
	bool cork_used;              /* ... and one went by (send_now) */
	struct bufferevent *bev;     /* NULL once the link failed */
	struct link_stats *stats;
	uint64_t last_rx_ns;
	uint64_t opened_ns;          /* a lane: LaneReady is due within
				      * peer_timeout_ms of this */
	struct event *tick;

	/* Receiving is done here, not by the bufferevent: payloads go from
	 * the socket straight to where the client lands them (one copy, by
	 * the kernel). */
	int fd;
	struct event *ev_read;
	uint8_t *rxbuf;              /* headers and small payloads */
	size_t rx_off, rx_len;       /* unparsed bytes: [rx_off, rx_len) */
	/* No room for the payload (link_rx_stall): not read until then. */
	bool rx_stalled;
	/* The client's fill() from the event loop (link_kick). */
	struct event *ev_kick;
	struct link *next_dead;      /* failed, waiting to be freed */

	/*
	 * The latency lane (link_lane.c).  On a link: lane is its lane
	 * (NULL: none, or not yet), initiator says we connected it, and
	 * either lane_offered (we accepted it: the secret we offered,
	 * good for one lane) or lane_dialed (we connected it: the offer
	 * came, dial_fd/ev_dial while the connect runs).  On a lane: of is
	 * its link (NULL once that failed), lane_ready once LaneReady was
	 * sent or seen: only then is it its data client's to use.  A lane
	 * ends with its link; a link outlives its lane.
	 */
	bool is_lane, lane_ready, initiator;
	/* A link: its lane received a data frame lately (until then, its
	 * reads and writes go LINK_LANE_IO at a time); io_budget is what
	 * the bufferevent was told. */
	uint64_t lane_busy_until_ns;
	size_t io_budget;
	bool lane_offered, lane_dialed;
	struct link *lane, *of;
	uint8_t lane_secret[LANE_SECRET_LEN];
	int dial_fd;
	struct event *ev_dial;
};

/* Another xferd with a link (or had one). */
struct rpeer {
	uint8_t id[LINK_ID_LEN];
	struct link *link;           /* NULL until attached */
	struct rpeer *next;
};

struct linkset {
	struct event_base *base;
	struct linkset_cfg cfg;
	struct linkset_hooks hooks;
	const struct link_client_ops *client;
	void *client_arg;
	struct rpeer *peers;
	size_t nlinks;
	uint64_t events;
	/* When the first link callback of this turn of the event loop
	 * began (0: none yet; linkset_turn_begin, link_turn_over). */
	uint64_t turn_start_ns;
	/* Failed links are freed from the event loop (see link_fail). */
	struct link *dead;
	struct event *ev_reap;
};

/* --- link.c and link_send.c, for each other and link_lane.c --- */

struct rpeer *link_find_peer(struct linkset *ls, const uint8_t *id,
			     bool create);
/* A new struct link of ls for rp over connected socket fd (a link's or
 * a lane's), its events armed, reading: NULL (fd closed) without
 * memory.  pending: bytes already read from fd. */
struct link *link_open(struct linkset *ls, struct rpeer *rp, int fd,
		       uint64_t gen, struct link_stats *stats, bool is_lane,
		       const void *pending, size_t pending_len);
/* Read what waits on l (after link_open and the client's link_up). */
void link_read_now(struct link *l);
/* The first 4 bytes of l's peer's instance id in hex, for the log. */
const char *link_peer_hex(const struct link *l, char out[9]);
/* Queue bytes for the peer (sent now if they can be; link_send.c). */
int link_queue_bytes(struct link *l, const uint8_t *p, size_t n);
/* Read the peer again if reading was paused for our output and that
 * has drained (link_flush, after a write of its own): false if the
 * link failed. */
bool link_resume_reading(struct link *l);
/* At the start of a read, write or kick callback: the turn's links
 * start to run (the first sets the turn's start). */
void link_turn_mark(struct linkset *ls);
/* At its end: ends the event loop's turn once the links' callbacks in
 * it ran link_turn_ns(l) (link.c). */
void link_turn_over(struct link *l);

/* --- link_lane.c, for link.c --- */

/* l (a link we accepted, its peer able to dial) is up: offer a lane. */
void lane_offer(struct link *l);
/* A lane frame (LaneOffer on a link, LaneReady on a lane): 0 or -EPROTO
 * with *why. */
int lane_frame(struct link *l, const struct Xfer__Peer__PeerMsg *m,
	       const char **why);
/* l failed with err: its lane (a link's) fails too, its dial stops; a
 * lane leaves its link. */
void lane_link_failed(struct link *l, int err);
/* A lane's events (reads, writes, kicks) run before a link's in each
 * turn of the event loop (where the base has priorities). */
void lane_events_first(struct link *l);
/* l is freed: what the lane code holds of it goes. */
void lane_link_free(struct link *l);

#endif /* XFERD_LINK_INT_H */
