/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_remote.c - GPU memory to and from another node over the TCP link,
 * through xferd's pinned staging chunks (CQE path tcp-staged).
 *
 * Two xferds on this machine act as two nodes (own sockets, own TCP
 * ports on 127.0.0.1, rdma=off).  A client of node a and an owner on
 * node b each hold cudaMalloc, VMM, memfd and pinned (xfer_reg, CMA)
 * memory.  Every pair of kinds, writes and reads, at 1 B, 4 KiB, 64 KiB,
 * 1 MiB + 3 and 64 MiB + 5 at odd offsets on both sides: the CQE says
 * the bytes and the path (tcp-staged where GPU memory is at either end,
 * tcp otherwise), the bytes arrived, the bytes beside the range and the
 * source did not change.  Then 1000 x 64 KiB as one linked batch from
 * GPU memory into the other node's GPU memory; then a second client of
 * node a is killed (-9) with 64 MiB GPU writes in flight through
 * staging: the first client's transfers go on unaffected, the link
 * stays up, and both daemons stop cleanly (each logs its staging chunks
 * all back in the pool at exit).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpulib.h"

#define BIG (64ull << 20)
#define LEN (BIG + (1u << 20))
#define VBLK (64u << 10)
#define VN 1000u

static const uint64_t sizes[] = { 1, 4096, 65536, (1u << 20) + 3, BIG + 5 };
static const enum gl_kind kinds[] = { GL_DEVICE, GL_VMM, GL_HOST_MEMFD,
				      GL_PINNED };
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static struct xfer_ctx *ctx;
static struct gl_owner o;
static struct gl_buf bufs[NKINDS];  /* node a's */
static int regs[NKINDS];            /* node b's owner's */
static uint64_t seed = 1000;

static struct xfer_remote *import_of(int idx)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;

	size_t tlen = gl_owner_export(&o, idx, 0, LEN, tok);
	T_OK(xfer_import(ctx, tok, tlen, &rem));
	return rem;
}

static unsigned want_path(enum gl_kind a, enum gl_kind b)
{
	return gl_kind_is_gpu(a) || gl_kind_is_gpu(b) ? XFER_PATH_TCP_STAGED
						      : XFER_PATH_TCP;
}

