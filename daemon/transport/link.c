/* SPDX-License-Identifier: Apache-2.0 */
/*
 * link.c - the session with another xferd, in the progress thread: one
 * TCP connection per peer, set up by the main thread (peer/) and handed
 * over here once its handshake is done.
 *
 * It receives (frames, proto/peer.proto: u32 header length, u32 payload
 * length, a PeerMsg, the payload; payloads of large writes straight
 * from the socket to where its data client lands them), dispatches every
 * frame type in one switch - data frames and their payloads to its data
 * client (the TCP mover, through struct link_client_ops), the movers'
 * own frames (queue pair set-up) through the frame hook, lookups, token
 * checks' replies and xferctl's pings to the main thread - sends
 * keepalives, applies back-pressure (the peer is not read while our
 * output to it is over OUT_CAP), and declares the link dead when the
 * peer stays silent for peer_timeout_ms or breaks the protocol.  RDMA
 * sets its queue pairs up over it (linkset_send_ctl).  It knows no
 * mover by name: struct link is the session's alone (this file's,
 * link_send.c's and link_lane.c's).
 *
 * Its sending side (frames queued and written, corking) is
 * link_send.c's, its frames' packing and stateless checks link_frame.c's,
 * its latency lane's set-up link_lane.c's (struct link is shared between
 * them through link_int.h only).
 *
 * Progress thread only (linkset_attach/_close/_send_ctl are applied
 * here by the progress thread for the main thread); no locks.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "core/thread_stats.h"
#include "core/log.h"
#include "common/wire.h"
#include "peer.pb-c.h"
#include "transport/link_int.h"

#define OUT_LOW      (1u << 20)        /* queue frames again below this */
#define OUT_CAP      (4 * LINK_OUT_HIGH) /* stop reading the peer above this */
#define READS_PER_CALL 32
#define RXBUF        (LINK_FRAME_PREFIX + PEER_MAX_HEADER + (256u << 10))


bool link_alive(const struct link *l)
{
	return l->bev != NULL;
}

struct link_stats *link_stats(const struct link *l)
{
	return l->stats;
}

const uint8_t *link_peer_id(const struct link *l)
{
	return l->peer->id;
}

uint64_t link_gen(const struct link *l)
{
	return l->gen;
}

const char *link_peer_hex(const struct link *l, char out[9])
{
	const uint8_t *id = l->peer->id;

	snprintf(out, 9, "%02x%02x%02x%02x", id[0], id[1], id[2], id[3]);
	return out;
}

bool link_is_lane(const struct link *l)
{
	return l->is_lane;
}

size_t link_io_budget(struct link *l)
{
	/* A link whose lane never carried anything looks at no clock. */
	size_t b = l->lane_busy_until_ns && l->lane_busy_until_ns > now_ns()
			   ? LINK_LANE_IO : LINK_SINGLE_IO;

	/* The bufferevent's own writes (on_writable) keep to it too. */
	if (b != l->io_budget && l->bev) {
		l->io_budget = b;
		bufferevent_set_max_single_write(l->bev, b);
	}
	return b;
}

uint64_t link_turn_ns(struct link *l)
{
	return link_io_budget(l) == LINK_LANE_IO ? LINK_TURN_LANE_NS
						 : LINK_TURN_NS;
}

struct rpeer *link_find_peer(struct linkset *ls, const uint8_t *id,
			     bool create)
{
	struct rpeer *rp;

	for (rp = ls->peers; rp; rp = rp->next)
		if (memcmp(rp->id, id, LINK_ID_LEN) == 0)
			return rp;
	if (!create || !(rp = calloc(1, sizeof(*rp))))
		return NULL;
	memcpy(rp->id, id, LINK_ID_LEN);
	rp->next = ls->peers;
	ls->peers = rp;
	return rp;
}

/*
 * One frame: its header, and plen payload bytes that follow (the data
 * client starts a payload for them).
 * Returns 0 or -EPROTO (the peer broke the protocol: drop the link).
 */
