/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream.c - xfer_stream_* between two processes on one xferd.
 *
 *  - every message's bytes: a consumer (child) offers slots in memfd
 *    memory and in malloc'd memory at an odd offset; the producer
 *    (parent) sends messages of every length from 0 to slot_size, each
 *    with its own pattern; the consumer checks every byte of every slot
 *    and that nothing beyond the message's length was written, holds
 *    several slots at once and releases them out of order; after the
 *    producer's close it gets -EPIPE, and only after the last message;
 *  - flow control: the producer, with every slot held by the consumer,
 *    gets -EAGAIN (timeout 0) and -ETIME (a short timeout), and sends
 *    again once a slot is released;
 *  - the consumer closes: the producer's next send gets -EPIPE;
 *  - a second producer on an accepted stream is ignored (-ETIME);
 *  - stream tokens that are cut, padded, of another version, with a bad
 *    field, or with an altered inner token: -EINVAL, -EPROTONOSUPPORT,
 *    -EACCES; listen's argument checks (-ERANGE, -E2BIG, -EINVAL);
 *  - kill -9 of the consumer while the producer waits for a slot: the
 *    producer's send fails -ECONNRESET, well before its timeout; kill -9
 *    of the producer while the consumer waits: recv fails -ECONNRESET
 *    after handing out what had landed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define LONG_MS 60000

enum cmd {
	CMD_BASIC = 1,     /* the byte-checking run */
	CMD_HOLD,          /* hold every slot until told */
	CMD_CLOSE_EARLY,   /* accept, then close */
	CMD_DIE,           /* accept, receive one, then wait to be killed */
	CMD_LINGER,        /* accept, recv until error; report it */
};

struct plan {
	enum tl_kind kind;
	uint32_t nslots;
	uint64_t slot_size;
	uint64_t off;       /* of the slots in the consumer's memory */
	uint32_t count;     /* messages */
};

static const struct plan plans[] = {
	{ TL_HOST, 2, 1u << 20, 0, 40 },
	{ TL_MALLOC, 3, 65536 + 3, 4097, 60 },
	{ TL_HOST, 5, 4096, 8, 200 },
};

/* Message i of a plan: its length and the seed of its bytes. */
static uint64_t msg_len(const struct plan *p, uint32_t i)
{
	switch (i % 5) {
	case 0: return p->slot_size;
	case 1: return 0;
	case 2: return 1;
	case 3: return p->slot_size - 1;
	default: return (i * 7919u) % p->slot_size;
	}
}

static uint64_t msg_seed(uint32_t plan, uint32_t i)
{
	return 0x57e40000ull + plan * 100000ull + i;
}

/* What a consumer leaves in a slot's bytes past the message. */
#define BG_SEED 0xb6b6ull

/* --- the consumer (child) --- */

static void consumer_basic(struct xfer_ctx *ctx, struct xfer_stream *s,
			   struct tl_buf *b, uint32_t pi)
{
	const struct plan *p = &plans[pi];
	int held[8];
	uint32_t nheld = 0;

