/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.c - status, stats, clients, regions, peers, GPUs, rails and ping
 * for xferctl, and the sending of config and names (built in
 * ctl_lists.c).  Status and stats are written from the snapshot that
 * the metrics endpoint exports too (ops/stats.c).
 *
 * Read-only requests: anyone who may connect to the socket (mode 0660)
 * may ask; names answers a user with its own names and lists only (root
 * with everyone's).  A connection may ask several questions, one at a time; a
 * malformed one closes it, and so does ctl_idle_timeout_ms without one.
 * There are at most max_ctl_connections of them (max_ctl_per_uid of one
 * user), root's aside: root has CTL_ROOT_RESERVE more, so that it can
 * look at xferd while users hold every other one (budget.h keeps their
 * fds from clients).
 *
 * Near 1000 lines: one reply builder per xferctl request and the one
 * dispatch switch over them (stats' body in ctl_stats.c); the connection
 * limits sit with the connection they bound.
 *
 * A ping is answered later, from the peer module's callback, and by then
 * xferctl may have given up and closed: the connection is refcounted (the
 * open socket holds one reference, a ping in flight another) so that the
 * callback always finds its ctl_conn, and the reply is only sent while
 * the socket is still open.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "client.h"
#include "ops/ctl.h"
#include "ops/ctl_lists.h"
#include "ops/ctl_msg.h"
#include "ops/ctl_stats.h"
#include "ops/stats.h"
#include "ctl.pb-c.h"
#include "gpu/gpu.h"
#include "core/rcache.h"
#include "mem/regworker.h"
#include "core/log.h"
#include "nic/netaddr.h"
#include "peer/peer.h"
#include "engine/progress.h"
#include "transport/rdma.h"
#include "transport/rdma_dev.h"
#include "transport/rdma_grant.h"
#include "transport/rdma_topo.h"
#include "mem/region.h"
#include "mem/staging.h"
#include "common/paths.h"
#include "common/wire.h"
#include "uid_usage.h"
#include "xfer_ring.h"
#include "xferd.h"

/* The longest ping target: a node name or "host:port" of config.h's
 * CONFIG_HOST_MAX, with room to spare.  xferctl checks the same, and the
 * error message of start_ping() says it. */
/* Queue pairs xferctl rails lists (a reply is one 64 KiB packet). */
#define CTL_QPS_MAX 256

struct ctl_conn {
	struct xferd *d;
	int sock;                 /* -1 once closed */
	pid_t pid;
	uid_t uid;                /* whose pings (peers rate-limit dials) */
	bool counted;             /* in d->nctl */
	struct uid_usage *uu;     /* non-root: its uid's, counted in
				   * conns[UID_CTL] (uid_usage.h) */
	struct event *ev;
	/* Held by the open socket, a ping in flight and a dispatch under
	 * way (a callback that runs inside peers_ping may close the socket
	 * under it); freed at zero. */
	unsigned refs;
	bool ping_pending;        /* one question at a time */
	char ping_target[CTL_PING_TARGET_MAX + 1];
};

static void ctl_get(struct ctl_conn *cc)
{
	cc->refs++;
}

static void ctl_put(struct ctl_conn *cc)
{
	if (--cc->refs == 0)
		free(cc);
}

/* Close the socket (once) and drop its reference. */
static void ctl_close(struct ctl_conn *cc)
{
	if (cc->sock < 0)
		return;
	if (cc->ev)
		event_free(cc->ev);
	cc->ev = NULL;
	close(cc->sock);
	cc->sock = -1;
	if (cc->counted) {
		cc->d->nctl--;
		cc->counted = false;
	}
	if (cc->uu) {
		uid_conn_release(cc->uu, UID_CTL);
		uid_usage_put(cc->d->uid_use, cc->uu);
		cc->uu = NULL;
	}
	ctl_put(cc);
}

static int reply_error(struct ctl_conn *cc, int error, const char *message);

static int send_reply(struct ctl_conn *cc, Xfer__Ctl__CtlMsg *m)
{
	m->proto_version = XFER_PROTO_VERSION;
	int rc = wire_send(cc->sock, WIRE_TAG_CTL, &m->base, NULL, 0);
	/* A long list (thousands of regions) outgrows one packet: tell the
	 * asker so, rather than closing on it as if it had misbehaved. */
	if (rc == -EMSGSIZE && m->body_case != XFER__CTL__CTL_MSG__BODY_ERROR)
		return reply_error(cc, -EMSGSIZE,
				   "the answer is too large for one packet");
	return rc;
}

static int reply_error(struct ctl_conn *cc, int error, const char *message)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__Error e = XFER__CTL__ERROR__INIT;

	e.error = error;
	e.message = (char *)message;
	m.body_case = XFER__CTL__CTL_MSG__BODY_ERROR;
	m.error = &e;
	return send_reply(cc, &m);
}

/* A StatusReply and what it points to, filled from a snapshot. */
struct status_parts {
	Xfer__Ctl__StatusReply st;
	Xfer__Ctl__PathCount pcs[XFER_PATH__COUNT];
	Xfer__Ctl__PathCount *pcp[XFER_PATH__COUNT];
	Xfer__Ctl__StagingPool sp;
	Xfer__Ctl__StagingHalf sh[2];
	Xfer__Ctl__StagingClock clk[STAGING_CLOCK__N];
	Xfer__Ctl__StagingClock *clkp[STAGING_CLOCK__N];
	Xfer__Ctl__RcacheStats rs;
	Xfer__Ctl__LandingPools land;
	Xfer__Ctl__EtcdHealth etcd;
	Xfer__Ctl__KindCount etcd_errs[CLUSTER_ERR__COUNT];
	Xfer__Ctl__KindCount *etcd_errp[CLUSTER_ERR__COUNT];
	Xfer__Ctl__KindCount refusals[QUOTA_LIMIT__COUNT];
	Xfer__Ctl__KindCount *refusalp[QUOTA_LIMIT__COUNT];
	Xfer__Ctl__KindCount cma_fast[2];
	Xfer__Ctl__KindCount *cma_fastp[2];
};

static int64_t age_or_never(uint64_t ms)
{
	return ms == UINT64_MAX ? -1 : (int64_t)ms;
}

/* etcd, held notifications, refusals, descriptors: what xferd depends
 * on and what it turned away. */
static void fill_health(const struct stats_snapshot *s,
			struct status_parts *o)
{
	Xfer__Ctl__StatusReply *st = &o->st;
	const struct cluster_health *h = &s->meta;

	st->notify_held = s->notify_queued;
	st->notify_refused = s->notify_refused;
	st->open_fds = s->proc.open_fds;
	st->max_fds = s->proc.max_fds;
	for (unsigned l = 0; l < QUOTA_LIMIT__COUNT; l++) {
		xfer__ctl__kind_count__init(&o->refusals[l]);
		o->refusals[l].kind = (char *)quota_limit_name(l);
		o->refusals[l].count = s->refusals[l];
		o->refusalp[l] = &o->refusals[l];
	}
	st->n_quota_refusals = QUOTA_LIMIT__COUNT;
	st->quota_refusals = o->refusalp;
	static const char *const fast_kind[2] = { "done", "refused" };
	const uint64_t fast[2] = { s->cma_fast_done, s->cma_fast_refused };
	for (int k = 0; k < 2; k++) {
		xfer__ctl__kind_count__init(&o->cma_fast[k]);
		o->cma_fast[k].kind = (char *)fast_kind[k];
		o->cma_fast[k].count = fast[k];
		o->cma_fastp[k] = &o->cma_fast[k];
	}
	st->n_cma_fast_reads = 2;
	st->cma_fast_reads = o->cma_fastp;
	if (!s->etcd)
		return;
	xfer__ctl__etcd_health__init(&o->etcd);
	o->etcd.reachable = h->reachable;
	o->etcd.registered = h->registered;
	o->etcd.watching = h->watching;
	o->etcd.answer_age_ms = age_or_never(h->answer_age_ms);
	o->etcd.lease_age_ms = age_or_never(h->lease_age_ms);
	o->etcd.watch_age_ms = age_or_never(h->watch_age_ms);
	o->etcd.last_error = h->last_error;
	o->etcd.endpoint = (char *)h->endpoint;
	for (unsigned k = 0; k < CLUSTER_ERR__COUNT; k++) {
		xfer__ctl__kind_count__init(&o->etcd_errs[k]);
		o->etcd_errs[k].kind = (char *)cluster_err_kind_name(k);
		o->etcd_errs[k].count = h->errors[k];
		o->etcd_errp[k] = &o->etcd_errs[k];
	}
	o->etcd.n_errors = CLUSTER_ERR__COUNT;
	o->etcd.errors = o->etcd_errp;
	st->etcd = &o->etcd;
}

static void fill_status(struct xferd *d, const struct stats_snapshot *s,
			struct status_parts *o)
{
	Xfer__Ctl__StatusReply *st = &o->st;
	size_t npaths = 0;

	xfer__ctl__status_reply__init(st);
	if (s->staging) {
		for (int h = 0; h < 2; h++) {
			xfer__ctl__staging_half__init(&o->sh[h]);
			o->sh[h].chunks = s->pool.chunks[h];
			o->sh[h].in_use = s->pool.in_use[h];
			o->sh[h].waiting = s->pool.waiting[h];
			o->sh[h].latency_reserve = s->pool.reserve[h];
		}
		xfer__ctl__staging_pool__init(&o->sp);
		o->sp.chunk_bytes = s->pool.chunk_bytes;
		o->sp.send = &o->sh[STAGING_SEND];
		o->sp.recv = &o->sh[STAGING_RECV];
		o->sp.waits = s->pool.waits;
		o->sp.reserve_used = s->pool.reserve_used;
		for (int k = STAGING_CLOCK_NONE + 1; k < STAGING_CLOCK__N;
		     k++) {
			Xfer__Ctl__StagingClock *ck = &o->clk[k];
			xfer__ctl__staging_clock__init(ck);
			ck->stage = (char *)staging_clock_name(k);
			ck->count = s->pool.clock_n[k];
			ck->ns = s->pool.clock_ns[k];
			o->clkp[o->sp.n_clocks++] = ck;
		}
		o->sp.clocks = o->clkp;
		st->staging = &o->sp;
	} else {
		st->staging_none = (char *)s->staging_none;
	}
	if (s->landing.lending) {
		xfer__ctl__landing_pools__init(&o->land);
		o->land.chunk_bytes = s->landing.chunk_bytes;
		o->land.pools = s->landing.pools;
		o->land.max_pools = s->landing.max_pools;
		o->land.chunks = s->landing.chunks;
		o->land.lent = s->landing.lent;
		o->land.bytes = s->landing.bytes;
		o->land.made = s->landing.made;
		o->land.freed = s->landing.freed;
		o->land.refused = s->landing.refused;
		st->landing = &o->land;
	}
	xfer__ctl__rcache_stats__init(&o->rs);
	o->rs.entries = s->rcache.entries;
	o->rs.unused = s->rcache.unused;
	o->rs.bytes = s->rcache.bytes;
	o->rs.hits = s->rcache.hits;
	o->rs.misses = s->rcache.misses;
	o->rs.evictions = s->rcache.evictions;
	o->rs.max_entries = s->rcache.max_entries;
	o->rs.max_bytes = s->rcache.max_bytes;
	o->rs.pending = s->rcache.pending;
	st->rcache = &o->rs;
	st->version = (char *)s->version;
	st->instance_id.data = d->instance_id;
	st->instance_id.len = sizeof(d->instance_id);
	st->pid = s->pid;
	st->uptime_ms = s->uptime_ms;
	st->socket_path = d->socket_path;
	st->clients = s->clients;
	st->regions = s->regions;
	st->imports = s->imports;
	st->ops_completed = s->ops_completed;
	st->ops_failed = s->ops_failed;
	st->ops_in_flight = progress_ops_in_flight(d->progress);
	st->workers = 1;
	st->rss_bytes = s->rss_bytes;
	for (unsigned p = XFER_PATH_NONE + 1; p < XFER_PATH__COUNT; p++) {
		st->bytes_moved += s->paths[p].bytes;
		if (!s->paths[p].ops)
			continue;
		xfer__ctl__path_count__init(&o->pcs[npaths]);
		o->pcs[npaths].path = (char *)path_name(p);
		o->pcs[npaths].ops = s->paths[p].ops;
		o->pcs[npaths].bytes = s->paths[p].bytes;
		o->pcp[npaths] = &o->pcs[npaths];
		npaths++;
	}
	st->n_paths = npaths;
	st->paths = o->pcp;
	fill_health(s, o);
}

static int reply_status(struct ctl_conn *cc)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	struct stats_snapshot *s = malloc(sizeof(*s));
	struct status_parts parts;
	int rc;

	if (!s)
		return reply_error(cc, -ENOMEM, "out of memory");
	stats_collect(cc->d, s);
	fill_status(cc->d, s, &parts);
	m.body_case = XFER__CTL__CTL_MSG__BODY_STATUS_REPLY;
	m.status_reply = &parts.st;
	rc = send_reply(cc, &m);
	free(s);
	return rc;
}

