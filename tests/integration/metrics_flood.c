/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics_flood.c - the metrics port cannot lock local clients out.
 *
 * A private xferd serves metrics on loopback with the file-descriptor
 * limit of a default service (1024) and its default metrics bounds.  A
 * bystander client keeps doing verified transfers the whole time (bytes
 * checked, each within 2 s).  Then:
 *
 *  1. flood: FLOOD connections to the metrics port, held open.  While
 *     they are: xferd holds at most metrics_max_connections (32) of
 *     them (its fd count stays within baseline + 32 + slack), a new
 *     client connects and moves verified bytes, `xferctl status`
 *     answers, and a scrape is still answered;
 *  2. slowloris: SLOW connections each sending one byte of an endless
 *     request head every second: each is closed by the absolute
 *     deadline (metrics_timeout_ms, 5 s), not kept alive by the bytes;
 *  3. after both, the bystander's count went on rising, xferd's fds are
 *     back to the baseline, and xferd stops cleanly.
 *
 * Env: XFERD_BIN, XFERCTL_BIN.  Exit 0 pass, 1 fail, 77 skip.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#define FLOOD       3000   /* connections of the flood, > the fd limit */
#define XFERD_FDS   1024   /* xferd's RLIMIT_NOFILE: a default service's */
#define MAX_CONNS   32     /* metrics_max_connections' default */
#define SLOW        20     /* slowloris connections */
#define DEADLINE_MS 5000   /* metrics_timeout_ms' default */
#define SLOW_LIMIT_MS 15000 /* all slow ones closed by then (3x slack) */
#define FD_SLACK    16
#define BYST_LEN    (256u << 10)
#define BYST_MAX_MS 2000   /* a bystander transfer takes at most this */

static uint16_t port;

/* A non-blocking connect to the metrics port (in progress or done). */
static int connect_nb(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* GET /metrics on a fresh connection within 10 s: true if a 200 came. */
static bool scrape_ok(void)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n"
				  "Connection: close\r\n\r\n";
	char buf[64] = "";
	int fd = connect_nb();
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	size_t n = 0;
	uint64_t end = tl_now_ms() + 10000;

	if (fd < 0 || poll(&p, 1, 10000) != 1 ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while (n < 12 && tl_now_ms() < end) {
		p.events = POLLIN;
		if (poll(&p, 1, 1000) != 1)
			continue;
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	return n >= 12 && !strncmp(buf, "HTTP/1.1 200", 12);
}

/* --- the bystander: verified transfers until told to stop --- */

struct byst_result {
	uint64_t done, max_ms;
};

static void bystander(const char *sock, int stop_fd, int out_fd)
{
	struct xfer_ctx *ctx;
	struct tl_buf a, b;
	struct xfer_remote *rb;
	uint8_t tok[XFER_TOKEN_MAX];
	struct byst_result r = { 0 };
	struct pollfd p = { .fd = stop_fd, .events = POLLIN };

	T_OK(xfer_open(sock, &ctx));
	tl_buf_alloc(ctx, TL_HOST, BYST_LEN, &a);
	tl_buf_alloc(ctx, TL_HOST, BYST_LEN, &b);
	size_t tl = tl_export(&b, tok);
	T_OK(xfer_import(ctx, tok, tl, &rb));
	tl_write_full(out_fd, &r, sizeof(r));   /* ready */
	while (poll(&p, 1, 0) == 0) {
		uint64_t seed = r.done + 1, t0 = tl_now_ms();
		tl_fill(a.ptr, BYST_LEN, seed);
		struct xfer_sqe *sqe = xfer_get_sqe(ctx);
		T_ASSERT(sqe, "bystander: no SQE");
		xfer_prep_rw(sqe, XFER_OP_WRITE, a.handle, 0,
			     xfer_remote_handle(rb), 0, BYST_LEN, seed);
		struct xfer_cqe c = tl_submit_wait(ctx);
		uint64_t ms = tl_now_ms() - t0;
		T_ASSERT(c.result == BYST_LEN, "bystander transfer %llu: %lld",
			 (unsigned long long)seed, (long long)c.result);
		T_ASSERT(tl_check(b.ptr, BYST_LEN, seed) == 0,
			 "bystander transfer %llu: wrong bytes arrived",
			 (unsigned long long)seed);
		T_ASSERT(ms <= BYST_MAX_MS, "bystander transfer %llu took %llu ms",
			 (unsigned long long)seed, (unsigned long long)ms);
		if (ms > r.max_ms)
			r.max_ms = ms;
		r.done++;
		if (r.done % 64 == 0)
			tl_write_full(out_fd, &r, sizeof(r));
		usleep(2000);
	}
	tl_write_full(out_fd, &r, sizeof(r));
	T_OK(xfer_unimport(ctx, rb));
	tl_buf_free(ctx, &a);
	tl_buf_free(ctx, &b);
	xfer_close(ctx);
	exit(0);
}

/* The bystander's latest count (non-blocking: the last one it sent). */
static struct byst_result byst_latest(int fd, struct byst_result last)
{
	struct byst_result r;

	while (read(fd, &r, sizeof(r)) == (ssize_t)sizeof(r))
		last = r;
	return last;
}

/* A new client, now: connects and moves verified bytes within 10 s. */
static void new_client_works(const char *sock, const char *when)
{
	struct xfer_ctx *ctx;
	struct tl_buf a, b;
	struct xfer_remote *rb;
	uint8_t tok[XFER_TOKEN_MAX];
	uint64_t t0 = tl_now_ms();
	int rc = xfer_open(sock, &ctx);

	T_ASSERT(rc == 0, "%s: a new client cannot connect: %s (%llu ms)", when,
		 xfer_strerror(rc), (unsigned long long)(tl_now_ms() - t0));
	tl_buf_alloc(ctx, TL_HOST, 4096, &a);
	tl_buf_alloc(ctx, TL_HOST, 4096, &b);
	size_t tl = tl_export(&b, tok);
	T_OK(xfer_import(ctx, tok, tl, &rb));
	tl_fill(a.ptr, 4096, 777);
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);
	T_ASSERT(sqe, "no SQE");
	xfer_prep_rw(sqe, XFER_OP_WRITE, a.handle, 0, xfer_remote_handle(rb),
		     0, 4096, 1);
	T_ASSERT(tl_submit_wait(ctx).result == 4096, "%s: new client's write",
		 when);
	T_ASSERT(tl_check(b.ptr, 4096, 777) == 0, "%s: new client: wrong bytes",
		 when);
	T_OK(xfer_unimport(ctx, rb));
	tl_buf_free(ctx, &a);
	tl_buf_free(ctx, &b);
	xfer_close(ctx);
}

static void xferctl_status_works(const char *sock, const char *when)
{
	const char *ctl = getenv("XFERCTL_BIN");
	char cmd[512];

	if (!ctl)
		return;
	snprintf(cmd, sizeof(cmd), "timeout 10 %s -s %s status >/dev/null 2>&1",
		 ctl, sock);
	int st = system(cmd);
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		 "%s: xferctl status failed (status %d)", when, st);
}

