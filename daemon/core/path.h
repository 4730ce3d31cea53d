/* SPDX-License-Identifier: Apache-2.0 */
/*
 * path.h - which way a descriptor's bytes move, decided in one place.
 *
 * The executor (exec.c) gathers the facts of one descriptor - the kinds
 * of memory at both ends, whether the target is on another node and
 * what kind of memory its owner said it is, which engines this xferd
 * has, whether the RDMA transport can move it zero-copy right now or
 * through its staging buffers - and asks path_choose() for a route.  It
 * then runs that route and nothing else: no engine second-guesses the choice (a transport that loses the
 * ability to move an operation it took hands it back, and the executor
 * asks again with that fact changed).
 *
 * Whether and when a descriptor's notification goes out is the other
 * decision made here (notify_choose()), for the same reason.
 *
 * Pure functions of their arguments, inline below (they run for every
 * descriptor): tests/unit/test_path.c walks every combination.  Being
 * pure, they sit in core/ beside the transports' ops table
 * (core/mover.h), which names the routes.
 */
#ifndef XFERD_PATH_H
#define XFERD_PATH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/region_kind.h"
#include "xfer_ring.h"

struct xfer_sqe;

/* What is known of one descriptor when its route is chosen. */
struct path_facts {
	uint8_t opcode;           /* XFER_OP_WRITE, _READ or _NOTIFY */
	enum region_kind local;   /* the SQE's own region; 0 for NOTIFY */
	enum region_kind target;  /* the other end: a local kind or REMOTE */
	/* REMOTE: the owner's memory, as its token says (MEMFD, CMA, CUDA). */
	enum region_kind owner_mem;
	bool gpus;                /* this xferd drives GPUs */
	bool links;               /* this xferd may reach other nodes */
	/* RDMA can move it zero-copy now: the local memory is registered
	 * with the NICs (a memfd's MR, or GPU memory's dma-buf MR) and the
	 * owner granted its range (rkeys), on a rail pair to the owner. */
	bool rdma;
	/* RDMA can move it through this side's registered staging chunks:
	 * the local memory is not registered with the NICs (CMA, a memfd
	 * or GPU memory whose registration is not there) and, for GPU
	 * memory, those chunks are pinned for the GPUs too. */
	bool rdma_staged;
	/* REMOTE, owner_mem CUDA: the owner granted a registration of that
	 * GPU memory with its NICs (dma-buf), so one-sided RDMA reaches
	 * it; without one only the owner's own copies do (the link). */
	bool owner_dmabuf;
	/* REMOTE: RDMA can move it through the owner's landing chunks: the
	 * owner's NICs cannot reach its memory (another process's, GPU
	 * memory without a dma-buf grant), it lends registered staging
	 * chunks for it instead, and a rail pair and this side's staging
	 * chunks reach them. */
	bool rdma_owner_staged;
};

enum path_route {
	ROUTE_MEMCPY = 1,   /* same node: memcpy between xferd's mappings */
	ROUTE_CMA,          /* same node: process_vm_readv/writev */
	ROUTE_GPU,          /* same node: a copy on xferd's CUDA streams */
	ROUTE_GPU_STAGED,   /* same node, GPU memory and xfer_reg'd host
			     * memory: CMA and GPU copies meet in pinned
			     * staging chunks (local/gpu_staged.c) */
	ROUTE_RDMA,         /* other node: one-sided RDMA */
	ROUTE_RDMA_STAGED,  /* other node: one-sided RDMA from or into
			     * registered staging chunks, a CPU copy
			     * (host memory) or a GPU copy (GPU memory)
			     * on this side */
	ROUTE_RDMA_OWNER_STAGED, /* other node, memory the owner's NICs
			     * cannot reach: RDMA into or out of the
			     * owner's landing chunks, a copy on each
			     * side (transport/rdma_land.c) */
	ROUTE_LINK,         /* other node: streamed on the TCP link */
	ROUTE_LINK_STAGED,  /* other node, GPU memory at an end and no
			     * RDMA for it: through pinned staging chunks,
			     * then the TCP link */
	ROUTE_NOTSUP,       /* no engine moves these kinds: -ENOTSUP */
	ROUTE_UNREACHABLE,  /* another node, and no links: -EHOSTUNREACH */
};

static inline enum path_route path_choose(const struct path_facts *f);
const char *path_route_name(enum path_route route);

/*
 * Does the SQE ask for a notification of its target's owner?  Only the
 * last entry of a batch notifies (the whole batch's bytes then landed).
 */
static inline bool notify_wanted(const struct xfer_sqe *sqe);

