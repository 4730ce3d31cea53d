/* SPDX-License-Identifier: Apache-2.0 */
/*
 * region.c - region objects and the daemon-wide handle table.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/htable.h"
#include "gpu/gpu.h"
#include "core/log.h"
#include "mem/cma.h"
#include "core/rcache.h"
#include "mem/region_int.h"

/* Is [off, off + len) inside [0, limit)?  Written so that no sum can
 * overflow. */
static bool in_range(uint64_t off, uint64_t len, uint64_t limit)
{
	return off <= limit && len <= limit - off;
}

static int random_key(uint8_t key[TOKEN_KEY_LEN])
{
	ssize_t n = getrandom(key, TOKEN_KEY_LEN, 0);
	return n == TOKEN_KEY_LEN ? 0 : -EIO;
}

static struct region *region_alloc(enum region_kind kind, uint64_t length,
				   uint64_t owner)
{
	struct region *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (random_key(r->key)) {
		free(r);
		return NULL;
	}
	r->head.kind = kind;
	r->head.length = length;
	r->head.owner = owner;
	r->fd = -1;
	atomic_init(&r->refs, 1);
	return r;
}

int region_create_memfd(int fd, uint64_t length, uint64_t owner,
			struct region **out)
{
	const int need = F_SEAL_SHRINK | F_SEAL_GROW;
	struct stat st;

	if (length == 0 || length > SIZE_MAX)
		return -EINVAL;
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return -EINVAL;   /* not a memfd */
	if ((seals & need) != need)
		return -EPERM;    /* could be truncated under a copy */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < length)
		return -EINVAL;

	struct region *r = region_alloc(REGION_MEMFD, length, owner);
	if (!r)
		return -ENOMEM;
	/* No MAP_POPULATE: on this (main) thread it would stall every
	 * client for as long as faulting in the whole range takes, and for
	 * a sparse memfd allocate pages the client never touched, charged
	 * to xferd.  region_prefault maps what the client touched, on the
	 * registration thread. */
	r->head.map = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED,
			   fd, 0);
	if (r->head.map == MAP_FAILED) {
		int err = -errno;
		free(r);
		return err;
	}
	r->fd = fd;
	*out = r;
	return 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  /* Linux 5.14 */
#endif

/* Pages looked at per mincore call: a 4 KiB vector on the stack. */
#define PREFAULT_CHUNK_PAGES 4096u

void region_prefault(struct region *r)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char vec[PREFAULT_CHUNK_PAGES];
	char *base = r->head.map;
	size_t npages = (r->head.length + page - 1) / page;

	if (r->head.kind != REGION_MEMFD || !base)
		return;
	for (size_t at = 0; at < npages; at += PREFAULT_CHUNK_PAGES) {
		size_t n = npages - at < PREFAULT_CHUNK_PAGES
				   ? npages - at : PREFAULT_CHUNK_PAGES;
		/* For a shared file mapping mincore says which pages the
		 * file has in memory, mapped here or not. */
		if (mincore(base + at * page, n * page, vec))
			return;
		for (size_t i = 0; i < n;) {
			if (!(vec[i] & 1)) {
				i++;
				continue;
			}
			size_t run = i;
			while (run < n && (vec[run] & 1))
				run++;
			/* A page the client punched out meanwhile is
			 * allocated again: one run, counted anyway in the
			 * region's bytes. */
			if (madvise(base + (at + i) * page, (run - i) * page,
				    MADV_POPULATE_WRITE) && errno == EINVAL)
				return;  /* kernel before 5.14: fault on use */
			i = run;
		}
	}
}

void region_cost(const struct region *r, struct region_cost *out)
{
	out->host_bytes = r->head.kind == REGION_MEMFD ? r->head.length : 0;
	/* A CMA region holds no fd: its owner's two (cma.h) are the
	 * client's, counted once at its first registration. */
	out->fds = r->fd >= 0;
}

int region_create_cma(struct cma_owner *o, uint64_t addr, uint64_t length,
		      uint64_t owner, struct region **out)
{
	if (length == 0 || addr == 0 || addr + length < addr ||
	    addr + length > (1ull << 57))
		return -EINVAL;
	int err = cma_owner_probe(o, addr);
	if (!err)
		err = cma_owner_probe(o, addr + length - 1);
	if (err)
		return err; /* -EFAULT: not mapped; -ESRCH: gone */

	struct region *r = region_alloc(REGION_CMA, length, owner);
	if (!r)
		return -ENOMEM;
	cma_owner_get(o);
	r->cma = o;
	r->addr = addr;
	*out = r;
	return 0;
}