/* xferctl stats: the snapshot the metrics endpoint exports
 * (ctl_stats.c). */
struct stats_parts {
	struct status_parts status;
	Xfer__Ctl__StatsReply rep;
	struct ctl_stats_parts body;
};

static void fill_stats(struct xferd *d, struct stats_snapshot *s,
		       struct stats_parts *o)
{
	Xfer__Ctl__StatsReply *r = &o->rep;

	xfer__ctl__stats_reply__init(r);
	fill_status(d, s, &o->status);
	r->status = &o->status.st;
	ctl_stats_fill(s, &o->body, r);
}

static int reply_stats(struct ctl_conn *cc)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	struct stats_snapshot *s = malloc(sizeof(*s));
	struct stats_parts *parts = malloc(sizeof(*parts));
	int rc;

	if (!s || !parts) {
		free(s), free(parts);
		return reply_error(cc, -ENOMEM, "out of memory");
	}
	stats_collect(cc->d, s);
	fill_stats(cc->d, s, parts);
	m.body_case = XFER__CTL__CTL_MSG__BODY_STATS_REPLY;
	m.stats_reply = &parts->rep;
	rc = send_reply(cc, &m);
	free(s), free(parts);
	return rc;
}

struct list_acc {
	struct xferd *d;
	void **items;
	size_t n, cap, item_size;
};

