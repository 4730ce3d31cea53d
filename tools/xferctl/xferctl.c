/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl.c - ask the local xferd how it is doing.
 *
 *   xferctl [--socket PATH] [--json|--csv] clients|regions|peers|gpus|
 *           rails|config|names|lists
 *   xferctl [--socket PATH] [--json] status|stats
 *   xferctl [--socket PATH] [--json] ping PEER
 *   xferctl [--socket PATH] [-n COUNT] [-d SECONDS] top
 *
 * The command table, the request/reply code every command shares and
 * the printers of status, clients, regions and ping; the other printers
 * are in xferctl_devices.c (peers, gpus, rails), xferctl_lists.c
 * (config, names, lists) and xferctl_stats.c (stats, top), the table,
 * CSV and JSON writing in xferctl_out.c.
 *
 * One ctl.proto request on xferd's Unix socket, one reply, printed as
 * aligned text for people, as CSV (the commands that print one table)
 * or as one JSON object for scripts.  Exit status: 0 answered, 1 xferd
 * not running, not answering or refusing, or the ping failed, 2 bad
 * usage.
 *
 * Everything printed that came from xferd is treated as untrusted: client
 * names are chosen by other processes and peer names by other nodes, so
 * text output replaces control characters and invalid UTF-8 with '?', and
 * JSON output escapes them.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.pb-c.h"
#include "common/rendezvous.h"
#include "common/wire.h"
#include "xferctl_devices.h"
#include "xferctl_health.h"
#include "xferctl_lists.h"
#include "xferctl_out.h"
#include "xferctl_stats.h"
#include "xferd.h" /* XFERD_VERSION: xferctl ships with the daemon it asks */

#define EXIT_USAGE 2
/* Long enough for a busy daemon, short enough for a script to go on. */
#define REPLY_TIMEOUT_S 5
/* A ping may first have to connect (xferd's connect_timeout, 3 s by
 * default) and then wait for the answer (peer_timeout, 5 s). */
#define PING_TIMEOUT_S 15
/* What xferd accepts as a ping target (daemon/ops/ctl.c). */
#define PING_TARGET_MAX 80

struct options {
	const char *socket; /* NULL: the default path */
	bool json;
	bool csv;
	unsigned count;     /* top: frames, 0 = until q */
	unsigned delay_ms;  /* top: between frames */
	bool top_opts;      /* -n or -d given */
};

struct command {
	const char *name;
	const char *arg;          /* its one argument, NULL: none */
	Xfer__Ctl__CtlMsg__BodyCase request, reply;
	unsigned timeout_s;       /* for the answer */
	bool table;               /* prints one table: --csv allowed */
	void (*print_text)(const Xfer__Ctl__CtlMsg *r);
	void (*print_json)(const Xfer__Ctl__CtlMsg *r);
};

#define SYNOPSIS \
	"usage: xferctl [-s|--socket PATH] [-j|--json|--csv]\n" \
	"               clients|regions|peers|gpus|rails|config|names|lists\n" \
	"       xferctl [-s|--socket PATH] [-j|--json] status|stats\n" \
	"       xferctl [-s|--socket PATH] [-j|--json] ping PEER\n" \
	"       xferctl [-s|--socket PATH] [-n COUNT] [-d SECONDS] top\n" \
	"       xferctl --help | --version\n"

/* After a usage error: the synopsis only, the details are in --help. */
static void usage_error(void)
{
	fprintf(stderr, SYNOPSIS "Try 'xferctl --help' for more.\n");
}

static void usage(void)
{
	printf(SYNOPSIS
		"\n"
		"Ask the local xferd how it is doing.\n"
		"\n"
		"commands:\n"
		"  status    version, uptime, counters, bytes moved per path\n"
		"  stats     what the metrics endpoint exports: per path ops,\n"
		"            bytes, latency, errors by errno; the busiest\n"
		"            clients; peer links; rails\n"
		"  top       rates of those, refreshed every -d seconds; q quits\n"
		"  clients   connected processes and what each has moved\n"
		"  regions   registered memory: owner, kind, length, imports\n"
		"  peers     other xferds: state, address in use and why, round\n"
		"            trip, traffic, errors\n"
		"  ping PEER round trip to a peer: node name, instance id (a hex\n"
		"            prefix) or host[:port]\n"
		"  gpus      GPUs xferd opened, their memory, which reach which\n"
		"            directly, and the imported client allocations\n"
		"  rails     RDMA NIC ports xferd can use: state, link, MTU, GID,\n"
		"            IP address and interface, how peers are held to\n"
		"            token ranges\n"
		"  config    every configuration key: its value in force and\n"
		"            where it came from (default, file, override, reload)\n"
		"  names     published names: yours (root: every user's)\n"
		"  lists     prepared lists per client: yours (root: all)\n"
		"\n"
		"options:\n"
		"  -s, --socket PATH  xferd's socket (default: $XFERD_SOCKET, else\n"
		"                     $XDG_RUNTIME_DIR/xferd.sock, or\n"
		"                     /run/xferd/xferd.sock as root)\n"
		"  -j, --json         print one JSON object instead of text\n"
		"      --csv          print the table as CSV (exact numbers:\n"
		"                     bytes, milliseconds, nanoseconds)\n"
		"  -n, --count COUNT  top: print COUNT frames and exit (no\n"
		"                     escape codes)\n"
		"  -d, --delay SECS   top: seconds between frames (default 1)\n"
		"  -h, --help         print this text\n"
		"  -V, --version      print xferctl's version\n"
		"\n"
		"exit status: 0 answered, 1 xferd not running or not answering,\n"
		"or the ping failed, 2 bad usage\n");
}

