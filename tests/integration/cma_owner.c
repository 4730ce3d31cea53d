/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cma_owner.c - xfer_reg'd memory (CMA) is reached only as its owner's
 * user could reach it, at the moment of each copy:
 *
 * 1. exec of a set-uid program: an unprivileged client registers a range
 *    of its memory, keeps its connection and exec()s a set-uid-root copy
 *    of this program, which reads a root-only file into that range.  A
 *    second unprivileged client holding the token must fail to read it
 *    (and see none of it) and fail to write it (the root process checks
 *    its memory is unchanged); the same for a client that runs with
 *    no_new_privs (xferd reads its memory with process_vm_readv and
 *    checks each read afterwards), whose exec'd program reads a file of
 *    its own into the range; and one whose thread made before it set
 *    no_new_privs (so without it) exec's the set-uid program;
 * 2. a root client that drops its uid (setresuid) or its gid (setresgid)
 *    after registering: the token holder is refused from then on;
 * 3. one client registering one buffer 20 000 times: xferd's descriptors
 *    do not grow with the registrations (one pidfd per client, not one
 *    per region).
 *
 * A bystander client of a third uid moves verified bytes through CMA and
 * a memfd all along; xferd must be alive and answering at the end.
 *
 * Runs its own xferd (it needs a socket every uid may reach, and counts
 * the daemon's fds).  Needs root (to make the set-uid program and to run
 * the clients as other users) and a file system that honours set-uid.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#define ATTACKER_UID 42421
#define THIEF_UID 42422
#define BYSTANDER_UID 42423
#define DROP_GID 42424
#define SECRET_LEN (64 * 1024)
/* Where the attacker's range and the set-uid program's secret live: a
 * fixed address both can map (ASLR leaves it free). */
#define FIXED_ADDR ((void *)0x5a5a00000000ull)
#define REGS_MANY 20000

static const char *sock_path;

static void become(uid_t uid, gid_t gid)
{
	T_ASSERT(setgroups(0, NULL) == 0, "setgroups: %s", strerror(errno));
	T_ASSERT(setresgid(gid, gid, gid) == 0, "setresgid: %s",
		 strerror(errno));
	T_ASSERT(setresuid(uid, uid, uid) == 0, "setresuid: %s",
		 strerror(errno));
	/* A process that changed its ids is not dumpable until it execs;
	 * these stand for clients started as that user (setpriv and exec),
	 * which are. */
	T_ASSERT(prctl(PR_SET_DUMPABLE, 1) == 0, "PR_SET_DUMPABLE");
}

static struct xfer_ctx *open_ctx(void)
{
	struct xfer_ctx *ctx = NULL;

	T_OK(xfer_open(sock_path, &ctx));
	return ctx;
}

static void send_byte(int fd, char c)
{
	tl_write_full(fd, &c, 1);
}

static char recv_byte(int fd)
{
	char c;

	tl_read_full(fd, &c, 1);
	return c;
}

/* One copy between an imported token and local memory; the CQE result. */
static int64_t rw(struct xfer_ctx *ctx, unsigned op, uint64_t local,
		  uint64_t remote, uint64_t len)
{
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);

	T_ASSERT(sqe, "no SQE");
	xfer_prep_rw(sqe, op, local, 0, remote, 0, len, 7);
	struct xfer_cqe c = tl_submit_wait(ctx);
	return c.result;
}

/* --- the set-uid program (this binary, copied, root-owned, 04755) --- */

/* argv: --victim SECRETFILE CMDFD REPLYFD.  Runs set-uid root or with
 * file capabilities: reads the root-only file into the attacker's old
 * range, then answers
 * 'c' (is my memory still the secret?) until its command pipe closes. */
