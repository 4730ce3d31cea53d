/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_local_staged.c - GPU memory and host memory registered with
 * xfer_reg (reached with CMA, never by DMA) on one node, through xferd's
 * pinned staging chunks.
 *
 * Shows: cudaMalloc and VMM GPU memory against malloc'd and
 * cudaMallocHost'd memory registered with xfer_reg, in both directions,
 * between two processes and within one, at 1 byte, 4 KiB, 1 MiB + odd
 * and 64 MiB + odd at odd offsets: every byte checked, the bytes beside
 * each range untouched, every CQE on XFER_PATH_CUDA_STAGED.  A vector of
 * 1000 linked 64 KiB writes from malloc'd memory scattered into another
 * client's GPU buffer completes with one CQE, every block in its slot
 * and every gap untouched, and gathers back the same way.  A client
 * killed (SIGKILL) with staged writes in flight, in each direction,
 * leaves every staging chunk back in the pool (xferctl status) and xferd
 * moving bytes.
 */
#include <errno.h>
#include <libgen.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpulib.h"

#define LEN ((64u << 20) + 64)

static const uint64_t sizes[] = { 1, 4096, (1u << 20) + 13, (64u << 20) + 17 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static struct xfer_ctx *ctx;
static struct gl_owner o;

static void rw_staged(unsigned op, uint64_t local, uint64_t loff,
		      uint64_t remote, uint64_t roff, uint64_t len,
		      const char *what)
{
	struct xfer_cqe c = gl_rw(ctx, op, local, loff, remote, roff, len);

	T_ASSERT(c.result == (int64_t)len, "%s: %s of %llu bytes -> %lld (%s)",
		 what, op == XFER_OP_READ ? "read" : "write",
		 (unsigned long long)len, (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "short");
	T_ASSERT(c.path == XFER_PATH_CUDA_STAGED, "%s: path %s, expected %s",
		 what, xfer_path_name(c.path),
		 xfer_path_name(XFER_PATH_CUDA_STAGED));
}

/* Two processes: local l, the owner's region t of kind rk; write l -> t
 * then read t -> l, at odd offsets. */
static void across(struct gl_buf *l, int t, enum gl_kind rk, uint64_t seed)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;
	char what[128];

	size_t tlen = gl_owner_export(&o, t, 0, LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	const uint64_t rh = xfer_remote_handle(rem);
	for (unsigned i = 0; i < NSIZES; i++) {
		const uint64_t n = sizes[i], s = seed + 4 * i;

		snprintf(what, sizeof(what), "%s -> %s (other process), %llu "
			 "bytes", gl_kind_name(l->kind), gl_kind_name(rk),
			 (unsigned long long)n);
		gl_fill(l, 3, n, s, 0);
		gl_owner_fill(&o, t, 0, n + 16, s + 1, 0);
		rw_staged(XFER_OP_WRITE, l->handle, 3, rh, 5, n, what);
		size_t bad = gl_owner_check(&o, t, 5, n, s, 0);
		T_ASSERT(!bad, "%s: byte %zu", what, bad - 1);
		T_ASSERT(!gl_owner_check(&o, t, 0, 5, s + 1, 0) &&
			 !gl_owner_check(&o, t, 5 + n, 11, s + 1, 5 + n),
			 "%s: bytes beside the range changed", what);

		snprintf(what, sizeof(what), "%s <- %s (other process), %llu "
			 "bytes", gl_kind_name(l->kind), gl_kind_name(rk),
			 (unsigned long long)n);
		gl_owner_fill(&o, t, 7, n, s + 2, 0);
		gl_fill(l, 0, n + 16, s + 3, 0);
		rw_staged(XFER_OP_READ, l->handle, 9, rh, 7, n, what);
		bad = gl_check(l, 9, n, s + 2, 0);
		T_ASSERT(!bad, "%s: byte %zu", what, bad - 1);
		T_ASSERT(!gl_check(l, 0, 9, s + 3, 0) &&
			 !gl_check(l, 9 + n, 7, s + 3, 9 + n),
			 "%s: bytes beside the range changed", what);
	}
	T_OK(xfer_unimport(ctx, rem));
	printf("%s <-> %s, two processes: ok\n", gl_kind_name(l->kind),
	       gl_kind_name(rk));
}

/* One process: both regions its own; write a -> b, read b -> a. */
static void within(struct gl_buf *a, struct gl_buf *b, uint64_t seed)
{
	char what[128];

	for (unsigned i = 0; i < NSIZES; i++) {
		const uint64_t n = sizes[i], s = seed + 4 * i;

		snprintf(what, sizeof(what), "%s -> %s (one process), %llu "
			 "bytes", gl_kind_name(a->kind), gl_kind_name(b->kind),
			 (unsigned long long)n);
		gl_fill(a, 1, n, s, 0);
		gl_fill(b, 0, n + 16, s + 1, 0);
		rw_staged(XFER_OP_WRITE, a->handle, 1, b->handle, 11, n, what);
		size_t bad = gl_check(b, 11, n, s, 0);
		T_ASSERT(!bad, "%s: byte %zu", what, bad - 1);
		T_ASSERT(!gl_check(b, 0, 11, s + 1, 0) &&
			 !gl_check(b, 11 + n, 5, s + 1, 11 + n),
			 "%s: bytes beside the range changed", what);

		snprintf(what, sizeof(what), "%s <- %s (one process), %llu "
			 "bytes", gl_kind_name(a->kind), gl_kind_name(b->kind),
			 (unsigned long long)n);
		gl_fill(b, 13, n, s + 2, 0);
		gl_fill(a, 0, n + 16, s + 3, 0);
		rw_staged(XFER_OP_READ, a->handle, 7, b->handle, 13, n, what);
		bad = gl_check(a, 7, n, s + 2, 0);
		T_ASSERT(!bad, "%s: byte %zu", what, bad - 1);
		T_ASSERT(!gl_check(a, 0, 7, s + 3, 0) &&
			 !gl_check(a, 7 + n, 9, s + 3, 7 + n),
			 "%s: bytes beside the range changed", what);
	}
	printf("%s <-> %s, one process: ok\n", gl_kind_name(a->kind),
	       gl_kind_name(b->kind));
}

/* --- a KV-cache-shaped vector, CMA -> GPU and back --- */

#define BLK     (64u << 10)
#define NBLK    1000u
#define NSLOTS  (2 * NBLK)
#define SRC_LEN ((size_t)NBLK * BLK)
#define TGT_LEN ((size_t)NSLOTS * BLK)
#define FENCE   0xfe11ceull

static uint64_t slot_of(uint64_t i)
{
	return (i * 7919u) % NSLOTS;
}

static void expect_one_cqe(const char *what)
{
	struct xfer_cqe *cp;
	int rc = xfer_wait_cqe(ctx, &cp, 30000);
	T_ASSERT(rc == 0, "%s: no CQE: %s", what, xfer_strerror(rc));
	struct xfer_cqe c = *cp;
	xfer_cq_advance(ctx, 1);
	T_ASSERT(c.user_data == NBLK && c.result == (int64_t)SRC_LEN,
		 "%s: CQE user_data %llu result %lld (%s), expected %u and %zu",
		 what, (unsigned long long)c.user_data, (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "bytes", NBLK,
		 SRC_LEN);
	T_ASSERT(c.path == XFER_PATH_CUDA_STAGED, "%s: path %s", what,
		 xfer_path_name(c.path));
	xfer_prep_nop(gl_get_sqe(ctx), FENCE);
	c = tl_submit_wait(ctx);
	T_ASSERT(c.user_data == FENCE, "%s: a second CQE (user_data %llu)",
		 what, (unsigned long long)c.user_data);
}

static void vector(uint64_t seed)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;
	struct gl_buf h;
	char what[96];
	static uint8_t used[NSLOTS];

	gl_buf_alloc(ctx, GL_HOST_MALLOC, 0, SRC_LEN, &h);
	int t = gl_owner_alloc(&o, GL_DEVICE, 0, TGT_LEN, NULL);
	T_ASSERT(t >= 0, "GPU registration: %s", xfer_strerror(t));
	size_t tlen = gl_owner_export(&o, t, 0, TGT_LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));

	/* Scatter: 1000 linked writes. */
	snprintf(what, sizeof(what), "%u x %u KiB, host-malloc -> GPU", NBLK,
		 BLK >> 10);
	const uint64_t bg = ~seed;
	gl_fill(&h, 0, SRC_LEN, seed, 0);
	gl_owner_fill(&o, t, 0, TGT_LEN, bg, 0);
	uint64_t t0 = tl_now_ms();
	for (uint64_t i = 0; i < NBLK; i++) {
		struct xfer_sqe *sqe = gl_get_sqe(ctx);
		xfer_prep_write(sqe, h.handle, i * BLK, xfer_remote_handle(rem),
				slot_of(i) * BLK, BLK, i + 1);
		if (i + 1 < NBLK)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ctx) >= 0, "submit");
	expect_one_cqe(what);
	uint64_t ms = tl_now_ms() - t0;
	memset(used, 0, sizeof(used));
	for (uint64_t i = 0; i < NBLK; i++) {
		uint64_t s = slot_of(i);
		used[s] = 1;
		size_t bad = gl_owner_check(&o, t, s * BLK, BLK, seed, i * BLK);
		T_ASSERT(!bad, "%s: block %llu (slot %llu) byte %zu", what,
			 (unsigned long long)i, (unsigned long long)s, bad - 1);
	}
	for (uint64_t s = 0; s < NSLOTS; s++) {
		if (used[s])
			continue;
		size_t bad = gl_owner_check(&o, t, s * BLK, BLK, bg, s * BLK);
		T_ASSERT(!bad, "%s: gap slot %llu byte %zu was written", what,
			 (unsigned long long)s, bad - 1);
	}
	printf("%s: one CQE, every block in place, %llu ms: ok\n", what,
	       (unsigned long long)ms);

	/* Gather: 1000 linked reads back into host memory. */
	snprintf(what, sizeof(what), "%u x %u KiB, host-malloc <- GPU", NBLK,
		 BLK >> 10);
	gl_fill(&h, 0, SRC_LEN, ~seed + 1, 0);
	for (uint64_t i = 0; i < NBLK; i++) {
		struct xfer_sqe *sqe = gl_get_sqe(ctx);
		xfer_prep_read(sqe, h.handle, i * BLK, xfer_remote_handle(rem),
			       slot_of(i) * BLK, BLK, i + 1);
		if (i + 1 < NBLK)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ctx) >= 0, "submit");
	expect_one_cqe(what);
	size_t bad = gl_check(&h, 0, SRC_LEN, seed, 0);
	T_ASSERT(!bad, "%s: byte %zu (block %zu)", what, bad - 1,
		 (bad - 1) / BLK);
	printf("%s: one CQE, every block back: ok\n", what);

	T_OK(xfer_unimport(ctx, rem));
	T_OK(gl_owner_free(&o, t, true));
	gl_buf_free(ctx, &h, true);
}