/* --- status --- */

static void print_status_text(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__StatusReply *st = r->status_reply;
	char b[32], id[2 * 64 + 1] = "";
	struct table kv;

	for (size_t i = 0; i < st->instance_id.len && i < 64; i++)
		snprintf(id + 2 * i, 3, "%02x", st->instance_id.data[i]);
	table_init_kv(&kv);
	table_kv(&kv, "version", "%s", st->version);
	table_kv(&kv, "instance id", "%s", id);
	table_kv(&kv, "pid", "%" PRIu32, st->pid);
	table_kv(&kv, "uptime", "%s", fmt_age(b, sizeof(b), st->uptime_ms));
	table_kv(&kv, "socket", "%s", st->socket_path);
	table_kv(&kv, "workers", "%" PRIu32, st->workers);
	table_kv(&kv, "clients", "%" PRIu32, st->clients);
	table_kv(&kv, "regions", "%" PRIu32, st->regions);
	table_kv(&kv, "imports", "%" PRIu32, st->imports);
	table_kv(&kv, "ops completed", "%" PRIu64, st->ops_completed);
	table_kv(&kv, "ops failed", "%" PRIu64, st->ops_failed);
	table_kv(&kv, "ops in flight", "%" PRIu64, st->ops_in_flight);
	table_kv(&kv, "bytes moved", "%s",
		 fmt_bytes(b, sizeof(b), st->bytes_moved));
	table_kv(&kv, "rss", "%s", fmt_bytes(b, sizeof(b), st->rss_bytes));
	const Xfer__Ctl__StagingPool *sp = st->staging;
	if (sp && sp->send && sp->recv) {
		const Xfer__Ctl__StagingHalf *h[2] = { sp->send, sp->recv };
		static const char *const key[2] = { "staging send",
						    "staging recv" };
		table_kv(&kv, "staging", "%s chunks, %" PRIu32 " of %" PRIu32
			 " in use, %" PRIu32 " waiting",
			 fmt_bytes(b, sizeof(b), sp->chunk_bytes),
			 h[0]->in_use + h[1]->in_use,
			 h[0]->chunks + h[1]->chunks,
			 h[0]->waiting + h[1]->waiting);
		for (int i = 0; i < 2; i++)
			table_kv(&kv, key[i], "%" PRIu32 " of %" PRIu32
				 " in use, %" PRIu32 " waiting, %" PRIu32
				 " for latency", h[i]->in_use, h[i]->chunks,
				 h[i]->waiting, h[i]->latency_reserve);
		table_kv(&kv, "staging waits", "%" PRIu64, sp->waits);
		table_kv(&kv, "staging reserve used", "%" PRIu64,
			 sp->reserve_used);
		for (size_t i = 0; i < sp->n_clocks; i++) {
			const Xfer__Ctl__StagingClock *ck = sp->clocks[i];
			char name[48];
			snprintf(name, sizeof(name), "staging %s", ck->stage);
			table_kv(&kv, name, "%" PRIu64 " in %.3f ms (%.1f us each)",
				 ck->count, (double)ck->ns / 1e6,
				 ck->count ? (double)ck->ns / 1e3 /
						     (double)ck->count
					   : 0.0);
		}
	} else {
		table_kv(&kv, "staging", "none (%s)",
			 st->staging_none && *st->staging_none
				 ? st->staging_none : "no GPUs");
	}
	const Xfer__Ctl__LandingPools *lp = st->landing;
	if (lp)
		table_kv(&kv, "staging landing", "%" PRIu32 " of %" PRIu32
			 " peers' pools, %" PRIu32 " chunks (%s), %" PRIu32
			 " lent; made %" PRIu64 ", freed %" PRIu64
			 ", refused %" PRIu64, lp->pools, lp->max_pools,
			 lp->chunks, fmt_bytes(b, sizeof(b), lp->bytes),
			 lp->lent, lp->made, lp->freed, lp->refused);
	const Xfer__Ctl__RcacheStats *rc = st->rcache;
	if (rc) {
		char ent[32] = "no entry limit", byt[48] = "no byte limit";
		if (rc->max_entries)
			snprintf(ent, sizeof(ent), "%" PRIu32 " entries",
				 rc->max_entries);
		if (rc->max_bytes)
			fmt_bytes(byt, sizeof(byt), rc->max_bytes);
		table_kv(&kv, "rcache", "%" PRIu32 " entries (%" PRIu32
			 " unused), %s", rc->entries, rc->unused,
			 fmt_bytes(b, sizeof(b), rc->bytes));
		table_kv(&kv, "rcache lookups", "%" PRIu64 " hits, %" PRIu64
			 " misses, %" PRIu64 " evictions", rc->hits,
			 rc->misses, rc->evictions);
		table_kv(&kv, "rcache limits", "%s, %s", ent, byt);
		table_kv(&kv, "registrations", "%" PRIu32 " pending",
			 rc->pending);
	}
	health_text(&kv, st);
	table_print(&kv);
	if (st->n_paths == 0)
		return;

	static const char *const head[] = { "PATH", "OPS", "BYTES", NULL };
	struct table t;

	table_init(&t, 1u << 0, head);
	for (size_t i = 0; i < st->n_paths; i++) {
		const Xfer__Ctl__PathCount *p = st->paths[i];
		table_row(&t);
		table_set(&t, 0, "%s", p->path);
		table_set(&t, 1, "%" PRIu64, p->ops);
		table_set(&t, 2, "%s", fmt_bytes(b, sizeof(b), p->bytes));
	}
	putchar('\n');
	table_print(&t);
}

