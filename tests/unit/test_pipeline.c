/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_pipeline.c - the staging pipeline (daemon/stage/pipeline.c) with
 * real stages that copy bytes: memcpy stages whose work completes later,
 * from the test's own loop and in a shuffled order (as GPU copies and
 * copy workers complete), or inside their start; push fills and pull
 * drains as a socket drives them; failures, cancels, and a pool smaller
 * than the stream, so that pipelines queue for chunks.  Every test
 * checks the bytes that arrived and that every chunk went back.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mem/copy_workers.h"
#include "mem/cma.h"
#include "mem/host_stage.h"
#include "mem/region.h"
#include "mem/staging.h"
#include "stage/pipeline.h"
#include "suites.h"

#define CHUNK 4096u
#define NONE UINT64_MAX

/* --- memcpy stages whose work the test completes --- */

struct tstage {
	const uint8_t *src;          /* fill: the stream's bytes */
	uint8_t *dst;                /* drain: where they go */
	bool fill;
	bool inline_done;            /* finish inside start */
	uint64_t fail_start_at;      /* start refuses the chunk at */
	uint64_t fail_done_at;       /* the work on the chunk at fails */
	bool check_order;            /* chunks must come in stream order */
	uint64_t expect_at;
	int started, cancelled;
};

struct pend {
	struct stage_chunk *c;
	struct tstage *s;
	bool cancelled;
};

static struct pend pend[256];
static unsigned npend;
static uint32_t rnd = 12345;

static unsigned next_rand(void)
{
	rnd = rnd * 1103515245u + 12345u;
	return rnd >> 16;
}

static int64_t work(struct tstage *s, struct stage_chunk *c)
{
	if (c->at == s->fail_done_at)
		return -EIO;
	if (s->fill)
		memcpy(c->buf, s->src + c->at, c->len);
	else
		memcpy(s->dst + c->at, c->buf, c->len);
	return c->len;
}

static int t_start(void *arg, struct stage_chunk *c)
{
	struct tstage *s = arg;

	ck_assert_uint_le(c->len, c->cap);
	if (c->at == s->fail_start_at)
		return -EINVAL;
	s->started++;
	if (s->check_order) {
		ck_assert_uint_eq(c->at, s->expect_at);
		s->expect_at += c->len;
	}
	if (s->inline_done) {
		stage_done(c, work(s, c));
		return 0;
	}
	ck_assert_uint_lt(npend, 256);
	pend[npend++] = (struct pend){ .c = c, .s = s };
	return 0;
}

/* A stage that can stop early: its chunk ends at once. */
static void t_cancel(void *arg, struct stage_chunk *c)
{
	struct tstage *s = arg;

	for (unsigned i = 0; i < npend; i++)
		if (pend[i].c == c) {
			s->cancelled++;
			pend[i] = pend[--npend];
			stage_done(c, -ECANCELED);
			return;
		}
	ck_abort_msg("cancel of a chunk the stage does not hold");
}

static const struct stage_ops fill_ops = {
	.name = "test-fill", .start = t_start, .cancel = t_cancel,
};
static const struct stage_ops drain_ops = {
	.name = "test-drain", .start = t_start,  /* runs to its end */
};

/* Complete pending work i (it may start more). */
static void run_one(unsigned i)
{
	struct pend p = pend[i];

	pend[i] = pend[--npend];
	stage_done(p.c, work(p.s, p.c));
}

static void run_shuffled(void)
{
	while (npend)
		run_one(next_rand() % npend);
}

/* --- the owner --- */

struct owner {
	int dones, wakes;
	int64_t result;
	struct pipeline *pl;
	bool destroy_in_done;
};

static void on_done(void *arg, int64_t result)
{
	struct owner *o = arg;

	o->dones++;
	o->result = result;
	if (o->destroy_in_done) {
		pipeline_destroy(o->pl);
		o->pl = NULL;
	}
}

static void on_wake(void *arg)
{
	struct owner *o = arg;

	o->wakes++;
}

static uint8_t *pattern(size_t n, unsigned seed)
{
	uint8_t *p = malloc(n ? n : 1);

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 131 + seed + (i >> 12));
	return p;
}

