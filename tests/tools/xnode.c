/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xnode.c - a libxfer client that the multi-node test scripts drive
 * (tests/integration/netns_*.sh), one process per step.  Long (about
 * 1700 lines) because every step the scripts need is one subcommand of
 * one tool, sharing its argument parsing and byte checks.
 *
 *   xnode serve      own a region, export it, publish it, print "ready",
 *                    then watch its notifications and check the bytes
 *                    (or, with --clobber-on-notify, overwrite them; with
 *                    --expect-sequence, check a run of values in order,
 *                    reading nothing before --hold-file appears)
 *   xnode write      move bytes into a remote (or local) region
 *   xnode read       move bytes out of it and check them
 *   xnode notify     a standalone notification, no data (--repeat N: N
 *                    of them, values V, V+1, ..., several in flight)
 *   xnode stream     write until a completion carries an error, then
 *                    show that nothing stays in flight past its deadline
 *                    (--unmap-after: the error comes from unmapping the
 *                    source while writes are in flight)
 *   xnode lookup     look a name up (optionally save the token)
 *   xnode token-info what a token file says (owner, range, addresses)
 *   xnode clock      the clock of submit_us/complete_us, now (so that a
 *                    script can tell what was submitted after an event)
 *
 * One rule for bytes everywhere: a range of a target region written or
 * filled "with seed S" holds, at region offset X, tl_fill_at's byte for
 * (S, X).  A range can thus be checked by whoever sees it, wherever it
 * came from.  Before a range is expected to be written, the expecting
 * side fills it with the complement of those bytes, so a transfer that
 * moved nothing can never pass.
 *
 * Every step prints one line on stdout (line-buffered, so that a script
 * can wait for a line); a mismatch prints "FAIL: ..." and exits 1.
 * Exit 0: everything behaved as asked (including an expected error).
 * Exit 2: usage.  See usage() for the options.
 *
 * Longer than a module should be: the Makefile builds each test tool
 * from one source (plus testlib), and the commands share their option
 * parsing, token handling and the byte rule above.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../integration/testlib.h"
#include "common/numparse.h"
#include "common/token_codec.h"
#include "xfer.h"

#define MAX_EXPECT      256
#define MAX_ERRS        16
#define WAIT_SLICE_MS   100    /* how often a wait looks at the stop flag */
#define DEFAULT_OP_MS   10000  /* xferd's default op_timeout_ms */
#define DEFAULT_GRACE   10000  /* on top of a descriptor's own deadline */
#define STREAM_MAX_MS   60000  /* stream: no error by then is a failure */
#define REPEAT_MAX_MS   120000 /* --repeat 0: stop by itself after this */
#define REPEAT_MAX_OPS  100000 /* ... or after this many */

static volatile sig_atomic_t stop_requested;

enum cmd {
	CMD_SERVE, CMD_WRITE, CMD_READ, CMD_NOTIFY, CMD_STREAM, CMD_LOOKUP,
	CMD_TOKEN_INFO, CMD_CLOCK,
};

/* What a serve process expects: notification `value` and, with
 * has_data, the bytes of seed `seed` in [off, off + len) by then. */
struct expect {
	uint64_t value;
	bool has_data;         /* seed/off/len given */
	uint64_t seed, off, len;
	unsigned seen;
};

struct errset {
	bool any;              /* "any": every negative errno */
	unsigned n;
	int err[MAX_ERRS];     /* negative errnos */
};

struct opts {
	enum cmd cmd;
	const char *socket;
	const char *name;      /* serve: publish under it */
	bool private_name;     /* serve: publish it without XFER_PUBLISH_SHARED */
	const char *lookup;    /* the target, by name */
	const char *token_file;
	uint64_t size;
	bool size_set;
	uint64_t offset;
	enum tl_kind kind;
	uint64_t seed;
	bool seed_set;
	uint64_t export_off, export_len;
	bool export_set;
	uint64_t notify;
	bool notify_set;
	/* Notification messages: what ours carry, what the serve wants
	 * every one to carry (NULL: anything), its sender's name. */
	const char *notify_msg, *sender_name;
	const char *expect_msg, *expect_sender_name;
	unsigned vector;
	bool linked;
	/* The vector as one prepared-list descriptor (--dlist). */
	bool dlist;
	uint32_t timeout_ms;
	uint32_t grace_ms;
	struct errset expect_err;
	bool expect_err_set;
	struct errset allow_err;   /* write --repeat: these may happen too */
	bool allow_err_set;
	const char *expect_path;
	/* --expect-paths A,B: A first, then B from some op on, to the end */
	char expect_first[32], expect_then[32];
	unsigned interval_ms;      /* --repeat: pause between submissions */
	struct expect expects[MAX_EXPECT];
	unsigned nexpects;
	unsigned count;
	bool verify_unchanged;
	bool clobber;          /* serve: overwrite a range once notified */
	unsigned unmap_after;  /* stream: unmap the source after N ok */
	bool unmap_set;
	unsigned repeat;
	bool repeat_set;
	unsigned depth;
	bool until_error;
	uint32_t max_ms;
	unsigned cls;              /* --class: the context's traffic class */
	/* serve: exactly seq_n notifications seq_base.. in this order */
	uint64_t seq_base;
	unsigned seq_n;
	bool seq_set;
	const char *hold_file; /* serve: read no CQE before it exists */
	unsigned accepted;     /* notify --repeat: the first N succeed */
	bool accepted_set;
};

static struct opts opt;

/* --- output and errors --- */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						       noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("FAIL: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	exit(1);
}

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2),
							      noreturn));

#define E(x) { #x, x }
static const struct {
	const char *name;
	int err;
} errnames[] = {
	E(EPERM), E(ENOENT), E(EINTR), E(EIO), E(EBADF), E(EAGAIN),
	E(ENOMEM), E(EACCES), E(EFAULT), E(EBUSY), E(EEXIST), E(EINVAL),
	E(ENOSPC), E(EPIPE), E(ERANGE), E(ENOSYS), E(ENODATA), E(ETIME),
	E(EPROTO), E(EBADMSG), E(EOVERFLOW), E(EMSGSIZE), E(EOPNOTSUPP),
	E(EADDRINUSE), E(EADDRNOTAVAIL), E(ENETDOWN), E(ENETUNREACH),
	E(ECONNABORTED), E(ECONNRESET), E(ENOBUFS), E(ENOTCONN),
	E(ESHUTDOWN), E(ETIMEDOUT), E(ECONNREFUSED), E(EHOSTDOWN),
	E(EHOSTUNREACH), E(ESTALE), E(ECANCELED), E(EKEYREJECTED),
	E(ENOKEY), E(ELOOP),
};
#undef E

/* "ECONNRESET" for -ECONNRESET (or a number for one not in the table). */
static const char *err_name(int64_t neg)
{
	static char buf[32];

	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (-errnames[i].err == neg)
			return errnames[i].name;
	snprintf(buf, sizeof(buf), "E%lld", (long long)-neg);
	return buf;
}

static int err_parse(const char *s)
{
	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (strcmp(errnames[i].name, s) == 0)
			return -errnames[i].err;
	return 0;
}

static bool errset_has(const struct errset *set, int64_t neg)
{
	if (neg >= 0)
		return false;
	if (set->any)
		return true;
	for (unsigned i = 0; i < set->n; i++)
		if (set->err[i] == neg)
			return true;
	return false;
}

