/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress_life.c - the progress thread's life: made (its event base,
 * its doorbells, the same-node movers), given the transports and the
 * resources they share (progress_enable_*), each route's ops table
 * filled (route_ops), and destroyed, its movers and their resources in
 * the order they depend on one another.  With them the hooks through
 * which the links and the transports reach the executor, the main
 * thread and every mover (link down, control frames, the movers' own
 * frames, region descriptions, a region's release, the deadlines'
 * tick).  The loop that drives the movers is progress.c's.
 *
 * The main thread, before progress_start and after the thread was
 * joined (progress_destroy), so no lock guards what it sets up; the
 * hooks run on the progress thread (hook_region_released on any
 * thread: it takes only the grant table's own lock, a leaf).
 * Lock order: as progress.c.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include <event2/event.h>

#include "core/xop.h"
#include "engine/progress_int.h"
#include "gpu/gpu.h"
#include "local/local.h"
#include "mem/copy_workers.h"
#include "mem/staging.h"
#include "peer.pb-c.h"
#include "transport/rdma.h"
#include "transport/rdma_grant.h"
#include "transport/tcp.h"

/* --- the deadline timer, armed while operations are out on links
 * (progress_op_started): each mover ends its own --- */

static void on_expire(evutil_socket_t fd, short what, void *arg)
{
	struct progress *p = arg;
	(void)fd, (void)what;

	uint64_t now = now_ns();

	for (int i = 0; i < p->nmovers; i++)
		p->movers[i].ops->expire(p->movers[i].impl, now);
}

/* --- link hooks: from the TCP links to the main thread --- */

static void hook_need_peer(void *arg, const struct token *tok)
{
	struct net_notice *n = calloc(1, sizeof(*n));

	if (!n)
		return;  /* the operations time out */
	n->kind = NET_NEED_PEER;
	memcpy(n->id, tok->instance_id, LINK_ID_LEN);
	n->tok = *tok;
	progress_post_net_notice(arg, n);
}

static void hook_link_down(void *arg, const uint8_t id[LINK_ID_LEN],
			   uint64_t gen, int err, const char *why)
{
	struct progress *p = arg;
	struct net_notice *n = calloc(1, sizeof(*n));

	/* Its queue pairs go with it (the peer's side tears down too). */
	for (int i = 0; i < p->nmovers; i++)
		p->movers[i].ops->peer_down(p->movers[i].impl, id, gen,
						err);
	if (!n)
		return;
	n->kind = NET_LINK_DOWN;
	memcpy(n->id, id, LINK_ID_LEN);
	n->gen = gen;
	n->err = err;
	snprintf(n->why, sizeof(n->why), "%s", why);
	progress_post_net_notice(arg, n);
}

static void hook_ctl_frame(void *arg, const uint8_t id[LINK_ID_LEN],
			   struct Xfer__Peer__PeerMsg *m)
{
	struct net_notice *n = calloc(1, sizeof(*n));

	if (!n) {
		/* The request it answers times out on the main thread. */
		xfer__peer__peer_msg__free_unpacked(m, NULL);
		return;
	}
	n->kind = NET_CTL_FRAME;
	memcpy(n->id, id, LINK_ID_LEN);
	n->msg = m;
	progress_post_net_notice(arg, n);
}

static bool hook_frame(void *arg, const uint8_t id[LINK_ID_LEN],
		       const struct Xfer__Peer__PeerMsg *m)
{
	struct progress *p = arg;

	for (int i = 0; i < p->nmovers; i++)
		if (p->movers[i].ops->frame(p->movers[i].impl, id, m))
			return true;
	return false;
}

static enum describe_result hook_describe(void *arg, struct region *r,
					  const struct describe_req *q,
					  struct Xfer__Peer__RdmaMemory *out,
					  uint32_t *keys, size_t max_keys)
{
	struct progress *p = arg;

	for (int i = 0; i < p->nmovers; i++) {
		enum describe_result d = p->movers[i].ops->describe(
			p->movers[i].impl, r, q, out, keys, max_keys);
		if (d != DESCRIBE_NONE)
			return d;
	}
	return DESCRIBE_NONE;
}

/* A region's last reference goes, on any thread, before it is released:
 * what the NICs granted peers of it ends (ours), or its owner is told to
 * end the grant it made for us (an import's; transport/rdma_grant.h). */
static void hook_region_released(void *arg, const struct region *r)
{
	struct progress *p = arg;
	uint8_t owner[LINK_ID_LEN], msg[64];
	size_t len;

	if (region_kind(r) == REGION_MEMFD)
		rdma_grant_end_region(r);
	else if ((len = rdma_grant_release_msg(r, owner, msg, sizeof(msg))))
		progress_link_send(p, owner, msg, len);
}

static int hook_notify_local(void *arg, struct region *r, uint64_t value,
			     int64_t bytes, const struct notify_note *note)
{
	return exec_notify_owner(arg, r, value, bytes, &note->from,
				 &note->msg);
}

/* The main thread's command doorbell (push()): read down, on the
 * progress thread, so that it fires again only at the next ring. */
static void on_doorbell(evutil_socket_t fd, short what, void *arg)
{
	uint64_t v;
	(void)what, (void)arg;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("doorbell read");
}

/* --- life cycle --- */

void progress_set_instance_id(struct progress *p,
			      const uint8_t id[LINK_ID_LEN])
{
	memcpy(p->instance_id, id, LINK_ID_LEN);
}

/* Route's own copy of its mover's ops, what the mover lacks pointed to
 * the stubs (core/mover.h): every struct mover of the route calls
 * through it.  The tables are xferd's own (test_movers.c fills each):
 * one refused is a build gone wrong, found at start-up. */
static const struct mover_ops *route_ops(struct progress *p,
					 enum path_route route,
					 const struct mover_ops *ops)
{
	if (mover_ops_fill(&p->route_ops[route], ops))
		fatalx("mover %s: no submit or destroy, or not version %d",
		       ops->name ? ops->name : "(unnamed)", MOVER_OPS_VERSION);
	return &p->route_ops[route];
}

/* Mover m (its impl NULL: out of memory) runs route; the GPU mover
 * stays last (exec_cancel_client). */
static int add_local(struct progress *p, const struct mover_ops *ops,
		     void *impl, enum path_route route)
{
	if (!impl)
		return -ENOMEM;
	int at = p->nlocal++;
	if (at && p->local[at - 1].route == ROUTE_GPU) {
		p->local[at] = p->local[at - 1];
		at--;
	}
	p->local[at] = (struct mover){ route_ops(p, route, ops), impl, route };
	p->routes[route] = p->local[at];
	/* Those with a poll of their own run every pass (poll_local). */
	p->nlocal_polled = 0;
	for (int i = 0; i < p->nlocal; i++)
		if (p->local[i].ops->poll != mover_stub_poll)
			p->local_polled[p->nlocal_polled++] = p->local[i];
	return 0;
}

/* memcpy and CMA always; GPU copies where there are GPUs.  The staged
 * mover comes with the staging chunks (progress_enable_staging). */
static int add_local_movers(struct progress *p)
{
	p->res.hooks = (struct local_hooks){
		.op_begin = exec_hook_op_begin,
		.op_abandon = exec_hook_op_abandon,
		.op_done = exec_op_done,
		.forget_batch = exec_forget_batch,
		.arg = p,
	};
	if (add_local(p, &memcpy_mover_ops, memcpy_mover_create(&p->res),
		      ROUTE_MEMCPY) ||
	    add_local(p, &cma_mover_ops, cma_mover_create(&p->res),
		      ROUTE_CMA))
		return -ENOMEM;
	if (p->res.gpu && add_local(p, &gpu_mover_ops,
				    gpu_mover_create(&p->res), ROUTE_GPU))
		return -ENOMEM;
	return 0;
}

/* Each ends what it still holds (-ECANCELED) and goes. */
static void destroy_local_movers(struct progress *p)
{
	for (int i = 0; i < p->nlocal; i++) {
		p->routes[p->local[i].route] = (struct mover){ 0 };
		p->local[i].ops->destroy(p->local[i].impl);
	}
	p->nlocal = p->nlocal_polled = 0;
}

struct progress *progress_create(struct regtab *regs, uint32_t spin_us,
				 int cpu)
{
	struct progress *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->regs = regs;
	p->cpu = cpu;
	atomic_init(&p->spin_us, spin_us);
	atomic_init(&p->max_inflight, UINT32_MAX);
	atomic_init(&p->notify_queue_max, PROGRESS_NOTIFY_QUEUE_MAX);
	atomic_init(&p->notify_uid_max, PROGRESS_NOTIFY_UID_MAX);
	atomic_init(&p->ops_in_flight, 0);
	p->cmds_tail = &p->cmds;
	TAILQ_INIT(&p->exec.deferred);
	pthread_mutex_init(&p->lock, NULL);
	p->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->doorbell < 0)
		goto err_doorbell;
	p->notice_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->notice_efd < 0)
		goto err_notice;
	/* Edge-triggered events (the clients' SQ doorbells, never read):
	 * epoll, whatever EVENT_NO* says. */
	struct event_config *ecfg = event_config_new();
	if (!ecfg)
		goto err_base;
	event_config_require_features(ecfg, EV_FEATURE_ET);
	event_config_set_flag(ecfg, EVENT_BASE_FLAG_IGNORE_ENV);
	p->base = event_base_new_with_config(ecfg);
	event_config_free(ecfg);
	/* Two priorities: a link's latency lane (transport/link_lane.c)
	 * runs before the rest in each turn of the loop. */
	if (!p->base || event_base_priority_init(p->base, 2))
		goto err_base;
	p->ev_doorbell = event_new(p->base, p->doorbell, EV_READ | EV_PERSIST,
				   on_doorbell, p);
	if (!p->ev_doorbell || event_add(p->ev_doorbell, NULL))
		goto err_event;
	/* NULL without GPUs: GPU descriptors then fail with -ENOTSUP. */
	p->res.gpu = gpu_copies_create();
	if (add_local_movers(p))
		goto err_movers;
	return p;