static void print_status_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__StatusReply *st = r->status_reply;
	json_object *o = jv_obj(), *paths = jv_arr();

	jv_set(o, "version", jv_str(st->version));
	jv_set(o, "instance_id",
		 jv_hex(st->instance_id.data, st->instance_id.len));
	jv_set(o, "pid", jv_u64(st->pid));
	jv_set(o, "uptime_ms", jv_u64(st->uptime_ms));
	jv_set(o, "socket_path", jv_str(st->socket_path));
	jv_set(o, "workers", jv_u64(st->workers));
	jv_set(o, "clients", jv_u64(st->clients));
	jv_set(o, "regions", jv_u64(st->regions));
	jv_set(o, "imports", jv_u64(st->imports));
	jv_set(o, "ops_completed", jv_u64(st->ops_completed));
	jv_set(o, "ops_failed", jv_u64(st->ops_failed));
	jv_set(o, "ops_in_flight", jv_u64(st->ops_in_flight));
	jv_set(o, "bytes_moved", jv_u64(st->bytes_moved));
	jv_set(o, "rss_bytes", jv_u64(st->rss_bytes));
	const Xfer__Ctl__StagingPool *sp = st->staging;
	if (sp && sp->send && sp->recv) {
		const Xfer__Ctl__StagingHalf *h[2] = { sp->send, sp->recv };
		static const char *const key[2] = { "send", "recv" };
		json_object *s = jv_obj();
		jv_set(s, "chunk_bytes", jv_u64(sp->chunk_bytes));
		jv_set(s, "chunks", jv_u64(h[0]->chunks + h[1]->chunks));
		jv_set(s, "in_use", jv_u64(h[0]->in_use + h[1]->in_use));
		jv_set(s, "waiting", jv_u64(h[0]->waiting + h[1]->waiting));
		jv_set(s, "waits", jv_u64(sp->waits));
		jv_set(s, "reserve_used", jv_u64(sp->reserve_used));
		json_object *clocks = jv_obj();
		for (size_t i = 0; i < sp->n_clocks; i++) {
			json_object *ck = jv_obj();
			jv_set(ck, "count", jv_u64(sp->clocks[i]->count));
			jv_set(ck, "ns", jv_u64(sp->clocks[i]->ns));
			jv_set(clocks, sp->clocks[i]->stage, ck);
		}
		jv_set(s, "clocks", clocks);
		for (int i = 0; i < 2; i++) {
			json_object *half = jv_obj();
			jv_set(half, "chunks", jv_u64(h[i]->chunks));
			jv_set(half, "in_use", jv_u64(h[i]->in_use));
			jv_set(half, "waiting", jv_u64(h[i]->waiting));
			jv_set(half, "latency_reserve",
			       jv_u64(h[i]->latency_reserve));
			jv_set(s, key[i], half);
		}
		jv_set(o, "staging", s);
	} else {
		jv_set(o, "staging", NULL);
		jv_set(o, "staging_none",
		       jv_str(st->staging_none && *st->staging_none
				      ? st->staging_none : "no GPUs"));
	}
	if (st->landing) {
		const Xfer__Ctl__LandingPools *lp = st->landing;
		json_object *l = jv_obj();
		jv_set(l, "chunk_bytes", jv_u64(lp->chunk_bytes));
		jv_set(l, "pools", jv_u64(lp->pools));
		jv_set(l, "max_pools", jv_u64(lp->max_pools));
		jv_set(l, "chunks", jv_u64(lp->chunks));
		jv_set(l, "lent", jv_u64(lp->lent));
		jv_set(l, "bytes", jv_u64(lp->bytes));
		jv_set(l, "made", jv_u64(lp->made));
		jv_set(l, "freed", jv_u64(lp->freed));
		jv_set(l, "refused", jv_u64(lp->refused));
		jv_set(o, "landing", l);
	}
	if (st->rcache) {
		const Xfer__Ctl__RcacheStats *rc = st->rcache;
		json_object *c = jv_obj();
		jv_set(c, "entries", jv_u64(rc->entries));
		jv_set(c, "unused", jv_u64(rc->unused));
		jv_set(c, "bytes", jv_u64(rc->bytes));
		jv_set(c, "hits", jv_u64(rc->hits));
		jv_set(c, "misses", jv_u64(rc->misses));
		jv_set(c, "evictions", jv_u64(rc->evictions));
		jv_set(c, "max_entries", jv_u64(rc->max_entries));
		jv_set(c, "max_bytes", jv_u64(rc->max_bytes));
		jv_set(c, "pending", jv_u64(rc->pending));
		jv_set(o, "rcache", c);
	}
	for (size_t i = 0; i < st->n_paths; i++) {
		json_object *p = jv_obj();
		jv_set(p, "path", jv_str(st->paths[i]->path));
		jv_set(p, "ops", jv_u64(st->paths[i]->ops));
		jv_set(p, "bytes", jv_u64(st->paths[i]->bytes));
		jv_push(paths, p);
	}
	jv_set(o, "paths", paths);
	health_json(o, st);
	jv_print(o);
}