static int dispatch(struct link *l, const uint8_t *hdr, size_t hlen,
		    uint32_t plen, const char **why)
{
	Xfer__Peer__PeerMsg *m = link_frame_unpack(hdr, hlen, plen, why);
	int err = 0;

	if (!m)
		return -EPROTO;
	/* A lane we dialed takes nothing but LaneReady (and keepalives)
	 * until it is ready. */
	if (l->is_lane && !l->lane_ready &&
	    m->body_case != XFER__PEER__PEER_MSG__BODY_LANE_READY &&
	    m->body_case != XFER__PEER__PEER_MSG__BODY_PING &&
	    m->body_case != XFER__PEER__PEER_MSG__BODY_PONG) {
		*why = "a frame on a lane before LaneReady";
		xfer__peer__peer_msg__free_unpacked(m, NULL);
		return -EPROTO;
	}
	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_WRITE:
	case XFER__PEER__PEER_MSG__BODY_WRITE_ACK:
	case XFER__PEER__PEER_MSG__BODY_READ:
	case XFER__PEER__PEER_MSG__BODY_READ_DATA:
	case XFER__PEER__PEER_MSG__BODY_NOTIFY:
	case XFER__PEER__PEER_MSG__BODY_ABORT:
	case XFER__PEER__PEER_MSG__BODY_CHECK:
		/* Data frames and token checks: the data client's.  On a
		 * lane they make its link small-stepped for a while (a
		 * keepalive does not). */
		if (l->is_lane && l->of)
			l->of->lane_busy_until_ns = now_ns() + LINK_LANE_HOLD_NS;
		err = l->ls->client->frame(l->cl, m, plen, why);
		break;
	case XFER__PEER__PEER_MSG__BODY_PING: {
		Xfer__Peer__PeerMsg r = XFER__PEER__PEER_MSG__INIT;
		Xfer__Peer__Pong pong = XFER__PEER__PONG__INIT;
		pong.nonce = m->ping->nonce;
		pong.sent_ns = m->ping->sent_ns;
		r.body_case = XFER__PEER__PEER_MSG__BODY_PONG;
		r.pong = &pong;
		link_put_msg(l, &r, 0);
		break;
	}
	case XFER__PEER__PEER_MSG__BODY_PONG:
		if (m->pong->nonce == 0) {  /* our keepalive */
			uint64_t now = now_ns();
			if (m->pong->sent_ns && m->pong->sent_ns <= now)
				atomic_store_explicit(&l->stats->rtt_ns,
						      now - m->pong->sent_ns,
						      memory_order_relaxed);
			break;
		}
		/* an xferctl ping: answered on the main thread */
		__attribute__((fallthrough));
	case XFER__PEER__PEER_MSG__BODY_LOOKUP:
	case XFER__PEER__PEER_MSG__BODY_LOOKUP_REPLY:
	case XFER__PEER__PEER_MSG__BODY_CHECK_REPLY:
		l->ls->hooks.ctl_frame(l->ls->hooks.arg, l->peer->id, m);
		m = NULL;  /* the main thread's now */
		break;
	case XFER__PEER__PEER_MSG__BODY_QP_CONNECT:
	case XFER__PEER__PEER_MSG__BODY_QP_ACCEPT:
	case XFER__PEER__PEER_MSG__BODY_RELEASE_GRANT:
	case XFER__PEER__PEER_MSG__BODY_LAND_OPEN:
	case XFER__PEER__PEER_MSG__BODY_LAND_GRANT:
	case XFER__PEER__PEER_MSG__BODY_LANDED:
	case XFER__PEER__PEER_MSG__BODY_LAND_DONE:
	case XFER__PEER__PEER_MSG__BODY_LAND_ABORT:
		/* Queue pair set-up, grants, landing chunks: the movers'
		 * own frames. */
		if (!l->ls->hooks.frame(l->ls->hooks.arg, l->peer->id, m))
			log_debug("queue pair frame with no transport for it");
		break;
	case XFER__PEER__PEER_MSG__BODY_LANE_OFFER:
	case XFER__PEER__PEER_MSG__BODY_LANE_READY:
		err = lane_frame(l, m, why);
		break;
	case XFER__PEER__PEER_MSG__BODY_ERROR:
		log_warnx("peer says: %s (%d)",
			  m->error->reason ? m->error->reason : "",
			  m->error->code);
		*why = "peer closed the link with an error";
		err = -EPROTO;
		break;
	default:
		*why = "unexpected message on an established link";
		err = -EPROTO;
		break;
	}
	if (m)
		xfer__peer__peer_msg__free_unpacked(m, NULL);
	return err;
}

