/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_vmm.c - CUDA VMM memory (cuMemCreate + cuMemMap, as PyTorch's
 * expandable segments allocate), shared with xferd as a POSIX fd.
 *
 * Shows: a VMM buffer of a size that is no multiple of the allocation
 * granularity moves to and from another client's VMM buffer, and to and
 * from cudaMalloc memory, every byte checked and every CQE on
 * XFER_PATH_CUDA_IPC; unaligned sub-ranges of a VMM region; after the
 * other client maps new physical memory at the same address and
 * registers again, bytes written through its new token land in the new
 * memory and its old token no longer imports; VMM memory created
 * without a shareable handle type is refused (-ENOTSUP); with two GPUs,
 * VMM memory on the last GPU moves to VMM memory on the first.
 */
#include <errno.h>
#include <string.h>

#include "gpulib.h"

#define LEN ((32u << 20) + 4096 + 8)

static struct xfer_ctx *ctx;
static struct gl_owner o;

static struct xfer_remote *import_whole(int t, uint64_t len, uint8_t *tok,
					size_t *tlen)
{
	struct xfer_remote *rem;

	*tlen = gl_owner_export(&o, t, 0, len, tok);
	T_ASSERT(gl_token_mem_kind(tok, *tlen) == GL_MEM_CUDA, "token kind");
	T_OK(xfer_import(ctx, tok, *tlen, &rem));
	return rem;
}

static void write_check(struct gl_buf *l, uint64_t rh, int t, uint64_t seed,
			const char *what)
{
	gl_fill(l, 0, LEN, seed, 0);
	gl_owner_fill(&o, t, 0, LEN, ~seed, 0);
	gl_rw_ok(ctx, XFER_OP_WRITE, l->handle, 1, rh, 2, LEN - 3, what);
	size_t bad = gl_owner_check(&o, t, 2, LEN - 3, seed, 1);
	T_ASSERT(!bad, "%s: byte %zu", what, bad - 1);
	T_ASSERT(!gl_owner_check(&o, t, 0, 2, ~seed, 0) &&
		 !gl_owner_check(&o, t, LEN - 1, 1, ~seed, LEN - 1),
		 "%s: bytes beside the range changed", what);
}

static void read_check(struct gl_buf *l, uint64_t rh, int t, uint64_t seed,
		       const char *what)
{
	gl_owner_fill(&o, t, 0, LEN, seed, 0);
	gl_fill(l, 0, LEN, ~seed, 0);
	gl_rw_ok(ctx, XFER_OP_READ, l->handle, 5, rh, 3, LEN - 8, what);
	size_t bad = gl_check(l, 5, LEN - 8, seed, 3);
	T_ASSERT(!bad, "%s: byte %zu", what, bad - 1);
	T_ASSERT(!gl_check(l, 0, 5, ~seed, 0), "%s: bytes before changed",
		 what);
}

int main(int argc, char **argv)
{
	struct gl_buf vmm, vmm2, dev;
	uint8_t tok[XFER_TOKEN_MAX], old_tok[XFER_TOKEN_MAX];
	size_t tlen, old_len;

	gl_owner_entry(argc, argv);
	int ngpus = gl_require_gpus(1);
	ctx = tl_open();
	gl_owner_start(&o, NULL);

	/* Refused before it reaches xferd. */
	struct gl_buf nofd;
	struct xfer_mem *mem;
	gl_alloc(ctx, GL_VMM_NOFD, 0, LEN, &nofd);
	int rc = xfer_reg(ctx, nofd.ptr, LEN, &mem);
	T_ASSERT(rc == -ENOTSUP, "VMM memory without a shareable handle: %d "
		 "(%s), expected -ENOTSUP", rc, xfer_strerror(rc));
	gl_buf_free(ctx, &nofd, false);

	gl_buf_alloc(ctx, GL_VMM, 0, LEN + 8, &vmm);
	gl_buf_alloc(ctx, GL_VMM, 0, LEN + 8, &vmm2);
	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN, &dev);
	uint64_t optr;
	int tv = gl_owner_alloc(&o, GL_VMM, 0, LEN, &optr);
	T_ASSERT(tv >= 0, "the other client's VMM registration: %s",
		 xfer_strerror(tv));
	int td = gl_owner_alloc(&o, GL_DEVICE, 0, LEN, NULL);
	T_ASSERT(td >= 0, "the other client's registration: %s",
		 xfer_strerror(td));

	struct xfer_remote *rv = import_whole(tv, LEN, tok, &tlen);
	memcpy(old_tok, tok, tlen);
	old_len = tlen;
	struct xfer_remote *rd = import_whole(td, LEN, tok, &tlen);
	write_check(&vmm, xfer_remote_handle(rv), tv, 20, "vmm -> vmm");
	read_check(&vmm, xfer_remote_handle(rv), tv, 21, "vmm <- vmm");
	write_check(&dev, xfer_remote_handle(rv), tv, 22, "cudaMalloc -> vmm");
	read_check(&dev, xfer_remote_handle(rv), tv, 23, "cudaMalloc <- vmm");
	write_check(&vmm, xfer_remote_handle(rd), td, 24, "vmm -> cudaMalloc");
	read_check(&vmm, xfer_remote_handle(rd), td, 25, "vmm <- cudaMalloc");
	printf("VMM <-> VMM and VMM <-> cudaMalloc: ok\n");

	gl_subranges(ctx, &o, tv, LEN, &vmm, &vmm2, "VMM");

	/* New physical memory at the same address, registered again. */
	T_OK(xfer_unimport(ctx, rv));
	rc = gl_owner_vmm_remap(&o, tv);
	T_ASSERT(rc == 0, "registering the remapped VMM memory: %s",
		 xfer_strerror(rc));
	rc = xfer_import(ctx, old_tok, old_len, &rv);
	T_ASSERT(rc == -EACCES || rc == -ESTALE, "the token of the old "
		 "mapping imports: %d (%s)", rc, xfer_strerror(rc));
	rv = import_whole(tv, LEN, tok, &tlen);
	write_check(&vmm, xfer_remote_handle(rv), tv, 26,
		    "vmm -> vmm remapped at the same address");
	read_check(&vmm, xfer_remote_handle(rv), tv, 27,
		   "vmm <- vmm remapped at the same address");
	/* And this side remapped too, registered again. */
	T_OK(xfer_dereg(ctx, vmm.mem));
	gl_vmm_remap(&vmm);
	T_OK(gl_reg(ctx, &vmm));
	write_check(&vmm, xfer_remote_handle(rv), tv, 28,
		    "remapped vmm -> remapped vmm");
	printf("VMM remapped at the same address: ok\n");

	if (ngpus > 1) {
		struct gl_buf far;
		gl_buf_alloc(ctx, GL_VMM, ngpus - 1, LEN + 8, &far);
		write_check(&far, xfer_remote_handle(rv), tv, 29,
			    "vmm on the last GPU -> vmm on GPU 0");
		read_check(&far, xfer_remote_handle(rv), tv, 30,
			   "vmm on the last GPU <- vmm on GPU 0");
		gl_buf_free(ctx, &far, true);
		printf("VMM across GPUs: ok\n");
	}

	T_OK(xfer_unimport(ctx, rv));
	T_OK(xfer_unimport(ctx, rd));
	gl_owner_stop(&o);
	gl_buf_free(ctx, &vmm, true);
	gl_buf_free(ctx, &vmm2, true);
	gl_buf_free(ctx, &dev, true);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}