err_movers:
	destroy_local_movers(p);
	gpu_copies_destroy(p->res.gpu);
err_event:
	if (p->ev_doorbell)
		event_free(p->ev_doorbell);
	event_base_free(p->base);
err_base:
	close(p->notice_efd);
err_notice:
	close(p->doorbell);
err_doorbell:
	pthread_mutex_destroy(&p->lock);
	free(p);
	return NULL;
}

int progress_enable_net(struct progress *p, const struct transport_cfg *cfg,
			uint32_t op_timeout_ms)
{
	struct linkset_cfg lcfg = {
		.keepalive_ms = cfg->keepalive_ms,
		.peer_timeout_ms = cfg->peer_timeout_ms,
		.lanes = cfg->link_lanes,
	};
	struct tcp_cfg tcfg = { .tcp_chunk = cfg->tcp_chunk,
				.stage_ahead = cfg->tcp_stage_ahead,
				.bulk_queue = cfg->link_bulk_queue,
				.tenants = cfg->tenants,
				.stats = &p->exec.classes,
				.caps = p->exec.caps };
	const struct rdma_cfg rcfg = { .qps = cfg->rdma_qps,
				       .stripe = cfg->rdma_stripe,
				       .bulk_depth = cfg->rdma_bulk_depth,
				       .landing = cfg->rdma_landing,
				       .landing_chunks = cfg->rdma_landing_chunks,
				       .landing_peers = cfg->rdma_landing_peers,
				       .tenants = cfg->tenants };
	/* Up from the movers to the executor, and from the links' session
	 * to the main thread and the movers' own frames. */
	const struct mover_hooks hooks = {
		.op_done = exec_op_done,
		.reroute = exec_op_reroute,
		.notify_local = hook_notify_local,
		.need_peer = hook_need_peer,
		.describe = hook_describe,
		.arg = p,
	};
	const struct linkset_hooks lhooks = {
		.link_down = hook_link_down,
		.ctl_frame = hook_ctl_frame,
		.frame = hook_frame,
		.arg = p,
	};

	memcpy(tcfg.self_id, cfg->self_id, LINK_ID_LEN);
	memcpy(lcfg.self_id, cfg->self_id, LINK_ID_LEN);
	exec_caps_set(p, &cfg->tenants, cfg->tcp_chunk);
	/* TCP moves data on the links as their data client. */
	struct tcp_mover *tcp = tcp_mover_create(p->regs, &tcfg, &hooks);
	if (!tcp)
		return -ENOMEM;
	p->links = linkset_create(p->base, &lcfg, &lhooks, &tcp_link_client,
				  tcp);
	if (!p->links) {
		tcp_mover_ops.destroy(tcp);
		return -ENOMEM;
	}
	tcp_mover_bind(tcp, p->links);
	p->ev_expire = event_new(p->base, -1, EV_PERSIST, on_expire, p);
	if (!p->ev_expire) {
		tcp_mover_ops.destroy(tcp);
		p->links = NULL;
		return -ENOMEM;
	}
	/* GPU memory to other nodes goes through the staging chunks too. */
	if (p->res.staging)
		tcp_set_staging(tcp, p->res.staging, p->res.gpu);
	/* NULL without RDMA rails: then TCP moves everything.  With GPUs
	 * it stages through the GPU staging pool, registered with its
	 * NICs as well: GPU memory then goes by RDMA too. */
	struct rdma_stage_res sres = { .pool = p->res.staging,
				       .gpu = p->res.gpu, .regs = p->regs };
	memcpy(sres.self_id, cfg->self_id, LINK_ID_LEN);
	p->rdma = rdma_create(p->base, p->links, &rcfg, &hooks, &sres);
	rdma_share_tenants(p->rdma, p->exec.caps, &p->exec.classes);
	if (p->rdma) {
		p->movers[p->nmovers++] = (struct mover){
			route_ops(p, ROUTE_RDMA, &rdma_mover_ops), p->rdma,
			ROUTE_RDMA };
		/* The same queue pairs, through its staging buffers. */
		p->movers[p->nmovers++] = (struct mover){
			route_ops(p, ROUTE_RDMA_STAGED, &rdma_staged_mover_ops),
			p->rdma, ROUTE_RDMA_STAGED };
		/* And through the owner's landing chunks, for memory its
		 * NICs cannot reach (rdma_land.c). */
		p->movers[p->nmovers++] = (struct mover){
			route_ops(p, ROUTE_RDMA_OWNER_STAGED,
				  &rdma_owner_staged_mover_ops),
			p->rdma, ROUTE_RDMA_OWNER_STAGED };
		/* Before the thread runs: any thread may then read it. */
		region_set_release_hook(hook_region_released, p);
	}
	p->movers[p->nmovers++] = (struct mover){
		route_ops(p, ROUTE_LINK, &tcp_mover_ops), tcp, ROUTE_LINK };
	for (int i = 0; i < p->nmovers; i++)
		p->routes[p->movers[i].route] = p->movers[i];
	/* The staged route is the TCP transport's too: it stages what it
	 * moves of GPU memory itself (transport/tcp.c). */
	p->routes[ROUTE_LINK_STAGED] = p->routes[ROUTE_LINK];
	p->exec.op_timeout_ms = op_timeout_ms;
	p->exec.latency_max_bytes = cfg->latency_max_bytes;
	/* The shared resources' classes: the copy workers' tenant weights,
	 * the staging pool's latency reserve (again on every reload). */
	copy_workers_set_weights(p->res.workers, &cfg->tenants);
	staging_set_reserve(p->res.staging, cfg->staging_latency_reserve);
	return 0;
}

