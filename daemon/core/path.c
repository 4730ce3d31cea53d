/* SPDX-License-Identifier: Apache-2.0 */
/*
 * path.c - the names of the routes (path.h keeps the decisions inline:
 * they run for every descriptor).
 */
#include "core/path.h"
#include "xfer_ring.h"

const char *path_route_name(enum path_route route)
{
	switch (route) {
	case ROUTE_MEMCPY: return "memcpy";
	case ROUTE_CMA: return "cma";
	case ROUTE_GPU: return "gpu";
	case ROUTE_GPU_STAGED: return "gpu-staged";
	case ROUTE_RDMA: return "rdma";
	case ROUTE_RDMA_STAGED: return "rdma-staged";
	case ROUTE_RDMA_OWNER_STAGED: return "rdma-owner-staged";
	case ROUTE_LINK: return "link";
	case ROUTE_LINK_STAGED: return "link-staged";
	case ROUTE_NOTSUP: return "not supported";
	case ROUTE_UNREACHABLE: return "unreachable";
	}
	return "?";
}
