/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_progress.c - the descriptor engine (daemon/engine/progress*.c with
 * region.c and the same-node movers of daemon/local/) in-process,
 * without sockets: a real progress thread, two fake clients with memfd
 * regions and rings in heap memory, and the test playing both clients
 * through the ring protocol.
 *
 * Covered: WRITE/READ data and paths (memcpy between memfds; CMA on the
 * test's own memory and on a child's, before and after it exits), NOP,
 * every class of invalid descriptor (right errno, no memory touched, no
 * notification), imports and stale imports, linked batches, NOTIFY and
 * write-with-notify, notifications held for a full CQ and their bound,
 * CQ back-pressure, index
 * wrap-around, a corrupted SQ tail and detaching.  Every wait is bounded
 * (WAIT_MS); nothing depends on timing.
 *
 * Longer than 800 lines: every case shares one fixture (thread, regions,
 * rings) and its client-side helpers; one suite in one file keeps them
 * together.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/progress.h"
#include "mem/cma.h"
#include "mem/region.h"
#include "common/ring.h"
#include "suites.h"
#include "common/token_codec.h"

#define WAIT_MS     5000
#define SQ_ENTRIES  8u           /* CQ: 16 */
#define REGION_LEN  (64u << 10)
#define A_ID        101u
#define B_ID        202u
/* A's indices start just below the 32-bit wrap, so any test that
 * submits more than a few entries crosses it. */
#define A_START     0xFFFFFFF8u
/* This xferd's instance id: the node of every sender here. */
static const uint8_t SELF_ID[LINK_ID_LEN] = "instance-id-16b";

struct fake_client {
	struct prog_client pc;
	void *ring_mem;
	uint32_t sq_tail, cq_head;   /* the client's private indices */
	uint8_t *map;                /* the client's own mapping */
	uint64_t handle;             /* its region */
	uint8_t key[TOKEN_KEY_LEN];  /* the region's key (RegReply) */
	int wake;                    /* its end of the CQ doorbell pair */
};

static struct regtab *regs;
static struct progress *prog;
static struct fake_client A, B;
static uint8_t *snap_a, *snap_b;  /* expected region contents */

/* Notices received so far (see on_notice). */
static struct {
	struct prog_client *pc;
	enum notice_kind kind;
} seen[16];
static unsigned nseen;

/* --- helpers --- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void add_region(struct fake_client *c, uint8_t seed)
{
	int fd = memfd_create("unit-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct region *r;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, REGION_LEN), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW),
			 0);
	c->map = mmap(NULL, REGION_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		      0);
	ck_assert(c->map != MAP_FAILED);
	for (size_t i = 0; i < REGION_LEN; i++)
		c->map[i] = (uint8_t)(seed + i * 7 + (i >> 8));
	ck_assert_int_eq(region_create_memfd(fd, REGION_LEN, c->pc.id, &r), 0);
	memcpy(c->key, region_key(r), TOKEN_KEY_LEN);
	regtab_add_region(regs, r);
	c->handle = region_handle(r);
	ck_assert_uint_ne(c->handle, 0);
}

static void open_client(struct fake_client *c, uint64_t id, uint32_t start,
			uint8_t seed)
{
	struct xfer_ring_offsets off;

	memset(c, 0, sizeof(*c));
	c->pc.id = id;
	c->pc.uid = (uint32_t)(id * 10);  /* as SO_PEERCRED would give */
	ck_assert_int_eq(ring_layout(SQ_ENTRIES, 0, &off), 0);
	c->ring_mem = aligned_alloc(4096, (off.map_size + 4095) & ~4095u);
	ck_assert_ptr_nonnull(c->ring_mem);
	memset(c->ring_mem, 0, off.map_size);
	*(uint32_t *)((char *)c->ring_mem + off.magic) = XFER_RING_MAGIC;
	ck_assert_int_eq(ring_view_init(&c->pc.ring, c->ring_mem, off.map_size,
					&off), 0);
	/* Both sides agree on where the free-running indices start. */
	*c->pc.ring.sq_head = *c->pc.ring.sq_tail = start;
	*c->pc.ring.cq_head = *c->pc.ring.cq_tail = start;
	c->pc.sq_head = c->pc.cq_tail = start;
	c->sq_tail = c->cq_head = start;
	ck_assert_int_eq(progress_doorbells(&c->pc, &c->wake), 0);
	add_region(c, seed);
}

static void close_client(struct fake_client *c)
{
	munmap(c->map, REGION_LEN);
	progress_doorbells_close(&c->pc);
	close(c->wake);
	free(c->ring_mem);
}

static struct nq_pool uid_pool;

static void progress_setup(void)
{
	nseen = 0;
	regs = regtab_create();
	ck_assert_ptr_nonnull(regs);
	open_client(&A, A_ID, A_START, 1);
	open_client(&B, B_ID, 0, 100);
	snap_a = malloc(REGION_LEN);
	snap_b = malloc(REGION_LEN);
	ck_assert(snap_a && snap_b);
	memcpy(snap_a, A.map, REGION_LEN);
	memcpy(snap_b, B.map, REGION_LEN);
	/* No spinning: the thread sleeps after every burst, so the
	 * doorbell protocol is exercised all the time. */
	prog = progress_create(regs, 0, -1);
	ck_assert_ptr_nonnull(prog);
	progress_set_instance_id(prog, SELF_ID);
	ck_assert_int_eq(progress_start(prog), 0);
	/* A and B are clients of one user: one pool of held
	 * notifications (engine/notify_queue.h). */
	atomic_store(&uid_pool.held, 0);
	A.pc.notify.pool = &uid_pool;
	B.pc.notify.pool = &uid_pool;
	progress_attach(prog, &A.pc);
	progress_attach(prog, &B.pc);
}

static void progress_teardown(void)
{
	progress_destroy(prog);
	regtab_destroy(regs);
	close_client(&A);
	close_client(&B);
	free(snap_a);
	free(snap_b);
}

/* The regions hold exactly what the snapshots say. */
static void assert_regions_unchanged(void)
{
	ck_assert_msg(memcmp(A.map, snap_a, REGION_LEN) == 0,
		      "region of A changed");
	ck_assert_msg(memcmp(B.map, snap_b, REGION_LEN) == 0,
		      "region of B changed");
}

/* As libxfer does: 8 bytes on the client's SQ eventfd. */
static void ring_doorbell(struct fake_client *c)
{
	uint64_t one = 1;

	ck_assert_int_eq(write(c->pc.sq_efd, &one, sizeof(one)),
			 sizeof(one));
}

/* Publish SQEs as a client does: wait for room, write, publish, ring
 * the doorbell only when xferd asked for it. */
static void submit(struct fake_client *c, const struct xfer_sqe *sqes,
		   unsigned n)
{
	struct ring_view *v = &c->pc.ring;
	int64_t deadline = now_ms() + WAIT_MS;
	unsigned i = 0;

	while (i < n) {
		uint32_t space = ring_sq_space(v, c->sq_tail);
		ck_assert_uint_le(space, SQ_ENTRIES);
		if (space == 0) {
			ck_assert_msg(now_ms() < deadline, "SQ stays full");
			poll(NULL, 0, 1);
			continue;
		}
		for (; space > 0 && i < n; space--, i++)
			*ring_sqe_at(v, c->sq_tail++) = sqes[i];
		if (ring_sq_publish(v, c->sq_tail))
			ring_doorbell(c);
	}
}

static void submit1(struct fake_client *c, struct xfer_sqe sqe)
{
	submit(c, &sqe, 1);
}

/* Wait for and consume the next CQE, sleeping on the CQ doorbell the
 * way libxfer does (flag, re-check, poll). */
static struct xfer_cqe wait_cqe(struct fake_client *c)
{
	struct ring_view *v = &c->pc.ring;
	int64_t deadline = now_ms() + WAIT_MS;

