/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlist_scale.c - making and destroying a prepared list costs the same
 * whatever other clients hold.
 *
 * The list table's mutex is taken by the progress thread for every list
 * descriptor, so work under it must not grow with the lists of other
 * clients.  A client times xfer_dlist_create + xfer_dlist_destroy (the
 * median of many) with no other list in xferd, then with 65536 lists
 * held by 16 contexts of 4 other users (4096 each: within every default
 * limit), and the two must be close (a generous bound: the machine is
 * shared and may run this under ASan).  tests/unit/test_dlist.c counts
 * the table's visits for the same property, exactly.
 *
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

#define USERS     4
#define PER_USER  4        /* contexts */
#define PER_CTX   4096     /* dlist_max_per_client's default */
#define REPS      1500
#define NOGROUP   65534
#define MAX_RATIO 4.0

static struct tl_daemon xd;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median of REPS create + destroy of a 16-entry list, in microseconds. */
static double create_destroy_us(struct xfer_ctx *ctx, uint64_t handle)
{
	static uint64_t t[REPS];
	uint64_t off[16];

	for (unsigned i = 0; i < 16; i++)
		off[i] = i * 64;
	for (unsigned r = 0; r < REPS; r++) {
		struct xfer_dlist *l;
		uint64_t t0 = now_ns();
		T_OK(xfer_dlist_create(ctx, handle, 16, off, NULL, 64, &l));
		T_OK(xfer_dlist_destroy(ctx, l));
		t[r] = now_ns() - t0;
	}
	qsort(t, REPS, sizeof(t[0]), cmp_u64);
	return t[REPS / 2] / 1000.0;
}

/* A user holding PER_USER x PER_CTX lists until told to go. */
static void holder(uid_t uid, int ready, int go)
{
	struct xfer_ctx *ctx[PER_USER];
	struct tl_buf buf[PER_USER];
	uint64_t off = 0;
	char c = 'r';

	T_ASSERT(setgroups(0, NULL) == 0 &&
		 setresgid(NOGROUP, NOGROUP, NOGROUP) == 0 &&
		 setresuid(uid, uid, uid) == 0, "setresuid: %s",
		 strerror(errno));
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (unsigned k = 0; k < PER_USER; k++) {
		T_OK(xfer_open(xd.socket, &ctx[k]));
		tl_buf_alloc(ctx[k], TL_HOST, 4096, &buf[k]);
		for (unsigned i = 0; i < PER_CTX; i++) {
			struct xfer_dlist *l;
			T_OK(xfer_dlist_create(ctx[k], buf[k].handle, 1, &off,
					       NULL, 8, &l));
		}
	}
	tl_write_full(ready, &c, 1);
	tl_read_full(go, &c, 1);
	/* Everything it holds goes with the process, as with a client that
	 * dies holding it (and LeakSanitizer has nothing to say about it). */
	fflush(NULL);
	_exit(0);
}

int main(void)
{
	struct xfer_ctx *ctx;
	struct tl_buf buf;
	int ready[2], go[2];
	pid_t pid[USERS];
	char c;

	if (geteuid() != 0) {
		printf("skip: needs root (the lists are held by other uids)\n");
		return TL_SKIP;
	}
	tl_daemon_start(&xd, (const char *const[]){ "socket_group=nogroup",
						    NULL });
	T_ASSERT(chmod(xd.dir, 0711) == 0, "chmod %s", xd.dir);
	T_OK(xfer_open(xd.socket, &ctx));
	tl_buf_alloc(ctx, TL_HOST, 4096, &buf);
	create_destroy_us(ctx, buf.handle);  /* warm both ends */
	double idle = create_destroy_us(ctx, buf.handle);

	T_ASSERT(pipe(ready) == 0 && pipe(go) == 0, "pipe");
	for (int u = 0; u < USERS; u++) {
		pid[u] = tl_fork();
		if (pid[u] == 0)
			holder(42011 + u, ready[1], go[0]);
	}
	for (int u = 0; u < USERS; u++)
		tl_read_full(ready[0], &c, 1);
	double held = create_destroy_us(ctx, buf.handle);
	printf("list create + destroy: %.1f us with no other list, %.1f us "
	       "with %d lists of other users held (x%.2f)\n", idle, held,
	       USERS * PER_USER * PER_CTX, held / idle);
	for (int u = 0; u < USERS; u++)
		tl_write_full(go[1], "g", 1);
	for (int u = 0; u < USERS; u++)
		T_ASSERT(tl_child_wait(pid[u], 60000) == 0, "a holder failed");
	T_ASSERT(held < idle * MAX_RATIO,
		 "create + destroy took %.1f us with %d lists held, %.1f us "
		 "without: work grows with other clients' lists", held,
		 USERS * PER_USER * PER_CTX, idle);
	tl_buf_free(ctx, &buf);
	xfer_close(ctx);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not stop cleanly");
	return 0;
}
