/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uid_usage.c - the per-uid records and their bounds (uid_usage.h).
 * Main thread only (the notify pool inside is the progress thread's).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "core/log.h"
#include "uid_usage.h"

struct uid_usage_table {
	struct uid_usage *head;   /* uthash: the uids something holds */
};

struct uid_usage_table *uid_usage_table_create(void)
{
	return calloc(1, sizeof(struct uid_usage_table));
}

void uid_usage_table_destroy(struct uid_usage_table *t)
{
	struct uid_usage *u, *tmp;

	if (!t)
		return;
	HASH_ITER(hh, t->head, u, tmp) {
		HASH_DELETE(hh, t->head, u);
		free(u);
	}
	free(t);
}

struct uid_usage *uid_usage_get(struct uid_usage_table *t, uid_t uid)
{
	struct uid_usage *u;

	HASH_FIND(hh, t->head, &uid, sizeof(uid), u);
	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u)
			return NULL;
		u->uid = uid;
		atomic_init(&u->notify.held, 0);
		HASH_ADD(hh, t->head, uid, sizeof(u->uid), u);
		if (!htable_added(u)) {
			free(u);
			return NULL;
		}
	}
	u->refs++;
	return u;
}

struct uid_usage *uid_usage_hold(struct uid_usage *u)
{
	u->refs++;
	return u;
}

void uid_usage_put(struct uid_usage_table *t, struct uid_usage *u)
{
	if (!u || --u->refs)
		return;
	/* Each holder gave back what it counted before its put; a count
	 * left here would be a leak in that bookkeeping. */
	uint32_t conns = 0;
	for (int k = 0; k < UID_CONN_KINDS; k++)
		conns += u->conns[k];
	if (conns || u->fds || u->host_bytes || u->regions || u->imports ||
	    u->names || u->lists.lists || u->lists.bytes ||
	    atomic_load_explicit(&u->notify.held, memory_order_relaxed))
		log_warnx("uid %d: usage left at its last holder: %u "
			  "connections, %" PRIu64 " fds, %" PRIu64 " host "
			  "bytes, %u regions, %u imports, %u names, %u lists",
			  (int)u->uid, conns, u->fds, u->host_bytes,
			  u->regions, u->imports, u->names, u->lists.lists);
	HASH_DELETE(hh, t->head, u);
	free(u);
}

int uid_conn_take(struct uid_usage *u, enum uid_conn_kind kind,
		  uint32_t max)
{
	if (u->conns[kind] >= max)
		return -EMFILE;
	u->conns[kind]++;
	return 0;
}

void uid_conn_release(struct uid_usage *u, enum uid_conn_kind kind)
{
	if (u->conns[kind])
		u->conns[kind]--;
}

int uid_usage_check(const struct xferd_config *cfg,
		    const struct uid_usage *u, enum uid_bound res,
		    const char **why)
{
	switch (res) {
	case UID_BOUND_REGIONS:
		if (u->regions < cfg->max_regions_per_uid)
			return 0;
		*why = "too many regions of this user (max_regions_per_uid)";
		return -ENOSPC;
	case UID_BOUND_IMPORTS:
		if (u->imports < cfg->max_imports_per_uid)
			return 0;
		*why = "too many imported tokens of this user "
		       "(max_imports_per_uid)";
		return -ETOOMANYREFS;
	case UID_BOUND_NAMES:
		if (u->names < cfg->max_names_per_uid)
			return 0;
		*why = "too many published names of this user "
		       "(max_names_per_uid)";
		return -EMLINK;
	}
	return 0;
}
