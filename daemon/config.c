/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c - parse and validate xferd settings: one table of keys
 * (keys[] below: name, type, bounds, field or setter, doc) that
 * config_set() looks a key up in, and that `xferd --list-keys` prints
 * for the checks of etc/xferd.conf and xferd.conf(5), and that `xferctl
 * config` walks for the value in force of each key and where it came
 * from (config_key_value, struct config_sources).  Main thread only
 * (start-up, SIGHUP, xferctl); no locks.
 *
 * The lines of a file are config_file.c's, tenants config_tenant.c's.
 * Past 800 lines on purpose: the table, the setters it points to, the
 * parser that walks it and the printer of its values are one piece,
 * read together.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "core/config_fail.h"
#include "core/log.h"
#include "meta/meta_config.h"
#include "common/numparse.h"
#include "common/ring.h"

void config_defaults(struct xferd_config *cfg)
{
	*cfg = (struct xferd_config){
		.socket_path = "",
		.socket_group = "xferd",
		.sq_entries = 1024,
		.max_sq_entries = 8192,
		.ring_index_kb = 1024,
		.dlist_max_entries = 1u << 20,
		.dlist_max_per_client = 4096,
		.dlist_max_client_entries = 1u << 22,
		/* Long enough that back-to-back submissions of one client
		 * find the thread awake; short enough that an idle xferd
		 * costs no CPU. */
		.spin_us = 50,
		.progress_cpu = -1,
		.copy_workers = -1,
		.cma_split_bytes = 8u << 20,
		.log_level = LOG_LVL_INFO,
		.max_clients = 1024,
		.max_region_bytes = 1ull << 40,
		.rcache_max_entries = 4096,
		.rcache_max_bytes = 0,
		/* No peer port until asked for: *:7474 once a cluster key
		 * authenticates the peers, else none (peer/listen.c). */
		.listen = "auto",
		.keepalive_ms = 1000,
		.peer_timeout_ms = 5000,
		.connect_timeout_ms = 3000,
		.op_timeout_ms = 10000,
		.tcp_chunk = 1u << 20,
		.tcp_stage_ahead = 4,
		/* A decode step's KV blocks; a prefill push is far more. */
		.latency_max_bytes = 1u << 20,
		/* Half a default chunk in xferd's queue, half in the
		 * kernel's: one chunk at most ahead of a latency frame. */
		.link_bulk_queue = 512u << 10,
		.staging_mb = 64,
		/* Two latency chunks in flight per half: a decode step's
		 * block never waits for a prefill's chunk to come back. */
		.staging_latency_reserve = 2,
		.rdma = true,
		.rdma_qps = 2,
		.rdma_stripe = 1u << 20,
		.rdma_bulk_depth = 64,
		/* Each peer lent chunks of a pool of its own, so a kept
		 * rkey reaches only its own streams (doc/security.md,
		 * "Landing chunks"); two streams' worth each way. */
		.rdma_landing = true,
		.link_lanes = true,
		.rdma_landing_chunks = 16,
		.rdma_landing_peers = 16,
		/* Off: a TCP port is opened only when asked for (doc/operations.md). */
		.metrics_listen = "off",
		/* A few scrapers at once; a scrape takes milliseconds. */
		.metrics_max_connections = 32,
		.metrics_timeout_ms = 5000,
		/* A new node every 100 ms per user is plenty for lookups and
		 * imports; a flood of forged tokens is not. */
		.peer_connect_rate = 10,
		.max_connections_per_uid = 1024,
		/* A connection is pending for the time its first packet
		 * takes: enough for a burst of workers starting at once. */
		.max_pending_per_uid = 128,
		.handshake_timeout_ms = 5000,
		.listen_backlog = 512,
		.max_regions = 65536,
		/* auto: from the memory of the machine (budget.h) */
		.max_client_bytes = 0,
		.max_uid_bytes = 0,
		/* Far beyond what a client needs (a region costs one fd
		 * only when it is a memfd), far below xferd's limit. */
		.max_client_fds = 8192,
		.max_uid_fds = 16384,
		.fd_reserve = 256,
		.max_pending = 1024,
		.max_ctl_connections = 64,
		.max_ctl_per_uid = 8,
		.ctl_idle_timeout_ms = 60000,
		.max_imports = 65536,
		.max_names = 4096,
		.max_inflight = 16384,
		.notify_queue_max = 65536,
		/* Per user: a few clients' worth, so that a user's many
		 * clients share what one client may hold (uid_usage.h). */
		.max_regions_per_uid = 131072,
		.max_imports_per_uid = 131072,
		.max_names_per_uid = 16384,
		.dlist_max_per_uid = 16384,
		.dlist_max_uid_bytes = 256ull << 20,
		.notify_queue_max_per_uid = 262144,
	};
	meta_config_defaults(&cfg->meta);
	config_tenants_default(&cfg->tenants);
}

