/* SPDX-License-Identifier: Apache-2.0 */
/*
 * testlib.c - helpers for the integration test programs.
 */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

/*
 * What a failing test must not leave behind: children it forked and
 * daemons it started.  The atexit handler runs only in the process that
 * registered them (a child that fails also runs it, and must not kill
 * its siblings).
 */
#define TL_MAX_CHILDREN 64
static struct {
	pid_t registrar;
	pid_t children[TL_MAX_CHILDREN];
	struct tl_daemon *daemons[8];
} cleanup;

static void cleanup_at_exit(void)
{
	if (getpid() != cleanup.registrar)
		return;
	for (unsigned i = 0; i < TL_MAX_CHILDREN; i++) {
		if (cleanup.children[i] <= 0)
			continue;
		kill(cleanup.children[i], SIGKILL);
		waitpid(cleanup.children[i], NULL, 0);
		cleanup.children[i] = 0;
	}
	for (unsigned i = 0; i < 8; i++) {
		struct tl_daemon *d = cleanup.daemons[i];
		if (!d)
			continue;
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
		unlink(d->socket);
		rmdir(d->dir);
		cleanup.daemons[i] = NULL;
	}
}

static void cleanup_init(void)
{
	if (cleanup.registrar == getpid())
		return;
	/* A child that starts helpers of its own cleans up after itself. */
	memset(&cleanup, 0, sizeof(cleanup));
	cleanup.registrar = getpid();
	atexit(cleanup_at_exit);
}

static void cleanup_add_child(pid_t pid)
{
	cleanup_init();
	for (unsigned i = 0; i < TL_MAX_CHILDREN; i++)
		if (cleanup.children[i] <= 0) {
			cleanup.children[i] = pid;
			return;
		}
}

static void cleanup_forget_child(pid_t pid)
{
	for (unsigned i = 0; i < TL_MAX_CHILDREN; i++)
		if (cleanup.children[i] == pid)
			cleanup.children[i] = 0;
}

const char *tl_socket(void)
{
	const char *s = getenv("XFERD_SOCKET");

	if (!s || !*s) {
		printf("skip: XFERD_SOCKET is not set (run through make check)\n");
		exit(TL_SKIP);
	}
	return s;
}

struct xfer_ctx *tl_open(void)
{
	struct xfer_ctx *ctx = NULL;

	T_OK(xfer_open(tl_socket(), &ctx));
	return ctx;
}

static uint8_t byte_at(uint64_t seed, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed * 0xbf58476d1ce4e5b9ull;
	x ^= x >> 31;
	return (uint8_t)(x ^ (x >> 17));
}

void tl_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = byte_at(seed, i);
}

size_t tl_check(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != byte_at(seed, i))
			return i + 1;
	return 0;
}

struct xfer_cqe tl_wait(struct xfer_ctx *ctx)
{
	struct xfer_cqe *c;
	int rc = xfer_wait_cqe(ctx, &c, 10000);

	T_ASSERT(rc == 0, "waiting for a CQE: %s", xfer_strerror(rc));
	struct xfer_cqe copy = *c;
	xfer_cq_advance(ctx, 1);
	return copy;
}

struct xfer_cqe tl_submit_wait(struct xfer_ctx *ctx)
{
	int n = xfer_submit(ctx);

	T_ASSERT(n >= 1, "xfer_submit -> %d", n);
	return tl_wait(ctx);
}

static int try_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (ok) {
		/*
		 * Hang up and wait until xferd has closed its end too, so
		 * that the probe is gone from xferd's fds when the caller
		 * starts counting them.
		 */
		char byte;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		shutdown(fd, SHUT_WR);
		if (poll(&pfd, 1, 5000) == 1)
			(void)!recv(fd, &byte, 1, 0);
	}
	close(fd);
	return ok;
}