static int victim_main(char **argv)
{
	int cmd = atoi(argv[3]), reply = atoi(argv[4]);
	static uint8_t secret[SECRET_LEN];

	/* Only a privileged program can read it: euid 0 (set-uid root) or
	 * CAP_DAC_READ_SEARCH (file capabilities). */
	int fd = open(argv[2], O_RDONLY);
	if (fd < 0 || read(fd, secret, sizeof(secret)) != sizeof(secret))
		return 3;
	close(fd);
	uint8_t *mem = mmap(FIXED_ADDR, SECRET_LEN, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			    -1, 0);
	if (mem != FIXED_ADDR)
		return 4;
	memcpy(mem, secret, SECRET_LEN);
	send_byte(reply, 'r');
	char c;
	while (read(cmd, &c, 1) == 1)
		send_byte(reply, memcmp(mem, secret, SECRET_LEN) ? 'n' : 'y');
	return 0;
}

/* --- the bystander: verified CMA and memfd copies until told to stop --- */

/* nnp: with no_new_privs, so that xferd reads its memory with
 * process_vm_readv rather than through /proc/PID/mem. */
static pid_t bystander_start(int *stop_w, int *result_r, bool nnp)
{
	int stop[2], res[2];

	T_ASSERT(pipe(stop) == 0 && pipe(res) == 0, "pipe");
	pid_t pid = tl_fork();
	if (pid) {
		close(stop[0]);
		close(res[1]);
		*stop_w = stop[1];
		*result_r = res[0];
		return pid;
	}
	close(stop[1]);
	close(res[0]);
	become(BYSTANDER_UID, BYSTANDER_UID);
	if (nnp)
		T_ASSERT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0,
			 "no_new_privs: %s", strerror(errno));
	struct xfer_ctx *ctx = open_ctx();
	const size_t len = 256 * 1024;
	struct tl_buf src, back, host;
	tl_buf_alloc(ctx, TL_MALLOC, len, &src);
	tl_buf_alloc(ctx, TL_MALLOC, len, &back);
	tl_buf_alloc(ctx, TL_HOST, len, &host);
	uint8_t tok[XFER_TOKEN_MAX];
	size_t tok_len = tl_export(&host, tok);
	struct xfer_remote *rem;
	T_OK(xfer_import(ctx, tok, tok_len, &rem));
	uint64_t rounds = 0;
	fcntl(stop[0], F_SETFL, O_NONBLOCK);
	for (;;) {
		tl_fill(src.ptr, len, rounds);
		memset(back.ptr, 0, len);
		int64_t w = rw(ctx, XFER_OP_WRITE, src.handle,
			       xfer_remote_handle(rem), len);
		T_ASSERT(w == (int64_t)len, "bystander write: %lld (%s)",
			 (long long)w, xfer_strerror((int)w));
		T_ASSERT(!tl_check(host.ptr, len, rounds),
			 "bystander: memfd bytes wrong");
		int64_t r = rw(ctx, XFER_OP_READ, back.handle,
			       xfer_remote_handle(rem), len);
		T_ASSERT(r == (int64_t)len, "bystander read: %lld (%s)",
			 (long long)r, xfer_strerror((int)r));
		T_ASSERT(!tl_check(back.ptr, len, rounds),
			 "bystander: bytes read back wrong");
		rounds++;
		char c;
		if (read(stop[0], &c, 1) == 0)
			break; /* closed: stop */
		usleep(2000);
	}
	tl_write_full(res[1], &rounds, sizeof(rounds));
	xfer_close(ctx);
	_exit(0);
}

static void bystander_check(pid_t pid, int *stop_w, int result_r,
			    uint64_t *last)
{
	uint64_t rounds = 0;

	if (*stop_w >= 0) {
		close(*stop_w);
		*stop_w = -1;
		tl_read_full(result_r, &rounds, sizeof(rounds));
		T_ASSERT(tl_child_wait(pid, 60000) == 0, "bystander failed");
		T_ASSERT(rounds > *last, "bystander made no progress");
		*last = rounds;
	}
}

/* --- 1. exec of a set-uid program --- */

/* The thief: imports the token, shows the range is reachable while its
 * owner is still the unprivileged client, then, on 'a', tries to read and
 * write it and reports both results and what it read. */
