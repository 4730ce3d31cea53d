/*
 * testlib.c - helpers for the integration test programs.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

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
	for (int i = 0; extra_args && extra_args[i] && argc < 60; i++) {
		argv[argc++] = "-o";
		argv[argc++] = extra_args[i];
	}
	argv[argc] = NULL;
	d->pid = fork();
	T_ASSERT(d->pid >= 0, "fork: %s", strerror(errno));
	if (d->pid == 0) {
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		if (try_connect(d->socket))
			return;
		usleep(25000);
	}
	T_ASSERT(0, "xferd at %s did not start", d->socket);
}

int tl_daemon_stop(struct tl_daemon *d)
{
	int status;

	kill(d->pid, SIGTERM);
	T_ASSERT(waitpid(d->pid, &status, 0) == d->pid, "waitpid");
	rmdir(d->dir);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
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
