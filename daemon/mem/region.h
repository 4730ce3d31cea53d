/* SPDX-License-Identifier: Apache-2.0 */
/*
 * region.h - registered memory and the handle table.
 *
 * A handle names either a region a client registered or a token it
 * imported; handles are 64-bit, daemon-wide and never reused, so a stale
 * handle can never reach a newer region.  The table is shared by the main
 * thread (adds, removes) and the progress thread (resolves handles for
 * each descriptor); its mutex is a leaf lock: nothing else is locked while
 * it is held.
 *
 * Regions are refcounted: the table holds one reference, and every
 * descriptor in execution holds one (its own, or the progress thread's
 * memo's), so deregistration while a copy runs unmaps only when the copy
 * is done.
 */
#ifndef XFERD_REGION_H
#define XFERD_REGION_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/token_codec.h"
#include "core/region_kind.h"

/* Another xferd's region as its NICs expose it: the address of the
 * token's region byte 0 in the owner and an rkey per owner device. */
#define REGION_RDMA_KEYS 16
struct region_rdma {
	uint64_t addr;
	uint32_t nkeys;
	uint32_t rkey[REGION_RDMA_KEYS];  /* 0: not registered there */
	/* The owner's grant of the token's range (transport/rdma_grant.h),
	 * 0 if the rkeys are none; valid only on the link it was made on. */
	uint64_t grant;
	uint64_t link_gen;
	/* No rkeys (nkeys 0): the owner's NICs cannot reach the region, but
	 * it lends landing chunks of this many bytes for it, on the link
	 * link_gen (owner-side staging, transport/rdma_land.c); 0: none. */
	uint32_t landing_chunk;
};

/*
 * A region is opaque outside mem/ (mem/region_int.h): what every engine
 * reads on its data path is this head, set when the region is made and
 * never changed after (the inline accessors below); the rest goes
 * through functions, per kind.
 */
struct region;
struct rcache;
struct rcache_entry;
struct region_head {
	uint64_t handle;
	uint64_t owner;           /* client id */
	enum region_kind kind;
	uint64_t length;
	void *map;                /* MEMFD: xferd's own mapping; else NULL */
	struct token *token;      /* REMOTE: the token (owner's instance in
				   * it); else NULL */
};

static inline const struct region_head *region_head(const struct region *r)
{
	return (const struct region_head *)(const void *)r;
}
static inline enum region_kind region_kind(const struct region *r)
{
	return region_head(r)->kind;
}
static inline uint64_t region_handle(const struct region *r)
{
	return region_head(r)->handle;
}
static inline uint64_t region_owner(const struct region *r)
{
	return region_head(r)->owner;
}
static inline uint64_t region_length(const struct region *r)
{
	return region_head(r)->length;
}
/* MEMFD: xferd's mapping of byte off. */
static inline void *region_map_at(const struct region *r, uint64_t off)
{
	return (char *)region_head(r)->map + off;
}
/* REMOTE: the imported token. */
static inline const struct token *region_token(const struct region *r)
{
	return region_head(r)->token;
}

/* The region's access key (tokens are keyed by it). */
const uint8_t *region_key(const struct region *r);
/* Live imports of it, for xferctl. */
uint32_t region_imports(const struct region *r);
/* CMA: the owner process and the range's address in it. */
pid_t region_cma_pid(const struct region *r);
uint64_t region_cma_addr(const struct region *r);
/* CUDA: the range's address in xferd (on region_gpu_dev()'s GPU). */
uint64_t region_gpu_ptr(const struct region *r);
int region_gpu_dev(const struct region *r);
/* MEMFD: pin xferd's mapping for GPU copies (once, progress thread). */
int region_gpu_pin(struct region *r);
/* MEMFD: the sealed memfd (its inode keys the NIC registration). */
int region_memfd_fd(const struct region *r);
/*
 * MEMFD: map into xferd's page tables the pages the client has already
 * touched, so that the first copies do not fault them one by one; holes
 * stay holes (a page xferd faulted in would be charged to xferd).  Slow
 * for large regions: the registration thread only, never the main one.
 */
void region_prefault(struct region *r);
/* MEMFD: its registration with the RDMA devices (rdma_mr.h), a
 * reference held in rc, or NULL; set once, when it was made. */
struct rcache_entry *region_nic_mr(const struct region *r);
void region_set_nic_mr(struct region *r, struct rcache *rc,
		       struct rcache_entry *e);
