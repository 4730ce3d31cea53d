/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_affinity.c - GPU-NIC distances (daemon/nic/affinity.c) over a
 * sysfs snapshot this test writes into a temp dir: the directories and
 * relative links the kernel makes, for a 2-socket node with a PCIe
 * switch that holds a GPU and a NIC.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nic/affinity.h"
#include "suites.h"

static char root[64];

static void mkdirs(const char *path)
{
	char p[1024];

	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	mkdir(p, 0755);
}

/* A PCI function at devices/path on numa node, linked from bus/pci as
 * the kernel links it. */
static void pci_dev(const char *path, int numa)
{
	char d[512], f[1024], l[1024], t[1024];
	const char *bdf = strrchr(path, '/') + 1;

	snprintf(d, sizeof(d), "%s/sys/devices/%s", root, path);
	mkdirs(d);
	snprintf(f, sizeof(f), "%s/numa_node", d);
	FILE *fp = fopen(f, "w");
	ck_assert_ptr_nonnull(fp);
	fprintf(fp, "%d\n", numa);
	fclose(fp);
	snprintf(l, sizeof(l), "%s/sys/bus/pci/devices", root);
	mkdirs(l);
	snprintf(l, sizeof(l), "%s/sys/bus/pci/devices/%s", root, bdf);
	snprintf(t, sizeof(t), "../../../devices/%s", path);
	ck_assert_int_eq(symlink(t, l), 0);
}

/* An RDMA device on PCI function path: class/infiniband/DEV links to
 * devices/PATH/infiniband/DEV, whose device link is ../../../BDF. */
static void ib_dev(const char *dev, const char *path)
{
	char d[512], l[1024], t[1024];
	const char *bdf = strrchr(path, '/') + 1;

	snprintf(d, sizeof(d), "%s/sys/devices/%s/infiniband/%s", root, path,
		 dev);
	mkdirs(d);
	snprintf(l, sizeof(l), "%s/device", d);
	snprintf(t, sizeof(t), "../../../%s", bdf);
	ck_assert_int_eq(symlink(t, l), 0);
	snprintf(l, sizeof(l), "%s/sys/class/infiniband", root);
	mkdirs(l);
	snprintf(l, sizeof(l), "%s/sys/class/infiniband/%s", root, dev);
	snprintf(t, sizeof(t), "../../devices/%s/infiniband/%s", path, dev);
	ck_assert_int_eq(symlink(t, l), 0);
}

#define SW "pci0000:00/0000:00:01.0/0000:01:00.0"

