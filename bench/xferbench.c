/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferbench.c - benchmarks of xferd: two client processes through one
 * xferd, or (--target-socket) through two, one per node.
 *
 *   xferbench [--socket PATH] [--target-socket PATH] [--cpu N]
 *             [--target-cpu N] MODE [options]
 *
 *   bw      bandwidth of WRITE (or READ) copies, one size after another
 *   lat     submit -> completion time of one small write at a time
 *   rate    small writes per second, submitted in batches
 *   memcpy  the in-process single-thread memcpy baseline, same sizes and
 *           the same sampling as bw
 *   all     memcpy, bw, lat and rate
 *   rss     the resident memory of a process (--pid), e.g. an idle xferd
 *
 * Two client processes go through one xferd: this process initiates and
 * a forked target process owns the remote memory.  The target exports a
 * token for it over a pipe and then sleeps until it is told to go, so the
 * only CPU work on the data path is xferd's progress thread and this
 * process's polling.
 *
 * Every result is a table row for people and a machine line
 *   RES <bench> <variant> <param> <metric> <value> <unit>
 * in the format of the baseline scripts (lib/stats.awk aggregates them).
 * GB/s is 1e9 bytes per second.  bench/bench.sh runs it beside its
 * baselines and writes bench/results/ and BENCHMARKS.md.
 *
 * One file past the usual size on purpose: the modes share the target
 * process, the sampling and the output, and the tool is one binary.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/numparse.h"
#include "stages.h"
#include "xfer.h"

#define MAX_SIZES 16
#define SEED_LOCAL 0x1111u
#define SEED_TARGET 0x2222u
/* A spinning wait gives up after this long: xferd is stuck or gone. */
#define STALL_NS (20ull * 1000000000ull)

enum mem_kind { KIND_MEMFD, KIND_MALLOC };

struct opts {
	const char *socket;
	const char *target_socket; /* another node's xferd; NULL = socket */
	int cpu, target_cpu;
	enum mem_kind kind, local_kind;
	bool kind_set, local_kind_set;
	unsigned op;                 /* XFER_OP_WRITE or XFER_OP_READ */
	uint64_t sizes[MAX_SIZES];
	unsigned nsizes;
	unsigned time_ms, reps;      /* 0: the mode's default */
	unsigned window;             /* 0: by size */
	unsigned iters, warmup;
	uint64_t size;               /* lat and rate; 0: the mode's default */
	unsigned batch, inflight;
	bool linked;
	int sleep_wait;              /* -1: the mode's default */
	long pid;
	bool stages;                 /* lat: per-stage split (stages.h) */
	int xferd_cpu;               /* lat --stages: xferd's progress CPU */
};

static void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("xferbench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

static void pin_cpu(int cpu, const char *who)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("%s: cannot pin to CPU %d: %s", who, cpu, strerror(errno));
}

static const char *size_label(uint64_t s, char *buf, size_t len)
{
	if (s >= (1u << 20) && s % (1u << 20) == 0)
		snprintf(buf, len, "%" PRIu64 "MiB", s >> 20);
	else if (s >= 1024 && s % 1024 == 0)
		snprintf(buf, len, "%" PRIu64 "KiB", s >> 10);
	else
		snprintf(buf, len, "%" PRIu64 "B", s);
	return buf;
}

/* "8", "4K", "64KiB", "16M", "1G" -> bytes; 0 on a bad string. */
static uint64_t parse_size(const char *s)
{
	uint64_t v;

	return numparse_size(s, NUMPARSE_BYTE_UNIT, &v) ? 0 : v;
}

static unsigned parse_uint(const char *name, const char *s, unsigned lo,
			   unsigned hi)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (end == s || *end || v < lo || v > hi)
		die("--%s: '%s' is not a number in [%u, %u]", name, s, lo, hi);
	return (unsigned)v;
}

/* Deterministic, position-dependent contents. */
static void fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t *w = buf;
	size_t n = len / 8;

	for (size_t i = 0; i < n; i++)
		w[i] = (seed + i) * 0x9e3779b97f4a7c15ull;
	memset((char *)buf + 8 * n, (int)seed, len - 8 * n);
}