static void assert_pool_whole(struct staging_pool *sp)
{
	struct staging_stats st;

	staging_get_stats(sp, &st);
	for (int h = 0; h < 2; h++) {
		ck_assert_uint_eq(st.free[h], st.chunks[h]);
		ck_assert_uint_eq(st.waiting[h], 0);
	}
}

static struct tstage filler(const uint8_t *src)
{
	return (struct tstage){ .src = src, .fill = true,
				.fail_start_at = NONE, .fail_done_at = NONE };
}

static struct tstage drainer(uint8_t *dst)
{
	return (struct tstage){ .dst = dst, .fail_start_at = NONE,
				.fail_done_at = NONE };
}

/* What a case starts from: a stream of len patterned bytes (src), where
 * they go (dst, zeroed), a pool of pool_bytes (0: the smallest, 2 chunks
 * of CHUNK bytes per half), a fill stage reading src, a drain stage
 * writing dst and their owner. */
struct fixture {
	size_t len;
	uint8_t *src, *dst;
	struct staging_pool *sp;     /* NULL: the case destroyed it */
	struct tstage f, d;
	struct owner o;
};

static void fixture_init(struct fixture *x, size_t len, unsigned seed,
			 uint64_t pool_bytes)
{
	*x = (struct fixture){ .len = len };
	x->src = pattern(len, seed);
	x->dst = calloc(1, len ? len : 1);
	ck_assert_ptr_nonnull(x->dst);
	x->sp = staging_create(pool_bytes, CHUNK, false);
	ck_assert_ptr_nonnull(x->sp);
	x->f = filler(x->src);
	x->d = drainer(x->dst);
}

/* Every chunk back in the pool (unless the case destroyed it), then
 * everything freed. */
static void fixture_fini(struct fixture *x)
{
	if (x->sp) {
		assert_pool_whole(x->sp);
		staging_destroy(x->sp);
	}
	free(x->src);
	free(x->dst);
}

static struct pipeline *make(struct staging_pool *sp, uint64_t len,
			     struct tstage *f, struct tstage *d,
			     struct owner *o, unsigned ahead, bool ordered)
{
	struct pipeline_cfg cfg = {
		.pool = sp,
		.half = STAGING_SEND,
		.len = len,
		.ahead = ahead,
		.ordered = ordered,
		.fill = f ? &fill_ops : NULL,
		.fill_arg = f,
		.drain = d ? &drain_ops : NULL,
		.drain_arg = d,
		.done = on_done,
		.wake = on_wake,
		.arg = o,
	};
	struct pipeline *pl = pipeline_create(&cfg);

	ck_assert_ptr_nonnull(pl);
	o->pl = pl;
	return pl;
}

/* The fixture's stream through its own stages to its owner. */
static struct pipeline *make_fx(struct fixture *x, unsigned ahead,
				bool ordered)
{
	return make(x->sp, x->len, &x->f, &x->d, &x->o, ahead, ordered);
}

/* Out of order completions, a pool of 2 chunks for 17: the drain still
 * sees every chunk in order and the bytes arrive whole. */
START_TEST(ordered_through_tiny_pool)
{
	struct fixture x;
	struct staging_stats st;

	fixture_init(&x, 16 * CHUNK + 123, 1, 0);
	x.d.check_order = true;
	struct pipeline *pl = make_fx(&x, 8, true);
	pipeline_start(pl);
	ck_assert_int_eq(x.o.dones, 0);
	ck_assert_uint_eq(npend, 2);  /* the pool's whole half */
	run_shuffled();
	ck_assert_int_eq(x.o.dones, 1);
	ck_assert_int_eq(x.o.result, (int64_t)x.len);
	ck_assert_int_eq(x.f.started, 17);
	ck_assert_int_eq(x.d.started, 17);
	ck_assert_mem_eq(x.src, x.dst, x.len);
	staging_get_stats(x.sp, &st);
	ck_assert_uint_gt(st.waits, 0);
	pipeline_destroy(pl);
	fixture_fini(&x);
}
END_TEST

/* Timed stages: the pool's clocks count every chunk through the fill
 * and the drain once, with the time it spent there; an untimed
 * pipeline counts nothing. */