/* kind: its own buffer's (TL_HOST: xferd copies straight into it;
 * TL_MALLOC: through xferd's bounce buffer, where an owner with
 * no_new_privs is read by process_vm_readv and checked afterwards). */
static pid_t thief_start(int *cmd_w, int *res_r, uid_t uid, uint64_t len,
			 int kind)
{
	int cmd[2], res[2];

	T_ASSERT(pipe(cmd) == 0 && pipe(res) == 0, "pipe");
	pid_t pid = tl_fork();
	if (pid) {
		close(cmd[0]);
		close(res[1]);
		*cmd_w = cmd[1];
		*res_r = res[0];
		return pid;
	}
	close(cmd[1]);
	close(res[0]);
	become(uid, uid);
	struct xfer_ctx *ctx = open_ctx();
	uint8_t tok[XFER_TOKEN_MAX];
	size_t tok_len = tl_recv_blob(cmd[0], tok, sizeof(tok));
	struct xfer_remote *rem;
	T_OK(xfer_import(ctx, tok, tok_len, &rem));
	struct tl_buf buf;
	tl_buf_alloc(ctx, kind, len, &buf);
	/* Before: the owner's public pattern, seed 1. */
	int64_t r = rw(ctx, XFER_OP_READ, buf.handle, xfer_remote_handle(rem),
		       len);
	T_ASSERT(r == (int64_t)len, "thief's read before the change: %lld",
		 (long long)r);
	T_ASSERT(!tl_check(buf.ptr, len, 1), "thief read wrong bytes before");
	send_byte(res[1], 'k');
	char c;
	while (read(cmd[0], &c, 1) == 1 && c == 'a') {
		memset(buf.ptr, 0, len);
		int64_t got[2];
		got[0] = rw(ctx, XFER_OP_READ, buf.handle,
			    xfer_remote_handle(rem), len);
		tl_write_full(res[1], got, sizeof(got[0]));
		tl_write_full(res[1], buf.ptr, len);
		tl_fill(buf.ptr, len, 666);
		got[1] = rw(ctx, XFER_OP_WRITE, buf.handle,
			    xfer_remote_handle(rem), len);
		tl_write_full(res[1], &got[1], sizeof(got[1]));
	}
	xfer_close(ctx);
	_exit(0);
}

/* Ask the thief to attack; assert both copies were refused and nothing
 * of `secret` reached it. */
static void thief_attack(int cmd_w, int res_r, const uint8_t *secret,
			 uint64_t len, const char *what)
{
	int64_t rd, wr;
	uint8_t *got = malloc(len);

	T_ASSERT(got, "malloc");
	send_byte(cmd_w, 'a');
	tl_read_full(res_r, &rd, sizeof(rd));
	tl_read_full(res_r, got, len);
	tl_read_full(res_r, &wr, sizeof(wr));
	printf("%s: the token holder's read -> %lld (%s), write -> %lld (%s)\n",
	       what, (long long)rd, rd < 0 ? xfer_strerror((int)rd) : "bytes",
	       (long long)wr, wr < 0 ? xfer_strerror((int)wr) : "bytes");
	T_ASSERT(memcmp(got, secret, len) != 0 || rd < 0,
		 "%s: the token holder read the secret", what);
	size_t leaked = 0;
	for (uint64_t i = 0; i < len; i++)
		leaked += got[i] && got[i] == secret[i];
	T_ASSERT(rd < 0, "%s: the token holder's read was not refused "
		 "(%zu of %llu secret bytes arrived)", what, leaked,
		 (unsigned long long)len);
	T_ASSERT(leaked < len / 64, "%s: %zu secret bytes arrived", what,
		 leaked);
	T_ASSERT(wr < 0, "%s: the token holder's write was not refused", what);
	free(got);
}

/* filecaps: the program gets cap_dac_read_search by file capabilities
 * instead of being set-uid: its ids stay the client's, only its address
 * space (and its capabilities) are new. */
