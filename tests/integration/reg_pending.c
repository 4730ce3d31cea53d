/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reg_pending.c - a registration in progress holds up nobody but its own
 * client, and a client that dies with one pending, or xferd stopping,
 * leaves nothing behind.
 *
 * A private xferd runs with the test hook XFERD_TEST_REG_DELAY_MS, which
 * makes every registration job wait DELAY_MS on the registration thread
 * (without NICs the real work is instant).  Then:
 *
 * 1. a child registers a 64 MiB memfd region; while that is pending,
 *    `xferctl status` answers (and counts no region for it yet), a new
 *    client connects, publishes and looks up a token, registers malloc'd
 *    memory and moves verified bytes, each in well under the delay.  The
 *    child's registration returns after the delay, and its region moves
 *    verified bytes;
 * 2. a child is SIGKILLed while its registration is pending: xferd drops
 *    it at once (it watches the socket for a hang-up), the job is
 *    cancelled and its memfd unmapped and closed: xferd's fd count and
 *    memfd mappings return to what they were, long before the delay;
 * 3. two children pending, the second queued behind the first: the
 *    second is killed and released at once, the first still completes;
 * 4. xferd stops (SIGTERM) with one registration running and one queued:
 *    it exits 0 promptly, and both clients get an error, not a hang.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define DELAY_MS   3000
#define QUICK_MS   1000   /* what "served while pending" must beat */
#define REG_LEN    (64u << 20)

static struct tl_daemon xd;
static const char *xferctl_bin;
static int fds_idle;   /* xferd with no client (nor xferctl) */

/* Mappings of clients' memfds in xferd (libxfer names them xfer-host). */
static int memfd_maps(void)
{
	char path[64], line[512];
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)xd.pid);
	FILE *f = fopen(path, "r");
	T_ASSERT(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "/memfd:xfer-host"))
			n++;
	fclose(f);
	return n;
}

/* `xferctl status --json`: the count under "key" (the first one in its
 * output); *ms how long it took. */
static unsigned xferctl_count(const char *key, uint64_t *ms)
{
	char cmd[512], out[4096];
	uint64_t t0 = tl_now_ms();

	snprintf(cmd, sizeof(cmd), "%s -s %s --json status", xferctl_bin,
		 xd.socket);
	FILE *p = popen(cmd, "r");
	T_ASSERT(p, "popen %s", cmd);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	int status = pclose(p);
	*ms = tl_now_ms() - t0;
	T_ASSERT(status == 0, "xferctl status exited %d: %s", status, out);
	char quoted[64];
	snprintf(quoted, sizeof(quoted), "\"%s\":", key);
	const char *r = strstr(out, quoted);
	T_ASSERT(r, "no %s in: %s", key, out);
	return (unsigned)strtoul(r + strlen(quoted), NULL, 10);
}

static void wait_released(int fds, int maps, uint64_t since, const char *when)
{
	uint64_t deadline = since + DELAY_MS / 2;
	int n, m;

	while ((n = tl_fd_count(xd.pid)) != fds || (m = memfd_maps()) != maps) {
		T_ASSERT(tl_now_ms() < deadline,
			 "%s: xferd has %d fds, %d memfd mappings; want %d, %d "
			 "(not released within half the delay)",
			 when, n, memfd_maps(), fds, maps);
		usleep(2000);
	}
	printf("%s: released in %llu ms\n", when,
	       (unsigned long long)(tl_now_ms() - since));
}

/* What a registering child reports: xfer_alloc_host's result, its time. */
struct reg_result {
	int32_t rc;
	uint32_t ms;
};

/*
 * Connect, say so (one byte), register len bytes of memfd and report.
 * With verify, then move bytes from the new region and check them.
 */
