/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listen.c - the TCP listener for other xferds (setting `listen`:
 * by default "auto", which is *:7474 with a cluster key and no listener
 * without one: an unauthenticated peer port is opened only when a
 * `listen` address is set explicitly) and the addresses this node
 * advertises in tokens and
 * handshakes: the listen address, or every non-loopback address of an
 * interface that is up.  An accepted connection continues as a handshake
 * (handshake.c).
 *
 * Main thread only, no locks; libevent's listener accepts in the event
 * loop, never blocking.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/listener.h>
#include <event2/util.h>

#include "core/log.h"
#include "peer/peer_int.h"

static void on_accept(struct evconnlistener *lst, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	struct peers *ps = arg;
	struct netaddr na;
	uint16_t port = 0;
	char ip[48];
	int one = 1;
	(void)lst, (void)salen;

	evutil_make_socket_nonblocking(fd);
	evutil_make_socket_closeonexec(fd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct conn *c = conn_new(ps, fd, false);
	if (!c)
		return;
	if (netaddr_from_sockaddr(sa, &na, &port) == 0) {
		netaddr_format(&na, false, ip, sizeof(ip));
		snprintf(c->remote, sizeof(c->remote), "%s:%u", ip, port);
	}
}

/* Which addresses we advertise: the listen address, or all of ours. */
static void listen_learn_addresses(struct peers *ps, const char *host)
{
	int n = netaddr_local(ps->local, NETADDR_MAX, true);

	ps->nlocal = n > 0 ? (size_t)n : 0;
	ps->naddrs = 0;
	if (strcmp(host, "*") != 0 && strcmp(host, "0.0.0.0") != 0 &&
	    strcmp(host, "::") != 0) {
		struct netaddr want;
		if (netaddr_parse(host, &want))
			return;
		ps->addrs[0] = want;
		ps->addrs[0].prefix_len = want.family == AF_INET ? 32 : 128;
		/* Its prefix comes from the interface that has it. */
		for (size_t i = 0; i < ps->nlocal; i++)
			if (ps->local[i].family == want.family &&
			    memcmp(ps->local[i].ip, want.ip, 16) == 0)
				ps->addrs[0] = ps->local[i];
		ps->naddrs = 1;
		return;
	}
	for (size_t i = 0; i < ps->nlocal; i++)
		if (!netaddr_is_loopback(&ps->local[i]))
			ps->addrs[ps->naddrs++] = ps->local[i];
}

int listen_open(struct peers *ps)
{
	const char *spec = ps->ctx.cfg->listen;
	char host[CONFIG_HOST_MAX];
	struct sockaddr_storage ss;
	socklen_t sl;
	struct netaddr na = { .family = AF_INET6 };
	char any[16];

	if (strcmp(spec, "auto") == 0 && ps->ctx.cfg->cluster_key_file[0]) {
		snprintf(any, sizeof(any), "*:%u", CONFIG_DEFAULT_PORT);
		spec = any;
	}
	if (strcmp(spec, "auto") == 0) {
		log_info("peers: not listening: no cluster_key_file and no "
			 "listen address set (set cluster_key_file to accept "
			 "authenticated peers on *:%u, or listen = ADDR:PORT to "
			 "accept unauthenticated ones); outgoing links to "
			 "configured peers still work", CONFIG_DEFAULT_PORT);
		listen_learn_addresses(ps, "*");
		return 0;
	}
	if (strcmp(spec, "off") == 0) {
		listen_learn_addresses(ps, "*");
		return 0;
	}
	if (config_split_hostport(spec, host, &ps->port, CONFIG_DEFAULT_PORT))
		return -EINVAL;
	listen_learn_addresses(ps, host);
	if (strcmp(host, "*") != 0 && netaddr_parse(host, &na)) {
		log_warnx("listen: '%s' is not an IP address", host);
		return -EINVAL;
	}
	netaddr_to_sockaddr(&na, ps->port, &ss, &sl);
	ps->listener = evconnlistener_new_bind(
		ps->ctx.base, on_accept, ps,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
		128, (struct sockaddr *)&ss, (int)sl);
	if (!ps->listener) {
		log_warn("cannot listen on %s (setting 'listen')", spec);
		return -EADDRINUSE;
	}
	log_info("listening for peers on %s (node %s)", spec, ps->node_name);
	if (!ps->ctx.cfg->cluster_key_file[0] && !netaddr_is_loopback(&na))
		log_warnx("peers: listening on %s without a cluster_key_file: "
			  "any host that reaches this port may link as a peer",
			  spec);
	return 0;
}

void listen_close(struct peers *ps)
{
	if (ps->listener)
		evconnlistener_free(ps->listener);
	ps->listener = NULL;
}