/* --- a client killed with chunks in flight --- */

/* xferctl status --json's staging "in_use" and "waiting" (the totals,
 * the first of each after "staging"); false without xferctl or a pool. */
static bool staging_busy(unsigned *in_use, unsigned *waiting)
{
	const char *bin = getenv("XFERD_BIN");
	const char *sock = getenv("XFERD_SOCKET");
	char cmd[1024], out[8192];

	if (!bin || !sock)
		return false;
	char *dir = strdup(bin);
	T_ASSERT(dir, "strdup");
	snprintf(cmd, sizeof(cmd), "%s/xferctl -s '%s' --json status",
		 dirname(dir), sock);
	free(dir);
	FILE *f = popen(cmd, "r");
	T_ASSERT(f, "popen %s", cmd);
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	pclose(f);
	const char *s = strstr(out, "\"staging\":{");
	if (!s)
		return false;
	const char *u = strstr(s, "\"in_use\":"), *w = strstr(s, "\"waiting\":");
	T_ASSERT(u && w, "xferctl status --json: staging without in_use or "
		 "waiting: %s", out);
	*in_use = (unsigned)strtoul(u + 9, NULL, 10);
	*waiting = (unsigned)strtoul(w + 10, NULL, 10);
	return true;
}

/*
 * A victim floods staged writes (victim_kind -> our target) and is
 * killed at once: xferd ends its descriptors, the chunks in copies come
 * back when their copies are done, and every chunk is back in the pool.
 */