static pid_t start_registrant(int *from, size_t len, bool verify)
{
	int p[2];

	T_ASSERT(pipe2(p, O_CLOEXEC) == 0, "pipe");
	const int maps0 = memfd_maps();
	pid_t pid = tl_fork();
	if (pid) {
		close(p[1]);
		*from = p[0];
		uint8_t ready;
		tl_read_full(p[0], &ready, 1);
		/* xferd maps the memfd when the Reg arrives, then submits the
		 * job: from then on the registration is pending. */
		uint64_t deadline = tl_now_ms() + 2000;
		while (memfd_maps() == maps0) {
			T_ASSERT(tl_now_ms() < deadline,
				 "xferd did not map the new region");
			usleep(1000);
		}
		return pid;
	}
	close(p[0]);
	struct xfer_ctx *ctx;
	struct xfer_mem *m;
	T_OK(xfer_open(xd.socket, &ctx));
	uint8_t ready = 1;
	tl_write_full(p[1], &ready, 1);
	uint64_t t0 = tl_now_ms();
	struct reg_result res = { .rc = xfer_alloc_host(ctx, len, &m) };
	res.ms = (uint32_t)(tl_now_ms() - t0);
	tl_write_full(p[1], &res, sizeof(res));
	if (res.rc == 0 && verify) {
		struct tl_buf dst;
		uint8_t *src = xfer_mem_ptr(m);
		tl_fill(src + 3, 1 << 20, 99);
		tl_buf_alloc(ctx, TL_MALLOC, 2 << 20, &dst);
		struct xfer_sqe *sqe = xfer_get_sqe(ctx);
		xfer_prep_write(sqe, xfer_mem_handle(m), 3, dst.handle, 5,
				1 << 20, 1);
		struct xfer_cqe c = tl_submit_wait(ctx);
		T_ASSERT(c.result == 1 << 20, "child: write -> %lld (%s)",
			 (long long)c.result, xfer_strerror((int)c.result));
		T_ASSERT(!tl_check(dst.ptr + 5, 1 << 20, 99), "child: bytes");
	}
	exit(0);
}

static bool has_answered(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1;
}

static void served_while_pending(void)
{
	const int fds0 = fds_idle, maps0 = 0;
	uint64_t ms;
	int from;

	uint64_t pending_since = tl_now_ms();
	pid_t pid = start_registrant(&from, REG_LEN, true);

	/* Mapped on the main thread already, not in the table yet. */
	T_ASSERT(memfd_maps() == maps0 + 1, "the pending region is not mapped");
	unsigned regions = xferctl_count("regions", &ms);
	T_ASSERT(regions == 0, "xferctl counts %u regions, the pending one?",
		 regions);
	unsigned pending = xferctl_count("pending", &ms);
	T_ASSERT(pending == 1, "xferctl shows %u pending registrations, not 1",
		 pending);
	T_ASSERT(ms < QUICK_MS, "xferctl status took %llu ms",
		 (unsigned long long)ms);
	printf("pending: xferctl status answered in %llu ms\n",
	       (unsigned long long)ms);

	uint64_t t0 = tl_now_ms();
	struct xfer_ctx *other;
	T_OK(xfer_open(xd.socket, &other));
	struct tl_buf a, b;
	tl_buf_alloc(other, TL_MALLOC, 1 << 20, &a);
	tl_buf_alloc(other, TL_MALLOC, 1 << 20, &b);
	uint8_t tok[XFER_TOKEN_MAX], got[XFER_TOKEN_MAX];
	size_t tok_len = tl_export(&a, tok), got_len = sizeof(got);
	T_OK(xfer_publish(other, "regworker-test", tok, tok_len));
	T_OK(xfer_lookup(other, "regworker-test", got, &got_len));
	T_ASSERT(got_len == tok_len && !memcmp(got, tok, tok_len),
		 "lookup returned another token");
	tl_fill(a.ptr, a.len, 5);
	struct xfer_sqe *sqe = xfer_get_sqe(other);
	xfer_prep_write(sqe, a.handle, 0, b.handle, 0, a.len, 2);
	struct xfer_cqe c = tl_submit_wait(other);
	T_ASSERT(c.result == (int64_t)a.len, "write -> %lld",
		 (long long)c.result);
	T_ASSERT(!tl_check(b.ptr, b.len, 5), "other client's bytes");
	ms = tl_now_ms() - t0;
	T_ASSERT(ms < QUICK_MS, "another client's work took %llu ms",
		 (unsigned long long)ms);
	T_ASSERT(xferctl_count("regions", &ms) == 2, "the other client's 2 regions");
	T_ASSERT(memfd_maps() == maps0 + 1, "the pending region went");
	T_ASSERT(!has_answered(from) && tl_now_ms() < pending_since + DELAY_MS,
		 "the registration was not pending throughout");
	printf("pending: another client connected, published, looked up, "
	       "registered and moved bytes in %llu ms\n",
	       (unsigned long long)(tl_now_ms() - t0));

	struct reg_result res;
	tl_read_full(from, &res, sizeof(res));
	T_ASSERT(res.rc == 0, "registration -> %d (%s)", res.rc,
		 xfer_strerror(res.rc));
	T_ASSERT(res.ms >= DELAY_MS - 5, "registration took %u ms, not the "
		 "delay", res.ms);
	T_ASSERT(tl_child_wait(pid, 10000) == 0, "registrant failed");
	close(from);
	printf("the registration itself returned after %u ms\n", res.ms);

	T_OK(xfer_unpublish(other, "regworker-test"));
	tl_buf_free(other, &a);
	tl_buf_free(other, &b);
	xfer_close(other);
	wait_released(fds0, maps0, tl_now_ms(), "everyone gone");
}