/* --- clients --- */

static void print_clients_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = {
		"ID", "PID", "UID", "NAME", "REGIONS", "IMPORTS", "OPS",
		"FAILED", "BYTES", "SQ", "AGE", "NOTIFY", NULL
	};
	const Xfer__Ctl__ClientsReply *rep = r->clients_reply;
	struct table t;
	char b[32];

	if (rep->n_clients == 0 && !out_csv()) {
		printf("no clients\n");
		return;
	}
	table_init(&t, 1u << 3, head);
	for (size_t i = 0; i < rep->n_clients; i++) {
		const Xfer__Ctl__ClientInfo *c = rep->clients[i];
		table_row(&t);
		table_set(&t, 0, "%" PRIu64, c->id);
		table_set(&t, 1, "%" PRIu32, c->pid);
		table_set(&t, 2, "%" PRIu32, c->uid);
		table_set(&t, 3, "%s", c->name);
		table_set(&t, 4, "%" PRIu32, c->regions);
		table_set(&t, 5, "%" PRIu32, c->imports);
		table_set(&t, 6, "%" PRIu64, c->ops_completed);
		table_set(&t, 7, "%" PRIu64, c->ops_failed);
		table_set(&t, 8, "%s", fmt_bytes(b, sizeof(b), c->bytes_moved));
		table_set(&t, 9, "%" PRIu32, c->sq_entries);
		table_set(&t, 10, "%s", fmt_age(b, sizeof(b), c->connected_ms));
		table_set(&t, 11, "%" PRIu64, c->notify_queued);
	}
	table_print(&t);
}

static void print_clients_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__ClientsReply *rep = r->clients_reply;
	json_object *o = jv_obj(), *list = jv_arr();

	for (size_t i = 0; i < rep->n_clients; i++) {
		const Xfer__Ctl__ClientInfo *c = rep->clients[i];
		json_object *j = jv_obj();
		jv_set(j, "id", jv_u64(c->id));
		jv_set(j, "pid", jv_u64(c->pid));
		jv_set(j, "uid", jv_u64(c->uid));
		jv_set(j, "name", jv_str(c->name));
		jv_set(j, "regions", jv_u64(c->regions));
		jv_set(j, "imports", jv_u64(c->imports));
		jv_set(j, "ops_completed", jv_u64(c->ops_completed));
		jv_set(j, "ops_failed", jv_u64(c->ops_failed));
		jv_set(j, "bytes_moved", jv_u64(c->bytes_moved));
		jv_set(j, "sq_entries", jv_u64(c->sq_entries));
		jv_set(j, "connected_ms", jv_u64(c->connected_ms));
		jv_set(j, "notify_queued", jv_u64(c->notify_queued));
		jv_set(j, "notify_refused", jv_u64(c->notify_refused));
		jv_push(list, j);
	}
	jv_set(o, "clients", list);
	jv_print(o);
}

/* --- regions --- */

static int by_handle(const void *a, const void *b)
{
	const Xfer__Ctl__RegionInfo *x = *(Xfer__Ctl__RegionInfo *const *)a;
	const Xfer__Ctl__RegionInfo *y = *(Xfer__Ctl__RegionInfo *const *)b;

	return (x->handle > y->handle) - (x->handle < y->handle);
}

