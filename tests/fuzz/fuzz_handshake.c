/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_handshake.c - the bytes of a TCP connection from another xferd
 * before its link is up, as the handshake (daemon/peer/handshake.c)
 * reads them: the frame prefix (peer_hs_prefix), the PeerMsg unpack, the
 * version, the message each step expects (peer_hs_expect), then for
 * Hello and Welcome the identity fields (peer_intro_valid), for a
 * lane's LaneHello its fields (peer_lane_hello_valid), and the
 * advertised addresses and rails (peer_addrs_from_pb,
 * peer_rails_from_pb), what on_conn_read, conn_step, on_hello and
 * on_welcome run.
 *
 * Input: one byte (bit 0: this side initiated, so it expects Welcome
 * then Established; else Hello then Ready), then the stream.
 *
 * Invariants: what is kept of the addresses and rails is bounded and
 * well-formed (an address family with its prefix length and a port, a
 * rail's MTU and LID in range).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/wire.h"
#include "fuzz.h"
#include "core/log.h"
#include "peer/peer_int.h"

static void check_intro(Xfer__Token__Address **addrs, size_t naddrs,
			Xfer__Peer__Rail *const *rails, size_t nrails)
{
	struct addr_set as;
	struct rdma_peer_rail out[RDMA_PEER_RAILS];

	peer_addrs_from_pb(&as, addrs, naddrs);
	FUZZ_ASSERT(as.n <= NETADDR_MAX && as.n <= naddrs);
	for (size_t i = 0; i < as.n; i++) {
		const struct netaddr *a = &as.addrs[i];
		FUZZ_ASSERT((a->family == AF_INET && a->prefix_len <= 32) ||
			    (a->family == AF_INET6 && a->prefix_len <= 128));
		FUZZ_ASSERT(as.ports[i] != 0);
	}
	size_t n = peer_rails_from_pb(out, rails, nrails, "fuzz");
	FUZZ_ASSERT(n <= RDMA_PEER_RAILS && n <= nrails);
	for (size_t i = 0; i < n; i++) {
		FUZZ_ASSERT(out[i].mtu >= 1 && out[i].mtu <= 5);
		FUZZ_ASSERT((out[i].addr.family == AF_INET &&
			     out[i].addr.prefix_len <= 32) ||
			    (out[i].addr.family == AF_INET6 &&
			     out[i].addr.prefix_len <= 128));
	}
}

/* One message at this step: 0 to go on, 1 when the handshake is done,
 * -EPROTO when the connection fails. */
static int step_one(const Xfer__Peer__PeerMsg *m, bool initiator, int step)
{
	if (m->proto_version != XFER_PROTO_VERSION ||
	    m->body_case == XFER__PEER__PEER_MSG__BODY_ERROR)
		return -EPROTO;
	/* A link's latency lane instead of a link: handed over as it is. */
	if (!initiator && step == 0 &&
	    m->body_case == XFER__PEER__PEER_MSG__BODY_LANE_HELLO)
		return peer_lane_hello_valid(m->lane_hello) ? 1 : -EPROTO;
	if ((int)m->body_case != peer_hs_expect(initiator, step))
		return -EPROTO;
	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_HELLO:
		if (!peer_intro_valid(&m->hello->instance_id,
				      &m->hello->challenge))
			return -EPROTO;
		check_intro(m->hello->addresses, m->hello->n_addresses,
			    m->hello->rails, m->hello->n_rails);
		return 0;
	case XFER__PEER__PEER_MSG__BODY_WELCOME:
		if (!peer_intro_valid(&m->welcome->instance_id,
				      &m->welcome->challenge))
			return -EPROTO;
		check_intro(m->welcome->addresses, m->welcome->n_addresses,
			    m->welcome->rails, m->welcome->n_rails);
		return 0;
	case XFER__PEER__PEER_MSG__BODY_READY:
	case XFER__PEER__PEER_MSG__BODY_ESTABLISHED:
		return 1;  /* the rest of the stream is the link's */
	default:
		FUZZ_ASSERT(0);  /* peer_hs_expect names only these */
		return -EPROTO;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;

	if (!quiet) {
		log_init(LOG_LVL_ERR);  /* malformed rails are logged */
		quiet = true;
	}
	if (size < 1)
		return 0;
	bool initiator = data[0] & 1;
	size_t off = 1;

	for (int step = 0;; step++) {
		uint32_t hlen, plen;
		if (size - off < 8 || peer_hs_prefix(data + off, &hlen, &plen))
			return 0;
		FUZZ_ASSERT(hlen >= 1 && hlen <= HANDSHAKE_MAX_HEADER &&
			    plen == 0);
		if (size - off - 8 < hlen)
			return 0;
		Xfer__Peer__PeerMsg *m = xfer__peer__peer_msg__unpack(
			NULL, hlen, data + off + 8);
		if (!m)
			return 0;
		int rc = step_one(m, initiator, step);
		xfer__peer__peer_msg__free_unpacked(m, NULL);
		if (rc)
			return 0;
		off += 8 + hlen;
	}
}
