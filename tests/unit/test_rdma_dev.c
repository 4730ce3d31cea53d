/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdma_dev.c - the pure parts of RDMA NIC discovery
 * (daemon/transport/rdma_dev.c): IPv4-mapped GIDs, which GID of a RoCE port's
 * table becomes its rail (tables as rxe and mlx5 fill them), matching an
 * IPoIB hardware address to a port GID, MTU codes, pairing our rails
 * with a peer's (daemon/transport/rdma.c); and discovery on this
 * machine, whatever devices it has.  Real devices are the Soft-RoCE
 * guest's (tests/rdma/guest_rails.sh).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "transport/rdma.h"
#include "transport/rdma_dev.h"
#include "suites.h"

static struct rdma_gid gid(int index, enum rdma_gid_type type,
			   const char *text, const char *netdev)
{
	struct rdma_gid g = { .index = index, .type = type };

	ck_assert_msg(inet_pton(AF_INET6, text, g.raw) == 1, "'%s'", text);
	snprintf(g.netdev, sizeof(g.netdev), "%s", netdev);
	return g;
}

static struct netaddr addr(const char *s, const char *ifname)
{
	struct netaddr a;

	ck_assert_msg(netaddr_parse(s, &a) == 0, "'%s' not parsed", s);
	snprintf(a.ifname, sizeof(a.ifname), "%s", ifname);
	return a;
}

START_TEST(gid_ipv4)
{
	uint8_t raw[16], ip[4] = { 0 };

	ck_assert(inet_pton(AF_INET6, "::ffff:10.0.1.1", raw) == 1);
	ck_assert(rdma_dev_gid_ipv4(raw, ip));
	ck_assert_uint_eq(ip[0], 10);
	ck_assert_uint_eq(ip[1], 0);
	ck_assert_uint_eq(ip[2], 1);
	ck_assert_uint_eq(ip[3], 1);
	ck_assert(rdma_dev_gid_ipv4(raw, NULL));

	ck_assert(inet_pton(AF_INET6, "::ffff:255.255.255.255", raw) == 1);
	ck_assert(rdma_dev_gid_ipv4(raw, ip));
	ck_assert_uint_eq(ip[3], 255);

	/* Link-local (RoCE gid[0]), an InfiniBand port GID, the old
	 * IPv4-compatible form, and ffff in the wrong place: none. */
	static const char *const no[] = {
		"fe80::5054:ff:fe12:3456", "fe80::2:c903:a:bcde", "::10.0.1.1",
		"::ffff:0:10.0.1.1", "1::ffff:10.0.1.1", "2001:db8::1",
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		memset(ip, 0x55, sizeof(ip));
		ck_assert(inet_pton(AF_INET6, no[i], raw) == 1);
		ck_assert_msg(!rdma_dev_gid_ipv4(raw, ip), "%s", no[i]);
		ck_assert_uint_eq(ip[0], 0x55); /* left alone */
	}
}
END_TEST

/* rxe: RoCEv2 only; the link-local GID first, then the IPv4 one. */
START_TEST(pick_rxe)
{
	struct rdma_gid g[] = {
		gid(0, RDMA_GID_ROCE_V2, "fe80::5054:ff:fe12:3456", "veth0"),
		gid(1, RDMA_GID_ROCE_V2, "::ffff:10.0.0.1", "veth0"),
	};
	struct netaddr local[] = {
		addr("127.0.0.1/8", "lo"),
		addr("10.0.0.2/24", "veth1"),
		addr("10.0.0.1/24", "veth0"),
	};
	size_t li = 99;

	ck_assert_int_eq(rdma_dev_pick_roce(g, 2, local, 3, &li), 1);
	ck_assert_uint_eq(li, 2);
	ck_assert_uint_eq(local[li].prefix_len, 24);
}
END_TEST

