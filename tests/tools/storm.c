/* SPDX-License-Identifier: Apache-2.0 */
/*
 * storm.c - many clients writing and reading back checksummed bytes while
 * a killer SIGKILLs them at random (tests/integration/netns_storm.sh, and
 * `make soak`).
 *
 *   storm run   --socket S --target NAME [--target NAME]... --workers N
 *               --secs T [--kill-every-ms K] [--slice BYTES] [--chunks C]
 *               [--timeout-ms MS] [--report-secs R]
 *       Start N worker processes.  Worker slot i looks up target i % (the
 *       number of targets), imports it and, round after round, writes a
 *       random length of seeded bytes into its own part of that region in
 *       C chunks at once, reads them back in C chunks into another buffer
 *       and checks every byte.  Even slots use memory from
 *       xfer_alloc_host, odd ones malloc'd memory (CMA).  Every K ms the
 *       killer SIGKILLs one worker (older than MIN_AGE_MS) and a new one
 *       takes its slot.  After T seconds the killer stops, every worker
 *       finishes its round and exits: each must exit 0 (every completion
 *       succeeded, every byte read back was the byte written).  A summary
 *       line every R seconds and at the end; exit 0 only with no wrong
 *       byte, no failed completion and no failed worker.
 *
 *   storm mute  --socket S --name NAME --size BYTES
 *       Own a region, publish its token as NAME, print "ready", and never
 *       look at the completion queue, while others notify it.  On SIGTERM
 *       read every notification xferd posted or held for it (up to a
 *       fence: its own NOTIFY, which comes behind them), print how many
 *       and how many were lost (xfer_cq_overflow), and exit 0.
 *
 *   storm notify --socket S --target NAME --count N
 *       N writes of 4 KiB with a notification each into NAME, 16 at
 *       once: every one must complete successfully.
 *
 * A killed worker's descriptors may still land after its death (a frame
 * already on a link), so each slot cycles through GENERATIONS parts of
 * the target: a new worker never shares its part with the one just
 * killed.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../integration/testlib.h"
#include "common/numparse.h"
#include "xfer.h"

#define MAX_WORKERS  256
#define MAX_TARGETS  4
#define MAX_CHUNKS   16
#define GENERATIONS  8
#define MIN_AGE_MS   50      /* the killer spares younger workers */
#define STOP_SECS    120     /* to finish the last round after the end */

/* What every worker adds to, in memory shared with the supervisor. */
struct tally {
	_Atomic uint64_t rounds;
	_Atomic uint64_t bytes;      /* written, read back and verified */
	_Atomic uint64_t wrong;      /* bytes that came back different */
	_Atomic uint64_t errors;     /* failed completions */
};

struct opts {
	const char *socket;
	const char *target[MAX_TARGETS];
	unsigned ntargets;
	unsigned workers;
	unsigned secs;
	unsigned kill_ms;
	uint64_t slice;
	unsigned chunks;
	unsigned timeout_ms;
	unsigned report_secs;
	const char *name;            /* mute */
	uint64_t size;               /* mute */
	unsigned count;              /* notify */
};

static struct tally *tally;
static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						      noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("FAIL: ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	exit(1);
}

/* --- a worker ---------------------------------------------------------- */

struct worker {
	const struct opts *o;
	unsigned slot, gen;
	struct xfer_ctx *ctx;
	struct tl_buf src, dst;
	struct xfer_remote *target;
	uint64_t base;               /* its part of the target */
	uint64_t rng;
};

