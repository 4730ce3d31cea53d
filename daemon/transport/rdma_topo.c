/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_topo.c - the GPU x rail table and the GPU-memory registration
 * probe (rdma_topo.h).  Main thread, once at start; sysfs reads and
 * CUDA device queries, no state of its own.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "transport/rdma_topo.h"

/* The peer-memory client of the NVIDIA driver (ibv_reg_mr on a device
 * pointer): nvidia_peermem, or the older nv_peer_mem. */
static bool peer_memory_loaded(const char *root)
{
	static const char *const mods[] = { "sys/module/nvidia_peermem",
					    "sys/module/nv_peer_mem" };
	char p[256];

	for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", root, mods[i]);
		if (access(p, F_OK) == 0)
			return true;
	}
	return false;
}

void rdma_topo_probe(struct rdma_topo *t, const char *root)
{
	const char *devs[RDMA_RAIL_MAX];
	int dmabuf = 0;

	memset(t, 0, sizeof(*t));
	t->ngpus = gpu_count();
	if (t->ngpus > GPU_MAX)
		t->ngpus = GPU_MAX;
	for (int i = 0; i < rdma_dev_rail_count() && t->nrails < RDMA_RAIL_MAX;
	     i++) {
		struct rdma_rail_info ri;
		if (rdma_dev_rail(i, &ri))
			continue;
		snprintf(t->rail[t->nrails], sizeof(t->rail[0]), "%s:%u",
			 ri.dev, ri.port);
		t->nrails++;
	}
	/* aff_ib_place wants the device name alone */
	char dev[RDMA_RAIL_MAX][RDMA_DEV_NAME_MAX + 8];
	for (int r = 0; r < t->nrails; r++) {
		snprintf(dev[r], sizeof(dev[r]), "%s", t->rail[r]);
		char *colon = strrchr(dev[r], ':');
		if (colon)
			*colon = '\0';
		devs[r] = dev[r];
	}
	for (int g = 0; g < t->ngpus; g++) {
		struct gpu_info gi;
		if (gpu_info(g, &gi) == 0) {
			snprintf(t->gpu_bdf[g], sizeof(t->gpu_bdf[g]), "%s",
				 gi.bdf);
			dmabuf += gi.dmabuf;
		}
		t->prefer[g] = aff_rail_mask(root,
					     t->gpu_bdf[g][0] ? t->gpu_bdf[g] :
								NULL,
					     devs, (size_t)t->nrails, t->dist[g]);
	}
	if (!t->ngpus || !t->nrails) {
		t->gpu_mem = "none";
		snprintf(t->why, sizeof(t->why), "%s",
			 !t->ngpus && !t->nrails ? "no GPUs and no RDMA rails" :
			 !t->ngpus		 ? "no GPUs" :
						   "no RDMA rails");
	} else if (dmabuf) {
		t->gpu_mem = "dma-buf";
		snprintf(t->why, sizeof(t->why),
			 "%d of %d GPUs export dma-buf; the NIC driver is "
			 "tried at each registration (else peer memory, "
			 "else staged)", dmabuf, t->ngpus);
	} else if (peer_memory_loaded(root)) {
		t->gpu_mem = "peer-memory";
		snprintf(t->why, sizeof(t->why),
			 "no GPU exports dma-buf; nvidia_peermem is loaded");
	} else {
		t->gpu_mem = "none";
		snprintf(t->why, sizeof(t->why),
			 "no GPU exports dma-buf and no peer-memory module: "
			 "GPU memory goes staged");
	}
}

uint32_t rdma_topo_prefer(const struct rdma_topo *t, int dev)
{
	if (!t || dev < 0 || dev >= t->ngpus || !t->prefer[dev])
		return ~0u;
	return t->prefer[dev];
}
