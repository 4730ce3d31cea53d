/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_stream.c - a stream whose slots are GPU memory: the consumer offers
 * 3 slots of 4 MiB + 7 in a cudaMalloc buffer (at an odd offset) and, in
 * a second pass, in CUDA VMM memory; a producer process streams messages
 * of several lengths from xfer_alloc_host memory; the consumer copies
 * every slot back to the host and checks every byte, holds slots and
 * releases them out of order, and sees -EPIPE after the last message.
 *
 * The producer is forked before this process touches CUDA (a child of a
 * CUDA process cannot use CUDA; the producer needs none).
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "gpulib.h"

#define NSLOTS 3u
#define SLOT ((4u << 20) + 7)
#define OFF 4099u
#define COUNT 24u

static uint64_t msg_len(uint32_t pass, uint32_t i)
{
	switch ((i + pass) % 4) {
	case 0: return SLOT;
	case 1: return 1;
	case 2: return SLOT - 4096 - 3;
	default: return (i * 104729u) % SLOT;
	}
}

static uint64_t msg_seed(uint32_t pass, uint32_t i)
{
	return 0x65770000ull + pass * 1000u + i;
}

static void producer(int in)
{
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	struct xfer_ctx *ctx = tl_open();
	struct tl_buf src;

	tl_buf_alloc(ctx, TL_HOST, SLOT, &src);
	for (uint32_t pass = 0; pass < 2; pass++) {
		struct xfer_stream *s;
		size_t len = tl_recv_blob(in, tok, sizeof(tok));
		T_OK(xfer_stream_connect(ctx, tok, len, 60000, &s));
		for (uint32_t i = 0; i < COUNT; i++) {
			uint64_t n = msg_len(pass, i);
			tl_fill(src.ptr, n, msg_seed(pass, i));
			T_OK(xfer_stream_send(s, src.mem, 0, n, 60000));
		}
		T_OK(xfer_stream_close(s));
	}
	tl_buf_free(ctx, &src);
	xfer_close(ctx);
}

static void consume(struct xfer_ctx *ctx, struct gl_buf *b, uint32_t pass,
		    int out)
{
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	size_t len = sizeof(tok);
	struct xfer_stream *s;
	int held[NSLOTS];
	uint32_t nheld = 0;

	T_OK(xfer_stream_listen(ctx, b->mem, OFF, NSLOTS, SLOT, &s));
	T_OK(xfer_stream_token(s, tok, &len));
	tl_send_blob(out, tok, len);
	T_OK(xfer_stream_accept(s, 60000));
	for (uint32_t i = 0; i < COUNT; i++) {
		uint64_t n;
		int slot = xfer_stream_recv(s, &n, 60000);
		T_ASSERT(slot >= 0, "recv %u: %s", i, xfer_strerror(slot));
		T_ASSERT(n == msg_len(pass, i), "message %u: %llu bytes", i,
			 (unsigned long long)n);
		size_t bad = gl_check(b, OFF + (uint64_t)slot * SLOT, n,
				      msg_seed(pass, i), 0);
		T_ASSERT(!bad, "%s, message %u in slot %d: byte %zu wrong",
			 gl_kind_name(b->kind), i, slot, bad - 1);
		held[nheld++] = slot;
		if (nheld == NSLOTS || i % 2)
			while (nheld)
				T_OK(xfer_stream_release(s, (uint32_t)held[--nheld]));
	}
	while (nheld)
		T_OK(xfer_stream_release(s, (uint32_t)held[--nheld]));
	uint64_t n;
	int rc = xfer_stream_recv(s, &n, 60000);
	T_ASSERT(rc == -EPIPE, "after the last message: %s", xfer_strerror(rc));
	xfer_stream_close(s);
	printf("%u messages through %u slots of %u bytes in %s: every byte ok\n",
	       COUNT, NSLOTS, SLOT, gl_kind_name(b->kind));
}

int main(int argc, char **argv)
{
	int p[2];

	gl_owner_entry(argc, argv);
	tl_socket();
	T_ASSERT(pipe2(p, O_CLOEXEC) == 0, "pipe");
	pid_t pid = tl_fork();
	if (pid == 0) {
		close(p[1]);
		producer(p[0]);
		exit(0);
	}
	close(p[0]);
	gl_require_gpus(1);
	struct xfer_ctx *ctx = tl_open();
	static const enum gl_kind kinds[] = { GL_DEVICE, GL_VMM };
	for (uint32_t pass = 0; pass < 2; pass++) {
		struct gl_buf b;
		gl_buf_alloc(ctx, kinds[pass], 0, OFF + NSLOTS * SLOT, &b);
		consume(ctx, &b, pass, p[1]);
		gl_buf_free(ctx, &b, true);
	}
	T_ASSERT(tl_child_wait(pid, 60000) == 0, "the producer failed");
	xfer_close(ctx);
	return 0;
}
