/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlist.c - prepared descriptor lists and their table (dlist.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include <uthash.h>

#include "gpu/gpu.h"
#include "mem/dlist.h"

struct entry {
	uint64_t handle;
	struct dlist *list;       /* the table's reference */
	UT_hash_handle hh;
};

struct dltab {
	pthread_mutex_t lock;     /* leaf */
	struct entry *by_handle;
	uint64_t next;
};

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

static void unlink_entry(struct dltab *t, struct entry *e)
{
	HASH_DEL(t->by_handle, e);
	dlist_put(e->list);
	free(e);
}

void dltab_destroy(struct dltab *t)
{
	struct entry *e, *tmp;

	if (!t)
		return;
	HASH_ITER(hh, t->by_handle, e, tmp)
		unlink_entry(t, e);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* Lists of owner (0: all) and their entries (NULL: not wanted). */
static unsigned count_locked(struct dltab *t, uint64_t owner,
			     uint64_t *entries)
{
	struct entry *e, *tmp;
	unsigned n = 0;
	uint64_t sum = 0;

	HASH_ITER(hh, t->by_handle, e, tmp) {
		if (owner && e->list->owner != owner)
			continue;
		n++;
		sum += e->list->n;
	}
	if (entries)
		*entries = sum;
	return n;
}

int dltab_add(struct dltab *t, uint64_t owner, uint64_t target,
	      bool is_import, uint32_t n, uint64_t *off, uint64_t *lens,
	      uint64_t len, uint64_t end, struct dlist_limits max,
	      uint64_t *handle)
{
	struct dlist *l = calloc(1, sizeof(*l));
	struct entry *e = calloc(1, sizeof(*e));

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
	pthread_mutex_lock(&t->lock);
	uint64_t entries;
	int err = count_locked(t, owner, &entries) >= max.lists ? -ENOSPC
		: entries > max.entries || n > max.entries - entries ? -ENOBUFS
		: 0;
	if (err) {
		pthread_mutex_unlock(&t->lock);
		free(l);
		free(e);
		return err;
	}
	l->handle = DLIST_HANDLE_BIT | t->next++;
	e->handle = l->handle;
	e->list = l;
	HASH_ADD(hh, t->by_handle, handle, sizeof(e->handle), e);
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

static void remove_matching(struct dltab *t, uint64_t owner, bool any_target,
			    uint64_t target)
{
	struct entry *e, *tmp;

	pthread_mutex_lock(&t->lock);
	HASH_ITER(hh, t->by_handle, e, tmp)
		if (e->list->owner == owner &&
		    (any_target || e->list->target == target))
			unlink_entry(t, e);
	pthread_mutex_unlock(&t->lock);
}

void dltab_remove_target(struct dltab *t, uint64_t owner, uint64_t target)
{
	remove_matching(t, owner, false, target);
}

void dltab_remove_client(struct dltab *t, uint64_t owner)
{
	remove_matching(t, owner, true, 0);
}

unsigned dltab_count(struct dltab *t, uint64_t owner)
{
	pthread_mutex_lock(&t->lock);
	unsigned n = count_locked(t, owner, NULL);
	pthread_mutex_unlock(&t->lock);
	return n;
}

uint64_t dltab_entries(struct dltab *t, uint64_t owner)
{
	uint64_t sum;

	pthread_mutex_lock(&t->lock);
	count_locked(t, owner, &sum);
	pthread_mutex_unlock(&t->lock);
	return sum;
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
