/* SPDX-License-Identifier: Apache-2.0 */
/*
 * quota.c - per-client and per-uid limits (quota.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "common/htable.h"
#include "quota.h"

int quota_check_region(const struct xferd_config *cfg,
			const struct client_usage *u, uint64_t length,
			const char **why)
{
	if (length > cfg->max_region_bytes) {
		*why = "region larger than max_region_bytes";
		return -EFBIG;
	}
	if (u->regions >= cfg->max_regions) {
		*why = "too many regions of this client (max_regions)";
		return -ENOSPC;
	}
	return 0;
}

int quota_check_import(const struct xferd_config *cfg,
			const struct client_usage *u, const char **why)
{
	if (u->imports >= cfg->max_imports) {
		*why = "too many imported tokens of this client (max_imports)";
		return -ETOOMANYREFS;
	}
	return 0;
}

/* --- connections per uid --- */

struct uid_entry {
	UT_hash_handle hh;       /* uid_table.head, key: uid */
	uid_t uid;
	uint32_t count[UID_CONN_KINDS];
	uint64_t amount[UID_RES_KINDS];
};

struct uid_table {
	struct uid_entry *head;  /* uthash; an entry goes with its last
				  * connection, so it holds the users that
				  * are connected, no more */
};

struct uid_table *uid_table_create(void)
{
	return calloc(1, sizeof(struct uid_table));
}

void uid_table_destroy(struct uid_table *t)
{
	struct uid_entry *e, *tmp;

	if (!t)
		return;
	HASH_ITER(hh, t->head, e, tmp) {
		HASH_DELETE(hh, t->head, e);
		free(e);
	}
	free(t);
}

static struct uid_entry *uid_find(const struct uid_table *t, uid_t uid)
{
	struct uid_entry *e;

	HASH_FIND(hh, t->head, &uid, sizeof(uid), e);
	return e;
}

static struct uid_entry *uid_add(struct uid_table *t, uid_t uid)
{
	struct uid_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->uid = uid;
	HASH_ADD(hh, t->head, uid, sizeof(e->uid), e);
	if (!htable_added(e)) {
		free(e);
		return NULL;
	}
	return e;
}

/* The entry goes with its last count. */
static void uid_maybe_free(struct uid_table *t, struct uid_entry *e)
{
	for (int k = 0; k < UID_CONN_KINDS; k++)
		if (e->count[k])
			return;
	for (int r = 0; r < UID_RES_KINDS; r++)
		if (e->amount[r])
			return;
	HASH_DELETE(hh, t->head, e);
	free(e);
}

int uid_conn_take(struct uid_table *t, uid_t uid, enum uid_conn_kind kind,
		  uint32_t max)
{
	struct uid_entry *e = uid_find(t, uid);

	if (e && e->count[kind] >= max)
		return -EMFILE;
	if (!e) {
		if (max == 0)
			return -EMFILE;
		if (!(e = uid_add(t, uid)))
			return -ENOMEM;
	}
	e->count[kind]++;
	return 0;
}

void uid_conn_release(struct uid_table *t, uid_t uid,
		      enum uid_conn_kind kind)
{
	struct uid_entry *e = uid_find(t, uid);

	if (!e || e->count[kind] == 0)
		return;
	e->count[kind]--;
	uid_maybe_free(t, e);
}

uint32_t uid_conn_count(const struct uid_table *t, uid_t uid,
			enum uid_conn_kind kind)
{
	const struct uid_entry *e = uid_find(t, uid);

	return e ? e->count[kind] : 0;
}

/* --- amounts per uid --- */

int uid_res_take(struct uid_table *t, uid_t uid, enum uid_res res,
		 uint64_t n, uint64_t max)
{
	struct uid_entry *e = uid_find(t, uid);
	uint64_t have = e ? e->amount[res] : 0;

	/* Written so that it cannot overflow: have never exceeds max. */
	if (have > max || n > max - have)
		return -EDQUOT;
	if (n == 0)
		return 0;
	if (!e && !(e = uid_add(t, uid)))
		return -ENOMEM;
	e->amount[res] += n;
	return 0;
}

void uid_res_release(struct uid_table *t, uid_t uid, enum uid_res res,
		     uint64_t n)
{
	struct uid_entry *e = uid_find(t, uid);

	if (!e || n == 0)
		return;
	e->amount[res] -= n < e->amount[res] ? n : e->amount[res];
	uid_maybe_free(t, e);
}

uint64_t uid_res_count(const struct uid_table *t, uid_t uid,
		       enum uid_res res)
{
	const struct uid_entry *e = uid_find(t, uid);

	return e ? e->amount[res] : 0;
}
