/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.c - gathers the snapshot of stats.h from every module that
 * counts: the progress thread's per-path counters and histograms, the
 * clients, the peers, the rails, the registration cache, the staging
 * pool and the GPUs.
 *
 * Main thread.  Counters written by the progress thread are read with
 * relaxed loads: each is a recent, untorn value; two of them may be a
 * few completions apart, which a scrape tolerates (a histogram's count
 * is the sum of its buckets as read, so it is consistent in itself).
 */
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "client.h"
#include "engine/progress.h"
#include "gpu/gpu.h"
#include "core/rcache.h"
#include "mem/cma.h"
#include "mem/region.h"
#include "mem/regworker.h"
#include "mem/staging.h"
#include "ops/stats.h"
#include "peer/peer.h"
#include "transport/rdma.h"
#include "transport/rdma_dev.h"
#include "xferd.h"

_Static_assert(sizeof(((struct stats_snapshot *)0)->instance_id) ==
	       TOKEN_INSTANCE_LEN, "the snapshot holds a whole instance id");

static uint64_t load(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

void stats_fill_path(struct stats_path *s, const struct completion_stats *cs,
		     unsigned path)
{
	s->lat_count = 0;
	for (unsigned b = 0; b <= LAT_BOUNDS; b++) {
		s->lat[b] = load(&cs->lat[path][b]);
		s->lat_count += s->lat[b];
	}
	s->lat_sum_ns = load(&cs->lat_sum_ns[path]);
	s->nerrors = 0;
	/* Slot 0 (errno values past ERRNO_SLOTS) last, as "other". */
	for (unsigned e = 1; e <= ERRNO_SLOTS; e++) {
		unsigned slot = e % ERRNO_SLOTS;
		uint64_t n = load(&cs->errors[path][slot]);
		if (!n)
			continue;
		if (s->nerrors == STATS_ERRNOS_MAX) {
			/* More kinds than kept: fold into the last. */
			s->errors[STATS_ERRNOS_MAX - 1].err = 0;
			s->errors[STATS_ERRNOS_MAX - 1].count += n;
			continue;
		}
		s->errors[s->nerrors++] = (struct stats_errno){ slot, n };
	}
}

static void collect_paths(struct xferd *d, struct stats_snapshot *s)
{
	const struct path_stats *ps = progress_path_stats(d->progress);

	s->ops_completed = load(&ps->completed);
	s->ops_failed = load(&ps->failed);
	for (unsigned p = 0; p < XFER_PATH__COUNT; p++) {
		s->paths[p].ops = load(&ps->ops[p]);
		s->paths[p].bytes = load(&ps->bytes[p]);
		stats_fill_path(&s->paths[p], &ps->done, p);
	}
}

/* --- classes and tenants --- */

static void fill_class(struct stats_class *o, const struct class_counters *c,
		       const char *name)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->queued_ops = load(&c->queued_ops);
	o->queued_bytes = load(&c->queued_bytes);
	o->ops = load(&c->ops);
	o->bytes = load(&c->bytes);
	for (unsigned b = 0; b < CLASS_WAIT_BUCKETS; b++) {
		o->wait[b] = load(&c->wait[b]);
		o->wait_count += o->wait[b];
	}
	o->wait_sum_ns = load(&c->wait_sum_ns);
}

static void collect_classes(struct xferd *d, struct stats_snapshot *s)
{
	const struct class_stats *cs = progress_class_stats(d->progress);
	const struct tenant_table *tt = &d->cfg.tenants;

	for (unsigned c = 0; c < XFER_CLASS__COUNT; c++)
		fill_class(&s->classes[c], &cs->cls[c], class_name(c));
	/* By slot: a tenant's counters are its slot's, whichever reloads
	 * came between (config_tenants_rebase). */
	s->ntenants = 0;
	for (unsigned t = 0; t < tt->n && t < TENANT_MAX; t++) {
		if (!tenant_slot_used(tt, t))
			continue;
		struct stats_class *o = &s->tenants[s->ntenants++];
		fill_class(o, &cs->tenant[t], tt->t[t].name);
		o->paced = load(&cs->paced[t]);
		o->removed = tt->t[t].removed;
	}
	s->demoted = load(&cs->demoted);
}

/* --- clients: merged per process, the busiest kept by name --- */

struct client_acc {
	struct stats_client *rows;
	size_t n, cap;
};

static void add_client(const struct client_view *v, void *arg)
{
	struct client_acc *acc = arg;

	if (acc->n == acc->cap) {
		size_t cap = acc->cap ? 2 * acc->cap : 64;
		struct stats_client *rows = realloc(acc->rows,
						    cap * sizeof(*rows));
		if (!rows)
			return;   /* a shorter list, not a failed scrape */
		acc->rows = rows;
		acc->cap = cap;
	}
	struct stats_client *c = &acc->rows[acc->n++];
	uint64_t out = load(&v->stats->batches_out);
	uint64_t back = load(&v->stats->batches_back);

	memset(c, 0, sizeof(*c));
	c->uid = (uint32_t)v->uid;
	c->pid = (uint32_t)v->pid;
	snprintf(c->name, sizeof(c->name), "%s", v->name ? v->name : "");
	c->ops = load(&v->stats->ops_completed);
	c->failed = load(&v->stats->ops_failed);
	c->bytes = load(&v->stats->bytes_moved);
	/* Read racily: back may be ahead of out as read. */
	c->in_flight = out > back ? out - back : 0;
	c->notify_queued = load(&v->stats->notify_queued);
	c->notify_refused = load(&v->stats->notify_refused);
	c->count = 1;
	c->processes = 1;
}

