/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferd.h - the daemon's shared state, owned by main.c.
 *
 * Only the main thread touches this struct (the progress thread gets its
 * own pointers at creation).  Modules receive it as their context.
 */
#ifndef XFERD_XFERD_H
#define XFERD_XFERD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include "budget.h"
#include "config.h"
#include "quota.h"
#include "common/clock.h"
#include "common/token_codec.h"

struct event_base;
struct regtab;
struct progress;
struct client;
struct peers;
struct names;
struct cluster;
struct rcache;
struct regworker;
struct dltab;
struct uid_usage_table;

#define XFERD_VERSION "0.1.0"

TAILQ_HEAD(client_list, client);

struct xferd {
	struct event_base *base;
	struct xferd_config cfg;
	struct config_sources cfg_src; /* where each key of cfg came from */
	const char *config_path;    /* NULL: none in use */
	bool config_required;       /* given with -c: must exist */
	char socket_path[CONFIG_PATH_MAX];
	uint8_t instance_id[TOKEN_INSTANCE_LEN];
	struct timespec started;    /* CLOCK_MONOTONIC */

	struct regtab *regs;
	struct progress *progress;
	struct peers *peers;        /* other xferds (peer.h) */
	struct names *names;        /* published tokens (names.h) */
	struct cluster *cluster;    /* names and nodes in etcd, or NULL
				     * (meta/cluster.h) */
	struct rcache *rcache;      /* imports of GPU memory (rcache.h) */
	struct regworker *regworker; /* the registration thread (regworker.h) */
	struct dltab *dlists;       /* prepared descriptor lists (dlist.h) */
	struct uid_usage_table *uid_use; /* what each user holds, its
					  * connections too (uid_usage.h) */
	struct budget budget;       /* clients' fds and memory (budget.h) */
	struct quota_refusals refusals; /* answers a limit refused (quota.h) */
	uint32_t npending;          /* non-root, not yet handshaken */
	uint32_t nctl;              /* xferctl connections, root's too */
	struct client_list clients;
	uint32_t nclients;          /* attached, not yet dropped */
	uint64_t next_client_id;
	bool stopping;
};

#endif /* XFERD_XFERD_H */
