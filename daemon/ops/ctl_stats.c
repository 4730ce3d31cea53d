/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_stats.c - the body of xferctl stats' reply (ctl_stats.h): the
 * snapshot of ops/stats.c as protobuf, pointing into the snapshot and
 * into a fixed-size parts struct (nothing allocated).
 *
 * Main thread (ops/ctl.c's).
 */
#include <string.h>

#include "common/paths.h"
#include "ops/ctl_stats.h"

static void fill_client(Xfer__Ctl__ClientStats *c,
			const struct stats_client *sc)
{
	xfer__ctl__client_stats__init(c);
	c->pid = sc->pid;
	c->name = (char *)sc->name;
	c->ops = sc->ops;
	c->failed = sc->failed;
	c->bytes = sc->bytes;
	c->in_flight = sc->in_flight;
	c->connections = sc->count;
	c->uid = sc->uid;
	c->processes = sc->processes;
	c->notify_held = sc->notify_queued;
	c->notify_refused = sc->notify_refused;
}

static Xfer__Ctl__ClassStats **fill_classes(Xfer__Ctl__ClassStats *o,
					    Xfer__Ctl__ClassStats **op,
					    struct stats_class *c, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		xfer__ctl__class_stats__init(&o[i]);
		o[i].name = c[i].name;
		o[i].queued_ops = c[i].queued_ops;
		o[i].queued_bytes = c[i].queued_bytes;
		o[i].ops = c[i].ops;
		o[i].bytes = c[i].bytes;
		o[i].n_wait = CLASS_WAIT_BUCKETS;
		o[i].wait = c[i].wait;
		o[i].wait_sum_ns = c[i].wait_sum_ns;
		o[i].paced = c[i].paced;
		o[i].removed = c[i].removed != 0;
		op[i] = &o[i];
	}
	return op;
}

void ctl_stats_fill(struct stats_snapshot *s, struct ctl_stats_parts *o,
		    Xfer__Ctl__StatsReply *r)
{
	memcpy(o->bounds, lat_bound_ns, sizeof(o->bounds));
	r->n_latency_bounds_ns = LAT_BOUNDS;
	r->latency_bounds_ns = o->bounds;
	for (unsigned p = 0; p < XFER_PATH__COUNT; p++) {
		Xfer__Ctl__PathStats *ps = &o->paths[p];
		struct stats_path *sp = &s->paths[p];
		xfer__ctl__path_stats__init(ps);
		ps->path = (char *)path_name(p);
		ps->ops = sp->ops;
		ps->bytes = sp->bytes;
		ps->n_latency = LAT_BOUNDS + 1;
		ps->latency = sp->lat;
		ps->latency_sum_ns = sp->lat_sum_ns;
		for (unsigned i = 0; i < sp->nerrors; i++) {
			xfer__ctl__errno_count__init(&o->errs[p][i]);
			o->errs[p][i].errno_value = (uint32_t)sp->errors[i].err;
			o->errs[p][i].count = sp->errors[i].count;
			o->errp[p][i] = &o->errs[p][i];
		}
		ps->n_errors = sp->nerrors;
		ps->errors = o->errp[p];
		o->pathp[p] = ps;
	}
	r->n_paths = XFER_PATH__COUNT;
	r->paths = o->pathp;
	for (unsigned i = 0; i < s->ntop; i++) {
		fill_client(&o->clients[i], &s->top[i]);
		o->clientp[i] = &o->clients[i];
	}
	r->n_clients = s->ntop;
	r->clients = o->clientp;
	if (s->other.count) {
		fill_client(&o->clients[STATS_CLIENTS_TOP], &s->other);
		r->other = &o->clients[STATS_CLIENTS_TOP];
	}
	for (unsigned i = 0; i < s->npeers; i++) {
		Xfer__Ctl__PeerStats *p = &o->peers[i];
		const struct stats_peer *sp = &s->peers[i];
		xfer__ctl__peer_stats__init(p);
		p->name = (char *)sp->name;
		p->state = (char *)sp->state;
		p->rtt_ns = sp->rtt_ns;
		p->bytes_tx = sp->bytes_tx;
		p->bytes_rx = sp->bytes_rx;
		p->ops = sp->ops;
		p->errors = sp->errors;
		p->reconnects = sp->reconnects;
		o->peerp[i] = p;
	}
	r->n_peers = s->npeers;
	r->peers = o->peerp;
	r->peers_left_out = s->peers_left_out;
	for (unsigned i = 0; i < s->nrails; i++) {
		Xfer__Ctl__RailStats *rs = &o->rails[i];
		const struct stats_rail *sr = &s->rails[i];
		xfer__ctl__rail_stats__init(rs);
		rs->device = (char *)sr->device;
		rs->port = sr->port;
		rs->qps = sr->qps;
		rs->bytes_tx = sr->bytes_tx;
		rs->bytes_rx = sr->bytes_rx;
		rs->wrs = sr->wrs;
		rs->errors = sr->errors;
		o->railp[i] = rs;
	}
	r->n_rails = s->nrails;
	r->rails = o->railp;
	r->gpus = s->gpus;
	r->gpu_imports = s->gpu_imports;
	r->gpu_import_refs = s->gpu_import_refs;
	r->n_classes = XFER_CLASS__COUNT;
	r->classes = fill_classes(o->cls, o->clsp, s->classes, r->n_classes);
	r->n_tenants = s->ntenants;
	r->tenants = fill_classes(o->cls + XFER_CLASS__COUNT,
				  o->clsp + XFER_CLASS__COUNT, s->tenants,
				  s->ntenants);
	r->demoted = s->demoted;
}
