/*
 * rcache.c - refcounted cache of imports and registrations.
 *
 * A uthash table: entries are few (one per allocation a client
 * registers) and looked up only when regions are made, never per
 * descriptor.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Keys compare field by field: struct rcache_key has padding after
 * kind that callers need not zero, so uthash's memcmp would not do.
 * Before any include of uthash (mem/rcache.h has one). */
#define HASH_KEYCMP(a, b, n) \
	(!same((const struct rcache_key *)(a), (const struct rcache_key *)(b)))

#include "mem/rcache.h"

struct rcache {
	pthread_mutex_t lock;   /* leaf lock */
	struct rcache_entry *table;   /* uthash head */
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

	if (c)
		pthread_mutex_init(&c->lock, NULL);
	return c;
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
	if (e)
		e->refs++;
	pthread_mutex_unlock(&c->lock);
	return e;
}

struct rcache_entry *rcache_insert(struct rcache *c, struct rcache_entry *e)
{
	pthread_mutex_lock(&c->lock);
	struct rcache_entry *have = find(c, &e->key);
	if (have) {
		have->refs++;
	} else {
		e->refs = 1;
		HASH_ADD_KEYPTR_BYHASHVALUE(hh, c->table, &e->key,
					    sizeof(e->key), key_hash(&e->key),
					    e);
		/* Out of memory for the table's first buckets: not cached,
		 * the caller's reference is the only one and its put
		 * releases e. */
		have = e;
	}
	pthread_mutex_unlock(&c->lock);
	return have;
}

void rcache_put(struct rcache *c, struct rcache_entry *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&c->lock);
	bool last = --e->refs == 0;
	if (last && htable_added(e))
		HASH_DELETE(hh, c->table, e);
	pthread_mutex_unlock(&c->lock);
	/* Releasing (unmapping GPU memory, deregistering from a NIC) can
	 * take a while: outside the lock. */
	if (last)
		e->release(e);
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
