/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring_fixture.h - a ring laid out by ring_layout in a zeroed,
 * page-aligned buffer, for the ring's unit tests (test_ring.c, the
 * tails-only protocol; test_ring_phase.c, per-entry phase).  One thread.
 */
#ifndef XFER_TEST_RING_FIXTURE_H
#define XFER_TEST_RING_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "common/ring.h"
#include "suites.h"

struct test_ring {
	struct xfer_ring_offsets off;
	void *mem;
	struct ring_view v;
};

static inline void test_ring_open(struct test_ring *r, uint32_t sq_entries)
{
	ck_assert_int_eq(ring_layout(sq_entries, 0, &r->off), 0);
	r->mem = aligned_alloc(4096, (r->off.map_size + 4095) & ~4095u);
	ck_assert_ptr_nonnull(r->mem);
	memset(r->mem, 0, r->off.map_size);
	*(uint32_t *)((char *)r->mem + r->off.magic) = XFER_RING_MAGIC;
	ck_assert_int_eq(ring_view_init(&r->v, r->mem, r->off.map_size,
					&r->off), 0);
}

static inline void test_ring_close(struct test_ring *r)
{
	free(r->mem);
	r->mem = NULL;
}

#endif /* XFER_TEST_RING_FIXTURE_H */
