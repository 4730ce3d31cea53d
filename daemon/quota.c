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
	/* Written so that it cannot overflow: both sides stay below the
	 * limit, which is at most UINT64_MAX. */
	if (cfg->max_client_bytes &&
	    (u->region_bytes > cfg->max_client_bytes ||
	     length > cfg->max_client_bytes - u->region_bytes)) {
		*why = "bytes registered by this client would exceed "
		       "max_client_bytes";
		return -EDQUOT;
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

int uid_conn_take(struct uid_table *t, uid_t uid, enum uid_conn_kind kind,
		  uint32_t max)
{
	struct uid_entry *e = uid_find(t, uid);

	if (e && e->count[kind] >= max)
		return -EMFILE;
	if (!e) {
		if (max == 0)
			return -EMFILE;
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		e->uid = uid;
		HASH_ADD(hh, t->head, uid, sizeof(e->uid), e);
		if (!htable_added(e)) {
			free(e);
			return -ENOMEM;
		}
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
	for (int k = 0; k < UID_CONN_KINDS; k++)
		if (e->count[k])
			return;
	HASH_DELETE(hh, t->head, e);
	free(e);
}

uint32_t uid_conn_count(const struct uid_table *t, uid_t uid,
			enum uid_conn_kind kind)
{
	const struct uid_entry *e = uid_find(t, uid);

	return e ? e->count[kind] : 0;
}
