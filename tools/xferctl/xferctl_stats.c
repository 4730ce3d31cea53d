/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_stats.c - xferctl stats and xferctl top.
 *
 * stats prints one StatsReply (ctl.proto): the per-path counters,
 * latency histograms and errors by errno, the busiest clients, the peer
 * links, the rails.  top asks for one every interval and prints rates:
 * the difference of two replies over the time between them, and the
 * latency percentiles of the completions in between (from the
 * difference of the histograms).  Plain ANSI: clear the screen, print,
 * wait for the next tick or a 'q' on a terminal in non-canonical mode.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "xferctl_out.h"
#include "xferctl_stats.h"

static const char *errno_text(uint32_t e, char buf[16])
{
	const char *name = e ? strerrorname_np((int)e) : NULL;

	if (name)
		return name;
	if (!e)
		return "other";
	snprintf(buf, 16, "E%" PRIu32, e);
	return buf;
}

/* A latency in ns for people: "850 ns", "12.0 us", "3.50 ms", "1.20 s". */
static const char *fmt_lat(char *buf, size_t len, uint64_t ns)
{
	return fmt_rtt(buf, len, ns);
}

/*
 * The q-quantile of the completions in histogram lat (n buckets, the
 * last beyond every bound), as the upper bound of the bucket it falls
 * in; UINT64_MAX: beyond the last bound; 0: no completions.
 */
static uint64_t quantile(const uint64_t *lat, const uint64_t *prev, size_t n,
			 const uint64_t *bounds, size_t nb, double q)
{
	uint64_t total = 0, seen = 0;

	for (size_t i = 0; i < n; i++)
		total += lat[i] - (prev ? prev[i] : 0);
	if (!total)
		return 0;
	uint64_t want = (uint64_t)(q * (double)total);
	if (want == 0)
		want = 1;
	for (size_t i = 0; i < n; i++) {
		seen += lat[i] - (prev ? prev[i] : 0);
		if (seen >= want)
			return i < nb ? bounds[i] : UINT64_MAX;
	}
	return UINT64_MAX;
}

static const char *fmt_quantile(char *buf, size_t len, uint64_t v)
{
	char t[32];

	if (v == 0)
		return "-";
	if (v == UINT64_MAX) {
		snprintf(buf, len, ">10 s");
		return buf;
	}
	snprintf(buf, len, "<=%s", fmt_lat(t, sizeof(t), v));
	return buf;
}

static uint64_t path_failed(const Xfer__Ctl__PathStats *p)
{
	uint64_t n = 0;

	for (size_t i = 0; i < p->n_errors; i++)
		n += p->errors[i]->count;
	return n;
}

static uint64_t path_completions(const Xfer__Ctl__PathStats *p)
{
	uint64_t n = 0;

	for (size_t i = 0; i < p->n_latency; i++)
		n += p->latency[i];
	return n;
}

/* --- xferctl stats --- */

/* Classes, then tenants: one table, the NAME column says which. */
static void print_classes_text(const Xfer__Ctl__StatsReply *s)
{
	static const char *const h[] = { "CLASS/TENANT", "QUEUED",
		"QUEUED-BYTES", "OPS", "BYTES", "MEAN-WAIT", "PACED", NULL };
	char b[32], c[32], d[32];
	struct table t;

	if (!s->n_classes && !s->n_tenants)
		return;
	putchar('\n');
	table_init(&t, 1u, h);
	for (size_t i = 0; i < s->n_classes + s->n_tenants; i++) {
		bool tenant = i >= s->n_classes;
		const Xfer__Ctl__ClassStats *k =
			tenant ? s->tenants[i - s->n_classes] : s->classes[i];
		uint64_t n = 0;
		for (size_t w = 0; w < k->n_wait; w++)
			n += k->wait[w];
		table_row(&t);
		table_set(&t, 0, "%s %s%s", tenant ? "tenant" : "class", k->name,
			  k->removed ? " (removed)" : "");
		table_set(&t, 1, "%" PRIu64, k->queued_ops);
		table_set(&t, 2, "%s", fmt_bytes(b, sizeof(b), k->queued_bytes));
		table_set(&t, 3, "%" PRIu64, k->ops);
		table_set(&t, 4, "%s", fmt_bytes(c, sizeof(c), k->bytes));
		table_set(&t, 5, "%s", n ? fmt_lat(d, sizeof(d),
			  k->wait_sum_ns / n) : "-");
		table_set(&t, 6, tenant ? "%" PRIu64 : "-", k->paced);
	}
	table_print(&t);
	printf("(%" PRIu64 " latency descriptors moved as bulk)\n",
	       s->demoted);
}

