/*
 * rcache.c - refcounted cache of imports and registrations.
 *
 * A short chained hash: entries are few (one per allocation a client
 * registers) and looked up only when regions are made, never per
 * descriptor.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mem/rcache.h"

#define BUCKETS 256u

struct rcache {
	pthread_mutex_t lock;   /* leaf lock */
	struct rcache_entry *b[BUCKETS];
};

static unsigned bucket(const struct rcache_key *k)
{
	uint64_t h = k->client * 0x9e3779b97f4a7c15ull ^ k->base ^
		     (k->id << 7) ^ k->kind;
	h ^= h >> 29;
	return (unsigned)(h % BUCKETS);
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
	if (!c)
		return;
	for (unsigned i = 0; i < BUCKETS; i++) {
		for (struct rcache_entry *e = c->b[i], *next; e; e = next) {
			next = e->next;
			e->release(e);
		}
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static struct rcache_entry *find(struct rcache *c, const struct rcache_key *k)
{
	struct rcache_entry *e = c->b[bucket(k)];

	while (e && !same(&e->key, k))
		e = e->next;
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
		unsigned i = bucket(&e->key);
		e->refs = 1;
		e->next = c->b[i];
		c->b[i] = e;
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
	if (last) {
		struct rcache_entry **pp = &c->b[bucket(&e->key)];
		while (*pp != e)
			pp = &(*pp)->next;
		*pp = e->next;
	}
	pthread_mutex_unlock(&c->lock);
	/* Releasing (unmapping GPU memory, deregistering from a NIC) can
	 * take a while: outside the lock. */
	if (last)
		e->release(e);
}

void rcache_count(struct rcache *c, uint32_t *entries, uint32_t *refs)
{
	*entries = *refs = 0;
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < BUCKETS; i++)
		for (struct rcache_entry *e = c->b[i]; e; e = e->next) {
			(*entries)++;
			*refs += e->refs;
		}
	pthread_mutex_unlock(&c->lock);
}
