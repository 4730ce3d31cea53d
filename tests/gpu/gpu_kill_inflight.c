/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_kill_inflight.c - a client killed while its GPU copies run.
 *
 * Shows: a second client floods xferd with 256 MiB GPU -> GPU writes
 * (path cuda-ipc) into this process's GPU memory and is killed (-9) the
 * moment they are submitted, five times over.  The copies it left out
 * run on and end into nothing: xferd stays up, answers, and moves
 * verified bytes for this client afterwards (device.sh then checks that
 * xferd holds no import and stops cleanly; under ASan a completion that
 * reached the dead client's ring or batches would be reported).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpulib.h"

#define LEN   (256ull << 20)
#define FLOOD 64u
#define ROUNDS 5

int main(int argc, char **argv)
{
	struct xfer_ctx *ctx;
	struct gl_buf dst, src;
	uint8_t tok[XFER_TOKEN_MAX];

	gl_owner_entry(argc, argv);
	gl_require_gpus(1);
	ctx = tl_open();
	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN, &dst);
	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN, &src);
	size_t tlen = gl_export(&dst, 0, LEN, tok);

	for (unsigned r = 0; r < ROUNDS; r++) {
		struct gl_owner victim;
		gl_owner_start(&victim, NULL);
		int v = gl_owner_alloc(&victim, GL_DEVICE, 0, LEN, NULL);
		T_ASSERT(v >= 0, "the second client could not register GPU "
			 "memory: %s", xfer_strerror(v));
		int n = gl_owner_flood(&victim, v, tok, tlen, LEN, FLOOD);
		T_ASSERT(n == (int)FLOOD, "the second client submitted %d "
			 "writes", n);
		gl_owner_kill(&victim);
		printf("round %u: killed a client with %u x 256 MiB GPU "
		       "writes submitted\n", r + 1, FLOOD);
	}

	/* xferd still moves this client's bytes, on the same GPU path. */
	gl_fill(&src, 0, LEN, 41, 0);
	struct xfer_remote *rem;
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	gl_rw_ok(ctx, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(rem), 0,
		 LEN, "GPU -> GPU after the kills");
	size_t bad = gl_check(&dst, 0, LEN, 41, 0);
	T_ASSERT(!bad, "after the kills: byte %zu", bad - 1);
	T_OK(xfer_unimport(ctx, rem));
	gl_buf_free(ctx, &src, true);
	gl_buf_free(ctx, &dst, true);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
