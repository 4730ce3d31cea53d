/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_health.c - etcd, held notifications, quota refusals and
 * descriptors in `xferctl status` (text and JSON).  What an operator
 * checks first when a lookup fails or a client is refused: the cause is
 * here, not only in xferd's log.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "xferctl_health.h"

/* An age in milliseconds (-1: never) for people. */
static const char *age_text(char *buf, size_t len, int64_t ms)
{
	char a[32];

	if (ms < 0)
		return "never";
	snprintf(buf, len, "%s ago", fmt_age(a, sizeof(a), (uint64_t)ms));
	return buf;
}

/* "timeout 3, unreachable 1" (the non-zero ones), or "none". */
static const char *kinds_text(char *buf, size_t len,
			      Xfer__Ctl__KindCount *const *k, size_t n)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		if (!k[i]->count)
			continue;
		int w = snprintf(buf + used, len - used, "%s%s %" PRIu64,
				 used ? ", " : "", k[i]->kind, k[i]->count);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	return buf[0] ? buf : "none";
}

void health_text(struct table *kv, const Xfer__Ctl__StatusReply *st)
{
	char a[64], b[64], c[64], e[256];
	const Xfer__Ctl__EtcdHealth *h = st->etcd;

	if (h) {
		table_kv(kv, "etcd", "%s%s (%s)",
			 h->reachable ? "reachable" : "unreachable",
			 h->registered ? ", registered" : ", not registered",
			 *h->endpoint ? h->endpoint : "no endpoint yet");
		table_kv(kv, "etcd answered", "%s",
			 age_text(a, sizeof(a), h->answer_age_ms));
		table_kv(kv, "etcd lease", "renewed %s",
			 age_text(b, sizeof(b), h->lease_age_ms));
		table_kv(kv, "etcd watch", "%s, last event %s",
			 h->watching ? "open" : "closed",
			 age_text(c, sizeof(c), h->watch_age_ms));
		table_kv(kv, "etcd errors", "%s%s%s%s",
			 kinds_text(e, sizeof(e), h->errors, h->n_errors),
			 h->last_error ? " (last: " : "",
			 h->last_error ? strerror(-h->last_error) : "",
			 h->last_error ? ")" : "");
	} else {
		table_kv(kv, "etcd", "not used (metadata is not etcd)");
	}
	table_kv(kv, "notifications", "%" PRIu64 " held, %" PRIu64
		 " refused (ENOBUFS)", st->notify_held, st->notify_refused);
	table_kv(kv, "quota refusals", "%s",
		 kinds_text(e, sizeof(e), st->quota_refusals,
			    st->n_quota_refusals));
	if (st->n_cma_fast_reads)
		table_kv(kv, "CMA fast reads", "%s",
			 kinds_text(e, sizeof(e), st->cma_fast_reads,
				    st->n_cma_fast_reads));
	if (st->max_fds)
		table_kv(kv, "fds", "%" PRIu64 " of %" PRIu64, st->open_fds,
			 st->max_fds);
	else
		table_kv(kv, "fds", "%" PRIu64 " (no limit)", st->open_fds);
}

static json_object *kinds_json(Xfer__Ctl__KindCount *const *k, size_t n)
{
	json_object *o = jv_obj();

	for (size_t i = 0; i < n; i++)
		jv_set(o, k[i]->kind, jv_u64(k[i]->count));
	return o;
}

/* An age (-1: never) as a number or null. */
static json_object *age_json(int64_t ms)
{
	return ms < 0 ? NULL : jv_u64((uint64_t)ms);
}

void health_json(json_object *o, const Xfer__Ctl__StatusReply *st)
{
	const Xfer__Ctl__EtcdHealth *h = st->etcd;

	if (h) {
		json_object *e = jv_obj();
		jv_set(e, "reachable", jv_bool(h->reachable));
		jv_set(e, "registered", jv_bool(h->registered));
		jv_set(e, "watching", jv_bool(h->watching));
		jv_set(e, "endpoint", jv_str(h->endpoint));
		jv_set(e, "answer_age_ms", age_json(h->answer_age_ms));
		jv_set(e, "lease_age_ms", age_json(h->lease_age_ms));
		jv_set(e, "watch_age_ms", age_json(h->watch_age_ms));
		jv_set(e, "errors", kinds_json(h->errors, h->n_errors));
		jv_set(e, "last_error", h->last_error
		       ? jv_str(strerror(-h->last_error)) : NULL);
		jv_set(o, "etcd", e);
	} else {
		jv_set(o, "etcd", NULL);
	}
	json_object *n = jv_obj();
	jv_set(n, "held", jv_u64(st->notify_held));
	jv_set(n, "refused", jv_u64(st->notify_refused));
	jv_set(o, "notifications", n);
	jv_set(o, "quota_refusals",
	       kinds_json(st->quota_refusals, st->n_quota_refusals));
	jv_set(o, "cma_fast_reads",
	       kinds_json(st->cma_fast_reads, st->n_cma_fast_reads));
	jv_set(o, "open_fds", jv_u64(st->open_fds));
	jv_set(o, "max_fds", st->max_fds ? jv_u64(st->max_fds) : NULL);
}
