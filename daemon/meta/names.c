/*
 * names.c - the publish/lookup table: name -> token, per xferd.
 *
 * A chained hash table of names, and beside it one record per publishing
 * client with the list of its names, so that a client's limit is checked
 * in O(1) and its names go in O(its names) when it disconnects.
 *
 * Names come from any local client, so the hash is keyed (SipHash-2-4
 * with a random key per table): nobody can choose names that all land in
 * one bucket and turn every lookup into a list walk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>

#include "meta/names.h"

#define NAMES_BUCKETS_MIN 64   /* power of two */
#define OWNER_BUCKETS     64   /* power of two; client ids are sequential */

struct name_owner;

struct name_entry {
	struct name_entry *next;          /* bucket chain */
	LIST_ENTRY(name_entry) by_owner;
	struct name_owner *owner;
	uint64_t hash;
	uint8_t *token;
	size_t token_len;
	size_t name_len;
	char name[];                      /* NUL-terminated */
};

struct name_owner {
	struct name_owner *next;          /* bucket chain */
	uint64_t client;
	uint32_t count;                   /* names in `names` */
	LIST_HEAD(, name_entry) names;
};

struct names {
	struct name_entry **buckets;
	size_t nbuckets;                  /* power of two */
	size_t count;
	struct name_owner *owners[OWNER_BUCKETS];
	uint8_t key[16];                  /* the hash key */
};

/* --- the hash --- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                        \
	do {                                                            \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                  \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                  \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t siphash24(const uint8_t key[16], const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t k0 = get_le64(key), k1 = get_le64(key + 8);
	uint64_t v0 = 0x736f6d6570736575ull ^ k0;
	uint64_t v1 = 0x646f72616e646f6dull ^ k1;
	uint64_t v2 = 0x6c7967656e657261ull ^ k0;
	uint64_t v3 = 0x7465646279746573ull ^ k1;
	uint64_t m, b = (uint64_t)len << 56;
	size_t left = len & 7;

	for (const uint8_t *end = p + (len - left); p != end; p += 8) {
		m = get_le64(p);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t i = 0; i < left; i++)
		b |= (uint64_t)p[i] << (8 * i);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* --- names --- */

bool names_valid(const char *name)
{
	/* strnlen: a name longer than the limit is not read to its end. */
	return name && pubname_valid(name, strnlen(name, PUBNAME_MAX + 1));
}

struct names *names_create(void)
{
	struct names *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->nbuckets = NAMES_BUCKETS_MIN;
	n->buckets = calloc(n->nbuckets, sizeof(*n->buckets));
	if (!n->buckets) {
		free(n);
		return NULL;
	}
	/* Without entropy the table still works, only predictably. */
	if (getrandom(n->key, sizeof(n->key), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(n->key))
		memset(n->key, 0x5a, sizeof(n->key));
	return n;
}

static void entry_free(struct name_entry *e)
{
	free(e->token);
	free(e);
}

void names_destroy(struct names *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nbuckets; i++) {
		struct name_entry *e = n->buckets[i], *next;
		for (; e; e = next) {
			next = e->next;
			entry_free(e);
		}
	}
	for (size_t i = 0; i < OWNER_BUCKETS; i++) {
		struct name_owner *o = n->owners[i], *next;
		for (; o; o = next) {
			next = o->next;
			free(o);
		}
	}
	free(n->buckets);
	free(n);
}

/* The link that points at the entry called name, or at the chain's end. */
static struct name_entry **find_link(const struct names *n, const char *name,
				     size_t len, uint64_t hash)
{
	struct name_entry **link = &n->buckets[hash & (n->nbuckets - 1)];

	for (; *link; link = &(*link)->next)
		if ((*link)->hash == hash && (*link)->name_len == len &&
		    memcmp((*link)->name, name, len) == 0)
			break;
	return link;
}

static struct name_entry *find(const struct names *n, const char *name)
{
	size_t len = strlen(name);