static void expect(struct xfer_cqe c, uint64_t n, unsigned path,
		   const char *what)
{
	T_ASSERT(c.result == (int64_t)n, "%s: %lld (%s), expected %llu", what,
		 (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "bytes",
		 (unsigned long long)n);
	T_ASSERT(c.path == path, "%s: path %s, expected %s", what,
		 xfer_path_name(c.path), xfer_path_name(path));
}

/* Write then read n bytes between local l (at lo) and owner region t
 * (at ro), checking both sides and the bytes around. */
static void both_ways(struct gl_buf *l, int t, enum gl_kind tk, uint64_t n,
		      uint64_t rh)
{
	const uint64_t lo = 3, ro = 5;
	const uint64_t lw = lo + n + 8, rw = ro + n + 8;
	unsigned path = want_path(l->kind, tk);
	char what[128];
	size_t bad;

	snprintf(what, sizeof(what), "%s -> remote %s, %llu bytes",
		 gl_kind_name(l->kind), gl_kind_name(tk),
		 (unsigned long long)n);
	uint64_t ls = ++seed, rs = ++seed;
	gl_fill(l, 0, lw, ls, 0);
	gl_owner_fill(&o, t, 0, rw, rs, 0);
	expect(gl_rw(ctx, XFER_OP_WRITE, l->handle, lo, rh, ro, n), n, path,
	       what);
	bad = gl_owner_check(&o, t, ro, n, ls, lo);
	T_ASSERT(!bad, "%s: byte %zu did not arrive", what, bad - 1);
	T_ASSERT(!gl_owner_check(&o, t, 0, ro, rs, 0) &&
		 !gl_owner_check(&o, t, ro + n, 8, rs, ro + n),
		 "%s: bytes beside the target range changed", what);
	T_ASSERT(!gl_check(l, 0, lw, ls, 0), "%s: the source changed", what);

	snprintf(what, sizeof(what), "%s <- remote %s, %llu bytes",
		 gl_kind_name(l->kind), gl_kind_name(tk),
		 (unsigned long long)n);
	ls = ++seed, rs = ++seed;
	gl_fill(l, 0, lw, ls, 0);
	gl_owner_fill(&o, t, 0, rw, rs, 0);
	expect(gl_rw(ctx, XFER_OP_READ, l->handle, lo, rh, ro, n), n, path,
	       what);
	bad = gl_check(l, lo, n, rs, ro);
	T_ASSERT(!bad, "%s: byte %zu did not arrive", what, bad - 1);
	T_ASSERT(!gl_check(l, 0, lo, ls, 0) &&
		 !gl_check(l, lo + n, 8, ls, lo + n),
		 "%s: bytes beside the local range changed", what);
	T_ASSERT(!gl_owner_check(&o, t, 0, rw, rs, 0),
		 "%s: the remote source changed", what);
}

static struct xfer_sqe *get_sqe_wait(void)
{
	uint64_t deadline = tl_now_ms() + 10000;
	struct xfer_sqe *sqe;

	while (!(sqe = xfer_get_sqe(ctx))) {
		T_ASSERT(tl_now_ms() < deadline, "the SQ never drained");
		xfer_submit(ctx);
		sched_yield();
	}
	return sqe;
}

/* 1000 x 64 KiB from local GPU memory into remote GPU memory, one
 * linked batch, one CQE; every block where it belongs. */
static void vector(struct gl_buf *l, int t)
{
	struct xfer_remote *rem = import_of(t);
	const uint64_t s = ++seed, bg = ++seed;

	gl_fill(l, 0, (uint64_t)VN * VBLK, s, 0);
	gl_owner_fill(&o, t, 0, (uint64_t)VN * VBLK + 8, bg, 0);
	uint64_t t0 = tl_now_ms();
	for (unsigned i = 0; i < VN; i++) {
		struct xfer_sqe *sqe = get_sqe_wait();
		/* Reversed: block i goes to slot VN - 1 - i. */
		xfer_prep_write(sqe, l->handle, (uint64_t)i * VBLK,
				xfer_remote_handle(rem),
				(uint64_t)(VN - 1 - i) * VBLK, VBLK, i + 1);
		if (i + 1 < VN)
			xfer_sqe_set_link(sqe);
	}
	T_ASSERT(xfer_submit(ctx) >= 0, "submit");
	struct xfer_cqe *cp;
	int rc = xfer_wait_cqe(ctx, &cp, 60000);
	T_ASSERT(rc == 0, "vector: no CQE: %s", xfer_strerror(rc));
	struct xfer_cqe c = *cp;
	xfer_cq_advance(ctx, 1);
	T_ASSERT(c.user_data == VN, "vector: CQE for %llu",
		 (unsigned long long)c.user_data);
	expect(c, (uint64_t)VN * VBLK, XFER_PATH_TCP_STAGED,
	       "vector 1000 x 64 KiB GPU -> remote GPU");
	uint64_t ms = tl_now_ms() - t0;
	for (unsigned i = 0; i < VN; i++) {
		size_t bad = gl_owner_check(&o, t, (uint64_t)(VN - 1 - i) * VBLK,
					    VBLK, s, (uint64_t)i * VBLK);
		T_ASSERT(!bad, "vector: block %u byte %zu", i, bad - 1);
	}
	T_ASSERT(!gl_owner_check(&o, t, (uint64_t)VN * VBLK, 8, bg,
				 (uint64_t)VN * VBLK),
		 "vector: bytes past the last block changed");
	printf("ok: vector %u x %u KiB GPU -> remote GPU in %llu ms\n", VN,
	       VBLK >> 10, (unsigned long long)ms);
	T_OK(xfer_unimport(ctx, rem));
}

/* A second client of node a, killed with staged writes in flight. */
static void kill_with_chunks_out(const char *sock_a, int t)
{
	struct gl_owner victim;
	uint8_t tok[XFER_TOKEN_MAX];

	gl_owner_start(&victim, sock_a);
	int v = gl_owner_alloc(&victim, GL_DEVICE, 0, BIG, NULL);
	T_ASSERT(v >= 0, "the second client could not register GPU memory");
	gl_owner_fill(&victim, v, 0, BIG, 7, 0);
	size_t tlen = gl_owner_export(&o, t, 0, LEN, tok);
	int n = gl_owner_flood(&victim, v, tok, tlen, BIG, 16);
	T_ASSERT(n == 16, "the second client submitted %d writes", n);
	usleep(150 * 1000);  /* chunks out: D2H, on the wire, H2D */
	gl_owner_kill(&victim);
	printf("ok: killed a client with 16 x 64 MiB staged writes out\n");
}

int main(int argc, char **argv)
{
	struct tl_daemon a, b;
	char listen_a[48], listen_b[48], peer_a[48], peer_b[48];
	/* Ports of this run only, away from xferd's default 7474. */
	unsigned port = 20000 + (unsigned)getpid() % 20000;

	gl_owner_entry(argc, argv);
	gl_require_gpus(1);
	snprintf(listen_a, sizeof(listen_a), "listen=127.0.0.1:%u", port);
	snprintf(listen_b, sizeof(listen_b), "listen=127.0.0.1:%u", port + 1);
	/* Each the other's configured peer: without a cluster key xferd
	 * dials known peers only. */
	snprintf(peer_a, sizeof(peer_a), "peer=127.0.0.1:%u", port + 1);
	snprintf(peer_b, sizeof(peer_b), "peer=127.0.0.1:%u", port);
	const char *args_a[] = { listen_a, peer_a, "node_name=a", "rdma=off",
				 "sq_entries=4096", NULL };
	const char *args_b[] = { listen_b, peer_b, "node_name=b", "rdma=off",
				 NULL };
	tl_daemon_start(&a, args_a);
	tl_daemon_start(&b, args_b);

	T_OK(xfer_open(a.socket, &ctx));
	gl_owner_start(&o, b.socket);
	for (unsigned k = 0; k < NKINDS; k++) {
		regs[k] = gl_owner_alloc(&o, kinds[k], 0, LEN, NULL);
		T_ASSERT(regs[k] >= 0, "node b's owner could not register %s",
			 gl_kind_name(kinds[k]));
		gl_buf_alloc(ctx, kinds[k], 0, LEN, &bufs[k]);
	}

	for (unsigned li = 0; li < NKINDS; li++) {
		for (unsigned ri = 0; ri < NKINDS; ri++) {
			struct xfer_remote *rem = import_of(regs[ri]);
			uint64_t t0 = tl_now_ms();
			for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]);
			     s++)
				both_ways(&bufs[li], regs[ri], kinds[ri],
					  sizes[s], xfer_remote_handle(rem));
			printf("ok: %-12s <-> remote %-12s every size, both "
			       "ways (%llu ms)\n", gl_kind_name(kinds[li]),
			       gl_kind_name(kinds[ri]),
			       (unsigned long long)(tl_now_ms() - t0));
			fflush(stdout);
			T_OK(xfer_unimport(ctx, rem));
		}
	}
	vector(&bufs[0], regs[0]);

	kill_with_chunks_out(a.socket, regs[0]);
	/* The other client is unaffected: GPU both ways, then host. */
	struct xfer_remote *rem = import_of(regs[0]);
	for (int i = 0; i < 3; i++)
		both_ways(&bufs[0], regs[0], kinds[0], sizes[4],
			  xfer_remote_handle(rem));
	T_OK(xfer_unimport(ctx, rem));
	rem = import_of(regs[2]);
	both_ways(&bufs[2], regs[2], kinds[2], sizes[3], xfer_remote_handle(rem));
	T_OK(xfer_unimport(ctx, rem));
	printf("ok: after the kill, the other client's transfers and the "
	       "link\n");

	for (unsigned k = 0; k < NKINDS; k++)
		gl_buf_free(ctx, &bufs[k], true);
	gl_owner_stop(&o);
	xfer_close(ctx);
	T_ASSERT(tl_daemon_stop(&a) == 0, "node a's xferd did not stop cleanly");
	T_ASSERT(tl_daemon_stop(&b) == 0, "node b's xferd did not stop cleanly");
	printf("ok\n");
	return 0;
}
