/* SPDX-License-Identifier: Apache-2.0 */
/*
 * affinity.c - GPU-NIC distance on the PCIe tree from sysfs
 * (affinity.h).  Any thread; no state, no lock.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nic/affinity.h"

/* The path of link's target below root's sys/devices/.  sysfs links
 * are relative (../../../devices/..., or ../../../0000:17:00.0 beside
 * the device), so a snapshot of them resolves inside its own root. */
static int place_path(const char *root, const char *link, char *out,
		      size_t len)
{
	char real[PATH_MAX], top[PATH_MAX], base[PATH_MAX];

	snprintf(base, sizeof(base), "%s/sys/devices", root);
	if (!realpath(base, top) || !realpath(link, real))
		return -errno;
	size_t n = strlen(top);
	if (strncmp(real, top, n) || real[n] != '/')
		return -ENOENT;
	if (strlen(real + n + 1) >= len)
		return -ENAMETOOLONG;
	strcpy(out, real + n + 1);
	return 0;
}

static int read_numa(const char *root, const char *path)
{
	char f[PATH_MAX];
	int node = -1;
	FILE *fp;

	snprintf(f, sizeof(f), "%s/sys/devices/%s/numa_node", root, path);
	if (!(fp = fopen(f, "r")))
		return -1;
	if (fscanf(fp, "%d", &node) != 1)
		node = -1;
	fclose(fp);
	return node;
}

/* The last component of path. */
static const char *leaf(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static int fill(const char *root, const char *link, struct pci_place *out)
{
	int err = place_path(root, link, out->path, sizeof(out->path));

	if (err)
		return err;
	const char *bdf = leaf(out->path);
	if (strlen(bdf) >= sizeof(out->bdf))
		return -ENAMETOOLONG;
	memcpy(out->bdf, bdf, strlen(bdf) + 1);
	out->numa = read_numa(root, out->path);
	return 0;
}

int aff_pci_place(const char *root, const char *bdf, struct pci_place *out)
{
	char lower[16], link[PATH_MAX];
	size_t i;

	for (i = 0; bdf[i] && i < sizeof(lower) - 1; i++)
		lower[i] = (char)tolower((unsigned char)bdf[i]);
	lower[i] = '\0';
	snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/%s", root, lower);
	return fill(root, link, out);
}

int aff_ib_place(const char *root, const char *dev, struct pci_place *out)
{
	char link[PATH_MAX];

	snprintf(link, sizeof(link), "%s/sys/class/infiniband/%s/device", root,
		 dev);
	return fill(root, link, out);
}

/* How many leading path components a and b share. */
static int common_depth(const char *a, const char *b)
{
	int depth = 0;

	for (;;) {
		size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
		if (la != lb || la == 0 || strncmp(a, b, la))
			return depth;
		depth++;
		if (!a[la] || !b[lb])
			return depth;
		a += la + 1;
		b += lb + 1;
	}
}

enum aff_distance aff_distance(const struct pci_place *a,
			       const struct pci_place *b)
{
	if (!a->path[0] || !b->path[0])
		return AFF_UNKNOWN;
	if (!strcmp(a->path, b->path))
		return AFF_SAME;
	/* Component 1 is the host bridge (pci0000:16), 2 a root port:
	 * below one root port both sit behind its switch. */
	int d = common_depth(a->path, b->path);
	if (d >= 2)
		return AFF_PIX;
	if (d >= 1)
		return AFF_PHB;
	if (a->numa >= 0 && b->numa >= 0 && a->numa != b->numa)
		return AFF_SYS;
	return AFF_NODE;
}

const char *aff_distance_name(enum aff_distance d)
{
	switch (d) {
	case AFF_SAME: return "same";
	case AFF_PIX: return "pix";
	case AFF_PHB: return "phb";
	case AFF_NODE: return "node";
	case AFF_SYS: return "sys";
	case AFF_UNKNOWN: return "unknown";
	}
	return "?";
}

size_t aff_pick(const enum aff_distance *dist, size_t n, bool *pick)
{
	enum aff_distance best = AFF_UNKNOWN;
	size_t count = 0;

	for (size_t i = 0; i < n; i++)
		if (dist[i] < best)
			best = dist[i];
	for (size_t i = 0; i < n; i++) {
		pick[i] = dist[i] == best;
		count += pick[i];
	}
	return count;
}

uint32_t aff_rail_mask(const char *root, const char *gpu_bdf,
		       const char *const *ib_devs, size_t n,
		       enum aff_distance *dist)
{
	struct pci_place gpu, nic;
	bool pick[32];
	uint32_t mask = 0;
	bool gpu_known = gpu_bdf && !aff_pci_place(root, gpu_bdf, &gpu);

	if (n > 32)
		n = 32;
	for (size_t i = 0; i < n; i++)
		dist[i] = gpu_known && !aff_ib_place(root, ib_devs[i], &nic) ?
				  aff_distance(&gpu, &nic) : AFF_UNKNOWN;
	aff_pick(dist, n, pick);
	for (size_t i = 0; i < n; i++)
		if (pick[i])
			mask |= 1u << i;
	return mask;
}
