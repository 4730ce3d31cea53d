/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netaddr.c - this node's interface addresses, and which of a peer's
 * advertised addresses to connect to.
 *
 * A multi-rail mesh gives each pair of nodes its own subnet (A-B on
 * 10.0.1.0/24, B-C on 10.0.2.0/24, A-C on 10.0.3.0/24).  Connecting to a
 * peer's first address would send every link through whatever the routing
 * table says, often one rail or none; matching subnets picks the direct
 * link and the local NIC on it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "nic/netaddr.h"

static unsigned full_len(int family);
static size_t ip_bytes(int family);
static unsigned mask_prefix(const struct sockaddr *mask, int family);
static bool is_ipv6_link_local(const uint8_t ip[16]);
static bool family_present(const struct netaddr *list, size_t n, int family);
static bool all_loopback(const struct netaddr *list, size_t n);
static void network_of(const struct netaddr *a, struct netaddr *net);

static unsigned full_len(int family)
{
	return family == AF_INET ? 32 : family == AF_INET6 ? 128 : 0;
}

static size_t ip_bytes(int family)
{
	return family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
}

/* Leading one bits of a netmask.  A non-contiguous mask (never seen on a
 * real interface) counts up to its first zero: the subnet it describes
 * then is at most as wide as the mask's contiguous head. */
static unsigned mask_prefix(const struct sockaddr *mask, int family)
{
	const uint8_t *m;
	size_t n = ip_bytes(family);
	unsigned bits = 0;

	/* Some point-to-point interfaces report no netmask: treat the
	 * address as a host route. */
	if (!mask || mask->sa_family != family)
		return full_len(family);
	if (family == AF_INET) {
		const struct sockaddr_in *sin =
			(const struct sockaddr_in *)(const void *)mask;

		m = (const uint8_t *)&sin->sin_addr;
	} else {
		const struct sockaddr_in6 *sin6 =
			(const struct sockaddr_in6 *)(const void *)mask;

		m = sin6->sin6_addr.s6_addr;
	}
	for (size_t i = 0; i < n; i++) {
		if (m[i] == 0xff) {
			bits += 8;
			continue;
		}
		for (uint8_t b = m[i]; b & 0x80; b = (uint8_t)(b << 1))
			bits++;
		break;
	}
	return bits;
}

static bool is_ipv6_link_local(const uint8_t ip[16])
{
	return ip[0] == 0xfe && (ip[1] & 0xc0) == 0x80;
}

int netaddr_local(struct netaddr *out, size_t max, bool include_loopback)
{
	struct ifaddrs *ifs;
	size_t n = 0;

	if (getifaddrs(&ifs) < 0)
		return -errno;
	for (const struct ifaddrs *i = ifs; i && n < max; i = i->ifa_next) {
		struct netaddr a = { 0 };

		if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
			continue;
		if (i->ifa_addr->sa_family != AF_INET &&
		    i->ifa_addr->sa_family != AF_INET6)
			continue;
		if (netaddr_from_sockaddr(i->ifa_addr, &a, NULL) < 0)
			continue;
		/* A link-local address is valid only with its interface's
		 * scope id, which means nothing on the peer that would be
		 * told it; the same link always has a global or IPv4
		 * address xferd can use instead. */
		if (a.family == AF_INET6 && is_ipv6_link_local(a.ip))
			continue;
		/* By the address, not IFF_LOOPBACK: a routable service
		 * address put on lo is reachable from other nodes, and
		 * netaddr_choose judges loopback by the address too. */
		if (!include_loopback && netaddr_is_loopback(&a))
			continue;
		a.prefix_len = mask_prefix(i->ifa_netmask, a.family);
		snprintf(a.ifname, sizeof(a.ifname), "%s", i->ifa_name);
		out[n++] = a;
	}
	freeifaddrs(ifs);
	return (int)n;
}

