/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_death.c - a client killed in the middle of its transfers costs
 * xferd nothing: its descriptors, regions, imports and fds are released,
 * and other clients carry on untouched.
 *
 * A private xferd serves a surviving client.  Five times over, a child
 * process connects, allocates memfd regions, registers malloc'd memory,
 * imports a token of the survivor's region and streams writes and reads
 * against it, many in flight; it is SIGKILLed mid-stream.  After each
 * kill the survivor still moves verified bytes, xferd's open fds return
 * to what they were before the child came (polled, 10 s at most: no
 * growth over the rounds), and the dead child's token no longer imports
 * (-EACCES).  At the end xferd stops cleanly with exit status 0.
 *
 * xferd runs with two copy workers and cma_split_bytes at 1 MiB, and
 * every fourth descriptor of the child is a 2 MiB write of its malloc'd
 * memory, which xferd copies in parts on the workers: a child killed
 * with such copies running leaves them to finish into memory xferd
 * still holds, and nothing of it behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define ROUNDS    5
#define LAND_LEN  (4u * 1024u * 1024u)
#define CHUNK     (64u * 1024u)
#define INFLIGHT  32u
#define WARMUP    200u   /* completions before the child says it streams */
#define BIG       (2u * 1024u * 1024u) /* split on the copy workers */

static struct tl_daemon xd;
static struct xfer_ctx *survivor;
static struct tl_buf s_src, s_dst, landing;

/* The survivor copies memfd -> malloc and back, and checks both. */
static void survivor_roundtrip(const char *when)
{
	static uint64_t seed = 7000;
	const size_t len = 1024 * 1024 - 8;
	struct xfer_sqe *sqe;
	struct xfer_cqe c;

	seed++;
	tl_fill(s_src.ptr + 1, len, seed);
	memset(s_dst.ptr, 0, s_dst.len);
	sqe = xfer_get_sqe(survivor);
	T_ASSERT(sqe, "survivor: no SQE");
	xfer_prep_write(sqe, s_src.handle, 1, s_dst.handle, 2, len, seed);
	c = tl_submit_wait(survivor);
	T_ASSERT(c.user_data == seed && c.result == (int64_t)len &&
		 c.path == XFER_PATH_CMA,
		 "%s: survivor's write -> %lld (%s) path %s", when,
		 (long long)c.result, xfer_strerror((int)c.result),
		 xfer_path_name(c.path));
	T_ASSERT(!tl_check(s_dst.ptr + 2, len, seed), "%s: survivor's bytes",
		 when);

	memset(s_src.ptr, 0, s_src.len);
	sqe = xfer_get_sqe(survivor);
	xfer_prep_read(sqe, s_src.handle, 5, s_dst.handle, 2, len, seed + 1);
	c = tl_submit_wait(survivor);
	T_ASSERT(c.user_data == seed + 1 && c.result == (int64_t)len,
		 "%s: survivor's read -> %lld (%s)", when, (long long)c.result,
		 xfer_strerror((int)c.result));
	T_ASSERT(!tl_check(s_src.ptr + 5, len, seed), "%s: survivor's read bytes",
		 when);
}

/* The doomed child: everything a client can hold, and a busy ring. */
static void child_main(const void *land_tok, size_t land_tok_len, int out)
{
	struct xfer_ctx *ctx;
	struct tl_buf a, b, m;
	struct xfer_remote *rem;
	uint8_t tok[XFER_TOKEN_MAX];
	unsigned inflight = 0, done = 0;
	uint64_t n = 0;

	T_OK(xfer_open(xd.socket, &ctx));
	tl_buf_alloc(ctx, TL_HOST, 1024 * 1024, &a);
	tl_buf_alloc(ctx, TL_HOST, 64 * 1024, &b);
	tl_buf_alloc(ctx, TL_MALLOC, BIG, &m);
	T_OK(xfer_import(ctx, land_tok, land_tok_len, &rem));
	tl_send_blob(out, tok, tl_export(&a, tok));
	tl_fill(a.ptr, a.len, 1);
	tl_fill(m.ptr, m.len, 2);

	const uint64_t rh = xfer_remote_handle(rem);
	for (;;) {
		struct xfer_sqe *sqe;
		while (inflight < INFLIGHT && (sqe = xfer_get_sqe(ctx))) {
			uint64_t roff = (n % (LAND_LEN / CHUNK)) * CHUNK;
			uint64_t loff = (n * CHUNK) % (1024 * 1024);
			switch (n % 4) {
			case 0:
				xfer_prep_write(sqe, a.handle, loff, rh, roff,
						CHUNK, n);
				break;
			case 1:
				xfer_prep_write(sqe, m.handle, loff, rh, roff,
						CHUNK, n);
				break;
			case 2:
				xfer_prep_read(sqe, m.handle, loff, rh, roff,
					       CHUNK, n);
				break;
			default:
				xfer_prep_write(sqe, m.handle, 0, rh,
						(n / 4 % 2) * BIG, BIG, n);
			}
			n++;
			inflight++;
		}
		T_ASSERT(xfer_submit(ctx) >= 0, "child: submit");
		struct xfer_cqe *c;
		T_OK(xfer_wait_cqe(ctx, &c, 10000));
		int64_t want = c->user_data % 4 == 3 ? BIG : CHUNK;
		T_ASSERT(c->result == want, "child: transfer -> %lld (%s)",
			 (long long)c->result, xfer_strerror((int)c->result));
		xfer_cq_advance(ctx, 1);
		inflight--;
		if (++done == WARMUP) {
			uint8_t streaming = 1;
			tl_write_full(out, &streaming, 1);
		}
	}
}

