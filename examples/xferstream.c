/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferstream.c - NIXL's sender/receiver example on a libxfer stream: a
 * receiver offers slots (default 2 of 16 MiB) and a sender streams
 * messages through them, each side printing its bandwidth.
 *
 *   xferstream recv [--socket PATH] [--name NAME] [--count N]
 *                   [--size BYTES] [--slots N] [--verify]
 *                   [--timeout-ms MS] [--hold-after K]
 *   xferstream send [--socket PATH] [--name NAME] [--count N] [--verify]
 *                   [--plain] [--timeout-ms MS] [--stall-after K]
 *
 * The receiver allocates its slots (xfer_alloc_host), publishes its
 * stream token under NAME (default "xferstream") and the plain token of
 * the slots under NAME.slots, then accepts one sender.  The sender looks
 * NAME up ("node/NAME" on another node), connects and sends COUNT
 * messages of the slot size.  Every message starts with a header: a
 * magic, its sequence number, its length and a pattern word made from
 * the sequence number; the receiver checks the header of every message
 * (--verify: every byte, the sender then fills every message with its
 * own pattern).  --plain: before the stream and again after it (before
 * its close), the sender moves the same bytes as plain WRITEs into the
 * same slots (NAME.slots), one at a time and two in flight, from a
 * context of its own, and prints the stream's bandwidth against the mean
 * of the two runs.
 *
 * --hold-after K / --stall-after K: after K messages stop releasing /
 * sending and wait to be killed (the failure tests).  Errors print
 * "error=ENAME" and exit 1.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "xfer.h"

#define MAGIC 0x3152444d52545358ull  /* "XSTRMDR1", little-endian */
#define HDR_WORDS 4

struct opts {
	const char *socket, *name;
	uint64_t count, size;
	uint32_t slots;
	bool verify, plain;
	int timeout_ms;
	long hold_after, stall_after;
};

static void die(const char *side, const char *what, int err)
{
	const char *name = err < 0 ? strerrorname_np(-err) : NULL;

	fprintf(stderr, "xferstream %s: %s: %s\n", side, what,
		xfer_strerror(err));
	printf("error=%s\n", name ? name : "unknown");
	exit(1);
}

static uint64_t mix(uint64_t seq, uint64_t i)
{
	uint64_t x = seq * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 31;
	return x * 0x94d049bb133111ebull;
}

/* Header: magic, seq, len, pattern word; --verify: the rest too. */
static void fill(uint64_t *w, uint64_t len, uint64_t seq, bool all)
{
	w[0] = MAGIC;
	w[1] = seq;
	w[2] = len;
	w[3] = mix(seq, 3);
	if (all)
		for (uint64_t i = HDR_WORDS; i < len / 8; i++)
			w[i] = mix(seq, i);
}

/* 0 if good, else a message. */
static const char *check(const uint64_t *w, uint64_t len, uint64_t seq,
			 bool all)
{
	if (len < HDR_WORDS * 8)
		return "too short for a header";
	if (w[0] != MAGIC)
		return "bad magic";
	if (w[1] != seq)
		return "wrong sequence number";
	if (w[2] != len)
		return "wrong length";
	if (w[3] != mix(seq, 3))
		return "bad pattern word";
	if (all)
		for (uint64_t i = HDR_WORDS; i < len / 8; i++)
			if (w[i] != mix(seq, i))
				return "bad byte in the body";
	return NULL;
}

static double mbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes * 1e3 / (double)ns : 0;
}

static void linger(const char *side, const char *what, uint64_t n)
{
	printf("%s: %s after %llu\n", side, what, (unsigned long long)n);
	fflush(stdout);
	for (;;)
		pause();
}