/* uid, name, then pid: rows of one (uid, name) are adjacent, its
 * processes in pid order. */
static int by_key(const void *a, const void *b)
{
	const struct stats_client *x = a, *y = b;
	int n;

	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	n = strcmp(x->name, y->name);
	if (n)
		return n;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static bool same_key(const struct stats_client *x,
		     const struct stats_client *y)
{
	return x->uid == y->uid && strcmp(x->name, y->name) == 0;
}

static int by_bytes_desc(const void *a, const void *b)
{
	const struct stats_client *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return by_key(a, b);
}

static void merge_into(struct stats_client *to, const struct stats_client *c)
{
	to->ops += c->ops;
	to->failed += c->failed;
	to->bytes += c->bytes;
	to->in_flight += c->in_flight;
	to->notify_queued += c->notify_queued;
	to->notify_refused += c->notify_refused;
	to->count += c->count;
}

static void collect_clients(struct xferd *d, struct stats_snapshot *s)
{
	struct client_acc acc = { 0 };
	size_t n = 0;

	client_foreach(d, add_client, &acc);
	s->notify_queued = s->notify_refused = 0;
	for (size_t i = 0; i < acc.n; i++) {
		s->notify_queued += acc.rows[i].notify_queued;
		s->notify_refused += acc.rows[i].notify_refused;
	}
	/* One row per (uid, name): a process may hold many connections,
	 * and a program run again and again is one row, not one per pid
	 * (the row keeps its lowest pid). */
	if (acc.n)
		qsort(acc.rows, acc.n, sizeof(*acc.rows), by_key);
	for (size_t i = 0; i < acc.n; i++) {
		if (n && same_key(&acc.rows[n - 1], &acc.rows[i])) {
			if (acc.rows[i].pid != acc.rows[i - 1].pid)
				acc.rows[n - 1].processes++;
			merge_into(&acc.rows[n - 1], &acc.rows[i]);
		} else {
			acc.rows[n++] = acc.rows[i];
		}
	}
	if (n)
		qsort(acc.rows, n, sizeof(*acc.rows), by_bytes_desc);
	memset(&s->other, 0, sizeof(s->other));
	snprintf(s->other.name, sizeof(s->other.name), "other");
	s->other.count = 0;
	s->ntop = 0;
	for (size_t i = 0; i < n; i++) {
		if (s->ntop < STATS_CLIENTS_TOP)
			s->top[s->ntop++] = acc.rows[i];
		else {
			s->other.processes += acc.rows[i].processes;
			merge_into(&s->other, &acc.rows[i]);
		}
	}
	free(acc.rows);
}

/* --- peers, rails --- */

static void add_peer(const struct peer_view *v, void *arg)
{
	struct stats_snapshot *s = arg;

	if (s->npeers == STATS_PEERS_MAX) {
		s->peers_left_out++;
		return;
	}
	struct stats_peer *p = &s->peers[s->npeers++];
	memset(p, 0, sizeof(*p));
	if (v->node_name && *v->node_name)
		snprintf(p->name, sizeof(p->name), "%s", v->node_name);
	else
		snprintf(p->name, sizeof(p->name), "%02x%02x%02x%02x",
			 v->instance_id[0], v->instance_id[1],
			 v->instance_id[2], v->instance_id[3]);
	/* Two records of one node name (it restarted: a new instance)
	 * must not make two series with one label set. */
	for (unsigned i = 0; i + 1 < s->npeers; i++)
		if (strcmp(s->peers[i].name, p->name) == 0) {
			size_t n = strnlen(p->name, sizeof(p->name) - 10);
			snprintf(p->name + n, sizeof(p->name) - n,
				 "/%02x%02x%02x%02x", v->instance_id[0],
				 v->instance_id[1], v->instance_id[2],
				 v->instance_id[3]);
			break;
		}
	snprintf(p->state, sizeof(p->state), "%s", v->state ? v->state : "");
	p->rtt_ns = v->rtt_ns;
	p->bytes_tx = v->bytes_tx;
	p->bytes_rx = v->bytes_rx;
	p->ops = v->ops;
	p->errors = v->errors;
	p->reconnects = v->links_up > 1 ? v->links_up - 1 : 0;
}

static void collect_rails(struct xferd *d, struct stats_snapshot *s)
{
	const struct rdma *rdma = progress_rdma(d->progress);
	int n = rdma_dev_rail_count();

	s->nrails = 0;
	for (int i = 0; i < n && s->nrails < STATS_RAILS_MAX; i++) {
		struct rdma_rail_info ri;
		struct rdma_rail_stats st;
		if (rdma_dev_rail(i, &ri))
			continue;
		rdma_rail_stats(rdma, i, &st);
		struct stats_rail *r = &s->rails[s->nrails++];
		snprintf(r->device, sizeof(r->device), "%s", ri.dev);
		r->port = ri.port;
		r->qps = st.qps;
		r->bytes_tx = st.bytes_tx;
		r->bytes_rx = st.bytes_rx;
		r->wrs = st.wrs;
		r->errors = st.errors;
	}
}

/* --- memory --- */

static void collect_memory(struct xferd *d, struct stats_snapshot *s)
{
	struct rcache_stats rcs;
	struct staging_stats ss;
	struct regtab_counts counts;

	regtab_count_all(d->regs, &counts);
	s->regions = counts.regions;
	s->imports = counts.imports;
	rcache_get_stats(d->rcache, &rcs);
	s->rcache.entries = rcs.entries;
	s->rcache.unused = rcs.unused;
	s->rcache.bytes = rcs.bytes;
	s->rcache.hits = rcs.hits;
	s->rcache.misses = rcs.misses;
	s->rcache.evictions = rcs.evictions;
	s->rcache.max_entries = rcs.max_entries;
	s->rcache.max_bytes = rcs.max_bytes;
	s->rcache.pending = regworker_pending(d->regworker);
	rdma_land_stats(progress_rdma(d->progress), &s->landing);
	s->staging = progress_staging_stats(d->progress, &ss);
	if (s->staging) {
		s->pool.chunk_bytes = ss.chunk_bytes;
		for (int h = 0; h < 2; h++) {
			s->pool.chunks[h] = ss.chunks[h];
			s->pool.in_use[h] = ss.chunks[h] - ss.free[h];
			s->pool.waiting[h] = ss.waiting[h];
			s->pool.reserve[h] = ss.reserve[h];
		}
		s->pool.waits = ss.waits;
		s->pool.reserve_used = ss.reserve_used;
		memcpy(s->pool.clock_n, ss.clock_n, sizeof(ss.clock_n));
		memcpy(s->pool.clock_ns, ss.clock_ns, sizeof(ss.clock_ns));
		s->staging_none = "";
	} else {
		s->staging_none = gpu_count() > 0 ? "no memory" : "no GPUs";
	}
	s->gpus = (uint32_t)(gpu_count() > 0 ? gpu_count() : 0);
	rcache_count(d->rcache, &s->gpu_imports, &s->gpu_import_refs);
}

/* Open descriptors: the entries of /proc/self/fd (less the one that
 * reads it). */
static uint64_t open_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	uint64_t n = 0;

	if (!dir)
		return 0;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n ? n - 1 : 0;
}

