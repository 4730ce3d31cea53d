/*
 * peer.c - the other xferds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "peer.h"
#include "xferd.h"

struct peers {
	struct xferd *d;
	char node_name[CONFIG_HOST_MAX];
	struct netaddr addrs[NETADDR_MAX];
	size_t naddrs;
	uint16_t port;
};

int peers_create(struct xferd *d, struct peers **out)
{
	struct peers *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->d = d;
	if (d->cfg.node_name[0])
		snprintf(p->node_name, sizeof(p->node_name), "%s",
			 d->cfg.node_name);
	else if (gethostname(p->node_name, sizeof(p->node_name)))
		snprintf(p->node_name, sizeof(p->node_name), "localhost");
	*out = p;
	return 0;
}

void peers_destroy(struct peers *p)
{
	free(p);
}

void peers_reload(struct peers *p)
{
	(void)p;
}

size_t peers_advertised(const struct peers *p, const struct netaddr **addrs,
			uint16_t *port)
{
	*addrs = p->addrs;
	*port = p->port;
	return p->naddrs;
}

const char *peers_node_name(const struct peers *p)
{
	return p->node_name;
}

void peers_lookup(struct peers *p, const char *node, const char *name,
		  peers_lookup_cb cb, void *arg)
{
	(void)p, (void)node, (void)name;
	cb(arg, -EHOSTUNREACH, NULL, 0);
}

void peers_ping(struct peers *p, const char *target, peers_ping_cb cb,
		void *arg)
{
	(void)p;
	cb(arg, -EHOSTUNREACH, 0, target);
}

void peers_foreach(struct peers *p,
		   void (*fn)(const struct peer_view *v, void *arg), void *arg)
{
	(void)p, (void)fn, (void)arg;
}
