/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kv_request.c - xferd's default memory quotas let one large KV hand-off
 * through (budget.h): a 70B-class model with a 32k-token prompt holds
 * about 11 GB of KV per side.
 *
 * With no limit configured, a prefill client (one uid) registers an
 * 11 GB memfd and publishes it shared; a decode client (another uid)
 * registers its own 11 GB memfd, looks the prefill's up and READs its
 * first, middle and last MiB into the same places of its own region:
 * every byte checked.  Both regions are sparse (only the MiBs moved are
 * ever touched), so the test costs little memory; what it checks is that
 * the quotas admit them.  Skipped where half the machine's (or xferd's
 * cgroup's) memory, the default per-uid quota, is below 11 GB.
 */
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "hostile.h"

#define KV_BYTES 11000000000ull
#define PIECE (1u << 20)
#define PREFILL_UID 65501
#define DECODE_UID 65502

static const uint64_t piece_off[] = { 0, KV_BYTES / 2 - PIECE / 2,
				      KV_BYTES - PIECE };

/* xfer_alloc_host faults its memfd in (MAP_POPULATE): 11 GB of real
 * memory twice.  This mmap, which the static libxfer calls, leaves that
 * out: what xferd admits does not depend on it. */
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	flags &= ~MAP_POPULATE;
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static uint64_t mem_total(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;

	T_ASSERT(f && fscanf(f, "MemTotal: %llu kB", &kb) == 1,
		 "read /proc/meminfo");
	fclose(f);
	return kb << 10;
}

/* The prefill: 11 GB, its pieces filled, published shared; held until
 * the decode side says it is done (a byte on done). */
static void prefill(const char *socket, int ready, int done)
{
	struct xfer_ctx *ctx;
	struct xfer_mem *m;
	uint8_t tok[XFER_TOKEN_MAX];
	size_t len = sizeof(tok);

	hl_become(PREFILL_UID);
	T_OK(xfer_open(socket, &ctx));
	int rc = xfer_alloc_host(ctx, KV_BYTES, &m);
	T_ASSERT(rc == 0, "prefill: 11 GB memfd with default quotas: %s",
		 xfer_strerror(rc));
	for (unsigned i = 0; i < 3; i++)
		tl_fill((char *)xfer_mem_ptr(m) + piece_off[i], PIECE, 100 + i);
	T_OK(xfer_export(m, 0, KV_BYTES, tok, &len));
	T_OK(xfer_publish_flags(ctx, "kv", tok, len, XFER_PUBLISH_SHARED));
	tl_write_full(ready, "r", 1);
	char b;
	(void)!read(done, &b, 1);
	_exit(0);
}

static void decode(const char *socket)
{
	struct xfer_ctx *ctx;
	struct xfer_mem *m;
	struct xfer_remote *kv;
	uint8_t tok[XFER_TOKEN_MAX];
	size_t len = sizeof(tok);
	char name[32];

	hl_become(DECODE_UID);
	T_OK(xfer_open(socket, &ctx));
	int rc = xfer_alloc_host(ctx, KV_BYTES, &m);
	T_ASSERT(rc == 0, "decode: 11 GB memfd with default quotas: %s",
		 xfer_strerror(rc));
	snprintf(name, sizeof(name), "~%u/kv", PREFILL_UID);
	T_OK(xfer_lookup(ctx, name, tok, &len));
	T_OK(xfer_import(ctx, tok, len, &kv));
	for (unsigned i = 0; i < 3; i++) {
		struct xfer_sqe *sqe = xfer_get_sqe(ctx);
		xfer_prep_read(sqe, xfer_mem_handle(m), piece_off[i],
			       xfer_remote_handle(kv), piece_off[i], PIECE, i);
		struct xfer_cqe cqe = tl_submit_wait(ctx);
		T_ASSERT(cqe.result == PIECE, "decode: read of piece %u: %s",
			 i, xfer_strerror((int)cqe.result));
		T_ASSERT(!tl_check((char *)xfer_mem_ptr(m) + piece_off[i],
				   PIECE, 100 + i),
			 "decode: piece %u arrived wrong", i);
	}
	printf("two 11 GB regions of two users admitted by the default "
	       "quotas; 3 MiB read across, every byte checked\n");
	fflush(stdout);
	_exit(0);
}

int main(void)
{
	struct tl_daemon d;
	int ready[2], done[2], status;

	hl_need_root();
	if (mem_total() / 2 < KV_BYTES) {
		printf("skip: half of this machine's memory (the default "
		       "per-uid quota) is below 11 GB\n");
		return TL_SKIP;
	}
	tl_daemon_start(&d, NULL);
	hl_open_socket(&d);
	T_ASSERT(pipe(ready) == 0 && pipe(done) == 0, "pipe");
	fflush(NULL);
	pid_t p = tl_fork();
	if (p == 0)
		prefill(d.socket, ready[1], done[0]);
	char b;
	tl_read_full(ready[0], &b, 1);
	pid_t q = tl_fork();
	if (q == 0)
		decode(d.socket);
	T_ASSERT(waitpid(q, &status, 0) == q && WIFEXITED(status) &&
		 WEXITSTATUS(status) == 0, "the decode side failed");
	tl_write_full(done[1], "d", 1);
	T_ASSERT(waitpid(p, &status, 0) == p && WIFEXITED(status) &&
		 WEXITSTATUS(status) == 0, "the prefill side failed");
	T_ASSERT(tl_daemon_stop(&d) == 0, "xferd did not stop cleanly");
	printf("ok\n");
	return 0;
}
