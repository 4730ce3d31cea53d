/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_host.c - bytes between host memory and GPU memory, in both
 * directions and between two processes.
 *
 * Shows: host memory from xfer_alloc_host (a memfd xferd maps and pins)
 * written into another client's GPU buffer and read back from it, and a
 * client's GPU buffer written into another client's xfer_alloc_host
 * memory and read back from it; at 1 byte, odd sizes and 64 MiB, at odd
 * offsets; every byte checked, the bytes beside each range untouched,
 * every CQE on XFER_PATH_CUDA_IPC.  With two GPUs the GPU end is on each
 * of them in turn.  Host memory registered with xfer_reg (reached with
 * CMA, no DMA) against GPU memory moves the right bytes through staging
 * (XFER_PATH_CUDA_STAGED; tests/gpu/gpu_local_staged.c covers it in
 * full).
 */
#include <errno.h>
#include <string.h>

#include "gpulib.h"

#define LEN ((64u << 20) + 64)

static const uint64_t sizes[] = { 1, 4099, (64u << 20) + 17 };

static struct xfer_ctx *ctx;
static struct gl_owner o;

/* "cudaMalloc on GPU 1", "host-memfd". */
static const char *where(enum gl_kind kind, int dev)
{
	static char buf[2][48];
	static unsigned i;
	char *w = buf[i++ % 2];

	if (gl_kind_is_gpu(kind))
		snprintf(w, sizeof(buf[0]), "%s on GPU %d", gl_kind_name(kind),
			 dev);
	else
		snprintf(w, sizeof(buf[0]), "%s", gl_kind_name(kind));
	return w;
}

/*
 * Move between local buffer l and the owner's region t (rk, rdev):
 * write l -> t, then read t -> l, at odd offsets.
 */
static void exchange(struct gl_buf *l, int t, enum gl_kind rk, int rdev,
		     uint64_t seed)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;
	char what[96];

	size_t tlen = gl_owner_export(&o, t, 0, LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	const uint64_t rh = xfer_remote_handle(rem);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const uint64_t n = sizes[i], s = seed + 4 * i;

		snprintf(what, sizeof(what), "%s -> %s, %llu bytes",
			 where(l->kind, l->dev), where(rk, rdev),
			 (unsigned long long)n);
		gl_fill(l, 3, n, s, 0);
		gl_owner_fill(&o, t, 0, n + 16, s + 1, 0);
		gl_rw_ok(ctx, XFER_OP_WRITE, l->handle, 3, rh, 5, n, what);
		size_t bad = gl_owner_check(&o, t, 5, n, s, 0);
		T_ASSERT(!bad, "%s: byte %zu", what, bad - 1);
		T_ASSERT(!gl_owner_check(&o, t, 0, 5, s + 1, 0) &&
			 !gl_owner_check(&o, t, 5 + n, 11, s + 1, 5 + n),
			 "%s: bytes beside the range changed", what);

		snprintf(what, sizeof(what), "%s <- %s, %llu bytes",
			 where(l->kind, l->dev), where(rk, rdev),
			 (unsigned long long)n);
		gl_owner_fill(&o, t, 7, n, s + 2, 0);
		gl_fill(l, 0, n + 16, s + 3, 0);
		gl_rw_ok(ctx, XFER_OP_READ, l->handle, 9, rh, 7, n, what);
		bad = gl_check(l, 9, n, s + 2, 0);
		T_ASSERT(!bad, "%s: byte %zu", what, bad - 1);
		T_ASSERT(!gl_check(l, 0, 9, s + 3, 0) &&
			 !gl_check(l, 9 + n, 7, s + 3, 9 + n),
			 "%s: bytes beside the range changed", what);
	}
	T_OK(xfer_unimport(ctx, rem));
	printf("%s <-> %s: ok\n", where(l->kind, l->dev), where(rk, rdev));
}

/* GPU memory against xfer_reg'd host memory: the bytes, staged. */
static void cma_end(int gdev)
{
	struct gl_buf h, g;
	const uint64_t n = (1u << 20) + 3;

	gl_buf_alloc(ctx, GL_HOST_MALLOC, 0, LEN, &h);
	gl_buf_alloc(ctx, GL_DEVICE, gdev, LEN, &g);
	for (unsigned op = XFER_OP_WRITE; ; op = XFER_OP_READ) {
		gl_fill(&h, 0, LEN, 900 + op, 0);
		gl_fill(&g, 0, LEN, 950 + op, 0);
		/* local = host: WRITE host -> GPU, READ GPU -> host. */
		struct xfer_cqe c = gl_rw(ctx, op, h.handle, 1, g.handle, 2, n);
		struct gl_buf *dst = op == XFER_OP_WRITE ? &g : &h;
		const uint64_t doff = op == XFER_OP_WRITE ? 2 : 1;
		const uint64_t spos = op == XFER_OP_WRITE ? 1 : 2;
		const uint64_t sseed = op == XFER_OP_WRITE ? 900 + op : 950 + op;
		T_ASSERT(c.result == (int64_t)n,
			 "host-malloc %s GPU %d -> %lld (%s)",
			 op == XFER_OP_WRITE ? "->" : "<-", gdev,
			 (long long)c.result, xfer_strerror((int)c.result));
		T_ASSERT(c.path == XFER_PATH_CUDA_STAGED,
			 "host-malloc %s GPU %d: path %s",
			 op == XFER_OP_WRITE ? "->" : "<-", gdev,
			 xfer_path_name(c.path));
		size_t bad = gl_check(dst, doff, n, sseed, spos);
		T_ASSERT(!bad, "host-malloc %s GPU %d: byte %zu",
			 op == XFER_OP_WRITE ? "->" : "<-", gdev, bad - 1);
		printf("host-malloc %s GPU %d: moved (%s)\n",
		       op == XFER_OP_WRITE ? "->" : "<-", gdev,
		       xfer_path_name(c.path));
		if (op == XFER_OP_READ)
			break;
	}
	gl_buf_free(ctx, &h, true);
	gl_buf_free(ctx, &g, true);
}

int main(int argc, char **argv)
{
	uint64_t seed = 1000;

	gl_owner_entry(argc, argv);
	int ngpus = gl_require_gpus(1);
	ctx = tl_open();
	gl_owner_start(&o, NULL);

	for (int dev = 0; dev < ngpus && dev < 2; dev++) {
		const int gdev = dev == 0 ? 0 : ngpus - 1;
		struct gl_buf h, g;

		/* Host here, GPU there. */
		int t = gl_owner_alloc(&o, GL_DEVICE, gdev, LEN, NULL);
		T_ASSERT(t >= 0, "GPU registration: %s", xfer_strerror(t));
		gl_buf_alloc(ctx, GL_HOST_MEMFD, 0, LEN, &h);
		exchange(&h, t, GL_DEVICE, gdev, seed += 100);
		gl_buf_free(ctx, &h, true);
		T_OK(gl_owner_free(&o, t, true));

		/* GPU here, host there. */
		gl_buf_alloc(ctx, GL_DEVICE, gdev, LEN, &g);
		t = gl_owner_alloc(&o, GL_HOST_MEMFD, 0, LEN, NULL);
		T_ASSERT(t >= 0, "host registration: %s", xfer_strerror(t));
		exchange(&g, t, GL_HOST_MEMFD, -1, seed += 100);
		T_OK(gl_owner_free(&o, t, true));
		gl_buf_free(ctx, &g, true);

		cma_end(gdev);
	}

	gl_owner_stop(&o);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
