/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_classes.c - latency-class GPU copies while a bulk client keeps the
 * same GPU busy (CUDA stream priorities, daemon/gpu/copy.c).
 *
 * Two clients of xferd (two contexts of this process): a bulk one keeps
 * BULK_INFLIGHT writes of 1 GiB between two of its GPU buffers in
 * flight, another does LAT_COPIES writes of 64 KiB between two of its
 * GPU buffers one at a time.  Run twice: both clients of the default
 * class (no classes, as before), then bulk of XFER_CLASS_BULK and the
 * other of XFER_CLASS_LATENCY.  Every latency copy's bytes are checked
 * (a seed of its own each time), and the bulk buffer's at the end; the
 * p50/p99 of the latency copies under load are printed for both runs,
 * never asserted (timings belong to benchmarks).  So is the bulk
 * client's throughput in each run beside what it gets alone, in the
 * bulk class, for as long as the run with classes took (the bytes
 * checked there too): the price the bulk client pays.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpulib.h"

#define BULK_LEN      (1ull << 30)
#define BULK_INFLIGHT 4u
#define LAT_LEN       (64u << 10)
#define LAT_COPIES    400u

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Bulk writes submitted and not yet ended: reap what ended (without
 * waiting), every one the whole 1 GiB on the GPU path. */
static unsigned reap_bulk(struct xfer_ctx *ctx)
{
	struct xfer_cqe *cqe;
	unsigned n = 0;

	while (xfer_peek_cqe(ctx, &cqe) == 0) {
		T_ASSERT(cqe->result == (int64_t)BULK_LEN,
			 "bulk write: %lld bytes (%s)", (long long)cqe->result,
			 cqe->result < 0 ? xfer_strerror((int)cqe->result) : "short");
		T_ASSERT(cqe->path == XFER_PATH_CUDA_IPC,
			 "bulk write on path %u", cqe->path);
		xfer_cq_advance(ctx, 1);
		n++;
	}
	return n;
}

static void submit_bulk(struct xfer_ctx *ctx, const struct gl_buf *src,
			const struct gl_buf *dst, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct xfer_sqe *sqe = gl_get_sqe(ctx);
		xfer_prep_rw(sqe, XFER_OP_WRITE, src->handle, 0, dst->handle, 0,
			     BULK_LEN, 1);
	}
	T_ASSERT(xfer_submit(ctx) >= 0, "bulk submit");
}

/* Reap the bulk writes that ended and submit as many again, so that
 * BULK_INFLIGHT are out (*out counts them): how many ended. */
static unsigned top_up_bulk(struct xfer_ctx *cb, const struct gl_buf *src,
			    const struct gl_buf *dst, unsigned *out)
{
	unsigned ended = reap_bulk(cb);

	*out -= ended;
	if (*out < BULK_INFLIGHT) {
		submit_bulk(cb, src, dst, BULK_INFLIGHT - *out);
		*out = BULK_INFLIGHT;
	}
	return ended;
}

/* Wait for bulk writes to end (up to 60 s): how many did. */
static unsigned drain_bulk(struct xfer_ctx *cb, unsigned out,
			   const char *what)
{
	uint64_t deadline = tl_now_ms() + 60000;
	unsigned done = 0;

	while (out) {
		unsigned ended = reap_bulk(cb);
		done += ended;
		out -= ended;
		T_ASSERT(tl_now_ms() < deadline, "%s: %u bulk writes never "
			 "ended", what, out);
		if (!ended) {
			struct xfer_cqe *cqe;
			(void)xfer_wait_cqe(cb, &cqe, 100);
		}
	}
	return done;
}

/* The bulk client alone, in class cls, for about ms milliseconds with
 * BULK_INFLIGHT writes in flight: its GB/s. */
static double bulk_alone(unsigned cls, uint64_t ms)
{
	struct xfer_ctx *cb;
	struct gl_buf bsrc, bdst;
	unsigned out, done = 0;

	T_OK(xfer_open_class(tl_socket(), "bulk", cls, &cb));
	gl_buf_alloc(cb, GL_DEVICE, 0, BULK_LEN, &bsrc);
	gl_buf_alloc(cb, GL_DEVICE, 0, BULK_LEN, &bdst);
	gl_fill(&bsrc, 0, BULK_LEN, 12, 0);
	uint64_t t0 = now_ns();
	submit_bulk(cb, &bsrc, &bdst, BULK_INFLIGHT);
	out = BULK_INFLIGHT;
	while (now_ns() - t0 < ms * 1000000ull) {
		unsigned ended = top_up_bulk(cb, &bsrc, &bdst, &out);
		done += ended;
		if (!ended) {
			struct xfer_cqe *cqe;
			(void)xfer_wait_cqe(cb, &cqe, 1);
		}
	}
	done += drain_bulk(cb, out, "bulk alone");
	double secs = (now_ns() - t0) / 1e9;
	size_t bad = gl_check(&bdst, 0, BULK_LEN, 12, 0);
	T_ASSERT(!bad, "bulk alone: bulk buffer: byte %zu", bad - 1);
	gl_buf_free(cb, &bsrc, true);
	gl_buf_free(cb, &bdst, true);
	xfer_close(cb);
	return (double)done * BULK_LEN / secs / 1e9;
}

