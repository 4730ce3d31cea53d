/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics_text.c - writes the Prometheus text exposition of a snapshot.
 *
 * Names follow Prometheus' conventions: the xferd_ prefix, base units
 * (bytes, seconds), _total on counters, and a bounded set of label
 * values: paths, classes and errno names are fixed lists, tenants are
 * the configured ones (at most TENANT_MAX), clients are the top
 * STATS_CLIENTS_TOP (uid, name) pairs plus "other" (no pid: a series
 * per short-lived process would grow without end), peers and rails are
 * capped by stats.c.  The process_* series are the standard ones of
 * Prometheus' client libraries, so that stock dashboards and alerts
 * work on xferd as on any other process.
 * Every family is written whole (HELP, TYPE, its samples) in one place.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/paths.h"
#include "ops/metrics_text.h"

struct writer {
	struct evbuffer *out;
	int err;
};

static void put(struct writer *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct writer *w, const char *fmt, ...)
{
	va_list ap;

	if (w->err)
		return;
	va_start(ap, fmt);
	if (evbuffer_add_vprintf(w->out, fmt, ap) < 0)
		w->err = -ENOMEM;
	va_end(ap);
}

static void family(struct writer *w, const char *name, const char *type,
		   const char *help)
{
	put(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * src as a label value: backslash, quote and newline escaped as the
 * format wants; control characters and bytes outside ASCII become '?'
 * (a client names itself: its name may be anything, including invalid
 * UTF-8).  dst holds at least 2 * STATS_NAME_LEN + 1 bytes.
 */
#define LABEL_MAX (2 * STATS_NAME_LEN + 1)
static const char *label(char dst[LABEL_MAX], const char *src)
{
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)src;
	     *p && n + 2 < LABEL_MAX; p++) {
		if (*p == '\\' || *p == '"') {
			dst[n++] = '\\';
			dst[n++] = (char)*p;
		} else if (*p < 0x20 || *p >= 0x7f) {
			dst[n++] = '?';
		} else {
			dst[n++] = (char)*p;
		}
	}
	dst[n] = '\0';
	return dst;
}

static void gauge(struct writer *w, const char *name, const char *help,
		  uint64_t v)
{
	family(w, name, "gauge", help);
	put(w, "%s %llu\n", name, (unsigned long long)v);
}

static void counter(struct writer *w, const char *name, const char *help,
		    uint64_t v)
{
	family(w, name, "counter", help);
	put(w, "%s %llu\n", name, (unsigned long long)v);
}

/* Nanoseconds as seconds, exactly (no float rounding in the digits). */
static void put_seconds(struct writer *w, uint64_t ns)
{
	put(w, "%llu.%09llu", (unsigned long long)(ns / 1000000000ull),
	    (unsigned long long)(ns % 1000000000ull));
}

static const char *errno_label(int err, char buf[16])
{
	const char *name = err > 0 ? strerrorname_np(err) : NULL;

	if (name)
		return name;
	if (err <= 0)
		return "other";
	snprintf(buf, 16, "E%d", err);
	return buf;
}

/* --- the process: the series every exporter's dashboards expect --- */

static void write_process(struct writer *w, const struct stats_snapshot *s)
{
	const struct stats_process *p = &s->proc;

	family(w, "process_cpu_seconds_total", "counter",
	       "Total user and system CPU time spent in seconds.");
	put(w, "process_cpu_seconds_total ");
	put_seconds(w, p->cpu_ns);
	put(w, "\n");
	family(w, "process_open_fds", "gauge",
	       "Number of open file descriptors.");
	put(w, "process_open_fds %llu\n", (unsigned long long)p->open_fds);
	if (p->max_fds) {
		family(w, "process_max_fds", "gauge",
		       "Maximum number of open file descriptors.");
		put(w, "process_max_fds %llu\n",
		    (unsigned long long)p->max_fds);
	}
	family(w, "process_virtual_memory_bytes", "gauge",
	       "Virtual memory size in bytes.");
	put(w, "process_virtual_memory_bytes %llu\n",
	    (unsigned long long)p->vsize_bytes);
	family(w, "process_resident_memory_bytes", "gauge",
	       "Resident memory size in bytes.");
	put(w, "process_resident_memory_bytes %llu\n",
	    (unsigned long long)p->rss_bytes);
	family(w, "process_start_time_seconds", "gauge",
	       "Start time of the process since unix epoch in seconds.");
	put(w, "process_start_time_seconds %llu.%03llu\n",
	    (unsigned long long)(p->start_time_ms / 1000),
	    (unsigned long long)(p->start_time_ms % 1000));
}