/* mlx5: each address twice, RoCEv1 before RoCEv2: GID[3] is the one. */
START_TEST(pick_mlx5)
{
	struct rdma_gid g[] = {
		gid(0, RDMA_GID_ROCE_V1, "fe80::ba59:9fff:fe01:203", "eth1"),
		gid(1, RDMA_GID_ROCE_V2, "fe80::ba59:9fff:fe01:203", "eth1"),
		gid(2, RDMA_GID_ROCE_V1, "::ffff:10.0.1.1", "eth1"),
		gid(3, RDMA_GID_ROCE_V2, "::ffff:10.0.1.1", "eth1"),
	};
	struct netaddr local[] = { addr("10.0.1.1/24", "eth1") };
	size_t li = 99;

	ck_assert_int_eq(rdma_dev_pick_roce(g, 4, local, 1, &li), 3);
	ck_assert_uint_eq(li, 0);
	/* RoCEv1 only: peers cannot route to it. */
	ck_assert_int_eq(rdma_dev_pick_roce(g, 3, local, 1, &li), -ENOENT);
	/* The address gone from the interface (or the interface down). */
	struct netaddr other[] = { addr("10.0.2.1/24", "eth2") };
	ck_assert_int_eq(rdma_dev_pick_roce(g, 4, other, 1, &li), -ENOENT);
	ck_assert_int_eq(rdma_dev_pick_roce(g, 4, local, 0, &li), -ENOENT);
	ck_assert_int_eq(rdma_dev_pick_roce(g, 0, local, 1, &li), -ENOENT);
}
END_TEST

START_TEST(pick_prefers_own_netdev)
{
	/* Two IPv4 GIDs; the first one's address sits on another
	 * interface, the second's on its own netdev. */
	struct rdma_gid g[] = {
		gid(1, RDMA_GID_ROCE_V2, "::ffff:10.0.2.1", "eth1"),
		gid(2, RDMA_GID_ROCE_V2, "::ffff:10.0.1.1", "eth1"),
	};
	struct netaddr local[] = {
		addr("10.0.2.1/24", "eth9"),
		addr("10.0.1.1/24", "eth1"),
	};
	size_t li = 99;

	ck_assert_int_eq(rdma_dev_pick_roce(g, 2, local, 2, &li), 1);
	ck_assert_uint_eq(li, 1);

	/* No netdev named by the kernel: the address alone decides. */
	struct rdma_gid anon[] = {
		gid(5, RDMA_GID_ROCE_V2, "::ffff:10.0.2.1", ""),
	};
	ck_assert_int_eq(rdma_dev_pick_roce(anon, 1, local, 2, &li), 0);
	ck_assert_uint_eq(li, 0);

	/* An IPv6 address with the same bytes is no match. */
	struct netaddr v6[] = { addr("::ffff:10.0.2.1/128", "eth1") };
	if (v6[0].family == AF_INET6)
		ck_assert_int_eq(rdma_dev_pick_roce(anon, 1, v6, 1, &li),
				 -ENOENT);
}
END_TEST