static uint64_t next_rand(uint64_t *s)
{
	/* xorshift64*: good enough for lengths and seeds. */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* Wait for n CQEs (others than these are a failure); each must have
 * moved exactly its chunk. */
static void reap(struct worker *w, unsigned n, const uint64_t *want,
		 const char *what)
{
	for (unsigned i = 0; i < n; i++) {
		struct xfer_cqe *cqe;
		int rc;

		do {
			rc = xfer_wait_cqe(w->ctx, &cqe,
					   (int)w->o->timeout_ms + 30000);
		} while (rc == -EINTR);
		if (rc)
			die("slot %u: waiting for a %s completion: %s", w->slot,
			    what, xfer_strerror(rc));
		uint64_t idx = cqe->user_data;
		int64_t res = cqe->result;
		xfer_cq_advance(w->ctx, 1);
		if (idx >= n || res != (int64_t)want[idx]) {
			atomic_fetch_add(&tally->errors, 1);
			die("slot %u: %s chunk %llu -> %lld (%s), expected %llu",
			    w->slot, what, (unsigned long long)idx,
			    (long long)res, xfer_strerror((int)res),
			    (unsigned long long)(idx < n ? want[idx] : 0));
		}
	}
}

/* Move len bytes between b and the target at w->base in chunks at once. */
static void move(struct worker *w, unsigned op, struct tl_buf *b,
		 uint64_t len, const char *what)
{
	unsigned n = w->o->chunks;
	uint64_t per = (len + n - 1) / n, want[MAX_CHUNKS];
	unsigned k = 0;

	for (uint64_t off = 0; off < len; off += per, k++) {
		uint64_t l = len - off < per ? len - off : per;
		struct xfer_sqe *sqe = xfer_get_sqe(w->ctx);
		if (!sqe)
			die("slot %u: no SQE", w->slot);
		xfer_prep_rw(sqe, op, b->handle, off,
			     xfer_remote_handle(w->target), w->base + off, l,
			     k);
		xfer_sqe_set_timeout(sqe, w->o->timeout_ms);
		want[k] = l;
	}
	int rc = xfer_submit(w->ctx);
	if (rc < 0)
		die("slot %u: submit: %s", w->slot, xfer_strerror(rc));
	reap(w, k, want, what);
}

static void round_trip(struct worker *w, uint64_t round)
{
	uint64_t len = 1 + next_rand(&w->rng) % w->o->slice;
	uint64_t seed = ((uint64_t)getpid() << 32) ^ round ^ (w->rng << 7);

	tl_fill(w->src.ptr, len, seed);
	move(w, XFER_OP_WRITE, &w->src, len, "write");
	/* The complement first: a read that moved nothing cannot pass. */
	for (uint64_t i = 0; i < len; i++)
		w->dst.ptr[i] = (uint8_t)~w->src.ptr[i];
	move(w, XFER_OP_READ, &w->dst, len, "read");
	size_t bad = tl_check(w->dst.ptr, len, seed);
	if (bad) {
		uint64_t wrong = 0;
		for (uint64_t i = 0; i < len; i++)
			wrong += w->dst.ptr[i] != w->src.ptr[i];
		atomic_fetch_add(&tally->wrong, wrong);
		die("slot %u gen %u: %llu of %llu bytes read back differ, "
		    "the first at %zu (target offset %llu)", w->slot, w->gen,
		    (unsigned long long)wrong, (unsigned long long)len,
		    bad - 1, (unsigned long long)(w->base + bad - 1));
	}
	atomic_fetch_add(&tally->rounds, 1);
	atomic_fetch_add(&tally->bytes, len);
}

/* Everything given back, as a well-behaved client does at its end. */
static void worker_release(struct worker *w)
{
	if (w->target && xfer_unimport(w->ctx, w->target))
		die("slot %u: unimport", w->slot);
	tl_buf_free(w->ctx, &w->src);
	tl_buf_free(w->ctx, &w->dst);
	xfer_close(w->ctx);
}

static void worker_main(const struct opts *o, unsigned slot, unsigned gen)
{
	struct worker w = { .o = o, .slot = slot, .gen = gen,
			    .rng = ((uint64_t)getpid() << 20) ^ slot ^ 0x9e37 };
	uint8_t tok[XFER_TOKEN_MAX];
	size_t tok_len = sizeof(tok);
	const char *target = o->target[slot % o->ntargets];
	enum tl_kind kind = slot % 2 ? TL_MALLOC : TL_HOST;
	int rc;

	rc = xfer_open(o->socket, &w.ctx);
	if (rc)
		die("slot %u: xfer_open: %s", slot, xfer_strerror(rc));
	xfer_set_wait_spin(w.ctx, 0);  /* 64 of us on a few cores */
	tl_buf_alloc(w.ctx, kind, o->slice, &w.src);
	tl_buf_alloc(w.ctx, kind, o->slice, &w.dst);
	rc = xfer_lookup(w.ctx, target, tok, &tok_len);
	if (rc)
		die("slot %u: lookup %s: %s", slot, target, xfer_strerror(rc));
	rc = xfer_import(w.ctx, tok, tok_len, &w.target);
	if (rc)
		die("slot %u: import %s: %s", slot, target, xfer_strerror(rc));
	/* Slots of one target are slot / ntargets there. */
	w.base = ((uint64_t)(slot / o->ntargets) * GENERATIONS +
		  gen % GENERATIONS) * o->slice;
	if (w.base + o->slice > xfer_remote_len(w.target))
		die("slot %u: target %s has %llu bytes, too few for %u "
		    "workers", slot, target,
		    (unsigned long long)xfer_remote_len(w.target),
		    o->workers);
	for (uint64_t r = 0; !stop; r++)
		round_trip(&w, r);
	worker_release(&w);
	exit(0);
}

/* --- the supervisor and its killer ------------------------------------- */

struct slot {
	pid_t pid;
	unsigned gen;
	uint64_t born_ms;
	bool killed;                 /* we sent it SIGKILL */
};

struct storm {
	const struct opts *o;
	struct slot slot[MAX_WORKERS];
	uint64_t spawned, killed, survived, failed;
	uint64_t start_ms;
};

static void spawn(struct storm *s, unsigned i)
{
	struct slot *sl = &s->slot[i];

	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0)
		worker_main(s->o, i, sl->gen);
	sl->pid = pid;
	sl->born_ms = tl_now_ms();
	sl->killed = false;
	s->spawned++;
}