START_TEST(stage_clocks_count_chunks)
{
	struct fixture x;
	struct staging_stats st;

	fixture_init(&x, 5 * CHUNK + 7, 4, 0);
	/* Untimed first: nothing counted. */
	make_fx(&x, 2, true);
	pipeline_start(x.o.pl);
	run_shuffled();
	ck_assert_int_eq(x.o.dones, 1);
	pipeline_destroy(x.o.pl);
	staging_get_stats(x.sp, &st);
	for (int k = 0; k < STAGING_CLOCK__N; k++)
		ck_assert_uint_eq(st.clock_n[k], 0);

	memset(x.dst, 0, x.len);
	x.o = (struct owner){ 0 };
	x.f = filler(x.src);
	x.d = drainer(x.dst);
	struct pipeline_cfg cfg = {
		.pool = x.sp,
		.half = STAGING_SEND,
		.len = x.len,
		.ahead = 2,
		.ordered = true,
		.fill = &fill_ops,
		.fill_arg = &x.f,
		.drain = &drain_ops,
		.drain_arg = &x.d,
		.fill_clock = STAGING_CLOCK_D2H,
		.drain_clock = STAGING_CLOCK_H2D,
		.done = on_done,
		.wake = on_wake,
		.arg = &x.o,
	};
	x.o.pl = pipeline_create(&cfg);
	ck_assert_ptr_nonnull(x.o.pl);
	pipeline_start(x.o.pl);
	struct timespec ms = { .tv_nsec = 1000000 };
	while (npend) {
		nanosleep(&ms, NULL);  /* every chunk stays >= 1 ms */
		run_one(0);
	}
	ck_assert_int_eq(x.o.dones, 1);
	ck_assert_int_eq(x.o.result, (int64_t)x.len);
	ck_assert_mem_eq(x.src, x.dst, x.len);
	staging_get_stats(x.sp, &st);
	ck_assert_uint_eq(st.clock_n[STAGING_CLOCK_D2H], 6);
	ck_assert_uint_eq(st.clock_n[STAGING_CLOCK_H2D], 6);
	ck_assert_uint_ge(st.clock_ns[STAGING_CLOCK_D2H], 6 * 1000000ull);
	ck_assert_uint_ge(st.clock_ns[STAGING_CLOCK_H2D], 6 * 1000000ull);
	ck_assert_uint_eq(st.clock_n[STAGING_CLOCK_SEND_IDLE], 0);
	ck_assert_str_eq(staging_clock_name(STAGING_CLOCK_D2H), "d2h");
	ck_assert_str_eq(staging_clock_name(STAGING_CLOCK_RECV_STALL),
			 "recv_stall");
	pipeline_destroy(x.o.pl);
	fixture_fini(&x);
}
END_TEST

/* Chunks smaller than the pool's, fills that end inside their start,
 * drains in any order, at most `ahead` out, destroyed inside done. */
START_TEST(unordered_inline_fill)
{
	struct fixture x;

	fixture_init(&x, 50000, 2, 1u << 20);
	x.o.destroy_in_done = true;
	x.f.inline_done = true;
	struct pipeline_cfg cfg = {
		.pool = x.sp, .half = STAGING_RECV, .len = x.len, .chunk = 1000,
		.ahead = 3, .fill = &fill_ops, .fill_arg = &x.f,
		.drain = &drain_ops, .drain_arg = &x.d, .done = on_done,
		.arg = &x.o,
	};
	struct pipeline *pl = pipeline_create(&cfg);
	x.o.pl = pl;
	pipeline_start(pl);
	ck_assert_uint_eq(npend, 3);
	while (npend) {
		ck_assert_uint_le(npend, 3);
		run_one(npend - 1);  /* newest first */
	}
	ck_assert_int_eq(x.o.dones, 1);
	ck_assert_ptr_null(x.o.pl);
	ck_assert_int_eq(x.o.result, (int64_t)x.len);
	ck_assert_int_eq(x.d.started, 50);
	ck_assert_mem_eq(x.src, x.dst, x.len);
	fixture_fini(&x);
}
END_TEST

/* A chunk whose work fails: the first error is the result, once, after
 * every chunk out came back; nothing new starts after it. */