/*
 * Parse what is buffered: frames, and payload bytes for the sink.
 * Returns false if the link failed.  With l->rx_stalled set on return,
 * the sink waits for a receive chunk: nothing more is read until then.
 */
static bool consume(struct link *l)
{
	const struct link_client_ops *c = l->ls->client;
	const char *why = NULL;
	uint64_t left;

	for (;;) {
		size_t have = l->rx_len - l->rx_off;
		if (c->payload(l->cl, &left)) {
			size_t n = have < left ? have : (size_t)left;
			l->rx_off += c->sink_put(l->cl, l->rxbuf + l->rx_off, n);
			if (l->rx_stalled)
				return true;  /* until a chunk comes back */
			if (c->payload(l->cl, &left) && left)
				return true;  /* more payload to come */
			c->sink_finish(l->cl);
			if (!l->bev)
				return false;
			continue;
		}
		uint32_t hlen, plen;
		int whole = link_frame_prefix(l->rxbuf + l->rx_off, have,
					      &hlen, &plen);
		if (whole < 0) {
			link_fail(l, -EPROTO, "frame length out of bounds");
			return false;
		}
		if (!whole)
			return true;
		const uint8_t *hdr = l->rxbuf + l->rx_off + LINK_FRAME_PREFIX;
		l->rx_off += LINK_FRAME_PREFIX + hlen;
		stat_add(&l->stats->bytes_rx, LINK_FRAME_PREFIX + hlen);
		int err = dispatch(l, hdr, hlen, plen, &why);
		if (err) {
			link_fail(l, err, why);
			return false;
		}
		if (!l->bev)
			return false;
		bool active = c->payload(l->cl, &left);
		if (plen && !active) {
			link_fail(l, -EPROTO, "payload on a frame that has none");
			return false;
		}
		if (active && left == 0) {
			c->sink_finish(l->cl);
			if (!l->bev)
				return false;
		}
	}
}

void link_rx_stall(struct link *l)
{
	l->rx_stalled = true;
}

bool link_rx_stalled(const struct link *l)
{
	return l->rx_stalled;
}

/* The client has room for the payload again (a receive chunk). */
void link_rx_resume(struct link *l)
{
	if (!l->rx_stalled)
		return;
	l->rx_stalled = false;
	if (!l->bev || l->read_paused)
		return;  /* gone, or on_writable resumes it */
	/* Bytes may wait in rxbuf, not the socket: look now. */
	if (event_add(l->ev_read, NULL))
		link_fail(l, -ENOMEM, "cannot watch the socket");
	else
		event_active(l->ev_read, EV_READ, 0);
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	(void)fd, (void)what;

	l->ls->events++;
	link_turn_mark(l->ls);
	if (l->bev)
		l->ls->client->fill(l->cl);
	link_turn_over(l);
}

void link_kick(struct link *l)
{
	if (l->ev_kick)
		event_active(l->ev_kick, EV_TIMEOUT, 0);
}

void link_kick_after(struct link *l, uint64_t ns)
{
	struct timeval tv = { .tv_sec = (time_t)(ns / 1000000000u),
			      .tv_usec = (suseconds_t)(ns % 1000000000u / 1000) };

	if (l->ev_kick && !event_pending(l->ev_kick, EV_TIMEOUT, NULL))
		event_add(l->ev_kick, &tv);
}


/*
 * Backpressure: a peer that sends but does not read (its replies and the
 * reads it asked for pile up here) is not read from until the output
 * buffer has drained.
 */
static bool output_full(struct link *l)
{
	return evbuffer_get_length(bufferevent_get_output(l->bev)) > OUT_CAP;
}