	for (uint32_t i = 0; i < p->count; i++) {
		uint64_t len;
		int slot = xfer_stream_recv(s, &len, LONG_MS);
		T_ASSERT(slot >= 0, "consumer: recv %u: %s", i, xfer_strerror(slot));
		T_ASSERT((uint32_t)slot == i % p->nslots, "message %u in slot %d", i, slot);
		T_ASSERT(len == msg_len(p, i), "message %u: %llu bytes, want %llu",
			 i, (unsigned long long)len,
			 (unsigned long long)msg_len(p, i));
		uint8_t *at = b->ptr + p->off + (uint64_t)slot * p->slot_size;
		size_t bad = tl_check(at, len, msg_seed(pi, i));
		T_ASSERT(!bad, "message %u: byte %zu wrong", i, bad - 1);
		/* Past the message: what the consumer put there before. */
		bad = tl_check_at(at + len, p->slot_size - len, BG_SEED, len);
		T_ASSERT(!bad, "message %u: byte %llu past its end written", i,
			 (unsigned long long)(len + bad - 1));
		tl_fill(at, p->slot_size, BG_SEED);
		held[nheld++] = slot;
		/* Hold all slots now and then, release newest first. */
		if (nheld == p->nslots || i % 3 == 0) {
			while (nheld)
				T_OK(xfer_stream_release(s, (uint32_t)held[--nheld]));
		}
	}
	while (nheld)
		T_OK(xfer_stream_release(s, (uint32_t)held[--nheld]));
	uint64_t len;
	int rc = xfer_stream_recv(s, &len, LONG_MS);
	T_ASSERT(rc == -EPIPE, "consumer: after the last message: %s",
		 xfer_strerror(rc));
	T_ASSERT(xfer_stream_recv(s, &len, 0) == -EPIPE, "-EPIPE once only");
	T_ASSERT(xfer_stream_close(s) == -EPIPE, "close after -EPIPE");
	(void)ctx;
}

static void consumer_main(int in, int out)
{
	uint32_t c[2];

	for (;;) {
		/* The producer closing the pipe is the end. */
		if (read(in, c, 1) == 0)
			return;
		tl_read_full(in, (uint8_t *)c + 1, sizeof(c) - 1);
		const struct plan *p = &plans[c[1]];
		struct xfer_ctx *ctx = tl_open();
		struct tl_buf b;
		struct xfer_stream *s;
		uint8_t tok[XFER_STREAM_TOKEN_MAX];
		size_t len = sizeof(tok);

		tl_buf_alloc(ctx, p->kind, p->off + p->nslots * p->slot_size + 100, &b);
		for (uint32_t i = 0; i < p->nslots; i++)
			tl_fill(b.ptr + p->off + i * p->slot_size, p->slot_size,
				BG_SEED);
		T_OK(xfer_stream_listen(ctx, b.mem, p->off, p->nslots,
					p->slot_size, &s));
		T_OK(xfer_stream_token(s, tok, &len));
		tl_send_blob(out, tok, len);
		T_OK(xfer_stream_accept(s, LONG_MS));
		uint64_t mlen;
		int rc, slot;
		switch (c[0]) {
		case CMD_BASIC:
			consumer_basic(ctx, s, &b, c[1]);
			break;
		case CMD_HOLD:
			for (uint32_t i = 0; i < p->nslots; i++)
				T_ASSERT(xfer_stream_recv(s, &mlen, LONG_MS) == (int)i,
					 "hold: recv %u", i);
			tl_read_full(in, c, sizeof(c));   /* "release one" */
			T_OK(xfer_stream_release(s, 0));
			slot = xfer_stream_recv(s, &mlen, LONG_MS);
			T_ASSERT(slot == 0, "hold: the next message: %d", slot);
			T_ASSERT(xfer_stream_close(s) == 0, "hold: close");
			break;
		case CMD_CLOSE_EARLY:
			T_ASSERT(xfer_stream_close(s) == 0, "close early");
			break;
		case CMD_DIE:
			slot = xfer_stream_recv(s, &mlen, LONG_MS);
			T_ASSERT(slot == 0, "die: recv %d", slot);
			tl_write_full(out, &slot, sizeof(slot));
			for (;;)
				pause();
		case CMD_LINGER:
			while ((slot = xfer_stream_recv(s, &mlen, LONG_MS)) >= 0)
				T_OK(xfer_stream_release(s, (uint32_t)slot));
			rc = slot;
			tl_write_full(out, &rc, sizeof(rc));
			xfer_stream_close(s);
			break;
		default:
			T_ASSERT(0, "consumer: command %u", c[0]);
		}
		tl_buf_free(ctx, &b);
		xfer_close(ctx);
		int ok = 1;
		tl_write_full(out, &ok, sizeof(ok));
	}
}

/* --- the producer (parent) --- */

static int to_c, from_c;

