/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ring.c - the ring protocol of common/ring.h and common/ring.c:
 * ring_layout (sizes, alignment, no shared cache lines between the two
 * writers), ring_view_init rejecting bad setup replies, and both halves
 * of the SQ and CQ protocol driven by hand on an aligned heap buffer,
 * including free-running indices that wrap past UINT32_MAX, corrupt
 * indices and the NEED_WAKEUP doorbell flags.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/ring.h"
#include "ring_fixture.h"
#include "suites.h"

/* --- ring_layout --- */

static bool same_block(uint32_t a, uint32_t b)
{
	return a / RING_LINE == b / RING_LINE;
}

START_TEST(layout_every_size)
{
	for (uint32_t n = RING_MIN_SQ_ENTRIES; n <= RING_MAX_SQ_ENTRIES;
	     n *= 2) {
		struct xfer_ring_offsets o;

		ck_assert_int_eq(ring_layout(n, 0, &o), 0);
		ck_assert_uint_eq(o.sq_entries, n);
		ck_assert_uint_eq(o.cq_entries, 2 * n);

		const uint32_t fields[] = { o.magic, o.sq_head, o.sq_tail,
					    o.sq_flags, o.cq_head, o.cq_tail,
					    o.cq_flags, o.cq_overflow };
		const size_t nf = sizeof(fields) / sizeof(fields[0]);
		uint32_t sq_end = o.sqes + n * (uint32_t)sizeof(struct xfer_sqe);
		uint32_t cq_end = o.cqes + 2 * n * (uint32_t)sizeof(struct xfer_cqe);
		uint32_t arrays = o.sqes < o.cqes ? o.sqes : o.cqes;

		for (size_t i = 0; i < nf; i++) {
			ck_assert_uint_eq(fields[i] % 4, 0);
			/* every counter in the header, before both arrays */
			ck_assert_uint_le(fields[i] + 4, arrays);
			/* no two counters share bytes */
			for (size_t j = 0; j < i; j++)
				ck_assert_uint_ne(fields[i], fields[j]);
		}
		ck_assert_uint_eq(o.sqes % sizeof(struct xfer_sqe), 0);
		ck_assert_uint_eq(o.cqes % sizeof(struct xfer_cqe), 0);
		ck_assert(sq_end <= o.cqes || cq_end <= o.sqes);
		ck_assert_uint_le(sq_end, o.map_size);
		ck_assert_uint_le(cq_end, o.map_size);

		/* Producer and consumer indices on separate 128-byte
		 * blocks, and more generally no block holds a field that
		 * xferd writes beside one the client writes. */
		ck_assert(!same_block(o.sq_head, o.sq_tail));
		ck_assert(!same_block(o.cq_head, o.cq_tail));
		/* sq_flags, which a polling client reads at every look at
		 * its CQ, apart from what xferd stores at every pass: a store
		 * to its line would first take it back from the client. */
		ck_assert(!same_block(o.sq_flags, o.sq_head));
		ck_assert(!same_block(o.sq_flags, o.cq_tail));
		const uint32_t by_xferd[] = { o.sq_head, o.sq_flags, o.cq_tail,
					      o.cq_overflow };
		const uint32_t by_client[] = { o.sq_tail, o.cq_head,
					       o.cq_flags };
		for (size_t i = 0; i < 4; i++)
			for (size_t j = 0; j < 3; j++)
				ck_assert(!same_block(by_xferd[i],
						      by_client[j]));

		/* What xferd lays out, libxfer accepts. */
		struct test_ring r;
		test_ring_open(&r, n);
		ck_assert_ptr_eq(r.v.sqes, (char *)r.mem + o.sqes);
		ck_assert_ptr_eq(r.v.cqes, (char *)r.mem + o.cqes);
		ck_assert_ptr_eq((void *)r.v.sq_tail, (char *)r.mem + o.sq_tail);
		ck_assert_ptr_eq((void *)r.v.cq_head, (char *)r.mem + o.cq_head);
		test_ring_close(&r);
	}
}
END_TEST

START_TEST(layout_rejects_bad_sizes)
{
	const uint32_t bad[] = { 0, 1, 2, 4, RING_MIN_SQ_ENTRIES - 1,
				 RING_MIN_SQ_ENTRIES + 1, 12, 1000, 1023,
				 RING_MAX_SQ_ENTRIES - 1,
				 RING_MAX_SQ_ENTRIES + 1,
				 2 * RING_MAX_SQ_ENTRIES, 1u << 31,
				 UINT32_MAX };
	struct xfer_ring_offsets o;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&o, 0xa5, sizeof(o));
		ck_assert_msg(ring_layout(bad[i], 0, &o) == -EINVAL,
			      "ring_layout(%u) accepted", bad[i]);
	}
}
END_TEST

