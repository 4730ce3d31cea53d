/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bad_input.c - bad input on every interface of xferd gets a clear error,
 * touches no memory and never takes the daemon down.
 *
 * Part 1, descriptors: every kind of bad SQE completes with the errno
 * the ring ABI names (-EINVAL: opcode, flags, reserved fields; -EACCES:
 * a handle of another client, an unknown or guessed handle, an import as
 * the local side; -ERANGE: past the end, and offset + length wrapping
 * 2^64; -ESTALE: an import of a region its owner freed), and the bytes of
 * both sides are unchanged after each.  Tokens: a tampered token (key,
 * range, region, kind, length) is -EACCES, garbage is -EINVAL.
 *
 * Part 2, the control socket, spoken raw (SOCK_SEQPACKET + protobuf-c):
 * garbage, a wrong tag or protocol version, a packet with 5 fds, an
 * oversized packet, unexpected message types, bad REGs (an unsealed
 * memfd: -EPERM; unmapped memory: -EFAULT), bad prepared lists (entries
 * in a pipe or a short memfd, past the region, past the bounds), and a
 * client that corrupts its own ring (a bogus SQ tail gets it dropped; a
 * bogus CQ head stalls only it).  After each, xferd is alive, accepts
 * new clients, and a good client that was open all along still moves
 * verified bytes.
 *
 * Longer than most files: one program for the one concern "bad input",
 * with the by-hand protocol helpers only this test needs.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.pb-c.h"
#include "testlib.h"
#include "token.pb-c.h"
#include "common/wire.h"

#define REG_LEN (64u * 1024u)
#define OP_LEN  256u

enum { R_HOST, R_MALLOC, R_DOOMED, NREGIONS }; /* the owner's regions */

static struct tl_owner owner;
static struct xfer_ctx *ctx;                  /* the client under test */
static struct tl_buf local[2];                /* its memory, by kind */
static struct xfer_remote *remote[NREGIONS];  /* its imports of the owner */

static uint64_t bg_seed(unsigned i)
{
	return 0xb6b6b6b6ull + i;
}

/* Every byte of both sides still holds its background pattern. */
static void check_untouched(const char *what)
{
	for (unsigned i = 0; i < 2; i++) {
		size_t bad = tl_owner_check(&owner, i, 0, REG_LEN, bg_seed(i), 0);
		T_ASSERT(!bad, "%s: owner region %u byte %zu changed", what, i,
			 bad - 1);
		bad = tl_check(local[i].ptr, REG_LEN, bg_seed(10 + i));
		T_ASSERT(!bad, "%s: local %s byte %zu changed", what,
			 tl_kind_name(i), bad - 1);
	}
}

static void reset_background(void)
{
	for (unsigned i = 0; i < 2; i++) {
		tl_owner_fill(&owner, i, 0, REG_LEN, bg_seed(i), 0);
		tl_fill(local[i].ptr, REG_LEN, bg_seed(10 + i));
	}
}

/* Submit sqe as given and expect result `want`, touching nothing. */
static void expect_sqe(const struct xfer_sqe *tmpl, int64_t want,
		       const char *what)
{
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);

	T_ASSERT(sqe, "no SQE");
	*sqe = *tmpl;
	sqe->user_data = 0xbad0000 + (uint64_t)-want;
	struct xfer_cqe c = tl_submit_wait(ctx);
	T_ASSERT(c.user_data == 0xbad0000 + (uint64_t)-want,
		 "%s: user_data %llx", what, (unsigned long long)c.user_data);
	T_ASSERT(c.result == want, "%s: result %lld (%s), want %s", what,
		 (long long)c.result, xfer_strerror((int)c.result),
		 xfer_strerror((int)want));
	T_ASSERT(c.path == XFER_PATH_NONE, "%s: path %s", what,
		 xfer_path_name(c.path));
	check_untouched(what);
}

static struct xfer_sqe rw(unsigned op, uint64_t l, uint64_t loff, uint64_t r,
			  uint64_t roff, uint64_t len)
{
	struct xfer_sqe s;

	xfer_prep_rw(&s, op, l, loff, r, roff, len, 0);
	return s;
}

/* Both directions of one bad shape. */
static void expect_both(uint64_t l, uint64_t loff, uint64_t r, uint64_t roff,
			uint64_t len, int64_t want, const char *what)
{
	char buf[160];
	struct xfer_sqe s;

	snprintf(buf, sizeof(buf), "write: %s", what);
	s = rw(XFER_OP_WRITE, l, loff, r, roff, len);
	expect_sqe(&s, want, buf);
	snprintf(buf, sizeof(buf), "read: %s", what);
	s = rw(XFER_OP_READ, l, loff, r, roff, len);
	expect_sqe(&s, want, buf);
}

static bool is_ours(uint64_t h)
{
	for (unsigned i = 0; i < 2; i++)
		if (local[i].handle == h)
			return true;
	for (unsigned i = 0; i < NREGIONS; i++)
		if (xfer_remote_handle(remote[i]) == h)
			return true;
	return false;
}

