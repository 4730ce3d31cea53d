/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_int.h - what the files of daemon/peer/ share; nothing outside
 * this folder includes it (peer.h is the public face).
 *
 *   table.c      peer_…     the peer records: find, create, merge,
 *                           replace; peers_create/start/reload/destroy,
 *                           peers_foreach and the progress thread's
 *                           notices (peers_on_notice)
 *   handshake.c  conn_…     a connection while its handshake runs:
 *                           Hello/Welcome/Ready/Established, cluster
 *                           authentication, the duplicate-link rule, the
 *                           hand-over to the progress thread
 *   connect.c    connect_…  dialing a peer: address choice, next address,
 *                           backoff after failures
 *   requests.c   request_…  lookup, token check, ping, fan-out, and the
 *                           control frames that answer them
 *   listen.c     listen_…   the TCP listener and the addresses we advertise
 *   members.c    peers_member_… what etcd's membership says of nodes
 *
 * Threads and locks: everything here runs on the main thread and takes no
 * lock.  The one exception is peer.stats, written by the progress thread
 * (single writer, relaxed atomics) and only read here.
 *
 * Lifetimes: a struct conn lives from connect/accept until its handshake
 * ends (conn_free, or the hand-over in which it is freed); a struct peer
 * until peers_destroy (or until peer_new forgets idle ones, or a merge);
 * a struct request until request_end, which calls its callback exactly
 * once.
 */
#ifndef XFERD_PEER_INT_H
#define XFERD_PEER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include "core/config_types.h"
#include "meta/names.h"
#include "peer/auth.h"
#include "nic/hostport.h"
#include "nic/netaddr.h"
#include "peer/peer.h"
#include "peer.pb-c.h"
#include "transport/rdma.h"
#include "common/clock.h"
#include "transport/link.h"

/* Node names within peer/ (buffers of CONFIG_HOST_MAX bytes; the rule
 * for a name is pubname_node_valid(), common/pubname.h). */
#define NAME_MAX_LEN CONFIG_HOST_MAX
#define MAX_PEERS    4096           /* peer records kept */
#define PEERS_RETIRED 64            /* instance ids known replaced */
#define PEERS_DIAL_UIDS 64          /* users with a dial rate bucket */

enum peer_state { PEER_DOWN, PEER_CONNECTING, PEER_UP };

struct bufferevent;
struct event;
struct evconnlistener;
struct peer;
struct request;
struct fanout;
TAILQ_HEAD(request_list, request);

/* Where an xferd can be reached, as it advertised. */
struct addr_set {
	struct netaddr addrs[NETADDR_MAX];
	uint16_t ports[NETADDR_MAX];
	size_t n;
};

/* A TCP connection while its handshake runs (handshake.c). */
struct conn {
	struct peers *ps;
	struct peer *peer;            /* initiator: whom we called */
	struct bufferevent *bev;
	bool initiator;
	int step;                     /* messages seen */
	uint8_t challenge[AUTH_CHALLENGE_LEN];
	uint8_t their_id[LINK_ID_LEN];
	uint8_t their_challenge[AUTH_CHALLENGE_LEN];
	/* An acceptor keeps what Hello said until the proof checked out. */
	char their_name[NAME_MAX_LEN];
	struct addr_set their_addrs;
	/* Its RDMA rails (Hello or Welcome), for the progress thread. */
	struct rdma_peer_rail their_rails[RDMA_PEER_RAILS];
	size_t their_nrails;
	bool their_lanes;             /* its Hello: it dials latency lanes */
	struct event *timeout;
	size_t attempt;               /* which of the peer's addresses */
	char remote[80];
	LIST_ENTRY(conn) link;
};

/* Another xferd, known by instance id or (before a handshake) by address. */
struct peer {
	uint8_t id[LINK_ID_LEN];
	bool id_known;                /* false: only an address so far */
	char node_name[NAME_MAX_LEN];
	struct netaddr addrs[NETADDR_MAX];
	uint16_t ports[NETADDR_MAX];
	size_t naddrs;
	enum peer_state state;
	/* Its addresses may be dialed without a cluster key: a configured
	 * peer, an etcd member, or what such a peer said in its handshake
	 * (connect.c).  A token never changes a known record's addresses. */
	bool known;
	struct conn *conn;            /* our outgoing connect, if any */
	bool initiated;               /* the up link is ours */
	char address[80];
	char why[160];
	char last_error[160];
	struct timespec up_since;
	struct link_stats stats;      /* written by the progress thread */
	uint64_t link_gen;            /* of the link last handed over */
	unsigned failures;            /* connects failed in a row */
	int last_errno;               /* of the last, for the backoff */
	uint64_t links_up;            /* times a link came up (metrics) */
	uint64_t retry_at_ns;         /* no new connect before (backoff) */
	struct request_list waiting;  /* requests to send once up */
	struct peer *next;
};

