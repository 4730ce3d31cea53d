/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_netaddr.c - addresses and rail choice (daemon/nic/netaddr.c): subnet
 * comparison at every kind of prefix, choosing a peer address in a
 * triangle mesh where each pair of nodes shares its own subnet, the
 * routed fallback, the loopback rules, parsing and formatting, socket
 * address conversions, and this machine's own interface list.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/un.h>

#include "nic/netaddr.h"
#include "suites.h"

/* A parsed address that must be valid, on interface `ifname` ("" for
 * a peer's). */
static struct netaddr addr(const char *s, const char *ifname)
{
	struct netaddr a;

	ck_assert_msg(netaddr_parse(s, &a) == 0, "'%s' not parsed", s);
	snprintf(a.ifname, sizeof(a.ifname), "%s", ifname);
	return a;
}

static bool same(const char *a, const char *b)
{
	struct netaddr x = addr(a, ""), y = addr(b, "");
	bool r = netaddr_same_subnet(&x, &y);

	/* The relation is symmetric whatever the answer. */
	ck_assert_msg(r == netaddr_same_subnet(&y, &x),
		      "same_subnet(%s, %s) not symmetric", a, b);
	return r;
}

START_TEST(same_subnet_ipv4)
{
	ck_assert(same("10.0.1.1/24", "10.0.1.1/24"));
	ck_assert(same("10.0.1.1/24", "10.0.1.254/24"));
	ck_assert(same("10.0.1.1/24", "10.0.1.0/24"));
	ck_assert(!same("10.0.1.1/24", "10.0.2.1/24"));
	ck_assert(!same("10.0.1.1/24", "11.0.1.1/24"));

	/* Prefixes off a byte boundary. */
	ck_assert(same("10.0.2.1/23", "10.0.3.200/23"));
	ck_assert(!same("10.0.1.1/23", "10.0.2.1/23"));
	ck_assert(same("192.168.1.1/25", "192.168.1.127/25"));
	ck_assert(!same("192.168.1.1/25", "192.168.1.128/25"));
	ck_assert(same("172.16.0.1/12", "172.31.255.255/12"));
	ck_assert(!same("172.16.0.1/12", "172.32.0.1/12"));

	/* /0: everything of the family is one subnet. */
	ck_assert(same("1.2.3.4/0", "200.100.50.25/0"));
	/* /32: only the address itself. */
	ck_assert(same("10.0.0.1/32", "10.0.0.1/32"));
	ck_assert(!same("10.0.0.1/32", "10.0.0.2/32"));
	ck_assert(same("10.0.0.1", "10.0.0.1")); /* no suffix = /32 */
	ck_assert(!same("10.0.0.1", "10.0.0.3"));
	/* /31 (point-to-point links). */
	ck_assert(same("10.9.9.0/31", "10.9.9.1/31"));
	ck_assert(!same("10.9.9.1/31", "10.9.9.2/31"));
}
END_TEST

START_TEST(same_subnet_ipv6)
{
	ck_assert(same("2001:db8:1::1/64", "2001:db8:1::ffff/64"));
	ck_assert(same("2001:db8:1::1/64", "2001:db8:1:0:ffff:ffff:ffff:ffff/64"));
	ck_assert(!same("2001:db8:1::1/64", "2001:db8:2::1/64"));
	ck_assert(!same("2001:db8:1::1/64", "2001:db8:1:1::1/64"));
	ck_assert(same("2001:db8::1/0", "fd00::1/0"));
	ck_assert(same("2001:db8::1/128", "2001:db8::1/128"));
	ck_assert(!same("2001:db8::1/128", "2001:db8::2/128"));
	ck_assert(same("2001:db8:ab00::1/40", "2001:db8:abff::1/40"));
	ck_assert(!same("2001:db8:ab00::1/41", "2001:db8:abff::1/41"));
	ck_assert(same("2001:db8:12::1/47", "2001:db8:13::1/47"));
	ck_assert(!same("2001:db8:12::1/48", "2001:db8:13::1/48"));
}
END_TEST