static void on_fd_read(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	(void)what;

	l->ls->events++;
	link_turn_mark(l->ls);
	l->last_rx_ns = now_ns();
	if (l->rx_stalled) {
		event_del(l->ev_read);
		l->ls->client->fill(l->cl);
		link_turn_over(l);
		return;
	}
	/* A bounded number of reads per call, and of bytes while the lane
	 * is busy: the event is level-triggered and fires again, and rings,
	 * timers and other links (the lane, most of all) get their turn in
	 * between. */
	size_t budget = link_io_budget(l);
	if (budget == LINK_SINGLE_IO)
		budget = SIZE_MAX;
	for (int round = 0; round < READS_PER_CALL && budget; round++) {
		if (!consume(l))
			return;
		if (output_full(l)) {
			event_del(l->ev_read);
			l->read_paused = true;
			break;
		}
		uint8_t *dst;
		size_t room;
		/* Big payloads into a memfd region or a receive chunk skip
		 * the buffer: recv() lands them (only with nothing buffered:
		 * the bytes must land in order). */
		bool direct = l->rx_off == l->rx_len &&
			      l->ls->client->sink_direct(l->cl, &dst, &room);
		if (l->rx_stalled) {
			/* No receive chunk free: the peer's bytes wait in
			 * the socket until one comes back. */
			event_del(l->ev_read);
			break;
		}
		if (!direct) {
			/* Keep the unparsed bytes at the front. */
			if (l->rx_off) {
				memmove(l->rxbuf, l->rxbuf + l->rx_off,
					l->rx_len - l->rx_off);
				l->rx_len -= l->rx_off;
				l->rx_off = 0;
			}
			dst = l->rxbuf + l->rx_len;
			room = RXBUF - l->rx_len;
		}
		ssize_t n = recv(fd, dst, room < budget ? room : budget, 0);
		if (n == 0) {
			link_fail(l, -ECONNRESET, "connection closed by the peer");
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				link_fail(l, -ECONNRESET, "connection error");
			break;
		}
		budget -= (size_t)n;
		if (direct) {
			l->ls->client->sink_landed(l->cl, (size_t)n);
		} else {
			l->rx_len += (size_t)n;
		}
	}
	l->ls->client->fill(l->cl);
	link_turn_over(l);
}

/* Read the peer again once our output has drained; false if the link
 * failed. */
bool link_resume_reading(struct link *l)
{
	if (l->read_paused && !output_full(l)) {
		l->read_paused = false;
		if (!l->rx_stalled && event_add(l->ev_read, NULL)) {
			link_fail(l, -ENOMEM, "cannot watch the socket");
			return false;
		}
	}
	return true;
}

static void on_writable(struct bufferevent *bev, void *arg)
{
	struct link *l = arg;
	(void)bev;

	l->ls->events++;
	link_turn_mark(l->ls);
	if (link_resume_reading(l))
		l->ls->client->fill(l->cl);
	link_turn_over(l);
}


static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct link *l = arg;
	(void)bev;

	l->ls->events++;
	if (what & BEV_EVENT_EOF)
		link_fail(l, -ECONNRESET, "connection closed by the peer");
	else if (what & BEV_EVENT_ERROR)
		link_fail(l, -ECONNRESET, "connection error");
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	uint64_t now = now_ns();
	(void)fd, (void)what;

	if (now - l->last_rx_ns > 1000000ull * l->ls->cfg.peer_timeout_ms) {
		link_fail(l, -ETIMEDOUT, "no traffic from the peer within peer_timeout_ms");
		return;
	}
	/* A lane whose LaneReady does not come (a peer that only answers
	 * pings) is not kept. */
	if (l->is_lane && !l->lane_ready &&
	    now - l->opened_ns > 1000000ull * l->ls->cfg.peer_timeout_ms) {
		link_fail(l, -ETIMEDOUT, "no LaneReady within peer_timeout_ms");
		return;
	}
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Ping ping = XFER__PEER__PING__INIT;
	ping.sent_ns = now;
	m.body_case = XFER__PEER__PEER_MSG__BODY_PING;
	m.ping = &ping;
	link_put_msg(l, &m, 0);
}

/* --- link life cycle --- */

static void free_link(struct link *l)
{
	lane_link_free(l);
	if (l->cl)
		l->ls->client->link_free(l->cl);
	if (l->ev_kick)
		event_free(l->ev_kick);
	if (l->tick)
		event_free(l->tick);
	if (l->ev_read)
		event_free(l->ev_read);
	if (l->bev)
		bufferevent_free(l->bev);
	free(l->rxbuf);
	free(l);
}

static void reap_dead(struct linkset *ls)
{
	while (ls->dead) {
		struct link *l = ls->dead;
		ls->dead = l->next_dead;
		free_link(l);
	}
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	reap_dead(arg);
}

