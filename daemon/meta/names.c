/* SPDX-License-Identifier: Apache-2.0 */
/*
 * names.c - the publish/lookup table: (uid, name) -> token, per xferd.
 *
 * A hash table of names keyed by the publisher's uid and the name
 * (uthash), a second one of the shared names keyed by the name alone
 * (one uid per shared spelling: what other nodes look up), and beside
 * them one record per publishing client with the list of its names, so
 * that a client's limit is checked in O(1) and its names go in O(its
 * names) when it disconnects.
 *
 * Names come from any local client, so the hash is keyed (SipHash-2-4,
 * OpenSSL's EVP_MAC "SIPHASH", with a random key per table): nobody can
 * choose names that all land in one bucket and turn every lookup into a
 * list walk.  Client ids are xferd's own counter: their table keeps
 * uthash's default hash.
 */
#include <errno.h>
#include <stddef.h>
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
	UT_hash_handle hh;                /* names.by_name, key: uid + name */
	UT_hash_handle hh_shared;         /* names.shared, key: name */
	LIST_ENTRY(name_entry) by_owner;
	struct name_owner *owner;
	uint8_t *token;
	size_t token_len;
	size_t name_len;
	uint32_t flags;                   /* NAMES_* */
	uint32_t uid;                     /* the key starts here ... */
	char name[];                      /* ... and goes on; NUL-terminated */
};

/* by_name's key is uid's 4 bytes and the name, contiguous in the entry. */
_Static_assert(offsetof(struct name_entry, name) ==
	       offsetof(struct name_entry, uid) + sizeof(uint32_t),
	       "uid and name form one key");
#define KEY_MAX (sizeof(uint32_t) + NAMES_NAME_MAX)

struct name_owner {
	UT_hash_handle hh;                /* names.owners, key: client */
	uint64_t client;
	uint32_t count;                   /* names in `names` */
	LIST_HEAD(, name_entry) names;
};

struct names {
	struct name_entry *by_name;       /* uthash head, every name */
	struct name_entry *shared;        /* uthash head (hh_shared) */
	struct name_owner *owners;        /* uthash head */
	EVP_MAC *siphash;                 /* fetched once per table */
	EVP_MAC_CTX *key;                 /* keyed with the table's key */
	uint32_t per_client;              /* names one client may publish */
};

/* --- the hash --- */

/*
 * SipHash-2-4 of a key (uid + name, or a shared name) under the table's
 * key.  EVP_MAC_init without
 * a key restarts from the key set in names_create, so a call costs no
 * fetch, allocation or key schedule (about 0.1 us).  OpenSSL cannot fail
 * here short of a broken provider; 0 then still finds every name, in one
 * chain.
 */
static unsigned name_hash(const struct names *n, const void *name, size_t len)
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
	HASH_CLEAR(hh_shared, n->shared);
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

/* uid + name as by_name's key, in buf (KEY_MAX bytes); its length. */
static size_t make_key(uint8_t *buf, uint32_t uid, const char *name,
		       size_t len)
{
	memcpy(buf, &uid, sizeof(uid));
	memcpy(buf + sizeof(uid), name, len);
	return sizeof(uid) + len;
}

/* uid's name, or NULL; name is pubname_valid. */
static struct name_entry *find(const struct names *n, uint32_t uid,
			       const char *name, size_t len)
{
	uint8_t key[KEY_MAX];
	size_t klen = make_key(key, uid, name, len);
	struct name_entry *e;

	HASH_FIND_BYHASHVALUE(hh, n->by_name, key, klen,
			      name_hash(n, key, klen), e);
	return e;
}

static struct name_entry *find_shared(const struct names *n,
				      const char *name, size_t len)
{
	struct name_entry *e;

	HASH_FIND_BYHASHVALUE(hh_shared, n->shared, name, len,
			      name_hash(n, name, len), e);
	return e;
}

/* e into the shared namespace: -EEXIST if another uid has its
 * spelling there, -ENOMEM. */
static int share_entry(struct names *n, struct name_entry *e)
{
	struct name_entry *other = find_shared(n, e->name, e->name_len);

	if (other == e)
		return 0;
	if (other)
		return -EEXIST;
	HASH_ADD_KEYPTR_BYHASHVALUE(hh_shared, n->shared, e->name,
				    e->name_len,
				    name_hash(n, e->name, e->name_len), e);
	/* htable_added() for the second handle. */
	if (!e->hh_shared.tbl)
		return -ENOMEM;
	e->flags |= NAMES_SHARED;
	return 0;
}

static void unshare_entry(struct names *n, struct name_entry *e)
{
	if (e->flags & NAMES_SHARED)
		HASH_DELETE(hh_shared, n->shared, e);
	e->flags &= ~NAMES_SHARED;
}

static struct name_owner *owner_find(const struct names *n, uint64_t client)
{
	struct name_owner *o;

	HASH_FIND(hh, n->owners, &client, sizeof(client), o);
	return o;
}

/* Unlink e from the tables and its owner, free it, and the owner with
 * its last name. */
