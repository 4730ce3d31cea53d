/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stubs.c - what a transport lacks (transport.h): every entry of an ops
 * table is set, to one of these when the transport has nothing to do.
 */
#include "core/mover.h"

bool mover_stub_poll(void *t)
{
	(void)t;
	return false;
}

bool mover_stub_arm(void *t)
{
	(void)t;
	return true;
}

bool mover_stub_needs_loop(const void *t)
{
	(void)t;
	return false;
}

void mover_stub_peer_up(void *t, const struct peer_info *peer)
{
	(void)t, (void)peer;
}

void mover_stub_peer_down(void *t, const uint8_t id[LINK_ID_LEN],
			      uint64_t gen, int err)
{
	(void)t, (void)id, (void)gen, (void)err;
}

bool mover_stub_frame(void *t, const uint8_t id[LINK_ID_LEN],
			  const struct Xfer__Peer__PeerMsg *m)
{
	(void)t, (void)id, (void)m;
	return false;
}

enum describe_result mover_stub_describe(void *t, struct region *r,
					     const struct describe_req *q,
					     struct Xfer__Peer__RdmaMemory *out,
					     uint32_t *keys, size_t max_keys)
{
	(void)t, (void)r, (void)q, (void)out, (void)keys, (void)max_keys;
	return DESCRIBE_NONE;
}