/*
 * The link (or lane) is gone: every operation on it ends with err.  The
 * struct itself is freed from the event loop later, so that callers up
 * the stack may still look at l->bev (NULL now) after calling this.  A
 * link's lane goes with it; a lane's link stays (the latency class goes
 * on it again).
 */
void link_fail(struct link *l, int err, const char *why)
{
	struct linkset *ls = l->ls;
	struct rpeer *rp = l->peer;
	char id[9];

	if (!l->bev)
		return;
	log_info("%s to %s: %s", l->is_lane ? "latency lane" : "link",
		 link_peer_hex(l, id), why);
	/* No more frames: Aborts are pointless now. */
	event_free(l->ev_read);
	l->ev_read = NULL;
	bufferevent_free(l->bev);  /* closes the socket */
	l->bev = NULL;
	event_free(l->tick);
	l->tick = NULL;
	lane_link_failed(l, err);
	if (!l->is_lane) {
		rp->link = NULL;
		ls->nlinks--;
	}
	if (l->cl)
		ls->client->link_failed(l->cl, err);
	if (!l->is_lane)
		ls->hooks.link_down(ls->hooks.arg, rp->id, l->gen, err, why);
	l->next_dead = ls->dead;
	ls->dead = l;
	event_active(ls->ev_reap, EV_TIMEOUT, 0);
}

struct link *link_open(struct linkset *ls, struct rpeer *rp, int fd,
		       uint64_t gen, struct link_stats *stats, bool is_lane,
		       const void *pending, size_t pending_len)
{
	struct link *l = calloc(1, sizeof(*l));

	if (!l) {
		close(fd);
		return NULL;
	}
	l->ls = ls;
	l->peer = rp;
	l->gen = gen;
	l->stats = stats;
	l->is_lane = is_lane;
	l->dial_fd = -1;
	l->cl = ls->client->link_new(ls->client_arg, l, rp->id);
	l->opened_ns = l->last_rx_ns = now_ns();
	l->fd = fd;
	l->rxbuf = pending_len <= RXBUF ? malloc(RXBUF) : NULL;
	l->bev = bufferevent_socket_new(ls->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!l->bev)
		close(fd);
	l->tick = event_new(ls->base, -1, EV_PERSIST, on_tick, l);
	l->ev_read = event_new(ls->base, fd, EV_READ | EV_PERSIST, on_fd_read,
			       l);
	l->ev_kick = event_new(ls->base, -1, 0, on_kick, l);
	struct timeval tv = ms_to_timeval(ls->cfg.keepalive_ms);
	if (is_lane)
		lane_events_first(l);
	if (!l->cl || !l->bev || !l->tick || !l->ev_read || !l->ev_kick ||
	    !l->rxbuf ||
	    event_add(l->tick, &tv) || event_add(l->ev_read, NULL)) {
		free_link(l);
		return NULL;
	}
	/* The bufferevent only writes; on_fd_read receives. */
	bufferevent_setcb(l->bev, NULL, on_writable, on_event, l);
	/* libevent writes 16 KiB per system call by default: far too
	 * little for a link that moves megabyte chunks. */
	l->io_budget = LINK_SINGLE_IO;
	bufferevent_set_max_single_write(l->bev, l->io_budget);
	bufferevent_setwatermark(l->bev, EV_WRITE, OUT_LOW, 0);
	bufferevent_disable(l->bev, EV_READ);
	bufferevent_enable(l->bev, EV_WRITE);
	if (pending_len) {
		memcpy(l->rxbuf, pending, pending_len);
		l->rx_len = pending_len;
	}
	return l;
}

void link_read_now(struct link *l)
{
	on_fd_read(l->fd, EV_READ, l);
}