int main(void)
{
	struct tl_daemon d;
	char listen[64];
	struct rlimit lim, old;
	int stop_p[2], res_p[2];
	static int flood[FLOOD];

	signal(SIGPIPE, SIG_IGN);
	port = tl_free_port();
	snprintf(listen, sizeof(listen), "metrics_listen=127.0.0.1:%u", port);
	const char *args[] = { listen, NULL };

	/* xferd gets a default service's descriptor limit; this test then
	 * takes the hard limit for itself (the flood needs more). */
	T_ASSERT(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit");
	T_ASSERT(old.rlim_max >= FLOOD + 256,
		 "RLIMIT_NOFILE hard limit %llu too small for the flood",
		 (unsigned long long)old.rlim_max);
	lim = (struct rlimit){ XFERD_FDS, old.rlim_max };
	T_ASSERT(setrlimit(RLIMIT_NOFILE, &lim) == 0, "setrlimit");
	tl_daemon_start(&d, args);
	lim.rlim_cur = old.rlim_max;
	T_ASSERT(setrlimit(RLIMIT_NOFILE, &lim) == 0, "setrlimit");

	T_ASSERT(pipe(stop_p) == 0 && pipe2(res_p, O_NONBLOCK) == 0, "pipe");
	pid_t byst = tl_fork();
	T_ASSERT(byst >= 0, "fork");
	if (byst == 0) {
		close(stop_p[1]);
		close(res_p[0]);
		fcntl(res_p[1], F_SETFL, 0);
		bystander(d.socket, stop_p[0], res_p[1]);
	}
	close(stop_p[0]);
	close(res_p[1]);
	struct byst_result br = { 0 };
	struct pollfd rp = { .fd = res_p[0], .events = POLLIN };
	T_ASSERT(poll(&rp, 1, 10000) == 1, "the bystander did not start");
	br = byst_latest(res_p[0], br);
	usleep(300000);
	int base_fds = tl_fd_count(d.pid);
	printf("xferd: %d fds with the bystander, fd limit %d\n", base_fds,
	       XFERD_FDS);

	/* --- 1. flood --- */
	int opened = 0;
	for (int i = 0; i < FLOOD; i++) {
		flood[i] = connect_nb();
		opened += flood[i] >= 0;
	}
	sleep(2);   /* let xferd accept what it will */
	int fds = tl_fd_count(d.pid);
	printf("flood: %d connections opened, xferd holds %d fds (baseline %d)\n",
	       opened, fds, base_fds);
	T_ASSERT(fds <= base_fds + MAX_CONNS + FD_SLACK,
		 "xferd holds %d fds during a flood of %d metrics connections "
		 "(baseline %d, cap %d)", fds, opened, base_fds, MAX_CONNS);
	new_client_works(d.socket, "during the flood");
	xferctl_status_works(d.socket, "during the flood");
	T_ASSERT(scrape_ok(), "no scrape answered during the flood");
	struct byst_result mid = byst_latest(res_p[0], br);
	for (int i = 0; i < FLOOD; i++)
		if (flood[i] >= 0)
			close(flood[i]);
	printf("flood: new client, xferctl status and a scrape served; "
	       "bystander %llu transfers so far (max %llu ms)\n",
	       (unsigned long long)mid.done, (unsigned long long)mid.max_ms);

	/* --- 2. slowloris --- */
	int slow[SLOW];
	uint64_t closed_at[SLOW] = { 0 }, t0 = tl_now_ms();
	for (int i = 0; i < SLOW; i++) {
		slow[i] = connect_nb();
		T_ASSERT(slow[i] >= 0, "slow connection %d", i);
	}
	/* Each connect done before its first byte (under load the
	 * backlog may still hold the flood's: wait for it, not a time). */
	for (int i = 0; i < SLOW; i++) {
		struct pollfd pw = { .fd = slow[i], .events = POLLOUT };
		T_ASSERT(poll(&pw, 1, 10000) == 1,
			 "slow connection %d: not connected in 10 s", i);
	}
	static const char head[] = "GET /metrics HTTP/1.1\r\nX-Slow: ";
	for (int i = 0; i < SLOW; i++)
		T_ASSERT(write(slow[i], head, sizeof(head) - 1) > 0,
			 "slow connection %d: %s", i, strerror(errno));
	int open_n = SLOW;
	while (open_n && tl_now_ms() - t0 < SLOW_LIMIT_MS + 2000) {
		for (int i = 0; i < SLOW; i++) {
			if (closed_at[i])
				continue;
			char c;
			ssize_t k = recv(slow[i], &c, 1, MSG_DONTWAIT);
			bool gone = k == 0 || (k < 0 && errno != EAGAIN);
			/* One more byte of the head: a timeout that restarts
			 * on every byte would never fire. */
			if (!gone && send(slow[i], "a", 1, MSG_NOSIGNAL) < 0)
				gone = true;
			if (gone) {
				closed_at[i] = tl_now_ms() - t0;
				open_n--;
			}
		}
		sleep(1);
	}
	uint64_t last = 0;
	for (int i = 0; i < SLOW; i++) {
		T_ASSERT(closed_at[i], "slow connection %d still open after %llu "
			 "ms of 1 byte/s (deadline %d ms)", i,
			 (unsigned long long)(tl_now_ms() - t0), DEADLINE_MS);
		T_ASSERT(closed_at[i] <= SLOW_LIMIT_MS,
			 "slow connection %d closed only after %llu ms", i,
			 (unsigned long long)closed_at[i]);
		if (closed_at[i] > last)
			last = closed_at[i];
		close(slow[i]);
	}
	printf("slowloris: %d connections at 1 byte/s all closed, the last "
	       "after %llu ms (deadline %d ms)\n", SLOW,
	       (unsigned long long)last, DEADLINE_MS);
	new_client_works(d.socket, "after the slowloris");
	xferctl_status_works(d.socket, "after the slowloris");

	/* --- 3. after --- */
	usleep(500000);
	struct byst_result before_end = byst_latest(res_p[0], mid);
	sleep(1);
	T_ASSERT(write(stop_p[1], "x", 1) == 1, "stop the bystander");
	T_ASSERT(tl_child_wait(byst, 30000) == 0, "the bystander failed");
	fcntl(res_p[0], F_SETFL, 0);
	struct byst_result fin = byst_latest(res_p[0], before_end);
	T_ASSERT(fin.done > mid.done, "the bystander stopped moving bytes "
		 "(%llu transfers at the flood, %llu at the end)",
		 (unsigned long long)mid.done, (unsigned long long)fin.done);
	fds = tl_fd_count(d.pid);
	T_ASSERT(fds <= base_fds, "xferd holds %d fds after the attacks "
		 "(baseline %d)", fds, base_fds);
	T_ASSERT(tl_daemon_stop(&d) == 0, "xferd did not stop cleanly");
	printf("ok: bystander %llu verified transfers (max %llu ms); xferd's "
	       "fds within %d + %d; slowloris closed by the deadline\n",
	       (unsigned long long)fin.done, (unsigned long long)fin.max_ms,
	       base_fds, MAX_CONNS);
	return 0;
}