START_TEST(same_subnet_mismatch)
{
	/* Different prefix lengths never match, even when one contains
	 * the other: the two ends of a link configure the same mask. */
	ck_assert(!same("10.0.1.1/24", "10.0.1.2/25"));
	ck_assert(!same("10.0.1.1/16", "10.0.1.1/24"));
	ck_assert(!same("10.0.1.1/32", "10.0.1.1/24"));
	ck_assert(!same("2001:db8::1/64", "2001:db8::1/48"));
	/* Different families never match, not even at /0, nor an IPv4
	 * address and its mapped IPv6 form. */
	ck_assert(!same("10.0.0.1/0", "::/0"));
	ck_assert(!same("0.0.0.0/0", "::/0"));
	ck_assert(!same("10.0.0.1", "::ffff:10.0.0.1"));
	ck_assert(!same("10.0.0.1/8", "a00::/8"));
}
END_TEST

START_TEST(is_loopback)
{
	const char *yes[] = { "127.0.0.1", "127.0.0.1/8", "127.1.2.3", "::1",
			      "::1/128" };
	const char *no[] = { "10.0.0.1", "128.0.0.1", "126.255.255.255",
			     "0.0.0.0", "::", "::2", "fe80::1",
			     "2001:db8::1" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		struct netaddr a = addr(yes[i], "");

		ck_assert_msg(netaddr_is_loopback(&a), "%s", yes[i]);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		struct netaddr a = addr(no[i], "");

		ck_assert_msg(!netaddr_is_loopback(&a), "%s", no[i]);
	}
}
END_TEST

/* The seed's triangle: each pair of nodes shares one /24. */
static struct netaddr node_a[2], node_b[2], node_c[2];

static void mesh_setup(void)
{
	node_a[0] = addr("10.0.1.1/24", "veth1");
	node_a[1] = addr("10.0.3.1/24", "veth3");
	node_b[0] = addr("10.0.1.2/24", "veth1");
	node_b[1] = addr("10.0.2.1/24", "veth2");
	node_c[0] = addr("10.0.2.2/24", "veth2");
	node_c[1] = addr("10.0.3.2/24", "veth3");
}

/* Choose from `local` to `peer`, expect a match (local >= 0) or a
 * routed choice (local == -1), and return the why. */
static const char *choose(const struct netaddr *local, size_t nlocal,
			  const struct netaddr *peer, size_t npeer,
			  int want_peer, int want_local)
{
	static struct netaddr_choice c;

	memset(&c, 0xa5, sizeof(c));
	ck_assert_int_eq(netaddr_choose(local, nlocal, peer, npeer, &c), 0);
	ck_assert_int_eq(c.peer, want_peer);
	ck_assert_int_eq(c.local, want_local);
	ck_assert(memchr(c.why, '\0', sizeof(c.why)) != NULL);
	return c.why;
}

static void choose_none(const struct netaddr *local, size_t nlocal,
			const struct netaddr *peer, size_t npeer)
{
	struct netaddr_choice c;

	ck_assert_int_eq(netaddr_choose(local, nlocal, peer, npeer, &c),
			 -ENOENT);
}

START_TEST(choose_triangle)
{
	char ip[INET6_ADDRSTRLEN];

	/* A -> B: B's 10.0.1.2, leaving from A's 10.0.1.1. */
	ck_assert_str_eq(choose(node_a, 2, node_b, 2, 0, 0),
			 "subnet 10.0.1.0/24 via veth1 (10.0.1.1)");
	netaddr_format(&node_b[0], false, ip, sizeof(ip));
	ck_assert_str_eq(ip, "10.0.1.2");

	/* A -> C: C's second address 10.0.3.2, from A's 10.0.3.1. */
	ck_assert_str_eq(choose(node_a, 2, node_c, 2, 1, 1),
			 "subnet 10.0.3.0/24 via veth3 (10.0.3.1)");
	netaddr_format(&node_c[1], false, ip, sizeof(ip));
	ck_assert_str_eq(ip, "10.0.3.2");

	/* B -> C: C's 10.0.2.2, from B's 10.0.2.1. */
	ck_assert_str_eq(choose(node_b, 2, node_c, 2, 0, 1),
			 "subnet 10.0.2.0/24 via veth2 (10.0.2.1)");

	/* And back the other way. */
	ck_assert_str_eq(choose(node_b, 2, node_a, 2, 0, 0),
			 "subnet 10.0.1.0/24 via veth1 (10.0.1.2)");
	ck_assert_str_eq(choose(node_c, 2, node_a, 2, 1, 1),
			 "subnet 10.0.3.0/24 via veth3 (10.0.3.2)");
	ck_assert_str_eq(choose(node_c, 2, node_b, 2, 1, 0),
			 "subnet 10.0.2.0/24 via veth2 (10.0.2.2)");
}
END_TEST