/* --- ring_view_init --- */

/* A valid layout of 64 entries in a buffer, modified by each case. */
static struct xfer_ring_offsets good;
static void *good_mem;

static void view_setup(void)
{
	ck_assert_int_eq(ring_layout(64, 4096, &good), 0);
	good_mem = aligned_alloc(4096, (good.map_size + 4095) & ~4095u);
	ck_assert_ptr_nonnull(good_mem);
	memset(good_mem, 0, good.map_size);
	*(uint32_t *)((char *)good_mem + good.magic) = XFER_RING_MAGIC;
}

static void view_teardown(void)
{
	free(good_mem);
}

static int try_view(const struct xfer_ring_offsets *o, size_t map_len)
{
	struct ring_view v;

	return ring_view_init(&v, good_mem, map_len, o);
}

/* The index area of prepared lists: inside, aligned, clear of both
 * queues; or absent. */
START_TEST(view_checks_index_area)
{
	struct xfer_ring_offsets o = good;
	struct ring_view v;

	ck_assert_uint_eq(good.idx % 4096, 0);
	ck_assert_uint_eq(good.idx_size, 4096);
	ck_assert_uint_eq(good.map_size, good.idx + good.idx_size);
	ck_assert_int_eq(ring_view_init(&v, good_mem, good.map_size, &o), 0);
	ck_assert_ptr_eq(v.idx, (char *)good_mem + good.idx);
	ck_assert_uint_eq(v.idx_size, 4096);

	o.idx_size = 0;  /* none: fine, and no pointer */
	ck_assert_int_eq(ring_view_init(&v, good_mem, good.map_size, &o), 0);
	ck_assert_ptr_null(v.idx);

	o = good;
	o.idx += 4;       /* unaligned */
	o.idx_size -= 8;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.idx_size += 8;  /* past the mapping */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.idx = good.cqes; /* over the CQEs */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.idx = good.sqes + 64; /* over the SQEs */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.idx = 0;        /* over the header */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	ck_assert_int_eq(ring_layout(64, 12, &o), -EINVAL);
	ck_assert_int_eq(ring_layout(64, RING_MAX_IDX_BYTES + 8, &o), -EINVAL);
}
END_TEST

/* The message areas (ring 3): only when asked for, on pages of their
 * own after everything else, one slot per SQ and CQ slot; a view takes
 * both or neither, inside, clear of every other area. */
START_TEST(view_checks_message_areas)
{
	struct xfer_ring_offsets o = good, m = good;
	struct ring_view v;

	ck_assert_uint_eq(good.sq_msg_size, 0);  /* not asked: ring 2 */
	ck_assert_uint_eq(good.cq_msg_size, 0);
	ck_assert_int_eq(ring_layout_msgs(&m), 0);
	ck_assert_uint_eq(m.sq_msgs % 4096, 0);
	ck_assert_uint_ge(m.sq_msgs, good.map_size);
	ck_assert_uint_eq(m.sq_msg_size, XFER_NOTIFY_MSG_MAX);
	ck_assert_uint_eq(m.cq_msg_size, sizeof(struct xfer_cqe_message));
	ck_assert_uint_ge(m.cq_msgs, m.sq_msgs + 64 * XFER_NOTIFY_MSG_MAX);
	ck_assert_uint_eq(m.map_size, m.cq_msgs + 128 * m.cq_msg_size);
	void *mem = aligned_alloc(4096, (m.map_size + 4095) & ~4095u);
	ck_assert_ptr_nonnull(mem);
	memset(mem, 0, m.map_size);
	*(uint32_t *)((char *)mem + m.magic) = XFER_RING_MAGIC;
	ck_assert_int_eq(ring_view_init(&v, mem, m.map_size, &m), 0);
	ck_assert_ptr_eq(v.sq_msgs, (uint8_t *)mem + m.sq_msgs);
	ck_assert_ptr_eq(ring_cq_msg_at(&v, 129),
			 (void *)((uint8_t *)mem + m.cq_msgs + m.cq_msg_size));
	ck_assert_ptr_eq(ring_sq_msg_at(&v, 65),
			 (uint8_t *)mem + m.sq_msgs + XFER_NOTIFY_MSG_MAX);
	o = m;
	o.cq_msg_size = 0;  /* one without the other */
	ck_assert_int_eq(ring_view_init(&v, mem, m.map_size, &o), -EPROTO);
	o = m;
	o.sq_msg_size = 8;  /* slots smaller than a message */
	ck_assert_int_eq(ring_view_init(&v, mem, m.map_size, &o), -EPROTO);
	o = m;
	o.cq_msgs = m.idx;  /* over the index area */
	ck_assert_int_eq(ring_view_init(&v, mem, m.map_size, &o), -EPROTO);
	o = m;
	o.sq_msgs = m.cq_msgs - 8;  /* over each other */
	ck_assert_int_eq(ring_view_init(&v, mem, m.map_size, &o), -EPROTO);
	o = m;
	o.sq_msgs = m.cqes;  /* over the CQEs */
	ck_assert_int_eq(ring_view_init(&v, mem, m.map_size, &o), -EPROTO);
	o = m;
	o.cq_msgs += 8;      /* past the mapping */
	ck_assert_int_eq(ring_view_init(&v, mem, m.map_size, &o), -EPROTO);
	/* A view of ring 2 has no message pointers. */
	ck_assert_int_eq(ring_view_init(&v, good_mem, good.map_size, &good), 0);
	ck_assert_ptr_null(v.sq_msgs);
	ck_assert_ptr_null(ring_cq_msg_at(&v, 0));
	free(mem);
}
END_TEST