static json_object *class_json(const Xfer__Ctl__ClassStats *k, bool tenant)
{
	json_object *j = jv_obj(), *w = jv_arr();

	jv_set(j, "name", jv_str(k->name));
	jv_set(j, "queued_ops", jv_u64(k->queued_ops));
	jv_set(j, "queued_bytes", jv_u64(k->queued_bytes));
	jv_set(j, "ops", jv_u64(k->ops));
	jv_set(j, "bytes", jv_u64(k->bytes));
	for (size_t i = 0; i < k->n_wait; i++)
		jv_push(w, jv_u64(k->wait[i]));
	jv_set(j, "wait", w);
	jv_set(j, "wait_sum_ns", jv_u64(k->wait_sum_ns));
	if (tenant) {
		jv_set(j, "paced", jv_u64(k->paced));
		jv_set(j, "removed", jv_bool(k->removed));
	}
	return j;
}

void print_stats_text(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__StatsReply *s = r->stats_reply;
	const Xfer__Ctl__StatusReply *st = s->status;
	char b[32], c[32], d[32];
	struct table t;

	if (st)
		printf("xferd %s, pid %" PRIu32 ", up %s, %" PRIu32
		       " clients, %" PRIu64 " completions (%" PRIu64
		       " failed)\n\n", st->version, st->pid,
		       fmt_age(b, sizeof(b), st->uptime_ms), st->clients,
		       st->ops_completed, st->ops_failed);

	static const char *const ph[] = { "PATH", "OPS", "BYTES", "DONE",
		"FAILED", "MEAN", "P50", "P99", NULL };
	table_init(&t, 1u << 0, ph);
	for (size_t i = 0; i < s->n_paths; i++) {
		const Xfer__Ctl__PathStats *p = s->paths[i];
		uint64_t done = path_completions(p);
		table_row(&t);
		table_set(&t, 0, "%s", p->path);
		table_set(&t, 1, "%" PRIu64, p->ops);
		table_set(&t, 2, "%s", fmt_bytes(b, sizeof(b), p->bytes));
		table_set(&t, 3, "%" PRIu64, done);
		table_set(&t, 4, "%" PRIu64, path_failed(p));
		table_set(&t, 5, "%s", done ? fmt_lat(b, sizeof(b),
			  p->latency_sum_ns / done) : "-");
		table_set(&t, 6, "%s", fmt_quantile(c, sizeof(c),
			  quantile(p->latency, NULL, p->n_latency,
				   s->latency_bounds_ns,
				   s->n_latency_bounds_ns, 0.5)));
		table_set(&t, 7, "%s", fmt_quantile(d, sizeof(d),
			  quantile(p->latency, NULL, p->n_latency,
				   s->latency_bounds_ns,
				   s->n_latency_bounds_ns, 0.99)));
	}
	table_print(&t);

	bool any = false;
	for (size_t i = 0; i < s->n_paths; i++)
		any |= s->paths[i]->n_errors > 0;
	if (any) {
		static const char *const eh[] = { "PATH", "ERRNO", "COUNT", NULL };
		putchar('\n');
		table_init(&t, 3u, eh);
		for (size_t i = 0; i < s->n_paths; i++)
			for (size_t j = 0; j < s->paths[i]->n_errors; j++) {
				const Xfer__Ctl__ErrnoCount *e =
					s->paths[i]->errors[j];
				table_row(&t);
				table_set(&t, 0, "%s", s->paths[i]->path);
				table_set(&t, 1, "%s",
					  errno_text(e->errno_value, b));
				table_set(&t, 2, "%" PRIu64, e->count);
			}
		table_print(&t);
	}

	/* Where staged streams (GPU memory on a link) spend their time;
	 * only once some stream went through the pool. */
	const Xfer__Ctl__StagingPool *sp = st ? st->staging : NULL;
	uint64_t staged = 0;
	for (size_t i = 0; sp && i < sp->n_clocks; i++)
		staged += sp->clocks[i]->count;
	if (staged) {
		static const char *const sh[] = { "STAGING", "COUNT", "TIME",
			"MEAN", NULL };
		putchar('\n');
		table_init(&t, 1u << 0, sh);
		for (size_t i = 0; i < sp->n_clocks; i++) {
			const Xfer__Ctl__StagingClock *ck = sp->clocks[i];
			table_row(&t);
			table_set(&t, 0, "%s", ck->stage);
			table_set(&t, 1, "%" PRIu64, ck->count);
			table_set(&t, 2, "%.3f ms", (double)ck->ns / 1e6);
			table_set(&t, 3, "%s", ck->count ? fmt_lat(b, sizeof(b),
				  ck->ns / ck->count) : "-");
		}
		table_print(&t);
	}

	if (s->n_clients) {
		static const char *const ch[] = { "UID", "CLIENT", "PROCS",
			"CONNS", "OPS", "FAILED", "BYTES", "IN-FLIGHT",
			"NOTIFY-HELD", NULL };
		putchar('\n');
		table_init(&t, 1u << 1, ch);
		for (size_t i = 0; i <= s->n_clients; i++) {
			const Xfer__Ctl__ClientStats *cl =
				i < s->n_clients ? s->clients[i] : s->other;
			if (!cl)
				break;
			table_row(&t);
			if (i < s->n_clients)
				table_set(&t, 0, "%" PRIu32, cl->uid);
			table_set(&t, 1, "%s", cl->name);
			table_set(&t, 2, "%" PRIu32, cl->processes);
			table_set(&t, 3, "%" PRIu32, cl->connections);
			table_set(&t, 4, "%" PRIu64, cl->ops);
			table_set(&t, 5, "%" PRIu64, cl->failed);
			table_set(&t, 6, "%s", fmt_bytes(b, sizeof(b), cl->bytes));
			table_set(&t, 7, "%" PRIu64, cl->in_flight);
			table_set(&t, 8, "%" PRIu64, cl->notify_held);
		}
		table_print(&t);
	}

	if (s->n_peers) {
		static const char *const eh[] = { "PEER", "STATE", "RTT", "SENT",
			"RECEIVED", "OPS", "ERRORS", "RECONNECTS", NULL };
		putchar('\n');
		table_init(&t, 3u, eh);
		for (size_t i = 0; i < s->n_peers; i++) {
			const Xfer__Ctl__PeerStats *p = s->peers[i];
			table_row(&t);
			table_set(&t, 0, "%s", p->name);
			table_set(&t, 1, "%s", p->state);
			table_set(&t, 2, "%s", p->rtt_ns ? fmt_rtt(b, sizeof(b),
				  p->rtt_ns) : "-");
			table_set(&t, 3, "%s", fmt_bytes(c, sizeof(c), p->bytes_tx));
			table_set(&t, 4, "%s", fmt_bytes(d, sizeof(d), p->bytes_rx));
			table_set(&t, 5, "%" PRIu64, p->ops);
			table_set(&t, 6, "%" PRIu64, p->errors);
			table_set(&t, 7, "%" PRIu64, p->reconnects);
		}
		table_print(&t);
		if (s->peers_left_out)
			printf("(%" PRIu32 " more peers not listed)\n",
			       s->peers_left_out);
	}

	if (s->n_rails) {
		static const char *const rh[] = { "RAIL", "QPS", "SENT",
			"RECEIVED", "WRS", "WR-ERRORS", NULL };
		putchar('\n');
		table_init(&t, 1u, rh);
		for (size_t i = 0; i < s->n_rails; i++) {
			const Xfer__Ctl__RailStats *rl = s->rails[i];
			table_row(&t);
			table_set(&t, 0, "%s/%" PRIu32, rl->device, rl->port);
			table_set(&t, 1, "%" PRIu32, rl->qps);
			table_set(&t, 2, "%s", fmt_bytes(b, sizeof(b), rl->bytes_tx));
			table_set(&t, 3, "%s", fmt_bytes(c, sizeof(c), rl->bytes_rx));
			table_set(&t, 4, "%" PRIu64, rl->wrs);
			table_set(&t, 5, "%" PRIu64, rl->errors);
		}
		table_print(&t);
	}

	print_classes_text(s);

	if (st && st->rcache)
		printf("\nrcache: %" PRIu32 " entries, %s, %" PRIu64 " hits, %"
		       PRIu64 " misses, %" PRIu64 " evictions; gpus: %" PRIu32
		       ", %" PRIu32 " imports\n", st->rcache->entries,
		       fmt_bytes(b, sizeof(b), st->rcache->bytes),
		       st->rcache->hits, st->rcache->misses,
		       st->rcache->evictions, s->gpus, s->gpu_imports);
}