static void killed(enum gl_kind victim_kind, struct gl_buf *target)
{
	struct gl_owner victim;
	uint8_t tok[XFER_TOKEN_MAX];
	unsigned in_use = 0, waiting = 0;

	gl_owner_start(&victim, NULL);
	int v = gl_owner_alloc(&victim, victim_kind, 0, LEN, NULL);
	T_ASSERT(v >= 0, "victim's registration: %s", xfer_strerror(v));
	gl_owner_fill(&victim, v, 0, LEN, 77, 0);
	size_t tlen = gl_export(target, 0, LEN, tok);
	int n = gl_owner_flood(&victim, v, tok, tlen, LEN - 64, 16);
	T_ASSERT(n > 0, "the victim submitted nothing");
	/* Let some chunks get into copies, then kill it with them out. */
	usleep(20000);
	bool busy = staging_busy(&in_use, &waiting);
	gl_owner_kill(&victim);
	printf("%s victim killed with %d writes of 64 MiB submitted (%u "
	       "chunks in use, %u waiting)\n", gl_kind_name(victim_kind), n,
	       busy ? in_use : 0, busy ? waiting : 0);

	uint64_t deadline = tl_now_ms() + 20000;
	while (staging_busy(&in_use, &waiting) && (in_use || waiting)) {
		T_ASSERT(tl_now_ms() < deadline, "20 s after the kill %u "
			 "staging chunks are still in use, %u waiting", in_use,
			 waiting);
		usleep(20000);
	}
	if (!staging_busy(&in_use, &waiting))
		printf("  (no xferctl: the pool was not looked at)\n");
	else
		printf("  every staging chunk is back in the pool\n");
}