/* Append one zeroed item of size bytes; NULL when out of memory. */
static void *acc_push_sized(struct list_acc *acc, size_t size)
{
	if (acc->n == acc->cap) {
		size_t cap = acc->cap ? 2 * acc->cap : 16;
		void **items = realloc(acc->items, cap * sizeof(*items));
		if (!items)
			return NULL;
		acc->items = items;
		acc->cap = cap;
	}
	void *it = calloc(1, size);
	if (it)
		acc->items[acc->n++] = it;
	return it;
}

/* Append one zeroed item of acc->item_size. */
static void *acc_push(struct list_acc *acc)
{
	return acc_push_sized(acc, acc->item_size);
}

static void acc_free(struct list_acc *acc)
{
	for (size_t i = 0; i < acc->n; i++)
		free(acc->items[i]);
	free(acc->items);
}

static void add_client(const struct client_view *v, void *arg)
{
	struct list_acc *acc = arg;
	Xfer__Ctl__ClientInfo *ci = acc_push(acc);
	struct regtab_counts counts;

	if (!ci)
		return;
	xfer__ctl__client_info__init(ci);
	regtab_count(acc->d->regs, v->id, &counts);
	ci->id = v->id;
	ci->pid = (uint32_t)v->pid;
	ci->uid = (uint32_t)v->uid;
	ci->name = (char *)v->name;
	ci->regions = counts.regions;
	ci->imports = counts.imports;
	ci->ops_completed = atomic_load_explicit(&v->stats->ops_completed,
						 memory_order_relaxed);
	ci->ops_failed = atomic_load_explicit(&v->stats->ops_failed,
					      memory_order_relaxed);
	ci->bytes_moved = atomic_load_explicit(&v->stats->bytes_moved,
					       memory_order_relaxed);
	ci->sq_entries = v->sq_entries;
	ci->connected_ms = v->connected_ms;
	ci->notify_queued = atomic_load_explicit(&v->stats->notify_queued,
						 memory_order_relaxed);
	ci->notify_refused = atomic_load_explicit(&v->stats->notify_refused,
						  memory_order_relaxed);
}

