/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rw_sizes.c - WRITE and READ between two client processes move exactly
 * the bytes asked for, at every size and alignment, for every pair of
 * memory kinds.
 *
 * The parent is the initiator; a child (tl_owner) owns the target
 * regions and checks their bytes on request.  For sizes from 0 and 1 B
 * up to 64 MiB, at unaligned offsets on both sides, and for each of the
 * four (source kind, target kind) pairs of memfd (xfer_alloc_host) and
 * malloc'd (xfer_reg) memory, every completion must report the length
 * and the path (memcpy for memfd <-> memfd, CMA otherwise), the target
 * must hold the source's bytes, and the bytes around the target range
 * must be untouched.  Finally a sub-range token grants exactly its range:
 * offsets are relative to it and one byte past it is -ERANGE.
 *
 * All of it runs twice: against make check's xferd, and against a
 * private one with three copy workers and cma_split_bytes at 1 MiB, so
 * that every CMA copy from 1 MiB up is cut into parts (unaligned, of
 * unequal length) copied at once.
 */
#include <errno.h>
#include <string.h>

#include "testlib.h"

#define MiB (1024u * 1024u)
/* Room for the largest transfer plus unaligned offsets and margins. */
#define REG_LEN (64u * MiB + 64u * 1024u)
/* Bytes each side of a target range that must stay untouched. */
#define MARGIN 4099u

static const size_t sizes[] = {
	0, 1, 3, 7, 4095, 4096, 4097, 65537, 1 * MiB,
	4 * MiB + 3,   /* past xferd's 4 MiB CMA staging buffer */
	16 * MiB, 64 * MiB,
};

static const char *op_name(unsigned op)
{
	return op == XFER_OP_WRITE ? "write" : "read";
}

static void expect_cqe(const struct xfer_cqe *c, uint64_t user_data,
		       int64_t result, unsigned path, const char *what)
{
	T_ASSERT(c->user_data == user_data, "%s: user_data %llu, want %llu",
		 what, (unsigned long long)c->user_data,
		 (unsigned long long)user_data);
	T_ASSERT(c->result == result, "%s: result %lld (%s), want %lld", what,
		 (long long)c->result, xfer_strerror((int)c->result),
		 (long long)result);
	T_ASSERT(c->path == path, "%s: path %s, want %s", what,
		 xfer_path_name(c->path), xfer_path_name(path));
	T_ASSERT(c->flags == 0, "%s: flags %#x", what, c->flags);
}

/* The window [lo, hi) around [off, off + len) that must keep bg. */
static void window(uint64_t off, uint64_t len, uint64_t *lo, uint64_t *hi)
{
	*lo = off > MARGIN ? off - MARGIN : 0;
	*hi = off + len + MARGIN < REG_LEN ? off + len + MARGIN : REG_LEN;
}

struct side {
	struct xfer_ctx *ctx;
	struct tl_buf local[2];           /* by enum tl_kind */
	struct xfer_remote *remote[2];    /* the owner's regions */
	struct tl_owner owner;
};

static void run_case(struct side *s, unsigned op, size_t len,
		     enum tl_kind src, enum tl_kind dst, unsigned n)
{
	char what[128];
	/* Unaligned on both sides, different for every case. */
	uint64_t loff = 1 + (n * 2741u) % 8190u;
	uint64_t roff = 3 + (n * 6151u) % 8180u;
	uint64_t seed = 0x5eed0000u + n, bg = ~seed * 31u;
	uint64_t lo, hi;

	snprintf(what, sizeof(what), "%s %zu B %s -> %s (local +%llu, remote +%llu)",
		 op_name(op), len, tl_kind_name(src), tl_kind_name(dst),
		 (unsigned long long)loff, (unsigned long long)roff);
	unsigned path = len ? tl_path_for(src, dst) : XFER_PATH_NONE;
	struct xfer_sqe *sqe = xfer_get_sqe(s->ctx);
	T_ASSERT(sqe, "no SQE");

