/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpubench.c - xferd's GPU paths beside the CUDA copies they stand in for.
 *
 *   gpubench [--socket PATH] [--reps N] [--iters N] [--out FILE]
 *
 * One run on one machine measures, side by side:
 *
 *   same GPU   256 MiB from one process's buffer into another process's
 *              buffer on GPU 0 through xferd, against cudaMemcpyAsync
 *              device to device in one process (target: >= 0.90x)
 *   across     256 MiB from GPU 0 to the last GPU and back through xferd,
 *              two processes, against cudaMemcpyPeerAsync in one process
 *              (target: >= 0.95x; needs two GPUs)
 *   KV         1000 blocks of 64 KiB scattered over a paged buffer into
 *              another process's paged buffer, one linked vector each,
 *              against one cudaMemcpyAsync of the same bytes (62.5 MiB)
 *              (target: >= 0.80x), on one GPU and across two
 *   dlist      the same 1000 blocks as one prepared-list descriptor
 *              (target: >= 0.80x); and a vLLM-shaped cache (32 layers x
 *              K/V x 1024 blocks of 32 KiB per process, 2 GiB): 256
 *              random blocks of every layer and K/V to 256 random blocks
 *              of the other process's cache, 16384 blocks as one list
 *              descriptor, against one cudaMemcpyAsync of the same 512
 *              MiB (target: >= 0.80x) and beside the per-block
 *              cudaMemcpyAsync loop a library copying per descriptor runs
 *   host       256 MiB host memfd -> GPU and back through xferd, against
 *              cudaMemcpyAsync from pinned host memory (reported)
 *   staged     256 MiB of pinned host memory registered with xfer_reg
 *              (cudaMallocHost: xferd reaches it only through the
 *              process, so the bytes go through its staging chunks) ->
 *              GPU and back, against cudaMemcpyAsync between pinned host
 *              memory and the GPU in one process (target: >= 0.80x)
 *   import     the first transfer on a fresh allocation (registration or
 *              token import, then one 64 KiB write) against the same
 *              write once xferd has the allocation cached (reported)
 *
 * With --remote-socket PATH (the xferd of another node, reached over its
 * TCP link) it measures the staged path instead: GPU memory to and from
 * the other node's GPU memory at 64 and 256 MiB and as a 1000 x 64 KiB
 * vector, against memfd to memfd over the same link in the same run
 * (target: >= 0.90x), and beside them the link's own bandwidth: a plain
 * TCP socket pair over loopback, one stream.
 *
 * Throughput is the bytes of `iters` transfers over their wall time,
 * kept 4 deep in flight through xferd (KV: two batches) or queued back
 * to back on one stream for CUDA; the median of `reps` runs.  GB/s is
 * 1e9 bytes per second.  The other process is this program started
 * again (CUDA cannot be used across fork).
 *
 * Prints a table and machine lines "RES gpu <case> <bytes> <metric>
 * <value> <unit>" (also to --out).  Exit 0 when every target holds, 1
 * when one misses or xferd refuses GPU memory, 77 without a GPU.  What
 * it shares with kvbench (the owner process, the CUDA baselines, CQE
 * waits) is in gpu_common.c.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "gpu_common.h"
#include "xfer.h"

#define MIB       (1ull << 20)
#define BIG       (256 * MIB)
#define KV_BLK    (64ull << 10)
#define KV_N      1000u
#define KV_SLOTS  2000u
#define KV_LEN    (KV_SLOTS * KV_BLK)
#define KV_BYTES  (KV_N * KV_BLK)
#define SMALL     (64ull << 10)
#define FRESH_LEN (64 * MIB)
#define DEPTH     4u
#define MAX_REPS  64u
#define STALL_NS  (20ull * 1000000000ull)

const char gpu_bench_name[] = "gpubench";

static struct {
	const char *socket;
	unsigned reps, iters;
	FILE *out;
	const char *only; /* comma-separated row names; NULL runs all */
} opt = { .reps = 7, .iters = 100 };

/* Whether --only names the row (or its group): a rerun of the rows in
 * question costs seconds of GPU time instead of minutes. */
