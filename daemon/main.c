/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - xferd: start-up order, the event loop, shut-down order.
 *
 * Start-up: settings -> handle table -> GPUs and RDMA NICs -> progress
 * thread -> registration thread -> socket -> READY.  Shut-down
 * (SIGTERM/SIGINT): STOPPING -> stop accepting -> goodbye to every client
 * -> etcd lease revoked (metadata = etcd) -> stop the registration thread
 * (queued registrations cancelled and released) -> stop the progress
 * thread -> free clients and regions -> GPUs and NICs.  SIGHUP re-reads
 * the config file.
 */
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "client.h"
#include "common/clock.h"
#include "config.h"
#include "ops/ctl.h"
#include "ops/metrics.h"
#include "gpu/gpu.h"
#include "quota.h"
#include "listener.h"
#include "core/log.h"
#include "meta/cluster.h"
#include "meta/names.h"
#include "peer/peer.h"
#include "engine/progress.h"
#include "core/rcache.h"
#include "mem/dlist.h"
#include "mem/regworker.h"
#include "transport/rdma_dev.h"
#include "mem/region.h"
#include "common/rendezvous.h"
#include "sdnotify.h"
#include "uid_usage.h"
#include "xferd.h"

#define STATUS_INTERVAL_S 2
#define MAX_OVERRIDES     32

/* -o/-s/-l flags, kept to re-apply over the file on SIGHUP. */
struct overrides {
	const char *key[MAX_OVERRIDES];
	const char *value[MAX_OVERRIDES];
	unsigned n;
};

struct runtime {
	struct xferd d;
	struct overrides flags;
	struct listener *listener;
	struct metrics *metrics;   /* NULL: metrics_listen = off (or failed) */
	struct event *ev_term, *ev_int, *ev_hup, *ev_notice, *ev_status,
		*ev_watchdog;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: xferd [-c FILE] [-s SOCKET] [-l LEVEL] [-o KEY=VALUE]...\n"
		"  -c, --config FILE    config file (default %s if it exists)\n"
		"  -s, --socket PATH    listen here (default $XDG_RUNTIME_DIR/xferd.sock,\n"
		"                       /run/xferd/xferd.sock as root)\n"
		"  -l, --log-level LVL  error, warn, info, debug\n"
		"  -o, --set KEY=VALUE  any config key (see xferd.conf(5))\n"
		"  --list-keys          the config keys: name, values, what for\n"
		"  -V, --version        print the version\n"
		"  -h, --help           this text\n",
		CONFIG_DEFAULT_PATH);
}

/* Defaults, then the file, then flags, each key's source noted in src.
 * 0, or -1 with a logged reason. */
static int load_settings(struct runtime *rt, struct xferd_config *out,
			 struct config_sources *src)
{
	struct xferd_config cfg;
	char err[512];

	config_defaults(&cfg);
	*src = (struct config_sources){ { CONFIG_FROM_DEFAULT } };
	if (rt->d.config_path) {
		int rc = config_load_from(&cfg, src, rt->d.config_path, err,
					  sizeof(err));
		if (rc == -ENOENT && !rt->d.config_required)
			log_debug("no %s: embedded defaults", rt->d.config_path);
		else if (rc) {
			log_warnx("config: %s", err);
			return -1;
		}
	}
	for (unsigned i = 0; i < rt->flags.n; i++) {
		if (config_set_from(&cfg, src, CONFIG_FROM_FLAG,
				    rt->flags.key[i], rt->flags.value[i], err,
				    sizeof(err))) {
			log_warnx("command line: %s", err);
			return -1;
		}
	}
	*out = cfg;
	return 0;
}

static int add_override(struct overrides *o, const char *key,
			const char *value)
{
	if (o->n == MAX_OVERRIDES)
		return -1;
	o->key[o->n] = key;
	o->value[o->n] = value;
	o->n++;
	return 0;
}