/* The exec of setuid_exec, from the thread that runs it. */
struct exec_args {
	const char *prog, *secret_path;
	int cmd, reply, go;     /* go: a byte there starts it (a thread) */
};

static void *exec_victim(void *arg)
{
	struct exec_args *a = arg;

	if (a->go >= 0)
		recv_byte(a->go);
	/* Keep the connection (and so the registration) across the
	 * exec: clear close-on-exec on every descriptor. */
	for (int i = 3; i < 1024; i++) {
		int fl = fcntl(i, F_GETFD);
		if (fl >= 0)
			fcntl(i, F_SETFD, fl & ~FD_CLOEXEC);
	}
	char a1[16], a2[16];
	snprintf(a1, sizeof(a1), "%d", a->cmd);
	snprintf(a2, sizeof(a2), "%d", a->reply);
	execl(a->prog, a->prog, "--victim", a->secret_path, a1, a2,
	      (char *)NULL);
	fprintf(stderr, "exec %s: %s\n", a->prog, strerror(errno));
	_exit(1);
}

/* nnp: the client sets no_new_privs before it registers; nnp_thread: a
 * thread it made before that (so without the flag) runs the exec. */
static void setuid_exec(const char *dir, bool filecaps, bool nnp,
			bool nnp_thread)
{
	const char *what = nnp_thread
		? "exec by a thread without no_new_privs of a no_new_privs client"
		: nnp ? "exec by a no_new_privs client"
		: filecaps ? "exec of a program with file capabilities"
		: "exec of a set-uid-root program";
	char prog[256], secret_path[256];
	static uint8_t secret[SECRET_LEN];
	int to_thief, from_thief, victim_cmd[2], victim_reply[2], tokp[2],
	    go[2];

	/* The set-uid program: a copy of this one. */
	const char *tag = nnp_thread ? "nnp-thread" : nnp ? "nnp"
			  : filecaps ? "caps" : "setuid";
	snprintf(prog, sizeof(prog), "%s/%s-victim", dir, tag);
	snprintf(secret_path, sizeof(secret_path), "%s/%s-secret", dir, tag);
	char cmd[1100];
	if (filecaps) {
		if (system("command -v setcap >/dev/null")) {
			printf("skip part: no setcap (libcap2-bin): %s not "
			       "tried\n", what);
			return;
		}
		snprintf(cmd, sizeof(cmd), "cp /proc/%d/exe %s && chmod 0755 %s "
			 "&& setcap cap_dac_read_search+ep %s", (int)getpid(),
			 prog, prog, prog);
	} else {
		snprintf(cmd, sizeof(cmd), "cp /proc/%d/exe %s && chown "
			 "root:root %s && chmod 4755 %s", (int)getpid(), prog,
			 prog, prog);
	}
	T_ASSERT(system(cmd) == 0, "making %s", prog);
	struct statvfs vfs;
	if (statvfs(prog, &vfs) == 0 && (vfs.f_flag & ST_NOSUID)) {
		printf("skip: %s is on a nosuid file system\n", dir);
		exit(TL_SKIP);
	}
	/* The secret: random, in a file only root can read. */
	T_ASSERT(getrandom(secret, sizeof(secret), 0) == sizeof(secret),
		 "getrandom");
	for (size_t i = 0; i < sizeof(secret); i++)
		secret[i] |= 1; /* no zero bytes: "arrived" is unambiguous */
	/* no_new_privs: the program runs as the client, and reads a file
	 * the client may read. */
	int fd = open(secret_path, O_WRONLY | O_CREAT | O_EXCL,
		      nnp && !nnp_thread ? 0644 : 0600);
	T_ASSERT(fd >= 0 && write(fd, secret, sizeof(secret)) ==
		 sizeof(secret), "writing the secret");
	close(fd);

	T_ASSERT(pipe(victim_cmd) == 0 && pipe(victim_reply) == 0 &&
		 pipe(tokp) == 0 && pipe(go) == 0, "pipe");
	pid_t attacker = tl_fork();
	if (attacker == 0) {
		close(tokp[0]);
		close(go[1]);
		close(victim_cmd[1]);
		close(victim_reply[0]);
		become(ATTACKER_UID, ATTACKER_UID);
		struct exec_args ea = { prog, secret_path, victim_cmd[0],
					victim_reply[1], -1 };
		int tgo[2];
		pthread_t th;
		if (nnp_thread) {
			T_ASSERT(pipe(tgo) == 0, "pipe");
			ea.go = tgo[0];
			T_ASSERT(pthread_create(&th, NULL, exec_victim, &ea) ==
				 0, "pthread_create");
		}
		if (nnp)
			T_ASSERT(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0,
				 "no_new_privs: %s", strerror(errno));
		struct xfer_ctx *ctx = open_ctx();
		uint8_t *mem = mmap(FIXED_ADDR, SECRET_LEN,
				    PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS |
				    MAP_FIXED_NOREPLACE, -1, 0);
		T_ASSERT(mem == FIXED_ADDR, "mmap at the fixed address");
		tl_fill(mem, SECRET_LEN, 1);
		struct xfer_mem *xm;
		T_OK(xfer_reg(ctx, mem, SECRET_LEN, &xm));
		uint8_t tok[XFER_TOKEN_MAX];
		size_t tok_len = sizeof(tok);
		T_OK(xfer_export(xm, 0, SECRET_LEN, tok, &tok_len));
		tl_send_blob(tokp[1], tok, tok_len);
		recv_byte(go[0]);
		if (!nnp_thread)
			exec_victim(&ea);
		send_byte(tgo[1], 'x');
		for (;;)
			pause();  /* until the thread's exec replaces us */
	}
	close(tokp[1]);
	close(go[0]);
	close(victim_cmd[0]);
	close(victim_reply[1]);
	uint8_t tok[XFER_TOKEN_MAX];
	size_t tok_len = tl_recv_blob(tokp[0], tok, sizeof(tok));

	pid_t thief = thief_start(&to_thief, &from_thief, THIEF_UID,
				  SECRET_LEN, nnp ? TL_MALLOC : TL_HOST);
	tl_send_blob(to_thief, tok, tok_len);
	T_ASSERT(recv_byte(from_thief) == 'k', "thief");
	printf("%s: the token holder read the unprivileged owner's range "
	       "before the exec\n", what);

	send_byte(go[1], 'x');
	T_ASSERT(recv_byte(victim_reply[0]) == 'r',
		 "%s: the program did not start", what);
	char st[256];
	snprintf(st, sizeof(st), "grep -E '^(Uid|CapEff|NoNewPrivs)' /proc/%d/status "
		 "| tr -s '\\t' ' '", (int)attacker);
	T_ASSERT(system(st) == 0, "status of the set-uid program");
	thief_attack(to_thief, from_thief, secret, SECRET_LEN, what);
	send_byte(victim_cmd[1], 'c');
	T_ASSERT(recv_byte(victim_reply[0]) == 'y',
		 "%s: the program's memory was changed", what);
	printf("%s: the program's memory is unchanged\n", what);
	close(to_thief);
	T_ASSERT(tl_child_wait(thief, 30000) == 0, "thief failed");
	close(victim_cmd[1]);
	T_ASSERT(tl_child_wait(attacker, 30000) == 0,
		 "the set-uid program failed");
	close(from_thief);
	close(victim_reply[0]);
	close(tokp[0]);
	close(go[1]);
}