/* --- the daemon, per path --- */

static void write_daemon(struct writer *w, const struct stats_snapshot *s)
{
	char v[LABEL_MAX];

	family(w, "xferd_build_info", "gauge",
	       "Always 1; the labels say which xferd this is.");
	put(w, "xferd_build_info{version=\"%s\"} 1\n",
	    label(v, s->version ? s->version : ""));
	/* The two below are process_start_time_seconds and
	 * process_resident_memory_bytes under older names, kept for one
	 * release (doc/operations.md). */
	family(w, "xferd_uptime_seconds", "gauge",
	       "Deprecated: time() - process_start_time_seconds.");
	put(w, "xferd_uptime_seconds ");
	put_seconds(w, s->uptime_ms * 1000000ull);
	put(w, "\n");
	family(w, "xferd_resident_memory_bytes", "gauge",
	       "Deprecated: process_resident_memory_bytes.");
	put(w, "xferd_resident_memory_bytes %llu\n",
	    (unsigned long long)s->rss_bytes);
	family(w, "xferd_clients", "gauge", "Client connections now.");
	put(w, "xferd_clients %u\n", s->clients);
	family(w, "xferd_regions", "gauge", "Registered regions now.");
	put(w, "xferd_regions %u\n", s->regions);
	family(w, "xferd_imports", "gauge", "Imported tokens now.");
	put(w, "xferd_imports %u\n", s->imports);
	family(w, "xferd_completions_total", "counter",
	       "Completions (CQEs) of submissions, failed ones included.");
	put(w, "xferd_completions_total %llu\n",
	    (unsigned long long)s->ops_completed);
	family(w, "xferd_completions_failed_total", "counter",
	       "Completions of submissions that carried an error.");
	put(w, "xferd_completions_failed_total %llu\n",
	    (unsigned long long)s->ops_failed);
}

static void write_paths(struct writer *w, const struct stats_snapshot *s)
{
	family(w, "xferd_path_ops_total", "counter",
	       "Descriptors that moved data, by the path that moved it.");
	for (unsigned p = 1; p < XFER_PATH__COUNT; p++)
		put(w, "xferd_path_ops_total{path=\"%s\"} %llu\n", path_name(p),
		    (unsigned long long)s->paths[p].ops);
	family(w, "xferd_path_bytes_total", "counter",
	       "Bytes moved, by the path that moved them.");
	for (unsigned p = 1; p < XFER_PATH__COUNT; p++)
		put(w, "xferd_path_bytes_total{path=\"%s\"} %llu\n",
		    path_name(p), (unsigned long long)s->paths[p].bytes);
	family(w, "xferd_path_errors_total", "counter",
	       "Failed completions by path and errno (path \"none\": "
	       "failed before a path was chosen).");
	for (unsigned p = 0; p < XFER_PATH__COUNT; p++)
		for (unsigned i = 0; i < s->paths[p].nerrors; i++) {
			char buf[16];
			put(w, "xferd_path_errors_total{path=\"%s\",errno=\"%s\"} "
			    "%llu\n", path_name(p),
			    errno_label(s->paths[p].errors[i].err, buf),
			    (unsigned long long)s->paths[p].errors[i].count);
		}
	family(w, "xferd_completion_latency_seconds", "histogram",
	       "Submit to completion, measured in xferd, by path (\"none\": "
	       "no data moved).");
	for (unsigned p = 0; p < XFER_PATH__COUNT; p++) {
		const struct stats_path *sp = &s->paths[p];
		uint64_t cum = 0;
		for (unsigned b = 0; b < LAT_BOUNDS; b++) {
			cum += sp->lat[b];
			put(w, "xferd_completion_latency_seconds_bucket{path=\"%s\","
			    "le=\"%.9g\"} %llu\n", path_name(p),
			    (double)lat_bound_ns[b] * 1e-9,
			    (unsigned long long)cum);
		}
		cum += sp->lat[LAT_BOUNDS];
		put(w, "xferd_completion_latency_seconds_bucket{path=\"%s\","
		    "le=\"+Inf\"} %llu\n", path_name(p), (unsigned long long)cum);
		put(w, "xferd_completion_latency_seconds_sum{path=\"%s\"} ",
		    path_name(p));
		put_seconds(w, sp->lat_sum_ns);
		put(w, "\nxferd_completion_latency_seconds_count{path=\"%s\"} "
		    "%llu\n", path_name(p), (unsigned long long)cum);
	}
}