static void bad_descriptors(void)
{
	const uint64_t lh = local[0].handle;
	const uint64_t rh = xfer_remote_handle(remote[R_HOST]);
	struct xfer_sqe s;

	/* The template is good: it moves data both ways. */
	tl_fill(local[0].ptr, OP_LEN, 42);
	s = rw(XFER_OP_WRITE, lh, 0, rh, 0, OP_LEN);
	*xfer_get_sqe(ctx) = s;
	struct xfer_cqe c = tl_submit_wait(ctx);
	T_ASSERT(c.result == OP_LEN, "good write -> %lld", (long long)c.result);
	T_ASSERT(!tl_owner_check(&owner, R_HOST, 0, OP_LEN, 42, 0),
		 "good write did not land");
	reset_background();

	/* -EINVAL: what the descriptor itself says is malformed. */
	s = rw(99, lh, 0, rh, 0, OP_LEN);
	expect_sqe(&s, -EINVAL, "opcode 99");
	s = rw(XFER_OP__COUNT, lh, 0, rh, 0, OP_LEN);
	expect_sqe(&s, -EINVAL, "opcode XFER_OP__COUNT");
	s = rw(255, lh, 0, rh, 0, OP_LEN);
	expect_sqe(&s, -EINVAL, "opcode 255");
	s = rw(XFER_OP_WRITE, lh, 0, rh, 0, OP_LEN);
	/* The bit after the last known: past the phase bits, which libxfer
	 * owns on a ring that negotiated phase (old_client_flags() has a
	 * ring without). */
	s.flags = (XFER_SQE_F__ALL | XFER_SQE_F_PHASE_BITS) + 1;
	expect_sqe(&s, -EINVAL, "first unknown flag");
	s.flags = XFER_SQE_F_CLASS_MASK;  /* class 3: none such */
	expect_sqe(&s, -EINVAL, "unknown class");
	s.flags = 0x80;
	expect_sqe(&s, -EINVAL, "flag 0x80");
	s.flags = 0;
	s.reserved0 = 1;
	expect_sqe(&s, -EINVAL, "reserved0 != 0");
	s.reserved0 = 0x8000;
	expect_sqe(&s, -EINVAL, "reserved0 high bit");
	s.reserved0 = 0;
	xfer_prep_notify(&s, rh, 1, 0);
	xfer_sqe_set_notify(&s, 2);
	expect_sqe(&s, -EINVAL, "NOTIFY with the notify flag");

	/* -EACCES: handles this client may not use. */
	expect_both(owner.handle[R_HOST], 0, rh, 0, OP_LEN, -EACCES,
		    "another client's region as local");
	expect_both(lh, 0, owner.handle[R_HOST], 0, OP_LEN, -EACCES,
		    "another client's region as remote, no token");
	expect_both(lh, 0, owner.handle[R_MALLOC], 0, OP_LEN, -EACCES,
		    "another client's malloc region as remote, no token");
	expect_both(rh, 0, rh, 0, OP_LEN, -EACCES, "an import as local");
	expect_both(lh, 0, 0, 0, OP_LEN, -EACCES, "handle 0");
	expect_both(lh, 0, UINT64_MAX, 0, OP_LEN, -EACCES, "handle 2^64-1");
	expect_both(lh, 0, 1ull << 40, 0, OP_LEN, -EACCES, "handle 2^40");
	expect_both(0, 0, rh, 0, OP_LEN, -EACCES, "local handle 0");
	/* Guessing: every handle number around the owner's that is not
	 * this client's own gets the same answer as an unknown one. */
	uint64_t top = owner.handle[R_DOOMED] + 8;
	uint64_t h0 = owner.handle[R_HOST] > 64 ? owner.handle[R_HOST] - 64 : 1;
	for (uint64_t h = h0; h <= top; h++) {
		if (is_ours(h))
			continue;
		char what[64];
		snprintf(what, sizeof(what), "guessed handle %llu",
			 (unsigned long long)h);
		s = rw(XFER_OP_WRITE, lh, 0, h, 0, OP_LEN);
		expect_sqe(&s, -EACCES, what);
	}

	/* -ERANGE: outside the region or the import, and wrapping 2^64. */
	expect_both(lh, 0, rh, REG_LEN - OP_LEN + 1, OP_LEN, -ERANGE,
		    "remote one byte past the end");
	expect_both(lh, REG_LEN - OP_LEN + 1, rh, 0, OP_LEN, -ERANGE,
		    "local one byte past the end");
	expect_both(lh, 0, rh, REG_LEN, 1, -ERANGE, "remote offset at the end");
	expect_both(lh, 0, rh, 0, REG_LEN + 1, -ERANGE, "length above the region");
	expect_both(lh, 0, rh, UINT64_MAX - 5, 16, -ERANGE,
		    "remote offset + length wraps");
	expect_both(lh, 16, rh, 0, UINT64_MAX - 8, -ERANGE,
		    "local offset + length wraps");
	expect_both(lh, 0, rh, 16, UINT64_MAX - 8, -ERANGE,
		    "remote length wraps with offset");
	expect_both(lh, UINT64_MAX, rh, 0, 1, -ERANGE, "local offset 2^64-1");
	expect_both(local[1].handle, 0, xfer_remote_handle(remote[R_MALLOC]),
		    REG_LEN - 1, 2, -ERANGE, "malloc regions, past the end");

	/* -ESTALE: the owner frees a region this client imported. */
	const uint64_t dh = xfer_remote_handle(remote[R_DOOMED]);
	tl_fill(local[0].ptr, OP_LEN, 43);
	s = rw(XFER_OP_WRITE, lh, 0, dh, 0, OP_LEN);
	*xfer_get_sqe(ctx) = s;
	c = tl_submit_wait(ctx);
	T_ASSERT(c.result == OP_LEN, "write before the free -> %lld",
		 (long long)c.result);
	T_ASSERT(!tl_owner_check(&owner, R_DOOMED, 0, OP_LEN, 43, 0),
		 "write before the free did not land");
	reset_background();
	T_OK(tl_owner_free(&owner, R_DOOMED));
	expect_both(lh, 0, dh, 0, OP_LEN, -ESTALE, "import of a freed region");
	xfer_prep_notify(&s, dh, 5, 0);
	expect_sqe(&s, -ESTALE, "notify to a freed region");
	/* The import stays this client's to remove. */
	T_OK(xfer_unimport(ctx, remote[R_DOOMED]));
	remote[R_DOOMED] = NULL;
	expect_both(lh, 0, dh, 0, OP_LEN, -EACCES, "a removed import");
	/* ...and the freed region's token is no good any more. */
	struct xfer_remote *r;
	T_ASSERT(xfer_import(ctx, owner.token[R_DOOMED],
			     owner.token_len[R_DOOMED], &r) == -EACCES,
		 "import of a freed region's token must be -EACCES");
	printf("bad descriptors: ok\n");
}

