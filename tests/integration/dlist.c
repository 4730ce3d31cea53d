/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlist.c - prepared descriptor lists on one node.
 *
 * Shows: lists made once over a region of this client and over an
 * imported token of another client move random blocks by index, one SQE
 * and one CQE (the byte sum, the path) for thousands of blocks, every
 * block in place and every other block untouched, both ways (WRITE_DLIST
 * scatters, READ_DLIST gathers), for memfd and malloc'd (CMA) memory;
 * lists with their own lengths; runs contiguous at both ends; a list
 * descriptor inside a linked batch (one CQE for both); the notification
 * after the last byte; pairs written in place (xfer_dlist_pairs); the
 * ring's index area reused many times over, and one linked batch larger
 * than it (the SQE that found it full retried after a submit);
 * xfer_reg'd memory that lost a page (-EFAULT through it, whole around);
 * an xferd without an index area (-EOPNOTSUPP).
 * Bad lists and bad pairs fail clearly with nothing moved: entries
 * outside the region or token, offset + length overflowing, empty
 * entries, a foreign handle, indices past a list, entries of different
 * lengths, a destroyed list, a list whose import or region went.
 *
 * The target regions belong to a second context in this process,
 * reached through an imported token, so the test sees their bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "testlib.h"

#define BLK     4096u
#define NSLOTS  2048u
#define NPICK   1500u
#define LEN     ((size_t)NSLOTS * BLK)
#define FENCE   0xfe11ceull

static struct xfer_ctx *ic, *oc;       /* initiator, owner of targets */
static struct tl_buf src[2], tgt[2];   /* by enum tl_kind */
static struct xfer_remote *rtgt[2];
static struct xfer_dlist *lsrc[2], *ltgt[2];
static uint64_t offs[NSLOTS];
static uint32_t li[NPICK], ri[NPICK];

/* Submit what is prepared and wait for one CQE; nothing but the fence
 * may follow it. */
static struct xfer_cqe one_cqe(const char *what)
{
	struct xfer_cqe c = tl_submit_wait(ic);
	xfer_prep_nop(tl_get_sqe(ic), FENCE);
	struct xfer_cqe f = tl_submit_wait(ic);
	T_ASSERT(f.user_data == FENCE, "%s: a second CQE (user_data %llu)",
		 what, (unsigned long long)f.user_data);
	return c;
}

static struct xfer_sqe *prep(unsigned op, struct xfer_dlist *l,
			     struct xfer_dlist *r, unsigned n,
			     const uint32_t *a, const uint32_t *b, uint64_t ud)
{
	struct xfer_sqe *sqe = tl_get_sqe(ic);
	int rc = xfer_prep_dlist(ic, sqe, op, l, r, n, a, b, ud);
	T_ASSERT(rc == 0, "xfer_prep_dlist: %s", xfer_strerror(rc));
	return sqe;
}

/* Every target block: the source block a pair sent there, or the
 * background; returns after failing the test on the first bad byte. */
static void check_target(enum tl_kind t, uint64_t seed, uint64_t bg,
			 const char *what)
{
	static int32_t from[NSLOTS];

	for (uint32_t s = 0; s < NSLOTS; s++)
		from[s] = -1;
	for (uint32_t k = 0; k < NPICK; k++)
		from[ri[k]] = (int32_t)li[k];
	for (uint32_t s = 0; s < NSLOTS; s++) {
		const uint8_t *p = tgt[t].ptr + (size_t)s * BLK;
		size_t bad = from[s] < 0
			? tl_check_at(p, BLK, bg, (uint64_t)s * BLK)
			: tl_check_at(p, BLK, seed, (uint64_t)from[s] * BLK);
		T_ASSERT(!bad, "%s: slot %u (from %d) byte %zu", what, s,
			 from[s], bad - 1);
	}
}