static json_object *client_json(const Xfer__Ctl__ClientStats *c)
{
	json_object *j = jv_obj();

	jv_set(j, "uid", jv_u64(c->uid));
	jv_set(j, "pid", jv_u64(c->pid));
	jv_set(j, "name", jv_str(c->name));
	jv_set(j, "processes", jv_u64(c->processes));
	jv_set(j, "notify_held", jv_u64(c->notify_held));
	jv_set(j, "notify_refused", jv_u64(c->notify_refused));
	jv_set(j, "connections", jv_u64(c->connections));
	jv_set(j, "ops", jv_u64(c->ops));
	jv_set(j, "failed", jv_u64(c->failed));
	jv_set(j, "bytes", jv_u64(c->bytes));
	jv_set(j, "in_flight", jv_u64(c->in_flight));
	return j;
}

void print_stats_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__StatsReply *s = r->stats_reply;
	const Xfer__Ctl__StatusReply *st = s->status;
	json_object *o = jv_obj(), *a;
	char b[16];

	if (st) {
		jv_set(o, "version", jv_str(st->version));
		jv_set(o, "pid", jv_u64(st->pid));
		jv_set(o, "uptime_ms", jv_u64(st->uptime_ms));
		jv_set(o, "clients", jv_u64(st->clients));
		jv_set(o, "ops_completed", jv_u64(st->ops_completed));
		jv_set(o, "ops_failed", jv_u64(st->ops_failed));
		jv_set(o, "rss_bytes", jv_u64(st->rss_bytes));
		if (st->rcache) {
			json_object *c = jv_obj();
			jv_set(c, "entries", jv_u64(st->rcache->entries));
			jv_set(c, "bytes", jv_u64(st->rcache->bytes));
			jv_set(c, "hits", jv_u64(st->rcache->hits));
			jv_set(c, "misses", jv_u64(st->rcache->misses));
			jv_set(c, "evictions", jv_u64(st->rcache->evictions));
			jv_set(o, "rcache", c);
		}
	}
	a = jv_arr();
	for (size_t i = 0; i < s->n_latency_bounds_ns; i++)
		jv_push(a, jv_u64(s->latency_bounds_ns[i]));
	jv_set(o, "latency_bounds_ns", a);
	a = jv_arr();
	for (size_t i = 0; i < s->n_paths; i++) {
		const Xfer__Ctl__PathStats *p = s->paths[i];
		json_object *j = jv_obj(), *l = jv_arr(), *e = jv_obj();
		jv_set(j, "path", jv_str(p->path));
		jv_set(j, "ops", jv_u64(p->ops));
		jv_set(j, "bytes", jv_u64(p->bytes));
		jv_set(j, "completions", jv_u64(path_completions(p)));
		for (size_t k = 0; k < p->n_latency; k++)
			jv_push(l, jv_u64(p->latency[k]));
		jv_set(j, "latency", l);
		jv_set(j, "latency_sum_ns", jv_u64(p->latency_sum_ns));
		for (size_t k = 0; k < p->n_errors; k++)
			jv_set(e, errno_text(p->errors[k]->errno_value, b),
			       jv_u64(p->errors[k]->count));
		jv_set(j, "errors", e);
		jv_push(a, j);
	}
	jv_set(o, "paths", a);
	a = jv_arr();
	for (size_t i = 0; i < s->n_clients; i++)
		jv_push(a, client_json(s->clients[i]));
	jv_set(o, "clients", a);
	jv_set(o, "other_clients", s->other ? client_json(s->other) : NULL);
	a = jv_arr();
	for (size_t i = 0; i < s->n_peers; i++) {
		const Xfer__Ctl__PeerStats *p = s->peers[i];
		json_object *j = jv_obj();
		jv_set(j, "name", jv_str(p->name));
		jv_set(j, "state", jv_str(p->state));
		jv_set(j, "rtt_ns", jv_u64(p->rtt_ns));
		jv_set(j, "bytes_tx", jv_u64(p->bytes_tx));
		jv_set(j, "bytes_rx", jv_u64(p->bytes_rx));
		jv_set(j, "ops", jv_u64(p->ops));
		jv_set(j, "errors", jv_u64(p->errors));
		jv_set(j, "reconnects", jv_u64(p->reconnects));
		jv_push(a, j);
	}
	jv_set(o, "peers", a);
	jv_set(o, "peers_left_out", jv_u64(s->peers_left_out));
	a = jv_arr();
	for (size_t i = 0; i < s->n_rails; i++) {
		const Xfer__Ctl__RailStats *rl = s->rails[i];
		json_object *j = jv_obj();
		jv_set(j, "device", jv_str(rl->device));
		jv_set(j, "port", jv_u64(rl->port));
		jv_set(j, "qps", jv_u64(rl->qps));
		jv_set(j, "bytes_tx", jv_u64(rl->bytes_tx));
		jv_set(j, "bytes_rx", jv_u64(rl->bytes_rx));
		jv_set(j, "wrs", jv_u64(rl->wrs));
		jv_set(j, "errors", jv_u64(rl->errors));
		jv_push(a, j);
	}
	jv_set(o, "rails", a);
	jv_set(o, "gpus", jv_u64(s->gpus));
	jv_set(o, "gpu_imports", jv_u64(s->gpu_imports));
	a = jv_arr();
	for (size_t i = 0; i < s->n_classes; i++)
		jv_push(a, class_json(s->classes[i], false));
	jv_set(o, "classes", a);
	a = jv_arr();
	for (size_t i = 0; i < s->n_tenants; i++)
		jv_push(a, class_json(s->tenants[i], true));
	jv_set(o, "tenants", a);
	jv_set(o, "demoted", jv_u64(s->demoted));
	jv_print(o);
}

