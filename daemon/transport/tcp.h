/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp.h - the TCP data path between xferds as a transport
 * (transport.h): descriptors streamed in frames on the link to the
 * owner's xferd (link.h), its impl the linkset.
 *
 * Large transfers go out in tcp_chunk frames, round-robin between
 * operations, so a 64 B write is not stuck behind a 256 MiB one.  Every
 * operation ends exactly once: acknowledged, failed by the peer, timed
 * out (its deadline), or failed when its link breaks (-ECONNRESET) or
 * cannot be made.
 */
#ifndef XFERD_TCP_H
#define XFERD_TCP_H

#include "transport/link.h"
#include "core/mover.h"

extern const struct mover_ops tcp_mover_ops;

struct staging_pool;
struct gpu_copies;
/* GPU memory to and from other nodes moves through pool sp and the GPU
 * copy engine gpu (both outlive the linkset); without them it is
 * refused (-ENOTSUP).  Before the progress thread starts. */
void tcp_set_staging(struct linkset *ls, struct staging_pool *sp,
		     struct gpu_copies *gpu);

#endif /* XFERD_TCP_H */
