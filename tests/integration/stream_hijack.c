/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream_hijack.c - a stranger holding a stream's token cannot speak
 * for either end of the stream.
 *
 * A private xferd whose socket the group nogroup may use; three
 * processes: the consumer (this one, root), the real producer (a child,
 * root) and the intruder (a child that becomes uid/gid 65534 before it
 * connects, when run as root: another user).  The consumer publishes
 * its stream token under a name, as streams are meant to be found; the
 * intruder looks it up like anyone may, imports the slots and the
 * mailbox, and attacks:
 *
 *  1. before the producer sends anything: it writes its own bytes into
 *     slot 0 and notifies DATA(seq 0) - the consumer must not receive
 *     that message (recv times out);
 *  2. it notifies a CLOSE to the mailbox - the stream must not end;
 *  3. it reads the producer's token out of the mailbox (the HELLO
 *     record), imports it and notifies the producer a CLOSE, a CREDIT
 *     and an ACCEPT - the producer must not stop or run ahead;
 *  4. while the producer streams COUNT messages, it keeps notifying
 *     DATA of every sequence number and CLOSEs to both ends.
 *
 * Every notification of the intruder must have been delivered by xferd
 * (its CQEs say 0), so that it is the stream that refuses them.  Then:
 * the consumer receives exactly the producer's COUNT messages (every
 * byte checked against the producer's pattern), in order, then the
 * producer's real close (-EPIPE); the producer's sends all succeed; each
 * end counts what it dropped (xfer_stream_dropped) and names the other
 * end (xfer_stream_peer): the consumer the producer's identity, which
 * the producer reports from xfer_ctx_identity.
 *
 * Across nodes (tests/integration/netns_stream_hijack.sh): with
 * HIJACK_CONSUMER_SOCKET, HIJACK_PRODUCER_SOCKET and HIJACK_INTRUDER_SOCKET
 * the three use those xferds (no private one), and the producer and
 * the intruder look the stream up as HIJACK_NAME ("node/name"); then
 * the consumer's peer must be the producer's identity on its own node,
 * flagged XFER_SENDER_F_REMOTE: the identity crossed the link.
 *
 * Built against an xferd and libxfer without sender records it still
 * runs, with the old API: the attacks then succeed and the test fails.
 */
#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

#define NSLOTS   4
#define SLOT     4096u
#define COUNT    64u
#define NAME     "hijack.stream"
#define EVIL_LEN 64u
#define STRANGER 65534   /* nobody:nogroup */

/* The stream's wire format as anyone can read it (client/stream_wire.h):
 * a stranger needs no library help to parse a token it looked up. */
