/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_dlist.c - what xferd does with a DlistCreate's entries and its
 * list table (daemon/mem/dlist.c): dlist_check() on arbitrary offsets
 * and lengths against an arbitrary range, then arbitrary add, remove,
 * get and put operations on a table with small per-client limits.
 *
 * Input: a 24-byte head (entry count up to 64, the range's length, one
 * length for all entries or 0: each its own), the entries (8-byte
 * offsets, then 8-byte lengths), then operations of 4 bytes each (kind,
 * client, target, count).  Missing bytes read as 0.
 *
 * Invariants: dlist_check accepts exactly the entries that are non-empty
 * and inside the range without wrapping (checked in 128-bit arithmetic)
 * and reports their largest end; the table's counts of lists and
 * entries per client always match a model of it, never pass the limits,
 * a list is reachable only by its owner and only while it is in the
 * table, and a reference taken keeps a list readable after its removal.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "mem/dlist.h"

#define MAX_N       64u
#define CLIENTS     3u
#define MAX_LISTS   8u
#define MAX_ENTRIES 100u
#define MAX_ALIVE   64u

struct reader {
	const uint8_t *p;
	size_t left;
};

static uint64_t take(struct reader *r, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t b = 0;
		if (r->left) {
			b = *r->p++;
			r->left--;
		}
		v |= (uint64_t)b << (8 * i);
	}
	return v;
}

static void check_entries(struct reader *in)
{
	uint32_t n = (uint32_t)(take(in, 4) % (MAX_N + 1));
	uint64_t range = take(in, 8), len = take(in, 8);
	bool own = take(in, 4) & 1;
	uint64_t off[MAX_N], lens[MAX_N], end = 0;

	for (uint32_t i = 0; i < n; i++)
		off[i] = take(in, 8);
	for (uint32_t i = 0; i < n && own; i++)
		lens[i] = take(in, 8);

	int rc = dlist_check(n, off, own ? lens : NULL, len, range, &end);
	/* The model: the first bad entry decides, 0 bytes before range. */
	int want = 0;
	unsigned __int128 max = 0;
	for (uint32_t i = 0; i < n && !want; i++) {
		uint64_t l = own ? lens[i] : len;
		unsigned __int128 e = (unsigned __int128)off[i] + l;
		if (l == 0)
			want = -EINVAL;
		else if (e > range)
			want = -ERANGE;
		else if (e > max)
			max = e;
	}
	FUZZ_ASSERT(rc == want);
	FUZZ_ASSERT(rc || end == (uint64_t)max);
}

/* What the table should hold. */
struct model_list {
	uint64_t handle, owner, target;
	uint32_t n;
};

static void check_table(struct reader *in)
{
	static const struct dlist_limits max = { .lists = MAX_LISTS,
						 .entries = MAX_ENTRIES };
	struct model_list alive[MAX_ALIVE];
	unsigned nalive = 0;
	struct dlist *held = NULL;   /* a reference kept across removals */
	uint32_t held_n = 0;
	struct dltab *t = dltab_create();

	FUZZ_ASSERT(t);
	while (in->left) {
		unsigned kind = (unsigned)take(in, 1) % 6;
		uint64_t owner = 1 + take(in, 1) % CLIENTS;
		uint64_t target = 10 + take(in, 1) % 4;
		uint32_t n = 1 + (uint32_t)(take(in, 1) % 40);
		uint64_t pick = nalive ? alive[target % nalive].handle : target;

		switch (kind) {
		case 0: {  /* add */
			uint64_t *off = calloc(n, sizeof(*off)), h = 0;
			FUZZ_ASSERT(off);
			unsigned lists = 0;
			uint64_t entries = 0;
			for (unsigned i = 0; i < nalive; i++)
				if (alive[i].owner == owner) {
					lists++;
					entries += alive[i].n;
				}
			int want = lists >= MAX_LISTS ? -ENOSPC
				 : entries + n > MAX_ENTRIES ? -ENOBUFS
				 : nalive == MAX_ALIVE ? -1 : 0;
			if (want == -1) {  /* the model is full: skip */
				free(off);
				break;
			}
			int rc = dltab_add(t, owner, target, false, n, off,
					   NULL, 8, 8, max, &h);
			FUZZ_ASSERT(rc == want);
			if (rc) {
				free(off);
				break;
			}
			FUZZ_ASSERT(h & DLIST_HANDLE_BIT);
			for (unsigned i = 0; i < nalive; i++)
				FUZZ_ASSERT(alive[i].handle != h);
			alive[nalive++] = (struct model_list){ h, owner,
							       target, n };
			break;
		}
		case 1: {  /* remove one, by any client */
			bool mine = false;
			for (unsigned i = 0; i < nalive; i++)
				if (alive[i].handle == pick &&
				    alive[i].owner == owner) {
					alive[i] = alive[--nalive];
					mine = true;
					break;
				}
			FUZZ_ASSERT(dltab_remove(t, owner, pick) ==
				    (mine ? 0 : -EACCES));
			break;
		}
		case 2:  /* a target goes */
			dltab_remove_target(t, owner, target);
			for (unsigned i = 0; i < nalive;)
				if (alive[i].owner == owner &&
				    alive[i].target == target)
					alive[i] = alive[--nalive];
				else
					i++;
			break;
		case 3:  /* a client goes */
			dltab_remove_client(t, owner);
			for (unsigned i = 0; i < nalive;)
				if (alive[i].owner == owner)
					alive[i] = alive[--nalive];
				else
					i++;
			break;
		case 4: {  /* get: only the owner, only while alive */
			struct dlist *l = dltab_get(t, owner, pick);
			bool ok = false;
			for (unsigned i = 0; i < nalive; i++)
				if (alive[i].handle == pick &&
				    alive[i].owner == owner) {
					ok = true;
					FUZZ_ASSERT(l && l->n == alive[i].n &&
						    l->target == alive[i].target);
				}
			FUZZ_ASSERT(ok == (l != NULL));
			if (l && !held) {
				held = l;  /* kept: removals must not free it */
				held_n = l->n;
			} else {
				dlist_put(l);
			}
			break;
		}
		default:  /* drop the kept reference, reading it first */
			if (held) {
				FUZZ_ASSERT(held->n == held_n &&
					    dlist_len(held, held_n - 1) == 8);
				dlist_put(held);
				held = NULL;
			}
			break;
		}
		for (uint64_t c = 1; c <= CLIENTS; c++) {
			unsigned lists = 0;
			uint64_t entries = 0;
			for (unsigned i = 0; i < nalive; i++)
				if (alive[i].owner == c) {
					lists++;
					entries += alive[i].n;
				}
			FUZZ_ASSERT(dltab_count(t, c) == lists);
			FUZZ_ASSERT(dltab_entries(t, c) == entries);
			FUZZ_ASSERT(lists <= MAX_LISTS &&
				    entries <= MAX_ENTRIES);
		}
		FUZZ_ASSERT(dltab_count(t, 0) == nalive);
	}
	dltab_destroy(t);
	if (held) {
		FUZZ_ASSERT(held->n == held_n);
		dlist_put(held);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct reader in = { data, size };

	check_entries(&in);
	check_table(&in);
	return 0;
}