/* xferd's count of process_vm_readv reads: done, and refused by the
 * check after them (xferctl status --json). */
static void fast_reads(uint64_t *done, uint64_t *refused)
{
	const char *ctl = getenv("XFERCTL_BIN");
	char cmd[512];

	*done = *refused = UINT64_MAX;
	if (!ctl)
		return;
	snprintf(cmd, sizeof(cmd), "%s -s %s status --json | jq -r "
		 "'.cma_fast_reads | \"\\(.done) \\(.refused)\"'", ctl,
		 sock_path);
	FILE *f = popen(cmd, "r");
	if (!f)
		return;
	unsigned long long d, r;
	if (fscanf(f, "%llu %llu", &d, &r) == 2) {
		*done = d;
		*refused = r;
	}
	pclose(f);
}

/* --- 2. a root client that drops its uid or its gid --- */

static void drop_ids(bool uid_too)
{
	const char *what = uid_too ? "root client -> uid 65534"
				   : "root client -> gid 42424 (uid stays 0)";
	const uint64_t len = 64 * 1024;
	int tokp[2], go[2], done[2];
	int to_thief, from_thief;

	T_ASSERT(pipe(tokp) == 0 && pipe(go) == 0 && pipe(done) == 0, "pipe");
	pid_t owner = tl_fork();
	if (owner == 0) {
		close(tokp[0]);
		close(go[1]);
		close(done[0]);
		struct xfer_ctx *ctx = open_ctx();
		uint8_t *mem = malloc(len);
		T_ASSERT(mem, "malloc");
		tl_fill(mem, len, 1);
		struct xfer_mem *xm;
		T_OK(xfer_reg(ctx, mem, len, &xm));
		uint8_t tok[XFER_TOKEN_MAX];
		size_t tok_len = sizeof(tok);
		T_OK(xfer_export(xm, 0, len, tok, &tok_len));
		tl_send_blob(tokp[1], tok, tok_len);
		recv_byte(go[0]);
		if (uid_too)
			become(65534, 65534);
		else
			T_ASSERT(setresgid(DROP_GID, DROP_GID, DROP_GID) == 0,
				 "setresgid");
		send_byte(done[1], 'd');
		recv_byte(go[0]); /* after the attack */
		send_byte(done[1], tl_check(mem, len, 1) ? 'n' : 'y');
		recv_byte(go[0]);
		_exit(0);
	}
	close(tokp[1]);
	close(go[0]);
	close(done[1]);
	uint8_t tok[XFER_TOKEN_MAX];
	size_t tok_len = tl_recv_blob(tokp[0], tok, sizeof(tok));
	pid_t thief = thief_start(&to_thief, &from_thief, THIEF_UID, len,
				  TL_HOST);
	tl_send_blob(to_thief, tok, tok_len);
	T_ASSERT(recv_byte(from_thief) == 'k', "thief");
	printf("%s: the token holder read the range before the change\n",
	       what);
	send_byte(go[1], 'g');
	T_ASSERT(recv_byte(done[0]) == 'd', "owner");
	/* What the owner holds, as seed 1: the "secret" here. */
	uint8_t *secret = malloc(len);
	T_ASSERT(secret, "malloc");
	tl_fill(secret, len, 1);
	thief_attack(to_thief, from_thief, secret, len, what);
	send_byte(go[1], 'c');
	T_ASSERT(recv_byte(done[0]) == 'y', "%s: the owner's memory changed",
		 what);
	printf("%s: the owner's memory is unchanged\n", what);
	send_byte(go[1], 'q');
	close(to_thief);
	T_ASSERT(tl_child_wait(thief, 30000) == 0, "thief failed");
	T_ASSERT(tl_child_wait(owner, 30000) == 0, "owner failed");
	close(from_thief);
	close(tokp[0]);
	close(go[1]);
	close(done[0]);
	free(secret);
}

