/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring_phase.c - per-entry phase ((F), (G) of common/ring.h) against a
 * real xferd: a client that negotiated it and one that did not
 * (XFER_RING_PHASE=0, the hello of ring 4) each make many 8-512 byte
 * round trips at the same time, every byte checked, through several laps
 * of their rings; the one with phase finds its SQEs stamped with their
 * lap's phase and its CQEs with their lap's seq, the other neither.
 * Meanwhile a third client lies with its ring: random bytes in every SQ
 * slot, stamped; phase bits flipped after publishing; stamps on entries
 * it never submitted; garbage in its CQEs' seq.  The two honest clients
 * must finish in time, and xferd must still serve a new client after.
 * Last, for both protocols: a CQE seen means the SQ slots of what it
 * completes are free again (linked batches of the whole ring, each
 * followed at once by the next), as cq_tail always meant.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#define ROUND_TRIPS 6000u
#define MAX_LEN     512u

struct honest {
	const char *name;
	bool phase;            /* asked for it */
	struct xfer_ctx *ctx;
	struct tl_buf src, dst;
	unsigned sq_entries;
	uint64_t done;
};

static atomic_bool stop_lying;
static atomic_uint_fast64_t lies;

static void *honest_run(void *arg)
{
	struct honest *h = arg;

	for (uint32_t i = 0; i < ROUND_TRIPS; i++) {
		size_t len = 8 + (i * 37u) % (MAX_LEN - 7);
		uint64_t seed = ((uint64_t)h->phase << 32) + i;
		tl_fill(h->src.ptr, len, seed);
		memset(h->dst.ptr, 0, len);
		struct xfer_sqe *sqe = xfer_get_sqe(h->ctx);
		T_ASSERT(sqe, "%s: no SQE at %u", h->name, i);
		xfer_prep_write(sqe, h->src.handle, 0, h->dst.handle, 0, len,
				seed);
		struct xfer_cqe c = tl_submit_wait(h->ctx);
		T_ASSERT(c.user_data == seed && c.result == (int64_t)len,
			 "%s: round trip %u -> %lld (%s)", h->name, i,
			 (long long)c.result, xfer_strerror((int)c.result));
		T_ASSERT(!tl_check(h->dst.ptr, len, seed),
			 "%s: round trip %u: bytes differ", h->name, i);
		/* What the ring carried: the index of both entries is i (a
		 * fresh ring, one entry each way per round trip). */
		unsigned sq_lap = i / h->sq_entries;
		unsigned phase = (sqe->flags & XFER_SQE_F_PHASE_MASK) >>
				 XFER_SQE_PHASE_SHIFT;
		uint16_t seq = (uint16_t)(i / (2 * h->sq_entries) + 1);
		if (h->phase) {
			T_ASSERT(phase == (sq_lap % 2 ? 3u : 1u),
				 "%s: SQE %u has phase %u", h->name, i, phase);
			T_ASSERT(c.seq == seq, "%s: CQE %u has seq %u, want %u",
				 h->name, i, c.seq, seq);
		} else {
			T_ASSERT(phase == 0 && c.seq == 0, "%s: entry %u has "
				 "phase %u, seq %u", h->name, i, phase, c.seq);
		}
		h->done++;
	}
	return NULL;
}

/*
 * The liar: a client of its own, which owns nothing the others use.
 * Each turn it fills what SQ room it has with random bytes and submits
 * (libxfer stamps them), flips the phase bits of what it just
 * published, stamps slots it never submitted, scribbles the seq of its
 * CQ slots and takes whatever CQEs look ready.  Its own results are
 * whatever they are; only the others' matter.
 */
static void *liar_run(void *arg)
{
	struct xfer_ctx *ctx = arg;
	uint64_t x = 0x9e3779b97f4a7c15ull;

	while (!atomic_load(&stop_lying)) {
		struct xfer_sqe *sqe, *published[64];
		unsigned n = 0;
		while (n < 64 && (sqe = xfer_get_sqe(ctx))) {
			for (unsigned w = 0; w < sizeof(*sqe) / 8; w++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				memcpy((uint8_t *)sqe + 8 * w, &x, 8);
			}
			sqe->msg_len = 0;  /* else refused before the ring */
			published[n++] = sqe;
		}
		if (xfer_submit(ctx) < 0)
			break;  /* xferd dropped it: fine */
		for (unsigned i = 0; i < n; i++)
			if ((x >> i) & 1)
				published[i]->flags ^= XFER_SQE_F_PHASE_MASK;
		/* Stamps on entries never submitted: the next slots. */
		for (unsigned i = 0; i < 4 && (sqe = xfer_get_sqe(ctx)); i++)
			sqe->flags = (uint8_t)(x >> (8 * i));
		struct xfer_cqe *c;
		unsigned got = 0;
		while (got < 256 && xfer_peek_cqe(ctx, &c) == 0) {
			c->seq ^= (uint16_t)x;
			xfer_cq_advance(ctx, 1);
			got++;
		}
		atomic_fetch_add(&lies, n);
	}
	return NULL;
}

