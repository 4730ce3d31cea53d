/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.c - notifications reach the target region's owner once, after
 * the data, and only when the transfer succeeded.
 *
 * Two processes: the parent owns the target regions (memfd and malloc'd)
 * and watches its CQ; a child imports their tokens and sends.  The owner
 * sees, for each kind of target:
 *  - a write with notify: one CQE with XFER_CQE_F_NOTIFY, user_data = the
 *    notify value, handle = its region, result = the bytes, and the bytes
 *    already in place when the CQE is seen (a plain write before it gave
 *    no notification);
 *  - a standalone NOTIFY: the same with result 0 and no data;
 *  - a linked batch with notify on its last entry: one notification,
 *    after all of the batch's data;
 *  - a failed write with notify (bad range, bad local handle, a copy
 *    that faults), a failed batch with notify, a NOTIFY on a bad handle:
 *    no notification at all (the next CQE is a fence);
 *  - a READ with notify: the owner learns its buffer was read.
 * Also: notifications beyond a full CQ are held by xferd and all arrive,
 * in order, once the owner reads (10 000 of them, the owner reading
 * nothing meanwhile), without stalling the sender; a client notifying
 * its own region gets both its completion and the notification.  On a
 * private xferd with a small notify_queue_max: past the bound the sender
 * gets -ENOBUFS (a write's data still lands) and the owner exactly those
 * held, in order; an owner that goes with notifications held leaves
 * xferd and the sender fine.
 * Messages and sender names: NOTIFY, WRITE and READ with messages of 0,
 * 1 and XFER_NOTIFY_MSG_MAX bytes arrive byte for byte with the sender's
 * name (a batch's on its last entry); one byte more is refused by
 * libxfer (-EMSGSIZE), and an SQE whose raw msg_len is garbage by xferd
 * (-EMSGSIZE; -EINVAL without a notification), nothing delivered; bad
 * names are refused at open; held notifications (the owner reading
 * nothing) keep their order and their messages.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testlib.h"

#define REG_LEN  (1024u * 1024u)
#define BLK      4096u
#define NBLK     16u

/* Ranges and values both processes agree on. */
#define PLAIN_OFF  100u
#define PLAIN_LEN  1000u
#define A_OFF      4097u
#define A_LEN      300001u
#define C_OFF(i)   (5u + 8192u * (i))
#define D_OFF      (REG_LEN - 3 * BLK)
#define E_OFF      77u
#define E_LEN      65536u
#define NFLOOD     10000u  /* far more than a CQ of a default ring holds */

enum phase {
	PH_WRITE = 1, PH_NOTIFY, PH_BATCH, PH_FAIL, PH_READ, PH_FLOOD, PH_QUIT,
};

static uint64_t nv(enum phase ph, unsigned kind)
{
	return 0x4e000000ull + ph * 16u + kind;
}

static uint64_t seed_of(enum phase ph, unsigned kind, unsigned n)
{
	return 0x5eed00ull + ph * 256u + kind * 16u + n;
}

#define FENCE(kind) (0xfe0ce000ull + (kind))

struct cmd {
	uint32_t phase, kind;
};

/* --- the sender (child) --- */

static struct xfer_ctx *sctx;
static struct tl_buf sbuf;

static struct xfer_cqe send_one(struct xfer_sqe *tmpl, int64_t want,
				const char *what)
{
	struct xfer_sqe *sqe = xfer_get_sqe(sctx);

	T_ASSERT(sqe, "sender: no SQE");
	*sqe = *tmpl;
	struct xfer_cqe c = tl_submit_wait(sctx);
	T_ASSERT(c.user_data == tmpl->user_data, "sender %s: user_data %llu",
		 what, (unsigned long long)c.user_data);
	T_ASSERT(c.result == want, "sender %s: result %lld (%s), want %lld",
		 what, (long long)c.result, xfer_strerror((int)c.result),
		 (long long)want);
	T_ASSERT(!(c.flags & XFER_CQE_F_NOTIFY),
		 "sender %s: its own completion is flagged NOTIFY", what);
	return c;
}

static void send_fence(uint64_t rh, unsigned kind)
{
	struct xfer_sqe s;

	xfer_prep_notify(&s, rh, FENCE(kind), 900);
	send_one(&s, 0, "fence");
}

static void sender_phase(const struct cmd *cmd, uint64_t rh)
{
	const unsigned k = cmd->kind;
	const uint64_t lh = sbuf.handle;
	struct xfer_cqe c;
	struct xfer_sqe s;

	switch (cmd->phase) {
	case PH_WRITE:
		tl_fill(sbuf.ptr, PLAIN_LEN, seed_of(PH_WRITE, k, 0));
		xfer_prep_write(&s, lh, 0, rh, PLAIN_OFF, PLAIN_LEN, 1);
		send_one(&s, PLAIN_LEN, "plain write");
		tl_fill(sbuf.ptr, A_LEN, seed_of(PH_WRITE, k, 1));
		xfer_prep_write(&s, lh, 0, rh, A_OFF, A_LEN, 2);
		xfer_sqe_set_notify(&s, nv(PH_WRITE, k));
		c = send_one(&s, A_LEN, "write with notify");
		T_ASSERT(c.path == tl_path_for(TL_HOST, k), "path %s",
			 xfer_path_name(c.path));
		break;
	case PH_NOTIFY:
		xfer_prep_notify(&s, rh, nv(PH_NOTIFY, k), 3);
		c = send_one(&s, 0, "notify");
		T_ASSERT(c.path == XFER_PATH_NONE, "notify moved data");
		break;
	case PH_BATCH:
		for (unsigned i = 0; i < NBLK; i++) {
			tl_fill(sbuf.ptr + i * BLK, BLK, seed_of(PH_BATCH, k, i));
			struct xfer_sqe *sqe = xfer_get_sqe(sctx);
			T_ASSERT(sqe, "sender: no SQE");
			xfer_prep_write(sqe, lh, i * BLK, rh, C_OFF(i), BLK, 10 + i);
			if (i < NBLK - 1)
				xfer_sqe_set_link(sqe);
			else
				xfer_sqe_set_notify(sqe, nv(PH_BATCH, k));
		}
		c = tl_submit_wait(sctx);
		T_ASSERT(c.user_data == 10 + NBLK - 1 &&
			 c.result == (int64_t)NBLK * BLK,
			 "sender batch: %llu/%lld", (unsigned long long)c.user_data,
			 (long long)c.result);
		send_fence(rh, k);
		break;
	case PH_FAIL:
		/* Out of range. */
		xfer_prep_write(&s, lh, 0, rh, REG_LEN - 10, 11, 20);
		xfer_sqe_set_notify(&s, nv(PH_FAIL, k));
		send_one(&s, -ERANGE, "failed write with notify");
		/* A bad local side. */
		xfer_prep_write(&s, 0, 0, rh, 0, 11, 21);
		xfer_sqe_set_notify(&s, nv(PH_FAIL, k) + 1);
		send_one(&s, -EACCES, "write with notify from handle 0");
		/* A batch whose middle entry fails, notify on its last. */
		tl_fill(sbuf.ptr, 3 * BLK, seed_of(PH_FAIL, k, 0));
		for (unsigned i = 0; i < 3; i++) {
			struct xfer_sqe *sqe = xfer_get_sqe(sctx);
			T_ASSERT(sqe, "sender: no SQE");
			/* The second is one past the end. */
			xfer_prep_write(sqe, lh, i * BLK, rh,
					i == 1 ? REG_LEN - BLK + 1 : D_OFF + i * BLK,
					BLK, 22 + i);
			if (i < 2)
				xfer_sqe_set_link(sqe);
			else
				xfer_sqe_set_notify(sqe, nv(PH_FAIL, k) + 2);
		}
		c = tl_submit_wait(sctx);
		T_ASSERT(c.user_data == 24 && c.result == -ERANGE,
			 "sender failed batch: %llu/%lld",
			 (unsigned long long)c.user_data, (long long)c.result);
		/* A copy that fails after both handles resolved: the
		 * sender's registered memory was unmapped under it. */
		void *gone = mmap(NULL, 65536, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		T_ASSERT(gone != MAP_FAILED, "mmap");
		struct xfer_mem *gm;
		T_OK(xfer_reg(sctx, gone, 65536, &gm));
		munmap(gone, 65536);
		xfer_prep_write(&s, xfer_mem_handle(gm), 0, rh, 0, BLK, 26);
		xfer_sqe_set_notify(&s, nv(PH_FAIL, k) + 4);
		send_one(&s, -EFAULT, "write with notify from unmapped memory");
		T_OK(xfer_dereg(sctx, gm));
		/* A NOTIFY to a handle that is not an import. */
		xfer_prep_notify(&s, 1ull << 40, nv(PH_FAIL, k) + 3, 25);
		send_one(&s, -EACCES, "notify to an unknown handle");
		send_fence(rh, k);
		break;
	case PH_READ:
		memset(sbuf.ptr, 0, E_LEN);
		xfer_prep_read(&s, lh, 0, rh, E_OFF, E_LEN, 30);
		xfer_sqe_set_notify(&s, nv(PH_READ, k));
		send_one(&s, E_LEN, "read with notify");
		T_ASSERT(!tl_check(sbuf.ptr, E_LEN, seed_of(PH_READ, k, 0)),
			 "read with notify: wrong bytes");
		break;
	case PH_FLOOD: {
		unsigned sent = 0, done = 0;
		uint64_t deadline = tl_now_ms() + 60000;
		while (done < NFLOOD) {
			T_ASSERT(tl_now_ms() < deadline, "flood: %u of %u done",
				 done, NFLOOD);
			struct xfer_sqe *sqe;
			while (sent < NFLOOD && (sqe = xfer_get_sqe(sctx))) {
				xfer_prep_notify(sqe, rh, nv(PH_FLOOD, k) + sent,
						 sent);
				sent++;
			}
			T_ASSERT(xfer_submit(sctx) >= 0, "flood submit");
			struct xfer_cqe *cq;
			while (xfer_peek_cqe(sctx, &cq) == 0) {
				T_ASSERT(cq->user_data == done && cq->result == 0,
					 "flood notify %u: %llu/%lld (%s)", done,
					 (unsigned long long)cq->user_data,
					 (long long)cq->result,
					 xfer_strerror((int)cq->result));
				xfer_cq_advance(sctx, 1);
				done++;
			}
			sched_yield();
		}
		break;
	}
	default:
		T_ASSERT(0, "sender: phase %u", cmd->phase);
	}
}

static void sender_main(int in, int out)
{
	uint8_t tok[2][XFER_TOKEN_MAX];
	size_t tok_len[2];
	struct xfer_remote *rem[2];

	for (unsigned k = 0; k < 2; k++)
		tok_len[k] = tl_recv_blob(in, tok[k], sizeof(tok[k]));
	sctx = tl_open();
	tl_buf_alloc(sctx, TL_HOST, REG_LEN, &sbuf);
	for (unsigned k = 0; k < 2; k++)
		T_OK(xfer_import(sctx, tok[k], tok_len[k], &rem[k]));
	for (;;) {
		struct cmd cmd;
		tl_read_full(in, &cmd, sizeof(cmd));
		if (cmd.phase == PH_QUIT)
			break;
		T_ASSERT(cmd.kind < 2, "sender: kind %u", cmd.kind);
		sender_phase(&cmd, xfer_remote_handle(rem[cmd.kind]));
		uint8_t ok = 1;
		tl_write_full(out, &ok, 1);
	}
	/* Nothing the owner did shows up here as a notification. */
	struct xfer_cqe *c;
	T_ASSERT(xfer_peek_cqe(sctx, &c) == -EAGAIN, "sender got a stray CQE");
	for (unsigned k = 0; k < 2; k++)
		xfer_unimport(sctx, rem[k]);
	tl_buf_free(sctx, &sbuf);
	xfer_close(sctx);
}

/* --- the owner (parent) --- */

static struct xfer_ctx *octx;
static struct tl_buf tgt[2];
static int to_sender, from_sender;

static void go(enum phase ph, unsigned kind)
{
	struct cmd cmd = { .phase = ph, .kind = kind };

	tl_write_full(to_sender, &cmd, sizeof(cmd));
}

static void sender_done(void)
{
	uint8_t ok;

	tl_read_full(from_sender, &ok, 1);
	T_ASSERT(ok == 1, "sender failed");
}

/* The next CQE must be a notification for region k with value, bytes. */
static void expect_notify(unsigned k, uint64_t value, int64_t bytes,
			  const char *what)
{
	struct xfer_cqe c = tl_wait(octx);

	T_ASSERT(c.flags & XFER_CQE_F_NOTIFY, "%s: CQE %llu not a notification",
		 what, (unsigned long long)c.user_data);
	T_ASSERT(c.user_data == value, "%s: value %#llx, want %#llx", what,
		 (unsigned long long)c.user_data, (unsigned long long)value);
	T_ASSERT(c.handle == tgt[k].handle, "%s: handle %llu, want %llu", what,
		 (unsigned long long)c.handle,
		 (unsigned long long)tgt[k].handle);
	T_ASSERT(c.result == bytes, "%s: result %lld, want %lld", what,
		 (long long)c.result, (long long)bytes);
}

static void expect_bg(unsigned k, uint64_t off, uint64_t len, uint64_t bg,
		      const char *what)
{
	size_t bad = tl_check_at(tgt[k].ptr + off, len, bg, off);

	T_ASSERT(!bad, "%s: byte %llu was written", what,
		 (unsigned long long)(off + bad - 1));
}

static void owner_kind(unsigned k)
{
	const uint64_t bg = 0xb9 + k;
	const char *kn = tl_kind_name(k);
	char what[96];

	/* A write with notify; the plain write before it did not notify. */
	snprintf(what, sizeof(what), "write with notify to %s", kn);
	tl_fill(tgt[k].ptr, REG_LEN, bg);
	go(PH_WRITE, k);
	expect_notify(k, nv(PH_WRITE, k), A_LEN, what);
	/* Seen the notification: the data must already be there. */
	T_ASSERT(!tl_check(tgt[k].ptr + A_OFF, A_LEN, seed_of(PH_WRITE, k, 1)),
		 "%s: data not in place at the notification", what);
	T_ASSERT(!tl_check(tgt[k].ptr + PLAIN_OFF, PLAIN_LEN,
			   seed_of(PH_WRITE, k, 0)),
		 "%s: the plain write's data missing", what);
	expect_bg(k, PLAIN_OFF + PLAIN_LEN, A_OFF - PLAIN_OFF - PLAIN_LEN, bg, what);
	expect_bg(k, A_OFF + A_LEN, REG_LEN - A_OFF - A_LEN, bg, what);
	sender_done();
	printf("%s: ok\n", what);

	snprintf(what, sizeof(what), "standalone notify to %s", kn);
	tl_fill(tgt[k].ptr, REG_LEN, bg);
	go(PH_NOTIFY, k);
	expect_notify(k, nv(PH_NOTIFY, k), 0, what);
	sender_done();
	expect_bg(k, 0, REG_LEN, bg, what);
	printf("%s: ok\n", what);

	snprintf(what, sizeof(what), "batch with notify on the last, to %s", kn);
	tl_fill(tgt[k].ptr, REG_LEN, bg);
	go(PH_BATCH, k);
	expect_notify(k, nv(PH_BATCH, k), (int64_t)NBLK * BLK, what);
	for (unsigned i = 0; i < NBLK; i++)
		T_ASSERT(!tl_check(tgt[k].ptr + C_OFF(i), BLK,
				   seed_of(PH_BATCH, k, i)),
			 "%s: block %u not in place at the notification", what, i);
	expect_notify(k, FENCE(k), 0, "the fence after the batch (one notification only)");
	sender_done();
	printf("%s: ok\n", what);

	snprintf(what, sizeof(what), "failed transfers with notify to %s", kn);
	tl_fill(tgt[k].ptr, REG_LEN, bg);
	go(PH_FAIL, k);
	expect_notify(k, FENCE(k), 0, "the fence after failures (no notification)");
	sender_done();
	/* Only the failed batch's first entry moved, before its error. */
	T_ASSERT(!tl_check(tgt[k].ptr + D_OFF, BLK, seed_of(PH_FAIL, k, 0)),
		 "%s: the failed batch's first entry did not land", what);
	expect_bg(k, 0, D_OFF, bg, what);
	expect_bg(k, D_OFF + BLK, REG_LEN - D_OFF - BLK, bg, what);
	printf("%s: none: ok\n", what);

	snprintf(what, sizeof(what), "read with notify from %s", kn);
	tl_fill(tgt[k].ptr + E_OFF, E_LEN, seed_of(PH_READ, k, 0));
	go(PH_READ, k);
	expect_notify(k, nv(PH_READ, k), E_LEN, what);
	sender_done();
	T_ASSERT(!tl_check(tgt[k].ptr + E_OFF, E_LEN, seed_of(PH_READ, k, 0)),
		 "%s: the source changed", what);
	printf("%s: ok\n", what);
}

/*
 * The owner's own NOTIFY to its region k: its completion and then the
 * notification.  Whatever xferd held for the owner before it came
 * first, so a fence read means nothing else is waiting.
 */
static void owner_fence(struct xfer_ctx *ctx, uint64_t handle, uint64_t value)
{
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);

	T_ASSERT(sqe, "owner: no SQE");
	xfer_prep_notify(sqe, handle, value, 0xfe0ce);
	T_ASSERT(xfer_submit(ctx) == 1, "fence submit");
	struct xfer_cqe c = tl_wait(ctx);
	T_ASSERT(!(c.flags & XFER_CQE_F_NOTIFY) && c.user_data == 0xfe0ce &&
		 c.result == 0, "fence completion: flags %u user_data %#llx "
		 "result %lld", c.flags, (unsigned long long)c.user_data,
		 (long long)c.result);
	c = tl_wait(ctx);
	T_ASSERT((c.flags & XFER_CQE_F_NOTIFY) && c.user_data == value &&
		 c.handle == handle, "after the fence's completion: %#llx, "
		 "want the fence %#llx", (unsigned long long)c.user_data,
		 (unsigned long long)value);
}

/* The next n CQEs are notifications for handle, values base.. in order. */
static void expect_sequence(struct xfer_ctx *ctx, uint64_t handle,
			    uint64_t base, unsigned n, const char *what)
{
	for (unsigned i = 0; i < n; i++) {
		struct xfer_cqe c = tl_wait(ctx);
		T_ASSERT((c.flags & XFER_CQE_F_NOTIFY) &&
			 c.user_data == base + i && c.handle == handle &&
			 c.result == 0,
			 "%s: CQE %u of %u is %#llx (flags %u, result %lld), "
			 "want notification %#llx", what, i, n,
			 (unsigned long long)c.user_data, c.flags,
			 (long long)c.result, (unsigned long long)(base + i));
	}
}

/* Notifications past a full CQ wait in xferd: an owner that reads
 * nothing while NFLOOD arrive gets every one, in order, afterwards; the
 * sender saw each complete at once. */
static void owner_flood(void)
{
	go(PH_FLOOD, TL_HOST);
	sender_done();  /* all NFLOOD completed for the sender */
	expect_sequence(octx, tgt[TL_HOST].handle, nv(PH_FLOOD, TL_HOST),
			NFLOOD, "flood");
	owner_fence(octx, tgt[TL_HOST].handle, FENCE(TL_HOST));
	T_ASSERT(xfer_cq_overflow(octx) == 0, "overflow %u",
		 xfer_cq_overflow(octx));
	/* Once drained, notifications flow as before. */
	go(PH_NOTIFY, TL_HOST);
	expect_notify(TL_HOST, nv(PH_NOTIFY, TL_HOST), 0, "notify after the flood");
	sender_done();
	printf("flood of %u notifications, owner not reading: all delivered "
	       "in order: ok\n", NFLOOD);
}

/* --- a private xferd with a small notify_queue_max --- */

#define BOUND_SQ    8u    /* the owner's CQ: 16 */
#define BOUND_MAX   100u  /* notify_queue_max */
#define BOUND_HELD  (2 * BOUND_SQ + BOUND_MAX)  /* accepted unread */
#define BOUND_EXTRA 40u   /* refused */
#define BOUND_BASE  0xb0000ull
#define GONE_N      BOUND_HELD  /* sent to an owner that then goes */
#define W_OFF       8192u
#define W_LEN       4096u

/* Send n NOTIFYs of values base.. to rh, several in flight; returns how
 * many completed with 0 before the first that did not, and checks that
 * every one after it completed with -ENOBUFS. */
static unsigned send_run(struct xfer_ctx *ctx, uint64_t rh, uint64_t base,
			 unsigned n)
{
	unsigned sent = 0, done = 0, ok = 0;

	while (done < n) {
		struct xfer_sqe *sqe;
		while (sent < n && (sqe = xfer_get_sqe(ctx))) {
			xfer_prep_notify(sqe, rh, base + sent, sent);
			sent++;
		}
		T_ASSERT(xfer_submit(ctx) >= 0, "submit");
		struct xfer_cqe c = tl_wait(ctx);
		T_ASSERT(c.user_data == done, "completion %llu, want %u",
			 (unsigned long long)c.user_data, done);
		if (c.result == 0 && ok == done)
			ok++;
		else
			T_ASSERT(c.result == -ENOBUFS, "notify %u: %lld (%s) after "
				 "%u accepted", done, (long long)c.result,
				 xfer_strerror((int)c.result), ok);
		done++;
	}
	return ok;
}

/* The sender on the private xferd: the bound, then the owner going. */
static void bound_sender(const char *socket, int in, int out)
{
	uint8_t tok[2][XFER_TOKEN_MAX];
	size_t tok_len[2];
	struct xfer_ctx *ctx;
	struct xfer_remote *rem[2];
	struct tl_buf src;
	uint8_t ok = 1;

	for (unsigned k = 0; k < 2; k++)
		tok_len[k] = tl_recv_blob(in, tok[k], sizeof(tok[k]));
	T_OK(xfer_open(socket, &ctx));
	tl_buf_alloc(ctx, TL_HOST, W_LEN, &src);
	for (unsigned k = 0; k < 2; k++)
		T_OK(xfer_import(ctx, tok[k], tok_len[k], &rem[k]));
	uint64_t rh = xfer_remote_handle(rem[0]);

	/* The owner reads nothing: its CQ, then BOUND_MAX held, then
	 * -ENOBUFS for every one more. */
	unsigned accepted = send_run(ctx, rh, BOUND_BASE,
				     BOUND_HELD + BOUND_EXTRA);
	T_ASSERT(accepted == BOUND_HELD, "accepted %u, want %u (CQ %u + "
		 "notify_queue_max %u)", accepted, BOUND_HELD, 2 * BOUND_SQ,
		 BOUND_MAX);
	/* A write with notify past the bound: its data lands, its
	 * notification is refused, and the sender is told so. */
	tl_fill(src.ptr, W_LEN, 0x3b0f);
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);
	xfer_prep_write(sqe, src.handle, 0, rh, W_OFF, W_LEN, 7777);
	xfer_sqe_set_notify(sqe, BOUND_BASE + 9999);
	struct xfer_cqe c = tl_submit_wait(ctx);
	T_ASSERT(c.user_data == 7777 && c.result == -ENOBUFS,
		 "write with notify past the bound: %lld (%s)",
		 (long long)c.result, xfer_strerror((int)c.result));
	tl_write_full(out, &ok, 1);

	/* The second owner goes away with GONE_N - CQ held for it. */
	T_ASSERT(send_run(ctx, xfer_remote_handle(rem[1]), 0x90000, GONE_N) ==
		 GONE_N, "notifications to the second owner refused");
	tl_write_full(out, &ok, 1);
	tl_read_full(in, &ok, 1);  /* it has gone */
	/* Nothing of that reaches this sender; its context works on. */
	struct xfer_cqe *stray;
	T_ASSERT(xfer_peek_cqe(ctx, &stray) == -EAGAIN, "sender: a stray CQE");
	T_ASSERT(send_run(ctx, rh, BOUND_BASE + BOUND_HELD, 1) == 1,
		 "notify after the other owner went");
	tl_write_full(out, &ok, 1);
	tl_buf_free(ctx, &src);
	xfer_close(ctx);
}

static void owner_bound(void)
{
	struct tl_daemon xd;
	char sq[32], max[32];
	snprintf(sq, sizeof(sq), "sq_entries=%u", BOUND_SQ);
	snprintf(max, sizeof(max), "notify_queue_max=%u", BOUND_MAX);
	const char *args[] = { sq, max, NULL };
	int to[2], from[2];
	uint8_t tok[XFER_TOKEN_MAX], ok;
	struct xfer_ctx *own, *gone;
	struct tl_buf b, g;

	tl_daemon_start(&xd, args);
	T_ASSERT(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0,
		 "pipe");
	pid_t pid = tl_fork();
	if (pid == 0) {
		close(to[1]);
		close(from[0]);
		bound_sender(xd.socket, to[0], from[1]);
		exit(0);
	}
	close(to[0]);
	close(from[1]);
	T_OK(xfer_open(xd.socket, &own));
	T_OK(xfer_open(xd.socket, &gone));
	tl_buf_alloc(own, TL_HOST, 2 * W_OFF, &b);
	tl_buf_alloc(gone, TL_HOST, BLK, &g);
	memset(b.ptr, 0, b.len);
	tl_send_blob(to[1], tok, tl_export(&b, tok));
	tl_send_blob(to[1], tok, tl_export(&g, tok));

	tl_read_full(from[0], &ok, 1);  /* the sender met the bound */
	T_ASSERT(!tl_check(b.ptr + W_OFF, W_LEN, 0x3b0f),
		 "the refused notification's write did not land");
	expect_sequence(own, b.handle, BOUND_BASE, BOUND_HELD, "bounded");
	owner_fence(own, b.handle, 0xfe0ce1);
	printf("notify_queue_max %u: %u accepted in order, %u refused with "
	       "ENOBUFS, data of a refused write landed: ok\n", BOUND_MAX,
	       BOUND_HELD, BOUND_EXTRA + 1);

	/* An owner that goes with notifications held. */
	tl_read_full(from[0], &ok, 1);
	T_ASSERT(xfer_cq_overflow(gone) == 0, "overflow before closing");
	tl_buf_free(gone, &g);
	xfer_close(gone);
	tl_write_full(to[1], &ok, 1);
	tl_read_full(from[0], &ok, 1);
	/* The sender's notification after that reached this owner. */
	expect_sequence(own, b.handle, BOUND_BASE + BOUND_HELD, 1,
			"after the other owner went");
	T_ASSERT(tl_child_wait(pid, 30000) == 0, "bound sender failed");
	close(to[1]);
	close(from[0]);
	tl_buf_free(own, &b);
	xfer_close(own);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not exit cleanly");
	printf("owner gone with %u notifications held: xferd and the sender "
	       "fine: ok\n", GONE_N - 2 * BOUND_SQ);
}

/* A client notifying its own region gets its completion and the
 * notification. */
static void owner_self(void)
{
	struct tl_buf src;
	struct xfer_sqe *sqe = xfer_get_sqe(octx);
	bool completion = false, notification = false;

	tl_buf_alloc(octx, TL_HOST, BLK, &src);
	tl_fill(src.ptr, BLK, 0x5e1f);
	xfer_prep_write(sqe, src.handle, 0, tgt[TL_MALLOC].handle, 0, BLK, 71);
	xfer_sqe_set_notify(sqe, 72);
	T_ASSERT(xfer_submit(octx) == 1, "submit");
	for (int i = 0; i < 2; i++) {
		struct xfer_cqe c = tl_wait(octx);
		if (c.flags & XFER_CQE_F_NOTIFY) {
			T_ASSERT(c.user_data == 72 && c.result == BLK &&
				 c.handle == tgt[TL_MALLOC].handle,
				 "self notification %llu/%lld",
				 (unsigned long long)c.user_data,
				 (long long)c.result);
			T_ASSERT(!notification, "two self notifications");
			notification = true;
		} else {
			T_ASSERT(c.user_data == 71 && c.result == BLK,
				 "self completion %llu/%lld",
				 (unsigned long long)c.user_data,
				 (long long)c.result);
			T_ASSERT(!completion, "two self completions");
			completion = true;
		}
	}
	T_ASSERT(!tl_check(tgt[TL_MALLOC].ptr, BLK, 0x5e1f), "self write bytes");
	tl_buf_free(octx, &src);
	printf("notify to its own region: completion and notification: ok\n");
}

/* --- messages and sender names --- */

#define MSG_NAME "sender-A/notify.c"
#define NHELD    3000u  /* more than a default ring's CQ (2048) */

/* The next CQE is a notification for handle with value, bytes, message
 * (want, want_len) and the sender name want_name. */
static void expect_msg(struct xfer_ctx *ctx, uint64_t handle, uint64_t value,
		       int64_t bytes, const void *want, size_t want_len,
		       const char *want_name, const char *what)
{
	struct xfer_cqe *c;
	char name[XFER_SENDER_NAME_MAX + 1];
	size_t len;

	T_OK(xfer_wait_cqe(ctx, &c, 10000));
	T_ASSERT((c->flags & XFER_CQE_F_NOTIFY) && c->user_data == value &&
		 c->handle == handle && c->result == bytes,
		 "%s: CQE %#llx flags %u result %lld, want notification %#llx",
		 what, (unsigned long long)c->user_data, c->flags,
		 (long long)c->result, (unsigned long long)value);
	const void *m = xfer_cqe_message(ctx, c, &len);
	T_ASSERT(len == want_len && (!len || (m && !memcmp(m, want, len))),
		 "%s: message of %zu bytes, want %zu", what, len, want_len);
	int n = xfer_cqe_sender_name(ctx, c, name, sizeof(name));
	T_ASSERT(n == (int)strlen(want_name) && !strcmp(name, want_name),
		 "%s: sender name '%s' (%d), want '%s'", what, n > 0 ? name : "",
		 n, want_name);
	xfer_cq_advance(ctx, 1);
}

static void msg_fill(uint8_t *m, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		m[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

/* One SQE of s: prepared by prep, with a message of len bytes. */
static struct xfer_cqe send_msg(struct xfer_ctx *s, struct xfer_sqe *tmpl,
				const uint8_t *m, size_t len)
{
	struct xfer_sqe *sqe = xfer_get_sqe(s);

	T_ASSERT(sqe, "no SQE");
	*sqe = *tmpl;
	T_OK(xfer_sqe_set_message(s, sqe, m, len));
	return tl_submit_wait(s);
}

static void owner_messages(void)
{
	struct xfer_ctx *s, *anon, *bad;
	struct tl_buf src, dst;
	uint8_t tok[XFER_TOKEN_MAX], m[XFER_NOTIFY_MSG_MAX + 1];
	struct xfer_remote *rem;
	struct xfer_sqe t;
	struct xfer_cqe c;
	char longname[XFER_SENDER_NAME_MAX + 2];

	/* Names xferd does not take are refused at open. */
	T_ASSERT(xfer_open_named(NULL, "tab\there", &bad) == -EINVAL,
		 "a name with a control character accepted");
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	T_ASSERT(xfer_open_named(NULL, longname, &bad) == -EINVAL,
		 "a name of %u bytes accepted", XFER_SENDER_NAME_MAX + 1);
	longname[XFER_SENDER_NAME_MAX] = 0;
	T_OK(xfer_open_named(NULL, longname, &bad));
	xfer_close(bad);

	T_OK(xfer_open_named(NULL, MSG_NAME, &s));
	tl_buf_alloc(octx, TL_HOST, REG_LEN, &dst);
	tl_buf_alloc(s, TL_HOST, REG_LEN, &src);
	T_OK(xfer_import(s, tok, tl_export(&dst, tok), &rem));
	uint64_t rh = xfer_remote_handle(rem);

	/* NOTIFY with 0, 1 and the bound. */
	const size_t lens[] = { 0, 1, XFER_NOTIFY_MSG_MAX };
	for (unsigned i = 0; i < 3; i++) {
		msg_fill(m, lens[i], i);
		xfer_prep_notify(&t, rh, 0x3e550 + i, i);
		c = send_msg(s, &t, m, lens[i]);
		T_ASSERT(c.result == 0, "notify with %zu bytes: %lld", lens[i],
			 (long long)c.result);
		expect_msg(octx, dst.handle, 0x3e550 + i, 0, m, lens[i],
			   MSG_NAME, "NOTIFY with a message");
	}
	/* A write with notify and a message: bytes and message. */
	msg_fill(m, 57, 9);
	tl_fill(src.ptr, A_LEN, 0xa11);
	xfer_prep_write(&t, src.handle, 0, rh, A_OFF, A_LEN, 10);
	xfer_sqe_set_notify(&t, 0x3e560);
	c = send_msg(s, &t, m, 57);
	T_ASSERT(c.result == A_LEN, "write with a message: %lld",
		 (long long)c.result);
	T_ASSERT(!tl_check((uint8_t *)dst.ptr + A_OFF, A_LEN, 0xa11),
		 "write with a message: bytes");
	expect_msg(octx, dst.handle, 0x3e560, A_LEN, m, 57, MSG_NAME,
		   "WRITE with a message");
	/* A read with notify and a message. */
	msg_fill(m, 200, 11);
	xfer_prep_read(&t, src.handle, 0, rh, A_OFF, E_LEN, 11);
	xfer_sqe_set_notify(&t, 0x3e561);
	memset(src.ptr, 0, E_LEN);
	c = send_msg(s, &t, m, 200);
	T_ASSERT(c.result == E_LEN &&
		 !memcmp(src.ptr, (uint8_t *)dst.ptr + A_OFF, E_LEN),
		 "read with a message: %lld, or bytes differ",
		 (long long)c.result);
	expect_msg(octx, dst.handle, 0x3e561, E_LEN, m, 200, MSG_NAME,
		   "READ with a message");
	/* A batch: the message rides on its last entry. */
	struct xfer_sqe *sqe = xfer_get_sqe(s);
	xfer_prep_write(sqe, src.handle, 0, rh, 0, BLK, 12);
	xfer_sqe_set_link(sqe);
	sqe = xfer_get_sqe(s);
	xfer_prep_write(sqe, src.handle, BLK, rh, BLK, BLK, 13);
	xfer_sqe_set_notify(sqe, 0x3e562);
	msg_fill(m, XFER_NOTIFY_MSG_MAX, 12);
	T_OK(xfer_sqe_set_message(s, sqe, m, XFER_NOTIFY_MSG_MAX));
	c = tl_submit_wait(s);
	T_ASSERT(c.user_data == 13 && c.result == 2 * BLK, "batch: %lld",
		 (long long)c.result);
	expect_msg(octx, dst.handle, 0x3e562, 2 * BLK, m, XFER_NOTIFY_MSG_MAX,
		   MSG_NAME, "a batch with a message");
	printf("messages of 0, 1, %u bytes on NOTIFY, WRITE, READ, a batch, "
	       "with the sender's name: ok\n", XFER_NOTIFY_MSG_MAX);

	/* Past the bound: libxfer refuses; a raw msg_len of garbage is
	 * refused by xferd, which reads nothing out of the slot. */
	sqe = xfer_get_sqe(s);
	xfer_prep_notify(sqe, rh, 0x3e570, 20);
	T_ASSERT(xfer_sqe_set_message(s, sqe, m, XFER_NOTIFY_MSG_MAX + 1) ==
		 -EMSGSIZE, "a message of %u bytes accepted",
		 XFER_NOTIFY_MSG_MAX + 1);
	const uint16_t garbage[] = { XFER_NOTIFY_MSG_MAX + 1, 0x8000, 0xffff };
	for (unsigned i = 0; i < 3; i++) {
		sqe->msg_len = garbage[i];
		c = tl_submit_wait(s);
		T_ASSERT(c.user_data == 20 && c.result == -EMSGSIZE,
			 "raw msg_len %u: %lld (%s)", garbage[i],
			 (long long)c.result, xfer_strerror((int)c.result));
		sqe = xfer_get_sqe(s);
		xfer_prep_notify(sqe, rh, 0x3e570, 20);
	}
	/* A message on a descriptor that notifies nobody. */
	xfer_prep_write(sqe, src.handle, 0, rh, 0, BLK, 21);
	sqe->msg_len = 5;
	c = tl_submit_wait(s);
	T_ASSERT(c.user_data == 21 && c.result == -EINVAL,
		 "a message without a notification: %lld", (long long)c.result);
	owner_fence(octx, dst.handle, 0xfe0ce2);  /* nothing came before */
	printf("a message past %u bytes, garbage lengths, one without a "
	       "notification: refused, nothing delivered: ok\n",
	       XFER_NOTIFY_MSG_MAX);

	/* Held notifications keep their order and their messages. */
	xfer_open(NULL, &anon);
	unsigned sent = 0, done = 0;
	while (done < NHELD) {
		while (sent < NHELD && (sqe = xfer_get_sqe(s))) {
			size_t len = sent % (XFER_NOTIFY_MSG_MAX + 1);
			msg_fill(m, len, sent);
			xfer_prep_notify(sqe, rh, 0x4e1d0000ull + sent, sent);
			T_OK(xfer_sqe_set_message(s, sqe, m, len));
			sent++;
		}
		T_ASSERT(xfer_submit(s) >= 0, "submit");
		c = tl_wait(s);
		T_ASSERT(c.result == 0, "held notify %u: %lld", done,
			 (long long)c.result);
		done++;
	}
	for (unsigned i = 0; i < NHELD; i++) {
		size_t len = i % (XFER_NOTIFY_MSG_MAX + 1);
		msg_fill(m, len, i);
		expect_msg(octx, dst.handle, 0x4e1d0000ull + i, 0, m, len,
			   MSG_NAME, "held");
	}
	/* A context without a name: none (and no message: len 0). */
	struct xfer_remote *rem2;
	T_OK(xfer_import(anon, tok, tl_export(&dst, tok), &rem2));
	xfer_prep_notify(&t, xfer_remote_handle(rem2), 0x3e580, 30);
	c = send_msg(anon, &t, m, 0);
	expect_msg(octx, dst.handle, 0x3e580, 0, m, 0, "", "unnamed sender");
	xfer_unimport(anon, rem2);
	xfer_close(anon);
	printf("%u held notifications: in order, each with its message: "
	       "ok\n", NHELD);

	xfer_unimport(s, rem);
	tl_buf_free(s, &src);
	tl_buf_free(octx, &dst);
	xfer_close(s);
}

int main(void)
{
	int to[2], from[2];
	uint8_t tok[XFER_TOKEN_MAX];

	tl_socket();
	T_ASSERT(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0,
		 "pipe");
	pid_t pid = tl_fork();
	if (pid == 0) {
		close(to[1]);
		close(from[0]);
		sender_main(to[0], from[1]);
		exit(0);
	}
	close(to[0]);
	close(from[1]);
	to_sender = to[1];
	from_sender = from[0];

	octx = tl_open();
	for (unsigned k = 0; k < 2; k++) {
		tl_buf_alloc(octx, k, REG_LEN, &tgt[k]);
		tl_send_blob(to_sender, tok, tl_export(&tgt[k], tok));
	}
	owner_kind(TL_HOST);
	owner_kind(TL_MALLOC);
	owner_flood();
	owner_self();
	owner_messages();

	go(PH_QUIT, 0);
	T_ASSERT(tl_child_wait(pid, 30000) == 0, "sender failed");
	struct xfer_cqe *c;
	T_ASSERT(xfer_peek_cqe(octx, &c) == -EAGAIN, "owner: a stray CQE");
	for (unsigned k = 0; k < 2; k++)
		tl_buf_free(octx, &tgt[k]);
	xfer_close(octx);
	close(to_sender);
	close(from_sender);
	owner_bound();
	return 0;
}