	if (op == XFER_OP_WRITE) {
		/* local (kind src) -> the owner's region (kind dst) */
		struct tl_buf *l = &s->local[src];
		tl_fill_at(l->ptr + loff, len, seed, 0);
		window(roff, len, &lo, &hi);
		tl_owner_fill(&s->owner, dst, lo, hi - lo, bg, lo);
		xfer_prep_write(sqe, l->handle, loff,
				xfer_remote_handle(s->remote[dst]), roff, len, n);
		struct xfer_cqe c = tl_submit_wait(s->ctx);
		expect_cqe(&c, n, (int64_t)len, path, what);

		size_t bad = tl_owner_check(&s->owner, dst, roff, len, seed, 0);
		T_ASSERT(!bad, "%s: target byte %zu wrong", what, bad - 1);
		bad = tl_owner_check(&s->owner, dst, lo, roff - lo, bg, lo);
		T_ASSERT(!bad, "%s: byte %zu before the target touched", what,
			 (size_t)(roff - lo) - (bad - 1));
		bad = tl_owner_check(&s->owner, dst, roff + len,
				     hi - roff - len, bg, roff + len);
		T_ASSERT(!bad, "%s: byte %zu after the target touched", what,
			 bad - 1);
		bad = tl_check_at(l->ptr + loff, len, seed, 0);
		T_ASSERT(!bad, "%s: source byte %zu changed", what, bad - 1);
	} else {
		/* the owner's region (kind src) -> local (kind dst) */
		struct tl_buf *l = &s->local[dst];
		tl_owner_fill(&s->owner, src, roff, len, seed, 0);
		window(loff, len, &lo, &hi);
		tl_fill_at(l->ptr + lo, hi - lo, bg, lo);
		xfer_prep_read(sqe, l->handle, loff,
			       xfer_remote_handle(s->remote[src]), roff, len, n);
		struct xfer_cqe c = tl_submit_wait(s->ctx);
		expect_cqe(&c, n, (int64_t)len, path, what);

		size_t bad = tl_check_at(l->ptr + loff, len, seed, 0);
		T_ASSERT(!bad, "%s: target byte %zu wrong", what, bad - 1);
		bad = tl_check_at(l->ptr + lo, loff - lo, bg, lo);
		T_ASSERT(!bad, "%s: byte %zu before the target touched", what,
			 (size_t)(loff - lo) - (bad - 1));
		bad = tl_check_at(l->ptr + loff + len, hi - loff - len, bg,
				  loff + len);
		T_ASSERT(!bad, "%s: byte %zu after the target touched", what,
			 bad - 1);
		bad = tl_owner_check(&s->owner, src, roff, len, seed, 0);
		T_ASSERT(!bad, "%s: source byte %zu changed", what, bad - 1);
	}
}

/* One transfer against a sub-range import that must fail with -ERANGE
 * and touch nothing (the caller checks the owner's bytes). */
static void expect_erange(struct side *s, unsigned op, uint64_t rem,
			  uint64_t roff, uint64_t len, const char *what)
{
	struct tl_buf *l = &s->local[TL_HOST];
	struct xfer_sqe *sqe = xfer_get_sqe(s->ctx);

	T_ASSERT(sqe, "no SQE");
	tl_fill(l->ptr, len, 0xfeed);
	xfer_prep_rw(sqe, op, l->handle, 0, rem, roff, len, 77);
	struct xfer_cqe c = tl_submit_wait(s->ctx);
	expect_cqe(&c, 77, -ERANGE, XFER_PATH_NONE, what);
	T_ASSERT(!tl_check(l->ptr, len, 0xfeed), "%s: local bytes changed",
		 what);
}

