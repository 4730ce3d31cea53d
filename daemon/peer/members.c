/* SPDX-License-Identifier: Apache-2.0 */
/*
 * members.c - what the cluster membership in etcd (meta/membership.c)
 * tells the peer table: that a node name now means a given instance at
 * given addresses (so "node/name" lookups need no `peer =` line), and
 * that an instance is gone for good because its node restarted (so its
 * links, checks and operations fail -ESTALE at once instead of waiting
 * for a timeout).
 *
 * Records are made lazily, when a lookup or a token needs the node:
 * a cluster has thousands of nodes and the table holds a handful.
 * Retired instance ids are kept in a small ring: enough for the restarts
 * of a few minutes; an id that fell out of it is still found stale by
 * the handshake (a different instance answers), only later.
 *
 * Main thread only, no locks.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/progress.h"
#include "core/log.h"
#include "peer/peer_int.h"

bool peer_retired(const struct peers *ps, const uint8_t *id)
{
	size_t n = ps->nretired < PEERS_RETIRED ? ps->nretired : PEERS_RETIRED;

	for (size_t i = 0; i < n; i++)
		if (memcmp(ps->retired[i], id, LINK_ID_LEN) == 0)
			return true;
	return false;
}

void peers_member_seen(struct peers *ps, const char *node, const uint8_t *id,
		       const struct netaddr *addrs, const uint16_t *ports,
		       size_t n)
{
	struct peer *pe = peer_by_id(ps, id), *named;
	struct addr_set a = { .n = n < NETADDR_MAX ? n : NETADDR_MAX };

	if (peer_retired(ps, id))
		return;
	if (!pe) {
		pe = peer_new(ps);
		if (!pe)
			return;
		memcpy(pe->id, id, LINK_ID_LEN);
		pe->id_known = true;
	}
	/* The name means this instance now, not a record it had before. */
	while ((named = peer_by_name(ps, node)) && named != pe)
		named->node_name[0] = '\0';
	snprintf(pe->node_name, sizeof(pe->node_name), "%s", node);
	pe->known = true;   /* etcd says where it is: dialed without a key */
	memcpy(a.addrs, addrs, a.n * sizeof(a.addrs[0]));
	memcpy(a.ports, ports, a.n * sizeof(a.ports[0]));
	if (pe->state != PEER_UP)
		peer_set_addrs(pe, &a);
}

void peers_member_gone(struct peers *ps, const uint8_t *id, const char *why)
{
	struct peer *pe = peer_by_id(ps, id);
	struct request *r;

	memcpy(ps->retired[ps->nretired++ % PEERS_RETIRED], id, LINK_ID_LEN);
	/* Operations of the progress thread on (or waiting for) its link. */
	progress_link_close(ps->ctx.progress, id, -ESTALE, why);
	if (!pe)
		return;
	while ((r = TAILQ_FIRST(&pe->waiting)))
		request_end(r, -ESTALE, NULL, 0, 0);
	for (struct request *next, *q = TAILQ_FIRST(&ps->inflight); q;
	     q = next) {
		next = TAILQ_NEXT(q, q);
		if (q->peer == pe)
			request_end(q, -ESTALE, NULL, 0, 0);
	}
	peer_drop_own_conn(pe, NULL);
	pe->node_name[0] = '\0';
	pe->state = PEER_DOWN;
	snprintf(pe->last_error, sizeof(pe->last_error), "%s", why);
}