	for (;;) {
		if (ring_cq_avail(v, c->cq_head)) {
			struct xfer_cqe cqe = *ring_cqe_at(v, c->cq_head);
			ring_cq_release(v, ++c->cq_head);
			/* xferd may be asleep waiting for CQ room. */
			if (ring_cq_room_wanted(v))
				ring_doorbell(c);
			return cqe;
		}
		int64_t left = deadline - now_ms();
		ck_assert_msg(left > 0, "client %llu: no CQE within %d ms",
			      (unsigned long long)c->pc.id, WAIT_MS);
		ring_flag_set(v->cq_flags, XFER_CQ_NEED_WAKEUP);
		if (ring_cq_avail(v, c->cq_head) == 0) {
			struct pollfd pfd = { .fd = c->wake,
					      .events = POLLIN };
			uint64_t cnt;
			poll(&pfd, 1, (int)left);
			while (read(c->wake, &cnt, sizeof(cnt)) > 0)
				;
			ck_assert_int_eq(errno, EAGAIN);
		}
		ring_flag_clear(v->cq_flags, XFER_CQ_NEED_WAKEUP);
	}
}

/* Nothing more is in the CQ (call after the CQE that came last). */
static void assert_cq_empty(struct fake_client *c)
{
	ck_assert_msg(ring_cq_avail(&c->pc.ring, c->cq_head) == 0,
		      "client %llu has %u unexpected CQEs",
		      (unsigned long long)c->pc.id,
		      ring_cq_avail(&c->pc.ring, c->cq_head));
}

static uint32_t sq_flags_of(const struct fake_client *c)
{
	return atomic_load(c->pc.ring.sq_flags);
}

/* Submit one SQE and return its completion. */
static struct xfer_cqe run1(struct fake_client *c, struct xfer_sqe sqe)
{
	submit1(c, sqe);
	struct xfer_cqe cqe = wait_cqe(c);
	ck_assert_uint_eq(cqe.user_data, sqe.user_data);
	ck_assert_uint_eq(cqe.flags, 0);
	return cqe;
}

/* Import [off, off + len) of owner's region for importer. */
static uint64_t import_range(const struct fake_client *owner,
			     const struct fake_client *importer, uint64_t off,
			     uint64_t len)
{
	struct token t = {
		.region = owner->handle,
		.offset = off,
		.length = len,
		.region_length = REGION_LEN,
		.mem_kind = REGION_MEMFD,
	};
	uint64_t handle = 0, granted = 0;

	memset(t.instance_id, 0x11, sizeof(t.instance_id));
	token_sign(&t, owner->key);
	ck_assert_int_eq(regtab_add_import(regs, importer->pc.id, &t, &handle,
					   &granted), 0);
	ck_assert_uint_eq(granted, len);
	return handle;
}

static struct xfer_sqe sqe_write(uint64_t local, uint64_t loff,
				 uint64_t remote, uint64_t roff, uint64_t len,
				 uint64_t user_data)
{
	return (struct xfer_sqe){ .opcode = XFER_OP_WRITE,
				  .user_data = user_data, .local = local,
				  .local_off = loff, .remote = remote,
				  .remote_off = roff, .len = len };
}

static struct xfer_sqe sqe_read(uint64_t local, uint64_t loff,
				uint64_t remote, uint64_t roff, uint64_t len,
				uint64_t user_data)
{
	struct xfer_sqe s = sqe_write(local, loff, remote, roff, len,
				      user_data);
	s.opcode = XFER_OP_READ;
	return s;
}

static void on_notice(struct prog_client *pc, enum notice_kind kind,
		      void *arg)
{
	(void)arg;
	ck_assert_uint_lt(nseen, 16);
	seen[nseen].pc = pc;
	seen[nseen].kind = kind;
	nseen++;
}

static bool has_notice(const struct prog_client *pc, enum notice_kind kind)
{
	for (unsigned i = 0; i < nseen; i++)
		if (seen[i].pc == pc && seen[i].kind == kind)
			return true;
	return false;
}

static void wait_notice(const struct prog_client *pc, enum notice_kind kind)
{
	int64_t deadline = now_ms() + WAIT_MS;
	struct pollfd pfd = { .fd = progress_notice_fd(prog), .events = POLLIN };

	while (!has_notice(pc, kind)) {
		int64_t left = deadline - now_ms();
		ck_assert_msg(left > 0, "no notice %d within %d ms", (int)kind,
			      WAIT_MS);
		if (poll(&pfd, 1, (int)left) > 0)
			progress_take_notices(prog, on_notice, NULL);
	}
}

/* --- data movement --- */

START_TEST(write_moves_bytes)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	struct xfer_cqe c = run1(&A, sqe_write(A.handle, 100, imp, 200, 3000,
					       0xabc));

	ck_assert_int_eq(c.result, 3000);
	ck_assert_uint_eq(c.path, XFER_PATH_MEMCPY);
	memcpy(snap_b + 200, snap_a + 100, 3000);
	assert_regions_unchanged();

	/* The whole region, both ends included. */
	c = run1(&A, sqe_write(A.handle, 0, imp, 0, REGION_LEN, 2));
	ck_assert_int_eq(c.result, REGION_LEN);
	memcpy(snap_b, snap_a, REGION_LEN);
	assert_regions_unchanged();
	assert_cq_empty(&A);
	assert_cq_empty(&B); /* no notification was asked for */

	const struct path_stats *ps = progress_path_stats(prog);
	ck_assert_uint_eq(ps->ops[XFER_PATH_MEMCPY], 2);
	ck_assert_uint_eq(ps->bytes[XFER_PATH_MEMCPY], 3000 + REGION_LEN);
	ck_assert_uint_eq(ps->completed, 2);
	ck_assert_uint_eq(ps->failed, 0);
	ck_assert_uint_eq(A.pc.stats.bytes_moved, 3000 + REGION_LEN);
	ck_assert_uint_eq(A.pc.stats.ops_completed, 2);
}
END_TEST

START_TEST(read_moves_bytes)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	struct xfer_cqe c = run1(&A, sqe_read(A.handle, 5000, imp, 60000,
					      5536, 77));

	ck_assert_int_eq(c.result, 5536);
	ck_assert_uint_eq(c.path, XFER_PATH_MEMCPY);
	memcpy(snap_a + 5000, snap_b + 60000, 5536);
	assert_regions_unchanged();

	/* B reads its own region: allowed, no import needed. */
	c = run1(&B, sqe_read(B.handle, 0, B.handle, 32768, 4096, 78));
	ck_assert_int_eq(c.result, 4096);
	memcpy(snap_b, snap_b + 32768, 4096);
	assert_regions_unchanged();
}
END_TEST

START_TEST(overlapping_copy_in_one_region)
{
	/* Source and target overlap in A's region, in both directions:
	 * the result must be that of memmove. */
	struct xfer_cqe c = run1(&A, sqe_write(A.handle, 1000, A.handle, 1013,
					       20000, 1));
	ck_assert_int_eq(c.result, 20000);
	memmove(snap_a + 1013, snap_a + 1000, 20000);
	assert_regions_unchanged();

	c = run1(&A, sqe_write(A.handle, 30013, A.handle, 30000, 20000, 2));
	ck_assert_int_eq(c.result, 20000);
	memmove(snap_a + 30000, snap_a + 30013, 20000);
	assert_regions_unchanged();
}
END_TEST

START_TEST(import_of_sub_range)
{
	/* B grants A the 8 KiB at 4096; A's offsets are relative to it. */
	uint64_t imp = import_range(&B, &A, 4096, 8192);
	struct xfer_cqe c;

	c = run1(&A, sqe_write(A.handle, 0, imp, 0, 100, 1));
	ck_assert_int_eq(c.result, 100);
	memcpy(snap_b + 4096, snap_a, 100);
	c = run1(&A, sqe_write(A.handle, 500, imp, 8192 - 10, 10, 2));
	ck_assert_int_eq(c.result, 10);
	memcpy(snap_b + 4096 + 8192 - 10, snap_a + 500, 10);
	c = run1(&A, sqe_read(A.handle, 9000, imp, 8000, 192, 3));
	ck_assert_int_eq(c.result, 192);
	memcpy(snap_a + 9000, snap_b + 4096 + 8000, 192);
	assert_regions_unchanged();

	/* One byte past the grant, though well inside B's region. */
	c = run1(&A, sqe_write(A.handle, 0, imp, 8192 - 10, 11, 4));
	ck_assert_int_eq(c.result, -ERANGE);
	c = run1(&A, sqe_read(A.handle, 0, imp, 8192, 1, 5));
	ck_assert_int_eq(c.result, -ERANGE);
	assert_regions_unchanged();
}
END_TEST