/* REMOTE: how the owner's NICs reach it (NULL: they don't). */
struct region_rdma *region_rdma(const struct region *r);
/*
 * Called with every region whose last reference goes, on the thread that
 * drops it, before anything of it is released (what the NICs were
 * granted of it must end first: transport/rdma_grant.h).  Set before
 * other threads run, cleared after; NULL: none.
 */
void region_set_release_hook(void (*fn)(void *arg, const struct region *r),
			     void *arg);

/*
 * Map a client's memfd of length bytes.  The memfd must be sealed against
 * shrinking and growing (otherwise a client could truncate it under a
 * copy and crash xferd with SIGBUS).  Takes ownership of fd on success.
 * Nothing is faulted in: the mapping costs no memory until used, and
 * returns at once however large (region_prefault does the rest later).
 */
int region_create_memfd(int fd, uint64_t length, uint64_t owner,
			struct region **out);
/*
 * Describe [addr, addr + length) of the process behind o (cma.h: one per
 * client connection, whatever the number of its regions; the region
 * takes a reference); checks that both ends are mapped there.
 */
struct cma_owner;
int region_create_cma(struct cma_owner *o, uint64_t addr, uint64_t length,
		      uint64_t owner, struct region **out);
/* Has the owner of a CMA region not exited yet? */
bool region_cma_alive(const struct region *r);
/*
 * GPU memory: the range [offset, offset + length) of the allocation d
 * describes (fd: its VMM handle, consumed, or -1), imported through the
 * registration cache rc.
 */
struct gpu_alloc_desc;
struct rcache;
struct rcache_entry;
int region_create_cuda(struct rcache *rc, uint64_t owner,
		       const struct gpu_alloc_desc *d, int fd, uint64_t offset,
		       uint64_t length, struct region **out);
/*
 * The address of byte `off` of CUDA region r for a copy that runs on GPU
 * dev: its own mapping when dev is its GPU or the allocation is VMM
 * (mapped for every peer), else a mapping opened for dev on first use.
 * Returns 0, or -errno when r cannot be reached from dev that way.
 */
int region_gpu_addr(struct region *r, int dev, uint64_t off, uint64_t *addr);
void region_get(struct region *r);
/* Drop a reference; the last one unmaps and frees.  Accepts NULL. */
void region_put(struct region *r);
const char *region_kind_name(enum region_kind kind);

struct regtab;

struct regtab *regtab_create(void);
/* Drops every entry; call only when no thread resolves any more. */
void regtab_destroy(struct regtab *t);

/* Insert r (the table takes over the caller's reference); sets r->handle. */
void regtab_add_region(struct regtab *t, struct region *r);

/*
 * Import a decoded token for client `importer`: the region must exist and
 * the token's key must match.  On success *handle names the import and
 * *length the bytes it grants.  -EACCES otherwise.
 */
int regtab_add_import(struct regtab *t, uint64_t importer,
		      const struct token *tok, uint64_t *handle,
		      uint64_t *length);

/*
 * Import a token of another xferd for client `importer`.  Nothing is
 * checked here but the token's form: its key is checked by the owning
 * xferd on every use.  rdma (may be NULL): what the owner said of the
 * region's NIC registration, for the RDMA path.  *handle and *length as for regtab_add_import().
 */
int regtab_add_remote_import(struct regtab *t, uint64_t importer,
			     const struct token *tok,
			     const struct region_rdma *rdma, uint64_t *handle,
			     uint64_t *length);

/*
 * A token of this xferd presented by a peer, for [at, at + len) of the
 * token's range: the region must exist (else -ESTALE), match the token's
 * length and kind and, if check_key, its key (else -EACCES); the range
 * must lie inside the token's (else -ERANGE).  On success returns a
 * reference to the region and the offset within it.  check_key may be
 * false only for a token whose key the caller verified before (handles
 * are never reused, so a verified token stays valid as long as its
 * region exists).
 */
int regtab_resolve_token(struct regtab *t, const struct token *tok,
			 uint64_t at, uint64_t len, bool check_key,
			 struct region **out, uint64_t *region_off);

/*
 * Remove the client's own region (is_import false) or import (true).
 * -EACCES if the handle is not the client's, -EINVAL if of the other kind.
 */
int regtab_remove(struct regtab *t, uint64_t client, uint64_t handle,
		  bool is_import);
/* What a region costs its client against its budgets (budget.h): the
 * host memory xferd maps for it and the fds xferd holds for it. */
