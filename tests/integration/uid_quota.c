/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uid_quota.c - what one user may make xferd hold, over all its
 * contexts: prepared lists (count and memory) and notifications held for
 * clients that never read their CQ.
 *
 * Against a private root xferd whose socket belongs to nogroup, with its
 * default limits.  The clients run as unprivileged uids (forked, with
 * the credentials setpriv --reuid --regid --clear-groups would give):
 *
 *  lists: an attacker uid opens 24 contexts and makes lists of 1M
 *  entries with their own lengths (16 MiB of xferd's memory each) in
 *  every one until refused: -ENOBUFS comes at dlist_max_uid_bytes for the
 *  user, not at 24 x dlist_max_client_entries, and xferd's VmRSS grows by
 *  about that and no more; then, in 24 fresh contexts, small lists until
 *  -ENOSPC at exactly dlist_max_per_uid;
 *
 *  notify: 64 contexts of a reader uid each export a region and never
 *  read their CQ; a sender floods them with notifications: past
 *  notify_queue_max_per_uid held for the user the sender hears -ENOBUFS,
 *  and xferd's VmRSS grows by a few MiB, not 64 x notify_queue_max;
 *
 * while a bystander of another uid keeps making lists, moving verified
 * blocks with them and hearing its own notifications, during and after.
 *
 * With --cgroup (tests/integration/uid_quota_cgroup.sh) the lists attack
 * runs with xferd in a 1 GiB memory cgroup (v1): it must survive.
 * --lists or --notify runs one attack only.
 *
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

/* The defaults of xferd.conf(5) this test runs against. */
#define LIST_ENTRIES      (1u << 20)   /* dlist_max_entries */
#define CLIENT_ENTRIES    (1u << 22)   /* dlist_max_client_entries */
#define UID_LIST_BYTES    (256ull << 20) /* dlist_max_uid_bytes */
#define UID_LISTS         16384u       /* dlist_max_per_uid */
#define CLIENT_LISTS      4096u        /* dlist_max_per_client */
#define UID_NOTIFY        262144u      /* notify_queue_max_per_uid */
#define CLIENT_NOTIFY     65536u       /* notify_queue_max */

#define ATTACK_CTXS 24
#define READERS     64
#define NOGROUP     65534
#define UID_ATTACK  42001
#define UID_BYSTAND 42002
#define UID_READER  42003

/* What xferd's VmRSS may grow by over what it is made to hold: buffers
 * of refused lists, rings grown by doubling; under ASan its quarantine
 * keeps up to 256 MiB of what was freed. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_SLACK (448ull << 20)
#else
#define RSS_SLACK (96ull << 20)
#endif

#define BLK   4096u
#define SLOTS 64u

static struct tl_daemon xd;
/* Shared with the bystander: its verified rounds, and the stop flag. */
static struct shared {
	_Atomic uint64_t rounds;
	_Atomic int stop;
} *sh;

/* As setpriv --reuid=uid --regid=NOGROUP --clear-groups. */
static void become(uid_t uid)
{
	T_ASSERT(setgroups(0, NULL) == 0 && setresgid(NOGROUP, NOGROUP,
						       NOGROUP) == 0 &&
		 setresuid(uid, uid, uid) == 0, "dropping to uid %d: %s",
		 (int)uid, strerror(errno));
	/* Cleared by the change of credentials. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	T_ASSERT(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int xferd_status = -1;  /* once reaped */

static bool xferd_alive(void)
{
	if (xferd_status < 0 && waitpid(xd.pid, &xferd_status, WNOHANG) == 0)
		return true;
	return false;
}

/* A report from a client, which fails when xferd died under it: say
 * so, rather than that the client went. */
static void read_report(int fd, void *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);

	if (n == (ssize_t)len)
		return;
	usleep(200000);
	T_ASSERT(xferd_alive(), "xferd died under the attack (%s %d: "
		 "OOM-killed?)", WIFSIGNALED(xferd_status) ? "signal"
		 : "exit status", WIFSIGNALED(xferd_status)
		 ? WTERMSIG(xferd_status) : WEXITSTATUS(xferd_status));
	T_ASSERT(0, "a client of the attack failed (read %zd)", n);
}

/* --- the bystander: lists, list transfers with notify, bytes checked --- */

static void bystander(void)
{
	struct xfer_ctx *ctx;
	struct tl_buf a, b;
	uint64_t off[SLOTS];
	uint32_t pick[SLOTS];

	become(UID_BYSTAND);
	T_OK(xfer_open(xd.socket, &ctx));
	tl_buf_alloc(ctx, TL_HOST, SLOTS * BLK, &a);
	tl_buf_alloc(ctx, TL_HOST, SLOTS * BLK, &b);
	for (unsigned i = 0; i < SLOTS; i++)
		off[i] = (uint64_t)i * BLK;
	for (uint64_t r = 1; !atomic_load(&sh->stop); r++) {
		struct xfer_dlist *la, *lb;
		tl_fill(a.ptr, a.len, r);
		memset(b.ptr, 0, b.len);
		T_OK(xfer_dlist_create(ctx, a.handle, SLOTS, off, NULL, BLK,
				       &la));
		T_OK(xfer_dlist_create(ctx, b.handle, SLOTS, off, NULL, BLK,
				       &lb));
		/* Block k of a to the same block of b, in a shuffled order. */
		tl_pick(pick, SLOTS, SLOTS, r);
		struct xfer_sqe *sqe = tl_get_sqe(ctx);
		T_OK(xfer_prep_dlist(ctx, sqe, XFER_OP_WRITE_DLIST, la, lb,
				     SLOTS, pick, NULL, r));
		xfer_sqe_set_notify(sqe, r);
		T_ASSERT(xfer_submit(ctx) >= 1, "submit");
		bool done = false, heard = false;
		while (!done || !heard) {
			struct xfer_cqe c = tl_wait(ctx);
			if (c.flags & XFER_CQE_F_NOTIFY) {
				T_ASSERT(c.user_data == r, "notification %llu",
					 (unsigned long long)c.user_data);
				heard = true;
			} else {
				T_ASSERT(c.user_data == r &&
					 c.result == (int64_t)(SLOTS * BLK),
					 "bystander round %llu: %lld (%s)",
					 (unsigned long long)r,
					 (long long)c.result,
					 xfer_strerror((int)c.result));
				done = true;
			}
		}
		size_t bad = tl_check(b.ptr, b.len, r);
		T_ASSERT(bad == 0, "bystander round %llu: byte %zu wrong",
			 (unsigned long long)r, bad - 1);
		T_OK(xfer_dlist_destroy(ctx, la));
		T_OK(xfer_dlist_destroy(ctx, lb));
		atomic_store(&sh->rounds, r);
	}
	xfer_close(ctx);
	exit(0);
}

/* The bystander must make progress now: a few rounds within 10 s. */
static void bystander_moves(pid_t by, const char *when)
{
	uint64_t r0 = atomic_load(&sh->rounds), t0 = tl_now_ms();

	while (atomic_load(&sh->rounds) < r0 + 5) {
		T_ASSERT(waitpid(by, NULL, WNOHANG) == 0,
			 "the bystander failed %s", when);
		T_ASSERT(tl_now_ms() - t0 < 10000,
			 "the bystander made no progress %s (round %llu)", when,
			 (unsigned long long)r0);
		usleep(10000);
	}
}

/* --- the lists attack --- */

struct list_result {
	uint64_t bytes_kept;     /* xferd's memory for lists kept */
	int bytes_err;           /* the error that ended the big lists */
	unsigned ctx_refused;    /* contexts refused their first big list */
	unsigned small_kept;
	int small_err;
	unsigned small_ctx_refused;
};

static void attacker(int report, int go)
{
	static uint64_t off[LIST_ENTRIES], lens[LIST_ENTRIES];
	struct xfer_ctx *ctx[ATTACK_CTXS];
	struct list_result res = { 0 };
	struct tl_buf buf[ATTACK_CTXS];
	char c;

	become(UID_ATTACK);
	for (unsigned i = 0; i < LIST_ENTRIES; i++) {
		off[i] = i & 1023;
		lens[i] = 1;
	}
	/* Big lists until refused, context after context. */
	for (unsigned k = 0; k < ATTACK_CTXS; k++) {
		T_OK(xfer_open(xd.socket, &ctx[k]));
		tl_buf_alloc(ctx[k], TL_HOST, BLK, &buf[k]);
		for (unsigned made = 0;; made++) {
			struct xfer_dlist *l;
			int rc = xfer_dlist_create(ctx[k], buf[k].handle,
						   LIST_ENTRIES, off, lens, 0,
						   &l);
			if (rc) {
				res.bytes_err = rc;
				res.ctx_refused += made == 0;
				break;
			}
			res.bytes_kept += (uint64_t)LIST_ENTRIES * 16;
			T_ASSERT(made < CLIENT_ENTRIES / LIST_ENTRIES,
				 "more lists than dlist_max_client_entries");
		}
	}
	tl_write_full(report, &res, sizeof(res));
	tl_read_full(go, &c, 1);  /* xferd's RSS measured meanwhile */
	for (unsigned k = 0; k < ATTACK_CTXS; k++)
		xfer_close(ctx[k]);

	/* Small lists until refused, in fresh contexts. */
	for (unsigned k = 0; k < ATTACK_CTXS; k++) {
		T_OK(xfer_open(xd.socket, &ctx[k]));
		tl_buf_alloc(ctx[k], TL_HOST, BLK, &buf[k]);
		for (unsigned made = 0;; made++) {
			struct xfer_dlist *l;
			int rc = xfer_dlist_create(ctx[k], buf[k].handle, 1,
						   off, NULL, 8, &l);
			if (rc) {
				res.small_err = rc;
				res.small_ctx_refused += made == 0;
				break;
			}
			res.small_kept++;
			/* Past the user's bound by much: enough to tell. */
			if (res.small_kept > UID_LISTS + 64)
				break;
		}
		if (res.small_kept > UID_LISTS + 64)
			break;
	}
	tl_write_full(report, &res, sizeof(res));
	tl_read_full(go, &c, 1);
	/* Everything it holds goes with the process, as with a client that
	 * dies holding it (and LeakSanitizer has nothing to say about it). */
	fflush(NULL);
	_exit(0);
}

static void lists_attack(pid_t by, bool cgroup)
{
	int rep[2], go[2];
	struct list_result res;
	long rss0 = rss_kib(xd.pid);

	T_ASSERT(pipe(rep) == 0 && pipe(go) == 0, "pipe");
	pid_t pid = tl_fork();
	if (pid == 0)
		attacker(rep[1], go[0]);
	close(rep[1]);
	close(go[0]);
	read_report(rep[0], &res, sizeof(res));
	T_ASSERT(xferd_alive(), "xferd died under the lists attack "
		 "(OOM-killed?): the attacker had %llu MiB of lists",
		 (unsigned long long)(res.bytes_kept >> 20));
	long grown = rss_kib(xd.pid) - rss0;
	printf("lists: uid %d kept %llu MiB of lists in %d contexts, "
	       "%u contexts refused at once (%s); xferd VmRSS +%ld MiB\n",
	       UID_ATTACK, (unsigned long long)(res.bytes_kept >> 20),
	       ATTACK_CTXS, res.ctx_refused, xfer_strerror(res.bytes_err),
	       grown >> 10);
	bystander_moves(by, "while the attacker holds its lists");
	T_ASSERT(res.bytes_err == -ENOBUFS, "the attacker's lists ended with "
		 "%d (%s), not -ENOBUFS", res.bytes_err,
		 xfer_strerror(res.bytes_err));
	T_ASSERT(res.bytes_kept <= UID_LIST_BYTES,
		 "one uid kept %llu MiB of lists, above dlist_max_uid_bytes "
		 "(%llu MiB)", (unsigned long long)(res.bytes_kept >> 20),
		 (unsigned long long)(UID_LIST_BYTES >> 20));
	T_ASSERT(res.ctx_refused > 0, "no context was refused before its "
		 "own bound: there is no bound per uid");
	/* The user's lists and a few transient buffers of 16 MiB. */
	if (!cgroup)
		T_ASSERT(grown < (long)((UID_LIST_BYTES + RSS_SLACK) >> 10),
			 "xferd grew by %ld MiB", grown >> 10);
	tl_write_full(go[1], "g", 1);

	read_report(rep[0], &res, sizeof(res));
	printf("lists: uid %d kept %u small lists, then %s; %u contexts "
	       "refused at once\n", UID_ATTACK, res.small_kept,
	       xfer_strerror(res.small_err), res.small_ctx_refused);
	bystander_moves(by, "while the attacker holds its small lists");
	T_ASSERT(res.small_kept == UID_LISTS && res.small_err == -ENOSPC,
		 "one uid kept %u lists (then %d), want dlist_max_per_uid "
		 "(%u) then -ENOSPC", res.small_kept, res.small_err,
		 UID_LISTS);
	T_ASSERT(res.small_ctx_refused > 0, "no context was refused before "
		 "its own bound");
	tl_write_full(go[1], "g", 1);
	T_ASSERT(tl_child_wait(pid, 30000) == 0, "the attacker failed");
	close(rep[0]);
	close(go[1]);
	/* Its lists went with its contexts: the bystander still moves. */
	bystander_moves(by, "after the lists attack");
	T_ASSERT(xferd_alive(), "xferd died after the lists attack");
}

/* --- the notification flood --- */

static void readers(int report, int go)
{
	struct xfer_ctx *ctx[READERS];
	struct tl_buf buf[READERS];
	uint8_t tok[XFER_TOKEN_MAX];
	char c;

	become(UID_READER);
	for (unsigned k = 0; k < READERS; k++) {
		T_OK(xfer_open(xd.socket, &ctx[k]));
		tl_buf_alloc(ctx[k], TL_HOST, BLK, &buf[k]);
		size_t n = tl_export(&buf[k], tok);
		tl_send_blob(report, tok, n);
	}
	/* Never reads a CQE. */
	tl_read_full(go, &c, 1);
	/* Everything it holds goes with the process, as with a client that
	 * dies holding it (and LeakSanitizer has nothing to say about it). */
	fflush(NULL);
	_exit(0);
}

static void notify_flood(pid_t by)
{
	int rep[2], go[2];
	struct xfer_ctx *ctx;
	struct xfer_remote *rem[READERS];
	uint8_t tok[XFER_TOKEN_MAX];
	bool refused[READERS] = { false };
	uint64_t sent[READERS] = { 0 }, ok = 0, nobufs = 0;
	unsigned nrefused = 0;

	T_ASSERT(pipe(rep) == 0 && pipe(go) == 0, "pipe");
	pid_t pid = tl_fork();
	if (pid == 0)
		readers(rep[1], go[0]);
	close(rep[1]);
	close(go[0]);
	T_OK(xfer_open(xd.socket, &ctx));  /* the sender: root */
	for (unsigned k = 0; k < READERS; k++) {
		size_t n = tl_recv_blob(rep[0], tok, sizeof(tok));
		T_OK(xfer_import(ctx, tok, n, &rem[k]));
	}
	long rss0 = rss_kib(xd.pid);
	/* Round after round of 256 to every reader not yet refusing; each
	 * reader's own bound is CLIENT_NOTIFY + its CQ. */
	while (nrefused < READERS) {
		unsigned out = 0;
		for (unsigned k = 0; k < READERS; k++) {
			if (refused[k])
				continue;
			T_ASSERT(sent[k] < CLIENT_NOTIFY + 65536,
				 "reader %u took %llu notifications", k,
				 (unsigned long long)sent[k]);
			for (unsigned i = 0; i < 256; i++) {
				xfer_prep_notify(tl_get_sqe(ctx),
						 xfer_remote_handle(rem[k]),
						 sent[k]++, k);
				out++;
			}
			T_ASSERT(xfer_submit(ctx) >= 0, "submit");
			while (out) {
				struct xfer_cqe c = tl_wait(ctx);
				out--;
				if (c.result == -ENOBUFS) {
					nobufs++;
					if (!refused[c.user_data]) {
						refused[c.user_data] = true;
						nrefused++;
					}
				} else {
					T_ASSERT(c.result == 0, "notify: %s",
						 xfer_strerror((int)c.result));
					ok++;
				}
			}
		}
		T_ASSERT(xferd_alive(), "xferd died under the flood");
	}
	long grown = rss_kib(xd.pid) - rss0;
	printf("notify: %d readers of uid %d took %llu notifications, then "
	       "-ENOBUFS (%llu refused); xferd VmRSS +%ld MiB\n", READERS,
	       UID_READER, (unsigned long long)ok,
	       (unsigned long long)nobufs, grown >> 10);
	bystander_moves(by, "while the readers hold their notifications");
	/* Their CQs (at most 8192 each) and the user's held ones. */
	T_ASSERT(ok <= (uint64_t)READERS * 8192 + UID_NOTIFY,
		 "one uid's readers made xferd hold %llu notifications, above "
		 "notify_queue_max_per_uid (%u) and their CQs",
		 (unsigned long long)ok, UID_NOTIFY);
	/* 8 MiB held, twice that in rings that grow by doubling. */
	T_ASSERT(grown < (long)((32ull << 20) + RSS_SLACK / 4) >> 10,
		 "xferd grew by %ld MiB", grown >> 10);
	tl_write_full(go[1], "g", 1);
	T_ASSERT(tl_child_wait(pid, 30000) == 0, "the readers failed");
	/* The readers are gone: this only frees what libxfer allocated. */
	for (unsigned k = 0; k < READERS; k++)
		(void)xfer_unimport(ctx, rem[k]);
	xfer_close(ctx);
	close(rep[0]);
	close(go[1]);
	bystander_moves(by, "after the flood");
}

/* --- main --- */

static void cgroup_enter(char *dir, size_t len)
{
	char path[256];

	snprintf(dir, len, "/sys/fs/cgroup/memory/xferd-uidq.%d", (int)getpid());
	if (mkdir(dir, 0755)) {
		printf("skip: cannot make a memory cgroup %s: %s\n", dir,
		       strerror(errno));
		exit(TL_SKIP);
	}
	snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", dir);
	FILE *f = fopen(path, "w");
	T_ASSERT(f && fprintf(f, "%llu\n", 1ull << 30) > 0 && fclose(f) == 0,
		 "%s", path);
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "w");
	T_ASSERT(f && fprintf(f, "%d\n", (int)xd.pid) > 0 && fclose(f) == 0,
		 "moving xferd into %s", dir);
}