static const char *kind_name(enum tl_kind kind)
{
	return kind == TL_HOST ? "memfd" : "malloc";
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* No SA_RESTART: a blocking wait returns and looks at the flag. */
static void catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

/* --- arguments --- */

/* --notify-msg on a notifying SQE of ctx. */
static void set_msg(struct xfer_ctx *ctx, struct xfer_sqe *sqe)
{
	if (!opt.notify_msg)
		return;
	int rc = xfer_sqe_set_message(ctx, sqe, opt.notify_msg,
				      strlen(opt.notify_msg));
	if (rc)
		fail("xfer_sqe_set_message: %s", xfer_strerror(rc));
}

/* --expect-msg, --expect-sender-name: what notification n (not yet
 * consumed) carries; false, said, if it differs. */
static bool msg_ok(struct xfer_ctx *ctx, const struct xfer_cqe *n)
{
	char name[XFER_SENDER_NAME_MAX + 1] = "";
	size_t len;
	const void *m = xfer_cqe_message(ctx, n, &len);

	xfer_cqe_sender_name(ctx, n, name, sizeof(name));
	if (opt.expect_msg && (len != strlen(opt.expect_msg) ||
			       memcmp(m, opt.expect_msg, len))) {
		printf("FAIL notify value=%" PRIu64 ": message of %zu bytes "
		       "'%.*s', want '%s'\n", n->user_data, len, (int)len,
		       m ? (const char *)m : "", opt.expect_msg);
		return false;
	}
	if (opt.expect_sender_name && strcmp(name, opt.expect_sender_name)) {
		printf("FAIL notify value=%" PRIu64 ": sender name '%s', want "
		       "'%s'\n", n->user_data, name, opt.expect_sender_name);
		return false;
	}
	return true;
}

static void usage(FILE *f)
{
	fputs("usage: xnode COMMAND [OPTIONS]\n"
	      "commands:\n"
	      "  serve       --size N [--name NAME [--private]] [--token-file F] [--kind K]\n"
	      "              [--seed S]\n"
	      "              [--export-range OFF:LEN] [--expect-notify V[:SEED:OFF:LEN]]...\n"
	      "              [--expect-msg TEXT] [--expect-sender-name NAME]\n"
	      "              [--count N] [--verify-unchanged] [--clobber-on-notify]\n"
	      "              [--expect-sequence V:N [--hold-file F]]\n"
	      "  write|read  --lookup SPEC|--token-file F --size N [--offset O] [--kind K]\n"
	      "              [--seed S] [--notify V] [--vector K [--linked|--dlist]]\n"
	      "              [--notify-msg TEXT] [--sender-name NAME]\n"
	      "              [--repeat N] [--class latency|bulk|default]\n"
	      "              [--depth D] [--timeout-ms T] [--grace-ms G]\n"
	      "              [--expect-error LIST] [--expect-path PATH]\n"
	      "              [--allow-error LIST (write --repeat)]\n"
	      "  notify      --lookup SPEC|--token-file F --notify V [--expect-error LIST]\n"
	      "              [--repeat N [--depth D] [--accepted K]]\n"
	      "  stream      --lookup SPEC|--token-file F --size N --until-error [--depth D]\n"
	      "              [--timeout-ms T] [--grace-ms G] [--max-ms M] [--expect-error LIST]\n"
	      "              [--unmap-after N]\n"
	      "  lookup      --lookup SPEC [--token-file OUT] [--expect-error LIST]\n"
	      "  token-info  --token-file F\n"
	      "  clock       CLOCK_MONOTONIC in microseconds (as submit_us)\n"
	      "options:\n"
	      "  --socket PATH        xferd's socket (default $XFERD_SOCKET)\n"
	      "  --kind memfd|malloc  local memory: xfer_alloc_host or malloc + xfer_reg\n"
	      "  --private            serve: publish NAME for this uid alone (default:\n"
	      "                       XFER_PUBLISH_SHARED, so that other nodes find it)\n"
	      "  --size N             bytes (suffix K, M, G: powers of 1024)\n"
	      "  --expect-error LIST  e.g. ECONNRESET,ETIMEDOUT or \"any\": the step that\n"
	      "                       fails (lookup, import, a completion) must fail so\n"
	      "  --allow-error LIST   write --repeat: a completion may also fail with one\n"
	      "                       of these (links going down under the writes)\n"
	      "  --expect-path PATH   every completion's path (tcp, memcpy, cma, ...)\n"
	      "  --expect-paths A,B   --repeat: the first completions say A, then from\n"
	      "                       one on B, to the last (both seen)\n"
	      "  --interval-ms T      --repeat: pause between one op's completion and\n"
	      "                       the next submission\n"
	      "  --timeout-ms T       the descriptors' deadline (xfer_sqe_set_timeout)\n"
	      "  --grace-ms G         how long past a deadline a completion may take\n"
	      "                       before the descriptor counts as hung (default 10000)\n"
	      "  --clobber-on-notify  serve: the --expect-notify ranges start with their\n"
	      "                       seed's bytes (what readers must get); the moment\n"
	      "                       notification V arrives, its range is overwritten\n"
	      "  --expect-sequence V:N  serve: exactly N notifications, values V, V+1,\n"
	      "                       ... in this order, then none (a fence of its own\n"
	      "                       NOTIFY comes next); then it waits for SIGTERM\n"
	      "  --hold-file F        serve: read no completion before file F exists\n"
	      "                       (notifications pile up in xferd meanwhile)\n"
	      "  --accepted K         notify --repeat: the first K succeed, every later\n"
	      "                       one fails with an --expect-error errno\n"
	      "  --unmap-after N      stream (--kind malloc): the source is anonymous pages\n"
	      "                       of its own; after N writes succeeded they are\n"
	      "                       unmapped, and the writes after that must fail\n",
	      f);
}

static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("xnode: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	exit(2);
}

/* "123", "4K", "64M", "2G". */
static uint64_t parse_size(const char *what, const char *s)
{
	uint64_t v;

	if (numparse_size(s, NUMPARSE_ANY_BASE, &v))
		usage_error("%s: '%s' is not a size", what, s);
	return v;
}

static uint32_t parse_u32(const char *what, const char *s)
{
	uint64_t v = parse_size(what, s);

	if (v > UINT32_MAX)
		usage_error("%s: '%s' is too large", what, s);
	return (uint32_t)v;
}

/* "V" or "V:SEED:OFF:LEN" (numbers in any base strtoull takes). */
static void parse_expect(const char *s)
{
	struct expect *e;
	char buf[128], *parts[4], *save = NULL;
	unsigned n = 0;

	if (opt.nexpects == MAX_EXPECT)
		usage_error("at most %d --expect-notify", MAX_EXPECT);
	if (strlen(s) >= sizeof(buf))
		usage_error("--expect-notify '%s' is too long", s);
	strcpy(buf, s);
	for (char *p = strtok_r(buf, ":", &save); p && n < 4;
	     p = strtok_r(NULL, ":", &save))
		parts[n++] = p;
	if ((n != 1 && n != 4) || strtok_r(NULL, ":", &save))
		usage_error("--expect-notify '%s' is not V or V:SEED:OFF:LEN", s);
	e = &opt.expects[opt.nexpects++];
	*e = (struct expect){ .value = parse_size("notify value", parts[0]) };
	if (n == 4) {
		e->has_data = true;
		e->seed = parse_size("seed", parts[1]);
		e->off = parse_size("offset", parts[2]);
		e->len = parse_size("length", parts[3]);
	}
}

static void parse_errset(struct errset *set, const char *s)
{
	char buf[256], *save = NULL;

	if (strlen(s) >= sizeof(buf))
		usage_error("--expect-error '%s' is too long", s);
	strcpy(buf, s);
	*set = (struct errset){ 0 };
	for (char *p = strtok_r(buf, ",", &save); p;
	     p = strtok_r(NULL, ",", &save)) {
		if (strcmp(p, "any") == 0) {
			set->any = true;
			continue;
		}
		int e = err_parse(p);
		if (!e)
			usage_error("--expect-error: unknown errno name '%s'", p);
		if (set->n == MAX_ERRS)
			usage_error("--expect-error: at most %d names", MAX_ERRS);
		set->err[set->n++] = e;
	}
	if (!set->any && !set->n)
		usage_error("--expect-error needs a name");
}

static void parse_range(const char *s, uint64_t *off, uint64_t *len)
{
	char buf[64];
	char *colon;

	if (strlen(s) >= sizeof(buf) || !(colon = strchr(strcpy(buf, s), ':')))
		usage_error("'%s' is not OFF:LEN", s);
	*colon = '\0';
	*off = parse_size("offset", buf);
	*len = parse_size("length", colon + 1);
}

enum {
	O_SOCKET = 256, O_NAME, O_LOOKUP, O_TOKEN_FILE, O_SIZE, O_OFFSET,
	O_KIND, O_SEED, O_EXPORT_RANGE, O_NOTIFY, O_VECTOR, O_LINKED, O_DLIST,
	O_TIMEOUT, O_GRACE, O_EXPECT_ERROR, O_EXPECT_PATH, O_EXPECT_NOTIFY,
	O_COUNT, O_VERIFY_UNCHANGED, O_REPEAT, O_DEPTH, O_UNTIL_ERROR, O_CLASS,
	O_MAX_MS, O_CLOBBER, O_UNMAP_AFTER, O_ALLOW_ERROR, O_EXPECT_PATHS,
	O_INTERVAL, O_EXPECT_SEQUENCE, O_HOLD_FILE, O_ACCEPTED, O_PRIVATE,
	O_NOTIFY_MSG, O_SENDER_NAME, O_EXPECT_MSG, O_EXPECT_SENDER_NAME,
	O_HELP,
};

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, O_SOCKET },
		{ "name", required_argument, NULL, O_NAME },
		{ "lookup", required_argument, NULL, O_LOOKUP },
		{ "token-file", required_argument, NULL, O_TOKEN_FILE },
		{ "size", required_argument, NULL, O_SIZE },
		{ "offset", required_argument, NULL, O_OFFSET },
		{ "kind", required_argument, NULL, O_KIND },
		{ "seed", required_argument, NULL, O_SEED },
		{ "export-range", required_argument, NULL, O_EXPORT_RANGE },
		{ "notify", required_argument, NULL, O_NOTIFY },
		{ "notify-msg", required_argument, NULL, O_NOTIFY_MSG },
		{ "sender-name", required_argument, NULL, O_SENDER_NAME },
		{ "expect-msg", required_argument, NULL, O_EXPECT_MSG },
		{ "expect-sender-name", required_argument, NULL,
		  O_EXPECT_SENDER_NAME },
		{ "vector", required_argument, NULL, O_VECTOR },
		{ "linked", no_argument, NULL, O_LINKED },
		{ "dlist", no_argument, NULL, O_DLIST },
		{ "timeout-ms", required_argument, NULL, O_TIMEOUT },
		{ "grace-ms", required_argument, NULL, O_GRACE },
		{ "expect-error", required_argument, NULL, O_EXPECT_ERROR },
		{ "expect-path", required_argument, NULL, O_EXPECT_PATH },
		{ "expect-notify", required_argument, NULL, O_EXPECT_NOTIFY },
		{ "count", required_argument, NULL, O_COUNT },
		{ "verify-unchanged", no_argument, NULL, O_VERIFY_UNCHANGED },
		{ "repeat", required_argument, NULL, O_REPEAT },
		{ "depth", required_argument, NULL, O_DEPTH },
		{ "expect-paths", required_argument, NULL, O_EXPECT_PATHS },
		{ "interval-ms", required_argument, NULL, O_INTERVAL },
		{ "until-error", no_argument, NULL, O_UNTIL_ERROR },
		{ "max-ms", required_argument, NULL, O_MAX_MS },
		{ "clobber-on-notify", no_argument, NULL, O_CLOBBER },
		{ "unmap-after", required_argument, NULL, O_UNMAP_AFTER },
		{ "allow-error", required_argument, NULL, O_ALLOW_ERROR },
		{ "expect-sequence", required_argument, NULL, O_EXPECT_SEQUENCE },
		{ "hold-file", required_argument, NULL, O_HOLD_FILE },
		{ "accepted", required_argument, NULL, O_ACCEPTED },
		{ "private", no_argument, NULL, O_PRIVATE },
		{ "class", required_argument, NULL, O_CLASS },
		{ "help", no_argument, NULL, O_HELP },
		{ 0 },
	};
	static const char *const cmds[] = {
		[CMD_SERVE] = "serve", [CMD_WRITE] = "write", [CMD_READ] = "read",
		[CMD_NOTIFY] = "notify", [CMD_STREAM] = "stream",
		[CMD_LOOKUP] = "lookup", [CMD_TOKEN_INFO] = "token-info",
		[CMD_CLOCK] = "clock",
	};
	int ch;

	if (argc < 2)
		usage_error("no command");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		exit(0);
	}
	unsigned c;
	for (c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++)
		if (strcmp(argv[1], cmds[c]) == 0)
			break;
	if (c == sizeof(cmds) / sizeof(cmds[0]))
		usage_error("unknown command '%s'", argv[1]);
	opt = (struct opts){
		.cmd = (enum cmd)c,
		.kind = TL_HOST,
		.vector = 1,
		.grace_ms = DEFAULT_GRACE,
		.repeat = 1,
		.max_ms = STREAM_MAX_MS,
	};
	optind = 2;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case O_SOCKET: opt.socket = optarg; break;
		case O_NAME: opt.name = optarg; break;
		case O_NOTIFY_MSG: opt.notify_msg = optarg; break;
		case O_SENDER_NAME: opt.sender_name = optarg; break;
		case O_EXPECT_MSG: opt.expect_msg = optarg; break;
		case O_EXPECT_SENDER_NAME: opt.expect_sender_name = optarg; break;
		case O_PRIVATE: opt.private_name = true; break;
		case O_LOOKUP: opt.lookup = optarg; break;
		case O_TOKEN_FILE: opt.token_file = optarg; break;
		case O_SIZE:
			opt.size = parse_size("--size", optarg);
			opt.size_set = true;
			break;
		case O_OFFSET: opt.offset = parse_size("--offset", optarg); break;
		case O_KIND:
			if (strcmp(optarg, "memfd") == 0 || strcmp(optarg, "host") == 0)
				opt.kind = TL_HOST;
			else if (strcmp(optarg, "malloc") == 0)
				opt.kind = TL_MALLOC;
			else
				usage_error("--kind: '%s' is not memfd or malloc", optarg);
			break;
		case O_SEED:
			opt.seed = parse_size("--seed", optarg);
			opt.seed_set = true;
			break;
		case O_EXPORT_RANGE:
			parse_range(optarg, &opt.export_off, &opt.export_len);
			opt.export_set = true;
			break;
		case O_NOTIFY:
			opt.notify = parse_size("--notify", optarg);
			opt.notify_set = true;
			break;
		case O_VECTOR:
			opt.vector = parse_u32("--vector", optarg);
			if (opt.vector == 0)
				usage_error("--vector must be at least 1");
			break;
		case O_LINKED: opt.linked = true; break;
		case O_DLIST: opt.dlist = opt.linked = true; break;
		case O_TIMEOUT: opt.timeout_ms = parse_u32("--timeout-ms", optarg); break;
		case O_GRACE: opt.grace_ms = parse_u32("--grace-ms", optarg); break;
		case O_EXPECT_ERROR:
			parse_errset(&opt.expect_err, optarg);
			opt.expect_err_set = true;
			break;
		case O_EXPECT_PATH: opt.expect_path = optarg; break;
		case O_EXPECT_NOTIFY: parse_expect(optarg); break;
		case O_COUNT: opt.count = parse_u32("--count", optarg); break;
		case O_VERIFY_UNCHANGED: opt.verify_unchanged = true; break;
		case O_REPEAT:
			opt.repeat = parse_u32("--repeat", optarg);
			opt.repeat_set = true;
			break;
		case O_DEPTH:
			opt.depth = parse_u32("--depth", optarg);
			if (opt.depth == 0)
				usage_error("--depth must be at least 1");
			break;
		case O_UNTIL_ERROR: opt.until_error = true; break;
		case O_EXPECT_PATHS: {
			const char *comma = strchr(optarg, ',');
			if (!comma || comma == optarg || !comma[1] ||
			    (size_t)(comma - optarg) >= sizeof(opt.expect_first) ||
			    strlen(comma + 1) >= sizeof(opt.expect_then))
				usage_error("--expect-paths '%s' is not FIRST,THEN",
					    optarg);
			memcpy(opt.expect_first, optarg, (size_t)(comma - optarg));
			strcpy(opt.expect_then, comma + 1);
			break;
		}
		case O_INTERVAL:
			opt.interval_ms = parse_u32("--interval-ms", optarg);
			break;
		case O_MAX_MS: opt.max_ms = parse_u32("--max-ms", optarg); break;
		case O_CLASS:
			opt.cls = strcmp(optarg, "latency") == 0 ? XFER_CLASS_LATENCY
				: strcmp(optarg, "bulk") == 0 ? XFER_CLASS_BULK
				: strcmp(optarg, "default") == 0 ? XFER_CLASS_DEFAULT
				: XFER_CLASS__COUNT;
			if (opt.cls == XFER_CLASS__COUNT)
				usage_error("--class: latency, bulk or default");
			break;
		case O_CLOBBER: opt.clobber = true; break;
		case O_ALLOW_ERROR:
			parse_errset(&opt.allow_err, optarg);
			opt.allow_err_set = true;
			break;
		case O_UNMAP_AFTER:
			opt.unmap_after = parse_u32("--unmap-after", optarg);
			opt.unmap_set = true;
			break;
		case O_EXPECT_SEQUENCE: {
			char buf[64], *colon;
			if (strlen(optarg) >= sizeof(buf) ||
			    !(colon = strchr(strcpy(buf, optarg), ':')))
				usage_error("--expect-sequence '%s' is not V:N", optarg);
			*colon = '\0';
			opt.seq_base = parse_size("--expect-sequence value", buf);
			opt.seq_n = parse_u32("--expect-sequence count", colon + 1);
			opt.seq_set = true;
			break;
		}
		case O_HOLD_FILE: opt.hold_file = optarg; break;
		case O_ACCEPTED:
			opt.accepted = parse_u32("--accepted", optarg);
			opt.accepted_set = true;
			break;
		case O_HELP: usage(stdout); exit(0);
		default: usage_error("bad option");
		}
	}
	if (optind != argc)
		usage_error("unexpected argument '%s'", argv[optind]);

	bool target = opt.cmd == CMD_WRITE || opt.cmd == CMD_READ ||
		      opt.cmd == CMD_NOTIFY || opt.cmd == CMD_STREAM;
	if (target && !!opt.lookup == !!opt.token_file)
		usage_error("%s needs one of --lookup or --token-file", cmds[c]);
	if (opt.cmd == CMD_LOOKUP && !opt.lookup)
		usage_error("lookup needs --lookup SPEC");
	if (opt.cmd == CMD_TOKEN_INFO && !opt.token_file)
		usage_error("token-info needs --token-file");
	if ((opt.cmd == CMD_SERVE || opt.cmd == CMD_WRITE ||
	     opt.cmd == CMD_READ || opt.cmd == CMD_STREAM) &&
	    (!opt.size_set || opt.size == 0))
		usage_error("%s needs --size (> 0)", cmds[c]);
	if (opt.cmd == CMD_SERVE && !opt.name && !opt.token_file)
		usage_error("serve needs --name or --token-file");
	if (opt.cmd == CMD_SERVE && opt.verify_unchanged &&
	    (!opt.seed_set || opt.nexpects))
		usage_error("--verify-unchanged needs --seed and no --expect-notify");
	if (opt.clobber && (opt.cmd != CMD_SERVE || opt.verify_unchanged))
		usage_error("--clobber-on-notify goes with serve (no --verify-unchanged)");
	if (opt.clobber)
		for (unsigned i = 0; i < opt.nexpects; i++)
			if (!opt.expects[i].has_data)
				usage_error("--clobber-on-notify needs V:SEED:OFF:LEN expectations");
	if (opt.allow_err_set &&
	    (opt.cmd != CMD_WRITE || !opt.repeat_set || opt.expect_err_set))
		usage_error("--allow-error goes with write --repeat (no --expect-error)");
	if (opt.unmap_set && (opt.cmd != CMD_STREAM || opt.kind != TL_MALLOC))
		usage_error("--unmap-after goes with stream --kind malloc");
	if (opt.cmd == CMD_SERVE && opt.export_set &&
	    (opt.export_off > opt.size || opt.export_len > opt.size - opt.export_off))
		usage_error("--export-range outside --size");
	if (opt.cmd == CMD_NOTIFY && !opt.notify_set)
		usage_error("notify needs --notify V");
	if (opt.cmd == CMD_STREAM && !opt.until_error)
		usage_error("stream needs --until-error");
	if (opt.size_set && opt.size % opt.vector)
		usage_error("--size %" PRIu64 " is not a multiple of --vector %u",
			    opt.size, opt.vector);
	if (opt.vector > 1 && opt.notify_set && !opt.linked)
		usage_error("--notify with --vector needs --linked (one notification per batch)");
	if (opt.repeat_set && opt.vector > 1)
		usage_error("--repeat goes with single descriptors (no --vector)");
	if ((opt.seq_set || opt.hold_file) &&
	    (opt.cmd != CMD_SERVE || opt.nexpects || opt.clobber ||
	     opt.verify_unchanged || opt.count))
		usage_error("--expect-sequence and --hold-file go with serve alone");
	if (opt.cmd == CMD_NOTIFY && opt.repeat_set && opt.repeat == 0)
		usage_error("notify --repeat needs a count");
	if (opt.accepted_set &&
	    (opt.cmd != CMD_NOTIFY || !opt.expect_err_set ||
	     opt.accepted > opt.repeat))
		usage_error("--accepted N goes with notify --repeat M (N <= M) "
			    "--expect-error");
	if ((opt.expect_first[0] || opt.interval_ms) &&
	    (!opt.repeat_set || opt.depth > 1 || opt.expect_path))
		usage_error("--expect-paths and --interval-ms go with --repeat "
			    "at depth 1 (no --expect-path)");
	if (opt.cmd == CMD_SERVE)
		for (unsigned i = 0; i < opt.nexpects; i++) {
			const struct expect *e = &opt.expects[i];
			if (e->has_data &&
			    (e->off > opt.size || e->len > opt.size - e->off))
				usage_error("--expect-notify range %" PRIu64 "+%" PRIu64
					    " outside --size", e->off, e->len);
		}
}

