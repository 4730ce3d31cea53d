/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma.h - the RDMA data path between xferds, in the progress thread.
 *
 * For each peer whose rails share a subnet with ours (a rail pair), this
 * side opens rdma_qps RC queue pairs per pair the first time it moves
 * data there; their attributes travel over the TCP link (QpConnect,
 * QpAccept in proto/peer.proto), never waiting for an answer.  Only the
 * side that opened a queue pair posts on it, so two xferds that both
 * start transfers never race for the same QP.
 *
 * A WRITE or READ between a memfd region here (registered, rdma_mr.h)
 * and a region the owner said is registered (its CheckReply) goes as
 * one-sided RDMA WRITE or READ, cut into rdma_stripe pieces spread
 * round-robin over every queue pair of every rail pair.  Work requests
 * are chained into one post per queue pair and pass of the progress
 * thread (rdma_poll); one in
 * RDMA_SIGNAL_EVERY, and the last of each post, asks for a completion
 * (RC completes in order, so it accounts for those before it); writes
 * up to the QP's inline size go inline.  A queue pair holds at most
 * RDMA_QP_DEPTH work requests: operations wait in order for room, the
 * latency class's first, the rest for room below rdma_bulk_depth
 * (rdma_post.c).
 *
 * Every completion's status is checked; a failed one (logged with
 * ibv_wc_status_str) fails its operation with -EIO and the queue pair
 * is destroyed, to be opened again on next use; the other operations
 * that had requests on it are redone once from the start (another
 * client's bad descriptor must not fail them).  A remote access error
 * also sends later uses of that import to TCP.  A
 * WRITE still unfinished at its deadline fails with -ETIMEDOUT and its
 * work requests are left to finish alone; a READ takes its queue pair
 * down first, so that no data lands after its failure (a staged READ's
 * lands in a staging chunk nobody copies out: rdma_staged.c).  A rail pair
 * whose queue pair is refused, or not accepted in time, is left for TCP.
 * A link that goes down takes the peer's queue pairs with it.
 */
#ifndef XFERD_RDMA_H
#define XFERD_RDMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nic/netaddr.h"
#include "transport/link.h"
#include "core/mover.h"
#include "core/traffic_class.h"

#define RDMA_QP_DEPTH      256   /* work requests a queue pair holds */
#define RDMA_SIGNAL_EVERY  16    /* a completion every so many */
#define RDMA_PAIR_MAX      4     /* rail pairs used per peer */
#define RDMA_QPS_MAX       8     /* queue pairs per rail pair */
#define RDMA_PEER_RAILS    16    /* rails a peer may advertise */

struct event_base;
struct rdma;
struct xop;

/* One rail of a peer, as its handshake advertised it. */
struct rdma_peer_rail {
	uint32_t index;           /* the peer's rail number */
	uint32_t device;          /* the peer's device number (rkeys) */
	uint8_t gid[16];
	uint16_t lid;
	int mtu;                  /* enum ibv_mtu */
	bool infiniband;
	struct netaddr addr;
};

struct rdma_cfg {
	uint32_t qps;             /* per rail pair, 1..RDMA_QPS_MAX */
	uint64_t stripe;          /* bytes per work request, at most */
	/* Work requests of other classes than latency a queue pair holds
	 * at most (1..RDMA_QP_DEPTH; latency ones may fill it): a latency
	 * request waits behind no more bulk ones than this. */
	uint32_t bulk_depth;
	/* Lend peers landing chunks (rdma_land.c) for this node's memory
	 * its NICs cannot reach, each peer from a pool of its own
	 * (rdma_land_pool.h): landing_chunks chunks per pool, pools for at
	 * most landing_peers peers at once (0: the defaults below). */
	bool landing;
	uint32_t landing_chunks;
	uint32_t landing_peers;
	/* The tenants' weights, for the bulk class's shares of the send
	 * queues (rdma_sched.h). */
	struct tenant_table tenants;
};

#define RDMA_LANDING_CHUNKS 16   /* per peer: two streams each way */
#define RDMA_LANDING_PEERS  16   /* peers lent to at once */

/* On a node with GPUs: the GPU staging pool (pinned for the GPUs) and
 * the copy engines.  The transport registers that pool with its NICs
 * and stages host and GPU memory through it (rdma_staged.c); both
 * outlive the transport. */
struct staging_pool;
struct gpu_copies;
struct regtab;
struct rdma_stage_res {
	struct staging_pool *pool;
	struct gpu_copies *gpu;
	/* The owner's side of owner-side staging (rdma_land.c): the
	 * regions peers' landing streams name, and this xferd's instance
	 * id, which their tokens carry. */
	struct regtab *regs;
	uint8_t self_id[LINK_ID_LEN];
};

/*
 * The transport over this node's rails (rdma_dev.h), or NULL when there
 * are none.  Operations end through hooks->op_done; frames go out on
 * links (linkset_send_ctl).  res: NULL, or zeros, without GPUs.
 */
/* What rdma_topo_probe found at start; NULL without the transport. */
struct rdma_topo;
const struct rdma_topo *rdma_topo(const struct rdma *t);
struct rdma *rdma_create(struct event_base *base, struct linkset *links,
			 const struct rdma_cfg *cfg,
			 const struct mover_hooks *hooks,
			 const struct rdma_stage_res *res);
/* Ends what is left (-ECONNRESET), destroys every queue pair. */
void rdma_destroy(struct rdma *t);
void rdma_set_cfg(struct rdma *t, const struct rdma_cfg *cfg);
/* The tenants' byte-rate buckets over all links (caps[TENANT_MAX], the
 * executor's, which the TCP mover charges too), charged by every request
 * posted, and the class counters (paced, wait times); both outlive t,
 * and either may be NULL.  Before the progress thread starts. */
struct rate_cap;
struct class_stats;
void rdma_share_tenants(struct rdma *t, struct rate_cap *caps,
			struct class_stats *stats);

/* A link to peer id (generation gen) is up: its rails. */
void rdma_peer_up(struct rdma *t, const uint8_t id[LINK_ID_LEN], uint64_t gen,
		  const char *name, const struct rdma_peer_rail *rails,
		  size_t nrails);
/* The link of generation gen to id went down (err). */
void rdma_peer_down(struct rdma *t, const uint8_t id[LINK_ID_LEN],
		    uint64_t gen, int err);
/* A QpConnect or QpAccept from peer id (a packed PeerMsg unpacked). */
struct Xfer__Peer__PeerMsg;
void rdma_on_frame(struct rdma *t, const uint8_t id[LINK_ID_LEN],
		   const struct Xfer__Peer__PeerMsg *m);

/* Post what was submitted since the last call (all of a drain's
 * descriptors in one chain per queue pair) and reap completions; true if
 * any operation made progress.  Called once per pass of the thread. */
bool rdma_poll(struct rdma *t);
/* Work requests out (the thread keeps an eye on the CQs). */
bool rdma_busy(const struct rdma *t);
/*
 * Before the thread sleeps: ask for a completion event on every CQ.
 * False if completions came meanwhile (they were reaped: do not sleep).
 */
bool rdma_arm(struct rdma *t);

extern const struct mover_ops rdma_mover_ops;
/*
 * The same transport for ROUTE_RDMA_STAGED: memory here that no NIC
 * registration covers (xfer_reg'd, GPU memory without dma-buf) goes
 * through the transport's staging chunks, a copy on this side
 * (rdma_staged.c says how).  Only accepts and
 * submit are its own; register it beside rdma_mover_ops with the
 * same impl.
 */
extern const struct mover_ops rdma_staged_mover_ops;
/*
 * And for ROUTE_RDMA_OWNER_STAGED: memory the owner's NICs cannot reach
 * (another process's there, GPU memory without dma-buf) goes through
 * chunks of the owner's staging pool that it lends for the stream, a
 * copy on both sides (rdma_land.c says how).  Same impl.
 */
extern const struct mover_ops rdma_owner_staged_mover_ops;

/* --- for xferctl (main thread; counters are atomics) ---
 *
 * t is the engine's instance (progress_rdma()), made before the progress
 * thread starts and destroyed after it stopped, both on the main thread,
 * the one that reads: never half made or freed under a reader.  NULL
 * (no rails): zeros, no queue pairs. */

struct rdma_rail_stats {
	uint32_t qps;
	uint64_t bytes_tx, bytes_rx, wrs, errors;
};
void rdma_rail_stats(const struct rdma *t, int rail,
		     struct rdma_rail_stats *out);

/* The landing pools (rdma_land_pool.h), for xferctl status and
 * /metrics; zeros (lending false) when this node lends none.  Main
 * thread. */
struct rdma_land_stats {
	bool lending;
	uint32_t chunk_bytes;
	uint32_t pools, max_pools;   /* peers lent to now, at most */
	uint32_t chunks, lent;       /* in those pools, lent of them now */
	uint64_t bytes;              /* their memory */
	uint64_t made, freed;        /* pools, since start */
	uint64_t refused;            /* LandOpens past max_pools */
};
void rdma_land_stats(const struct rdma *t, struct rdma_land_stats *out);

struct rdma_qp_info {
	int rail;
	char peer[64];
	uint32_t peer_rail, slot;
	bool initiator;
	uint32_t qpn, remote_qpn;
	const char *state;
	uint64_t bytes, wrs;
	uint32_t outstanding;
};
/* Up to max queue pairs of rail (all rails: -1); returns the count. */
size_t rdma_qp_list(struct rdma *t, int rail, struct rdma_qp_info *out,
		    size_t max);

/* --- pure helpers (unit-tested) --- */

/* The rail pairs to use toward a peer: each local rail and each peer
 * rail at most once, a local and a peer rail paired when their link
 * layers match and their addresses share a subnet.  Returns the count
 * (at most max) with local[i] / peer[i] the indexes of pair i. */
struct rdma_rail_addr;
size_t rdma_pair_rails(const struct rdma_rail_addr *mine, size_t nmine,
		       const struct rdma_peer_rail *theirs, size_t ntheirs,
		       int *local, int *peer, size_t max);

#endif /* XFERD_RDMA_H */