START_TEST(work_fails)
{
	struct fixture x;

	fixture_init(&x, 16 * CHUNK, 3, 0);
	x.f.fail_done_at = 3 * CHUNK;
	struct pipeline *pl = make_fx(&x, 0, true);
	pipeline_start(pl);
	run_shuffled();
	ck_assert_int_eq(x.o.dones, 1);
	ck_assert_int_eq(x.o.result, -EIO);
	ck_assert_int_le(x.f.started, 6);
	ck_assert_int_eq(pipeline_error(pl), -EIO);
	/* Chunk 3 was taken once chunks 0 and 1 were drained (in order:
	 * the pool has two); what was not drained yet is dropped. */
	ck_assert_mem_eq(x.src, x.dst, 2 * CHUNK);
	pipeline_destroy(pl);
	fixture_fini(&x);
}
END_TEST

/* A stage that refuses a chunk in start, and an owner that fails the
 * stream itself. */
START_TEST(start_refuses_and_owner_fails)
{
	struct fixture x;

	fixture_init(&x, 8 * CHUNK, 4, 1u << 20);
	x.d.fail_start_at = 2 * CHUNK;
	struct pipeline *pl = make_fx(&x, 4, false);
	pipeline_start(pl);
	run_shuffled();
	ck_assert_int_eq(x.o.dones, 1);
	ck_assert_int_eq(x.o.result, -EINVAL);
	pipeline_destroy(pl);
	assert_pool_whole(x.sp);

	struct tstage f2 = filler(x.src), d2 = drainer(x.dst);
	struct owner o2 = { 0 };
	pl = make(x.sp, x.len, &f2, &d2, &o2, 4, false);
	pipeline_start(pl);
	pipeline_fail(pl, -ETIMEDOUT);
	pipeline_fail(pl, -EIO);       /* the first one wins */
	ck_assert_int_eq(o2.dones, 0); /* 4 fills still out */
	run_shuffled();
	ck_assert_int_eq(o2.dones, 1);
	ck_assert_int_eq(o2.result, -ETIMEDOUT);
	ck_assert_int_eq(d2.started, 0);
	pipeline_destroy(pl);
	fixture_fini(&x);
}
END_TEST

/* The owner goes mid-stream: idle chunks come back at once, a stage
 * with cancel() ends its chunks, one without runs them to their end;
 * done never comes; a pipeline waiting behind it gets the chunks. */
START_TEST(cancel_leaves_chunks_to_stages)
{
	struct fixture x;
	struct staging_stats st;

	fixture_init(&x, 32 * CHUNK, 5, 8 * CHUNK);
	uint8_t *dst2 = calloc(1, x.len);
	struct tstage f2 = filler(x.src), d2 = drainer(dst2);
	struct owner o2 = { 0 };

	/* 4 chunks per half: a takes them all, b waits. */
	struct pipeline *a = make_fx(&x, 4, true);
	pipeline_start(a);
	struct pipeline *b = make(x.sp, x.len, &f2, &d2, &o2, 8, true);
	pipeline_start(b);
	ck_assert_uint_eq(npend, 4);
	staging_get_stats(x.sp, &st);
	ck_assert_uint_eq(st.waiting[STAGING_SEND], 1);
	/* Some of a's chunks into its drain, one of those finished. */
	run_one(0);
	run_one(0);
	for (unsigned i = 0; i < npend; i++)
		if (pend[i].s == &x.d) {
			run_one(i);
			break;
		}
	/* Left: two of a's fills (its cancel ends them), one filled chunk
	 * waiting for its turn (back at once). */
	pipeline_destroy(a);
	ck_assert_int_eq(x.f.cancelled, 2);
	ck_assert_int_eq(x.o.dones, 0);
	/* b goes on with what a gave back, then with the rest. */
	run_shuffled();
	ck_assert_int_eq(x.o.dones, 0);
	ck_assert_int_eq(o2.dones, 1);
	ck_assert_int_eq(o2.result, (int64_t)x.len);
	ck_assert_mem_eq(x.src, dst2, x.len);
	pipeline_destroy(b);
	fixture_fini(&x);
	free(dst2);
}
END_TEST