/* One run: returns the latency copies' p50 and p99 in microseconds, the
 * bulk client's GB/s meanwhile and how long the run took (ms). */
static void run(const char *what, unsigned bulk_cls, unsigned lat_cls,
		double *p50, double *p99, double *bulk_gbs, uint64_t *ms)
{
	struct xfer_ctx *cb, *cl;
	struct gl_buf bsrc, bdst, lsrc, ldst;
	uint64_t *lat = calloc(LAT_COPIES, sizeof(*lat));
	unsigned out = 0, bulk_done = 0;

	T_ASSERT(lat, "out of memory");
	T_OK(xfer_open_class(tl_socket(), "bulk", bulk_cls, &cb));
	T_OK(xfer_open_class(tl_socket(), "latency", lat_cls, &cl));
	gl_buf_alloc(cb, GL_DEVICE, 0, BULK_LEN, &bsrc);
	gl_buf_alloc(cb, GL_DEVICE, 0, BULK_LEN, &bdst);
	gl_buf_alloc(cl, GL_DEVICE, 0, LAT_LEN, &lsrc);
	gl_buf_alloc(cl, GL_DEVICE, 0, LAT_LEN, &ldst);
	gl_fill(&bsrc, 0, BULK_LEN, 11, 0);

	uint64_t t0 = now_ns();
	submit_bulk(cb, &bsrc, &bdst, BULK_INFLIGHT);
	out = BULK_INFLIGHT;
	for (unsigned i = 0; i < LAT_COPIES; i++) {
		/* Keep the GPU busy with bulk: top it up before each copy. */
		bulk_done += top_up_bulk(cb, &bsrc, &bdst, &out);
		gl_fill(&lsrc, 0, LAT_LEN, 1000 + i, 0);
		uint64_t c0 = now_ns();
		struct xfer_cqe c = gl_rw(cl, XFER_OP_WRITE, lsrc.handle, 0,
					  ldst.handle, 0, LAT_LEN);
		lat[i] = now_ns() - c0;
		T_ASSERT(c.result == LAT_LEN, "%s: latency copy %u: %lld (%s)",
			 what, i, (long long)c.result,
			 c.result < 0 ? xfer_strerror((int)c.result) : "short");
		T_ASSERT(c.path == XFER_PATH_CUDA_IPC,
			 "%s: latency copy on path %u", what, c.path);
		size_t bad = gl_check(&ldst, 0, LAT_LEN, 1000 + i, 0);
		T_ASSERT(!bad, "%s: latency copy %u: byte %zu", what, i,
			 bad - 1);
	}
	/* The bulk writes still out end too, and their bytes arrived. */
	bulk_done += drain_bulk(cb, out, what);
	uint64_t t1 = now_ns();
	*ms = (t1 - t0) / 1000000u;
	*bulk_gbs = (double)bulk_done * BULK_LEN / ((t1 - t0) / 1e9) / 1e9;
	size_t bad = gl_check(&bdst, 0, BULK_LEN, 11, 0);
	T_ASSERT(!bad, "%s: bulk buffer: byte %zu", what, bad - 1);

	qsort(lat, LAT_COPIES, sizeof(*lat), cmp_u64);
	*p50 = lat[LAT_COPIES / 2] / 1e3;
	*p99 = lat[LAT_COPIES * 99 / 100] / 1e3;
	printf("%-12s 64 KiB latency copy under %u x 1 GiB bulk: p50 %.1f us, "
	       "p99 %.1f us (%u bulk writes of 1 GiB ended in %.2f s: "
	       "%.1f GB/s)\n", what, BULK_INFLIGHT, *p50, *p99, bulk_done,
	       (t1 - t0) / 1e9, *bulk_gbs);
	gl_buf_free(cl, &lsrc, true);
	gl_buf_free(cl, &ldst, true);
	gl_buf_free(cb, &bsrc, true);
	gl_buf_free(cb, &bdst, true);
	xfer_close(cl);
	xfer_close(cb);
	free(lat);
}

int main(int argc, char **argv)
{
	double p50[2], p99[2], gbs[2];
	uint64_t ms[2];

	gl_owner_entry(argc, argv);
	gl_require_gpus(1);
	if (gl_dev_free(0) < 2 * BULK_LEN + (256u << 20)) {
		printf("SKIP: GPU 0 has less than 2.25 GiB free\n");
		return 77;
	}
	run("no classes", XFER_CLASS_DEFAULT, XFER_CLASS_DEFAULT, &p50[0],
	    &p99[0], &gbs[0], &ms[0]);
	run("classes", XFER_CLASS_BULK, XFER_CLASS_LATENCY, &p50[1], &p99[1],
	    &gbs[1], &ms[1]);
	double alone = bulk_alone(XFER_CLASS_BULK, ms[1]);
	printf("latency p99 with classes / without: %.2f (not asserted)\n",
	       p99[0] > 0 ? p99[1] / p99[0] : 0.0);
	printf("bulk alone (bulk class, %.2f s): %.1f GB/s; beside the latency "
	       "client: %.2fx with classes, %.2fx without (not asserted)\n",
	       ms[1] / 1e3, alone, alone > 0 ? gbs[1] / alone : 0.0,
	       alone > 0 ? gbs[0] / alone : 0.0);
	printf("ok\n");
	return 0;
}
