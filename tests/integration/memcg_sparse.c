/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memcg_sparse.c - a sparse 3 GiB memfd registered with an xferd that
 * lives in a 1 GiB memory cgroup (budget.h, mem/region.c).
 *
 * The attacker (uid 65534) registers a sealed memfd of 3 GiB whose pages
 * it never touched.  Against xferd's shipped defaults, max_uid_bytes is
 * derived from the cgroup's 1 GiB: refused with -EDQUOT, which
 * xfer_strerror names.  Against an xferd told to allow 4 GiB, the
 * registration is mapped, not faulted in: it completes without xferd's
 * RSS or its cgroup's usage growing, five times over, while root's
 * xferctl status keeps answering within 1 s, and 1 MiB written through
 * xferd into the sparse region arrives.  A client of another user moves
 * verified bytes all along, and xferd survives.
 *
 * cgroup v1 (/sys/fs/cgroup/memory) and root needed; skipped under ASan,
 * whose shadow memory makes a 1 GiB limit meaningless.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "hostile.h"

#define CG_ROOT "/sys/fs/cgroup/memory"
#define SPARSE (3ull << 30)

/*
 * libxfer's xfer_alloc_host faults its memfd in (MAP_POPULATE); a
 * hostile client need not.  This mmap, which the static libxfer calls,
 * leaves it out while sparse is set: the memfd xferd gets is untouched.
 */
static bool sparse;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (sparse)
		flags &= ~MAP_POPULATE;
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static char cg[128];

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	T_ASSERT(fd >= 0 && write(fd, text, strlen(text)) ==
		 (ssize_t)strlen(text), "write %s to %s: %s", text, path,
		 strerror(errno));
	close(fd);
}

static uint64_t read_num(const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned long long v = 0;

	T_ASSERT(f && fscanf(f, "%llu", &v) == 1, "read %s", path);
	fclose(f);
	return v;
}

/* VmRSS of pid in KiB. */
static uint64_t rss_kb(pid_t pid)
{
	char path[64], line[256];
	unsigned long long kb = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	T_ASSERT(f, "xferd (pid %d) is gone", (int)pid);
	while (fgets(line, sizeof(line), f))
		sscanf(line, "VmRSS: %llu", &kb);
	fclose(f);
	return kb;
}

static void cg_remove(void)
{
	if (cg[0])
		rmdir(cg);
}

/* A private xferd inside the 1 GiB cgroup (this process goes in for the
 * fork, and back out). */
static void start_in_cgroup(struct tl_daemon *xd, const char *const *args)
{
	char me[32], path[200];

	snprintf(me, sizeof(me), "%d", (int)getpid());
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	write_file(path, me);
	tl_daemon_start(xd, args);
	write_file(CG_ROOT "/cgroup.procs", me);
	hl_open_socket(xd);
}

struct sparse_result {
	int first;              /* the first registration's result */
	unsigned done;          /* registrations that succeeded */
	unsigned long slowest_ms;
	int wrote;              /* 1 MiB through xferd: 0 or the error */
};

/* The attacker: 5 sparse registrations (each freed but the last), then
 * 1 MiB written into the last through xferd.  Reports, holds it. */
static void attacker(const char *socket, int report, int hold)
{
	struct sparse_result r = { 0 };
	struct xfer_ctx *ctx;
	struct xfer_mem *m = NULL;
	struct tl_buf src;

	hl_become(HL_ATTACKER_UID);
	T_OK(xfer_open(socket, &ctx));
	tl_buf_alloc(ctx, TL_MALLOC, 1 << 20, &src);
	for (int i = 0; i < 5; i++) {
		if (m)
			T_OK(xfer_free_host(ctx, m));
		m = NULL;
		sparse = true;
		uint64_t t0 = tl_now_ms();
		int rc = xfer_alloc_host(ctx, SPARSE, &m);
		uint64_t ms = tl_now_ms() - t0;
		sparse = false;
		r.slowest_ms = ms > r.slowest_ms ? ms : r.slowest_ms;
		if (i == 0)
			r.first = rc;
		if (rc) {
			m = NULL;
			break;
		}
		r.done++;
	}
	r.wrote = -1;
	if (m) {
		struct xfer_sqe *sqe = xfer_get_sqe(ctx);
		tl_fill(src.ptr, src.len, 77);
		xfer_prep_write(sqe, src.handle, 0, xfer_mem_handle(m),
				SPARSE / 2, src.len, 77);
		struct xfer_cqe cqe = tl_submit_wait(ctx);
		r.wrote = cqe.result == (int64_t)src.len ? 0 : (int)cqe.result;
		if (!r.wrote && tl_check((char *)xfer_mem_ptr(m) + SPARSE / 2,
					 src.len, 77))
			r.wrote = -EIO;
	}
	tl_write_full(report, &r, sizeof(r));
	char b;
	(void)!read(hold, &b, 1);
	_exit(0);
}

/* One run against an xferd started with args; fills r and the worst
 * xferctl latency while the attacker registered, checks the rest. */
