/* SPDX-License-Identifier: Apache-2.0 */
/*
 * connect.c - dialing another xferd: which of its addresses (the subnet
 * rule of netaddr.h, and which local address to leave from), the next
 * address when one is unreachable, and backing off after failures so
 * that a dead peer is not hammered with connects while requests keep
 * asking for it.  A connect that goes through continues as a handshake
 * (handshake.c).
 *
 * Main thread only, no locks; nothing here blocks (non-blocking
 * sockets, the connect completes in the event loop).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>

#include "engine/progress.h"
#include "log.h"
#include "peer/peer_int.h"
#include "xferd.h"

#define BACKOFF_MIN_NS (100ull * 1000000)
#define BACKOFF_MAX_NS (2000ull * 1000000)

/* Fail what waits for pe and mark it down; a failed connect (not a
 * request refused during the backoff) backs off further. */
static void connect_failed_as(struct peers *ps, struct peer *pe, int err,
			      const char *why, bool backoff)
{
	char label[128];
	struct request *r;

	pe->state = PEER_DOWN;
	snprintf(pe->last_error, sizeof(pe->last_error), "%s", why);
	/* Back off: a dead peer must not be hammered with connects. */
	if (backoff) {
		uint64_t b = BACKOFF_MIN_NS << (pe->failures < 5 ? pe->failures : 5);
		pe->retry_at_ns = now_ns() + (b < BACKOFF_MAX_NS ? b
								 : BACKOFF_MAX_NS);
		pe->failures++;
	}
	if (pe->failures <= 1 && backoff)
		log_info("peer %s: %s", peer_label(pe, label, sizeof(label)),
			 why);
	else
		log_debug("peer %s: %s (again)",
			  peer_label(pe, label, sizeof(label)), why);
	while ((r = TAILQ_FIRST(&pe->waiting)))
		request_end(r, err, NULL, 0, 0);
	/* Operations of clients waiting in the progress thread, too. */
	if (pe->id_known)
		progress_link_close(ps->d->progress, pe->id, err, why);
	request_resolve_waiting(ps);
}

void connect_failed(struct peers *ps, struct peer *pe, int err,
		    const char *why)
{
	connect_failed_as(ps, pe, err, why, true);
}

void connect_peer(struct peers *ps, struct peer *pe)
{
	if (pe->state != PEER_DOWN || pe->conn)
		return;
	if (pe->failures && now_ns() < pe->retry_at_ns) {
		/* Failed a moment ago: fail again at once, without a connect. */
		char why[sizeof(pe->last_error)];
		snprintf(why, sizeof(why), "%s", pe->last_error[0]
			 ? pe->last_error : "unreachable (retrying later)");
		connect_failed_as(ps, pe, -EHOSTUNREACH, why, false);
		return;
	}
	connect_attempt(ps, pe, 0);
}

/*
 * Connect to one of pe's addresses: attempt 0 is the one the subnet rule
 * picks, later attempts (after failures) the others in turn.
 */
void connect_attempt(struct peers *ps, struct peer *pe, size_t attempt)
{
	struct netaddr_choice ch;
	struct sockaddr_storage ss;
	socklen_t sl;
	char ip[48], label[128];

	if (netaddr_choose(ps->local, ps->nlocal, pe->addrs, pe->naddrs, &ch)) {
		connect_failed(ps, pe, -EHOSTUNREACH,
			       "no address of the peer can be reached from here");
		return;
	}
	size_t idx = ((size_t)ch.peer + attempt) % pe->naddrs;
	const struct netaddr *dst = &pe->addrs[idx];
	int fd = socket(dst->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	if (fd < 0) {
		connect_failed(ps, pe, -errno, "socket() failed");
		return;
	}
	/* Leave from the local address on the peer's subnet: that is the
	 * rail the two nodes share. */
	if (ch.local >= 0 && idx == (size_t)ch.peer) {
		netaddr_to_sockaddr(&ps->local[ch.local], 0, &ss, &sl);
		if (bind(fd, (struct sockaddr *)&ss, sl))
			log_debug("bind to the local rail address failed: %s",
				  strerror(errno));
	}
	netaddr_format(dst, false, ip, sizeof(ip));
	snprintf(pe->address, sizeof(pe->address),
		 dst->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip,
		 pe->ports[idx]);
	snprintf(pe->why, sizeof(pe->why), "%s",
		 idx == (size_t)ch.peer ? ch.why : "no common subnet: routed");
	struct conn *c = conn_new(ps, fd, true);
	if (!c) {
		connect_failed(ps, pe, -ENOMEM, "out of memory");
		return;
	}
	c->peer = pe;
	c->attempt = attempt;
	snprintf(c->remote, sizeof(c->remote), "%s", pe->address);
	pe->conn = c;
	pe->state = PEER_CONNECTING;
	netaddr_to_sockaddr(dst, pe->ports[idx], &ss, &sl);
	log_debug("peer %s: connecting to %s (%s)",
		  peer_label(pe, label, sizeof(label)), pe->address, pe->why);
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&ss, (int)sl))
		conn_failed(c, -ECONNREFUSED);
}
