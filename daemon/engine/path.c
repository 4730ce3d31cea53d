/*
 * path.c - the route of one descriptor and when its notification goes
 * (path.h).  No state: everything it knows comes in its arguments.
 */
#include "engine/path.h"
#include "xfer_ring.h"

static bool is_host(enum region_kind k)
{
	return k == REGION_MEMFD || k == REGION_CMA;
}

/* Both ends on this node. */
static enum path_route same_node(const struct path_facts *f)
{
	if (f->local == REGION_MEMFD && f->target == REGION_MEMFD)
		return ROUTE_MEMCPY;
	if (is_host(f->local) && is_host(f->target))
		return ROUTE_CMA;
	/* GPU memory at one end at least.  The copy engines reach GPU
	 * memory and host memory xferd has mapped and pinned (memfd); host
	 * memory of another process (CMA) they cannot reach. */
	if (!f->gpus || f->local == REGION_CMA || f->target == REGION_CMA)
		return ROUTE_NOTSUP;
	return ROUTE_GPU;
}

/* The target is another xferd's region. */
static enum path_route other_node(const struct path_facts *f)
{
	if (!f->links)
		return ROUTE_UNREACHABLE;
	if (f->opcode == XFER_OP_NOTIFY)
		return ROUTE_LINK;
	/* GPU memory at either end goes through pinned staging chunks (a
	 * D2H copy before the link, an H2D copy after it); that needs GPUs
	 * here.  The owner's side decides for its own memory: it stages
	 * when it has GPUs, else refuses that descriptor (-ENOTSUP). */
	if (f->local == REGION_CUDA)
		return f->gpus ? ROUTE_LINK_STAGED : ROUTE_NOTSUP;
	if (f->owner_mem == REGION_CUDA)
		return ROUTE_LINK_STAGED;
	if (f->rdma)
		return ROUTE_RDMA;
	/* Host memory RDMA cannot reach in place still goes by RDMA, a copy
	 * through its registered buffers on this side: cheaper than the
	 * link's copies on both. */
	return f->rdma_staged ? ROUTE_RDMA_STAGED : ROUTE_LINK;
}

enum path_route path_choose(const struct path_facts *f)
{
	return f->target == REGION_REMOTE ? other_node(f) : same_node(f);
}

const char *path_route_name(enum path_route route)
{
	switch (route) {
	case ROUTE_MEMCPY: return "memcpy";
	case ROUTE_CMA: return "cma";
	case ROUTE_GPU: return "gpu";
	case ROUTE_RDMA: return "rdma";
	case ROUTE_RDMA_STAGED: return "rdma-staged";
	case ROUTE_LINK: return "link";
	case ROUTE_LINK_STAGED: return "link-staged";
	case ROUTE_NOTSUP: return "not supported";
	case ROUTE_UNREACHABLE: return "unreachable";
	}
	return "?";
}

bool notify_wanted(const struct xfer_sqe *sqe)
{
	return !(sqe->flags & XFER_SQE_F_LINK) &&
	       (sqe->opcode == XFER_OP_NOTIFY ||
		(sqe->flags & XFER_SQE_F_NOTIFY));
}

enum notify_when notify_choose(const struct xfer_sqe *sqe, bool remote,
			       bool batch_pending)
{
	if (!notify_wanted(sqe))
		return NOTIFY_NONE;
	if (!remote)
		return batch_pending ? NOTIFY_AFTER_BATCH : NOTIFY_NOW;
	if (batch_pending || sqe->opcode == XFER_OP_READ)
		return NOTIFY_AFTER_BATCH;
	return NOTIFY_WITH_DATA;
}
