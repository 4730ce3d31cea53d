/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_peer.c - the peer table (daemon/peer/table.c) without a daemon:
 * the addresses a handshake advertises (the malformed ones left out, at
 * most NETADDR_MAX), finding a peer by address, node name or instance id
 * prefix (and a new record for an address nobody has), the bound on
 * records that forgets idle ones first, merging two records of one xferd
 * with the requests that wait on them, and our own connect to an address
 * found again; and the wire form of Error.duplicate_link (peer.proto),
 * including an Error from an xferd that does not know the field.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "peer/peer_int.h"
#include "suites.h"

/* A table as peers_create leaves it, without listener, key or daemon
 * (nothing tested here reaches them). */
static struct peers *table_new(void)
{
	struct peers *ps = calloc(1, sizeof(*ps));

	ck_assert_ptr_nonnull(ps);
	LIST_INIT(&ps->conns);
	TAILQ_INIT(&ps->inflight);
	TAILQ_INIT(&ps->unresolved);
	return ps;
}

static void table_free(struct peers *ps)
{
	for (struct peer *pe = ps->peers, *next; pe; pe = next) {
		next = pe->next;
		free(pe);
	}
	free(ps);
}

static void pb_addr(Xfer__Token__Address *a, uint8_t *ip, size_t ip_len,
		    uint32_t prefix_len, uint32_t port)
{
	xfer__token__address__init(a);
	a->ip.data = ip;
	a->ip.len = ip_len;
	a->prefix_len = prefix_len;
	a->port = port;
}

START_TEST(addrs_from_handshake)
{
	uint8_t v4[4] = { 10, 0, 1, 2 }, v6[16] = { 0xfd, 0, [15] = 1 };
	uint8_t odd[5] = { 1, 2, 3, 4, 5 };
	Xfer__Token__Address a[7], *ptr[7];
	struct addr_set out;

	pb_addr(&a[0], v4, 4, 24, 7474);
	pb_addr(&a[1], odd, 5, 24, 7474);     /* neither IPv4 nor IPv6 */
	pb_addr(&a[2], v4, 4, 33, 7474);      /* prefix past the address */
	pb_addr(&a[3], v4, 4, 24, 0);         /* no port */
	pb_addr(&a[4], v4, 4, 24, 65536);     /* not a port */
	pb_addr(&a[5], v6, 16, 64, 7475);
	pb_addr(&a[6], v6, 16, 129, 7475);
	for (int i = 0; i < 7; i++)
		ptr[i] = &a[i];
	peer_addrs_from_pb(&out, ptr, 7);
	ck_assert_uint_eq(out.n, 2);
	ck_assert_int_eq(out.addrs[0].family, AF_INET);
	ck_assert_mem_eq(out.addrs[0].ip, v4, 4);
	ck_assert_uint_eq(out.addrs[0].prefix_len, 24);
	ck_assert_uint_eq(out.ports[0], 7474);
	ck_assert_int_eq(out.addrs[1].family, AF_INET6);
	ck_assert_mem_eq(out.addrs[1].ip, v6, 16);
	ck_assert_uint_eq(out.addrs[1].prefix_len, 64);
	ck_assert_uint_eq(out.ports[1], 7475);

	/* No more than NETADDR_MAX, however many are sent. */
	Xfer__Token__Address many[NETADDR_MAX + 4], *mp[NETADDR_MAX + 4];
	for (int i = 0; i < NETADDR_MAX + 4; i++) {
		pb_addr(&many[i], v4, 4, 24, 7000 + (uint32_t)i);
		mp[i] = &many[i];
	}
	peer_addrs_from_pb(&out, mp, NETADDR_MAX + 4);
	ck_assert_uint_eq(out.n, NETADDR_MAX);
	ck_assert_uint_eq(out.ports[NETADDR_MAX - 1], 7000 + NETADDR_MAX - 1);

	/* A handshake without addresses keeps what the record knew. */
	struct peer pe = { .naddrs = 1, .ports = { 9 } };
	struct addr_set none = { .n = 0 };
	peer_set_addrs(&pe, &none);
	ck_assert_uint_eq(pe.naddrs, 1);
	ck_assert_uint_eq(pe.ports[0], 9);
}
END_TEST