/* The cancel of a fill stage that can stop early is called for each of
 * its chunks; the drain's run on. */
START_TEST(cancel_calls_stage_cancel)
{
	struct fixture x;

	fixture_init(&x, 8 * CHUNK, 6, 1u << 20);
	struct pipeline *pl = make_fx(&x, 4, false);
	pipeline_start(pl);
	ck_assert_uint_eq(npend, 4);
	run_one(0);   /* one fill ends: its drain starts */
	ck_assert_uint_eq(npend, 4);
	pipeline_destroy(pl);
	ck_assert_int_eq(x.f.cancelled, 3);
	ck_assert_uint_eq(npend, 1);  /* the drain's */
	run_shuffled();
	ck_assert_int_eq(x.o.dones, 0);
	fixture_fini(&x);
}
END_TEST

/* Push fill as a socket does it: bytes in odd pieces into the chunk it
 * is given, "none free" while the drains hold the pool, a wake when one
 * comes back; an open length ended by push_end. */
START_TEST(push_fill)
{
	struct fixture x;

	fixture_init(&x, 20 * CHUNK + 77, 7, 0);
	struct pipeline_cfg cfg = {
		.pool = x.sp, .half = STAGING_RECV, .len = PIPELINE_LEN_OPEN,
		.drain = &drain_ops, .drain_arg = &x.d, .done = on_done,
		.wake = on_wake, .arg = &x.o,
	};
	struct pipeline *pl = pipeline_create(&cfg);
	size_t off = 0;
	int stalls = 0;

	pipeline_start(pl);
	while (off < x.len) {
		struct stage_chunk *c;
		int rc = pipeline_push_take(pl, &c);
		if (rc == 0) {
			/* Stop reading until a drain gives a chunk back. */
			int wakes = x.o.wakes;
			stalls++;
			ck_assert_uint_gt(npend, 0);
			while (x.o.wakes == wakes && npend)
				run_one(next_rand() % npend);
			ck_assert_int_eq(x.o.wakes, wakes + 1);
			continue;
		}
		ck_assert_int_eq(rc, 1);
		ck_assert_uint_eq(c->at, off - c->len);
		size_t n = 777;
		if (n > c->cap - c->len)
			n = c->cap - c->len;
		if (n > x.len - off)
			n = x.len - off;
		memcpy(c->buf + c->len, x.src + off, n);
		c->len += (uint32_t)n;
		off += n;
		if (c->len == c->cap || off == x.len)
			pipeline_push_filled(c, 0);
	}
	ck_assert_int_gt(stalls, 0);
	pipeline_push_end(pl);
	ck_assert_int_eq(x.o.dones, 0);
	run_shuffled();
	ck_assert_int_eq(x.o.dones, 1);
	ck_assert_int_eq(x.o.result, (int64_t)x.len);
	ck_assert_mem_eq(x.src, x.dst, x.len);
	struct stage_chunk *c;
	ck_assert_int_eq(pipeline_push_take(pl, &c), -EPIPE);
	pipeline_destroy(pl);
	fixture_fini(&x);
}
END_TEST

/* A push stream that fails: the owner hears the error, gives back the
 * chunk it held; a push chunk of a destroyed pipeline just goes back. */
START_TEST(push_fail_and_orphan)
{
	struct fixture x;

	fixture_init(&x, 4 * CHUNK, 0, 0);
	struct pipeline_cfg cfg = {
		.pool = x.sp, .half = STAGING_RECV, .len = x.len,
		.drain = &drain_ops, .drain_arg = &x.d, .done = on_done,
		.wake = on_wake, .arg = &x.o,
	};
	struct pipeline *pl = pipeline_create(&cfg);
	struct stage_chunk *c, *c2;

	pipeline_start(pl);
	ck_assert_int_eq(pipeline_push_take(pl, &c), 1);
	ck_assert_int_eq(pipeline_push_take(pl, &c2), 1);
	ck_assert_ptr_eq(c, c2);  /* the same until filled */
	c->len = 10;
	pipeline_fail(pl, -ECONNRESET);
	ck_assert_int_eq(pipeline_push_take(pl, &c2), -ECONNRESET);
	ck_assert_int_eq(x.o.dones, 0);  /* the owner still holds c */
	pipeline_push_filled(c, -ECONNRESET);
	ck_assert_int_eq(x.o.dones, 1);
	ck_assert_int_eq(x.o.result, -ECONNRESET);
	pipeline_destroy(pl);
	assert_pool_whole(x.sp);

	struct owner o2 = { 0 };
	cfg.arg = &o2;
	pl = pipeline_create(&cfg);
	pipeline_start(pl);
	ck_assert_int_eq(pipeline_push_take(pl, &c), 1);
	pipeline_destroy(pl);
	c->len = 5;
	pipeline_push_filled(c, 0);   /* no pipeline: back to the pool */
	ck_assert_int_eq(o2.dones, 0);
	ck_assert_uint_eq(npend, 0);
	fixture_fini(&x);
}
END_TEST

