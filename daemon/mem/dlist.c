/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlist.c - prepared descriptor lists and their table (dlist.h).
 *
 * Three indexes over one set of entries, all under the table's mutex (a
 * leaf; main thread changes, progress thread looks up by handle):
 * by handle (uthash), by owner (uthash of owners, each with its lists and
 * running counts) and by (owner, target) (uthash, each with its lists).
 * No operation walks lists that are not its own, so the progress
 * thread's wait for the mutex never grows with other clients' lists.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/queue.h>

#include "common/htable.h"
#include "gpu/gpu.h"
#include "mem/dlist.h"

struct owner;
struct target;

struct entry {
	uint64_t handle;
	struct dlist *list;       /* the table's reference */
	uint64_t bytes;           /* dlist_bytes(): charged to the uid */
	struct owner *owner;
	struct target *target;
	LIST_ENTRY(entry) of_owner, of_target;
	UT_hash_handle hh;        /* dltab.by_handle */
};

/* One client's lists; goes with its last list. */
struct owner {
	uint64_t id;
	uint32_t lists;
	uint64_t entries;
	struct dlist_usage *uid;  /* its user's usage, or NULL */
	LIST_HEAD(, entry) all;
	UT_hash_handle hh;        /* dltab.owners */
};

/* The lists of one client over one of its regions or imports. */
struct target_key {
	uint64_t owner, target;
};
struct target {
	struct target_key key;
	LIST_HEAD(, entry) all;
	UT_hash_handle hh;        /* dltab.targets */
};

struct dltab {
	pthread_mutex_t lock;     /* leaf */
	struct entry *by_handle;
	struct owner *owners;
	struct target *targets;
	uint64_t next;
	uint64_t entries;         /* over every list */
	uint64_t visits;          /* lists walked by scans (dltab_visits) */
};

/* Bookkeeping per list besides its entries: the list, its entry in the
 * table, and the hash handles' share. */
#define DLIST_OVERHEAD (sizeof(struct dlist) + sizeof(struct entry) + 64)

uint64_t dlist_bytes(uint32_t n, bool has_lens)
{
	return (uint64_t)n * sizeof(uint64_t) * (has_lens ? 2 : 1) +
	       DLIST_OVERHEAD;
}

int dlist_check(uint32_t n, const uint64_t *off, const uint64_t *lens,
		uint64_t len, uint64_t range_len, uint64_t *end)
{
	uint64_t max = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t l = lens ? lens[i] : len;
		if (l == 0)
			return -EINVAL;
		if (off[i] > range_len || l > range_len - off[i])
			return -ERANGE;  /* also catches off + l overflowing */
		if (off[i] + l > max)
			max = off[i] + l;
	}
	*end = max;
	return 0;
}

struct dltab *dltab_create(void)
{
	struct dltab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->next = 1;
	return t;
}

void dlist_get(struct dlist *l)
{
	atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
}

void dlist_put(struct dlist *l)
{
	if (!l || atomic_fetch_sub_explicit(&l->refs, 1,
					    memory_order_acq_rel) != 1)
		return;
	if (l->gpu) {
		for (int i = 0; i < gpu_count(); i++)
			gpu_list_free(l->gpu[i]);
		free(l->gpu);
	}
	free(l->off);
	free(l->lens);
	free(l);
}

static struct owner *owner_find(struct dltab *t, uint64_t id)
{
	struct owner *o;

	HASH_FIND(hh, t->owners, &id, sizeof(id), o);
	return o;
}

static struct target *target_find(struct dltab *t, uint64_t owner,
				  uint64_t target)
{
	const struct target_key key = { .owner = owner, .target = target };
	struct target *g;

	HASH_FIND(hh, t->targets, &key, sizeof(key), g);
	return g;
}

/* Take e out of every index, give its charge back, drop the table's
 * reference; an owner or target left without lists goes too. */