bool region_cma_alive(const struct region *r)
{
	return r->cma && cma_owner_alive(r->cma);
}

int region_create_cuda(struct rcache *rc, uint64_t owner,
		       const struct gpu_alloc_desc *d, int fd, uint64_t offset,
		       uint64_t length, struct region **out)
{
	struct rcache_entry *imp;
	uint64_t base;
	int dev;

	if (length == 0 || offset > d->size || length > d->size - offset) {
		if (fd >= 0)
			close(fd);
		return -EINVAL;
	}
	int err = gpu_import(rc, owner, d, fd, &imp, &base, &dev);
	if (err)
		return err;
	struct region *r = region_alloc(REGION_CUDA, length, owner);
	if (!r) {
		rcache_put(rc, imp);
		return -ENOMEM;
	}
	r->rcache = rc;
	r->gpu_import = imp;
	r->gpu_ptr = base + offset;
	r->gpu_offset = offset;
	r->gpu_dev = dev;
	if (!d->vmm) {
		r->gpu_desc = malloc(sizeof(*d));
		if (r->gpu_desc)
			*r->gpu_desc = *d;
	}
	*out = r;
	return 0;
}

int region_gpu_addr(struct region *r, int dev, uint64_t off, uint64_t *addr)
{
	if (dev == r->gpu_dev || !r->gpu_desc) {
		*addr = r->gpu_ptr + off;
		return 0;
	}
	if (dev < 0 || dev >= 16)
		return -EINVAL;
	if (!r->gpu_on_entry[dev]) {
		uint64_t base;
		int err = gpu_import_on(r->rcache, r->head.owner, r->gpu_desc, dev,
					&r->gpu_on_entry[dev], &base);
		if (err)
			return err;
		r->gpu_on[dev] = base + r->gpu_offset;
	}
	*addr = r->gpu_on[dev] + off;
	return 0;
}