/*
 * The CQ sender area (struct xfer_cqe_sender): the ABI's sizes and
 * offsets, where ring_layout puts it, what ring_view_init accepts.
 */
START_TEST(sender_abi)
{
	/* The record's fields where xfer_ring.h says: a client built
	 * against this header reads them there. */
	ck_assert_uint_eq(sizeof(struct xfer_cqe_sender), 32);
	ck_assert_uint_eq(offsetof(struct xfer_cqe_sender, node), 0);
	ck_assert_uint_eq(offsetof(struct xfer_cqe_sender, client), 16);
	ck_assert_uint_eq(offsetof(struct xfer_cqe_sender, uid), 24);
	ck_assert_uint_eq(offsetof(struct xfer_cqe_sender, flags), 28);
	ck_assert_uint_eq(sizeof(struct xfer_cqe), 32);
	/* The offsets message grew at its end only. */
	ck_assert_uint_eq(offsetof(struct xfer_ring_offsets, idx_size), 14 * 4);
	ck_assert_uint_eq(offsetof(struct xfer_ring_offsets, cq_senders), 15 * 4);
	ck_assert_uint_eq(offsetof(struct xfer_ring_offsets, cq_sender_size),
			  16 * 4);
	ck_assert_uint_ge(XFER_RING_VERSION, 2);

	for (uint32_t n = RING_MIN_SQ_ENTRIES; n <= RING_MAX_SQ_ENTRIES;
	     n *= 2) {
		for (uint32_t idx = 0; idx <= 4096; idx += 4096) {
			struct xfer_ring_offsets o;
			ck_assert_int_eq(ring_layout(n, idx, &o), 0);
			ck_assert_uint_eq(o.cq_sender_size,
					  sizeof(struct xfer_cqe_sender));
			/* After the CQEs on a block of its own (a
			 * notification's record shares no line with the
			 * CQEs of a round trip), before the index area. */
			uint32_t cq_end = o.cqes + o.cq_entries * 32;
			ck_assert_uint_ge(o.cq_senders, cq_end);
			ck_assert_uint_eq(o.cq_senders % RING_LINE, 0);
			uint32_t end = o.cq_senders + o.cq_entries * 32;
			if (idx)
				ck_assert_uint_le(end, o.idx);
			else
				ck_assert_uint_eq(end, o.map_size);
		}
	}
}
END_TEST

START_TEST(view_checks_sender_area)
{
	struct xfer_ring_offsets o = good;
	struct ring_view v;

	ck_assert_int_eq(ring_view_init(&v, good_mem, good.map_size, &o), 0);
	ck_assert_ptr_eq(v.senders, (char *)good_mem + good.cq_senders);
	ck_assert_uint_eq(v.sender_size, 32);
	/* Slot i's record, wrapping with the CQ's indices. */
	ck_assert_ptr_eq(ring_cq_sender_at(&v, 3),
			 (char *)good_mem + good.cq_senders + 3 * 32);
	ck_assert_ptr_eq(ring_cq_sender_at(&v, good.cq_entries + 3),
			 ring_cq_sender_at(&v, 3));
	ck_assert_ptr_eq(ring_cq_sender_at(&v, UINT32_MAX),
			 ring_cq_sender_at(&v, good.cq_entries - 1));

	o.cq_sender_size = 0;  /* an older xferd: none, no pointer */
	ck_assert_int_eq(ring_view_init(&v, good_mem, good.map_size, &o), 0);
	ck_assert_ptr_null(v.senders);
	ck_assert_ptr_null(ring_cq_sender_at(&v, 0));

	/* A larger record of a later xferd: stepped over by its size. */
	o = good;
	o.cq_sender_size = 40;
	ck_assert_int_eq(ring_view_init(&v, good_mem, good.map_size, &o), 0);
	ck_assert_ptr_eq(ring_cq_sender_at(&v, 2),
			 (char *)good_mem + good.cq_senders + 80);

	o = good;
	o.cq_sender_size = 24;  /* smaller than the fields we read */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_sender_size = 36;  /* not a multiple of 8 */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_senders += 4;      /* unaligned */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_senders = good.cqes + 32;  /* over the CQEs */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_senders = good.sqes;       /* over the SQEs */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_senders = 0;               /* over the header */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_senders = good.idx - 32;   /* into the index area */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_sender_size = 1u << 20;    /* far past the mapping */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_senders = UINT32_MAX - 7;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
}
END_TEST