static pid_t consumer_start(void)
{
	int to[2], from[2];

	T_ASSERT(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0, "pipe");
	pid_t pid = tl_fork();
	if (pid == 0) {
		close(to[1]);
		close(from[0]);
		consumer_main(to[0], from[1]);
		exit(0);
	}
	close(to[0]);
	close(from[1]);
	to_c = to[1];
	from_c = from[0];
	return pid;
}

static void consumer_stop(pid_t pid)
{
	close(to_c);
	close(from_c);
	T_ASSERT(tl_child_wait(pid, LONG_MS) == 0, "the consumer failed");
}

/* Ask for a stream of plan pi with behaviour cmd; returns its token. */
static size_t ask(enum cmd cmd, uint32_t pi, uint8_t *tok)
{
	uint32_t c[2] = { cmd, pi };

	tl_write_full(to_c, c, sizeof(c));
	return tl_recv_blob(from_c, tok, XFER_STREAM_TOKEN_MAX);
}

static void consumer_done(void)
{
	int ok;

	tl_read_full(from_c, &ok, sizeof(ok));
	T_ASSERT(ok == 1, "consumer step failed");
}

static void basic(struct xfer_ctx *ctx, uint32_t pi)
{
	const struct plan *p = &plans[pi];
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	size_t len = ask(CMD_BASIC, pi, tok);
	struct xfer_stream *s;
	struct tl_buf src;

	tl_buf_alloc(ctx, p->kind == TL_HOST ? TL_MALLOC : TL_HOST,
		     p->slot_size + 11, &src);
	T_OK(xfer_stream_connect(ctx, tok, len, LONG_MS, &s));
	T_ASSERT(xfer_stream_nslots(s) == p->nslots &&
		 xfer_stream_slot_size(s) == p->slot_size, "geometry");
	for (uint32_t i = 0; i < p->count; i++) {
		uint64_t n = msg_len(p, i);
		tl_fill(src.ptr + 11, n, msg_seed(pi, i));
		T_OK(xfer_stream_send(s, src.mem, 11, n, LONG_MS));
	}
	T_ASSERT(xfer_stream_send(s, src.mem, 0, p->slot_size + 1, 0) == -EINVAL,
		 "a message longer than a slot");
	T_OK(xfer_stream_close(s));
	consumer_done();
	tl_buf_free(ctx, &src);
	printf("%u messages through %u slots of %llu bytes (%s): every byte ok\n",
	       p->count, p->nslots, (unsigned long long)p->slot_size,
	       tl_kind_name(p->kind));
}

static void flow_control(struct xfer_ctx *ctx)
{
	const struct plan *p = &plans[0];
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	size_t len = ask(CMD_HOLD, 0, tok);
	struct xfer_stream *s;
	struct tl_buf src;

	tl_buf_alloc(ctx, TL_HOST, 4096, &src);
	T_OK(xfer_stream_connect(ctx, tok, len, LONG_MS, &s));
	for (uint32_t i = 0; i < p->nslots; i++)
		T_OK(xfer_stream_send(s, src.mem, 0, 100, 0));
	T_ASSERT(xfer_stream_credits(s) == 0, "credits with every slot full");
	int rc = xfer_stream_send(s, src.mem, 0, 100, 0);
	T_ASSERT(rc == -EAGAIN, "send, no slot, timeout 0: %s", xfer_strerror(rc));
	rc = xfer_stream_send(s, src.mem, 0, 100, 50);
	T_ASSERT(rc == -ETIME, "send, no slot, timeout 50: %s", xfer_strerror(rc));
	uint32_t go[2] = { 0, 0 };
	tl_write_full(to_c, go, sizeof(go));
	T_OK(xfer_stream_send(s, src.mem, 0, 100, LONG_MS));
	consumer_done();
	/* The consumer closed: the next send learns it. */
	rc = xfer_stream_send(s, src.mem, 0, 100, LONG_MS);
	T_ASSERT(rc == -EPIPE, "send after the consumer closed: %s",
		 xfer_strerror(rc));
	T_ASSERT(xfer_stream_close(s) == -EPIPE, "close after -EPIPE");
	tl_buf_free(ctx, &src);
	printf("flow control: -EAGAIN, -ETIME without a slot; -EPIPE after the consumer closed: ok\n");
}