/* --- classes and tenants: one family per number, label "class" or
 * "tenant" --- */

static void class_rows(struct writer *w, const struct stats_class *c,
		       unsigned n, const char *name, const char *lbl,
		       size_t field)
{
	char v[LABEL_MAX];

	for (unsigned i = 0; i < n; i++) {
		uint64_t val;
		memcpy(&val, (const char *)&c[i] + field, sizeof(val));
		put(w, "%s{%s=\"%s\"} %llu\n", name, lbl,
		    label(v, c[i].name), (unsigned long long)val);
	}
}

/* Bucket b holds waits below 2^b us; the last one is +Inf. */
static void wait_histogram(struct writer *w, const struct stats_class *c,
			   unsigned n, const char *name, const char *lbl)
{
	char v[LABEL_MAX];

	for (unsigned i = 0; i < n; i++) {
		uint64_t cum = 0;
		label(v, c[i].name);
		for (unsigned b = 0; b + 1 < CLASS_WAIT_BUCKETS; b++) {
			cum += c[i].wait[b];
			put(w, "%s_bucket{%s=\"%s\",le=\"%.9g\"} %llu\n", name,
			    lbl, v, (double)(1ull << b) * 1e-6,
			    (unsigned long long)cum);
		}
		cum += c[i].wait[CLASS_WAIT_BUCKETS - 1];
		put(w, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", name, lbl,
		    v, (unsigned long long)cum);
		put(w, "%s_sum{%s=\"%s\"} ", name, lbl, v);
		put_seconds(w, c[i].wait_sum_ns);
		put(w, "\n%s_count{%s=\"%s\"} %llu\n", name, lbl, v,
		    (unsigned long long)cum);
	}
}

static void class_families(struct writer *w, const struct stats_class *c,
			   unsigned n, const char *lbl)
{
	static const struct {
		const char *suffix, *type, *help;
		size_t field;
	} f[] = {
		{ "queued_ops", "gauge", "Operations handed to a mover and "
		  "not yet ended, by %s.",
		  offsetof(struct stats_class, queued_ops) },
		{ "queued_bytes", "gauge", "Bytes of the operations handed to "
		  "a mover and not yet ended, by %s.",
		  offsetof(struct stats_class, queued_bytes) },
		{ "ops_total", "counter", "Operations ended, by %s.",
		  offsetof(struct stats_class, ops) },
		{ "bytes_total", "counter", "Bytes moved, by %s.",
		  offsetof(struct stats_class, bytes) },
	};
	char name[64], help[128];

	for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++) {
		snprintf(name, sizeof(name), "xferd_%s_%s", lbl, f[k].suffix);
		snprintf(help, sizeof(help), f[k].help, lbl);
		family(w, name, f[k].type, help);
		class_rows(w, c, n, name, lbl, f[k].field);
	}
	snprintf(name, sizeof(name), "xferd_%s_wait_seconds", lbl);
	snprintf(help, sizeof(help), "From an operation's start to its first "
		 "frame on a link, by %s.", lbl);
	family(w, name, "histogram", help);
	wait_histogram(w, c, n, name, lbl);
}