/* --- the setters of keys no generic type fits ------------------------ */

/* "*", an IPv4 or an IPv6 address: xferd resolves no names on its main
 * thread. */
static bool numeric_host(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	return strcmp(host, "*") == 0 || inet_pton(AF_INET, host, &a4) == 1 ||
	       inet_pton(AF_INET6, host, &a6) == 1;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CONFIG_HOST_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
			return false;
	return true;
}

static int set_socket(struct xferd_config *c, const char *value, char *err,
		      size_t errlen)
{
	size_t n = strlen(value);

	if (n == 0 || n >= sizeof(c->socket_path) || value[0] != '/')
		return config_fail(err, errlen,
				   "socket: '%s' is not an absolute path of "
				   "at most %zu bytes", value,
				   sizeof(c->socket_path) - 1);
	memcpy(c->socket_path, value, n + 1);
	return 0;
}

static int set_socket_group(struct xferd_config *c, const char *value,
			    char *err, size_t errlen)
{
	/* What groupadd accepts, so a typo fails here, not at bind. */
	size_t n = strlen(value);
	bool ok = n > 0 && n < sizeof(c->socket_group) && value[0] != '-';

	for (const char *p = value; ok && *p; p++)
		ok = isalnum((unsigned char)*p) || strchr("._-", *p);
	if (!ok)
		return config_fail(err, errlen,
				   "socket_group: '%s' is not a group name of "
				   "at most %zu characters of [A-Za-z0-9._-], "
				   "or none", value,
				   sizeof(c->socket_group) - 1);
	snprintf(c->socket_group, sizeof(c->socket_group), "%s", value);
	return 0;
}

/* The older key: regions and imports alike. */
static int set_max_handles(struct xferd_config *c, const char *value,
			   char *err, size_t errlen)
{
	uint64_t v;

	if (numparse_size(value, 0, &v) || v < 1 || v > (1u << 24))
		return config_fail(err, errlen,
				   "max_handles: '%s' is not a number in [1, "
				   "%u]", value, 1u << 24);
	c->max_regions = c->max_imports = (uint32_t)v;
	return 0;
}

/* "ADDR:PORT", "*:PORT" to listen on (PORT not 0); ADDR numeric when
 * asked. */
static bool listen_addr(const char *value, bool numeric)
{
	char host[CONFIG_HOST_MAX];
	uint16_t port;

	return config_split_hostport(value, host, &port, 0) == 0 && port != 0 &&
	       (!numeric || numeric_host(host));
}

static int set_listen(struct xferd_config *c, const char *value, char *err,
		      size_t errlen)
{
	if (strcmp(value, "off") != 0 && strcmp(value, "auto") != 0 &&
	    !listen_addr(value, false))
		return config_fail(err, errlen,
				   "listen: '%s' is not ADDR:PORT, *:PORT, "
				   "auto or off", value);
	snprintf(c->listen, sizeof(c->listen), "%s", value);
	return 0;
}

static int set_node_name(struct xferd_config *c, const char *value,
			 char *err, size_t errlen)
{
	if (!valid_name(value))
		return config_fail(err, errlen,
				   "node_name: '%s' must be 1-%d characters "
				   "of [A-Za-z0-9._-]", value,
				   CONFIG_HOST_MAX - 1);
	snprintf(c->node_name, sizeof(c->node_name), "%s", value);
	return 0;
}

/* One more line of the list: each `peer =` adds one. */
static int add_peer(struct xferd_config *c, const char *value, char *err,
		    size_t errlen)
{
	char host[CONFIG_HOST_MAX];
	uint16_t port;

	if (config_split_hostport(value, host, &port, CONFIG_DEFAULT_PORT))
		return config_fail(err, errlen, "peer: '%s' is not HOST[:PORT]",
				   value);
	if (c->npeers == CONFIG_MAX_PEERS)
		return config_fail(err, errlen, "peer: more than %d peers",
				   CONFIG_MAX_PEERS);
	snprintf(c->peers[c->npeers++], CONFIG_HOST_MAX, "%s", value);
	return 0;
}