/* --- xferctl top --- */

static double per_s(uint64_t now, uint64_t before, double secs)
{
	return now >= before && secs > 0 ? (double)(now - before) / secs : 0;
}

static const char *fmt_rate(char *buf, size_t len, double bytes_per_s)
{
	char t[32];

	snprintf(buf, len, "%s/s", fmt_bytes(t, sizeof(t),
					    (uint64_t)(bytes_per_s + 0.5)));
	return buf;
}

static const Xfer__Ctl__PathStats *find_path(const Xfer__Ctl__StatsReply *s,
					     const char *name)
{
	for (size_t i = 0; s && i < s->n_paths; i++)
		if (!strcmp(s->paths[i]->path, name))
			return s->paths[i];
	return NULL;
}

static const Xfer__Ctl__ClientStats *
find_client(const Xfer__Ctl__StatsReply *s, const Xfer__Ctl__ClientStats *c)
{
	/* A row is a (uid, name): xferd sums a program's processes. */
	for (size_t i = 0; s && i < s->n_clients; i++)
		if (s->clients[i]->uid == c->uid &&
		    !strcmp(s->clients[i]->name, c->name))
			return s->clients[i];
	return NULL;
}

static const Xfer__Ctl__PeerStats *find_peer(const Xfer__Ctl__StatsReply *s,
					     const char *name)
{
	for (size_t i = 0; s && i < s->n_peers; i++)
		if (!strcmp(s->peers[i]->name, name))
			return s->peers[i];
	return NULL;
}

