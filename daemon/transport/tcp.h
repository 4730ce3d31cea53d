/*
 * tcp.h - the TCP data path between xferds, in the progress thread.
 *
 * A link is one TCP connection to another xferd, set up by the main
 * thread (peer.c) and handed over here once the handshake is done.  On it
 * run the frames of proto/peer.proto: this side's WRITE/READ/NOTIFY
 * descriptors (xop.h) and the other side's, which land in or come from
 * local regions.  Large transfers go out in tcp_chunk frames, round-robin
 * between operations, so a 64 B write is not stuck behind a 256 MiB one.
 *
 * Every operation ends exactly once: acknowledged, failed by the peer,
 * timed out (its deadline), or failed when its link breaks
 * (-ECONNRESET) or cannot be made.  A link that stays silent for
 * peer_timeout_ms (keepalives every keepalive_ms) is dead.
 */
#ifndef XFERD_LINK_H
#define XFERD_LINK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/token_codec.h"
#include "transport/transport.h"

#define PEER_MAX_HEADER  (64u << 10)
#define PEER_MAX_PAYLOAD (4u << 20)
#define LINK_ID_LEN      16

struct event_base;
struct prog_client;
struct regtab;
struct region;
struct xop;
struct linkset;
struct Xfer__Peer__PeerMsg;

/* Counters of one peer, owned by the main thread's peer record and
 * written here (single writer). */
struct link_stats {
	_Atomic uint64_t bytes_tx, bytes_rx;
	_Atomic uint64_t ops, errors;
	_Atomic uint64_t rtt_ns;
};

/* How the link layer reaches the rest of the progress thread. */
struct linkset_hooks {
	/* An operation ended: bytes moved, or a negative errno. */
	void (*op_done)(void *arg, struct xop *op, int64_t result);
	/* A peer's data landed in (or was read from) local region r and it
	 * asked for the owner to be notified. */
	void (*notify_local)(void *arg, struct region *r, uint64_t value,
			     int64_t bytes);
	/* Ops wait for a link to this instance: ask the main thread to
	 * connect, using the addresses in tok. */
	void (*need_peer)(void *arg, const struct token *tok);
	/* A link ended (the main thread marks the peer down). */
	void (*link_down)(void *arg, const uint8_t id[LINK_ID_LEN], uint64_t gen,
			  int err, const char *why);
	/* A control frame for the main thread (Lookup, LookupReply,
	 * CheckReply, Pong of an xferctl ping): the packed PeerMsg. */
	void (*ctl_frame)(void *arg, const uint8_t id[LINK_ID_LEN],
			  const uint8_t *msg, size_t len);
	/* A QpConnect or QpAccept for the RDMA transport (rdma.h). */
	void (*rdma_frame)(void *arg, const uint8_t id[LINK_ID_LEN],
			   const struct Xfer__Peer__PeerMsg *m);
	void *arg;
};

struct linkset_cfg {
	uint32_t keepalive_ms;
	uint32_t peer_timeout_ms;
	uint32_t tcp_chunk;
	uint8_t self_id[LINK_ID_LEN];
};

struct linkset *linkset_create(struct event_base *base, struct regtab *regs,
			       const struct linkset_cfg *cfg,
			       const struct linkset_hooks *hooks);
/* Fails every operation (-ECONNRESET) and closes every link. */
void linkset_destroy(struct linkset *ls);
void linkset_set_cfg(struct linkset *ls, const struct linkset_cfg *cfg);

/* --- from the main thread (applied in the progress thread) --- */

/* Take over connected socket fd to instance id; `pending` holds bytes
 * already read past the handshake.  gen names this link in link_down. */
void linkset_attach(struct linkset *ls, int fd, const uint8_t id[LINK_ID_LEN],
		    uint64_t gen, struct link_stats *stats, const void *pending,
		    size_t pending_len);
/* Close the link to id (if any) and fail what waits for it with err. */
void linkset_close(struct linkset *ls, const uint8_t id[LINK_ID_LEN], int err,
		   const char *why);
/* Send a packed control PeerMsg on the link to id; without a link the
 * frame is dropped (the main thread times its requests out). */
void linkset_send_ctl(struct linkset *ls, const uint8_t id[LINK_ID_LEN],
		      const uint8_t *msg, size_t len);

/* --- from the progress thread --- */

/* Start an operation; it ends through hooks.op_done (maybe at once). */
void linkset_submit(struct linkset *ls, struct xop *op);
/* End every operation of pc with -ECANCELED (it is going away). */
void linkset_cancel_client(struct linkset *ls, const struct prog_client *pc);
/* Fail operations past their deadline; returns true if any ended. */
bool linkset_expire(struct linkset *ls, uint64_t now_ns);
/* Are there links?  (Otherwise the network needs no polling.) */
bool linkset_active(const struct linkset *ls);
/* Events handled since the last call (progress made by the network). */
uint64_t linkset_take_events(struct linkset *ls);

/* linkset as a transport (transport.h); impl is the linkset. */
extern const struct transport_ops tcp_transport_ops;

/* Pack one frame header (PeerMsg) + payload length prefix; used by
 * peer.c for the handshake too.  Returns bytes written to out (which
 * must hold 8 + PEER_MAX_HEADER) or -EMSGSIZE. */
struct ProtobufCMessage;
int link_frame_header(const struct ProtobufCMessage *msg, uint32_t payload_len,
		      uint8_t *out);

#endif /* XFERD_LINK_H */