START_TEST(choose_order)
{
	/* Both of the peer's addresses share a subnet with us: the peer's
	 * order decides, not ours. */
	struct netaddr local[] = {
		addr("10.0.2.1/24", "eth2"),
		addr("10.0.1.1/24", "eth1"),
	};
	struct netaddr peer[] = {
		addr("10.0.1.9/24", ""),
		addr("10.0.2.9/24", ""),
	};
	ck_assert_str_eq(choose(local, 2, peer, 2, 0, 1),
			 "subnet 10.0.1.0/24 via eth1 (10.0.1.1)");

	/* Two of ours on the peer's subnet: the first of ours. */
	struct netaddr two[] = {
		addr("192.168.7.1/24", "eth0"),
		addr("10.0.1.1/24", "eth1"),
		addr("10.0.1.2/24", "eth2"),
	};
	struct netaddr p1[] = { addr("10.0.1.3/24", "") };
	choose(two, 3, p1, 1, 0, 1);

	/* A peer address earlier in its list that matches nothing is
	 * passed over for a later one that does. */
	struct netaddr p2[] = {
		addr("172.16.0.5/16", ""),
		addr("10.0.1.7/24", ""),
	};
	choose(two, 3, p2, 2, 1, 1);

	/* Without an interface name the why still names the subnet and
	 * the local address. */
	struct netaddr bare[] = { addr("10.0.1.1/24", "") };
	ck_assert_str_eq(choose(bare, 1, p2, 2, 1, 0),
			 "subnet 10.0.1.0/24 via 10.0.1.1");

	/* IPv6 rails match like IPv4 ones. */
	struct netaddr l6[] = {
		addr("10.0.1.1/24", "eth1"),
		addr("2001:db8:5::1/64", "eth5"),
	};
	struct netaddr p6[] = {
		addr("2001:db8:5::2/64", ""),
		addr("10.0.9.2/24", ""),
	};
	ck_assert_str_eq(choose(l6, 2, p6, 2, 0, 1),
			 "subnet 2001:db8:5::/64 via eth5 (2001:db8:5::1)");

	/* The same network under another prefix length is no match. */
	struct netaddr p25[] = { addr("10.0.1.9/25", "") };
	ck_assert_str_eq(choose(bare, 1, p25, 1, 0, -1),
			 "no common subnet: routed");
}
END_TEST

START_TEST(choose_routed)
{
	/* Nothing shared: the peer's first address of a family we have,
	 * left to the routing table. */
	struct netaddr peer[] = {
		addr("192.168.5.5/24", ""),
		addr("172.16.5.5/16", ""),
	};
	ck_assert_str_eq(choose(node_a, 2, peer, 2, 0, -1),
			 "no common subnet: routed");

	/* Families we lack are skipped. */
	struct netaddr mixed[] = {
		addr("2001:db8::5/64", ""),
		addr("192.168.5.5/24", ""),
	};
	ck_assert_str_eq(choose(node_a, 2, mixed, 2, 1, -1),
			 "no common subnet: routed");
	struct netaddr l6[] = { addr("2001:db8:1::1/64", "eth0") };
	choose(l6, 1, mixed, 2, 0, -1);

	/* Nothing of a family we have, or nothing at all. */
	struct netaddr only6[] = { addr("2001:db8::5/64", "") };
	choose_none(node_a, 2, only6, 1);
	choose_none(node_a, 2, peer, 0);
	choose_none(NULL, 0, peer, 2);
}
END_TEST