static void unlink_entry(struct dltab *t, struct entry *e)
{
	struct owner *o = e->owner;
	struct target *g = e->target;

	HASH_DELETE(hh, t->by_handle, e);
	LIST_REMOVE(e, of_owner);
	LIST_REMOVE(e, of_target);
	o->lists--;
	o->entries -= e->list->n;
	t->entries -= e->list->n;
	if (o->uid) {
		o->uid->lists--;
		o->uid->bytes -= e->bytes;
	}
	if (LIST_EMPTY(&g->all)) {
		HASH_DELETE(hh, t->targets, g);
		free(g);
	}
	if (LIST_EMPTY(&o->all)) {
		HASH_DELETE(hh, t->owners, o);
		free(o);
	}
	dlist_put(e->list);
	free(e);
}

void dltab_destroy(struct dltab *t)
{
	struct entry *e, *etmp;
	struct owner *o, *otmp;
	struct target *g, *gtmp;

	if (!t)
		return;
	/* Not unlink_entry: the users' usage the owners point to may be
	 * gone already (xferd stopping); nothing is given back to it. */
	HASH_ITER(hh, t->by_handle, e, etmp) {
		HASH_DELETE(hh, t->by_handle, e);
		dlist_put(e->list);
		free(e);
	}
	HASH_ITER(hh, t->owners, o, otmp) {
		HASH_DELETE(hh, t->owners, o);
		free(o);
	}
	HASH_ITER(hh, t->targets, g, gtmp) {
		HASH_DELETE(hh, t->targets, g);
		free(g);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* Room for one more list of n entries (bytes of memory) for owner o
 * (NULL: its first list) and its user?  0, -ENOSPC or -ENOBUFS. */
static int room(const struct owner *o, uint32_t n, uint64_t bytes,
		const struct dlist_limits *max)
{
	uint32_t lists = o ? o->lists : 0;
	uint64_t entries = o ? o->entries : 0;
	const struct dlist_usage *u = max->uid;

	if (lists >= max->lists)
		return -ENOSPC;
	if (entries > max->entries || n > max->entries - entries)
		return -ENOBUFS;
	if (!u)
		return 0;
	if (u->lists >= max->uid_lists)
		return -ENOSPC;
	if (u->bytes > max->uid_bytes || bytes > max->uid_bytes - u->bytes)
		return -ENOBUFS;
	return 0;
}

/* The owner and target records for a new list, made if need be (NULL on
 * OOM, nothing left behind). */
static int records(struct dltab *t, uint64_t owner, uint64_t target,
		   struct dlist_usage *uid, struct owner **po,
		   struct target **pg)
{
	struct owner *o = owner_find(t, owner);
	struct target *g = target_find(t, owner, target);
	bool new_o = false;

	if (!o) {
		o = calloc(1, sizeof(*o));
		if (!o)
			return -ENOMEM;
		o->id = owner;
		o->uid = uid;
		LIST_INIT(&o->all);
		HASH_ADD(hh, t->owners, id, sizeof(o->id), o);
		if (!htable_added(o)) {
			free(o);
			return -ENOMEM;
		}
		new_o = true;
	}
	if (!g) {
		g = calloc(1, sizeof(*g));
		if (g) {
			g->key = (struct target_key){ owner, target };
			LIST_INIT(&g->all);
			HASH_ADD(hh, t->targets, key, sizeof(g->key), g);
			if (!htable_added(g)) {
				free(g);
				g = NULL;
			}
		}
		if (!g) {
			if (new_o) {
				HASH_DELETE(hh, t->owners, o);
				free(o);
			}
			return -ENOMEM;
		}
	}
	*po = o;
	*pg = g;
	return 0;
}

int dltab_add(struct dltab *t, uint64_t owner, uint64_t target,
	      bool is_import, uint32_t n, uint64_t *off, uint64_t *lens,
	      uint64_t len, uint64_t end, struct dlist_limits max,
	      uint64_t *handle)
{
	struct dlist *l = calloc(1, sizeof(*l));
	struct entry *e = calloc(1, sizeof(*e));
	struct owner *o;
	struct target *g;
	int err;

	if (!l || !e) {
		free(l);
		free(e);
		return -ENOMEM;
	}
	*l = (struct dlist){
		.owner = owner, .target = target, .is_import = is_import,
		.n = n, .len = lens ? 0 : len, .off = off, .lens = lens,
		.end = end, .refs = 1,
	};
	e->bytes = dlist_bytes(n, lens != NULL);
	pthread_mutex_lock(&t->lock);
	o = owner_find(t, owner);
	/* An owner's lists are charged to the usage it came with. */
	if (o)
		max.uid = o->uid;
	err = room(o, n, e->bytes, &max);
	if (!err)
		err = records(t, owner, target, max.uid, &o, &g);
	if (!err) {
		l->handle = DLIST_HANDLE_BIT | t->next++;
		e->handle = l->handle;
		e->list = l;
		HASH_ADD(hh, t->by_handle, handle, sizeof(e->handle), e);
		if (!htable_added(e)) {
			/* The records may be new and empty: tidy them. */
			if (LIST_EMPTY(&g->all)) {
				HASH_DELETE(hh, t->targets, g);
				free(g);
			}
			if (LIST_EMPTY(&o->all)) {
				HASH_DELETE(hh, t->owners, o);
				free(o);
			}
			err = -ENOMEM;
		}
	}
	if (err) {
		pthread_mutex_unlock(&t->lock);
		free(l);
		free(e);
		return err;
	}
	e->owner = o;
	e->target = g;
	LIST_INSERT_HEAD(&o->all, e, of_owner);
	LIST_INSERT_HEAD(&g->all, e, of_target);
	o->lists++;
	o->entries += n;
	t->entries += n;
	if (o->uid) {
		o->uid->lists++;
		o->uid->bytes += e->bytes;
	}
	pthread_mutex_unlock(&t->lock);
	*handle = l->handle;
	return 0;
}

int dltab_remove(struct dltab *t, uint64_t owner, uint64_t handle)
{
	struct entry *e;
	int err = -EACCES;

	pthread_mutex_lock(&t->lock);
	HASH_FIND(hh, t->by_handle, &handle, sizeof(handle), e);
	if (e && e->list->owner == owner) {
		unlink_entry(t, e);
		err = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}

void dltab_remove_target(struct dltab *t, uint64_t owner, uint64_t target)
{
	struct target *g;

	pthread_mutex_lock(&t->lock);
	/* unlink_entry frees g with its last list: test before. */
	while ((g = target_find(t, owner, target))) {
		t->visits++;
		unlink_entry(t, LIST_FIRST(&g->all));
	}
	pthread_mutex_unlock(&t->lock);
}

void dltab_remove_client(struct dltab *t, uint64_t owner)
{
	struct owner *o;

	pthread_mutex_lock(&t->lock);
	while ((o = owner_find(t, owner))) {
		t->visits++;
		unlink_entry(t, LIST_FIRST(&o->all));
	}
	pthread_mutex_unlock(&t->lock);
}

unsigned dltab_count(struct dltab *t, uint64_t owner)
{
	pthread_mutex_lock(&t->lock);
	const struct owner *o = owner ? owner_find(t, owner) : NULL;
	unsigned n = owner ? (o ? o->lists : 0) : HASH_COUNT(t->by_handle);
	pthread_mutex_unlock(&t->lock);
	return n;
}

uint64_t dltab_entries(struct dltab *t, uint64_t owner)
{
	pthread_mutex_lock(&t->lock);
	const struct owner *o = owner ? owner_find(t, owner) : NULL;
	uint64_t sum = owner ? (o ? o->entries : 0) : t->entries;
	pthread_mutex_unlock(&t->lock);
	return sum;
}

uint64_t dltab_visits(struct dltab *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t v = t->visits;
	pthread_mutex_unlock(&t->lock);
	return v;
}

struct dlist *dltab_get(struct dltab *t, uint64_t owner, uint64_t handle)
{
	struct entry *e;
	struct dlist *l = NULL;

	if (!(handle & DLIST_HANDLE_BIT))
		return NULL;
	pthread_mutex_lock(&t->lock);
	HASH_FIND(hh, t->by_handle, &handle, sizeof(handle), e);
	if (e && e->list->owner == owner) {
		l = e->list;
		dlist_get(l);
	}
	pthread_mutex_unlock(&t->lock);
	return l;
}
