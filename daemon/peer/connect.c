/* SPDX-License-Identifier: Apache-2.0 */
/*
 * connect.c - dialing another xferd: which of its addresses (the subnet
 * rule of netaddr.h, and which local address to leave from), the next
 * address when one is unreachable, and backing off after failures so
 * that a dead peer is not hammered with connects while requests keep
 * asking for it.  A connect that goes through continues as a handshake
 * (handshake.c).
 *
 * Whom xferd dials.  A token's addresses and a "host:port" lookup come
 * from any local user: without a cluster key, xferd dials only the
 * addresses of known peers (configured `peer =` lines, etcd members,
 * and what such a peer advertised in its own handshake), so a forged
 * token cannot make it open a connection to an arbitrary host and send
 * it a Hello.  With a key any address may be dialed: the handshake
 * proves the peer before a request goes out on the link.  Dials to
 * records that are not known, caused by a user's request, are
 * rate-limited per uid (a token bucket of peer_connect_rate a second,
 * twice that at once), so that many forged tokens cannot turn xferd
 * into a connection flood.
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
#include "core/log.h"
#include "peer/peer_int.h"

#define BACKOFF_MIN_NS (100ull * 1000000)
#define BACKOFF_MAX_NS (2000ull * 1000000)

static bool same_addr(const struct netaddr *a, uint16_t pa,
		      const struct netaddr *b, uint16_t pb)
{
	return pa == pb && a->family == b->family &&
	       memcmp(a->ip, b->ip, a->family == AF_INET ? 4 : 16) == 0;
}

/* Is a (port) one of a configured peer's, or of a known record? */
static bool addr_known(const struct peers *ps, const struct netaddr *a,
		       uint16_t port)
{
	const struct xferd_config *cfg = ps->ctx.cfg;
	char host[CONFIG_HOST_MAX];
	struct netaddr na;
	uint16_t p;

	for (uint32_t i = 0; i < cfg->npeers; i++)
		if (!config_split_hostport(cfg->peers[i], host, &p,
					   CONFIG_DEFAULT_PORT) &&
		    !netaddr_parse(host, &na) && same_addr(a, port, &na, p))
			return true;
	for (const struct peer *pe = ps->peers; pe; pe = pe->next)
		for (size_t i = 0; pe->known && i < pe->naddrs; i++)
			if (same_addr(a, port, &pe->addrs[i], pe->ports[i]))
				return true;
	return false;
}

bool connect_addr_allowed(const struct peers *ps, const struct peer *pe,
			  const struct netaddr *a, uint16_t port)
{
	return ps->key || pe->known || addr_known(ps, a, port);
}

bool connect_dial_allowed(const struct peers *ps, const struct peer *pe)
{
	for (size_t i = 0; i < pe->naddrs; i++)
		if (connect_addr_allowed(ps, pe, &pe->addrs[i], pe->ports[i]))
			return true;
	return false;
}

bool connect_would_dial(const struct peers *ps, const struct peer *pe)
{
	(void)ps;
	return pe->state == PEER_DOWN && !pe->conn &&
	       !(pe->failures && now_ns() < pe->retry_at_ns);
}

bool connect_rate_take(struct peers *ps, int64_t uid)
{
	const uint64_t rate = ps->ctx.cfg->peer_connect_rate;  /* a second */
	const uint64_t burst_milli = 2 * rate * 1000;
	uint64_t now = now_ns();
	struct dial_bucket *b = NULL, *lru = &ps->dial_rate[0];

	if (uid < 0)
		return true;   /* xferd's own: configured peers, reconnects */
	for (size_t i = 0; i < PEERS_DIAL_UIDS; i++) {
		struct dial_bucket *e = &ps->dial_rate[i];
		if (e->uid == uid) {
			b = e;
			break;
		}
		if (e->uid < 0 || e->at_ns < lru->at_ns)
			lru = e;
	}
	if (!b) {
		/* A user not seen lately starts with a full bucket. */
		b = lru;
		*b = (struct dial_bucket){ .uid = uid,
					   .tokens_milli = burst_milli,
					   .at_ns = now };
	}
	uint64_t add = (now - b->at_ns) * rate / 1000000;  /* milli-dials */
	b->tokens_milli = b->tokens_milli + add > burst_milli
				  ? burst_milli : b->tokens_milli + add;
	b->at_ns = now;
	if (b->tokens_milli < 1000)
		return false;
	b->tokens_milli -= 1000;
	return true;
}

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
		pe->last_errno = err;
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
		progress_link_close(ps->ctx.progress, pe->id, err, why);
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
		connect_failed_as(ps, pe, pe->last_errno == -EADDRNOTAVAIL
				  ? -EADDRNOTAVAIL : -EHOSTUNREACH, why, false);
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
	if (!connect_addr_allowed(ps, pe, dst, pe->ports[idx])) {
		/* Try the peer's next address: one of them may be known. */
		for (size_t k = 1; k < pe->naddrs; k++) {
			size_t j = (idx + k) % pe->naddrs;
			if (connect_addr_allowed(ps, pe, &pe->addrs[j],
						 pe->ports[j])) {
				idx = j;
				dst = &pe->addrs[j];
				break;
			}
		}
	}
	if (!connect_addr_allowed(ps, pe, dst, pe->ports[idx])) {
		netaddr_format(dst, false, ip, sizeof(ip));
		log_info("peer: not dialing %s:%u: not a known peer's address "
			 "and no cluster_key_file (a token or lookup named it)",
			 ip, pe->ports[idx]);
		connect_failed(ps, pe, -EADDRNOTAVAIL,
			       "not a known peer (no cluster key: only configured "
			       "peers and etcd members are dialed)");
		return;
	}
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