/* --- tokens --- */

typedef void (*token_edit)(Xfer__Token__Token *t);

static void edit_offset(Xfer__Token__Token *t)
{
	t->offset += 1;
	t->length -= 1;
}

static void edit_widen(Xfer__Token__Token *t)
{
	t->offset = 0;
	t->length = t->region_length;
}

static void edit_region(Xfer__Token__Token *t)
{
	t->region = owner.handle[R_MALLOC];
}

static void edit_kind(Xfer__Token__Token *t)
{
	t->mem_kind = t->mem_kind == 1 ? 2 : 1;
}

static void edit_region_length(Xfer__Token__Token *t)
{
	t->region_length += 4096;
	t->length += 4096;
}

static void edit_instance(Xfer__Token__Token *t)
{
	t->instance_id.data[3] ^= 0x10;
}

static void edit_version(Xfer__Token__Token *t)
{
	t->version = 2;
}

static void edit_short_key(Xfer__Token__Token *t)
{
	t->key.len = 15;
}

/* tok re-encoded after edit; its key is kept as it was. */
static size_t retoken(const uint8_t *tok, size_t len, token_edit edit,
		      uint8_t *out)
{
	Xfer__Token__Token *t =
		xfer__token__token__unpack(NULL, len - 4, tok + 4);

	T_ASSERT(t, "cannot parse a token xfer_export made");
	edit(t);
	T_ASSERT(4 + xfer__token__token__get_packed_size(t) <= XFER_TOKEN_MAX,
		 "edited token too large");
	memcpy(out, tok, 4);
	size_t n = 4 + xfer__token__token__pack(t, out + 4);
	xfer__token__token__free_unpacked(t, NULL);
	return n;
}

static void expect_import(const void *tok, size_t len, int want,
			  const char *what)
{
	struct xfer_remote *r = NULL;
	int rc = xfer_import(ctx, tok, len, &r);

	T_ASSERT(rc == want, "import of %s -> %d (%s), want %s", what, rc,
		 xfer_strerror(rc), xfer_strerror(want));
	if (!rc)
		T_OK(xfer_unimport(ctx, r));
}

static void bad_tokens(void)
{
	/* A sub-range token: edits may then move its range inside. */
	uint8_t tok[XFER_TOKEN_MAX], bad[XFER_TOKEN_MAX];
	size_t len, n;

	T_OK(tl_owner_export(&owner, R_HOST, 4096, 8192, tok, &len));
	expect_import(tok, len, 0, "the token as exported");

	/* Flip each byte of the key in turn (found in the encoding). */
	Xfer__Token__Token *t = xfer__token__token__unpack(NULL, len - 4,
							   tok + 4);
	T_ASSERT(t && t->key.len == 16, "token has no 16-byte key");
	const uint8_t *key = memmem(tok, len, t->key.data, 16);
	T_ASSERT(key, "key not found in the token");
	size_t key_at = (size_t)(key - tok);
	xfer__token__token__free_unpacked(t, NULL);
	for (size_t i = 0; i < 16; i++) {
		memcpy(bad, tok, len);
		bad[key_at + i] ^= (uint8_t)(1u << (i % 8));
		expect_import(bad, len, -EACCES, "a token with a flipped key byte");
	}

	static const struct {
		token_edit edit;
		int want;
		const char *what;
	} edits[] = {
		{ edit_offset, -EACCES, "a token with its range shifted" },
		{ edit_widen, -EACCES, "a token widened to the region" },
		{ edit_region, -EACCES, "a token pointed at another region" },
		{ edit_kind, -EACCES, "a token with another memory kind" },
		{ edit_region_length, -EACCES, "a token with a longer region" },
		{ edit_instance, -EHOSTUNREACH, "a token of another xferd" },
		{ edit_version, -EINVAL, "a token of version 2" },
		{ edit_short_key, -EINVAL, "a token with a 15-byte key" },
	};
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		n = retoken(tok, len, edits[i].edit, bad);
		expect_import(bad, n, edits[i].want, edits[i].what);
	}

	/* Not tokens at all. */
	tl_fill(bad, 100, 7);
	expect_import(bad, 100, -EINVAL, "100 random bytes");
	memcpy(bad, "XFTK", 4);
	memset(bad + 4, 0xff, 40);
	expect_import(bad, 44, -EINVAL, "the tag and garbage");
	expect_import("XFTK", 4, -EINVAL, "the tag alone");
	expect_import("X", 1, -EINVAL, "one byte");
	memcpy(bad, tok, len);
	bad[0] ^= 1;
	expect_import(bad, len, -EINVAL, "a token with a wrong tag");
	check_untouched("bad tokens");
	printf("bad tokens: ok\n");
}

/* --- the control socket, raw --- */

static struct xfer_ctx *good;
static struct tl_buf good_src, good_dst;
static pid_t daemon_pid;

