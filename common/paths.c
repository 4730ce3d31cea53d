/* SPDX-License-Identifier: Apache-2.0 */
/*
 * paths.c - the names of the data paths: what a CQE's path field, the
 * benchmarks and xferctl's per-path counters print.
 */
#include "common/paths.h"
#include "xfer_ring.h"

static const char *const path_names[] = {
	[XFER_PATH_NONE] = "none",
	[XFER_PATH_MEMCPY] = "memcpy",
	[XFER_PATH_CMA] = "cma",
	[XFER_PATH_CUDA_IPC] = "cuda-ipc",
	[XFER_PATH_RDMA] = "rdma",
	[XFER_PATH_RDMA_STAGED] = "rdma-staged",
	[XFER_PATH_TCP] = "tcp",
	[XFER_PATH_TCP_STAGED] = "tcp-staged",
	[XFER_PATH_CUDA_STAGED] = "cuda-staged",
};
/* A new path gets its name here before it can be used. */
_Static_assert(sizeof(path_names) / sizeof(path_names[0]) == XFER_PATH__COUNT,
	       "every XFER_PATH_* has a name");

const char *path_name(unsigned path)
{
	if (path >= XFER_PATH__COUNT || !path_names[path])
		return "unknown";
	return path_names[path];
}