static void write_classes(struct writer *w, const struct stats_snapshot *s)
{
	class_families(w, s->classes, XFER_CLASS__COUNT, "class");
	counter(w, "xferd_class_demoted_total",
		"Latency-class descriptors moved as bulk (past "
		"latency_max_bytes).", s->demoted);
	class_families(w, s->tenants, s->ntenants, "tenant");
	family(w, "xferd_tenant_paced_total", "counter",
	       "Times a tenant's rate cap held its frames back.");
	class_rows(w, s->tenants, s->ntenants, "xferd_tenant_paced_total",
		   "tenant", offsetof(struct stats_class, paced));
	family(w, "xferd_tenant_removed", "gauge",
	       "1: the tenant is gone from the configuration, kept while "
	       "clients of it remain.");
	class_rows(w, s->tenants, s->ntenants, "xferd_tenant_removed",
		   "tenant", offsetof(struct stats_class, removed));
}

/* --- clients --- */

static void client_rows(struct writer *w, const struct stats_snapshot *s,
			const char *name, size_t field)
{
	char v[LABEL_MAX];

	for (unsigned i = 0; i <= s->ntop; i++) {
		const struct stats_client *c = i < s->ntop ? &s->top[i]
							   : &s->other;
		uint64_t val;
		if (i == s->ntop && c->count == 0)
			break;   /* nobody beyond the top */
		if (field == (size_t)-1)
			val = c->count;
		else
			memcpy(&val, (const char *)c + field, sizeof(val));
		if (i < s->ntop)
			put(w, "%s{uid=\"%u\",client=\"%s\"} %llu\n", name,
			    c->uid, label(v, c->name), (unsigned long long)val);
		else
			put(w, "%s{uid=\"\",client=\"other\"} %llu\n", name,
			    (unsigned long long)val);
	}
}

static void write_clients(struct writer *w, const struct stats_snapshot *s)
{
	family(w, "xferd_client_bytes_total", "counter",
	       "Bytes moved for a client program (uid and name; the busiest, "
	       "the rest as \"other\"), while it is connected.");
	client_rows(w, s, "xferd_client_bytes_total",
		    offsetof(struct stats_client, bytes));
	family(w, "xferd_client_ops_total", "counter",
	       "Completions of a client process.");
	client_rows(w, s, "xferd_client_ops_total",
		    offsetof(struct stats_client, ops));
	family(w, "xferd_client_failed_total", "counter",
	       "Failed completions of a client process.");
	client_rows(w, s, "xferd_client_failed_total",
		    offsetof(struct stats_client, failed));
	family(w, "xferd_client_in_flight", "gauge",
	       "Batches of a client process out on links, GPUs or staging "
	       "(taken, not completed).");
	client_rows(w, s, "xferd_client_in_flight",
		    offsetof(struct stats_client, in_flight));
	family(w, "xferd_client_connections", "gauge",
	       "Connections of a client program.");
	client_rows(w, s, "xferd_client_connections", (size_t)-1);
	family(w, "xferd_client_notifications_held", "gauge",
	       "Notifications xferd holds for a client program (its CQ "
	       "was full).");
	client_rows(w, s, "xferd_client_notifications_held",
		    offsetof(struct stats_client, notify_queued));
	family(w, "xferd_client_notifications_refused_total", "counter",
	       "Notifications to a client program refused to their senders "
	       "(-ENOBUFS, past notify_queue_max).");
	client_rows(w, s, "xferd_client_notifications_refused_total",
		    offsetof(struct stats_client, notify_refused));
	gauge(w, "xferd_notifications_held",
	      "Notifications xferd holds for all clients now.",
	      s->notify_queued);
	counter(w, "xferd_notifications_refused_total",
		"Notifications refused to their senders (-ENOBUFS), of "
		"clients connected now.", s->notify_refused);
	family(w, "xferd_cma_fast_reads_total", "counter",
	       "Reads of xfer_reg'd memory by process_vm_readv (owners with "
	       "no_new_privs): done, and refused by the check after them.");
	put(w, "xferd_cma_fast_reads_total{result=\"done\"} %llu\n",
	    (unsigned long long)s->cma_fast_done);
	put(w, "xferd_cma_fast_reads_total{result=\"refused\"} %llu\n",
	    (unsigned long long)s->cma_fast_refused);
	family(w, "xferd_quota_refusals_total", "counter",
	       "Requests refused by a limit of xferd.conf(5), by limit.");
	for (unsigned l = 0; l < QUOTA_LIMIT__COUNT; l++)
		put(w, "xferd_quota_refusals_total{limit=\"%s\"} %llu\n",
		    quota_limit_name(l), (unsigned long long)s->refusals[l]);
}