static int set_rdma_devices(struct xferd_config *c, const char *value,
			    char *err, size_t errlen)
{
	size_t n = strlen(value);
	bool ok = n < sizeof(c->rdma_devices) && value[0] != ',' &&
		  (n == 0 || value[n - 1] != ',') && !strstr(value, ",,");

	for (const char *p = value; ok && *p; p++)
		ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		     (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
		     *p == '.' || *p == ',';
	if (!ok)
		return config_fail(err, errlen,
				   "rdma_devices: '%s' is not a "
				   "comma-separated list of device names",
				   value);
	snprintf(c->rdma_devices, sizeof(c->rdma_devices), "%s", value);
	return 0;
}

static int set_metrics_listen(struct xferd_config *c, const char *value,
			      char *err, size_t errlen)
{
	if (strcmp(value, "off") != 0 && !listen_addr(value, true))
		return config_fail(err, errlen,
				   "metrics_listen: '%s' is not ADDR:PORT, "
				   "*:PORT or off (ADDR numeric)", value);
	snprintf(c->metrics_listen, sizeof(c->metrics_listen), "%s", value);
	return 0;
}

static int set_etcd_endpoints(struct xferd_config *c, const char *value,
			      char *err, size_t errlen)
{
	return meta_config_set_endpoints(&c->meta, value, err, errlen);
}

static int set_etcd_prefix(struct xferd_config *c, const char *value,
			   char *err, size_t errlen)
{
	return meta_config_set_prefix(&c->meta, value, err, errlen);
}

/* --- the getters of keys without one field ------------------------- */

/* max_regions and max_imports: one number when they agree. */
static void get_max_handles(const struct xferd_config *c, char *buf,
			    size_t len)
{
	if (c->max_regions == c->max_imports)
		snprintf(buf, len, "%u", c->max_regions);
	else
		snprintf(buf, len, "(max_regions %u, max_imports %u)",
			 c->max_regions, c->max_imports);
}

/* Every `peer =` line, comma-separated. */
static void get_peers(const struct xferd_config *c, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < c->npeers && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "",
				      c->peers[i]);
}

/* --- the key table ---------------------------------------------------- */

/* How a key's value is read.  Every error reads "KEY: 'VALUE' is not
 * ...", the words after "is not" being the type's or the entry's own
 * (expect). */
enum key_type {
	KT_COUNT,     /* a number, K/M/G/T allowed, in [min, max] */
	KT_MS,        /* milliseconds: read as KT_COUNT */
	KT_POW2,      /* KT_COUNT that is also a power of two */
	KT_DIGITS,    /* decimal digits only, in [min, max] */
	KT_COUNT_OR,  /* an int field: word (-1) or KT_COUNT */
	KT_SIZE,      /* bytes: a size in [min, max], or word (0) */
	KT_ENUM,      /* one of words[], stored as its value */
	KT_PATH,      /* a char[] field: an absolute path that fits */
	KT_SET,       /* its own setter */
};

struct key_word {
	const char *name;
	int value;
};

struct config_key {
	const char *name;
	enum key_type type;
	size_t off, size;           /* the field of struct xferd_config */
	uint64_t min, max;          /* KT_COUNT .. KT_SIZE */
	const char *word;           /* KT_COUNT_OR, KT_SIZE: the word */
	const struct key_word *words; /* KT_ENUM: ends with a NULL name */
	const char *expect;         /* KT_SIZE, KT_ENUM: after "is not" */
	const char *form;           /* KT_SET: what a value looks like */
	int (*set)(struct xferd_config *c, const char *value, char *err,
		   size_t errlen);  /* KT_SET */
	/* KT_SET: its value as the file would write it; NULL: the field
	 * (off, size) is a string. */
	void (*get)(const struct xferd_config *c, char *buf, size_t len);
	const char *doc;            /* one line; xferd.conf(5) has the rest */
};

#define FIELD(f) .off = offsetof(struct xferd_config, f), \
	.size = sizeof(((struct xferd_config *)0)->f)
#define NUMF(k, f, t, lo, hi, d) \
	{ .name = k, .type = t, FIELD(f), .min = lo, .max = hi, .doc = d }
#define NUM(k, t, lo, hi, d) NUMF(#k, k, t, lo, hi, d)
#define COUNT(k, lo, hi, d) NUM(k, KT_COUNT, lo, hi, d)
#define MS(k, lo, hi, d)    NUM(k, KT_MS, lo, hi, d)
#define SIZE(k, w, lo, hi, e, d) \
	{ .name = #k, .type = KT_SIZE, FIELD(k), .min = lo, .max = hi, \
	  .word = w, .expect = e, .doc = d }
#define ENUM(k, f, w, e, d) \
	{ .name = k, .type = KT_ENUM, FIELD(f), .words = w, .expect = e, \
	  .doc = d }
#define SET(k, fn, fm, d) \
	{ .name = k, .type = KT_SET, .set = fn, .form = fm, .doc = d }