static int slot_of(const struct storm *s, pid_t pid)
{
	for (unsigned i = 0; i < s->o->workers; i++)
		if (s->slot[i].pid == pid)
			return (int)i;
	return -1;
}

/* A worker ended: killed by us (respawn when still storming), or by
 * itself (exit 0 only once told to stop). */
static void ended(struct storm *s, pid_t pid, int status, bool storming)
{
	int i = slot_of(s, pid);

	if (i < 0)
		return;
	struct slot *sl = &s->slot[i];
	sl->pid = 0;
	if (sl->killed && WIFSIGNALED(status) &&
	    WTERMSIG(status) == SIGKILL) {
		s->killed++;
	} else if (!storming && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		s->survived++;
	} else {
		s->failed++;
		printf("worker slot %d gen %u (pid %d) ended with %s %d\n", i,
		       sl->gen, (int)pid,
		       WIFEXITED(status) ? "exit" : "signal",
		       WIFEXITED(status) ? WEXITSTATUS(status)
					 : WTERMSIG(status));
	}
	if (storming) {
		sl->gen++;
		spawn(s, (unsigned)i);
	}
}

static void summary(const struct storm *s, const char *when)
{
	printf("storm %s: %llus, %u workers, %llu started, %llu killed, "
	       "%llu finished, %llu failed, %llu rounds, %llu MiB verified, "
	       "%llu bytes wrong, %llu completions failed\n", when,
	       (unsigned long long)((tl_now_ms() - s->start_ms) / 1000),
	       s->o->workers, (unsigned long long)s->spawned,
	       (unsigned long long)s->killed, (unsigned long long)s->survived,
	       (unsigned long long)s->failed,
	       (unsigned long long)atomic_load(&tally->rounds),
	       (unsigned long long)(atomic_load(&tally->bytes) >> 20),
	       (unsigned long long)atomic_load(&tally->wrong),
	       (unsigned long long)atomic_load(&tally->errors));
	fflush(stdout);
}