static const Xfer__Ctl__ClassStats *
find_class(Xfer__Ctl__ClassStats *const *k, size_t n, const char *name)
{
	for (size_t i = 0; k && i < n; i++)
		if (!strcmp(k[i]->name, name))
			return k[i];
	return NULL;
}

/* One line for the classes, a table for the tenants. */
static void top_classes(const Xfer__Ctl__StatsReply *cur,
			const Xfer__Ctl__StatsReply *prev, double secs)
{
	static const char *const th[] = { "TENANT", "OPS/S", "BYTES/S",
		"QUEUED", "PACED/S", NULL };
	char b[32];
	struct table t;

	if (!cur->n_classes)
		return;
	printf("\nclasses:");
	for (size_t i = 0; i < cur->n_classes; i++) {
		const Xfer__Ctl__ClassStats *k = cur->classes[i];
		const Xfer__Ctl__ClassStats *q = prev ? find_class(
			prev->classes, prev->n_classes, k->name) : NULL;
		printf("%s %s %.0f ops/s %s, %" PRIu64 " queued",
		       i ? ";" : "", k->name,
		       per_s(k->ops, q ? q->ops : 0, secs),
		       fmt_rate(b, sizeof(b), per_s(k->bytes, q ? q->bytes : 0,
						   secs)), k->queued_ops);
	}
	printf("; %" PRIu64 " demoted\n\n", cur->demoted);
	table_init(&t, 1u, th);
	for (size_t i = 0; i < cur->n_tenants; i++) {
		const Xfer__Ctl__ClassStats *k = cur->tenants[i];
		const Xfer__Ctl__ClassStats *q = prev ? find_class(
			prev->tenants, prev->n_tenants, k->name) : NULL;
		table_row(&t);
		table_set(&t, 0, "%s%s", k->name, k->removed ? " (removed)" : "");
		table_set(&t, 1, "%.0f", per_s(k->ops, q ? q->ops : 0, secs));
		table_set(&t, 2, "%s", fmt_rate(b, sizeof(b), per_s(k->bytes,
				 q ? q->bytes : 0, secs)));
		table_set(&t, 3, "%" PRIu64, k->queued_ops);
		table_set(&t, 4, "%.0f", per_s(k->paced, q ? q->paced : 0,
					       secs));
	}
	table_print(&t);
}

