/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_movers.c - every mover's ops table is whole: written for this
 * version of core/mover.h, named, and every entry set (a stub where the
 * mover lacks it, never NULL: the progress thread calls entries without
 * looking).
 */
#include <check.h>
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

START_TEST(every_table_whole)
{
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		whole(tables[i]);
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
	tcase_add_test(tc, names_distinct);
	suite_add_tcase(s, tc);
	return s;
}