static void parse_args(struct runtime *rt, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "set", required_argument, NULL, 'o' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ "list-keys", no_argument, NULL, 'K' },
		{ 0 },
	};
	int ch;

	rt->d.config_path = CONFIG_DEFAULT_PATH;
	while ((ch = getopt_long(argc, argv, "c:s:l:o:Vh", opts, NULL)) != -1) {
		int rc = 0;
		char *eq;
		switch (ch) {
		case 'c':
			rt->d.config_path = optarg;
			rt->d.config_required = true;
			break;
		case 's':
			rc = add_override(&rt->flags, "socket", optarg);
			break;
		case 'l':
			rc = add_override(&rt->flags, "log_level", optarg);
			break;
		case 'o':
			eq = strchr(optarg, '=');
			if (!eq) {
				fprintf(stderr, "xferd: -o needs KEY=VALUE, got '%s'\n",
					optarg);
				exit(2);
			}
			*eq = '\0';
			rc = add_override(&rt->flags, optarg, eq + 1);
			break;
		case 'V':
			printf("xferd %s\n", XFERD_VERSION);
			exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		case 'K':
			config_keys_print(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
		if (rc) {
			fprintf(stderr, "xferd: too many settings on the command line\n");
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xferd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		exit(2);
	}
}

static void update_status(struct runtime *rt)
{
	struct regtab_counts counts;
	const struct path_stats *ps = progress_path_stats(rt->d.progress);
	uint64_t bytes = 0;

	regtab_count_all(rt->d.regs, &counts);
	for (unsigned p = 0; p < XFER_PATH__COUNT; p++)
		bytes += atomic_load_explicit(&ps->bytes[p], memory_order_relaxed);
	sdnotify_status("%u clients, %u regions, %u imports, %llu MB moved",
			rt->d.nclients, counts.regions, counts.imports,
			(unsigned long long)(bytes / 1000000));
}

static void on_status_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	update_status(arg);
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
	/* Sent from the event loop: a stuck loop misses it and systemd
	 * restarts xferd. */
	sdnotify_watchdog();
}

static void on_notice(evutil_socket_t fd, short what, void *arg)
{
	struct runtime *rt = arg;
	(void)fd, (void)what;
	progress_take_notices(rt->d.progress, client_on_notice, &rt->d);
	progress_take_net_notices(rt->d.progress, peers_on_notice, rt->d.peers);
}

static void on_terminate(evutil_socket_t sig, short what, void *arg)
{
	struct runtime *rt = arg;
	(void)what;

	log_info("signal %d: shutting down", (int)sig);
	sdnotify_stopping();
	rt->d.stopping = true;
	event_base_loopbreak(rt->d.base);
}

/* What the progress thread needs to run links and transports. */
static struct transport_cfg net_cfg(const struct xferd *d)
{
	struct transport_cfg net = {
		.keepalive_ms = d->cfg.keepalive_ms,
		.peer_timeout_ms = d->cfg.peer_timeout_ms,
		.tcp_chunk = d->cfg.tcp_chunk,
		.tcp_stage_ahead = d->cfg.tcp_stage_ahead,
		.staging_mb = d->cfg.staging_mb,
		.rdma_qps = d->cfg.rdma_qps,
		.rdma_stripe = d->cfg.rdma_stripe,
		.rdma_bulk_depth = d->cfg.rdma_bulk_depth,
		.rdma_landing = d->cfg.rdma_landing,
		.rdma_landing_chunks = d->cfg.rdma_landing_chunks,
		.rdma_landing_peers = d->cfg.rdma_landing_peers,
		.link_bulk_queue = d->cfg.link_bulk_queue,
		.link_lanes = d->cfg.link_lanes,
		.latency_max_bytes = d->cfg.latency_max_bytes,
		.tenants = d->cfg.tenants,
		.staging_latency_reserve = d->cfg.staging_latency_reserve,
	};

	memcpy(net.self_id, d->instance_id, sizeof(net.self_id));
	return net;
}

/* A changed metrics_listen takes effect at once. */
static void reload_metrics(struct runtime *rt, const char *old)
{
	if (strcmp(old, rt->d.cfg.metrics_listen) == 0)
		return;
	metrics_close(rt->metrics);
	(void)metrics_open(&rt->d, &rt->metrics); /* a failure is logged */
}

/* The new tenants over the running ones (config_tenants_rebase): a
 * slot is held while a client of it remains or ops of it are queued. */
static int rebase_tenants(struct xferd *d, struct xferd_config *cfg)
{
	bool held[TENANT_MAX];
	char err[256];

	client_tenants_held(d, held);
	const struct class_stats *cs = progress_class_stats(d->progress);
	for (unsigned t = 0; t < TENANT_MAX; t++)
		if (atomic_load_explicit(&cs->tenant[t].queued_ops,
					 memory_order_relaxed))
			held[t] = true;
	int rc = config_tenants_rebase(&cfg->tenants, &d->cfg.tenants, held,
				       err, sizeof(err));
	if (rc) {
		/* The rest of the reload still applies: a tenant that keeps
		 * its slot (its clients still connected) must not hold every
		 * other setting back. */
		log_warnx("reload: %s; the tenants stay as they were", err);
		cfg->tenants = d->cfg.tenants;
	}
	return 0;
}

static void on_reload(evutil_socket_t sig, short what, void *arg)
{
	struct runtime *rt = arg;
	struct xferd_config cfg;
	struct config_sources src;
	(void)sig, (void)what;

	sdnotify_reloading();
	if (load_settings(rt, &cfg, &src) == 0 &&
	    rebase_tenants(&rt->d, &cfg) == 0) {
		struct xferd_config *cur = &rt->d.cfg;
		if (strcmp(cfg.socket_path, cur->socket_path) ||
		    cfg.progress_cpu != cur->progress_cpu ||
		    cfg.rdma != cur->rdma ||
		    cfg.rdma_landing != cur->rdma_landing ||
		    strcmp(cfg.rdma_devices, cur->rdma_devices))
			log_warnx("reload: socket, progress_cpu, rdma, "
				  "rdma_devices and rdma_landing change only "
				  "on restart");
		memcpy(cfg.socket_path, cur->socket_path, sizeof(cfg.socket_path));
		cfg.progress_cpu = cur->progress_cpu;
		cfg.rdma = cur->rdma;
		cfg.rdma_landing = cur->rdma_landing;
		memcpy(cfg.rdma_devices, cur->rdma_devices,
		       sizeof(cfg.rdma_devices));
		/* Those kept: their sources too. */
		static const char *const kept[] = { "socket", "progress_cpu",
						    "rdma", "rdma_devices",
						    "rdma_landing" };
		for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
			int k = config_key_index(kept[i]);
			if (k >= 0)
				src.of[k] = rt->d.cfg_src.of[k];
		}
		config_sources_reloaded(cur, &rt->d.cfg_src, &cfg, &src);
		rt->d.cfg_src = src;
		char old_metrics[CONFIG_HOST_MAX];
		memcpy(old_metrics, cur->metrics_listen, sizeof(old_metrics));
		*cur = cfg;
		log_set_level(cfg.log_level);
		log_set_target((enum log_target)cfg.log_target);
		progress_set_spin(rt->d.progress, cfg.spin_us);
		progress_set_max_inflight(rt->d.progress, cfg.max_inflight);
		progress_set_notify_queue_max(rt->d.progress,
					      cfg.notify_queue_max);
		progress_set_notify_uid_max(rt->d.progress,
					    cfg.notify_queue_max_per_uid);
		names_set_limit(rt->d.names, cfg.max_names);
		budget_apply(&rt->d.budget, &cfg);
		rcache_set_limits(rt->d.rcache, cfg.rcache_max_entries,
				  cfg.rcache_max_bytes);
		struct transport_cfg net = net_cfg(&rt->d);
		progress_net_cfg(rt->d.progress, &net, cfg.op_timeout_ms);
		reload_metrics(rt, old_metrics);
		peers_reload(rt->d.peers);
		log_info("configuration reloaded");
	} else {
		log_warnx("reload failed; keeping the running configuration");
	}
	sdnotify_ready();
}