static uint64_t checksum(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t h = 0xcbf29ce484222325ull, w;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	for (; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Sorts v; the median of an even count is the mean of the middle two. */
static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Nearest-rank percentile of sorted v. */
static uint64_t percentile(const uint64_t *v, size_t n, double q)
{
	size_t rank = (size_t)ceil(q * (double)n);

	return v[rank ? rank - 1 : 0];
}

/* --- memory on either side --- */

struct buf {
	enum mem_kind kind;
	struct xfer_mem *mem;
	void *ptr;
	size_t len;
};

static const char *kind_name(enum mem_kind k)
{
	return k == KIND_MEMFD ? "memfd" : "malloc";
}

/* memfd: xfer_alloc_host (populated at allocation).  malloc: ordinary
 * page-aligned heap memory, touched, then registered for CMA. */
static int buf_alloc(struct xfer_ctx *ctx, enum mem_kind kind, size_t len,
		     struct buf *b)
{
	int err;

	*b = (struct buf){ .kind = kind, .len = len };
	if (kind == KIND_MEMFD) {
		err = xfer_alloc_host(ctx, len, &b->mem);
		if (!err)
			b->ptr = xfer_mem_ptr(b->mem);
		return err;
	}
	err = posix_memalign(&b->ptr, 4096, len);
	if (err)
		return -err;
	memset(b->ptr, 0, len);
	err = xfer_reg(ctx, b->ptr, len, &b->mem);
	if (err) {
		free(b->ptr);
		b->ptr = NULL;
	}
	return err;
}

static void buf_free(struct xfer_ctx *ctx, struct buf *b)
{
	if (!b->mem)
		return;
	if (b->kind == KIND_MEMFD) {
		xfer_free_host(ctx, b->mem);
	} else {
		xfer_dereg(ctx, b->mem);
		free(b->ptr);
	}
	b->mem = NULL;
	b->ptr = NULL;
}

/* --- the target process --- */

/* Target -> initiator, once, after setting up (< PIPE_BUF: one write). */
struct target_hello {
	int32_t err;
	uint32_t token_len;
	uint8_t token[XFER_TOKEN_MAX];
};

/* Initiator -> target. */
struct target_cmd {
	uint32_t op;   /* 'S': reply checksum of [0, arg); 'Q': exit */
	uint32_t pad;
	uint64_t arg;
};

static int read_full(int fd, void *p, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = read(fd, (char *)p + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		done += (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *p, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = write(fd, (const char *)p + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

static void target_main(const struct opts *o, uint64_t len, int cmd_fd,
			int reply_fd)
{
	struct target_hello h = { 0 };
	struct xfer_ctx *ctx = NULL;
	struct buf b = { 0 };
	struct target_cmd c;
	int err;

	/* Nothing to guard once the initiator is gone. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	pin_cpu(o->target_cpu, "target");
	err = xfer_open(o->target_socket ? o->target_socket : o->socket, &ctx);
	if (!err)
		err = buf_alloc(ctx, o->kind, len, &b);
	if (!err) {
		size_t tlen = sizeof(h.token);
		fill(b.ptr, len, SEED_TARGET);
		err = xfer_export(b.mem, 0, len, h.token, &tlen);
		h.token_len = (uint32_t)tlen;
	}
	h.err = err;
	if (write_full(reply_fd, &h, sizeof(h)) || err)
		goto out;
	while (read_full(cmd_fd, &c, sizeof(c)) == 0 && c.op != 'Q') {
		uint64_t sum = checksum(b.ptr, c.arg < len ? c.arg : len);
		if (write_full(reply_fd, &sum, sizeof(sum)))
			break;
	}
out:
	buf_free(ctx, &b);
	xfer_close(ctx);
	_exit(err ? 1 : 0);
}

/* --- a session: this process, a target, one xferd --- */

struct session {
	struct xfer_ctx *ctx;
	struct buf local;
	struct xfer_remote *remote;
	uint64_t local_h, remote_h;
	pid_t target;
	int cmd_fd, reply_fd;
};

static void session_open(struct session *s, const struct opts *o,
			 uint64_t len)
{
	struct target_hello h;
	int to_t[2], from_t[2], err;

	*s = (struct session){ .target = -1 };
	if (pipe2(to_t, O_CLOEXEC) || pipe2(from_t, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	fflush(stdout);
	s->target = fork();
	if (s->target < 0)
		die("fork: %s", strerror(errno));
	if (s->target == 0) {
		close(to_t[1]);
		close(from_t[0]);
		target_main(o, len, to_t[0], from_t[1]);
	}
	close(to_t[0]);
	close(from_t[1]);
	s->cmd_fd = to_t[1];
	s->reply_fd = from_t[0];
	if (read_full(s->reply_fd, &h, sizeof(h)))
		die("the target process died while setting up");
	if (h.err)
		die("target: %s region of %" PRIu64 " bytes: %s",
		    kind_name(o->kind), len, xfer_strerror(h.err));

	pin_cpu(o->cpu, "initiator");
	err = xfer_open(o->socket, &s->ctx);
	if (err)
		die("xfer_open(%s): %s", o->socket ? o->socket : "default",
		    xfer_strerror(err));
	err = buf_alloc(s->ctx, o->local_kind, len, &s->local);
	if (err)
		die("local %s region of %" PRIu64 " bytes: %s",
		    kind_name(o->local_kind), len, xfer_strerror(err));
	fill(s->local.ptr, len, SEED_LOCAL);
	err = xfer_import(s->ctx, h.token, h.token_len, &s->remote);
	if (err)
		die("xfer_import: %s", xfer_strerror(err));
	s->local_h = xfer_mem_handle(s->local.mem);
	s->remote_h = xfer_remote_handle(s->remote);
}

static void session_close(struct session *s)
{
	struct target_cmd c = { .op = 'Q' };
	int status;

	xfer_unimport(s->ctx, s->remote);
	buf_free(s->ctx, &s->local);
	xfer_close(s->ctx);
	write_full(s->cmd_fd, &c, sizeof(c));
	close(s->cmd_fd);
	close(s->reply_fd);
	if (waitpid(s->target, &status, 0) == s->target &&
	    !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		die("the target process failed (status %#x)", status);
}

/* Does [0, n) hold the same bytes on both sides? */
static void session_verify(struct session *s, uint64_t n)
{
	struct target_cmd c = { .op = 'S', .arg = n };
	uint64_t theirs;

	if (write_full(s->cmd_fd, &c, sizeof(c)) ||
	    read_full(s->reply_fd, &theirs, sizeof(theirs)))
		die("the target process went away");
	if (theirs != checksum(s->local.ptr, n))
		die("data check failed: the %" PRIu64 " bytes differ", n);
}

/* The next CQE: spin on the ring, or let libxfer spin then sleep. */
static struct xfer_cqe *next_cqe(struct xfer_ctx *ctx, bool sleep)
{
	struct xfer_cqe *cqe;
	int rc;

	if (sleep) {
		rc = xfer_wait_cqe(ctx, &cqe, (int)(STALL_NS / 1000000));
	} else {
		uint64_t spins = 0, start = 0;
		while ((rc = xfer_peek_cqe(ctx, &cqe)) == -EAGAIN) {
			cpu_relax();
			/* Read the clock rarely: it is the slow part. */
			if ((++spins & 0xffff) != 0)
				continue;
			if (!start) {
				start = now_ns();
			} else if (now_ns() - start > STALL_NS) {
				rc = -ETIME;
				break;
			}
		}
	}
	if (rc)
		die("waiting for a completion: %s", xfer_strerror(rc));
	return cqe;
}

static void check_cqe(const struct xfer_cqe *cqe, int64_t want)
{
	if (cqe->flags & XFER_CQE_F_NOTIFY)
		die("unexpected notification on the initiator's ring");
	if (cqe->result != want)
		die("completion %" PRIu64 ": result %" PRId64 " (%s), expected %"
		    PRId64, cqe->user_data, cqe->result,
		    cqe->result < 0 ? xfer_strerror((int)cqe->result) : "short",
		    want);
}

static void prep_copy(struct xfer_sqe *sqe, const struct session *s,
		      unsigned op, uint64_t loff, uint64_t roff, uint64_t len,
		      uint64_t user_data)
{
	xfer_prep_rw(sqe, op, s->local_h, loff, s->remote_h, roff, len,
		     user_data);
}

/* One transfer of n bytes at offset 0; returns the path it took. */
static unsigned transfer_once(struct session *s, const struct opts *o,
			      uint64_t n)
{
	struct xfer_sqe *sqe = xfer_get_sqe(s->ctx);
	struct xfer_cqe *cqe;
	unsigned path;

	if (!sqe)
		die("SQ full on an idle ring");
	prep_copy(sqe, s, o->op, 0, 0, n, 1);
	if (xfer_submit(s->ctx) != 1)
		die("xfer_submit failed");
	cqe = next_cqe(s->ctx, o->sleep_wait);
	check_cqe(cqe, (int64_t)n);
	path = cqe->path;
	xfer_cq_advance(s->ctx, 1);
	return path;
}

/* The mode's way of waiting unless --spin or --sleep chose one. */
static struct opts mode_opts(const struct opts *o, bool sleep_default)
{
	struct opts m = *o;

	if (m.sleep_wait < 0)
		m.sleep_wait = sleep_default;
	return m;
}

/* --- bw --- */

static unsigned bw_window(const struct opts *o, uint64_t size)
{
	uint64_t w = (64ull << 20) / size;

	if (o->window)
		return o->window;
	return w < 2 ? 2 : w > 16 ? 16 : (unsigned)w;
}

/*
 * Copies of `size` bytes, `window` of them in flight, for about ms
 * milliseconds: from the first submission to the last completion, so the
 * pipeline's fill and drain are inside the time.  Returns GB/s.
 */
static double bw_sample(struct session *s, const struct opts *o,
			uint64_t size, unsigned window, double ms,
			uint64_t *ops)
{
	uint64_t submitted = 0, completed = 0, t0 = now_ns();
	uint64_t deadline = t0 + (uint64_t)(ms * 1e6);
	bool stop = false;

	while (!stop || completed < submitted) {
		while (!stop && submitted - completed < window) {
			struct xfer_sqe *sqe = xfer_get_sqe(s->ctx);
			if (!sqe)
				break;
			prep_copy(sqe, s, o->op, 0, 0, size, submitted++);
		}
		if (xfer_submit(s->ctx) < 0)
			die("xfer_submit: xferd went away");
		/* Take every completion there is before refilling. */
		struct xfer_cqe *cqe = next_cqe(s->ctx, o->sleep_wait);
		do {
			check_cqe(cqe, (int64_t)size);
			xfer_cq_advance(s->ctx, 1);
			completed++;
		} while (xfer_peek_cqe(s->ctx, &cqe) == 0);
		if (!stop && now_ns() >= deadline)
			stop = true;
	}
	*ops = completed;
	return (double)(completed * size) / (double)(now_ns() - t0);
}

static void print_bw_row(const char *bench, const char *variant,
			 uint64_t size, double *gbs, unsigned reps,
			 const char *extra)
{
	char lbl[32];
	double med = median(gbs, reps);

	size_label(size, lbl, sizeof(lbl));
	printf("  %-8s %8.2f %8.2f %8.2f  %s\n", lbl, med, gbs[0],
	       gbs[reps - 1], extra);
	printf("RES %s %s %s bw_median %.4g GB/s\n", bench, variant, lbl, med);
	printf("RES %s %s %s bw_min %.4g GB/s\n", bench, variant, lbl, gbs[0]);
	printf("RES %s %s %s bw_max %.4g GB/s\n", bench, variant, lbl,
	       gbs[reps - 1]);
	fflush(stdout);
}

static uint64_t max_size(const struct opts *o)
{
	uint64_t m = 0;

	for (unsigned i = 0; i < o->nsizes; i++)
		m = o->sizes[i] > m ? o->sizes[i] : m;
	return m;
}

static void run_bw(const struct opts *cmdline)
{
	/* Big copies take milliseconds: sleep through them, as a real
	 * client would, and leave the CPU to others. */
	const struct opts mo = mode_opts(cmdline, true), *o = &mo;
	unsigned reps = o->reps ? o->reps : 7;
	double ms = o->time_ms ? o->time_ms : 300;
	const char *opname = o->op == XFER_OP_WRITE ? "write" : "read";
	char variant[64];
	double gbs[1000];
	struct session s;

	if (o->local_kind == o->kind)
		snprintf(variant, sizeof(variant), "%s_%s", kind_name(o->kind),
			 opname);
	else
		snprintf(variant, sizeof(variant), "%s-%s_%s",
			 kind_name(o->local_kind), kind_name(o->kind), opname);
	session_open(&s, o, max_size(o));
	printf("bw: %s, initiator %s on CPU %d, target %s, %s; median of "
	       "%u x %.0f ms (GB/s)\n", opname, kind_name(o->local_kind),
	       o->cpu, kind_name(o->kind),
	       o->sleep_wait ? "xfer_wait_cqe" : "polling", reps, ms);
	printf("  %-8s %8s %8s %8s  %s\n", "size", "median", "min", "max",
	       "path, window, copies per sample");
	for (unsigned i = 0; i < o->nsizes; i++) {
		uint64_t size = o->sizes[i], ops = 0;
		unsigned window = bw_window(o, size);
		char extra[96];

		/* Untimed: checks the data and warms both sides up. */
		unsigned path = transfer_once(&s, o, size);
		session_verify(&s, size);
		bw_sample(&s, o, size, window, ms / 4, &ops);
		for (unsigned r = 0; r < reps; r++)
			gbs[r] = bw_sample(&s, o, size, window, ms, &ops);
		snprintf(extra, sizeof(extra), "%s, %u, %" PRIu64,
			 xfer_path_name(path), window, ops);
		print_bw_row("xferbench_bw", variant, size, gbs, reps, extra);
	}
	session_close(&s);
}

/* --- memcpy baseline --- */

/* Called through a volatile pointer so the copies are never elided. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

static double copy_loop(void *dst, const void *src, size_t size,
			uint64_t iters)
{
	uint64_t t0 = now_ns();

	for (uint64_t i = 0; i < iters; i++) {
		copy_fn(dst, src, size);
		__asm__ volatile("" ::: "memory");
	}
	return (double)(now_ns() - t0);
}

/* memfd: two MAP_POPULATE'd shared memfd mappings, as xferd copies
 * between; malloc: anonymous memory, touched. */
static void *baseline_buf(enum mem_kind kind, size_t len)
{
	void *p;

	if (kind == KIND_MEMFD) {
		int fd = memfd_create("xferbench", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)len))
			die("memfd: %s", strerror(errno));
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_POPULATE, fd, 0);
		close(fd);
	} else {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED)
			memset(p, 0, len);
	}
	if (p == MAP_FAILED)
		die("mmap of %zu bytes: %s", len, strerror(errno));
	return p;
}

static void run_memcpy(const struct opts *o)
{
	unsigned reps = o->reps ? o->reps : 7;
	double ms = o->time_ms ? o->time_ms : 300;
	/* Plain process memory unless asked for memfd mappings. */
	enum mem_kind kind = o->kind_set ? o->kind : KIND_MALLOC;
	double gbs[1000];

	pin_cpu(o->cpu, "memcpy");
	printf("memcpy: glibc memcpy, one thread on CPU %d, %s buffers; "
	       "median of %u x %.0f ms (GB/s)\n", o->cpu, kind_name(kind),
	       reps, ms);
	printf("  %-8s %8s %8s %8s  %s\n", "size", "median", "min", "max",
	       "copies per sample");
	for (unsigned i = 0; i < o->nsizes; i++) {
		size_t size = o->sizes[i];
		char *src = baseline_buf(kind, size);
		char *dst = baseline_buf(kind, size);
		uint64_t iters = 1;
		double t;
		char extra[32];

		fill(src, size, SEED_LOCAL);
		/* Find a count that takes >= 10 ms, then scale it to ms. */
		while ((t = copy_loop(dst, src, size, iters)) < 10e6)
			iters *= 2;
		iters = (uint64_t)((double)iters * ms * 1e6 / t);
		if (iters == 0)
			iters = 1;
		for (unsigned r = 0; r < reps; r++)
			gbs[r] = (double)size * (double)iters /
				 copy_loop(dst, src, size, iters);
		if (memcmp(dst, src, size))
			die("memcpy baseline: the copy differs");
		snprintf(extra, sizeof(extra), "%" PRIu64, iters);
		print_bw_row("memcpy", kind_name(kind), size, gbs, reps,
			     extra);
		munmap(src, size);
		munmap(dst, size);
	}
}

/* --- lat --- */

/* What reading the clock costs: the floor under every latency here. */
static uint64_t clock_cost_ns(void)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 1000; i++) {
		uint64_t a = now_ns(), b = now_ns();
		if (b - a < best)
			best = b - a;
	}
	return best;
}

static void run_lat(const struct opts *cmdline)
{
	const struct opts mo = mode_opts(cmdline, false), *o = &mo;
	uint64_t size = o->size ? o->size : 8;
	unsigned iters = o->iters ? o->iters : 200000;
	unsigned warmup = o->warmup ? o->warmup : iters / 10;
	uint64_t *ns = malloc(iters * sizeof(*ns));
	double sum = 0;
	struct session s;
	char lbl[32], variant[64];
	unsigned path = XFER_PATH_NONE;

	if (!ns)
		die("out of memory");
	if (o->stages && !stages_begin(iters))
		die("--stages needs x86-64's TSC (and memory)");
	session_open(&s, o, size < 4096 ? 4096 : size);
	transfer_once(&s, o, size);
	session_verify(&s, size);
	for (unsigned i = 0; i < warmup + iters; i++) {
		struct xfer_sqe *sqe = xfer_get_sqe(s.ctx);
		struct xfer_cqe *cqe;

		if (!sqe)
			die("SQ full on an idle ring");
		prep_copy(sqe, &s, o->op, 0, 0, size, i);
		uint64_t c0 = o->stages ? stages_tsc() : 0;
		uint64_t t0 = now_ns();
		xfer_submit(s.ctx);
		cqe = next_cqe(s.ctx, o->sleep_wait);
		uint64_t t1 = now_ns();
		uint64_t c1 = o->stages ? stages_tsc() : 0;
		check_cqe(cqe, (int64_t)size);
		if (o->stages && i >= warmup &&
		    !stages_record(i - warmup, c0, c1, cqe->handle))
			die("--stages: the completion carries no stamps; run "
			    "an xferd built with `make STAGE_STAMPS=1`");
		path = cqe->path;
		xfer_cq_advance(s.ctx, 1);
		if (i >= warmup)
			ns[i - warmup] = t1 - t0;
	}
	session_close(&s);

	for (unsigned i = 0; i < iters; i++)
		sum += (double)ns[i];
	qsort(ns, iters, sizeof(*ns), cmp_u64);
	size_label(size, lbl, sizeof(lbl));
	snprintf(variant, sizeof(variant), "%s_%s", kind_name(o->kind),
		 o->op == XFER_OP_WRITE ? "write" : "read");
	struct {
		const char *name;
		double us;
	} m[] = {
		{ "lat_p50", percentile(ns, iters, 0.50) / 1e3 },
		{ "lat_p99", percentile(ns, iters, 0.99) / 1e3 },
		{ "lat_p999", percentile(ns, iters, 0.999) / 1e3 },
		{ "lat_min", ns[0] / 1e3 },
		{ "lat_mean", sum / iters / 1e3 },
		{ "lat_max", ns[iters - 1] / 1e3 },
	};
	printf("lat: %s %s, one at a time, submit -> completion, %s; "
	       "%u timed after %u warm-up (us; clock read costs %" PRIu64
	       " ns; path %s)\n", lbl, variant,
	       o->sleep_wait ? "xfer_wait_cqe" : "polling xfer_peek_cqe",
	       iters, warmup, clock_cost_ns(), xfer_path_name(path));
	printf("  %8s %8s %8s %8s %8s %8s\n", "p50", "p99", "p99.9", "min",
	       "mean", "max");
	printf("  %8.3f %8.3f %8.3f %8.3f %8.3f %8.1f\n", m[0].us, m[1].us,
	       m[2].us, m[3].us, m[4].us, m[5].us);
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		printf("RES xferbench_lat %s %s %s %.4g us\n", variant, lbl,
		       m[i].name, m[i].us);
	if (o->stages)
		stages_report(variant, lbl, o->cpu, o->xferd_cpu);
	fflush(stdout);
	free(ns);
}

/* --- rate --- */

#define RATE_SPAN (1u << 20)   /* the writes cycle through 1 MiB */

/*
 * Batches of `batch` writes of `size` bytes, one xfer_submit per batch,
 * up to `inflight` writes outstanding.  Independent writes complete one
 * CQE each; a linked batch completes with one.  Returns writes per second.
 */
static double rate_sample(struct session *s, const struct opts *o,
			  uint64_t size, unsigned inflight, double ms)
{
	unsigned batch = o->batch;
	uint64_t slots = RATE_SPAN / size, submitted = 0, completed = 0;
	uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)(ms * 1e6);
	int64_t per_cqe = o->linked ? (int64_t)(size * batch) : (int64_t)size;
	bool stop = false;

	while (!stop || completed < submitted) {
		while (!stop && submitted - completed + batch <= inflight) {
			for (unsigned b = 0; b < batch; b++) {
				struct xfer_sqe *sqe = xfer_get_sqe(s->ctx);
				uint64_t off = (submitted % slots) * size;
				if (!sqe)
					die("SQ full below --inflight");
				prep_copy(sqe, s, XFER_OP_WRITE, off, off,
					  size, submitted++);
				if (o->linked && b + 1 < batch)
					xfer_sqe_set_link(sqe);
			}
			if (xfer_submit(s->ctx) != (int)batch)
				die("xfer_submit: xferd went away");
		}
		struct xfer_cqe *cqe = next_cqe(s->ctx, o->sleep_wait);
		do {
			check_cqe(cqe, per_cqe);
			xfer_cq_advance(s->ctx, 1);
			completed += o->linked ? batch : 1;
		} while (xfer_peek_cqe(s->ctx, &cqe) == 0);
		if (!stop && now_ns() >= deadline)
			stop = true;
	}
	return (double)completed * 1e9 / (double)(now_ns() - t0);
}

static void run_rate(const struct opts *cmdline)
{
	const struct opts mo = mode_opts(cmdline, false), *o = &mo;
	uint64_t size = o->size ? o->size : 64;
	unsigned reps = o->reps ? o->reps : 3;
	double ms = o->time_ms ? o->time_ms : 1000;
	double mops[1000];
	struct session s;
	char lbl[32], variant[64];

	if (size > RATE_SPAN)
		die("rate: --size is at most %u", RATE_SPAN);
	session_open(&s, o, RATE_SPAN);
	unsigned space = xfer_sq_space(s.ctx);
	unsigned inflight = o->inflight ? o->inflight : 8 * o->batch;
	if (inflight > space)
		inflight = space;
	if (o->batch > inflight)
		die("rate: --batch %u is larger than the SQ (%u entries)",
		    o->batch, space);
	transfer_once(&s, o, size);
	session_verify(&s, size);
	rate_sample(&s, o, size, inflight, ms / 4);
	for (unsigned r = 0; r < reps; r++)
		mops[r] = rate_sample(&s, o, size, inflight, ms) / 1e6;
	session_close(&s);

	double med = median(mops, reps);
	size_label(size, lbl, sizeof(lbl));
	snprintf(variant, sizeof(variant), "%s_write_b%u%s", kind_name(o->kind),
		 o->batch, o->linked ? "_linked" : "");
	printf("rate: %s writes, batches of %u %s, up to %u in flight; "
	       "median of %u x %.0f ms (M writes/s)\n", lbl, o->batch,
	       o->linked ? "linked (one CQE per batch)" : "independent",
	       inflight, reps, ms);
	printf("  %8s %8s %8s\n", "median", "min", "max");
	printf("  %8.3f %8.3f %8.3f\n", med, mops[0], mops[reps - 1]);
	printf("RES xferbench_rate %s %s rate_median %.4g Mop/s\n", variant,
	       lbl, med);
	printf("RES xferbench_rate %s %s rate_min %.4g Mop/s\n", variant, lbl,
	       mops[0]);
	printf("RES xferbench_rate %s %s rate_max %.4g Mop/s\n", variant, lbl,
	       mops[reps - 1]);
	fflush(stdout);
}

/* --- rss --- */

static void run_rss(const struct opts *o)
{
	static const char *const keys[] = { "VmRSS", "RssAnon", "RssFile",
					    "RssShmem", "VmHWM" };
	char path[64], line[256];
	FILE *f;

	if (o->pid <= 0)
		die("rss: --pid PID is required");
	snprintf(path, sizeof(path), "/proc/%ld/status", o->pid);
	f = fopen(path, "re");
	if (!f)
		die("%s: %s", path, strerror(errno));
	printf("rss of pid %ld (KiB):", o->pid);
	unsigned long kib[sizeof(keys) / sizeof(keys[0])];
	bool seen[sizeof(keys) / sizeof(keys[0])] = { false };
	while (fgets(line, sizeof(line), f)) {
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			size_t n = strlen(keys[i]);
			if (strncmp(line, keys[i], n) == 0 && line[n] == ':' &&
			    sscanf(line + n + 1, "%lu", &kib[i]) == 1)
				seen[i] = true;
		}
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (seen[i])
			printf(" %s %lu", keys[i], kib[i]);
	putchar('\n');
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (seen[i])
			printf("RES xferd idle %s rss %lu KiB\n", keys[i],
			       kib[i]);
	fclose(f);
	fflush(stdout);
}

/* --- command line --- */

static void usage(FILE *f)
{
	fputs("usage: xferbench [--socket PATH] [--target-socket PATH] [--cpu N]"
	      " [--target-cpu N] MODE [options]\n"
	      "  --target-socket: the target's xferd (another node: the transfers\n"
	      "         then go between the two xferds)\n"
	      "  bw     [--kind memfd|malloc] [--local-kind K] [--op write|read]\n"
	      "         [--sizes 4K,64K,1M,16M,256M] [--time-ms 300] [--reps 7]\n"
	      "         [--window N]\n"
	      "  lat    [--iters 200000] [--warmup N] [--size 8] [--kind K]\n"
	      "         [--stages [--xferd-cpu 0]]: split each round trip at\n"
	      "         xferd's stamps (an xferd of `make STAGE_STAMPS=1`)\n"
	      "  rate   [--size 64] [--batch 64] [--inflight N] [--linked]\n"
	      "         [--time-ms 1000] [--reps 3]\n"
	      "  memcpy [--sizes ...] [--kind malloc|memfd] [--time-ms 300]"
	      " [--reps 7]\n"
	      "  all    memcpy, bw, lat and rate with their defaults\n"
	      "  rss    --pid PID\n"
	      "  --spin: poll with xfer_peek_cqe (default of lat and rate)\n"
	      "  --sleep: xfer_wait_cqe, which polls 20 us, then sleeps"
	      " (default of bw)\n"
	      "  defaults: initiator on CPU 1, target on CPU 0, memfd, write\n",
	      f);
}

static enum mem_kind parse_kind(const char *s)
{
	if (strcmp(s, "memfd") == 0)
		return KIND_MEMFD;
	if (strcmp(s, "malloc") == 0)
		return KIND_MALLOC;
	die("--kind: '%s' is not memfd or malloc", s);
	return KIND_MEMFD;
}

static void parse_sizes(struct opts *o, const char *arg)
{
	char *copy = strdup(arg), *save = NULL;

	if (!copy)
		die("out of memory");
	o->nsizes = 0;
	for (char *t = strtok_r(copy, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		uint64_t v = parse_size(t);
		if (!v || v > (1ull << 40))
			die("--sizes: '%s' is not a size", t);
		if (o->nsizes == MAX_SIZES)
			die("--sizes: at most %d sizes", MAX_SIZES);
		o->sizes[o->nsizes++] = v;
	}
	free(copy);
	if (!o->nsizes)
		die("--sizes: no sizes given");
}

enum {
	OPT_SOCKET = 256, OPT_CPU, OPT_TARGET_CPU, OPT_KIND, OPT_LOCAL_KIND,
	OPT_OP, OPT_SIZES, OPT_TIME, OPT_REPS, OPT_WINDOW, OPT_ITERS,
	OPT_WARMUP, OPT_SIZE, OPT_BATCH, OPT_INFLIGHT, OPT_LINKED, OPT_SLEEP,
	OPT_SPIN, OPT_PID, OPT_TARGET_SOCKET, OPT_STAGES, OPT_XFERD_CPU,
};

static const char *parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "socket", required_argument, NULL, OPT_SOCKET },
		{ "target-socket", required_argument, NULL, OPT_TARGET_SOCKET },
		{ "cpu", required_argument, NULL, OPT_CPU },
		{ "target-cpu", required_argument, NULL, OPT_TARGET_CPU },
		{ "kind", required_argument, NULL, OPT_KIND },
		{ "local-kind", required_argument, NULL, OPT_LOCAL_KIND },
		{ "op", required_argument, NULL, OPT_OP },
		{ "sizes", required_argument, NULL, OPT_SIZES },
		{ "time-ms", required_argument, NULL, OPT_TIME },
		{ "reps", required_argument, NULL, OPT_REPS },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "iters", required_argument, NULL, OPT_ITERS },
		{ "warmup", required_argument, NULL, OPT_WARMUP },
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "batch", required_argument, NULL, OPT_BATCH },
		{ "inflight", required_argument, NULL, OPT_INFLIGHT },
		{ "linked", no_argument, NULL, OPT_LINKED },
		{ "sleep", no_argument, NULL, OPT_SLEEP },
		{ "spin", no_argument, NULL, OPT_SPIN },
		{ "pid", required_argument, NULL, OPT_PID },
		{ "stages", no_argument, NULL, OPT_STAGES },
		{ "xferd-cpu", required_argument, NULL, OPT_XFERD_CPU },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int ch;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned maxcpu = cpus > 0 ? (unsigned)cpus - 1 : 0;

	*o = (struct opts){
		.cpu = maxcpu >= 1 ? 1 : 0,
		.target_cpu = 0,
		.op = XFER_OP_WRITE,
		.batch = 64,
		.sleep_wait = -1,
	};
	parse_sizes(o, "4K,64K,1M,16M,256M");
	while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (ch) {
		case OPT_SOCKET: o->socket = optarg; break;
		case OPT_TARGET_SOCKET: o->target_socket = optarg; break;
		case OPT_CPU:
			o->cpu = (int)parse_uint("cpu", optarg, 0, maxcpu);
			break;
		case OPT_TARGET_CPU:
			o->target_cpu = (int)parse_uint("target-cpu", optarg, 0,
							maxcpu);
			break;
		case OPT_KIND:
			o->kind = parse_kind(optarg);
			o->kind_set = true;
			break;
		case OPT_LOCAL_KIND:
			o->local_kind = parse_kind(optarg);
			o->local_kind_set = true;
			break;
		case OPT_OP:
			if (strcmp(optarg, "write") == 0)
				o->op = XFER_OP_WRITE;
			else if (strcmp(optarg, "read") == 0)
				o->op = XFER_OP_READ;
			else
				die("--op: '%s' is not write or read", optarg);
			break;
		case OPT_SIZES: parse_sizes(o, optarg); break;
		case OPT_TIME:
			o->time_ms = parse_uint("time-ms", optarg, 1, 60000);
			break;
		case OPT_REPS:
			o->reps = parse_uint("reps", optarg, 1, 1000);
			break;
		case OPT_WINDOW:
			o->window = parse_uint("window", optarg, 1, 4096);
			break;
		case OPT_ITERS:
			o->iters = parse_uint("iters", optarg, 1, 100000000);
			break;
		case OPT_WARMUP:
			o->warmup = parse_uint("warmup", optarg, 1, 100000000);
			break;
		case OPT_SIZE:
			o->size = parse_size(optarg);
			if (!o->size)
				die("--size: '%s' is not a size", optarg);
			break;
		case OPT_BATCH:
			o->batch = parse_uint("batch", optarg, 1, 32768);
			break;
		case OPT_INFLIGHT:
			o->inflight = parse_uint("inflight", optarg, 1, 32768);
			break;
		case OPT_LINKED: o->linked = true; break;
		case OPT_SLEEP: o->sleep_wait = 1; break;
		case OPT_SPIN: o->sleep_wait = 0; break;
		case OPT_STAGES: o->stages = true; break;
		case OPT_XFERD_CPU:
			o->xferd_cpu = (int)parse_uint("xferd-cpu", optarg, 0,
						       maxcpu);
			break;
		case OPT_PID:
			o->pid = (long)parse_uint("pid", optarg, 1, 1u << 30);
			break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (!o->local_kind_set)
		o->local_kind = o->kind;
	if (optind != argc - 1) {
		usage(stderr);
		exit(2);
	}
	return argv[optind];
}

int main(int argc, char **argv)
{
	struct opts o;
	const char *mode = parse_args(argc, argv, &o);

	/* A failed write to the target's pipe is an error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	if (strcmp(mode, "bw") == 0) {
		run_bw(&o);
	} else if (strcmp(mode, "lat") == 0) {
		run_lat(&o);
	} else if (strcmp(mode, "rate") == 0) {
		run_rate(&o);
	} else if (strcmp(mode, "memcpy") == 0) {
		run_memcpy(&o);
	} else if (strcmp(mode, "rss") == 0) {
		run_rss(&o);
	} else if (strcmp(mode, "all") == 0) {
		run_memcpy(&o);
		run_bw(&o);
		run_lat(&o);
		run_rate(&o);
	} else {
		usage(stderr);
		return 2;
	}
	return 0;
}