static void killed_while_running(void)
{
	const int fds0 = fds_idle, maps0 = 0;
	int from;

	pid_t pid = start_registrant(&from, REG_LEN, false);
	T_ASSERT(memfd_maps() == maps0 + 1 && tl_fd_count(xd.pid) > fds0,
		 "the pending registration holds nothing");
	uint64_t t0 = tl_now_ms();
	kill(pid, SIGKILL);
	T_ASSERT(tl_child_wait(pid, 10000) == -SIGKILL, "child survived");
	close(from);
	wait_released(fds0, maps0, t0, "killed, registration running");
	uint64_t ms;
	T_ASSERT(xferctl_count("regions", &ms) == 0, "a region is left");
	/* xferctl's connection closes after it exits. */
	wait_released(fds0, maps0, tl_now_ms(), "xferctl gone");
}

static void killed_while_queued(void)
{
	const int fds0 = fds_idle, maps0 = 0;
	int from1, from2;

	pid_t first = start_registrant(&from1, REG_LEN, true);
	const int fds1 = tl_fd_count(xd.pid);
	pid_t second = start_registrant(&from2, REG_LEN, false);
	T_ASSERT(memfd_maps() == maps0 + 2, "two pending regions mapped");
	uint64_t t0 = tl_now_ms();
	kill(second, SIGKILL);
	T_ASSERT(tl_child_wait(second, 10000) == -SIGKILL, "child survived");
	close(from2);
	wait_released(fds1, maps0 + 1, t0, "killed, registration queued");
	T_ASSERT(!has_answered(from1), "the first one is no longer pending");

	struct reg_result res;
	tl_read_full(from1, &res, sizeof(res));
	T_ASSERT(res.rc == 0 && res.ms >= DELAY_MS - 5,
		 "the first registration -> %d after %u ms", res.rc, res.ms);
	T_ASSERT(tl_child_wait(first, 10000) == 0, "first registrant failed");
	close(from1);
	wait_released(fds0, maps0, tl_now_ms(), "first one gone too");
}

static void stopped_while_pending(void)
{
	int from1, from2;
	struct reg_result res;

	pid_t first = start_registrant(&from1, REG_LEN, false);
	pid_t second = start_registrant(&from2, REG_LEN, false);
	uint64_t t0 = tl_now_ms();
	int status = tl_daemon_stop_within(&xd, DELAY_MS / 2);
	T_ASSERT(status == 0, "xferd exited with %d", status);
	printf("stopped with 2 registrations pending in %llu ms\n",
	       (unsigned long long)(tl_now_ms() - t0));
	tl_read_full(from1, &res, sizeof(res));
	T_ASSERT(res.rc < 0, "running registration -> %d at shutdown", res.rc);
	tl_read_full(from2, &res, sizeof(res));
	T_ASSERT(res.rc < 0, "queued registration -> %d at shutdown", res.rc);
	T_ASSERT(tl_child_wait(first, 10000) == 0, "first registrant");
	T_ASSERT(tl_child_wait(second, 10000) == 0, "second registrant");
	close(from1);
	close(from2);
}

int main(void)
{
	xferctl_bin = getenv("XFERCTL_BIN");
	if (!xferctl_bin) {
		printf("skip: XFERCTL_BIN is not set (run through make check)\n");
		return TL_SKIP;
	}
	char delay[16];
	snprintf(delay, sizeof(delay), "%d", DELAY_MS);
	setenv("XFERD_TEST_REG_DELAY_MS", delay, 1);
	tl_daemon_start(&xd, NULL);
	unsetenv("XFERD_TEST_REG_DELAY_MS");
	fds_idle = tl_fd_count(xd.pid);
	T_ASSERT(memfd_maps() == 0, "memfd mappings before any client");

	served_while_pending();
	killed_while_running();
	killed_while_queued();
	stopped_while_pending();
	return 0;
}