START_TEST(nop_and_empty)
{
	struct xfer_cqe c;

	c = run1(&A, (struct xfer_sqe){ .opcode = XFER_OP_NOP,
					.user_data = UINT64_MAX });
	ck_assert_int_eq(c.result, 0);
	ck_assert_uint_eq(c.path, XFER_PATH_NONE);
	ck_assert_uint_eq(c.handle, 0);

	/* A NOP ignores the fields it does not use. */
	c = run1(&A, (struct xfer_sqe){ .opcode = XFER_OP_NOP, .user_data = 9,
					.local = 12345, .len = 1 });
	ck_assert_int_eq(c.result, 0);

	/* len 0 is valid and moves nothing, even at the very end. */
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	c = run1(&A, sqe_write(A.handle, REGION_LEN, imp, REGION_LEN, 0, 10));
	ck_assert_int_eq(c.result, 0);
	ck_assert_uint_eq(c.path, XFER_PATH_NONE);
	assert_regions_unchanged();
	assert_cq_empty(&A);
	assert_cq_empty(&B);
}
END_TEST

/* --- invalid descriptors --- */

START_TEST(invalid_descriptors)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	uint64_t sub = import_range(&B, &A, 1024, 1024);
	const uint64_t L = REGION_LEN;
	struct {
		const char *what;
		struct xfer_sqe sqe;
		int64_t err;
	} cases[] = {
		{ "opcode __COUNT", { .opcode = XFER_OP__COUNT }, -EINVAL },
		{ "opcode 0xff", { .opcode = 0xff }, -EINVAL },
		/* Bits 2-3 are the class since ring 4: the next bit. */
		{ "unknown flag", { .opcode = XFER_OP_NOP, .flags = 1u << 4 },
		  -EINVAL },
		{ "high flag", { .opcode = XFER_OP_NOP, .flags = 0x80 },
		  -EINVAL },
		{ "class 3", { .opcode = XFER_OP_NOP,
			       .flags = XFER_SQE_F_CLASS_MASK }, -EINVAL },
		{ "reserved0", { .opcode = XFER_OP_NOP, .reserved0 = 1 },
		  -EINVAL },
		{ "reserved0 high", { .opcode = XFER_OP_NOP,
				      .reserved0 = 0x8000 }, -EINVAL },
		{ "NOTIFY with F_NOTIFY", { .opcode = XFER_OP_NOTIFY,
					    .flags = XFER_SQE_F_NOTIFY,
					    .remote = imp }, -EINVAL },
		/* handles */
		{ "local is B's region", sqe_write(B.handle, 0, imp, 0, 64, 0),
		  -EACCES },
		{ "remote is B's region, not imported",
		  sqe_write(A.handle, 0, B.handle, 0, 64, 0), -EACCES },
		{ "read from B's region, not imported",
		  sqe_read(A.handle, 0, B.handle, 0, 64, 0), -EACCES },
		{ "local is an import", sqe_write(imp, 0, A.handle, 0, 64, 0),
		  -EACCES },
		{ "handle 0", sqe_write(0, 0, imp, 0, 64, 0), -EACCES },
		{ "unknown local", sqe_write(987654321, 0, imp, 0, 64, 0),
		  -EACCES },
		{ "unknown remote", sqe_write(A.handle, 0, UINT64_MAX, 0, 64, 0),
		  -EACCES },
		{ "NOTIFY unknown remote", { .opcode = XFER_OP_NOTIFY,
					     .remote = 424242 }, -EACCES },
		/* bounds */
		{ "local_off at end", sqe_write(A.handle, L, imp, 0, 1, 0),
		  -ERANGE },
		{ "local one byte over", sqe_write(A.handle, L - 63, imp, 0,
						   64, 0), -ERANGE },
		{ "remote one byte over", sqe_write(A.handle, 0, imp, L - 63,
						    64, 0), -ERANGE },
		{ "len > region", sqe_write(A.handle, 0, imp, 0, L + 1, 0),
		  -ERANGE },
		{ "local_off UINT64_MAX", sqe_write(A.handle, UINT64_MAX, imp,
						    0, 1, 0), -ERANGE },
		{ "remote_off UINT64_MAX", sqe_write(A.handle, 0, imp,
						     UINT64_MAX, 1, 0),
		  -ERANGE },
		{ "len UINT64_MAX", sqe_write(A.handle, 1, imp, 1, UINT64_MAX,
					      0), -ERANGE },
		{ "off + len wraps to 0", sqe_read(A.handle, 0, imp, 2,
						   UINT64_MAX - 1, 0),
		  -ERANGE },
		{ "read remote over", sqe_read(A.handle, 0, imp, L, 1, 0),
		  -ERANGE },
		{ "sub-range import over", sqe_write(A.handle, 0, sub, 1000,
						     25, 0), -ERANGE },
		{ "sub-range offset over", sqe_read(A.handle, 0, sub, 1025, 0,
						    0), -ERANGE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct xfer_sqe s = cases[i].sqe;
		s.user_data = 1000 + i;
		/* Asking for a notification changes nothing for a failed
		 * descriptor (NOTIFY itself cannot carry the flag). */
		if (s.opcode == XFER_OP_WRITE || s.opcode == XFER_OP_READ) {
			s.flags |= XFER_SQE_F_NOTIFY;
			s.notify_value = 0xbad;
		}
		submit1(&A, s);
		struct xfer_cqe c = wait_cqe(&A);
		ck_assert_uint_eq(c.user_data, 1000 + i);
		ck_assert_msg(c.result == cases[i].err,
			      "%s: result %lld, want %lld", cases[i].what,
			      (long long)c.result, (long long)cases[i].err);
		ck_assert_uint_eq(c.path, XFER_PATH_NONE);
		ck_assert_uint_eq(c.flags, 0);
		assert_regions_unchanged();
		assert_cq_empty(&A);
		assert_cq_empty(&B);
	}
	const size_t n = sizeof(cases) / sizeof(cases[0]);
	ck_assert_uint_eq(A.pc.stats.ops_failed, n);
	ck_assert_uint_eq(A.pc.stats.ops_completed, n);
	ck_assert_uint_eq(A.pc.stats.bytes_moved, 0);
	ck_assert_uint_eq(progress_path_stats(prog)->failed, n);

	/* After all that, valid descriptors still work. */
	struct xfer_cqe c = run1(&A, sqe_write(A.handle, 0, imp, 0, 64, 5));
	ck_assert_int_eq(c.result, 64);
	memcpy(snap_b, snap_a, 64);
	assert_regions_unchanged();
}
END_TEST

START_TEST(stale_import)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	struct xfer_cqe c;

	c = run1(&A, sqe_write(A.handle, 0, imp, 0, 128, 1));
	ck_assert_int_eq(c.result, 128);
	memcpy(snap_b, snap_a, 128);

	/* B deregisters: xferd unmaps, A's import now names nothing. */
	ck_assert_int_eq(regtab_remove(regs, B.pc.id, B.handle, false), 0);
	c = run1(&A, sqe_write(A.handle, 0, imp, 0, 128, 2));
	ck_assert_int_eq(c.result, -ESTALE);
	c = run1(&A, sqe_read(A.handle, 0, imp, 0, 128, 3));
	ck_assert_int_eq(c.result, -ESTALE);
	c = run1(&A, (struct xfer_sqe){ .opcode = XFER_OP_NOTIFY,
					.remote = imp, .user_data = 4 });
	ck_assert_int_eq(c.result, -ESTALE);
	/* Bounds are not even looked at: the region is gone. */
	c = run1(&A, sqe_write(A.handle, 0, imp, UINT64_MAX, 1, 5));
	ck_assert_int_eq(c.result, -ESTALE);
	/* And B's own handle is gone for B. */
	c = run1(&B, sqe_write(B.handle, 0, B.handle, 64, 64, 6));
	ck_assert_int_eq(c.result, -EACCES);
	assert_regions_unchanged();
	assert_cq_empty(&B);

	/* A new import of the old token is refused. */
	struct token t = { .region = B.handle, .offset = 0,
			   .length = REGION_LEN, .region_length = REGION_LEN,
			   .mem_kind = REGION_MEMFD };
	uint64_t h, len;
	token_sign(&t, B.key);
	ck_assert_int_eq(regtab_add_import(regs, A.pc.id, &t, &h, &len),
			 -EACCES);
}
END_TEST

