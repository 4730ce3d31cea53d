/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_tcp_sched.c - daemon/transport/tcp_sched.c: the order in which a
 * link's bulk frames go out between tenants, as tcp_send.c's fill asks
 * for them (take an op, queue a frame of it, push it back while it has
 * frames left, settle its tenant).  No link, no clock: counts and order.
 */
#include <check.h>
#include <string.h>

#include "transport/tcp_int.h"
#include "suites.h"

#define CHUNK (1u << 20)

struct rig {
	struct tcp_mover tm;
	struct tcp_link tl;
	struct xop ops[16];
	uint64_t left[16];            /* frames each op still has */
	unsigned frames[TENANT_MAX];  /* frames sent, by tenant */
	unsigned order[1024];
	unsigned n;
};

static void rig_init(struct rig *r, uint32_t w1, uint32_t w2)
{
	memset(r, 0, sizeof(*r));
	r->tm.cfg.tcp_chunk = CHUNK;
	r->tm.cfg.tenants.n = 3;
	r->tm.cfg.tenants.t[0].weight = 1;
	r->tm.cfg.tenants.t[1].weight = w1;
	r->tm.cfg.tenants.t[2].weight = w2;
	r->tl.tm = &r->tm;
	tcp_sched_init(&r->tl);
}

/* Op i of tenant t, frames frames of CHUNK bytes, queued. */
static void rig_op(struct rig *r, unsigned i, unsigned t, unsigned frames)
{
	struct xop *op = &r->ops[i];

	op->opcode = XFER_OP_WRITE;
	op->cls = XFER_CLASS_BULK;
	op->tenant = (uint8_t)t;
	op->len = (uint64_t)frames * CHUNK;
	r->left[i] = frames;
	tcp_sched_push(&r->tl, op);
}

/* One turn of the fill: the next frame by share, as fill_op queues it.
 * false: nothing to send. */
static bool rig_frame(struct rig *r)
{
	uint64_t wait;
	struct xop *op = tcp_sched_bulk(&r->tl, 0, &wait);

	if (!op)
		return false;
	unsigned i = (unsigned)(op - r->ops), t = op->tenant;
	tcp_sched_take(&r->tl, op);
	tcp_sched_sent(&r->tl, op, CHUNK, 0);
	if (--r->left[i])
		tcp_sched_push(&r->tl, op);
	tcp_sched_settle(&r->tl, t);
	r->frames[t]++;
	if (r->n < sizeof(r->order) / sizeof(r->order[0]))
		r->order[r->n++] = t;
	return true;
}

START_TEST(one_op_each_keeps_the_weights)
{
	struct rig r;

	/* One large write per tenant, as a client with one transfer in
	 * flight has: the op leaves its queue for each frame and comes
	 * back, and its tenant keeps its turn meanwhile.  Weights 1:3 give
	 * 1 frame of every 4 to tenant 1 while both have frames. */
	rig_init(&r, 1, 3);
	rig_op(&r, 0, 1, 100);
	rig_op(&r, 1, 2, 100);
	for (unsigned k = 0; k < 80; k++)
		ck_assert(rig_frame(&r));
	ck_assert_uint_eq(r.frames[1], 20);
	ck_assert_uint_eq(r.frames[2], 60);
	for (unsigned k = 0; k + 4 <= r.n; k += 4) {
		unsigned one = 0;
		for (unsigned j = k; j < k + 4; j++)
			one += r.order[j] == 1;
		ck_assert_uint_eq(one, 1);
	}
}
END_TEST

START_TEST(many_ops_each_keep_the_weights)
{
	struct rig r;

	/* Eight writes of 16 frames each per tenant (a client at depth 8):
	 * the same 1:3, the ops of a tenant taking turns a frame each. */
	rig_init(&r, 1, 3);
	for (unsigned i = 0; i < 8; i++) {
		rig_op(&r, i, 1, 16);
		rig_op(&r, 8 + i, 2, 16);
	}
	for (unsigned k = 0; k < 128; k++)
		ck_assert(rig_frame(&r));
	ck_assert_uint_eq(r.frames[1], 32);
	ck_assert_uint_eq(r.frames[2], 96);
	/* Round robin within the tenant: each of 2's ops sent 12. */
	for (unsigned i = 8; i < 16; i++)
		ck_assert_uint_eq(r.left[i], 4);
}
END_TEST

START_TEST(a_tenant_done_gives_its_share_away)
{
	struct rig r;

	/* Tenant 2 (weight 3) has 6 frames: once they are out, tenant 1
	 * gets every frame, and the scheduler never offers an empty
	 * tenant (tcp_sched_bulk returns an op, or NULL when all are
	 * done). */
	rig_init(&r, 1, 3);
	rig_op(&r, 0, 1, 20);
	rig_op(&r, 1, 2, 6);
	while (rig_frame(&r))
		;
	ck_assert_uint_eq(r.frames[1], 20);
	ck_assert_uint_eq(r.frames[2], 6);
	ck_assert_uint_eq(r.n, 26);
	for (unsigned j = 8; j < r.n; j++)
		ck_assert_uint_eq(r.order[j], 1);
	ck_assert(!r.tl.flows[1].f.active);
	ck_assert(!r.tl.flows[2].f.active);
}
END_TEST

START_TEST(remove_ends_the_turn)
{
	struct rig r;

	/* An op that leaves for good (a client gone) with nothing else of
	 * its tenant queued: the tenant is out of the rotation at once. */
	rig_init(&r, 1, 3);
	rig_op(&r, 0, 1, 10);
	rig_op(&r, 1, 2, 10);
	ck_assert(rig_frame(&r));
	ck_assert_uint_eq(r.order[0], 1);  /* it came first */
	tcp_sched_remove(&r.tl, &r.ops[1]);
	ck_assert(!r.tl.flows[2].f.active);
	while (rig_frame(&r))
		;
	ck_assert_uint_eq(r.frames[1], 10);
	ck_assert_uint_eq(r.frames[2], 0);
}
END_TEST

Suite *tcp_sched_suite(void)
{
	Suite *s = suite_create("tcp_sched");
	TCase *tc = tcase_create("order");

	tcase_add_test(tc, one_op_each_keeps_the_weights);
	tcase_add_test(tc, many_ops_each_keep_the_weights);
	tcase_add_test(tc, a_tenant_done_gives_its_share_away);
	tcase_add_test(tc, remove_ends_the_turn);
	suite_add_tcase(s, tc);
	return s;
}