START_TEST(find_by_address_name_and_id)
{
	struct peers *ps = table_new();
	uint8_t ip[4] = { 10, 0, 1, 2 };

	/* An address nobody has: a new record, a host route, no id. */
	struct peer *pe = peer_for(ps, "10.0.1.2:7475");
	ck_assert_ptr_nonnull(pe);
	ck_assert_uint_eq(ps->npeers, 1);
	ck_assert(!pe->id_known);
	ck_assert_uint_eq(pe->naddrs, 1);
	ck_assert_int_eq(pe->addrs[0].family, AF_INET);
	ck_assert_mem_eq(pe->addrs[0].ip, ip, 4);
	ck_assert_uint_eq(pe->addrs[0].prefix_len, 32);
	ck_assert_uint_eq(pe->ports[0], 7475);

	/* The same address finds it again; another port is another xferd;
	 * without a port it is the default one. */
	ck_assert_ptr_eq(peer_for(ps, "10.0.1.2:7475"), pe);
	struct peer *dflt = peer_for(ps, "10.0.1.2");
	ck_assert_ptr_nonnull(dflt);
	ck_assert_ptr_ne(dflt, pe);
	ck_assert_uint_eq(dflt->ports[0], CONFIG_DEFAULT_PORT);
	ck_assert_uint_eq(ps->npeers, 2);

	/* By node name and by a prefix (4+ hex digits) of the id. */
	snprintf(pe->node_name, sizeof(pe->node_name), "b");
	for (int i = 0; i < LINK_ID_LEN; i++)
		pe->id[i] = (uint8_t)(0xa0 + i);
	pe->id_known = true;
	ck_assert_ptr_eq(peer_for(ps, "b"), pe);
	ck_assert_ptr_eq(peer_by_name(ps, "b"), pe);
	ck_assert_ptr_eq(peer_for(ps, "a0a1"), pe);
	ck_assert_ptr_eq(peer_for(ps, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"), pe);
	ck_assert_ptr_eq(peer_by_id(ps, pe->id), pe);
	ck_assert_ptr_null(peer_for(ps, "a1a2"));  /* not a prefix */
	ck_assert_ptr_null(peer_for(ps, "a0a"));   /* too short, no host */
	ck_assert_ptr_null(peer_for(ps, "no-such-node"));
	ck_assert_uint_eq(ps->npeers, 2);

	char label[64];
	ck_assert_str_eq(peer_label(pe, label, sizeof(label)), "b (a0a1a2a3)");
	ck_assert_str_eq(peer_label(dflt, label, sizeof(label)), "? (?)");
	table_free(ps);
}
END_TEST

START_TEST(records_bounded_idle_ones_forgotten)
{
	struct peers *ps = table_new();

	for (int i = 0; i < MAX_PEERS; i++) {
		struct peer *pe = peer_new(ps);
		ck_assert_ptr_nonnull(pe);
		pe->state = PEER_UP;
	}
	ck_assert_ptr_null(peer_new(ps));
	ck_assert_uint_eq(ps->npeers, MAX_PEERS);

	/* One record becomes idle (down, no connect, nothing waiting): it
	 * makes room; one that a request waits on does not. */
	struct peer *idle = ps->peers->next, *busy = ps->peers;
	struct request r = { .kind = REQ_LOOKUP };
	idle->state = PEER_DOWN;
	busy->state = PEER_DOWN;
	TAILQ_INSERT_TAIL(&busy->waiting, &r, q);
	struct peer *fresh = peer_new(ps);
	ck_assert_ptr_nonnull(fresh);
	ck_assert_uint_eq(ps->npeers, MAX_PEERS);
	fresh->state = PEER_UP;
	bool busy_kept = false;
	for (struct peer *pe = ps->peers; pe; pe = pe->next)
		busy_kept |= pe == busy;
	ck_assert(busy_kept);
	ck_assert_ptr_null(peer_new(ps));
	TAILQ_REMOVE(&busy->waiting, &r, q);
	table_free(ps);
}
END_TEST

START_TEST(merge_moves_requests)
{
	struct peers *ps = table_new();
	struct peer *keep = peer_new(ps), *gone = peer_new(ps);
	struct request w1 = { .kind = REQ_LOOKUP, .peer = gone };
	struct request w2 = { .kind = REQ_PING, .peer = gone };
	struct request sent = { .kind = REQ_CHECK, .peer = gone, .sent = true };
	struct request other = { .kind = REQ_PING, .peer = keep, .sent = true };

	ck_assert_ptr_nonnull(keep);
	ck_assert_ptr_nonnull(gone);
	keep->id_known = true;
	TAILQ_INSERT_TAIL(&gone->waiting, &w1, q);
	TAILQ_INSERT_TAIL(&gone->waiting, &w2, q);
	TAILQ_INSERT_TAIL(&ps->inflight, &sent, q);
	TAILQ_INSERT_TAIL(&ps->inflight, &other, q);

	peer_merge(ps, keep, gone);
	ck_assert_uint_eq(ps->npeers, 1);
	ck_assert_ptr_eq(ps->peers, keep);
	ck_assert_ptr_null(keep->next);
	/* Waiting requests moved in their order; answers to those sent
	 * now come from keep. */
	ck_assert_ptr_eq(TAILQ_FIRST(&keep->waiting), &w1);
	ck_assert_ptr_eq(TAILQ_NEXT(&w1, q), &w2);
	ck_assert_ptr_eq(w1.peer, keep);
	ck_assert_ptr_eq(w2.peer, keep);
	ck_assert_ptr_eq(sent.peer, keep);
	ck_assert_ptr_eq(other.peer, keep);
	table_free(ps);
}
END_TEST

START_TEST(own_attempt_found_by_address)
{
	struct peers *ps = table_new();
	struct peer *pe = peer_for(ps, "10.0.1.2:7474");
	struct addr_set as = { .n = 2 };
	struct conn ours = { .initiator = true };

	ck_assert_ptr_nonnull(pe);
	ck_assert_int_eq(netaddr_parse("10.0.2.2", &as.addrs[0]), 0);
	ck_assert_int_eq(netaddr_parse("10.0.1.2", &as.addrs[1]), 0);
	as.ports[0] = as.ports[1] = 7474;
	/* Only while our connect is in flight... */
	ck_assert_ptr_null(peer_own_attempt_to(ps, &as));
	pe->conn = &ours;
	ck_assert_ptr_eq(peer_own_attempt_to(ps, &as), pe);
	/* ... to that port ... */
	as.ports[1] = 7475;
	ck_assert_ptr_null(peer_own_attempt_to(ps, &as));
	as.ports[1] = 7474;
	/* ... and while we do not know who answers there. */
	pe->id_known = true;
	ck_assert_ptr_null(peer_own_attempt_to(ps, &as));
	pe->conn = NULL;
	table_free(ps);
}
END_TEST

/* Error.duplicate_link on the wire, and an Error of an xferd before it. */
START_TEST(error_duplicate_link_wire)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Error e = XFER__PEER__ERROR__INIT;
	uint8_t buf[256];

	e.code = -1;
	e.reason = "duplicate link";
	e.duplicate_link = true;
	m.proto_version = 1;
	m.body_case = XFER__PEER__PEER_MSG__BODY_ERROR;
	m.error = &e;
	size_t n = protobuf_c_message_pack(&m.base, buf);
	Xfer__Peer__PeerMsg *u = xfer__peer__peer_msg__unpack(NULL, n, buf);
	ck_assert_ptr_nonnull(u);
	ck_assert_int_eq(u->body_case, XFER__PEER__PEER_MSG__BODY_ERROR);
	ck_assert(u->error->duplicate_link);
	ck_assert_str_eq(u->error->reason, "duplicate link");
	xfer__peer__peer_msg__free_unpacked(u, NULL);

	/* Before the field: code and reason only.  The same reason text no
	 * longer means a duplicate. */
	e.duplicate_link = false;
	n = protobuf_c_message_pack(&m.base, buf);
	u = xfer__peer__peer_msg__unpack(NULL, n, buf);
	ck_assert_ptr_nonnull(u);
	ck_assert(!u->error->duplicate_link);
	xfer__peer__peer_msg__free_unpacked(u, NULL);

	/* Field 3 of Error is the new one: 0x18 is its tag as a varint. */
	Xfer__Peer__PeerMsg only = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Error bare = XFER__PEER__ERROR__INIT;
	bare.duplicate_link = true;
	only.body_case = XFER__PEER__PEER_MSG__BODY_ERROR;
	only.error = &bare;
	n = protobuf_c_message_pack(&only.base, buf);
	/* PeerMsg field 24 (error), length 2, then field 3 = 1. */
	const uint8_t want[] = { 0xc2, 0x01, 0x02, 0x18, 0x01 };
	ck_assert_uint_eq(n, sizeof(want));
	ck_assert_mem_eq(buf, want, sizeof(want));
}
END_TEST

Suite *peer_suite(void)
{
	Suite *s = suite_create("peer");
	TCase *tc = tcase_create("table");

	tcase_add_test(tc, addrs_from_handshake);
	tcase_add_test(tc, find_by_address_name_and_id);
	tcase_add_test(tc, records_bounded_idle_ones_forgotten);
	tcase_add_test(tc, merge_moves_requests);
	tcase_add_test(tc, own_attempt_found_by_address);
	suite_add_tcase(s, tc);
	tc = tcase_create("wire");
	tcase_add_test(tc, error_duplicate_link_wire);
	suite_add_tcase(s, tc);
	return s;
}