START_TEST(import_refusals)
{
	struct token good = {
		.region = B.handle, .offset = 0, .length = REGION_LEN,
		.region_length = REGION_LEN, .mem_kind = REGION_MEMFD,
	};
	struct token t;
	struct regtab_counts n;
	uint64_t h = 0, len = 0;

	/* Each is signed with B's key, but describes B's region wrongly,
	 * or names something that is not a region. */
	t = good;
	t.region_length = REGION_LEN * 2;
	token_sign(&t, B.key);
	ck_assert_int_eq(regtab_add_import(regs, A.pc.id, &t, &h, &len),
			 -EACCES);
	t = good;
	t.mem_kind = REGION_CMA;
	token_sign(&t, B.key);
	ck_assert_int_eq(regtab_add_import(regs, A.pc.id, &t, &h, &len),
			 -EACCES);
	t = good;
	t.region = A.handle; /* A's region with B's key */
	token_sign(&t, B.key);
	ck_assert_int_eq(regtab_add_import(regs, A.pc.id, &t, &h, &len),
			 -EACCES);
	t = good;
	t.region = import_range(&B, &A, 0, 64); /* an import, not a region */
	token_sign(&t, B.key);
	ck_assert_int_eq(regtab_add_import(regs, B.pc.id, &t, &h, &len),
			 -EACCES);
	t = good;
	token_sign(&t, A.key); /* the wrong region key */
	ck_assert_int_eq(regtab_add_import(regs, A.pc.id, &t, &h, &len),
			 -EACCES);
	t = good;
	token_sign(&t, B.key);
	t.offset = 1; /* changed after signing */
	t.length -= 1;
	ck_assert_int_eq(regtab_add_import(regs, A.pc.id, &t, &h, &len),
			 -EACCES);
	ck_assert_uint_eq(h, 0);

	regtab_count(regs, A.pc.id, &n);
	ck_assert_uint_eq(n.regions, 1);
	ck_assert_uint_eq(n.imports, 1); /* only the one made above */
	regtab_count(regs, B.pc.id, &n);
	ck_assert_uint_eq(n.regions, 1);
	ck_assert_uint_eq(n.imports, 0);

	/* The good token works, for either client. */
	t = good;
	token_sign(&t, B.key);
	ck_assert_int_eq(regtab_add_import(regs, A.pc.id, &t, &h, &len), 0);
	ck_assert_uint_eq(len, REGION_LEN);
	ck_assert_int_eq(regtab_add_import(regs, B.pc.id, &t, &h, &len), 0);
}
END_TEST

/* --- another process's memory (CMA, mem/cma.h) --- */

static int pidfd_of(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	ck_assert_msg(fd >= 0, "pidfd_open: %s", strerror(errno));
	return fd;
}

/* Register [mem, mem + len) of process pid as a CMA region of A. */
static uint64_t add_cma(pid_t pid, void *mem, size_t len,
			struct region **out)
{
	struct cma_owner *o;
	struct region *r;

	ck_assert_int_eq(cma_owner_open(pid, pidfd_of(pid), getuid(), getgid(),
					&o), 0);
	ck_assert_int_eq(region_create_cma(o, (uintptr_t)mem, len, A.pc.id,
					   &r), 0);
	cma_owner_put(o); /* the region keeps its own */
	regtab_add_region(regs, r);
	if (out)
		*out = r; /* valid while in the table */
	return region_handle(r);
}

START_TEST(cma_paths)
{
	const size_t len = 3 * 4096;
	uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *want = malloc(len);
	struct xfer_cqe c;

	ck_assert(mem != MAP_FAILED);
	ck_assert_ptr_nonnull(want);
	for (size_t i = 0; i < len; i++)
		mem[i] = (uint8_t)(i * 31 + 3);
	/* The test's own process stands in for the client: CMA on oneself
	 * needs no ptrace rights. */
	uint64_t cma = add_cma(getpid(), mem, len, NULL);
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);

	/* CMA -> memfd, memfd -> CMA, CMA -> CMA (overlapping). */
	c = run1(&A, sqe_write(cma, 100, imp, 2000, 5000, 1));
	ck_assert_int_eq(c.result, 5000);
	ck_assert_uint_eq(c.path, XFER_PATH_CMA);
	memcpy(snap_b + 2000, mem + 100, 5000);
	c = run1(&A, sqe_read(cma, 8000, imp, 40000, 4000, 2));
	ck_assert_int_eq(c.result, 4000);
	ck_assert_uint_eq(c.path, XFER_PATH_CMA);
	memcpy(want, mem, len);
	memcpy(want + 8000, snap_b + 40000, 4000);
	ck_assert_mem_eq(mem, want, len);
	c = run1(&A, sqe_write(cma, 0, cma, 10, 6000, 3));
	ck_assert_int_eq(c.result, 6000);
	ck_assert_uint_eq(c.path, XFER_PATH_CMA);
	memmove(want + 10, want, 6000);
	ck_assert_mem_eq(mem, want, len);
	assert_regions_unchanged();

	/* The client's memory goes away under a registered region: the
	 * copy fails with -EFAULT, and the notification the batch asked
	 * for is not sent. */
	ck_assert_int_eq(munmap(mem, len), 0);
	struct xfer_sqe s[2] = {
		sqe_write(A.handle, 0, imp, 100, 10, 4),
		sqe_write(cma, 0, imp, 200, 10, 5),
	};
	s[0].flags = XFER_SQE_F_LINK;
	s[1].flags = XFER_SQE_F_NOTIFY;
	s[1].notify_value = 0xdead;
	submit(&A, s, 2);
	c = wait_cqe(&A);
	ck_assert_uint_eq(c.user_data, 5);
	ck_assert_int_eq(c.result, -EFAULT);
	assert_cq_empty(&A);
	assert_cq_empty(&B);
	memcpy(snap_b + 100, snap_a, 10);
	assert_regions_unchanged();

	free(want);
}
END_TEST