static void wait_fd_count(int want, const char *when)
{
	uint64_t deadline = tl_now_ms() + 10000;
	int n;

	while ((n = tl_fd_count(xd.pid)) != want) {
		T_ASSERT(tl_now_ms() < deadline,
			 "%s: xferd has %d fds, %d before (not released in 10 s)",
			 when, n, want);
		usleep(2000);
	}
}

int main(void)
{
	uint8_t land_tok[XFER_TOKEN_MAX], dead_tok[XFER_TOKEN_MAX];
	size_t land_tok_len, dead_tok_len;
	char when[64];

	static const char *const split[] = { "copy_workers=2",
					     "cma_split_bytes=1M", NULL };
	tl_daemon_start(&xd, split);
	const int fds_idle = tl_fd_count(xd.pid);

	T_OK(xfer_open(xd.socket, &survivor));
	tl_buf_alloc(survivor, TL_HOST, 1024 * 1024, &s_src);
	tl_buf_alloc(survivor, TL_MALLOC, 1024 * 1024, &s_dst);
	tl_buf_alloc(survivor, TL_HOST, LAND_LEN, &landing);
	land_tok_len = tl_export(&landing, land_tok);
	survivor_roundtrip("start");
	const int fds_base = tl_fd_count(xd.pid);
	T_ASSERT(fds_base > fds_idle, "a client costs xferd no fds?");

	for (int round = 1; round <= ROUNDS; round++) {
		int p[2];
		T_ASSERT(pipe2(p, O_CLOEXEC) == 0, "pipe");
		pid_t pid = tl_fork();
		if (pid == 0) {
			close(p[0]);
			child_main(land_tok, land_tok_len, p[1]);
			exit(1);
		}
		close(p[1]);
		dead_tok_len = tl_recv_blob(p[0], dead_tok, sizeof(dead_tok));
		uint8_t streaming;
		tl_read_full(p[0], &streaming, 1);
		T_ASSERT(tl_fd_count(xd.pid) > fds_base,
			 "the child holds no fds in xferd");
		snprintf(when, sizeof(when), "round %d, child streaming", round);
		survivor_roundtrip(when);

		kill(pid, SIGKILL);
		int status = tl_child_wait(pid, 10000);
		T_ASSERT(status == -SIGKILL, "child ended with %d", status);
		close(p[0]);
		snprintf(when, sizeof(when), "round %d, just after the kill", round);
		survivor_roundtrip(when);

		snprintf(when, sizeof(when), "round %d", round);
		wait_fd_count(fds_base, when);
		struct xfer_remote *r;
		int rc = xfer_import(survivor, dead_tok, dead_tok_len, &r);
		T_ASSERT(rc == -EACCES, "%s: the dead child's token imports: %d",
			 when, rc);
		survivor_roundtrip(when);
		printf("round %d: child killed mid-stream, all released: ok\n",
		       round);
	}

	tl_buf_free(survivor, &s_src);
	tl_buf_free(survivor, &s_dst);
	tl_buf_free(survivor, &landing);
	xfer_close(survivor);
	wait_fd_count(fds_idle, "all clients gone");
	int status = tl_daemon_stop(&xd);
	T_ASSERT(status == 0, "xferd exited with %d", status);
	return 0;
}