static void consumer_closes_first(struct xfer_ctx *ctx)
{
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	size_t len = ask(CMD_CLOSE_EARLY, 0, tok);
	struct xfer_stream *s;
	struct tl_buf src;

	tl_buf_alloc(ctx, TL_HOST, 4096, &src);
	T_OK(xfer_stream_connect(ctx, tok, len, LONG_MS, &s));
	consumer_done();
	int rc = xfer_stream_send(s, src.mem, 0, 10, LONG_MS);
	/* The CLOSE arrived (-EPIPE), or the consumer's mailbox went first
	 * and the write into its slots still landed: then the next one. */
	if (rc == 0)
		rc = xfer_stream_send(s, src.mem, 0, 10, LONG_MS);
	T_ASSERT(rc == -EPIPE, "send to a closed consumer: %s", xfer_strerror(rc));
	xfer_stream_close(s);
	tl_buf_free(ctx, &src);
	printf("consumer closed right after accept: -EPIPE: ok\n");
}

static void second_producer(struct xfer_ctx *ctx)
{
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	size_t len = ask(CMD_LINGER, 0, tok);
	struct xfer_stream *s, *s2;
	struct xfer_ctx *ctx2 = tl_open();
	struct tl_buf src;

	tl_buf_alloc(ctx, TL_HOST, 4096, &src);
	T_OK(xfer_stream_connect(ctx, tok, len, LONG_MS, &s));
	int rc = xfer_stream_connect(ctx2, tok, len, 300, &s2);
	T_ASSERT(rc == -ETIME, "a second producer: %s", xfer_strerror(rc));
	T_OK(xfer_stream_send(s, src.mem, 0, 10, LONG_MS));
	T_OK(xfer_stream_close(s));
	tl_read_full(from_c, &rc, sizeof(rc));
	T_ASSERT(rc == -EPIPE, "consumer's end: %s", xfer_strerror(rc));
	consumer_done();
	tl_buf_free(ctx, &src);
	xfer_close(ctx2);
	printf("a second producer is not let in: ok\n");
}