START_TEST(cma_owner_exited)
{
	static uint8_t mem[8192];
	int pipefd[2];

	for (size_t i = 0; i < sizeof(mem); i++)
		mem[i] = (uint8_t)(i ^ 0x5c);
	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		/* Hold still (same addresses as the parent) until the
		 * parent closes the pipe. */
		char byte;
		close(pipefd[1]);
		while (read(pipefd[0], &byte, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(pipefd[0]);
	struct region *r;
	uint64_t cma = add_cma(child, mem, sizeof(mem), &r);
	ck_assert(region_cma_alive(r));
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);

	/* Alive: the child's copy of mem arrives in B's region. */
	struct xfer_cqe c = run1(&A, sqe_write(cma, 0, imp, 0, sizeof(mem),
					       1));
	ck_assert_int_eq(c.result, (int64_t)sizeof(mem));
	ck_assert_uint_eq(c.path, XFER_PATH_CMA);
	memcpy(snap_b, mem, sizeof(mem));
	assert_regions_unchanged();

	/* Gone: the region stays registered but no copy reaches it. */
	close(pipefd[1]);
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	ck_assert(!region_cma_alive(r));
	c = run1(&A, sqe_write(cma, 0, imp, 0, sizeof(mem), 2));
	ck_assert_int_eq(c.result, -ESRCH);
	c = run1(&A, sqe_read(cma, 0, imp, 0, sizeof(mem), 3));
	ck_assert_int_eq(c.result, -ESRCH);
	assert_regions_unchanged();
}
END_TEST

/* --- batches --- */

START_TEST(linked_batch)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	struct xfer_sqe s[4] = {
		sqe_write(A.handle, 0, imp, 10000, 100, 1),
		{ .opcode = XFER_OP_NOP, .user_data = 2 },
		sqe_read(A.handle, 20000, imp, 30000, 300, 3),
		sqe_write(A.handle, 40000, imp, 0, 2000, 4),
	};

	for (int i = 0; i < 3; i++)
		s[i].flags = XFER_SQE_F_LINK;
	submit(&A, s, 4);
	struct xfer_cqe c = wait_cqe(&A);
	ck_assert_uint_eq(c.user_data, 4);   /* the last entry's */
	ck_assert_int_eq(c.result, 100 + 300 + 2000);
	ck_assert_uint_eq(c.path, XFER_PATH_MEMCPY);
	ck_assert_uint_eq(c.flags, 0);
	assert_cq_empty(&A);
	memcpy(snap_b + 10000, snap_a, 100);
	memcpy(snap_a + 20000, snap_b + 30000, 300);
	memcpy(snap_b, snap_a + 40000, 2000);
	assert_regions_unchanged();
	ck_assert_uint_eq(A.pc.stats.ops_completed, 1);
	ck_assert_uint_eq(A.pc.stats.bytes_moved, 2400);

	/* A batch longer than the SQ: its entries go through in several
	 * rounds, still one CQE. */
	struct xfer_sqe lng[3 * SQ_ENTRIES];
	uint64_t want = 0;
	for (unsigned i = 0; i < 3 * SQ_ENTRIES; i++) {
		lng[i] = sqe_write(A.handle, 1000 * i, imp, 50000 + 100 * i,
				   i + 1, 100 + i);
		lng[i].flags = XFER_SQE_F_LINK;
		want += i + 1;
		memcpy(snap_b + 50000 + 100 * i, snap_a + 1000 * i, i + 1);
	}
	lng[3 * SQ_ENTRIES - 1].flags = 0;
	submit(&A, lng, 3 * SQ_ENTRIES);
	c = wait_cqe(&A);
	ck_assert_uint_eq(c.user_data, 100 + 3 * SQ_ENTRIES - 1);
	ck_assert_int_eq(c.result, (int64_t)want);
	assert_cq_empty(&A);
	assert_regions_unchanged();

	/* A batch of one is a plain descriptor. */
	c = run1(&A, sqe_write(A.handle, 7, imp, 7, 7, 500));
	ck_assert_int_eq(c.result, 7);
	memcpy(snap_b + 7, snap_a + 7, 7);
	assert_regions_unchanged();
}
END_TEST

START_TEST(linked_batch_error)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	struct xfer_sqe s[5] = {
		sqe_write(A.handle, 0, imp, 0, 100, 1),
		sqe_write(A.handle, 0, imp, REGION_LEN, 1, 2), /* -ERANGE */
		sqe_write(A.handle, 0, 999999, 0, 1, 3),       /* -EACCES */
		{ .opcode = XFER_OP_NOP, .reserved0 = 1 },     /* -EINVAL */
		sqe_write(A.handle, 1000, imp, 1000, 100, 5),  /* valid */
	};

	for (int i = 0; i < 4; i++)
		s[i].flags = XFER_SQE_F_LINK;
	/* The batch asks for a notification; it failed, so none comes. */
	s[4].flags = XFER_SQE_F_NOTIFY;
	s[4].notify_value = 0x5eed;
	submit(&A, s, 5);
	struct xfer_cqe c = wait_cqe(&A);
	ck_assert_uint_eq(c.user_data, 5);
	ck_assert_int_eq(c.result, -ERANGE);   /* the first error */
	assert_cq_empty(&A);
	assert_cq_empty(&B);
	/* The entry before the failure ran; those after moved nothing. */
	memcpy(snap_b, snap_a, 100);
	assert_regions_unchanged();
	ck_assert_uint_eq(A.pc.stats.ops_failed, 1);
	ck_assert_uint_eq(A.pc.stats.ops_completed, 1);

	/* First entry invalid, then another error: -EINVAL wins. */
	struct xfer_sqe t[3] = {
		{ .opcode = XFER_OP_NOP, .flags = XFER_SQE_F_LINK,
		  .reserved0 = 1, .user_data = 10 },
		sqe_write(B.handle, 0, imp, 0, 1, 11),
		sqe_write(A.handle, 0, imp, 0, 4096, 12),
	};
	t[1].flags = XFER_SQE_F_LINK;
	submit(&A, t, 3);
	c = wait_cqe(&A);
	ck_assert_uint_eq(c.user_data, 12);
	ck_assert_int_eq(c.result, -EINVAL);
	assert_cq_empty(&A);
	assert_regions_unchanged();

	/* The failure does not leak into the next batch. */
	struct xfer_sqe u[2] = {
		sqe_write(A.handle, 200, imp, 200, 50, 20),
		sqe_write(A.handle, 300, imp, 300, 60, 21),
	};
	u[0].flags = XFER_SQE_F_LINK;
	u[1].flags = XFER_SQE_F_NOTIFY;
	u[1].notify_value = 0x600d;
	submit(&A, u, 2);
	c = wait_cqe(&A);
	ck_assert_uint_eq(c.user_data, 21);
	ck_assert_int_eq(c.result, 110);
	ck_assert_uint_eq(c.path, XFER_PATH_MEMCPY);
	memcpy(snap_b + 200, snap_a + 200, 50);
	memcpy(snap_b + 300, snap_a + 300, 60);
	assert_regions_unchanged();
	/* ...and its notification is the first B ever sees. */
	c = wait_cqe(&B);
	ck_assert_uint_eq(c.flags, XFER_CQE_F_NOTIFY);
	ck_assert_uint_eq(c.user_data, 0x600d);
	ck_assert_int_eq(c.result, 110);
	assert_cq_empty(&B);
}
END_TEST

/* --- notifications --- */

START_TEST(notify_op)
{
	uint64_t imp = import_range(&B, &A, 512, 512);
	struct xfer_cqe c;

	c = run1(&A, (struct xfer_sqe){ .opcode = XFER_OP_NOTIFY,
					.remote = imp, .user_data = 5,
					.notify_value = 0xC0FFEE });
	ck_assert_int_eq(c.result, 0);
	ck_assert_uint_eq(c.path, XFER_PATH_NONE);
	assert_cq_empty(&A);

	c = wait_cqe(&B);
	ck_assert_uint_eq(c.flags, XFER_CQE_F_NOTIFY);
	ck_assert_uint_eq(c.user_data, 0xC0FFEE);
	ck_assert_int_eq(c.result, 0);
	ck_assert_uint_eq(c.handle, B.handle); /* the owner's handle */
	assert_cq_empty(&B);
	assert_regions_unchanged();

	/* Notifying a region of one's own works too. */
	c = run1(&B, (struct xfer_sqe){ .opcode = XFER_OP_NOTIFY,
					.remote = B.handle, .user_data = 6,
					.notify_value = 66 });
	ck_assert_int_eq(c.result, 0);
	c = wait_cqe(&B);
	ck_assert_uint_eq(c.flags, XFER_CQE_F_NOTIFY);
	ck_assert_uint_eq(c.user_data, 66);
	ck_assert_uint_eq(c.handle, B.handle);
	assert_cq_empty(&B);
	assert_cq_empty(&A);
}
END_TEST