/* --- tokens --- */

static void hex(const uint8_t *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
	out[2 * n] = '\0';
}

/* "instance=... node=... addrs=10.0.1.2/24:7474,..." of a token. */
static void token_describe(const void *tok, size_t len, char *out, size_t outlen)
{
	struct token t;
	char id[2 * TOKEN_INSTANCE_LEN + 1];
	size_t n;

	if (token_decode(tok, len, &t)) {
		snprintf(out, outlen, "(not a token this build can decode)");
		return;
	}
	hex(t.instance_id, sizeof(t.instance_id), id);
	n = (size_t)snprintf(out, outlen,
			     "instance=%s node=%s region=%" PRIu64 " range=%" PRIu64
			     "+%" PRIu64 " region_length=%" PRIu64 " addrs=",
			     id, t.node_name[0] ? t.node_name : "-", t.region,
			     t.offset, t.length, t.region_length);
	for (uint32_t i = 0; i < t.naddrs && n < outlen; i++) {
		const struct token_addr *a = &t.addrs[i];
		char ip[64];
		if (a->ip_len == 4)
			snprintf(ip, sizeof(ip), "%u.%u.%u.%u", a->ip[0], a->ip[1],
				 a->ip[2], a->ip[3]);
		else
			hex(a->ip, 16, ip);
		n += (size_t)snprintf(out + n, outlen - n, "%s%s/%u:%u",
				      i ? "," : "", ip, a->prefix_len, a->port);
	}
	if (t.naddrs == 0 && n < outlen)
		snprintf(out + n, outlen - n, "-");
}