int main(int argc, char **argv)
{
	static const enum gl_kind gpu_kinds[] = { GL_DEVICE, GL_VMM };
	static const enum gl_kind host_kinds[] = { GL_HOST_MALLOC, GL_PINNED };
	uint64_t seed = 5000;

	gl_owner_entry(argc, argv);
	gl_require_gpus(1);
	ctx = tl_open();
	gl_owner_start(&o, NULL);

	for (unsigned g = 0; g < 2; g++)
	for (unsigned h = 0; h < 2; h++) {
		struct gl_buf gb, hb;

		/* GPU here, host memory there. */
		gl_buf_alloc(ctx, gpu_kinds[g], 0, LEN, &gb);
		int t = gl_owner_alloc(&o, host_kinds[h], 0, LEN, NULL);
		T_ASSERT(t >= 0, "host registration: %s", xfer_strerror(t));
		across(&gb, t, host_kinds[h], seed += 100);
		T_OK(gl_owner_free(&o, t, true));

		/* Host memory here, GPU there. */
		gl_buf_alloc(ctx, host_kinds[h], 0, LEN, &hb);
		t = gl_owner_alloc(&o, gpu_kinds[g], 0, LEN, NULL);
		T_ASSERT(t >= 0, "GPU registration: %s", xfer_strerror(t));
		across(&hb, t, gpu_kinds[g], seed += 100);
		T_OK(gl_owner_free(&o, t, true));

		/* Both here. */
		within(&gb, &hb, seed += 100);
		within(&hb, &gb, seed += 100);
		gl_buf_free(ctx, &hb, true);
		gl_buf_free(ctx, &gb, true);
	}

	vector(seed += 100);

	/* Killed with chunks in flight: CMA -> GPU, then GPU -> CMA. */
	struct gl_buf gb, hb;
	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN, &gb);
	gl_buf_alloc(ctx, GL_HOST_MALLOC, 0, LEN, &hb);
	killed(GL_HOST_MALLOC, &gb);
	killed(GL_DEVICE, &hb);
	/* And xferd still moves bytes both ways. */
	within(&gb, &hb, seed += 100);
	gl_buf_free(ctx, &hb, true);
	gl_buf_free(ctx, &gb, true);

	gl_owner_stop(&o);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