static struct event *add_signal(struct runtime *rt, int sig,
				event_callback_fn fn)
{
	struct event *ev = evsignal_new(rt->d.base, sig, fn, rt);

	if (!ev || event_add(ev, NULL))
		fatalx("cannot watch signal %d", sig);
	return ev;
}

static struct event *add_timer(struct runtime *rt, uint64_t usec,
			       event_callback_fn fn)
{
	struct event *ev = event_new(rt->d.base, -1, EV_PERSIST, fn, rt);
	struct timeval tv = us_to_timeval(usec);

	if (!ev || event_add(ev, &tv))
		fatalx("cannot add a timer");
	return ev;
}

int main(int argc, char **argv)
{
	static struct runtime rt;
	struct xferd *d = &rt.d;

	log_init(LOG_LVL_INFO);
	parse_args(&rt, argc, argv);
	if (load_settings(&rt, &d->cfg, &d->cfg_src))
		return 1;
	log_set_level(d->cfg.log_level);
	log_set_target((enum log_target)d->cfg.log_target);
	if (d->cfg.socket_path[0])
		snprintf(d->socket_path, sizeof(d->socket_path), "%s",
			 d->cfg.socket_path);
	else
		rendezvous_default_socket(d->socket_path,
					  sizeof(d->socket_path), false);

	/* A client that dies mid-reply must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	if (getrandom(d->instance_id, sizeof(d->instance_id), 0) !=
	    (ssize_t)sizeof(d->instance_id))
		fatal("getrandom");
	clock_gettime(CLOCK_MONOTONIC, &d->started);
	TAILQ_INIT(&d->clients);
	d->next_client_id = 1;

	d->base = event_base_new();
	if (!d->base)
		fatalx("event_base_new failed");
	d->regs = regtab_create();
	if (!d->regs)
		fatalx("out of memory");
	d->names = names_create();
	d->dlists = dltab_create();
	d->uid_use = uid_usage_table_create();
	if (!d->names || !d->dlists || !d->uid_use)
		fatalx("out of memory");
	names_set_limit(d->names, d->cfg.max_names);
	/* GPUs are opened before anything uses them, and before READY:
	 * a GPU that exists but cannot be opened stops xferd here. */
	int ngpus = gpu_init();
	if (ngpus < 0)
		fatalx("cannot open the GPUs");
	if (ngpus == 0)
		log_info("no GPUs: %s", gpu_unavailable_reason());
	/* The NICs too, so that the log says which rails there are before
	 * READY; none means TCP only and a bad one is left out. */
	if (d->cfg.rdma)
		rdma_dev_open_all(d->cfg.rdma_devices);
	else
		log_info("rdma = off: TCP only");
	d->rcache = rcache_create();
	if (!d->rcache)
		fatalx("out of memory");
	rcache_set_limits(d->rcache, d->cfg.rcache_max_entries,
			  d->cfg.rcache_max_bytes);
	d->progress = progress_create(d->regs, d->cfg.spin_us,
				      d->cfg.progress_cpu);
	if (!d->progress)
		fatal("cannot create the progress thread state");
	progress_set_dlists(d->progress, d->dlists);
	progress_set_instance_id(d->progress, d->instance_id);
	progress_set_max_inflight(d->progress, d->cfg.max_inflight);
	progress_set_notify_queue_max(d->progress, d->cfg.notify_queue_max);
	progress_set_notify_uid_max(d->progress,
				    d->cfg.notify_queue_max_per_uid);
	rt.ev_notice = event_new(d->base, progress_notice_fd(d->progress),
				 EV_READ | EV_PERSIST, on_notice, &rt);
	if (!rt.ev_notice || event_add(rt.ev_notice, NULL))
		fatalx("cannot watch progress notices");
	/* A failure is logged there; GPU memory then meets only GPU and
	 * memfd memory on this node. */
	(void)progress_enable_staging(d->progress, d->cfg.staging_mb,
				      d->cfg.tcp_chunk);
	int workers = progress_enable_copy_workers(d->progress,
						   d->cfg.copy_workers,
						   d->cfg.cma_split_bytes);
	if (workers > 0)
		log_info("%d copy workers (staging, CMA copies of %llu bytes "
			 "and more)", workers,
			 (unsigned long long)d->cfg.cma_split_bytes);
	struct transport_cfg net = net_cfg(d);
	if (progress_enable_net(d->progress, &net, d->cfg.op_timeout_ms))
		fatalx("cannot set up links");
	if (progress_start(d->progress))
		fatalx("cannot start the progress thread");
	/* XFERD_TEST_REG_DELAY_MS: a test hook (regworker.h), unset in use. */
	const char *delay = getenv("XFERD_TEST_REG_DELAY_MS");
	d->regworker = regworker_create(d->base,
					delay ? (unsigned)atoi(delay) : 0);
	if (!d->regworker)
		fatal("cannot start the registration thread");

	/* Peers before the client socket: tokens carry our addresses. */
	struct peers_ctx pctx = {
		.base = d->base, .cfg = &d->cfg,
		.instance_id = d->instance_id, .progress = d->progress,
		.names = d->names,
	};
	if (peers_create(&pctx, &d->peers))
		return 1;
	/* metadata = etcd: registers in the background, never waits. */
	struct cluster_ctx cctx = {
		.base = d->base, .meta = &d->cfg.meta,
		.instance_id = d->instance_id, .peers = d->peers,
		.names = d->names,
	};
	if (cluster_create(&cctx, &d->cluster))
		return 1;
	rt.ev_term = add_signal(&rt, SIGTERM, on_terminate);
	rt.ev_int = add_signal(&rt, SIGINT, on_terminate);
	rt.ev_hup = add_signal(&rt, SIGHUP, on_reload);
	/* What clients may make xferd hold, from what it holds now: after
	 * the threads, GPUs, NICs and peer socket, before the first client. */
	budget_init(&d->budget, &d->cfg);
	rt.listener = listener_open(d);
	if (!rt.listener)
		return 1;
	/* A failure is logged; xferd serves its clients without it. */
	(void)metrics_open(d, &rt.metrics);

	uint64_t wd = sdnotify_watchdog_usec();
	if (wd)
		rt.ev_watchdog = add_timer(&rt, wd / 2, on_watchdog);
	rt.ev_status = add_timer(&rt, STATUS_INTERVAL_S * 1000000ull,
				 on_status_timer);
	log_info("xferd %s ready (pid %d, progress spin %u us)", XFERD_VERSION,
		 (int)getpid(), d->cfg.spin_us);
	update_status(&rt);
	sdnotify_ready();
	peers_start(d->peers);

	event_base_dispatch(d->base);

	listener_close(rt.listener);
	metrics_close(rt.metrics);
	client_goodbye_all(d, "xferd is shutting down");
	/* Our names and node record leave etcd now, not a lease later. */
	cluster_destroy(d->cluster);
	d->cluster = NULL;
	/* Before anything a registration holds (regions, cache, NICs). */
	regworker_destroy(d->regworker);
	/* The progress thread first: its links write the peers' counters. */
	progress_destroy(d->progress);
	peers_destroy(d->peers);
	client_free_all(d);
	names_destroy(d->names);
	/* Before the GPUs go: lists hold copies of themselves there. */
	dltab_destroy(d->dlists);
	uid_usage_table_destroy(d->uid_use);
	regtab_destroy(d->regs);
	/* Regions held the imports: now the cache is empty. */
	rcache_destroy(d->rcache);
	gpu_fini();
	rdma_dev_close_all();
	event_free(rt.ev_term);
	event_free(rt.ev_int);
	event_free(rt.ev_hup);
	event_free(rt.ev_notice);
	event_free(rt.ev_status);
	if (rt.ev_watchdog)
		event_free(rt.ev_watchdog);
	event_base_free(d->base);
	log_info("stopped");
	return 0;
}
