/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvbench.c - the KV-cache hand-off of disaggregated serving (prefill
 * -> decode) through xferd, beside the copy limit for the same bytes.
 *
 *   kvbench [--socket PATH] [--remote-socket PATH] [--reps N]
 *           [--tokens 1024,8192,...] [--models 8b,70b] [--out FILE]
 *
 * The prefill side (this process) and the decode side (this program
 * started again: CUDA cannot be used across fork) each hold a paged
 * cache as vLLM lays it out: per layer a K and a V cache of blocks of 16
 * tokens x 8 KV heads x head dim 128 x 2 bytes (32 KiB), in one
 * allocation; Llama-3-8B has 32 layers, Llama-3-70B 80.  A prompt of T
 * tokens fills T/16 random blocks of every layer's K and V (of a cache
 * a quarter larger than the prompt), handed to T/16 random blocks of the
 * decode side's cache through two prepared lists:
 *
 *   whole   the request as one hand-off: every layer's blocks in linked
 *           list descriptors of at most 16384 pairs, one CQE
 *   layer   one layer per descriptor, each waited for alone (vLLM's
 *           save_kv_layer pushes a layer as soon as it is computed: what
 *           decode waits for after the last layer is one layer's
 *           hand-off)
 *
 * each on the same GPU and from GPU 0 to GPU 1.  A time is from
 * preparing the first descriptor to seeing its CQE, one request alone
 * (nothing else in flight), the median of `reps`; beside it the copy
 * limit: one cudaMemcpyAsync (or cudaMemcpyPeerAsync across GPUs) of the
 * same bytes, contiguous, timed the same way (launch to stream
 * synchronised).  Every configuration checks every byte once: each block
 * holds its own 32-bit pattern, and the decode side's cache is read back
 * (a plain READ through xferd) and every moved block compared word by
 * word, after the first whole and the first layer-by-layer hand-off.
 *
 * With --remote-socket PATH the decode side is a client of that xferd
 * (another node's, or a second xferd on this host: bench/bench-kv-link.sh
 * starts two on 127.0.0.1), so every block crosses the two xferds' link
 * (GPU memory staged at both ends: tcp-staged, or RDMA where both have
 * it); the limit beside it is the link's own bandwidth for the same
 * bytes: one contiguous WRITE of alloc_host memory into the other side's
 * alloc_host memory (memfd -> memfd over the same link), timed the same
 * way.  Where "link"; the read-back check crosses the link too.
 *
 * Not measured here: the notification's arrival at the decode process.
 *
 * Prints a table and machine lines "RES kv <model> <tokens> <mode>
 * <where> <bytes> <xferd_us> <copy_us>" (also to --out).  Exit 0 when
 * every byte arrived, 1 otherwise, 77 without a GPU.  What it shares
 * with gpubench (the decode process's pipes, the copy limit, CQE waits)
 * is in gpu_common.c.
 */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "gpu_common.h"
#include "xfer.h"

#define BLK        (32ull << 10)    /* 16 tokens x 8 heads x 128 x 2 B */
#define TOK_BLOCK  16u
#define SQE_PAIRS  16384u           /* a descriptor's pairs */
#define MAX_REPS   200u
#define CHUNK      (256ull << 20)   /* read-back buffer */

const char gpu_bench_name[] = "kvbench";

static struct {
	const char *socket;
	const char *remote;       /* the decode side's xferd: over the link */
	unsigned reps;
	FILE *out;
} opt = { .reps = 15 };

/* cuMemsetD32Async from the driver the runtime uses: one pattern word
 * per block without a kernel of our own. */
static int (*memset_d32)(unsigned long long dst, unsigned v, size_t n,
			 void *stream);

/* --- one configuration --- */

struct model {
	const char *name;
	unsigned layers;
};

static const struct model models[] = {
	{ "llama3-8b", 32 },
	{ "llama3-70b", 80 },
};

struct kvcase {
	const struct model *m;
	unsigned tokens;
	int ddev;                 /* the decode side's GPU */
	uint32_t per_group;       /* blocks a request has per layer K or V */
	uint32_t pool;            /* blocks of a cache per layer K or V */
	uint32_t groups;          /* layers x 2 */
	uint32_t npairs;
	uint32_t *li, *ri;        /* pair k: prefill block -> decode block */
};

static uint32_t pattern(uint32_t block, uint32_t salt)
{
	return (block * 2654435761u) ^ salt;
}

/* per_group distinct random blocks of each group's pool, group-major. */
static void pick(const struct kvcase *c, uint32_t *out, uint64_t seed)
{
	uint32_t *perm = malloc(c->pool * sizeof(*perm));

	if (!perm)
		die("out of memory");
	for (uint32_t g = 0; g < c->groups; g++) {
		for (uint32_t i = 0; i < c->pool; i++)
			perm[i] = i;
		for (uint32_t i = 0; i < c->per_group; i++) {
			seed = seed * 6364136223846793005ull +
			       1442695040888963407ull;
			uint32_t j = i + (uint32_t)((seed >> 33) %
						    (c->pool - i));
			uint32_t t = perm[i];
			perm[i] = perm[j];
			perm[j] = t;
			out[g * c->per_group + i] = g * c->pool + perm[i];
		}
	}
	free(perm);
}

/* Every block of the prefill cache its own pattern. */
static void fill(void *base, uint32_t slots, uint32_t salt)
{
	for (uint32_t s = 0; s < slots; s++)
		if (memset_d32((unsigned long long)(uintptr_t)base + s * BLK,
			       pattern(s, salt), BLK / 4, NULL))
			die("cuMemsetD32Async failed");
	CK(cudaDeviceSynchronize());
}

/* Pairs [first, first + n) as linked descriptors of SQE_PAIRS at most,
 * one CQE; its time in us (negative: -errno). */
static double handoff(struct xfer_ctx *ctx, const struct kvcase *c,
		      struct xfer_dlist *l, struct xfer_dlist *r,
		      uint32_t first, uint32_t n)
{
	uint64_t want = (uint64_t)n * BLK;
	uint64_t t0 = now_ns();

	for (uint32_t k = 0; k < n; k += SQE_PAIRS) {
		uint32_t m = n - k < SQE_PAIRS ? n - k : SQE_PAIRS;
		struct xfer_sqe *sqe = xfer_get_sqe(ctx);
		if (!sqe)
			return -EBUSY;
		int rc;
		/* A request larger than the index area goes in as xferd takes
		 * the descriptors before it (their room comes back then). */
		for (unsigned spin = 0;; spin++) {
			rc = xfer_prep_dlist(ctx, sqe, XFER_OP_WRITE_DLIST, l, r,
					     m, c->li + first + k,
					     c->ri + first + k, 7);
			if (rc != -EAGAIN || spin > 10000000)
				break;
			xfer_submit(ctx);
		}
		if (rc)
			die("xfer_prep_dlist: %s", xfer_strerror(rc));
		if (k + m < n)
			xfer_sqe_set_link(sqe);
	}
	xfer_submit(ctx);
	struct xfer_cqe cqe;
	int rc = wait_cqe(ctx, &cqe);
	if (rc)
		return rc;
	if (cqe.result != (int64_t)want)
		return cqe.result < 0 ? (double)cqe.result : -EIO;
	return (double)(now_ns() - t0) / 1e3;
}

/* Read the decode cache back (a plain READ into chk) and compare every
 * word of pairs [first, first + n); the number of bad blocks. */
static uint64_t verify(struct xfer_ctx *ctx, const struct kvcase *c,
		       uint64_t chk_handle, void *chk, uint64_t remote,
		       uint64_t pool_len, uint32_t first, uint32_t n,
		       uint32_t salt, uint32_t *host)
{
	for (uint64_t off = 0; off < pool_len; off += CHUNK) {
		uint64_t len = pool_len - off < CHUNK ? pool_len - off : CHUNK;
		struct xfer_sqe *sqe = xfer_get_sqe(ctx);
		struct xfer_cqe cqe = { 0 };
		if (!sqe)
			die("no SQE");
		xfer_prep_read(sqe, chk_handle, off, remote, off, len, 9);
		xfer_submit(ctx);
		if (wait_cqe(ctx, &cqe) || cqe.result != (int64_t)len)
			die("reading the decode cache back: %lld",
			    (long long)cqe.result);
	}
	/* Blocks in decode order, a chunk of the cache at a time. */
	uint64_t bad = 0;
	uint32_t per_chunk = (uint32_t)(CHUNK / BLK);
	uint32_t *src_of = malloc((size_t)c->groups * c->pool * sizeof(*src_of));
	if (!src_of)
		die("out of memory");
	memset(src_of, 0xff, (size_t)c->groups * c->pool * sizeof(*src_of));
	for (uint32_t k = first; k < first + n; k++)
		src_of[c->ri[k]] = c->li[k];
	uint32_t slots = c->groups * c->pool;
	for (uint32_t s0 = 0; s0 < slots; s0 += per_chunk) {
		uint32_t m = slots - s0 < per_chunk ? slots - s0 : per_chunk;
		CK(cudaMemcpy(host, (char *)chk + (uint64_t)s0 * BLK,
			      (uint64_t)m * BLK, cudaMemcpyDeviceToHost));
		for (uint32_t i = 0; i < m; i++) {
			uint32_t src = src_of[s0 + i];
			if (src == UINT32_MAX)
				continue;
			uint32_t want = pattern(src, salt);
			const uint32_t *w = host + (uint64_t)i * (BLK / 4);
			for (uint32_t j = 0; j < BLK / 4; j++)
				if (w[j] != want) {
					bad++;
					break;
				}
		}
	}
	free(src_of);
	return bad;
}

/* One contiguous copy of len bytes GPU 0 -> ddev, alone, reps times;
 * median us. */
static double copy_limit(int ddev, uint64_t len)
{
	double v[MAX_REPS];

	direct_copy_runs(0, ddev, len, 1, opt.reps, v);
	for (unsigned r = 0; r < opt.reps; r++)
		v[r] /= 1e3;
	return median(v, opt.reps);
}

/* The link's own time for len bytes: one WRITE of alloc_host memory on
 * this side into alloc_host memory of the decode side's xferd, alone,
 * reps times; median us (negative: -errno). */
static double link_limit(struct xfer_ctx *ctx, struct owner *o, uint64_t len)
{
	struct xfer_mem *mine = NULL;
	struct xfer_remote *rem = NULL;
	struct owner_reply rep;
	double v[MAX_REPS];
	int rc = xfer_alloc_host(ctx, len, &mine);

	if (!rc)
		rc = owner_ask(o, (struct owner_cmd){ .dev = -1, .len = len },
			       &rep);
	if (!rc)
		rc = xfer_import(ctx, rep.tok, rep.tok_len, &rem);
	if (mine)
		memset(xfer_mem_ptr(mine), 0x5a, len);
	for (unsigned r = 0; !rc && r < opt.reps + 1; r++) {
		struct xfer_sqe *sqe = xfer_get_sqe(ctx);
		struct xfer_cqe cqe;
		uint64_t t0 = now_ns();
		if (!sqe) {
			rc = -EBUSY;
			break;
		}
		xfer_prep_write(sqe, xfer_mem_handle(mine), 0,
				xfer_remote_handle(rem), 0, len, 5);
		xfer_submit(ctx);
		rc = wait_cqe(ctx, &cqe);
		if (!rc && cqe.result != (int64_t)len)
			rc = cqe.result < 0 ? (int)cqe.result : -EIO;
		if (!rc && r)  /* the first is the warm-up */
			v[r - 1] = (double)(now_ns() - t0) / 1e3;
	}
	if (rem)
		xfer_unimport(ctx, rem);
	owner_ask(o, (struct owner_cmd){ .quit = OWNER_FREE }, &rep);
	if (mine)
		xfer_free_host(ctx, mine);
	return rc ? rc : median(v, opt.reps);
}

static void row(const struct kvcase *c, const char *mode, uint64_t bytes,
		double x_us, double d_us)
{
	const char *where = opt.remote ? "link" :
			    c->ddev ? "gpu0->gpu1" : "same-gpu";
	char size[32];

	if (bytes >= (1ull << 30))
		snprintf(size, sizeof(size), "%.2f GiB", (double)bytes / (1 << 30));
	else
		snprintf(size, sizeof(size), "%.1f MiB", (double)bytes / (1 << 20));
	if (x_us < 0)
		printf("| %-10s | %6u | %-5s | %-10s | %10s | %10s | %10.1f | "
		       "failed: %s |\n", c->m->name, c->tokens, mode, where,
		       size, "-", d_us, xfer_strerror((int)x_us));
	else
		printf("| %-10s | %6u | %-5s | %-10s | %10s | %10.1f | %10.1f | "
		       "%5.2fx | %+8.1f |\n", c->m->name, c->tokens, mode,
		       where, size, x_us, d_us, d_us / x_us, x_us - d_us);
	if (opt.out)
		fprintf(opt.out, "RES kv %s %u %s %s %llu %.2f %.2f\n",
			c->m->name, c->tokens, mode, where,
			(unsigned long long)bytes, x_us, d_us);
	fflush(stdout);
}

static int run_case(struct xfer_ctx *ctx, struct owner *o,
		    const struct model *m, unsigned tokens, int ddev)
{
	struct kvcase c = { .m = m, .tokens = tokens, .ddev = ddev };
	double v[MAX_REPS];
	int fails = 0;

	c.per_group = tokens / TOK_BLOCK;
	c.pool = c.per_group + c.per_group / 4;
	c.groups = m->layers * 2;
	c.npairs = c.groups * c.per_group;
	uint32_t slots = c.groups * c.pool;
	uint64_t pool_len = (uint64_t)slots * BLK;
	uint64_t req = (uint64_t)c.npairs * BLK;
	uint32_t per_layer = 2 * c.per_group;
	uint64_t layer_bytes = (uint64_t)per_layer * BLK;

	/* The limits first, their buffers gone before the caches. */
	double d_whole = opt.remote ? link_limit(ctx, o, req)
				    : copy_limit(ddev, req);
	double d_layer = opt.remote ? link_limit(ctx, o, layer_bytes)
				    : copy_limit(ddev, layer_bytes);
	if (d_whole < 0 || d_layer < 0) {
		printf("%s %u tokens: the link's memfd -> memfd write failed: "
		       "%s\n", m->name, tokens,
		       xfer_strerror((int)(d_whole < 0 ? d_whole : d_layer)));
		return 1;
	}

	c.li = malloc((size_t)c.npairs * sizeof(*c.li));
	c.ri = malloc((size_t)c.npairs * sizeof(*c.ri));
	if (!c.li || !c.ri)
		die("out of memory");
	pick(&c, c.li, tokens * 31u + 1);
	pick(&c, c.ri, tokens * 37u + 2);

	void *src, *chk;
	struct xfer_mem *msrc = NULL, *mchk = NULL;
	struct xfer_remote *rem = NULL;
	struct xfer_dlist *l = NULL, *r = NULL;
	struct owner_reply rep;
	uint32_t *host;
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&src, pool_len));
	CK(cudaMalloc(&chk, pool_len));
	CK(cudaMallocHost((void **)&host, CHUNK));
	int rc = xfer_reg(ctx, src, pool_len, &msrc);
	if (!rc)
		rc = xfer_reg(ctx, chk, pool_len, &mchk);
	if (!rc)
		rc = owner_ask(o, (struct owner_cmd){ .dev = ddev,
						      .len = pool_len }, &rep);
	if (!rc)
		rc = xfer_import(ctx, rep.tok, rep.tok_len, &rem);
	if (!rc)
		rc = make_list(ctx, xfer_mem_handle(msrc), slots, BLK, &l);
	if (!rc)
		rc = make_list(ctx, xfer_remote_handle(rem), slots, BLK,
			       &r);
	if (rc) {
		printf("%s %u tokens: setup failed: %s\n", m->name, tokens,
		       xfer_strerror(rc));
		fails++;
		goto out;
	}

	/* Whole request: the first one checked, then timed. */
	fill(src, slots, 0x1000 + tokens);
	double x = handoff(ctx, &c, l, r, 0, c.npairs);
	if (x >= 0) {
		uint64_t bad = verify(ctx, &c, xfer_mem_handle(mchk), chk,
				      xfer_remote_handle(rem), pool_len, 0,
				      c.npairs, 0x1000 + tokens, host);
		if (bad) {
			printf("%s %u tokens whole: %llu blocks wrong\n",
			       m->name, tokens, (unsigned long long)bad);
			fails++;
		}
		for (unsigned i = 0; i < opt.reps && x >= 0; i++)
			x = v[i] = handoff(ctx, &c, l, r, 0, c.npairs);
		if (x >= 0)
			x = median(v, opt.reps);
	}
	fails += x < 0;
	row(&c, "whole", req, x, d_whole);

	/* Layer by layer, each waited for: a new pattern, so that a layer
	 * not moved shows. */
	fill(src, slots, 0x2000 + tokens);
	x = 0;
	for (unsigned ly = 0; ly < m->layers && x >= 0; ly++)
		x = handoff(ctx, &c, l, r, ly * per_layer, per_layer);
	if (x >= 0) {
		uint64_t bad = verify(ctx, &c, xfer_mem_handle(mchk), chk,
				      xfer_remote_handle(rem), pool_len, 0,
				      c.npairs, 0x2000 + tokens, host);
		if (bad) {
			printf("%s %u tokens layer: %llu blocks wrong\n",
			       m->name, tokens, (unsigned long long)bad);
			fails++;
		}
		unsigned n = opt.reps * 4 < MAX_REPS ? opt.reps * 4 : MAX_REPS;
		for (unsigned i = 0; i < n && x >= 0; i++)
			x = v[i] = handoff(ctx, &c, l, r,
					   (i % m->layers) * per_layer,
					   per_layer);
		if (x >= 0)
			x = median(v, n);
	}
	fails += x < 0;
	row(&c, "layer", layer_bytes, x, d_layer);
