/* SPDX-License-Identifier: Apache-2.0 */
/*
 * token_hint.c - a token's address hint cannot make xferd connect
 * anywhere.
 *
 * The test runs a TCP listener of its own on loopback (the "victim" host)
 * and counts every connection it gets.  A bystander client keeps doing
 * verified transfers on the xferd under attack the whole time.
 *
 *  1. no cluster key: a client imports forged tokens (a real token with
 *     another instance id and the victim's address) and looks up
 *     "127.0.0.1:<victim>/name": every one fails at once with
 *     -EADDRNOTAVAIL and the victim sees no connection;
 *  2. a known peer (a second xferd named by a `peer =` line) still
 *     works: its token imports and a write lands, bytes checked;
 *  3. with a cluster key, dialing a token's address is allowed (the
 *     handshake proves the peer first), but many forged tokens from one
 *     user are rate-limited: the victim sees at most peer_connect_rate's
 *     burst plus its rate over the time taken, and the rest fail with
 *     -EAGAIN.
 *
 * Env: XFERD_BIN.  Exit 0 pass, 1 fail, 77 skip.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/token_codec.h"
#include "testlib.h"

#define FORGED     40    /* forged tokens per round */
#define RATE       10    /* peer_connect_rate's default: a second */
#define BURST      (2 * RATE)
#define BYST_LEN   (64u << 10)

static int victim_fd;
static uint16_t victim_port;
/* Connections the victim accepted, counted by its process (shared). */
static volatile unsigned *victim_conns;

static uint16_t bound_port(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	T_ASSERT(getsockname(fd, (struct sockaddr *)&sa, &len) == 0,
		 "getsockname: %s", strerror(errno));
	return ntohs(sa.sin_port);
}

