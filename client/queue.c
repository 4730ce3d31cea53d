/* SPDX-License-Identifier: Apache-2.0 */
/*
 * queue.c - the client's half of the ring: submit and complete.
 *
 * The ordering protocol lives in common/ring.h; this file only keeps the
 * private indices and decides when to ring or sleep on a doorbell, its
 * own (xfer_wait_cqe) or an event loop's (xfer_event_fd).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "internal.h"

/*
 * The SQ doorbell is an eventfd xferd only watches; the CQ doorbell our
 * end of a datagram socket pair whose other end only xferd holds (an
 * older xferd gave an eventfd there, which the same calls serve).
 */
static void ring_doorbell(int efd)
{
	uint64_t one = 1;
	ssize_t n;

	/* EAGAIN: the counter is saturated, which only a client that wrote
	 * it so does to itself.  Any other error means xferd is gone, which
	 * the next call reports. */
	do
		n = write(efd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

/*
 * Take what xferd rang on the CQ doorbell, so that it polls quiet
 * again: a datagram per ring (an eventfd resets in one read).  Bounded:
 * xferd's send buffer holds a few; past the bound the fd stays readable
 * and the next wait returns at once, costing one spurious look at the
 * CQ.  0, or -errno of a read that failed otherwise than empty.
 */
#define CQ_DRAIN_MAX 64
static int drain_cq_doorbell(int efd)
{
	uint64_t v;

	for (int i = 0; i < CQ_DRAIN_MAX; i++)
		if (read(efd, &v, sizeof(v)) < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	return 0;
}

static bool daemon_gone(const struct xfer_ctx *ctx)
{
	return ctx->gone ||
	       (atomic_load_explicit(ctx->ring.sq_flags, memory_order_acquire) &
		XFER_SQ_DEAD);
}

XFER_EXPORT unsigned xfer_sq_space(const struct xfer_ctx *ctx)
{
	return ring_sq_space(&ctx->ring, ctx->sq_tail);
}

XFER_EXPORT struct xfer_sqe *xfer_get_sqe(struct xfer_ctx *ctx)
{
	/* Look at xferd's head (a shared cache line) only when our cached
	 * copy says the ring is full. */
	if (ctx->sq_tail - ctx->sq_head_cache >= ctx->ring.sq_entries) {
		ctx->sq_head_cache = atomic_load_explicit(ctx->ring.sq_head,
							  memory_order_acquire);
		if (ctx->sq_tail - ctx->sq_head_cache >= ctx->ring.sq_entries)
			return NULL;
	}
	/* (F): no phase in the slot until its submit stamps it.  Only a
	 * slot we stamped can hold one (an application that writes the
	 * bits itself fools itself). */
	if (ctx->ring.phase) {
		uint32_t slot = ctx->sq_tail & (ctx->ring.sq_entries - 1);
		uint64_t bit = 1ull << (slot % 64);
		if (ctx->sq_stamped[slot / 64] & bit) {
			ctx->sq_stamped[slot / 64] &= ~bit;
			ring_sqe_unstamp(&ctx->ring, ctx->sq_tail);
		}
	}
	return ring_sqe_at(&ctx->ring, ctx->sq_tail++);
}

/*
 * Where publishing must stop: at the first entry a list descriptor left
 * unfilled (SQE_OP_UNFILLED, dlist.c) and the client has not filled
 * since (again, or as anything else, a NOP say), else sq_tail.  Looked
 * for only after such a -EAGAIN (a full index area), until none is left.
 */
static uint32_t sq_filled_end(struct xfer_ctx *ctx)
{
	for (uint32_t i = ctx->sq_published; i != ctx->sq_tail; i++)
		if (ring_sqe_at(&ctx->ring, i)->opcode == SQE_OP_UNFILLED)
			return i;
	ctx->sq_unfilled = false;
	return ctx->sq_tail;
}

XFER_EXPORT int xfer_submit(struct xfer_ctx *ctx)
{
	uint32_t tail = ctx->sq_unfilled ? sq_filled_end(ctx) : ctx->sq_tail;
	uint32_t n = tail - ctx->sq_published;

	if (daemon_gone(ctx))
		return -ENOTCONN;
	if (n == 0)
		return 0;
	/* (F): the first entry stamped, with RUN when more follow (xferd
	 * then counts by sq_tail), then sq_tail as always. */
	if (ctx->ring.phase) {
		uint32_t slot = ctx->sq_published & (ctx->ring.sq_entries - 1);
		ctx->sq_stamped[slot / 64] |= 1ull << (slot % 64);
		ring_sqe_stamp(&ctx->ring, ctx->sq_published, n > 1);
	}
	ctx->sq_published = tail;
	if (ring_sq_publish(&ctx->ring, tail))
		ring_doorbell(ctx->sq_efd);
	return (int)n;
}

/*
 * A crashed xferd never sets XFER_SQ_DEAD; its socket hangs up instead.
 * Polling clients look at the socket once every this many empty peeks:
 * rarely enough to cost nothing, often enough to notice in microseconds.
 */
#define PEEKS_PER_SOCKET_CHECK 4096u

static void check_socket(struct xfer_ctx *ctx)
{
	struct pollfd pfd = { .fd = ctx->sock, .events = POLLIN };

	/* Nothing but a goodbye or the hang-up arrives unasked. */
	if (poll(&pfd, 1, 0) > 0 && pfd.revents)
		ctx->gone = true;
}

/* Is the entry at our head there?  With phase by its seq (G), the line
 * we then read; else by cq_tail (C), a line of its own. */
static bool cqe_there(const struct xfer_ctx *ctx)
{
	if (ctx->cq_by_seq)
		return ring_cqe_ready(&ctx->ring, ctx->cq_head);
	return ring_cq_avail(&ctx->ring, ctx->cq_head) != 0;
}

XFER_EXPORT int xfer_peek_cqe(struct xfer_ctx *ctx, struct xfer_cqe **cqe)
{
	if (!cqe_there(ctx)) {
		if (++ctx->empty_peeks >= PEEKS_PER_SOCKET_CHECK) {
			ctx->empty_peeks = 0;
			check_socket(ctx);
		}
		return daemon_gone(ctx) ? -ENOTCONN : -EAGAIN;
	}
	*cqe = ring_cqe_at(&ctx->ring, ctx->cq_head);
	return 0;
}

XFER_EXPORT void xfer_cq_advance(struct xfer_ctx *ctx, unsigned n)
{
	ctx->cq_head += n;
	ring_cq_release(&ctx->ring, ctx->cq_head);
	/* xferd stopped taking our SQEs because the CQ was full. */
	if (ring_cq_room_wanted(&ctx->ring))
		ring_doorbell(ctx->sq_efd);
}

XFER_EXPORT int xfer_cqe_sender(const struct xfer_ctx *ctx,
				const struct xfer_cqe *cqe,
				struct xfer_cqe_sender *out)
{
	if (!ctx || !cqe || !out)
		return -EINVAL;
	/* A CQE of this ring's array, by address: its slot names its
	 * record. */
	uintptr_t at = (uintptr_t)cqe, base = (uintptr_t)ctx->ring.cqes;
	if (at < base || (at - base) % sizeof(*cqe) ||
	    (at - base) / sizeof(*cqe) >= ctx->ring.cq_entries ||
	    !(cqe->flags & XFER_CQE_F_NOTIFY))
		return -EINVAL;
	if (!ctx->ring.senders)
		return -EOPNOTSUPP;
	/* Read after the acquire of cq_tail that found the CQE, before the
	 * caller's xfer_cq_advance() hands the slot back: (C), (D). */
	const struct xfer_cqe_sender *rec =
		ring_cq_sender_at(&ctx->ring, (uint32_t)((at - base) / sizeof(*cqe)));
	*out = *rec;
	return 0;
}

/* The CQ slot of cqe, a notification CQE of ctx's ring; -EINVAL if it
 * is none. */
static int notify_slot(const struct xfer_ctx *ctx, const struct xfer_cqe *cqe,
		       uint32_t *slot)
{
	uintptr_t at = (uintptr_t)cqe, base = (uintptr_t)ctx->ring.cqes;

	if (at < base || (at - base) % sizeof(*cqe) ||
	    (at - base) / sizeof(*cqe) >= ctx->ring.cq_entries ||
	    !(cqe->flags & XFER_CQE_F_NOTIFY))
		return -EINVAL;
	*slot = (uint32_t)((at - base) / sizeof(*cqe));
	return 0;
}

XFER_EXPORT const void *xfer_cqe_message(const struct xfer_ctx *ctx,
					 const struct xfer_cqe *cqe,
					 size_t *len)
{
	uint32_t slot;

	if (len)
		*len = 0;
	if (!ctx || !cqe || !len || notify_slot(ctx, cqe, &slot) ||
	    !ctx->ring.cq_msgs || !(cqe->flags & XFER_CQE_F_MSG))
		return NULL;
	/* Read like the sender record: (C), (D).  The length is xferd's
	 * (bounded when it wrote it); bounded again, the ring is shared. */
	const struct xfer_cqe_message *rec = ring_cq_msg_at(&ctx->ring, slot);
	size_t n = rec->len;
	if (n > XFER_NOTIFY_MSG_MAX)
		n = XFER_NOTIFY_MSG_MAX;
	*len = n;
	return rec->data;
}

XFER_EXPORT int xfer_cqe_sender_name(const struct xfer_ctx *ctx,
				     const struct xfer_cqe *cqe, char *buf,
				     size_t size)
{
	uint32_t slot;

	if (!ctx || !cqe || (!buf && size) || notify_slot(ctx, cqe, &slot))
		return -EINVAL;
	if (!ctx->ring.cq_msgs)
		return -EOPNOTSUPP;
	const struct xfer_cqe_message *rec = ring_cq_msg_at(&ctx->ring, slot);
	/* No record written for this one: no name. */
	size_t n = cqe->flags & XFER_CQE_F_MSG ? rec->name_len : 0;
	if (n > XFER_SENDER_NAME_MAX)
		n = XFER_SENDER_NAME_MAX;
	if (size) {
		size_t c = n < size - 1 ? n : size - 1;
		memcpy(buf, rec->name, c);
		buf[c] = '\0';
	}
	return (int)n;
}

XFER_EXPORT int xfer_sqe_set_message(struct xfer_ctx *ctx,
				     struct xfer_sqe *sqe, const void *msg,
				     size_t len)
{
	if (!ctx || !sqe || (!msg && len))
		return -EINVAL;
	/* An SQE of this ring's array, by address: its slot names its
	 * message's. */
	uintptr_t at = (uintptr_t)sqe, base = (uintptr_t)ctx->ring.sqes;
	if (at < base || (at - base) % sizeof(*sqe) ||
	    (at - base) / sizeof(*sqe) >= ctx->ring.sq_entries)
		return -EINVAL;
	if (len > XFER_NOTIFY_MSG_MAX)
		return -EMSGSIZE;
	if (!ctx->ring.sq_msgs)
		return len ? -EOPNOTSUPP : 0;
	uint8_t *slot = ring_sq_msg_at(&ctx->ring,
				       (uint32_t)((at - base) / sizeof(*sqe)));
	if (len)
		memcpy(slot, msg, len);
	/* Published with the SQE by xfer_submit's release of sq_tail (A). */
	sqe->msg_len = (uint16_t)len;
	return 0;
}

XFER_EXPORT uint32_t xfer_cq_overflow(const struct xfer_ctx *ctx)
{
	return atomic_load_explicit(ctx->ring.cq_overflow, memory_order_relaxed);
}

XFER_EXPORT void xfer_set_wait_spin(struct xfer_ctx *ctx, unsigned usec)
{
	ctx->spin_us = usec;
}

/* Sleep until the CQ doorbell, the socket (goodbye, EOF) or the deadline. */
static int sleep_on_cq(struct xfer_ctx *ctx, int timeout_ms)
{
	struct pollfd pfd[2] = {
		{ .fd = ctx->cq_efd, .events = POLLIN },
		{ .fd = ctx->sock, .events = POLLIN },
	};
	int n = poll(pfd, 2, timeout_ms);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	if (pfd[0].revents & POLLIN) {
		int err = drain_cq_doorbell(ctx->cq_efd);
		if (err)
			return err;
	}
	/* Nothing but a goodbye (or EOF) arrives unasked on the socket. */
	if (pfd[1].revents)
		ctx->gone = true;
	return n == 0 ? -ETIME : 0;
}

XFER_EXPORT int xfer_wait_cqe(struct xfer_ctx *ctx, struct xfer_cqe **cqe,
			      int timeout_ms)
{
	uint64_t start = now_ns();
	uint64_t spin_end = start + 1000ull * ctx->spin_us;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
				: start + 1000000ull * (uint64_t)timeout_ms;

	for (;;) {
		int rc = xfer_peek_cqe(ctx, cqe);
		if (rc != -EAGAIN)
			return rc;
		uint64_t now = now_ns();
		if (now >= deadline)
			return -ETIME;
		if (now < spin_end)
			continue;
		/* (E) in common/ring.h: flag, then one more look. */
		ring_flag_set(ctx->ring.cq_flags, XFER_CQ_NEED_WAKEUP);
		rc = xfer_peek_cqe(ctx, cqe);
		if (rc == -EAGAIN) {
			int left = deadline == UINT64_MAX
				? -1 : (int)((deadline - now + 999999) / 1000000);
			rc = sleep_on_cq(ctx, left);
			if (rc == 0 || rc == -ETIME)
				rc = xfer_peek_cqe(ctx, cqe);
		}
		ring_flag_clear(ctx->ring.cq_flags, XFER_CQ_NEED_WAKEUP);
		if (rc != -EAGAIN)
			return rc;
	}
}

/*
 * The event-loop doorbell: one epoll set holding the CQ doorbell (xferd
 * rings it after publishing CQEs while XFER_CQ_NEED_WAKEUP is set, and
 * when it drops this client) and the socket (readable on a goodbye, or
 * when xferd died without one), so that a caller's loop needs one fd.
 */
static int event_set_create(struct xfer_ctx *ctx)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return -errno;
	/* xferd made our end non-blocking; be sure of it, since the reset
	 * below must never block (the flag lives in our file description:
	 * xferd's end has its own). */
	int fl = fcntl(ctx->cq_efd, F_GETFL);
	if (fl < 0 || fcntl(ctx->cq_efd, F_SETFL, fl | O_NONBLOCK) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, ctx->cq_efd, &ev) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, ctx->sock, &ev)) {
		int err = -errno;
		close(ep);
		return err;
	}
	ctx->event_fd = ep;
	return 0;
}

XFER_EXPORT int xfer_event_fd(struct xfer_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	if (ctx->event_fd < 0) {
		int err = event_set_create(ctx);
		if (err)
			return err;
	}
	/* Reset: whatever the doorbell announced so far, the caller is
	 * about to find in the CQ, which it checks after this call. */
	int err = drain_cq_doorbell(ctx->cq_efd);
	if (err)
		return err;
	/* A dead xferd leaves the socket readable for good: notice it now,
	 * so that the caller's check reports -ENOTCONN instead of the loop
	 * waking again and again. */
	check_socket(ctx);
	/* (E) in common/ring.h: flag, full fence, then the caller's check of
	 * the CQ; xferd publishes, fences and reads the flag.  A CQE
	 * published before the flag is seen by the check, one after it
	 * rings the doorbell. */
	ring_flag_set(ctx->ring.cq_flags, XFER_CQ_NEED_WAKEUP);
	return ctx->event_fd;
}