bool netaddr_same_subnet(const struct netaddr *a, const struct netaddr *b)
{
	unsigned bits = a->prefix_len, whole = bits / 8, rest = bits % 8;

	if (a->family != b->family || a->prefix_len != b->prefix_len)
		return false;
	if (!full_len(a->family) || bits > full_len(a->family))
		return false;
	if (memcmp(a->ip, b->ip, whole) != 0)
		return false;
	if (rest) {
		uint8_t m = (uint8_t)(0xff << (8 - rest));

		if ((a->ip[whole] & m) != (b->ip[whole] & m))
			return false;
	}
	return true;
}

bool netaddr_is_loopback(const struct netaddr *a)
{
	static const uint8_t v6_loopback[16] = { [15] = 1 };

	if (a->family == AF_INET)
		return a->ip[0] == 127;
	if (a->family == AF_INET6)
		return memcmp(a->ip, v6_loopback, 16) == 0;
	return false;
}

static bool family_present(const struct netaddr *list, size_t n, int family)
{
	for (size_t i = 0; i < n; i++)
		if (list[i].family == family)
			return true;
	return false;
}

static bool all_loopback(const struct netaddr *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!netaddr_is_loopback(&list[i]))
			return false;
	return n > 0;
}

/* The address with its host bits cleared: 10.0.1.7/24 -> 10.0.1.0/24. */
static void network_of(const struct netaddr *a, struct netaddr *net)
{
	unsigned bits = a->prefix_len;

	*net = *a;
	for (size_t i = 0; i < ip_bytes(a->family); i++) {
		if (bits >= 8) {
			bits -= 8;
			continue;
		}
		net->ip[i] &= (uint8_t)(0xff << (8 - bits));
		bits = 0;
	}
}

/*
 * Loopback addresses name "this host", not a network, and every node has
 * 127.0.0.1: matched like subnets they would join two different nodes.
 * An xferd advertises a loopback address only when it listens on one
 * explicitly, so a peer that advertises nothing but loopback can only be
 * reached from its own host (two daemons of a test, say), and there a
 * local loopback address of the same family is the right match, whatever
 * the prefix lengths say.  A peer that also advertises other addresses is
 * matched through those only, and a loopback address is never a routed
 * fallback: from another node it reaches some other daemon, or nothing.
 */
int netaddr_choose(const struct netaddr *local, size_t nlocal,
		   const struct netaddr *peer, size_t npeer,
		   struct netaddr_choice *out)
{
	char net[INET6_ADDRSTRLEN + 4], via[INET6_ADDRSTRLEN];
	const char *reason;

	/* Peer order first: the peer lists its preferred rails first. */
	for (size_t p = 0; p < npeer; p++) {
		if (netaddr_is_loopback(&peer[p]))
			continue;
		for (size_t l = 0; l < nlocal; l++) {
			struct netaddr subnet;

			if (netaddr_is_loopback(&local[l]) ||
			    !netaddr_same_subnet(&peer[p], &local[l]))
				continue;
			network_of(&local[l], &subnet);
			netaddr_format(&subnet, true, net, sizeof(net));
			netaddr_format(&local[l], false, via, sizeof(via));
			*out = (struct netaddr_choice){ .peer = (int)p,
							.local = (int)l };
			if (local[l].ifname[0])
				snprintf(out->why, sizeof(out->why),
					 "subnet %s via %s (%s)", net,
					 local[l].ifname, via);
			else
				snprintf(out->why, sizeof(out->why),
					 "subnet %s via %s", net, via);
			return 0;
		}
	}

	if (all_loopback(peer, npeer)) {
		for (size_t p = 0; p < npeer; p++) {
			for (size_t l = 0; l < nlocal; l++) {
				if (!netaddr_is_loopback(&local[l]) ||
				    local[l].family != peer[p].family)
					continue;
				netaddr_format(&local[l], false, via,
					       sizeof(via));
				*out = (struct netaddr_choice){
					.peer = (int)p, .local = (int)l };
				snprintf(out->why, sizeof(out->why),
					 "loopback via %s (%s)",
					 local[l].ifname[0] ? local[l].ifname
							    : "lo",
					 via);
				return 0;
			}
		}
		reason = "peer advertises only loopback, none of ours";
		goto none;
	}

