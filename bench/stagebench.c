/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stagebench.c - the GPU stages of the staging pipeline alone (daemon/
 * gpu/stage.c through stage/pipeline.c, mem/staging.c, gpu/copy.c,
 * linked in as the unit tests link the daemon's objects), against
 * cudaMemcpyAsync between the same buffers.
 *
 *   stagebench [--len BYTES] [--reps N] [--ahead N] [--dev N]
 *              [--chunks 256K,1M,...]
 *
 * For each chunk size (default 256 KiB, 1, 2, 4, 8 MiB), a pinned pool
 * of `ahead` chunks per half (as xferd's pool, pinned for GPU copies)
 * and a stream of --len bytes (default 1 GiB) of one cudaMalloc buffer:
 *   stage-d2h-SIZE  the D2H fill stage, chunks drained at once (a drain
 *                   that ends inside its start), at most `ahead` chunks
 *                   out (default 8, local/staged.h's LSTAGE_AHEAD);
 *   stage-h2d-SIZE  a fill that ends at once and the H2D drain stage;
 * the baseline is the same bytes as cudaMemcpyAsync of SIZE each, on one
 * stream, into (out of) the same pinned chunks in turn, synchronised
 * once at the end: what the copy engine does with nothing around it.
 * Each row: the median of --reps runs (5) after one warm-up, GB/s of
 * both and the ratio (goal >= 0.9).  Well under a minute on an H100.
 *
 * Single thread (its loop is the progress thread).  Exit 0, 1 on error,
 * 77 without a GPU.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "gpu/gpu.h"
#include "gpu/stage.h"
#include "mem/staging.h"
#include "stage/pipeline.h"

#define MAX_CHUNKS 16
#define MAX_REPS   64

struct opts {
	uint64_t len;
	unsigned reps, ahead;
	int dev;
	uint32_t chunk[MAX_CHUNKS];
	unsigned nchunks;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "stagebench: %s\n", what);
	exit(1);
}

#define CK(expr)                                                              \
	do {                                                                  \
		cudaError_t e_ = (expr);                                      \
		if (e_ != cudaSuccess) {                                      \
			fprintf(stderr, "stagebench: %s: %s\n", #expr,        \
				cudaGetErrorString(e_));                      \
			exit(1);                                              \
		}                                                             \
	} while (0)

/* The host end of a stream that costs nothing: the chunk's bytes are
 * taken (or given) the moment it comes. */
static int at_once(void *arg, struct stage_chunk *c)
{
	(void)arg;
	stage_done(c, c->len);
	return 0;
}

static const struct stage_ops host_at_once = {
	.name = "bench-at-once", .start = at_once,
};

struct run {
	bool done;
	int64_t result;
};

static void on_done(void *arg, int64_t result)
{
	struct run *r = arg;

	r->done = true;
	r->result = result;
}

static void stray(void *arg, struct xop *op, int64_t res)
{
	(void)arg, (void)op, (void)res;
	die("a copy ended without its chunk");
}

/* One stream through the pipeline; returns its seconds. */
static double run_stage(struct gpu_copies *g, struct staging_pool *sp,
			const struct opts *o, struct gpu_stage *gs, bool d2h)
{
	struct run r = { 0 };
	struct pipeline_cfg cfg = {
		.pool = sp,
		.half = d2h ? STAGING_SEND : STAGING_RECV,
		.len = o->len,
		.ahead = o->ahead,
		.fill = d2h ? &gpu_stage_d2h : &host_at_once,
		.fill_arg = d2h ? (void *)gs : NULL,
		.drain = d2h ? &host_at_once : &gpu_stage_h2d,
		.drain_arg = d2h ? NULL : (void *)gs,
		.done = on_done,
		.arg = &r,
	};
	struct pipeline *pl = pipeline_create(&cfg);

	if (!pl)
		die("pipeline_create");
	double t0 = now_s();
	pipeline_start(pl);
	while (!r.done) {
		gpu_copies_flush(g);
		gpu_copies_poll(g, stray, NULL);
	}
	double t = now_s() - t0;
	pipeline_destroy(pl);
	if (r.result != (int64_t)o->len)
		die("a stream failed");
	return t;
}

/* The same bytes as cudaMemcpyAsync into (out of) the chunks in turn. */
static double run_memcpy(uint8_t *gbuf, uint8_t **chunks, unsigned n,
			 uint32_t csize, const struct opts *o, bool d2h,
			 cudaStream_t s)
{
	double t0 = now_s();
	unsigned i = 0;

	for (uint64_t off = 0; off < o->len; off += csize, i++) {
		size_t len = o->len - off < csize ? o->len - off : csize;
		uint8_t *c = chunks[i % n];
		if (d2h)
			CK(cudaMemcpyAsync(c, gbuf + off, len,
					   cudaMemcpyDeviceToHost, s));
		else
			CK(cudaMemcpyAsync(gbuf + off, c, len,
					   cudaMemcpyHostToDevice, s));
	}
	CK(cudaStreamSynchronize(s));
	return now_s() - t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	else if (*end == 'G' || *end == 'g')
		v <<= 30, end++;
	if (end == s || (*end && *end != ','))
		die("a size is a number with K, M or G");
	return v;
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .len = 1ull << 30, .reps = 5, .ahead = 8 };
	const char *chunks = "256K,1M,2M,4M,8M";

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			die("usage: stagebench [--len B] [--reps N] [--ahead N] "
			    "[--dev N] [--chunks 256K,1M,...]");
		if (!strcmp(a, "--len"))
			o->len = parse_size(v);
		else if (!strcmp(a, "--reps"))
			o->reps = (unsigned)atoi(v);
		else if (!strcmp(a, "--ahead"))
			o->ahead = (unsigned)atoi(v);
		else if (!strcmp(a, "--dev"))
			o->dev = atoi(v);
		else if (!strcmp(a, "--chunks"))
			chunks = v;
		else
			die("unknown option");
		i++;
	}
	for (const char *p = chunks; *p && o->nchunks < MAX_CHUNKS;) {
		uint64_t c = parse_size(p);
		if (c < 4096 || c % 4096 || c > (64u << 20))
			die("a chunk is 4 KiB to 64 MiB, a multiple of 4 KiB");
		o->chunk[o->nchunks++] = (uint32_t)c;
		p = strchr(p, ',');
		if (!p)
			break;
		p++;
	}
	if (o->len == 0 || o->reps == 0 || o->reps > MAX_REPS ||
	    o->ahead == 0 || o->ahead > 64 || o->nchunks == 0)
		die("--len, --reps (1-64), --ahead (1-64), --chunks");
}