START_TEST(choose_loopback)
{
	struct netaddr lo[] = { addr("127.0.0.1/8", "lo") };
	struct netaddr lo6[] = { addr("::1/128", "lo") };
	struct netaddr peer_lo[] = { addr("127.0.0.1/8", "") };
	struct netaddr peer_lo32[] = { addr("127.0.0.1", "") };
	struct netaddr peer_lo6[] = { addr("::1", "") };

	/* Two xferds of one host that listen on 127.0.0.1 and advertise
	 * only that: the loopback match is right, whatever the prefix. */
	ck_assert_str_eq(choose(lo, 1, peer_lo, 1, 0, 0),
			 "loopback via lo (127.0.0.1)");
	choose(lo, 1, peer_lo32, 1, 0, 0);
	choose(lo6, 1, peer_lo6, 1, 0, 0);
	/* ... but not across families. */
	choose_none(lo, 1, peer_lo6, 1);

	/* A peer that advertises only loopback cannot be reached from
	 * a node without loopback in its list, routed or otherwise. */
	choose_none(node_a, 2, peer_lo, 1);

	/* Two different nodes that both listen on loopback and on their
	 * rails: the rail, even though loopback comes first. */
	struct netaddr local[] = {
		addr("127.0.0.1/8", "lo"),
		addr("10.0.1.1/24", "eth1"),
	};
	struct netaddr peer[] = {
		addr("127.0.0.1/8", ""),
		addr("10.0.1.2/24", ""),
	};
	ck_assert_str_eq(choose(local, 2, peer, 2, 1, 1),
			 "subnet 10.0.1.0/24 via eth1 (10.0.1.1)");

	/* ... and with no rail in common, routed to the peer's rail, never
	 * to its loopback (from here that is ourselves). */
	struct netaddr far[] = {
		addr("127.0.0.1/8", ""),
		addr("10.0.9.2/24", ""),
	};
	choose(local, 2, far, 2, 1, -1);

	/* Our loopback never matches a peer's rail, even under a prefix
	 * that would cover it. */
	struct netaddr wide_lo[] = { addr("127.0.0.1/0", "lo") };
	struct netaddr p0[] = { addr("10.0.0.1/0", "") };
	choose(wide_lo, 1, p0, 1, 0, -1);
	struct netaddr wide_lo6[] = { addr("::1/0", "lo") };
	struct netaddr p60[] = { addr("2001:db8::1/0", "") };
	choose(wide_lo6, 1, p60, 1, 0, -1);
	/* Nor the peer's loopback ours. */
	struct netaddr wide[] = { addr("10.0.0.1/0", "eth0") };
	struct netaddr p_lo0[] = {
		addr("127.0.0.1/0", ""),
		addr("10.9.9.9/24", ""),
	};
	choose(wide, 1, p_lo0, 2, 1, -1);
}
END_TEST

