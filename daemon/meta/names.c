/* SPDX-License-Identifier: Apache-2.0 */
/*
 * names.c - the publish/lookup table: name -> token, per xferd.
 *
 * A hash table of names (uthash), and beside it one record per
 * publishing client with the list of its names, so that a client's
 * limit is checked in O(1) and its names go in O(its names) when it
 * disconnects.
 *
 * Names come from any local client, so the hash is keyed (SipHash-2-4,
 * OpenSSL's EVP_MAC "SIPHASH", with a random key per table): nobody can
 * choose names that all land in one bucket and turn every lookup into a
 * list walk.  Client ids are xferd's own counter: their table keeps
 * uthash's default hash.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>

#include "common/htable.h"
#include "meta/names.h"

struct name_owner;

struct name_entry {
	UT_hash_handle hh;                /* names.by_name, key: name */
	LIST_ENTRY(name_entry) by_owner;
	struct name_owner *owner;
	uint8_t *token;
	size_t token_len;
	size_t name_len;
	char name[];                      /* NUL-terminated */
};

struct name_owner {
	UT_hash_handle hh;                /* names.owners, key: client */
	uint64_t client;
	uint32_t count;                   /* names in `names` */
	LIST_HEAD(, name_entry) names;
};

struct names {
	struct name_entry *by_name;       /* uthash head */
	struct name_owner *owners;        /* uthash head */
	EVP_MAC *siphash;                 /* fetched once per table */
	EVP_MAC_CTX *key;                 /* keyed with the table's key */
	uint32_t per_client;              /* names one client may publish */
};

/* --- the hash --- */

/*
 * SipHash-2-4 of the name under the table's key.  EVP_MAC_init without
 * a key restarts from the key set in names_create, so a call costs no
 * fetch, allocation or key schedule (about 0.1 us).  OpenSSL cannot fail
 * here short of a broken provider; 0 then still finds every name, in one
 * chain.
 */
static unsigned name_hash(const struct names *n, const char *name, size_t len)
{
	uint8_t out[8];
	size_t outl = 0;
	uint64_t v = 0;

	if (!EVP_MAC_init(n->key, NULL, 0, NULL) ||
	    !EVP_MAC_update(n->key, (const unsigned char *)name, len) ||
	    !EVP_MAC_final(n->key, out, &outl, sizeof(out)) ||
	    outl != sizeof(out))
		return 0;
	for (int i = 7; i >= 0; i--)   /* the output is little-endian */
		v = (v << 8) | out[i];
	return (unsigned)(v ^ (v >> 32));
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
	uint8_t key[16];
	size_t outlen = 8;   /* SipHash-2-4's 64 bits, not OpenSSL's 128 */
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &outlen),
		OSSL_PARAM_construct_end(),
	};

	if (!n)
		return NULL;
	n->per_client = NAMES_PER_CLIENT_MAX;
	n->siphash = EVP_MAC_fetch(NULL, "SIPHASH", NULL);
	if (!n->siphash)
		goto free_names;
	n->key = EVP_MAC_CTX_new(n->siphash);
	if (!n->key)
		goto free_mac;
	/* Without entropy the table still works, only predictably. */
	if (getrandom(key, sizeof(key), GRND_NONBLOCK) != (ssize_t)sizeof(key))
		memset(key, 0x5a, sizeof(key));
	if (!EVP_MAC_init(n->key, key, sizeof(key), params))
		goto free_ctx;
	return n;

free_ctx:
	EVP_MAC_CTX_free(n->key);
free_mac:
	EVP_MAC_free(n->siphash);
free_names:
	free(n);
	return NULL;
}

static void entry_free(struct name_entry *e)
{
	free(e->token);
	free(e);
}

void names_destroy(struct names *n)
{
	struct name_entry *e, *etmp;
	struct name_owner *o, *otmp;

	if (!n)
		return;
	HASH_ITER(hh, n->by_name, e, etmp) {
		HASH_DELETE(hh, n->by_name, e);
		entry_free(e);
	}
	HASH_ITER(hh, n->owners, o, otmp) {
		HASH_DELETE(hh, n->owners, o);
		free(o);
	}
	EVP_MAC_CTX_free(n->key);
	EVP_MAC_free(n->siphash);
	free(n);
}

