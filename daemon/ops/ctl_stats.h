/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_stats.h - xferctl stats' reply built from a snapshot (ops/stats.h):
 * every field but its status, which ops/ctl.c fills as for status.
 */
#ifndef XFERD_CTL_STATS_H
#define XFERD_CTL_STATS_H

#include "ctl.pb-c.h"
#include "ops/stats.h"

/* Storage of the reply's parts; it and the snapshot outlive the reply. */
struct ctl_stats_parts {
	uint64_t bounds[LAT_BOUNDS];
	Xfer__Ctl__PathStats paths[XFER_PATH__COUNT];
	Xfer__Ctl__PathStats *pathp[XFER_PATH__COUNT];
	Xfer__Ctl__ErrnoCount errs[XFER_PATH__COUNT][STATS_ERRNOS_MAX];
	Xfer__Ctl__ErrnoCount *errp[XFER_PATH__COUNT][STATS_ERRNOS_MAX];
	Xfer__Ctl__ClientStats clients[STATS_CLIENTS_TOP + 1];
	Xfer__Ctl__ClientStats *clientp[STATS_CLIENTS_TOP];
	Xfer__Ctl__PeerStats peers[STATS_PEERS_MAX];
	Xfer__Ctl__PeerStats *peerp[STATS_PEERS_MAX];
	Xfer__Ctl__RailStats rails[STATS_RAILS_MAX];
	Xfer__Ctl__RailStats *railp[STATS_RAILS_MAX];
	Xfer__Ctl__ClassStats cls[XFER_CLASS__COUNT + TENANT_MAX];
	Xfer__Ctl__ClassStats *clsp[XFER_CLASS__COUNT + TENANT_MAX];
};

/* Fill r (already initialised) from s; r points into s (its fields
 * are not const).  Main thread. */
void ctl_stats_fill(struct stats_snapshot *s, struct ctl_stats_parts *o,
		    Xfer__Ctl__StatsReply *r);

#endif /* XFERD_CTL_STATS_H */
