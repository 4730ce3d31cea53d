/*
 * gpu_remote_refused.c - GPU memory toward another node, where no path
 * can serve it, fails that descriptor and nothing else.
 *
 * Two xferds on this machine act as two nodes (own sockets, own TCP
 * ports on 127.0.0.1).  A client of node a holds GPU and host memory; an
 * owner on node b holds a memfd region, pinned host memory registered
 * with xfer_reg (CMA) and GPU memory.  Until the links carry GPU memory
 * (a staged path), every write and read between GPU memory and the other
 * node must end with -ENOTSUP: GPU memory on the initiator's side is
 * refused by node a, GPU memory on the owner's side by node b when the
 * request arrives.  Shows, at 1 B, 4 KiB and 64 KiB each way: the CQE
 * says -ENOTSUP, the target's bytes did not change, the link stays up (a
 * host-to-host transfer right after moves verified bytes) and both
 * daemons are alive and stop cleanly at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpulib.h"

#define LEN (1u << 20)

static const uint64_t sizes[] = { 1, 4096, 65536 };

static struct xfer_ctx *ctx;
static struct gl_owner o;
static struct gl_buf host;  /* node a's memfd, for the link check */
static int b_memfd;         /* node b's memfd region, the same */

static struct xfer_remote *import_of(int idx)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;

	size_t tlen = gl_owner_export(&o, idx, 0, LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	return rem;
}

/* The link between the nodes still moves bytes. */
static void link_still_up(const char *after)
{
	struct xfer_remote *rem = import_of(b_memfd);

	gl_fill(&host, 0, 4096, 99, 0);
	struct xfer_cqe c = gl_rw(ctx, XFER_OP_WRITE, host.handle, 0,
				  xfer_remote_handle(rem), 0, 4096);
	T_ASSERT(c.result == 4096 && c.path == XFER_PATH_TCP,
		 "after %s: memfd -> remote memfd: %lld (%s) path %s", after,
		 (long long)c.result, xfer_strerror((int)c.result),
		 xfer_path_name(c.path));
	T_ASSERT(!gl_owner_check(&o, b_memfd, 0, 4096, 99, 0),
		 "after %s: memfd -> remote memfd: bytes", after);
	T_OK(xfer_unimport(ctx, rem));
}

/*
 * Write and read between local buffer l and the owner's region t at
 * each size: every one -ENOTSUP, the target's bytes unchanged.
 */
static void refused(struct gl_buf *l, int t, enum gl_kind tk)
{
	struct xfer_remote *rem = import_of(t);
	const uint64_t rh = xfer_remote_handle(rem);
	char what[96];

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const uint64_t n = sizes[i];

		snprintf(what, sizeof(what), "%s -> remote %s, %llu bytes",
			 gl_kind_name(l->kind), gl_kind_name(tk),
			 (unsigned long long)n);
		gl_fill(l, 0, n + 8, 11 + i, 0);
		gl_owner_fill(&o, t, 0, n + 8, 21 + i, 0);
		struct xfer_cqe c = gl_rw(ctx, XFER_OP_WRITE, l->handle, 3, rh,
					  5, n);
		T_ASSERT(c.result == -ENOTSUP, "%s: %lld (%s), expected -ENOTSUP",
			 what, (long long)c.result, xfer_strerror((int)c.result));
		T_ASSERT(!gl_owner_check(&o, t, 0, n + 8, 21 + i, 0),
			 "%s: the target changed", what);
		printf("refused: %s\n", what);

		snprintf(what, sizeof(what), "%s <- remote %s, %llu bytes",
			 gl_kind_name(l->kind), gl_kind_name(tk),
			 (unsigned long long)n);
		c = gl_rw(ctx, XFER_OP_READ, l->handle, 3, rh, 5, n);
		T_ASSERT(c.result == -ENOTSUP, "%s: %lld (%s), expected -ENOTSUP",
			 what, (long long)c.result, xfer_strerror((int)c.result));
		T_ASSERT(!gl_check(l, 0, n + 8, 11 + i, 0),
			 "%s: the local buffer changed", what);
		printf("refused: %s\n", what);
		link_still_up(what);
	}
	T_OK(xfer_unimport(ctx, rem));
}

int main(int argc, char **argv)
{
	struct tl_daemon a, b;
	char listen_a[48], listen_b[48];
	/* Ports of this run only, away from xferd's default 7474. */
	unsigned port = 20000 + (unsigned)getpid() % 20000;

	gl_owner_entry(argc, argv);
	gl_require_gpus(1);
	snprintf(listen_a, sizeof(listen_a), "listen=127.0.0.1:%u", port);
	snprintf(listen_b, sizeof(listen_b), "listen=127.0.0.1:%u", port + 1);
	const char *args_a[] = { listen_a, "node_name=a", "rdma=off", NULL };
	const char *args_b[] = { listen_b, "node_name=b", "rdma=off", NULL };
	tl_daemon_start(&a, args_a);
	tl_daemon_start(&b, args_b);

	T_OK(xfer_open(a.socket, &ctx));
	gl_owner_start(&o, b.socket);
	b_memfd = gl_owner_alloc(&o, GL_HOST_MEMFD, 0, LEN, NULL);
	int b_pinned = gl_owner_alloc(&o, GL_PINNED, 0, LEN, NULL);
	int b_gpu = gl_owner_alloc(&o, GL_DEVICE, 0, LEN, NULL);
	T_ASSERT(b_memfd >= 0 && b_pinned >= 0 && b_gpu >= 0,
		 "node b's owner could not register its memory");

	struct gl_buf gpu, vmm, pinned;
	gl_buf_alloc(ctx, GL_HOST_MEMFD, 0, LEN, &host);
	gl_buf_alloc(ctx, GL_DEVICE, 0, LEN, &gpu);
	gl_buf_alloc(ctx, GL_VMM, 0, LEN, &vmm);
	gl_buf_alloc(ctx, GL_PINNED, 0, LEN, &pinned);
	link_still_up("start");

	/* GPU memory on the initiator's side: node a refuses. */
	refused(&gpu, b_memfd, GL_HOST_MEMFD);
	refused(&gpu, b_pinned, GL_PINNED);
	refused(&vmm, b_memfd, GL_HOST_MEMFD);
	refused(&gpu, b_gpu, GL_DEVICE);
	/* GPU memory on the owner's side: node b refuses. */
	refused(&host, b_gpu, GL_DEVICE);
	refused(&pinned, b_gpu, GL_DEVICE);

	gl_buf_free(ctx, &pinned, true);
	gl_buf_free(ctx, &vmm, true);
	gl_buf_free(ctx, &gpu, true);
	gl_buf_free(ctx, &host, true);
	gl_owner_stop(&o);
	xfer_close(ctx);
	T_ASSERT(tl_daemon_stop(&a) == 0, "node a's xferd did not stop cleanly");
	T_ASSERT(tl_daemon_stop(&b) == 0, "node b's xferd did not stop cleanly");
	printf("ok\n");
	return 0;
}
