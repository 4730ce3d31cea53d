/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_lists.c - xferctl config, names and lists: the configuration
 * in force, key by key with where each value came from (default, the
 * file, a -o override, a reload), and the published names and prepared
 * lists xferd shows the asker (its own; root's: everyone's).
 * Single-threaded, like all of xferctl.
 *
 * Names and client names are untrusted text (chosen by clients): the
 * table cleans them, JSON escapes them.  xferd never sends tokens.
 */
#include <inttypes.h>
#include <stdio.h>

#include "xferctl_lists.h"
#include "xferctl_out.h"

/* --- config --- */

void print_config_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = { "KEY", "VALUE", "SOURCE", NULL };
	const Xfer__Ctl__ConfigReply *rep = r->config_reply;
	struct table t;

	if (!out_csv())
		printf("config file: %s\n",
		       *rep->config_path ? rep->config_path : "none");
	table_init(&t, 0x7, head);
	for (size_t i = 0; i < rep->n_keys; i++) {
		table_row(&t);
		table_set(&t, 0, "%s", rep->keys[i]->key);
		table_set(&t, 1, "%s", rep->keys[i]->value);
		table_set(&t, 2, "%s", rep->keys[i]->source);
	}
	table_print(&t);
}

void print_config_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__ConfigReply *rep = r->config_reply;
	json_object *o = jv_obj(), *list = jv_arr();

	jv_set(o, "config_path", jv_str(rep->config_path));
	for (size_t i = 0; i < rep->n_keys; i++) {
		json_object *j = jv_obj();
		jv_set(j, "key", jv_str(rep->keys[i]->key));
		jv_set(j, "value", jv_str(rep->keys[i]->value));
		jv_set(j, "source", jv_str(rep->keys[i]->source));
		jv_push(list, j);
	}
	jv_set(o, "keys", list);
	jv_print(o);
}

/* --- names --- */

void print_names_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = {
		"UID", "NAME", "SHARED", "CLIENT", "PID", "PROGRAM", "TOKEN",
		NULL
	};
	const Xfer__Ctl__NamesReply *rep = r->names_reply;
	struct table t;

	if (rep->n_names == 0 && !out_csv()) {
		printf("no published names%s\n",
		       rep->all_users ? "" : " of this user");
		return;
	}
	table_init(&t, 1u << 1 | 1u << 2 | 1u << 5, head);
	for (size_t i = 0; i < rep->n_names; i++) {
		const Xfer__Ctl__NameInfo *n = rep->names[i];
		table_row(&t);
		table_set(&t, 0, "%" PRIu32, n->uid);
		table_set(&t, 1, "%s", n->name);
		table_set(&t, 2, "%s", n->shared ? "yes" : "no");
		table_set(&t, 3, "%" PRIu64, n->client);
		table_set(&t, 4, "%" PRIu32, n->pid);
		table_set(&t, 5, "%s", n->client_name);
		table_set(&t, 6, "%" PRIu32, n->token_bytes);
	}
	table_print(&t);
}

void print_names_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__NamesReply *rep = r->names_reply;
	json_object *o = jv_obj(), *list = jv_arr();

	jv_set(o, "all_users", jv_bool(rep->all_users));
	for (size_t i = 0; i < rep->n_names; i++) {
		const Xfer__Ctl__NameInfo *n = rep->names[i];
		json_object *j = jv_obj();
		jv_set(j, "uid", jv_u64(n->uid));
		jv_set(j, "name", jv_str(n->name));
		jv_set(j, "shared", jv_bool(n->shared));
		jv_set(j, "client", jv_u64(n->client));
		jv_set(j, "pid", jv_u64(n->pid));
		jv_set(j, "program", jv_str(n->client_name));
		jv_set(j, "token_bytes", jv_u64(n->token_bytes));
		jv_push(list, j);
	}
	jv_set(o, "names", list);
	jv_print(o);
}

/* --- prepared lists --- */

void print_lists_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = {
		"CLIENT", "PID", "UID", "PROGRAM", "LISTS", "ENTRIES", NULL
	};
	const Xfer__Ctl__NamesReply *rep = r->names_reply;
	struct table t;

	if (rep->n_lists == 0 && !out_csv()) {
		printf("no prepared lists%s\n",
		       rep->all_users ? "" : " of this user");
		return;
	}
	table_init(&t, 1u << 3, head);
	for (size_t i = 0; i < rep->n_lists; i++) {
		const Xfer__Ctl__ClientLists *l = rep->lists[i];
		table_row(&t);
		table_set(&t, 0, "%" PRIu64, l->client);
		table_set(&t, 1, "%" PRIu32, l->pid);
		table_set(&t, 2, "%" PRIu32, l->uid);
		table_set(&t, 3, "%s", l->name);
		table_set(&t, 4, "%" PRIu32, l->lists);
		table_set(&t, 5, "%" PRIu64, l->entries);
	}
	table_print(&t);
}

void print_lists_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__NamesReply *rep = r->names_reply;
	json_object *o = jv_obj(), *list = jv_arr();

	jv_set(o, "all_users", jv_bool(rep->all_users));
	for (size_t i = 0; i < rep->n_lists; i++) {
		const Xfer__Ctl__ClientLists *l = rep->lists[i];
		json_object *j = jv_obj();
		jv_set(j, "client", jv_u64(l->client));
		jv_set(j, "pid", jv_u64(l->pid));
		jv_set(j, "uid", jv_u64(l->uid));
		jv_set(j, "program", jv_str(l->name));
		jv_set(j, "lists", jv_u64(l->lists));
		jv_set(j, "entries", jv_u64(l->entries));
		jv_push(list, j);
	}
	jv_set(o, "lists", list);
	jv_print(o);
}