enum request_kind { REQ_LOOKUP, REQ_CHECK, REQ_PING };

/* A question to a peer that waits for its answer (requests.c). */
struct request {
	struct peers *ps;
	enum request_kind kind;
	uint64_t id;
	struct peer *peer;
	uint8_t *msg;                 /* packed PeerMsg to send */
	size_t len;
	bool sent;
	struct event *timeout;
	struct fanout *fan;           /* a lookup asked of several peers */
	union {
		peers_lookup_cb lookup;
		peers_check_cb check;
		peers_ping_cb ping;
	} cb;
	void *arg;
	char who[NAME_MAX_LEN];
	/* A lookup at a node whose name no link has told us yet. */
	char node[NAME_MAX_LEN];
	char name[PUBNAME_QUALIFIED_MAX + 1];  /* "[~uid/]name" */
	bool unresolved;
	int64_t uid;                  /* whose request (a dial it causes is
				       * rate-limited), PEERS_SELF: xferd's */
	TAILQ_ENTRY(request) q;       /* peer->waiting, ps->inflight or
				       * ps->unresolved */
};

struct peers {
	struct peers_ctx ctx;         /* what main.c handed over */
	char node_name[NAME_MAX_LEN];
	struct netaddr addrs[NETADDR_MAX];
	size_t naddrs;
	struct netaddr local[NETADDR_MAX]; /* all ours, to choose rails */
	size_t nlocal;
	uint16_t port;
	struct evconnlistener *listener;
	struct auth_key *key;
	struct peer *peers;
	size_t npeers;
	uint64_t next_link_gen;
	LIST_HEAD(, conn) conns;
	struct request_list inflight; /* sent, awaiting a reply */
	struct request_list unresolved; /* node name not known yet */
	uint64_t next_request;
	/* Instances whose node restarted (members.c), a ring. */
	uint8_t retired[PEERS_RETIRED][LINK_ID_LEN];
	size_t nretired;
	/* Dials that users' requests caused, a token bucket per uid
	 * (connect.c); the least recently used entry makes room. */
	struct dial_bucket {
		int64_t uid;              /* -1: free */
		uint64_t tokens_milli;    /* thousandths of a dial */
		uint64_t at_ns;           /* last refill */
	} dial_rate[PEERS_DIAL_UIDS];
};

/* --- table.c --- */

/* "name (1a2b3c4d)" for logs; returns buf. */
/* What XFERD_PEER says in the journal: the node name, else the first
 * 8 hex digits of the instance id.  Main thread; valid until the next
 * call. */
const char *peer_log_name(const struct peer *pe);
const char *peer_label(const struct peer *pe, char *buf, size_t len);
struct peer *peer_by_id(struct peers *ps, const uint8_t *id);
struct peer *peer_by_name(struct peers *ps, const char *name);
/* A peer named by a node name, an instance id prefix, or host[:port]
 * (a new record for an address nobody has). */
struct peer *peer_for(struct peers *ps, const char *target);
/* NULL when out of memory or MAX_PEERS records are all in use. */
struct peer *peer_new(struct peers *ps);
/* Two records turned out to be one xferd; frees gone (and its conn,
 * unless the caller moved that off it first). */
void peer_merge(struct peers *ps, struct peer *keep, struct peer *gone);
/* An xferd restarted: the record of the new instance `id`, which takes
 * over what waited for `old`; NULL when out of memory. */
struct peer *peer_replaced(struct peers *ps, struct peer *old,
			   const uint8_t *id);
/* A record known only by address with a connect in flight to one of a:
 * our side of a simultaneous connect, before its Welcome. */
struct peer *peer_own_attempt_to(struct peers *ps, const struct addr_set *a);
/* Drop pe's own connect quietly (another connection serves it). */
void peer_drop_own_conn(struct peer *pe, struct conn *keep);
/* Addresses as a peer advertised them in a handshake (the valid ones). */
void peer_addrs_from_pb(struct addr_set *out, Xfer__Token__Address **a,
			size_t n);
/* Addresses (and, if none yet, the node name) from a token. */
void peer_addrs_from_token(struct peer *pe, const struct token *t);
/* Take a's addresses (none: keep what we knew). */
void peer_set_addrs(struct peer *pe, const struct addr_set *a);