/* CPU time (utime + stime, fields 14 and 15 of /proc/self/stat), past
 * the command name, which may hold spaces and parentheses. */
static uint64_t cpu_ns(void)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	unsigned long long ut = 0, st = 0;
	long hz = sysconf(_SC_CLK_TCK);
	char *p;

	if (f)
		fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* ") S ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime" */
	if (!p || hz <= 0 ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
		   "%llu %llu", &ut, &st) != 2)
		return 0;
	return (uint64_t)(ut + st) * (1000000000ull / (uint64_t)hz);
}

/* The standard process_* numbers.  d->started is monotonic: the start's
 * wall-clock time is now less the uptime. */
static void collect_process(struct xferd *d, struct stats_process *p)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long long size = 0, resident = 0;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct rlimit rl;
	struct timespec now;

	if (f) {
		if (fscanf(f, "%llu %llu", &size, &resident) != 2)
			size = resident = 0;
		fclose(f);
	}
	p->rss_bytes = resident * page;
	p->vsize_bytes = size * page;
	p->open_fds = open_fds();
	p->max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		     rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 0;
	p->cpu_ns = cpu_ns();
	clock_gettime(CLOCK_REALTIME, &now);
	p->start_time_ms = (uint64_t)now.tv_sec * 1000 +
			   (uint64_t)now.tv_nsec / 1000000 -
			   xferd_ms_since(&d->started);
}

void stats_collect(struct xferd *d, struct stats_snapshot *s)
{
	s->version = XFERD_VERSION;
	memcpy(s->instance_id, d->instance_id, sizeof(s->instance_id));
	s->pid = (uint32_t)getpid();
	s->uptime_ms = xferd_ms_since(&d->started);
	collect_process(d, &s->proc);
	s->rss_bytes = s->proc.rss_bytes;
	s->clients = d->nclients;
	collect_paths(d, s);
	collect_classes(d, s);
	collect_clients(d, s);
	s->npeers = s->peers_left_out = 0;
	if (d->peers)
		peers_foreach(d->peers, add_peer, s);
	collect_rails(d, s);
	collect_memory(d, s);
	memcpy(s->refusals, d->refusals.by_limit, sizeof(s->refusals));
	cma_fast_read_counts(&s->cma_fast_done, &s->cma_fast_refused);
	s->etcd = d->cluster != NULL;
	cluster_health_get(d->cluster, &s->meta);
}