static int storm_run(const struct opts *o)
{
	struct storm s = { .o = o };
	uint64_t rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;
	int status;
	pid_t pid;

	tally = mmap(NULL, sizeof(*tally), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (tally == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	/* Before the first fork: a worker inherits it, so that a stop sent
	 * the moment it was born is not its death. */
	signal(SIGUSR1, on_stop);
	s.start_ms = tl_now_ms();
	for (unsigned i = 0; i < o->workers; i++)
		spawn(&s, i);

	uint64_t end = s.start_ms + o->secs * 1000ull;
	uint64_t next_report = s.start_ms + o->report_secs * 1000ull;
	while (tl_now_ms() < end) {
		struct timespec nap = { .tv_nsec = (o->kill_ms ? o->kill_ms
							       : 10) * 1000000l };
		nanosleep(&nap, NULL);
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			ended(&s, pid, status, true);
		if (o->kill_ms) {
			unsigned i = (unsigned)(next_rand(&rng) % o->workers);
			struct slot *sl = &s.slot[i];
			if (sl->pid && !sl->killed &&
			    tl_now_ms() - sl->born_ms >= MIN_AGE_MS) {
				kill(sl->pid, SIGKILL);
				sl->killed = true;
			}
		}
		if (o->report_secs && tl_now_ms() >= next_report) {
			summary(&s, "running");
			next_report += o->report_secs * 1000ull;
		}
	}
	/* The end: the last round of every worker, then its exit. */
	for (unsigned i = 0; i < o->workers; i++)
		if (s.slot[i].pid && !s.slot[i].killed)
			kill(s.slot[i].pid, SIGUSR1);
	uint64_t deadline = tl_now_ms() + STOP_SECS * 1000ull;
	for (;;) {
		bool any = false;
		for (unsigned i = 0; i < o->workers; i++)
			any |= s.slot[i].pid != 0;
		if (!any)
			break;
		pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0) {
			ended(&s, pid, status, false);
			continue;
		}
		if (tl_now_ms() > deadline) {
			for (unsigned i = 0; i < o->workers; i++)
				if (s.slot[i].pid) {
					printf("worker slot %u (pid %d) did not "
					       "finish in %d s\n", i,
					       (int)s.slot[i].pid, STOP_SECS);
					kill(s.slot[i].pid, SIGKILL);
					s.slot[i].killed = false;
				}
			deadline = UINT64_MAX;
		}
		usleep(10000);
	}
	summary(&s, "done");
	/* Every worker the killer spared finished with every byte right. */
	bool ok = s.failed == 0 && atomic_load(&tally->wrong) == 0 &&
		  atomic_load(&tally->errors) == 0 && s.survived > 0;
	printf("%s\n", ok ? "storm ok" : "FAIL: storm");
	return ok ? 0 : 1;
}

/* --- a client that never reads its completions -------------------------- */

static int storm_mute(const struct opts *o)
{
	struct xfer_ctx *ctx;
	struct tl_buf b;
	uint8_t tok[XFER_TOKEN_MAX];
	int rc;

	signal(SIGTERM, on_stop);
	rc = xfer_open(o->socket, &ctx);
	if (rc)
		die("xfer_open: %s", xfer_strerror(rc));
	tl_buf_alloc(ctx, TL_HOST, o->size, &b);
	size_t len = tl_export(&b, tok);
	/* Shared: the storm's writers are on other nodes. */
	rc = xfer_publish_flags(ctx, o->name, tok, len, XFER_PUBLISH_SHARED);
	if (rc)
		die("publish %s: %s", o->name, xfer_strerror(rc));
	printf("ready name=%s size=%llu\n", o->name,
	       (unsigned long long)o->size);
	fflush(stdout);
	while (!stop)
		pause();
	/* Only now: every notification, those xferd held included (each
	 * CQE consumed lets it post more), up to the fence behind them. */
	const uint64_t fence = ~0ull;
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);
	T_ASSERT(sqe, "no SQE");
	xfer_prep_notify(sqe, b.handle, fence, 1);
	T_ASSERT(xfer_submit(ctx) == 1, "submit the fence");
	unsigned notified = 0;
	for (;;) {
		struct xfer_cqe c = tl_wait(ctx);
		if (!(c.flags & XFER_CQE_F_NOTIFY))
			continue;  /* the fence's own completion */
		if (c.user_data == fence)
			break;
		notified++;
	}
	printf("notified=%u cq_overflow=%u\n", notified,
	       xfer_cq_overflow(ctx));
	T_OK(xfer_unpublish(ctx, o->name));
	tl_buf_free(ctx, &b);
	xfer_close(ctx);
	return 0;
}