struct region_cost {
	uint64_t host_bytes;
	uint32_t fds;
};
void region_cost(const struct region *r, struct region_cost *out);
/* The cost of the client's own region handle; -EACCES if it has no such
 * region. */
int regtab_region_cost(struct regtab *t, uint64_t client, uint64_t handle,
		       struct region_cost *out);
/* Remove every region and import of a client (it has gone). */
void regtab_remove_client(struct regtab *t, uint64_t client);

/*
 * Resolve a handle held by `client` for bytes [off, off + len): its own
 * region (always), or an import (when allow_import).  On success returns
 * a reference to the region (release with region_put) and the offset of
 * the range within it.  Errors: -EACCES (not the client's handle),
 * -ESTALE (the imported region is gone), -ERANGE (outside the range).
 */
int regtab_resolve(struct regtab *t, uint64_t client, uint64_t handle,
		   uint64_t off, uint64_t len, bool allow_import,
		   struct region **out, uint64_t *region_off);

/*
 * A resolver's memo of the handles it resolved last: each slot holds a
 * reference to its region and the range the handle grants, reused only
 * while the table's generation is the one they were resolved under.
 * Every removal bumps the generation, so a memo never outlives a handle;
 * additions do not (handles are never reused).  The progress thread keeps
 * one so that a run of descriptors naming the same regions takes the
 * table lock and the reference counts once, not twice per descriptor.
 * A memo belongs to one thread; zero it before first use.
 */
#define REGTAB_MEMO_SLOTS 4
struct regtab_memo {
	uint64_t gen;                 /* of the table, for every slot */
	unsigned next;                /* where to look for a slot to reuse */
	unsigned in_use;              /* slots lent out since the last sync */
	struct {
		struct region *region;    /* a reference; NULL: empty */
		uint64_t client, handle;
		bool is_import;
		uint64_t base, limit;     /* the range the handle grants */
	} slot[REGTAB_MEMO_SLOTS];
};

/*
 * Begin one descriptor: empties m if anything was removed from the table
 * since m was filled.  Ends the loans of the previous descriptor.
 */
void regtab_memo_sync(struct regtab *t, struct regtab_memo *m);
/*
 * regtab_resolve() through memo m, between two regtab_memo_sync() calls
 * (at most REGTAB_MEMO_SLOTS - 1 per descriptor).  The region is lent by
 * the memo, not a new reference: valid until the next sync or release.
 * Same errors.
 */
int regtab_resolve_memo_slow(struct regtab *t, struct regtab_memo *m,
			     uint64_t client, uint64_t handle, uint64_t off,
			     uint64_t len, bool allow_import,
			     struct region **out, uint64_t *region_off);

/* Inline: a hit in the memo is the common case of every descriptor,
 * a few compares (callgrind: the call alone was a fifth of its cost);
 * a miss takes the table's lock in regtab_resolve_memo_slow(). */
static inline int regtab_resolve_memo(struct regtab *t, struct regtab_memo *m,
				      uint64_t client, uint64_t handle,
				      uint64_t off, uint64_t len,
				      bool allow_import, struct region **out,
				      uint64_t *region_off)
{
	for (unsigned i = 0; i < REGTAB_MEMO_SLOTS; i++) {
		if (!m->slot[i].region || m->slot[i].handle != handle ||
		    m->slot[i].client != client ||
		    (!allow_import && m->slot[i].is_import))
			continue;
		uint64_t limit = m->slot[i].limit;
		if (off > limit || len > limit - off)
			return -ERANGE;
		m->in_use |= 1u << i;
		*out = m->slot[i].region;
		*region_off = m->slot[i].base + off;
		return 0;
	}
	return regtab_resolve_memo_slow(t, m, client, handle, off, len,
					allow_import, out, region_off);
}
/* Drop every reference m holds (e.g. before sleeping); m stays usable. */
void regtab_memo_release(struct regtab_memo *m);

struct regtab_counts {
	uint32_t regions, imports;
};
void regtab_count(struct regtab *t, uint64_t client,
		  struct regtab_counts *out);
/* Total over all clients. */
void regtab_count_all(struct regtab *t, struct regtab_counts *out);

/* Call fn for each region (not imports), under the table lock: fn must
 * not call back into the table. */
void regtab_foreach_region(struct regtab *t,
			   void (*fn)(const struct region *r, void *arg),
			   void *arg);

#endif /* XFERD_REGION_H */
