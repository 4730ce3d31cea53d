/* SPDX-License-Identifier: Apache-2.0 */
/*
 * link_lane.c - a link's latency lane: a second TCP connection to the
 * same peer that carries only the latency class's data frames.
 *
 * Why: on one connection a latency frame waits behind every bulk byte
 * ahead of it, and most of those are out of xferd's reach once a bulk
 * transfer runs at a few GB/s: sent and unacknowledged in our kernel,
 * or received and unread in the peer's, megabytes of socket buffer
 * (TCP_NOTSENT_LOWAT bounds only what is not sent yet).  A decode
 * step's 64 KiB block then waits milliseconds.  On a connection of its
 * own it waits only for the other latency frames.
 *
 * How it comes up (proto/peer.proto, LaneOffer):
 *   1. the side that accepted the link offers a lane on it as it comes
 *      up, with a secret of 16 random bytes, if link_lanes is on and the
 *      peer's Hello said it dials lanes (an older peer is never sent a
 *      frame it does not know);
 *   2. the other side connects to the address it reached the link at
 *      (the link socket's peer address) and opens with LaneHello - its
 *      instance id and the secret - instead of a Hello;
 *   3. the acceptor's main thread hands that socket over as it is
 *      (linkset_attach_lane), and the secret is compared here, in
 *      constant time, against the offer of the link to that instance:
 *      a match takes the offer (one lane per offer), anything else
 *      closes the socket and leaves the offer standing;
 *   4. the acceptor answers LaneReady and uses the lane at once; the
 *      dialer uses it once LaneReady came.
 * The secret travelled on the link itself, which the handshake
 * authenticated where a cluster_key is set, so presenting it proves the
 * lane is that link's other half; a lane can do nothing the link could
 * not (same peer, same frames, same checks).
 *
 * Failure: a lane ends with its link.  A lane that fails, or never
 * comes (the address does not take a second connection), leaves the
 * link up: latency traffic goes on it again, under the link's own class
 * scheduling (tcp_sched.c).
 *
 * Progress thread only; no locks.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/clock.h"
#include "common/wire.h"
#include "core/log.h"
#include "peer.pb-c.h"
#include "transport/link_int.h"

/* The kernel's interactive band (TC_PRIO_INTERACTIVE): where a prio or
 * pfifo_fast queueing discipline puts the lane's packets ahead of the
 * link's.  Allowed without CAP_NET_ADMIN. */
#define LANE_SO_PRIORITY 6
/*
 * Socket buffers of a lane, both ways (the kernel caps them at
 * net.core.[rw]mem_max, doubled: 416 KiB by default).  Left to
 * autotuning, a lane that carries a 64 KiB frame now and then never
 * grows past its first window (about 64 KiB on loopback, less than a
 * frame with its header): the frame's tail then waits for a window
 * update the receiver sends only with a delayed ACK, 40-200 ms, every
 * other frame.
 */
#define LANE_SOCKBUF (1 << 20)

/* Before connect() on the dialer's side, so the window scale fits. */
static void lane_socket_opts(int fd)
{
	int one = 1, prio = LANE_SO_PRIORITY, buf = LANE_SOCKBUF;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, sizeof(prio));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
}

static bool secret_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t d = 0;

	for (size_t i = 0; i < LANE_SECRET_LEN; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

/* Queue a frame without payload on l. */
static int lane_send(struct link *l, Xfer__Peer__PeerMsg *m)
{
	return link_put_msg(l, m, 0);
}

void lane_offer(struct link *l)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LaneOffer o = XFER__PEER__LANE_OFFER__INIT;

	if (getrandom(l->lane_secret, LANE_SECRET_LEN, 0) !=
	    (ssize_t)LANE_SECRET_LEN) {
		log_warn("link: no random bytes for a latency lane");
		return;
	}
	o.secret.data = l->lane_secret;
	o.secret.len = LANE_SECRET_LEN;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LANE_OFFER;
	m.lane_offer = &o;
	if (lane_send(l, &m) == 0)
		l->lane_offered = true;
}

static void dial_end(struct link *l)
{
	if (l->ev_dial) {
		event_free(l->ev_dial);
		l->ev_dial = NULL;
	}
	if (l->dial_fd >= 0) {
		close(l->dial_fd);
		l->dial_fd = -1;
	}
	memset(l->lane_secret, 0, sizeof(l->lane_secret));
}

/* The lane's connect ended: open with LaneHello and wait for LaneReady. */
static void on_dialed(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	struct linkset *ls = l->ls;
	char hex[9];
	int err = 0;
	socklen_t elen = sizeof(err);

	ls->events++;
	if (what & EV_TIMEOUT)
		err = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen))
		err = errno;
	if (err) {
		log_info("link to %s: no latency lane (%s): the latency class "
			 "stays on the link", link_peer_hex(l, hex), strerror(err));
		dial_end(l);
		return;
	}
	event_free(l->ev_dial);
	l->ev_dial = NULL;
	l->dial_fd = -1;

	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LaneHello h = XFER__PEER__LANE_HELLO__INIT;
	uint8_t buf[LINK_FRAME_PREFIX + 128];
	h.instance_id.data = ls->cfg.self_id;
	h.instance_id.len = LINK_ID_LEN;
	h.secret.data = l->lane_secret;
	h.secret.len = LANE_SECRET_LEN;
	m.proto_version = XFER_PROTO_VERSION;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LANE_HELLO;
	m.lane_hello = &h;
	int n = link_frame_header(&m.base, 0, buf);
	/* A fresh socket takes a hundred bytes at once. */
	ssize_t k = n > 0 ? send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT)
			  : -1;
	memset(l->lane_secret, 0, sizeof(l->lane_secret));
	if (k != n) {
		log_info("link to %s: no latency lane (its hello did not go)",
			 link_peer_hex(l, hex));
		close(fd);
		return;
	}
	struct link *lane = link_open(ls, l->peer, fd, l->gen, l->stats, true,
				      NULL, 0);
	if (!lane)
		return;
	lane->of = l;
	l->lane = lane;
	link_read_now(lane);
}