START_TEST(view_accepts_good_layout)
{
	struct xfer_ring_offsets o = good;

	ck_assert_int_eq(try_view(&o, good.map_size), 0);
	/* A mapping longer than map_size is fine. */
	ck_assert_int_eq(try_view(&good, good.map_size + 64), 0);

	/* Everything shifted by one SQE: still aligned, still inside. */
	o = good;
	o.sqes += 64;
	o.cqes += 64;
	o.cq_senders += 64;
	o.map_size += 64;
	ck_assert_int_eq(try_view(&o, o.map_size), 0);

	/* Offsets, not struct positions, decide: arrays in the other
	 * order are a layout libxfer must accept. */
	o = good;
	o.cqes = good.sqes;
	o.sqes = good.sqes + good.cq_entries * (uint32_t)sizeof(struct xfer_cqe);
	ck_assert_int_eq(try_view(&o, good.map_size), 0);
}
END_TEST

START_TEST(view_rejects_outside_mapping)
{
	struct xfer_ring_offsets o;

	/* The mapping is shorter than the layout says. */
	ck_assert_int_eq(try_view(&good, good.map_size - 1), -EPROTO);
	ck_assert_int_eq(try_view(&good, 0), -EPROTO);

	/* The CQ array runs past map_size. */
	o = good;
	o.map_size = good.map_size - (uint32_t)sizeof(struct xfer_cqe);
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);

	/* Arrays placed beyond the end. */
	o = good;
	o.cqes = good.map_size;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.sqes = UINT32_MAX - 63;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cqes = UINT32_MAX - 31;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);

	/* A counter outside the mapping, and one far outside. */
	o = good;
	o.sq_tail = good.map_size;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_head = UINT32_MAX - 3;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.magic = UINT32_MAX;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
}
END_TEST

START_TEST(view_rejects_misaligned)
{
	struct xfer_ring_offsets o;
	uint32_t *fields[] = { &o.magic, &o.sq_head, &o.sq_tail, &o.sq_flags,
			       &o.cq_head, &o.cq_tail, &o.cq_flags,
			       &o.cq_overflow };

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		for (uint32_t d = 1; d < 4; d++) {
			o = good;
			*fields[i] += d;
			ck_assert_msg(try_view(&o, good.map_size) == -EPROTO,
				      "field %zu misaligned by %u accepted", i,
				      d);
		}
	}
	/* The arrays: room is made after each so that alignment is the
	 * only thing wrong. */
	o = good;
	o.sqes += 32; /* SQEs must be 64-byte aligned */
	o.cqes += 64;
	o.map_size += 64;
	ck_assert_int_eq(try_view(&o, o.map_size), -EPROTO);
	o = good;
	o.cqes += 16; /* CQEs 32-byte aligned */
	o.map_size += 64;
	ck_assert_int_eq(try_view(&o, o.map_size), -EPROTO);
	o = good;
	o.cqes += 4;
	o.map_size += 64;
	ck_assert_int_eq(try_view(&o, o.map_size), -EPROTO);
	o = good;
	o.cqes += 32; /* the control: 32 is enough for CQEs */
	o.cq_senders += 64;
	o.map_size += 64;
	ck_assert_int_eq(try_view(&o, o.map_size), 0);
}
END_TEST

START_TEST(view_rejects_overlap)
{
	struct xfer_ring_offsets o;

	/* The CQ array starts inside the SQ array. */
	o = good;
	o.cqes = good.sqes + 64;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cqes = good.sqes;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cqes = good.cqes - 32; /* last SQE and first CQE share 32 bytes */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);

	/* The SQ array starts inside the CQ array (arrays swapped). */
	o = good;
	o.cqes = good.sqes;
	o.sqes = good.sqes + 64;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);

	/* A counter inside an entry array. */
	o = good;
	o.sq_tail = good.sqes;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_head = good.cqes + 8;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_overflow = good.cqes - 4; /* last bytes of the SQ array */
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
}
END_TEST

