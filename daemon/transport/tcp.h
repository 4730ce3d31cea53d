/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp.h - the TCP data path between xferds as a mover (core/mover.h):
 * descriptors streamed in frames on the link to the owner's xferd, as
 * the links' data client (transport/link_client.h).
 *
 * Large transfers go out in tcp_chunk frames, round-robin between
 * operations, so a 64 B write is not stuck behind a 256 MiB one.  Every
 * operation ends exactly once: acknowledged, failed by the peer, timed
 * out (its deadline), or failed when its link breaks (-ECONNRESET) or
 * cannot be made.
 *
 * Made in two steps, before the progress thread starts:
 *   tm = tcp_mover_create(regs, &cfg, &hooks);
 *   ls = linkset_create(base, &lcfg, &lhooks, &tcp_link_client, tm);
 *   tcp_mover_bind(tm, ls);
 * Its mover impl is tm; its destroy takes the linkset down first (the
 * links' last reports reach tm still whole), then itself.
 */
#ifndef XFERD_TCP_H
#define XFERD_TCP_H

#include <stdint.h>

#include "core/mover.h"
#include "core/traffic_class.h"
#include "transport/link.h"

struct regtab;
struct staging_pool;
struct gpu_copies;
struct tcp_mover;

struct tcp_cfg {
	uint32_t tcp_chunk;       /* bytes per data frame */
	/* D2H chunks out at once per staged send (tcp_stage_ahead): how
	 * far the GPU's copies run ahead of the socket. */
	uint32_t stage_ahead;
	/* Bulk bytes at most ahead of a latency frame (link_bulk_queue),
	 * the tenants (weights and caps), and where wait times go. */
	uint32_t bulk_queue;
	struct tenant_table tenants;
	struct class_stats *stats;
	/* Each tenant's byte-rate bucket over all links and movers
	 * ([TENANT_MAX], the executor's, which sets them from the
	 * tenants' caps; NULL: no caps). */
	struct rate_cap *caps;
	uint8_t self_id[LINK_ID_LEN];
};

extern const struct mover_ops tcp_mover_ops;
/* What the session calls of it (give with tm to linkset_create). */
extern const struct link_client_ops tcp_link_client;

/* Tokens of peers resolve in regs; operations end through hooks. */
struct tcp_mover *tcp_mover_create(struct regtab *regs,
				   const struct tcp_cfg *cfg,
				   const struct mover_hooks *hooks);
/* The linkset tm is the data client of; tm owns it from here. */
void tcp_mover_bind(struct tcp_mover *tm, struct linkset *ls);
/* GPU memory to and from other nodes moves through pool sp and the GPU
 * copy engine gpu (both outlive the mover); without them it is refused
 * (-ENOTSUP).  Before the progress thread starts. */
void tcp_set_staging(struct tcp_mover *tm, struct staging_pool *sp,
		     struct gpu_copies *gpu);
#endif /* XFERD_TCP_H */