static void honest_open(struct honest *h, const char *name, bool phase)
{
	h->name = name;
	h->phase = phase;
	if (!phase)
		T_ASSERT(setenv("XFER_RING_PHASE", "0", 1) == 0, "setenv");
	h->ctx = tl_open();
	unsetenv("XFER_RING_PHASE");
	h->sq_entries = xfer_sq_space(h->ctx);
	T_ASSERT(h->sq_entries >= 8 && ROUND_TRIPS > 4 * h->sq_entries,
		 "%s: SQ of %u: too few laps", name, h->sq_entries);
	tl_buf_alloc(h->ctx, TL_HOST, MAX_LEN, &h->src);
	tl_buf_alloc(h->ctx, TL_MALLOC, MAX_LEN, &h->dst);
}

/* One linked batch of n 16-byte writes; false if a slot was not free. */
static bool submit_batch(struct honest *h, unsigned n, uint64_t tag)
{
	for (unsigned k = 0; k < n; k++) {
		struct xfer_sqe *sqe = xfer_get_sqe(h->ctx);
		if (!sqe)
			return false;
		xfer_prep_write(sqe, h->src.handle, (k % 16) * 16,
				h->dst.handle, (k % 16) * 16, 16, tag);
		if (k + 1 < n)
			sqe->flags |= XFER_SQE_F_LINK;
	}
	T_ASSERT(xfer_submit(h->ctx) >= 0, "%s: submit", h->name);
	return true;
}

/* Two linked batches of half the SQ each in flight: as soon as one's
 * CQE is there, the next batch must find its slots free, although
 * xferd may still be taking the other batch's entries. */
static void whole_ring_batches(struct honest *h)
{
	unsigned half = h->sq_entries / 2;
	uint64_t next = 0, seen = 0;

	T_ASSERT(submit_batch(h, half, next++) && submit_batch(h, half, next++),
		 "%s: the first two batches", h->name);
	while (seen < 400) {
		struct xfer_cqe *cqe;
		int rc = xfer_wait_cqe(h->ctx, &cqe, 10000);
		T_ASSERT(rc == 0, "%s: no CQE (%d)", h->name, rc);
		T_ASSERT(cqe->user_data == seen &&
			 cqe->result == 16 * (int64_t)half,
			 "%s: batch %llu -> %lld", h->name,
			 (unsigned long long)cqe->user_data,
			 (long long)cqe->result);
		xfer_cq_advance(h->ctx, 1);
		seen++;
		T_ASSERT(submit_batch(h, half, next),
			 "%s: batch %llu's CQE seen, its slots not free",
			 h->name, (unsigned long long)seen - 1);
		next++;
	}
	while (seen < next) {
		struct xfer_cqe *cqe;
		T_ASSERT(xfer_wait_cqe(h->ctx, &cqe, 10000) == 0, "%s: tail",
			 h->name);
		xfer_cq_advance(h->ctx, 1);
		seen++;
	}
}

static void honest_close(struct honest *h)
{
	tl_buf_free(h->ctx, &h->src);
	tl_buf_free(h->ctx, &h->dst);
	xfer_close(h->ctx);
}

int main(void)
{
	struct honest h[2];
	pthread_t th[2], liar;

	tl_socket();
	honest_open(&h[0], "phase", true);
	honest_open(&h[1], "old", false);
	struct xfer_ctx *lc = tl_open();

	T_ASSERT(pthread_create(&liar, NULL, liar_run, lc) == 0, "thread");
	uint64_t start = tl_now_ms();
	for (unsigned i = 0; i < 2; i++)
		T_ASSERT(pthread_create(&th[i], NULL, honest_run, &h[i]) == 0,
			 "thread");
	for (unsigned i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	uint64_t ms = tl_now_ms() - start;
	atomic_store(&stop_lying, true);
	pthread_join(liar, NULL);
	for (unsigned i = 0; i < 2; i++)
		T_ASSERT(h[i].done == ROUND_TRIPS, "%s: %llu round trips",
			 h[i].name, (unsigned long long)h[i].done);
	T_ASSERT(atomic_load(&lies) > 0, "the liar never published");

	/* xferd still serves a newcomer, bytes checked. */
	struct honest late;
	honest_open(&late, "late", true);
	tl_fill(late.src.ptr, 64, 77);
	struct xfer_sqe *sqe = xfer_get_sqe(late.ctx);
	T_ASSERT(sqe, "late: no SQE");
	xfer_prep_write(sqe, late.src.handle, 0, late.dst.handle, 0, 64, 77);
	struct xfer_cqe c = tl_submit_wait(late.ctx);
	T_ASSERT(c.result == 64 && !tl_check(late.dst.ptr, 64, 77),
		 "late: %lld", (long long)c.result);
	honest_close(&late);

	for (unsigned i = 0; i < 2; i++)
		whole_ring_batches(&h[i]);

	xfer_close(lc);
	for (unsigned i = 0; i < 2; i++)
		honest_close(&h[i]);
	printf("ok: %u round trips each, phase and old, in %llu ms beside "
	       "%llu lying SQEs\n", ROUND_TRIPS, (unsigned long long)ms,
	       (unsigned long long)atomic_load(&lies));
	return 0;
}