START_TEST(parse_format)
{
	static const struct {
		const char *in;
		int family;
		unsigned prefix;
		const char *out;  /* with the prefix */
	} good[] = {
		{ "10.1.2.3", AF_INET, 32, "10.1.2.3/32" },
		{ "10.1.2.3/24", AF_INET, 24, "10.1.2.3/24" },
		{ "0.0.0.0/0", AF_INET, 0, "0.0.0.0/0" },
		{ "255.255.255.255/32", AF_INET, 32, "255.255.255.255/32" },
		{ "192.168.0.1/9", AF_INET, 9, "192.168.0.1/9" },
		{ "fe80::1", AF_INET6, 128, "fe80::1/128" },
		{ "2001:db8::1/64", AF_INET6, 64, "2001:db8::1/64" },
		{ "2001:0DB8:0000:0000:0000:0000:0000:0001/48", AF_INET6, 48,
		  "2001:db8::1/48" },
		{ "::/0", AF_INET6, 0, "::/0" },
		{ "::1", AF_INET6, 128, "::1/128" },
		{ "::ffff:10.0.0.1/96", AF_INET6, 96, "::ffff:10.0.0.1/96" },
		{ "2001:db8::1/128", AF_INET6, 128, "2001:db8::1/128" },
		{ "10.1.2.3/08", AF_INET, 8, "10.1.2.3/8" },
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct netaddr a, b;
		char buf[64];

		memset(&a, 0xa5, sizeof(a));
		ck_assert_msg(netaddr_parse(good[i].in, &a) == 0, "%s",
			      good[i].in);
		ck_assert_int_eq(a.family, good[i].family);
		ck_assert_uint_eq(a.prefix_len, good[i].prefix);
		ck_assert_str_eq(a.ifname, "");
		if (a.family == AF_INET) {
			for (int j = 4; j < 16; j++)
				ck_assert_uint_eq(a.ip[j], 0);
		}
		netaddr_format(&a, true, buf, sizeof(buf));
		ck_assert_str_eq(buf, good[i].out);

		/* Round trip: the formatted text parses to the same. */
		ck_assert_int_eq(netaddr_parse(buf, &b), 0);
		ck_assert_int_eq(b.family, a.family);
		ck_assert_uint_eq(b.prefix_len, a.prefix_len);
		ck_assert_mem_eq(b.ip, a.ip, 16);

		/* Without the prefix: the address alone. */
		netaddr_format(&a, false, buf, sizeof(buf));
		ck_assert_ptr_null(strchr(buf, '/'));
		ck_assert_int_eq(strncmp(buf, good[i].out, strlen(buf)), 0);
		ck_assert_int_eq(good[i].out[strlen(buf)], '/');
	}

	struct netaddr a = addr("10.1.2.3", "");
	ck_assert_mem_eq(a.ip, ((const uint8_t[]){ 10, 1, 2, 3 }), 4);
	a = addr("2001:db8::1", "");
	ck_assert_mem_eq(a.ip, ((const uint8_t[]){ 0x20, 0x01, 0x0d, 0xb8,
			 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 }), 16);
}
END_TEST

START_TEST(parse_rejects)
{
	char longer[256];
	const char *bad[] = {
		"", "junk", "localhost", "10.1.2", "10.1.2.3.4", "10.1.2.256",
		"10.1.2.3/", "10.1.2.3/33", "10.1.2.3/100", "10.1.2.3/-1",
		"10.1.2.3/+8", "10.1.2.3/ 8", "10.1.2.3/8 ", "10.1.2.3/8x",
		"10.1.2.3/0x8", "10.1.2.3/24/8", "10.1.2.3/0008", " 10.1.2.3",
		"10.1.2.3 ", "/24", "2001:db8::1/129", "2001:db8::1/1280",
		"fe80::1%eth0", "1:2:3:4:5:6:7:8:9", "2001:db8:::1", "::g",
		"[::1]", "10.1.2.3:7474", longer,
	};

	memset(longer, '1', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct netaddr a, before;

		memset(&a, 0x5a, sizeof(a));
		before = a;
		ck_assert_msg(netaddr_parse(bad[i], &a) == -EINVAL,
			      "'%s' accepted", bad[i]);
		ck_assert_msg(memcmp(&a, &before, sizeof(a)) == 0,
			      "'%s' changed out", bad[i]);
	}
}
END_TEST

START_TEST(format_truncates)
{
	struct netaddr a = addr("2001:db8:1:2:3:4:5:6/64", "");
	char buf[8];

	memset(buf, 'x', sizeof(buf));
	netaddr_format(&a, true, buf, sizeof(buf));
	ck_assert_str_eq(buf, "2001:db");

	/* A zero-length buffer is left alone. */
	buf[0] = 'x';
	netaddr_format(&a, true, buf, 0);
	ck_assert_int_eq(buf[0], 'x');

	/* Not an address at all: still a string. */
	struct netaddr none = { .family = AF_UNIX };
	char out[64];
	netaddr_format(&none, true, out, sizeof(out));
	ck_assert_str_eq(out, "?");
}
END_TEST