/* The good client, open all along, still moves verified bytes. */
static void good_roundtrip(const char *after)
{
	static uint64_t seed = 1000;
	struct xfer_sqe *sqe = xfer_get_sqe(good);

	seed++;
	T_ASSERT(sqe, "good client: no SQE");
	tl_fill(good_src.ptr, REG_LEN, seed);
	memset(good_dst.ptr, 0, REG_LEN);
	xfer_prep_write(sqe, good_src.handle, 0, good_dst.handle, 0, REG_LEN,
			seed);
	struct xfer_cqe c = tl_submit_wait(good);
	T_ASSERT(c.user_data == seed && c.result == REG_LEN,
		 "after %s: good client's write -> %lld (%s)", after,
		 (long long)c.result, xfer_strerror((int)c.result));
	T_ASSERT(!tl_check(good_dst.ptr, REG_LEN, seed),
		 "after %s: good client's bytes wrong", after);
}

static void after_abuse(const char *what)
{
	struct xfer_ctx *fresh;

	T_ASSERT(kill(daemon_pid, 0) == 0, "after %s: xferd is gone", what);
	good_roundtrip(what);
	T_ASSERT(xfer_open(tl_socket(), &fresh) == 0,
		 "after %s: xferd refuses new clients", what);
	xfer_close(fresh);
	printf("%s: handled\n", what);
}

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0, "socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", tl_socket());
	T_ASSERT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		 "connect: %s", strerror(errno));
	return fd;
}

/* One packet of raw bytes with up to 8 descriptors. */
static void raw_send(int sock, const void *buf, size_t len, const int *fds,
		     unsigned nfds)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} control;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	T_ASSERT(nfds <= 8, "too many fds");
	if (nfds) {
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	T_ASSERT(n == (ssize_t)len, "sendmsg: %s", strerror(errno));
}

/* m as a packet: the client tag and the packed message. */
static size_t pack(Xfer__Client__ClientMsg *m, uint8_t *buf)
{
	uint32_t tag = WIRE_TAG_CLIENT;

	memcpy(buf, &tag, WIRE_TAG_LEN);
	return WIRE_TAG_LEN + xfer__client__client_msg__pack(m, buf + WIRE_TAG_LEN);
}

static void raw_send_msg(int sock, Xfer__Client__ClientMsg *m,
			 const int *fds, unsigned nfds)
{
	static uint8_t buf[WIRE_MAX_PACKET];

	raw_send(sock, buf, pack(m, buf), fds, nfds);
}

/* The next message (fds closed unless wanted), or NULL at end of stream. */
static Xfer__Client__ClientMsg *raw_recv(int sock, int *fds, unsigned *nfds)
{
	static uint8_t buf[WIRE_MAX_PACKET];
	int tmp[WIRE_MAX_FDS];
	unsigned ntmp;
	struct pollfd pfd = { .fd = sock, .events = POLLIN };

	T_ASSERT(poll(&pfd, 1, 10000) == 1, "xferd said nothing for 10 s");
	ssize_t n = wire_recv(sock, buf, fds ? fds : tmp, nfds ? nfds : &ntmp);
	if (n == 0 || n == -ECONNRESET)
		return NULL;
	T_ASSERT(n > 0, "recv: %s", strerror((int)-n));
	if (!fds)
		wire_close_fds(tmp, &ntmp);
	T_ASSERT(wire_tag(buf, (size_t)n) == WIRE_TAG_CLIENT, "reply tag");
	Xfer__Client__ClientMsg *m = xfer__client__client_msg__unpack(
		NULL, (size_t)n - WIRE_TAG_LEN, buf + WIRE_TAG_LEN);
	T_ASSERT(m && m->proto_version == XFER_PROTO_VERSION,
		 "xferd sent a malformed reply");
	return m;
}

/* xferd closes the connection (a Goodbye may come first). */
static void expect_dropped(int sock, const char *what)
{
	Xfer__Client__ClientMsg *m;

	while ((m = raw_recv(sock, NULL, NULL))) {
		T_ASSERT(m->body_case == XFER__CLIENT__CLIENT_MSG__BODY_GOODBYE,
			 "%s: got message %d instead of being dropped", what,
			 (int)m->body_case);
		xfer__client__client_msg__free_unpacked(m, NULL);
	}
	close(sock);
}

/* A Status with error `want` comes back for request seq. */
static void expect_status(int sock, uint64_t seq, int want, const char *what)
{
	Xfer__Client__ClientMsg *m = raw_recv(sock, NULL, NULL);

	T_ASSERT(m, "%s: connection closed instead of a status", what);
	T_ASSERT(m->body_case == XFER__CLIENT__CLIENT_MSG__BODY_STATUS,
		 "%s: reply %d is not a status", what, (int)m->body_case);
	T_ASSERT(m->seq == seq, "%s: status for seq %llu", what,
		 (unsigned long long)m->seq);
	T_ASSERT(m->status->error == want, "%s: status %d (%s), want %s", what,
		 m->status->error, xfer_strerror(m->status->error),
		 xfer_strerror(want));
	xfer__client__client_msg__free_unpacked(m, NULL);
}

static void send_hello(int sock, uint32_t version, uint32_t sq_entries)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Hello hello = XFER__CLIENT__HELLO__INIT;

	hello.name = "bad_input-raw";
	hello.sq_entries = sq_entries;
	m.proto_version = version;
	m.seq = 1;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO;
	m.hello = &hello;
	raw_send_msg(sock, &m, NULL, 0);
}

