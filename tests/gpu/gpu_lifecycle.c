/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_lifecycle.c - GPU memory that goes away under xferd.
 *
 * Shows: a client holding 1 GiB of cudaMalloc memory and 1 GiB of VMM
 * memory that xferd has imported (bytes moved into both) unmaps and
 * releases the VMM memory without deregistering it: the GPU memory stays
 * in use (xferd's import holds it).  Then the client is killed with
 * SIGKILL: within 20 s the GPU's free memory is back to what it was
 * before the client came (xferd released its imports), three times over
 * with no growth; transfers to the dead client's regions fail and its
 * tokens no longer import.  A buffer freed and allocated again at the
 * same address is a new buffer to xferd: deregistered first, its old
 * token stops working and the new registration moves bytes into the new
 * memory; freed without deregistering, a new registration at the same
 * address still reaches the new memory, never a stale import of the old
 * one; the same holds for this client's own source buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpulib.h"

#define BIG    (1ull << 30)
#define SLACK  (256ull << 20)  /* allocator rounding, driver bookkeeping */
#define SMALL  (8u << 20)

static struct xfer_ctx *ctx;
static struct gl_buf src;

static void show_gpu_processes(void)
{
	fflush(stdout);
	if (system("nvidia-smi --query-compute-apps=pid,used_memory "
		   "--format=csv >&2"))
		fprintf(stderr, "(nvidia-smi not available)\n");
}

/* Write SMALL bytes into owner region t, so that xferd has imported it. */
static struct xfer_remote *touch(struct gl_owner *o, int t, uint64_t seed)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;

	size_t tlen = gl_owner_export(o, t, 0, SMALL, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	gl_fill(&src, 0, SMALL, seed, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(rem), 0,
		 SMALL, "write into the victim");
	size_t bad = gl_owner_check(o, t, 0, SMALL, seed, 0);
	T_ASSERT(!bad, "write into the victim: byte %zu", bad - 1);
	return rem;
}

static void killed_client(int round, size_t free_before)
{
	struct gl_owner victim;
	uint8_t tok[XFER_TOKEN_MAX];

	gl_owner_start(&victim, NULL);
	int tl = gl_owner_alloc(&victim, GL_DEVICE, 0, BIG, NULL);
	T_ASSERT(tl >= 0, "victim's cudaMalloc registration: %s",
		 xfer_strerror(tl));
	int tv = gl_owner_alloc(&victim, GL_VMM, 0, BIG, NULL);
	T_ASSERT(tv >= 0, "victim's VMM registration: %s", xfer_strerror(tv));
	struct xfer_remote *rl = touch(&victim, tl, 40 + round);
	struct xfer_remote *rv = touch(&victim, tv, 50 + round);
	size_t ltok_len = gl_owner_export(&victim, tl, 0, SMALL, tok);
	size_t held = gl_dev_free(0);
	T_ASSERT(held + 2 * BIG - SLACK <= free_before,
		 "round %d: the victim's 2 GiB do not show in the GPU's free "
		 "memory (%zu MiB free before, %zu MiB now)", round,
		 free_before >> 20, held >> 20);

	/* The victim lets go of its VMM memory, registration kept: only
	 * xferd's import holds it now. */
	T_OK(gl_owner_free(&victim, tv, false));
	usleep(100000);
	held = gl_dev_free(0);
	T_ASSERT(held + 2 * BIG - SLACK <= free_before,
		 "round %d: VMM memory the client released is gone although "
		 "xferd imported it (%zu MiB free before, %zu MiB now)", round,
		 free_before >> 20, held >> 20);

	gl_owner_kill(&victim);
	uint64_t t0 = tl_now_ms(), deadline = t0 + 20000;
	size_t now;
	while ((now = gl_dev_free(0)) + SLACK < free_before) {
		if (tl_now_ms() > deadline) {
			show_gpu_processes();
			T_ASSERT(0, "round %d: 20 s after the kill the GPU has "
				 "%zu MiB free, %zu MiB before the victim came: "
				 "its memory is still held", round, now >> 20,
				 free_before >> 20);
		}
		usleep(50000);
	}
	printf("round %d: the killed client's memory was freed after %llu ms "
	       "(%zu MiB free, %zu before)\n", round,
	       (unsigned long long)(tl_now_ms() - t0), now >> 20,
	       free_before >> 20);

	struct xfer_cqe c = gl_rw(ctx, XFER_OP_WRITE, src.handle, 0,
				  xfer_remote_handle(rv), 0, 4096);
	T_ASSERT(c.result < 0, "a write into the dead client's VMM region "
		 "-> %lld", (long long)c.result);
	c = gl_rw(ctx, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(rl), 0,
		  4096);
	T_ASSERT(c.result < 0, "a write into the dead client's region -> %lld",
		 (long long)c.result);
	struct xfer_remote *again;
	int rc = xfer_import(ctx, tok, ltok_len, &again);
	T_ASSERT(rc == -EACCES || rc == -ESTALE,
		 "the dead client's token imports: %d (%s)", rc,
		 xfer_strerror(rc));
	xfer_unimport(ctx, rl);
	xfer_unimport(ctx, rv);
}

static void same_address(void)
{
	struct gl_owner o;
	uint8_t tok[XFER_TOKEN_MAX], tok2[XFER_TOKEN_MAX];
	struct xfer_remote *r1, *r2;
	uint64_t p1, p2;

	gl_owner_start(&o, NULL);

	/* Deregistered, freed, allocated again. */
	int t = gl_owner_alloc(&o, GL_DEVICE, 0, SMALL, &p1);
	T_ASSERT(t >= 0, "registration: %s", xfer_strerror(t));
	size_t tlen = gl_owner_export(&o, t, 0, SMALL, tok);
	T_OK(xfer_import(ctx, tok, tlen, &r1));
	gl_fill(&src, 0, SMALL, 60, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(r1), 0,
		 SMALL, "first buffer");
	T_ASSERT(!gl_owner_check(&o, t, 0, SMALL, 60, 0), "first buffer bytes");
	T_OK(gl_owner_free(&o, t, true));
	int t2 = gl_owner_alloc(&o, GL_DEVICE, 0, SMALL, &p2);
	T_ASSERT(t2 >= 0, "registration again: %s", xfer_strerror(t2));
	if (p1 != p2)
		printf("note: the allocator moved the buffer (%#llx, then "
		       "%#llx); the checks below still hold\n",
		       (unsigned long long)p1, (unsigned long long)p2);
	struct xfer_remote *stale;
	int rc = xfer_import(ctx, tok, tlen, &stale);
	T_ASSERT(rc == -EACCES || rc == -ESTALE,
		 "the freed buffer's token imports: %d (%s)", rc,
		 xfer_strerror(rc));
	struct xfer_cqe c = gl_rw(ctx, XFER_OP_WRITE, src.handle, 0,
				  xfer_remote_handle(r1), 0, 4096);
	T_ASSERT(c.result < 0, "a write through the freed buffer's import "
		 "-> %lld", (long long)c.result);
	xfer_unimport(ctx, r1);
	tlen = gl_owner_export(&o, t2, 0, SMALL, tok2);
	T_OK(xfer_import(ctx, tok2, tlen, &r2));
	gl_owner_fill(&o, t2, 0, SMALL, 61, 0);
	gl_fill(&src, 0, SMALL, 62, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(r2), 0,
		 SMALL, "the buffer allocated again");
	size_t bad = gl_owner_check(&o, t2, 0, SMALL, 62, 0);
	T_ASSERT(!bad, "the buffer allocated again: byte %zu", bad - 1);
	T_OK(xfer_unimport(ctx, r2));
	printf("deregistered, freed, allocated again%s: ok\n",
	       p1 == p2 ? " at the same address" : "");

	/* Freed without deregistering, allocated and registered again. */
	T_OK(gl_owner_free(&o, t2, false));
	int t3 = gl_owner_alloc(&o, GL_DEVICE, 0, SMALL, &p1);
	T_ASSERT(t3 >= 0, "registration at a reused address: %s",
		 xfer_strerror(t3));
	tlen = gl_owner_export(&o, t3, 0, SMALL, tok2);
	T_OK(xfer_import(ctx, tok2, tlen, &r2));
	gl_owner_fill(&o, t3, 0, SMALL, 63, 0);
	gl_fill(&src, 0, SMALL, 64, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(r2), 0,
		 SMALL, "freed without dereg, registered again");
	bad = gl_owner_check(&o, t3, 0, SMALL, 64, 0);
	T_ASSERT(!bad, "freed without dereg, registered again: byte %zu "
		 "(a stale import of the old buffer?)", bad - 1);
	printf("freed without deregistering, registered again%s: ok\n",
	       p1 == p2 ? " at the same address" : "");

	/* The same on this side: the source buffer. */
	uint8_t *old = src.ptr;
	src.mem = NULL;            /* the old registration stays behind */
	gl_buf_free(ctx, &src, false);
	gl_buf_alloc(ctx, GL_DEVICE, 0, SMALL, &src);
	gl_fill(&src, 0, SMALL, 65, 0);
	gl_owner_fill(&o, t3, 0, SMALL, 66, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(r2), 0,
		 SMALL, "own buffer freed and registered again");
	bad = gl_owner_check(&o, t3, 0, SMALL, 65, 0);
	T_ASSERT(!bad, "own buffer freed and registered again: byte %zu",
		 bad - 1);
	printf("own source buffer freed and registered again%s: ok\n",
	       old == src.ptr ? " at the same address" : "");

	T_OK(xfer_unimport(ctx, r2));
	gl_owner_stop(&o);
}

int main(int argc, char **argv)
{
	gl_owner_entry(argc, argv);
	gl_require_gpus(1);
	ctx = tl_open();
	gl_buf_alloc(ctx, GL_DEVICE, 0, SMALL, &src);

	/* A first client so that whatever xferd sets up on first use of
	 * the GPU is there before the baseline is read. */
	struct gl_owner warm;
	gl_owner_start(&warm, NULL);
	int t = gl_owner_alloc(&warm, GL_VMM, 0, SMALL, NULL);
	T_ASSERT(t >= 0, "registration: %s", xfer_strerror(t));
	xfer_unimport(ctx, touch(&warm, t, 30));
	gl_owner_stop(&warm);

	size_t free_before = gl_dev_free(0);
	for (int round = 1; round <= 3; round++)
		killed_client(round, free_before);

	same_address();

	gl_buf_free(ctx, &src, true);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