START_TEST(sockaddr_ipv4)
{
	struct netaddr a = addr("10.0.3.2/24", "veth3"), b;
	struct sockaddr_storage ss;
	socklen_t len = 0;
	uint16_t port = 0;

	netaddr_to_sockaddr(&a, 7474, &ss, &len);
	ck_assert_uint_eq(len, sizeof(struct sockaddr_in));
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
	ck_assert_int_eq(sin->sin_family, AF_INET);
	ck_assert_uint_eq(sin->sin_port, htons(7474));
	ck_assert_uint_eq(sin->sin_addr.s_addr, inet_addr("10.0.3.2"));

	ck_assert_int_eq(netaddr_from_sockaddr((struct sockaddr *)&ss, &b,
					       &port), 0);
	ck_assert_uint_eq(port, 7474);
	ck_assert_int_eq(b.family, AF_INET);
	ck_assert_mem_eq(b.ip, a.ip, 16);
	/* A socket address carries no prefix or interface. */
	ck_assert_uint_eq(b.prefix_len, 32);
	ck_assert_str_eq(b.ifname, "");

	/* The port may be left out. */
	ck_assert_int_eq(netaddr_from_sockaddr((struct sockaddr *)&ss, &b,
					       NULL), 0);
}
END_TEST

START_TEST(sockaddr_ipv6)
{
	struct netaddr a = addr("2001:db8:5::2/64", ""), b;
	struct sockaddr_storage ss;
	socklen_t len = 0;
	uint16_t port = 0;

	netaddr_to_sockaddr(&a, 65535, &ss, &len);
	ck_assert_uint_eq(len, sizeof(struct sockaddr_in6));
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;
	ck_assert_int_eq(sin6->sin6_family, AF_INET6);
	ck_assert_uint_eq(sin6->sin6_port, htons(65535));
	ck_assert_mem_eq(sin6->sin6_addr.s6_addr, a.ip, 16);
	ck_assert_uint_eq(sin6->sin6_flowinfo, 0);
	ck_assert_uint_eq(sin6->sin6_scope_id, 0);

	ck_assert_int_eq(netaddr_from_sockaddr((struct sockaddr *)&ss, &b,
					       &port), 0);
	ck_assert_uint_eq(port, 65535);
	ck_assert_int_eq(b.family, AF_INET6);
	ck_assert_mem_eq(b.ip, a.ip, 16);
	ck_assert_uint_eq(b.prefix_len, 128);

	/* A dual-stack listener's view of an IPv4 peer comes back as the
	 * IPv4 address that peer advertised. */
	struct sockaddr_in6 mapped = {
		.sin6_family = AF_INET6,
		.sin6_port = htons(4242),
	};
	ck_assert_int_eq(inet_pton(AF_INET6, "::ffff:10.0.1.2",
				   &mapped.sin6_addr), 1);
	ck_assert_int_eq(netaddr_from_sockaddr((struct sockaddr *)&mapped, &b,
					       &port), 0);
	ck_assert_int_eq(b.family, AF_INET);
	ck_assert_uint_eq(b.prefix_len, 32);
	ck_assert_uint_eq(port, 4242);
	struct netaddr want = addr("10.0.1.2", "");
	ck_assert_mem_eq(b.ip, want.ip, 16);
}
END_TEST

START_TEST(sockaddr_other)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct netaddr b, before;
	uint16_t port = 99;

	memset(&b, 0x5a, sizeof(b));
	before = b;
	ck_assert_int_eq(netaddr_from_sockaddr((struct sockaddr *)&sun, &b,
					       &port), -EAFNOSUPPORT);
	ck_assert(memcmp(&b, &before, sizeof(b)) == 0);
	ck_assert_uint_eq(port, 99);

	/* Converting a netaddr that is no address yields nothing usable. */
	struct netaddr none = { .family = AF_UNSPEC };
	struct sockaddr_storage ss;
	socklen_t len = 99;
	netaddr_to_sockaddr(&none, 1, &ss, &len);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(ss.ss_family, AF_UNSPEC);
}
END_TEST