static void write_token_file(const char *path, const void *tok, size_t len)
{
	char tmp[4096];
	FILE *f;

	/* Renamed into place: a reader never sees half a token. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "we");
	if (!f)
		fail("cannot create %s: %s", tmp, strerror(errno));
	if (fwrite(tok, 1, len, f) != len || fclose(f))
		fail("cannot write %s: %s", tmp, strerror(errno));
	if (rename(tmp, path))
		fail("cannot rename %s to %s: %s", tmp, path, strerror(errno));
}

static size_t read_token_file(const char *path, void *tok)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		fail("cannot open token file %s: %s", path, strerror(errno));
	n = fread(tok, 1, XFER_TOKEN_MAX, f);
	bool more = fgetc(f) != EOF;
	fclose(f);
	if (n == 0 || more)
		fail("token file %s: %s", path,
		     n ? "longer than XFER_TOKEN_MAX" : "empty");
	return n;
}

/* A step before any descriptor failed with rc: exit 0 if that was
 * expected, else fail. */
static void step_failed(const char *step, int rc)
{
	if (opt.expect_err_set && errset_has(&opt.expect_err, rc)) {
		printf("expected error at %s: %s (%s)\n", step, err_name(rc),
		       xfer_strerror(rc));
		printf("ok\n");
		exit(0);
	}
	fail("%s: %s (%s)", step, err_name(rc), xfer_strerror(rc));
}

static struct xfer_ctx *open_ctx(void)
{
	struct xfer_ctx *ctx = NULL;
	int rc = xfer_open_class(opt.socket, opt.sender_name, opt.cls, &ctx);

	if (rc)
		fail("xfer_open(%s): %s (%s)",
		     opt.socket ? opt.socket : "$XFERD_SOCKET", err_name(rc),
		     xfer_strerror(rc));
	return ctx;
}

/* The target token, by name or from a file. */
static size_t get_token(struct xfer_ctx *ctx, uint8_t *tok)
{
	char desc[512];
	size_t len = XFER_TOKEN_MAX;

	if (opt.lookup) {
		uint64_t t0 = now_us();
		int rc = xfer_lookup(ctx, opt.lookup, tok, &len);
		if (rc)
			step_failed("lookup", rc);
		token_describe(tok, len, desc, sizeof(desc));
		printf("lookup %s: %zu bytes in %.1f ms, %s\n", opt.lookup, len,
		       (double)(now_us() - t0) / 1000.0, desc);
	} else {
		len = read_token_file(opt.token_file, tok);
		token_describe(tok, len, desc, sizeof(desc));
		printf("token %s: %zu bytes, %s\n", opt.token_file, len, desc);
	}
	return len;
}

static struct xfer_remote *import_token(struct xfer_ctx *ctx,
					const uint8_t *tok, size_t len)
{
	struct xfer_remote *r = NULL;
	uint64_t t0 = now_us();
	int rc = xfer_import(ctx, tok, len, &r);

	if (rc)
		step_failed("import", rc);
	printf("import: handle %" PRIu64 ", %" PRIu64 " bytes in %.1f ms\n",
	       xfer_remote_handle(r), xfer_remote_len(r),
	       (double)(now_us() - t0) / 1000.0);
	return r;
}

/* --- waiting for completions --- */

static struct xfer_sqe *get_sqe(struct xfer_ctx *ctx)
{
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);

	if (!sqe)
		fail("no free SQE (ring smaller than the batch?)");
	return sqe;
}

/*
 * The next CQE, waiting until deadline_us at most (in slices, so that a
 * stop request is seen).  Returns false on timeout or when stopping was
 * requested and stop_ok.
 */
static bool next_cqe(struct xfer_ctx *ctx, uint64_t deadline_us, bool stop_ok,
		     struct xfer_cqe *out)
{
	for (;;) {
		struct xfer_cqe *c;
		uint64_t now = now_us();
		if (now >= deadline_us || (stop_ok && stop_requested))
			return false;
		uint64_t left_ms = (deadline_us - now + 999) / 1000;
		int rc = xfer_wait_cqe(ctx, &c, (int)(left_ms < WAIT_SLICE_MS
						      ? left_ms : WAIT_SLICE_MS));
		if (rc == -ETIME || rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc)
			fail("waiting for a completion: %s (%s)", err_name(rc),
			     xfer_strerror(rc));
		*out = *c;
		xfer_cq_advance(ctx, 1);
		return true;
	}
}