void region_get(struct region *r)
{
	/* Relaxed: a new reference is only ever made from an existing one
	 * (the table's, under its lock). */
	atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

static void (*release_hook)(void *arg, const struct region *r);
static void *release_arg;

void region_set_release_hook(void (*fn)(void *arg, const struct region *r),
			     void *arg)
{
	release_hook = fn;
	release_arg = arg;
}

void region_put(struct region *r)
{
	if (!r)
		return;
	/* acq_rel: all uses of the region by this holder happen before the
	 * free by whichever holder drops the last reference. */
	if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (release_hook)
		release_hook(release_arg, r);
	/* After every descriptor that used it: no NIC touches it now.
	 * The last reference: nobody sets it any more.  Before the GPU
	 * import goes: a GPU allocation's MR is of that import. */
	struct rcache_entry *mr = atomic_load_explicit(&r->nic_mr,
							memory_order_acquire);
	if (mr)
		rcache_put(r->rcache, mr);
	if (r->gpu_pinned)
		gpu_host_unregister(r->head.map);
	for (int i = 0; i < 16; i++)
		if (r->gpu_on_entry[i])
			rcache_put(r->rcache, r->gpu_on_entry[i]);
	if (r->gpu_import)
		rcache_put(r->rcache, r->gpu_import);
	free(r->rdma);
	free(r->gpu_desc);
	if (r->head.map)
		munmap(r->head.map, r->head.length);
	if (r->fd >= 0)
		close(r->fd);
	cma_owner_put(r->cma);
	free(r->head.token);
	explicit_bzero(r->key, sizeof(r->key));
	free(r);
}

const uint8_t *region_key(const struct region *r)
{
	return r->key;
}

uint32_t region_imports(const struct region *r)
{
	return atomic_load_explicit(&r->imports, memory_order_relaxed);
}

pid_t region_cma_pid(const struct region *r)
{
	return r->cma ? cma_owner_pid(r->cma) : 0;
}

uint64_t region_cma_addr(const struct region *r)
{
	return r->addr;
}

uint64_t region_gpu_ptr(const struct region *r)
{
	return r->gpu_ptr;
}

int region_gpu_dev(const struct region *r)
{
	return r->gpu_dev;
}

int region_gpu_pin(struct region *r)
{
	if (r->head.kind != REGION_MEMFD)
		return -EINVAL;
	if (!r->gpu_pinned) {
		int err = gpu_host_register(r->head.map, r->head.length);
		if (err)
			return err;
		r->gpu_pinned = true;
	}
	return 0;
}

int region_memfd_fd(const struct region *r)
{
	return r->fd;
}

struct rcache_entry *region_nic_mr(const struct region *r)
{
	/* Pairs with the release in region_set_nic_mr: the entry's MRs
	 * are seen complete. */
	return atomic_load_explicit(&r->nic_mr, memory_order_acquire);
}

void region_set_nic_mr(struct region *r, struct rcache *rc,
		       struct rcache_entry *e)
{
	r->rcache = rc;  /* read only at the last reference */
	/* Pairs with the acquire in region_nic_mr: the progress thread may
	 * be looking at a region whose registration finishes now. */
	atomic_store_explicit(&r->nic_mr, e, memory_order_release);
}

struct region_rdma *region_rdma(const struct region *r)
{
	return r->rdma;
}

const char *region_kind_name(enum region_kind kind)
{
	switch (kind) {
	case REGION_MEMFD: return "memfd";
	case REGION_CMA: return "cma";
	case REGION_CUDA: return "cuda";
	case REGION_REMOTE: return "remote";
	}
	return "?";
}

/* --- the handle table --- */

struct entry {
	uint64_t handle;
	uint64_t client;          /* who may use this handle */
	bool is_import;
	/* !is_import: the table's reference to the region; an import of
	 * another xferd's token: its REGION_REMOTE, owned by the entry. */
	struct region *region;
	struct {                  /* is_import: what the token granted */
		uint64_t region;
		uint64_t offset, length;
	} imp;
	UT_hash_handle hh;        /* regtab.entries, key: handle */
	struct entry *dead_next;  /* regtab_remove_client's list */
};

struct regtab {
	pthread_mutex_t lock;     /* leaf lock: guards everything below */
	struct entry *entries;    /* uthash head */
	uint64_t next_handle;
	/* Bumped by every removal; read without the lock by memos. */
	_Atomic uint64_t gen;
};

struct regtab *regtab_create(void)
{
	struct regtab *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->next_handle = 1;
	return t;
}

/* Handles are sequential: a multiplicative hash spreads them, cheaper
 * than uthash's default on the descriptor path (regtab_resolve). */
static unsigned handle_hash(uint64_t handle)
{
	return (unsigned)((handle * 0x9e3779b97f4a7c15ull) >> 32);
}

static struct entry *find(const struct regtab *t, uint64_t handle)
{
	struct entry *e;

	HASH_FIND_BYHASHVALUE(hh, t->entries, &handle, sizeof(handle),
			      handle_hash(handle), e);
	return e;
}

/* Called with the lock held.  false: no memory for the table (uthash
 * grows it as it fills; a failed growth only lengthens the chains). */
static bool insert(struct regtab *t, struct entry *e)
{
	e->handle = t->next_handle++;
	HASH_ADD_KEYPTR_BYHASHVALUE(hh, t->entries, &e->handle,
				    sizeof(e->handle), handle_hash(e->handle),
				    e);
	return htable_added(e);
}

/* Unlink e (lock held); the caller frees it outside the lock. */
static void unlink_entry(struct regtab *t, struct entry *e)
{
	HASH_DELETE(hh, t->entries, e);
	/* Release pairs with the acquire in regtab_memo_sync(): once the
	 * removal is done, no memo resolves this handle (or, through an
	 * import, this region) any more. */
	atomic_fetch_add_explicit(&t->gen, 1, memory_order_release);
	if (e->is_import) {
		struct entry *target = find(t, e->imp.region);
		if (target)
			atomic_fetch_sub_explicit(&target->region->imports, 1,
						  memory_order_relaxed);
	}
}

static void entry_free(struct entry *e)
{
	region_put(e->region);  /* NULL for imports of local regions */
	free(e);
}

void regtab_add_region(struct regtab *t, struct region *r)
{
	struct entry *e = calloc(1, sizeof(*e));

	if (!e)
		abort(); /* a few bytes; treat like the rest of malloc */
	e->client = r->head.owner;
	e->region = r;
	pthread_mutex_lock(&t->lock);
	if (!insert(t, e))
		abort(); /* the table's first buckets: as above */
	r->head.handle = e->handle;
	pthread_mutex_unlock(&t->lock);
}

int regtab_add_import(struct regtab *t, uint64_t importer,
		      const struct token *tok, uint64_t *handle,
		      uint64_t *length)
{
	struct entry *e = calloc(1, sizeof(*e));
	int err = -EACCES;

	if (!e)
		return -ENOMEM;
	pthread_mutex_lock(&t->lock);
	struct entry *target = find(t, tok->region);
	if (!target || target->is_import ||
	    tok->region_length != target->region->head.length ||
	    tok->mem_kind != (uint32_t)target->region->head.kind ||
	    !token_key_valid(tok, target->region->key))
		goto out;
	e->client = importer;
	e->is_import = true;
	e->imp.region = tok->region;
	e->imp.offset = tok->offset;
	e->imp.length = tok->length;
	if (!insert(t, e)) {
		err = -ENOMEM;
		goto out;
	}
	atomic_fetch_add_explicit(&target->region->imports, 1,
				  memory_order_relaxed);
	*handle = e->handle;
	*length = tok->length;
	e = NULL;
	err = 0;
out:
	pthread_mutex_unlock(&t->lock);
	free(e);
	return err;
}

int regtab_add_remote_import(struct regtab *t, uint64_t importer,
			     const struct token *tok,
			     const struct region_rdma *rdma, uint64_t *handle,
			     uint64_t *length)
{
	struct entry *e = calloc(1, sizeof(*e));
	struct region *r = region_alloc(REGION_REMOTE, tok->length, importer);

	if (!e || !r || !(r->head.token = malloc(sizeof(*tok))) ||
	    (rdma && !(r->rdma = malloc(sizeof(*rdma))))) {
		free(e);
		region_put(r);
		return -ENOMEM;
	}
	*r->head.token = *tok;
	if (rdma)
		*r->rdma = *rdma;
	e->client = importer;
	e->is_import = true;
	e->region = r;
	pthread_mutex_lock(&t->lock);
	bool added = insert(t, e);
	if (added)
		r->head.handle = e->handle;
	pthread_mutex_unlock(&t->lock);
	if (!added) {
		entry_free(e);   /* puts r */
		return -ENOMEM;
	}
	*handle = e->handle;
	*length = tok->length;
	return 0;
}

int regtab_resolve_token(struct regtab *t, const struct token *tok,
			 uint64_t at, uint64_t len, bool check_key,
			 struct region **out, uint64_t *region_off)
{
	struct region *r = NULL;

	pthread_mutex_lock(&t->lock);
	struct entry *e = find(t, tok->region);
	if (e && !e->is_import) {
		r = e->region;
		region_get(r);
	}
	pthread_mutex_unlock(&t->lock);
	if (!r)
		return -ESTALE;
	/* The key check (an HMAC) runs outside the lock. */
	int err = 0;
	if (tok->region_length != r->head.length ||
	    tok->mem_kind != (uint32_t)r->head.kind ||
	    (check_key && !token_key_valid(tok, r->key)))
		err = -EACCES;
	else if (!in_range(at, len, tok->length))
		err = -ERANGE;
	if (err) {
		region_put(r);
		return err;
	}
	*out = r;
	*region_off = tok->offset + at;
	return 0;
}

int regtab_remove(struct regtab *t, uint64_t client, uint64_t handle,
		  bool is_import)
{
	int err = 0;

	pthread_mutex_lock(&t->lock);
	struct entry *e = find(t, handle);
	if (!e || e->client != client)
		err = -EACCES;
	else if (e->is_import != is_import)
		err = -EINVAL;
	else
		unlink_entry(t, e);
	pthread_mutex_unlock(&t->lock);
	if (!err)
		entry_free(e);
	return err;
}

void regtab_remove_client(struct regtab *t, uint64_t client)
{
	struct entry *dead = NULL, *e, *tmp;

	pthread_mutex_lock(&t->lock);
	HASH_ITER(hh, t->entries, e, tmp) {
		if (e->client != client)
			continue;
		unlink_entry(t, e);
		e->dead_next = dead;
		dead = e;
	}
	pthread_mutex_unlock(&t->lock);
	/* Unmapping can take a while for large regions: outside the lock. */
	for (struct entry *next; dead; dead = next) {
		next = dead->dead_next;
		entry_free(dead);
	}
}

/* The region behind a handle and the range it grants; lock held. */
static int lookup_locked(struct regtab *t, uint64_t client, uint64_t handle,
			 bool allow_import, struct region **out,
			 uint64_t *base, uint64_t *limit, bool *is_import)
{
	struct entry *e = find(t, handle);

	if (!e || e->client != client || (e->is_import && !allow_import))
		return -EACCES;
	*is_import = e->is_import;
	if (e->region) {  /* our own region, or a remote import */
		*out = e->region;
		*base = 0;
		*limit = e->region->head.length;
		return 0;
	}
	struct entry *target = find(t, e->imp.region);
	if (!target)
		return -ESTALE;
	*out = target->region;
	*base = e->imp.offset;
	*limit = e->imp.length;
	return 0;
}


int regtab_resolve(struct regtab *t, uint64_t client, uint64_t handle,
		   uint64_t off, uint64_t len, bool allow_import,
		   struct region **out, uint64_t *region_off)
{
	struct region *r;
	uint64_t base, limit;
	bool is_import;

	pthread_mutex_lock(&t->lock);
	int err = lookup_locked(t, client, handle, allow_import, &r, &base,
				&limit, &is_import);
	if (!err && !in_range(off, len, limit))
		err = -ERANGE;
	if (!err) {
		region_get(r);
		*out = r;
		*region_off = base + off;
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}

void regtab_memo_release(struct regtab_memo *m)
{
	for (unsigned i = 0; i < REGTAB_MEMO_SLOTS; i++) {
		region_put(m->slot[i].region);
		m->slot[i].region = NULL;
	}
	m->in_use = 0;
}

void regtab_memo_sync(struct regtab *t, struct regtab_memo *m)
{
	/* Acquire pairs with the release in unlink_entry(): a removal that
	 * finished before this load empties the memo. */
	uint64_t gen = atomic_load_explicit(&t->gen, memory_order_acquire);

	m->in_use = 0;
	if (gen != m->gen) {
		regtab_memo_release(m);
		m->gen = gen;
	}
}

int regtab_resolve_memo_slow(struct regtab *t, struct regtab_memo *m,
			     uint64_t client, uint64_t handle, uint64_t off,
			     uint64_t len, bool allow_import,
			     struct region **out, uint64_t *region_off)
{
	struct region *r;
	uint64_t base, limit;
	bool is_import;
	unsigned i;

	/* Not in the memo (regtab_resolve_memo looked): the table. */
	pthread_mutex_lock(&t->lock);
	int err = lookup_locked(t, client, handle, allow_import, &r, &base,
				&limit, &is_import);
	if (!err)
		region_get(r);
	pthread_mutex_unlock(&t->lock);
	if (err)
		return err;
	/* Never reuse a slot lent out for this descriptor.  The generation
	 * stays the one read at the last sync: a removal since then empties
	 * the memo at the next sync. */
	do {
		i = m->next;
		m->next = (m->next + 1) % REGTAB_MEMO_SLOTS;
	} while (m->in_use & (1u << i));
	region_put(m->slot[i].region);
	m->slot[i].region = r;
	m->slot[i].client = client;
	m->slot[i].handle = handle;
	m->slot[i].is_import = is_import;
	m->slot[i].base = base;
	m->slot[i].limit = limit;
	if (!in_range(off, len, limit))
		return -ERANGE;
	m->in_use |= 1u << i;
	*out = r;
	*region_off = base + off;
	return 0;
}

static void count_locked(struct regtab *t, bool all, uint64_t client,
			 struct regtab_counts *out)
{
	struct entry *e, *tmp;

	*out = (struct regtab_counts){ 0 };
	HASH_ITER(hh, t->entries, e, tmp)
		if (all || e->client == client) {
			if (e->is_import)
				out->imports++;
			else
				out->regions++;
		}
}

void regtab_count(struct regtab *t, uint64_t client,
		  struct regtab_counts *out)
{
	pthread_mutex_lock(&t->lock);
	count_locked(t, false, client, out);
	pthread_mutex_unlock(&t->lock);
}

void regtab_count_all(struct regtab *t, struct regtab_counts *out)
{
	pthread_mutex_lock(&t->lock);
	count_locked(t, true, 0, out);
	pthread_mutex_unlock(&t->lock);
}

void regtab_foreach_region(struct regtab *t,
			   void (*fn)(const struct region *r, void *arg),
			   void *arg)
{
	struct entry *e, *tmp;

	pthread_mutex_lock(&t->lock);
	/* uthash walks in insertion order: oldest handle first. */
	HASH_ITER(hh, t->entries, e, tmp)
		if (!e->is_import)
			fn(e->region, arg);
	pthread_mutex_unlock(&t->lock);
}

void regtab_destroy(struct regtab *t)
{
	struct entry *e, *tmp;

	if (!t)
		return;
	HASH_ITER(hh, t->entries, e, tmp) {
		HASH_DELETE(hh, t->entries, e);
		entry_free(e);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int regtab_region_cost(struct regtab *t, uint64_t client, uint64_t handle,
		       struct region_cost *out)
{
	int err = -EACCES;

	pthread_mutex_lock(&t->lock);
	struct entry *e = find(t, handle);
	if (e && e->client == client && !e->is_import) {
		region_cost(e->region, out);
		err = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return err;
}