static int do_recv(const struct opts *o)
{
	struct xfer_ctx *ctx;
	struct xfer_mem *mem;
	struct xfer_stream *s;
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	size_t len = sizeof(tok);
	char name[XFER_NAME_MAX + 1];
	int rc;

	if ((rc = xfer_open(o->socket, &ctx)))
		die("recv", "open", rc);
	if ((rc = xfer_alloc_host(ctx, o->slots * o->size, &mem)))
		die("recv", "alloc", rc);
	if ((rc = xfer_stream_listen(ctx, mem, 0, o->slots, o->size, &s)))
		die("recv", "listen", rc);
	/* Shared (XFER_PUBLISH_SHARED): the producer is another user's
	 * process or on another node as often as not. */
	if ((rc = xfer_stream_token(s, tok, &len)) ||
	    (rc = xfer_publish_flags(ctx, o->name, tok, len,
				     XFER_PUBLISH_SHARED)))
		die("recv", "publish", rc);
	len = XFER_TOKEN_MAX;
	snprintf(name, sizeof(name), "%s.slots", o->name);
	if ((rc = xfer_export(mem, 0, xfer_mem_len(mem), tok, &len)) ||
	    (rc = xfer_publish_flags(ctx, name, tok, len,
				     XFER_PUBLISH_SHARED)))
		die("recv", "publish the slots", rc);
	printf("recv: %u slots of %llu bytes published as %s\n", o->slots,
	       (unsigned long long)o->size, o->name);
	fflush(stdout);
	if ((rc = xfer_stream_accept(s, o->timeout_ms)))
		die("recv", "accept", rc);
	printf("recv: accepted\n");
	fflush(stdout);
	uint64_t n = 0, bytes = 0, t0 = 0, t_last = 0;
	for (;;) {
		uint64_t mlen;
		int slot = xfer_stream_recv(s, &mlen, o->timeout_ms);
		if (slot == -EPIPE)
			break;
		if (slot < 0)
			die("recv", "recv", slot);
		if (n == 0)
			t0 = now_ns();
		const uint64_t *w = (const uint64_t *)((uint8_t *)xfer_mem_ptr(mem) +
						       (uint64_t)slot * o->size);
		const char *bad = check(w, mlen, n, o->verify);
		if (bad) {
			fprintf(stderr, "xferstream recv: message %llu: %s\n",
				(unsigned long long)n, bad);
			printf("error=EBADMSG\n");
			return 1;
		}
		n++;
		bytes += mlen;
		t_last = now_ns();
		if (o->hold_after >= 0 && n >= (uint64_t)o->hold_after)
			linger("recv", "holding", n);
		if ((rc = xfer_stream_release(s, (uint32_t)slot)))
			die("recv", "release", rc);
	}
	/* From the first message's arrival to the last one's: the time of
	 * n - 1 messages. */
	uint64_t dt = t_last - t0, timed = n > 1 ? bytes - bytes / n : 0;
	printf("recv: %llu messages checked (%s), %llu bytes; first to last in %.3f s: %.2f MB/s\n",
	       (unsigned long long)n, o->verify ? "every byte" : "headers",
	       (unsigned long long)bytes, dt / 1e9, mbps(timed, dt));
	if (o->count && n != o->count) {
		printf("error=EBADMSG (%llu messages, want %llu)\n",
		       (unsigned long long)n, (unsigned long long)o->count);
		return 1;
	}
	xfer_stream_close(s);
	xfer_free_host(ctx, mem);
	xfer_close(ctx);
	return 0;
}

/* The same bytes as plain WRITEs into the slots, depth in flight. */
static double plain_writes(struct xfer_ctx *ctx, const struct opts *o,
			   struct xfer_mem *src, unsigned depth)
{
	char name[XFER_NAME_MAX + 1];
	uint8_t tok[XFER_TOKEN_MAX];
	size_t len = sizeof(tok);
	struct xfer_remote *rem;
	int rc;

	snprintf(name, sizeof(name), "%s.slots", o->name);
	if ((rc = xfer_lookup(ctx, name, tok, &len)) ||
	    (rc = xfer_import(ctx, tok, len, &rem)))
		die("send", "the slots' token", rc);
	uint64_t size = xfer_mem_len(src), slots = xfer_remote_len(rem) / size;
	/* Untimed first: every slot once, so that the first timed writes
	 * do not pay for xferd's first touch of the mappings. */
	uint64_t total = o->count + slots, sent = 0, done = 0, t0 = 0;
	while (done < total) {
		if (done == slots && !t0)
			t0 = now_ns();
		while (sent < total && sent - done < depth &&
		       (t0 || sent < slots)) {
			struct xfer_sqe *sqe = xfer_get_sqe(ctx);
			xfer_prep_write(sqe, xfer_mem_handle(src), 0,
					xfer_remote_handle(rem),
					(sent % slots) * size, size, sent);
			sent++;
		}
		if ((rc = xfer_submit(ctx)) < 0)
			die("send", "submit", rc);
		struct xfer_cqe *c;
		if ((rc = xfer_wait_cqe(ctx, &c, o->timeout_ms)))
			die("send", "plain write", rc);
		if (c->result != (int64_t)size)
			die("send", "plain write", (int)c->result);
		xfer_cq_advance(ctx, 1);
		done++;
	}
	uint64_t dt = now_ns() - t0;
	xfer_unimport(ctx, rem);
	double bw = mbps(o->count * size, dt);
	printf("send: plain WRITEs, %u in flight: %llu x %llu bytes in %.3f s: %.2f MB/s\n",
	       depth, (unsigned long long)o->count, (unsigned long long)size,
	       dt / 1e9, bw);
	return bw;
}

