/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cma_classes.c - the copy workers serve the latency class first: a
 * latency client's CMA copies keep completing while a bulk client keeps
 * every copy worker busy.
 *
 * A private xferd with two copy workers that split CMA copies from
 * 1 MiB up.  Each round a bulk client (XFER_CLASS_BULK) submits
 * BULK_OPS writes of 16 MiB from a memfd region into malloc'd memory (a
 * part per worker each: twice as many jobs as workers queued many times
 * over), then a latency client (XFER_CLASS_LATENCY) writes 4 MiB the
 * same way and waits for it.  Its bytes must have arrived, and when its
 * CQE came fewer than half of the bulk writes submitted before it may
 * have ended: in the order they were queued (before classes) it would
 * end after all of them.  Then every bulk write must end with its bytes
 * there.  Counts and order only, no clocks.
 *
 * Then the latency class's bound across batches: the latency client
 * submits LAT_MANY unlinked writes of LAT_LEN at once (each alone within
 * latency_max_bytes, together far over it) while the bulk client keeps
 * the workers busy: those submitted while the first is still out must go
 * as bulk (xferd's demoted count), and every byte still arrives.
 *
 * Exit 0 pass, 1 fail, 77 skip (fewer than two CPUs: one worker).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define ROUNDS    5
#define BULK_OPS  16u
#define BULK_LEN  (16u << 20)
#define LAT_LEN   (4u << 20)
#define LAT_MANY  4u

/* xferd's count of latency descriptors moved as bulk (xferctl). */
static long long demoted(const char *socket)
{
	const char *ctl = getenv("XFERCTL_BIN");
	char cmd[512];
	long long n = -1;

	if (!ctl)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s -s %s stats --json | jq .demoted",
		 ctl, socket);
	FILE *f = popen(cmd, "r");
	if (f && fscanf(f, "%lld", &n) != 1)
		n = -1;
	if (f)
		pclose(f);
	return n;
}

/* Bulk CQEs there now, without waiting; each must be the whole write. */
static unsigned reap(struct xfer_ctx *ctx)
{
	struct xfer_cqe *cqe;
	unsigned n = 0;

	while (xfer_peek_cqe(ctx, &cqe) == 0) {
		T_ASSERT(cqe->result == BULK_LEN, "bulk write: %lld",
			 (long long)cqe->result);
		T_ASSERT(cqe->path == XFER_PATH_CMA, "bulk write on path %u",
			 cqe->path);
		xfer_cq_advance(ctx, 1);
		n++;
	}
	return n;
}