/* How long after submission a descriptor may take to complete. */
static uint64_t op_limit_us(void)
{
	uint64_t ms = (opt.timeout_ms ? opt.timeout_ms : DEFAULT_OP_MS) +
		      (uint64_t)opt.grace_ms;
	return ms * 1000u;
}

/* --- write / read --- */

/*
 * A unit is what completes with one CQE: one descriptor, or a linked
 * batch of opt.vector descriptors.  Descriptor i of a vector moves chunk
 * i of the local buffer to chunk (K-1-i) of the remote range, so that a
 * path that ignored the offsets would put the bytes in the wrong place.
 */
struct unit {
	uint64_t submit_us, complete_us;
	int64_t result;
	uint16_t path;
	uint32_t flags;
	bool done;
};

static uint64_t remote_chunk_off(unsigned i, uint64_t chunk)
{
	return opt.offset + (uint64_t)(opt.vector - 1 - i) * chunk;
}

/* Local bytes as the remote range should hold them (or, inverted, as it
 * must not). */
static void fill_local(uint8_t *p, bool invert)
{
	uint64_t chunk = opt.size / opt.vector;

	for (unsigned i = 0; i < opt.vector; i++) {
		uint8_t *q = p + (uint64_t)i * chunk;
		tl_fill_at(q, chunk, opt.seed, remote_chunk_off(i, chunk));
		if (invert)
			for (uint64_t j = 0; j < chunk; j++)
				q[j] = (uint8_t)~q[j];
	}
}

static void check_local(const uint8_t *p)
{
	uint64_t chunk = opt.size / opt.vector;

	for (unsigned i = 0; i < opt.vector; i++) {
		uint64_t at = remote_chunk_off(i, chunk);
		size_t bad = tl_check_at(p + (uint64_t)i * chunk, chunk,
					 opt.seed, at);
		if (bad)
			fail("read: byte at remote offset %" PRIu64
			     " (local %" PRIu64 ") differs from seed %" PRIu64,
			     at + bad - 1, (uint64_t)i * chunk + bad - 1,
			     opt.seed);
	}
}

/* --dlist: the vector's chunks as two prepared lists, made once. */
static struct xfer_dlist *dl_local, *dl_remote;

static void make_lists(struct xfer_ctx *ctx, uint64_t lh, uint64_t rh)
{
	uint64_t chunk = opt.size / opt.vector;
	uint64_t *lo = calloc(opt.vector, sizeof(*lo));
	uint64_t *ro = calloc(opt.vector, sizeof(*ro));

	if (!lo || !ro)
		fail("out of memory");
	for (unsigned i = 0; i < opt.vector; i++) {
		lo[i] = (uint64_t)i * chunk;
		ro[i] = remote_chunk_off(i, chunk);
	}
	int rc = xfer_dlist_create(ctx, lh, opt.vector, lo, NULL, chunk,
				   &dl_local);
	if (!rc)
		rc = xfer_dlist_create(ctx, rh, opt.vector, ro, NULL, chunk,
				       &dl_remote);
	if (rc)
		fail("xfer_dlist_create: %s", xfer_strerror(rc));
	free(lo);
	free(ro);
}

static void prep_unit(struct xfer_ctx *ctx, uint64_t lh, uint64_t rh,
		      unsigned u, unsigned nunits)
{
	if (opt.dlist) {
		/* Pair i: local chunk i -> remote list entry i (the chunk at
		 * remote_chunk_off(i)), as the linked vector moves it. */
		struct xfer_sqe *sqe = get_sqe(ctx);
		int rc = xfer_prep_dlist(ctx, sqe, opt.cmd == CMD_WRITE
					 ? XFER_OP_WRITE_DLIST
					 : XFER_OP_READ_DLIST, dl_local,
					 dl_remote, opt.vector, NULL, NULL,
					 (uint64_t)u + 1);
		if (rc)
			fail("xfer_prep_dlist: %s", xfer_strerror(rc));
		if (opt.timeout_ms)
			xfer_sqe_set_timeout(sqe, opt.timeout_ms);
		if (opt.notify_set && u == nunits - 1) {
			xfer_sqe_set_notify(sqe, opt.notify);
			set_msg(ctx, sqe);
		}
		return;
	}
	bool write = opt.cmd == CMD_WRITE;
	uint64_t chunk = opt.size / opt.vector;
	unsigned first = 0, last = opt.vector - 1;

	if (!opt.linked && opt.vector > 1)
		first = last = u;   /* independent descriptors: one each */
	for (unsigned i = first; i <= last; i++) {
		struct xfer_sqe *sqe = get_sqe(ctx);
		xfer_prep_rw(sqe, write ? XFER_OP_WRITE : XFER_OP_READ, lh,
			     (uint64_t)i * chunk, rh, remote_chunk_off(i, chunk),
			     chunk, (uint64_t)u + 1);
		if (opt.timeout_ms)
			xfer_sqe_set_timeout(sqe, opt.timeout_ms);
		if (i < last)
			xfer_sqe_set_link(sqe);
		else if (opt.notify_set && u == nunits - 1) {
			xfer_sqe_set_notify(sqe, opt.notify);
			set_msg(ctx, sqe);
		}
	}
}

