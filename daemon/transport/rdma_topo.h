/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_topo.h - what this node can do with GPU memory over its RDMA
 * rails, found once when the RDMA transport starts: whether a GPU's
 * memory can be registered with the NICs (dma-buf, the peer-memory
 * module, or neither, and why), each GPU's PCIe distance to each rail
 * and the rails aff_pick keeps for it (xferctl rails and gpus show them;
 * rdma_post.c's rail choice prefers them for a GPU region).
 *
 * Written by rdma_topo_probe (main thread, at start), read-only after.
 */
#ifndef XFERD_RDMA_TOPO_H
#define XFERD_RDMA_TOPO_H

#include <stdint.h>

#include "gpu/gpu.h"
#include "nic/affinity.h"
#include "transport/rdma_dev.h"

struct rdma_topo {
	int ngpus, nrails;
	char gpu_bdf[GPU_MAX][16];              /* "" when CUDA did not say */
	char rail[RDMA_RAIL_MAX][RDMA_DEV_NAME_MAX + 8];   /* "mlx5_0:1" */
	enum aff_distance dist[GPU_MAX][RDMA_RAIL_MAX];
	uint32_t prefer[GPU_MAX];               /* bit i: rail i */
	const char *gpu_mem;  /* "dma-buf", "peer-memory", "none" */
	char why[160];        /* what the probe saw */
};

/* Probe the node under root ("/" in use). */
void rdma_topo_probe(struct rdma_topo *t, const char *root);
/* The rails to prefer for a GPU (index dev), every one when unknown. */
uint32_t rdma_topo_prefer(const struct rdma_topo *t, int dev);

#endif /* XFERD_RDMA_TOPO_H */