/* The victim: a listener on 127.0.0.1 that nobody should dial. */
static void victim_open(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	victim_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	T_ASSERT(victim_fd >= 0 &&
		 bind(victim_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		 listen(victim_fd, 256) == 0, "victim listener: %s",
		 strerror(errno));
	victim_port = bound_port(victim_fd);
	victim_conns = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_ASSERT(victim_conns != MAP_FAILED, "mmap: %s", strerror(errno));
	/* Its own process accepts and closes at once, so that a dial fails
	 * fast at xferd instead of waiting out its handshake timeout. */
	pid_t pid = tl_fork();
	T_ASSERT(pid >= 0, "fork");
	if (pid == 0) {
		struct pollfd p = { .fd = victim_fd, .events = POLLIN };
		for (;;) {
			int fd;
			while ((fd = accept4(victim_fd, NULL, NULL,
					     SOCK_CLOEXEC)) >= 0) {
				__atomic_add_fetch(victim_conns, 1,
						   __ATOMIC_SEQ_CST);
				close(fd);
			}
			poll(&p, 1, 100);
		}
	}
}

/* Connections the victim saw, after waiting wait_ms for stragglers. */
static unsigned victim_poll(int wait_ms)
{
	usleep((useconds_t)wait_ms * 1000);
	return __atomic_load_n(victim_conns, __ATOMIC_SEQ_CST);
}

/* A token of b (a real one) turned into a forgery: another instance id
 * (seed), and the victim's address as its only hint. */
static size_t forge(const uint8_t *real, size_t real_len, unsigned seed,
		    uint8_t *out)
{
	struct token t;
	size_t len = XFER_TOKEN_MAX;

	T_ASSERT(token_decode(real, real_len, &t) == 0, "token_decode");
	for (unsigned i = 0; i < TOKEN_INSTANCE_LEN; i++)
		t.instance_id[i] = (uint8_t)(0xa0 + seed * 7 + i);
	memset(t.addrs, 0, sizeof(t.addrs));
	t.naddrs = 1;
	t.addrs[0].ip_len = 4;
	t.addrs[0].prefix_len = 32;
	t.addrs[0].port = victim_port;
	const uint8_t lo[4] = { 127, 0, 0, 1 };
	memcpy(t.addrs[0].ip, lo, 4);
	snprintf(t.node_name, sizeof(t.node_name), "victim");
	T_ASSERT(token_encode(&t, out, &len) == 0, "token_encode");
	return len;
}

/* --- the bystander: verified transfers until told to stop --- */

static void bystander(const char *sock, int stop_fd, int out_fd)
{
	struct xfer_ctx *ctx;
	struct tl_buf a, b;
	struct xfer_remote *rb;
	uint8_t tok[XFER_TOKEN_MAX];
	uint64_t done = 0;
	struct pollfd p = { .fd = stop_fd, .events = POLLIN };

	T_OK(xfer_open(sock, &ctx));
	tl_buf_alloc(ctx, TL_HOST, BYST_LEN, &a);
	tl_buf_alloc(ctx, TL_HOST, BYST_LEN, &b);
	size_t tl = tl_export(&b, tok);
	T_OK(xfer_import(ctx, tok, tl, &rb));
	tl_write_full(out_fd, &done, sizeof(done));   /* ready */
	while (poll(&p, 1, 0) == 0) {
		uint64_t seed = done + 1, t0 = tl_now_ms();
		tl_fill(a.ptr, BYST_LEN, seed);
		struct xfer_sqe *sqe = xfer_get_sqe(ctx);
		T_ASSERT(sqe, "bystander: no SQE");
		xfer_prep_rw(sqe, XFER_OP_WRITE, a.handle, 0,
			     xfer_remote_handle(rb), 0, BYST_LEN, seed);
		struct xfer_cqe c = tl_submit_wait(ctx);
		T_ASSERT(c.result == BYST_LEN && tl_check(b.ptr, BYST_LEN, seed) == 0,
			 "bystander transfer %llu: %lld, bytes %s",
			 (unsigned long long)seed, (long long)c.result,
			 tl_check(b.ptr, BYST_LEN, seed) ? "wrong" : "right");
		T_ASSERT(tl_now_ms() - t0 < 2000, "bystander transfer took %llu ms",
			 (unsigned long long)(tl_now_ms() - t0));
		done++;
		usleep(2000);
	}
	tl_write_full(out_fd, &done, sizeof(done));
	exit(0);
}

struct byst {
	pid_t pid;
	int stop, res;
};

static void byst_start(struct byst *y, const char *sock)
{
	int s[2], r[2];
	uint64_t n;

	T_ASSERT(pipe(s) == 0 && pipe(r) == 0, "pipe");
	y->pid = tl_fork();
	T_ASSERT(y->pid >= 0, "fork");
	if (y->pid == 0) {
		close(s[1]);
		close(r[0]);
		bystander(sock, s[0], r[1]);
	}
	close(s[0]);
	close(r[1]);
	y->stop = s[1];
	y->res = r[0];
	tl_read_full(y->res, &n, sizeof(n));
}

static uint64_t byst_stop(struct byst *y)
{
	uint64_t n = 0;

	T_ASSERT(write(y->stop, "x", 1) == 1, "stop the bystander");
	tl_read_full(y->res, &n, sizeof(n));
	T_ASSERT(tl_child_wait(y->pid, 30000) == 0, "the bystander failed");
	close(y->stop);
	close(y->res);
	T_ASSERT(n > 0, "the bystander moved nothing");
	return n;
}

/* --- 1. no key: nothing dialed --- */

static void no_key(const uint8_t *real, size_t real_len)
{
	struct tl_daemon d;
	struct xfer_ctx *ctx;
	struct xfer_remote *rem;
	struct byst y;
	uint8_t tok[XFER_TOKEN_MAX], got[XFER_TOKEN_MAX];
	char name[64];

	tl_daemon_start(&d, NULL);
	byst_start(&y, d.socket);
	T_OK(xfer_open(d.socket, &ctx));
	uint64_t t0 = tl_now_ms();
	for (unsigned i = 0; i < FORGED; i++) {
		size_t len = forge(real, real_len, i, tok);
		int rc = xfer_import(ctx, tok, len, &rem);
		T_ASSERT(rc == -EADDRNOTAVAIL,
			 "forged token %u (hint 127.0.0.1:%u, no cluster key): "
			 "import -> %d (%s), want -EADDRNOTAVAIL", i, victim_port,
			 rc, xfer_strerror(rc));
	}
	snprintf(name, sizeof(name), "127.0.0.1:%u/kv", victim_port);
	size_t glen = sizeof(got);
	int rc = xfer_lookup(ctx, name, got, &glen);
	T_ASSERT(rc == -EADDRNOTAVAIL, "lookup %s -> %d (%s), want "
		 "-EADDRNOTAVAIL", name, rc, xfer_strerror(rc));
	uint64_t ms = tl_now_ms() - t0;
	unsigned n = victim_poll(1000);
	T_ASSERT(n == 0, "xferd without a cluster key connected %u times to "
		 "the address of forged tokens (127.0.0.1:%u)", n, victim_port);
	uint64_t moved = byst_stop(&y);
	xfer_close(ctx);
	T_ASSERT(tl_daemon_stop(&d) == 0, "xferd did not stop cleanly");
	printf("no key: %d forged tokens and a host:port lookup refused "
	       "(EADDRNOTAVAIL: %s) in %llu ms, no connection made; bystander "
	       "%llu verified transfers\n", FORGED, xfer_strerror(-EADDRNOTAVAIL),
	       (unsigned long long)ms, (unsigned long long)moved);
}

/* --- 2. a known peer still works --- */

static void known_peer(void)
{
	struct tl_daemon a, b;
	char listen_b[64], peer_b[64];
	const char *args_b[] = { listen_b, NULL };
	const char *args_a[] = { peer_b, NULL };
	struct xfer_ctx *ca, *cb;
	struct tl_buf src, dst;
	struct xfer_remote *rem;
	uint8_t tok[XFER_TOKEN_MAX];
	uint16_t pb = tl_free_port();

	snprintf(listen_b, sizeof(listen_b), "listen=127.0.0.1:%u", pb);
	snprintf(peer_b, sizeof(peer_b), "peer=127.0.0.1:%u", pb);
	tl_daemon_start(&b, args_b);
	tl_daemon_start(&a, args_a);
	T_OK(xfer_open(b.socket, &cb));
	T_OK(xfer_open(a.socket, &ca));
	tl_buf_alloc(cb, TL_HOST, 1 << 20, &dst);
	tl_buf_alloc(ca, TL_HOST, 1 << 20, &src);
	size_t len = tl_export(&dst, tok);
	int rc = xfer_import(ca, tok, len, &rem);
	T_ASSERT(rc == 0, "import of a known peer's token: %d (%s)", rc,
		 xfer_strerror(rc));
	tl_fill(src.ptr, src.len, 4242);
	struct xfer_sqe *sqe = xfer_get_sqe(ca);
	T_ASSERT(sqe, "no SQE");
	xfer_prep_rw(sqe, XFER_OP_WRITE, src.handle, 0, xfer_remote_handle(rem),
		     0, (uint32_t)src.len, 1);
	struct xfer_cqe c = tl_submit_wait(ca);
	T_ASSERT(c.result == (int64_t)src.len, "write to the known peer: %lld",
		 (long long)c.result);
	T_ASSERT(tl_check(dst.ptr, dst.len, 4242) == 0,
		 "wrong bytes arrived at the known peer");
	T_OK(xfer_unimport(ca, rem));
	tl_buf_free(ca, &src);
	tl_buf_free(cb, &dst);
	xfer_close(ca);
	xfer_close(cb);
	T_ASSERT(tl_daemon_stop(&a) == 0 && tl_daemon_stop(&b) == 0,
		 "xferds did not stop cleanly");
	printf("known peer (peer = 127.0.0.1:%u): import and a 1 MiB write, "
	       "bytes checked\n", pb);
}

/* --- 3. with a key: dialed, but rate-limited --- */

static void with_key(const uint8_t *real, size_t real_len)
{
	char keyfile[] = "/tmp/xferd-hint-key.XXXXXX", key_opt[128];
	struct tl_daemon d;
	struct xfer_ctx *ctx;
	struct xfer_remote *rem;
	struct byst y;
	uint8_t tok[XFER_TOKEN_MAX], secret[32];
	unsigned again = 0, other = 0;
	int kfd = mkstemp(keyfile);

	T_ASSERT(kfd >= 0, "mkstemp: %s", strerror(errno));
	for (unsigned i = 0; i < sizeof(secret); i++)
		secret[i] = (uint8_t)rand();
	tl_write_full(kfd, secret, sizeof(secret));
	fchmod(kfd, 0600);
	close(kfd);
	snprintf(key_opt, sizeof(key_opt), "cluster_key_file=%s", keyfile);
	const char *args[] = { key_opt, NULL };
	tl_daemon_start(&d, args);
	byst_start(&y, d.socket);
	T_OK(xfer_open(d.socket, &ctx));
	unsigned before = victim_poll(0);
	uint64_t t0 = tl_now_ms();
	for (unsigned i = 0; i < FORGED; i++) {
		size_t len = forge(real, real_len, 100 + i, tok);
		int rc = xfer_import(ctx, tok, len, &rem);
		T_ASSERT(rc != 0, "forged token %u imported", i);
		if (rc == -EAGAIN)
			again++;
		else
			other++;
	}
	uint64_t ms = tl_now_ms() - t0;
	unsigned n = victim_poll(1000) - before;
	unsigned most = BURST + (unsigned)(RATE * (ms + 1000) / 1000) + 2;
	T_ASSERT(n >= 1, "with a cluster key a token's address may be "
		 "dialed, but the victim saw no connection");
	T_ASSERT(n <= most && again > 0,
		 "%u forged tokens in %llu ms made xferd connect %u times "
		 "(at most %u at peer_connect_rate %d/s); %u refused with "
		 "EAGAIN", FORGED, (unsigned long long)ms, n, most, RATE, again);
	uint64_t moved = byst_stop(&y);
	xfer_close(ctx);
	T_ASSERT(tl_daemon_stop(&d) == 0, "xferd did not stop cleanly");
	unlink(keyfile);
	printf("cluster key: %d forged tokens in %llu ms: %u connections "
	       "(<= %u), %u refused with EAGAIN (%s), %u failed at the "
	       "victim; bystander %llu verified transfers\n", FORGED,
	       (unsigned long long)ms, n, most, again,
	       xfer_strerror(-EAGAIN), other, (unsigned long long)moved);
}

int main(void)
{
	struct tl_daemon src;
	struct xfer_ctx *ctx;
	struct tl_buf b;
	uint8_t real[XFER_TOKEN_MAX];

	signal(SIGPIPE, SIG_IGN);
	victim_open();
	/* A real token to forge from (its key is valid nowhere else). */
	tl_daemon_start(&src, NULL);
	T_OK(xfer_open(src.socket, &ctx));
	tl_buf_alloc(ctx, TL_HOST, 1 << 16, &b);
	size_t real_len = tl_export(&b, real);

	no_key(real, real_len);
	known_peer();
	with_key(real, real_len);

	tl_buf_free(ctx, &b);
	xfer_close(ctx);
	T_ASSERT(tl_daemon_stop(&src) == 0, "xferd did not stop cleanly");
	printf("ok: forged token hints dial nothing without a key, are "
	       "rate-limited with one; a known peer works\n");
	return 0;
}