static void print_regions_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = {
		"HANDLE", "OWNER", "KIND", "LENGTH", "IMPORTS", "ADDR", NULL
	};
	const Xfer__Ctl__RegionsReply *rep = r->regions_reply;
	struct table t;
	char b[32];

	if (rep->n_regions == 0 && !out_csv()) {
		printf("no regions\n");
		return;
	}
	table_init(&t, 1u << 2 | 1u << 5, head);
	for (size_t i = 0; i < rep->n_regions; i++) {
		const Xfer__Ctl__RegionInfo *g = rep->regions[i];
		table_row(&t);
		table_set(&t, 0, "%" PRIu64, g->handle);
		table_set(&t, 1, "%" PRIu64, g->owner);
		table_set(&t, 2, "%s", g->kind);
		table_set(&t, 3, "%s", fmt_bytes(b, sizeof(b), g->length));
		table_set(&t, 4, "%" PRIu32, g->refs);
		if (g->addr)
			table_set(&t, 5, "0x%" PRIx64, g->addr);
		else
			table_set(&t, 5, "-");
	}
	table_print(&t);
}

static void print_regions_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__RegionsReply *rep = r->regions_reply;
	json_object *o = jv_obj(), *list = jv_arr();

	for (size_t i = 0; i < rep->n_regions; i++) {
		const Xfer__Ctl__RegionInfo *g = rep->regions[i];
		json_object *j = jv_obj();
		jv_set(j, "handle", jv_u64(g->handle));
		jv_set(j, "owner", jv_u64(g->owner));
		jv_set(j, "kind", jv_str(g->kind));
		jv_set(j, "length", jv_u64(g->length));
		jv_set(j, "imports", jv_u64(g->refs));
		jv_set(j, "addr", jv_u64(g->addr));
		jv_push(list, j);
	}
	jv_set(o, "regions", list);
	jv_print(o);
}

/* --- ping --- */

/* The rule xferd applies (daemon/ops/ctl.c): what a node name, a hex id
 * prefix or "host:port" can be made of. */
static bool valid_ping_target(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > PING_TARGET_MAX)
		return false;
	for (; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f)
			return false;
	return true;
}

/* Only called with error 0: a failed ping is ping_failed()'s. */
static void print_ping_text(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__PingReply *pr = r->ping_reply;
	char who[256];

	text_clean(who, sizeof(who), pr->who);
	printf("%s: rtt %.1f us\n", who, (double)pr->rtt_ns / 1e3);
}

static void print_ping_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__PingReply *pr = r->ping_reply;
	json_object *o = jv_obj();

	jv_set(o, "who", jv_str(pr->who));
	jv_set(o, "rtt_ns", jv_u64(pr->rtt_ns));
	jv_print(o);
}

/* Say why the ping of target failed; the exit status is 1. */
static int ping_failed(const char *target, int error)
{
	int e = error < 0 ? -error : error;
	const char *why;
	char t[PING_TARGET_MAX + 1];

	switch (e) {
	case EHOSTUNREACH:
		why = "no such peer, or it cannot be reached";
		break;
	case ENOENT:
		why = "no such peer";
		break;
	case ETIMEDOUT:
		why = "no answer in time";
		break;
	case ECONNREFUSED:
		why = "refused: no xferd listens there";
		break;
	case ECONNRESET:
	case ENOTCONN:
		why = "the link to it went down";
		break;
	default:
		why = "failed";
		break;
	}
	text_clean(t, sizeof(t), target);
	fprintf(stderr, "xferctl: ping %s: %s (%s)\n", t, why, strerror(e));
	return 1;
}

