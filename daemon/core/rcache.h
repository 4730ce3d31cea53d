/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rcache.h - the registration cache: expensive imports and registrations
 * (a CUDA IPC import, later a NIC memory registration) made once per
 * (client, kind, allocation base, id) and shared by every region of that
 * allocation.
 *
 * Entries are refcounted: each region that uses one holds a reference,
 * and the last put releases the resource through the entry's release
 * callback.  Keys include the allocation's id (the CUDA buffer id, the
 * memfd inode), never a bare address, so that a freed and reallocated
 * buffer at the same address gets a new entry, not a stale import.  A
 * client's entries go when its regions go (dereg, disconnect).
 *
 * Limits (config rcache_max_entries, rcache_max_bytes; 0: none): an
 * entry marked keep stays cached after its last put, unused, on an LRU
 * list, so that the next lookup of the same allocation is a hit; when the
 * cache holds more entries or bytes than its limits, unused entries go,
 * least recently used first.  An entry someone holds is never evicted
 * (the limits can then be exceeded: a descriptor never fails for them).
 * Entries not marked keep (today's CUDA imports and region registrations:
 * deregistration invalidates them) go at their last put, as before.
 *
 * Thread-safe: imports and registrations are made on the registration
 * thread (regworker.h), looked up from the main thread, the last reference
 * may be dropped on the progress thread.  The lock is a leaf lock; the
 * release callback runs outside it (evicted entries too).
 */
#ifndef XFERD_RCACHE_H
#define XFERD_RCACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "common/htable.h"

struct rcache;

struct rcache_key {
	uint64_t client;
	uint32_t kind;        /* what is cached (RCACHE_CUDA_IMPORT, ...) */
	uint64_t base;        /* allocation base in the client */
	uint64_t id;          /* buffer id / inode: tells reuse apart */
};

enum { RCACHE_CUDA_IMPORT = 1, RCACHE_NIC_MR = 2, RCACHE_GPU_MR = 3 };

struct rcache_entry {
	struct rcache_key key;
	uint32_t refs;        /* guarded by the cache lock */
	void (*release)(struct rcache_entry *e);
	uint64_t bytes;       /* what it maps or pins (set before insert) */
	bool keep;            /* may stay cached unused (set before insert) */
	bool unused;          /* on the LRU list; under the cache lock */
	TAILQ_ENTRY(rcache_entry) lru;  /* under the cache lock */
	UT_hash_handle hh;    /* the cache's table; under the cache lock */
	/* the owner's payload follows (embed this struct first) */
};

struct rcache *rcache_create(void);
/* Releases whatever is left (at shutdown). */
void rcache_destroy(struct rcache *c);

/* A new reference to the entry for key, or NULL if there is none. */
struct rcache_entry *rcache_get(struct rcache *c, const struct rcache_key *k);
/*
 * Insert e (its refs set to 1 here) unless an entry for its key appeared
 * meanwhile: then that one is returned with a new reference and e is not
 * inserted (the caller releases it).
 */
struct rcache_entry *rcache_insert(struct rcache *c, struct rcache_entry *e);
/* Drop a reference; the last one unlinks e and calls e->release. */
void rcache_put(struct rcache *c, struct rcache_entry *e);
/* Entries and the sum of their references, for xferctl. */
void rcache_count(struct rcache *c, uint32_t *entries, uint32_t *refs);

/* Limits on entries and bytes (0: none); evicts unused entries at once
 * if the cache is above them.  Any thread (a reload changes them). */
void rcache_set_limits(struct rcache *c, uint32_t max_entries,
		       uint64_t max_bytes);
/* Unused entries of client go (it exited: nobody will look them up). */
void rcache_drop_client(struct rcache *c, uint64_t client);

/* For xferctl status. */
struct rcache_stats {
	uint32_t entries, unused;     /* unused: kept, nobody holds them */
	uint64_t bytes;
	uint64_t hits, misses;        /* lookups (rcache_get) */
	uint64_t evictions;           /* unused entries the limits took */
	uint32_t max_entries;
	uint64_t max_bytes;
};
void rcache_get_stats(struct rcache *c, struct rcache_stats *out);

#endif /* XFERD_RCACHE_H */