static bool want(const char *row)
{
	if (!opt.only)
		return true;
	size_t n = strlen(row);
	for (const char *p = opt.only; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && strncmp(p, row, n) == 0)
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

static void res(const char *name, uint64_t bytes, const char *metric,
		double value, const char *unit)
{
	printf("RES gpu %s %llu %s %.3f %s\n", name, (unsigned long long)bytes,
	       metric, value, unit);
	if (opt.out)
		fprintf(opt.out, "RES gpu %s %llu %s %.3f %s\n", name,
			(unsigned long long)bytes, metric, value, unit);
}

/* --- the other process: owns the target buffers --- */

/* The owner allocates len bytes (dev < 0: host memfd) and registers;
 * returns the registration's result and the import of its token. */
static int owner_region(struct owner *o, struct xfer_ctx *ctx, int dev,
			uint64_t len, struct xfer_remote **rem)
{
	struct owner_reply r;
	int rc = owner_ask(o, (struct owner_cmd){ .dev = dev, .len = len }, &r);

	return rc ? rc : xfer_import(ctx, r.tok, r.tok_len, rem);
}

/* --- CUDA in one process --- */

/* len bytes sdev -> ddev (-1: pinned host), iters times back to back on
 * one stream, reps runs; median GB/s. */
static double direct_copy(int sdev, int ddev, uint64_t len)
{
	double v[MAX_REPS];

	if (sdev >= 0 && ddev >= 0) {
		enable_peer(sdev, ddev);
		enable_peer(ddev, sdev);
	}
	direct_copy_runs(sdev, ddev, len, opt.iters, opt.reps, v);
	for (unsigned r = 0; r < opt.reps; r++)
		v[r] = (double)len * opt.iters / v[r];
	return median(v, opt.reps);
}

/* --- through xferd --- */

/* iters transfers of len, DEPTH in flight, reps runs; median GB/s, or
 * -errno of the first failure. */
static double xfer_stream(struct xfer_ctx *ctx, unsigned op, uint64_t local,
			  uint64_t remote, uint64_t len, unsigned *path)
{
	double v[MAX_REPS];

	for (unsigned r = 0; r < opt.reps + 1; r++) {
		unsigned sub = 0, done = 0;
		uint64_t t0 = now_ns();
		while (done < opt.iters) {
			while (sub < opt.iters && sub - done < DEPTH) {
				struct xfer_sqe *sqe = xfer_get_sqe(ctx);
				if (!sqe)
					break;
				xfer_prep_rw(sqe, op, local, 0, remote, 0, len,
					     sub++);
			}
			xfer_submit(ctx);
			struct xfer_cqe c;
			int rc = wait_cqe(ctx, &c);
			if (rc)
				return rc;
			if (c.result != (int64_t)len)
				return c.result < 0 ? (double)c.result : -EIO;
			*path = c.path;
			done++;
		}
		if (r)
			v[r - 1] = (double)len * opt.iters /
				   (double)(now_ns() - t0);
	}
	return median(v, opt.reps);
}

/* Slot of block i in the source and in the target: a scatter as paged
 * KV caches have (both primes are prime to KV_SLOTS). */
static uint64_t src_slot(uint64_t i)
{
	return (i * 7919u + 17) % KV_SLOTS;
}

static uint64_t dst_slot(uint64_t i)
{
	return (i * 104729u + 5) % KV_SLOTS;
}

/*
 * iters batches of KV_N linked 64 KiB writes, at most `ahead` batches
 * submitted and not completed; median GB/s over reps runs, or -errno.
 */
static double xfer_kv(struct xfer_ctx *ctx, uint64_t local, uint64_t remote,
		      unsigned ahead, unsigned *path)
{
	double v[MAX_REPS];
	const uint64_t total = (uint64_t)opt.iters * KV_N;

	for (unsigned r = 0; r < opt.reps + 1; r++) {
		uint64_t next = 0, done = 0, t0 = now_ns(), last = t0;
		while (done < opt.iters) {
			while (next < total && next / KV_N - done < ahead) {
				struct xfer_sqe *sqe = xfer_get_sqe(ctx);
				if (!sqe)
					break;
				uint64_t i = next % KV_N;
				xfer_prep_write(sqe, local, src_slot(i) * KV_BLK,
						remote, dst_slot(i) * KV_BLK,
						KV_BLK, next / KV_N);
				if (i + 1 < KV_N)
					xfer_sqe_set_link(sqe);
				next++;
			}
			xfer_submit(ctx);
			struct xfer_cqe *c;
			while (xfer_peek_cqe(ctx, &c) == 0) {
				int64_t res = c->result;
				*path = c->path;
				xfer_cq_advance(ctx, 1);
				if (res != (int64_t)KV_BYTES)
					return res < 0 ? (double)res : -EIO;
				done++;
				last = now_ns();
			}
			if (now_ns() - last > STALL_NS)
				return -ETIMEDOUT;
		}
		if (r)
			v[r - 1] = (double)KV_BYTES * opt.iters /
				   (double)(now_ns() - t0);
	}
	return median(v, opt.reps);
}

/* --- prepared lists: the vLLM shape and the 1000-block vector --- */

/* A vLLM-shaped paged cache: 32 layers x K/V x 1024 blocks of 32 KiB in
 * one allocation per process; a transfer moves 256 random blocks of every
 * layer and K/V to 256 random blocks of the other cache. */
#define VL_GROUPS (32u * 2u)
#define VL_BLOCKS 1024u
#define VL_PICK   256u
#define VL_BLK    (32ull << 10)
#define VL_SLOTS  (VL_GROUPS * VL_BLOCKS)
#define VL_LEN    ((uint64_t)VL_SLOTS * VL_BLK)
#define VL_PAIRS  (VL_GROUPS * VL_PICK)
#define VL_BYTES  ((uint64_t)VL_PAIRS * VL_BLK)

/* For each group, VL_PICK distinct blocks of its VL_BLOCKS, shuffled. */
static void vl_pick(uint32_t *out, uint64_t seed)
{
	uint32_t perm[VL_BLOCKS];

	for (uint32_t g = 0; g < VL_GROUPS; g++) {
		for (uint32_t i = 0; i < VL_BLOCKS; i++)
			perm[i] = i;
		for (uint32_t i = 0; i < VL_PICK; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			uint32_t j = i + (uint32_t)((seed >> 33) % (VL_BLOCKS - i));
			uint32_t t = perm[i];
			perm[i] = perm[j];
			perm[j] = t;
			out[g * VL_PICK + i] = g * VL_BLOCKS + perm[i];
		}
	}
}

/* The per-block copy loop a library that copies per descriptor runs:
 * one cudaMemcpyAsync per block, in one process; median GB/s. */
static double direct_blocks(const uint32_t *s, const uint32_t *d, unsigned n,
			    uint64_t blk, uint64_t slots)
{
	char *a, *b;
	cudaStream_t st;
	double v[MAX_REPS];

	CK(cudaSetDevice(0));
	CK(cudaMalloc((void **)&a, slots * blk));
	CK(cudaMalloc((void **)&b, slots * blk));
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	for (unsigned r = 0; r < opt.reps + 1; r++) {
		uint64_t t0 = now_ns();
		for (unsigned i = 0; i < opt.iters; i++)
			for (unsigned k = 0; k < n; k++)
				CK(cudaMemcpyAsync(b + d[k] * blk, a + s[k] * blk,
						   blk, cudaMemcpyDeviceToDevice,
						   st));
		CK(cudaStreamSynchronize(st));
		if (r)
			v[r - 1] = (double)n * blk * opt.iters /
				   (double)(now_ns() - t0);
	}
	CK(cudaStreamDestroy(st));
	CK(cudaFree(a));
	CK(cudaFree(b));
	return median(v, opt.reps);
}

/* iters WRITE_DLIST transfers of n pairs, `ahead` in flight; median
 * GB/s over reps runs, or -errno. */
static double xfer_dlist_rate(struct xfer_ctx *ctx, struct xfer_dlist *l,
			      struct xfer_dlist *r, const uint32_t *li,
			      const uint32_t *ri, unsigned n, uint64_t bytes,
			      unsigned ahead, unsigned *path)
{
	double v[MAX_REPS];

	for (unsigned rep = 0; rep < opt.reps + 1; rep++) {
		unsigned sub = 0, done = 0;
		uint64_t t0 = now_ns();
		while (done < opt.iters) {
			while (sub < opt.iters && sub - done < ahead) {
				struct xfer_sqe *sqe = xfer_get_sqe(ctx);
				if (!sqe)
					break;
				int rc = xfer_prep_dlist(ctx, sqe,
							 XFER_OP_WRITE_DLIST,
							 l, r, n, li, ri, sub);
				if (rc == -EAGAIN) {
					/* index area full: give the SQE back */
					xfer_prep_nop(sqe, ~0ull);
					break;
				}
				if (rc)
					return rc;
				sub++;
			}
			xfer_submit(ctx);
			struct xfer_cqe c;
			int rc = wait_cqe(ctx, &c);
			if (rc)
				return rc;
			if (c.user_data == ~0ull)
				continue;
			if (c.result != (int64_t)bytes)
				return c.result < 0 ? (double)c.result : -EIO;
			*path = c.path;
			done++;
		}
		if (rep)
			v[rep - 1] = (double)bytes * opt.iters /
				     (double)(now_ns() - t0);
	}
	return median(v, opt.reps);
}

/* One write of len and its CQE, in ns; negative: -errno. */
static double one_write(struct xfer_ctx *ctx, uint64_t local,
			uint64_t remote, uint64_t len)
{
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);
	struct xfer_cqe c;

	if (!sqe)
		return -EBUSY;
	xfer_prep_write(sqe, local, 0, remote, 0, len, 1);
	uint64_t t0 = now_ns();
	xfer_submit(ctx);
	int rc = wait_cqe(ctx, &c);
	if (rc)
		return rc;
	if (c.result != (int64_t)len)
		return c.result < 0 ? (double)c.result : -EIO;
	return (double)(now_ns() - t0);
}