static int storm_notify(const struct opts *o)
{
	struct worker w = { .o = o };
	uint8_t tok[XFER_TOKEN_MAX];
	size_t tok_len = sizeof(tok);
	unsigned submitted = 0, done = 0;
	int rc;

	tally = calloc(1, sizeof(*tally));
	rc = xfer_open(o->socket, &w.ctx);
	if (rc || !tally)
		die("xfer_open: %s", xfer_strerror(rc));
	tl_buf_alloc(w.ctx, TL_HOST, 4096, &w.src);
	tl_fill(w.src.ptr, 4096, 99);
	rc = xfer_lookup(w.ctx, o->target[0], tok, &tok_len);
	if (!rc)
		rc = xfer_import(w.ctx, tok, tok_len, &w.target);
	if (rc)
		die("%s: %s", o->target[0], xfer_strerror(rc));
	while (done < o->count) {
		while (submitted < o->count && submitted - done < 16) {
			struct xfer_sqe *sqe = xfer_get_sqe(w.ctx);
			xfer_prep_write(sqe, w.src.handle, 0,
					xfer_remote_handle(w.target), 0, 4096,
					submitted);
			xfer_sqe_set_notify(sqe, submitted);
			xfer_sqe_set_timeout(sqe, o->timeout_ms);
			submitted++;
		}
		if (xfer_submit(w.ctx) < 0)
			die("submit");
		struct xfer_cqe *cqe;
		rc = xfer_wait_cqe(w.ctx, &cqe, (int)o->timeout_ms + 30000);
		if (rc)
			die("waiting for a completion: %s", xfer_strerror(rc));
		if (cqe->result != 4096)
			die("write %llu with a notification -> %lld (%s)",
			    (unsigned long long)cqe->user_data,
			    (long long)cqe->result,
			    xfer_strerror((int)cqe->result));
		xfer_cq_advance(w.ctx, 1);
		done++;
	}
	printf("notified %u times\n", done);
	worker_release(&w);
	free(tally);
	return 0;
}

/* --- options ------------------------------------------------------------ */

static void usage(void)
{
	fputs("usage: storm run --socket S --target NAME... --workers N --secs T\n"
	      "                 [--kill-every-ms K] [--slice BYTES] [--chunks C]\n"
	      "                 [--timeout-ms MS] [--report-secs R]\n"
	      "       storm mute --socket S --name NAME --size BYTES\n"
	      "       storm notify --socket S --target NAME --count N\n",
	      stderr);
	exit(2);
}

static uint64_t num(const char *s)
{
	uint64_t v;

	if (numparse_size(s, NUMPARSE_ANY_BASE, &v))
		usage();
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "target", required_argument, NULL, 't' },
		{ "workers", required_argument, NULL, 'w' },
		{ "secs", required_argument, NULL, 'T' },
		{ "kill-every-ms", required_argument, NULL, 'k' },
		{ "slice", required_argument, NULL, 'l' },
		{ "chunks", required_argument, NULL, 'c' },
		{ "timeout-ms", required_argument, NULL, 'o' },
		{ "report-secs", required_argument, NULL, 'r' },
		{ "name", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 'z' },
		{ "count", required_argument, NULL, 'C' },
		{ 0 }
	};
	struct opts o = { .workers = 64, .secs = 30, .slice = 64 * 1024,
			  .chunks = 4, .timeout_ms = 20000 };
	int c;

	if (argc < 2)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': o.socket = optarg; break;
		case 't':
			if (o.ntargets == MAX_TARGETS)
				usage();
			o.target[o.ntargets++] = optarg;
			break;
		case 'w': o.workers = (unsigned)num(optarg); break;
		case 'T': o.secs = (unsigned)num(optarg); break;
		case 'k': o.kill_ms = (unsigned)num(optarg); break;
		case 'l': o.slice = num(optarg); break;
		case 'c': o.chunks = (unsigned)num(optarg); break;
		case 'o': o.timeout_ms = (unsigned)num(optarg); break;
		case 'r': o.report_secs = (unsigned)num(optarg); break;
		case 'n': o.name = optarg; break;
		case 'z': o.size = num(optarg); break;
		case 'C': o.count = (unsigned)num(optarg); break;
		default: usage();
		}
	}
	if (!o.socket)
		usage();
	if (strcmp(argv[1], "run") == 0) {
		if (!o.ntargets || !o.workers || o.workers > MAX_WORKERS ||
		    !o.slice || !o.chunks || o.chunks > MAX_CHUNKS)
			usage();
		return storm_run(&o);
	}
	if (strcmp(argv[1], "mute") == 0) {
		if (!o.name || !o.size)
			usage();
		return storm_mute(&o);
	}
	if (strcmp(argv[1], "notify") == 0) {
		if (o.ntargets != 1 || !o.count)
			usage();
		return storm_notify(&o);
	}
	usage();
}
