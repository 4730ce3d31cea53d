/* SPDX-License-Identifier: Apache-2.0 */
/*
 * affinity.h - how far a GPU is from a NIC on the PCIe tree, read from
 * sysfs, so that a GPU region's transfers can use the rails closest to
 * its GPU (DESIGN.md section 4.2; UCCL picks by PCIe distance).
 *
 * A device's place is its PCI function's path under /sys/devices (the
 * target of /sys/bus/pci/devices/BDF: host bridge, then every bridge and
 * switch port down to it) and its NUMA node (numa_node, -1 unknown).
 * The distance of two places, as nvidia-smi topo names the levels:
 *
 *   AFF_SAME   one PCI function
 *   AFF_PIX    below a common PCIe bridge or switch (one PCIe hop apart)
 *   AFF_PHB    below one host bridge (root complex), no common switch
 *   AFF_NODE   other host bridges of one NUMA node (or a node unknown)
 *   AFF_SYS    other NUMA nodes: across the CPU interconnect
 *
 * Every read goes through a root directory ("/" in use), so that a test
 * points the code at a snapshot of sysfs it wrote into a temp dir.
 * Pure file reads, any thread, no state.
 */
#ifndef XFERD_AFFINITY_H
#define XFERD_AFFINITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum aff_distance {
	AFF_SAME = 0,
	AFF_PIX,
	AFF_PHB,
	AFF_NODE,
	AFF_SYS,
	AFF_UNKNOWN,        /* a place could not be read */
};

struct pci_place {
	char bdf[16];       /* 0000:17:00.0 */
	char path[512];     /* under devices/: pci0000:16/0000:16:02.0/... */
	int numa;           /* -1: unknown */
};

/* The place of PCI function bdf (case-insensitive, as the driver spells
 * it: CUDA says "0000:17:00.0" in upper case hex).  0 or -errno. */
int aff_pci_place(const char *root, const char *bdf, struct pci_place *out);
/* The place of RDMA device dev (class/infiniband/DEV/device). */
int aff_ib_place(const char *root, const char *dev, struct pci_place *out);
enum aff_distance aff_distance(const struct pci_place *a,
			       const struct pci_place *b);
const char *aff_distance_name(enum aff_distance d);
/*
 * Of n rails at dist[i] from a GPU, mark in pick[] those to use: the
 * closest ones; all of them when none is known (AFF_UNKNOWN everywhere).
 * Returns how many were picked.
 */
size_t aff_pick(const enum aff_distance *dist, size_t n, bool *pick);
/*
 * The rails to prefer for the GPU at gpu_bdf (NULL: unknown) among the
 * RDMA devices ib_devs[0..n) (n <= 32): bit i set for each rail aff_pick
 * keeps; dist[i] gets rail i's distance.  Every rail when no distance
 * is known.
 */
uint32_t aff_rail_mask(const char *root, const char *gpu_bdf,
		       const char *const *ib_devs, size_t n,
		       enum aff_distance *dist);

#endif /* XFERD_AFFINITY_H */