enum { MSG_HELLO = 1, MSG_ACCEPT, MSG_DATA, MSG_CREDIT, MSG_CLOSE };
static uint64_t msg(unsigned type, uint64_t payload)
{
	return (uint64_t)type << 60 | (payload & ((1ull << 60) - 1));
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint64_t seed_of(uint32_t i) { return 0x5eed0000ull + i; }
static uint64_t len_of(uint32_t i) { return i % 3 ? SLOT - i : SLOT; }

/* Pipes: consumer -> producer, producer -> consumer, consumer ->
 * intruder, intruder -> consumer. */
static int to_p[2], from_p[2], to_i[2], from_i[2];
/* The name the producer and the intruder look up: the consumer (root)
 * publishes it shared, the worst case, so another user reaches it as
 * "~0/NAME" (or "node/NAME" from another node). */
static const char *lookup_name = "~0/" NAME;

static void say(int fd, char c) { tl_write_full(fd, &c, 1); }
static char hear(int fd)
{
	char c;
	tl_read_full(fd, &c, 1);
	return c;
}

/* --- the intruder --- */

struct intruder {
	struct xfer_ctx *ctx;
	uint64_t slots, mbox, prod;  /* imported handles */
	struct tl_buf buf;
	unsigned sent;               /* notifications xferd delivered */
};

/* Submit one SQE and wait: its notification must have been delivered
 * (0, or the bytes), or refused for a full queue (-ENOBUFS): anything
 * else means the attack did not reach the stream at all. */
static void fire(struct intruder *in, const struct xfer_sqe *sqe)
{
	struct xfer_sqe *q = xfer_get_sqe(in->ctx);

	T_ASSERT(q, "intruder: SQ full");
	*q = *sqe;
	struct xfer_cqe c = tl_submit_wait(in->ctx);
	/* -ENOBUFS: the owner holds as many as it may; -ESTALE: the
	 * producer closed its end (its region went) while the stranger was
	 * still at it, before the consumer told it to stop. */
	T_ASSERT(c.result >= 0 || c.result == -ENOBUFS || c.result == -ESTALE,
		 "intruder: xferd refused the notification: %s",
		 xfer_strerror((int)c.result));
	if (c.result >= 0)
		in->sent++;
}

static void notify(struct intruder *in, uint64_t remote, uint64_t value)
{
	struct xfer_sqe sqe;

	xfer_prep_notify(&sqe, remote, value, 1);
	fire(in, &sqe);
}

/* The intruder's imports, released before it leaves. */
static struct xfer_remote *imported[8];
static unsigned nimported;

static uint64_t import_tok(struct xfer_ctx *ctx, const uint8_t *tok, size_t len)
{
	struct xfer_remote *r;

	T_ASSERT(nimported < 8, "too many imports");
	T_OK(xfer_import(ctx, tok, len, &r));
	imported[nimported++] = r;
	return xfer_remote_handle(r);
}

/* Look the stream up, as anyone may, and import its two regions. */
static void intruder_join(struct intruder *in, const char *sock)
{
	uint8_t tok[2048];
	size_t len = sizeof(tok);

	T_OK(xfer_open(sock, &in->ctx));
	T_OK(xfer_lookup(in->ctx, lookup_name, tok, &len));
	/* Version 1: a header of 40 bytes; 2: 48 (the consumer's id). */
	size_t hdr = get16(tok + 4) >= 2 ? 48 : 40;
	uint16_t slen = get16(tok + 32), mlen = get16(tok + 34);
	T_ASSERT(len == hdr + slen + mlen, "a stream token of %zu bytes", len);
	in->slots = import_tok(in->ctx, tok + hdr, slen);
	in->mbox = import_tok(in->ctx, tok + hdr + slen, mlen);
	tl_buf_alloc(in->ctx, TL_HOST, 4096, &in->buf);
}

/* Read the mailbox: the producer's HELLO record holds its token. */
static void intruder_steal_producer(struct intruder *in)
{
	struct xfer_sqe *q = xfer_get_sqe(in->ctx);

	xfer_prep_read(q, in->buf.handle, 0, in->mbox, 0, 4096, 2);
	T_ASSERT(tl_submit_wait(in->ctx).result == 4096, "reading the mailbox");
	const uint8_t *rec = in->buf.ptr;
	T_ASSERT(memcmp(rec, "XSHL", 4) == 0, "no HELLO record in the mailbox");
	size_t hdr = get16(rec + 4) >= 2 ? 40 : 16;
	in->prod = import_tok(in->ctx, rec + hdr, get16(rec + 6));
}

static int intruder(const char *sock)
{
	struct intruder in = { 0 };
	struct xfer_sqe sqe;

	if (getuid() == 0) {
		/* Another user: the socket's group is nogroup. */
		T_ASSERT(setgroups(0, NULL) == 0 && setgid(STRANGER) == 0 &&
			 setuid(STRANGER) == 0, "becoming uid %d: %s", STRANGER,
			 strerror(errno));
	}
	intruder_join(&in, sock);
	say(from_i[1], 'j');

	/* 1: a message of our own in slot 0, announced as seq 0. */
	T_ASSERT(hear(to_i[0]) == '1', "intruder: step 1");
	memset(in.buf.ptr, 'E', EVIL_LEN);
	xfer_prep_write(&sqe, in.buf.handle, 0, in.slots, 0, EVIL_LEN, 3);
	xfer_sqe_set_notify(&sqe, msg(MSG_DATA, EVIL_LEN));
	fire(&in, &sqe);
	say(from_i[1], '1');

	/* 2: the producer closed, says a CLOSE after 0 messages. */
	T_ASSERT(hear(to_i[0]) == '2', "intruder: step 2");
	notify(&in, in.mbox, msg(MSG_CLOSE, 0));
	say(from_i[1], '2');

	/* 3: to the producer: the consumer closed, credits it never gave,
	 * an ACCEPT again. */
	T_ASSERT(hear(to_i[0]) == '3', "intruder: step 3");
	intruder_steal_producer(&in);
	notify(&in, in.prod, msg(MSG_CREDIT, 1000));
	notify(&in, in.prod, msg(MSG_ACCEPT, 0));
	notify(&in, in.prod, msg(MSG_CLOSE, 0));
	say(from_i[1], '3');

	/* 4: while the stream runs, every kind of lie, until told to stop. */
	T_ASSERT(hear(to_i[0]) == '4', "intruder: step 4");
	for (uint32_t k = 0;; k++) {
		notify(&in, in.slots, msg(MSG_DATA, (uint64_t)(k % COUNT) << 32 | 8));
		if (k % 8 == 0) {
			notify(&in, in.mbox, msg(MSG_CLOSE, k % COUNT));
			notify(&in, in.prod, msg(MSG_CREDIT, k));
		}
		if (k % 64 == 63)
			notify(&in, in.prod, msg(MSG_CLOSE, 0));
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
		/* A byte from the consumer: stop. */
		struct timeval tv = { 0, 0 };
		fd_set r;
		FD_ZERO(&r);
		FD_SET(to_i[0], &r);
		if (select(to_i[0] + 1, &r, NULL, NULL, &tv) > 0)
			break;
	}
	tl_write_full(from_i[1], &in.sent, sizeof(in.sent));
	tl_buf_free(in.ctx, &in.buf);
	while (nimported)
		T_OK(xfer_unimport(in.ctx, imported[--nimported]));
	xfer_close(in.ctx);
	return 0;
}

/* --- the producer --- */

static int producer(const char *sock)
{
	struct xfer_ctx *ctx;
	struct xfer_stream *s;
	struct tl_buf src;
	uint8_t tok[2048];
	size_t len = sizeof(tok);

	T_OK(xfer_open(sock, &ctx));
	T_OK(xfer_lookup(ctx, lookup_name, tok, &len));
	T_OK(xfer_stream_connect(ctx, tok, len, 30000, &s));
#ifdef XFER_HAVE_CQE_SENDER
	struct xfer_cqe_sender self;
	T_OK(xfer_ctx_identity(ctx, &self));
	tl_write_full(from_p[1], &self, sizeof(self));
#endif
	tl_buf_alloc(ctx, TL_HOST, SLOT, &src);
	T_ASSERT(hear(to_p[0]) == 'g', "producer: go");
	for (uint32_t i = 0; i < COUNT; i++) {
		tl_fill(src.ptr, len_of(i), seed_of(i));
		int rc = xfer_stream_send(s, src.mem, 0, len_of(i), 30000);
		T_ASSERT(rc == 0, "producer: send %u of %u: %s", i, COUNT,
			 xfer_strerror(rc));
		/* Paced, so that the intruder's lies interleave with the
		 * whole stream. */
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
#ifdef XFER_HAVE_CQE_SENDER
	uint64_t dropped = xfer_stream_dropped(s);
	T_ASSERT(dropped >= 3, "producer: dropped only %llu of the intruder's",
		 (unsigned long long)dropped);
	printf("producer: %u messages sent; %llu notifications of a stranger "
	       "dropped\n", COUNT, (unsigned long long)dropped);
#endif
	T_OK(xfer_stream_close(s));
	tl_buf_free(ctx, &src);
	xfer_close(ctx);
	return 0;
}

/* --- the consumer (the test) --- */

static void expect_nothing(struct xfer_stream *s, const char *after)
{
	uint64_t len = 0;
	int rc = xfer_stream_recv(s, &len, 500);

	T_ASSERT(rc == -ETIME, "after %s the consumer got %s (len %llu): "
		 "the stranger spoke for the producer", after,
		 rc >= 0 ? "a message" : xfer_strerror(rc),
		 (unsigned long long)len);
}

int main(void)
{
	const char *const args[] = { "socket_group=nogroup", NULL };
	struct tl_daemon d;
	struct xfer_ctx *ctx;
	struct xfer_stream *s;
	struct tl_buf slots;
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	size_t len = sizeof(tok);

	const char *csock = getenv("HIJACK_CONSUMER_SOCKET");
	const char *psock = getenv("HIJACK_PRODUCER_SOCKET");
	const char *isock = getenv("HIJACK_INTRUDER_SOCKET");
	bool nodes = csock && psock && isock;

	if (!getgrnam("nogroup"))
		return printf("skip: no group nogroup\n"), TL_SKIP;
	if (nodes) {
		if (getenv("HIJACK_NAME"))
			lookup_name = getenv("HIJACK_NAME");
		d.pid = 0;
	} else {
		tl_daemon_start(&d, args);
		/* The stranger (uid 65534) must reach the socket here. */
		T_ASSERT(chmod(d.dir, 0755) == 0, "chmod %s", d.dir);
		csock = psock = isock = d.socket;
	}
	T_OK(xfer_open(csock, &ctx));
	tl_buf_alloc(ctx, TL_HOST, NSLOTS * SLOT, &slots);
	T_OK(xfer_stream_listen(ctx, slots.mem, 0, NSLOTS, SLOT, &s));
	T_OK(xfer_stream_token(s, tok, &len));
	T_OK(xfer_publish_flags(ctx, NAME, tok, len, XFER_PUBLISH_SHARED));
	T_ASSERT(pipe(to_p) == 0 && pipe(from_p) == 0 && pipe(to_i) == 0 &&
		 pipe(from_i) == 0, "pipe");

	pid_t pp = tl_fork();
	if (pp == 0)
		exit(producer(psock));
	T_OK(xfer_stream_accept(s, 30000));
	pid_t ip = tl_fork();
	if (ip == 0)
		exit(intruder(isock));
	T_ASSERT(hear(from_i[0]) == 'j', "the intruder joined");
	printf("intruder (uid %d) looked the stream up and imported its "
	       "regions\n", getuid() == 0 ? STRANGER : (int)getuid());

	say(to_i[1], '1');
	T_ASSERT(hear(from_i[0]) == '1', "step 1");
	expect_nothing(s, "a stranger's DATA with its own bytes in slot 0");
	printf("1: a stranger's message in slot 0: not received\n");
	say(to_i[1], '2');
	T_ASSERT(hear(from_i[0]) == '2', "step 2");
	expect_nothing(s, "a stranger's CLOSE");
	printf("2: a stranger's CLOSE: the stream stays open\n");
	say(to_i[1], '3');
	T_ASSERT(hear(from_i[0]) == '3', "step 3");
	printf("3: the stranger read the producer's token from the mailbox "
	       "and sent it CREDIT, ACCEPT, CLOSE\n");

	say(to_i[1], '4');
	say(to_p[1], 'g');
	for (uint32_t i = 0; i < COUNT; i++) {
		uint64_t mlen = 0;
		int slot = xfer_stream_recv(s, &mlen, 30000);
		T_ASSERT(slot >= 0, "message %u of %u: %s", i, COUNT,
			 xfer_strerror(slot));
		T_ASSERT(mlen == len_of(i), "message %u: %llu bytes, want %llu",
			 i, (unsigned long long)mlen,
			 (unsigned long long)len_of(i));
		size_t bad = tl_check(slots.ptr + (size_t)slot * SLOT, mlen,
				      seed_of(i));
		T_ASSERT(bad == 0, "message %u: byte %zu is not the producer's",
			 i, bad - 1);
		T_OK(xfer_stream_release(s, (uint32_t)slot));
	}
	uint64_t mlen;
	int rc = xfer_stream_recv(s, &mlen, 30000);
	T_ASSERT(rc == -EPIPE, "after the last message: %s, want the "
		 "producer's close", xfer_strerror(rc));
	printf("4: %u messages of the producer received in order, every "
	       "byte checked, then its close\n", COUNT);
	say(to_i[1], 's');
	unsigned sent;
	tl_read_full(from_i[0], &sent, sizeof(sent));
	T_ASSERT(tl_child_wait(ip, 30000) == 0, "the intruder failed");
	T_ASSERT(tl_child_wait(pp, 60000) == 0, "the producer failed");
	T_ASSERT(sent > 10, "the intruder got only %u notifications through",
		 sent);
#ifdef XFER_HAVE_CQE_SENDER
	struct xfer_cqe_sender want, got;
	tl_read_full(from_p[0], &want, sizeof(want));
	T_OK(xfer_stream_peer(s, &got));
	uint32_t want_flags = strcmp(csock, psock) ? XFER_SENDER_F_REMOTE : 0;
	T_ASSERT(memcmp(got.node, want.node, sizeof(got.node)) == 0 &&
		 got.client == want.client && got.uid == want.uid &&
		 got.flags == want_flags, "the consumer's peer is client %llu uid %u, "
		 "the producer is client %llu uid %u",
		 (unsigned long long)got.client, got.uid,
		 (unsigned long long)want.client, want.uid);
	uint64_t dropped = xfer_stream_dropped(s);
	T_ASSERT(dropped >= 2, "the consumer dropped only %llu",
		 (unsigned long long)dropped);
	printf("consumer: its producer is client %llu (uid %u) of %s node; "
	       "%llu of the stranger's %u notifications came to it and were "
	       "dropped\n", (unsigned long long)got.client, got.uid,
	       want_flags ? "the other" : "this",
	       (unsigned long long)dropped, sent);
#endif
	/* It ended with the producer's close: that is what close reports. */
	T_ASSERT(xfer_stream_close(s) == -EPIPE, "close");
	tl_buf_free(ctx, &slots);
	xfer_close(ctx);
	if (!nodes)
		T_ASSERT(tl_daemon_stop(&d) == 0, "xferd did not stop cleanly");
	printf("pass: a stranger with the stream token could not speak for "
	       "either end\n");
	return 0;
}