void tl_daemon_start(struct tl_daemon *d, const char *const *extra_args)
{
	const char *bin = getenv("XFERD_BIN");
	const char *argv[64];
	int argc = 0;

	if (!bin) {
		printf("skip: XFERD_BIN is not set (run through make check)\n");
		exit(TL_SKIP);
	}
	snprintf(d->dir, sizeof(d->dir), "/tmp/xferd-tl.XXXXXX");
	T_ASSERT(mkdtemp(d->dir), "mkdtemp: %s", strerror(errno));
	snprintf(d->socket, sizeof(d->socket), "%s/xferd.sock", d->dir);
	argv[argc++] = bin;
	argv[argc++] = "-s";
	argv[argc++] = d->socket;
	/* Same-node tests: no TCP listener, so daemons never collide on
	 * the default port (a later "-o listen=..." overrides this). */
	argv[argc++] = "-o";
	argv[argc++] = "listen=off";
	for (int i = 0; extra_args && extra_args[i] && argc < 60; i++) {
		argv[argc++] = "-o";
		argv[argc++] = extra_args[i];
	}
	argv[argc] = NULL;
	cleanup_init();
	fflush(NULL);
	d->pid = fork();
	T_ASSERT(d->pid >= 0, "fork: %s", strerror(errno));
	if (d->pid == 0) {
		/* Stop with the test, even when it is killed. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (unsigned i = 0; i < 8; i++)
		if (!cleanup.daemons[i]) {
			cleanup.daemons[i] = d;
			break;
		}
	for (int i = 0; i < 200; i++) {
		if (try_connect(d->socket))
			return;
		T_ASSERT(waitpid(d->pid, NULL, WNOHANG) == 0,
			 "xferd at %s exited during start-up", d->socket);
		usleep(25000);
	}
	T_ASSERT(0, "xferd at %s did not start", d->socket);
}

static void daemon_forget(struct tl_daemon *d)
{
	for (unsigned i = 0; i < 8; i++)
		if (cleanup.daemons[i] == d)
			cleanup.daemons[i] = NULL;
	/* xferd removes its socket on a clean exit; not after SIGKILL. */
	unlink(d->socket);
	rmdir(d->dir);
}

int tl_daemon_wait(struct tl_daemon *d, int timeout_ms)
{
	int status = tl_child_wait(d->pid, timeout_ms);

	daemon_forget(d);
	return status;
}

int tl_daemon_stop_within(struct tl_daemon *d, int timeout_ms)
{
	kill(d->pid, SIGTERM);
	return tl_daemon_wait(d, timeout_ms);
}

int tl_daemon_stop(struct tl_daemon *d)
{
	return tl_daemon_stop_within(d, 20000);
}

int tl_fd_count(pid_t pid)
{
	char path[64];
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(path);
	T_ASSERT(dir, "opendir %s: %s", path, strerror(errno));
	for (struct dirent *e; (e = readdir(dir));)
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

uint64_t tl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void tl_fill_at(void *buf, size_t len, uint64_t seed, uint64_t pos)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = byte_at(seed, pos + i);
}

size_t tl_check_at(const void *buf, size_t len, uint64_t seed, uint64_t pos)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != byte_at(seed, pos + i))
			return i + 1;
	return 0;
}

/* --- registered memory --- */

void tl_buf_alloc(struct xfer_ctx *ctx, enum tl_kind kind, size_t len,
		  struct tl_buf *b)
{
	*b = (struct tl_buf){ .kind = kind, .len = len };
	if (kind == TL_HOST) {
		T_OK(xfer_alloc_host(ctx, len, &b->mem));
		b->ptr = xfer_mem_ptr(b->mem);
	} else {
		b->ptr = malloc(len);
		T_ASSERT(b->ptr, "malloc %zu", len);
		T_OK(xfer_reg(ctx, b->ptr, len, &b->mem));
		T_ASSERT(xfer_mem_ptr(b->mem) == b->ptr, "xfer_mem_ptr");
	}
	T_ASSERT(xfer_mem_len(b->mem) == len, "xfer_mem_len %zu != %zu",
		 xfer_mem_len(b->mem), len);
	b->handle = xfer_mem_handle(b->mem);
}

void tl_buf_free(struct xfer_ctx *ctx, struct tl_buf *b)
{
	if (!b->mem)
		return;
	if (b->kind == TL_HOST) {
		T_OK(xfer_free_host(ctx, b->mem));
	} else {
		T_OK(xfer_dereg(ctx, b->mem));
		free(b->ptr);
	}
	*b = (struct tl_buf){ 0 };
}

const char *tl_kind_name(enum tl_kind kind)
{
	return kind == TL_HOST ? "host" : "malloc";
}

unsigned tl_path_for(enum tl_kind a, enum tl_kind b)
{
	return a == TL_HOST && b == TL_HOST ? XFER_PATH_MEMCPY : XFER_PATH_CMA;
}

size_t tl_export(const struct tl_buf *b, void *tok)
{
	size_t len = XFER_TOKEN_MAX;

	T_OK(xfer_export(b->mem, 0, b->len, tok, &len));
	return len;
}

/* --- child processes and pipes --- */

uint16_t tl_free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0, "socket: %s", strerror(errno));
	T_ASSERT(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		 getsockname(fd, (struct sockaddr *)&sa, &len) == 0,
		 "bind: %s", strerror(errno));
	close(fd);
	return ntohs(sa.sin_port);
}

