/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlist.h - prepared descriptor lists: ranges inside one region or one
 * imported token, checked once when made and named by a handle, so that
 * one SQE can move thousands of them by index (XFER_OP_WRITE_DLIST,
 * _READ_DLIST in include/xfer_ring.h).
 *
 * A list ranges over a target: a handle of its client, either a region
 * it registered or a token it imported.  Offsets are relative to the
 * handle's range (the whole region, or the token's range), exactly as an
 * SQE's local_off/remote_off are.  Bounds are checked against that range
 * when the list is made; the target itself is resolved again on every
 * use (so a list whose region or import went fails then, -EACCES or
 * -ESTALE, and moves nothing).  Lists also go when their target is
 * removed and when their client goes.
 *
 * List handles have bit 63 set and region handles never do, so that a
 * region handle where a list is expected (or the reverse) is refused,
 * never taken for something else.
 *
 * The table is made and changed on the main thread and read by the
 * progress thread; its mutex is a leaf lock.  Lists are refcounted: a
 * transfer holds the lists it uses, so destroying one under a transfer
 * frees it only when the transfer is done.
 *
 * The progress thread takes that mutex for every list descriptor, so
 * nothing done under it may grow with the lists of other clients: lists
 * are indexed by handle, by owner (its counts, kept as lists come and go)
 * and by (owner, target), so adding, removing, a target's removal and a
 * client's leaving cost O(1) or O(the lists concerned).
 */
#ifndef XFERD_DLIST_H
#define XFERD_DLIST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define DLIST_HANDLE_BIT (1ull << 63)

struct gpu_list;

struct dlist {
	uint64_t handle;
	uint64_t owner;           /* client id */
	uint64_t target;          /* region or import handle */
	bool is_import;
	uint32_t n;
	uint64_t len;             /* every entry's length, or 0: lens[] */
	uint64_t *off;            /* n offsets within the target's range */
	uint64_t *lens;           /* n lengths, or NULL */
	uint64_t end;             /* max(off + length): within the range */
	/* Uploaded to GPU i for indexed copies (progress thread only; see
	 * gpu/gpu.h), NULL until first used there. */
	struct gpu_list **gpu;
	_Atomic unsigned refs;
};

/* Entry i's length. */
static inline uint64_t dlist_len(const struct dlist *l, uint32_t i)
{
	return l->lens ? l->lens[i] : l->len;
}

/*
 * Check n entries (offsets off[], lengths lens[] or each len when lens
 * is NULL) against a range of range_len bytes: every entry non-empty,
 * no offset + length overflowing or past the range.  Returns 0 and the
 * largest end in *end, or -EINVAL (an empty entry) / -ERANGE.  Pure.
 */
int dlist_check(uint32_t n, const uint64_t *off, const uint64_t *lens,
		uint64_t len, uint64_t range_len, uint64_t *end);

struct dltab;

struct dltab *dltab_create(void);
/* Frees every list; no thread may use the table any more. */
void dltab_destroy(struct dltab *t);

/*
 * What the lists of one user (uid) hold, over all its clients: charged
 * when a list enters the table and given back when it leaves it.  The
 * caller owns it (uid_usage.h); the table only adds and subtracts, under its
 * mutex, on the main thread.
 */
struct dlist_usage {
	uint32_t lists;
	uint64_t bytes;
};

/* What one list costs xferd: its entries and its bookkeeping. */
uint64_t dlist_bytes(uint32_t n, bool has_lens);

/*
 * What one client may hold: lists, and entries over all its lists (each
 * entry is 8 or 16 bytes of xferd's memory, so the count of lists alone
 * would let one client take gigabytes).  With uid set, also what all
 * clients of its user may hold together (a user opens as many clients
 * as max_connections_per_uid allows): uid_lists lists, uid_bytes bytes
 * (dlist_bytes()).  An owner's lists are charged to the uid usage given
 * with its first list; every later add of that owner must give the same.
 */
struct dlist_limits {
	uint32_t lists;
	uint64_t entries;
	struct dlist_usage *uid;  /* NULL: no per-uid bound */
	uint32_t uid_lists;
	uint64_t uid_bytes;
};

/*
 * Add a list of client owner over target (already checked with
 * dlist_check against it); the table takes off and lens (malloc'd).
 * Past the client's or its user's limits: -ENOSPC (lists) or -ENOBUFS
 * (entries, bytes).  Sets *handle.
 */
int dltab_add(struct dltab *t, uint64_t owner, uint64_t target,
	      bool is_import, uint32_t n, uint64_t *off, uint64_t *lens,
	      uint64_t len, uint64_t end, struct dlist_limits max,
	      uint64_t *handle);
/* Remove one list of owner: -EACCES if it has none of that handle. */
int dltab_remove(struct dltab *t, uint64_t owner, uint64_t handle);
/* Remove owner's lists over target (the region or import went). */
void dltab_remove_target(struct dltab *t, uint64_t owner, uint64_t target);
/* Remove every list of owner (the client went). */
void dltab_remove_client(struct dltab *t, uint64_t owner);
/* Lists of owner (0: all clients). */
unsigned dltab_count(struct dltab *t, uint64_t owner);
/* Entries over all lists of owner (0: all clients). */
uint64_t dltab_entries(struct dltab *t, uint64_t owner);
/* Lists visited by the table's scans so far (removals by target or
 * client): what tests count to show that work follows the lists
 * concerned, never all of them. */
uint64_t dltab_visits(struct dltab *t);

/* A reference to owner's list handle, or NULL. */
struct dlist *dltab_get(struct dltab *t, uint64_t owner, uint64_t handle);
void dlist_get(struct dlist *l);
/* Drop a reference; the last frees (GPU copies too).  Accepts NULL. */
void dlist_put(struct dlist *l);

#endif /* XFERD_DLIST_H */
