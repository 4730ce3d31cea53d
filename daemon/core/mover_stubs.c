/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mover_stubs.c - what a mover lacks (core/mover.h): a mover's table
 * names what it has, and mover_ops_fill() sets the rest, in the route's
 * own copy, to one of these stubs, so that no entry the progress thread
 * calls is NULL.  No state; any thread.
 */
#include <errno.h>

#include "core/mover.h"

int64_t mover_stub_move_now(void *t, struct move_req *rq)
{
	(void)t, (void)rq;
	return MOVER_SUBMIT;
}

int64_t mover_stub_move_list(void *t, struct move_list *ml)
{
	(void)t, (void)ml;
	return MOVER_SUBMIT;
}

bool mover_stub_accepts(void *t, const struct xop *op)
{
	(void)t, (void)op;
	return false;
}

void mover_stub_cancel_client(void *t, const struct prog_client *pc)
{
	(void)t, (void)pc;
}

bool mover_stub_expire(void *t, uint64_t now_ns)
{
	(void)t, (void)now_ns;
	return false;
}

void mover_stub_set_cfg(void *t, const struct transport_cfg *cfg)
{
	(void)t, (void)cfg;
}

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

int mover_ops_fill(struct mover_ops *out, const struct mover_ops *in)
{
	if (in->version != MOVER_OPS_VERSION || !in->name || !in->submit ||
	    !in->destroy)
		return -EINVAL;
	*out = *in;
#define FILL(entry) \
	do { if (!out->entry) out->entry = mover_stub_##entry; } while (0)
	FILL(move_now);
	FILL(move_list);
	FILL(accepts);
	FILL(cancel_client);
	FILL(expire);
	FILL(poll);
	FILL(arm);
	FILL(needs_loop);
	FILL(peer_up);
	FILL(peer_down);
	FILL(frame);
	FILL(describe);
	FILL(set_cfg);
#undef FILL
	return 0;
}
