/* SPDX-License-Identifier: Apache-2.0 */
/*
 * limits.c - xferd's per-client and per-user limits (xferd.conf(5),
 * daemon/quota.h), each against a private xferd configured low:
 *
 *  - 3000 connections that never say anything are all closed after
 *    handshake_timeout_ms, and xferd's open fds return to what they were;
 *  - max_pending_per_uid: past it, silent connections are closed at once,
 *    those within it stay until the deadline, and a real client connects
 *    again once they are gone;
 *  - out of fds (RLIMIT_NOFILE 40), xferd pauses accepting and serves
 *    60 connections from the backlog in turn;
 *  - max_connections_per_uid (-EMFILE) and max_clients (-EUSERS) at
 *    xfer_open, with room again after a close;
 *  - max_regions (-ENOSPC), max_client_bytes (-EDQUOT, memfd memory,
 *    which xferd maps; malloc'd memory, reached with CMA, is not
 *    counted), max_region_bytes (-EFBIG), max_imports
 *    (-ETOOMANYREFS) and max_names (-EMLINK): the request past the limit
 *    fails with that code, xfer_strerror names the key, the client keeps
 *    what it had (its bytes still move), room comes back after a free,
 *    and another client of the same xferd registers and moves verified
 *    bytes meanwhile;
 *  - max_inflight: a linked batch of 512 writes to another xferd never
 *    has more than that many operations out (xferctl), and completes;
 *  - xferctl status and clients still answer while every limit is hit.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "testlib.h"

#define SILENT_CONNS 3000

/* A connection to path that will never send anything. */
static int silent_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	T_ASSERT(s >= 0, "socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	/* Blocking: a full backlog makes connect wait, not fail. */
	T_ASSERT(connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		 "connect: %s", strerror(errno));
	return s;
}

/* Wait until xferd has closed every one of fds (recv gives 0) or
 * timeout_ms passed; returns how many it closed.  Closed ones are
 * closed here too and set to -1. */
static unsigned wait_closed(int *fds, unsigned n, unsigned want,
			    int timeout_ms)
{
	uint64_t end = tl_now_ms() + (uint64_t)timeout_ms;
	unsigned closed = 0;
	struct pollfd *pfd = calloc(n, sizeof(*pfd));

	T_ASSERT(pfd, "calloc");
	for (unsigned i = 0; i < n; i++)
		closed += fds[i] < 0;
	while (closed < want && tl_now_ms() < end) {
		for (unsigned i = 0; i < n; i++)
			pfd[i] = (struct pollfd){ .fd = fds[i],
						  .events = POLLIN };
		if (poll(pfd, n, 100) <= 0)
			continue;
		for (unsigned i = 0; i < n; i++) {
			char b;
			if (fds[i] < 0 || !pfd[i].revents)
				continue;
			ssize_t r = recv(fds[i], &b, 1, MSG_DONTWAIT);
			/* xferd never answers a silent connection. */
			T_ASSERT(r <= 0, "xferd sent %zd bytes to a silent "
				 "connection", r);
			if (r < 0 && errno == EAGAIN)
				continue;
			close(fds[i]);
			fds[i] = -1;
			closed++;
		}
	}
	free(pfd);
	return closed;
}

/* Poll until pid has at most `want` fds (10 s); returns the last count. */
static int wait_fds(pid_t pid, int want)
{
	int n = tl_fd_count(pid);

	for (int i = 0; i < 200 && n > want; i++) {
		usleep(50000);
		n = tl_fd_count(pid);
	}
	return n;
}

/* A client gets in again (once xferd has seen the silent ones go, 5 s at
 * most), and xferd stops cleanly. */
static void serves_then_stops(struct tl_daemon *xd)
{
	struct xfer_ctx *ctx;
	int rc = -1;

	for (int i = 0; i < 100 && rc; i++) {
		rc = xfer_open(xd->socket, &ctx);
		if (rc)
			usleep(50000);
	}
	T_OK(rc);
	xfer_close(ctx);
	T_ASSERT(tl_daemon_stop(xd) == 0, "xferd did not exit cleanly");
}