static int reply_clients(struct ctl_conn *cc)
{
	struct list_acc acc = { .d = cc->d,
				.item_size = sizeof(Xfer__Ctl__ClientInfo) };
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__ClientsReply rep = XFER__CTL__CLIENTS_REPLY__INIT;

	client_foreach(cc->d, add_client, &acc);
	rep.n_clients = acc.n;
	rep.clients = (Xfer__Ctl__ClientInfo **)acc.items;
	m.body_case = XFER__CTL__CTL_MSG__BODY_CLIENTS_REPLY;
	m.clients_reply = &rep;
	int rc = send_reply(cc, &m);
	acc_free(&acc);
	return rc;
}

static void add_region(const struct region *r, void *arg)
{
	struct list_acc *acc = arg;
	Xfer__Ctl__RegionInfo *ri = acc_push(acc);

	if (!ri)
		return;
	xfer__ctl__region_info__init(ri);
	ri->handle = region_handle(r);
	ri->owner = region_owner(r);
	ri->kind = (char *)region_kind_name(region_kind(r));
	ri->length = region_length(r);
	ri->addr = region_kind(r) == REGION_CMA ? region_cma_addr(r) : 0;
	ri->refs = region_imports(r);
}

static int reply_regions(struct ctl_conn *cc)
{
	struct list_acc acc = { .d = cc->d,
				.item_size = sizeof(Xfer__Ctl__RegionInfo) };
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__RegionsReply rep = XFER__CTL__REGIONS_REPLY__INIT;

	regtab_foreach_region(cc->d->regs, add_region, &acc);
	rep.n_regions = acc.n;
	rep.regions = (Xfer__Ctl__RegionInfo **)acc.items;
	m.body_case = XFER__CTL__CTL_MSG__BODY_REGIONS_REPLY;
	m.regions_reply = &rep;
	int rc = send_reply(cc, &m);
	acc_free(&acc);
	return rc;
}

/* A PeerInfo and the strings it points to, in one allocation: the view's
 * strings are only promised for the duration of the callback. */
struct peer_item {
	Xfer__Ctl__PeerInfo info; /* first: items are used as PeerInfo * */
	char *addrs[NETADDR_MAX];
	uint8_t instance_id[sizeof(((struct peer_view *)0)->instance_id)];
	size_t used;
	char text[];
};