/* Connect to where we reached l, for its lane. */
static void dial(struct link *l)
{
	struct linkset *ls = l->ls;
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	char hex[9];
	int fd = -1;

	if (getpeername(l->fd, (struct sockaddr *)&sa, &len) ||
	    (fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
					       SOCK_CLOEXEC, 0)) < 0) {
		log_info("link to %s: no latency lane (%s)", link_peer_hex(l, hex),
			 strerror(errno));
		return;
	}
	lane_socket_opts(fd);
	if (connect(fd, (struct sockaddr *)&sa, len) && errno != EINPROGRESS) {
		log_info("link to %s: no latency lane (%s)", link_peer_hex(l, hex),
			 strerror(errno));
		close(fd);
		return;
	}
	struct timeval tv = ms_to_timeval(ls->cfg.peer_timeout_ms);
	l->dial_fd = fd;
	l->ev_dial = event_new(ls->base, fd, EV_WRITE, on_dialed, l);
	if (!l->ev_dial || event_add(l->ev_dial, &tv))
		dial_end(l);
}

int lane_frame(struct link *l, const Xfer__Peer__PeerMsg *m, const char **why)
{
	char hex[9];

	if (m->body_case == XFER__PEER__PEER_MSG__BODY_LANE_READY) {
		*why = "LaneReady where no lane waits for it";
		if (!l->is_lane || l->lane_ready || !l->of)
			return -EPROTO;
		l->lane_ready = true;
		atomic_store_explicit(&l->stats->lane_up, true,
				      memory_order_relaxed);
		log_info("link to %s: latency lane up", link_peer_hex(l, hex));
		l->ls->client->link_up(l->cl);
		return 0;
	}
	*why = "bad lane offer";
	if (l->is_lane || m->lane_offer->secret.len != LANE_SECRET_LEN)
		return -EPROTO;
	/* Only the side that connected the link dials, once per link, and
	 * only if lanes are on here: an offer otherwise is ignored. */
	if (!l->initiator || l->lane_dialed || !l->ls->cfg.lanes)
		return 0;
	l->lane_dialed = true;
	memcpy(l->lane_secret, m->lane_offer->secret.data, LANE_SECRET_LEN);
	dial(l);
	return 0;
}

void linkset_attach_lane(struct linkset *ls, int fd,
			 const uint8_t id[LINK_ID_LEN],
			 const uint8_t secret[LINK_LANE_SECRET],
			 const void *pending, size_t pending_len)
{
	struct rpeer *rp = link_find_peer(ls, id, false);
	struct link *l = rp ? rp->link : NULL;
	char hex[9];

	if (!l || !l->bev || !l->lane_offered || l->lane ||
	    !secret_equal(l->lane_secret, secret)) {
		/* Debug: anyone may knock, and the log is not theirs to fill. */
		log_debug("a latency lane refused: no link offered it");
		close(fd);
		return;
	}
	l->lane_offered = false;  /* one lane per offer */
	memset(l->lane_secret, 0, sizeof(l->lane_secret));
	lane_socket_opts(fd);
	struct link *lane = link_open(ls, rp, fd, l->gen, l->stats, true,
				      pending, pending_len);
	if (!lane)
		return;
	lane->of = l;
	l->lane = lane;
	lane->lane_ready = true;
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__LaneReady r = XFER__PEER__LANE_READY__INIT;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LANE_READY;
	m.lane_ready = &r;
	if (lane_send(lane, &m)) {
		link_fail(lane, -ENOMEM, "cannot answer its hello");
		return;
	}
	atomic_store_explicit(&l->stats->lane_up, true, memory_order_relaxed);
	log_info("link to %s: latency lane up", link_peer_hex(l, hex));
	ls->client->link_up(lane->cl);
	link_read_now(lane);
}

void lane_link_failed(struct link *l, int err)
{
	if (l->is_lane) {
		if (l->of)
			l->of->lane = NULL;
		l->of = NULL;
		atomic_store_explicit(&l->stats->lane_up, false,
				      memory_order_relaxed);
		return;
	}
	dial_end(l);
	l->lane_offered = false;
	memset(l->lane_secret, 0, sizeof(l->lane_secret));
	struct link *lane = l->lane;
	if (lane) {
		l->lane = NULL;
		lane->of = NULL;
		link_fail(lane, err, "its link is gone");
	}
}

void lane_events_first(struct link *l)
{
	/* 0 is the first of the progress thread's two priorities; a base
	 * without priorities (a unit test's) refuses it, harmlessly. */
	if (l->ev_read)
		(void)event_priority_set(l->ev_read, 0);
	if (l->ev_kick)
		(void)event_priority_set(l->ev_kick, 0);
	if (l->bev)
		(void)bufferevent_priority_set(l->bev, 0);
}

void lane_link_free(struct link *l)
{
	dial_end(l);
}