/* --- handshake.c --- */

/*
 * The checks a handshake frame passes, each a function of the bytes so
 * that tests/fuzz/fuzz_handshake.c runs them as on_conn_read and
 * conn_step do:
 *
 * peer_hs_prefix: the 8-byte length prefix; 0 (*hlen, *plen set) or
 * -EPROTO (no header, too long, or a payload: handshakes carry none).
 * peer_hs_expect: the message the side expects at this step.
 * peer_intro_valid: Hello's or Welcome's instance id and challenge.
 * peer_lane_hello_valid: a LaneHello's instance id and secret sizes
 * (the secret itself is the progress thread's to check).
 * peer_rails_from_pb: the well-formed rails of a Hello or Welcome into
 * out (RDMA_PEER_RAILS at most); the others are logged and left out.
 */
#define HANDSHAKE_MAX_HEADER 4096
int peer_hs_prefix(const uint8_t prefix[8], uint32_t *hlen, uint32_t *plen);
int peer_hs_expect(bool initiator, int step);
bool peer_intro_valid(const ProtobufCBinaryData *id,
		      const ProtobufCBinaryData *challenge);
bool peer_lane_hello_valid(const Xfer__Peer__LaneHello *h);
size_t peer_rails_from_pb(struct rdma_peer_rail *out,
			  Xfer__Peer__Rail *const *in, size_t n,
			  const char *remote);

/* A handshake on connected (or connecting) socket fd; closes fd and
 * returns NULL on failure.  The initiator sends Hello once connected. */
struct conn *conn_new(struct peers *ps, int fd, bool initiator);
/* Accepts NULL; unlinks c from its peer and from ps. */
void conn_free(struct conn *c);
/* The handshake failed with err: frees c; for our own connect the peer
 * fails too, or its next address is tried. */
void conn_failed(struct conn *c, int err);

/* --- connect.c --- */

/* Connect to pe unless it is up, connecting, or backing off (then what
 * waits for it fails at once). */
void connect_peer(struct peers *ps, struct peer *pe);
/* Would connect_peer dial now (down, no connect, not backing off)? */
bool connect_would_dial(const struct peers *ps, const struct peer *pe);
/*
 * May an address be dialed: with a cluster key anything (the handshake
 * proves the peer before any request is sent on the link); without one
 * only a known record's addresses, a configured peer's, or an address a
 * known record has.  connect_attempt refuses the others with
 * -EADDRNOTAVAIL, opening no socket.
 */
bool connect_addr_allowed(const struct peers *ps, const struct peer *pe,
			  const struct netaddr *a, uint16_t port);
bool connect_dial_allowed(const struct peers *ps, const struct peer *pe);
/* One dial caused by uid's request, if its bucket (peer_connect_rate a
 * second, twice that at once) has one: true; false: refuse it. */
bool connect_rate_take(struct peers *ps, int64_t uid);
/* Connect to pe's address number `attempt` after the subnet choice. */
void connect_attempt(struct peers *ps, struct peer *pe, size_t attempt);
/* Connecting to pe failed: back off, fail what waits for it, mark it
 * down. */
void connect_failed(struct peers *ps, struct peer *pe, int err,
		    const char *why);

/* --- requests.c --- */

/* r answered (or failed): unlink it, call back, free. */
void request_end(struct request *r, int error, const void *data, size_t len,
		 uint64_t rtt);
/* Requests that waited for pe's link go out on it now. */
void request_send_waiting(struct peers *ps, struct peer *pe);
/* A handshake finished or failed: retry lookups waiting for a name. */
void request_resolve_waiting(struct peers *ps);
/* pe's link went down: what was sent on it will not be answered. */
void request_link_down(struct peers *ps, struct peer *pe);
/* A control frame that a link unpacked and handed to this thread: the
 * one switch over every PeerMsg type the main thread may get. */
void request_dispatch(struct peers *ps, const uint8_t *from,
		      const Xfer__Peer__PeerMsg *m);
/* peers_destroy: every request ends with -ECANCELED. */
void request_cancel_all(struct peers *ps);

/* --- members.c --- */

/* Is id an instance whose node restarted since (etcd said so)? */
bool peer_retired(const struct peers *ps, const uint8_t *id);

/* --- listen.c --- */

/* Learn our addresses and listen on cfg.listen (unless "off"). */
int listen_open(struct peers *ps);
/* Accepts a peers without a listener. */
void listen_close(struct peers *ps);

#endif /* XFERD_PEER_INT_H */
