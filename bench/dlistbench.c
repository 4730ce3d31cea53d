/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlistbench.c - prepared descriptor lists against what they replace.
 *
 *   dlistbench [--socket PATH] [--target-socket PATH] [--blocks N]
 *              [--sizes 4K,64K] [--kind memfd|malloc|memfd-malloc]
 *              [--time-ms T]
 *              [--reps R]
 *
 * For each block size, N blocks scattered over a buffer of 2N slots move
 * to N scattered slots of another client's buffer (the same scatter as
 * gpubench's KV case), measured three ways through xferd, side by side
 * in one run:
 *
 *   dlist    one list descriptor per transfer (two in flight)
 *   linked   the same blocks as N linked SQEs per transfer (two batches
 *            in flight): what a client does without lists
 *   memcpy   the baseline: one memcpy of the same bytes (N x size,
 *            contiguous) in this process
 *
 * --kind: both buffers memfd (xfer_alloc_host: path memcpy), both
 * malloc'd and xfer_reg'd (cma, through xferd's bounce buffer), or a
 * memfd source and a malloc'd target (cma straight into the target).
 *
 * The other client is a second context of this process (it only owns the
 * target; no CPU of its own on the data path), on the same xferd or,
 * with --target-socket, on another one (another node: TCP or RDMA).
 * Each figure is the median over R samples of T ms; GB/s = 1e9 B/s.
 * Prints a table and machine lines "RES dlist <variant> <size> gbps V".
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/numparse.h"
#include "xfer.h"

#define MAX_SIZES 8
#define MAX_REPS  15

static struct {
	const char *socket, *target_socket;
	unsigned blocks, reps, time_ms, nsizes;
	uint64_t sizes[MAX_SIZES];
	bool src_malloc, dst_malloc;  /* xfer_reg'd malloc'd memory */
} opt = { .blocks = 1000, .reps = 5, .time_ms = 500 };

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						     noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("dlistbench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Slots of block i: distinct for i < blocks in 2 * blocks slots. */
static uint32_t src_slot(uint32_t i)
{
	return (uint32_t)(((uint64_t)i * 7919u + 17) % (2 * opt.blocks));
}

static uint32_t dst_slot(uint32_t i)
{
	return (uint32_t)(((uint64_t)i * 104729u + 5) % (2 * opt.blocks));
}

struct mem {
	struct xfer_mem *m;
	void *ptr;
};

static void mem_alloc(struct xfer_ctx *ctx, size_t len, bool malloced,
		      struct mem *b)
{
	int rc;

	if (malloced) {
		b->ptr = mmap(NULL, len, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (b->ptr == MAP_FAILED)
			die("mmap: %s", strerror(errno));
		rc = xfer_reg(ctx, b->ptr, len, &b->m);
	} else {
		rc = xfer_alloc_host(ctx, len, &b->m);
		if (!rc)
			b->ptr = xfer_mem_ptr(b->m);
	}
	if (rc)
		die("memory of %zu bytes: %s", len, xfer_strerror(rc));
	memset(b->ptr, 0x5a, len);
}

static void mem_free(struct xfer_ctx *ctx, bool malloced, struct mem *b,
		     size_t len)
{
	if (malloced) {
		xfer_dereg(ctx, b->m);
		munmap(b->ptr, len);
	} else {
		xfer_free_host(ctx, b->m);
	}
}

/* Queue one transfer; false when the ring has no room for it now. */
static bool submit_one(struct xfer_ctx *ctx, bool use_list, uint64_t lh,
		       uint64_t rh, struct xfer_dlist *l, struct xfer_dlist *r,
		       const uint32_t *si, const uint32_t *di, uint64_t size)
{
	if (!use_list) {
		if (xfer_sq_space(ctx) < opt.blocks)
			return false;
		for (unsigned i = 0; i < opt.blocks; i++) {
			struct xfer_sqe *sqe = xfer_get_sqe(ctx);
			xfer_prep_write(sqe, lh, si[i] * size, rh, di[i] * size,
					size, 1);
			if (i + 1 < opt.blocks)
				xfer_sqe_set_link(sqe);
		}
		return true;
	}
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);
	if (!sqe)
		return false;
	int rc = xfer_prep_dlist(ctx, sqe, XFER_OP_WRITE_DLIST, l, r,
				 opt.blocks, si, di, 1);
	if (rc == -EAGAIN) {
		xfer_prep_nop(sqe, 0);  /* the slot is taken: a filler */
		return false;
	}
	if (rc)
		die("xfer_prep_dlist: %s", xfer_strerror(rc));
	return true;
}

/* Transfers for time_ms, two in flight; GB/s. */
static double sample(struct xfer_ctx *ctx, bool use_list, uint64_t lh,
		     uint64_t rh, struct xfer_dlist *l, struct xfer_dlist *r,
		     const uint32_t *si, const uint32_t *di, uint64_t size,
		     unsigned *path)
{
	const uint64_t bytes = (uint64_t)opt.blocks * size;
	uint64_t t0 = now_ns(), end = t0 + opt.time_ms * 1000000ull, moved = 0;
	unsigned out = 0;

	for (;;) {
		while (out < 2 && now_ns() < end &&
		       submit_one(ctx, use_list, lh, rh, l, r, si, di, size))
			out++;
		if (xfer_submit(ctx) < 0)
			die("xferd went away");
		if (out == 0)
			break;
		struct xfer_cqe *c;
		int rc = xfer_wait_cqe(ctx, &c, 20000);
		if (rc)
			die("no completion: %s", xfer_strerror(rc));
		struct xfer_cqe got = *c;
		xfer_cq_advance(ctx, 1);
		if (got.user_data == 0)
			continue;  /* a filler */
		if (got.result != (int64_t)bytes)
			die("a transfer moved %lld (%s), not %llu",
			    (long long)got.result,
			    got.result < 0 ? xfer_strerror((int)got.result)
					   : "bytes",
			    (unsigned long long)bytes);
		*path = got.path;
		moved += bytes;
		out--;
	}
	return (double)moved / (double)(now_ns() - t0);
}

/* Called through a volatile pointer so the copies are never elided. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

/* One memcpy of len bytes, again and again for time_ms; GB/s. */
static double memcpy_sample(void *dst, const void *src, size_t len)
{
	uint64_t t0 = now_ns(), end = t0 + opt.time_ms * 1000000ull, n = 0;

	while (now_ns() < end) {
		copy_fn(dst, src, len);
		__asm__ volatile("" ::: "memory");
		n++;
	}
	return (double)(n * len) / (double)(now_ns() - t0);
}

static void run_size(struct xfer_ctx *ic, struct xfer_ctx *tc, uint64_t size)
{
	const size_t len = 2 * (size_t)opt.blocks * size;
	struct mem src, dst;
	uint8_t tok[XFER_TOKEN_MAX];
	size_t tlen = sizeof(tok);
	struct xfer_remote *rem;
	struct xfer_dlist *l, *r;
	uint32_t *si = malloc(opt.blocks * sizeof(*si));
	uint32_t *di = malloc(opt.blocks * sizeof(*di));
	uint64_t *off = malloc(2 * opt.blocks * sizeof(*off));
	int rc;

	if (!si || !di || !off)
		die("out of memory");
	mem_alloc(ic, len, opt.src_malloc, &src);
	mem_alloc(tc, len, opt.dst_malloc, &dst);
	if ((rc = xfer_export(dst.m, 0, len, tok, &tlen)) ||
	    (rc = xfer_import(ic, tok, tlen, &rem)))
		die("token: %s", xfer_strerror(rc));
	for (uint32_t i = 0; i < 2 * opt.blocks; i++)
		off[i] = i * size;
	for (uint32_t i = 0; i < opt.blocks; i++) {
		si[i] = src_slot(i);
		di[i] = dst_slot(i);
	}
	uint64_t lh = xfer_mem_handle(src.m), rh = xfer_remote_handle(rem);
	if ((rc = xfer_dlist_create(ic, lh, 2 * opt.blocks, off, NULL, size,
				    &l)) ||
	    (rc = xfer_dlist_create(ic, rh, 2 * opt.blocks, off, NULL, size,
				    &r)))
		die("xfer_dlist_create: %s", xfer_strerror(rc));
	void *a = malloc((size_t)opt.blocks * size);
	void *b = malloc((size_t)opt.blocks * size);
	if (!a || !b)
		die("out of memory");
	memset(a, 1, (size_t)opt.blocks * size);
	memset(b, 2, (size_t)opt.blocks * size);

	double v[3][MAX_REPS];
	unsigned path_l = 0, path_k = 0;
	/* Interleaved, so that drift in the machine hits all three. */
	sample(ic, true, lh, rh, l, r, si, di, size, &path_l);  /* warm-up */
	for (unsigned k = 0; k < opt.reps; k++) {
		v[0][k] = sample(ic, true, lh, rh, l, r, si, di, size, &path_l);
		v[1][k] = sample(ic, false, lh, rh, l, r, si, di, size, &path_k);
		v[2][k] = memcpy_sample(b, a, (size_t)opt.blocks * size);
	}
	double gl = median(v[0], opt.reps), gk = median(v[1], opt.reps);
	double gm = median(v[2], opt.reps);
	char lbl[32];
	snprintf(lbl, sizeof(lbl), "%u x %llu KiB", opt.blocks,
		 (unsigned long long)(size >> 10));
	printf("%-18s %-8s %10.2f %10.2f %10.2f %8.2f %8.2f\n", lbl,
	       xfer_path_name(path_l), gl, gk, gm, gl / gm, gl / gk);
	printf("RES dlist dlist %llu gbps %.3f\n", (unsigned long long)size,
	       gl);
	printf("RES dlist linked %llu gbps %.3f\n", (unsigned long long)size,
	       gk);
	printf("RES dlist memcpy %llu gbps %.3f\n", (unsigned long long)size,
	       gm);
	free(a);
	free(b);
	xfer_dlist_destroy(ic, l);
	xfer_dlist_destroy(ic, r);
	xfer_unimport(ic, rem);
	mem_free(ic, opt.src_malloc, &src, len);
	mem_free(tc, opt.dst_malloc, &dst, len);
	free(si);
	free(di);
	free(off);
}

static uint64_t parse_size(const char *s)
{
	uint64_t v;

	if (numparse_size(s, 0, &v) || v == 0)
		die("bad size '%s'", s);
	return v;
}

static void usage(void)
{
	fputs("usage: dlistbench [--socket PATH] [--target-socket PATH] "
	      "[--blocks N] [--sizes 4K,64K] "
	      "[--kind memfd|malloc|memfd-malloc] "
	      "[--time-ms T] [--reps R]\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "target-socket", required_argument, NULL, 't' },
		{ "blocks", required_argument, NULL, 'b' },
		{ "sizes", required_argument, NULL, 'z' },
		{ "kind", required_argument, NULL, 'k' },
		{ "time-ms", required_argument, NULL, 'T' },
		{ "reps", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': opt.socket = optarg; break;
		case 't': opt.target_socket = optarg; break;
		case 'b': opt.blocks = (unsigned)atoi(optarg); break;
		case 'T': opt.time_ms = (unsigned)atoi(optarg); break;
		case 'r': opt.reps = (unsigned)atoi(optarg); break;
		case 'k':
			/* the source's kind, then the target's */
			if (strcmp(optarg, "malloc") == 0)
				opt.src_malloc = opt.dst_malloc = true;
			else if (strcmp(optarg, "memfd-malloc") == 0)
				opt.dst_malloc = true;
			else if (strcmp(optarg, "memfd"))
				usage();
			break;
		case 'z':
			for (char *tok = strtok(optarg, ","); tok;
			     tok = strtok(NULL, ",")) {
				if (opt.nsizes == MAX_SIZES)
					usage();
				opt.sizes[opt.nsizes++] = parse_size(tok);
			}
			break;
		default: usage();
		}
	}
	if (opt.blocks < 1 || opt.blocks > (1u << 20) || opt.reps < 1 ||
	    opt.reps > MAX_REPS || opt.time_ms < 1)
		usage();
	if (opt.nsizes == 0) {
		opt.sizes[opt.nsizes++] = 4096;
		opt.sizes[opt.nsizes++] = 65536;
	}
	struct xfer_ctx *ic, *tc;
	int rc = xfer_open(opt.socket, &ic);
	if (!rc)
		rc = xfer_open(opt.target_socket ? opt.target_socket
						 : opt.socket, &tc);
	if (rc)
		die("xfer_open: %s", xfer_strerror(rc));
	xfer_set_wait_spin(ic, 1000000);
	printf("%-18s %-8s %10s %10s %10s %8s %8s\n", "blocks", "path",
	       "dlist", "linked", "memcpy", "÷memcpy", "÷linked");
	for (unsigned i = 0; i < opt.nsizes; i++)
		run_size(ic, tc, opt.sizes[i]);
	xfer_close(ic);
	xfer_close(tc);
	return 0;
}