/* --- the report --- */

struct row {
	const char *name;
	const char *what;
	uint64_t bytes;
	double xferd, direct;   /* GB/s; xferd < 0: -errno */
	double target;          /* 0: reported only */
	unsigned path;
	unsigned want;          /* the path it must have taken */
};

static struct row rows[24];
static unsigned nrows;
static int misses;

static void add_row(const char *name, const char *what, uint64_t bytes,
		    double xferd, double direct, double target, unsigned path)
{
	rows[nrows++] = (struct row){ name, what, bytes, xferd, direct,
				      target, path, XFER_PATH_CUDA_IPC };
}

static void report(void)
{
	printf("\n%-44s %10s %10s %7s %8s  %s\n", "case", "xferd GB/s",
	       "base GB/s", "ratio", "target", "");
	for (unsigned i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		char tgt[16] = "-";
		const char *verdict = "";

		if (r->target > 0)
			snprintf(tgt, sizeof(tgt), ">=%.2f", r->target);
		if (r->xferd < 0) {
			printf("%-44s %10s %10.1f %7s %8s  xferd: %s\n", r->what,
			       "-", r->direct, "-", tgt,
			       xfer_strerror((int)r->xferd));
			if (r->target > 0)
				misses++;
			continue;
		}
		double ratio = r->xferd / r->direct;
		if (r->target > 0) {
			verdict = ratio >= r->target ? "ok" : "MISSED";
			if (ratio < r->target)
				misses++;
		}
		if (r->path != r->want) {
			verdict = "WRONG PATH";
			misses++;
		}
		printf("%-44s %10.1f %10.1f %7.3f %8s  %s%s%s\n", r->what,
		       r->xferd, r->direct, ratio, tgt, verdict,
		       r->path != r->want ? " " : "",
		       r->path != r->want ? xfer_path_name(r->path) : "");
		res(r->name, r->bytes, "xferd", r->xferd, "GB/s");
		res(r->name, r->bytes, "cuda", r->direct, "GB/s");
		res(r->name, r->bytes, "ratio", ratio, "x");
	}
}