/* Enough for "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128". */
#define ADDR_TEXT_MAX 64

static char *item_strdup(struct peer_item *it, const char *s)
{
	size_t n = strlen(s ? s : "") + 1;
	char *p = it->text + it->used;

	memcpy(p, s ? s : "", n);
	it->used += n;
	return p;
}

static size_t text_size(const char *s)
{
	return (s ? strlen(s) : 0) + 1;
}

static void add_peer(const struct peer_view *v, void *arg)
{
	struct list_acc *acc = arg;
	size_t naddrs = v->naddrs < NETADDR_MAX ? v->naddrs : NETADDR_MAX;
	size_t size = text_size(v->node_name) + text_size(v->address) +
		      text_size(v->why) + text_size(v->state) +
		      text_size(v->last_error) + naddrs * ADDR_TEXT_MAX;
	struct peer_item *it = acc_push_sized(acc, sizeof(*it) + size);
	Xfer__Ctl__PeerInfo *pi;

	if (!it)
		return;
	pi = &it->info;
	xfer__ctl__peer_info__init(pi);
	memcpy(it->instance_id, v->instance_id, sizeof(it->instance_id));
	pi->instance_id.data = it->instance_id;
	/* All zeros: not known before the handshake; sent as empty. */
	for (size_t i = 0; i < sizeof(it->instance_id); i++)
		if (it->instance_id[i])
			pi->instance_id.len = sizeof(it->instance_id);
	pi->node_name = item_strdup(it, v->node_name);
	for (size_t i = 0; i < naddrs; i++) {
		it->addrs[i] = it->text + it->used;
		netaddr_format(&v->addrs[i], true, it->addrs[i], ADDR_TEXT_MAX);
		it->used += ADDR_TEXT_MAX;
	}
	pi->n_addresses = naddrs;
	pi->addresses = it->addrs;
	pi->address = item_strdup(it, v->address);
	pi->why = item_strdup(it, v->why);
	pi->state = item_strdup(it, v->state);
	pi->initiated = v->initiated != 0;
	pi->rtt_ns = v->rtt_ns;
	pi->lane_up = v->lane_up;
	pi->lane_ops = v->lane_ops;
	pi->bytes_tx = v->bytes_tx;
	pi->bytes_rx = v->bytes_rx;
	pi->ops = v->ops;
	pi->errors = v->errors;
	pi->up_ms = v->up_ms;
	pi->last_error = item_strdup(it, v->last_error);
}

/* The GPU x rail table into o (its strings point into t or statics). */
struct gpu_rdma_out {
	Xfer__Ctl__GpuRdma g;
	Xfer__Ctl__GpuRails gr[GPU_MAX], *grp[GPU_MAX];
	char *rails[RDMA_RAIL_MAX];
	char *dist[GPU_MAX][RDMA_RAIL_MAX];
	uint32_t pref[GPU_MAX][RDMA_RAIL_MAX];
};

static Xfer__Ctl__GpuRdma *fill_gpu_rdma(struct ctl_conn *cc,
					 struct gpu_rdma_out *o)
{
	const struct rdma_topo *t = rdma_topo(progress_rdma(cc->d->progress));

	xfer__ctl__gpu_rdma__init(&o->g);
	if (!t) {
		o->g.gpu_mem = (char *)"none";
		o->g.why = (char *)"no RDMA transport (rdma off or no devices)";
		return &o->g;
	}
	o->g.gpu_mem = (char *)t->gpu_mem;
	o->g.why = (char *)t->why;
	for (int r = 0; r < t->nrails; r++)
		o->rails[r] = (char *)t->rail[r];
	o->g.n_rails = (size_t)t->nrails;
	o->g.rails = o->rails;
	for (int g = 0; t->nrails && g < t->ngpus; g++) {
		Xfer__Ctl__GpuRails *gr = &o->gr[g];
		xfer__ctl__gpu_rails__init(gr);
		gr->gpu = (uint32_t)g;
		gr->bdf = (char *)t->gpu_bdf[g];
		for (int r = 0; r < t->nrails; r++) {
			o->dist[g][r] = (char *)aff_distance_name(t->dist[g][r]);
			if (rdma_topo_prefer(t, g) >> r & 1)
				o->pref[g][gr->n_preferred++] = (uint32_t)r;
		}
		gr->n_distance = (size_t)t->nrails;
		gr->distance = o->dist[g];
		gr->preferred = o->pref[g];
		o->grp[g] = gr;
		o->g.n_gpus++;
	}
	o->g.gpus = o->grp;
	return &o->g;
}