static const struct command commands[] = {
	{ "status", NULL, XFER__CTL__CTL_MSG__BODY_STATUS,
	  XFER__CTL__CTL_MSG__BODY_STATUS_REPLY, REPLY_TIMEOUT_S, false,
	  print_status_text, print_status_json },
	{ "clients", NULL, XFER__CTL__CTL_MSG__BODY_CLIENTS,
	  XFER__CTL__CTL_MSG__BODY_CLIENTS_REPLY, REPLY_TIMEOUT_S, true,
	  print_clients_text, print_clients_json },
	{ "regions", NULL, XFER__CTL__CTL_MSG__BODY_REGIONS,
	  XFER__CTL__CTL_MSG__BODY_REGIONS_REPLY, REPLY_TIMEOUT_S, true,
	  print_regions_text, print_regions_json },
	{ "peers", NULL, XFER__CTL__CTL_MSG__BODY_PEERS,
	  XFER__CTL__CTL_MSG__BODY_PEERS_REPLY, REPLY_TIMEOUT_S, true,
	  print_peers_text, print_peers_json },
	{ "gpus", NULL, XFER__CTL__CTL_MSG__BODY_GPUS,
	  XFER__CTL__CTL_MSG__BODY_GPUS_REPLY, REPLY_TIMEOUT_S, true,
	  print_gpus_text, print_gpus_json },
	{ "rails", NULL, XFER__CTL__CTL_MSG__BODY_RAILS,
	  XFER__CTL__CTL_MSG__BODY_RAILS_REPLY, REPLY_TIMEOUT_S, true,
	  print_rails_text, print_rails_json },
	{ "stats", NULL, XFER__CTL__CTL_MSG__BODY_STATS,
	  XFER__CTL__CTL_MSG__BODY_STATS_REPLY, REPLY_TIMEOUT_S, false,
	  print_stats_text, print_stats_json },
	{ "top", NULL, XFER__CTL__CTL_MSG__BODY_STATS,
	  XFER__CTL__CTL_MSG__BODY_STATS_REPLY, REPLY_TIMEOUT_S, false,
	  print_stats_text, print_stats_json },
	{ "config", NULL, XFER__CTL__CTL_MSG__BODY_CONFIG,
	  XFER__CTL__CTL_MSG__BODY_CONFIG_REPLY, REPLY_TIMEOUT_S, true,
	  print_config_text, print_config_json },
	{ "names", NULL, XFER__CTL__CTL_MSG__BODY_NAMES,
	  XFER__CTL__CTL_MSG__BODY_NAMES_REPLY, REPLY_TIMEOUT_S, true,
	  print_names_text, print_names_json },
	{ "lists", NULL, XFER__CTL__CTL_MSG__BODY_NAMES,
	  XFER__CTL__CTL_MSG__BODY_NAMES_REPLY, REPLY_TIMEOUT_S, true,
	  print_lists_text, print_lists_json },
	{ "ping", "PEER", XFER__CTL__CTL_MSG__BODY_PING,
	  XFER__CTL__CTL_MSG__BODY_PING_REPLY, PING_TIMEOUT_S, false,
	  print_ping_text, print_ping_json },
};

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(name, commands[i].name))
			return &commands[i];
	return NULL;
}

/* --- talking to xferd --- */

