/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_sink.c - where the payload of an incoming data frame lands, in
 * the progress thread: the session (link.c) hands the TCP mover the
 * bytes that follow a WriteChunk or ReadData header (tcp_sink_put from
 * its buffer, or recv() straight to where tcp_sink_direct says), and
 * tcp_sink_finish ends the frame: the peer's write acknowledged (and
 * its owner notified), our read ended.
 *
 * Into a memfd region the bytes land straight from the socket; into
 * CMA memory they are copied once from the session's buffer; into GPU
 * memory they go through receive chunks (staged.c), and what ends
 * waits for every H2D copy (tcp_rx_complete).
 *
 * Progress thread only; no locks.
 */
#include <errno.h>
#include <string.h>

#include "core/thread_stats.h"
#include "mem/cma.h"
#include "mem/region.h"
#include "transport/tcp_int.h"

void tcp_sink_drop(struct tcp_link *tl)
{
	struct rx_sink *k = &tl->sink;

	staged_sink_drop(tl);
	staged_rx_put(k->srx);
	k->srx = NULL;
	region_put(k->r);
	k->r = NULL;
}

bool tcp_payload(void *cl, uint64_t *left)
{
	const struct tcp_link *tl = cl;

	*left = tl->sink.left;
	return tl->sink.active;
}

void tcp_sink_start(struct tcp_link *tl, uint32_t plen, struct region *r,
		    uint64_t off, int err)
{
	struct rx_sink *k = &tl->sink;

	k->active = true;
	k->left = k->len = plen;
	k->r = r;
	k->off = off;
	k->err = err;
	stat_add(&link_stats(tl->l)->bytes_rx, plen);
}

/* Up to n bytes of payload from p. */
size_t tcp_sink_put(void *cl, const uint8_t *p, size_t n)
{
	struct tcp_link *tl = cl;
	struct rx_sink *k = &tl->sink;

	if (k->r && !k->err && k->srx)
		return staged_sink_put(tl, p, n);
	if (k->r && !k->err) {
		if (region_kind(k->r) == REGION_MEMFD) {
			memcpy(region_map_at(k->r, k->off), p, n);
		} else if (!tcp_host_reachable(k->r)) {
			k->err = -ENOTSUP;
		} else {
			int64_t put = cma_copy(k->r, true, (void *)p, k->off, n);
			if (put < 0)
				k->err = (int)put;
		}
	}
	k->off += n;
	k->left -= n;
	return n;
}

/* Asked by the session only with nothing of the payload buffered. */
bool tcp_sink_direct(void *cl, uint8_t **dst, size_t *room)
{
	struct tcp_link *tl = cl;
	struct rx_sink *k = &tl->sink;

	if (!k->active || !k->r || k->err || k->left == 0)
		return false;
	if (k->srx)
		return staged_sink_direct(tl, dst, room);
	if (region_kind(k->r) != REGION_MEMFD)
		return false;
	*dst = region_map_at(k->r, k->off);
	*room = (size_t)k->left;
	return true;
}

void tcp_sink_landed(void *cl, size_t n)
{
	struct tcp_link *tl = cl;
	struct rx_sink *k = &tl->sink;

	if (k->srx) {
		staged_sink_landed(tl, n);
		return;
	}
	k->off += n;
	k->left -= n;
}

/* Every byte of srx landed in GPU memory, or failed to. */
void tcp_rx_complete(struct staged_rx *srx)
{
	struct tcp_link *tl = srx->tl;

	if (srx->xop) {
		/* Our read: it ends now (its link is up: else it had ended). */
		struct xop *op = srx->xop;
		srx->xop = NULL;
		tcp_op(op)->rx = NULL;
		tcp_op_end(tl, op, srx->err ? srx->err : (int64_t)op->len);
		staged_rx_put(srx);  /* the read's reference */
		return;
	}
	if (!srx->listed)
		return;  /* the link went, or the peer aborted it */
	TAILQ_REMOVE(&tl->rx_writes, srx, q);
	srx->listed = false;
	if (link_alive(tl->l)) {
		int64_t result = srx->err ? srx->err : (int64_t)srx->total;
		/* Before the ack: it says whether the owner will hear. */
		if (!srx->err && srx->notify)
			result = tcp_notify_result(tl, srx->r, srx->notify_value,
					       result, &srx->notify_from);
		tcp_write_ack(tl, srx->op, result);
	}
	staged_rx_put(srx);  /* the list's */
}

/* The peer's write op into our GPU memory r: its landing state. */
struct staged_rx *tcp_rx_write_of(struct tcp_link *tl, uint64_t op,
				  struct region *r)
{
	struct staged_rx *srx;

	TAILQ_FOREACH(srx, &tl->rx_writes, q)
		if (srx->op == op)
			return srx;
	if (!(srx = staged_rx_new(tl, r)))
		return NULL;
	srx->op = op;
	srx->listed = true;
	TAILQ_INSERT_TAIL(&tl->rx_writes, srx, q);
	return srx;
}

/* The whole payload is in: acknowledge, notify, end our read. */
void tcp_sink_finish(void *cl)
{
	struct tcp_link *tl = cl;
	struct rx_sink *k = &tl->sink;

	k->active = false;
	if (k->srx) {
		/* GPU memory: the last chunk's copy starts; what ends
		 * waits for every copy (tcp_rx_complete). */
		struct staged_rx *srx = k->srx;
		staged_sink_flush(tl);
		k->srx = NULL;
		struct xop *op = k->xop;
		k->xop = NULL;
		region_put(k->r);
		k->r = NULL;
		if (k->err && !srx->err)
			srx->err = k->err;
		if (op)
			tcp_op(op)->done += k->len;
		if (k->is_write && k->last) {
			srx->total = k->total;
			srx->notify = k->notify;
			srx->notify_value = k->notify_value;
			srx->notify_from = k->notify_from;
		}
		if (k->last)
			staged_rx_all_in(srx);
		staged_rx_put(srx);  /* the sink's */
		return;
	}
	if (k->is_write) {
		if (!k->r && !k->err) {
			/* An operation that had failed before: drop silently. */
			if (k->last)
				tcp_forget_failed(tl, k->op);
		} else if (k->err) {
			tcp_write_ack(tl, k->op, k->err);
			if (!k->last && tcp_remember_failed(tl, k->op))
				link_fail(tl->l, -EPROTO, "too many failed writes");
		} else if (k->last) {
			int64_t result = (int64_t)k->total;
			if (k->notify)
				result = tcp_notify_result(tl, k->r, k->notify_value,
						       result, &k->notify_from);
			tcp_write_ack(tl, k->op, result);
		}
	} else if (k->xop) {
		struct xop *op = k->xop;
		tcp_op(op)->done += k->len;
		if (k->err)
			tcp_op_end(tl, op, k->err);  /* our client's memory went */
		else if (k->last)
			tcp_op_end(tl, op, (int64_t)op->len);
	}
	region_put(k->r);
	k->r = NULL;
	k->xop = NULL;
}