static void silent_flood(void)
{
	struct rlimit rl;
	unsigned n = SILENT_CONNS;

	/* Room for the connections on both sides (xferd inherits it). */
	T_ASSERT(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_cur < n + 200) {
		rl.rlim_cur = rl.rlim_max < n + 200 ? rl.rlim_max : n + 200;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < n + 200) {
		n = (unsigned)rl.rlim_cur - 200;
		printf("note: RLIMIT_NOFILE %llu: %u silent connections\n",
		       (unsigned long long)rl.rlim_cur, n);
	}

	struct tl_daemon xd;
	/* A deadline long against the time 3000 connects take here (well
	 * under a second), short against the test's. */
	const char *args[] = { "handshake_timeout_ms=4000",
			       "max_pending_per_uid=8192",
			       "listen_backlog=4096", NULL };
	tl_daemon_start(&xd, args);
	int base = tl_fd_count(xd.pid), peak = base;
	int *fds = malloc(n * sizeof(*fds));

	T_ASSERT(fds, "malloc");
	for (unsigned i = 0; i < n; i++) {
		fds[i] = silent_connect(xd.socket);
		if (i % 500 == 499) {
			int now = tl_fd_count(xd.pid);
			peak = now > peak ? now : peak;
		}
	}
	/* connect() returns once the kernel queued the connection: watch
	 * xferd take them from the backlog. */
	int now = tl_fd_count(xd.pid);
	for (int i = 0; i < 100 && now < base + (int)n; i++) {
		peak = now > peak ? now : peak;
		usleep(20000);
		now = tl_fd_count(xd.pid);
	}
	peak = now > peak ? now : peak;
	printf("xferd fds: %d before, %d with %u silent connections\n", base,
	       peak, n);
	/* They were held (pending), not refused. */
	T_ASSERT(peak >= base + (int)n / 2, "xferd held %d of %u silent "
		 "connections", peak - base, n);
	unsigned closed = wait_closed(fds, n, n, 30000);
	T_ASSERT(closed == n, "xferd closed %u of %u silent connections",
		 closed, n);
	now = wait_fds(xd.pid, base);
	printf("xferd fds: %d after the deadline\n", now);
	T_ASSERT(now == base, "xferd has %d fds, %d before the flood", now,
		 base);
	free(fds);
	serves_then_stops(&xd);
}

static void pending_limit(void)
{
	struct tl_daemon xd;
	const char *args[] = { "handshake_timeout_ms=600000",
			       "max_pending_per_uid=16", NULL };
	int fds[40];

	tl_daemon_start(&xd, args);
	for (unsigned i = 0; i < 40; i++)
		fds[i] = silent_connect(xd.socket);
	/* The 24 over the limit are closed at once; 16 wait for a deadline
	 * ten minutes away. */
	unsigned closed = wait_closed(fds, 40, 24, 10000);
	T_ASSERT(closed == 24, "%u of 40 silent connections closed, "
		 "not the 24 over max_pending_per_uid", closed);
	T_ASSERT(wait_closed(fds, 40, 25, 300) == 24,
		 "a connection within max_pending_per_uid was closed");
	/* The first 16 are the ones kept: a new one would be refused too,
	 * so a client must wait until they go. */
	for (unsigned i = 0; i < 40; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	serves_then_stops(&xd);
}

/* rc must be err and xfer_strerror(err) must name key. */
static void expect_limit(int rc, int err, const char *key, const char *what)
{
	T_ASSERT(rc == err, "%s -> %d (%s), expected %d", what, rc,
		 xfer_strerror(rc), err);
	T_ASSERT(strstr(xfer_strerror(rc), key),
		 "xfer_strerror(%d) = '%s' does not name %s", rc,
		 xfer_strerror(rc), key);
}

static void xferctl_answers(const char *socket)
{
	const char *bin = getenv("XFERCTL_BIN");
	char cmd[512];

	if (!bin)
		return;
	snprintf(cmd, sizeof(cmd), "%s -s %s status >/dev/null && "
		 "%s -s %s clients | grep -q limits", bin, socket, bin,
		 socket);
	T_ASSERT(system(cmd) == 0, "xferctl does not answer at the limits");
}

static void connection_limits(void)
{
	struct tl_daemon xd;
	const char *args[] = { "max_connections_per_uid=3", NULL };
	struct xfer_ctx *c[4];

	tl_daemon_start(&xd, args);
	for (int i = 0; i < 3; i++)
		T_OK(xfer_open(xd.socket, &c[i]));
	expect_limit(xfer_open(xd.socket, &c[3]), -EMFILE,
		     "max_connections_per_uid", "4th xfer_open of one uid");
	xferctl_answers(xd.socket);
	xfer_close(c[0]);
	/* The close reaches xferd asynchronously: room comes with it. */
	int rc = -EMFILE;
	for (int i = 0; i < 100 && rc == -EMFILE; i++) {
		rc = xfer_open(xd.socket, &c[0]);
		if (rc == -EMFILE)
			usleep(20000);
	}
	T_OK(rc);
	for (int i = 0; i < 3; i++)
		xfer_close(c[i]);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not exit cleanly");

	const char *args2[] = { "max_clients=2", NULL };
	tl_daemon_start(&xd, args2);
	T_OK(xfer_open(xd.socket, &c[0]));
	T_OK(xfer_open(xd.socket, &c[1]));
	expect_limit(xfer_open(xd.socket, &c[2]), -EUSERS, "max_clients",
		     "3rd client");
	xfer_close(c[0]);
	xfer_close(c[1]);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not exit cleanly");
}

/* One verified copy src -> dst through ctx (both its regions). */
static void moves(struct xfer_ctx *ctx, struct tl_buf *src, struct tl_buf *dst,
		  uint64_t seed, const char *who)
{
	size_t len = src->len < dst->len ? src->len : dst->len;
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);

	tl_fill(src->ptr, len, seed);
	memset(dst->ptr, 0, len);
	T_ASSERT(sqe, "%s: no SQE", who);
	xfer_prep_write(sqe, src->handle, 0, dst->handle, 0, len, seed);
	struct xfer_cqe cqe = tl_submit_wait(ctx);
	T_ASSERT(cqe.result == (int64_t)len, "%s: copy -> %lld (%s)", who,
		 (long long)cqe.result, xfer_strerror((int)cqe.result));
	T_ASSERT(!tl_check(dst->ptr, len, seed), "%s: bytes differ", who);
}