static int cmd_rw(void)
{
	const bool write = opt.cmd == CMD_WRITE;
	const bool repeat = opt.repeat_set;
	const unsigned per_unit = opt.dlist ? 1 : opt.linked ? opt.vector : 1;
	unsigned nunits = opt.linked ? 1 : opt.vector;
	uint8_t tok[XFER_TOKEN_MAX];
	struct tl_buf local;
	struct unit *units;
	unsigned depth, submitted = 0, done = 0, failed = 0, oldest = 0;
	uint64_t bytes = opt.dlist ? opt.size : opt.size / opt.vector * per_unit;
	uint64_t t_start, stop_at;

	if (repeat)
		nunits = opt.repeat ? opt.repeat : REPEAT_MAX_OPS;
	depth = opt.depth ? opt.depth : (repeat ? 1 : nunits);
	catch_stop_signals();

	struct xfer_ctx *ctx = open_ctx();
	size_t toklen = get_token(ctx, tok);
	struct xfer_remote *remote = import_token(ctx, tok, toklen);
	if (!opt.expect_err_set &&
	    (opt.offset > xfer_remote_len(remote) ||
	     opt.size > xfer_remote_len(remote) - opt.offset))
		fail("[%" PRIu64 ", +%" PRIu64 ") is outside the token's %" PRIu64
		     " bytes", opt.offset, opt.size, xfer_remote_len(remote));

	tl_buf_alloc(ctx, opt.kind, opt.size, &local);
	if (opt.dlist)
		make_lists(ctx, local.handle, xfer_remote_handle(remote));
	/* Writes carry the pattern; reads start from its complement. */
	fill_local(local.ptr, !write);
	units = calloc(nunits, sizeof(*units));
	if (!units)
		fail("out of memory");

	printf("%s: %u unit(s) of %u descriptor(s), %" PRIu64 " bytes each, "
	       "local %s <-> remote [%" PRIu64 ", +%" PRIu64 "), seed %" PRIu64
	       "%s\n", write ? "write" : "read", repeat && !opt.repeat ? 0 : nunits,
	       per_unit, bytes, kind_name(local.kind), opt.offset, opt.size,
	       opt.seed, repeat && !opt.repeat ? " (until SIGTERM)" : "");
	t_start = now_us();
	stop_at = t_start + (uint64_t)REPEAT_MAX_MS * 1000u;

	while (done < submitted || submitted < nunits) {
		bool stopping = stop_requested ||
				(repeat && !opt.repeat && now_us() >= stop_at);
		/* Keep `depth` units in flight while there are more. */
		while (!stopping && submitted < nunits &&
		       submitted - done < depth &&
		       xfer_sq_space(ctx) >= per_unit) {
			if (opt.interval_ms && submitted) {
				struct timespec gap = {
					.tv_sec = opt.interval_ms / 1000,
					.tv_nsec = opt.interval_ms % 1000 * 1000000L,
				};
				nanosleep(&gap, NULL);
			}
			prep_unit(ctx, local.handle, xfer_remote_handle(remote),
				  submitted, nunits);
			/* Stamped before the hand-over: xferd may run the
			 * whole op before xfer_submit() returns here. */
			units[submitted].submit_us = now_us();
			int n = xfer_submit(ctx);
			if (n < (int)per_unit)
				fail("xfer_submit -> %d, want %u", n, per_unit);
			if (repeat)
				printf("submitted op=%u submit_us=%" PRIu64 "\n",
				       submitted + 1, units[submitted].submit_us);
			submitted++;
		}
		if (done == submitted)
			break;  /* stopping with nothing in flight */
		/* The oldest unit in flight sets the deadline. */
		while (units[oldest].done)
			oldest++;
		struct xfer_cqe c;
		if (!next_cqe(ctx, units[oldest].submit_us + op_limit_us(), false,
			      &c))
			fail("op %u: no completion %.1f s after submission "
			     "(deadline %u ms + %u ms grace): it hangs", oldest + 1,
			     (double)(now_us() - units[oldest].submit_us) / 1e6,
			     opt.timeout_ms ? opt.timeout_ms : DEFAULT_OP_MS,
			     opt.grace_ms);
		if (c.user_data == 0 || c.user_data > submitted ||
		    units[c.user_data - 1].done)
			fail("a completion nobody asked for: user_data %" PRIu64
			     " result %" PRId64 " flags %#x", c.user_data, c.result,
			     c.flags);
		struct unit *un = &units[c.user_data - 1];
		un->done = true;
		un->complete_us = now_us();
		un->result = c.result;
		un->path = c.path;
		un->flags = c.flags;
		done++;
		if (c.result < 0)
			failed++;
		if (c.result < 0 && opt.allow_err_set) {
			/* Like a client that backs off: no busy loop of writes
			 * that fail at once while the peer is unreachable. */
			struct timespec pause = { .tv_nsec = 10 * 1000000 };
			nanosleep(&pause, NULL);
		}
		if (nunits <= 64 || repeat || c.result < 0)
			printf("op=%" PRIu64 " result=%" PRId64 "%s%s path=%s "
			       "submit_us=%" PRIu64 " complete_us=%" PRIu64 "\n",
			       c.user_data, c.result, c.result < 0 ? " " : "",
			       c.result < 0 ? err_name(c.result) : "",
			       xfer_path_name(c.path), un->submit_us,
			       un->complete_us);
	}

	/* Every completion, checked; with --expect-paths, in order. */
	bool then_seen = false;
	for (unsigned u = 0; u < done && opt.expect_first[0]; u++) {
		const char *pn = xfer_path_name(units[u].path);
		if (units[u].result < 0)
			continue;
		if (strcmp(pn, opt.expect_then) == 0)
			then_seen = true;
		else if (then_seen || strcmp(pn, opt.expect_first))
			fail("op %u: path %s; want %s first, then %s to the end",
			     u + 1, pn, opt.expect_first, opt.expect_then);
	}
	if (opt.expect_first[0] && !then_seen)
		fail("no op went %s (all %s)", opt.expect_then, opt.expect_first);
	if (opt.expect_first[0] && done &&
	    strcmp(xfer_path_name(units[0].path), opt.expect_first))
		fail("op 1: path %s, want %s", xfer_path_name(units[0].path),
		     opt.expect_first);
	for (unsigned u = 0; u < done; u++) {
		const struct unit *un = &units[u];
		if (un->flags & XFER_CQE_F_NOTIFY)
			fail("op %u: its own completion is flagged NOTIFY", u + 1);
		if (opt.expect_err_set) {
			if (!errset_has(&opt.expect_err, un->result))
				fail("op %u: result %" PRId64 " (%s), want an error of "
				     "the expected set", u + 1, un->result,
				     un->result < 0 ? err_name(un->result) : "success");
			continue;
		}
		if (opt.allow_err_set && un->result < 0) {
			if (!errset_has(&opt.allow_err, un->result))
				fail("op %u: result %" PRId64 " (%s), outside the "
				     "allowed errors", u + 1, un->result,
				     err_name(un->result));
			continue;
		}
		if (un->result != (int64_t)bytes)
			fail("op %u: result %" PRId64 " (%s), want %" PRIu64, u + 1,
			     un->result,
			     un->result < 0 ? err_name(un->result) : "short",
			     bytes);
		if (opt.expect_path &&
		    strcmp(xfer_path_name(un->path), opt.expect_path) != 0)
			fail("op %u: path %s, want %s", u + 1,
			     xfer_path_name(un->path), opt.expect_path);
	}
	double secs = (double)(now_us() - t_start) / 1e6;
	if (opt.expect_err_set) {
		printf("expected error at completion: %u of %u op(s) failed as expected\n",
		       failed, done);
	} else {
		if (!write)
			check_local(local.ptr);
		printf("%s %u op(s), %" PRIu64 " bytes in %.3f s, path %s%s\n",
		       write ? "wrote" : "read and verified", done - failed,
		       (uint64_t)(done - failed) * bytes, secs,
		       done ? xfer_path_name(units[0].path) : "-",
		       opt.notify_set ? ", with notify" : "");
		if (failed)
			printf("%u op(s) failed with allowed errors\n", failed);
	}
	free(units);
	tl_buf_free(ctx, &local);
	xfer_unimport(ctx, remote);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}

/* --- notify --- */

static int cmd_notify(void)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_ctx *ctx = open_ctx();
	size_t toklen = get_token(ctx, tok);
	struct xfer_remote *remote = import_token(ctx, tok, toklen);
	const unsigned n = opt.repeat;
	const unsigned depth = opt.depth ? opt.depth : n;
	unsigned sent = 0, done = 0, ok = 0, refused = 0;

	/* Notification i carries value opt.notify + i; their completions
	 * come in order (user_data i). */
	while (done < n) {
		while (sent < n && sent - done < depth) {
			struct xfer_sqe *sqe = xfer_get_sqe(ctx);
			if (!sqe)
				break;
			xfer_prep_notify(sqe, xfer_remote_handle(remote),
					 opt.notify + sent, sent);
			set_msg(ctx, sqe);
			if (opt.timeout_ms)
				xfer_sqe_set_timeout(sqe, opt.timeout_ms);
			sent++;
		}
		if (xfer_submit(ctx) < 0)
			fail("xfer_submit");
		struct xfer_cqe c;
		if (!next_cqe(ctx, now_us() + op_limit_us(), false, &c))
			fail("notify %u: no completion within its deadline: it "
			     "hangs", done);
		if (c.user_data != done)
			fail("completion of notify %" PRIu64 ", want %u",
			     c.user_data, done);
		if (n == 1 || (c.result < 0 && refused == 0))
			printf("op=%u result=%" PRId64 "%s%s path=%s\n", done + 1,
			       c.result, c.result < 0 ? " " : "",
			       c.result < 0 ? err_name(c.result) : "",
			       xfer_path_name(c.path));
		if (c.result == 0 && refused == 0) {
			ok++;
		} else if (!opt.expect_err_set ||
			   !errset_has(&opt.expect_err, c.result)) {
			fail("notify %u (value %" PRIu64 "): result %" PRId64
			     " (%s)%s", done, opt.notify + done, c.result,
			     err_name(c.result),
			     c.result == 0 ? " after a refused one" : "");
		} else {
			refused++;
		}
		done++;
	}
	printf("notified %u: %u accepted, %u refused\n", n, ok, refused);
	if (opt.accepted_set && ok != opt.accepted)
		fail("%u accepted, want %u", ok, opt.accepted);
	if (opt.expect_err_set && !opt.accepted_set && refused == 0)
		fail("notify: no expected error");
	xfer_unimport(ctx, remote);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}

/* --- stream --- */

/* A write of the stream in flight: its user_data and submission time. */
struct slot {
	uint64_t id, submit_us;
	bool after_unmap;      /* submitted once its source was gone */
};

/*
 * A source that can be taken away from under xferd while it still has
 * it registered and writes from it in flight: private anonymous pages of
 * this process, registered with xfer_reg() as --kind malloc memory is
 * (xferd reads them with CMA), but mapped on their own, so that
 * munmap() removes exactly them and nothing else of the heap.
 */
static void map_source(struct xfer_ctx *ctx, size_t len, struct tl_buf *b)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("mmap %zu: %s", len, strerror(errno));
	*b = (struct tl_buf){ .kind = TL_MALLOC, .len = len, .ptr = p };
	int rc = xfer_reg(ctx, p, len, &b->mem);
	if (rc)
		fail("xfer_reg: %s (%s)", err_name(rc), xfer_strerror(rc));
	b->handle = xfer_mem_handle(b->mem);
}

static void unmap_source(struct tl_buf *b)
{
	if (munmap(b->ptr, b->len))
		fail("munmap: %s", strerror(errno));
}