static void remove_entry(struct names *n, struct name_entry *e)
{
	struct name_owner *o = e->owner;

	unshare_entry(n, e);
	HASH_DELETE(hh, n->by_name, e);
	LIST_REMOVE(e, by_owner);
	if (--o->count == 0) {
		HASH_DELETE(hh, n->owners, o);
		free(o);
	}
	entry_free(e);
}

/* The same client again: a new token and flags under its name. */
static int republish(struct names *n, struct name_entry *e, uint32_t flags,
		     uint8_t *copy, size_t len)
{
	if (flags & NAMES_SHARED) {
		int err = share_entry(n, e);
		if (err) {
			free(copy);
			return err;
		}
	} else {
		unshare_entry(n, e);
	}
	free(e->token);
	e->token = copy;
	e->token_len = len;
	return 0;
}

int names_publish(struct names *n, const char *name, uint64_t client,
		  uint32_t uid, uint32_t flags, const void *token,
		  size_t len)
{
	if (!names_valid(name) || !token || len == 0 ||
	    len > NAMES_TOKEN_MAX || (flags & ~NAMES_FLAGS))
		return -EINVAL;

	size_t name_len = strlen(name);
	struct name_entry *e = find(n, uid, name, name_len);
	uint8_t *copy;

	if (e && e->owner->client != client)
		return -EEXIST;
	/* Checked before anything changes: a refused publish leaves the
	 * table as it was. */
	if ((flags & NAMES_SHARED) && find_shared(n, name, name_len) &&
	    find_shared(n, name, name_len) != e)
		return -EEXIST;
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, token, len);
	if (e)
		return republish(n, e, flags, copy, len);

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
	e->uid = uid;
	memcpy(e->name, name, name_len + 1);
	e->name_len = name_len;
	e->token = copy;
	e->token_len = len;
	HASH_ADD_KEYPTR_BYHASHVALUE(hh, n->by_name, &e->uid,
				    sizeof(e->uid) + name_len,
				    name_hash(n, &e->uid,
					      sizeof(e->uid) + name_len), e);
	if (!htable_added(e)) {
		entry_free(e);
		return -ENOMEM;
	}
	if ((flags & NAMES_SHARED) && share_entry(n, e)) {
		HASH_DELETE(hh, n->by_name, e);
		entry_free(e);
		return -ENOMEM;  /* not -EEXIST: checked above */
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
			unshare_entry(n, e);
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

int names_unpublish(struct names *n, const char *name, uint64_t client,
		    uint32_t uid, uint32_t *flags)
{
	struct name_entry *e;

	/* A name that is not valid was never stored. */
	if (!names_valid(name))
		return -ENOENT;
	e = find(n, uid, name, strlen(name));
	if (!e)
		return -ENOENT;
	if (e->owner->client != client)
		return -EACCES;
	if (flags)
		*flags = e->flags;
	remove_entry(n, e);
	return 0;
}

static int found(const struct name_entry *e, const void **token,
		 size_t *len)
{
	if (!e)
		return -ENOENT;
	*token = e->token;
	*len = e->token_len;
	return 0;
}

int names_lookup(const struct names *n, uint32_t uid, const char *name,
		 const void **token, size_t *len)
{
	if (!names_valid(name))
		return -ENOENT;
	return found(find(n, uid, name, strlen(name)), token, len);
}

int names_lookup_as(const struct names *n, uint32_t caller, uint32_t owner,
		    const char *name, const void **token, size_t *len)
{
	const struct name_entry *e;

	if (!names_valid(name))
		return -ENOENT;
	e = find(n, owner, name, strlen(name));
	if (e && caller != owner && caller != 0 &&
	    !(e->flags & NAMES_SHARED))
		e = NULL;
	return found(e, token, len);
}

int names_lookup_shared(const struct names *n, const char *name,
			const void **token, size_t *len)
{
	if (!names_valid(name))
		return -ENOENT;
	return found(find_shared(n, name, strlen(name)), token, len);
}

int names_flags(const struct names *n, uint32_t uid, const char *name)
{
	const struct name_entry *e;

	if (!names_valid(name))
		return -ENOENT;
	e = find(n, uid, name, strlen(name));
	return e ? (int)e->flags : -ENOENT;
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

void names_foreach_shared(const struct names *n, names_fn fn, void *arg)
{
	const struct name_entry *e, *tmp;

	HASH_ITER(hh_shared, n->shared, e, tmp)
		fn(arg, e->name, e->token, e->token_len);
}

void names_foreach_client_shared(const struct names *n, uint64_t client,
				 names_fn fn, void *arg)
{
	const struct name_owner *o = owner_find(n, client);
	const struct name_entry *e;

	if (o)
		LIST_FOREACH(e, &o->names, by_owner)
			if (e->flags & NAMES_SHARED)
				fn(arg, e->name, e->token, e->token_len);
}

void names_foreach_client(const struct names *n, uint64_t client,
			  names_entry_fn fn, void *arg)
{
	const struct name_owner *o = owner_find(n, client);
	const struct name_entry *e;

	if (o)
		LIST_FOREACH(e, &o->names, by_owner)
			fn(arg, e->name, e->uid, e->flags, e->token_len);
}