START_TEST(write_with_notify)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	struct xfer_sqe s = sqe_write(A.handle, 300, imp, 4000, 1234, 8);
	struct xfer_cqe c;

	s.flags = XFER_SQE_F_NOTIFY;
	s.notify_value = 0xfeed;
	c = run1(&A, s);
	ck_assert_int_eq(c.result, 1234);
	ck_assert_uint_eq(c.path, XFER_PATH_MEMCPY);

	c = wait_cqe(&B);
	/* The data is in place by the time the owner hears of it. */
	memcpy(snap_b + 4000, snap_a + 300, 1234);
	assert_regions_unchanged();
	ck_assert_uint_eq(c.flags, XFER_CQE_F_NOTIFY);
	ck_assert_uint_eq(c.user_data, 0xfeed);
	ck_assert_int_eq(c.result, 1234);
	ck_assert_uint_eq(c.handle, B.handle);
	assert_cq_empty(&B);

	/* READ with notify tells the owner its bytes were read. */
	s = sqe_read(A.handle, 0, imp, 100, 10, 9);
	s.flags = XFER_SQE_F_NOTIFY;
	s.notify_value = 0xbeef;
	c = run1(&A, s);
	ck_assert_int_eq(c.result, 10);
	c = wait_cqe(&B);
	ck_assert_uint_eq(c.user_data, 0xbeef);
	ck_assert_int_eq(c.result, 10);

	/* A batch notifies once, with the sum, after all of it landed. */
	struct xfer_sqe b[3] = {
		sqe_write(A.handle, 0, imp, 10000, 10, 11),
		sqe_write(A.handle, 0, imp, 20000, 20, 12),
		sqe_write(A.handle, 0, imp, 30000, 30, 13),
	};
	b[0].flags = b[1].flags = XFER_SQE_F_LINK;
	b[2].flags = XFER_SQE_F_NOTIFY;
	b[2].notify_value = 0xba7c;
	submit(&A, b, 3);
	c = wait_cqe(&A);
	ck_assert_uint_eq(c.user_data, 13);
	ck_assert_int_eq(c.result, 60);
	c = wait_cqe(&B);
	ck_assert_uint_eq(c.flags, XFER_CQE_F_NOTIFY);
	ck_assert_uint_eq(c.user_data, 0xba7c);
	ck_assert_int_eq(c.result, 60);
	assert_cq_empty(&B);
	memcpy(snap_a, snap_b + 100, 10);
	memcpy(snap_b + 10000, snap_a, 10);
	memcpy(snap_b + 20000, snap_a, 20);
	memcpy(snap_b + 30000, snap_a, 30);
	assert_regions_unchanged();

	/* Writing to one's own region with notify: own completion first,
	 * then the notification, both on A's ring. */
	s = sqe_write(A.handle, 0, A.handle, 60000, 16, 14);
	s.flags = XFER_SQE_F_NOTIFY;
	s.notify_value = 0x5e1f;
	c = run1(&A, s);
	ck_assert_int_eq(c.result, 16);
	c = wait_cqe(&A);
	ck_assert_uint_eq(c.flags, XFER_CQE_F_NOTIFY);
	ck_assert_uint_eq(c.user_data, 0x5e1f);
	ck_assert_uint_eq(c.handle, A.handle);
	assert_cq_empty(&A);
	assert_cq_empty(&B);
	memcpy(snap_a + 60000, snap_a, 16);
	assert_regions_unchanged();
}
END_TEST

/* A's notifications to B, values base.. in order, each completing on
 * A's ring with want. */
static void notify_b(uint64_t imp, unsigned n, uint64_t base, int64_t want)
{
	for (unsigned i = 0; i < n; i++) {
		struct xfer_cqe c = run1(&A, (struct xfer_sqe){
			.opcode = XFER_OP_NOTIFY, .remote = imp,
			.user_data = base + i, .notify_value = base + i });
		ck_assert_int_eq(c.result, want);
	}
}

/* B reads n notifications, values base.. in order. */
static void b_reads(unsigned n, uint64_t base)
{
	for (unsigned i = 0; i < n; i++) {
		struct xfer_cqe c = wait_cqe(&B);
		ck_assert_uint_eq(c.flags, XFER_CQE_F_NOTIFY);
		ck_assert_uint_eq(c.user_data, base + i);
		ck_assert_uint_eq(c.handle, B.handle);
	}
}

static uint64_t b_queued(void)
{
	return atomic_load(&B.pc.stats.notify_queued);
}

/* Wait for the next CQE, a notification, and copy its sender record
 * before the slot goes back (as xfer_cqe_sender does). */
static struct xfer_cqe wait_notify_from(struct fake_client *c,
					struct xfer_cqe_sender *from)
{
	struct ring_view *v = &c->pc.ring;
	int64_t deadline = now_ms() + WAIT_MS;

	while (ring_cq_avail(v, c->cq_head) == 0) {
		ck_assert_msg(now_ms() < deadline, "no notification");
		poll(NULL, 0, 1);
	}
	*from = *ring_cq_sender_at(v, c->cq_head);
	struct xfer_cqe cqe = wait_cqe(c);
	ck_assert_uint_eq(cqe.flags, XFER_CQE_F_NOTIFY);
	return cqe;
}

static void assert_sender(const struct xfer_cqe_sender *from, uint64_t id)
{
	ck_assert_mem_eq(from->node, SELF_ID, sizeof(from->node));
	ck_assert_uint_eq(from->client, id);
	ck_assert_uint_eq(from->uid, id * 10);
	ck_assert_uint_eq(from->flags, 0);
}

/*
 * Every notification names its sender (xfer_ring.h): this xferd's
 * instance, the sending client's id and uid, whatever the value says;
 * so does one xferd held for a full CQ; a completion of one's own
 * leaves its slot's record alone.
 */
START_TEST(notify_sender)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	struct xfer_cqe_sender from;
	struct xfer_cqe c;

	/* A NOTIFY claiming to be B in its value is still A's. */
	run1(&A, (struct xfer_sqe){ .opcode = XFER_OP_NOTIFY, .remote = imp,
				    .user_data = 1, .notify_value = B_ID });
	c = wait_notify_from(&B, &from);
	ck_assert_uint_eq(c.user_data, B_ID);
	assert_sender(&from, A_ID);

	/* A write with a notification, and a batch's. */
	struct xfer_sqe s = sqe_write(A.handle, 0, imp, 100, 10, 2);
	s.flags = XFER_SQE_F_NOTIFY;
	s.notify_value = 22;
	run1(&A, s);
	c = wait_notify_from(&B, &from);
	ck_assert_uint_eq(c.user_data, 22);
	assert_sender(&from, A_ID);
	struct xfer_sqe b[2] = {
		sqe_write(A.handle, 0, imp, 200, 10, 3),
		sqe_write(A.handle, 0, imp, 300, 10, 4),
	};
	b[0].flags = XFER_SQE_F_LINK;
	b[1].flags = XFER_SQE_F_NOTIFY;
	b[1].notify_value = 33;
	submit(&A, b, 2);
	ck_assert_int_eq(wait_cqe(&A).result, 20);
	c = wait_notify_from(&B, &from);
	ck_assert_uint_eq(c.user_data, 33);
	assert_sender(&from, A_ID);

	/* B notifying itself: B. */
	run1(&B, (struct xfer_sqe){ .opcode = XFER_OP_NOTIFY,
				    .remote = B.handle, .user_data = 5,
				    .notify_value = 55 });
	c = wait_notify_from(&B, &from);
	assert_sender(&from, B_ID);

	/* Held ones keep theirs: B does not reap until its CQ is full and
	 * three more of A and two of its own wait in xferd. */
	const uint32_t cq_entries = B.pc.ring.cq_entries;
	notify_b(imp, cq_entries + 3, 1000, 0);
	for (unsigned i = 0; i < 2; i++) {
		submit1(&B, (struct xfer_sqe){ .opcode = XFER_OP_NOTIFY,
					       .remote = B.handle,
					       .user_data = 7,
					       .notify_value = 2000 + i });
	}
	/* A's held ones in order, and B's own completions and its own
	 * notifications in whatever order its CQ took them: B's two SQEs
	 * run as soon as its CQ has room, which may be before xferd has
	 * posted every notification it held for B. */
	unsigned from_a = 0, own = 0, mine = 0;
	while (from_a < cq_entries + 3 || own + mine < 4) {
		struct ring_view *v = &B.pc.ring;
		int64_t deadline = now_ms() + WAIT_MS;
		while (ring_cq_avail(v, B.cq_head) == 0)
			ck_assert_msg(now_ms() < deadline, "B's CQ stays empty");
		if (!(ring_cqe_at(v, B.cq_head)->flags & XFER_CQE_F_NOTIFY)) {
			ck_assert_uint_eq(wait_cqe(&B).user_data, 7);
			own++;
			continue;
		}
		c = wait_notify_from(&B, &from);
		if (from.client == B_ID) {
			ck_assert_uint_eq(c.user_data, 2000 + mine);
			assert_sender(&from, B_ID);
			mine++;
		} else {
			ck_assert_uint_eq(c.user_data, 1000 + from_a);
			assert_sender(&from, A_ID);
			from_a++;
		}
	}
	ck_assert_uint_eq(own, 2);
	ck_assert_uint_eq(mine, 2);
	assert_cq_empty(&B);

	/* An own completion writes no record: a canary in the slot the
	 * next CQE of A goes to stays. */
	struct xfer_cqe_sender *rec = ring_cq_sender_at(&A.pc.ring, A.cq_head);
	memset(rec, 0xa5, sizeof(*rec));
	run1(&A, (struct xfer_sqe){ .opcode = XFER_OP_NOP, .user_data = 9 });
	for (size_t i = 0; i < sizeof(*rec); i++)
		ck_assert_uint_eq(((uint8_t *)rec)[i], 0xa5);
}
END_TEST