START_TEST(view_rejects_bad_magic)
{
	uint32_t *magic = (uint32_t *)((char *)good_mem + good.magic);

	*magic = XFER_RING_MAGIC ^ 1;
	ck_assert_int_eq(try_view(&good, good.map_size), -EPROTO);
	*magic = 0;
	ck_assert_int_eq(try_view(&good, good.map_size), -EPROTO);
	*magic = XFER_RING_MAGIC;
	ck_assert_int_eq(try_view(&good, good.map_size), 0);

	/* Magic offset pointing at another (zero) counter. */
	struct xfer_ring_offsets o = good;
	o.magic = good.sq_head;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
}
END_TEST

START_TEST(view_rejects_bad_entry_counts)
{
	struct xfer_ring_offsets o;

	o = good;
	o.cq_entries = good.sq_entries;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_entries = 4 * good.sq_entries;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_entries = 2 * good.sq_entries - 1;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.cq_entries = 0;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);

	/* Not a power of two (with a consistent CQ size). */
	o = good;
	o.sq_entries = 48;
	o.cq_entries = 96;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
	o = good;
	o.sq_entries = 0;
	o.cq_entries = 0;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);

	/* Too large, and 2 * sq overflowing 32 bits. */
	o = good;
	o.sq_entries = 2 * RING_MAX_SQ_ENTRIES;
	o.cq_entries = 4 * RING_MAX_SQ_ENTRIES;
	ck_assert_int_eq(try_view(&o, SIZE_MAX), -EPROTO);
	o = good;
	o.sq_entries = 1u << 31;
	o.cq_entries = 0;
	ck_assert_int_eq(try_view(&o, SIZE_MAX), -EPROTO);

	/* More entries than the arrays have room for. */
	o = good;
	o.sq_entries = 2 * good.sq_entries;
	o.cq_entries = 2 * o.sq_entries;
	ck_assert_int_eq(try_view(&o, good.map_size), -EPROTO);
}
END_TEST

/* --- the protocol, both halves in one thread --- */

START_TEST(sq_full_and_empty)
{
	struct test_ring r;
	const uint32_t n = 16;

	test_ring_open(&r, n);
	uint32_t tail = 0, head = 0;

	ck_assert_uint_eq(ring_sq_space(&r.v, tail), n);
	ck_assert_uint_eq(ring_sq_avail(&r.v, head), 0);

	for (uint32_t i = 0; i < n; i++) {
		struct xfer_sqe *s = ring_sqe_at(&r.v, tail);
		*s = (struct xfer_sqe){ .opcode = XFER_OP_WRITE,
					.user_data = 1000 + i, .len = i };
		tail++;
		ck_assert(!ring_sq_publish(&r.v, tail));
		ck_assert_uint_eq(ring_sq_space(&r.v, tail), n - i - 1);
		ck_assert_uint_eq(ring_sq_avail(&r.v, head), i + 1);
	}
	ck_assert_uint_eq(ring_sq_space(&r.v, tail), 0);
	ck_assert_uint_eq(ring_sq_avail(&r.v, head), n);

	/* The consumer copies out in order; space returns only when it
	 * releases. */
	for (uint32_t i = 0; i < n; i++) {
		struct xfer_sqe c;
		ring_sqe_copy(&r.v, head + i, &c);
		ck_assert_uint_eq(c.opcode, XFER_OP_WRITE);
		ck_assert_uint_eq(c.user_data, 1000 + i);
		ck_assert_uint_eq(c.len, i);
	}
	ck_assert_uint_eq(ring_sq_space(&r.v, tail), 0);
	head += n / 2;
	ring_sq_release(&r.v, head);
	ck_assert_uint_eq(ring_sq_space(&r.v, tail), n / 2);
	ck_assert_uint_eq(ring_sq_avail(&r.v, head), n / 2);
	head += n / 2;
	ring_sq_release(&r.v, head);
	ck_assert_uint_eq(ring_sq_space(&r.v, tail), n);
	ck_assert_uint_eq(ring_sq_avail(&r.v, head), 0);
	ck_assert_uint_eq(*r.v.sq_head, n);
	ck_assert_uint_eq(*r.v.sq_tail, n);
	test_ring_close(&r);
}
END_TEST