/* A connection that did the handshake by hand, with its ring mapped. */
struct raw_client {
	int sock, sq_efd, cq_efd;
	uint8_t *map;
	size_t map_len;
	_Atomic uint32_t *sq_head, *sq_tail, *sq_flags, *cq_head, *cq_tail;
	struct xfer_sqe *sqes;
	struct xfer_cqe *cqes;
	uint32_t sq_entries, cq_entries;
};

static void raw_open(struct raw_client *rc)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds;

	rc->sock = raw_connect();
	send_hello(rc->sock, XFER_PROTO_VERSION, 0);
	Xfer__Client__ClientMsg *m = raw_recv(rc->sock, fds, &nfds);
	T_ASSERT(m && m->body_case == XFER__CLIENT__CLIENT_MSG__BODY_HELLO_REPLY &&
		 nfds == 3 && m->hello_reply->ring,
		 "raw handshake: no HelloReply with 3 fds");
	const Xfer__Client__RingLayout *l = m->hello_reply->ring;
	/* A hello that does not ask for messages (an older client's) gets
	 * the ring of version 2 exactly: no message areas, nothing past
	 * the sender records and the index area. */
	T_ASSERT(!l->sq_msgs && !l->sq_msg_size && !l->cq_msgs &&
		 !l->cq_msg_size && l->map_size ==
		 (l->idx_size ? l->idx + l->idx_size
			      : l->cq_senders + l->cq_entries * l->cq_sender_size),
		 "a hello without notify_msgs got message areas (map %u)",
		 l->map_size);
	rc->map_len = l->map_size;
	rc->map = mmap(NULL, rc->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fds[0], 0);
	T_ASSERT(rc->map != MAP_FAILED, "mmap ring: %s", strerror(errno));
	close(fds[0]);
	rc->sq_efd = fds[1];
	rc->cq_efd = fds[2];
	rc->sq_head = (_Atomic uint32_t *)(rc->map + l->sq_head);
	rc->sq_tail = (_Atomic uint32_t *)(rc->map + l->sq_tail);
	rc->sq_flags = (_Atomic uint32_t *)(rc->map + l->sq_flags);
	rc->cq_head = (_Atomic uint32_t *)(rc->map + l->cq_head);
	rc->cq_tail = (_Atomic uint32_t *)(rc->map + l->cq_tail);
	rc->sqes = (struct xfer_sqe *)(rc->map + l->sqes);
	rc->cqes = (struct xfer_cqe *)(rc->map + l->cqes);
	rc->sq_entries = l->sq_entries;
	rc->cq_entries = l->cq_entries;
	T_ASSERT(*(uint32_t *)(rc->map + l->magic) == XFER_RING_MAGIC,
		 "ring magic");
	daemon_pid = (pid_t)m->hello_reply->daemon_pid;
	xfer__client__client_msg__free_unpacked(m, NULL);
}

static void raw_close(struct raw_client *rc)
{
	munmap(rc->map, rc->map_len);
	close(rc->sq_efd);
	close(rc->cq_efd);
	if (rc->sock >= 0)
		close(rc->sock);
}

static void doorbell(int efd)
{
	uint64_t one = 1;

	T_ASSERT(write(efd, &one, sizeof(one)) == sizeof(one),
		 "doorbell: %s", strerror(errno));
}

static void send_reg(int sock, uint64_t seq, unsigned kind, uint64_t addr,
		     uint64_t length, const int *fds, unsigned nfds)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__RegRequest reg = XFER__CLIENT__REG_REQUEST__INIT;

	reg.kind = kind;
	reg.addr = addr;
	reg.length = length;
	m.proto_version = XFER_PROTO_VERSION;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_REG;
	m.reg = &reg;
	raw_send_msg(sock, &m, fds, nfds);
}

/* One packet as the first of a connection, or right after a proper
 * hello: xferd must hang up on it, and carry on with everyone else. */
static void expect_hangup(bool after_hello, const void *pkt, size_t len,
			  const int *fds, unsigned nfds, const char *what)
{
	struct raw_client rc = { .sock = -1 };
	int sock;

	if (after_hello) {
		raw_open(&rc);
		sock = rc.sock;
		rc.sock = -1;
	} else {
		sock = raw_connect();
	}
	raw_send(sock, pkt, len, fds, nfds);
	expect_dropped(sock, what);
	if (after_hello)
		raw_close(&rc);
	after_abuse(what);
}

/* The client tag, then bytes no protobuf parser accepts (field 1 with
 * wire type 7). */
static const uint8_t bad_pb[] = { 'X', 'F', 'R', 'C', 0x0f, 0xff, 0xff,
				  0xff, 0xff, 0xff, 0xff, 0xff };