START_TEST(ipoib_hwaddr)
{
	uint8_t port_gid[16];
	const char *hw = "80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:"
			 "00:0a:bc:de\n";

	ck_assert(inet_pton(AF_INET6, "fe80::2:c903:a:bcde", port_gid) == 1);
	ck_assert(rdma_dev_ipoib_has_gid(hw, port_gid));
	/* Without the newline, another QP number, upper case. */
	ck_assert(rdma_dev_ipoib_has_gid("00:00:10:49:FE:80:00:00:00:00:00:00:"
					 "00:02:C9:03:00:0A:BC:DE", port_gid));
	/* The other port of the same HCA. */
	ck_assert(!rdma_dev_ipoib_has_gid("80:00:02:08:fe:80:00:00:00:00:00:"
					  "00:00:02:c9:03:00:0a:bc:df\n",
					  port_gid));
	/* An Ethernet MAC, a truncated address, junk after it, no
	 * separators, not hex. */
	static const char *const no[] = {
		"52:54:00:12:34:56\n",
		"80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc",
		"80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:de:00",
		"80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:dex",
		"80000208fe80000000000000000002c903000abcde",
		"80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:dg",
		"8:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:bc:de",
		"",
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		ck_assert_msg(!rdma_dev_ipoib_has_gid(no[i], port_gid), "'%s'",
			      no[i]);
}
END_TEST

START_TEST(mtu_bytes)
{
	ck_assert_uint_eq(rdma_dev_mtu_bytes(1), 256);
	ck_assert_uint_eq(rdma_dev_mtu_bytes(2), 512);
	ck_assert_uint_eq(rdma_dev_mtu_bytes(3), 1024);
	ck_assert_uint_eq(rdma_dev_mtu_bytes(4), 2048);
	ck_assert_uint_eq(rdma_dev_mtu_bytes(5), 4096);
	ck_assert_uint_eq(rdma_dev_mtu_bytes(0), 0);
	ck_assert_uint_eq(rdma_dev_mtu_bytes(6), 0);
	ck_assert_uint_eq(rdma_dev_mtu_bytes(-1), 0);
}
END_TEST

/* This machine, with or without devices: what open finds is what the
 * accessors give, and close undoes it (twice is harmless). */
START_TEST(discover_here)
{
	struct rdma_rail_info ri;
	int n = rdma_dev_open_all(NULL);

	ck_assert_int_ge(n, 0);
	ck_assert_int_eq(rdma_dev_rail_count(), n);
	ck_assert(n == 0 || rdma_dev_count() > 0);
	for (int i = 0; i < n; i++) {
		uint8_t ip[4];

		ck_assert_int_eq(rdma_dev_rail(i, &ri), 0);
		ck_assert(ri.dev[0] && ri.port >= 1 && ri.state && ri.netdev[0]);
		ck_assert_int_ge(ri.gid_index, 0);
		if (!strcmp(ri.link_layer, "Ethernet")) {
			ck_assert(rdma_dev_gid_ipv4(ri.gid, ip));
			ck_assert_int_eq(memcmp(ip, ri.addr.ip, 4), 0);
		}
	}
	ck_assert_int_eq(rdma_dev_rail(n, &ri), -ENOENT);
	ck_assert_int_eq(rdma_dev_rail(-1, &ri), -ENOENT);
	rdma_dev_close_all();
	ck_assert_int_eq(rdma_dev_count(), 0);
	ck_assert_int_eq(rdma_dev_rail_count(), 0);
	rdma_dev_close_all();
}
END_TEST

static struct rdma_rail_addr mine(const char *ip, bool ib)
{
	struct rdma_rail_addr r = { .infiniband = ib };

	ck_assert(netaddr_parse(ip, &r.addr) == 0);
	return r;
}

static struct rdma_peer_rail theirs(uint32_t index, const char *ip, bool ib)
{
	struct rdma_peer_rail r = { .index = index, .infiniband = ib };

	ck_assert(netaddr_parse(ip, &r.addr) == 0);
	return r;
}

/* Rails pair by subnet and link layer, each at most once. */
START_TEST(pair_by_subnet)
{
	const struct rdma_rail_addr m[] = {
		mine("10.0.1.1/24", false), mine("10.0.2.1/24", false),
		mine("10.0.3.1/24", false), mine("192.168.9.1/24", true),
	};
	const struct rdma_peer_rail t[] = {
		theirs(7, "10.0.2.9/24", false),   /* rail 1's subnet */
		theirs(8, "10.0.1.9/24", false),   /* rail 0's subnet */
		theirs(9, "10.0.1.10/24", false),  /* rail 0's again: unused */
		theirs(4, "10.0.3.9/24", true),    /* IB on a RoCE subnet */
		theirs(5, "192.168.9.2/24", true),
	};
	int local[RDMA_PAIR_MAX], peer[RDMA_PAIR_MAX];
	size_t n = rdma_pair_rails(m, 4, t, 5, local, peer, RDMA_PAIR_MAX);

	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(local[0], 0);
	ck_assert_int_eq(peer[0], 1);
	ck_assert_int_eq(local[1], 1);
	ck_assert_int_eq(peer[1], 0);
	ck_assert_int_eq(local[2], 3);
	ck_assert_int_eq(peer[2], 4);

	/* At most max pairs; none without a common subnet. */
	ck_assert_uint_eq(rdma_pair_rails(m, 4, t, 5, local, peer, 1), 1);
	const struct rdma_peer_rail far[] = { theirs(0, "10.9.9.9/24", false) };
	ck_assert_uint_eq(rdma_pair_rails(m, 4, far, 1, local, peer, 4), 0);
	ck_assert_uint_eq(rdma_pair_rails(m, 4, t, 0, local, peer, 4), 0);
}
END_TEST

Suite *rdma_dev_suite(void)
{
	Suite *s = suite_create("rdma_dev");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, gid_ipv4);
	tcase_add_test(tc, pick_rxe);
	tcase_add_test(tc, pick_mlx5);
	tcase_add_test(tc, pick_prefers_own_netdev);
	tcase_add_test(tc, ipoib_hwaddr);
	tcase_add_test(tc, mtu_bytes);
	tcase_add_test(tc, discover_here);
	tcase_add_test(tc, pair_by_subnet);
	suite_add_tcase(s, tc);
	return s;
}