static void sub_range(struct side *s, enum tl_kind kind)
{
	const uint64_t sub_off = 12345, sub_len = 5003;
	const uint64_t seed = 0xabcdef + kind, bg = 0x1234 + kind;
	uint8_t tok[XFER_TOKEN_MAX];
	struct xfer_remote *rem;
	struct tl_buf *l = &s->local[TL_HOST];
	size_t tok_len, bad;
	uint64_t lo = sub_off - MARGIN, hi = sub_off + sub_len + MARGIN;
	char what[64];

	snprintf(what, sizeof(what), "sub-range of %s", tl_kind_name(kind));
	T_ASSERT(tl_owner_export(&s->owner, kind, REG_LEN - 10, 11, tok,
				 &tok_len) == -ERANGE,
		 "%s: exporting past the region must fail", what);
	T_OK(tl_owner_export(&s->owner, kind, sub_off, sub_len, tok, &tok_len));
	T_OK(xfer_import(s->ctx, tok, tok_len, &rem));
	T_ASSERT(xfer_remote_len(rem) == sub_len, "%s: import grants %llu",
		 what, (unsigned long long)xfer_remote_len(rem));
	uint64_t h = xfer_remote_handle(rem);
	tl_owner_fill(&s->owner, kind, lo, hi - lo, bg, lo);

	/* The whole sub-range: offset 0 is the sub-range's first byte. */
	tl_fill(l->ptr, sub_len, seed);
	struct xfer_sqe *sqe = xfer_get_sqe(s->ctx);
	xfer_prep_write(sqe, l->handle, 0, h, 0, sub_len, 1);
	struct xfer_cqe c = tl_submit_wait(s->ctx);
	expect_cqe(&c, 1, (int64_t)sub_len, tl_path_for(TL_HOST, kind), what);
	bad = tl_owner_check(&s->owner, kind, sub_off, sub_len, seed, 0);
	T_ASSERT(!bad, "%s: byte %zu wrong", what, bad - 1);

	/* Its last byte is reachable... */
	const uint8_t last = 0x5a;
	l->ptr[0] = last;
	sqe = xfer_get_sqe(s->ctx);
	xfer_prep_write(sqe, l->handle, 0, h, sub_len - 1, 1, 2);
	c = tl_submit_wait(s->ctx);
	expect_cqe(&c, 2, 1, tl_path_for(TL_HOST, kind), what);
	T_ASSERT(!tl_owner_check(&s->owner, kind, sub_off, sub_len - 1, seed, 0),
		 "%s: bytes before the last one changed", what);

	/* ...and one byte past it is not, in any direction or shape. */
	expect_erange(s, XFER_OP_WRITE, h, sub_len, 1, "write 1 past the end");
	expect_erange(s, XFER_OP_WRITE, h, 0, sub_len + 1, "write 1 too long");
	expect_erange(s, XFER_OP_WRITE, h, sub_len - 1, 2, "write across the end");
	expect_erange(s, XFER_OP_READ, h, sub_len, 1, "read 1 past the end");
	expect_erange(s, XFER_OP_READ, h, 1, sub_len, "read across the end");

	/* Nothing outside the sub-range was touched, the last byte holds
	 * what the 1-byte write put there. */
	bad = tl_owner_check(&s->owner, kind, lo, sub_off - lo, bg, lo);
	T_ASSERT(!bad, "%s: byte before the sub-range touched", what);
	bad = tl_owner_check(&s->owner, kind, sub_off + sub_len,
			     hi - sub_off - sub_len, bg, sub_off + sub_len);
	T_ASSERT(!bad, "%s: byte after the sub-range touched", what);

	/* A read with offsets relative to the sub-range gets those bytes. */
	memset(l->ptr, 0, 200);
	sqe = xfer_get_sqe(s->ctx);
	xfer_prep_read(sqe, l->handle, 0, h, 17, 100, 3);
	c = tl_submit_wait(s->ctx);
	expect_cqe(&c, 3, 100, tl_path_for(kind, TL_HOST), what);
	T_ASSERT(!tl_check_at(l->ptr, 100, seed, 17),
		 "%s: read at sub-range offset 17 got other bytes", what);
	sqe = xfer_get_sqe(s->ctx);
	xfer_prep_read(sqe, l->handle, 0, h, sub_len - 1, 1, 4);
	c = tl_submit_wait(s->ctx);
	expect_cqe(&c, 4, 1, tl_path_for(kind, TL_HOST), what);
	T_ASSERT(l->ptr[0] == last, "%s: last byte %#x, want %#x", what,
		 l->ptr[0], last);
	T_OK(xfer_unimport(s->ctx, rem));
}

static void run_all(const char *xferd)
{
	static const enum tl_kind kinds[2] = { TL_HOST, TL_MALLOC };
	static const size_t lens[2] = { REG_LEN, REG_LEN };
	struct side s;
	unsigned n = 0;

	/* The owner first: it must not inherit our connection. */
	tl_owner_start(&s.owner, NULL, kinds, lens, 2);
	s.ctx = tl_open();
	for (unsigned k = 0; k < 2; k++) {
		tl_buf_alloc(s.ctx, kinds[k], REG_LEN, &s.local[k]);
		T_OK(xfer_import(s.ctx, s.owner.token[k], s.owner.token_len[k],
				 &s.remote[k]));
		T_ASSERT(xfer_remote_len(s.remote[k]) == REG_LEN,
			 "import grants %llu",
			 (unsigned long long)xfer_remote_len(s.remote[k]));
	}

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (unsigned op = XFER_OP_WRITE; op <= XFER_OP_READ; op++)
			for (unsigned src = 0; src < 2; src++)
				for (unsigned dst = 0; dst < 2; dst++)
					run_case(&s, op, sizes[i], src, dst, n++);
		printf("%s: %zu B: write and read, all kinds: ok\n", xferd,
		       sizes[i]);
	}
	sub_range(&s, TL_HOST);
	sub_range(&s, TL_MALLOC);
	printf("sub-range tokens: ok\n");

	for (unsigned k = 0; k < 2; k++) {
		T_OK(xfer_unimport(s.ctx, s.remote[k]));
		tl_buf_free(s.ctx, &s.local[k]);
	}
	xfer_close(s.ctx);
	tl_owner_stop(&s.owner);
}

int main(void)
{
	static const char *const split[] = { "copy_workers=3",
					     "cma_split_bytes=1M", NULL };
	struct tl_daemon xd;

	tl_socket();
	run_all("xferd of make check");
	tl_daemon_start(&xd, split);
	T_ASSERT(setenv("XFERD_SOCKET", xd.socket, 1) == 0, "setenv");
	run_all("xferd splitting CMA copies");
	int status = tl_daemon_stop(&xd);
	T_ASSERT(status == 0, "xferd exited with %d", status);
	return 0;
}