START_TEST(cq_full_and_empty)
{
	struct test_ring r;
	const uint32_t n = 8; /* 16 CQEs */

	test_ring_open(&r, n);
	uint32_t tail = 0, head = 0, cn = r.v.cq_entries;

	ck_assert_uint_eq(cn, 2 * n);
	ck_assert_uint_eq(ring_cq_space(&r.v, tail), cn);
	ck_assert_uint_eq(ring_cq_avail(&r.v, head), 0);
	for (uint32_t i = 0; i < cn; i++) {
		*ring_cqe_at(&r.v, tail) = (struct xfer_cqe){
			.user_data = 7 * i, .result = -(int64_t)i,
			.path = XFER_PATH_MEMCPY };
		tail++;
		ck_assert(!ring_cq_publish(&r.v, tail));
	}
	ck_assert_uint_eq(ring_cq_space(&r.v, tail), 0);
	ck_assert_uint_eq(ring_cq_avail(&r.v, head), cn);

	for (uint32_t i = 0; i < cn; i++) {
		const struct xfer_cqe *c = ring_cqe_at(&r.v, head);
		ck_assert_uint_eq(c->user_data, 7 * i);
		ck_assert_int_eq(c->result, -(int64_t)i);
		ck_assert_uint_eq(c->path, XFER_PATH_MEMCPY);
		head++;
		ring_cq_release(&r.v, head);
		ck_assert_uint_eq(ring_cq_space(&r.v, tail), i + 1);
	}
	ck_assert_uint_eq(ring_cq_avail(&r.v, head), 0);
	test_ring_close(&r);
}
END_TEST

/* Fill and drain both queues in uneven steps, starting from index
 * `start` on every counter, checking order and slot placement. */
static void run_wrap(uint32_t start)
{
	struct test_ring r;
	const uint32_t n = 8;

	test_ring_open(&r, n);
	*r.v.sq_head = *r.v.sq_tail = start;
	*r.v.cq_head = *r.v.cq_tail = start;

	uint32_t sq_tail = start, sq_head = start;
	uint32_t cq_tail = start, cq_head = start;
	uint64_t produced = 0, consumed = 0, reaped = 0;
	bool wrapped = false;

	for (unsigned round = 0; round < 40; round++) {
		/* client: submit up to 1 + round % n entries */
		uint32_t want = 1 + round % n;
		uint32_t space = ring_sq_space(&r.v, sq_tail);
		ck_assert_uint_le(space, n);
		for (uint32_t i = 0; i < want && i < space; i++) {
			struct xfer_sqe *s = ring_sqe_at(&r.v, sq_tail);
			ck_assert_ptr_eq(s, &r.v.sqes[sq_tail % n]);
			*s = (struct xfer_sqe){ .user_data = produced++ };
			sq_tail++;
		}
		ring_sq_publish(&r.v, sq_tail);

		/* xferd: take what is there (as far as the CQ has room),
		 * answer each with a CQE */
		uint32_t avail = ring_sq_avail(&r.v, sq_head);
		ck_assert_uint_le(avail, n);
		uint32_t cq_room = ring_cq_space(&r.v, cq_tail);
		uint32_t take = avail < cq_room ? avail : cq_room;
		for (uint32_t i = 0; i < take; i++) {
			struct xfer_sqe s;
			ring_sqe_copy(&r.v, sq_head, &s);
			ck_assert_uint_eq(s.user_data, consumed);
			consumed++;
			sq_head++;
			struct xfer_cqe *c = ring_cqe_at(&r.v, cq_tail);
			ck_assert_ptr_eq(c, &r.v.cqes[cq_tail % (2 * n)]);
			*c = (struct xfer_cqe){ .user_data = s.user_data,
						.result = (int64_t)s.user_data };
			cq_tail++;
		}
		ring_sq_release(&r.v, sq_head);
		ring_cq_publish(&r.v, cq_tail);

		/* client: reap every other round, so the CQ fills up */
		if (round % 2) {
			uint32_t got = ring_cq_avail(&r.v, cq_head);
			ck_assert_uint_le(got, 2 * n);
			for (uint32_t i = 0; i < got; i++) {
				const struct xfer_cqe *c =
					ring_cqe_at(&r.v, cq_head);
				ck_assert_uint_eq(c->user_data, reaped);
				ck_assert_int_eq(c->result, (int64_t)reaped);
				reaped++;
				cq_head++;
			}
			ring_cq_release(&r.v, cq_head);
		}
		if (sq_tail < start || cq_head < start)
			wrapped = true;
	}
	ck_assert(wrapped || start == 0);
	ck_assert_uint_gt(reaped, 100);
	ck_assert_uint_eq(*r.v.sq_tail, sq_tail);
	ck_assert_uint_eq(*r.v.cq_head, cq_head);
	ck_assert_uint_eq(sq_tail - start, (uint32_t)produced);
	test_ring_close(&r);
}

START_TEST(wrap_around_uint32)
{
	run_wrap(0xFFFFFFF0u);
	run_wrap(UINT32_MAX);
	run_wrap(UINT32_MAX - 8);
	run_wrap(0);
}
END_TEST

