/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_flood.c - users hold xferctl connections open and idle (ops/ctl.c).
 *
 * A private xferd (ctl_idle_timeout_ms=3000, the shipped caps otherwise:
 * max_ctl_connections 64, max_ctl_per_uid 8).  One unprivileged user
 * opens 1200 connections, each asking xferctl's status once and then
 * saying nothing; then 40 more users open 10 each.  Meanwhile a client
 * of another user moves verified bytes.  Asserted:
 *  - one user keeps at most max_ctl_per_uid answered connections, all
 *    users together at most max_ctl_connections; the rest get an Error
 *    and are closed;
 *  - xferd's fds stay within those caps;
 *  - root's xferctl status answers while users hold every slot;
 *  - the idle ones are closed after ctl_idle_timeout_ms, and xferd's fds
 *    return to what they were.
 */
#include "hostile.h"

#define FLOOD 1200
#define USERS 40
#define PER_USER 10

struct flood {
	unsigned answered, refused, silent;
	int fd[FLOOD];
};

/* Open n connections as uid; count their answers. */
static void flood(const char *socket, unsigned n, struct flood *f)
{
	*f = (struct flood){ 0 };
	for (unsigned i = 0; i < n; i++) {
		f->fd[i] = hl_ctl_connect(socket);
		T_ASSERT(f->fd[i] >= 0, "connect %u: %s", i,
			 strerror(-f->fd[i]));
		int a = hl_ctl_answer(f->fd[i], 5000);
		f->answered += a == 1;
		f->refused += a == 0;
		f->silent += a < 0;
	}
}

/* How many of f's connections xferd closed within timeout_ms. */
static unsigned closed_by_xferd(struct flood *f, unsigned n, int timeout_ms)
{
	uint64_t end = tl_now_ms() + (uint64_t)timeout_ms;
	unsigned closed = 0;

	for (unsigned i = 0; i < n; i++) {
		char buf[65536];
		for (;;) {
			struct pollfd p = { .fd = f->fd[i], .events = POLLIN };
			int left = (int)(end > tl_now_ms() ? end - tl_now_ms()
							   : 0);
			if (poll(&p, 1, left) <= 0)
				break;
			ssize_t r = recv(f->fd[i], buf, sizeof(buf), 0);
			if (r <= 0) {
				closed++;
				break;
			}
		}
	}
	return closed;
}

/* A user's flood in a child: reports what it saw, holds its connections
 * until told, then reports how many xferd closed. */
static pid_t flood_as(uid_t uid, const char *socket, unsigned n, int report,
		      const int hold[2])
{
	fflush(NULL);
	pid_t pid = tl_fork();
	T_ASSERT(pid >= 0, "fork");
	if (pid)
		return pid;
	static struct flood f;
	close(hold[1]);  /* its EOF says "go" */
	hl_become(uid);
	flood(socket, n, &f);
	unsigned r[3] = { f.answered, f.refused, f.silent };
	tl_write_full(report, r, sizeof(r));
	char b;
	(void)!read(hold[0], &b, 1);
	unsigned closed = closed_by_xferd(&f, n, 8000);
	tl_write_full(report, &closed, sizeof(closed));
	_exit(0);
}

int main(void)
{
	struct tl_daemon xd;
	struct hl_bystander by;
	const char *args[] = { "ctl_idle_timeout_ms=3000", NULL };
	pid_t pid[1 + USERS];
	int report[1 + USERS], hold[2];
	unsigned r[1 + USERS][3];

	hl_need_root();
	tl_daemon_start(&xd, args);
	hl_open_socket(&xd);
	int base = tl_fd_count(xd.pid);
	hl_bystander_start(&by, xd.socket);
	T_ASSERT(pipe(hold) == 0, "pipe");
	for (int u = 0; u < 1 + USERS; u++) {
		int p[2];
		T_ASSERT(pipe(p) == 0, "pipe");
		pid[u] = flood_as(u ? 20000 + (uid_t)u : HL_ATTACKER_UID,
				  xd.socket, u ? PER_USER : FLOOD, p[1], hold);
		close(p[1]);
		report[u] = p[0];
		tl_read_full(report[u], r[u], sizeof(r[u]));
	}
	close(hold[0]);
	unsigned answered = 0, refused = 0, silent = 0;
	for (int u = 1; u < 1 + USERS; u++) {
		answered += r[u][0];
		refused += r[u][1];
		silent += r[u][2];
	}
	int held = tl_fd_count(xd.pid);
	long ms = hl_xferctl_ms(xd.socket);
	printf("one user, %u connections: %u answered, %u refused, %u "
	       "unanswered\n", FLOOD, r[0][0], r[0][1], r[0][2]);
	printf("%u users, %u each: %u answered, %u refused, %u unanswered\n",
	       USERS, PER_USER, answered, refused, silent);
	printf("xferd fds: %d before, %d during; root's xferctl status: %ld "
	       "ms\n", base, held, ms);
	T_ASSERT(r[0][0] <= 8, "one user keeps %u xferctl connections "
		 "(max_ctl_per_uid 8)", r[0][0]);
	T_ASSERT(r[0][0] + answered <= 64, "users keep %u xferctl "
		 "connections (max_ctl_connections 64)", r[0][0] + answered);
	T_ASSERT(r[0][0] + answered >= 8, "only %u answered",
		 r[0][0] + answered);
	T_ASSERT(held <= base + 64 + 16 + 8, "xferd holds %d fds, %d before",
		 held, base);
	T_ASSERT(ms >= 0 && ms < 2000, "root's xferctl status took %ld ms "
		 "(-1: failed) with every slot taken", ms);

	/* Idle: closed by xferd after 3 s (each child waits 8 s). */
	close(hold[1]);
	unsigned closed = 0;
	for (int u = 0; u < 1 + USERS; u++) {
		unsigned c;
		tl_read_full(report[u], &c, sizeof(c));
		closed += c;
		T_ASSERT(tl_child_wait(pid[u], 30000) == 0, "flood %d failed",
			 u);
	}
	printf("closed by xferd after ctl_idle_timeout_ms: %u of %u\n",
	       closed, FLOOD + USERS * PER_USER);
	T_ASSERT(closed == FLOOD + USERS * PER_USER, "xferd left %u idle "
		 "xferctl connections open", FLOOD + USERS * PER_USER - closed);
	hl_bystander_stop(&by, 2000);
	int after = tl_fd_count(xd.pid);
	for (int i = 0; i < 100 && after > base; i++) {
		usleep(50000);
		after = tl_fd_count(xd.pid);
	}
	T_ASSERT(after <= base, "xferd holds %d fds, %d before", after, base);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not exit cleanly");
	printf("ok\n");
	return 0;
}
