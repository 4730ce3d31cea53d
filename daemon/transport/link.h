/* SPDX-License-Identifier: Apache-2.0 */
/*
 * link.h - the links to other xferds (the set of peer sessions), in the
 * progress thread: how the session is made, what the main thread and
 * the movers ask of it, and the checks of its frames.
 *
 * A link is one TCP connection to another xferd, set up by the main
 * thread (peer/) and handed over here once the handshake is done.  On it
 * run the frames of proto/peer.proto: the data frames of its data client
 * (the TCP mover, through the table in link_client.h), the movers' own
 * frames (RDMA's queue pair set-up, through the frame hook) and control
 * frames for the main thread.  A link that stays silent for
 * peer_timeout_ms (keepalives every keepalive_ms) is dead; what was on
 * it ends (-ECONNRESET).
 */
#ifndef XFERD_LINK_H
#define XFERD_LINK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mover.h"

#define PEER_MAX_HEADER  (64u << 10)
#define PEER_MAX_PAYLOAD (4u << 20)
#define LINK_FRAME_PREFIX 8u      /* u32 header len, u32 payload len */

struct event_base;
struct linkset;
struct Xfer__Peer__PeerMsg;
struct Xfer__Peer__Target;

/* Counters of one peer, owned by the main thread's peer record and
 * written here (single writer). */
struct link_stats {
	_Atomic uint64_t bytes_tx, bytes_rx;
	_Atomic uint64_t ops, errors;
	_Atomic uint64_t rtt_ns;
	/* The latency lane (link_lane.c): up now, and the operations that
	 * ended on it. */
	_Atomic bool lane_up;
	_Atomic uint64_t lane_ops;
};

/* How the session reaches the rest of the progress thread and the main
 * thread above it (given at creation; nothing above is included). */
struct linkset_hooks {
	/* A link ended (the main thread marks the peer down; the movers
	 * drop what they had with it). */
	void (*link_down)(void *arg, const uint8_t id[LINK_ID_LEN], uint64_t gen,
			  int err, const char *why);
	/* A control frame for the main thread (Lookup, LookupReply,
	 * CheckReply, Pong of an xferctl ping), unpacked once here: the
	 * hook takes the message over (the main thread frees it). */
	void (*ctl_frame)(void *arg, const uint8_t id[LINK_ID_LEN],
			  struct Xfer__Peer__PeerMsg *m);
	/* A mover's own frame (QpConnect, QpAccept, ReleaseGrant), for
	 * each mover's frame() (core/mover.h); false if none took it. */
	bool (*frame)(void *arg, const uint8_t id[LINK_ID_LEN],
		      const struct Xfer__Peer__PeerMsg *m);
	void *arg;
};

struct linkset_cfg {
	uint32_t keepalive_ms;
	uint32_t peer_timeout_ms;
	/* Offer and dial latency lanes (link_lanes; link_lane.c), as this
	 * xferd (self_id) names itself on them. */
	bool lanes;
	uint8_t self_id[LINK_ID_LEN];
};

/*
 * The set of links.  client (link_client.h) is the mover that moves data
 * on them, with client_arg: the data frames and their payloads go to it,
 * and it hears of each link's life.  It outlives the linkset.
 */
struct link_client_ops;
struct linkset *linkset_create(struct event_base *base,
			       const struct linkset_cfg *cfg,
			       const struct linkset_hooks *hooks,
			       const struct link_client_ops *client,
			       void *client_arg);
/* Fails every link (-ECONNRESET: its client ends their operations) and
 * closes it. */
void linkset_destroy(struct linkset *ls);
void linkset_set_cfg(struct linkset *ls, const struct linkset_cfg *cfg);

/* --- from the main thread (applied in the progress thread) --- */

/* Take over connected socket fd to instance id; `pending` holds bytes
 * already read past the handshake.  gen names this link in link_down.
 * initiator: we connected it.  offer_lane: we accepted it and its peer
 * dials latency lanes (its Hello said so): offer one (link_lane.c). */
void linkset_attach(struct linkset *ls, int fd, const uint8_t id[LINK_ID_LEN],
		    uint64_t gen, struct link_stats *stats, const void *pending,
		    size_t pending_len, bool initiator, bool offer_lane);