static void abuse_packets(void)
{
	static uint8_t pkt[WIRE_MAX_PACKET + 4096];
	uint8_t junk[37];
	int efds[5];
	size_t n;

	T_ASSERT(!xfer__client__client_msg__unpack(NULL, sizeof(bad_pb) - 4,
						   bad_pb + 4),
		 "the garbage protobuf parses");
	tl_fill(junk, sizeof(junk), 99);
	for (int i = 0; i < 5; i++) {
		efds[i] = eventfd(0, EFD_CLOEXEC);
		T_ASSERT(efds[i] >= 0, "eventfd");
	}

	for (int after = 0; after < 2; after++) {
		expect_hangup(after, junk, sizeof(junk), NULL, 0,
			      after ? "garbage after the hello"
				    : "a garbage first packet");
		expect_hangup(after, bad_pb, sizeof(bad_pb), NULL, 0,
			      after ? "tag + garbage protobuf after the hello"
				    : "tag + garbage protobuf first");
		expect_hangup(after, "XFR", 3, NULL, 0,
			      after ? "a packet shorter than the tag after the hello"
				    : "a first packet shorter than the tag");
		/* Larger than any packet xferd accepts. */
		memset(pkt, 0, sizeof(pkt));
		memcpy(pkt, "XFRC", 4);
		expect_hangup(after, pkt, sizeof(pkt), NULL, 0,
			      after ? "an oversized packet after the hello"
				    : "an oversized first packet");
	}

	/* Five fds: more than any packet may carry. */
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Hello hello = XFER__CLIENT__HELLO__INIT;
	m.proto_version = XFER_PROTO_VERSION;
	m.seq = 1;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO;
	m.hello = &hello;
	n = pack(&m, pkt);
	expect_hangup(false, pkt, n, efds, 5, "a hello with 5 fds");
	Xfer__Client__RegRequest reg = XFER__CLIENT__REG_REQUEST__INIT;
	reg.kind = XFER__CLIENT__MEM_KIND__MEM_MEMFD;
	reg.length = 4096;
	m.seq = 2;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_REG;
	m.reg = &reg;
	n = pack(&m, pkt);
	expect_hangup(true, pkt, n, efds, 5, "a REG with 5 fds");
	for (int i = 0; i < 5; i++)
		close(efds[i]);

	/* The first packet must be a hello of our protocol version, asking
	 * for a sane ring: otherwise a status, then the hang-up. */
	int sock = raw_connect();
	send_hello(sock, XFER_PROTO_VERSION + 1, 0);
	expect_status(sock, 1, -EPROTO, "hello of protocol version 2");
	expect_dropped(sock, "wrong protocol version");
	after_abuse("a hello of the wrong protocol version");
	sock = raw_connect();
	send_hello(sock, XFER_PROTO_VERSION, 1000);
	expect_status(sock, 1, -EINVAL, "hello asking for 1000 SQ entries");
	expect_dropped(sock, "bad sq_entries");
	after_abuse("a hello asking for a ring of 1000 entries");
	send_reg(sock = raw_connect(), 1, XFER__CLIENT__MEM_KIND__MEM_CMA,
		 (uint64_t)(uintptr_t)local[1].ptr, 4096, NULL, 0);
	expect_dropped(sock, "a REG before the hello");
	after_abuse("a REG before the hello");

	/* After the hello, message types a client never sends. */
	Xfer__Client__HelloReply hr = XFER__CLIENT__HELLO_REPLY__INIT;
	Xfer__Client__Status st = XFER__CLIENT__STATUS__INIT;
	Xfer__Client__Goodbye bye = XFER__CLIENT__GOODBYE__INIT;
	static const Xfer__Client__ClientMsg__BodyCase unexpected[] = {
		XFER__CLIENT__CLIENT_MSG__BODY_HELLO,
		XFER__CLIENT__CLIENT_MSG__BODY_HELLO_REPLY,
		XFER__CLIENT__CLIENT_MSG__BODY_STATUS,
		XFER__CLIENT__CLIENT_MSG__BODY_GOODBYE,
		XFER__CLIENT__CLIENT_MSG__BODY__NOT_SET,
	};
	for (size_t i = 0; i < sizeof(unexpected) / sizeof(unexpected[0]); i++) {
		char what[64];

		m.body_case = unexpected[i];
		m.hello = &hello; /* the oneof: one pointer for all cases */
		if (unexpected[i] == XFER__CLIENT__CLIENT_MSG__BODY_HELLO_REPLY)
			m.hello_reply = &hr;
		else if (unexpected[i] == XFER__CLIENT__CLIENT_MSG__BODY_STATUS)
			m.status = &st;
		else if (unexpected[i] == XFER__CLIENT__CLIENT_MSG__BODY_GOODBYE)
			m.goodbye = &bye;
		n = pack(&m, pkt);
		snprintf(what, sizeof(what), "message type %d after the hello",
			 (int)unexpected[i]);
		expect_hangup(true, pkt, n, NULL, 0, what);
	}
}