/* Pull drain as a socket does it: the next chunk in order when there is
 * room, a wake when the one it waits for is filled, chunks given back
 * when the socket took them, some after the pipeline is gone. */
START_TEST(pull_drain_in_order)
{
	struct fixture x;
	struct stage_chunk *held[16];
	unsigned nheld = 0;
	uint64_t got = 0;

	fixture_init(&x, 12 * CHUNK + 5, 8, 16 * CHUNK);
	struct pipeline *pl = make(x.sp, x.len, &x.f, NULL, &x.o, 4, true);
	pipeline_start(pl);
	ck_assert_uint_eq(npend, 4);
	while (got < x.len) {
		struct stage_chunk *c;
		int rc = pipeline_pull(pl, &c);
		ck_assert_int_ge(rc, 0);
		if (rc == 0) {
			int wakes = x.o.wakes;
			while (x.o.wakes == wakes)
				run_one(next_rand() % npend);
			continue;
		}
		ck_assert_uint_eq(c->at, got);
		memcpy(x.dst + c->at, c->buf, c->len);
		got += c->len;
		held[nheld++] = c;
		if (nheld == 3) {  /* the socket took three */
			while (nheld)
				pipeline_chunk_release(held[--nheld]);
		}
	}
	ck_assert_int_eq(x.o.dones, 1);
	ck_assert_int_eq(x.o.result, (int64_t)x.len);
	pipeline_destroy(pl);
	while (nheld)
		pipeline_chunk_release(held[--nheld]);
	ck_assert_mem_eq(x.src, x.dst, x.len);
	assert_pool_whole(x.sp);

	/* A failed fill: pull says so at once. */
	struct tstage f2 = filler(x.src);
	struct owner o2 = { 0 };
	f2.fail_done_at = 0;
	pl = make(x.sp, x.len, &f2, NULL, &o2, 4, true);
	pipeline_start(pl);
	struct stage_chunk *c;
	ck_assert_int_eq(pipeline_pull(pl, &c), 0);
	run_shuffled();
	ck_assert_int_eq(o2.wakes, 1);
	ck_assert_int_eq(pipeline_pull(pl, &c), -EIO);
	ck_assert_int_eq(o2.dones, 1);
	pipeline_destroy(pl);
	fixture_fini(&x);
}
END_TEST

/* Nothing to move: it ends inside start. */
START_TEST(empty_stream)
{
	struct fixture x;

	fixture_init(&x, 0, 0, 0);
	x.o.destroy_in_done = true;
	struct pipeline *pl = make_fx(&x, 4, true);
	pipeline_start(pl);
	ck_assert_int_eq(x.o.dones, 1);
	ck_assert_int_eq(x.o.result, 0);
	ck_assert_int_eq(x.f.started, 0);
	pipeline_destroy(NULL);
	fixture_fini(&x);
}
END_TEST

/* The pool going away ends chunks still in a stage whose engine is gone
 * (as the GPU copies at exit). */
