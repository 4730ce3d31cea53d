/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c - parse and validate xferd settings.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
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
		.staging_mb = 64,
		.rdma = true,
		.rdma_qps = 2,
		.rdma_stripe = 1u << 20,
		/* Off: a TCP port is opened only when asked for (README). */
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
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool valid_name(const char *s);

/* "*", an IPv4 or an IPv6 address: xferd resolves no names on its main
 * thread. */
static bool numeric_host(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	return strcmp(host, "*") == 0 || inet_pton(AF_INET, host, &a4) == 1 ||
	       inet_pton(AF_INET6, host, &a6) == 1;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int parse_u32(const char *key, const char *s, uint64_t min,
		     uint64_t max, uint32_t *out, char *err, size_t errlen)
{
	uint64_t v;

	if (numparse_size(s, 0, &v) || v < min || v > max)
		return fail(err, errlen,
			    "%s: '%s' is not a number in [%llu, %llu]", key, s,
			    (unsigned long long)min, (unsigned long long)max);
	*out = (uint32_t)v;
	return 0;
}

/*
 * The per-uid keys of uid_usage.h.  True if key is one of them, with *rc
 * the result of parsing value into c.
 */
static bool config_set_uid_limit(struct xferd_config *c, const char *key,
				 const char *value, char *err, size_t errlen,
				 int *rc)
{
	static const struct {
		const char *key;
		size_t off;
		uint32_t min, max;
	} u32[] = {
#define LIMIT(k, lo, hi) { #k, offsetof(struct xferd_config, k), lo, hi }
		LIMIT(max_regions_per_uid, 1, 1u << 24),
		LIMIT(max_imports_per_uid, 1, 1u << 24),
		LIMIT(max_names_per_uid, 1, 1u << 20),
		LIMIT(dlist_max_per_uid, 0, 1u << 24),
		LIMIT(notify_queue_max_per_uid, 0, 1u << 24),
#undef LIMIT
	};

	for (size_t i = 0; i < sizeof(u32) / sizeof(u32[0]); i++)
		if (strcmp(key, u32[i].key) == 0) {
			*rc = parse_u32(key, value, u32[i].min, u32[i].max,
					(uint32_t *)((char *)c + u32[i].off),
					err, errlen);
			return true;
		}
	if (strcmp(key, "dlist_max_uid_bytes") == 0) {
		uint64_t v;
		*rc = 0;
		/* Finite: at most 1T, at least one list of one entry. */
		if (numparse_size(value, 0, &v) || v < 4096 ||
		    v > (1ull << 40))
			*rc = fail(err, errlen,
				   "dlist_max_uid_bytes: '%s' is not a size in "
				   "4K..1T (e.g. 256M)", value);
		else
			c->dlist_max_uid_bytes = v;
		return true;
	}
	return false;
}

/*
 * The keys of quota.h.  True if key is one of them, with *rc the
 * result of parsing value into c.
 */
static bool config_set_limit(struct xferd_config *c, const char *key,
			     const char *value, char *err, size_t errlen,
			     int *rc)
{
	static const struct {
		const char *key;
		size_t off;
		uint32_t min, max;
	} u32[] = {
#define LIMIT(k, lo, hi) { #k, offsetof(struct xferd_config, k), lo, hi }
		LIMIT(max_connections_per_uid, 1, 1u << 20),
		LIMIT(max_pending_per_uid, 1, 1u << 20),
		LIMIT(handshake_timeout_ms, 10, 600000),
		LIMIT(listen_backlog, 1, 65535),
		LIMIT(max_regions, 1, 1u << 24),
		LIMIT(max_imports, 1, 1u << 24),
		LIMIT(max_names, 1, 1u << 20),
		LIMIT(notify_queue_max, 0, 1u << 24),
		LIMIT(max_inflight, 1, 1u << 24),
		LIMIT(max_client_fds, 8, 1u << 24),
		LIMIT(max_uid_fds, 8, 1u << 24),
		LIMIT(fd_reserve, 32, 1u << 20),
		LIMIT(max_pending, 1, 1u << 20),
		LIMIT(max_ctl_connections, 1, 65536),
		LIMIT(max_ctl_per_uid, 1, 65536),
		LIMIT(ctl_idle_timeout_ms, 100, 86400000),
#undef LIMIT
	};

	for (size_t i = 0; i < sizeof(u32) / sizeof(u32[0]); i++)
		if (strcmp(key, u32[i].key) == 0) {
			*rc = parse_u32(key, value, u32[i].min, u32[i].max,
					(uint32_t *)((char *)c + u32[i].off),
					err, errlen);
			return true;
		}
	if (strcmp(key, "max_client_bytes") == 0 ||
	    strcmp(key, "max_uid_bytes") == 0) {
		uint64_t v = 0;
		*rc = 0;
		/* 0 (once "no limit") is auto too: there is no unlimited. */
		if (strcmp(value, "auto") && numparse_size(value, 0, &v))
			*rc = fail(err, errlen, "%s: '%s' is not a size (e.g. "
				   "64G) or auto", key, value);
		else if (key[4] == 'c')
			c->max_client_bytes = v;
		else
			c->max_uid_bytes = v;
		return true;
	}
	return false;
}

int config_set(struct xferd_config *cfg, const char *key, const char *value,
	       char *err, size_t errlen)
{
	struct xferd_config c = *cfg;
	int rc = 0;

	if (strcmp(key, "socket") == 0) {
		size_t n = strlen(value);
		if (n == 0 || n >= sizeof(c.socket_path) || value[0] != '/')
			return fail(err, errlen,
				    "socket: '%s' is not an absolute path of at most %zu bytes",
				    value, sizeof(c.socket_path) - 1);
		memcpy(c.socket_path, value, n + 1);
	} else if (strcmp(key, "socket_group") == 0) {
		/* What groupadd accepts, so a typo fails here, not at bind. */
		size_t n = strlen(value);
		bool ok = n > 0 && n < sizeof(c.socket_group) && value[0] != '-';
		for (const char *p = value; ok && *p; p++)
			ok = isalnum((unsigned char)*p) || strchr("._-", *p);
		if (!ok)
			return fail(err, errlen,
				    "socket_group: '%s' is not a group name of at most %zu "
				    "characters of [A-Za-z0-9._-], or none",
				    value, sizeof(c.socket_group) - 1);
		snprintf(c.socket_group, sizeof(c.socket_group), "%s", value);
	} else if (strcmp(key, "sq_entries") == 0 ||
		   strcmp(key, "max_sq_entries") == 0) {
		uint32_t v = 0;
		rc = parse_u32(key, value, RING_MIN_SQ_ENTRIES,
			       RING_MAX_SQ_ENTRIES, &v, err, errlen);
		if (rc)
			return rc;
		if (v & (v - 1))
			return fail(err, errlen, "%s: %u is not a power of two",
				    key, v);
		if (key[0] == 's')
			c.sq_entries = v;
		else
			c.max_sq_entries = v;
	} else if (strcmp(key, "ring_index_kb") == 0) {
		rc = parse_u32(key, value, 0, 65536, &c.ring_index_kb, err,
			       errlen);
	} else if (strcmp(key, "dlist_max_entries") == 0) {
		rc = parse_u32(key, value, 1, 1u << 24, &c.dlist_max_entries,
			       err, errlen);
	} else if (strcmp(key, "dlist_max_per_client") == 0) {
		rc = parse_u32(key, value, 0, 1u << 20,
			       &c.dlist_max_per_client, err, errlen);
	} else if (strcmp(key, "dlist_max_client_entries") == 0) {
		rc = parse_u32(key, value, 1, 1u << 30,
			       &c.dlist_max_client_entries, err, errlen);
	} else if (strcmp(key, "spin_us") == 0) {
		rc = parse_u32(key, value, 0, 1000000, &c.spin_us, err, errlen);
	} else if (strcmp(key, "progress_cpu") == 0) {
		uint32_t v = 0;
		if (strcmp(value, "none") == 0)
			c.progress_cpu = -1;
		else if (!(rc = parse_u32(key, value, 0, 4095, &v, err, errlen)))
			c.progress_cpu = (int)v;
	} else if (strcmp(key, "copy_workers") == 0) {
		uint32_t v = 0;
		if (strcmp(value, "auto") == 0)
			c.copy_workers = -1;
		else if (!(rc = parse_u32(key, value, 0, 64, &v, err, errlen)))
			c.copy_workers = (int)v;
	} else if (strcmp(key, "cma_split_bytes") == 0) {
		uint64_t v;
		if (strcmp(value, "off") == 0)
			c.cma_split_bytes = 0;
		else if (numparse_size(value, 0, &v) || v < (1u << 20) ||
			 v > (1ull << 40))
			return fail(err, errlen, "cma_split_bytes: '%s' is not "
				    "off or a size in 1M..1T", value);
		else
			c.cma_split_bytes = v;
	} else if (strcmp(key, "log_level") == 0) {
		int lvl = log_level_parse(value);
		if (lvl < 0)
			return fail(err, errlen,
				    "log_level: '%s' is not one of error, warn, info, debug",
				    value);
		c.log_level = lvl;
	} else if (strcmp(key, "max_clients") == 0) {
		rc = parse_u32(key, value, 1, 1u << 20, &c.max_clients, err,
			       errlen);
	} else if (strcmp(key, "max_handles") == 0) {
		/* The older key: regions and imports alike. */
		rc = parse_u32(key, value, 1, 1u << 24, &c.max_regions, err,
			       errlen);
		c.max_imports = c.max_regions;
	} else if (strcmp(key, "max_region_bytes") == 0) {
		uint64_t v;
		if (numparse_size(value, 0, &v) || v == 0)
			return fail(err, errlen,
				    "max_region_bytes: '%s' is not a size > 0 (e.g. 64G)",
				    value);
		c.max_region_bytes = v;
	} else if (strcmp(key, "rcache_max_entries") == 0) {
		/* 0: no limit. */
		rc = parse_u32(key, value, 0, 1u << 24, &c.rcache_max_entries,
			       err, errlen);
	} else if (strcmp(key, "rcache_max_bytes") == 0) {
		uint64_t v;
		if (numparse_size(value, 0, &v))
			return fail(err, errlen,
				    "rcache_max_bytes: '%s' is not a size (e.g. "
				    "64G; 0: no limit)", value);
		c.rcache_max_bytes = v;
	} else if (strcmp(key, "listen") == 0) {
		char host[CONFIG_HOST_MAX];
		uint16_t port;
		if (strcmp(value, "off") != 0 && strcmp(value, "auto") != 0 &&
		    (config_split_hostport(value, host, &port, 0) || port == 0))
			return fail(err, errlen,
				    "listen: '%s' is not ADDR:PORT, *:PORT, auto or off",
				    value);
		snprintf(c.listen, sizeof(c.listen), "%s", value);
	} else if (strcmp(key, "node_name") == 0) {
		if (!valid_name(value))
			return fail(err, errlen,
				    "node_name: '%s' must be 1-%d characters of [A-Za-z0-9._-]",
				    value, CONFIG_HOST_MAX - 1);
		snprintf(c.node_name, sizeof(c.node_name), "%s", value);
	} else if (strcmp(key, "peer") == 0) {
		char host[CONFIG_HOST_MAX];
		uint16_t port;
		if (config_split_hostport(value, host, &port, CONFIG_DEFAULT_PORT))
			return fail(err, errlen, "peer: '%s' is not HOST[:PORT]",
				    value);
		if (c.npeers == CONFIG_MAX_PEERS)
			return fail(err, errlen, "peer: more than %d peers",
				    CONFIG_MAX_PEERS);
		snprintf(c.peers[c.npeers++], CONFIG_HOST_MAX, "%s", value);
	} else if (strcmp(key, "cluster_key_file") == 0) {
		if (value[0] != '/' || strlen(value) >= sizeof(c.cluster_key_file))
			return fail(err, errlen,
				    "cluster_key_file: '%s' is not an absolute path",
				    value);
		snprintf(c.cluster_key_file, sizeof(c.cluster_key_file), "%s",
			 value);
	} else if (strcmp(key, "keepalive_ms") == 0) {
		rc = parse_u32(key, value, 10, 600000, &c.keepalive_ms, err,
			       errlen);
	} else if (strcmp(key, "peer_timeout_ms") == 0) {
		rc = parse_u32(key, value, 20, 3600000, &c.peer_timeout_ms, err,
			       errlen);
	} else if (strcmp(key, "connect_timeout_ms") == 0) {
		rc = parse_u32(key, value, 10, 600000, &c.connect_timeout_ms,
			       err, errlen);
	} else if (strcmp(key, "op_timeout_ms") == 0) {
		rc = parse_u32(key, value, 1, 86400000, &c.op_timeout_ms, err,
			       errlen);
	} else if (strcmp(key, "tcp_chunk") == 0) {
		rc = parse_u32(key, value, 4096, 4u << 20, &c.tcp_chunk, err,
			       errlen);
	} else if (strcmp(key, "staging_mb") == 0) {
		/* Two halves (send, receive) of at least two 4 MiB chunks. */
		rc = parse_u32(key, value, 16, 65536, &c.staging_mb, err,
			       errlen);
	} else if (strcmp(key, "rdma") == 0) {
		if (strcmp(value, "on") == 0)
			c.rdma = true;
		else if (strcmp(value, "off") == 0)
			c.rdma = false;
		else
			return fail(err, errlen, "rdma: '%s' is not on or off",
				    value);
	} else if (strcmp(key, "rdma_devices") == 0) {
		size_t n = strlen(value);
		bool ok = n < sizeof(c.rdma_devices) && value[0] != ',' &&
			  (n == 0 || value[n - 1] != ',') && !strstr(value, ",,");
		for (const char *p = value; ok && *p; p++)
			ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			     (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' ||
			     *p == '.' || *p == ',';
		if (!ok)
			return fail(err, errlen,
				    "rdma_devices: '%s' is not a comma-separated "
				    "list of device names", value);
		snprintf(c.rdma_devices, sizeof(c.rdma_devices), "%s", value);
	} else if (strcmp(key, "rdma_qps") == 0) {
		rc = parse_u32(key, value, 1, 8, &c.rdma_qps, err, errlen);
	} else if (strcmp(key, "rdma_register") == 0) {
		if (strcmp(value, "wait") == 0)
			c.rdma_reg_background = false;
		else if (strcmp(value, "background") == 0)
			c.rdma_reg_background = true;
		else
			return fail(err, errlen, "rdma_register: '%s' is not "
				    "wait or background", value);
	} else if (strcmp(key, "rdma_stripe") == 0) {
		uint64_t v;
		if (numparse_size(value, 0, &v) || v < 4096 || v > (1u << 30))
			return fail(err, errlen,
				    "rdma_stripe: '%s' is not a size in 4K..1G",
				    value);
		c.rdma_stripe = (uint32_t)v;
	} else if (meta_config_owns(key)) {
		rc = meta_config_set(&c.meta, key, value, err, errlen);
	} else if (strcmp(key, "log_target") == 0) {
		if (strcmp(value, "auto") == 0)
			c.log_target = LOG_TARGET_AUTO;
		else if (strcmp(value, "stderr") == 0)
			c.log_target = LOG_TARGET_STDERR;
		else if (strcmp(value, "journal") == 0)
			c.log_target = LOG_TARGET_JOURNAL;
		else
			return fail(err, errlen, "log_target: '%s' is not auto, "
				    "stderr or journal", value);
	} else if (strcmp(key, "metrics_listen") == 0) {
		char host[CONFIG_HOST_MAX];
		uint16_t port;
		if (strcmp(value, "off") != 0 &&
		    (config_split_hostport(value, host, &port, 0) || port == 0 ||
		     !numeric_host(host)))
			return fail(err, errlen,
				    "metrics_listen: '%s' is not ADDR:PORT, *:PORT "
				    "or off (ADDR numeric)", value);
		snprintf(c.metrics_listen, sizeof(c.metrics_listen), "%s",
			 value);
	} else if (strcmp(key, "metrics_max_connections") == 0) {
		rc = parse_u32(key, value, 1, 4096,
			       &c.metrics_max_connections, err, errlen);
	} else if (strcmp(key, "peer_connect_rate") == 0) {
		rc = parse_u32(key, value, 1, 100000, &c.peer_connect_rate, err,
			       errlen);
	} else if (strcmp(key, "metrics_timeout_ms") == 0) {
		rc = parse_u32(key, value, 100, 600000, &c.metrics_timeout_ms,
			       err, errlen);
	} else if (config_set_limit(&c, key, value, err, errlen, &rc)) {
		/* one of the limits of quota.h: rc says how it went */
	} else if (config_set_uid_limit(&c, key, value, err, errlen, &rc)) {
		/* per uid (uid_usage.h): the same */
	} else {
		return fail(err, errlen, "unknown key '%s'", key);
	}
	if (rc)
		return rc;
	if (c.keepalive_ms >= c.peer_timeout_ms)
		return fail(err, errlen,
			    "keepalive_ms (%u) must be below peer_timeout_ms (%u)",
			    c.keepalive_ms, c.peer_timeout_ms);
	if (c.sq_entries > c.max_sq_entries)
		return fail(err, errlen,
			    "sq_entries (%u) is larger than max_sq_entries (%u)",
			    c.sq_entries, c.max_sq_entries);
	*cfg = c;
	return 0;
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

int config_split_hostport(const char *s, char *host, uint16_t *port,
			  uint16_t default_port)
{
	const char *colon, *end;
	size_t n;

	if (s[0] == '[') {            /* [v6]:port */
		end = strchr(s, ']');
		if (!end)
			return -EINVAL;
		n = (size_t)(end - s - 1);
		memcpy(host, s + 1, n < CONFIG_HOST_MAX ? n : 0);
		colon = end[1] == ':' ? end + 1 : NULL;
		if (!colon && end[1] != '\0')
			return -EINVAL;
		s++;
	} else {
		colon = strrchr(s, ':');
		if (colon && strchr(s, ':') != colon)
			return -EINVAL;   /* a bare IPv6 address needs [] */
		n = colon ? (size_t)(colon - s) : strlen(s);
		memcpy(host, s, n < CONFIG_HOST_MAX ? n : 0);
	}
	if (n == 0 || n >= CONFIG_HOST_MAX)
		return -EINVAL;
	host[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)host[i]) && !strchr("._-:*", host[i]))
			return -EINVAL;
	*port = default_port;
	if (colon) {
		char *e;
		errno = 0;
		unsigned long v = strtoul(colon + 1, &e, 10);
		if (errno || *e || e == colon + 1 || v > 65535)
			return -EINVAL;
		*port = (uint16_t)v;
	}
	return 0;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int config_parse_line(struct xferd_config *cfg, const char *line, char *err,
		      size_t errlen)
{
	char buf[512];

	if (strlen(line) >= sizeof(buf))
		return fail(err, errlen, "line longer than %zu bytes",
			    sizeof(buf) - 1);
	strcpy(buf, line);
	char *hash = strchr(buf, '#');
	if (hash)
		*hash = '\0';
	char *s = trim(buf);
	if (*s == '\0')
		return 0;
	char *eq = strchr(s, '=');
	if (!eq)
		return fail(err, errlen, "expected 'key = value', got '%s'", s);
	*eq = '\0';
	char *key = trim(s), *value = trim(eq + 1);
	if (*key == '\0' || *value == '\0')
		return fail(err, errlen, "empty key or value");
	return config_set(cfg, key, value, err, errlen);
}

int config_load(struct xferd_config *cfg, const char *path, char *err,
		size_t errlen)
{
	FILE *f = fopen(path, "re");
	struct xferd_config c = *cfg;
	char line[1024], why[256];
	unsigned lineno = 0;
	int rc = 0;

	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t n = strlen(line);
		if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
			snprintf(err, errlen, "%s:%u: line too long", path,
				 lineno);
			rc = -EINVAL;
			break;
		}
		if (config_parse_line(&c, line, why, sizeof(why))) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
			rc = -EINVAL;
			break;
		}
	}
	if (!rc && ferror(f)) {
		rc = -EIO;
		snprintf(err, errlen, "%s: read error", path);
	}
	fclose(f);
	if (!rc)
		*cfg = c;
	return rc;
}
