/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wake_abuse.c - no client stalls xferd, or another client, through the
 * fds it was given to wake xferd and to be woken (its doorbells).
 *
 * Each part runs a private xferd and a bystander process that moves
 * verified bytes (a 64 KiB memfd -> memfd write, checked byte by byte)
 * in rounds of ROUND_MS, sleeping between operations so that xferd's
 * progress thread falls asleep before each one and has to be woken by
 * the bystander's doorbell; it waits with xfer_wait_cqe, no spinning
 * (the path that sleeps on its CQ doorbell).  Every operation must
 * complete within OP_BOUND_MS, before, during and after each attack.
 *
 * The hostile clients speak the protocol by hand (a raw hello, the ring
 * mapped from the fds of the reply), as an attacker would:
 *
 * Part "cq": a client fills its CQ doorbell (an eventfd counter written
 * to its maximum, or datagrams until EAGAIN), makes it blocking
 * (F_SETFL without O_NONBLOCK), sets XFER_CQ_NEED_WAKEUP and submits NOPs
 * it never reads the completions of, on and on.  The bystander works on,
 * also after the attacker has gone; then, a second attacker armed the
 * same way, xferd stops on SIGTERM within STOP_BOUND_MS, exit status 0.
 *
 * Part "sq": a thief makes its SQ and CQ doorbell fds blocking and reads
 * them without pause (two threads each); then a flooder writes garbage
 * to them without pause (8-byte counters at their maximum, 4 KiB
 * datagrams, empty ones).  The bystander works on during and after each,
 * a new client connects and completes a NOP during the flood, and xferd
 * stops cleanly.
 *
 * Usage: wake_abuse [cq|sq] (default: both).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.pb-c.h"
#include "common/wire.h"
#include "testlib.h"
#include "xfer_ring.h"

#define ROUND_MS      1500   /* a bystander round */
#define OP_BOUND_MS   2000   /* any of its operations, start to CQE */
#define OP_GAP_US     5000   /* between them: xferd falls asleep */
#define OP_LEN        (64u * 1024u)
#define STOP_BOUND_MS 10000  /* SIGTERM to exit */

static struct tl_daemon xd;

/* --- the bystander --- */

struct round_result {
	uint32_t ops;
	uint32_t slowest_ms;
};

struct bystander {
	pid_t pid;
	int to, from;
};

static void bystander_main(int in, int out)
{
	struct xfer_ctx *ctx;
	struct tl_buf src, dst;
	uint64_t seed = 1;
	char cmd;

	T_OK(xfer_open(xd.socket, &ctx));
	/* Sleep on the CQ doorbell at once: the wake-ups are under test. */
	xfer_set_wait_spin(ctx, 0);
	tl_buf_alloc(ctx, TL_HOST, 4 * OP_LEN, &src);
	tl_buf_alloc(ctx, TL_HOST, 4 * OP_LEN, &dst);
	while (read(in, &cmd, 1) == 1 && cmd == 'r') {
		struct round_result rr = { 0, 0 };
		uint64_t end = tl_now_ms() + ROUND_MS;
		do {
			uint64_t off = (seed % 3) * OP_LEN + seed % 64;
			struct xfer_sqe *sqe = xfer_get_sqe(ctx);
			struct xfer_cqe *cqe;

			T_ASSERT(sqe, "bystander: no free SQE");
			tl_fill(src.ptr + off, OP_LEN, seed);
			memset(dst.ptr + off, 0, OP_LEN);
			xfer_prep_write(sqe, src.handle, off, dst.handle, off,
					OP_LEN, seed);
			uint64_t t0 = tl_now_ms();
			T_ASSERT(xfer_submit(ctx) == 1, "bystander: submit");
			int rc = xfer_wait_cqe(ctx, &cqe, OP_BOUND_MS);
			uint64_t ms = tl_now_ms() - t0;
			T_ASSERT(rc == 0, "bystander: operation %u of the round "
				 "has no completion after %llu ms (bound %d "
				 "ms): %s", rr.ops, (unsigned long long)ms,
				 OP_BOUND_MS, xfer_strerror(rc));
			T_ASSERT(cqe->user_data == seed &&
				 cqe->result == (int64_t)OP_LEN,
				 "bystander: CQE %llu -> %lld (%s)",
				 (unsigned long long)cqe->user_data,
				 (long long)cqe->result,
				 xfer_strerror((int)cqe->result));
			xfer_cq_advance(ctx, 1);
			size_t bad = tl_check(dst.ptr + off, OP_LEN, seed);
			T_ASSERT(!bad, "bystander: byte %zu of operation %u "
				 "differs", bad - 1, rr.ops);
			if (ms > rr.slowest_ms)
				rr.slowest_ms = (uint32_t)ms;
			rr.ops++;
			seed++;
			usleep(OP_GAP_US);
		} while (tl_now_ms() < end);
		tl_write_full(out, &rr, sizeof(rr));
	}
	tl_buf_free(ctx, &src);
	tl_buf_free(ctx, &dst);
	xfer_close(ctx);
	_exit(0);
}

