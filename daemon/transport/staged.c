/* SPDX-License-Identifier: Apache-2.0 */
/*
 * staged.c - GPU memory on the TCP link: the staged part of the TCP
 * mover (tcp_send.c, tcp_sink.c), through xferd's pinned staging chunks
 * (mem/staging.h).
 *
 * Out (a write of ours from GPU memory, or a read the peer asked of our
 * GPU memory): a stream keeps up to STAGE_AHEAD send chunks out, each
 * filled by a D2H copy on xferd's streams; its owner (the op on the send
 * queue, or the serve) takes them in order, and the frame carries the
 * chunk by reference (link_queue_ref): the chunk goes back to the
 * pool once the socket took its bytes.  An owner whose next chunk is not
 * ready yet is parked off its queue (tcp_fill never spins on it) and goes
 * back when the chunk's copy completes (tcp_unpark).
 *
 * In (a write of the peer into our GPU memory, or ReadData of ours into
 * GPU memory): payload lands in a receive chunk - recv() straight into it
 * when nothing else is buffered, as for a memfd - then an H2D copy
 * empties it.  No receive chunk free: the link stops reading (the
 * peer's bytes wait in the socket) until one comes back; it never fails
 * for it.  The write's ack and notification, and the read's completion,
 * wait for every copy of it (staged_rx).
 *
 * Lifetimes: a chunk in a copy holds its own region reference and its
 * owner's staged_rx reference (or nothing of a send stream: the stream
 * forgets it when it ends); an owner that ended early just leaves the
 * chunk to its copy, whose completion gives it back.
 *
 * Progress thread only.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/container_of.h"
#include "core/thread_stats.h"
#include "gpu/gpu.h"
#include "core/log.h"
#include "mem/region.h"
#include "transport/tcp_int.h"

#define STAGE_AHEAD 4u     /* D2H chunks out per stream, at most */

bool staged_reachable(const struct tcp_mover *tm, const struct region *r)
{
	return region_kind(r) == REGION_CUDA && tm->staging && tm->gpu;
}

/* --- out: GPU memory -> send chunks -> the link --- */

static void stage_more(struct staged_send *ss);

static void d2h_done(struct xop *op, int64_t res)
{
	struct staging_chunk *c = container_of(op, struct staging_chunk, xop);
	struct staged_send *ss = c->owner;

	c->in_copy = false;
	region_put(c->r);
	c->r = NULL;
	if (!ss) {
		staging_give(c);  /* its stream ended meanwhile */
		return;
	}
	if (res < 0 && !ss->err)
		ss->err = (int)res;
	c->ready = true;
	if (ss->parked && (ss->err || TAILQ_FIRST(&ss->chunks)->ready)) {
		ss->parked = false;
		tcp_unpark(ss, true);
	}
}

/* Fill chunk c with the stream's next bytes. */
static void start_d2h(struct staged_send *ss, struct staging_chunk *c)
{
	struct tcp_mover *tm = ss->tl->tm;
	uint64_t n = ss->len - ss->next;

	if (n > ss->frame)
		n = ss->frame;
	c->owner = ss;
	c->at = ss->next;
	c->len = (uint32_t)n;
	c->xop.len = n;
	gpu_op_of(&c->xop)->on_done = d2h_done;
	region_get(ss->r);
	c->r = ss->r;
	c->in_copy = true;
	int err = gpu_copy(tm->gpu, &c->xop, (uint64_t)(uintptr_t)c->p, -1,
			   region_gpu_ptr(ss->r) + ss->off + ss->next, region_gpu_dev(ss->r),
			   n);
	if (err) {
		c->in_copy = false;
		region_put(c->r);
		c->r = NULL;
		c->owner = NULL;
		staging_give(c);
		if (!ss->err)
			ss->err = err;
		return;
	}
	TAILQ_INSERT_TAIL(&ss->chunks, c, q);
	ss->n++;
	ss->next += n;
}