/* --- import cost --- */

static void import_cost(struct xfer_ctx *ctx, struct owner *o,
			uint64_t remote, uint64_t local)
{
	enum { N = 5, CACHED = 20 };
	double reg[N], first[N], cached[N], imp[N], rfirst[N], rcached[N];
	double tmp[CACHED];

	/* A fresh local allocation: registration, first write, later ones. */
	for (unsigned r = 0; r < N; r++) {
		struct xfer_mem *mem;
		void *p;
		CK(cudaSetDevice(0));
		CK(cudaMalloc(&p, FRESH_LEN));
		CK(cudaMemset(p, 0x44, FRESH_LEN));
		CK(cudaDeviceSynchronize());
		uint64_t t0 = now_ns();
		int rc = xfer_reg(ctx, p, FRESH_LEN, &mem);
		reg[r] = (double)(now_ns() - t0);
		if (rc) {
			printf("import cost: registration: %s\n",
			       xfer_strerror(rc));
			CK(cudaFree(p));
			return;
		}
		first[r] = one_write(ctx, xfer_mem_handle(mem), remote, SMALL);
		for (unsigned i = 0; i < CACHED; i++)
			tmp[i] = one_write(ctx, xfer_mem_handle(mem), remote,
					   SMALL);
		cached[r] = median(tmp, CACHED);
		xfer_dereg(ctx, mem);
		CK(cudaFree(p));
		if (first[r] < 0 || cached[r] < 0) {
			printf("import cost: write: %s\n",
			       xfer_strerror((int)(first[r] < 0 ? first[r]
								 : cached[r])));
			return;
		}
	}
	/* A fresh remote allocation: token import, first write, later. */
	for (unsigned r = 0; r < N; r++) {
		struct owner_reply rep;
		struct xfer_remote *rem;
		int rc = owner_ask(o, (struct owner_cmd){ .len = FRESH_LEN },
				   &rep);
		if (rc) {
			printf("import cost: remote registration: %s\n",
			       xfer_strerror(rc));
			return;
		}
		uint64_t t0 = now_ns();
		rc = xfer_import(ctx, rep.tok, rep.tok_len, &rem);
		imp[r] = (double)(now_ns() - t0);
		if (rc) {
			printf("import cost: import: %s\n", xfer_strerror(rc));
			return;
		}
		rfirst[r] = one_write(ctx, local, xfer_remote_handle(rem),
				      SMALL);
		for (unsigned i = 0; i < CACHED; i++)
			tmp[i] = one_write(ctx, local, xfer_remote_handle(rem),
					   SMALL);
		rcached[r] = median(tmp, CACHED);
		xfer_unimport(ctx, rem);
	}
	double mreg = median(reg, N) / 1e3, mfirst = median(first, N) / 1e3;
	double mcached = median(cached, N) / 1e3, mimp = median(imp, N) / 1e3;
	double mrfirst = median(rfirst, N) / 1e3;
	double mrcached = median(rcached, N) / 1e3;
	printf("\nfirst transfer on a fresh 64 MiB allocation (64 KiB write, "
	       "median of %d, us):\n", N);
	printf("  local source:  xfer_reg %8.1f + first write %8.1f  vs "
	       "cached write %6.1f  -> import cost %8.1f\n", mreg, mfirst,
	       mcached, mreg + mfirst - mcached);
	printf("  remote target: xfer_import %5.1f + first write %8.1f  vs "
	       "cached write %6.1f  -> import cost %8.1f\n", mimp, mrfirst,
	       mrcached, mimp + mrfirst - mrcached);
	res("import-local", FRESH_LEN, "reg", mreg, "us");
	res("import-local", FRESH_LEN, "first", mfirst, "us");
	res("import-local", FRESH_LEN, "cached", mcached, "us");
	res("import-remote", FRESH_LEN, "import", mimp, "us");
	res("import-remote", FRESH_LEN, "first", mrfirst, "us");
	res("import-remote", FRESH_LEN, "cached", mrcached, "us");
}