static void snapshot(void)
{
	snprintf(root, sizeof(root), "/tmp/xferd-aff-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	/* GPU0 and mlx5_0 behind one switch; mlx5_1 on another root port
	 * of the same host bridge; mlx5_2 on another host bridge of node
	 * 0; mlx5_3 on node 1. */
	pci_dev(SW "/0000:02:00.0/0000:03:00.0", 0);           /* GPU0 */
	pci_dev(SW "/0000:02:01.0/0000:04:00.0", 0);
	ib_dev("mlx5_0", SW "/0000:02:01.0/0000:04:00.0");
	pci_dev("pci0000:00/0000:00:02.0/0000:05:00.0", 0);
	ib_dev("mlx5_1", "pci0000:00/0000:00:02.0/0000:05:00.0");
	pci_dev("pci0000:40/0000:40:01.0/0000:41:00.0", 0);
	ib_dev("mlx5_2", "pci0000:40/0000:40:01.0/0000:41:00.0");
	pci_dev("pci0000:80/0000:80:01.0/0000:81:00.0", 1);
	ib_dev("mlx5_3", "pci0000:80/0000:80:01.0/0000:81:00.0");
}

static void cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(distances_from_a_snapshot)
{
	static const char *const nics[] = { "mlx5_0", "mlx5_1", "mlx5_2",
					    "mlx5_3" };
	static const enum aff_distance want[] = { AFF_PIX, AFF_PHB, AFF_NODE,
						  AFF_SYS };
	struct pci_place gpu, nic;
	enum aff_distance dist[4];
	bool pick[4];

	snapshot();
	/* CUDA spells the bus id in upper case */
	ck_assert_int_eq(aff_pci_place(root, "0000:03:00.0", &gpu), 0);
	ck_assert_int_eq(aff_pci_place(root, "0000:03:00.0", &nic), 0);
	ck_assert_int_eq(aff_distance(&gpu, &nic), AFF_SAME);
	ck_assert_str_eq(gpu.bdf, "0000:03:00.0");
	ck_assert_int_eq(gpu.numa, 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(aff_ib_place(root, nics[i], &nic), 0);
		dist[i] = aff_distance(&gpu, &nic);
		ck_assert_msg(dist[i] == want[i], "%s: %s, expected %s",
			      nics[i], aff_distance_name(dist[i]),
			      aff_distance_name(want[i]));
		ck_assert_int_eq(aff_distance(&nic, &gpu), dist[i]);
	}
	ck_assert_int_eq(aff_ib_place(root, "mlx5_3", &nic), 0);
	ck_assert_int_eq(nic.numa, 1);
	ck_assert_str_eq(nic.bdf, "0000:81:00.0");
	/* the closest rail alone */
	ck_assert_uint_eq(aff_pick(dist, 4, pick), 1);
	ck_assert(pick[0] && !pick[1] && !pick[2] && !pick[3]);
	/* without it: the one on the same host bridge */
	ck_assert_uint_eq(aff_pick(dist + 1, 3, pick), 1);
	ck_assert(pick[0]);
	/* a device that is not there */
	ck_assert_int_lt(aff_ib_place(root, "mlx5_9", &nic), 0);
	ck_assert_int_lt(aff_pci_place(root, "0000:99:00.0", &nic), 0);
	cleanup();
}
END_TEST

START_TEST(rail_mask_of_a_gpu)
{
	static const char *const nics[] = { "mlx5_3", "mlx5_1", "mlx5_0",
					    "mlx5_9" };
	enum aff_distance dist[4];

	snapshot();
	/* the rail under the GPU's switch alone, wherever it is listed */
	ck_assert_uint_eq(aff_rail_mask(root, "0000:03:00.0", nics, 4, dist),
			  1u << 2);
	ck_assert_int_eq(dist[0], AFF_SYS);
	ck_assert_int_eq(dist[2], AFF_PIX);
	ck_assert_int_eq(dist[3], AFF_UNKNOWN);
	/* a GPU whose place is unknown: every rail */
	ck_assert_uint_eq(aff_rail_mask(root, NULL, nics, 4, dist), 0xfu);
	ck_assert_uint_eq(aff_rail_mask(root, "0000:99:00.0", nics, 4, dist),
			  0xfu);
	cleanup();
}
END_TEST

START_TEST(unknown_falls_back_to_every_rail)
{
	const enum aff_distance d[3] = { AFF_UNKNOWN, AFF_UNKNOWN,
					 AFF_UNKNOWN };
	const enum aff_distance tie[3] = { AFF_SYS, AFF_NODE, AFF_NODE };
	struct pci_place none = { .numa = -1 }, some = { .path = "x",
							  .numa = 0 };
	bool pick[3];

	ck_assert_uint_eq(aff_pick(d, 3, pick), 3);
	ck_assert_uint_eq(aff_pick(tie, 3, pick), 2);
	ck_assert(!pick[0] && pick[1] && pick[2]);
	ck_assert_int_eq(aff_distance(&none, &some), AFF_UNKNOWN);
	for (int i = AFF_SAME; i <= AFF_UNKNOWN; i++)
		ck_assert_str_ne(aff_distance_name((enum aff_distance)i), "?");
}
END_TEST

Suite *affinity_suite(void)
{
	Suite *s = suite_create("affinity");
	TCase *tc = tcase_create("affinity");

	tcase_add_test(tc, distances_from_a_snapshot);
	tcase_add_test(tc, unknown_falls_back_to_every_rail);
	tcase_add_test(tc, rail_mask_of_a_gpu);
	suite_add_tcase(s, tc);
	return s;
}