/* --- etcd (metadata = etcd only) --- */

static void age(struct writer *w, const char *name, const char *help,
		uint64_t ms)
{
	if (ms == UINT64_MAX)
		return;   /* never: no sample rather than a made-up age */
	family(w, name, "gauge", help);
	put(w, "%s ", name);
	put_seconds(w, ms * 1000000ull);
	put(w, "\n");
}

static void write_etcd(struct writer *w, const struct stats_snapshot *s)
{
	const struct cluster_health *h = &s->meta;

	if (!s->etcd)
		return;
	gauge(w, "xferd_etcd_reachable",
	      "1 if etcd answered xferd's last call, else 0.", h->reachable);
	gauge(w, "xferd_etcd_registered",
	      "1 if this node's record is stored in etcd under a live lease.",
	      h->registered);
	gauge(w, "xferd_etcd_watching",
	      "1 if the watch on the other nodes' records is open.",
	      h->watching);
	age(w, "xferd_etcd_last_answer_age_seconds",
	    "Time since etcd last answered a call.", h->answer_age_ms);
	age(w, "xferd_etcd_lease_age_seconds",
	    "Time since the lease was last granted or kept alive.",
	    h->lease_age_ms);
	age(w, "xferd_etcd_watch_last_event_age_seconds",
	    "Time since the watch on the other nodes last delivered.",
	    h->watch_age_ms);
	family(w, "xferd_etcd_errors_total", "counter",
	       "Calls to etcd that failed, by kind.");
	for (unsigned k = 0; k < CLUSTER_ERR__COUNT; k++)
		put(w, "xferd_etcd_errors_total{kind=\"%s\"} %llu\n",
		    cluster_err_kind_name(k), (unsigned long long)h->errors[k]);
}

/* --- peers and rails --- */

static const char *const peer_states[] = { "up", "connecting", "down" };

static void peer_rows(struct writer *w, const struct stats_snapshot *s,
		      const char *name, size_t field, bool seconds)
{
	char v[LABEL_MAX];

	for (unsigned i = 0; i < s->npeers; i++) {
		const struct stats_peer *p = &s->peers[i];
		uint64_t val;
		memcpy(&val, (const char *)p + field, sizeof(val));
		put(w, "%s{peer=\"%s\"} ", name, label(v, p->name));
		if (seconds)
			put_seconds(w, val);
		else
			put(w, "%llu", (unsigned long long)val);
		put(w, "\n");
	}
}

static void write_peers(struct writer *w, const struct stats_snapshot *s)
{
	char v[LABEL_MAX];

	family(w, "xferd_peer_state", "gauge",
	       "1 for the state the link to another xferd is in, else 0.");
	for (unsigned i = 0; i < s->npeers; i++)
		for (unsigned k = 0; k < 3; k++)
			put(w, "xferd_peer_state{peer=\"%s\",state=\"%s\"} %d\n",
			    label(v, s->peers[i].name), peer_states[k],
			    strcmp(s->peers[i].state, peer_states[k]) == 0);
	family(w, "xferd_peer_sent_bytes_total", "counter",
	       "Bytes sent on the link to another xferd.");
	peer_rows(w, s, "xferd_peer_sent_bytes_total",
		  offsetof(struct stats_peer, bytes_tx), false);
	family(w, "xferd_peer_received_bytes_total", "counter",
	       "Bytes received on the link from another xferd.");
	peer_rows(w, s, "xferd_peer_received_bytes_total",
		  offsetof(struct stats_peer, bytes_rx), false);
	family(w, "xferd_peer_ops_total", "counter",
	       "Operations on the link to another xferd.");
	peer_rows(w, s, "xferd_peer_ops_total",
		  offsetof(struct stats_peer, ops), false);
	family(w, "xferd_peer_errors_total", "counter",
	       "Failed operations on the link to another xferd.");
	peer_rows(w, s, "xferd_peer_errors_total",
		  offsetof(struct stats_peer, errors), false);
	family(w, "xferd_peer_reconnects_total", "counter",
	       "Times the link to another xferd came up again.");
	peer_rows(w, s, "xferd_peer_reconnects_total",
		  offsetof(struct stats_peer, reconnects), false);
	family(w, "xferd_peer_rtt_seconds", "gauge",
	       "Last keepalive round trip to another xferd (0: none yet).");
	peer_rows(w, s, "xferd_peer_rtt_seconds",
		  offsetof(struct stats_peer, rtt_ns), true);
	family(w, "xferd_peers_left_out", "gauge",
	       "Peers known but not listed here (the list is capped).");
	put(w, "xferd_peers_left_out %u\n", s->peers_left_out);
}