START_TEST(notify_held)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	const uint32_t cq_entries = B.pc.ring.cq_entries;

	/* B never reaps: past its full CQ xferd holds them, and A's own
	 * completions are not held up. */
	notify_b(imp, cq_entries + 5, 1000, 0);
	ck_assert_uint_eq(ring_cq_avail(&B.pc.ring, B.cq_head), cq_entries);
	ck_assert_uint_eq(b_queued(), 5);
	/* Room for two: they come, and what A sends now goes behind the
	 * three still held, not into the room. */
	b_reads(2, 1000);
	notify_b(imp, 4, 1000 + cq_entries + 5, 0);
	/* Every one, in order, as B reads: each read rings xferd (it set
	 * XFER_SQ_CQ_WAIT) with nothing submitted. */
	b_reads(cq_entries + 7, 1002);
	assert_cq_empty(&B);
	ck_assert_uint_eq(b_queued(), 0);
	ck_assert_uint_eq(*B.pc.ring.cq_overflow, 0);
	ck_assert_uint_eq(atomic_load(&B.pc.stats.notify_refused), 0);
	/* Nothing held: the next one is posted at once. */
	notify_b(imp, 1, 77, 0);
	b_reads(1, 77);
	assert_cq_empty(&B);
}
END_TEST

START_TEST(notify_bound)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	const uint32_t cq_entries = B.pc.ring.cq_entries;

	/* Past 3 held the sender hears -ENOBUFS; nothing is lost silently. */
	progress_set_notify_queue_max(prog, 3);
	notify_b(imp, cq_entries + 3, 2000, 0);
	notify_b(imp, 4, 3000, -ENOBUFS);
	ck_assert_uint_eq(b_queued(), 3);
	ck_assert_uint_eq(atomic_load(&B.pc.stats.notify_refused), 4);
	/* A write with notify past the bound: the bytes land, the sender
	 * is told the notification did not. */
	struct xfer_sqe w = sqe_write(A.handle, 0, imp, 500, 64, 9);
	w.flags = XFER_SQE_F_NOTIFY;
	w.notify_value = 3100;
	struct xfer_cqe c = run1(&A, w);
	ck_assert_int_eq(c.result, -ENOBUFS);
	memcpy(snap_b + 500, snap_a, 64);
	assert_regions_unchanged();
	/* B gets exactly those held, in order, and nothing refused. */
	b_reads(cq_entries + 3, 2000);
	assert_cq_empty(&B);
	/* Drained, it takes notifications again. */
	notify_b(imp, 1, 4000, 0);
	b_reads(1, 4000);
	assert_cq_empty(&B);

	/* 0: nothing is held, a full CQ refuses at once. */
	progress_set_notify_queue_max(prog, 0);
	notify_b(imp, cq_entries, 5000, 0);
	notify_b(imp, 1, 6000, -ENOBUFS);
	b_reads(cq_entries, 5000);
	assert_cq_empty(&B);
	ck_assert_uint_eq(*B.pc.ring.cq_overflow, 0);
}
END_TEST

/* The bound of a user's clients together (notify_queue_max_per_uid):
 * below each client's own, it refuses first; what is read gives room
 * back to the pool. */
START_TEST(notify_uid_bound)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	const uint32_t cq_entries = B.pc.ring.cq_entries;

	progress_set_notify_uid_max(prog, 3);
	notify_b(imp, cq_entries + 3, 2000, 0);
	ck_assert_uint_eq(atomic_load(&uid_pool.held), 3);
	notify_b(imp, 2, 3000, -ENOBUFS);
	ck_assert_uint_eq(b_queued(), 3);
	ck_assert_uint_eq(atomic_load(&B.pc.stats.notify_refused), 2);
	/* B reads: in order, nothing of the refused ones, the pool empty. */
	b_reads(cq_entries + 3, 2000);
	assert_cq_empty(&B);
	ck_assert_uint_eq(atomic_load(&uid_pool.held), 0);
	/* Room again. */
	notify_b(imp, cq_entries + 1, 4000, 0);
	ck_assert_uint_eq(atomic_load(&uid_pool.held), 1);
	b_reads(cq_entries + 1, 4000);
	ck_assert_uint_eq(*B.pc.ring.cq_overflow, 0);
	progress_set_notify_uid_max(prog, PROGRESS_NOTIFY_UID_MAX);
}
END_TEST

/* A client notifying its own region whose CQ holds only its own
 * completion's slot: the completion comes first, the notification is
 * held and follows. */
START_TEST(notify_self_held)
{
	const uint32_t cq_entries = A.pc.ring.cq_entries;
	uint64_t imp = import_range(&A, &B, 0, REGION_LEN);

	/* B fills A's CQ but for one slot. */
	for (unsigned i = 0; i < cq_entries - 1; i++)
		run1(&B, (struct xfer_sqe){ .opcode = XFER_OP_NOTIFY,
					    .remote = imp, .user_data = i,
					    .notify_value = 100 + i });
	ck_assert_uint_eq(ring_cq_avail(&A.pc.ring, A.cq_head), cq_entries - 1);
	struct xfer_sqe s = sqe_write(A.handle, 0, A.handle, 1000, 8, 55);
	s.flags = XFER_SQE_F_NOTIFY;
	s.notify_value = 0x5e1f;
	submit1(&A, s);
	for (unsigned i = 0; i < cq_entries - 1; i++) {
		struct xfer_cqe c = wait_cqe(&A);
		ck_assert_uint_eq(c.flags, XFER_CQE_F_NOTIFY);
		ck_assert_uint_eq(c.user_data, 100 + i);
	}
	struct xfer_cqe c = wait_cqe(&A);
	ck_assert_uint_eq(c.flags, 0);
	ck_assert_uint_eq(c.user_data, 55);
	ck_assert_int_eq(c.result, 8);
	c = wait_cqe(&A);
	ck_assert_uint_eq(c.flags, XFER_CQE_F_NOTIFY);
	ck_assert_uint_eq(c.user_data, 0x5e1f);
	assert_cq_empty(&A);
	memcpy(snap_a + 1000, snap_a, 8);
	assert_regions_unchanged();
}
END_TEST

/* --- ring behaviour against the real consumer --- */

START_TEST(cq_backpressure)
{
	const uint32_t cq_entries = A.pc.ring.cq_entries;
	const unsigned total = cq_entries + SQ_ENTRIES;
	struct xfer_sqe s[64];

	ck_assert_uint_le(total, 64);
	for (unsigned i = 0; i < total; i++)
		s[i] = (struct xfer_sqe){ .opcode = XFER_OP_NOP,
					  .user_data = 7000 + i };
	/* More than the CQ holds, without reaping: submit() returns once
	 * everything is in the SQ, which only happens because xferd
	 * stops taking SQEs it could not complete. */
	submit(&A, s, total);
	int64_t deadline = now_ms() + WAIT_MS;
	while (ring_cq_avail(&A.pc.ring, A.cq_head) < cq_entries) {
		ck_assert_msg(now_ms() < deadline, "CQ never filled");
		poll(NULL, 0, 1);
	}
	ck_assert_uint_eq(ring_cq_avail(&A.pc.ring, A.cq_head), cq_entries);
	/* Nothing was overwritten or lost: every completion, in order. */
	for (unsigned i = 0; i < total; i++) {
		struct xfer_cqe c = wait_cqe(&A);
		ck_assert_uint_eq(c.user_data, 7000 + i);
		ck_assert_int_eq(c.result, 0);
		ck_assert_uint_le(ring_cq_avail(&A.pc.ring, A.cq_head),
				  cq_entries);
	}
	assert_cq_empty(&A);
	ck_assert_uint_eq(*A.pc.ring.cq_overflow, 0);
}
END_TEST