static int cmd_stream(void)
{
	const unsigned depth = opt.depth ? opt.depth : 4;
	struct errset allowed = opt.expect_err;
	uint8_t tok[XFER_TOKEN_MAX];
	struct tl_buf local;
	struct slot *slots;
	uint64_t ok = 0, submitted = 0, done = 0, first_err_at = 0;
	uint64_t last_ok_us = 0, slowest_us = 0;
	int64_t first_err = 0;
	unsigned counts[MAX_ERRS + 1] = { 0 }, late_ok = 0, other = 0;
	bool unmapped = false;

	if (!opt.expect_err_set)
		allowed = (struct errset){ .n = 2,
					   .err = { -ECONNRESET, -ETIMEDOUT } };
	catch_stop_signals();
	struct xfer_ctx *ctx = open_ctx();
	size_t toklen = get_token(ctx, tok);
	struct xfer_remote *remote = import_token(ctx, tok, toklen);
	if (opt.offset > xfer_remote_len(remote) ||
	    opt.size > xfer_remote_len(remote) - opt.offset)
		fail("[%" PRIu64 ", +%" PRIu64 ") is outside the token's %" PRIu64
		     " bytes", opt.offset, opt.size, xfer_remote_len(remote));
	if (opt.unmap_set)
		map_source(ctx, opt.size, &local);
	else
		tl_buf_alloc(ctx, opt.kind, opt.size, &local);
	tl_fill_at(local.ptr, opt.size, opt.seed, opt.offset);
	slots = calloc(depth, sizeof(*slots));
	if (!slots)
		fail("out of memory");

	const uint64_t t0 = now_us();
	const uint64_t give_up = t0 + (uint64_t)opt.max_ms * 1000u;
	printf("stream: writes of %" PRIu64 " bytes, %u in flight, deadline %u ms\n",
	       opt.size, depth, opt.timeout_ms ? opt.timeout_ms : DEFAULT_OP_MS);
	if (opt.unmap_set && opt.unmap_after == 0) {
		unmap_source(&local);
		unmapped = true;
		printf("unmapped the source before the first write\n");
	}
	for (;;) {
		/* Refill free slots until the first error, then only drain. */
		for (unsigned i = 0; i < depth && !first_err && !stop_requested;
		     i++) {
			if (slots[i].id)
				continue;
			struct xfer_sqe *sqe = get_sqe(ctx);
			xfer_prep_write(sqe, local.handle, 0,
					xfer_remote_handle(remote), opt.offset,
					opt.size, submitted + 1);
			if (opt.timeout_ms)
				xfer_sqe_set_timeout(sqe, opt.timeout_ms);
			slots[i] = (struct slot){ .id = submitted + 1,
						  .submit_us = now_us(),
						  .after_unmap = unmapped };
			if (xfer_submit(ctx) != 1)
				fail("xfer_submit");
			submitted++;
		}
		if (done == submitted)
			break;
		if (!first_err && now_us() >= give_up)
			fail("no error after %u ms of writes (%" PRIu64 " ok)",
			     opt.max_ms, ok);
		/* The oldest write in flight bounds the wait. */
		uint64_t oldest = UINT64_MAX;
		for (unsigned i = 0; i < depth; i++)
			if (slots[i].id && slots[i].submit_us < oldest)
				oldest = slots[i].submit_us;
		uint64_t deadline = oldest + op_limit_us();
		if (!first_err && deadline > give_up)
			deadline = give_up;
		struct xfer_cqe c;
		if (!next_cqe(ctx, deadline, false, &c)) {
			if (!first_err && now_us() >= give_up)
				continue;  /* reported at the top */
			fail("%" PRIu64 " write(s) still in flight %.1f s after "
			     "submission (deadline %u ms + %u ms grace): they hang",
			     submitted - done, (double)(now_us() - oldest) / 1e6,
			     opt.timeout_ms ? opt.timeout_ms : DEFAULT_OP_MS,
			     opt.grace_ms);
		}
		unsigned s;
		for (s = 0; s < depth; s++)
			if (slots[s].id && slots[s].id == c.user_data)
				break;
		if (s == depth)
			fail("a completion nobody asked for: user_data %" PRIu64,
			     c.user_data);
		uint64_t now = now_us();
		uint64_t took = now - slots[s].submit_us;
		bool after_unmap = slots[s].after_unmap;
		slots[s].id = 0;
		done++;
		if (took > slowest_us)
			slowest_us = took;
		if (c.result == (int64_t)opt.size) {
			if (after_unmap)
				fail("write %" PRIu64 ": submitted after its source "
				     "was unmapped, yet it succeeded", c.user_data);
			if (first_err)
				late_ok++;
			ok++;
			last_ok_us = now;
			if (ok == 1)
				printf("streaming: first write ok, path %s\n",
				       xfer_path_name(c.path));
			if (opt.unmap_set && !unmapped && ok == opt.unmap_after) {
				unmap_source(&local);
				unmapped = true;
				printf("unmapped the source after %" PRIu64 " ok "
				       "write(s), %" PRIu64 " in flight\n", ok,
				       submitted - done);
			}
			continue;
		}
		if (c.result >= 0)
			fail("write %" PRIu64 ": result %" PRId64 ", want %" PRIu64
			     " or an error", c.user_data, c.result, opt.size);
		if (opt.unmap_set && !unmapped)
			fail("write %" PRIu64 ": %s before the source was unmapped",
			     c.user_data, err_name(c.result));
		if (!first_err) {
			first_err = c.result;
			first_err_at = now;
			printf("error %s after %" PRIu64 " ok write(s): %.3f s after "
			       "the last ok one, %.3f s into the stream; draining %"
			       PRIu64 " in flight\n", err_name(c.result), ok,
			       last_ok_us ? (double)(now - last_ok_us) / 1e6 : 0.0,
			       (double)(now - t0) / 1e6, submitted - done);
		}
		unsigned k;
		for (k = 0; k < allowed.n; k++)
			if (allowed.err[k] == c.result)
				break;
		if (k < allowed.n)
			counts[k]++;
		else if (allowed.any)
			counts[MAX_ERRS]++;
		else
			other++;
		printf("write %" PRIu64 ": %s after %.3f s in flight\n", c.user_data,
		       err_name(c.result), (double)took / 1e6);
	}
	if (!first_err)
		fail("stopped before any error (%" PRIu64 " ok write(s))", ok);
	printf("drained: all %" PRIu64 " write(s) completed, the slowest after "
	       "%.3f s; the last %.3f s after the first error\n", submitted,
	       (double)slowest_us / 1e6, (double)(now_us() - first_err_at) / 1e6);
	for (unsigned k = 0; k < allowed.n; k++)
		if (counts[k])
			printf("  %u x %s\n", counts[k], err_name(allowed.err[k]));
	if (counts[MAX_ERRS])
		printf("  %u x other errors (allowed: any)\n", counts[MAX_ERRS]);
	if (late_ok)
		printf("  %u x ok after the first error\n", late_ok);
	if (other)
		fail("%u write(s) failed with an error outside the expected set "
		     "(first error: %s)", other, err_name(first_err));
	if (opt.unmap_set) {
		int rc = xfer_dereg(ctx, local.mem);
		if (rc)
			fail("xfer_dereg of the unmapped source: %s", err_name(rc));
		if (!unmapped)
			unmap_source(&local);
	} else {
		tl_buf_free(ctx, &local);
	}
	xfer_unimport(ctx, remote);
	xfer_close(ctx);
	free(slots);
	printf("ok\n");
	return 0;
}

/* --- lookup, token-info --- */

static int cmd_lookup(void)
{
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_ctx *ctx = open_ctx();
	const char *out = opt.token_file;

	opt.token_file = NULL;
	size_t len = get_token(ctx, tok);
	if (opt.expect_err_set)
		fail("lookup %s succeeded, want an error", opt.lookup);
	if (out)
		write_token_file(out, tok, len);
	xfer_close(ctx);
	printf("ok\n");
	return 0;
}

static int cmd_token_info(void)
{
	uint8_t tok[XFER_TOKEN_MAX];
	char desc[512];
	size_t len = read_token_file(opt.token_file, tok);

	token_describe(tok, len, desc, sizeof(desc));
	printf("%s\n", desc);
	return 0;
}

/* --- serve --- */

static struct expect *find_expect(uint64_t value)
{
	for (unsigned i = 0; i < opt.nexpects; i++)
		if (opt.expects[i].value == value)
			return &opt.expects[i];
	return NULL;
}

/*
 * Reuse the memory the moment its notification said it was done with:
 * every byte of the range becomes the complement of seed's, the end of
 * the range first (what a transfer sends last).
 */
static void clobber_range(uint8_t *p, uint64_t len, uint64_t seed,
			  uint64_t pos)
{
	enum { BLOCK = 64 << 10 };
	uint64_t end = len;

	while (end) {
		uint64_t n = end < BLOCK ? end : BLOCK;
		uint8_t *q = p + end - n;
		tl_fill_at(q, n, seed, pos + end - n);
		for (uint64_t j = 0; j < n; j++)
			q[j] = (uint8_t)~q[j];
		end -= n;
	}
}

/* The next CQE; SIGTERM before it fails (something never came). */
static struct xfer_cqe serve_next(struct xfer_ctx *ctx, const char *what)
{
	struct xfer_cqe c;

	if (!next_cqe(ctx, UINT64_MAX, true, &c))
		fail("stopped while waiting for %s", what);
	return c;
}

