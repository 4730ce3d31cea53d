/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shutdown.c - when xferd stops, clients learn it promptly and cleanly.
 *
 * A private xferd, three clients: a thread of this process blocked in
 * xfer_wait_cqe(-1), a child process polling with xfer_peek_cqe, and an
 * idle context with a region.  On SIGTERM, the blocked wait returns
 * -ENOTCONN (10 s at most: the deadline only catches a hang), the poller
 * sees -ENOTCONN, every control and ring call afterwards returns
 * -ENOTCONN, freeing memory still works, a connection that never sent
 * its hello is closed, xferd exits with status 0 (leaking nothing: under
 * ASan a leak would make it exit 1) and removes its socket.  Then a
 * second xferd is SIGKILLed under a blocked wait and a polling client:
 * both see -ENOTCONN too.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "testlib.h"

struct waiter {
	struct xfer_ctx *ctx;
	pthread_t thread;
	_Atomic pid_t tid;
	int done_efd;
	int rc;
};

static void *wait_forever(void *arg)
{
	struct waiter *w = arg;
	struct xfer_cqe *c;
	uint64_t one = 1;

	atomic_store(&w->tid, gettid());
	w->rc = xfer_wait_cqe(w->ctx, &c, -1);
	(void)!write(w->done_efd, &one, sizeof(one));
	return NULL;
}

/* 'S' once the thread sleeps (in poll, past the spin). */
static char thread_state(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	FILE *f = fopen(path, "re");

	T_ASSERT(f, "%s: %s", path, strerror(errno));
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	T_ASSERT(p && p[1] == ' ', "cannot parse %s", path);
	return p[2];
}

static void waiter_start(struct waiter *w, struct xfer_ctx *ctx)
{
	*w = (struct waiter){ .ctx = ctx };
	w->done_efd = eventfd(0, EFD_CLOEXEC);
	T_ASSERT(w->done_efd >= 0, "eventfd");
	T_ASSERT(pthread_create(&w->thread, NULL, wait_forever, w) == 0,
		 "pthread_create");
	uint64_t deadline = tl_now_ms() + 10000;
	pid_t tid;
	while (!(tid = atomic_load(&w->tid)) || thread_state(tid) != 'S') {
		T_ASSERT(tl_now_ms() < deadline, "the waiter never went to sleep");
		sched_yield();
	}
}

/* The blocked wait returns (10 s at most) with its result. */
static int waiter_result(struct waiter *w, const char *what)
{
	struct pollfd pfd = { .fd = w->done_efd, .events = POLLIN };

	T_ASSERT(poll(&pfd, 1, 10000) == 1,
		 "%s: xfer_wait_cqe(-1) still blocked after 10 s", what);
	pthread_join(w->thread, NULL);
	close(w->done_efd);
	return w->rc;
}

static void nop_roundtrip(struct xfer_ctx *ctx)
{
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);

	T_ASSERT(sqe, "no SQE");
	xfer_prep_nop(sqe, 5);
	struct xfer_cqe c = tl_submit_wait(ctx);
	T_ASSERT(c.user_data == 5 && c.result == 0, "NOP -> %lld",
		 (long long)c.result);
}

/* Every call that needs xferd says it is gone. */
static void expect_all_gone(struct xfer_ctx *ctx, const char *who)
{
	struct xfer_mem *mem;
	struct xfer_remote *rem;
	struct xfer_cqe *c;
	static char buf[4096];
	int rc;

	rc = xfer_peek_cqe(ctx, &c);
	T_ASSERT(rc == -ENOTCONN, "%s: peek -> %d", who, rc);
	rc = xfer_wait_cqe(ctx, &c, 0);
	T_ASSERT(rc == -ENOTCONN, "%s: wait(0) -> %d", who, rc);
	rc = xfer_wait_cqe(ctx, &c, 10000);
	T_ASSERT(rc == -ENOTCONN, "%s: wait(10 s) -> %d", who, rc);
	rc = xfer_alloc_host(ctx, 4096, &mem);
	T_ASSERT(rc == -ENOTCONN, "%s: alloc_host -> %d", who, rc);
	rc = xfer_reg(ctx, buf, sizeof(buf), &mem);
	T_ASSERT(rc == -ENOTCONN, "%s: reg -> %d", who, rc);
	rc = xfer_import(ctx, "XFTK", 4, &rem);
	T_ASSERT(rc == -ENOTCONN, "%s: import -> %d", who, rc);
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);
	T_ASSERT(sqe, "%s: no SQE", who);
	xfer_prep_nop(sqe, 6);
	rc = xfer_submit(ctx);
	T_ASSERT(rc == -ENOTCONN, "%s: submit -> %d", who, rc);
}

/* The poller: a child process that only ever peeks. */
static void poller_main(const char *socket, int out)
{
	struct xfer_ctx *ctx;
	struct xfer_cqe *c;
	int rc;

	T_OK(xfer_open(socket, &ctx));
	nop_roundtrip(ctx);
	uint8_t ready = 1;
	tl_write_full(out, &ready, 1);
	uint64_t deadline = tl_now_ms() + 20000;
	while ((rc = xfer_peek_cqe(ctx, &c)) == -EAGAIN) {
		T_ASSERT(tl_now_ms() < deadline, "poller: still -EAGAIN after 20 s");
		sched_yield();
	}
	T_ASSERT(rc == -ENOTCONN, "poller: peek -> %d (%s)", rc,
		 xfer_strerror(rc));
	expect_all_gone(ctx, "poller");
	xfer_close(ctx);
}