START_TEST(many_across_wrap)
{
	/* A's indices started at A_START; go around the ring many times
	 * with writes of distinct sizes and check each one. */
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	const unsigned rounds = 20;
	unsigned id = 0;

	for (unsigned r = 0; r < rounds; r++) {
		struct xfer_sqe s[SQ_ENTRIES];
		unsigned n = 1 + r % SQ_ENTRIES;
		for (unsigned i = 0; i < n; i++, id++) {
			uint64_t len = 1 + id * 3;
			s[i] = sqe_write(A.handle, id * 500, imp,
					 REGION_LEN - 600 - id * 500, len, id);
			memcpy(snap_b + REGION_LEN - 600 - id * 500,
			       snap_a + id * 500, len);
		}
		submit(&A, s, n);
		for (unsigned i = 0; i < n; i++) {
			struct xfer_cqe c = wait_cqe(&A);
			ck_assert_uint_eq(c.user_data, s[i].user_data);
			ck_assert_int_eq(c.result, (int64_t)s[i].len);
		}
	}
	ck_assert_uint_gt(id, 4 * SQ_ENTRIES);
	ck_assert(A.sq_tail < A_START); /* the counters did wrap */
	assert_cq_empty(&A);
	assert_regions_unchanged();
}
END_TEST

START_TEST(corrupt_sq_tail)
{
	struct ring_view *v = &A.pc.ring;
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	struct pollfd pfd = { .fd = progress_notice_fd(prog), .events = POLLIN };

	/* Fill the SQ with writes that must never run. */
	for (uint32_t i = 0; i < SQ_ENTRIES; i++)
		*ring_sqe_at(v, A.sq_tail + i) =
			sqe_write(A.handle, 0, imp, 0, 4096, i);
	/* A tail one beyond what the ring can hold. */
	if (ring_sq_publish(v, A.sq_tail + SQ_ENTRIES + 1))
		ring_doorbell(&A);
	/* Notices are left queued for now: they are taken all at once
	 * below, to check their order. */
	ck_assert_int_eq(poll(&pfd, 1, WAIT_MS), 1);

	/* The other client is unaffected. */
	struct xfer_cqe c = run1(&B, (struct xfer_sqe){
		.opcode = XFER_OP_NOP, .user_data = 3 });
	ck_assert_int_eq(c.result, 0);

	/* Nothing of A's ran, then or since. */
	assert_cq_empty(&A);
	assert_regions_unchanged();
	ck_assert_uint_eq(*v->sq_head, A_START);
	ck_assert_uint_eq(sq_flags_of(&A) & XFER_SQ_DEAD, 0);

	/* The daemon then drops it.  The DEAD flag is set while the
	 * detach is handled, and a CQE of B's published after that proves
	 * the handling (and its notice) is complete. */
	progress_detach(prog, &A.pc);
	int64_t deadline = now_ms() + WAIT_MS;
	while (!(sq_flags_of(&A) & XFER_SQ_DEAD)) {
		ck_assert_msg(now_ms() < deadline, "A never marked dead");
		poll(NULL, 0, 1);
	}
	c = run1(&B, (struct xfer_sqe){ .opcode = XFER_OP_NOP,
					.user_data = 4 });
	ck_assert_int_eq(c.result, 0);

	/* One take: BROKEN first, then DETACHED, once each. */
	progress_take_notices(prog, on_notice, NULL);
	ck_assert_uint_eq(nseen, 2);
	ck_assert(seen[0].pc == &A.pc && seen[0].kind == NOTICE_BROKEN);
	ck_assert(seen[1].pc == &A.pc && seen[1].kind == NOTICE_DETACHED);
	ck_assert_ptr_nonnull(A.pc.broken);
	assert_cq_empty(&A);
	assert_regions_unchanged();
	/* Nothing more is queued. */
	ck_assert_int_eq(poll(&pfd, 1, 0), 0);
}
END_TEST

START_TEST(corrupt_sq_tail_behind_head)
{
	struct ring_view *v = &A.pc.ring;

	/* A tail behind the head is corruption just the same. */
	if (ring_sq_publish(v, A.sq_tail - 1))
		ring_doorbell(&A);
	wait_notice(&A.pc, NOTICE_BROKEN);
	assert_cq_empty(&A);
	assert_regions_unchanged();
}
END_TEST

START_TEST(detach)
{
	uint64_t imp = import_range(&B, &A, 0, REGION_LEN);
	struct ring_view *v = &B.pc.ring;
	uint64_t cnt;

	/* B works, then is detached. */
	ck_assert_int_eq(run1(&B, (struct xfer_sqe){ .opcode = XFER_OP_NOP,
						     .user_data = 1 }).result,
			 0);
	ck_assert(!(sq_flags_of(&B) & XFER_SQ_DEAD));
	/* Forget earlier rings of B's doorbell. */
	while (read(B.wake, &cnt, sizeof(cnt)) > 0)
		;
	progress_detach(prog, &B.pc);
	wait_notice(&B.pc, NOTICE_DETACHED);
	ck_assert_uint_eq(nseen, 1);
	ck_assert(sq_flags_of(&B) & XFER_SQ_DEAD);
	/* Its CQ doorbell was rung so that a sleeping B wakes up. */
	ck_assert_int_eq(read(B.wake, &cnt, sizeof(cnt)), sizeof(cnt));
	ck_assert_uint_ge(cnt, 1);

	/* A can still write into B's region (it is registered), but the
	 * notification has no one to go to and B's ring is left alone. */
	struct xfer_sqe s = sqe_write(A.handle, 0, imp, 0, 32, 2);
	s.flags = XFER_SQE_F_NOTIFY;
	s.notify_value = 3;
	ck_assert_int_eq(run1(&A, s).result, 32);
	memcpy(snap_b, snap_a, 32);
	assert_regions_unchanged();
	assert_cq_empty(&B);
	ck_assert_uint_eq(*v->cq_overflow, 0);

	/* A is unaffected, and detaching it too is confirmed for it. */
	ck_assert_int_eq(run1(&A, (struct xfer_sqe){ .opcode = XFER_OP_NOP,
						     .user_data = 4 }).result,
			 0);
	progress_detach(prog, &A.pc);
	wait_notice(&A.pc, NOTICE_DETACHED);
	ck_assert_uint_eq(nseen, 2);
	ck_assert(sq_flags_of(&A) & XFER_SQ_DEAD);
}
END_TEST

Suite *progress_suite(void)
{
	Suite *s = suite_create("progress");
	TCase *tc = tcase_create("engine");

	tcase_add_checked_fixture(tc, progress_setup, progress_teardown);
	/* Generous: a test that waits WAIT_MS fails by its own assertion
	 * first, with a message that says what did not arrive. */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, write_moves_bytes);
	tcase_add_test(tc, read_moves_bytes);
	tcase_add_test(tc, overlapping_copy_in_one_region);
	tcase_add_test(tc, import_of_sub_range);
	tcase_add_test(tc, nop_and_empty);
	tcase_add_test(tc, invalid_descriptors);
	tcase_add_test(tc, stale_import);
	tcase_add_test(tc, import_refusals);
	tcase_add_test(tc, cma_paths);
	tcase_add_test(tc, cma_owner_exited);
	tcase_add_test(tc, linked_batch);
	tcase_add_test(tc, linked_batch_error);
	tcase_add_test(tc, notify_op);
	tcase_add_test(tc, write_with_notify);
	tcase_add_test(tc, notify_held);
	tcase_add_test(tc, notify_sender);
	tcase_add_test(tc, notify_bound);
	tcase_add_test(tc, notify_uid_bound);
	tcase_add_test(tc, notify_self_held);
	tcase_add_test(tc, cq_backpressure);
	tcase_add_test(tc, many_across_wrap);
	tcase_add_test(tc, corrupt_sq_tail);
	tcase_add_test(tc, corrupt_sq_tail_behind_head);
	tcase_add_test(tc, detach);
	suite_add_tcase(s, tc);
	return s;
}
