/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream.c - a producer/consumer queue of slots in the consumer's memory,
 * built on the public API only: tokens, WRITE with a notification, NOTIFY.
 *
 * The consumer owns nslots slots; message seq goes into slot seq % nslots.
 * Two counters make the queue, as in NIXL's sender/receiver example, but
 * each travels as a notification instead of a word the other end polls:
 *
 *   tail  the producer's count of messages sent: each WRITE carries
 *         DATA(seq, len) as its notification, delivered once the bytes
 *         have landed;
 *   head  the consumer's count of slots released in order: a NOTIFY
 *         CREDIT(head) to the producer's small region each time it moves.
 *
 * The producer may write while tail - head < nslots.  Notifications of
 * one sender may arrive out of order (several progress threads, several
 * links), so DATA names its sequence number and the consumer hands out
 * messages in order; CREDIT is cumulative, so a late one is harmless.
 *
 * The formats on the wire are stream_wire.h's.  One file past 800 lines:
 * the state machine and the calls that wait on it share one struct and
 * its invariants, which a split would spread over two files.
 * Set-up: the consumer's stream token holds the tokens of its slots and
 * of its mailbox; the producer WRITEs a HELLO record with the token of
 * its own small region into the mailbox, the consumer imports that and
 * answers ACCEPT.  Both small regions are one page of xfer_alloc_host
 * memory, with a probe word that a waiting end overwrites once per
 * XFER_STREAM_PROBE_MS to learn that the other end is still there (the
 * write fails -ESTALE once the other process, and with it its regions,
 * is gone).
 *
 * Every CQE of the context is the stream's (xfer.h): stream_drain() feeds
 * them all to one state machine, whichever call is waiting.
 *
 * Who may speak.  The stream token, published for anyone to find, hands
 * out the tokens of the mailbox and the slots; whoever holds them can
 * notify our regions, and read the mailbox, where the producer's token
 * then lies.  So each end takes notifications from the other end only,
 * by the sender xferd records in every notification (xfer_cqe_sender),
 * which the sender cannot choose: the producer binds to the consumer
 * its token names (the tokens' node, and the client id the stream token
 * carries), the consumer to the producer whose HELLO it accepted (the
 * HELLO notification's sender, which the HELLO record must name too).
 * Anyone else's notification - data, a credit, a close, a second HELLO
 * - is dropped and counted (xfer_stream_dropped), and does not count as
 * a sign of life of the other end.  Without sender records (an older
 * xferd) the stream takes what comes, as before.
 *
 * CQ room (xfer.h: 2 * nslots + XFER_STREAM_CQ_SPARE).  Per slot the
 * consumer's CQ holds at most its DATA and the completion of the credit
 * that freed it: the producer writes a slot again only after that
 * credit's notification reached it, whose completion comes back to us
 * ahead of the DATA that follows, and a recv reaps both.  Spare: HELLO,
 * CLOSE, the ACCEPT's and a probe's completions.  The producer's CQ
 * holds fewer: credits, one write, one probe, ACCEPT, CLOSE.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/clock.h"
#include "internal.h"
#include "stream_wire.h"

enum slot_state {
	SLOT_FREE,      /* the producer may write it (once credited) */
	SLOT_LANDED,    /* its DATA arrived, not yet handed out */
	SLOT_HELD,      /* returned by xfer_stream_recv */
	SLOT_RELEASED,  /* given back, waiting for older slots */
};

struct stream_slot {
	uint8_t state;
	uint64_t len;
};

struct xfer_stream {
	struct xfer_ctx *ctx;
	bool consumer;
	uint32_t nslots;
	uint64_t slot_size;
	uint64_t id;
	struct xfer_mem *own;       /* mailbox / the producer's region */
	struct xfer_remote *peer;   /* the other end's small region */
	int broken;                 /* the error every call returns now */
	bool gone;                  /* xferd has gone: nothing completes */
	bool connected;
	bool peer_closed;
	bool closing;               /* in xfer_stream_close: no more credits */
	uint32_t overflow_at_start;
	/* Our SQEs whose completions are still out. */
	unsigned credits_out;
	bool probe_out, close_out, hello_out, accept_out, write_out;
	uint64_t last_heard_ns;     /* the other end showed it is there */
	/* The other end as a sender (see "who may speak"); senders: this
	 * xferd names them, so strangers can be told apart. */
	bool senders;
	bool peer_known;
	struct xfer_cqe_sender peer_id;
	uint64_t dropped;           /* strangers' notifications */

	/* consumer: the slots' handle and token, taken at listen, so that
	 * nothing here touches the caller's xfer_mem afterwards */
	uint64_t slots_handle;
	uint8_t slots_tok[XFER_TOKEN_MAX];
	size_t slots_tok_len;
	bool hello_seen;
	struct xfer_cqe_sender hello_from; /* of the latest HELLO */
	uint64_t head;              /* released in order */
	uint64_t credit_sent;       /* head as last sent */
	uint64_t next;              /* next message to hand out */
	uint64_t close_total;       /* the producer's tail at its CLOSE */
	struct stream_slot *slot;

	/* producer */
	struct xfer_remote *slots;
	uint64_t tail;              /* messages sent */
	uint64_t credit;            /* the consumer's head, as last heard */
	int64_t write_result;
};

/* --- the state machine fed by CQEs --- */

static void stream_break(struct xfer_stream *s, int err)
{
	if (!s->broken)
		s->broken = err;
}

/*
 * What a failed write or notification to the other end means: its
 * region is gone (-ESTALE), so its process closed its context or died
 * without closing the stream.
 */
static int peer_error(int64_t result)
{
	return result == -ESTALE ? -ECONNRESET : (int)result;
}

static bool same_sender(const struct xfer_cqe_sender *a,
			const struct xfer_cqe_sender *b)
{
	return a->client == b->client &&
	       memcmp(a->node, b->node, sizeof(a->node)) == 0;
}

/*
 * A notification from someone other than the other end: dropped and
 * counted.  Before a producer was accepted, everyone but a HELLO's
 * sender is a stranger.  from NULL: no sender record (an older xferd),
 * which only happens when the whole ring has none.
 */
static bool from_stranger(struct xfer_stream *s,
			  const struct xfer_cqe_sender *from)
{
	if (!s->senders)
		return false;
	if (from && s->peer_known && same_sender(from, &s->peer_id))
		return false;
	s->dropped++;
	return true;
}

static bool slots_enough(const struct xfer_ctx *ctx, uint32_t nslots)
{
	return 2ull * nslots + XFER_STREAM_CQ_SPARE <= ctx->ring.cq_entries;
}

static void consumer_data(struct xfer_stream *s, const struct xfer_cqe *c,
			  uint64_t payload)
{
	uint32_t seq24 = (uint32_t)(payload >> 32) & SEQ_MASK;
	uint64_t len = payload & 0xffffffffu;
	/* The only sequence numbers possible are next .. head + nslots - 1,
	 * fewer than 2^24 of them: the low bits name one. */
	uint64_t seq = s->next + ((seq24 - (uint32_t)s->next) & SEQ_MASK);

	if (!s->connected || seq >= s->head + s->nslots ||
	    (s->peer_closed && seq >= s->close_total) ||
	    len > s->slot_size || c->result != (int64_t)len ||
	    s->slot[seq % s->nslots].state != SLOT_FREE) {
		stream_break(s, -EPROTO);
		return;
	}
	s->slot[seq % s->nslots] = (struct stream_slot){
		.state = SLOT_LANDED,
		.len = len,
	};
}

static void consumer_notify(struct xfer_stream *s, const struct xfer_cqe *c,
			    const struct xfer_cqe_sender *from)
{
	uint64_t payload = c->user_data & MSG_PAYLOAD;

	/* Only the first producer gets in; later HELLOs (into the
	 * mailbox, whose token the stream token gave away) are
	 * dropped.  Its sender is the one accept binds to. */
	if (c->user_data >> MSG_SHIFT == MSG_HELLO && !s->connected) {
		if (c->handle == xfer_mem_handle(s->own)) {
			s->hello_seen = true;
			if (from)
				s->hello_from = *from;
		}
		return;
	}
	if (from_stranger(s, from))
		return;
	s->last_heard_ns = now_ns();
	switch (c->user_data >> MSG_SHIFT) {
	case MSG_HELLO:
		return;  /* ours again, after its ACCEPT: harmless */
	case MSG_DATA:
		if (c->handle != s->slots_handle)
			return;   /* as below */
		consumer_data(s, c, payload);
		return;
	case MSG_CLOSE:
		if (c->handle != xfer_mem_handle(s->own))
			return;   /* as below */
		if (!s->connected)
			break;
		/* No more than it could have sent; no less than it has. */
		if (payload > s->head + s->nslots || payload < s->next) {
			stream_break(s, -EPROTO);
			return;
		}
		s->peer_closed = true;
		s->close_total = payload;
		return;
	}
	/* A notification for neither of our regions is a late one for the
	 * region of an earlier stream on this context.  A stranger's
	 * notification before a producer came is nobody's business; once
	 * connected, one the producer sent (strangers' were dropped above,
	 * where xferd names senders) is the producer breaking the
	 * protocol. */
	if (s->connected)
		stream_break(s, -EPROTO);
}

static void producer_notify(struct xfer_stream *s, const struct xfer_cqe *c,
			    const struct xfer_cqe_sender *from)
{
	uint64_t payload = c->user_data & MSG_PAYLOAD;

	/* Not for our region: a late one for the region of an earlier
	 * stream on this context, delivered as that region went. */
	if (c->handle != xfer_mem_handle(s->own))
		return;
	/* Our region's token lay in the consumer's mailbox, which anyone
	 * with the stream token may read: take the consumer's word only. */
	if (from_stranger(s, from))
		return;
	s->last_heard_ns = now_ns();
	switch (c->user_data >> MSG_SHIFT) {
	case MSG_ACCEPT:
		s->connected = true;
		return;
	case MSG_CREDIT:
		if (!s->connected || payload > s->tail) {
			stream_break(s, -EPROTO);
			return;
		}
		/* Cumulative: an older credit that arrives late says less. */
		if (payload > s->credit)
			s->credit = payload;
		return;
	case MSG_CLOSE:
		s->peer_closed = true;
		stream_break(s, -EPIPE);
		return;
	}
	stream_break(s, -EPROTO);
}

/* A completion of one of our own SQEs. */
static void own_completion(struct xfer_stream *s, const struct xfer_cqe *c)
{
	int64_t r = c->result;

	switch (c->user_data >> MSG_SHIFT) {
	case MSG_DATA:
		s->write_out = false;
		s->write_result = r;
		break;
	case MSG_CREDIT:
		if (s->credits_out)
			s->credits_out--;
		/* A producer that closed has let its region go; its CLOSE
		 * may still be on its way. */
		if (r < 0 && !s->peer_closed)
			stream_break(s, peer_error(r));
		return;
	case UD_PROBE:
		s->probe_out = false;
		/* After its CLOSE the other end lets its region go. */
		if (r < 0 && s->peer_closed)
			return;
		break;
	case MSG_CLOSE:
		s->close_out = false;
		return;
	case MSG_HELLO:
		s->hello_out = false;
		break;
	case MSG_ACCEPT:
		s->accept_out = false;
		break;
	default:
		return;   /* not the stream's */
	}
	if (r < 0)
		stream_break(s, peer_error(r));
	else
		s->last_heard_ns = now_ns();
}

static void stream_cqe(struct xfer_stream *s, const struct xfer_cqe *c)
{
	struct xfer_cqe_sender from;
	const struct xfer_cqe_sender *fp = NULL;

	if (!(c->flags & XFER_CQE_F_NOTIFY)) {
		own_completion(s, c);
		return;
	}
	/* Read before the CQE is consumed: its record goes with its slot. */
	if (s->senders && xfer_cqe_sender(s->ctx, c, &from) == 0)
		fp = &from;
	if (s->consumer)
		consumer_notify(s, c, fp);
	else
		producer_notify(s, c, fp);
}

/* Take every CQE waiting.  Returns 0, or -ENOTCONN when xferd is gone. */
static int stream_drain(struct xfer_stream *s)
{
	struct xfer_cqe *c;
	int rc;

	while ((rc = xfer_peek_cqe(s->ctx, &c)) == 0) {
		stream_cqe(s, c);
		xfer_cq_advance(s->ctx, 1);
	}
	/* Room for every notification the protocol allows was checked at
	 * set-up: a drop means someone else used the CQ too. */
	if (xfer_cq_overflow(s->ctx) != s->overflow_at_start)
		stream_break(s, -EOVERFLOW);
	if (rc == -ENOTCONN) {
		s->gone = true;
		stream_break(s, -ENOTCONN);
		return rc;
	}
	return 0;
}

/* Submit one SQE made by prep; -EBUSY if the SQ has no room now. */
static int stream_submit(struct xfer_stream *s, const struct xfer_sqe *tmpl)
{
	struct xfer_sqe *sqe = xfer_get_sqe(s->ctx);

	if (!sqe)
		return -EBUSY;
	*sqe = *tmpl;
	int rc = xfer_submit(s->ctx);
	if (rc < 0) {
		stream_break(s, rc);
		return rc;
	}
	return 0;
}

/* Send the consumer's head if it moved since the last credit.  Retried
 * from every wait when the SQ was full. */
static void consumer_credit(struct xfer_stream *s)
{
	struct xfer_sqe sqe;

	if (!s->connected || s->peer_closed || s->broken || s->closing ||
	    s->head == s->credit_sent)
		return;
	xfer_prep_notify(&sqe, xfer_remote_handle(s->peer),
			 msg(MSG_CREDIT, s->head), msg(MSG_CREDIT, s->head));
	if (stream_submit(s, &sqe) == 0) {
		s->credit_sent = s->head;
		s->credits_out++;
	}
}

/* While waiting, check once per XFER_STREAM_PROBE_MS that the other end
 * still has its small region. */
static void stream_probe(struct xfer_stream *s, uint64_t now)
{
	struct xfer_sqe sqe;

	if (!s->peer || s->probe_out || s->peer_closed || s->broken ||
	    now - s->last_heard_ns < XFER_STREAM_PROBE_MS * 1000000ull)
		return;
	xfer_prep_write(&sqe, xfer_mem_handle(s->own), STREAM_PROBE_OFF,
			xfer_remote_handle(s->peer), STREAM_PROBE_OFF,
			STREAM_PROBE_LEN, msg(UD_PROBE, 0));
	if (stream_submit(s, &sqe) == 0) {
		s->probe_out = true;
		s->last_heard_ns = now;  /* the next probe one interval later */
	}
}

static uint64_t deadline_of(int timeout_ms)
{
	return timeout_ms < 0 ? UINT64_MAX
			      : now_ns() + 1000000ull * (uint64_t)timeout_ms;
}

/*
 * Take CQEs until done(s) says to stop (the thing waited for happened, or
 * the stream broke if done() looks at that: the caller looks which), or
 * the deadline (-ETIME; -EAGAIN for a deadline of "now"), or xferd goes
 * (-ENOTCONN).  Probes the other end meanwhile if asked to.
 */
static int stream_wait(struct xfer_stream *s, bool (*done)(struct xfer_stream *),
		       uint64_t deadline, bool probe)
{
	uint64_t start = now_ns();

	for (;;) {
		stream_drain(s);
		if (s->consumer)
			consumer_credit(s);
		if (done(s))
			return 0;
		if (s->gone)
			return -ENOTCONN;
		uint64_t now = now_ns();
		if (now >= deadline)
			return deadline <= start ? -EAGAIN : -ETIME;
		if (probe)
			stream_probe(s, now);
		/* Sleep until a CQE, the deadline or the next probe. */
		uint64_t until = deadline;
		uint64_t probe_at = s->last_heard_ns +
				    XFER_STREAM_PROBE_MS * 1000000ull;
		if (probe && !s->probe_out && probe_at < until)
			until = probe_at > now ? probe_at : now;
		int ms = until == UINT64_MAX
			? -1 : (int)((until - now + 999999) / 1000000);
		struct xfer_cqe *c;
		int rc = xfer_wait_cqe(s->ctx, &c, ms);
		if (rc == -ENOTCONN)
			s->gone = true;
		if (rc < 0 && rc != -ETIME) {
			stream_break(s, rc);
			return rc;
		}
	}
}

/* --- set-up and teardown --- */

static int stream_alloc(struct xfer_ctx *ctx, bool consumer, uint32_t nslots,
			uint64_t slot_size, struct xfer_stream **out)
{
	struct xfer_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->ctx = ctx;
	s->consumer = consumer;
	s->nslots = nslots;
	s->slot_size = slot_size;
	s->overflow_at_start = xfer_cq_overflow(ctx);
	s->last_heard_ns = now_ns();
	s->senders = ctx->ring.senders != NULL;
	if (consumer) {
		s->slot = calloc(nslots, sizeof(*s->slot));
		if (!s->slot) {
			free(s);
			return -ENOMEM;
		}
	}
	int err = xfer_alloc_host(ctx, STREAM_REGION_LEN, &s->own);
	if (err) {
		free(s->slot);
		free(s);
		return err;
	}
	*out = s;
	return 0;
}

/* Everything but the CLOSE: imports, the small region, the memory. */
static void stream_free(struct xfer_stream *s)
{
	if (s->slots)
		xfer_unimport(s->ctx, s->slots);
	if (s->peer)
		xfer_unimport(s->ctx, s->peer);
	xfer_free_host(s->ctx, s->own);
	free(s->slot);
	free(s);
}

XFER_EXPORT int xfer_stream_listen(struct xfer_ctx *ctx, struct xfer_mem *mem,
				   uint64_t off, uint32_t nslots,
				   uint64_t slot_size, struct xfer_stream **out)
{
	struct xfer_stream *s;

	if (!ctx || !mem || !out || !stream_geometry_ok(nslots, slot_size))
		return -EINVAL;
	uint64_t bytes = nslots * slot_size;
	if (off > xfer_mem_len(mem) || bytes > xfer_mem_len(mem) - off)
		return -ERANGE;
	if (!slots_enough(ctx, nslots))
		return -E2BIG;
	int err = stream_alloc(ctx, true, nslots, slot_size, &s);
	if (err)
		return err;
	if (getrandom(&s->id, sizeof(s->id), 0) != sizeof(s->id)) {
		err = -errno;
		stream_free(s);
		return err;
	}
	s->slots_handle = xfer_mem_handle(mem);
	s->slots_tok_len = sizeof(s->slots_tok);
	err = xfer_export(mem, off, bytes, s->slots_tok, &s->slots_tok_len);
	if (err) {
		stream_free(s);
		return err;
	}
	*out = s;
	return 0;
}

XFER_EXPORT int xfer_stream_token(const struct xfer_stream *s, void *buf,
				  size_t *len)
{
	uint8_t tok[XFER_STREAM_TOKEN_MAX], mbox[XFER_TOKEN_MAX];
	size_t mbox_len = sizeof(mbox);

	if (!s || !s->consumer || !buf || !len)
		return -EINVAL;
	int err = xfer_export(s->own, 0, STREAM_REGION_LEN, mbox, &mbox_len);
	if (err)
		return err;
	struct stream_token t = {
		.nslots = s->nslots,
		.slot_size = s->slot_size,
		.id = s->id,
		.client = s->ctx->client_id,
		.slots_tok = s->slots_tok,
		.slots_len = (uint16_t)s->slots_tok_len,
		.mbox_tok = mbox,
		.mbox_len = (uint16_t)mbox_len,
	};
	size_t total = stream_token_encode(&t, tok);
	if (*len < total) {
		*len = total;
		return -ENOSPC;
	}
	memcpy(buf, tok, total);
	*len = total;
	return 0;
}

static bool hello_or_broken(struct xfer_stream *s)
{
	return s->hello_seen || s->broken;
}

static bool accept_done(struct xfer_stream *s)
{
	return !s->accept_out;
}

/* Read and check the HELLO record in the mailbox, import its token. */
static int consumer_take_hello(struct xfer_stream *s)
{
	uint8_t rec[STREAM_HELLO_MAX];
	struct xfer_remote *peer;
	const uint8_t *tok;
	uint16_t tok_len;
	struct xfer_cqe_sender who;

	/* One copy, then checks on the copy: the mailbox is writable by
	 * anyone who saw the stream token.  The record must name the
	 * sender of the latest HELLO notification: one written over by
	 * someone else after that HELLO fails (-EPROTO: listen on). */
	memcpy(rec, xfer_mem_ptr(s->own), sizeof(rec));
	if (stream_hello_parse(rec, s->id, &tok, &tok_len, &who) ||
	    (s->senders && !same_sender(&who, &s->hello_from)))
		return -EPROTO;
	int err = xfer_import(s->ctx, tok, tok_len, &peer);
	if (err)
		return err == -EINVAL ? -EPROTO : err;
	if (xfer_remote_len(peer) != STREAM_REGION_LEN) {
		xfer_unimport(s->ctx, peer);
		return -EPROTO;
	}
	s->peer = peer;
	s->peer_id = s->senders ? s->hello_from : who;
	s->peer_known = true;
	return 0;
}

XFER_EXPORT int xfer_stream_accept(struct xfer_stream *s, int timeout_ms)
{
	struct xfer_sqe sqe;

	if (!s || !s->consumer)
		return -EINVAL;
	if (s->connected)
		return -EISCONN;
	if (s->broken)
		return s->broken;
	int rc = stream_wait(s, hello_or_broken, deadline_of(timeout_ms), false);
	if (rc)
		return rc;
	if (s->broken)
		return s->broken;
	s->hello_seen = false;
	rc = consumer_take_hello(s);
	if (rc)
		return rc;
	xfer_prep_notify(&sqe, xfer_remote_handle(s->peer), msg(MSG_ACCEPT, 0),
			 msg(MSG_ACCEPT, 0));
	/* Connected from now: the producer's first DATA may be seen before
	 * the completion of the ACCEPT that let it send. */
	s->connected = true;
	rc = stream_submit(s, &sqe);
	if (rc == 0) {
		s->accept_out = true;
		/* Bounded by xferd: every descriptor completes. */
		rc = stream_wait(s, accept_done, UINT64_MAX, false);
		if (!rc)
			rc = s->broken;
	}
	if (rc && rc != -ENOTCONN && rc != -EOVERFLOW) {
		/* This producer is gone already (it never got the ACCEPT, so
		 * it sent nothing): wait for another. */
		xfer_unimport(s->ctx, s->peer);
		s->peer = NULL;
		s->peer_known = false;
		s->connected = false;
		s->broken = 0;
		return rc;
	}
	s->last_heard_ns = now_ns();
	return rc;
}

static bool message_or_end(struct xfer_stream *s)
{
	return s->slot[s->next % s->nslots].state == SLOT_LANDED ||
	       (s->peer_closed && s->next == s->close_total) || s->broken;
}

XFER_EXPORT int xfer_stream_recv(struct xfer_stream *s, uint64_t *len,
				 int timeout_ms)
{
	if (!s || !s->consumer || !len)
		return -EINVAL;
	if (!s->connected)
		return s->broken ? s->broken : -ENOTCONN;
	int rc = stream_wait(s, message_or_end, deadline_of(timeout_ms), true);
	if (rc)
		return rc;
	/* What landed is handed out even after the producer went. */
	struct stream_slot *sl = &s->slot[s->next % s->nslots];
	if (sl->state == SLOT_LANDED) {
		sl->state = SLOT_HELD;
		*len = sl->len;
		return (int)(s->next++ % s->nslots);
	}
	/* Everything the producer sent before its CLOSE was handed out: the
	 * end, whatever a probe of its region (gone since) said. */
	if (s->peer_closed && s->next == s->close_total)
		s->broken = -EPIPE;
	return s->broken;
}

XFER_EXPORT int xfer_stream_release(struct xfer_stream *s, uint32_t slot)
{
	if (!s || !s->consumer || slot >= s->nslots ||
	    s->slot[slot].state != SLOT_HELD)
		return -EINVAL;
	s->slot[slot].state = SLOT_RELEASED;
	while (s->slot[s->head % s->nslots].state == SLOT_RELEASED) {
		s->slot[s->head % s->nslots].state = SLOT_FREE;
		s->head++;
	}
	consumer_credit(s);
	return 0;
}

/* --- producer --- */

/* None of our SQEs is out. */
static bool quiet(struct xfer_stream *s)
{
	return !s->close_out && !s->probe_out && !s->credits_out &&
	       !s->write_out && !s->hello_out && !s->accept_out;
}

static bool hello_sent(struct xfer_stream *s)
{
	return !s->hello_out;
}

static bool accepted(struct xfer_stream *s)
{
	return s->connected || s->broken;
}

/* Import the consumer's two regions; each must be what the token says.
 * The consumer, as a sender: the node of its tokens (its xferd checks
 * their keys on import) and the client id the stream token names. */
static int producer_import(struct xfer_stream *s, const struct stream_token *t)
{
	struct token mbox, slots;

	if (token_decode(t->mbox_tok, t->mbox_len, &mbox) ||
	    token_decode(t->slots_tok, t->slots_len, &slots) ||
	    memcmp(mbox.instance_id, slots.instance_id, TOKEN_INSTANCE_LEN))
		return -EINVAL;
	s->peer_id = (struct xfer_cqe_sender){ .client = t->client };
	memcpy(s->peer_id.node, mbox.instance_id, sizeof(s->peer_id.node));
	if (memcmp(mbox.instance_id, s->ctx->instance_id, TOKEN_INSTANCE_LEN))
		s->peer_id.flags = XFER_SENDER_F_REMOTE;
	s->peer_known = true;
	int err = xfer_import(s->ctx, t->slots_tok, t->slots_len, &s->slots);

	if (err)
		return err;
	if (xfer_remote_len(s->slots) != (uint64_t)t->nslots * t->slot_size)
		return -EINVAL;
	err = xfer_import(s->ctx, t->mbox_tok, t->mbox_len, &s->peer);
	if (err)
		return err;
	if (xfer_remote_len(s->peer) != STREAM_REGION_LEN)
		return -EINVAL;
	return 0;
}

/* WRITE the HELLO record with our region's token into the mailbox. */
static int producer_hello(struct xfer_stream *s)
{
	uint8_t *rec = xfer_mem_ptr(s->own), tok[XFER_TOKEN_MAX];
	size_t tok_len = sizeof(tok);
	struct xfer_cqe_sender self;
	struct xfer_sqe sqe;
	int err = xfer_export(s->own, 0, STREAM_REGION_LEN, tok, &tok_len);
	if (err)
		return err;
	xfer_ctx_identity(s->ctx, &self);
	xfer_prep_write(&sqe, xfer_mem_handle(s->own), 0,
			xfer_remote_handle(s->peer), 0,
			stream_hello_encode(rec, s->id, &self, tok,
					    (uint16_t)tok_len),
			msg(MSG_HELLO, 0));
	xfer_sqe_set_notify(&sqe, msg(MSG_HELLO, 0));
	err = stream_submit(s, &sqe);
	if (err)
		return err;
	s->hello_out = true;
	err = stream_wait(s, hello_sent, UINT64_MAX, false);
	/* The consumer may have accepted (and even closed) before our
	 * completion came: that is for the first send to report. */
	return err ? err : s->connected ? 0 : s->broken;
}

XFER_EXPORT int xfer_stream_connect(struct xfer_ctx *ctx, const void *token,
				    size_t len, int timeout_ms,
				    struct xfer_stream **out)
{
	uint64_t deadline = deadline_of(timeout_ms);
	struct stream_token t;
	struct xfer_stream *s;

	if (!ctx || !out)
		return -EINVAL;
	int err = stream_token_parse(token, len, &t);
	if (err)
		return err;
	if (!slots_enough(ctx, t.nslots))
		return -E2BIG;
	err = stream_alloc(ctx, false, t.nslots, t.slot_size, &s);
	if (err)
		return err;
	s->id = t.id;
	err = producer_import(s, &t);
	if (!err)
		err = producer_hello(s);
	if (!err) {
		err = stream_wait(s, accepted, deadline, true);
		/* Accepted and closed at once: connected all the same; the
		 * first send reports the close. */
		if (!err && !s->connected)
			err = s->broken;
		/* -EAGAIN means "not yet": after a HELLO, time is up. */
		if (err == -EAGAIN)
			err = -ETIME;
	}
	if (err) {
		/* A probe may still be out; it completes into this CQ. */
		stream_wait(s, quiet, UINT64_MAX, false);
		stream_free(s);
		return err;
	}
	*out = s;
	return 0;
}

static bool credit_or_broken(struct xfer_stream *s)
{
	return s->tail - s->credit < s->nslots || s->broken;
}

static bool write_done(struct xfer_stream *s)
{
	return !s->write_out;
}

XFER_EXPORT int xfer_stream_send(struct xfer_stream *s,
				 const struct xfer_mem *src_mem,
				 uint64_t src_off, uint64_t len, int timeout_ms)
{
	struct xfer_sqe sqe;

	if (!s || s->consumer || !src_mem || len > s->slot_size ||
	    src_off > xfer_mem_len(src_mem) ||
	    len > xfer_mem_len(src_mem) - src_off)
		return -EINVAL;
	if (s->broken)
		return s->broken;
	int rc = stream_wait(s, credit_or_broken, deadline_of(timeout_ms), true);
	if (rc)
		return rc;
	if (s->broken)
		return s->broken;
	uint32_t slot = (uint32_t)(s->tail % s->nslots);
	xfer_prep_write(&sqe, xfer_mem_handle(src_mem), src_off,
			xfer_remote_handle(s->slots), slot * s->slot_size, len,
			msg(MSG_DATA, s->tail));
	xfer_sqe_set_notify(&sqe, msg(MSG_DATA, (s->tail & SEQ_MASK) << 32 | len));
	rc = stream_submit(s, &sqe);
	if (rc)
		return rc == -EBUSY ? -EAGAIN : rc;
	s->tail++;
	s->write_out = true;
	/* A CLOSE that arrives meanwhile does not stop this write: its
	 * result tells whether the bytes landed. */
	rc = stream_wait(s, write_done, UINT64_MAX, false);
	if (rc)
		return rc;
	return s->write_result < 0 ? s->broken : 0;
}

XFER_EXPORT int xfer_stream_credits(struct xfer_stream *s)
{
	if (!s || s->consumer)
		return -EINVAL;
	stream_drain(s);
	if (s->broken)
		return s->broken;
	return (int)(s->nslots - (s->tail - s->credit));
}


XFER_EXPORT int xfer_stream_close(struct xfer_stream *s)
{
	struct xfer_sqe sqe;

	if (!s)
		return 0;
	int err = s->broken;
	s->closing = true;
	if (s->connected && !s->broken && !s->peer_closed) {
		uint64_t v = msg(MSG_CLOSE, s->consumer ? 0 : s->tail);
		xfer_prep_notify(&sqe, xfer_remote_handle(s->peer), v, v);
		if (stream_submit(s, &sqe) == 0)
			s->close_out = true;
	}
	/* Every SQE of ours completes (xferd bounds each one); after that,
	 * nothing of ours is left in the CQ but notifications.  Those that
	 * were on their way to our region when it went are taken last; one
	 * that xferd was delivering at that very moment may still come
	 * after, and a later stream on the context ignores it. */
	stream_wait(s, quiet, UINT64_MAX, false);
	struct xfer_ctx *ctx = s->ctx;
	stream_free(s);
	struct xfer_cqe *c;
	while (xfer_peek_cqe(ctx, &c) == 0)
		xfer_cq_advance(ctx, 1);
	return err;
}

XFER_EXPORT int xfer_stream_peer(const struct xfer_stream *s,
				 struct xfer_cqe_sender *out)
{
	if (!s || !out)
		return -EINVAL;
	if (!s->peer_known || (s->consumer && !s->connected))
		return -ENOTCONN;
	*out = s->peer_id;
	return 0;
}

XFER_EXPORT uint64_t xfer_stream_dropped(const struct xfer_stream *s)
{
	return s ? s->dropped : 0;
}

XFER_EXPORT uint32_t xfer_stream_nslots(const struct xfer_stream *s)
{
	return s->nslots;
}

XFER_EXPORT uint64_t xfer_stream_slot_size(const struct xfer_stream *s)
{
	return s->slot_size;
}