START_TEST(cq_space_corrupt_head)
{
	struct test_ring r;

	test_ring_open(&r, 8);
	uint32_t cn = r.v.cq_entries;
	uint32_t tail = 0xFFFFFFF8u; /* xferd's private tail */

	*r.v.cq_head = tail;
	ck_assert_uint_eq(ring_cq_space(&r.v, tail), cn);
	*r.v.cq_head = tail - 3;
	ck_assert_uint_eq(ring_cq_space(&r.v, tail), cn - 3);
	*r.v.cq_head = tail - cn;
	ck_assert_uint_eq(ring_cq_space(&r.v, tail), 0);

	/* A head beyond the tail (the client claims to have read CQEs
	 * that were never written) must not look like free space. */
	*r.v.cq_head = tail + 1;
	ck_assert_uint_eq(ring_cq_space(&r.v, tail), 0);
	*r.v.cq_head = tail + 20; /* wraps past 0 */
	ck_assert_uint_eq(ring_cq_space(&r.v, tail), 0);
	*r.v.cq_head = tail - cn - 1;
	ck_assert_uint_eq(ring_cq_space(&r.v, tail), 0);
	*r.v.cq_head = tail ^ 0x80000000u;
	ck_assert_uint_eq(ring_cq_space(&r.v, tail), 0);
	test_ring_close(&r);
}
END_TEST

START_TEST(sq_avail_tail_beyond_ring)
{
	struct test_ring r;

	test_ring_open(&r, 8);
	uint32_t n = r.v.sq_entries, head = 0xFFFFFFFCu;

	*r.v.sq_head = head;
	*r.v.sq_tail = head + n;
	ck_assert_uint_eq(ring_sq_avail(&r.v, head), n);
	/* One beyond: more than the ring holds, which xferd must treat as
	 * corruption rather than execute stale slots. */
	*r.v.sq_tail = head + n + 1;
	ck_assert_uint_gt(ring_sq_avail(&r.v, head), n);
	/* A tail behind the head reads as a huge count. */
	*r.v.sq_tail = head - 1;
	ck_assert_uint_eq(ring_sq_avail(&r.v, head), UINT32_MAX);
	ck_assert_uint_gt(ring_sq_avail(&r.v, head), n);
	test_ring_close(&r);
}
END_TEST

START_TEST(need_wakeup_flags)
{
	struct test_ring r;

	test_ring_open(&r, 8);
	/* SQ: xferd sets the flag, the client's publish reports it. */
	ck_assert(!ring_sq_publish(&r.v, 1));
	ring_flag_set(r.v.sq_flags, XFER_SQ_NEED_WAKEUP);
	ck_assert_uint_eq(*r.v.sq_flags, XFER_SQ_NEED_WAKEUP);
	ck_assert(ring_sq_publish(&r.v, 2));
	ck_assert_uint_eq(*r.v.sq_tail, 2);
	ring_flag_set(r.v.sq_flags, XFER_SQ_DEAD);
	ck_assert(ring_sq_publish(&r.v, 3));
	ring_flag_clear(r.v.sq_flags, XFER_SQ_NEED_WAKEUP);
	ck_assert_uint_eq(*r.v.sq_flags, XFER_SQ_DEAD);
	/* DEAD alone is not a request to ring the doorbell. */
	ck_assert(!ring_sq_publish(&r.v, 4));

	/* CQ: the client sets the flag, xferd's publish reports it. */
	ck_assert(!ring_cq_publish(&r.v, 1));
	ring_flag_set(r.v.cq_flags, XFER_CQ_NEED_WAKEUP);
	ck_assert(ring_cq_publish(&r.v, 2));
	ck_assert_uint_eq(*r.v.cq_tail, 2);
	ring_flag_clear(r.v.cq_flags, XFER_CQ_NEED_WAKEUP);
	ck_assert(!ring_cq_publish(&r.v, 3));
	ck_assert_uint_eq(*r.v.cq_flags, 0);
	/* The SQ and CQ flags are separate words. */
	ck_assert_uint_eq(*r.v.sq_flags, XFER_SQ_DEAD);
	test_ring_close(&r);
}
END_TEST

/* --- the protocol across two threads --- */

#define SPSC_COUNT 200000u

struct spsc {
	struct test_ring r;
	uint64_t bad; /* first out-of-order value + 1, or 0 */
};