int main(int argc, char **argv)
{
	struct opts o;
	int n = 0;

	parse(argc, argv, &o);
	if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
		printf("skip: no CUDA driver here\n");
		return 77;
	}
	if (cudaGetDeviceCount(&n) != cudaSuccess || n <= o.dev) {
		printf("skip: no GPU %d here\n", o.dev);
		return 77;
	}
	log_init(LOG_LVL_WARN);
	if (gpu_init() <= o.dev)
		die("gpu_init");
	struct gpu_copies *g = gpu_copies_create();
	if (!g)
		die("gpu_copies_create");
	uint8_t *gbuf;
	cudaStream_t s;
	CK(cudaSetDevice(o.dev));
	CK(cudaMalloc((void **)&gbuf, o.len));
	CK(cudaMemset(gbuf, 0x5a, o.len));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	struct gpu_stage gs = { .g = g, .addr = (uint64_t)(uintptr_t)gbuf,
				.dev = o.dev };

	printf("# stagebench: %llu bytes a run, %u chunks out, median of %u "
	       "runs, GPU %d\n", (unsigned long long)o.len, o.ahead, o.reps,
	       o.dev);
	printf("%-18s %10s %12s %7s\n", "row", "stage GB/s", "memcpy GB/s",
	       "ratio");
	for (unsigned k = 0; k < o.nchunks; k++) {
		uint32_t csize = o.chunk[k];
		struct staging_pool *sp = staging_create(
			2ull * o.ahead * csize, csize, true);
		if (!sp)
			die("staging_create (pinned)");
		for (int dir = 0; dir < 2; dir++) {
			bool d2h = dir == 0;
			enum staging_half h = d2h ? STAGING_SEND : STAGING_RECV;
			/* The baseline's chunks: the pool's own, taken for it
			 * and given back before the pipeline runs. */
			struct staging_chunk *taken[64];
			uint8_t *chunks[64];
			unsigned nc = 0;
			while (nc < o.ahead &&
			       (taken[nc] = staging_take(sp, h)) != NULL) {
				chunks[nc] = taken[nc]->p;
				nc++;
			}
			for (unsigned i = 0; i < nc; i++)
				staging_give(taken[i]);
			if (nc == 0)
				die("no chunk in the pool");
			double ts[MAX_REPS], tm[MAX_REPS];
			run_stage(g, sp, &o, &gs, d2h);      /* warm-up */
			run_memcpy(gbuf, chunks, nc, csize, &o, d2h, s);
			for (unsigned r = 0; r < o.reps; r++) {
				/* Alternated, so that drift hits both. */
				ts[r] = run_stage(g, sp, &o, &gs, d2h);
				tm[r] = run_memcpy(gbuf, chunks, nc, csize, &o,
						   d2h, s);
			}
			double gs_stage = (double)o.len / median(ts, o.reps) / 1e9;
			double gs_copy = (double)o.len / median(tm, o.reps) / 1e9;
			char row[32];
			snprintf(row, sizeof(row), "stage-%s-%u%s",
				 d2h ? "d2h" : "h2d",
				 csize >= (1u << 20) ? csize >> 20 : csize >> 10,
				 csize >= (1u << 20) ? "M" : "K");
			printf("%-18s %10.2f %12.2f %7.2f\n", row, gs_stage,
			       gs_copy, gs_stage / gs_copy);
			fflush(stdout);
		}
		staging_destroy(sp);
	}
	CK(cudaStreamDestroy(s));
	CK(cudaFree(gbuf));
	gpu_copies_destroy(g);
	gpu_fini();
	return 0;
}
