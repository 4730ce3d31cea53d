/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_grant.h - NIC-enforced token ranges: what another xferd's RDMA may
 * reach of a region here.
 *
 * A region is registered whole with every NIC (rdma_mr.h), and that
 * registration's rkey reaches all of it.  A peer checking a token of it
 * (CheckToken) is therefore not handed that rkey: it gets a grant, a
 * registration of the token's range alone on every device, made for that
 * peer and that link.  The NIC itself then refuses a request outside the
 * range (the peer's work request completes with a remote access error),
 * whatever the peer's xferd does; the initiator's own range check
 * (regtab) stays the first line.
 *
 * The registration covers pages that the region's own registration
 * pinned already; it is a second pin of the same pages (it counts again
 * against the memlock limit).  A memory window would be cheaper, but a
 * type-2 window is bound to one queue pair, and the token is checked
 * before the peer's queue pairs exist and is used on all of them, on every
 * rail pair, across their re-creation; and rdma_rxe (Linux 6.1) checks a
 * request through a window against the range of the registration under
 * it, not the window's (type 1 and 2 alike: a write outside the window
 * lands), so a window there confines nothing.  Every device therefore
 * uses registrations; xferctl rails says which mode a rail is in and
 * which windows its device has.  Where a grant cannot be made (memlock), the
 * check reply names no RDMA memory and the peer moves that token's bytes
 * over TCP, where the owner checks every frame.
 *
 * A grant ends (ibv_dereg_mr: once it returns the NIC no longer accepts
 * that rkey; a peer's request in flight with it fails at the peer with a
 * remote access error, it never reaches memory that went away) when:
 *   - the peer releases it (ReleaseGrant: its import's last reference is
 *     gone: unimported, its client gone, and no transfer using it left);
 *   - the link it was made on goes down (the peer's imports then leave
 *     RDMA until imported again; region_rdma.link_gen);
 *   - the region's last reference is gone here (deregistered, its client
 *     gone), before the region is unmapped;
 *   - the transport stops.
 *
 * Registering takes time (the pages are walked and written to the NIC's
 * tables), so grants are made on a thread of their own (the grant
 * worker), never on the progress thread: a token check the transport
 * answers later (DESCRIBE_LATER), when its grant is made, on the
 * progress thread again; a grant whose link went meanwhile is ended
 * there instead of sent.
 *
 * Any thread: grants are made on the worker, ended on the progress thread
 * or wherever a region's last reference goes.  One mutex, a leaf lock,
 * held across the verbs calls (they never call back); the worker's own
 * mutex is a leaf lock too, never held with it.
 */
#ifndef XFERD_RDMA_GRANT_H
#define XFERD_RDMA_GRANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/link.h"
#include "transport/rdma_dev.h"

struct event_base;
struct region;

/* Grant peer (on its link link_gen) the range [off, off + len) of memfd
 * region r on every device r is registered with: the range's rkeys go to
 * keys[dev] (0 where r is not registered), at most nkeys of them.
 * Returns the grant's id (never 0), or 0 when none could be made. */
uint64_t rdma_grant_open(const struct region *r, uint64_t off, uint64_t len,
			 const uint8_t peer[LINK_ID_LEN], uint64_t link_gen,
			 uint32_t *keys, size_t nkeys);
/* The peer no longer needs grant id: false if it has no such grant. */
bool rdma_grant_release(const uint8_t peer[LINK_ID_LEN], uint64_t id);
/* The link link_gen to peer went down: its grants end.  How many. */
unsigned rdma_grant_end_link(const uint8_t peer[LINK_ID_LEN],
			     uint64_t link_gen);
/* Region r's last reference is going: every grant on it ends. */
void rdma_grant_end_region(const struct region *r);
/* Every grant ends (the transport stops). */
void rdma_grant_end_all(void);

/* For xferctl: grants alive with a registration on device dev, and made
 * there since start. */
void rdma_grant_count(int dev, uint32_t *alive, uint64_t *made);

/* What a rail's peers are handed: "token-mr" (a registration per
 * checked token); xferctl rails. */
const char *rdma_grant_mode(int dev);

/*
 * The importer's side: the ReleaseGrant frame (packed, for the link to
 * the owner) for a remote region whose last reference goes, with the
 * owner's instance id in owner.  0 when it has no grant to release.
 */
size_t rdma_grant_release_msg(const struct region *r,
			      uint8_t owner[LINK_ID_LEN], uint8_t *buf,
			      size_t cap);
/* The ReleaseGrant frame of grant, packed into buf; 0 if it does not
 * fit. */
size_t rdma_grant_release_pack(uint64_t grant, uint8_t *buf, size_t cap);

/* --- the grant worker --- */

/* One grant to make: what a token check asked for. */
struct rdma_grant_job {
	struct region *r;              /* a reference, the job's */
	struct describe_req q;         /* q.peer points at peer */
	uint8_t peer[LINK_ID_LEN];
	size_t nkeys;                  /* devices to grant on */
	/* The result: the grant's id (0: none could be made) and rkeys. */
	uint64_t grant;
	uint32_t keys[RDMA_DEV_MAX];
	struct rdma_grant_job *next;
};

/* Called on base's thread for every job made: it replies, or ends the
 * grant if the job's link went; the worker then drops the job's
 * reference to the region and frees it. */
typedef void (*rdma_grant_done_fn)(void *arg, struct rdma_grant_job *j);

struct rdma_grant_worker;
/* Start the worker; its results arrive through base.  NULL on failure. */
struct rdma_grant_worker *rdma_grant_worker_create(struct event_base *base,
						   rdma_grant_done_fn done,
						   void *arg);
/* Queue j (base's thread); the worker owns it until done. */
void rdma_grant_worker_submit(struct rdma_grant_worker *w,
			      struct rdma_grant_job *j);
/* Stop and join the worker, end every grant (rdma_grant_end_all) and drop
 * the jobs left, done() not called (base's thread; accepts NULL). */
void rdma_grant_worker_destroy(struct rdma_grant_worker *w);

#endif /* XFERD_RDMA_GRANT_H */