/*
 * --expect-sequence: hold (with --hold-file) while notifications pile up
 * in xferd, then take exactly the run asked for, in order, and prove
 * none is left: a NOTIFY of its own region goes behind whatever xferd
 * still held, so the next notification must be that fence.
 */
static void serve_sequence(struct xfer_ctx *ctx, uint64_t handle)
{
	const uint64_t fence = ~0ull;

	if (opt.hold_file) {
		printf("holding: reading nothing until %s exists\n",
		       opt.hold_file);
		while (access(opt.hold_file, F_OK) != 0) {
			if (stop_requested)
				fail("stopped while holding");
			usleep(10000);
		}
	}
	for (unsigned i = 0; i < opt.seq_n; i++) {
		struct xfer_cqe c = serve_next(ctx, "the sequence");
		if (!(c.flags & XFER_CQE_F_NOTIFY) || c.handle != handle ||
		    c.user_data != opt.seq_base + i || c.result != 0)
			fail("sequence: CQE %u of %u: flags %u handle %" PRIu64
			     " value %" PRIu64 " result %" PRId64 ", want "
			     "notification %" PRIu64, i, opt.seq_n, c.flags,
			     c.handle, c.user_data, c.result, opt.seq_base + i);
	}
	struct xfer_sqe *sqe = get_sqe(ctx);
	xfer_prep_notify(sqe, handle, fence, 1);
	if (xfer_submit(ctx) != 1)
		fail("xfer_submit (fence)");
	struct xfer_cqe c = serve_next(ctx, "the fence's completion");
	if ((c.flags & XFER_CQE_F_NOTIFY) || c.user_data != 1 || c.result)
		fail("after the sequence: flags %u value %" PRIu64 " result %"
		     PRId64 ", want the fence's completion", c.flags,
		     c.user_data, c.result);
	c = serve_next(ctx, "the fence");
	if (!(c.flags & XFER_CQE_F_NOTIFY) || c.user_data != fence)
		fail("after the sequence: notification %" PRIu64 ", want only "
		     "the fence", c.user_data);
	printf("sequence of %u notification(s) from %" PRIu64 " in order, "
	       "nothing else held\n", opt.seq_n, opt.seq_base);
	while (!stop_requested)
		usleep(10000);
}

static int cmd_serve(void)
{
	struct tl_buf b;
	uint8_t tok[XFER_TOKEN_MAX];
	size_t toklen = sizeof(tok);
	unsigned seen = 0, bad = 0;
	char desc[512];
	int rc;

	catch_stop_signals();
	struct xfer_ctx *ctx = open_ctx();
	tl_buf_alloc(ctx, opt.kind, opt.size, &b);
	if (opt.seed_set)
		tl_fill(b.ptr, b.len, opt.seed);
	else if (b.kind == TL_MALLOC)
		memset(b.ptr, 0, b.len);
	/* Expected ranges start as the complement of what must land (with
	 * --clobber-on-notify: as what readers must get), the first
	 * expectation last so that it wins where ranges overlap. */
	for (unsigned i = opt.nexpects; i-- > 0;) {
		const struct expect *e = &opt.expects[i];
		if (!e->has_data)
			continue;
		tl_fill_at(b.ptr + e->off, e->len, e->seed, e->off);
		if (opt.clobber)
			continue;
		for (uint64_t j = 0; j < e->len; j++)
			b.ptr[e->off + j] = (uint8_t)~b.ptr[e->off + j];
	}
	uint64_t eoff = opt.export_set ? opt.export_off : 0;
	uint64_t elen = opt.export_set ? opt.export_len : opt.size;
	rc = xfer_export(b.mem, eoff, elen, tok, &toklen);
	if (rc)
		fail("xfer_export: %s", err_name(rc));
	if (opt.token_file)
		write_token_file(opt.token_file, tok, toklen);
	if (opt.name) {
		/* Shared unless asked: the scripts publish for other nodes. */
		rc = xfer_publish_flags(ctx, opt.name, tok, toklen,
					opt.private_name ? 0
							 : XFER_PUBLISH_SHARED);
		if (rc)
			fail("xfer_publish(%s): %s (%s)", opt.name, err_name(rc),
			     xfer_strerror(rc));
	}
	token_describe(tok, toklen, desc, sizeof(desc));
	printf("ready name=%s size=%" PRIu64 " kind=%s handle=%" PRIu64
	       " token_bytes=%zu %s\n", opt.name ? opt.name : "-", opt.size,
	       kind_name(b.kind), b.handle, toklen, desc);
	if (opt.seq_set) {
		serve_sequence(ctx, b.handle);
		tl_buf_free(ctx, &b);
		xfer_close(ctx);
		printf("ok\n");
		return 0;
	}

	while (!stop_requested && (!opt.count || seen < opt.count)) {
		struct xfer_cqe *c;
		rc = xfer_wait_cqe(ctx, &c, WAIT_SLICE_MS);
		if (rc == -ETIME || rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc)
			fail("xferd went away: %s (%s)", err_name(rc),
			     xfer_strerror(rc));
		struct xfer_cqe n = *c;
		bool carried = !(c->flags & XFER_CQE_F_NOTIFY) || msg_ok(ctx, c);
		xfer_cq_advance(ctx, 1);
		if (!(n.flags & XFER_CQE_F_NOTIFY))
			fail("a completion that is no notification: user_data %"
			     PRIu64 " result %" PRId64, n.user_data, n.result);
		seen++;
		if (!carried) {
			bad++;
			continue;
		}
		if (n.handle != b.handle) {
			printf("FAIL notify value=%" PRIu64 ": for handle %" PRIu64
			       ", ours is %" PRIu64 "\n", n.user_data, n.handle,
			       b.handle);
			bad++;
			continue;
		}
		struct expect *e = find_expect(n.user_data);
		if (!e) {
			printf("notify value=%" PRIu64 " bytes=%" PRId64 "%s\n",
			       n.user_data, n.result,
			       opt.nexpects ? " FAIL: not expected" : "");
			bad += opt.nexpects ? 1 : 0;
			continue;
		}
		e->seen++;
		if (opt.clobber) {
			clobber_range(b.ptr + e->off, e->len, e->seed, e->off);
			if (n.result != (int64_t)e->len) {
				printf("FAIL notify value=%" PRIu64 " bytes=%" PRId64
				       ", want %" PRIu64 "\n", n.user_data, n.result,
				       e->len);
				bad++;
				continue;
			}
			printf("notify value=%" PRIu64 " bytes=%" PRId64
			       " ok range=%" PRIu64 "+%" PRIu64 " clobbered\n",
			       n.user_data, n.result, e->off, e->len);
			continue;
		}
		if (!e->has_data) {
			printf("notify value=%" PRIu64 " bytes=%" PRId64 " ok\n",
			       n.user_data, n.result);
			continue;
		}
		size_t at = tl_check_at(b.ptr + e->off, e->len, e->seed, e->off);
		if (at) {
			printf("FAIL notify value=%" PRIu64 " bytes=%" PRId64
			       ": region byte %" PRIu64 " is not seed %" PRIu64
			       "'s (data not in place when notified)\n",
			       n.user_data, n.result, e->off + at - 1, e->seed);
			bad++;
		} else if (n.result != (int64_t)e->len) {
			printf("FAIL notify value=%" PRIu64 " bytes=%" PRId64
			       ", want %" PRIu64 "\n", n.user_data, n.result,
			       e->len);
			bad++;
		} else {
			printf("notify value=%" PRIu64 " bytes=%" PRId64
			       " verified seed=%" PRIu64 " range=%" PRIu64 "+%"
			       PRIu64 "\n", n.user_data, n.result, e->seed,
			       e->off, e->len);
		}
	}
	for (unsigned i = 0; i < opt.nexpects; i++)
		if (!opt.expects[i].seen) {
			printf("FAIL notify value=%" PRIu64 " never came\n",
			       opt.expects[i].value);
			bad++;
		}
	if (opt.verify_unchanged) {
		size_t at = tl_check(b.ptr, b.len, opt.seed);
		if (at) {
			printf("FAIL region changed: byte %zu is not seed %" PRIu64
			       "'s\n", at - 1, opt.seed);
			bad++;
		} else {
			printf("region unchanged (%" PRIu64 " bytes, seed %" PRIu64
			       ")\n", opt.size, opt.seed);
		}
	}
	printf("served %u notification(s), %u bad\n", seen, bad);
	tl_buf_free(ctx, &b);
	xfer_close(ctx);
	if (bad)
		fail("%u check(s) failed", bad);
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_args(argc, argv);
	switch (opt.cmd) {
	case CMD_SERVE: return cmd_serve();
	case CMD_WRITE:
	case CMD_READ: return cmd_rw();
	case CMD_NOTIFY: return cmd_notify();
	case CMD_STREAM: return cmd_stream();
	case CMD_LOOKUP: return cmd_lookup();
	case CMD_TOKEN_INFO: return cmd_token_info();
	case CMD_CLOCK:
		printf("%" PRIu64 "\n", now_us());
		return 0;
	}
	return 2;
}