/* A KT_SET key whose value is the string field f. */
#define SETS(k, f, fn, fm, d) \
	{ .name = k, .type = KT_SET, FIELD(f), .set = fn, .form = fm, \
	  .doc = d }
/* A KT_SET key with a getter of its own. */
#define SETG(k, fn, g, fm, d) \
	{ .name = k, .type = KT_SET, .set = fn, .get = g, .form = fm, \
	  .doc = d }

static const struct key_word on_off[] = {
	{ "on", true }, { "off", false }, { NULL, 0 } };
static const struct key_word rdma_register[] = {
	{ "wait", false }, { "background", true }, { NULL, 0 } };
static const struct key_word log_levels[] = {
	{ "error", LOG_LVL_ERR }, { "warn", LOG_LVL_WARN },
	{ "info", LOG_LVL_INFO }, { "debug", LOG_LVL_DEBUG }, { NULL, 0 } };
static const struct key_word log_targets[] = {
	{ "auto", LOG_TARGET_AUTO }, { "stderr", LOG_TARGET_STDERR },
	{ "journal", LOG_TARGET_JOURNAL }, { NULL, 0 } };
static const struct key_word meta_backends[] = {
	{ "local", META_LOCAL }, { "etcd", META_ETCD }, { NULL, 0 } };
static const struct key_word meta_apis[] = {
	{ "auto", META_API_AUTO }, { "v3", META_API_V3 },
	{ "v3beta", META_API_V3BETA }, { "v3alpha", META_API_V3ALPHA },
	{ NULL, 0 } };

/*
 * Every key xferd knows, in the order of xferd.conf(5).  `xferd
 * --list-keys` prints it, and scripts/config-keys.sh reads it from there:
 * the example configuration and the man page are checked against this
 * table.  Which keys a SIGHUP applies is main.c's on_reload (socket,
 * progress_cpu, rdma and rdma_devices wait for a restart).
 */