static void run(const char *const *args, struct sparse_result *r,
		long *worst_ctl_ms)
{
	struct tl_daemon xd;
	struct hl_bystander by;
	int report, hold;
	char usage_path[200];

	snprintf(usage_path, sizeof(usage_path), "%s/memory.usage_in_bytes",
		 cg);
	start_in_cgroup(&xd, args);
	uint64_t rss0 = rss_kb(xd.pid), cg0 = read_num(usage_path);
	hl_bystander_start(&by, xd.socket);
	pid_t pid = hl_attacker_start(attacker, xd.socket, &report, &hold);
	/* root's xferctl, again and again while it registers. */
	*worst_ctl_ms = 0;
	for (;;) {
		struct pollfd p = { .fd = report, .events = POLLIN };
		if (poll(&p, 1, 0) > 0)
			break;
		long ms = hl_xferctl_ms(xd.socket);
		if (ms < 0)
			ms = 100000;  /* failed: xferd dead or not answering */
		*worst_ctl_ms = ms > *worst_ctl_ms ? ms : *worst_ctl_ms;
		if (kill(xd.pid, 0))
			break;
		usleep(20000);
	}
	tl_read_full(report, r, sizeof(*r));
	T_ASSERT(kill(xd.pid, 0) == 0 && waitpid(xd.pid, NULL, WNOHANG) == 0,
		 "xferd died (OOM-killed in its 1 GiB cgroup?)");
	uint64_t rss1 = rss_kb(xd.pid), cg1 = read_num(usage_path);
	printf("sparse 3 GiB memfd: first registration %d (%s), %u "
	       "registered, slowest %lu ms; 1 MiB written into it: %d; "
	       "xferctl status at worst %ld ms; xferd RSS %llu -> %llu KiB, "
	       "cgroup %llu -> %llu MiB\n", r->first, xfer_strerror(r->first),
	       r->done, r->slowest_ms, r->wrote, *worst_ctl_ms,
	       (unsigned long long)rss0, (unsigned long long)rss1,
	       (unsigned long long)(cg0 >> 20),
	       (unsigned long long)(cg1 >> 20));
	T_ASSERT(rss1 < rss0 + 64 * 1024, "xferd's RSS grew by %llu KiB",
		 (unsigned long long)(rss1 - rss0));
	T_ASSERT(cg1 < cg0 + (64ull << 20), "xferd's cgroup grew by %llu "
		 "MiB", (unsigned long long)((cg1 - cg0) >> 20));
	T_ASSERT(*worst_ctl_ms < 1000, "xferctl status took %ld ms while a "
		 "sparse memfd was registered", *worst_ctl_ms);
	close(hold);
	T_ASSERT(tl_child_wait(pid, 60000) == 0, "the attacker failed");
	usleep(300000);  /* the bystander moves on after the attacker */
	hl_bystander_stop(&by, 2000);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not exit cleanly");
}

int main(void)
{
	struct sparse_result r;
	long ms;
	char path[200];

#if defined(__SANITIZE_ADDRESS__)
	printf("skip: built with ASan (its shadow memory makes a 1 GiB "
	       "memory cgroup meaningless)\n");
	return TL_SKIP;
#endif
	const char *build = getenv("XFER_BUILD");
	if (build && strstr(build, "asan")) {
		printf("skip: an ASan build (%s)\n", build);
		return TL_SKIP;
	}
	hl_need_root();
	if (access(CG_ROOT "/cgroup.procs", W_OK)) {
		printf("skip: no cgroup v1 memory controller at %s\n", CG_ROOT);
		return TL_SKIP;
	}
	snprintf(cg, sizeof(cg), CG_ROOT "/xferd-test-%d", (int)getpid());
	T_ASSERT(mkdir(cg, 0755) == 0, "mkdir %s: %s", cg, strerror(errno));
	atexit(cg_remove);
	snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", cg);
	write_file(path, "1073741824");

	/* Shipped defaults: the quota comes from the cgroup and refuses. */
	run(NULL, &r, &ms);
	T_ASSERT(r.first == -EDQUOT, "a 3 GiB memfd in a 1 GiB cgroup -> %d "
		 "(%s), not -EDQUOT", r.first, xfer_strerror(r.first));
	T_ASSERT(strstr(xfer_strerror(-EDQUOT), "max_uid_bytes") &&
		 strstr(xfer_strerror(-EDQUOT), "max_client_bytes"),
		 "xfer_strerror(-EDQUOT) names neither quota");

	/* Allowed: mapped, not faulted in; the written MiB arrives. */
	const char *allow[] = { "max_client_bytes=4G", "max_uid_bytes=4G",
				NULL };
	run(allow, &r, &ms);
	T_ASSERT(r.first == 0 && r.done == 5, "%u of 5 sparse registrations "
		 "(the first: %s)", r.done, xfer_strerror(r.first));
	T_ASSERT(r.slowest_ms < 1000, "a sparse registration took %lu ms",
		 r.slowest_ms);
	T_ASSERT(r.wrote == 0, "1 MiB into the sparse region: %d (%s)",
		 r.wrote, xfer_strerror(r.wrote));
	printf("ok\n");
	return 0;
}