static void rail_rows(struct writer *w, const struct stats_snapshot *s,
		      const char *name, size_t field)
{
	char v[LABEL_MAX];

	for (unsigned i = 0; i < s->nrails; i++) {
		const struct stats_rail *r = &s->rails[i];
		uint64_t val;
		memcpy(&val, (const char *)r + field, sizeof(val));
		put(w, "%s{device=\"%s\",port=\"%u\"} %llu\n", name,
		    label(v, r->device), r->port, (unsigned long long)val);
	}
}

static void write_rails(struct writer *w, const struct stats_snapshot *s)
{
	char v[LABEL_MAX];

	family(w, "xferd_rail_queue_pairs", "gauge",
	       "RC queue pairs on an RDMA rail now.");
	for (unsigned i = 0; i < s->nrails; i++)
		put(w, "xferd_rail_queue_pairs{device=\"%s\",port=\"%u\"} %u\n",
		    label(v, s->rails[i].device), s->rails[i].port,
		    s->rails[i].qps);
	family(w, "xferd_rail_sent_bytes_total", "counter",
	       "Bytes moved by RDMA WRITE from this rail.");
	rail_rows(w, s, "xferd_rail_sent_bytes_total",
		  offsetof(struct stats_rail, bytes_tx));
	family(w, "xferd_rail_received_bytes_total", "counter",
	       "Bytes moved by RDMA READ to this rail.");
	rail_rows(w, s, "xferd_rail_received_bytes_total",
		  offsetof(struct stats_rail, bytes_rx));
	family(w, "xferd_rail_work_requests_total", "counter",
	       "Work requests posted on this rail.");
	rail_rows(w, s, "xferd_rail_work_requests_total",
		  offsetof(struct stats_rail, wrs));
	family(w, "xferd_rail_wr_errors_total", "counter",
	       "Work requests on this rail that completed with an error.");
	rail_rows(w, s, "xferd_rail_wr_errors_total",
		  offsetof(struct stats_rail, errors));
}

/* --- memory --- */

