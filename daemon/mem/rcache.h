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
 * Thread-safe: imports and registrations are made on the registration
 * thread (regworker.h), looked up from the main thread, the last reference
 * may be dropped on the progress thread.  The lock is a leaf lock; the
 * release callback runs outside it.
 */
#ifndef XFERD_RCACHE_H
#define XFERD_RCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/htable.h"

struct rcache;

struct rcache_key {
	uint64_t client;
	uint32_t kind;        /* what is cached (RCACHE_CUDA_IMPORT, ...) */
	uint64_t base;        /* allocation base in the client */
	uint64_t id;          /* buffer id / inode: tells reuse apart */
};

enum { RCACHE_CUDA_IMPORT = 1, RCACHE_NIC_MR = 2 };

struct rcache_entry {
	struct rcache_key key;
	uint32_t refs;        /* guarded by the cache lock */
	void (*release)(struct rcache_entry *e);
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

#endif /* XFERD_RCACHE_H */