static void region_limits(void)
{
	struct tl_daemon xd;
	const char *args[] = { "max_regions=4", "max_client_bytes=1M",
			       "max_region_bytes=768K", "max_imports=2",
			       "max_names=3", NULL };
	struct xfer_ctx *a, *b, *other;
	struct tl_buf r[4], big, other_src, other_dst;
	struct xfer_mem *m;
	struct xfer_remote *imp[3];
	uint8_t tok[XFER_TOKEN_MAX];

	tl_daemon_start(&xd, args);
	T_OK(xfer_open(xd.socket, &a));
	T_OK(xfer_open(xd.socket, &b));
	T_OK(xfer_open(xd.socket, &other));

	/* Region count: 4 of 64 KiB, the 5th of either kind refused. */
	for (int i = 0; i < 4; i++)
		tl_buf_alloc(a, i % 2 ? TL_MALLOC : TL_HOST, 64 * 1024, &r[i]);
	expect_limit(xfer_alloc_host(a, 4096, &m), -ENOSPC, "max_regions",
		     "5th region (memfd)");
	void *p = malloc(4096);
	expect_limit(xfer_reg(a, p, 4096, &m), -ENOSPC, "max_regions",
		     "5th region (malloc)");
	moves(a, &r[0], &r[1], 1, "a at max_regions");

	/* Host bytes: 768K + 256K = 1M of memfd fit, a page more does
	 * not; malloc'd memory is not mapped by xferd and not counted. */
	T_ASSERT(xfer_alloc_host(b, 1024 * 1024, &m) == -EFBIG,
		 "a 1 MiB region past max_region_bytes=768K");
	tl_buf_alloc(b, TL_HOST, 768 * 1024, &big);
	struct tl_buf q1, q2;
	tl_buf_alloc(b, TL_MALLOC, 256 * 1024, &q1);
	tl_buf_alloc(b, TL_HOST, 256 * 1024, &q2);
	expect_limit(xfer_alloc_host(b, 4096, &m), -EDQUOT,
		     "max_client_bytes", "a page past max_client_bytes");
	T_OK(xfer_reg(b, p, 4096, &m));
	T_OK(xfer_dereg(b, m));
	expect_limit(-EFBIG, -EFBIG, "max_region_bytes", "strerror");
	moves(b, &big, &q1, 2, "b at max_client_bytes");

	/* Another client is not affected by either. */
	tl_buf_alloc(other, TL_HOST, 512 * 1024, &other_src);
	tl_buf_alloc(other, TL_MALLOC, 512 * 1024, &other_dst);
	moves(other, &other_src, &other_dst, 3, "another client");

	/* Imports: two, the third refused; room after an unimport. */
	size_t tl = tl_export(&other_dst, tok);
	T_OK(xfer_import(a, tok, tl, &imp[0]));
	T_OK(xfer_import(a, tok, tl, &imp[1]));
	expect_limit(xfer_import(a, tok, tl, &imp[2]), -ETOOMANYREFS,
		     "max_imports", "3rd import");
	/* The imports still work at the limit: a's bytes into other's. */
	struct xfer_sqe *sqe = xfer_get_sqe(a);
	tl_fill(r[0].ptr, 64 * 1024, 4);
	xfer_prep_write(sqe, r[0].handle, 0, xfer_remote_handle(imp[1]),
			4096, 64 * 1024, 4);
	struct xfer_cqe cqe = tl_submit_wait(a);
	T_ASSERT(cqe.result == 64 * 1024, "write to an import at "
		 "max_imports -> %lld", (long long)cqe.result);
	T_ASSERT(!tl_check(other_dst.ptr + 4096, 64 * 1024, 4),
		 "bytes through the import");

	/* Names: three, the fourth refused, republishing is no new name. */
	T_OK(xfer_publish(a, "lim.0", tok, tl));
	T_OK(xfer_publish(a, "lim.1", tok, tl));
	T_OK(xfer_publish(a, "lim.2", tok, tl));
	expect_limit(xfer_publish(a, "lim.3", tok, tl), -EMLINK, "max_names",
		     "4th name");
	T_OK(xfer_publish(a, "lim.2", tok, tl));
	/* The limit is per client. */
	T_OK(xfer_publish(b, "lim.b", tok, tl));

	/* Every limit hit at once: xferctl still answers. */
	xferctl_answers(xd.socket);

	/* Room again after giving back. */
	tl_buf_free(a, &r[3]);
	T_OK(xfer_alloc_host(a, 4096, &m));
	T_OK(xfer_free_host(a, m));
	T_OK(xfer_unimport(a, imp[0]));
	T_OK(xfer_import(a, tok, tl, &imp[2]));
	T_OK(xfer_unpublish(a, "lim.0"));
	T_OK(xfer_publish(a, "lim.3", tok, tl));
	tl_buf_free(b, &q2);
	T_OK(xfer_reg(b, p, 4096, &m));
	T_OK(xfer_dereg(b, m));

	T_OK(xfer_unimport(a, imp[1]));
	T_OK(xfer_unimport(a, imp[2]));
	for (int i = 0; i < 3; i++)
		tl_buf_free(a, &r[i]);
	tl_buf_free(b, &big);
	tl_buf_free(b, &q1);
	tl_buf_free(other, &other_src);
	tl_buf_free(other, &other_dst);
	xfer_close(a);
	xfer_close(b);
	xfer_close(other);
	free(p);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not exit cleanly");
}