/* One frame: the rates between prev and cur, secs apart. */
static void top_frame(const Xfer__Ctl__StatsReply *cur,
		      const Xfer__Ctl__StatsReply *prev, double secs)
{
	char b[32], c[32], d[32];
	struct table t;
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(b, sizeof(b), "%H:%M:%S", &tm);
	printf("xferctl top - %s, %" PRIu32 " clients, every %.1f s "
	       "(q quits)\n\n", b, cur->status ? cur->status->clients : 0,
	       secs);

	static const char *const ph[] = { "PATH", "OPS/S", "BYTES/S",
		"ERRORS/S", "P50", "P99", NULL };
	table_init(&t, 1u << 0, ph);
	for (size_t i = 0; i < cur->n_paths; i++) {
		const Xfer__Ctl__PathStats *p = cur->paths[i];
		const Xfer__Ctl__PathStats *q = find_path(prev, p->path);
		bool hist = q && q->n_latency == p->n_latency;
		table_row(&t);
		table_set(&t, 0, "%s", p->path);
		table_set(&t, 1, "%.0f", per_s(path_completions(p),
				 q ? path_completions(q) : 0, secs));
		table_set(&t, 2, "%s", fmt_rate(b, sizeof(b), per_s(p->bytes,
				 q ? q->bytes : 0, secs)));
		table_set(&t, 3, "%.0f", per_s(path_failed(p),
				 q ? path_failed(q) : 0, secs));
		table_set(&t, 4, "%s", fmt_quantile(c, sizeof(c),
			  quantile(p->latency, hist ? q->latency : NULL,
				   p->n_latency, cur->latency_bounds_ns,
				   cur->n_latency_bounds_ns, 0.5)));
		table_set(&t, 5, "%s", fmt_quantile(d, sizeof(d),
			  quantile(p->latency, hist ? q->latency : NULL,
				   p->n_latency, cur->latency_bounds_ns,
				   cur->n_latency_bounds_ns, 0.99)));
	}
	table_print(&t);
	top_classes(cur, prev, secs);

	static const char *const ch[] = { "UID", "CLIENT", "OPS/S", "BYTES/S",
		"IN-FLIGHT", NULL };
	putchar('\n');
	table_init(&t, 1u << 1, ch);
	for (size_t i = 0; i < cur->n_clients; i++) {
		const Xfer__Ctl__ClientStats *cl = cur->clients[i];
		const Xfer__Ctl__ClientStats *q = find_client(prev, cl);
		table_row(&t);
		table_set(&t, 0, "%" PRIu32, cl->uid);
		table_set(&t, 1, "%s", cl->name);
		table_set(&t, 2, "%.0f", per_s(cl->ops, q ? q->ops : 0, secs));
		table_set(&t, 3, "%s", fmt_rate(b, sizeof(b), per_s(cl->bytes,
				 q ? q->bytes : 0, secs)));
		table_set(&t, 4, "%" PRIu64, cl->in_flight);
	}
	table_print(&t);

	if (!cur->n_peers)
		return;
	static const char *const eh[] = { "PEER", "STATE", "RTT", "SENT/S",
		"RECEIVED/S", "ERRORS/S", NULL };
	putchar('\n');
	table_init(&t, 3u, eh);
	for (size_t i = 0; i < cur->n_peers; i++) {
		const Xfer__Ctl__PeerStats *p = cur->peers[i];
		const Xfer__Ctl__PeerStats *q = find_peer(prev, p->name);
		table_row(&t);
		table_set(&t, 0, "%s", p->name);
		table_set(&t, 1, "%s", p->state);
		table_set(&t, 2, "%s", p->rtt_ns ? fmt_rtt(b, sizeof(b),
			  p->rtt_ns) : "-");
		table_set(&t, 3, "%s", fmt_rate(c, sizeof(c), per_s(p->bytes_tx,
				 q ? q->bytes_tx : 0, secs)));
		table_set(&t, 4, "%s", fmt_rate(d, sizeof(d), per_s(p->bytes_rx,
				 q ? q->bytes_rx : 0, secs)));
		table_set(&t, 5, "%.0f", per_s(p->errors, q ? q->errors : 0,
					       secs));
	}
	table_print(&t);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wait up to ms for a key; true when it was q (or stdin ended). */
static bool wait_for_quit(bool keys, unsigned ms)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	double end = mono_s() + ms / 1000.0;

	if (!keys) {
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		return false;
	}
	for (;;) {
		double left = end - mono_s();
		if (left <= 0)
			return false;
		int n = poll(&pfd, 1, (int)(left * 1000) + 1);
		if (n > 0) {
			char ch;
			ssize_t got = read(STDIN_FILENO, &ch, 1);
			if (got <= 0 || ch == 'q' || ch == 'Q')
				return true;
		}
	}
}