void linkset_attach(struct linkset *ls, int fd, const uint8_t id[LINK_ID_LEN],
		    uint64_t gen, struct link_stats *stats, const void *pending,
		    size_t pending_len, bool initiator, bool offer_lane)
{
	struct rpeer *rp = link_find_peer(ls, id, true);

	if (!rp) {
		close(fd);
		/* The main thread must learn this link never came up. */
		ls->hooks.link_down(ls->hooks.arg, id, gen, -ENOMEM,
				    "out of memory");
		return;
	}
	if (rp->link)  /* replaced: the peer evidently lost the old one */
		link_fail(rp->link, -ECONNRESET, "replaced by a new link");
	struct link *l = link_open(ls, rp, fd, gen, stats, false, pending,
				   pending_len);
	if (!l) {
		ls->client->peer_failed(ls->client_arg, id, -ENOMEM);
		ls->hooks.link_down(ls->hooks.arg, id, gen, -ENOMEM,
				    "cannot set the link up");
		return;
	}
	l->initiator = initiator;
	rp->link = l;
	ls->nlinks++;
	ls->client->link_up(l->cl);
	if (offer_lane && ls->cfg.lanes)
		lane_offer(l);
	link_read_now(l);
}

void linkset_close(struct linkset *ls, const uint8_t id[LINK_ID_LEN], int err,
		   const char *why)
{
	struct rpeer *rp = link_find_peer(ls, id, false);

	/* Without a link, operations may still wait for one. */
	if (rp && rp->link)
		link_fail(rp->link, err, why);
	else
		ls->client->peer_failed(ls->client_arg, id, err);
}

void linkset_send_ctl(struct linkset *ls, const uint8_t id[LINK_ID_LEN],
		      const uint8_t *msg, size_t len)
{
	struct rpeer *rp = link_find_peer(ls, id, false);
	uint8_t prefix[LINK_FRAME_PREFIX];
	uint32_t h = (uint32_t)len, p = 0;

	if (!rp || !rp->link || len == 0 || len > PEER_MAX_HEADER)
		return;
	memcpy(prefix, &h, 4);
	memcpy(prefix + 4, &p, 4);
	link_queue_bytes(rp->link, prefix, sizeof(prefix));
	link_queue_bytes(rp->link, msg, len);
}

bool linkset_active(const struct linkset *ls)
{
	return ls->nlinks > 0;
}

uint64_t linkset_take_events(struct linkset *ls)
{
	uint64_t n = ls->events;

	ls->events = 0;
	return n;
}

void linkset_turn_begin(struct linkset *ls)
{
	ls->turn_start_ns = 0;
}

void link_turn_mark(struct linkset *ls)
{
	if (!ls->turn_start_ns)
		ls->turn_start_ns = now_ns();
}

/*
 * A turn of the event loop whose link callbacks ran link_turn_ns() ends
 * after this callback; the events still active run in the next (first:
 * libevent keeps them in order, and a turn with active events does not
 * wait in epoll).  While a socket takes every write, each write a trip
 * through the kernel's TCP stack (on loopback or a veth the receiver's
 * as well), the write events of a busy link follow each other within one
 * turn, and the thread looked at its rings (a latency write waiting to
 * start), its lane and its acks only after tens of milliseconds.
 */
void link_turn_over(struct link *l)
{
	struct linkset *ls = l->ls;

	if (ls->turn_start_ns &&
	    now_ns() - ls->turn_start_ns > link_turn_ns(l))
		event_base_loopbreak(ls->base);
}

struct linkset *linkset_create(struct event_base *base,
			       const struct linkset_cfg *cfg,
			       const struct linkset_hooks *hooks,
			       const struct link_client_ops *client,
			       void *client_arg)
{
	struct linkset *ls = calloc(1, sizeof(*ls));

	if (!ls)
		return NULL;
	ls->base = base;
	ls->cfg = *cfg;
	ls->hooks = *hooks;
	ls->client = client;
	ls->client_arg = client_arg;
	ls->ev_reap = event_new(base, -1, 0, on_reap, ls);
	if (!ls->ev_reap) {
		free(ls);
		return NULL;
	}
	return ls;
}

void linkset_set_cfg(struct linkset *ls, const struct linkset_cfg *cfg)
{
	ls->cfg = *cfg;
}

void linkset_destroy(struct linkset *ls)
{
	if (!ls)
		return;
	for (struct rpeer *rp = ls->peers, *next; rp; rp = next) {
		next = rp->next;
		if (rp->link)
			link_fail(rp->link, -ECONNRESET, "xferd is stopping");
		free(rp);
	}
	reap_dead(ls);
	event_free(ls->ev_reap);
	free(ls);
}