/* A connected socket, or -errno. */
static int connect_xferd(const char *path, unsigned timeout_s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* A wedged xferd must not hang us: the send timeout also bounds a
	 * connect() waiting on a full listen backlog, the receive timeout
	 * the wait for the answer. */
	struct timeval tv = { .tv_sec = timeout_s };
	size_t len = strlen(path);
	int fd;

	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, len + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* Say why talking to xferd at path failed (having waited timeout_s for
 * the answer); the exit status is 1. */
static int report(const char *path, int err, unsigned timeout_s)
{
	const char *why, *end = "";

	switch (err) {
	case -ENOENT:
		why = "xferd is not running (no socket at";
		end = ")";
		break;
	case -ECONNREFUSED:
		why = "xferd is not running (nothing listens on";
		end = ")";
		break;
	case -EACCES:
	case -EPERM:
		why = "permission denied on";
		end = " (the socket is mode 0660 root:xferd: add the user to "
		      "group xferd, see socket_group in xferd.conf(5))";
		break;
	case -EAGAIN:
		fprintf(stderr, "xferctl: xferd did not answer within %u s on "
			"%s\n", timeout_s, path);
		return 1;
	case -ENAMETOOLONG:
		why = "socket path too long:";
		break;
	case -ECONNRESET:
	case -EPIPE:
		why = "xferd closed the connection without an answer on";
		end = " (see its log)";
		break;
	case -EMSGSIZE:
	case -EPROTO:
		why = "malformed answer from xferd on";
		break;
	default:
		fprintf(stderr, "xferctl: cannot talk to xferd on %s: %s\n",
			path, strerror(-err));
		return 1;
	}
	fprintf(stderr, "xferctl: %s %s%s\n", why, path, end);
	return 1;
}

/*
 * Ask cmd's question; on success *out is the reply (free it with
 * xfer__ctl__ctl_msg__free_unpacked) and 0 is returned, otherwise the
 * reason has been printed and the exit status is returned.
 */
static int ask(const char *path, const struct command *cmd, const char *arg,
	       Xfer__Ctl__CtlMsg **out)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__StatusRequest status = XFER__CTL__STATUS_REQUEST__INIT;
	Xfer__Ctl__ClientsRequest clients = XFER__CTL__CLIENTS_REQUEST__INIT;
	Xfer__Ctl__RegionsRequest regions = XFER__CTL__REGIONS_REQUEST__INIT;
	Xfer__Ctl__PeersRequest peers = XFER__CTL__PEERS_REQUEST__INIT;
	Xfer__Ctl__PingRequest ping = XFER__CTL__PING_REQUEST__INIT;
	Xfer__Ctl__GpusRequest gpus = XFER__CTL__GPUS_REQUEST__INIT;
	Xfer__Ctl__RailsRequest rails = XFER__CTL__RAILS_REQUEST__INIT;
	Xfer__Ctl__StatsRequest stats = XFER__CTL__STATS_REQUEST__INIT;
	Xfer__Ctl__ConfigRequest config = XFER__CTL__CONFIG_REQUEST__INIT;
	Xfer__Ctl__NamesRequest names = XFER__CTL__NAMES_REQUEST__INIT;
	static uint8_t pkt[WIRE_MAX_PACKET]; /* too big for a polite stack */
	Xfer__Ctl__CtlMsg *r = NULL;
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	ssize_t n;
	int sock, err;

	m.proto_version = XFER_PROTO_VERSION;
	m.body_case = cmd->request;
	switch (cmd->request) {
	case XFER__CTL__CTL_MSG__BODY_STATUS: m.status = &status; break;
	case XFER__CTL__CTL_MSG__BODY_CLIENTS: m.clients = &clients; break;
	case XFER__CTL__CTL_MSG__BODY_REGIONS: m.regions = &regions; break;
	case XFER__CTL__CTL_MSG__BODY_PEERS: m.peers = &peers; break;
	case XFER__CTL__CTL_MSG__BODY_GPUS: m.gpus = &gpus; break;
	case XFER__CTL__CTL_MSG__BODY_RAILS: m.rails = &rails; break;
	case XFER__CTL__CTL_MSG__BODY_STATS: m.stats = &stats; break;
	case XFER__CTL__CTL_MSG__BODY_CONFIG: m.config = &config; break;
	case XFER__CTL__CTL_MSG__BODY_NAMES: m.names = &names; break;
	case XFER__CTL__CTL_MSG__BODY_PING:
		ping.target = (char *)arg;
		m.ping = &ping;
		break;
	default: return report(path, -EINVAL, cmd->timeout_s);
	}
	sock = connect_xferd(path, cmd->timeout_s);
	if (sock < 0)
		return report(path, sock, cmd->timeout_s);
	err = wire_send(sock, WIRE_TAG_CTL, &m.base, NULL, 0);
	n = err ? err : wire_recv(sock, pkt, fds, &nfds);
	close(sock);
	if (n <= 0)
		return report(path, n == 0 ? -ECONNRESET : (int)n,
			      cmd->timeout_s);
	if (nfds) { /* ctl replies never carry descriptors */
		wire_close_fds(fds, &nfds);
		return report(path, -EMSGSIZE, cmd->timeout_s);
	}
	if (wire_tag(pkt, (size_t)n) == WIRE_TAG_CTL)
		r = xfer__ctl__ctl_msg__unpack(NULL, (size_t)n - WIRE_TAG_LEN,
					       pkt + WIRE_TAG_LEN);
	if (!r)
		return report(path, -EPROTO, cmd->timeout_s);
	/* An error is shown whatever its version: it says why. */
	if (r->body_case == XFER__CTL__CTL_MSG__BODY_ERROR) {
		char msg[256];
		int e = r->error->error < 0 ? -r->error->error : r->error->error;
		text_clean(msg, sizeof(msg), r->error->message);
		fprintf(stderr, "xferctl: xferd: %s%s%s%s\n",
			*msg ? msg : "no reason given",
			e ? " (" : "", e ? strerror(e) : "", e ? ")" : "");
	} else if (r->proto_version != XFER_PROTO_VERSION) {
		fprintf(stderr, "xferctl: xferd speaks protocol version %" PRIu32
			", xferctl %u: use the xferctl that came with it\n",
			r->proto_version, XFER_PROTO_VERSION);
	} else if (r->body_case != cmd->reply) {
		fprintf(stderr, "xferctl: xferd answered '%s' with the wrong "
			"message (%d)\n", cmd->name, (int)r->body_case);
	} else {
		*out = r;
		return 0;
	}
	xfer__ctl__ctl_msg__free_unpacked(r, NULL);
	return 1;
}

/*
 * What follows the command name: nothing, or cmd's one argument, checked
 * here as xferd would so that a typo is a usage error.  Returns 0 with
 * *arg set (NULL when the command takes none) or EXIT_USAGE.
 */
static int parse_arg(const struct command *cmd, int n, char **args,
		     const char **arg)
{
	char clean[PING_TARGET_MAX + 1];

	if (!cmd->arg && n == 0)
		return 0;
	if (!cmd->arg) {
		if (find_command(args[0]))
			fprintf(stderr, "xferctl: one command at a time\n");
		else
			fprintf(stderr, "xferctl: '%s' takes no argument\n",
				cmd->name);
	} else if (n != 1) {
		fprintf(stderr, "xferctl: %s needs one %s\n", cmd->name,
			cmd->arg);
	} else if (!*args[0]) {
		fprintf(stderr, "xferctl: empty %s\n", cmd->arg);
	} else if (strlen(args[0]) > PING_TARGET_MAX) {
		fprintf(stderr, "xferctl: %s longer than %d characters\n",
			cmd->arg, PING_TARGET_MAX);
	} else if (!valid_ping_target(args[0])) {
		text_clean(clean, sizeof(clean), args[0]);
		fprintf(stderr, "xferctl: %s '%s' is not printable ASCII "
			"without spaces\n", cmd->arg, clean);
	} else {
		*arg = args[0];
		return 0;
	}
	usage_error();
	return EXIT_USAGE;
}

