/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rcache.c - refcounted cache of imports and registrations.
 *
 * A uthash table: entries are few (one per allocation a client
 * registers) and looked up only when regions are made, never per
 * descriptor.  Beside it, a TAILQ of the unused entries (kept, nobody
 * holds them), least recently used first: eviction takes from its head.
 *
 * Lock order: c->lock is a leaf; release callbacks run after it is
 * dropped (evicted entries are gathered on a local list first).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Keys compare field by field: struct rcache_key has padding after
 * kind that callers need not zero, so uthash's memcmp would not do.
 * Before any include of uthash (core/rcache.h has one). */
#define HASH_KEYCMP(a, b, n) \
	(!same((const struct rcache_key *)(a), (const struct rcache_key *)(b)))

#include "core/rcache.h"

TAILQ_HEAD(rcache_lru, rcache_entry);

struct rcache {
	pthread_mutex_t lock;   /* leaf lock; guards everything below */
	struct rcache_entry *table;   /* uthash head */
	struct rcache_lru lru;        /* unused entries, oldest first */
	uint32_t entries, unused;
	uint64_t bytes;
	uint64_t hits, misses, evictions;
	uint32_t max_entries;         /* 0: no limit */
	uint64_t max_bytes;
};

static unsigned key_hash(const struct rcache_key *k)
{
	uint64_t h = k->client * 0x9e3779b97f4a7c15ull ^ k->base ^
		     (k->id << 7) ^ k->kind;
	h ^= h >> 29;
	return (unsigned)(h ^ (h >> 32));
}

static bool same(const struct rcache_key *a, const struct rcache_key *b)
{
	return a->client == b->client && a->kind == b->kind &&
	       a->base == b->base && a->id == b->id;
}

struct rcache *rcache_create(void)
{
	struct rcache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	TAILQ_INIT(&c->lru);
	return c;
}

/* Out of the table (and the LRU list): under the lock. */
static void unlink_entry(struct rcache *c, struct rcache_entry *e)
{
	if (e->unused) {
		TAILQ_REMOVE(&c->lru, e, lru);
		e->unused = false;
		c->unused--;
	}
	HASH_DELETE(hh, c->table, e);
	c->entries--;
	c->bytes -= e->bytes;
}

static bool over_limits(const struct rcache *c)
{
	return (c->max_entries && c->entries > c->max_entries) ||
	       (c->max_bytes && c->bytes > c->max_bytes);
}

/* Unused entries, oldest first, while the cache is above its limits:
 * onto *gone, to be released once the lock is dropped. */
static void evict(struct rcache *c, struct rcache_lru *gone)
{
	struct rcache_entry *e;

	while (over_limits(c) && (e = TAILQ_FIRST(&c->lru))) {
		unlink_entry(c, e);
		c->evictions++;
		TAILQ_INSERT_TAIL(gone, e, lru);
	}
}

static void release_all(struct rcache_lru *gone)
{
	struct rcache_entry *e;

	while ((e = TAILQ_FIRST(gone))) {
		TAILQ_REMOVE(gone, e, lru);
		e->release(e);
	}
}