static void send_chunk_ready(struct staging_waiter *w, struct staging_chunk *c)
{
	struct staged_send *ss = container_of(w, struct staged_send, w);

	/* Maybe inside a buffer's cleanup: start the copy, fill later. */
	start_d2h(ss, c);
	if (ss->err && ss->parked) {
		ss->parked = false;
		tcp_unpark(ss, false);
		return;
	}
	stage_more(ss);
}

static void stage_more(struct staged_send *ss)
{
	struct staging_pool *sp = ss->tl->tm->staging;

	while (!ss->err && ss->n < STAGE_AHEAD && ss->next < ss->len &&
	       !ss->w.waiting) {
		struct staging_chunk *c = staging_take(sp, STAGING_SEND);
		if (!c) {
			staging_wait(sp, STAGING_SEND, &ss->w);
			return;
		}
		start_d2h(ss, c);
	}
}

struct staged_send *staged_send_new(struct tcp_link *tl, struct region *r,
				    uint64_t off, uint64_t len)
{
	struct staged_send *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return NULL;
	uint32_t frame = staging_chunk_bytes(tl->tm->staging);
	if (tl->tm->cfg.tcp_chunk && tl->tm->cfg.tcp_chunk < frame)
		frame = tl->tm->cfg.tcp_chunk;
	region_get(r);
	*ss = (struct staged_send){ .tl = tl, .r = r, .off = off, .len = len,
				    .frame = frame };
	TAILQ_INIT(&ss->chunks);
	ss->w.ready = send_chunk_ready;
	stage_more(ss);
	return ss;
}

struct staging_chunk *staged_send_next(struct staged_send *ss, int *err)
{
	struct staging_chunk *c = TAILQ_FIRST(&ss->chunks);

	*err = ss->err;
	if (ss->err)
		return NULL;
	if (!c || !c->ready) {
		ss->parked = true;
		/* Nothing out and nothing coming: ask for a chunk. */
		if (!c)
			stage_more(ss);
		return NULL;
	}
	TAILQ_REMOVE(&ss->chunks, c, q);
	ss->n--;
	c->owner = NULL;
	stage_more(ss);
	return c;
}

static void chunk_sent(const void *data, size_t len, void *arg)
{
	(void)data, (void)len;
	staging_give(arg);
}

int staged_queue_chunk(struct tcp_link *tl, struct staging_chunk *c)
{
	if (link_queue_ref(tl->l, c->p, c->len, chunk_sent, c)) {
		staging_give(c);
		return -ENOMEM;
	}
	return 0;
}

void staged_send_free(struct staged_send *ss)
{
	struct staging_chunk *c;

	if (!ss)
		return;
	staging_cancel(ss->tl->tm->staging, &ss->w);
	while ((c = TAILQ_FIRST(&ss->chunks))) {
		TAILQ_REMOVE(&ss->chunks, c, q);
		c->owner = NULL;
		if (!c->in_copy)
			staging_give(c);  /* else its copy's end does */
	}
	region_put(ss->r);
	free(ss);
}

/* --- in: the link -> receive chunks -> GPU memory --- */

struct staged_rx *staged_rx_new(struct tcp_link *tl, struct region *r)
{
	struct staged_rx *srx = calloc(1, sizeof(*srx));

	if (!srx)
		return NULL;
	region_get(r);
	srx->refs = 1;
	srx->tl = tl;
	srx->r = r;
	return srx;
}

void staged_rx_put(struct staged_rx *srx)
{
	if (!srx || --srx->refs)
		return;
	region_put(srx->r);
	free(srx);
}

static void rx_check(struct staged_rx *srx)
{
	if (srx->all_in && srx->copies == 0 && !srx->ended) {
		srx->ended = true;
		tcp_rx_complete(srx);
	}
}

void staged_rx_all_in(struct staged_rx *srx)
{
	srx->all_in = true;
	rx_check(srx);
}

static void h2d_done(struct xop *op, int64_t res)
{
	struct staging_chunk *c = container_of(op, struct staging_chunk, xop);
	struct staged_rx *srx = c->owner;

	c->in_copy = false;
	region_put(c->r);
	c->r = NULL;
	c->owner = NULL;
	/* Back first: a link stalled for a chunk may take it right away. */
	staging_give(c);
	srx->copies--;
	if (res < 0 && !srx->err)
		srx->err = (int)res;
	rx_check(srx);
	staged_rx_put(srx);
}