static const struct config_key keys[] = {
	SETS("socket", socket_path, set_socket, "path",
	    "the client socket (default: $XDG_RUNTIME_DIR or /run/xferd)"),
	SETS("socket_group", socket_group, set_socket_group, "group|none",
	    "group that owns the socket (none: leave it)"),
	NUM(sq_entries, KT_POW2, RING_MIN_SQ_ENTRIES, RING_MAX_SQ_ENTRIES,
	    "ring size a client gets by default"),
	NUM(max_sq_entries, KT_POW2, RING_MIN_SQ_ENTRIES, RING_MAX_SQ_ENTRIES,
	    "largest ring a client may ask for"),
	COUNT(ring_index_kb, 0, 65536,
	      "KiB of each ring for the index pairs of prepared lists"),
	COUNT(dlist_max_entries, 1, 1u << 24, "entries of one prepared list"),
	COUNT(dlist_max_per_client, 0, 1u << 20,
	      "prepared lists of one client"),
	COUNT(dlist_max_client_entries, 1, 1u << 30,
	      "entries of all prepared lists of one client"),
	COUNT(dlist_max_per_uid, 0, 1u << 24,
	      "prepared lists of all clients of one user"),
	SIZE(dlist_max_uid_bytes, NULL, 4096, 1ull << 40,
	     "a size in 4K..1T (e.g. 256M)",
	     "xferd's memory for one user's prepared lists"),
	COUNT(spin_us, 0, 1000000,
	      "microseconds the progress thread polls before it sleeps"),
	{ .name = "progress_cpu", .type = KT_COUNT_OR, FIELD(progress_cpu),
	  .min = 0, .max = 4095, .word = "none",
	  .doc = "CPU the progress thread is pinned to" },
	{ .name = "copy_workers", .type = KT_COUNT_OR, FIELD(copy_workers),
	  .min = 0, .max = 64, .word = "auto",
	  .doc = "threads copying registered memory through staging" },
	SIZE(cma_split_bytes, "off", 1u << 20, 1ull << 40,
	     "off or a size in 1M..1T",
	     "CMA copies this large and larger go to the copy workers in parts"),
	ENUM("log_level", log_level, log_levels,
	     "one of error, warn, info, debug", "least severe line logged"),
	ENUM("log_target", log_target, log_targets,
	     "auto, stderr or journal", "where log lines go"),
	SETS("metrics_listen", metrics_listen, set_metrics_listen, "ADDR:PORT|*:PORT|off",
	    "the Prometheus endpoint"),
	COUNT(metrics_max_connections, 1, 4096,
	      "scrapers connected at once"),
	MS(metrics_timeout_ms, 100, 600000, "deadline of one scrape"),
	COUNT(max_clients, 1, 1u << 20, "clients connected at once"),
	SIZE(max_region_bytes, NULL, 1, UINT64_MAX, "a size > 0 (e.g. 64G)",
	     "bytes of one registered region"),
	SETG("max_handles", set_max_handles, get_max_handles, "n",
	    "max_regions and max_imports at once (the older key)"),
	COUNT(rcache_max_entries, 0, 1u << 24,
	      "registration cache entries (0: no limit)"),
	SIZE(rcache_max_bytes, NULL, 0, UINT64_MAX,
	     "a size (e.g. 64G; 0: no limit)",
	     "bytes the registration cache holds (0: no limit)"),

	/* What one connection, client and user may hold (quota.h,
	 * uid_usage.h). */
	COUNT(max_connections_per_uid, 1, 1u << 20, "clients of one user"),
	COUNT(max_pending_per_uid, 1, 1u << 20,
	      "connections of one user not yet handshaken"),
	MS(handshake_timeout_ms, 10, 600000,
	   "time a connection has to send its first packet"),
	COUNT(listen_backlog, 1, 65535, "backlog of the client socket"),
	COUNT(max_regions, 1, 1u << 24, "regions of one client"),
	SIZE(max_client_bytes, "auto", 0, UINT64_MAX,
	     "a size (e.g. 64G) or auto",
	     "host memory xferd maps for one client (auto: from RAM)"),
	SIZE(max_uid_bytes, "auto", 0, UINT64_MAX,
	     "a size (e.g. 64G) or auto",
	     "host memory xferd maps for one user (auto: from RAM)"),
	COUNT(max_client_fds, 8, 1u << 24, "fds xferd holds for one client"),
	COUNT(max_uid_fds, 8, 1u << 24, "fds xferd holds for one user"),
	COUNT(fd_reserve, 32, 1u << 20, "fds xferd keeps for itself"),
	COUNT(max_pending, 1, 1u << 20,
	      "non-root connections not yet handshaken"),
	COUNT(max_ctl_connections, 1, 65536, "xferctl connections at once"),
	COUNT(max_ctl_per_uid, 1, 65536, "xferctl connections of one user"),
	MS(ctl_idle_timeout_ms, 100, 86400000,
	   "time an xferctl connection may sit idle"),
	COUNT(max_imports, 1, 1u << 24, "imported tokens of one client"),
	COUNT(max_regions_per_uid, 1, 1u << 24, "regions of one user"),
	COUNT(max_imports_per_uid, 1, 1u << 24,
	      "imported tokens of one user"),
	COUNT(max_names, 1, 1u << 20, "published names of one client"),
	COUNT(max_names_per_uid, 1, 1u << 20, "published names of one user"),
	COUNT(max_inflight, 1, 1u << 24,
	      "operations of one client out on links"),
	COUNT(notify_queue_max, 0, 1u << 24,
	      "notifications held for one client whose CQ is full"),
	COUNT(notify_queue_max_per_uid, 0, 1u << 24,
	      "notifications held for all clients of one user"),

	/* other nodes */
	SETS("listen", listen, set_listen, "ADDR:PORT|*:PORT|auto|off",
	    "the peer port"),
	SETS("node_name", node_name, set_node_name, "name",
	    "this node's name (default: the host name)"),
	SETG("peer", add_peer, get_peers, "HOST[:PORT]",
	    "another xferd (one line each, at most 64)"),
	{ .name = "cluster_key_file", .type = KT_PATH,
	  FIELD(cluster_key_file),
	  .doc = "the key that authenticates peers (none: no peer port)" },
	COUNT(peer_connect_rate, 1, 100000,
	      "connections to other xferds one user may cause a second"),
	MS(keepalive_ms, 10, 600000, "ping an idle link this often"),
	MS(peer_timeout_ms, 20, 3600000, "a link silent this long is dead"),
	MS(connect_timeout_ms, 10, 600000, "time to connect to a peer"),
	MS(op_timeout_ms, 1, 86400000,
	   "default deadline of a remote operation"),
	COUNT(tcp_chunk, 4096, 4u << 20, "bytes per data frame on a link"),
	COUNT(tcp_stage_ahead, 1, 64,
	      "D2H copies ahead of the link per GPU stream it sends"),
	SIZE(latency_max_bytes, NULL, 0, 1ull << 30, "a size up to 1G",
	     "latency-class descriptors up to this size; larger go as bulk"),
	COUNT(link_bulk_queue, 16384, 16u << 20,
	      "bulk bytes queued ahead of a latency frame on a link"),
	ENUM("link_lanes", link_lanes, on_off, "on or off",
	     "a second connection per link for the latency class"),
	SETG("tenant", config_tenant_line, config_tenant_get,
	     "NAME weight=N [uid=A,B] [gid=C] [rate=SIZE]",
	     "a tenant (also a [tenant NAME] section)"),
	/* Two halves (send, receive) of at least two 4 MiB chunks. */
	COUNT(staging_mb, 16, 65536,
	      "MiB of pinned memory for GPU data to and from other nodes"),
	COUNT(staging_latency_reserve, 0, 64,
	      "staging chunks per half that only the latency class takes"),
	ENUM("rdma", rdma, on_off, "on or off", "use the RDMA NICs"),
	SETS("rdma_devices", rdma_devices, set_rdma_devices, "dev[,dev...]",
	    "only these RDMA devices (empty: all)"),
	COUNT(rdma_qps, 1, 8, "RC queue pairs per peer and rail pair"),
	ENUM("rdma_register", rdma_reg_background, rdma_register,
	     "wait or background",
	     "a region's reply waits for its NIC registration, or not"),
	SIZE(rdma_stripe, NULL, 4096, 1u << 30, "a size in 4K..1G",
	     "bytes per RDMA work request, at most"),
	COUNT(rdma_bulk_depth, 1, 256,
	      "non-latency RDMA work requests a queue pair holds at most"),
	ENUM("rdma_landing", rdma_landing, on_off, "on or off",
	     "lend peers staging chunks for memory the NICs cannot reach"),
	COUNT(rdma_landing_chunks, 4, 64,
	      "chunks of the landing pool each peer is lent from"),
	COUNT(rdma_landing_peers, 1, 1024,
	      "peers lent landing chunks at once"),

	/* where published names live (meta/meta_config.h) */
	ENUM("metadata", meta.backend, meta_backends, "local or etcd",
	     "where published names and node records live"),
	SETS("etcd_endpoints", meta.endpoints, set_etcd_endpoints, "URL[,URL...]",
	    "etcd's client URLs"),
	SETS("etcd_prefix", meta.prefix, set_etcd_prefix, "prefix",
	    "the etcd key prefix of this cluster"),
	NUMF("etcd_lease_ttl", meta.lease_ttl_s, KT_DIGITS, 2, 3600,
	    "seconds a node's records outlive its last keepalive"),
	NUMF("etcd_timeout_ms", meta.timeout_ms, KT_DIGITS, 10, 600000,
	    "milliseconds of one etcd request"),
	NUMF("etcd_retry_ms", meta.retry_ms, KT_DIGITS, 0, 3600000,
	    "milliseconds one call tries the endpoints"),
	ENUM("etcd_api", meta.api, meta_apis, "auto, v3, v3beta or v3alpha",
	     "the etcd gateway's path prefix"),
	{ .name = "etcd_cert", .type = KT_PATH, FIELD(meta.cert),
	  .doc = "TLS client certificate" },
	{ .name = "etcd_key", .type = KT_PATH, FIELD(meta.key),
	  .doc = "its private key" },
	{ .name = "etcd_ca", .type = KT_PATH, FIELD(meta.ca),
	  .doc = "CA bundle (default: the system's)" },
};