int main(void)
{
	static const char *const args[] = {
		"copy_workers=2", "cma_split_bytes=1M", "latency_max_bytes=4M",
		NULL,
	};
	struct tl_daemon xd;
	struct xfer_ctx *bulk, *lat;
	struct tl_buf bsrc, bdst, lsrc, ldst;

	tl_daemon_start(&xd, args);
	T_OK(xfer_open_class(xd.socket, "bulk", XFER_CLASS_BULK, &bulk));
	T_OK(xfer_open_class(xd.socket, "latency", XFER_CLASS_LATENCY, &lat));
	tl_buf_alloc(bulk, TL_HOST, BULK_LEN, &bsrc);
	tl_buf_alloc(bulk, TL_MALLOC, BULK_LEN, &bdst);
	tl_buf_alloc(lat, TL_HOST, LAT_LEN, &lsrc);
	tl_buf_alloc(lat, TL_MALLOC, LAT_LEN, &ldst);

	unsigned early_max = 0;
	for (unsigned r = 0; r < ROUNDS; r++) {
		tl_fill(bsrc.ptr, BULK_LEN, 100 + r);
		tl_fill(lsrc.ptr, LAT_LEN, 200 + r);
		memset(ldst.ptr, 0, LAT_LEN);
		for (unsigned i = 0; i < BULK_OPS; i++)
			xfer_prep_write(tl_get_sqe(bulk), bsrc.handle, 0,
					bdst.handle, 0, BULK_LEN, i);
		T_ASSERT(xfer_submit(bulk) == (int)BULK_OPS, "bulk submit");
		xfer_prep_write(tl_get_sqe(lat), lsrc.handle, 0, ldst.handle,
				0, LAT_LEN, 1);
		struct xfer_cqe c = tl_submit_wait(lat);
		unsigned ended = reap(bulk);
		T_ASSERT(c.result == LAT_LEN, "round %u: latency write: %lld",
			 r, (long long)c.result);
		T_ASSERT(c.path == XFER_PATH_CMA, "round %u: latency path %u",
			 r, c.path);
		size_t bad = tl_check(ldst.ptr, LAT_LEN, 200 + r);
		T_ASSERT(!bad, "round %u: latency byte %zu", r, bad - 1);
		T_ASSERT(ended < BULK_OPS / 2,
			 "round %u: the latency write ended after %u of %u bulk "
			 "writes queued before it", r, ended, BULK_OPS);
		if (ended > early_max)
			early_max = ended;
		uint64_t deadline = tl_now_ms() + 120000;
		while (ended < BULK_OPS) {
			struct xfer_cqe *cqe;
			T_ASSERT(tl_now_ms() < deadline, "round %u: %u of %u "
				 "bulk writes ended", r, ended, BULK_OPS);
			(void)xfer_wait_cqe(bulk, &cqe, 200);
			ended += reap(bulk);
		}
		/* Every bulk write copied the same bytes to the same place. */
		bad = tl_check(bdst.ptr, BULK_LEN, 100 + r);
		T_ASSERT(!bad, "round %u: bulk byte %zu", r, bad - 1);
	}
	printf("latency writes ended after at most %u of %u bulk writes "
	       "queued before them\n", early_max, BULK_OPS);

	/* Many latency writes out at once: over the bound, demoted. */
	long long before = demoted(xd.socket);
	for (unsigned i = 0; i < BULK_OPS; i++)
		xfer_prep_write(tl_get_sqe(bulk), bsrc.handle, 0, bdst.handle,
				0, BULK_LEN, i);
	T_ASSERT(xfer_submit(bulk) == (int)BULK_OPS, "bulk submit");
	struct tl_buf many;
	tl_buf_alloc(lat, TL_MALLOC, LAT_MANY * LAT_LEN, &many);
	memset(many.ptr, 0, LAT_MANY * LAT_LEN);
	for (unsigned i = 0; i < LAT_MANY; i++)
		xfer_prep_write(tl_get_sqe(lat), lsrc.handle, 0, many.handle,
				(uint64_t)i * LAT_LEN, LAT_LEN, i);
	T_ASSERT(xfer_submit(lat) == (int)LAT_MANY, "latency submit");
	for (unsigned got = 0; got < LAT_MANY; got++) {
		struct xfer_cqe *cqe;
		T_OK(xfer_wait_cqe(lat, &cqe, 120000));
		T_ASSERT(cqe->result == LAT_LEN, "latency write %u: %lld",
			 got, (long long)cqe->result);
		xfer_cq_advance(lat, 1);
	}
	for (unsigned i = 0; i < LAT_MANY; i++) {
		size_t bad = tl_check((uint8_t *)many.ptr + (size_t)i * LAT_LEN,
				      LAT_LEN, 200 + ROUNDS - 1);
		T_ASSERT(!bad, "latency write %u: byte %zu", i, bad - 1);
	}
	for (unsigned ended = 0; ended < BULK_OPS;) {
		struct xfer_cqe *cqe;
		(void)xfer_wait_cqe(bulk, &cqe, 200);
		ended += reap(bulk);
	}
	long long after = demoted(xd.socket);
	if (before >= 0 && after >= 0) {
		printf("%u latency writes out at once: %lld moved as bulk\n",
		       LAT_MANY, after - before);
		T_ASSERT(after - before >= 1, "none of %u latency writes of "
			 "%u bytes out at once was moved as bulk", LAT_MANY,
			 LAT_LEN);
	}
	tl_buf_free(lat, &many);

	tl_buf_free(lat, &lsrc);
	tl_buf_free(lat, &ldst);
	tl_buf_free(bulk, &bsrc);
	tl_buf_free(bulk, &bdst);
	xfer_close(lat);
	xfer_close(bulk);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not stop cleanly");
	printf("ok\n");
	return 0;
}