void progress_set_dlists(struct progress *p, struct dltab *t)
{
	p->dlists = t;
}

int progress_enable_staging(struct progress *p, uint32_t staging_mb,
			    uint32_t chunk)
{
	/* Without GPUs there is nothing to stage. */
	if (!p->res.gpu)
		return 0;
	chunk = (chunk + 4095u) & ~4095u;
	p->res.staging = staging_create((uint64_t)staging_mb << 20, chunk,
					true);
	if (!p->res.staging) {
		log_warnx("no staging memory (staging_mb %u): GPU memory will "
			  "not reach other nodes nor xfer_reg'd memory",
			  staging_mb);
		return -ENOMEM;
	}
	/* Without it GPU <-> xfer_reg'd memory here fails (-ENOTSUP). */
	if (add_local(p, &gpu_staged_mover_ops,
		      gpu_staged_mover_create(&p->res), ROUTE_GPU_STAGED))
		return -ENOMEM;
	return 0;
}

int progress_enable_copy_workers(struct progress *p, int n,
				 uint64_t cma_split_bytes)
{
	cma_mover_set_split(p->routes[ROUTE_CMA].impl, cma_split_bytes);
	if (n < 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		/* Measured on a 16-core H100 node, xfer_reg'd pinned memory
		 * -> GPU, 256 MiB: 8 workers 21 GB/s, 16 33 GB/s when the
		 * owner is read by process_vm_readv (no_new_privs; through
		 * /proc/PID/mem 10.9 and 12.5).  Idle workers sleep. */
		n = cpus >= 16 ? 16 : cpus >= 2 ? (int)(cpus / 2) : 1;
	}
	if (n == 0)
		return 0;
	p->res.workers = copy_workers_create((unsigned)n);
	if (!p->res.workers) {
		log_warnx("no copy workers: staged and large CMA copies run "
			  "on the progress thread");
		return 0;
	}
	return (int)copy_workers_count(p->res.workers);
}