/* A connection xferd accepted that never says who it is. */
static int connect_silent(const struct tl_daemon *xd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int before = tl_fd_count(xd->pid);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0, "socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", xd->socket);
	T_ASSERT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		 "connect: %s", strerror(errno));
	uint64_t deadline = tl_now_ms() + 10000;
	while (tl_fd_count(xd->pid) == before) {
		T_ASSERT(tl_now_ms() < deadline, "xferd never accepted");
		sched_yield();
	}
	return fd;
}

static void expect_eof(int fd, const char *what)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char byte;

	T_ASSERT(poll(&pfd, 1, 10000) == 1, "%s: not closed within 10 s", what);
	T_ASSERT(recv(fd, &byte, 1, 0) == 0, "%s: not closed", what);
	close(fd);
}

static void graceful(void)
{
	struct tl_daemon xd;
	struct xfer_ctx *blocked, *idle, *after;
	struct tl_buf region;
	struct waiter w;
	int p[2];

	tl_daemon_start(&xd, NULL);
	T_ASSERT(pipe2(p, O_CLOEXEC) == 0, "pipe");
	pid_t poller = tl_fork();
	if (poller == 0) {
		close(p[0]);
		poller_main(xd.socket, p[1]);
		exit(0);
	}
	close(p[1]);
	T_OK(xfer_open(xd.socket, &blocked));
	T_OK(xfer_open(xd.socket, &idle));
	nop_roundtrip(blocked);
	nop_roundtrip(idle);
	tl_buf_alloc(idle, TL_HOST, 65536, &region);
	tl_fill(region.ptr, region.len, 11);
	uint8_t ready;
	tl_read_full(p[0], &ready, 1);
	int silent = connect_silent(&xd);
	waiter_start(&w, blocked);

	kill(xd.pid, SIGTERM);
	int rc = waiter_result(&w, "SIGTERM");
	T_ASSERT(rc == -ENOTCONN, "blocked wait -> %d (%s)", rc,
		 xfer_strerror(rc));
	expect_all_gone(blocked, "the blocked client");
	printf("SIGTERM: the blocked wait returned -ENOTCONN: ok\n");

	int status = tl_daemon_wait(&xd, 20000);
	T_ASSERT(status == 0, "xferd exited with %d", status);
	expect_eof(silent, "a connection that never sent a hello");
	T_ASSERT(tl_child_wait(poller, 30000) == 0, "the poller failed");
	close(p[0]);
	printf("SIGTERM: the polling client saw -ENOTCONN, xferd exited 0: ok\n");

	expect_all_gone(idle, "the idle client");
	/* Its memory is still the caller's to free, and still intact. */
	T_ASSERT(!tl_check(region.ptr, region.len, 11), "region bytes changed");
	T_OK(xfer_free_host(idle, region.mem));
	xfer_close(blocked);
	xfer_close(idle);
	rc = xfer_open(xd.socket, &after);
	T_ASSERT(rc == -ENOENT || rc == -ECONNREFUSED,
		 "open after the stop -> %d (%s)", rc, xfer_strerror(rc));
	printf("SIGTERM: control calls -ENOTCONN, socket gone: ok\n");
}

static void killed(void)
{
	struct tl_daemon xd;
	struct xfer_ctx *blocked;
	struct waiter w;

	tl_daemon_start(&xd, NULL);
	struct xfer_ctx *poller;

	T_OK(xfer_open(xd.socket, &blocked));
	T_OK(xfer_open(xd.socket, &poller));
	nop_roundtrip(blocked);
	waiter_start(&w, blocked);
	kill(xd.pid, SIGKILL);

	/* A crashed xferd sets no DEAD flag: a client that only polls must
	 * still notice, from the hung-up socket. */
	struct xfer_cqe *c;
	int prc;
	uint64_t deadline = tl_now_ms() + 10000;
	while ((prc = xfer_peek_cqe(poller, &c)) == -EAGAIN)
		T_ASSERT(tl_now_ms() < deadline,
			 "a polling client never noticed the killed xferd");
	T_ASSERT(prc == -ENOTCONN, "peek after SIGKILL -> %d (%s)", prc,
		 xfer_strerror(prc));
	xfer_close(poller);
	printf("SIGKILL: a polling client sees -ENOTCONN: ok\n");

	int rc = waiter_result(&w, "SIGKILL");
	T_ASSERT(rc == -ENOTCONN, "blocked wait -> %d (%s)", rc,
		 xfer_strerror(rc));
	expect_all_gone(blocked, "the client of a killed xferd");
	xfer_close(blocked);
	int status = tl_daemon_wait(&xd, 10000);
	T_ASSERT(status == -SIGKILL, "xferd ended with %d", status);
	printf("SIGKILL: the blocked wait returned -ENOTCONN: ok\n");
}

int main(void)
{
	graceful();
	killed();
	return 0;
}