	for (size_t p = 0; p < npeer; p++) {
		if (netaddr_is_loopback(&peer[p]) ||
		    !family_present(local, nlocal, peer[p].family))
			continue;
		*out = (struct netaddr_choice){ .peer = (int)p, .local = -1 };
		snprintf(out->why, sizeof(out->why),
			 "no common subnet: routed");
		return 0;
	}
	reason = "no peer address of a family we have";
none:
	/* Filled all the same, for the caller's log line. */
	*out = (struct netaddr_choice){ .peer = -1, .local = -1 };
	snprintf(out->why, sizeof(out->why), "%s", reason);
	return -ENOENT;
}

int netaddr_parse(const char *s, struct netaddr *out)
{
	/* Room for the longest IPv6 text form plus "/128" and one byte
	 * more, so that anything longer is seen as too long. */
	char buf[INET6_ADDRSTRLEN + 5];
	struct netaddr a = { 0 };
	size_t len = strlen(s);
	char *slash;

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len + 1);
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';

	if (inet_pton(AF_INET, buf, a.ip) == 1)
		a.family = AF_INET;
	else if (inet_pton(AF_INET6, buf, a.ip) == 1)
		a.family = AF_INET6;
	else
		return -EINVAL;

	a.prefix_len = full_len(a.family);
	if (slash) {
		const char *d = slash + 1;
		unsigned v = 0;
		size_t nd = 0;

		/* Digits only: strtoul would take signs, spaces and hex. */
		for (; d[nd]; nd++) {
			if (d[nd] < '0' || d[nd] > '9' || nd >= 3)
				return -EINVAL;
			v = v * 10 + (unsigned)(d[nd] - '0');
		}
		if (nd == 0 || v > full_len(a.family))
			return -EINVAL;
		a.prefix_len = v;
	}
	*out = a;
	return 0;
}

void netaddr_format(const struct netaddr *a, bool with_prefix, char *buf,
		    size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (len == 0)
		return;
	if (!full_len(a->family) ||
	    !inet_ntop(a->family, a->ip, ip, sizeof(ip))) {
		snprintf(buf, len, "?");
		return;
	}
	if (with_prefix)
		snprintf(buf, len, "%s/%u", ip, a->prefix_len);
	else
		snprintf(buf, len, "%s", ip);
}

void netaddr_to_sockaddr(const struct netaddr *a, uint16_t port,
			 struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)(void *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, a->ip, 4);
		*len = sizeof(*sin);
	} else if (a->family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)(void *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, a->ip, 16);
		*len = sizeof(*sin6);
	} else {
		/* AF_UNSPEC and length 0: connect() refuses it cleanly. */
		ss->ss_family = AF_UNSPEC;
		*len = 0;
	}
}

int netaddr_from_sockaddr(const struct sockaddr *sa, struct netaddr *out,
			  uint16_t *port)
{
	struct netaddr a = { 0 };
	uint16_t p;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin =
			(const struct sockaddr_in *)(const void *)sa;

		a.family = AF_INET;
		memcpy(a.ip, &sin->sin_addr, 4);
		p = ntohs(sin->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 =
			(const struct sockaddr_in6 *)(const void *)sa;

		/* A dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d;
		 * as AF_INET they compare with the IPv4 addresses that peer
		 * advertised. */
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			a.family = AF_INET;
			memcpy(a.ip, &sin6->sin6_addr.s6_addr[12], 4);
		} else {
			a.family = AF_INET6;
			memcpy(a.ip, &sin6->sin6_addr, 16);
		}
		p = ntohs(sin6->sin6_port);
	} else {
		return -EAFNOSUPPORT;
	}
	a.prefix_len = full_len(a.family);
	*out = a;
	if (port)
		*port = p;
	return 0;
}