pid_t tl_fork(void)
{
	pid_t parent = getpid();

	cleanup_init();
	fflush(NULL);
	pid_t pid = fork();
	T_ASSERT(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* The parent may have died before the line above. */
		if (getppid() != parent)
			_exit(1);
		return 0;
	}
	cleanup_add_child(pid);
	return pid;
}

int tl_child_wait(pid_t pid, int timeout_ms)
{
	uint64_t deadline = tl_now_ms() + (uint64_t)timeout_ms;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		T_ASSERT(r >= 0, "waitpid %d: %s", (int)pid, strerror(errno));
		if (r == pid)
			break;
		if (tl_now_ms() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			cleanup_forget_child(pid);
			T_ASSERT(0, "process %d did not exit within %d ms",
				 (int)pid, timeout_ms);
		}
		usleep(1000);
	}
	cleanup_forget_child(pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

#define TL_PIPE_TIMEOUT_MS 60000

void tl_write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		T_ASSERT(n > 0, "pipe write: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

void tl_read_full(int fd, void *buf, size_t len)
{
	uint64_t deadline = tl_now_ms() + TL_PIPE_TIMEOUT_MS;
	uint8_t *p = buf;

	while (len) {
		uint64_t now = tl_now_ms();
		T_ASSERT(now < deadline, "pipe read: nothing for %d ms",
			 TL_PIPE_TIMEOUT_MS);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int rc = poll(&pfd, 1, (int)(deadline - now));
		if (rc < 0 && errno == EINTR)
			continue;
		T_ASSERT(rc >= 0, "poll: %s", strerror(errno));
		if (rc == 0)
			continue;
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		T_ASSERT(n != 0, "pipe read: the other process has gone");
		T_ASSERT(n > 0, "pipe read: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

void tl_send_blob(int fd, const void *buf, size_t len)
{
	uint32_t n = (uint32_t)len;

	tl_write_full(fd, &n, sizeof(n));
	tl_write_full(fd, buf, len);
}

size_t tl_recv_blob(int fd, void *buf, size_t max)
{
	uint32_t n;

	tl_read_full(fd, &n, sizeof(n));
	T_ASSERT(n <= max, "blob of %u bytes, room for %zu", n, max);
	tl_read_full(fd, buf, n);
	return n;
}

/* --- a region owner in another process --- */

enum owner_op {
	OWNER_FILL = 1,
	OWNER_CHECK,
	OWNER_EXPORT,
	OWNER_FREE,
	OWNER_QUIT,
};

struct owner_cmd {
	uint32_t op, idx;
	uint64_t off, len, seed, pos;
};

static void owner_main(const char *socket, int in, int out,
		       const enum tl_kind *kinds, const size_t *lens,
		       unsigned n)
{
	struct tl_buf bufs[TL_OWNER_MAX];
	struct xfer_ctx *ctx = NULL;
	uint8_t tok[XFER_TOKEN_MAX];

	T_OK(xfer_open(socket, &ctx));
	for (unsigned i = 0; i < n; i++) {
		tl_buf_alloc(ctx, kinds[i], lens[i], &bufs[i]);
		tl_send_blob(out, tok, tl_export(&bufs[i], tok));
		tl_write_full(out, &bufs[i].handle, sizeof(bufs[i].handle));
	}
	for (;;) {
		struct owner_cmd c;
		uint64_t reply = 0;

		tl_read_full(in, &c, sizeof(c));
		if (c.op == OWNER_QUIT)
			break;
		T_ASSERT(c.idx < n, "owner: region %u of %u", c.idx, n);
		struct tl_buf *b = &bufs[c.idx];
		T_ASSERT(c.op == OWNER_FREE || c.op == OWNER_EXPORT ||
			 (c.off <= b->len && c.len <= b->len - c.off),
			 "owner: range %llu+%llu outside region %u",
			 (unsigned long long)c.off, (unsigned long long)c.len,
			 c.idx);
		switch (c.op) {
		case OWNER_FILL:
			tl_fill_at(b->ptr + c.off, c.len, c.seed, c.pos);
			break;
		case OWNER_CHECK:
			reply = tl_check_at(b->ptr + c.off, c.len, c.seed, c.pos);
			break;
		case OWNER_EXPORT: {
			/* The reply is the token (or the error as a blob of
			 * its own) instead of a number. */
			size_t len = sizeof(tok);
			int rc = xfer_export(b->mem, c.off, c.len, tok, &len);
			if (rc)
				tl_send_blob(out, &rc, 0);
			else
				tl_send_blob(out, tok, len);
			tl_write_full(out, &rc, sizeof(rc));
			continue;
		}
		case OWNER_FREE:
			if (b->kind == TL_HOST) {
				reply = (uint64_t)(int64_t)xfer_free_host(ctx, b->mem);
			} else {
				reply = (uint64_t)(int64_t)xfer_dereg(ctx, b->mem);
				free(b->ptr);
			}
			b->mem = NULL;
			break;
		default:
			T_ASSERT(0, "owner: unknown command %u", c.op);
		}
		tl_write_full(out, &reply, sizeof(reply));
	}
	for (unsigned i = 0; i < n; i++)
		tl_buf_free(ctx, &bufs[i]);
	xfer_close(ctx);
}

void tl_owner_start(struct tl_owner *o, const char *socket,
		    const enum tl_kind *kinds, const size_t *lens, unsigned n)
{
	int to[2], from[2];

	T_ASSERT(n <= TL_OWNER_MAX, "at most %d regions", TL_OWNER_MAX);
	if (!socket)
		socket = tl_socket();
	T_ASSERT(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0,
		 "pipe: %s", strerror(errno));
	*o = (struct tl_owner){ .n = n };
	o->pid = tl_fork();
	if (o->pid == 0) {
		close(to[1]);
		close(from[0]);
		owner_main(socket, to[0], from[1], kinds, lens, n);
		exit(0);
	}
	close(to[0]);
	close(from[1]);
	o->to = to[1];
	o->from = from[0];
	for (unsigned i = 0; i < n; i++) {
		o->token_len[i] = tl_recv_blob(o->from, o->token[i],
					       sizeof(o->token[i]));
		tl_read_full(o->from, &o->handle[i], sizeof(o->handle[i]));
		o->len[i] = lens[i];
	}
}

static uint64_t owner_call(struct tl_owner *o, const struct owner_cmd *c)
{
	uint64_t reply;

	tl_write_full(o->to, c, sizeof(*c));
	tl_read_full(o->from, &reply, sizeof(reply));
	return reply;
}

void tl_owner_fill(struct tl_owner *o, unsigned idx, uint64_t off,
		   uint64_t len, uint64_t seed, uint64_t pos)
{
	owner_call(o, &(struct owner_cmd){ .op = OWNER_FILL, .idx = idx,
					   .off = off, .len = len,
					   .seed = seed, .pos = pos });
}

size_t tl_owner_check(struct tl_owner *o, unsigned idx, uint64_t off,
		      uint64_t len, uint64_t seed, uint64_t pos)
{
	return (size_t)owner_call(o, &(struct owner_cmd){
		.op = OWNER_CHECK, .idx = idx, .off = off, .len = len,
		.seed = seed, .pos = pos });
}

int tl_owner_export(struct tl_owner *o, unsigned idx, uint64_t off,
		    uint64_t len, void *tok, size_t *tok_len)
{
	struct owner_cmd c = { .op = OWNER_EXPORT, .idx = idx, .off = off,
			       .len = len };
	int rc;

	tl_write_full(o->to, &c, sizeof(c));
	*tok_len = tl_recv_blob(o->from, tok, XFER_TOKEN_MAX);
	tl_read_full(o->from, &rc, sizeof(rc));
	return rc;
}

int tl_owner_free(struct tl_owner *o, unsigned idx)
{
	return (int)(int64_t)owner_call(
		o, &(struct owner_cmd){ .op = OWNER_FREE, .idx = idx });
}

void tl_owner_stop(struct tl_owner *o)
{
	tl_write_full(o->to, &(struct owner_cmd){ .op = OWNER_QUIT },
		      sizeof(struct owner_cmd));
	int status = tl_child_wait(o->pid, 30000);
	close(o->to);
	close(o->from);
	T_ASSERT(status == 0, "region owner exited with %d", status);
}

struct xfer_sqe *tl_get_sqe(struct xfer_ctx *ctx)
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

void tl_pick(uint32_t *out, uint32_t n, uint32_t total, uint64_t seed)
{
	uint32_t *perm = malloc(total * sizeof(*perm));

	T_ASSERT(perm && n <= total, "tl_pick: %u of %u", n, total);
	for (uint32_t i = 0; i < total; i++)
		perm[i] = i;
	/* The first n steps of a Fisher-Yates shuffle (an LCG's high bits). */
	for (uint32_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t j = i + (uint32_t)((seed >> 33) % (total - i));
		uint32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
		out[i] = perm[i];
	}
	free(perm);
}