/* Take over connected socket fd that opened with LaneHello (instance
 * id, secret): the latency lane of our link to id if that link offered
 * one with this secret, else it is closed. */
void linkset_attach_lane(struct linkset *ls, int fd,
			 const uint8_t id[LINK_ID_LEN],
			 const uint8_t secret[LINK_LANE_SECRET],
			 const void *pending, size_t pending_len);
/* Close the link to id (if any) and fail what waits for it with err. */
void linkset_close(struct linkset *ls, const uint8_t id[LINK_ID_LEN], int err,
		   const char *why);
/* Send a packed control PeerMsg on the link to id; without a link the
 * frame is dropped (the main thread times its requests out). */
void linkset_send_ctl(struct linkset *ls, const uint8_t id[LINK_ID_LEN],
		      const uint8_t *msg, size_t len);

/* --- from the progress thread --- */

/* Are there links?  (Otherwise the network needs no polling.) */
bool linkset_active(const struct linkset *ls);
/* Events handled since the last call (progress made by the network). */
uint64_t linkset_take_events(struct linkset *ls);
/* A turn of the event loop begins (before each event_base_loop): the
 * links' callbacks in it end it once they ran link_turn_ns(). */
void linkset_turn_begin(struct linkset *ls);

/* Pack one frame header (PeerMsg) + payload length prefix; used by
 * peer/handshake.c for the handshake too.  Returns bytes written to out (which
 * must hold 8 + PEER_MAX_HEADER) or -EMSGSIZE. */
struct ProtobufCMessage;
int link_frame_header(const struct ProtobufCMessage *msg, uint32_t payload_len,
		      uint8_t *out);

/*
 * Receiving, the checks every frame passes before its handler runs (the
 * link's own, in consume() and dispatch()):
 *
 * link_frame_prefix: the 8-byte length prefix at buf (have bytes
 * buffered).  Returns 1 when the prefix and the whole header are there
 * (*hlen, *plen set), 0 when more bytes are needed, -EPROTO when a
 * length is out of bounds.
 *
 * link_frame_unpack: the header of a frame with plen payload bytes:
 * unpacked, of this protocol version, a payload only where one belongs.
 * Returns the message (the caller frees it) or NULL with *why.
 */
int link_frame_prefix(const uint8_t *buf, size_t have, uint32_t *hlen,
		      uint32_t *plen);
struct Xfer__Peer__PeerMsg *link_frame_unpack(const uint8_t *hdr, size_t hlen,
					      uint32_t plen, const char **why);

/*
 * What a link that has nothing out makes of the frame at the head of
 * buf: link_frame_prefix, link_frame_unpack, then the checks of the
 * frame's fields that need no state (link_target_valid on data frames'
 * targets, link_notify_valid on their notifications, a chunk no larger than its operation, a message type an
 * established link takes).  For the fuzz harness
 * (tests/fuzz/fuzz_peer_frame.c); the link runs the same checks in
 * dispatch() and its data client in its frame handlers.
 *
 * Returns the frame's header size (prefix included; *plen payload bytes
 * follow), 0 when more bytes are needed, or -EPROTO with *why: the link
 * would be dropped.
 */
int link_frame_check(const uint8_t *buf, size_t have, uint32_t *plen,
		     const char **why);

/* A data frame's target as the token it stands for: a 16-byte key, a
 * range inside the region.  0 or -EPROTO. */
int link_target_valid(const struct Xfer__Peer__Target *t);
/* The Target naming tok's range on the wire (its key not copied: *out
 * points at tok's, so tok outlives the frame's packing). */
struct token;
void link_target_of(const struct token *tok, struct Xfer__Peer__Target *out);
/* A notification's sender name and message as received: within their
 * bounds (XFER_SENDER_NAME_MAX, XFER_NOTIFY_MSG_MAX), the name printable
 * ASCII.  0 or -EPROTO (an honest peer checked them). */
struct Xfer__Peer__Sender;
struct ProtobufCBinaryData;
int link_notify_valid(const struct Xfer__Peer__Sender *snd,
		      const struct ProtobufCBinaryData *msg);

#endif /* XFERD_LINK_H */
