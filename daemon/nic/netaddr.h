/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netaddr.h - this node's interface addresses and choosing which of a
 * peer's addresses to use.
 *
 * The rule (a multi-rail mesh where each pair of nodes may share a
 * different subnet): prefer a peer address on the same subnet as one of
 * our addresses, and leave from that local address; only if none matches,
 * take the peer's first address and let the routing table decide.
 */
#ifndef XFERD_NETADDR_H
#define XFERD_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <net/if.h>
#include <sys/socket.h>

#define NETADDR_MAX 16   /* addresses one xferd advertises */

struct netaddr {
	int family;              /* AF_INET or AF_INET6 */
	uint8_t ip[16];          /* network order; IPv4 in the first 4 */
	unsigned prefix_len;     /* 0-32 / 0-128 */
	char ifname[IF_NAMESIZE];
};

/*
 * This node's addresses on interfaces that are up: IPv4 and (global)
 * IPv6, loopback only if include_loopback.  Returns the count (at most
 * max) or -errno.
 */
int netaddr_local(struct netaddr *out, size_t max, bool include_loopback);

/* Same family, same prefix length, equal under that prefix. */
bool netaddr_same_subnet(const struct netaddr *a, const struct netaddr *b);

bool netaddr_is_loopback(const struct netaddr *a);

struct netaddr_choice {
	int peer;                /* index into the peer's addresses */
	int local;               /* index into ours; -1 = routed */
	char why[128];           /* e.g. "subnet 10.0.1.0/24 via eth1" */
};

/*
 * Pick the peer address to connect to.  Returns 0, or -ENOENT when the
 * peer has no address of a family we have.
 */
int netaddr_choose(const struct netaddr *local, size_t nlocal,
		   const struct netaddr *peer, size_t npeer,
		   struct netaddr_choice *out);

/* Parse a literal "10.1.2.3", "fe80::1" (optionally "/24" suffix for the
 * prefix, else the full length).  -EINVAL if not an address. */
int netaddr_parse(const char *s, struct netaddr *out);
/* "10.1.2.3/24" (or without "/N" when with_prefix is false). */
void netaddr_format(const struct netaddr *a, bool with_prefix, char *buf,
		    size_t len);

/* Conversions to and from socket addresses (port in host order). */
void netaddr_to_sockaddr(const struct netaddr *a, uint16_t port,
			 struct sockaddr_storage *ss, socklen_t *len);
int netaddr_from_sockaddr(const struct sockaddr *sa, struct netaddr *out,
			  uint16_t *port);

#endif /* XFERD_NETADDR_H */