static void abuse_reg(void)
{
	struct raw_client rc;

	/* Bad registrations are refused with a status; the client stays. */
	raw_open(&rc);
	int mfd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	T_ASSERT(mfd >= 0 && ftruncate(mfd, 4096) == 0, "memfd");
	send_reg(rc.sock, 2, XFER__CLIENT__MEM_KIND__MEM_MEMFD, 0, 4096, &mfd, 1);
	expect_status(rc.sock, 2, -EPERM, "REG of an unsealed memfd");
	after_abuse("a REG of an unsealed memfd");

	T_ASSERT(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0,
		 "seal: %s", strerror(errno));
	send_reg(rc.sock, 3, XFER__CLIENT__MEM_KIND__MEM_MEMFD, 0, 8192, &mfd, 1);
	expect_status(rc.sock, 3, -EINVAL, "REG longer than the memfd");
	send_reg(rc.sock, 4, XFER__CLIENT__MEM_KIND__MEM_MEMFD, 0, 4096, NULL, 0);
	expect_status(rc.sock, 4, -EINVAL, "REG of a memfd without the fd");
	send_reg(rc.sock, 5, XFER__CLIENT__MEM_KIND__MEM_CMA,
		 (uint64_t)(uintptr_t)local[1].ptr, 4096, &mfd, 1);
	expect_status(rc.sock, 5, -EINVAL, "REG of cma memory with an fd");
	send_reg(rc.sock, 6, 7, 0, 4096, NULL, 0);
	expect_status(rc.sock, 6, -EINVAL, "REG of an unknown kind");
	send_reg(rc.sock, 7, XFER__CLIENT__MEM_KIND__MEM_MEMFD, 0, 0, &mfd, 1);
	expect_status(rc.sock, 7, -EINVAL, "REG of 0 bytes");
	int pfd[2];
	T_ASSERT(pipe2(pfd, O_CLOEXEC) == 0, "pipe");
	send_reg(rc.sock, 8, XFER__CLIENT__MEM_KIND__MEM_MEMFD, 0, 4096, pfd, 1);
	expect_status(rc.sock, 8, -EINVAL, "REG of a pipe as a memfd");
	close(pfd[0]);
	close(pfd[1]);

	/* Unmapped memory: a page that existed and was unmapped. */
	void *gone = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	T_ASSERT(gone != MAP_FAILED, "mmap");
	munmap(gone, 4096);
	send_reg(rc.sock, 9, XFER__CLIENT__MEM_KIND__MEM_CMA,
		 (uint64_t)(uintptr_t)gone, 4096, NULL, 0);
	expect_status(rc.sock, 9, -EFAULT, "REG of unmapped memory");
	after_abuse("a REG of unmapped memory");

	/* After all that, the same connection still registers properly. */
	send_reg(rc.sock, 10, XFER__CLIENT__MEM_KIND__MEM_MEMFD, 0, 4096, &mfd, 1);
	Xfer__Client__ClientMsg *m = raw_recv(rc.sock, NULL, NULL);
	T_ASSERT(m && m->body_case == XFER__CLIENT__CLIENT_MSG__BODY_REG_REPLY &&
		 m->seq == 10 && m->reg_reply->key.len == 16,
		 "a good REG after the bad ones was refused");
	xfer__client__client_msg__free_unpacked(m, NULL);
	close(mfd);
	raw_close(&rc);
}

static void send_dlist_create(int sock, uint64_t seq, uint64_t target,
			      uint32_t count, uint64_t length, const int *fds,
			      unsigned nfds)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__DlistCreateRequest req =
		XFER__CLIENT__DLIST_CREATE_REQUEST__INIT;

	req.target = target;
	req.count = count;
	req.length = length;
	m.proto_version = XFER_PROTO_VERSION;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE;
	m.dlist_create = &req;
	raw_send_msg(sock, &m, fds, nfds);
}

/* A memfd of n offsets, all 0. */
static int entries_memfd(uint32_t n)
{
	int fd = memfd_create("entries", MFD_CLOEXEC);

	T_ASSERT(fd >= 0 && ftruncate(fd, (off_t)n * 8) == 0, "memfd: %s",
		 strerror(errno));
	return fd;
}

/*
 * Prepared lists made by hand: the entries' fd must be a memfd holding
 * all of them (a pipe could stall xferd's main thread), the counts are
 * bounded, and so are the entries of all of one client's lists.
 */