static void cgroup_leave(const char *dir)
{
	/* xferd is stopped by now: the group is empty. */
	for (int i = 0; i < 50 && rmdir(dir) && errno == EBUSY; i++)
		usleep(100000);
}

int main(int argc, char **argv)
{
	/* --cgroup: the lists attack in a memory cgroup; --lists or
	 * --notify: one attack only. */
	const char *only = argc > 1 ? argv[1] : "";
	bool cgroup = strcmp(only, "--cgroup") == 0;
	char cg[128];

	if (geteuid() != 0) {
		printf("skip: needs root (xferd as root, clients as other "
		       "uids)\n");
		return TL_SKIP;
	}
	if (cgroup && access("/sys/fs/cgroup/memory/cgroup.procs", W_OK)) {
		printf("skip: no cgroup v1 memory controller at "
		       "/sys/fs/cgroup/memory\n");
		return TL_SKIP;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_ASSERT(sh != MAP_FAILED, "mmap");

	tl_daemon_start(&xd, (const char *const[]){ "socket_group=nogroup",
						    NULL });
	/* The other uids reach the socket (root:nogroup 0660) through it. */
	T_ASSERT(chmod(xd.dir, 0711) == 0, "chmod %s", xd.dir);
	if (cgroup)
		cgroup_enter(cg, sizeof(cg));
	pid_t by = tl_fork();
	if (by == 0)
		bystander();
	bystander_moves(by, "before the attack");
	if (strcmp(only, "--notify") != 0)
		lists_attack(by, cgroup);
	if (!cgroup && strcmp(only, "--lists") != 0)
		notify_flood(by);
	atomic_store(&sh->stop, 1);
	T_ASSERT(tl_child_wait(by, 30000) == 0, "the bystander failed");
	printf("bystander: %llu verified list transfers\n",
	       (unsigned long long)atomic_load(&sh->rounds));
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not stop cleanly");
	if (cgroup)
		cgroup_leave(cg);
	return 0;
}