/* Whether "lo" is up, asked of the kernel another way than
 * getifaddrs: a fresh network namespace has it down. */
static bool lo_up(void)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool up;

	ck_assert_int_ge(fd, 0);
	up = ioctl(fd, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
	close(fd);
	return up;
}

static void check_list(const struct netaddr *a, int n)
{
	for (int i = 0; i < n; i++) {
		char s[64];

		netaddr_format(&a[i], true, s, sizeof(s));
		ck_assert_msg(a[i].family == AF_INET ||
			      a[i].family == AF_INET6, "%s: family", s);
		ck_assert_msg(a[i].prefix_len <=
			      (a[i].family == AF_INET ? 32u : 128u),
			      "%s: prefix", s);
		ck_assert_msg(a[i].ifname[0] != '\0', "%s: no ifname", s);
		ck_assert_msg(memchr(a[i].ifname, '\0', IF_NAMESIZE),
			      "%s: ifname unterminated", s);
		ck_assert_msg(!(a[i].family == AF_INET6 && a[i].ip[0] == 0xfe &&
				(a[i].ip[1] & 0xc0) == 0x80),
			      "%s: link-local", s);
	}
}

START_TEST(local_addresses)
{
	struct netaddr with[NETADDR_MAX], without[NETADDR_MAX], one[1];
	int nwith, nwithout, nlo = 0;

	nwith = netaddr_local(with, NETADDR_MAX, true);
	ck_assert_int_ge(nwith, 0);
	ck_assert_int_le(nwith, NETADDR_MAX);
	check_list(with, nwith);
	for (int i = 0; i < nwith; i++)
		nlo += netaddr_is_loopback(&with[i]);
	if (lo_up()) {
		ck_assert_int_ge(nlo, 1);
		/* The loopback address is on lo with its /8. */
		bool found = false;
		for (int i = 0; i < nwith; i++) {
			char s[64];

			netaddr_format(&with[i], true, s, sizeof(s));
			if (strcmp(s, "127.0.0.1/8") == 0) {
				ck_assert_str_eq(with[i].ifname, "lo");
				found = true;
			}
		}
		ck_assert(found);
	}

	nwithout = netaddr_local(without, NETADDR_MAX, false);
	ck_assert_int_ge(nwithout, 0);
	check_list(without, nwithout);
	for (int i = 0; i < nwithout; i++)
		ck_assert(!netaddr_is_loopback(&without[i]));
	if (nwith < NETADDR_MAX)
		ck_assert_int_eq(nwithout, nwith - nlo);

	/* The count is capped at max. */
	ck_assert_int_le(netaddr_local(one, 1, true), 1);
	ck_assert_int_eq(netaddr_local(NULL, 0, true), 0);
}
END_TEST

Suite *netaddr_suite(void)
{
	Suite *s = suite_create("netaddr");
	TCase *tc;

	tc = tcase_create("subnet");
	tcase_add_test(tc, same_subnet_ipv4);
	tcase_add_test(tc, same_subnet_ipv6);
	tcase_add_test(tc, same_subnet_mismatch);
	tcase_add_test(tc, is_loopback);
	suite_add_tcase(s, tc);

	tc = tcase_create("choose");
	tcase_add_checked_fixture(tc, mesh_setup, NULL);
	tcase_add_test(tc, choose_triangle);
	tcase_add_test(tc, choose_order);
	tcase_add_test(tc, choose_routed);
	tcase_add_test(tc, choose_loopback);
	suite_add_tcase(s, tc);

	tc = tcase_create("text");
	tcase_add_test(tc, parse_format);
	tcase_add_test(tc, parse_rejects);
	tcase_add_test(tc, format_truncates);
	suite_add_tcase(s, tc);

	tc = tcase_create("sockaddr");
	tcase_add_test(tc, sockaddr_ipv4);
	tcase_add_test(tc, sockaddr_ipv6);
	tcase_add_test(tc, sockaddr_other);
	tcase_add_test(tc, local_addresses);
	suite_add_tcase(s, tc);
	return s;
}