/* --- main --- */

/* --- two nodes: the staged path --- */

/* The link's own speed: one TCP stream over loopback from a child
 * process, 1 GiB a run; median GB/s. */
static double loopback_tcp(void)
{
	const size_t total = 1ull << 30, chunk = 1u << 20;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	double v[MAX_REPS];
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	char *buf = malloc(chunk);

	if (ls < 0 || !buf || bind(ls, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(ls, 1) || getsockname(ls, (struct sockaddr *)&a, &alen))
		die("loopback socket: %s", strerror(errno));
	memset(buf, 0x77, chunk);
	for (unsigned r = 0; r < opt.reps + 1; r++) {
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0) {
			int s = socket(AF_INET, SOCK_STREAM, 0);
			if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)))
				_exit(1);
			for (size_t sent = 0; sent < total;) {
				ssize_t n = send(s, buf, chunk, 0);
				if (n <= 0)
					_exit(1);
				sent += (size_t)n;
			}
			_exit(0);
		}
		int c = accept(ls, NULL, NULL);
		if (c < 0)
			die("accept: %s", strerror(errno));
		uint64_t t0 = now_ns();
		size_t got = 0;
		ssize_t n;
		while (got < total && (n = recv(c, buf, chunk, 0)) > 0)
			got += (size_t)n;
		if (r)
			v[r - 1] = (double)got / (double)(now_ns() - t0);
		close(c);
		waitpid(pid, NULL, 0);
	}
	close(ls);
	free(buf);
	return median(v, opt.reps);
}

static void add_staged_row(const char *name, const char *what,
			   uint64_t bytes, double gpu, double memfd,
			   unsigned path)
{
	add_row(name, what, bytes, gpu, memfd, 0.90, path);
	rows[nrows - 1].want = XFER_PATH_TCP_STAGED;
}

/*
 * This process on one node (opt.socket), the owner of the target memory
 * on the other (remote).  Each GPU case runs beside the same bytes
 * between memfd regions over the same link.
 */