/* The sink's chunk is full, or the payload ended: empty it into the
 * GPU memory. */
static void flush_chunk(struct tcp_link *tl)
{
	struct rx_sink *k = &tl->sink;
	struct staging_chunk *c = k->chunk;
	struct staged_rx *srx = k->srx;

	k->chunk = NULL;
	if (!c)
		return;
	if (c->len == 0 || !srx || !k->r) {
		staging_give(c);
		return;
	}
	c->owner = srx;
	c->xop.len = c->len;
	gpu_op_of(&c->xop)->on_done = h2d_done;
	region_get(k->r);
	c->r = k->r;
	c->in_copy = true;
	int err = gpu_copy(tl->tm->gpu, &c->xop, region_gpu_ptr(k->r) + c->at,
			   region_gpu_dev(k->r), (uint64_t)(uintptr_t)c->p, -1, c->len);
	if (err) {
		c->in_copy = false;
		region_put(c->r);
		c->r = NULL;
		c->owner = NULL;
		staging_give(c);
		if (!srx->err)
			srx->err = err;
		return;
	}
	srx->refs++;
	srx->copies++;
}

static void sink_chunk_ready(struct staging_waiter *w, struct staging_chunk *c)
{
	struct tcp_link *tl = container_of(w, struct tcp_link, sink_wait);

	c->at = tl->sink.off;
	tl->sink.chunk = c;
	link_rx_resume(tl->l);
}

/* The sink has a chunk with room; false: stalled (a waiter is queued). */
static bool sink_chunk(struct tcp_link *tl)
{
	struct rx_sink *k = &tl->sink;

	if (k->chunk)
		return true;
	struct staging_chunk *c = staging_take(tl->tm->staging, STAGING_RECV);
	if (!c) {
		tl->sink_wait.ready = sink_chunk_ready;
		staging_wait(tl->tm->staging, STAGING_RECV, &tl->sink_wait);
		link_rx_stall(tl->l);
		return false;
	}
	c->at = k->off;
	k->chunk = c;
	return true;
}

size_t staged_sink_put(struct tcp_link *tl, const uint8_t *p, size_t n)
{
	struct rx_sink *k = &tl->sink;
	size_t done = 0;

	while (done < n && sink_chunk(tl)) {
		struct staging_chunk *c = k->chunk;
		size_t take = c->cap - c->len;
		if (take > n - done)
			take = n - done;
		memcpy(c->p + c->len, p + done, take);
		c->len += (uint32_t)take;
		done += take;
		k->off += take;
		k->left -= take;
		if (c->len == c->cap)
			flush_chunk(tl);
	}
	return done;
}

bool staged_sink_direct(struct tcp_link *tl, uint8_t **dst, size_t *room)
{
	struct rx_sink *k = &tl->sink;

	if (!sink_chunk(tl))
		return false;
	*dst = k->chunk->p + k->chunk->len;
	*room = k->chunk->cap - k->chunk->len;
	if (*room > k->left)
		*room = (size_t)k->left;
	return true;
}

void staged_sink_landed(struct tcp_link *tl, size_t n)
{
	struct rx_sink *k = &tl->sink;

	k->chunk->len += (uint32_t)n;
	k->off += n;
	k->left -= n;
	if (k->chunk->len == k->chunk->cap)
		flush_chunk(tl);
}

void staged_sink_flush(struct tcp_link *tl)
{
	flush_chunk(tl);
}

void staged_sink_drop(struct tcp_link *tl)
{
	struct rx_sink *k = &tl->sink;

	if (k->chunk) {
		staging_give(k->chunk);
		k->chunk = NULL;
	}
	if (link_rx_stalled(tl->l)) {
		staging_cancel(tl->tm->staging, &tl->sink_wait);
		link_rx_resume(tl->l);
	}
}