static int reply_gpus(struct ctl_conn *cc)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__GpusReply rep = XFER__CTL__GPUS_REPLY__INIT;
	Xfer__Ctl__GpuInfo info[GPU_MAX], *ptr[GPU_MAX];
	struct gpu_info gi[GPU_MAX];
	uint32_t peers[GPU_MAX][GPU_MAX];
	int n = gpu_count();

	for (int i = 0; i < n; i++) {
		xfer__ctl__gpu_info__init(&info[i]);
		if (gpu_info(i, &gi[i]))
			continue;
		info[i].index = (uint32_t)i;
		info[i].name = gi[i].name;
		info[i].uuid.data = gi[i].uuid;
		info[i].uuid.len = GPU_UUID_LEN;
		info[i].mem_total = gi[i].mem_total;
		info[i].mem_free = gi[i].mem_free;
		for (int j = 0; j < n; j++)
			if (gi[i].peer[j])
				peers[i][info[i].n_peers++] = (uint32_t)j;
		info[i].peers = peers[i];
		ptr[i] = &info[i];
	}
	rep.n_gpus = (size_t)n;
	rep.gpus = ptr;
	rep.unavailable = (char *)(n ? "" : gpu_unavailable_reason());
	rcache_count(cc->d->rcache, &rep.imports, &rep.import_refs);
	struct gpu_rdma_out *gro = calloc(1, sizeof(*gro));
	if (gro)
		rep.gpu_rdma = fill_gpu_rdma(cc, gro);
	m.body_case = XFER__CTL__CTL_MSG__BODY_GPUS_REPLY;
	m.gpus_reply = &rep;
	int rc = send_reply(cc, &m);
	free(gro);
	return rc;
}

static int reply_rails(struct ctl_conn *cc)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__RailsReply rep = XFER__CTL__RAILS_REPLY__INIT;
	Xfer__Ctl__RailInfo info[RDMA_RAIL_MAX], *ptr[RDMA_RAIL_MAX];
	struct rdma_rail_info ri[RDMA_RAIL_MAX];
	char ip[RDMA_RAIL_MAX][INET6_ADDRSTRLEN];
	int n = rdma_dev_rail_count();
	size_t k = 0, nqp = 0;
	/* Queue pairs of all rails, split by rail below. */
	struct rdma_qp_info *qi = calloc(CTL_QPS_MAX, sizeof(*qi));
	Xfer__Ctl__QpInfo *qinfo = calloc(CTL_QPS_MAX, sizeof(*qinfo));
	Xfer__Ctl__QpInfo **qptr = calloc(CTL_QPS_MAX, sizeof(*qptr));
	int rc;

	if (!qi || !qinfo || !qptr) {
		free(qi), free(qinfo), free(qptr);
		return reply_error(cc, -ENOMEM, "out of memory");
	}
	struct rdma *rdma = progress_rdma(cc->d->progress);
	size_t total = rdma_qp_list(rdma, -1, qi, CTL_QPS_MAX);

	for (int i = 0; i < n && k < RDMA_RAIL_MAX; i++) {
		Xfer__Ctl__RailInfo *r = &info[k];

		if (rdma_dev_rail(i, &ri[k]))
			continue;
		xfer__ctl__rail_info__init(r);
		netaddr_format(&ri[k].addr, false, ip[k], sizeof(ip[k]));
		r->device = ri[k].dev;
		r->port = ri[k].port;
		r->state = (char *)ri[k].state;
		r->link_layer = (char *)ri[k].link_layer;
		r->transport = (char *)ri[k].transport;
		r->mtu = ri[k].mtu;
		r->lid = ri[k].lid;
		r->gid_index = (uint32_t)ri[k].gid_index;
		r->gid = ri[k].gid_text;
		r->ip = ip[k];
		r->prefix_len = ri[k].addr.prefix_len;
		r->netdev = ri[k].netdev;
		struct rdma_rail_stats st;
		rdma_rail_stats(rdma, i, &st);
		r->qps = st.qps;
		r->bytes_tx = st.bytes_tx;
		r->bytes_rx = st.bytes_rx;
		r->wrs = st.wrs;
		r->errors = st.errors;
		r->token_ranges = (char *)rdma_grant_mode(ri[k].dev_index);
		r->windows = (char *)ri[k].windows;
		rdma_grant_count(ri[k].dev_index, &r->grants, &r->grants_made);
		r->qp = &qptr[nqp];
		for (size_t j = 0; j < total; j++) {
			if (qi[j].rail != i)
				continue;
			Xfer__Ctl__QpInfo *q = &qinfo[nqp];
			xfer__ctl__qp_info__init(q);
			q->peer = qi[j].peer;
			q->peer_rail = qi[j].peer_rail;
			q->slot = qi[j].slot;
			q->initiator = qi[j].initiator;
			q->qpn = qi[j].qpn;
			q->remote_qpn = qi[j].remote_qpn;
			q->state = (char *)qi[j].state;
			q->bytes = qi[j].bytes;
			q->wrs = qi[j].wrs;
			q->outstanding = qi[j].outstanding;
			qptr[nqp++] = q;
			r->n_qp++;
		}
		ptr[k++] = r;
	}
	rep.n_rails = k;
	rep.rails = ptr;
	struct gpu_rdma_out *gro = calloc(1, sizeof(*gro));
	if (gro)
		rep.gpu_rdma = fill_gpu_rdma(cc, gro);
	m.body_case = XFER__CTL__CTL_MSG__BODY_RAILS_REPLY;
	m.rails_reply = &rep;
	rc = send_reply(cc, &m);
	free(gro);
	free(qi), free(qinfo), free(qptr);
	return rc;
}