int top_run(stats_fetch_fn fetch, void *arg, unsigned interval_ms,
	    unsigned count)
{
	bool tty = isatty(STDOUT_FILENO) && count == 0;
	bool keys = tty && isatty(STDIN_FILENO);
	struct termios saved, raw;
	Xfer__Ctl__CtlMsg *prev = NULL, *cur = NULL;
	double t_prev, t_cur;
	int rc;

	if ((rc = fetch(arg, &prev)))
		return rc;
	t_prev = mono_s();
	if (keys && tcgetattr(STDIN_FILENO, &saved) == 0) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	} else {
		keys = false;
	}
	for (unsigned frame = 0; count == 0 || frame < count; frame++) {
		if (wait_for_quit(keys, interval_ms))
			break;
		if ((rc = fetch(arg, &cur)))
			break;
		t_cur = mono_s();
		if (tty)
			fputs("\033[H\033[2J", stdout);
		else if (frame)
			putchar('\n');
		top_frame(cur->stats_reply, prev->stats_reply, t_cur - t_prev);
		fflush(stdout);
		xfer__ctl__ctl_msg__free_unpacked(prev, NULL);
		prev = cur;
		cur = NULL;
		t_prev = t_cur;
	}
	if (keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	xfer__ctl__ctl_msg__free_unpacked(prev, NULL);
	return rc;
}
