/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tcp_staged.c - GPU memory on the TCP link (CQE path tcp-staged): the
 * TCP mover's ends of the staging pipeline (stage/pipeline.h), paired
 * with the GPU copy engine's stages (gpu/stage.h).
 *
 * Out (a write of ours from GPU memory, or a read the peer asked of our
 * GPU memory), struct staged_send: gpu_stage_d2h fills send chunks of
 * one frame each, up to tcp_stage_ahead of them in a copy or ready, and the
 * link is the drain: its owner (the op on the send queue, or the serve)
 * pulls the next chunk, in stream order, when the socket has room, and
 * the frame carries the chunk by reference (link_queue_ref); the chunk
 * goes back to the pool once the socket took its bytes.  An owner whose
 * next chunk is not ready is parked off its queue (tcp_fill never spins
 * on it) and goes back on the pipeline's wake (send_wake).
 *
 * In (a write of the peer into our GPU memory, or ReadData of ours into
 * GPU memory), struct staged_rx: the link is the fill: payload lands in
 * a receive chunk - recv() straight into it when nothing else is
 * buffered, as for a memfd - and gpu_stage_h2d empties it.  No receive
 * chunk free: the link stops reading (the peer's bytes wait in the
 * socket) until the pipeline's wake; it never fails for it.  The write's
 * ack and notification, and the read's completion, wait for its last
 * frame and the pipeline's done (every H2D copy over).
 *
 * Lifetimes: the pipeline's one rule.  Every chunk holds a reference to
 * the GPU region (cfg.hold) from when it is taken until it is back in
 * the pool; an owner that ends early (cancel, deadline, client death, a
 * failed link, the peer's Abort) destroys its pipeline, and its chunks
 * in a GPU copy finish on their own, those queued on the socket go back
 * when it took them (or the link is freed).
 *
 * Where the time goes (the staging pool's clocks, xferctl stats and
 * /metrics): the pipelines time their D2H and H2D copies, and here the
 * link's own waits are timed: an owner parked for its next send chunk
 * (the copies do not keep up), and a link that stopped reading for want
 * of a receive chunk (the H2D copies do not).
 *
 * Progress thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "mem/region.h"
#include "transport/tcp_int.h"

bool staged_reachable(const struct tcp_mover *tm, const struct region *r)
{
	return region_kind(r) == REGION_CUDA && tm->staging && tm->gpu;
}

/* --- out: GPU memory -> send chunks -> the link --- */

/* The parked owner's next chunk is ready, or the stream failed. */
static void send_wake(void *arg)
{
	struct staged_send *ss = arg;

	if (!ss->parked)
		return;
	ss->parked = false;
	staging_clock_add(ss->tl->tm->staging, STAGING_CLOCK_SEND_IDLE,
			  now_ns() - ss->parked_at);
	/*
	 * A chunk turns ready only when its D2H copy ends (the GPU mover's
	 * poll, nothing of the link on the stack): frames go now, as the
	 * copy engine's latency is the stream's.  A failure may come from
	 * inside a give-back (a buffer's cleanup, another stream ending):
	 * the owner goes back and is filled from the event loop.
	 */
	tcp_unpark(ss, pipeline_error(ss->pl) == 0);
}

struct staged_send *staged_send_new(struct tcp_link *tl, struct region *r,
				    uint64_t off, uint64_t len)
{
	struct tcp_mover *tm = tl->tm;
	struct staged_send *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return NULL;
	ss->tl = tl;
	ss->gpu = (struct gpu_stage){
		.g = tm->gpu,
		.addr = region_gpu_ptr(r) + off,
		.dev = region_gpu_dev(r),
	};
	const struct pipeline_cfg cfg = {
		.pool = tm->staging,
		.half = STAGING_SEND,
		.len = len,
		/* One chunk a frame: tcp_chunk, or the pool's if smaller
		 * (0 or larger: the pipeline takes the pool's). */
		.chunk = tm->cfg.tcp_chunk,
		/* Copies in flight ahead of the socket (tcp_stage_ahead):
		 * enough to hide the copy engine's latency behind the link. */
		.ahead = tm->cfg.stage_ahead ? tm->cfg.stage_ahead : 4,
		.ordered = true,   /* frames go in stream order */
		.fill = &gpu_stage_d2h,
		.fill_arg = &ss->gpu,
		.fill_clock = STAGING_CLOCK_D2H,
		.hold = { r },
		.wake = send_wake,
		.arg = ss,
	};
	if (!(ss->pl = pipeline_create(&cfg))) {
		free(ss);
		return NULL;
	}
	/* Calls nobody back: a first copy that failed shows at the first
	 * staged_send_next. */
	pipeline_start(ss->pl);
	return ss;
}

struct stage_chunk *staged_send_next(struct staged_send *ss, int *err)
{
	struct stage_chunk *c;
	int rc = pipeline_pull(ss->pl, &c);

	*err = rc < 0 ? rc : 0;
	if (rc == 1)
		return c;
	if (rc == 0 && !ss->parked) {
		ss->parked = true;  /* send_wake comes */
		ss->parked_at = now_ns();
	}
	return NULL;
}

/* The socket took the chunk's bytes (or the link is gone): maybe inside
 * the output buffer's cleanup, so the pool's next waiter must not fill
 * there (send_wake defers a failure; a ready chunk never comes here). */
static void chunk_sent(const void *data, size_t len, void *arg)
{
	(void)data, (void)len;
	pipeline_chunk_release(arg);
}

int staged_queue_chunk(struct tcp_link *tl, struct stage_chunk *c)
{
	if (link_queue_ref(tl->l, c->buf, c->len, chunk_sent, c)) {
		pipeline_chunk_release(c);
		return -ENOMEM;
	}
	return 0;
}

void staged_send_free(struct staged_send *ss)
{
	if (!ss)
		return;
	/* Chunks in a D2H copy go back when it ends, pulled ones when the
	 * socket took them. */
	pipeline_destroy(ss->pl);
	free(ss);
}

/* --- in: the link -> receive chunks -> GPU memory --- */

static void rx_check(struct staged_rx *srx)
{
	if (srx->all_in && srx->landed && !srx->ended) {
		srx->ended = true;
		tcp_rx_complete(srx);
	}
}

/*
 * Every chunk pushed so far went through its H2D copy (the stream had
 * all its bytes), or the stream failed and its chunks came back: from
 * the GPU mover's poll, or inside the sink's push.  The end still waits
 * for the last frame (all_in), so that a write is acknowledged once.
 */
static void rx_done(void *arg, int64_t result)
{
	struct staged_rx *srx = arg;

	srx->landed = true;
	if (result < 0 && !srx->err)
		srx->err = (int)result;
	rx_check(srx);  /* may free srx (its last reference) */
}

/* A receive chunk is free again (or the stream failed): read on.  May be
 * inside a give-back: resuming only arms the link's read event. */
static void rx_wake(void *arg)
{
	struct staged_rx *srx = arg;
	struct tcp_link *tl = srx->tl;

	if (srx->stalled_at) {
		if (tl)
			staging_clock_add(tl->tm->staging,
					  STAGING_CLOCK_RECV_STALL,
					  now_ns() - srx->stalled_at);
		srx->stalled_at = 0;
	}
	if (tl && tl->sink.srx == srx)
		link_rx_resume(tl->l);
}

struct staged_rx *staged_rx_new(struct tcp_link *tl, struct region *r)
{
	struct tcp_mover *tm = tl->tm;
	struct staged_rx *srx = calloc(1, sizeof(*srx));

	if (!srx)
		return NULL;
	srx->refs = 1;
	srx->tl = tl;
	srx->r = r;
	/* Chunks carry region offsets (c->at): byte 0 is the region's. */
	srx->gpu = (struct gpu_stage){
		.g = tm->gpu,
		.addr = region_gpu_ptr(r),
		.dev = region_gpu_dev(r),
	};
	const struct pipeline_cfg cfg = {
		.pool = tm->staging,
		.half = STAGING_RECV,
		.len = PIPELINE_LEN_OPEN,  /* it ends with its last frame */
		.drain = &gpu_stage_h2d,
		.drain_arg = &srx->gpu,
		.drain_clock = STAGING_CLOCK_H2D,
		.hold = { r },
		.done = rx_done,
		.wake = rx_wake,
		.arg = srx,
	};
	if (!(srx->pl = pipeline_create(&cfg))) {
		free(srx);
		return NULL;
	}
	region_get(r);
	pipeline_start(srx->pl);  /* nothing pushed: nothing ends yet */
	return srx;
}

void staged_rx_put(struct staged_rx *srx)
{
	if (!srx || --srx->refs)
		return;
	/* Chunks in an H2D copy finish on their own (they hold r). */
	pipeline_destroy(srx->pl);
	region_put(srx->r);
	free(srx);
}

void staged_rx_all_in(struct staged_rx *srx)
{
	srx->all_in = true;
	pipeline_push_end(srx->pl);  /* rx_done, now or once copied */
	rx_check(srx);               /* it had failed and ended before */
}

/* The sink's receive chunk is full, or the payload ended: its H2D copy
 * starts (an empty one just goes back). */
static void flush_chunk(struct tcp_link *tl)
{
	struct stage_chunk *c = tl->sink.chunk;

	tl->sink.chunk = NULL;
	if (c)
		pipeline_push_filled(c, 0);
}

/* The sink's receive chunk, a new one when it has none: 1; 0 none free
 * (the link stalls until rx_wake); -errno the stream failed. */
static int sink_chunk(struct tcp_link *tl)
{
	struct rx_sink *k = &tl->sink;
	struct stage_chunk *c;

	if (k->chunk)
		return 1;
	int rc = pipeline_push_take(k->srx->pl, &c);
	if (rc == 0) {
		if (!k->srx->stalled_at)
			k->srx->stalled_at = now_ns();
		link_rx_stall(tl->l);
		return 0;
	}
	if (rc < 0)
		return rc;
	c->at = k->off;  /* where its bytes go in the region */
	k->chunk = c;
	return 1;
}

size_t staged_sink_put(struct tcp_link *tl, const uint8_t *p, size_t n)
{
	struct rx_sink *k = &tl->sink;
	size_t done = 0;

	while (done < n) {
		int rc = sink_chunk(tl);
		if (rc == 0)
			break;  /* stalled: the rest waits in the buffer */
		if (rc < 0) {
			/* The stream failed: the rest of it is dropped, and
			 * its end reports why. */
			k->err = rc;
			k->off += n - done;
			k->left -= n - done;
			return n;
		}
		struct stage_chunk *c = k->chunk;
		size_t take = c->cap - c->len;
		if (take > n - done)
			take = n - done;
		memcpy(c->buf + c->len, p + done, take);
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
	int rc = sink_chunk(tl);

	if (rc < 0)
		k->err = rc;  /* the bytes go to the buffer and are dropped */
	if (rc != 1)
		return false;
	*dst = k->chunk->buf + k->chunk->len;
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
	struct stage_chunk *c = tl->sink.chunk;

	if (c) {
		tl->sink.chunk = NULL;
		c->len = 0;  /* its bytes are not landed: it just goes back */
		pipeline_push_filled(c, 0);
	}
	/* Its pipeline's waiter goes with the pipeline (staged_rx_put). */
	if (link_rx_stalled(tl->l))
		link_rx_resume(tl->l);
}
