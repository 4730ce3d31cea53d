/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_lists.c - what `xferctl config` and `xferctl names` are told
 * (ctl_lists.h): the key table's values in force and their sources
 * (config.c), and the names (meta/names.h) and prepared lists
 * (mem/dlist.h) of the clients an asker may see.
 *
 * Main thread only; takes no lock but the dlist table's leaf mutex,
 * inside dltab_count/dltab_entries.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "config.h"
#include "meta/names.h"
#include "mem/dlist.h"
#include "ops/ctl_lists.h"
#include "xferd.h"

/* --- config --- */

int ctl_config_fill(struct xferd *d, Xfer__Ctl__ConfigReply *rep)
{
	size_t n = 0;
	char value[CONFIG_VALUE_MAX];

	xfer__ctl__config_reply__init(rep);
	rep->config_path = (char *)(d->config_path ? d->config_path : "");
	while (config_key_name(n))
		n++;
	rep->keys = calloc(n, sizeof(*rep->keys));
	if (!rep->keys)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		Xfer__Ctl__ConfigKey *k = malloc(sizeof(*k));
		if (!k)
			return -ENOMEM;
		xfer__ctl__config_key__init(k);
		rep->keys[rep->n_keys++] = k;
		k->key = (char *)config_key_name(i);
		config_key_value(i, &d->cfg, value, sizeof(value));
		/* "" is the default path: say which one xferd bound. */
		if (!strcmp(k->key, "socket") && !value[0])
			snprintf(value, sizeof(value), "%s", d->socket_path);
		k->value = strdup(value);
		k->source = (char *)config_source_name(
			(enum config_source)d->cfg_src.of[i]);
		if (!k->value)
			return -ENOMEM;
	}
	return 0;
}

void ctl_config_free(Xfer__Ctl__ConfigReply *rep)
{
	for (size_t i = 0; i < rep->n_keys; i++) {
		free(rep->keys[i]->value);
		free(rep->keys[i]);
	}
	free(rep->keys);
	rep->keys = NULL;
	rep->n_keys = 0;
}

/* --- names and lists --- */

/* A growing array of pointers to items the builder allocates. */
struct ptrs {
	void **v;
	size_t n, cap;
	int err;              /* -ENOMEM once out of memory */
};

static void *ptrs_push(struct ptrs *p, size_t size)
{
	void *it;

	if (p->err)
		return NULL;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 16;
		void **v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			goto oom;
		p->v = v;
		p->cap = cap;
	}
	it = calloc(1, size);
	if (!it)
		goto oom;
	p->v[p->n++] = it;
	return it;
oom:
	p->err = -ENOMEM;
	return NULL;
}

struct names_walk {
	struct xferd *d;
	uid_t uid;            /* 0: everyone's */
	const struct client_view *client; /* the one whose names are walked */
	struct ptrs names, lists;
};

static void add_name(void *arg, const char *name, uint32_t uid,
		     uint32_t flags, size_t token_len)
{
	struct names_walk *w = arg;
	const struct client_view *v = w->client;
	Xfer__Ctl__NameInfo *ni = ptrs_push(&w->names, sizeof(*ni));

	if (!ni)
		return;
	xfer__ctl__name_info__init(ni);
	ni->name = strdup(name);
	ni->client_name = strdup(v->name ? v->name : "");
	if (!ni->name || !ni->client_name)
		w->names.err = -ENOMEM;
	ni->uid = uid;
	ni->client = v->id;
	ni->pid = (uint32_t)v->pid;
	ni->shared = (flags & NAMES_SHARED) != 0;
	ni->token_bytes = (uint32_t)token_len;
}

static void add_client(const struct client_view *v, void *arg)
{
	struct names_walk *w = arg;
	unsigned lists;

	if (w->uid != 0 && v->uid != w->uid)
		return;
	w->client = v;
	names_foreach_client(w->d->names, v->id, add_name, w);
	lists = w->d->dlists ? dltab_count(w->d->dlists, v->id) : 0;
	if (!lists)
		return;
	Xfer__Ctl__ClientLists *cl = ptrs_push(&w->lists, sizeof(*cl));
	if (!cl)
		return;
	xfer__ctl__client_lists__init(cl);
	cl->client = v->id;
	cl->pid = (uint32_t)v->pid;
	cl->uid = (uint32_t)v->uid;
	cl->name = strdup(v->name ? v->name : "");
	if (!cl->name)
		w->lists.err = -ENOMEM;
	cl->lists = lists;
	cl->entries = dltab_entries(w->d->dlists, v->id);
}

static int by_uid_name(const void *a, const void *b)
{
	const Xfer__Ctl__NameInfo *x = *(Xfer__Ctl__NameInfo *const *)a;
	const Xfer__Ctl__NameInfo *y = *(Xfer__Ctl__NameInfo *const *)b;

	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

static int by_client(const void *a, const void *b)
{
	const Xfer__Ctl__ClientLists *x = *(Xfer__Ctl__ClientLists *const *)a;
	const Xfer__Ctl__ClientLists *y = *(Xfer__Ctl__ClientLists *const *)b;

	return x->client < y->client ? -1 : x->client > y->client;
}

int ctl_names_fill(struct xferd *d, uid_t uid, Xfer__Ctl__NamesReply *rep)
{
	struct names_walk w = { .d = d, .uid = uid };

	xfer__ctl__names_reply__init(rep);
	rep->all_users = uid == 0;
	client_foreach(d, add_client, &w);
	rep->names = (Xfer__Ctl__NameInfo **)w.names.v;
	rep->n_names = w.names.n;
	rep->lists = (Xfer__Ctl__ClientLists **)w.lists.v;
	rep->n_lists = w.lists.n;
	if (w.names.err || w.lists.err)
		return -ENOMEM;
	if (rep->n_names > 1)
		qsort(rep->names, rep->n_names, sizeof(*rep->names),
		      by_uid_name);
	if (rep->n_lists > 1)
		qsort(rep->lists, rep->n_lists, sizeof(*rep->lists), by_client);
	return 0;
}

void ctl_names_free(Xfer__Ctl__NamesReply *rep)
{
	for (size_t i = 0; i < rep->n_names; i++) {
		free(rep->names[i]->name);
		free(rep->names[i]->client_name);
		free(rep->names[i]);
	}
	free(rep->names);
	for (size_t i = 0; i < rep->n_lists; i++) {
		free(rep->lists[i]->name);
		free(rep->lists[i]);
	}
	free(rep->lists);
	xfer__ctl__names_reply__init(rep);
}