	return *find_link(n, name, len, siphash24(n->key, name, len));
}

/* Double the buckets; on allocation failure keep the longer chains. */
static void grow(struct names *n)
{
	size_t nb = n->nbuckets * 2;
	struct name_entry **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (size_t i = 0; i < n->nbuckets; i++) {
		struct name_entry *e = n->buckets[i], *next;
		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	}
	free(n->buckets);
	n->buckets = b;
	n->nbuckets = nb;
}

static struct name_owner **owner_link(struct names *n, uint64_t client)
{
	struct name_owner **link = &n->owners[client & (OWNER_BUCKETS - 1)];

	while (*link && (*link)->client != client)
		link = &(*link)->next;
	return link;
}

/* Unlink e from its bucket and its owner, free it, and the owner with
 * its last name. */
static void remove_entry(struct names *n, struct name_entry *e)
{
	struct name_entry **link = find_link(n, e->name, e->name_len, e->hash);
	struct name_owner *o = e->owner;

	*link = e->next;
	LIST_REMOVE(e, by_owner);
	n->count--;
	if (--o->count == 0) {
		struct name_owner **ol = owner_link(n, o->client);
		*ol = o->next;
		free(o);
	}
	entry_free(e);
}

int names_publish(struct names *n, const char *name, uint64_t client,
		  const void *token, size_t len)
{
	if (!names_valid(name) || !token || len == 0 || len > NAMES_TOKEN_MAX)
		return -EINVAL;

	size_t name_len = strlen(name);
	uint64_t hash = siphash24(n->key, name, name_len);
	struct name_entry *e = *find_link(n, name, name_len, hash);
	uint8_t *copy;

	if (e && e->owner->client != client)
		return -EEXIST;
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, token, len);
	if (e) {
		/* The same client again: a new token under its name. */
		free(e->token);
		e->token = copy;
		e->token_len = len;
		return 0;
	}

	struct name_owner **ol = owner_link(n, client);
	struct name_owner *o = *ol;
	if (o && o->count >= NAMES_PER_CLIENT_MAX) {
		free(copy);
		return -ENOSPC;
	}
	e = calloc(1, sizeof(*e) + name_len + 1);
	if (!e) {
		free(copy);
		return -ENOMEM;
	}
	if (!o) {
		o = calloc(1, sizeof(*o));
		if (!o) {
			free(copy);
			free(e);
			return -ENOMEM;
		}
		o->client = client;
		LIST_INIT(&o->names);
		*ol = o;
	}
	memcpy(e->name, name, name_len + 1);
	e->name_len = name_len;
	e->hash = hash;
	e->token = copy;
	e->token_len = len;
	e->owner = o;
	LIST_INSERT_HEAD(&o->names, e, by_owner);
	o->count++;

	if (n->count >= n->nbuckets)
		grow(n);
	struct name_entry **head = &n->buckets[hash & (n->nbuckets - 1)];
	e->next = *head;
	*head = e;
	n->count++;
	return 0;
}

int names_unpublish(struct names *n, const char *name, uint64_t client)
{
	struct name_entry *e;

	/* A name that is not valid was never stored. */
	if (!names_valid(name) || !(e = find(n, name)))
		return -ENOENT;
	if (e->owner->client != client)
		return -EACCES;
	remove_entry(n, e);
	return 0;
}

int names_lookup(const struct names *n, const char *name, const void **token,
		 size_t *len)
{
	struct name_entry *e;

	if (!names_valid(name) || !(e = find(n, name)))
		return -ENOENT;
	*token = e->token;
	*len = e->token_len;
	return 0;
}

void names_remove_client(struct names *n, uint64_t client)
{
	struct name_owner *o = *owner_link(n, client);

	if (!o)
		return;
	/* remove_entry frees the owner with its last name: count first. */
	for (uint32_t left = o->count; left; left--)
		remove_entry(n, LIST_FIRST(&o->names));
}

size_t names_count(const struct names *n)
{
	return n->count;
}