/* xferd's half: copy SQEs out, release them, answer with CQEs. */
static void *spsc_consumer(void *arg)
{
	struct spsc *s = arg;
	struct ring_view *v = &s->r.v;
	uint32_t sq_head = *v->sq_head, cq_tail = *v->cq_tail;
	uint64_t next = 0;

	while (next < SPSC_COUNT) {
		uint32_t avail = ring_sq_avail(v, sq_head);
		uint32_t room = ring_cq_space(v, cq_tail);
		uint32_t take = avail < room ? avail : room;
		if (avail > v->sq_entries) {
			s->bad = UINT64_MAX;
			return NULL;
		}
		if (take == 0) {
			sched_yield();
			continue;
		}
		for (uint32_t i = 0; i < take; i++) {
			struct xfer_sqe e;
			ring_sqe_copy(v, sq_head++, &e);
			if (e.user_data != next || e.len != ~next) {
				if (!s->bad)
					s->bad = next + 1;
			}
			*ring_cqe_at(v, cq_tail++) = (struct xfer_cqe){
				.user_data = e.user_data,
				.result = (int64_t)(e.len ^ 0x5555)
			};
			next++;
		}
		ring_sq_release(v, sq_head);
		ring_cq_publish(v, cq_tail);
	}
	return NULL;
}

START_TEST(spsc_two_threads)
{
	struct spsc s = { .bad = 0 };
	pthread_t th;

	test_ring_open(&s.r, 32);
	struct ring_view *v = &s.r.v;
	/* Start close to the wrap so it happens under concurrency. */
	const uint32_t start = UINT32_MAX - 1000;
	*v->sq_head = *v->sq_tail = *v->cq_head = *v->cq_tail = start;
	ck_assert_int_eq(pthread_create(&th, NULL, spsc_consumer, &s), 0);

	uint32_t sq_tail = start, cq_head = start;
	uint64_t sent = 0, got = 0, bad_cqe = 0;
	while (got < SPSC_COUNT) {
		uint32_t space = ring_sq_space(v, sq_tail);
		bool any = false;
		for (uint32_t i = 0; i < space && sent < SPSC_COUNT; i++) {
			*ring_sqe_at(v, sq_tail++) = (struct xfer_sqe){
				.user_data = sent, .len = ~sent };
			sent++;
			any = true;
		}
		if (any)
			ring_sq_publish(v, sq_tail);
		uint32_t avail = ring_cq_avail(v, cq_head);
		for (uint32_t i = 0; i < avail; i++) {
			const struct xfer_cqe *c = ring_cqe_at(v, cq_head++);
			if ((c->user_data != got ||
			     c->result != (int64_t)(~got ^ 0x5555)) &&
			    !bad_cqe)
				bad_cqe = got + 1;
			got++;
		}
		if (avail)
			ring_cq_release(v, cq_head);
		else if (!any)
			sched_yield();
	}
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(s.bad == 0, "consumer saw a wrong SQE at %llu",
		      (unsigned long long)s.bad - 1);
	ck_assert_msg(bad_cqe == 0, "producer saw a wrong CQE at %llu",
		      (unsigned long long)bad_cqe - 1);
	ck_assert_uint_eq(sq_tail, start + SPSC_COUNT);
	ck_assert_uint_eq(ring_sq_avail(v, sq_tail), 0);
	ck_assert_uint_eq(ring_cq_avail(v, cq_head), 0);
	test_ring_close(&s.r);
}
END_TEST

Suite *ring_suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc;

	tc = tcase_create("layout");
	tcase_add_test(tc, layout_every_size);
	tcase_add_test(tc, layout_rejects_bad_sizes);
	tcase_add_test(tc, sender_abi);
	suite_add_tcase(s, tc);

	tc = tcase_create("view_init");
	tcase_add_checked_fixture(tc, view_setup, view_teardown);
	tcase_add_test(tc, view_accepts_good_layout);
	tcase_add_test(tc, view_checks_index_area);
	tcase_add_test(tc, view_checks_sender_area);
	tcase_add_test(tc, view_checks_message_areas);
	tcase_add_test(tc, view_rejects_outside_mapping);
	tcase_add_test(tc, view_rejects_misaligned);
	tcase_add_test(tc, view_rejects_overlap);
	tcase_add_test(tc, view_rejects_bad_magic);
	tcase_add_test(tc, view_rejects_bad_entry_counts);
	suite_add_tcase(s, tc);

	tc = tcase_create("protocol");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, sq_full_and_empty);
	tcase_add_test(tc, cq_full_and_empty);
	tcase_add_test(tc, wrap_around_uint32);
	tcase_add_test(tc, cq_space_corrupt_head);
	tcase_add_test(tc, sq_avail_tail_beyond_ring);
	tcase_add_test(tc, need_wakeup_flags);
	tcase_add_test(tc, spsc_two_threads);
	suite_add_tcase(s, tc);
	return s;
}
