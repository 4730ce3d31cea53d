/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_holder.c - a client that stays connected with memory registered,
 * for tests/integration/xferctl.sh to look at through xferctl.
 *
 *   xferctl_holder --hold SECONDS --alloc BYTES
 *	On $XFERD_SOCKET: allocate BYTES of memfd memory, register BYTES/2
 *	malloc'd bytes (a cma region), export the memfd region, import the
 *	token and write the malloc'd bytes through it (one op, BYTES/2 bytes
 *	moved), check they landed, print "ready <pid>" and stay connected
 *	until killed or SECONDS have passed.
 *   xferctl_holder --hold SECONDS --alloc BYTES --publish NAME
 *	The same, and also publish the memfd region's token as NAME (and as
 *	NAME.shared with XFER_PUBLISH_SHARED) and make one prepared list of
 *	4 entries over it, for xferctl names and lists.
 *   xferctl_holder
 *	The same steps once against the shared xferd of make check, then
 *	close everything and exit 0: run-tests.sh runs every program here.
 *
 * Exit 77 (skip) when xferd may not reach this process's memory (ptrace
 * restrictions), since the cma region is then impossible.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

struct holding {
	struct xfer_ctx *ctx;
	struct xfer_mem *shared;  /* memfd, xfer_alloc_host */
	struct xfer_mem *own;     /* cma, xfer_reg of a malloc'd buffer */
	struct xfer_remote *self; /* an import of shared's token */
	struct xfer_dlist *list;  /* --publish: 4 entries over shared */
	void *buf;
};

/* Open, register both kinds of memory, move own -> shared once. */
static void hold_setup(struct holding *h, const char *socket, size_t bytes)
{
	uint8_t token[XFER_TOKEN_MAX];
	size_t token_len = sizeof(token);
	size_t half = bytes / 2;
	int rc;

	T_ASSERT(half > 0, "--alloc must be at least 2 bytes");
	T_OK(xfer_open(socket, &h->ctx));
	T_OK(xfer_alloc_host(h->ctx, bytes, &h->shared));
	h->buf = malloc(half);
	T_ASSERT(h->buf, "malloc %zu", half);
	tl_fill(h->buf, half, 7);
	rc = xfer_reg(h->ctx, h->buf, half, &h->own);
	if (rc == -EPERM) {
		printf("skip: xferd may not reach this process's memory "
		       "(ptrace restrictions): %s\n", xfer_strerror(rc));
		exit(TL_SKIP);
	}
	T_OK(rc);

	T_OK(xfer_export(h->shared, 0, bytes, token, &token_len));
	T_OK(xfer_import(h->ctx, token, token_len, &h->self));
	T_ASSERT(xfer_remote_len(h->self) == bytes, "import covers %llu bytes",
		 (unsigned long long)xfer_remote_len(h->self));

	struct xfer_sqe *sqe = xfer_get_sqe(h->ctx);
	T_ASSERT(sqe, "no SQE free on a fresh ring");
	xfer_prep_write(sqe, xfer_mem_handle(h->own), 0,
			xfer_remote_handle(h->self), 0, half, 42);
	struct xfer_cqe cqe = tl_submit_wait(h->ctx);
	T_ASSERT(cqe.user_data == 42 && cqe.result == (int64_t)half,
		 "CQE user_data %llu result %lld (%s), want 42 and %zu",
		 (unsigned long long)cqe.user_data, (long long)cqe.result,
		 cqe.result < 0 ? xfer_strerror((int)cqe.result) : "ok", half);
	size_t bad = tl_check(xfer_mem_ptr(h->shared), half, 7);
	T_ASSERT(bad == 0, "byte %zu did not arrive", bad - 1);
}

/* Names and a prepared list for xferctl names and lists to show. */
static void hold_publish(struct holding *h, const char *name, size_t bytes)
{
	uint8_t token[XFER_TOKEN_MAX];
	size_t token_len = sizeof(token);
	char shared[256];
	const uint64_t off[4] = { 0, 4096, 8192, 12288 };

	T_ASSERT(bytes >= 16384, "--publish wants --alloc of 16K or more");
	T_OK(xfer_export(h->shared, 0, bytes, token, &token_len));
	T_OK(xfer_publish(h->ctx, name, token, token_len));
	snprintf(shared, sizeof(shared), "%s.shared", name);
	T_OK(xfer_publish_flags(h->ctx, shared, token, token_len,
				XFER_PUBLISH_SHARED));
	T_OK(xfer_dlist_create(h->ctx, xfer_mem_handle(h->shared), 4, off,
			       NULL, 4096, &h->list));
}

static void hold_release(struct holding *h)
{
	if (h->list)
		T_OK(xfer_dlist_destroy(h->ctx, h->list));
	T_OK(xfer_unimport(h->ctx, h->self));
	T_OK(xfer_dereg(h->ctx, h->own));
	T_OK(xfer_free_host(h->ctx, h->shared));
	xfer_close(h->ctx);
	free(h->buf);
}

static unsigned long parse_num(const char *what, const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	T_ASSERT(!errno && end != s && !*end && *s != '-',
		 "%s wants a number, not '%s'", what, s);
	return v;
}

int main(int argc, char **argv)
{
	struct holding h = { 0 };
	unsigned long seconds = 0, bytes = 0;
	const char *publish = NULL;

	if (argc == 1) {
		hold_setup(&h, tl_socket(), 1 << 20);
		hold_release(&h);
		printf("pass: memfd + cma regions, one self-transfer\n");
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		T_ASSERT(i + 1 < argc, "usage: %s [--hold SECONDS --alloc BYTES]",
			 argv[0]);
		if (!strcmp(argv[i], "--hold"))
			seconds = parse_num("--hold", argv[++i]);
		else if (!strcmp(argv[i], "--alloc"))
			bytes = parse_num("--alloc", argv[++i]);
		else if (!strcmp(argv[i], "--publish"))
			publish = argv[++i];
		else
			T_ASSERT(0, "unknown argument '%s'", argv[i]);
	}
	T_ASSERT(seconds > 0 && bytes > 0,
		 "usage: %s --hold SECONDS --alloc BYTES", argv[0]);

	hold_setup(&h, tl_socket(), bytes);
	if (publish)
		hold_publish(&h, publish, bytes);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	/* sleep() returns early on a signal that is caught; none is. */
	for (time_t end = time(NULL) + (time_t)seconds; time(NULL) < end;)
		sleep(1);
	hold_release(&h);
	return 0;
}
