/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_land_pool.h - landing pools: the chunks an owner lends one peer
 * (owner-side staging, rdma_land.c), in a pool of that peer's alone, so
 * that an rkey the peer keeps past its grant reaches nothing but chunks
 * that only it is ever lent (doc/security.md, "Landing chunks").
 *
 * A pool is made on the peer's first LandOpen that names memory it may
 * reach: rdma_land_cfg.chunks chunks of the node's staging chunk size
 * (pinned for the GPUs where the node's staging pool is), each chunk
 * registered alone with every NIC for remote access.  The peer's owner
 * streams run on it (pipeline_cfg.pool) and on nothing else; nobody
 * else's stream runs on it.  It goes (its registrations first, so every
 * rkey of it dies, then its memory) once the peer's link went and every
 * chunk is back, once it sat idle (no stream, nothing lent, every chunk
 * back) for LAND_POOL_IDLE_NS, or at exit.  At most rdma_land_cfg.peers
 * pools live at once, those draining after their peer went counted:
 * another peer's LandOpen is then refused with -EBUSY (its requester
 * goes by the link).
 *
 * Progress thread only, no lock; the counters are atomics read by ctl
 * (rdma_land_stats).
 */
#ifndef XFERD_RDMA_LAND_POOL_H
#define XFERD_RDMA_LAND_POOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/stage.h"
#include "transport/link.h"

struct rdma;
struct staging_pool;
struct ibv_mr;

#define LAND_POOL_IDLE_NS  (30000ull * 1000000)  /* an unused pool goes */
#define LAND_POOL_RETRY_NS (5000ull * 1000000)   /* after one failed */

struct land_pool {
	uint8_t peer[LINK_ID_LEN];
	char name[64];              /* the peer's, for the log */
	struct staging_pool *sp;
	uint8_t *base;              /* the pool's one mapping */
	uint32_t nslots;            /* its chunks; a grant's slot indexes them */
	uint32_t nlent;             /* lent now */
	uint32_t nstreams;          /* owner streams open on it now */
	struct ibv_mr **mr;         /* [slot * ndevs + dev], NULL: not there */
	struct stage_chunk **lent;  /* [slot]: lent now, or NULL */
	bool gone;                  /* its peer's link went: draining */
	uint64_t used_ns;           /* last stream opened or chunk back */
	TAILQ_ENTRY(land_pool) q;
};
TAILQ_HEAD(land_pool_list, land_pool);

struct land_pools {
	struct land_pool_list all;
	uint32_t chunk;             /* bytes per chunk: the staging pool's */
	uint32_t per_peer;          /* chunks per pool */
	uint32_t max;               /* pools at once */
	bool pin;                   /* pinned for the GPU copies */
	uint32_t n;
	uint64_t retry_ns;          /* no pool made before (one failed) */
	bool cap_logged;            /* the cap was hit and said so */
	/* Read by ctl (relaxed: gauges and counters, ordered with
	 * nothing). */
	_Atomic uint32_t a_pools, a_chunks, a_lent;
	_Atomic uint64_t a_bytes, a_made, a_freed, a_refused;
};

void land_pools_init(struct land_pools *ps, uint32_t chunk, uint32_t per_peer,
		     uint32_t max, bool pin);
/* Every pool goes; the queue pairs are gone (exit), so every lent chunk
 * is taken back first by the caller. */
void land_pools_fini(struct land_pools *ps, struct rdma *t);
/* peer's live pool (not draining), or NULL. */
struct land_pool *land_pool_of(struct land_pools *ps, const uint8_t *peer);
/* peer's live pool, made now if it has none: 0, or -EBUSY (the cap, or
 * the memory or its registration refused; logged). */
int land_pool_get(struct land_pools *ps, struct rdma *t,
		  const uint8_t *peer, uint64_t now, struct land_pool **out);
/* Chunk c (in slot) lent, or back. */
void land_pool_lend(struct land_pools *ps, struct land_pool *p,
		    uint32_t slot, struct stage_chunk *c);
struct stage_chunk *land_pool_back(struct land_pools *ps, struct land_pool *p,
				   uint32_t slot, uint64_t now);
/* The slot of c, a chunk of p's pool (nslots if it is none). */
uint32_t land_pool_slot(const struct land_pool *p, const struct stage_chunk *c);
/* p's peer went (its queue pairs to us destroyed, every lent chunk back):
 * p drains, and goes once every chunk is back. */
void land_pool_gone(struct land_pools *ps, struct land_pool *p,
		    struct rdma *t);
/* Pools drained or idle go.  True if any went. */
bool land_pools_sweep(struct land_pools *ps, struct rdma *t,
		      uint64_t now);

#endif /* XFERD_RDMA_LAND_POOL_H */