static void bystander_start(struct bystander *b)
{
	int to[2], from[2];

	T_ASSERT(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0,
		 "pipe: %s", strerror(errno));
	b->pid = tl_fork();
	if (b->pid == 0) {
		close(to[1]);
		close(from[0]);
		bystander_main(to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	b->to = to[1];
	b->from = from[0];
}

/* One round of verified operations, each within the bound. */
static void bystander_round(struct bystander *b, const char *when)
{
	struct round_result rr;
	char cmd = 'r';

	tl_write_full(b->to, &cmd, 1);
	/* A failed operation ends the bystander, which says why itself. */
	ssize_t n = read(b->from, &rr, sizeof(rr));
	if (n != (ssize_t)sizeof(rr)) {
		int st = tl_child_wait(b->pid, 10000);
		T_ASSERT(0, "%s: the bystander failed (exit status %d)", when,
			 st);
	}
	T_ASSERT(rr.ops >= 10, "%s: the bystander did only %u operations in "
		 "%d ms", when, rr.ops, ROUND_MS);
	printf("%s: bystander moved %u x %u verified bytes, slowest %u ms: "
	       "ok\n", when, rr.ops, OP_LEN, rr.slowest_ms);
	fflush(stdout);
}

static void bystander_stop(struct bystander *b)
{
	char cmd = 'q';

	tl_write_full(b->to, &cmd, 1);
	T_ASSERT(tl_child_wait(b->pid, 10000) == 0, "bystander exit status");
	close(b->to);
	close(b->from);
}

/* --- a client by hand --- */

struct raw_client {
	int sock, sq_fd, cq_fd;
	uint8_t *map;
	size_t map_len;
	_Atomic uint32_t *sq_head, *sq_tail, *cq_head, *cq_tail, *cq_flags;
	struct xfer_sqe *sqes;
	uint32_t sq_entries;
};

static void raw_open(struct raw_client *rc)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Hello hello = XFER__CLIENT__HELLO__INIT;
	static uint8_t buf[WIRE_MAX_PACKET];
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;

	rc->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	T_ASSERT(rc->sock >= 0, "socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", xd.socket);
	T_ASSERT(connect(rc->sock, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		 "connect: %s", strerror(errno));
	hello.name = "wake_abuse-raw";
	m.proto_version = XFER_PROTO_VERSION;
	m.seq = 1;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO;
	m.hello = &hello;
	T_ASSERT(wire_send(rc->sock, WIRE_TAG_CLIENT, &m.base, NULL, 0) == 0,
		 "send hello");
	struct pollfd pfd = { .fd = rc->sock, .events = POLLIN };
	T_ASSERT(poll(&pfd, 1, 10000) == 1, "no hello reply in 10 s");
	ssize_t n = wire_recv(rc->sock, buf, fds, &nfds);
	T_ASSERT(n > WIRE_TAG_LEN, "hello reply: %zd", n);
	Xfer__Client__ClientMsg *r = xfer__client__client_msg__unpack(
		NULL, (size_t)n - WIRE_TAG_LEN, buf + WIRE_TAG_LEN);
	T_ASSERT(r && r->body_case ==
		 XFER__CLIENT__CLIENT_MSG__BODY_HELLO_REPLY && nfds == 3 &&
		 r->hello_reply->ring, "raw handshake: no HelloReply with 3 fds");
	const Xfer__Client__RingLayout *l = r->hello_reply->ring;
	rc->map_len = l->map_size;
	rc->map = mmap(NULL, rc->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fds[0], 0);
	T_ASSERT(rc->map != MAP_FAILED, "mmap ring: %s", strerror(errno));
	close(fds[0]);
	rc->sq_fd = fds[1];
	rc->cq_fd = fds[2];
	rc->sq_head = (_Atomic uint32_t *)(rc->map + l->sq_head);
	rc->sq_tail = (_Atomic uint32_t *)(rc->map + l->sq_tail);
	rc->cq_head = (_Atomic uint32_t *)(rc->map + l->cq_head);
	rc->cq_tail = (_Atomic uint32_t *)(rc->map + l->cq_tail);
	rc->cq_flags = (_Atomic uint32_t *)(rc->map + l->cq_flags);
	rc->sqes = (struct xfer_sqe *)(rc->map + l->sqes);
	rc->sq_entries = l->sq_entries;
	xfer__client__client_msg__free_unpacked(r, NULL);
}

static void set_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	T_ASSERT(fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0,
		 "F_SETFL: %s", strerror(errno));
}

/*
 * Ring xferd without ever blocking ourselves, whatever we did to the
 * fd: send(MSG_DONTWAIT) where it is a socket, else write() (an eventfd,
 * whose description this attacker did not make blocking).
 */
static void raw_ring(int fd)
{
	uint64_t one = 1;

	if (send(fd, &one, sizeof(one), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
	    errno == ENOTSOCK)
		(void)!write(fd, &one, sizeof(one));
}

/* As many NOPs as the SQ takes; completions are left where they are. */
static void raw_nops(struct raw_client *rc)
{
	uint32_t tail = atomic_load_explicit(rc->sq_tail,
					     memory_order_relaxed);
	uint32_t head = atomic_load_explicit(rc->sq_head,
					     memory_order_acquire);

	while (tail - head < rc->sq_entries) {
		xfer_prep_nop(&rc->sqes[tail & (rc->sq_entries - 1)], tail);
		tail++;
	}
	atomic_store_explicit(rc->sq_tail, tail, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	raw_ring(rc->sq_fd);
}

/* Tell the parent we are armed; run until it closes the pipe. */
static bool parent_says_go_on(int in, int wait_ms)
{
	struct pollfd pfd = { .fd = in, .events = POLLIN };

	return poll(&pfd, 1, wait_ms) == 0;
}

struct hostile {
	pid_t pid;
	int ctl;            /* closing it ends the hostile client */
};

static void hostile_start(struct hostile *h, void (*fn)(int in, int out),
			  const char *what)
{
	int ctl[2], ready[2];
	char c;

	T_ASSERT(pipe2(ctl, O_CLOEXEC) == 0 && pipe2(ready, O_CLOEXEC) == 0,
		 "pipe: %s", strerror(errno));
	h->pid = tl_fork();
	if (h->pid == 0) {
		close(ctl[1]);
		close(ready[0]);
		fn(ctl[0], ready[1]);
		_exit(0);
	}
	close(ctl[0]);
	close(ready[1]);
	h->ctl = ctl[1];
	tl_read_full(ready[0], &c, 1);
	close(ready[0]);
	printf("%s: armed\n", what);
	fflush(stdout);
}

/* Ends it (SIGKILL for those that never look at the pipe). */
static void hostile_stop(struct hostile *h, bool kill_it)
{
	close(h->ctl);
	if (kill_it)
		kill(h->pid, SIGKILL);
	(void)tl_child_wait(h->pid, 10000);
}

/* --- part "cq": a full, blocking CQ doorbell --- */

static void cq_attacker(int in, int out)
{
	struct raw_client rc;
	uint64_t v = 0xfffffffffffffffeull, one = 1;

	raw_open(&rc);
	/* Full: an eventfd counter at its maximum takes no more; a socket or
	 * a pipe takes 8-byte writes until EAGAIN. */
	(void)!write(rc.cq_fd, &v, sizeof(v));
	for (int i = 0; i < 1000000 && write(rc.cq_fd, &one, sizeof(one)) > 0;
	     i++)
		;
	set_blocking(rc.cq_fd);
	/* Ask for CQ wake-ups, and give xferd completions to post. */
	atomic_store_explicit(rc.cq_flags, XFER_CQ_NEED_WAKEUP,
			      memory_order_seq_cst);
	raw_nops(&rc);
	tl_write_full(out, "a", 1);
	/* Keep it coming: room in the CQ now and then (the completions are
	 * dropped unread), more NOPs, the doorbell. */
	while (parent_says_go_on(in, 1)) {
		atomic_store_explicit(rc.cq_head,
				      atomic_load_explicit(rc.cq_tail,
							   memory_order_acquire),
				      memory_order_release);
		raw_nops(&rc);
	}
	_exit(0);
}

static void part_cq(void)
{
	struct bystander b;
	struct hostile h;

	tl_daemon_start(&xd, NULL);
	bystander_start(&b);
	bystander_round(&b, "cq: before");
	hostile_start(&h, cq_attacker, "cq: a client with a full, blocking "
		      "CQ doorbell");
	bystander_round(&b, "cq: during the attack");
	bystander_round(&b, "cq: during the attack, again");
	hostile_stop(&h, false);
	bystander_round(&b, "cq: after the attacker left");
	hostile_start(&h, cq_attacker, "cq: a second attacker");
	bystander_round(&b, "cq: during the second attack");
	bystander_stop(&b);
	uint64_t t0 = tl_now_ms();
	int st = tl_daemon_stop_within(&xd, STOP_BOUND_MS);
	T_ASSERT(st == 0, "cq: xferd's exit status %d on SIGTERM", st);
	printf("cq: xferd stopped on SIGTERM in %llu ms with the attacker "
	       "connected: ok\n", (unsigned long long)(tl_now_ms() - t0));
	hostile_stop(&h, true);
}

/* --- part "sq": stolen and flooded doorbells --- */

static void *read_forever(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint64_t buf[512];

	for (;;)
		if (read(fd, buf, sizeof(buf)) < 0 && errno != EINTR &&
		    errno != EAGAIN)
			poll(NULL, 0, 1);
	return NULL;
}

static void thief(int in, int out)
{
	struct raw_client rc;
	pthread_t t;

	raw_open(&rc);
	/* Blocking, so that whoever else reads these descriptions would
	 * block too; then read them without pause, two readers each. */
	set_blocking(rc.sq_fd);
	set_blocking(rc.cq_fd);
	for (int i = 0; i < 2; i++) {
		T_ASSERT(pthread_create(&t, NULL, read_forever,
					(void *)(intptr_t)rc.sq_fd) == 0 &&
			 pthread_create(&t, NULL, read_forever,
					(void *)(intptr_t)rc.cq_fd) == 0,
			 "pthread_create");
	}
	tl_write_full(out, "a", 1);
	while (parent_says_go_on(in, 100))
		;
	_exit(0);
}

static void flood(int fd)
{
	static uint8_t junk[4096];
	uint64_t max = 0xfffffffffffffffeull;

	(void)!write(fd, &max, sizeof(max));
	(void)!write(fd, junk, sizeof(junk));
	(void)!write(fd, junk, 0);
	(void)!write(fd, junk, 1);
}

static void flooder(int in, int out)
{
	struct raw_client rc;

	raw_open(&rc);
	tl_write_full(out, "a", 1);
	for (unsigned i = 0;; i++) {
		flood(rc.sq_fd);
		flood(rc.cq_fd);
		if (i % 256 == 0 && !parent_says_go_on(in, 0))
			break;
	}
	_exit(0);
}

/* A new client connects and completes a NOP, in bounded time. */
static void newcomer(const char *when)
{
	struct xfer_ctx *ctx;
	struct xfer_cqe *cqe;
	uint64_t t0 = tl_now_ms();

	T_OK(xfer_open(xd.socket, &ctx));
	xfer_set_wait_spin(ctx, 0);
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);
	T_ASSERT(sqe, "newcomer: no SQE");
	xfer_prep_nop(sqe, 77);
	T_ASSERT(xfer_submit(ctx) == 1, "newcomer: submit");
	int rc = xfer_wait_cqe(ctx, &cqe, OP_BOUND_MS);
	T_ASSERT(rc == 0 && cqe->user_data == 77 && cqe->result == 0,
		 "%s: a new client's NOP: %s", when, xfer_strerror(rc));
	xfer_cq_advance(ctx, 1);
	xfer_close(ctx);
	printf("%s: a new client connected and completed a NOP in %llu ms: "
	       "ok\n", when, (unsigned long long)(tl_now_ms() - t0));
}

static void part_sq(void)
{
	struct bystander b;
	struct hostile h;

	tl_daemon_start(&xd, NULL);
	bystander_start(&b);
	bystander_round(&b, "sq: before");
	hostile_start(&h, thief, "sq: a thief reading its doorbells");
	bystander_round(&b, "sq: during the theft");
	bystander_round(&b, "sq: during the theft, again");
	hostile_stop(&h, true);
	bystander_round(&b, "sq: after the thief left");
	hostile_start(&h, flooder, "sq: a flooder writing its doorbells");
	bystander_round(&b, "sq: during the flood");
	newcomer("sq: during the flood");
	hostile_stop(&h, false);
	bystander_round(&b, "sq: after the flood");
	bystander_stop(&b);
	int st = tl_daemon_stop_within(&xd, STOP_BOUND_MS);
	T_ASSERT(st == 0, "sq: xferd's exit status %d on SIGTERM", st);
	printf("sq: xferd stopped cleanly: ok\n");
}

int main(int argc, char **argv)
{
	const char *part = argc > 1 ? argv[1] : "all";
	bool all = strcmp(part, "all") == 0;

	T_ASSERT(all || !strcmp(part, "cq") || !strcmp(part, "sq"),
		 "usage: wake_abuse [cq|sq]");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (all || !strcmp(part, "cq"))
		part_cq();
	if (all || !strcmp(part, "sq"))
		part_sq();
	return 0;
}