#undef FIELD
#undef NUMF
#undef NUM
#undef COUNT
#undef MS
#undef SIZE
#undef ENUM
#undef SET
#undef SETS
#undef SETG

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const struct config_key *key_find(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

/* v into a field of 1 (bool), 4 or 8 bytes; -1 stays -1 in an int. */
static void store(struct xferd_config *c, const struct config_key *k,
		  uint64_t v)
{
	char *field = (char *)c + k->off;

	if (k->size == sizeof(bool)) {
		bool b = v != 0;
		memcpy(field, &b, sizeof(b));
	} else if (k->size == sizeof(uint32_t)) {
		uint32_t u = (uint32_t)v;
		memcpy(field, &u, sizeof(u));
	} else {
		memcpy(field, &v, sizeof(v));
	}
}

static int set_number(const struct config_key *k, const char *value,
		      uint64_t *v, char *err, size_t errlen)
{
	bool digits = k->type != KT_DIGITS ||
		      strspn(value, "0123456789") == strlen(value);

	if (!digits || numparse_size(value, 0, v) || *v < k->min ||
	    *v > k->max)
		return config_fail(err, errlen,
				   "%s: '%s' is not a number in [%llu, %llu]",
				   k->name, value, (unsigned long long)k->min,
				   (unsigned long long)k->max);
	return 0;
}

/* Parse value as k says into c; the checks across keys are the
 * caller's. */
static int key_set(struct xferd_config *c, const struct config_key *k,
		   const char *value, char *err, size_t errlen)
{
	uint64_t v = 0;
	int rc;

	switch (k->type) {
	case KT_COUNT:
	case KT_MS:
	case KT_DIGITS:
		rc = set_number(k, value, &v, err, errlen);
		break;
	case KT_POW2:
		rc = set_number(k, value, &v, err, errlen);
		if (!rc && (v & (v - 1)))
			return config_fail(err, errlen,
					   "%s: %u is not a power of two",
					   k->name, (unsigned)v);
		break;
	case KT_COUNT_OR:
		if (strcmp(value, k->word) == 0) {
			v = (uint64_t)-1;
			rc = 0;
		} else {
			rc = set_number(k, value, &v, err, errlen);
		}
		break;
	case KT_SIZE:
		rc = 0;
		if (k->word && strcmp(value, k->word) == 0)
			v = 0;
		else if (numparse_size(value, 0, &v) || v < k->min ||
			 v > k->max)
			rc = config_fail(err, errlen, "%s: '%s' is not %s",
					 k->name, value, k->expect);
		break;
	case KT_ENUM: {
		const struct key_word *w = k->words;
		while (w->name && strcmp(value, w->name) != 0)
			w++;
		if (!w->name)
			return config_fail(err, errlen, "%s: '%s' is not %s",
					   k->name, value, k->expect);
		v = (uint64_t)(int64_t)w->value;
		rc = 0;
		break;
	}
	case KT_PATH:
		if (value[0] != '/' || strlen(value) >= k->size)
			return config_fail(err, errlen,
					   "%s: '%s' is not an absolute path",
					   k->name, value);
		snprintf((char *)c + k->off, k->size, "%s", value);
		return 0;
	case KT_SET:
		return k->set(c, value, err, errlen);
	default:
		return config_fail(err, errlen, "%s: no parser", k->name);
	}
	if (rc)
		return rc;
	store(c, k, v);
	return 0;
}

_Static_assert(NKEYS <= CONFIG_KEYS_MAX, "struct config_sources: a slot per key");

/* Where the value of k now comes from. */
static void mark(struct config_sources *src, const struct config_key *k,
		 enum config_source from)
{
	if (!src)
		return;
	src->of[k - keys] = (unsigned char)from;
	/* The older key sets two others: they come from where it did. */
	if (k->set == set_max_handles) {
		src->of[key_find("max_regions") - keys] = (unsigned char)from;
		src->of[key_find("max_imports") - keys] = (unsigned char)from;
	}
}

int config_set_from(struct xferd_config *cfg, struct config_sources *src,
		    enum config_source from, const char *key,
		    const char *value, char *err, size_t errlen)
{
	const struct config_key *k = key_find(key);
	struct xferd_config c = *cfg;

	if (!k)
		return config_fail(err, errlen, "unknown key '%s'", key);
	int rc = key_set(&c, k, value, err, errlen);
	if (rc)
		return rc;
	if (c.keepalive_ms >= c.peer_timeout_ms)
		return config_fail(err, errlen,
				   "keepalive_ms (%u) must be below "
				   "peer_timeout_ms (%u)", c.keepalive_ms,
				   c.peer_timeout_ms);
	if (c.sq_entries > c.max_sq_entries)
		return config_fail(err, errlen,
				   "sq_entries (%u) is larger than "
				   "max_sq_entries (%u)", c.sq_entries,
				   c.max_sq_entries);
	*cfg = c;
	mark(src, k, from);
	return 0;
}

int config_set(struct xferd_config *cfg, const char *key, const char *value,
	       char *err, size_t errlen)
{
	return config_set_from(cfg, NULL, CONFIG_FROM_FLAG, key, value, err,
			       errlen);
}

/* A size as the man page writes it: "4K", "1T", "16777216". */
static const char *size_text(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)v, units[u]);
	return buf;
}