static int staged_main(const char *remote)
{
	struct xfer_ctx *ctx;
	struct owner o;
	struct xfer_mem *m_gpu = NULL, *m_host = NULL, *m_kv = NULL,
			*m_kvh = NULL;
	struct xfer_remote *r_gpu = NULL, *r_host = NULL, *r_kv = NULL,
			   *r_kvh = NULL;
	void *gpu, *kv;
	unsigned path = 0, hpath = 0;

	int rc = xfer_open(opt.socket, &ctx);
	if (rc)
		die("xfer_open: %s", xfer_strerror(rc));
	xfer_set_wait_spin(ctx, 20000);
	owner_start(&o, "gpubench-owner", remote);
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&gpu, BIG));
	CK(cudaMalloc(&kv, KV_LEN));
	CK(cudaMemset(gpu, 0x11, BIG));
	CK(cudaMemset(kv, 0x22, KV_LEN));
	CK(cudaDeviceSynchronize());
	if ((rc = xfer_reg(ctx, gpu, BIG, &m_gpu)) ||
	    (rc = xfer_reg(ctx, kv, KV_LEN, &m_kv)) ||
	    (rc = xfer_alloc_host(ctx, BIG, &m_host)) ||
	    (rc = xfer_alloc_host(ctx, KV_LEN, &m_kvh)) ||
	    (rc = owner_region(&o, ctx, 0, BIG, &r_gpu)) ||
	    (rc = owner_region(&o, ctx, -1, BIG, &r_host)) ||
	    (rc = owner_region(&o, ctx, 0, KV_LEN, &r_kv)) ||
	    (rc = owner_region(&o, ctx, -1, KV_LEN, &r_kvh)))
		die("setting up the regions: %s", xfer_strerror(rc));
	memset(xfer_mem_ptr(m_host), 0x55, BIG);
	memset(xfer_mem_ptr(m_kvh), 0x66, KV_LEN);

	static const uint64_t sizes[] = { 64 * MIB, BIG };
	static const char *const names[] = { "staged-write-64m",
					     "staged-write-256m" };
	static const char *const whats[] = {
		"GPU -> remote GPU, 64 MiB (vs memfd)",
		"GPU -> remote GPU, 256 MiB (vs memfd)" };
	for (unsigned i = 0; i < 2; i++) {
		double h = xfer_stream(ctx, XFER_OP_WRITE,
				       xfer_mem_handle(m_host),
				       xfer_remote_handle(r_host), sizes[i],
				       &hpath);
		double g = xfer_stream(ctx, XFER_OP_WRITE,
				       xfer_mem_handle(m_gpu),
				       xfer_remote_handle(r_gpu), sizes[i],
				       &path);
		add_staged_row(names[i], whats[i], sizes[i], g, h, path);
	}
	double h = xfer_stream(ctx, XFER_OP_READ, xfer_mem_handle(m_host),
			       xfer_remote_handle(r_host), BIG, &hpath);
	double g = xfer_stream(ctx, XFER_OP_READ, xfer_mem_handle(m_gpu),
			       xfer_remote_handle(r_gpu), BIG, &path);
	add_staged_row("staged-read-256m",
		       "remote GPU -> GPU, 256 MiB, read (vs memfd)", BIG, g,
		       h, path);
	h = xfer_kv(ctx, xfer_mem_handle(m_kvh), xfer_remote_handle(r_kvh), 2,
		    &hpath);
	g = xfer_kv(ctx, xfer_mem_handle(m_kv), xfer_remote_handle(r_kv), 2,
		    &path);
	add_staged_row("staged-kv", "KV 1000 x 64 KiB, GPU -> remote GPU",
		       KV_BYTES, g, h, path);
	report();
	double link = loopback_tcp();
	printf("%-44s %10.1f\n", "the link itself: TCP over loopback, 1 stream",
	       link);
	res("loopback-tcp", 1ull << 30, "tcp", link, "GB/s");

	owner_stop(&o);
	xfer_close(ctx);
	if (opt.out)
		fclose(opt.out);
	printf("\n%s\n", misses ? "gpubench: targets missed" :
				  "gpubench: every target met");
	return misses ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: gpubench [--socket PATH] [--remote-socket PATH] "
		"[--reps N] [--iters N] [--out FILE] [--only ROW,...] [--nnp]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "reps", required_argument, NULL, 'r' },
		{ "iters", required_argument, NULL, 'i' },
		{ "out", required_argument, NULL, 'o' },
		{ "remote-socket", required_argument, NULL, 'R' },
		{ "only", required_argument, NULL, 'O' },
		{ "nnp", no_argument, NULL, 'N' },
		{ NULL, 0, NULL, 0 },
	};
	const char *remote = NULL;
	bool iters_set = false;
	int c, ngpus = 0;

	if (argc == 5 && strcmp(argv[1], "--owner") == 0) {
		owner_main(argv[2], atoi(argv[3]), atoi(argv[4]), 0x33);
		return 0;
	}
	while ((c = getopt_long(argc, argv, "s:r:i:o:R:O:N", lo, NULL)) != -1) {
		switch (c) {
		case 'R': remote = optarg; break;
		case 'O': opt.only = optarg; break;
		case 'N':
			/* xferd reads the memory of a no_new_privs process
			 * with process_vm_readv (mem/cma.c): the
			 * xfer_reg'd rows measure that way. */
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
				die("no_new_privs: %s", strerror(errno));
			break;
		case 's': opt.socket = optarg; break;
		case 'r': opt.reps = (unsigned)atoi(optarg); break;
		case 'i':
			opt.iters = (unsigned)atoi(optarg);
			iters_set = true;
			break;
		case 'o':
			opt.out = fopen(optarg, "w");
			if (!opt.out)
				die("%s: %s", optarg, strerror(errno));
			break;
		default: usage();
		}
	}
	if (opt.reps < 1 || opt.reps > MAX_REPS || opt.iters < 1)
		usage();
	if (!opt.socket)
		opt.socket = getenv("XFERD_SOCKET");

	if (!gpu_find(&ngpus))
		return 77;
	if (remote) {
		/* A link moves a few GB/s: fewer transfers a run suffice. */
		if (!iters_set)
			opt.iters = 8;
		return staged_main(remote);
	}
	const int last = ngpus - 1;
	for (int d = 0; d < ngpus; d++) {
		struct cudaDeviceProp p;
		CK(cudaGetDeviceProperties(&p, d));
		printf("GPU %d: %s, %zu MiB\n", d, p.name,
		       p.totalGlobalMem >> 20);
	}

	/* The CUDA baselines first: they stand whatever xferd does. */
	double d_same = direct_copy(0, 0, BIG);
	double d_kv = direct_copy(0, 0, KV_BYTES);
	double d_h2d = direct_copy(-1, 0, BIG);
	double d_d2h = direct_copy(0, -1, BIG);
	double d_peer = 0, d_peer_r = 0, d_kv_peer = 0;
	if (ngpus > 1) {
		d_peer = direct_copy(0, last, BIG);
		d_peer_r = direct_copy(last, 0, BIG);
		d_kv_peer = direct_copy(0, last, KV_BYTES);
	}

	struct xfer_ctx *ctx;
	int rc = xfer_open(opt.socket, &ctx);
	if (rc)
		die("xfer_open: %s", xfer_strerror(rc));
	xfer_set_wait_spin(ctx, 20000);
	struct owner o;
	owner_start(&o, "gpubench-owner", opt.socket ? opt.socket : "");

	void *src, *kvsrc, *pinned;
	struct xfer_mem *m_src = NULL, *m_kv = NULL, *m_host = NULL,
			*m_pinned = NULL;
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&src, BIG));
	CK(cudaMalloc(&kvsrc, KV_LEN));
	CK(cudaMemset(src, 0x11, BIG));
	CK(cudaMemset(kvsrc, 0x22, KV_LEN));
	CK(cudaDeviceSynchronize());
	int rc_src = xfer_reg(ctx, src, BIG, &m_src);
	int rc_kv = xfer_reg(ctx, kvsrc, KV_LEN, &m_kv);
	int rc_host = xfer_alloc_host(ctx, BIG, &m_host);
	CK(cudaMallocHost(&pinned, BIG));
	memset(pinned, 0x44, BIG);
	int rc_pinned = xfer_reg(ctx, pinned, BIG, &m_pinned);
	if (rc_src || rc_kv || rc_host)
		printf("xferd refused this process's memory: GPU %s, host %s\n",
		       xfer_strerror(rc_src ? rc_src : rc_kv),
		       xfer_strerror(rc_host));
	else
		memset(xfer_mem_ptr(m_host), 0x55, BIG);

	struct xfer_remote *r_same = NULL, *r_kv = NULL, *r_far = NULL,
			   *r_kv_far = NULL;
	int rc_same = owner_region(&o, ctx, 0, BIG, &r_same);
	int rc_rkv = owner_region(&o, ctx, 0, KV_LEN, &r_kv);
	int rc_far = 0, rc_kv_far = 0;
	if (ngpus > 1) {
		rc_far = owner_region(&o, ctx, last, BIG, &r_far);
		rc_kv_far = owner_region(&o, ctx, last, KV_LEN, &r_kv_far);
	}
	if (rc_same || rc_rkv || rc_far || rc_kv_far)
		printf("xferd refused the other process's GPU memory: %s\n",
		       xfer_strerror(rc_same ? rc_same : rc_rkv ? rc_rkv
					   : rc_far ? rc_far : rc_kv_far));

	unsigned path = 0;
	double x;
