/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hostile.h - what the tests of xferd's budgets share (fd_exhaust.c,
 * ctl_flood.c, memcg_sparse.c): a private xferd every user may reach,
 * clients run as an unprivileged uid, a bystander that keeps moving
 * verified bytes while another user attacks, and timed xferctl calls.
 *
 * Header-only (static inline): each test program links testlib.o alone.
 */
#ifndef XFER_HOSTILE_H
#define XFER_HOSTILE_H

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

/* Unprivileged users of the tests: numeric, no passwd entry needed. */
#define HL_ATTACKER_UID 65534
#define HL_BYSTANDER_UID 65533

static inline void hl_need_root(void)
{
	if (geteuid() != 0) {
		printf("skip: needs root (to run xferd and clients as other "
		       "users)\n");
		exit(TL_SKIP);
	}
}

/* Let every user reach d's socket (the tests' stand-in for a group). */
static inline void hl_open_socket(const struct tl_daemon *d)
{
	T_ASSERT(chmod(d->dir, 0755) == 0 && chmod(d->socket, 0666) == 0,
		 "chmod: %s", strerror(errno));
}

/* Become uid (and gid uid, no groups) for good; still reachable by
 * xferd's CMA (dumpable), and gone with the test. */
static inline void hl_become(uid_t uid)
{
	T_ASSERT(setgroups(0, NULL) == 0 && setresgid(uid, uid, uid) == 0 &&
		 setresuid(uid, uid, uid) == 0, "become uid %u: %s",
		 (unsigned)uid, strerror(errno));
	prctl(PR_SET_DUMPABLE, 1);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* One verified copy memfd -> malloc'd memory through ctx. */
static inline void hl_move(struct xfer_ctx *ctx, struct tl_buf *src,
			   struct tl_buf *dst, uint64_t seed)
{
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);

	tl_fill(src->ptr, src->len, seed);
	memset(dst->ptr, 0, dst->len);
	T_ASSERT(sqe, "bystander: no SQE");
	xfer_prep_write(sqe, src->handle, 0, dst->handle, 0, src->len, seed);
	struct xfer_cqe cqe = tl_submit_wait(ctx);
	T_ASSERT(cqe.result == (int64_t)src->len,
		 "bystander: copy -> %lld (%s)", (long long)cqe.result,
		 xfer_strerror((int)cqe.result));
	T_ASSERT(!tl_check(dst->ptr, dst->len, seed), "bystander: bytes "
		 "differ");
}

/*
 * Fork the attacker: fn(socket, report, hold) runs in a child that writes
 * what it did on report and keeps what it holds until hold is written or
 * closed.  The parent gets the other ends in *report and *hold.
 */
static inline pid_t hl_attacker_start(void (*fn)(const char *, int, int),
				      const char *socket, int *report,
				      int *hold)
{
	int r[2], h[2];

	T_ASSERT(pipe(r) == 0 && pipe(h) == 0, "pipe");
	fflush(NULL);
	pid_t pid = tl_fork();
	T_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		close(r[0]);
		close(h[1]);
		fn(socket, r[1], h[0]);
		_exit(1);  /* fn leaves with _exit */
	}
	close(r[1]);
	close(h[0]);
	*report = r[0];
	*hold = h[1];
	return pid;
}

struct hl_result {
	unsigned long moved;      /* verified copies */
	unsigned long slowest_ms; /* the longest one took */
	unsigned long open_ms;    /* a new client after the attack */
};

struct hl_bystander {
	pid_t pid;
	int stop;                 /* closing it stops the bystander */
	int result;
};

/*
 * A client of another user that moves 256 KiB, verified, again and
 * again until hl_bystander_stop, then connects once more as a new
 * client and moves once more.
 */