/* What a value of k looks like: "1..65536", "off|1M..1T", "on|off". */
static void key_form(const struct config_key *k, char *buf, size_t len)
{
	char lo[32], hi[32];
	size_t n = 0;

	buf[0] = '\0';
	switch (k->type) {
	case KT_COUNT:
	case KT_MS:
	case KT_POW2:
	case KT_DIGITS:
	case KT_COUNT_OR:
		snprintf(buf, len, "%s%s%llu..%llu%s%s",
			 k->word ? k->word : "", k->word ? "|" : "",
			 (unsigned long long)k->min,
			 (unsigned long long)k->max,
			 k->type == KT_MS ? " ms" : "",
			 k->type == KT_POW2 ? ", a power of two" : "");
		break;
	case KT_SIZE:
		hi[0] = '\0';  /* no upper bound but the type's */
		if (k->max != UINT64_MAX)
			size_text(k->max, hi, sizeof(hi));
		snprintf(buf, len, "%s%ssize %s..%s", k->word ? k->word : "",
			 k->word ? "|" : "", size_text(k->min, lo, sizeof(lo)),
			 hi);
		break;
	case KT_ENUM:
		for (const struct key_word *w = k->words; w->name && n < len;
		     w++)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
					      w == k->words ? "" : "|",
					      w->name);
		break;
	case KT_PATH:
		snprintf(buf, len, "path");
		break;
	case KT_SET:
		snprintf(buf, len, "%s", k->form);
		break;
	}
}