START_TEST(pool_destroy_ends_stages)
{
	struct fixture x;

	fixture_init(&x, 4 * CHUNK, 9, 0);
	struct pipeline *pl = make_fx(&x, 4, true);
	pipeline_start(pl);
	pipeline_destroy(pl);
	ck_assert_int_eq(x.f.cancelled, 2);
	ck_assert_uint_eq(npend, 0);  /* the fill's cancel ended them */
	pl = make_fx(&x, 4, true);
	x.f.inline_done = true;
	pipeline_start(pl);
	ck_assert_uint_eq(npend, 2);  /* two drains out */
	pipeline_destroy(pl);
	npend = 0;                    /* their engine is gone */
	staging_destroy(x.sp);        /* ends them: no leak under ASan */
	x.sp = NULL;
	ck_assert_int_eq(x.o.dones, 0);
	fixture_fini(&x);
}
END_TEST

/* --- the host stages, on real copy workers --- */

static void submit_job(void *ctx, struct copy_job *j)
{
	copy_workers_submit(ctx, j);
}

/* Another process's memory (here our own, through CMA) into a memfd
 * region, chunk by chunk on three copy workers; then a stream cancelled
 * at once, its regions dropped by their owner while the workers still
 * copy: the chunks' references keep them (ASan watches). */
START_TEST(host_stages_on_copy_workers)
{
	struct fixture x;
	struct copy_workers *w = copy_workers_create(3);
	struct cma_owner *co;
	struct region *from, *to;

	ck_assert_ptr_nonnull(w);
	fixture_init(&x, 300007, 10, 8 * CHUNK);
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	ck_assert_int_ge(pidfd, 0);
	ck_assert_int_eq(cma_owner_open(getpid(), pidfd, getuid(), getgid(),
					&co), 0);
	ck_assert_int_eq(region_create_cma(co, (uintptr_t)x.src, x.len, 1, &from),
			 0);
	cma_owner_put(co);
	int fd = memfd_create("pipeline", MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)x.len), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW),
			 0);
	ck_assert_int_eq(region_create_memfd(fd, x.len, 1, &to), 0);

	struct host_stage rd = { .r = from, .submit = submit_job,
				 .submit_ctx = w };
	struct host_stage wr = { .r = to, .submit = submit_job,
				 .submit_ctx = w };
	struct pipeline_cfg cfg = {
		.pool = x.sp, .half = STAGING_RECV, .len = x.len, .ahead = 8,
		.fill = &host_stage_read, .fill_arg = &rd,
		.drain = &host_stage_write, .drain_arg = &wr,
		.hold = { from, to }, .done = on_done, .arg = &x.o,
	};
	struct pipeline *pl = pipeline_create(&cfg);
	pipeline_start(pl);
	while (!x.o.dones)
		copy_workers_poll(w);
	ck_assert_int_eq(x.o.result, (int64_t)x.len);
	ck_assert_mem_eq(region_map_at(to, 0), x.src, x.len);
	pipeline_destroy(pl);
	assert_pool_whole(x.sp);

	/* Cancelled at once; the owner drops both regions. */
	struct owner o2 = { 0 };
	cfg.arg = &o2;
	pl = pipeline_create(&cfg);
	pipeline_start(pl);
	pipeline_destroy(pl);
	region_put(from);
	region_put(to);
	while (copy_workers_busy(w))
		copy_workers_poll(w);
	ck_assert_int_eq(o2.dones, 0);
	copy_workers_destroy(w);
	fixture_fini(&x);
}
END_TEST

static void setup(void)
{
	npend = 0;
	rnd = 12345;
}

Suite *pipeline_suite(void)
{
	Suite *s = suite_create("pipeline");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, ordered_through_tiny_pool);
	tcase_add_test(tc, stage_clocks_count_chunks);
	tcase_add_test(tc, unordered_inline_fill);
	tcase_add_test(tc, work_fails);
	tcase_add_test(tc, start_refuses_and_owner_fails);
	tcase_add_test(tc, cancel_leaves_chunks_to_stages);
	tcase_add_test(tc, cancel_calls_stage_cancel);
	tcase_add_test(tc, push_fill);
	tcase_add_test(tc, push_fail_and_orphan);
	tcase_add_test(tc, pull_drain_in_order);
	tcase_add_test(tc, empty_stream);
	tcase_add_test(tc, pool_destroy_ends_stages);
	tcase_add_test(tc, host_stages_on_copy_workers);
	suite_add_tcase(s, tc);
	return s;
}
