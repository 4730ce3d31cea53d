/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferdemo.c - two client processes exchange verified data through xferd.
 *
 * The "owner" process allocates shared host memory and a malloc'd buffer,
 * exports a token for each and hands them to the "writer" process over a
 * pipe.  The writer imports them, writes a pattern into each (one memfd
 * target: the memcpy path; one malloc'd target: the CMA path), notifies
 * the owner, and reads the bytes back.  The owner checks every byte it
 * received.  Each step prints what moved, how much and on which path.
 *
 * usage: xferdemo [--socket PATH] [--size BYTES]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xfer.h"

#define NOTIFY_DONE 0x600dda7aull

static const char *sock_path;

static void die(const char *what, int err)
{
	fprintf(stderr, "xferdemo: %s: %s\n", what, xfer_strerror(err));
	exit(1);
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 31 + (i >> 8) + 7);
}

static void write_all(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len) {
		perror("xferdemo: pipe");
		exit(1);
	}
}

static void read_all(int fd, void *buf, size_t len)
{
	if (read(fd, buf, len) != (ssize_t)len) {
		fprintf(stderr, "xferdemo: the other process went away\n");
		exit(1);
	}
}

/* A token travels as its length then its bytes. */
static void send_token(int fd, const struct xfer_mem *mem)
{
	uint8_t tok[XFER_TOKEN_MAX];
	size_t len = sizeof(tok);
	int rc = xfer_export(mem, 0, xfer_mem_len(mem), tok, &len);

	if (rc)
		die("export", rc);
	write_all(fd, &len, sizeof(len));
	write_all(fd, tok, len);
}

static struct xfer_remote *recv_token(int fd, struct xfer_ctx *ctx)
{
	uint8_t tok[XFER_TOKEN_MAX];
	size_t len;
	struct xfer_remote *r;

	read_all(fd, &len, sizeof(len));
	if (len > sizeof(tok))
		die("token", -EINVAL);
	read_all(fd, tok, len);
	int rc = xfer_import(ctx, tok, len, &r);
	if (rc)
		die("import", rc);
	return r;
}

static struct xfer_cqe wait_one(struct xfer_ctx *ctx)
{
	struct xfer_cqe *c, copy;
	int rc = xfer_wait_cqe(ctx, &c, 10000);

	if (rc)
		die("wait", rc);
	copy = *c;
	xfer_cq_advance(ctx, 1);
	return copy;
}

static int owner(int to_writer, int from_writer, size_t size)
{
	struct xfer_ctx *ctx;
	struct xfer_mem *shm, *heap_mem;
	int rc;

	if ((rc = xfer_open(sock_path, &ctx)))
		die("open", rc);
	if ((rc = xfer_alloc_host(ctx, size, &shm)))
		die("alloc_host", rc);
	uint8_t *heap = calloc(1, size);
	if (!heap || (rc = xfer_reg(ctx, heap, size, &heap_mem)))
		die("reg", heap ? rc : -ENOMEM);
	send_token(to_writer, shm);
	send_token(to_writer, heap_mem);

	/* The writer notifies once per target after the data landed. */
	for (int i = 0; i < 2; i++) {
		struct xfer_cqe n = wait_one(ctx);
		if (!(n.flags & XFER_CQE_F_NOTIFY) || n.user_data != NOTIFY_DONE)
			die("expected a notification", -EPROTO);
		const uint8_t *got = n.handle == xfer_mem_handle(shm)
					     ? xfer_mem_ptr(shm) : heap;
		for (size_t j = 0; j < size; j++)
			if (got[j] != pattern(j)) {
				fprintf(stderr, "owner: byte %zu wrong\n", j);
				return 1;
			}
		printf("owner:  notified; all %zu bytes in my %s memory verified\n",
		       size, got == heap ? "malloc'd" : "shared");
	}
	char done;
	read_all(from_writer, &done, 1);
	xfer_dereg(ctx, heap_mem);
	xfer_free_host(ctx, shm);
	xfer_close(ctx);
	free(heap);
	return 0;
}

static int writer(int from_owner, int to_owner, size_t size)
{
	struct xfer_ctx *ctx;
	struct xfer_mem *src, *back;
	int rc;

	if ((rc = xfer_open(sock_path, &ctx)))
		die("open", rc);
	struct xfer_remote *targets[2] = { recv_token(from_owner, ctx),
					   recv_token(from_owner, ctx) };
	if ((rc = xfer_alloc_host(ctx, size, &src)) ||
	    (rc = xfer_alloc_host(ctx, size, &back)))
		die("alloc_host", rc);
	uint8_t *p = xfer_mem_ptr(src);
	for (size_t j = 0; j < size; j++)
		p[j] = pattern(j);

	for (int t = 0; t < 2; t++) {
		struct xfer_sqe *sqe = xfer_get_sqe(ctx);
		xfer_prep_write(sqe, xfer_mem_handle(src), 0,
				xfer_remote_handle(targets[t]), 0, size, t);
		xfer_sqe_set_notify(sqe, NOTIFY_DONE);
		xfer_submit(ctx);
		struct xfer_cqe c = wait_one(ctx);
		if (c.result != (int64_t)size)
			die("write", (int)c.result);
		printf("writer: wrote %zu bytes to the owner's %s memory via %s\n",
		       size, t ? "malloc'd" : "shared", xfer_path_name(c.path));

		memset(xfer_mem_ptr(back), 0, size);
		sqe = xfer_get_sqe(ctx);
		xfer_prep_read(sqe, xfer_mem_handle(back), 0,
			       xfer_remote_handle(targets[t]), 0, size, 10 + t);
		xfer_submit(ctx);
		c = wait_one(ctx);
		if (c.result != (int64_t)size ||
		    memcmp(xfer_mem_ptr(back), p, size))
			die("read back", c.result < 0 ? (int)c.result : -EIO);
		printf("writer: read %zu bytes back via %s: identical\n", size,
		       xfer_path_name(c.path));
	}
	write_all(to_owner, "k", 1);
	xfer_close(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "size", required_argument, NULL, 'n' },
		{ 0 },
	};
	size_t size = 4u << 20;
	int ch, to_writer[2], to_owner[2];

	while ((ch = getopt_long(argc, argv, "s:n:", opts, NULL)) != -1) {
		if (ch == 's') {
			sock_path = optarg;
		} else if (ch == 'n') {
			char *end;
			size = strtoull(optarg, &end, 0);
			if (*end || size == 0) {
				fprintf(stderr, "xferdemo: bad --size '%s'\n", optarg);
				return 2;
			}
		} else {
			fprintf(stderr, "usage: xferdemo [--socket PATH] [--size BYTES]\n");
			return 2;
		}
	}
	/* Line-buffered: the two processes' lines interleave in order. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(to_writer) || pipe(to_owner)) {
		perror("xferdemo: pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("xferdemo: fork");
		return 1;
	}
	if (pid == 0) {
		close(to_writer[1]);
		close(to_owner[0]);
		exit(writer(to_writer[0], to_owner[1], size));
	}
	close(to_writer[0]);
	close(to_owner[1]);
	int rc = owner(to_writer[1], to_owner[0], size);
	int status;
	waitpid(pid, &status, 0);
	if (rc || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "xferdemo: FAILED\n");
		return 1;
	}
	printf("xferdemo: both clients done, data verified\n");
	return 0;
}