out:
	if (l)
		xfer_dlist_destroy(ctx, l);
	if (r)
		xfer_dlist_destroy(ctx, r);
	if (rem)
		xfer_unimport(ctx, rem);
	owner_ask(o, (struct owner_cmd){ .quit = OWNER_FREE }, &rep);
	if (msrc)
		xfer_dereg(ctx, msrc);
	if (mchk)
		xfer_dereg(ctx, mchk);
	CK(cudaSetDevice(0));
	CK(cudaFree(src));
	CK(cudaFree(chk));
	CK(cudaFreeHost(host));
	free(c.li);
	free(c.ri);
	return fails;
}

static void usage(void)
{
	fprintf(stderr, "usage: kvbench [--socket PATH] [--remote-socket PATH] "
		"[--reps N] [--tokens N,N,...] [--models 8b,70b] "
		"[--out FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "remote-socket", required_argument, NULL, 'R' },
		{ "reps", required_argument, NULL, 'r' },
		{ "tokens", required_argument, NULL, 't' },
		{ "models", required_argument, NULL, 'm' },
		{ "out", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *tokens = "1024,8192,32768", *mods = "8b,70b";
	int c, ngpus = 0;

	if (argc == 5 && strcmp(argv[1], "--owner") == 0) {
		owner_main(argv[2], atoi(argv[3]), atoi(argv[4]), 0xff);
		return 0;
	}
	while ((c = getopt_long(argc, argv, "s:R:r:t:m:o:", lo, NULL)) != -1) {
		switch (c) {
		case 's': opt.socket = optarg; break;
		case 'R': opt.remote = optarg; break;
		case 'r': opt.reps = (unsigned)atoi(optarg); break;
		case 't': tokens = optarg; break;
		case 'm': mods = optarg; break;
		case 'o':
			opt.out = fopen(optarg, "w");
			if (!opt.out)
				die("%s: %s", optarg, strerror(errno));
			break;
		default: usage();
		}
	}
	if (opt.reps < 1 || opt.reps * 4 > MAX_REPS)
		usage();
	if (!opt.socket)
		opt.socket = getenv("XFERD_SOCKET");
	void *cuda = gpu_find(&ngpus);
	if (!cuda)
		return 77;
	*(void **)&memset_d32 = dlsym(cuda, "cuMemsetD32Async");
	if (!memset_d32) {
		printf("skip: no cuMemsetD32Async in the CUDA driver\n");
		return 77;
	}
	if (ngpus > 1) {
		enable_peer(0, 1);
		enable_peer(1, 0);
	}
	CK(cudaSetDevice(0));
	struct xfer_ctx *ctx;
	int rc = xfer_open(opt.socket, &ctx);
	if (rc)
		die("xfer_open: %s", xfer_strerror(rc));
	xfer_set_wait_spin(ctx, 100000);
	struct owner o;
	/* Over the link the decode side is the other xferd's client. */
	owner_start(&o, "kvbench-decode",
		    opt.remote ? opt.remote : opt.socket ? opt.socket : "");

	if (opt.remote)
		printf("KV hand-off over the link to %s, one request alone, "
		       "median of %u (layer: %u); copy = the link's own: one "
		       "contiguous memfd -> memfd WRITE of the same bytes\n\n",
		       opt.remote, opt.reps, opt.reps * 4);
	else
		printf("KV hand-off, one request alone, median of %u (layer: "
		       "%u); copy = one contiguous cudaMemcpy%sAsync of the "
		       "same bytes\n\n", opt.reps, opt.reps * 4,
		       ngpus > 1 ? "[Peer]" : "");
	printf("| model      | tokens | mode  | where      |      bytes |"
	       "  xferd us |   copy us | ratio | over us  |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	int fails = 0;
	for (unsigned mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++) {
		if (!strstr(mods, models[mi].name + strlen("llama3-")))
			continue;
		for (const char *t = tokens; *t;) {
			unsigned n = (unsigned)strtoul(t, (char **)&t, 10);
			if (*t == ',')
				t++;
			if (n < TOK_BLOCK * 4)
				usage();
			/* Over the link: GPU 0 at both ends (two xferds of one
			 * host share it; two nodes each have their own). */
			for (int d = 0; d < (ngpus > 1 && !opt.remote ? 2 : 1);
			     d++)
				fails += run_case(ctx, &o, &models[mi], n, d);
		}
	}
	owner_stop(&o);
	xfer_close(ctx);
	if (opt.out)
		fclose(opt.out);
	printf("\nkvbench: %s\n", fails ? "FAILED" : "every byte arrived");
	return fails ? 1 : 0;
}