void rcache_destroy(struct rcache *c)
{
	struct rcache_entry *e, *tmp;

	if (!c)
		return;
	HASH_ITER(hh, c->table, e, tmp) {
		HASH_DELETE(hh, c->table, e);
		e->release(e);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static struct rcache_entry *find(struct rcache *c, const struct rcache_key *k)
{
	struct rcache_entry *e;

	HASH_FIND_BYHASHVALUE(hh, c->table, k, sizeof(*k), key_hash(k), e);
	return e;
}

struct rcache_entry *rcache_get(struct rcache *c, const struct rcache_key *k)
{
	pthread_mutex_lock(&c->lock);
	struct rcache_entry *e = find(c, k);
	if (e) {
		if (e->unused) {   /* held again: off the LRU list */
			TAILQ_REMOVE(&c->lru, e, lru);
			e->unused = false;
			c->unused--;
		}
		e->refs++;
		c->hits++;
	} else {
		c->misses++;
	}
	pthread_mutex_unlock(&c->lock);
	return e;
}

struct rcache_entry *rcache_insert(struct rcache *c, struct rcache_entry *e)
{
	struct rcache_lru gone = TAILQ_HEAD_INITIALIZER(gone);

	pthread_mutex_lock(&c->lock);
	struct rcache_entry *have = find(c, &e->key);
	if (have) {
		if (have->unused) {
			TAILQ_REMOVE(&c->lru, have, lru);
			have->unused = false;
			c->unused--;
		}
		have->refs++;
	} else {
		e->refs = 1;
		e->unused = false;
		HASH_ADD_KEYPTR_BYHASHVALUE(hh, c->table, &e->key,
					    sizeof(e->key), key_hash(&e->key),
					    e);
		/* Out of memory for the table's first buckets: not cached,
		 * the caller's reference is the only one and its put
		 * releases e. */
		if (htable_added(e)) {
			c->entries++;
			c->bytes += e->bytes;
			evict(c, &gone);
		}
		have = e;
	}
	pthread_mutex_unlock(&c->lock);
	release_all(&gone);
	return have;
}

void rcache_put(struct rcache *c, struct rcache_entry *e)
{
	if (!e)
		return;
	struct rcache_lru gone = TAILQ_HEAD_INITIALIZER(gone);

	pthread_mutex_lock(&c->lock);
	bool last = --e->refs == 0;
	if (last && e->keep && htable_added(e)) {
		/* Kept, unused: the most recently used end of the list. */
		TAILQ_INSERT_TAIL(&c->lru, e, lru);
		e->unused = true;
		c->unused++;
		last = false;
		evict(c, &gone);
	} else if (last && htable_added(e)) {
		unlink_entry(c, e);
	}
	pthread_mutex_unlock(&c->lock);
	/* Releasing (unmapping GPU memory, deregistering from a NIC) can
	 * take a while: outside the lock. */
	if (last)
		e->release(e);
	release_all(&gone);
}

void rcache_set_limits(struct rcache *c, uint32_t max_entries,
		       uint64_t max_bytes)
{
	struct rcache_lru gone = TAILQ_HEAD_INITIALIZER(gone);

	pthread_mutex_lock(&c->lock);
	c->max_entries = max_entries;
	c->max_bytes = max_bytes;
	evict(c, &gone);
	pthread_mutex_unlock(&c->lock);
	release_all(&gone);
}

void rcache_drop_client(struct rcache *c, uint64_t client)
{
	struct rcache_lru gone = TAILQ_HEAD_INITIALIZER(gone);
	struct rcache_entry *e, *next;

	pthread_mutex_lock(&c->lock);
	for (e = TAILQ_FIRST(&c->lru); e; e = next) {
		next = TAILQ_NEXT(e, lru);
		if (e->key.client != client)
			continue;
		unlink_entry(c, e);
		TAILQ_INSERT_TAIL(&gone, e, lru);
	}
	pthread_mutex_unlock(&c->lock);
	release_all(&gone);
}

void rcache_get_stats(struct rcache *c, struct rcache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = (struct rcache_stats){
		.entries = c->entries,
		.unused = c->unused,
		.bytes = c->bytes,
		.hits = c->hits,
		.misses = c->misses,
		.evictions = c->evictions,
		.max_entries = c->max_entries,
		.max_bytes = c->max_bytes,
	};
	pthread_mutex_unlock(&c->lock);
}

void rcache_count(struct rcache *c, uint32_t *entries, uint32_t *refs)
{
	struct rcache_entry *e, *tmp;

	*entries = *refs = 0;
	pthread_mutex_lock(&c->lock);
	HASH_ITER(hh, c->table, e, tmp) {
		(*entries)++;
		*refs += e->refs;
	}
	pthread_mutex_unlock(&c->lock);
}