/*
 * xferd out of fds: it stops accepting for a moment instead of spinning
 * on the listening socket, the backlog holds the rest, and every
 * connection is served (here: closed at its deadline) in turn.
 */
static void out_of_fds(void)
{
	struct tl_daemon xd;
	const char *args[] = { "handshake_timeout_ms=300",
			       "max_pending_per_uid=1000", NULL };
	struct rlimit saved, low;
	int fds[60];

	/* xferd alone gets 40 fds: it starts with about 15. */
	T_ASSERT(getrlimit(RLIMIT_NOFILE, &saved) == 0, "getrlimit");
	low = saved;
	low.rlim_cur = 40;
	T_ASSERT(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
	tl_daemon_start(&xd, args);
	T_ASSERT(setrlimit(RLIMIT_NOFILE, &saved) == 0, "setrlimit");

	for (unsigned i = 0; i < 60; i++)
		fds[i] = silent_connect(xd.socket);
	unsigned closed = wait_closed(fds, 60, 60, 30000);
	T_ASSERT(closed == 60, "xferd closed %u of 60 connections while out "
		 "of fds", closed);
	serves_then_stops(&xd);
}

/* "ops_in_flight" of `xferctl status --json` at socket. */
static long ops_in_flight(const char *socket)
{
	char cmd[512], out[8192];
	const char *bin = getenv("XFERCTL_BIN");
	size_t n;

	snprintf(cmd, sizeof(cmd), "%s -s %s --json status", bin, socket);
	FILE *p = popen(cmd, "r");
	T_ASSERT(p, "popen");
	n = fread(out, 1, sizeof(out) - 1, p);
	pclose(p);
	out[n] = '\0';
	const char *at = strstr(out, "\"ops_in_flight\"");
	T_ASSERT(at, "no ops_in_flight in: %s", out);
	return strtol(strchr(at, ':') + 1, NULL, 10);
}

/*
 * max_inflight: one linked batch of 512 writes to another xferd (over
 * TCP on loopback) from a client of an xferd with max_inflight=8.  The
 * batch completes with every byte in place, and xferctl never sees more
 * than 8 operations out while it runs.
 */
static void inflight_limit(void)
{
	struct tl_daemon a, b;
	char listen_b[64], peer_b[64];
	/* b is a configured peer of a: without a cluster key xferd dials
	 * only those. */
	const char *args_a[] = { "max_inflight=8", peer_b, NULL };
	const char *args_b[] = { listen_b, NULL };
	const enum tl_kind kinds[] = { TL_HOST };
	const size_t lens[] = { 4u << 20 };
	const unsigned n = 512, chunk = (4u << 20) / 512;
	struct tl_owner owner;
	struct xfer_ctx *ctx;
	struct xfer_remote *rem;
	struct tl_buf src;

	if (!getenv("XFERCTL_BIN"))
		return;
	uint16_t port_b = tl_free_port();
	snprintf(listen_b, sizeof(listen_b), "listen=127.0.0.1:%u", port_b);
	snprintf(peer_b, sizeof(peer_b), "peer=127.0.0.1:%u", port_b);
	tl_daemon_start(&b, args_b);
	tl_daemon_start(&a, args_a);
	tl_owner_start(&owner, b.socket, kinds, lens, 1);
	T_OK(xfer_open(a.socket, &ctx));
	tl_buf_alloc(ctx, TL_HOST, 4u << 20, &src);
	T_OK(xfer_import(ctx, owner.token[0], owner.token_len[0], &rem));

	long most = 0;
	for (int round = 0; round < 3; round++) {
		tl_fill(src.ptr, src.len, 500 + round);
		for (unsigned i = 0; i < n; i++) {
			struct xfer_sqe *sqe = xfer_get_sqe(ctx);
			T_ASSERT(sqe, "no SQE for %u", i);
			xfer_prep_write(sqe, src.handle, (uint64_t)i * chunk,
					xfer_remote_handle(rem),
					(uint64_t)i * chunk, chunk, 77);
			xfer_sqe_set_timeout(sqe, 30000);
			if (i + 1 < n)
				xfer_sqe_set_link(sqe);
		}
		T_ASSERT(xfer_submit(ctx) == (int)n, "submit");
		struct xfer_cqe *cqe;
		int rc;
		while ((rc = xfer_peek_cqe(ctx, &cqe)) == -EAGAIN) {
			long now = ops_in_flight(a.socket);
			most = now > most ? now : most;
		}
		T_OK(rc);
		T_ASSERT(cqe->user_data == 77 && cqe->result == (int64_t)src.len,
			 "batch -> %lld (%s)", (long long)cqe->result,
			 xfer_strerror((int)cqe->result));
		xfer_cq_advance(ctx, 1);
		T_ASSERT(!tl_owner_check(&owner, 0, 0, src.len, 500 + round, 0),
			 "round %d: the bytes on the other xferd", round);
		T_ASSERT(most <= 8, "%ld operations in flight with "
			 "max_inflight=8", most);
	}
	printf("max_inflight=8: 3 linked batches of %u writes, at most %ld "
	       "seen in flight\n", n, most);
	T_OK(xfer_unimport(ctx, rem));
	tl_buf_free(ctx, &src);
	xfer_close(ctx);
	tl_owner_stop(&owner);
	T_ASSERT(tl_daemon_stop(&a) == 0, "xferd a did not exit cleanly");
	T_ASSERT(tl_daemon_stop(&b) == 0, "xferd b did not exit cleanly");
}

int main(void)
{
	if (!getenv("XFERD_BIN")) {
		printf("skip: XFERD_BIN is not set (run through make check)\n");
		return TL_SKIP;
	}
	connection_limits();
	region_limits();
	inflight_limit();
	pending_limit();
	out_of_fds();
	silent_flood();
	printf("ok\n");
	return 0;
}
