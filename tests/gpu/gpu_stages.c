/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_stages.c - the GPU stages of the staging pipeline (daemon/gpu/
 * stage.c: D2H fill, H2D drain) through the real pipeline, chunk pool
 * and copy engine (stage/pipeline.c, mem/staging.c, gpu/copy.c), linked
 * in as the unit tests link the daemon's objects: no xferd, no client.
 *
 * Pairings, each at 1, 4095, 4097, chunk - 1, chunk, chunk + 1,
 * 3 chunks + 7 and 256 MiB bytes, at odd offsets at both ends:
 *   gpu-gpu   D2H fill from GPU buffer A, H2D drain of the same chunk
 *             into GPU buffer B (a loop-back middle: what a link would
 *             carry between the two stages goes straight through);
 *   host-gpu  a host fill (memcpy, completed later from the test's loop
 *             as a copy worker's would be) and the H2D drain;
 *   gpu-host  the D2H fill and a host drain.
 * The pool has 4 chunks per half and a pipeline may keep 8 out, so every
 * stream of more than 4 chunks waits for chunks (the pool's wait count
 * must grow).  Every byte of the destination range is checked, the bytes
 * just before and after it must be unchanged, and after each stream
 * every chunk is back in the pool and the copy engine is idle.  With two
 * GPUs, gpu-gpu also runs from GPU 1 to GPU 0.
 *
 * Single thread: the test's loop is the progress thread (host stages,
 * gpu_copies_flush, gpu_copies_poll).  Exit 0 pass, 1 fail, 77 skip (no
 * CUDA driver or no GPU).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "gpu/gpu.h"
#include "gpu/stage.h"
#include "mem/staging.h"
#include "stage/pipeline.h"

#include "gpulib.h"

#define CHUNK       (1u << 20)
#define PER_HALF    4u
#define AHEAD       8u
#define MAX_LEN     (256ull << 20)
#define GUARD       64u          /* bytes checked on each side */
#define BUF_LEN     (MAX_LEN + 2 * GUARD + 16) /* + the odd offsets */
#define STREAM_MS   60000u       /* one stream may take this long */