static int do_send(const struct opts *o)
{
	struct xfer_ctx *ctx;
	struct xfer_mem *src;
	struct xfer_stream *s;
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	size_t len = sizeof(tok);
	double plain1 = 0, plain2 = 0;
	int rc;

	if ((rc = xfer_open(o->socket, &ctx)))
		die("send", "open", rc);
	if ((rc = xfer_lookup(ctx, o->name, tok, &len)))
		die("send", "lookup", rc);
	/* The geometry is in the token: connect first, so that the plain
	 * WRITEs know the slot size; the receiver waits in recv. */
	if ((rc = xfer_stream_connect(ctx, tok, len, o->timeout_ms, &s)))
		die("send", "connect", rc);
	uint64_t size = xfer_stream_slot_size(s);
	if ((rc = xfer_alloc_host(ctx, size, &src)))
		die("send", "alloc", rc);
	fill(xfer_mem_ptr(src), size, 0, true);
	printf("send: connected: %u slots of %llu bytes\n", xfer_stream_nslots(s),
	       (unsigned long long)size);
	fflush(stdout);
	/* A context of its own: the stream's takes no other CQEs. */
	struct xfer_ctx *pctx = NULL;
	struct xfer_mem *psrc = NULL;
	if (o->plain) {
		if ((rc = xfer_open(o->socket, &pctx)) ||
		    (rc = xfer_alloc_host(pctx, size, &psrc)))
			die("send", "plain context", rc);
		memcpy(xfer_mem_ptr(psrc), xfer_mem_ptr(src), size);
		plain1 = plain_writes(pctx, o, psrc, 1);
		plain2 = plain_writes(pctx, o, psrc, 2);
	}
	uint64_t t0 = now_ns();
	for (uint64_t n = 0; n < o->count; n++) {
		if (o->stall_after >= 0 && n >= (uint64_t)o->stall_after)
			linger("send", "stalled", n);
		fill(xfer_mem_ptr(src), size, n, o->verify);
		if ((rc = xfer_stream_send(s, src, 0, size, o->timeout_ms)))
			die("send", "send", rc);
	}
	uint64_t dt = now_ns() - t0;
	if (o->plain) {
		/* Once more after the stream (the receiver waits for the
		 * close): the order of the runs favours neither. */
		plain1 = (plain1 + plain_writes(pctx, o, psrc, 1)) / 2;
		plain2 = (plain2 + plain_writes(pctx, o, psrc, 2)) / 2;
		xfer_free_host(pctx, psrc);
		xfer_close(pctx);
	}
	if ((rc = xfer_stream_close(s)))
		die("send", "close", rc);
	double bw = mbps(o->count * size, dt);
	printf("send: %llu messages (%s), %llu bytes in %.3f s: %.2f MB/s\n",
	       (unsigned long long)o->count, o->verify ? "every byte set" : "headers set",
	       (unsigned long long)(o->count * size), dt / 1e9, bw);
	if (o->plain)
		printf("send: plain WRITEs, mean of before and after: %.2f MB/s (1 in flight), %.2f MB/s (2 in flight)\n"
		       "send: stream / plain WRITEs: %.3f (1 in flight), %.3f (2 in flight)\n",
		       plain1, plain2, bw / plain1, bw / plain2);
	xfer_free_host(ctx, src);
	xfer_close(ctx);
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: xferstream recv [--socket PATH] [--name NAME] [--count N] [--size BYTES]\n"
	      "                       [--slots N] [--verify] [--timeout-ms MS] [--hold-after K]\n"
	      "       xferstream send [--socket PATH] [--name NAME] [--count N] [--verify]\n"
	      "                       [--plain] [--timeout-ms MS] [--stall-after K]\n", f);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "name", required_argument, NULL, 'n' },
		{ "count", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 'z' },
		{ "slots", required_argument, NULL, 'k' },
		{ "verify", no_argument, NULL, 'v' },
		{ "plain", no_argument, NULL, 'p' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "hold-after", required_argument, NULL, 'H' },
		{ "stall-after", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct opts o = {
		.name = "xferstream",
		.count = 100,
		.size = 16u << 20,
		.slots = 2,
		.timeout_ms = 60000,
		.hold_after = -1,
		.stall_after = -1,
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (ch) {
		case 's': o.socket = optarg; break;
		case 'n': o.name = optarg; break;
		case 'c': o.count = strtoull(optarg, NULL, 0); break;
		case 'z': o.size = strtoull(optarg, NULL, 0); break;
		case 'k': o.slots = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'v': o.verify = true; break;
		case 'p': o.plain = true; break;
		case 't': o.timeout_ms = atoi(optarg); break;
		case 'H': o.hold_after = atol(optarg); break;
		case 'S': o.stall_after = atol(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind + 1 != argc || o.size < HDR_WORDS * 8 || o.size % 8 ||
	    o.slots == 0) {
		usage(stderr);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(argv[optind], "recv") == 0)
		return do_recv(&o);
	if (strcmp(argv[optind], "send") == 0)
		return do_send(&o);
	usage(stderr);
	return 2;
}