static int reply_peers(struct ctl_conn *cc)
{
	struct list_acc acc = { .d = cc->d };
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__PeersReply rep = XFER__CTL__PEERS_REPLY__INIT;

	if (cc->d->peers)
		peers_foreach(cc->d->peers, add_peer, &acc);
	rep.n_peers = acc.n;
	rep.peers = (Xfer__Ctl__PeerInfo **)acc.items;
	m.body_case = XFER__CTL__CTL_MSG__BODY_PEERS_REPLY;
	m.peers_reply = &rep;
	int rc = send_reply(cc, &m);
	acc_free(&acc);
	return rc;
}

static int reply_config(struct ctl_conn *cc)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__ConfigReply rep;
	int rc = ctl_config_fill(cc->d, &rep);

	m.body_case = XFER__CTL__CTL_MSG__BODY_CONFIG_REPLY;
	m.config_reply = &rep;
	rc = rc ? reply_error(cc, rc, "out of memory") : send_reply(cc, &m);
	ctl_config_free(&rep);
	return rc;
}

static int reply_names(struct ctl_conn *cc)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__NamesReply rep;
	int rc = ctl_names_fill(cc->d, cc->uid, &rep);

	m.body_case = XFER__CTL__CTL_MSG__BODY_NAMES_REPLY;
	m.names_reply = &rep;
	rc = rc ? reply_error(cc, rc, "out of memory") : send_reply(cc, &m);
	ctl_names_free(&rep);
	return rc;
}

/* Runs once per ping, maybe inside peers_ping, maybe after the socket
 * has closed. */
static void on_ping_done(void *arg, int error, uint64_t rtt_ns,
			 const char *who)
{
	struct ctl_conn *cc = arg;
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__PingReply pr = XFER__CTL__PING_REPLY__INIT;

	cc->ping_pending = false;
	if (cc->sock >= 0) {
		pr.who = (char *)(who && *who ? who : cc->ping_target);
		pr.error = error > 0 ? -error : error;
		pr.rtt_ns = error ? 0 : rtt_ns;
		m.body_case = XFER__CTL__CTL_MSG__BODY_PING_REPLY;
		m.ping_reply = &pr;
		if (send_reply(cc, &m)) {
			log_debug("ctl connection from pid %d: cannot send the "
				  "ping reply, closed", (int)cc->pid);
			ctl_close(cc);
		}
	} else {
		log_debug("ctl: ping of %s finished after pid %d left",
			  cc->ping_target, (int)cc->pid);
	}
	ctl_put(cc);
}

/* rq->target was checked by ctl_msg_check. */
static int start_ping(struct ctl_conn *cc, const Xfer__Ctl__PingRequest *rq)
{
	snprintf(cc->ping_target, sizeof(cc->ping_target), "%s", rq->target);
	log_debug("ctl: pid %d pings %s", (int)cc->pid, cc->ping_target);
	/* Set before the call: the callback may run inside it. */
	cc->ping_pending = true;
	ctl_get(cc);
	if (cc->d->peers)
		peers_ping(cc->d->peers, cc->ping_target, cc->uid, on_ping_done,
			   cc);
	else
		on_ping_done(cc, -EHOSTUNREACH, 0, NULL);
	return 0;
}

