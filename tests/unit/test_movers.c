/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_movers.c - every mover's ops table, as registration fills it
 * into its route's own copy (mover_ops_fill), is whole: written for this
 * version of core/mover.h, named, and every entry set (the mover's own,
 * or a stub where it names none, never NULL: the progress thread calls
 * entries without looking).
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "core/mover.h"
#include "local/local.h"
#include "suites.h"
#include "transport/rdma.h"
#include "transport/tcp.h"

/* A field added to struct mover_ops must be added to whole() too. */
_Static_assert(sizeof(struct mover_ops) ==
	       2 * sizeof(void *) + 15 * sizeof(void (*)(void)),
	       "struct mover_ops changed: update whole() below");

static const struct mover_ops *const tables[] = {
	&memcpy_mover_ops, &cma_mover_ops, &gpu_mover_ops,
	&gpu_staged_mover_ops, &tcp_mover_ops, &rdma_mover_ops,
	&rdma_staged_mover_ops,
};

static void whole(const struct mover_ops *o)
{
	ck_assert_uint_eq(o->version, MOVER_OPS_VERSION);
	ck_assert_ptr_nonnull(o->name);
	ck_assert_msg(o->move_now && o->move_list && o->accepts && o->submit &&
		      o->cancel_client && o->expire && o->poll && o->arm &&
		      o->needs_loop && o->peer_up && o->peer_down &&
		      o->frame && o->describe && o->set_cfg && o->destroy,
		      "mover %s: an entry is NULL", o->name);
}

/* Each entry of the filled copy: the mover's own where it named one,
 * else the stub. */
#define CK_FILLED(f, in, entry)                                         \
	ck_assert_msg((f)->entry == ((in)->entry ? (in)->entry            \
						   : mover_stub_##entry), \
		      "mover %s: " #entry " not the mover's nor the stub",  \
		      (in)->name)

static void filled_from(const struct mover_ops *f, const struct mover_ops *in)
{
	ck_assert_str_eq(f->name, in->name);
	ck_assert_ptr_eq(f->submit, in->submit);
	ck_assert_ptr_eq(f->destroy, in->destroy);
	CK_FILLED(f, in, move_now);
	CK_FILLED(f, in, move_list);
	CK_FILLED(f, in, accepts);
	CK_FILLED(f, in, cancel_client);
	CK_FILLED(f, in, expire);
	CK_FILLED(f, in, poll);
	CK_FILLED(f, in, arm);
	CK_FILLED(f, in, needs_loop);
	CK_FILLED(f, in, peer_up);
	CK_FILLED(f, in, peer_down);
	CK_FILLED(f, in, frame);
	CK_FILLED(f, in, describe);
	CK_FILLED(f, in, set_cfg);
}

START_TEST(every_table_whole)
{
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		struct mover_ops f;

		memset(&f, 0, sizeof(f));
		ck_assert_int_eq(mover_ops_fill(&f, tables[i]), 0);
		whole(&f);
		filled_from(&f, tables[i]);
	}
}
END_TEST

static void own_submit(void *t, struct xop *op)
{
	(void)t, (void)op;
}

static void own_destroy(void *t)
{
	(void)t;
}

static bool own_poll(void *t)
{
	(void)t;
	return true;
}

/* A table naming only what its mover has (NULL elsewhere) is filled
 * with the stubs, its own entries kept; the stubs say "nothing here". */
START_TEST(sparse_table_filled)
{
	const struct mover_ops sparse = {
		.version = MOVER_OPS_VERSION,
		.name = "sparse",
		.submit = own_submit,
		.poll = own_poll,
		.destroy = own_destroy,
	};
	struct mover_ops f;

	ck_assert_int_eq(mover_ops_fill(&f, &sparse), 0);
	whole(&f);
	filled_from(&f, &sparse);
	ck_assert_ptr_eq(f.poll, own_poll);
	ck_assert_ptr_eq(f.move_now, mover_stub_move_now);
	ck_assert_ptr_eq(f.describe, mover_stub_describe);

	struct move_req rq = { 0 };
	ck_assert(f.move_now(NULL, &rq) == MOVER_SUBMIT);
	ck_assert(!f.accepts(NULL, NULL));
	ck_assert(f.arm(NULL));
	ck_assert(!f.needs_loop(NULL));
	ck_assert(!f.expire(NULL, 0));
	ck_assert_int_eq(f.describe(NULL, NULL, NULL, NULL, NULL, 0),
			 DESCRIBE_NONE);
}
END_TEST

/* What has no stub (submit: an op given must end; destroy: impl must
 * go), no name, another version: refused, out untouched. */
START_TEST(unfillable_refused)
{
	const struct mover_ops good = {
		.version = MOVER_OPS_VERSION,
		.name = "good",
		.submit = own_submit,
		.destroy = own_destroy,
	};
	struct mover_ops bad[4] = { good, good, good, good };
	bad[0].submit = NULL;
	bad[1].destroy = NULL;
	bad[2].name = NULL;
	bad[3].version = MOVER_OPS_VERSION + 1;

	for (size_t i = 0; i < 4; i++) {
		struct mover_ops f, before;

		memset(&f, 0xa5, sizeof(f));
		memcpy(&before, &f, sizeof(before));
		ck_assert_int_eq(mover_ops_fill(&f, &bad[i]), -EINVAL);
		ck_assert(memcmp(&f, &before, sizeof(f)) == 0);
	}
}
END_TEST

/* Names show in logs and xferctl: one per mover. */
START_TEST(names_distinct)
{
	size_t n = sizeof(tables) / sizeof(tables[0]);

	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			ck_assert_str_ne(tables[i]->name, tables[j]->name);
}
END_TEST

Suite *movers_suite(void)
{
	Suite *s = suite_create("movers");
	TCase *tc = tcase_create("tables");

	tcase_add_test(tc, every_table_whole);
	tcase_add_test(tc, sparse_table_filled);
	tcase_add_test(tc, unfillable_refused);
	tcase_add_test(tc, names_distinct);
	suite_add_tcase(s, tc);
	return s;
}