static void abuse_dlist(void)
{
	struct raw_client rc;
	uint64_t h;

	raw_open(&rc);
	/* A region of its own to make lists over. */
	int mfd = memfd_create("dl", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	T_ASSERT(mfd >= 0 && ftruncate(mfd, 4096) == 0 &&
		 fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0,
		 "memfd");
	send_reg(rc.sock, 2, XFER__CLIENT__MEM_KIND__MEM_MEMFD, 0, 4096, &mfd, 1);
	Xfer__Client__ClientMsg *m = raw_recv(rc.sock, NULL, NULL);
	T_ASSERT(m && m->body_case == XFER__CLIENT__CLIENT_MSG__BODY_REG_REPLY,
		 "REG for the lists");
	h = m->reg_reply->handle;
	xfer__client__client_msg__free_unpacked(m, NULL);
	close(mfd);

	int pfd[2];
	T_ASSERT(pipe2(pfd, O_CLOEXEC) == 0, "pipe");
	send_dlist_create(rc.sock, 3, h, 1, 8, pfd, 1);
	expect_status(rc.sock, 3, -EINVAL, "a list's entries in a pipe");
	close(pfd[0]);
	close(pfd[1]);
	int efd = entries_memfd(4);
	send_dlist_create(rc.sock, 4, h, 5, 8, &efd, 1);
	expect_status(rc.sock, 4, -EINVAL, "a memfd of fewer entries");
	send_dlist_create(rc.sock, 5, h, 4, 0, &efd, 1);
	expect_status(rc.sock, 5, -EINVAL, "offsets without their lengths");
	send_dlist_create(rc.sock, 6, h, 4, 8, NULL, 0);
	expect_status(rc.sock, 6, -EINVAL, "a list without its fd");
	send_dlist_create(rc.sock, 7, h, 0, 8, &efd, 1);
	expect_status(rc.sock, 7, -EINVAL, "a list of no entries");
	send_dlist_create(rc.sock, 8, h, (1u << 20) + 1, 8, &efd, 1);
	expect_status(rc.sock, 8, -E2BIG, "more than dlist_max_entries");
	send_dlist_create(rc.sock, 9, h, 4, 4097, &efd, 1);
	expect_status(rc.sock, 9, -ERANGE, "entries past the region");
	close(efd);
	after_abuse("bad prepared lists");

	/* The default bounds: 1 Mi entries a list, 4 Mi for all lists of
	 * a client (each entry is xferd's memory). */
	efd = entries_memfd(1u << 20);
	for (uint64_t seq = 10; seq < 14; seq++) {
		send_dlist_create(rc.sock, seq, h, 1u << 20, 8, &efd, 1);
		m = raw_recv(rc.sock, NULL, NULL);
		T_ASSERT(m && m->body_case ==
			 XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE_REPLY,
			 "list %llu of 1 Mi entries refused",
			 (unsigned long long)seq - 10);
		xfer__client__client_msg__free_unpacked(m, NULL);
	}
	send_dlist_create(rc.sock, 14, h, 1, 8, &efd, 1);
	expect_status(rc.sock, 14, -ENOBUFS, "entries past "
		      "dlist_max_client_entries");
	close(efd);
	after_abuse("a client at dlist_max_client_entries");
	printf("bad prepared lists refused with a status: ok\n");
	raw_close(&rc);  /* its lists go with it */
}

static void abuse_ring(void)
{
	struct raw_client rc;

	/* A bogus CQ head stalls only this client: its NOP waits, and
	 * completes once the head is sane again. */
	raw_open(&rc);
	atomic_store_explicit(rc.cq_head, 12345, memory_order_release);
	xfer_prep_nop(&rc.sqes[0], 4242);
	atomic_store_explicit(rc.sq_tail, 1, memory_order_release);
	doorbell(rc.sq_efd);
	after_abuse("a CQ head beyond the CQ tail");
	atomic_store_explicit(rc.cq_head, 0, memory_order_release);
	doorbell(rc.sq_efd);
	uint64_t deadline = tl_now_ms() + 10000;
	while (atomic_load_explicit(rc.cq_tail, memory_order_acquire) == 0)
		T_ASSERT(tl_now_ms() < deadline,
			 "the stalled NOP never completed");
	T_ASSERT(rc.cqes[0].user_data == 4242 && rc.cqes[0].result == 0,
		 "stalled NOP completed as %llu/%lld",
		 (unsigned long long)rc.cqes[0].user_data,
		 (long long)rc.cqes[0].result);
	raw_close(&rc);

	/* A bogus SQ tail: xferd drops the client, marks its ring dead,
	 * and serves everyone else. */
	raw_open(&rc);
	uint32_t head = atomic_load_explicit(rc.sq_head, memory_order_acquire);
	atomic_store_explicit(rc.sq_tail, head + 100000, memory_order_release);
	doorbell(rc.sq_efd);
	expect_dropped(rc.sock, "SQ tail 100000 ahead");
	rc.sock = -1;
	deadline = tl_now_ms() + 10000;
	while (!(atomic_load_explicit(rc.sq_flags, memory_order_acquire) &
		 XFER_SQ_DEAD))
		T_ASSERT(tl_now_ms() < deadline,
			 "the dropped client's ring is not marked dead");
	raw_close(&rc);
	after_abuse("an SQ tail 100000 entries ahead");
}

/*
 * A client that did not ask for phase (XFER_RING_PHASE=0: the hello of
 * ring 4) has no phase bits: xferd refuses them like any unknown flag,
 * and its other descriptors still run.
 */
static void old_client_flags(void)
{
	struct xfer_ctx *old;

	T_ASSERT(setenv("XFER_RING_PHASE", "0", 1) == 0, "setenv");
	old = tl_open();
	unsetenv("XFER_RING_PHASE");
	for (unsigned bit = 4; bit < 8; bit++) {
		struct xfer_sqe *sqe = xfer_get_sqe(old);
		T_ASSERT(sqe, "old client: no SQE");
		xfer_prep_nop(sqe, 0x01d0 + bit);
		sqe->flags = (uint8_t)(1u << bit);
		struct xfer_cqe c = tl_submit_wait(old);
		T_ASSERT(c.user_data == 0x01d0 + bit && c.result == -EINVAL,
			 "old client, flag bit %u: %lld", bit,
			 (long long)c.result);
	}
	struct xfer_sqe *sqe = xfer_get_sqe(old);
	T_ASSERT(sqe, "old client: no SQE");
	xfer_prep_nop(sqe, 0x01d9);
	struct xfer_cqe c = tl_submit_wait(old);
	T_ASSERT(c.user_data == 0x01d9 && c.result == 0,
		 "old client, NOP: %lld", (long long)c.result);
	xfer_close(old);
}

int main(void)
{
	static const enum tl_kind kinds[NREGIONS] = { TL_HOST, TL_MALLOC,
						      TL_HOST };
	static const size_t lens[NREGIONS] = { REG_LEN, REG_LEN, REG_LEN };

	tl_socket();
	tl_owner_start(&owner, NULL, kinds, lens, NREGIONS);
	ctx = tl_open();
	good = tl_open();
	for (unsigned i = 0; i < 2; i++)
		tl_buf_alloc(ctx, kinds[i], REG_LEN, &local[i]);
	for (unsigned i = 0; i < NREGIONS; i++)
		T_OK(xfer_import(ctx, owner.token[i], owner.token_len[i],
				 &remote[i]));
	tl_buf_alloc(good, TL_HOST, REG_LEN, &good_src);
	tl_buf_alloc(good, TL_MALLOC, REG_LEN, &good_dst);
	reset_background();

	bad_descriptors();
	old_client_flags();
	bad_tokens();

	/* The raw handshake also tells us xferd's pid. */
	struct raw_client rc;
	raw_open(&rc);
	raw_close(&rc);
	good_roundtrip("setup");
	abuse_packets();
	abuse_reg();
	abuse_dlist();
	abuse_ring();
	check_untouched("all of it");

	tl_buf_free(good, &good_src);
	tl_buf_free(good, &good_dst);
	xfer_close(good);
	for (unsigned i = 0; i < 2; i++) {
		T_OK(xfer_unimport(ctx, remote[i]));
		tl_buf_free(ctx, &local[i]);
	}
	xfer_close(ctx);
	tl_owner_stop(&owner);
	return 0;
}