/* --- 3. many registrations of one buffer --- */

static void many_regs(pid_t daemon)
{
	const size_t len = 4096;
	int before = tl_fd_count(daemon), ready[2];

	T_ASSERT(pipe(ready) == 0, "pipe");
	pid_t pid = tl_fork();
	if (pid == 0) {
		close(ready[0]);
		become(ATTACKER_UID, ATTACKER_UID);
		struct xfer_ctx *ctx = open_ctx();
		uint8_t *mem = malloc(len);
		T_ASSERT(mem, "malloc");
		for (int i = 0; i < REGS_MANY; i++) {
			struct xfer_mem *xm;
			int rc = xfer_reg(ctx, mem, len, &xm);
			T_ASSERT(rc == 0, "registration %d of %d: %d (%s)", i,
				 REGS_MANY, rc, xfer_strerror(rc));
		}
		send_byte(ready[1], 'r');
		pause(); /* until killed: the registrations stay */
		_exit(0);
	}
	close(ready[1]);
	T_ASSERT(recv_byte(ready[0]) == 'r', "registering client");
	int n = tl_fd_count(daemon);
	printf("many: %d registrations of one buffer by one client; xferd has "
	       "%d descriptors (%d before)\n", REGS_MANY, n, before);
	T_ASSERT(n - before < 64, "%d registrations took %d descriptors",
		 REGS_MANY, n - before);
	kill(pid, SIGKILL);
	tl_child_wait(pid, 30000);
	close(ready[0]);
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "--victim") == 0)
		return victim_main(argv);
	if (geteuid() != 0) {
		printf("skip: needs root (a set-uid program, other users)\n");
		return TL_SKIP;
	}
	if (!getenv("XFERD_BIN")) {
		printf("skip: XFERD_BIN not set (run through make check)\n");
		return TL_SKIP;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct tl_daemon d;
	tl_daemon_start(&d, NULL);
	/* Every uid may connect: the clients here are other users. */
	T_ASSERT(chmod(d.dir, 0755) == 0 && chmod(d.socket, 0666) == 0,
		 "chmod: %s", strerror(errno));
	sock_path = d.socket;

	int stop_w, result_r;
	uint64_t rounds = 0;
	pid_t by = bystander_start(&stop_w, &result_r, false);

	/* An argument runs one part only (by hand): setuid, caps, nnp,
	 * nnp-thread, drop-uid, drop-gid, many. */
	const char *only = argc == 2 ? argv[1] : NULL;
#define PART(name) (!only || strcmp(only, name) == 0)
	if (PART("setuid"))
		setuid_exec(d.dir, false, false, false);
	if (PART("caps"))
		setuid_exec(d.dir, true, false, false);
	if (PART("nnp")) {
		uint64_t d0, r0, d1, r1;
		fast_reads(&d0, &r0);
		setuid_exec(d.dir, false, true, false);
		fast_reads(&d1, &r1);
		printf("process_vm_readv reads: %llu done, %llu refused by "
		       "their check\n", (unsigned long long)(d1 - d0),
		       (unsigned long long)(r1 - r0));
		if (d0 != UINT64_MAX) {
			/* The read before the exec went the fast way; the
			 * one after it was refused by the check. */
			T_ASSERT(d1 > d0, "no read by process_vm_readv");
			T_ASSERT(r1 > r0, "no fast read refused");
		}
	}
	if (PART("nnp-thread"))
		setuid_exec(d.dir, false, true, true);
	if (PART("drop-uid"))
		drop_ids(true);
	if (PART("drop-gid"))
		drop_ids(false);
	if (PART("many"))
		many_regs(d.pid);

	bystander_check(by, &stop_w, result_r, &rounds);
	printf("bystander: %llu verified round trips (CMA and memfd) during "
	       "the attacks\n", (unsigned long long)rounds);
	/* And after them, on a fresh connection, with no_new_privs. */
	uint64_t after = 0;
	by = bystander_start(&stop_w, &result_r, true);
	usleep(200 * 1000);
	bystander_check(by, &stop_w, result_r, &after);
	printf("bystander: %llu more after them\n", (unsigned long long)after);
	T_ASSERT(kill(d.pid, 0) == 0, "xferd died");
	int rc = tl_daemon_stop_within(&d, 30000);
	T_ASSERT(rc == 0, "xferd exited %d", rc);
	printf("ok\n");
	return 0;
}