/* xferctl top's source of replies. */
struct top_source {
	const char *path;
	const struct command *cmd;
};

static int top_fetch(void *arg, Xfer__Ctl__CtlMsg **out)
{
	struct top_source *src = arg;

	return ask(src->path, src->cmd, NULL, out);
}

/* "5", "0.5": seconds as milliseconds (10 ms .. 1 h); 0 if not one. */
static unsigned parse_delay(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= 0.01 && v <= 3600))
		return 0;
	return (unsigned)(v * 1000 + 0.5);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "csv", no_argument, NULL, 'C' },
		{ "count", required_argument, NULL, 'n' },
		{ "delay", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct options opt = { .delay_ms = 1000 };
	char *end;
	const struct command *cmd;
	char default_path[4096];
	const char *path, *arg = NULL;
	Xfer__Ctl__CtlMsg *reply = NULL;
	int ch, rc;

	out_init();
	while ((ch = getopt_long(argc, argv, "s:jn:d:hV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			opt.socket = optarg;
			break;
		case 'j':
			opt.json = true;
			break;
		case 'C':
			opt.csv = true;
			break;
		case 'n':
			errno = 0;
			opt.count = (unsigned)strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || opt.count == 0 ||
			    opt.count > 1000000) {
				fprintf(stderr, "xferctl: -n wants a count of "
					"frames (1-1000000)\n");
				usage_error();
				return EXIT_USAGE;
			}
			opt.top_opts = true;
			break;
		case 'd':
			opt.delay_ms = parse_delay(optarg);
			if (!opt.delay_ms) {
				fprintf(stderr, "xferctl: -d wants seconds "
					"between frames (0.01-3600)\n");
				usage_error();
				return EXIT_USAGE;
			}
			opt.top_opts = true;
			break;
		case 'h':
			usage();
			return 0;
		case 'V':
			printf("xferctl %s (protocol %u)\n", XFERD_VERSION,
			       XFER_PROTO_VERSION);
			return 0;
		default: /* getopt_long said what was wrong */
			usage_error();
			return EXIT_USAGE;
		}
	}
	if (optind == argc) {
		fprintf(stderr, "xferctl: no command given\n");
		usage_error();
		return EXIT_USAGE;
	}
	cmd = find_command(argv[optind]);
	if (!cmd) {
		fprintf(stderr, "xferctl: unknown command '%s'\n", argv[optind]);
		usage_error();
		return EXIT_USAGE;
	}
	rc = parse_arg(cmd, argc - optind - 1, argv + optind + 1, &arg);
	if (rc)
		return rc;
	if (opt.socket && !*opt.socket) {
		fprintf(stderr, "xferctl: empty socket path\n");
		usage_error();
		return EXIT_USAGE;
	}
	bool top = !strcmp(cmd->name, "top");
	if (opt.top_opts != (opt.top_opts && top) || (top && opt.json)) {
		fprintf(stderr, "xferctl: %s\n", top ? "top has no --json "
			"(use stats --json)" : "-n and -d are for top");
		usage_error();
		return EXIT_USAGE;
	}
	if (opt.csv && (opt.json || !cmd->table)) {
		fprintf(stderr, "xferctl: %s\n", opt.json ?
			"--csv or --json, not both" : "--csv is for the commands "
			"that print one table (use --json)");
		usage_error();
		return EXIT_USAGE;
	}
	if (opt.csv)
		out_set_csv();
	path = opt.socket;
	if (!path) {
		rendezvous_default_socket(default_path, sizeof(default_path), true);
		path = default_path;
	}
	if (top) {
		struct top_source src = { path, cmd };
		return top_run(top_fetch, &src, opt.delay_ms, opt.count);
	}
	rc = ask(path, cmd, arg, &reply);
	if (rc)
		return rc;
	if (reply->body_case == XFER__CTL__CTL_MSG__BODY_PING_REPLY &&
	    reply->ping_reply->error) {
		rc = ping_failed(arg, reply->ping_reply->error);
		xfer__ctl__ctl_msg__free_unpacked(reply, NULL);
		return rc;
	}
	/* xferd lists regions in hash order; people want handle order.  An
	 * empty list has no array at all. */
	if (reply->body_case == XFER__CTL__CTL_MSG__BODY_REGIONS_REPLY &&
	    reply->regions_reply->n_regions > 1)
		qsort(reply->regions_reply->regions,
		      reply->regions_reply->n_regions,
		      sizeof(*reply->regions_reply->regions), by_handle);
	if (reply->body_case == XFER__CTL__CTL_MSG__BODY_PEERS_REPLY)
		peers_sort(reply->peers_reply);
	(opt.json ? cmd->print_json : cmd->print_text)(reply);
	xfer__ctl__ctl_msg__free_unpacked(reply, NULL);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "xferctl: writing the answer: %s\n",
			strerror(errno));
		return 1;
	}
	return 0;
}