static void scatter_gather(enum tl_kind sk, enum tl_kind tk, uint64_t seed)
{
	char what[96];
	const uint64_t bg = ~seed;

	snprintf(what, sizeof(what), "%u x 4 KiB %s -> %s", NPICK,
		 tl_kind_name(sk), tl_kind_name(tk));
	tl_pick(li, NPICK, NSLOTS, seed);
	tl_pick(ri, NPICK, NSLOTS, seed * 7 + 3);
	tl_fill_at(src[sk].ptr, LEN, seed, 0);
	tl_fill_at(tgt[tk].ptr, LEN, bg, 0);
	prep(XFER_OP_WRITE_DLIST, lsrc[sk], ltgt[tk], NPICK, li, ri, 42);
	struct xfer_cqe c = one_cqe(what);
	T_ASSERT(c.user_data == 42 && c.result == (int64_t)NPICK * BLK,
		 "%s: CQE %llu / %lld (%s)", what,
		 (unsigned long long)c.user_data, (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "bytes");
	T_ASSERT(c.path == tl_path_for(sk, tk), "%s: path %s", what,
		 xfer_path_name(c.path));
	check_target(tk, seed, bg, what);

	/* Back: gather the same blocks into a cleared source. */
	tl_fill_at(src[sk].ptr, LEN, bg, 0);
	prep(XFER_OP_READ_DLIST, lsrc[sk], ltgt[tk], NPICK, li, ri, 43);
	c = one_cqe(what);
	T_ASSERT(c.result == (int64_t)NPICK * BLK, "%s: read back %lld",
		 what, (long long)c.result);
	static uint8_t got[NSLOTS];
	memset(got, 0, sizeof(got));
	for (uint32_t k = 0; k < NPICK; k++) {
		got[li[k]] = 1;
		size_t bad = tl_check_at(src[sk].ptr + (size_t)li[k] * BLK,
					 BLK, seed, (uint64_t)li[k] * BLK);
		T_ASSERT(!bad, "%s: read back block %u byte %zu", what, li[k],
			 bad - 1);
	}
	for (uint32_t s = 0; s < NSLOTS; s++)
		T_ASSERT(got[s] || !tl_check_at(src[sk].ptr + (size_t)s * BLK,
						BLK, bg, (uint64_t)s * BLK),
			 "%s: read back wrote block %u", what, s);
	printf("%s and back: one CQE each, every block in place: ok\n", what);
}

/* Pairs 0..n-1 -> 0..n-1: one contiguous run, one range moved. */
static void contiguous(void)
{
	tl_fill_at(src[TL_HOST].ptr, LEN, 91, 0);
	tl_fill_at(tgt[TL_HOST].ptr, LEN, 92, 0);
	prep(XFER_OP_WRITE_DLIST, lsrc[TL_HOST], ltgt[TL_HOST], NSLOTS, NULL,
	     NULL, 7);
	struct xfer_cqe c = one_cqe("identity");
	T_ASSERT(c.result == (int64_t)LEN, "identity: %lld",
		 (long long)c.result);
	T_ASSERT(!tl_check_at(tgt[TL_HOST].ptr, LEN, 91, 0),
		 "identity: bytes");
	printf("identity pairs over the whole region: ok\n");
}

/* Entries of their own lengths (every other block 1 byte short). */
static void own_lengths(void)
{
	enum { N = 64 };
	uint64_t off[N], lens[N];
	struct xfer_dlist *a, *b;
	uint32_t idx[N];

	for (uint32_t i = 0; i < N; i++) {
		off[i] = (uint64_t)i * 3 * BLK + 5;
		lens[i] = i % 2 ? BLK - 1 : 2 * BLK + 1;
		idx[N - 1 - i] = i;
	}
	T_OK(xfer_dlist_create(ic, src[TL_MALLOC].handle, N, off, lens, 0, &a));
	T_OK(xfer_dlist_create(ic, xfer_remote_handle(rtgt[TL_HOST]), N, off,
			       lens, 0, &b));
	tl_fill_at(src[TL_MALLOC].ptr, LEN, 51, 0);
	tl_fill_at(tgt[TL_HOST].ptr, LEN, 52, 0);
	prep(XFER_OP_WRITE_DLIST, a, b, N, idx, idx, 8);
	struct xfer_cqe c = one_cqe("own lengths");
	uint64_t sum = 0;
	for (uint32_t i = 0; i < N; i++)
		sum += lens[i];
	T_ASSERT(c.result == (int64_t)sum, "own lengths: %lld, not %llu",
		 (long long)c.result, (unsigned long long)sum);
	for (uint32_t i = 0; i < N; i++) {
		size_t bad = tl_check_at(tgt[TL_HOST].ptr + off[i], lens[i],
					 51, off[i]);
		T_ASSERT(!bad, "own lengths: entry %u byte %zu", i, bad - 1);
		/* The byte after a short entry is the background's. */
		T_ASSERT(!tl_check_at(tgt[TL_HOST].ptr + off[i] + lens[i], 1,
				      52, off[i] + lens[i]),
			 "own lengths: entry %u overran", i);
	}
	/* Pair a 4095-byte entry with a 8193-byte one: -EINVAL. */
	uint32_t x = 0, y = 1;
	tl_fill_at(tgt[TL_HOST].ptr, LEN, 52, 0);
	prep(XFER_OP_WRITE_DLIST, a, b, 1, &x, &y, 9);
	c = one_cqe("different lengths");
	T_ASSERT(c.result == -EINVAL, "different lengths: %lld",
		 (long long)c.result);
	T_ASSERT(!tl_check_at(tgt[TL_HOST].ptr, LEN, 52, 0),
		 "different lengths moved bytes");
	T_OK(xfer_dlist_destroy(ic, a));
	T_OK(xfer_dlist_destroy(ic, b));
	printf("entries of their own lengths; different lengths -EINVAL: ok\n");
}

/* A WRITE, then a list descriptor, linked: one CQE with both. */
static void linked(void)
{
	tl_fill_at(src[TL_HOST].ptr, LEN, 61, 0);
	tl_fill_at(tgt[TL_MALLOC].ptr, LEN, 62, 0);
	struct xfer_sqe *s = tl_get_sqe(ic);
	xfer_prep_write(s, src[TL_HOST].handle, 0,
			xfer_remote_handle(rtgt[TL_MALLOC]), 0, BLK, 1);
	xfer_sqe_set_link(s);
	uint32_t a[2] = { 5, 9 }, b[2] = { 20, 30 };
	prep(XFER_OP_WRITE_DLIST, lsrc[TL_HOST], ltgt[TL_MALLOC], 2, a, b, 2);
	struct xfer_cqe c = one_cqe("linked");
	T_ASSERT(c.user_data == 2 && c.result == 3 * BLK,
		 "linked: CQE %llu / %lld", (unsigned long long)c.user_data,
		 (long long)c.result);
	T_ASSERT(!tl_check_at(tgt[TL_MALLOC].ptr, BLK, 61, 0) &&
		 !tl_check_at(tgt[TL_MALLOC].ptr + 20 * BLK, BLK, 61, 5 * BLK) &&
		 !tl_check_at(tgt[TL_MALLOC].ptr + 30 * BLK, BLK, 61, 9 * BLK),
		 "linked: bytes");
	printf("a list descriptor in a linked batch: one CQE: ok\n");
}

/* Pairs written straight into the index area (xfer_dlist_pairs). */
static void pairs_in_place(void)
{
	enum { N = 700 };
	struct xfer_dlist_pair *pairs;
	uint64_t off;

	tl_fill_at(src[TL_HOST].ptr, LEN, 65, 0);
	tl_fill_at(tgt[TL_HOST].ptr, LEN, 66, 0);
	struct xfer_sqe *sqe = tl_get_sqe(ic);
	T_ASSERT(xfer_dlist_pairs(ic, sqe, 0, &pairs, &off) == -EINVAL,
		 "no pairs");
	T_OK(xfer_dlist_pairs(ic, sqe, N, &pairs, &off));
	for (uint32_t k = 0; k < N; k++)  /* block k -> slot 2k + 1 */
		pairs[k] = (struct xfer_dlist_pair){ k, 2 * k + 1 };
	xfer_prep_dlist_at(sqe, XFER_OP_WRITE_DLIST,
			   xfer_dlist_handle(lsrc[TL_HOST]),
			   xfer_dlist_handle(ltgt[TL_HOST]), N, off, 14);
	struct xfer_cqe c = one_cqe("pairs in place");
	T_ASSERT(c.user_data == 14 && c.result == (int64_t)N * BLK,
		 "pairs in place: %lld", (long long)c.result);
	for (uint32_t s = 0; s < NSLOTS; s++) {
		const uint8_t *p = tgt[TL_HOST].ptr + (size_t)s * BLK;
		size_t bad = s % 2 && s / 2 < N
			? tl_check_at(p, BLK, 65, (uint64_t)(s / 2) * BLK)
			: tl_check_at(p, BLK, 66, (uint64_t)s * BLK);
		T_ASSERT(!bad, "pairs in place: slot %u byte %zu", s, bad - 1);
	}
	printf("pairs written in place (xfer_dlist_pairs): ok\n");
}

/* The notification comes after the last byte, once. */
static void notified(void)
{
	struct xfer_dlist *own;

	/* A list over this client's own other region: its notification
	 * comes back on this ring. */
	T_OK(xfer_dlist_create(ic, src[TL_MALLOC].handle, NSLOTS, offs, NULL,
			       BLK, &own));
	tl_fill_at(src[TL_HOST].ptr, LEN, 71, 0);
	struct xfer_sqe *s = prep(XFER_OP_WRITE_DLIST, lsrc[TL_HOST], own,
				  100, NULL, NULL, 10);
	xfer_sqe_set_notify(s, 777);
	struct xfer_cqe c[2];
	c[0] = tl_submit_wait(ic);
	c[1] = tl_wait(ic);
	int n = c[0].flags & XFER_CQE_F_NOTIFY ? 0 : 1;
	int d = 1 - n;
	T_ASSERT(c[d].user_data == 10 && c[d].result == 100 * BLK,
		 "notify: completion %llu / %lld",
		 (unsigned long long)c[d].user_data, (long long)c[d].result);
	T_ASSERT((c[n].flags & XFER_CQE_F_NOTIFY) && c[n].user_data == 777 &&
		 c[n].result == 100 * BLK &&
		 c[n].handle == src[TL_MALLOC].handle,
		 "notify: %llu / %lld / flags %u",
		 (unsigned long long)c[n].user_data, (long long)c[n].result,
		 c[n].flags);
	T_ASSERT(!tl_check_at(src[TL_MALLOC].ptr, 100 * BLK, 71, 0),
		 "notify: bytes not there");
	T_OK(xfer_dlist_destroy(ic, own));
	printf("the notification after the last byte: ok\n");
}

/* Thousands of list SQEs: the index area is reused many times over. */
static void index_area_reused(void)
{
	enum { ROUNDS = 600, N = 1000 };  /* 8 KB of pairs each: ~5 MB */
	unsigned sub = 0, done = 0;
	uint64_t deadline = tl_now_ms() + 60000;

	tl_fill_at(src[TL_HOST].ptr, LEN, 81, 0);
	tl_pick(li, N, NSLOTS, 81);
	tl_pick(ri, N, NSLOTS, 82);
	while (done < ROUNDS) {
		T_ASSERT(tl_now_ms() < deadline, "index area: stuck at %u",
			 done);
		while (sub < ROUNDS) {
			struct xfer_sqe *sqe = xfer_get_sqe(ic);
			if (!sqe)
				break;
			int rc = xfer_prep_dlist(ic, sqe, XFER_OP_WRITE_DLIST,
						 lsrc[TL_HOST], ltgt[TL_HOST],
						 N, li, ri, sub);
			if (rc == -EAGAIN) {
				xfer_prep_nop(sqe, FENCE);  /* give it back */
				break;
			}
			T_ASSERT(rc == 0, "prep: %s", xfer_strerror(rc));
			sub++;
		}
		T_ASSERT(xfer_submit(ic) >= 0, "submit");
		struct xfer_cqe c = tl_wait(ic);
		if (c.user_data == FENCE)
			continue;
		T_ASSERT(c.result == (int64_t)N * BLK, "round %llu: %lld",
			 (unsigned long long)c.user_data, (long long)c.result);
		done++;
	}
	for (uint32_t k = 0; k < N; k++)
		T_ASSERT(!tl_check_at(tgt[TL_HOST].ptr + (size_t)ri[k] * BLK,
				      BLK, 81, (uint64_t)li[k] * BLK),
			 "index area: block %u", k);
	printf("%u list SQEs of %u pairs through the index area: ok\n",
	       (unsigned)ROUNDS, (unsigned)N);
}

/*
 * One linked batch of more pairs than the index area holds, the way
 * xfer.h says to go on when it is full: submit (xferd takes what is
 * before) and try the same SQE again.  The SQE left unfilled must not
 * reach xferd meanwhile: the batch ends in one CQE with every byte.
 */
static void linked_past_index_area(void)
{
	enum { SQES = 150, N = NPICK };  /* 12 KB of pairs each: ~1.8 MB */
	unsigned full = 0;
	uint64_t deadline = tl_now_ms() + 30000;

	tl_fill_at(src[TL_HOST].ptr, LEN, 91, 0);
	tl_fill_at(tgt[TL_HOST].ptr, LEN, 92, 0);
	tl_pick(li, N, NSLOTS, 91);
	tl_pick(ri, N, NSLOTS, 92);
	for (unsigned k = 0; k < SQES; k++) {
		struct xfer_sqe *sqe = tl_get_sqe(ic);
		int rc;
		while ((rc = xfer_prep_dlist(ic, sqe, XFER_OP_WRITE_DLIST,
					     lsrc[TL_HOST], ltgt[TL_HOST], N,
					     li, ri, 9)) == -EAGAIN) {
			full++;
			T_ASSERT(tl_now_ms() < deadline,
				 "index area: stuck at %u", k);
			T_ASSERT(xfer_submit(ic) >= 0, "submit");
		}
		T_ASSERT(rc == 0, "prep: %s", xfer_strerror(rc));
		if (k + 1 < SQES)
			xfer_sqe_set_link(sqe);
	}
	struct xfer_cqe c = one_cqe("a batch past the index area");
	T_ASSERT(full > 0, "the index area was never full");
	T_ASSERT(c.user_data == 9 && c.result == (int64_t)SQES * N * BLK,
		 "a batch past the index area: CQE %llu / %lld, expected 9 / "
		 "%lld", (unsigned long long)c.user_data, (long long)c.result,
		 (long long)SQES * N * BLK);
	for (uint32_t k = 0; k < N; k++)
		T_ASSERT(!tl_check_at(tgt[TL_HOST].ptr + (size_t)ri[k] * BLK,
				      BLK, 91, (uint64_t)li[k] * BLK),
			 "a batch past the index area: block %u", k);
	printf("%u linked list SQEs of %u pairs, the index area full %u "
	       "times: one CQE: ok\n", (unsigned)SQES, (unsigned)N, full);
}

/*
 * xfer_reg'd memory that lost a page after registration: the list's
 * blocks go CMA_IOV_MAX a system call, and the one that cannot be done
 * fails the descriptor with -EFAULT, not a short count; the blocks
 * around the hole still move when the pairs avoid it.
 */
static void cma_hole(void)
{
	enum { N = 600, HOLE = 400 };  /* more blocks than one call takes */
	size_t len = (size_t)N * BLK;
	uint64_t off[N];
	uint32_t idx[N - 1], rev[N];
	struct xfer_mem *mem;
	struct xfer_dlist *dst;

	uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	T_ASSERT(buf != MAP_FAILED, "mmap");
	T_OK(xfer_reg(ic, buf, len, &mem));
	for (uint32_t i = 0; i < N; i++)
		off[i] = (uint64_t)i * BLK;
	T_OK(xfer_dlist_create(ic, xfer_mem_handle(mem), N, off, NULL, BLK,
			       &dst));
	T_ASSERT(munmap(buf + (size_t)HOLE * BLK, BLK) == 0, "munmap");
	tl_fill_at(src[TL_HOST].ptr, LEN, 95, 0);

	/* Every block but the hole, from source blocks in reverse order
	 * (no two contiguous: N - 1 ranges): all of them land. */
	for (uint32_t k = 0, i = 0; i < N; i++)
		if (i != HOLE) {
			idx[k] = i;
			rev[k++] = N - 1 - i;
		}
	prep(XFER_OP_WRITE_DLIST, lsrc[TL_HOST], dst, N - 1, rev, idx, 11);
	struct xfer_cqe c = one_cqe("around a hole");
	T_ASSERT(c.result == (int64_t)(N - 1) * BLK && c.path == XFER_PATH_CMA,
		 "around a hole: %lld via %s", (long long)c.result,
		 xfer_path_name(c.path));
	for (uint32_t i = 0; i < N; i++)
		T_ASSERT(i == HOLE ||
			 !tl_check_at(buf + (size_t)i * BLK, BLK, 95,
				      (uint64_t)(N - 1 - i) * BLK),
			 "around a hole: block %u", i);

	/* Through the hole, both ways, as one range and as N: -EFAULT. */
	for (uint32_t i = 0; i < N; i++)
		rev[i] = N - 1 - i;  /* both ends descending: N ranges */
	static const unsigned ops[2] = { XFER_OP_WRITE_DLIST,
					 XFER_OP_READ_DLIST };
	for (int o = 0; o < 2; o++) {
		prep(ops[o], lsrc[TL_HOST], dst, N, NULL, NULL, 12);
		c = one_cqe("through a hole");
		T_ASSERT(c.result == -EFAULT, "%s through a hole: %lld",
			 o ? "a read" : "a write", (long long)c.result);
		prep(ops[o], lsrc[TL_HOST], dst, N, rev, NULL, 13);
		c = one_cqe("through a hole, block by block");
		T_ASSERT(c.result == -EFAULT, "%s through a hole block by "
			 "block: %lld", o ? "a read" : "a write",
			 (long long)c.result);
	}
	T_OK(xfer_dlist_destroy(ic, dst));
	T_OK(xfer_dereg(ic, mem));
	munmap(buf, len);
	printf("xfer_reg'd memory with a hole: around it ok, through it "
	       "-EFAULT: ok\n");
}

/*
 * An xferd whose rings have no index area (ring_index_kb = 0): libxfer
 * refuses list descriptors with -EOPNOTSUPP, and one written by hand
 * completes -EOPNOTSUPP with nothing moved.
 */
static void no_index_area(void)
{
	const char *args[] = { "ring_index_kb=0", NULL };
	struct tl_daemon xd;
	struct xfer_ctx *c;
	struct xfer_mem *a, *b;
	struct xfer_dlist *la, *lb;

	tl_daemon_start(&xd, args);
	T_OK(xfer_open(xd.socket, &c));
	T_OK(xfer_alloc_host(c, 2 * BLK, &a));
	T_OK(xfer_alloc_host(c, 2 * BLK, &b));
	memset(xfer_mem_ptr(a), 0x5a, 2 * BLK);
	memset(xfer_mem_ptr(b), 0, 2 * BLK);
	T_OK(xfer_dlist_create(c, xfer_mem_handle(a), 2, offs, NULL, BLK, &la));
	T_OK(xfer_dlist_create(c, xfer_mem_handle(b), 2, offs, NULL, BLK, &lb));
	struct xfer_sqe *sqe = tl_get_sqe(c);
	int rc = xfer_prep_dlist(c, sqe, XFER_OP_WRITE_DLIST, la, lb, 2, NULL,
				 NULL, 1);
	T_ASSERT(rc == -EOPNOTSUPP, "no index area: prep %s",
		 xfer_strerror(rc));
	*sqe = (struct xfer_sqe){ .opcode = XFER_OP_WRITE_DLIST, .len = 2,
				  .local = xfer_dlist_handle(la),
				  .remote = xfer_dlist_handle(lb),
				  .user_data = 2 };
	struct xfer_cqe cqe = tl_submit_wait(c);
	T_ASSERT(cqe.user_data == 2 && cqe.result == -EOPNOTSUPP,
		 "no index area: a list descriptor by hand: %lld",
		 (long long)cqe.result);
	const uint8_t *p = xfer_mem_ptr(b);
	for (size_t i = 0; i < 2 * BLK; i++)
		T_ASSERT(p[i] == 0, "no index area: byte %zu moved", i);
	T_OK(xfer_dlist_destroy(c, la));
	T_OK(xfer_dlist_destroy(c, lb));
	T_OK(xfer_free_host(c, a));
	T_OK(xfer_free_host(c, b));
	xfer_close(c);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not stop cleanly");
	printf("no index area: -EOPNOTSUPP, nothing moved: ok\n");
}

static void expect_create(uint64_t handle, uint32_t n, const uint64_t *off,
			  const uint64_t *lens, uint64_t len, int want,
			  const char *what)
{
	struct xfer_dlist *dl = NULL;
	int rc = xfer_dlist_create(ic, handle, n, off, lens, len, &dl);
	T_ASSERT(rc == want, "%s: %s, not %s", what, xfer_strerror(rc),
		 xfer_strerror(want));
	printf("%s: %s: ok\n", what, xfer_strerror(rc));
}

/* A descriptor that must fail with want and move nothing. */
static void expect_fail(struct xfer_dlist *l, struct xfer_dlist *r,
			unsigned n, const uint32_t *a, const uint32_t *b,
			int want, const char *what)
{
	tl_fill_at(tgt[TL_HOST].ptr, LEN, 33, 0);
	prep(XFER_OP_WRITE_DLIST, l, r, n, a, b, 5);
	struct xfer_cqe c = one_cqe(what);
	T_ASSERT(c.result == want, "%s: %lld (%s), not %s", what,
		 (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "bytes",
		 xfer_strerror(want));
	T_ASSERT(!tl_check_at(tgt[TL_HOST].ptr, LEN, 33, 0),
		 "%s: bytes moved", what);
	printf("%s: %s, nothing moved: ok\n", what, xfer_strerror(want));
}

static void bad_lists(void)
{
	uint64_t off[2] = { 0, LEN - BLK + 1 };
	uint64_t big[1] = { UINT64_MAX - 10 };
	uint64_t zero[1] = { 0 };

	expect_create(src[TL_HOST].handle, 2, off, NULL, BLK, -ERANGE,
		      "an entry past the region");
	expect_create(xfer_remote_handle(rtgt[TL_HOST]), 2, off, NULL, BLK,
		      -ERANGE, "an entry past the token");
	expect_create(src[TL_HOST].handle, 1, big, NULL, BLK, -ERANGE,
		      "offset + length overflowing");
	expect_create(src[TL_HOST].handle, 1, off, zero, 0, -EINVAL,
		      "an entry of 0 bytes");
	/* The owner's own handle number, not ours. */
	expect_create(tgt[TL_HOST].handle, 1, off, NULL, BLK, -EACCES,
		      "another client's region");
	expect_create(xfer_dlist_handle(lsrc[TL_HOST]), 1, off, NULL, BLK,
		      -EACCES, "a list as a target");

	uint32_t past = NSLOTS, ok = 0;
	expect_fail(lsrc[TL_HOST], ltgt[TL_HOST], 1, &past, &ok, -ERANGE,
		    "a local index past its list");
	expect_fail(lsrc[TL_HOST], ltgt[TL_HOST], 1, &ok, &past, -ERANGE,
		    "a remote index past its list");
	/* A bad pair at the end: the good ones before it moved nothing. */
	uint32_t a[3] = { 1, 2, 3 }, b[3] = { 4, 5, NSLOTS + 7 };
	expect_fail(lsrc[TL_HOST], ltgt[TL_HOST], 3, a, b, -ERANGE,
		    "two good pairs and a bad one");
	/* A local list over an import: a list of its own memory only. */
	expect_fail(ltgt[TL_HOST], ltgt[TL_HOST], 1, &ok, &ok, -EINVAL,
		    "a local list over an import");

	/* Destroyed, and lists of a removed import. */
	struct xfer_dlist *gone, *imp;
	struct xfer_remote *r;
	uint8_t tok[XFER_TOKEN_MAX];
	size_t tlen = tl_export(&tgt[TL_HOST], tok);
	T_OK(xfer_import(ic, tok, tlen, &r));
	T_OK(xfer_dlist_create(ic, src[TL_HOST].handle, NSLOTS, offs, NULL,
			       BLK, &gone));
	T_OK(xfer_dlist_create(ic, xfer_remote_handle(r), NSLOTS, offs, NULL,
			       BLK, &imp));
	uint64_t gone_handle = xfer_dlist_handle(gone);
	T_OK(xfer_dlist_destroy(ic, gone));
	/* The destroyed list's handle in a raw SQE. */
	tl_fill_at(tgt[TL_HOST].ptr, LEN, 33, 0);
	struct xfer_sqe *s = tl_get_sqe(ic);
	*s = (struct xfer_sqe){ .opcode = XFER_OP_WRITE_DLIST, .len = 1,
				.local = gone_handle,
				.remote = xfer_dlist_handle(ltgt[TL_HOST]) };
	struct xfer_cqe c = one_cqe("a destroyed list");
	T_ASSERT(c.result == -EACCES, "a destroyed list: %lld",
		 (long long)c.result);
	/* A region handle where a list belongs. */
	s = tl_get_sqe(ic);
	*s = (struct xfer_sqe){ .opcode = XFER_OP_WRITE_DLIST, .len = 1,
				.local = src[TL_HOST].handle,
				.remote = xfer_dlist_handle(ltgt[TL_HOST]) };
	c = one_cqe("a region handle as a list");
	T_ASSERT(c.result == -EACCES, "a region handle as a list: %lld",
		 (long long)c.result);
	T_ASSERT(!tl_check_at(tgt[TL_HOST].ptr, LEN, 33, 0),
		 "a destroyed list moved bytes");
	printf("a destroyed list, a region handle as a list: -EACCES: ok\n");
	T_OK(xfer_unimport(ic, r));
	expect_fail(lsrc[TL_HOST], imp, 1, &ok, &ok, -EACCES,
		    "a list whose import was removed");
	int rc = xfer_dlist_destroy(ic, imp);
	T_ASSERT(rc == -EACCES, "destroying a list that went with its import: "
		 "%s", xfer_strerror(rc));
}

int main(void)
{
	static const enum tl_kind kinds[2] = { TL_HOST, TL_MALLOC };

	ic = tl_open();
	oc = tl_open();
	for (uint32_t i = 0; i < NSLOTS; i++)
		offs[i] = (uint64_t)i * BLK;
	for (int k = 0; k < 2; k++) {
		uint8_t tok[XFER_TOKEN_MAX];
		tl_buf_alloc(ic, kinds[k], LEN, &src[k]);
		tl_buf_alloc(oc, kinds[k], LEN, &tgt[k]);
		size_t tlen = tl_export(&tgt[k], tok);
		T_OK(xfer_import(ic, tok, tlen, &rtgt[k]));
		T_OK(xfer_dlist_create(ic, src[k].handle, NSLOTS, offs, NULL,
				       BLK, &lsrc[k]));
		T_OK(xfer_dlist_create(ic, xfer_remote_handle(rtgt[k]), NSLOTS,
				       offs, NULL, BLK, &ltgt[k]));
		T_ASSERT(xfer_dlist_count(ltgt[k]) == NSLOTS, "count");
	}
	uint64_t seed = 1;
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++)
			scatter_gather(kinds[a], kinds[b], seed++);
	contiguous();
	own_lengths();
	linked();
	pairs_in_place();
	notified();
	index_area_reused();
	linked_past_index_area();
	cma_hole();
	no_index_area();
	bad_lists();

	/* The owner's region goes: the list over our import of it fails
	 * with nothing moved (the import is stale). */
	tl_buf_free(oc, &tgt[TL_MALLOC]);
	uint32_t z = 0;
	prep(XFER_OP_WRITE_DLIST, lsrc[TL_HOST], ltgt[TL_MALLOC], 1, &z, &z, 6);
	struct xfer_cqe c = one_cqe("target region gone");
	T_ASSERT(c.result == -ESTALE || c.result == -EACCES,
		 "a list over a deregistered region: %lld",
		 (long long)c.result);
	printf("a list over a deregistered region: %s: ok\n",
	       xfer_strerror((int)c.result));
	xfer_close(ic);
	xfer_close(oc);
	printf("ok\n");
	return 0;
}