static void bad_tokens(struct xfer_ctx *ctx)
{
	uint8_t tok[XFER_STREAM_TOKEN_MAX + 8], bad[sizeof(tok)];
	struct xfer_stream *s = NULL, *cs;
	struct tl_buf b;
	size_t len = 10;

	/* listen's checks, and a token of a real stream to spoil. */
	tl_buf_alloc(ctx, TL_HOST, 8192, &b);
	T_ASSERT(xfer_stream_listen(ctx, b.mem, 1, 2, 4096, &cs) == -ERANGE, "range");
	T_ASSERT(xfer_stream_listen(ctx, b.mem, 0, 0, 4096, &cs) == -EINVAL, "0 slots");
	T_ASSERT(xfer_stream_listen(ctx, b.mem, 0, 2, 0, &cs) == -EINVAL, "0 bytes");
	T_ASSERT(xfer_stream_listen(ctx, b.mem, 0, 8192, 1, &cs) == -E2BIG,
		 "more slots than the CQ holds");
	T_OK(xfer_stream_listen(ctx, b.mem, 0, 2, 4096, &cs));
	T_ASSERT(xfer_stream_token(cs, tok, &len) == -ENOSPC && len > 40,
		 "token into 10 bytes");
	len = sizeof(tok);
	T_OK(xfer_stream_token(cs, tok, &len));
	uint64_t mlen;
	T_ASSERT(xfer_stream_recv(cs, &mlen, 0) == -ENOTCONN, "recv before accept");
	T_ASSERT(xfer_stream_accept(cs, 0) == -EAGAIN, "accept, nobody there");
	T_ASSERT(xfer_stream_accept(cs, 30) == -ETIME, "accept, 30 ms");

	struct { const char *what; size_t at; uint8_t x; size_t len; int want; } cases[] = {
		{ "empty", 0, 0, 0, -EINVAL },
		{ "cut in the header", 0, 0, 39, -EINVAL },
		{ "cut in the tokens", 0, 0, len - 1, -EINVAL },
		{ "a byte more", 0, 0, len + 1, -EINVAL },
		{ "magic", 0, 1, len, -EINVAL },
		{ "version", 4, 1, len, -EPROTONOSUPPORT },
		{ "reserved", 6, 1, len, -EINVAL },
		{ "reserved 2", 13, 1, len, -EINVAL },
		{ "nslots 0", 8, 2, len, -EINVAL },   /* 2 ^ 2 = 0 */
		{ "slot size", 16, 1, len, -EINVAL }, /* tokens' lengths differ */
		{ "slots token length", 32, 1, len, -EINVAL },
		{ "mailbox token length", 35, 1, len, -EINVAL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(bad, tok, len);
		bad[cases[i].at] ^= cases[i].x;
		int rc = xfer_stream_connect(ctx, bad, cases[i].len, 1000, &s);
		T_ASSERT(rc == cases[i].want, "token with a bad %s: %s, want %s",
			 cases[i].what, xfer_strerror(rc),
			 xfer_strerror(cases[i].want));
	}
	T_ASSERT(xfer_stream_connect(ctx, NULL, len, 0, &s) == -EINVAL, "NULL");
	/* The slots of one stream with the geometry of another. */
	struct xfer_stream *cs2;
	uint8_t tok2[XFER_STREAM_TOKEN_MAX];
	size_t len2 = sizeof(tok2);
	T_OK(xfer_stream_listen(ctx, b.mem, 0, 1, 4096, &cs2));
	T_OK(xfer_stream_token(cs2, tok2, &len2));
	T_ASSERT(len2 == len, "two tokens of different lengths");
	memcpy(bad, tok, 40);
	memcpy(bad + 40, tok2 + 40, len - 40);
	int rc = xfer_stream_connect(ctx, bad, len, 1000, &s);
	T_ASSERT(rc == -EINVAL, "slots that do not fit the geometry: %s",
		 xfer_strerror(rc));
	T_OK(xfer_stream_close(cs2));
	T_OK(xfer_stream_close(cs));
	tl_buf_free(ctx, &b);
	printf("bad stream tokens and arguments: clear errors: ok\n");
}

static void consumer_killed(struct xfer_ctx *ctx)
{
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	pid_t pid = consumer_start();
	size_t len = ask(CMD_DIE, 0, tok);
	struct xfer_stream *s;
	struct tl_buf src;
	int slot;

	tl_buf_alloc(ctx, TL_HOST, 4096, &src);
	T_OK(xfer_stream_connect(ctx, tok, len, LONG_MS, &s));
	T_OK(xfer_stream_send(s, src.mem, 0, 10, LONG_MS));
	T_OK(xfer_stream_send(s, src.mem, 0, 10, LONG_MS));
	tl_read_full(from_c, &slot, sizeof(slot));
	kill(pid, SIGKILL);
	uint64_t t0 = tl_now_ms();
	/* Waits for the slot the dead consumer holds. */
	int rc = xfer_stream_send(s, src.mem, 0, 10, LONG_MS);
	uint64_t waited = tl_now_ms() - t0;
	T_ASSERT(rc == -ECONNRESET, "send to a killed consumer: %s",
		 xfer_strerror(rc));
	T_ASSERT(xfer_stream_send(s, src.mem, 0, 10, 0) == -ECONNRESET,
		 "the error stays");
	T_ASSERT(xfer_stream_close(s) == -ECONNRESET, "close");
	T_ASSERT(tl_child_wait(pid, LONG_MS) == -SIGKILL, "consumer status");
	close(to_c);
	close(from_c);
	tl_buf_free(ctx, &src);
	printf("consumer killed: the producer's send failed -ECONNRESET after %llu ms: ok\n",
	       (unsigned long long)waited);
}

static void producer_killed(void)
{
	int to[2], from[2];
	uint8_t tok[XFER_STREAM_TOKEN_MAX];

	T_ASSERT(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0, "pipe");
	pid_t pid = tl_fork();
	if (pid == 0) {
		struct xfer_ctx *ctx = tl_open();
		struct xfer_stream *s;
		struct tl_buf src;
		size_t len = tl_recv_blob(to[0], tok, sizeof(tok));
		tl_buf_alloc(ctx, TL_HOST, 4096, &src);
		tl_fill(src.ptr, 4096, 77);
		T_OK(xfer_stream_connect(ctx, tok, len, LONG_MS, &s));
		T_OK(xfer_stream_send(s, src.mem, 0, 4096, LONG_MS));
		T_OK(xfer_stream_send(s, src.mem, 0, 4096, LONG_MS));
		int ok = 1;
		tl_write_full(from[1], &ok, sizeof(ok));
		for (;;)
			pause();
	}
	struct xfer_ctx *ctx = tl_open();
	struct xfer_stream *s;
	struct tl_buf b;
	size_t len = sizeof(tok);
	tl_buf_alloc(ctx, TL_MALLOC, 3 * 4096, &b);
	T_OK(xfer_stream_listen(ctx, b.mem, 0, 3, 4096, &s));
	T_OK(xfer_stream_token(s, tok, &len));
	tl_send_blob(to[1], tok, len);
	T_OK(xfer_stream_accept(s, LONG_MS));
	int ok;
	tl_read_full(from[0], &ok, sizeof(ok));
	kill(pid, SIGKILL);
	T_ASSERT(tl_child_wait(pid, LONG_MS) == -SIGKILL, "producer status");
	/* What landed before it died is still handed out. */
	for (int i = 0; i < 2; i++) {
		uint64_t mlen;
		int slot = xfer_stream_recv(s, &mlen, LONG_MS);
		T_ASSERT(slot == i && mlen == 4096, "message %d: %s", i,
			 xfer_strerror(slot));
		T_ASSERT(!tl_check(b.ptr + slot * 4096, 4096, 77), "bytes");
		T_OK(xfer_stream_release(s, (uint32_t)slot));
	}
	uint64_t mlen, t0 = tl_now_ms();
	int rc = xfer_stream_recv(s, &mlen, LONG_MS);
	T_ASSERT(rc == -ECONNRESET, "recv from a killed producer: %s",
		 xfer_strerror(rc));
	printf("producer killed: the consumer's recv failed -ECONNRESET after %llu ms: ok\n",
	       (unsigned long long)(tl_now_ms() - t0));
	T_ASSERT(xfer_stream_close(s) == -ECONNRESET, "close");
	tl_buf_free(ctx, &b);
	xfer_close(ctx);
	close(to[0]); close(to[1]); close(from[0]); close(from[1]);
}

int main(void)
{
	tl_socket();
	struct xfer_ctx *ctx = tl_open();

	bad_tokens(ctx);
	pid_t pid = consumer_start();
	for (uint32_t i = 0; i < sizeof(plans) / sizeof(plans[0]); i++)
		basic(ctx, i);
	flow_control(ctx);
	consumer_closes_first(ctx);
	consumer_stop(pid);
	/* A fresh context per stream: the second producer's. */
	pid = consumer_start();
	second_producer(ctx);
	consumer_stop(pid);
	consumer_killed(ctx);
	producer_killed();
	/* Every completion of the streams' own SQEs was taken by their
	 * close: at most a late notification may be left. */
	struct xfer_cqe *c;
	while (xfer_peek_cqe(ctx, &c) == 0) {
		T_ASSERT(c->flags & XFER_CQE_F_NOTIFY,
			 "a completion left on the producer's context: %llu",
			 (unsigned long long)c->user_data);
		xfer_cq_advance(ctx, 1);
	}
	xfer_close(ctx);
	return 0;
}