void config_keys_print(FILE *f)
{
	char form[128];

	for (size_t i = 0; i < NKEYS; i++) {
		key_form(&keys[i], form, sizeof(form));
		fprintf(f, "%s\t%s\t%s\n", keys[i].name, form, keys[i].doc);
	}
}

const char *config_key_name(size_t i)
{
	return i < NKEYS ? keys[i].name : NULL;
}

int config_key_index(const char *name)
{
	const struct config_key *k = key_find(name);

	return k ? (int)(k - keys) : -ENOENT;
}

/* A number field of 1 (bool), 4 or 8 bytes, as store() wrote it. */
static uint64_t load(const struct xferd_config *c, const struct config_key *k)
{
	const char *field = (const char *)c + k->off;

	if (k->size == sizeof(bool)) {
		bool b;
		memcpy(&b, field, sizeof(b));
		return b;
	}
	if (k->size == sizeof(uint32_t)) {
		uint32_t u;
		memcpy(&u, field, sizeof(u));
		return u;
	}
	uint64_t v;
	memcpy(&v, field, sizeof(v));
	return v;
}

int config_key_value(size_t i, const struct xferd_config *c, char *buf,
		     size_t len)
{
	const struct config_key *k;
	uint64_t v;

	if (i >= NKEYS || len == 0)
		return -ENOENT;
	k = &keys[i];
	buf[0] = '\0';
	switch (k->type) {
	case KT_COUNT:
	case KT_MS:
	case KT_POW2:
	case KT_DIGITS:
		snprintf(buf, len, "%llu", (unsigned long long)load(c, k));
		break;
	case KT_COUNT_OR: {
		/* an int field: -1 is the word */
		int n = (int)(uint32_t)load(c, k);
		if (n < 0)
			snprintf(buf, len, "%s", k->word);
		else
			snprintf(buf, len, "%d", n);
		break;
	}
	case KT_SIZE:
		v = load(c, k);
		if (v == 0 && k->word)
			snprintf(buf, len, "%s", k->word);
		else
			size_text(v, buf, len);
		break;
	case KT_ENUM:
		v = load(c, k);
		for (const struct key_word *w = k->words; w->name; w++)
			/* an enum or int field: compare as 32 bits */
			if ((uint32_t)w->value == (uint32_t)v) {
				snprintf(buf, len, "%s", w->name);
				break;
			}
		break;
	case KT_PATH:
		/* The path only: what a file holds (the cluster key) is
		 * never read here. */
		snprintf(buf, len, "%s", (const char *)c + k->off);
		break;
	case KT_SET:
		if (k->get)
			k->get(c, buf, len);
		else
			snprintf(buf, len, "%s", (const char *)c + k->off);
		break;
	}
	return 0;
}

const char *config_source_name(enum config_source s)
{
	switch (s) {
	case CONFIG_FROM_DEFAULT: return "default";
	case CONFIG_FROM_FILE: return "file";
	case CONFIG_FROM_FLAG: return "override";
	case CONFIG_FROM_RELOAD: return "reload";
	}
	return "?";
}

void config_sources_reloaded(const struct xferd_config *before,
			     const struct config_sources *before_src,
			     const struct xferd_config *after,
			     struct config_sources *after_src)
{
	char was[CONFIG_VALUE_MAX], now[CONFIG_VALUE_MAX];

	for (size_t i = 0; i < NKEYS; i++) {
		if (after_src->of[i] != CONFIG_FROM_FILE)
			continue;
		config_key_value(i, before, was, sizeof(was));
		config_key_value(i, after, now, sizeof(now));
		/* Changed by this reload, or by an earlier one and kept. */
		if (strcmp(was, now) != 0 ||
		    before_src->of[i] == CONFIG_FROM_RELOAD)
			after_src->of[i] = CONFIG_FROM_RELOAD;
	}
}