/* One request; returns 0, or -EPROTO when the connection must close. */
static int dispatch(struct ctl_conn *cc, const uint8_t *pkt, size_t len)
{
	Xfer__Ctl__CtlMsg *m;
	const char *why;
	int rc;

	if (wire_tag(pkt, len) != WIRE_TAG_CTL)
		return -EPROTO;
	m = xfer__ctl__ctl_msg__unpack(NULL, len - WIRE_TAG_LEN,
				       pkt + WIRE_TAG_LEN);
	if (!m)
		return -EPROTO;
	rc = ctl_msg_check(m, &why);
	if (rc) {
		reply_error(cc, rc, why);
		goto out;
	}
	if (cc->ping_pending) {
		reply_error(cc, -EBUSY, "one question at a time: a ping is "
			    "in progress");
		rc = -EPROTO;
		goto out;
	}
	switch (m->body_case) {
	case XFER__CTL__CTL_MSG__BODY_STATUS:
		rc = reply_status(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_CLIENTS:
		rc = reply_clients(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_REGIONS:
		rc = reply_regions(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_PEERS:
		rc = reply_peers(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_GPUS:
		rc = reply_gpus(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_RAILS:
		rc = reply_rails(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_STATS:
		rc = reply_stats(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_CONFIG:
		rc = reply_config(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_NAMES:
		rc = reply_names(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_PING:
		rc = start_ping(cc, m->ping);
		break;
	default:  /* ctl_msg_check let no other type through */
		reply_error(cc, -EPROTO, "unknown request");
		rc = -EPROTO;
		break;
	}
out:
	xfer__ctl__ctl_msg__free_unpacked(m, NULL);
	return rc ? -EPROTO : 0;
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_conn *cc = arg;
	uint8_t pkt[WIRE_MAX_PACKET];
	int fds[WIRE_MAX_FDS];
	unsigned nfds;

	if (what & EV_TIMEOUT) {
		/* A ping out has a deadline of its own: its answer closes
		 * nothing early. */
		if (cc->ping_pending)
			return;
		log_debug("ctl connection from pid %d: idle for "
			  "ctl_idle_timeout_ms, closed", (int)cc->pid);
		ctl_close(cc);
		return;
	}
	ssize_t n = wire_recv(fd, pkt, fds, &nfds);
	if (n == -EAGAIN)
		return;
	wire_close_fds(fds, &nfds);
	ctl_get(cc);
	if (n <= 0 || dispatch(cc, pkt, (size_t)n)) {
		if (n > 0)
			log_info("ctl connection from pid %d: bad request, closed",
				 (int)cc->pid);
		ctl_close(cc);
	}
	ctl_put(cc);
}

/* Over a limit: NULL, or why.  Counts the connection otherwise. */
static const char *ctl_count(struct ctl_conn *cc)
{
	struct xferd *d = cc->d;
	bool root = cc->uid == 0;

	if (d->nctl >= d->cfg.max_ctl_connections +
			       (root ? CTL_ROOT_RESERVE : 0))
		return "xferd has max_ctl_connections xferctl connections";
	if (!root) {
		struct uid_usage *uu = uid_usage_get(d->uid_use, cc->uid);

		if (!uu)
			return "out of memory";
		if (uid_conn_take(uu, UID_CTL, d->cfg.max_ctl_per_uid)) {
			uid_usage_put(d->uid_use, uu);
			return "too many xferctl connections of this user "
			       "(max_ctl_per_uid)";
		}
		cc->uu = uu;
	}
	d->nctl++;
	cc->counted = true;
	return NULL;
}

/* Refusals come in floods when someone tries: one line a second. */
static void log_refused(const struct ctl_conn *cc, const char *why)
{
	static time_t last;
	static unsigned long more;
	time_t now = time(NULL);

	if (now == last) {
		more++;
		return;
	}
	log_info("ctl connection from pid %d uid %d refused: %s (and %lu "
		 "more in the second before)", (int)cc->pid, (int)cc->uid, why,
		 more);
	last = now;
	more = 0;
}

void ctl_accept(struct xferd *d, int sock, const struct ucred *cred,
		const uint8_t *pkt, size_t len)
{
	struct ctl_conn *cc = calloc(1, sizeof(*cc));
	const char *why;

	if (!cc) {
		close(sock);
		return;
	}
	cc->d = d;
	cc->sock = sock;
	cc->pid = cred->pid;
	cc->uid = cred->uid;
	cc->refs = 1; /* the socket's */
	if ((why = ctl_count(cc))) {
		log_refused(cc, why);
		reply_error(cc, -EUSERS, why);
		ctl_close(cc);
		return;
	}
	ctl_get(cc);
	if (dispatch(cc, pkt, len)) {
		log_info("ctl connection from pid %d: bad request, closed",
			 (int)cc->pid);
		ctl_close(cc);
	} else if (cc->sock >= 0) {
		struct timeval idle = {
			.tv_sec = d->cfg.ctl_idle_timeout_ms / 1000,
			.tv_usec = d->cfg.ctl_idle_timeout_ms % 1000 * 1000,
		};
		/* EV_PERSIST: the deadline starts again at each request. */
		cc->ev = event_new(d->base, sock, EV_READ | EV_PERSIST,
				   on_readable, cc);
		if (!cc->ev || event_add(cc->ev, &idle))
			ctl_close(cc);
	}
	ctl_put(cc);
}