bool progress_staging_stats(const struct progress *p,
			    struct staging_stats *out)
{
	/* Set before the thread starts, never changed: no lock. */
	staging_get_stats(p->res.staging, out);
	return p->res.staging != NULL;
}

struct rdma *progress_rdma(const struct progress *p)
{
	/* Set before the thread starts, cleared after it stopped. */
	return p ? p->rdma : NULL;
}

void progress_destroy(struct progress *p)
{
	if (!p)
		return;
	if (p->running) {
		progress_push_stop(p);
		pthread_join(p->thread, NULL);
	}
	/* No link sends any more; the grants end with the transport. */
	region_set_release_hook(NULL, NULL);
	/* The thread is gone: its state is ours now.  Operations still out
	 * end here (-ECONNRESET) so their regions are released. */
	/* RDMA first: the links it sends on outlive it, and the links'
	 * last reports (link down) must find it gone, not freed. */
	exec_run_deferred(p);
	/* The same-node movers end what they hold; their chunks go back to
	 * the pool as their copies end (and the split copies free what
	 * their parts share). */
	destroy_local_movers(p);
	copy_workers_destroy(p->res.workers);
	p->res.workers = NULL;
	/* Forgotten before they go: what they report while going (link
	 * down) must not reach one already freed. */
	struct mover gone[MOVERS_MAX];
	int ngone = p->nmovers;
	memcpy(gone, p->movers, sizeof(gone));
	p->nmovers = 0;
	for (int i = 0; i < ngone; i++)
		gone[i].ops->destroy(gone[i].impl);
	memset(p->routes, 0, sizeof(p->routes));
	p->rdma = NULL;
	p->links = NULL;
	/* GPU copies in flight finish before their memory goes. */
	gpu_copies_destroy(p->res.gpu);
	/* After the links (their buffers give chunks back) and the copies
	 * (those still out end here). */
	staging_destroy(p->res.staging);
	exec_xop_cache_free(p);
	free(p->exec.segs);
	regtab_memo_release(&p->exec.memo);
	progress_free_queues(p);
	if (p->ev_expire)
		event_free(p->ev_expire);
	event_free(p->ev_doorbell);
	/* Clients still attached (never detached): their events and queues
	 * go here, the clients (and their wake fds) with the main thread's. */
	for (size_t i = 0; i < p->nclients; i++) {
		struct prog_client *pc = p->clients[i];
		if (pc->ev_wake)
			event_free(pc->ev_wake);
		pc->ev_wake = NULL;
		exec_notify_forget(pc);
	}
	event_base_free(p->base);
	free(p->clients);
	close(p->doorbell);
	close(p->notice_efd);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