enum notify_when {
	NOTIFY_NONE,        /* nobody is notified */
	NOTIFY_NOW,         /* the batch ran here: right after its CQE */
	NOTIFY_WITH_DATA,   /* on the op's own frame: the owner notifies after
			     * the data landed */
	NOTIFY_AFTER_BATCH, /* once the whole batch completed */
};

/*
 * When the notification of a batch's last SQE goes out.  remote: its
 * target is on another node; batch_pending: earlier entries of the
 * batch are still moving (or failed).  A read's notification always
 * waits for the batch: its bytes are still on the wire when the owner's
 * side has sent them; so does one behind other entries, whose frames may
 * still be queued behind this one.
 */
static inline enum notify_when notify_choose(const struct xfer_sqe *sqe,
					     bool remote, bool batch_pending);

/* --- the decisions, inline: they run for every descriptor --- */

static inline bool is_host(enum region_kind k)
{
	return k == REGION_MEMFD || k == REGION_CMA;
}

/* Both ends on this node. */
static inline enum path_route same_node(const struct path_facts *f)
{
	if (f->local == REGION_MEMFD && f->target == REGION_MEMFD)
		return ROUTE_MEMCPY;
	if (is_host(f->local) && is_host(f->target))
		return ROUTE_CMA;
	/* GPU memory at one end at least.  The copy engines reach GPU
	 * memory and host memory xferd has mapped and pinned (memfd); host
	 * memory of another process (CMA) they cannot reach: its bytes go
	 * through a pinned staging chunk, CMA on one side of it and a GPU
	 * copy on the other. */
	if (!f->gpus)
		return ROUTE_NOTSUP;
	if (f->local == REGION_CMA || f->target == REGION_CMA)
		return ROUTE_GPU_STAGED;
	return ROUTE_GPU;
}

/* The target is another xferd's region. */
static inline enum path_route other_node(const struct path_facts *f)
{
	if (!f->links)
		return ROUTE_UNREACHABLE;
	if (f->opcode == XFER_OP_NOTIFY)
		return ROUTE_LINK;
	/* GPU memory here needs GPUs here, whatever moves it. */
	if (f->local == REGION_CUDA && !f->gpus)
		return ROUTE_NOTSUP;
	/* The owner's GPU memory: one-sided RDMA cannot run an H2D copy on
	 * the owner's side, so without a dma-buf grant of it the owner
	 * stages it itself: into or out of its landing chunks over RDMA,
	 * else on the link. */
	if (f->owner_mem == REGION_CUDA && !f->owner_dmabuf)
		return f->rdma_owner_staged ? ROUTE_RDMA_OWNER_STAGED
					    : ROUTE_LINK_STAGED;
	/* RDMA first, for every kind of memory: zero-copy where both ends
	 * are registered with the NICs (GPU memory through its dma-buf),
	 * else through this side's registered staging chunks (a CPU copy
	 * of host memory, a GPU copy of GPU memory, into or out of them).
	 * GPU memory never goes over TCP where RDMA can carry it. */
	if (f->rdma)
		return ROUTE_RDMA;
	if (f->rdma_staged)
		return ROUTE_RDMA_STAGED;
	/* Memory the owner's NICs cannot reach (another process's): the
	 * owner stages it through chunks it lends. */
	if (f->rdma_owner_staged)
		return ROUTE_RDMA_OWNER_STAGED;
	/* No RDMA for it: GPU memory at either end goes through pinned
	 * staging chunks on the link (a D2H copy before it, an H2D copy
	 * after it).  The owner's side decides for its own memory: it
	 * stages when it has GPUs, else refuses (-ENOTSUP). */
	if (f->local == REGION_CUDA || f->owner_mem == REGION_CUDA)
		return ROUTE_LINK_STAGED;
	return ROUTE_LINK;
}

static inline enum path_route path_choose(const struct path_facts *f)
{
	return f->target == REGION_REMOTE ? other_node(f) : same_node(f);
}

static inline bool notify_wanted(const struct xfer_sqe *sqe)
{
	return !(sqe->flags & XFER_SQE_F_LINK) &&
	       (sqe->opcode == XFER_OP_NOTIFY ||
		(sqe->flags & XFER_SQE_F_NOTIFY));
}

static inline enum notify_when notify_choose(const struct xfer_sqe *sqe,
					     bool remote, bool batch_pending)
{
	if (!notify_wanted(sqe))
		return NOTIFY_NONE;
	if (!remote)
		return batch_pending ? NOTIFY_AFTER_BATCH : NOTIFY_NOW;
	if (batch_pending || sqe->opcode == XFER_OP_READ)
		return NOTIFY_AFTER_BATCH;
	return NOTIFY_WITH_DATA;
}

#endif /* XFERD_PATH_H */