#define ERR_OR(rc, expr) ((rc) ? (double)(rc) : (expr))
	if (want("same-gpu")) {
		x = ERR_OR(rc_src ? rc_src : rc_same,
			   xfer_stream(ctx, XFER_OP_WRITE, xfer_mem_handle(m_src),
				       xfer_remote_handle(r_same), BIG, &path));
		add_row("same-gpu", "GPU0 -> GPU0, 256 MiB, two processes", BIG, x,
			d_same, 0.90, path);
	}
	if (want("kv-same-gpu")) {
		x = ERR_OR(rc_kv ? rc_kv : rc_rkv,
			   xfer_kv(ctx, xfer_mem_handle(m_kv), xfer_remote_handle(r_kv),
				   2, &path));
		add_row("kv-same-gpu", "KV 1000 x 64 KiB vector, GPU0 -> GPU0",
			KV_BYTES, x, d_kv, 0.80, path);
		x = ERR_OR(rc_kv ? rc_kv : rc_rkv,
			   xfer_kv(ctx, xfer_mem_handle(m_kv), xfer_remote_handle(r_kv),
				   1, &path));
		add_row("kv-same-gpu-serial", "  the same, one batch at a time",
			KV_BYTES, x, d_kv, 0, path);
	}
	if (want("kv-dlist")) {
		/* The 1000-block vector as one list descriptor. */
		struct xfer_dlist *lk = NULL, *rk = NULL;
		uint32_t ks[KV_N], kd[KV_N];
		for (uint32_t i = 0; i < KV_N; i++) {
			ks[i] = (uint32_t)src_slot(i);
			kd[i] = (uint32_t)dst_slot(i);
		}
		int rc_l = rc_kv ? rc_kv : rc_rkv;
		if (!rc_l)
			rc_l = make_list(ctx, xfer_mem_handle(m_kv), KV_SLOTS,
				       KV_BLK, &lk);
		if (!rc_l)
			rc_l = make_list(ctx, xfer_remote_handle(r_kv), KV_SLOTS,
				       KV_BLK, &rk);
		x = ERR_OR(rc_l, xfer_dlist_rate(ctx, lk, rk, ks, kd, KV_N,
						KV_BYTES, 2, &path));
		add_row("kv-dlist", "KV 1000 x 64 KiB, one list descriptor",
			KV_BYTES, x, d_kv, 0.80, path);
		if (lk)
			xfer_dlist_destroy(ctx, lk);
		if (rk)
			xfer_dlist_destroy(ctx, rk);
	}
	if (want("vllm-dlist")) {
		/* The vLLM shape: 2 GiB caches, 16384 random blocks. */
		static uint32_t vs[VL_PAIRS], vd[VL_PAIRS];
		void *vl;
		struct xfer_mem *m_vl = NULL;
		struct xfer_remote *r_vl = NULL;
		struct xfer_dlist *lv = NULL, *rv = NULL;
		vl_pick(vs, 1);
		vl_pick(vd, 2);
		double d_vl = direct_copy(0, 0, VL_BYTES);
		double d_loop = direct_blocks(vs, vd, VL_PAIRS, VL_BLK,
					      VL_SLOTS);
		CK(cudaSetDevice(0));
		CK(cudaMalloc(&vl, VL_LEN));
		CK(cudaMemset(vl, 0x33, VL_LEN));
		CK(cudaDeviceSynchronize());
		int rc_v = xfer_reg(ctx, vl, VL_LEN, &m_vl);
		if (!rc_v)
			rc_v = owner_region(&o, ctx, 0, VL_LEN, &r_vl);
		if (!rc_v)
			rc_v = make_list(ctx, xfer_mem_handle(m_vl), VL_SLOTS,
				       VL_BLK, &lv);
		if (!rc_v)
			rc_v = make_list(ctx, xfer_remote_handle(r_vl), VL_SLOTS,
				       VL_BLK, &rv);
		x = ERR_OR(rc_v, xfer_dlist_rate(ctx, lv, rv, vs, vd, VL_PAIRS,
						VL_BYTES, 2, &path));
		add_row("vllm-dlist",
			"vLLM 16384 x 32 KiB, one list descriptor", VL_BYTES, x,
			d_vl, 0.80, path);
		add_row("vllm-loop", "  per-block cudaMemcpyAsync loop",
			VL_BYTES, d_loop, d_vl, 0, XFER_PATH_CUDA_IPC);
		if (lv)
			xfer_dlist_destroy(ctx, lv);
		if (rv)
			xfer_dlist_destroy(ctx, rv);
		if (r_vl)
			xfer_unimport(ctx, r_vl);
		if (m_vl)
			xfer_dereg(ctx, m_vl);
		CK(cudaFree(vl));
	}
	if (want("host-to-gpu")) {
		x = ERR_OR(rc_host ? rc_host : rc_same,
			   xfer_stream(ctx, XFER_OP_WRITE, xfer_mem_handle(m_host),
				       xfer_remote_handle(r_same), BIG, &path));
		add_row("host-to-gpu", "host memfd -> GPU0, 256 MiB (vs pinned)", BIG,
			x, d_h2d, 0, path);
		x = ERR_OR(rc_host ? rc_host : rc_same,
			   xfer_stream(ctx, XFER_OP_READ, xfer_mem_handle(m_host),
				       xfer_remote_handle(r_same), BIG, &path));
		add_row("gpu-to-host", "GPU0 -> host memfd, 256 MiB (vs pinned)", BIG,
			x, d_d2h, 0, path);
	}

	if (want("staged-to-gpu")) {
		x = ERR_OR(rc_pinned ? rc_pinned : rc_same,
			   xfer_stream(ctx, XFER_OP_WRITE, xfer_mem_handle(m_pinned),
				       xfer_remote_handle(r_same), BIG, &path));
		add_row("staged-to-gpu", "xfer_reg'd pinned -> GPU0, 256 MiB", BIG,
			x, d_h2d, 0.80, path);
		rows[nrows - 1].want = XFER_PATH_CUDA_STAGED;
		x = ERR_OR(rc_pinned ? rc_pinned : rc_same,
			   xfer_stream(ctx, XFER_OP_READ, xfer_mem_handle(m_pinned),
				       xfer_remote_handle(r_same), BIG, &path));
		add_row("staged-from-gpu", "GPU0 -> xfer_reg'd pinned, 256 MiB", BIG,
			x, d_d2h, 0.80, path);
		rows[nrows - 1].want = XFER_PATH_CUDA_STAGED;
	}

	/* Import cost before the cross-GPU cases: the rest of the run
	 * still measures something if one of those upsets a GPU. */
	if (!rc_src && !rc_same && want("import"))
		import_cost(ctx, &o, xfer_remote_handle(r_same),
			    xfer_mem_handle(m_src));
	if (ngpus > 1 && want("cross-gpu")) {
		x = ERR_OR(rc_src ? rc_src : rc_far,
			   xfer_stream(ctx, XFER_OP_WRITE,
				       xfer_mem_handle(m_src),
				       xfer_remote_handle(r_far), BIG, &path));
		add_row("cross-gpu-write", "GPU0 -> GPU1, 256 MiB (write)", BIG,
			x, d_peer, 0.95, path);
		x = ERR_OR(rc_src ? rc_src : rc_far,
			   xfer_stream(ctx, XFER_OP_READ,
				       xfer_mem_handle(m_src),
				       xfer_remote_handle(r_far), BIG, &path));
		add_row("cross-gpu-read", "GPU1 -> GPU0, 256 MiB (read)", BIG,
			x, d_peer_r, 0.95, path);
		x = ERR_OR(rc_kv ? rc_kv : rc_kv_far,
			   xfer_kv(ctx, xfer_mem_handle(m_kv),
				   xfer_remote_handle(r_kv_far), 2, &path));
		add_row("kv-cross-gpu", "KV 1000 x 64 KiB vector, GPU0 -> GPU1",
			KV_BYTES, x, d_kv_peer, 0.80, path);
	} else {
		printf("one GPU: the cross-GPU cases are not run\n");
	}
	report();

	owner_stop(&o);
	xfer_close(ctx);
	if (opt.out)
		fclose(opt.out);
	printf("\n%s\n", misses ? "gpubench: targets missed" :
				  "gpubench: every target met");
	return misses ? 1 : 0;
}