static void write_memory(struct writer *w, const struct stats_snapshot *s)
{
	static const char *const half[2] = { "send", "recv" };

	gauge(w, "xferd_rcache_entries", "Registration cache entries.",
	      s->rcache.entries);
	gauge(w, "xferd_rcache_unused_entries",
	      "Registration cache entries nobody holds (evictable).",
	      s->rcache.unused);
	gauge(w, "xferd_rcache_bytes", "Bytes the registration cache covers.",
	      s->rcache.bytes);
	counter(w, "xferd_rcache_hits_total", "Registration cache hits.",
		s->rcache.hits);
	counter(w, "xferd_rcache_misses_total", "Registration cache misses.",
		s->rcache.misses);
	counter(w, "xferd_rcache_evictions_total",
		"Unused entries the registration cache's limits evicted.",
		s->rcache.evictions);
	gauge(w, "xferd_registrations_pending",
	      "Registrations queued or running on the registration thread.",
	      s->rcache.pending);
	gauge(w, "xferd_gpus", "GPUs xferd uses.", s->gpus);
	gauge(w, "xferd_gpu_imports",
	      "GPU allocations of clients imported (CUDA IPC, VMM).",
	      s->gpu_imports);
	gauge(w, "xferd_gpu_import_refs", "Regions using those imports.",
	      s->gpu_import_refs);
	if (s->landing.lending) {
		/* Pinned, registered memory beside the staging pool: one
		 * pool per peer lent to (transport/rdma_land_pool.h). */
		gauge(w, "xferd_staging_landing_pools",
		      "Peers lent landing chunks from a pool of their own now.",
		      s->landing.pools);
		gauge(w, "xferd_staging_landing_bytes",
		      "Memory of the landing pools.", s->landing.bytes);
		gauge(w, "xferd_staging_landing_chunks_lent",
		      "Landing chunks lent to peers now.", s->landing.lent);
		counter(w, "xferd_staging_landing_pools_made_total",
			"Landing pools made.", s->landing.made);
		counter(w, "xferd_staging_landing_pools_freed_total",
			"Landing pools freed.", s->landing.freed);
		counter(w, "xferd_staging_landing_refused_total",
			"Landing streams refused for the cap on pools.",
			s->landing.refused);
	}
	if (!s->staging)
		return;   /* no pool: no GPUs, or no memory for it */
	gauge(w, "xferd_staging_chunk_bytes",
	      "Size of one chunk of the pinned staging pool.",
	      s->pool.chunk_bytes);
	family(w, "xferd_staging_chunks", "gauge",
	       "Chunks of the pinned staging pool, per half.");
	for (int h = 0; h < 2; h++)
		put(w, "xferd_staging_chunks{half=\"%s\"} %u\n", half[h],
		    s->pool.chunks[h]);
	family(w, "xferd_staging_chunks_in_use", "gauge",
	       "Chunks of the pinned staging pool in use, per half.");
	for (int h = 0; h < 2; h++)
		put(w, "xferd_staging_chunks_in_use{half=\"%s\"} %u\n",
		    half[h], s->pool.in_use[h]);
	family(w, "xferd_staging_waiting", "gauge",
	       "Transfers waiting for a staging chunk now, per half.");
	for (int h = 0; h < 2; h++)
		put(w, "xferd_staging_waiting{half=\"%s\"} %u\n", half[h],
		    s->pool.waiting[h]);
	counter(w, "xferd_staging_waits_total",
		"Times a transfer had to wait for a staging chunk.",
		s->pool.waits);
	family(w, "xferd_staging_latency_reserve", "gauge",
	       "Staging chunks only the latency class takes, per half.");
	for (int h = 0; h < 2; h++)
		put(w, "xferd_staging_latency_reserve{half=\"%s\"} %u\n",
		    half[h], s->pool.reserve[h]);
	counter(w, "xferd_staging_reserve_used_total",
		"Staging chunks the latency class took from its reserve.",
		s->pool.reserve_used);
	/* Where staged streams spend their time: a slow D2H shows as
	 * send_idle, a slow H2D as recv_stall. */
	family(w, "xferd_staging_stage_events_total", "counter",
	       "Staged chunks through a GPU copy (d2h, h2d), links waiting "
	       "for a ready send chunk (send_idle), links stopped for want "
	       "of a receive chunk (recv_stall).");
	for (int k = STAGING_CLOCK_NONE + 1; k < STAGING_CLOCK__N; k++)
		put(w, "xferd_staging_stage_events_total{stage=\"%s\"} %llu\n",
		    staging_clock_name(k),
		    (unsigned long long)s->pool.clock_n[k]);
	family(w, "xferd_staging_stage_seconds_total", "counter",
	       "Time of those events, summed.");
	for (int k = STAGING_CLOCK_NONE + 1; k < STAGING_CLOCK__N; k++) {
		put(w, "xferd_staging_stage_seconds_total{stage=\"%s\"} ",
		    staging_clock_name(k));
		put_seconds(w, s->pool.clock_ns[k]);
		put(w, "\n");
	}
}

int metrics_text_write(const struct stats_snapshot *s, struct evbuffer *out)
{
	struct writer w = { .out = out };

	write_process(&w, s);
	write_daemon(&w, s);
	write_paths(&w, s);
	write_classes(&w, s);
	write_clients(&w, s);
	write_peers(&w, s);
	write_rails(&w, s);
	write_memory(&w, s);
	write_etcd(&w, s);
	return w.err;
}