static const uint64_t sizes[] = {
	1, 4095, 4097, CHUNK - 1, CHUNK, CHUNK + 1, 3ull * CHUNK + 7, MAX_LEN,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Host-stage work the loop completes later; never more than the pool's
 * chunks are out at once. */
struct host_stage;
struct host_work {
	struct stage_chunk *c;
	struct host_stage *s;
};
struct host_queue {
	struct host_work w[2 * PER_HALF];
	unsigned n;
};

/* One host end of a stream: byte i of the stream is base[i]. */
struct host_stage {
	uint8_t *base;
	bool fill;
	struct host_queue *q;
};

struct env {
	struct gpu_copies *g;
	struct staging_pool *sp;
	struct host_queue q;
	unsigned streams;
	uint64_t bytes;
};

static int host_start(void *arg, struct stage_chunk *c)
{
	struct host_stage *s = arg;

	T_ASSERT(c->len > 0 && c->len <= c->cap, "host stage: chunk of %u "
		 "bytes, cap %u", c->len, c->cap);
	T_ASSERT(s->q->n < 2 * PER_HALF, "more host chunks out than the pool "
		 "has");
	s->q->w[s->q->n++] = (struct host_work){ .c = c, .s = s };
	return 0;
}

static const struct stage_ops host_fill = {
	.name = "test-host-fill", .start = host_start,
};
static const struct stage_ops host_drain = {
	.name = "test-host-drain", .start = host_start,
};

/* Newest first, so that chunks come back out of stream order.  A
 * stage_done may start the next chunk here (re-entrant push): w is
 * copied out first. */
static void host_run(struct host_queue *q)
{
	while (q->n) {
		struct host_work w = q->w[--q->n];
		if (w.s->fill)
			memcpy(w.c->buf, w.s->base + w.c->at, w.c->len);
		else
			memcpy(w.s->base + w.c->at, w.c->buf, w.c->len);
		stage_done(w.c, w.c->len);
	}
}

struct stream {
	bool done;
	int64_t result;
};

static void on_done(void *arg, int64_t result)
{
	struct stream *st = arg;

	T_ASSERT(!st->done, "pipeline ended twice");
	st->done = true;
	st->result = result;
}

/* Every copy of this test is a chunk's, which ends through its own
 * on_done (gpu/stage.c). */
static void stray_copy(void *arg, struct xop *op, int64_t res)
{
	(void)arg, (void)op;
	T_ASSERT(0, "a GPU copy (result %lld) ended without its chunk",
		 (long long)res);
}

static void assert_pool_whole(struct env *e, const char *what)
{
	struct staging_stats st;

	staging_get_stats(e->sp, &st);
	for (int h = 0; h < 2; h++)
		T_ASSERT(st.free[h] == st.chunks[h] && st.waiting[h] == 0,
			 "%s: half %d has %u of %u chunks free, %u waiting",
			 what, h, st.free[h], st.chunks[h], st.waiting[h]);
}

static uint64_t pool_waits(struct env *e)
{
	struct staging_stats st;

	staging_get_stats(e->sp, &st);
	return st.waits;
}

/* One stream of len bytes from fill to drain, driven to its end. */
static void run_stream(struct env *e, const char *what, uint64_t len,
		       enum staging_half half, const struct stage_ops *fill,
		       void *fill_arg, const struct stage_ops *drain,
		       void *drain_arg)
{
	struct stream st = { 0 };
	uint64_t waits = pool_waits(e);
	struct pipeline_cfg cfg = {
		.pool = e->sp,
		.half = half,
		.len = len,
		.ahead = AHEAD,
		/* Every other stream in order, as a socket's would be. */
		.ordered = e->streams % 2,
		.fill = fill,
		.fill_arg = fill_arg,
		.drain = drain,
		.drain_arg = drain_arg,
		.done = on_done,
		.arg = &st,
	};
	struct pipeline *pl = pipeline_create(&cfg);

	T_ASSERT(pl, "%s: pipeline_create", what);
	uint64_t deadline = tl_now_ms() + STREAM_MS;
	pipeline_start(pl);
	while (!st.done) {
		host_run(&e->q);
		gpu_copies_flush(e->g);
		gpu_copies_poll(e->g, stray_copy, NULL);
		T_ASSERT(tl_now_ms() < deadline, "%s: not through in %u ms",
			 what, STREAM_MS);
	}
	T_ASSERT(st.result == (int64_t)len, "%s: result %lld, expected %llu",
		 what, (long long)st.result, (unsigned long long)len);
	T_ASSERT(e->q.n == 0, "%s: host work left after the end", what);
	pipeline_destroy(pl);
	T_ASSERT(!gpu_copies_busy(e->g), "%s: GPU copies out after the end",
		 what);
	assert_pool_whole(e, what);
	if (len > (uint64_t)PER_HALF * CHUNK)
		T_ASSERT(pool_waits(e) > waits, "%s: %llu bytes in chunks of "
			 "%u never waited for a chunk", what,
			 (unsigned long long)len, CHUNK);
	e->streams++;
	e->bytes += len;
}

/* The destination's guard bytes around [off, off + len). */
static void guard_fill(struct gl_buf *b, uint64_t off, uint64_t len,
		       uint64_t seed)
{
	gl_fill(b, off - GUARD, GUARD, seed, 0);
	gl_fill(b, off + len, GUARD, seed, GUARD);
}

static void check_dst(struct gl_buf *b, uint64_t off, uint64_t len,
		      uint64_t seed, uint64_t guard_seed, const char *what)
{
	size_t bad = gl_check(b, off, len, seed, 0);

	T_ASSERT(!bad, "%s: byte %zu of %llu wrong", what, bad - 1,
		 (unsigned long long)len);
	T_ASSERT(!gl_check(b, off - GUARD, GUARD, guard_seed, 0),
		 "%s: a byte before the range changed", what);
	T_ASSERT(!gl_check(b, off + len, GUARD, guard_seed, GUARD),
		 "%s: a byte after the range changed", what);
}

static uint64_t gaddr(const struct gl_buf *b, uint64_t off)
{
	return (uint64_t)(uintptr_t)(b->ptr + off);
}

/* GPU buffer a at aoff -> chunks -> GPU buffer b at boff. */
static void gpu_gpu(struct env *e, struct gl_buf *a, uint64_t aoff,
		    struct gl_buf *b, uint64_t boff, uint64_t len, uint64_t seed)
{
	char what[96];
	struct gpu_stage from = { .g = e->g, .addr = gaddr(a, aoff),
				  .dev = a->dev };
	struct gpu_stage to = { .g = e->g, .addr = gaddr(b, boff),
				.dev = b->dev };

	snprintf(what, sizeof(what), "gpu%d-gpu%d %llu B at +%llu -> +%llu",
		 a->dev, b->dev, (unsigned long long)len,
		 (unsigned long long)aoff, (unsigned long long)boff);
	gl_fill(a, aoff, len, seed, 0);
	guard_fill(b, boff, len, ~seed);
	run_stream(e, what, len, STAGING_SEND, &gpu_stage_d2h, &from,
		   &gpu_stage_h2d, &to);
	check_dst(b, boff, len, seed, ~seed, what);
}

/* Host memory at hoff -> chunks -> GPU buffer b at boff. */
static void host_gpu(struct env *e, struct gl_buf *h, uint64_t hoff,
		     struct gl_buf *b, uint64_t boff, uint64_t len,
		     uint64_t seed)
{
	char what[96];
	struct host_stage from = { .base = h->ptr + hoff, .fill = true,
				   .q = &e->q };
	struct gpu_stage to = { .g = e->g, .addr = gaddr(b, boff),
				.dev = b->dev };

	snprintf(what, sizeof(what), "host-gpu%d %llu B at +%llu -> +%llu",
		 b->dev, (unsigned long long)len, (unsigned long long)hoff,
		 (unsigned long long)boff);
	gl_fill(h, hoff, len, seed, 0);
	guard_fill(b, boff, len, ~seed);
	run_stream(e, what, len, STAGING_RECV, &host_fill, &from,
		   &gpu_stage_h2d, &to);
	check_dst(b, boff, len, seed, ~seed, what);
}

/* GPU buffer a at aoff -> chunks -> host memory at hoff. */
static void gpu_host(struct env *e, struct gl_buf *a, uint64_t aoff,
		     struct gl_buf *h, uint64_t hoff, uint64_t len,
		     uint64_t seed)
{
	char what[96];
	struct gpu_stage from = { .g = e->g, .addr = gaddr(a, aoff),
				  .dev = a->dev };
	struct host_stage to = { .base = h->ptr + hoff, .q = &e->q };

	snprintf(what, sizeof(what), "gpu%d-host %llu B at +%llu -> +%llu",
		 a->dev, (unsigned long long)len, (unsigned long long)aoff,
		 (unsigned long long)hoff);
	gl_fill(a, aoff, len, seed, 0);
	guard_fill(h, hoff, len, ~seed);
	run_stream(e, what, len, STAGING_SEND, &gpu_stage_d2h, &from,
		   &host_drain, &to);
	check_dst(h, hoff, len, seed, ~seed, what);
}

int main(void)
{
	struct env e = { 0 };
	struct gl_buf a, b, h_src, h_dst;

	int ngpus = gl_require_gpus(1);
	log_init(LOG_LVL_INFO);
	int n = gpu_init();
	T_ASSERT(n >= 1, "gpu_init: %d (%s); the runtime sees %d GPUs", n,
		 gpu_unavailable_reason(), ngpus);
	e.g = gpu_copies_create();
	T_ASSERT(e.g, "gpu_copies_create");
	/* Pinned as xferd pins its pool: the copies are DMA from it. */
	e.sp = staging_create(2ull * PER_HALF * CHUNK, CHUNK, true);
	T_ASSERT(e.sp && staging_chunk_bytes(e.sp) == CHUNK,
		 "a pinned pool of %u chunks of %u bytes", 2 * PER_HALF, CHUNK);

	gl_alloc(NULL, GL_DEVICE, 0, BUF_LEN, &a);
	gl_alloc(NULL, GL_DEVICE, 0, BUF_LEN, &b);
	gl_alloc(NULL, GL_HOST_MALLOC, 0, BUF_LEN, &h_src);
	gl_alloc(NULL, GL_HOST_MALLOC, 0, BUF_LEN, &h_dst);
	for (unsigned i = 0; i < NSIZES; i++) {
		uint64_t len = sizes[i];
		/* Odd offsets at both ends, past the guard bytes. */
		uint64_t soff = GUARD + 1 + 2 * (i % 3);
		uint64_t doff = GUARD + 7 + 2 * (i % 2);
		uint64_t seed = 0x5eed0000u + 16 * i;

		gpu_gpu(&e, &a, soff, &b, doff, len, seed);
		host_gpu(&e, &h_src, doff, &b, soff, len, seed + 1);
		gpu_host(&e, &a, doff, &h_dst, soff, len, seed + 2);
		printf("%-10llu bytes: gpu-gpu, host-gpu, gpu-host ok\n",
		       (unsigned long long)len);
	}
	if (ngpus >= 2 && gpu_count() >= 2) {
		struct gl_buf a1;
		gl_alloc(NULL, GL_DEVICE, 1, 8ull * CHUNK + 2 * GUARD, &a1);
		gpu_gpu(&e, &a1, GUARD + 3, &b, GUARD + 5, 1, 0xd1);
		gpu_gpu(&e, &a1, GUARD + 3, &b, GUARD + 5, 6ull * CHUNK + 11,
			0xd2);
		gl_buf_free(NULL, &a1, false);
		printf("GPU 1 -> GPU 0: ok\n");
	}
	gl_buf_free(NULL, &h_dst, false);
	gl_buf_free(NULL, &h_src, false);
	gl_buf_free(NULL, &b, false);
	gl_buf_free(NULL, &a, false);
	staging_destroy(e.sp);
	gpu_copies_destroy(e.g);
	gpu_fini();
	printf("gpu_stages: %u streams, %llu bytes through the GPU stages, "
	       "every byte checked\n", e.streams,
	       (unsigned long long)e.bytes);
	return 0;
}