static struct name_entry *find(const struct names *n, const char *name,
			       size_t len, unsigned hash)
{
	struct name_entry *e;

	HASH_FIND_BYHASHVALUE(hh, n->by_name, name, len, hash, e);
	return e;
}

static struct name_owner *owner_find(const struct names *n, uint64_t client)
{
	struct name_owner *o;

	HASH_FIND(hh, n->owners, &client, sizeof(client), o);
	return o;
}

/* Unlink e from the table and its owner, free it, and the owner with
 * its last name. */
static void remove_entry(struct names *n, struct name_entry *e)
{
	struct name_owner *o = e->owner;

	HASH_DELETE(hh, n->by_name, e);
	LIST_REMOVE(e, by_owner);
	if (--o->count == 0) {
		HASH_DELETE(hh, n->owners, o);
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
	unsigned hash = name_hash(n, name, name_len);
	struct name_entry *e = find(n, name, name_len, hash);
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

	struct name_owner *o = owner_find(n, client);
	if (o && o->count >= n->per_client) {
		free(copy);
		return -EMLINK;
	}
	e = calloc(1, sizeof(*e) + name_len + 1);
	if (!e) {
		free(copy);
		return -ENOMEM;
	}
	memcpy(e->name, name, name_len + 1);
	e->name_len = name_len;
	e->token = copy;
	e->token_len = len;
	HASH_ADD_KEYPTR_BYHASHVALUE(hh, n->by_name, e->name, name_len, hash, e);
	if (!htable_added(e)) {
		entry_free(e);
		return -ENOMEM;
	}
	if (!o) {
		o = calloc(1, sizeof(*o));
		if (o) {
			o->client = client;
			LIST_INIT(&o->names);
			HASH_ADD(hh, n->owners, client, sizeof(o->client), o);
			if (!htable_added(o)) {
				free(o);
				o = NULL;
			}
		}
		if (!o) {
			HASH_DELETE(hh, n->by_name, e);
			entry_free(e);
			return -ENOMEM;
		}
	}
	e->owner = o;
	LIST_INSERT_HEAD(&o->names, e, by_owner);
	o->count++;
	return 0;
}

int names_unpublish(struct names *n, const char *name, uint64_t client)
{
	struct name_entry *e;
	size_t len;

	/* A name that is not valid was never stored. */
	if (!names_valid(name))
		return -ENOENT;
	len = strlen(name);
	e = find(n, name, len, name_hash(n, name, len));
	if (!e)
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
	size_t name_len;

	if (!names_valid(name))
		return -ENOENT;
	name_len = strlen(name);
	e = find(n, name, name_len, name_hash(n, name, name_len));
	if (!e)
		return -ENOENT;
	*token = e->token;
	*len = e->token_len;
	return 0;
}

void names_remove_client(struct names *n, uint64_t client)
{
	struct name_owner *o = owner_find(n, client);

	if (!o)
		return;
	/* remove_entry frees the owner with its last name: count first. */
	for (uint32_t left = o->count; left; left--)
		remove_entry(n, LIST_FIRST(&o->names));
}

void names_set_limit(struct names *n, uint32_t per_client)
{
	n->per_client = per_client;
}

size_t names_client_count(const struct names *n, uint64_t client)
{
	const struct name_owner *o = owner_find(n, client);

	return o ? o->count : 0;
}

size_t names_count(const struct names *n)
{
	return HASH_COUNT(n->by_name);
}

void names_foreach(const struct names *n, names_fn fn, void *arg)
{
	const struct name_entry *e, *tmp;

	HASH_ITER(hh, n->by_name, e, tmp)
		fn(arg, e->name, e->token, e->token_len);
}

void names_foreach_client(const struct names *n, uint64_t client,
			  names_fn fn, void *arg)
{
	const struct name_owner *o = owner_find(n, client);
	const struct name_entry *e;

	if (o)
		LIST_FOREACH(e, &o->names, by_owner)
			fn(arg, e->name, e->token, e->token_len);
}
