/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer.h - the other xferds: TCP listener, links, handshake, lookups.
 *
 * Main thread.  A link is set up here (connect or accept, the handshake
 * of proto/peer.proto, optional cluster authentication, the choice of
 * address by subnet) and then handed to the progress thread, which runs
 * the data path on it (transport/tcp.h).  Requests that need an answer from a peer
 * (lookup, ping) are asynchronous: the callback runs later on the main
 * thread, exactly once.
 */
#ifndef XFERD_PEER_H
#define XFERD_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "nic/netaddr.h"

struct event_base;
struct names;
struct progress;
struct xferd_config;
struct peers;

/* What the peer table is handed by main.c, whose objects these are;
 * each outlives it. */
struct peers_ctx {
	struct event_base *base;
	/* main.c's live settings: a SIGHUP replaces them in place, then
	 * calls peers_reload(); peer/ reads them where it needs them. */
	const struct xferd_config *cfg;
	const uint8_t *instance_id;   /* this xferd's, TOKEN_INSTANCE_LEN */
	struct progress *progress;    /* runs the links once handed over */
	struct names *names;          /* answers the peers' lookups */
};

/*
 * Listen on cfg.listen (unless "off"), learn this node's addresses, load
 * the cluster key if configured.  Returns 0 or -errno with the reason
 * logged.
 */
int peers_create(const struct peers_ctx *ctx, struct peers **out);
/* Connect to the configured peers (their node names become known). */
void peers_start(struct peers *p);
/* Close every link and the listener; accepts NULL. */
void peers_destroy(struct peers *p);
/* SIGHUP: the configured peers, timeouts and the cluster key. */
void peers_reload(struct peers *p);

/* What this xferd advertises in tokens: addresses and TCP port. */
size_t peers_advertised(const struct peers *p, const struct netaddr **addrs,
			uint16_t *port);
const char *peers_node_name(const struct peers *p);

/*
 * Whose request a lookup, token check or ping is (a uid), or PEERS_SELF
 * (xferd's own).  A connection to a peer record that is not known (a
 * configured peer or an etcd member) which a user's request causes is
 * rate-limited per uid (peer_connect_rate); past the rate the request
 * fails with -EAGAIN and no connection is made.  Whoever asks, without a
 * cluster key xferd dials only known peers' addresses: another address
 * (from a token or a "host:port" lookup) fails with -EADDRNOTAVAIL.
 */
#define PEERS_SELF ((int64_t)-1)

typedef void (*peers_lookup_cb)(void *arg, int error, const void *token,
				size_t len);
/*
 * Ask `node` (a node name, "host[:port]", or NULL for every configured
 * peer, first answer wins) for the token published under `name`.
 * error: 0, -ENOENT (nobody has it), -EHOSTUNREACH, -ETIMEDOUT,
 * -EADDRNOTAVAIL, -EAGAIN (above), ...
 */
void peers_lookup(struct peers *p, const char *node, const char *name,
		  int64_t uid, peers_lookup_cb cb, void *arg);

struct token;
struct region_rdma;
typedef void (*peers_check_cb)(void *arg, int error,
			       const struct region_rdma *rdma);
/*
 * Ask the xferd that owns tok (connecting to it first if needed) whether
 * the token is valid there: 0, -EACCES (bad key), -ESTALE (region gone),
 * -EHOSTUNREACH/-ECONNREFUSED/-ETIMEDOUT (cannot ask), -EADDRNOTAVAIL
 * or -EAGAIN (see PEERS_SELF).  rdma: how the
 * owner's NICs reach the region, when they do (else NULL).
 */
void peers_check_token(struct peers *p, const struct token *tok,
		       int64_t uid, peers_check_cb cb, void *arg);
/* The owner `owner` granted a range to a check whose answer nobody
 * took (the importer left, the import failed): tell it to end the
 * grant (transport/rdma_grant.h).  Sent if the link is up; a link that
 * went down ended the grant already. */
void peers_release_grant(struct peers *p, const uint8_t owner[16],
			 uint64_t grant);

/* A notice from the progress thread about links (progress.h). */
struct net_notice;
void peers_on_notice(const struct net_notice *n, void *arg);

typedef void (*peers_ping_cb)(void *arg, int error, uint64_t rtt_ns,
			      const char *who);
/* Round trip to a peer: node name, instance id (hex prefix) or
 * host[:port]. */
void peers_ping(struct peers *p, const char *target, int64_t uid,
		peers_ping_cb cb, void *arg);

/*
 * The cluster's membership (metadata = etcd): node `node` is instance id
 * at these addresses (the record is made or updated, no connect), or an
 * instance is gone because its node restarted: what targets it fails
 * -ESTALE now and later.
 */
void peers_member_seen(struct peers *p, const char *node, const uint8_t *id,
		       const struct netaddr *addrs, const uint16_t *ports,
		       size_t n);
void peers_member_gone(struct peers *p, const uint8_t *id, const char *why);

/* What xferctl shows of a peer. */
struct peer_view {
	uint8_t instance_id[16];
	const char *node_name;
	const struct netaddr *addrs;  /* what the peer advertised */
	size_t naddrs;
	const char *address;          /* "10.0.1.2:7474", "" if none yet */
	const char *why;              /* why that address */
	const char *state;            /* "connecting", "up", "down", ... */
	int initiated;                /* 1: we connected, 0: it did */
	uint64_t rtt_ns;              /* last keepalive round trip */
	uint64_t bytes_tx, bytes_rx;
	uint64_t ops, errors;
	uint64_t up_ms;               /* since the link came up */
	const char *last_error;
	uint64_t links_up;            /* times a link came up: 1 + reconnects */
	bool lane_up;                 /* its latency lane is up */
	uint64_t lane_ops;            /* operations that ended on the lane */
};
void peers_foreach(struct peers *p,
		   void (*fn)(const struct peer_view *v, void *arg), void *arg);

#endif /* XFERD_PEER_H */