static inline void hl_bystander_start(struct hl_bystander *b,
				      const char *socket)
{
	int stop[2], result[2];

	T_ASSERT(pipe(stop) == 0 && pipe(result) == 0, "pipe");
	fflush(NULL);
	b->pid = tl_fork();
	T_ASSERT(b->pid >= 0, "fork");
	if (b->pid == 0) {
		struct hl_result r = { 0 };
		struct xfer_ctx *ctx;
		struct tl_buf src, dst;

		close(stop[1]);
		close(result[0]);
		hl_become(HL_BYSTANDER_UID);
		T_OK(xfer_open(socket, &ctx));
		tl_buf_alloc(ctx, TL_HOST, 256 * 1024, &src);
		tl_buf_alloc(ctx, TL_MALLOC, 256 * 1024, &dst);
		for (;;) {
			struct pollfd p = { .fd = stop[0], .events = POLLIN };
			if (poll(&p, 1, 0) > 0)
				break;
			uint64_t t0 = tl_now_ms();
			hl_move(ctx, &src, &dst, ++r.moved);
			uint64_t ms = tl_now_ms() - t0;
			r.slowest_ms = ms > r.slowest_ms ? ms : r.slowest_ms;
			usleep(2000);
		}
		tl_buf_free(ctx, &src);
		tl_buf_free(ctx, &dst);
		xfer_close(ctx);
		uint64_t t0 = tl_now_ms();
		T_OK(xfer_open(socket, &ctx));
		r.open_ms = tl_now_ms() - t0;
		tl_buf_alloc(ctx, TL_HOST, 256 * 1024, &src);
		tl_buf_alloc(ctx, TL_MALLOC, 256 * 1024, &dst);
		hl_move(ctx, &src, &dst, 999);
		xfer_close(ctx);
		tl_write_full(result[1], &r, sizeof(r));
		_exit(0);
	}
	close(stop[0]);
	close(result[1]);
	b->stop = stop[1];
	b->result = result[0];
}

/* Stop it; it must have moved bytes all along, none slower than
 * slowest_ms, and connected again afterwards. */
static inline void hl_bystander_stop(struct hl_bystander *b,
				     unsigned long slowest_ms)
{
	struct hl_result r;

	close(b->stop);
	tl_read_full(b->result, &r, sizeof(r));
	close(b->result);
	T_ASSERT(tl_child_wait(b->pid, 30000) == 0, "the bystander failed");
	printf("bystander: %lu verified copies, the slowest %lu ms; a new "
	       "client after the attack connected in %lu ms\n", r.moved,
	       r.slowest_ms, r.open_ms);
	T_ASSERT(r.moved >= 10, "the bystander moved only %lu times",
		 r.moved);
	T_ASSERT(r.slowest_ms <= slowest_ms, "a bystander's copy took %lu "
		 "ms", r.slowest_ms);
}

/* `xferctl status` at socket as root: milliseconds it took, or -1 when
 * it failed or took over 10 s. */
static inline long hl_xferctl_ms(const char *socket)
{
	const char *bin = getenv("XFERCTL_BIN");
	char cmd[600];

	if (!bin)
		return 0;
	snprintf(cmd, sizeof(cmd), "timeout 10 %s -s %s status >/dev/null "
		 "2>&1", bin, socket);
	uint64_t t0 = tl_now_ms();
	int rc = system(cmd);
	long ms = (long)(tl_now_ms() - t0);
	return rc == 0 ? ms : -1;
}

/* A connection that asked xferctl's status: the socket, or -errno. */
static inline int hl_ctl_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* "XFRT", then CtlMsg { proto_version = 1, status = {} }. */
	static const unsigned char status[] = { 'X', 'F', 'R', 'T', 0x08, 0x01,
						0x52, 0x00 };
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) ||
	    send(s, status, sizeof(status), 0) != (ssize_t)sizeof(status)) {
		int err = -errno;
		close(s);
		return err;
	}
	return s;
}

/* Its answer: 1 a StatusReply, 0 an Error, -1 closed or nothing in
 * timeout_ms. */
static inline int hl_ctl_answer(int s, int timeout_ms)
{
	unsigned char buf[65536];
	struct pollfd p = { .fd = s, .events = POLLIN };

	if (poll(&p, 1, timeout_ms) <= 0)
		return -1;
	ssize_t n = recv(s, buf, sizeof(buf), 0);
	if (n < 8 || memcmp(buf, "XFRT", 4))
		return -1;
	/* proto_version (08 v), then the body's key: 11 status_reply
	 * (0x5a) or 16 error (0x82 0x01). */
	size_t at = 4;
	if (buf[at] == 0x08)
		at += 2;
	return buf[at] == 0x5a ? 1 : 0;
}

#endif /* XFER_HOSTILE_H */
