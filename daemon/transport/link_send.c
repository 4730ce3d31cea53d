/* SPDX-License-Identifier: Apache-2.0 */
/*
 * link_send.c - a link's sending side, in the progress thread: frames
 * and payloads queued for the peer in order, handed to the socket at
 * once when nothing waits ahead of them (send_now), else through the
 * bufferevent's output; payloads of memory xferd maps sent from it,
 * the region held until they have left; the data client's corking of
 * a fill and its flush; the socket's TCP_NOTSENT_LOWAT.  Receiving,
 * back-pressure and the link's life are link.c's (struct link is
 * shared through link_int.h only).
 *
 * Progress thread only; no locks.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "core/thread_stats.h"
#include "core/log.h"
#include "mem/region.h"
#include "common/wire.h"
#include "peer.pb-c.h"
#include "transport/link_int.h"

#define SMALL_PAYLOAD 4096u            /* copied rather than referenced */

/* Control headers are small: a 1 KiB stack buffer holds them. */
#define HEADER_ROOM 1024u

/*
 * With nothing else queued, hand the bytes to the socket at once: a frame
 * then leaves now, not on the event loop's next turn (latency).  While
 * the client's fill corks the link only its first frame may, and only a
 * small one:
 * a lone request or answer goes at once, without passing through the
 * bufferevent (whose write event costs two epoll_ctl calls a frame), and
 * a burst is written together at the fill's end.  Returns how many bytes
 * the socket took; errors surface on the bufferevent's next write.
 */
static size_t send_now(struct link *l, struct iovec *iov, int iovcnt)
{
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
	size_t total = 0;
	ssize_t k;

	if (evbuffer_get_length(bufferevent_get_output(l->bev)))
		return 0;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	if (l->corked) {
		bool first = !l->cork_used;
		l->cork_used = true;
		if (!first || total > LINK_FRAME_PREFIX + HEADER_ROOM + SMALL_PAYLOAD)
			return 0;
	}
	do
		k = sendmsg(l->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (k < 0 && errno == EINTR);
	return k > 0 ? (size_t)k : 0;
}

/* Queue bytes for the peer: sent now if they can be, what does not fit
 * follows through the bufferevent, behind them, so the order on the wire
 * is kept. */
int link_queue_bytes(struct link *l, const uint8_t *p, size_t n)
{
	struct iovec iov = { .iov_base = (void *)p, .iov_len = n };
	size_t k = send_now(l, &iov, 1);

	return k < n && evbuffer_add(bufferevent_get_output(l->bev), p + k,
				     n - k) ? -ENOMEM : 0;
}

/* Frame m for a payload of len bytes into buf (LINK_FRAME_PREFIX +
 * HEADER_ROOM at least): its length, or a negative errno. */
static int put_header(struct link *l, Xfer__Peer__PeerMsg *m, uint32_t len,
		      uint8_t *buf)
{
	m->proto_version = XFER_PROTO_VERSION;
	if (protobuf_c_message_get_packed_size(&m->base) > HEADER_ROOM)
		return -EMSGSIZE;
	int n = link_frame_header(&m->base, len, buf);
	if (n > 0)
		stat_add(&l->stats->bytes_tx, (uint64_t)n);
	return n;
}

/* Queue a frame without payload (or whose payload the caller adds). */
int link_put_msg(struct link *l, Xfer__Peer__PeerMsg *m, uint32_t payload)
{
	uint8_t buf[LINK_FRAME_PREFIX + HEADER_ROOM];
	int n = put_header(l, m, payload, buf);

	if (n < 0)
		return n;
	return link_queue_bytes(l, buf, (size_t)n);
}

static void unref_region(const void *data, size_t len, void *arg)
{
	(void)data, (void)len;
	region_put(arg);
}

/*
 * A frame with a payload of memory xferd maps (len bytes at p, in region
 * r), header and payload in one sendmsg: with TCP_NODELAY two sends are
 * two segments, the peer often woke for the header alone, and a payload
 * queued behind its header waited for the event loop's next turn.  What
 * the socket does not take is queued: a small payload's rest copied, a
 * large one's by reference, r held until it has left.
 */
int link_put_msg_mapped(struct link *l, Xfer__Peer__PeerMsg *m,
			struct region *r, const void *p, uint32_t len)
{
	uint8_t buf[LINK_FRAME_PREFIX + HEADER_ROOM];
	struct evbuffer *out = bufferevent_get_output(l->bev);
	int n = put_header(l, m, len, buf);

	if (n < 0)
		return n;
	struct iovec iov[2] = {
		{ .iov_base = buf, .iov_len = (size_t)n },
		{ .iov_base = (void *)p, .iov_len = len },
	};
	size_t k = send_now(l, iov, 2);
	size_t head = k < (size_t)n ? k : (size_t)n, body = k - head;
	const uint8_t *rest = (const uint8_t *)p + body;
	if (head < (size_t)n && evbuffer_add(out, buf + head, (size_t)n - head))
		return -ENOMEM;
	if (body == len)
		return 0;
	if (len <= SMALL_PAYLOAD)
		return evbuffer_add(out, rest, len - body) ? -ENOMEM : 0;
	region_get(r);
	if (evbuffer_add_reference(out, rest, len - body, unref_region, r)) {
		region_put(r);
		return -ENOMEM;
	}
	return 0;
}

int link_queue_ref(struct link *l, const void *p, size_t n,
		   void (*done)(const void *p, size_t n, void *arg),
		   void *arg)
{
	return evbuffer_add_reference(bufferevent_get_output(l->bev), p, n,
				      done, arg) ? -ENOMEM : 0;
}

int link_queue_buffer(struct link *l, struct evbuffer *b)
{
	return evbuffer_add_buffer(bufferevent_get_output(l->bev), b)
		       ? -ENOMEM : 0;
}

size_t link_out_bytes(const struct link *l)
{
	return l->bev ? evbuffer_get_length(bufferevent_get_output(l->bev))
		      : 0;
}

void link_set_notsent_lowat(struct link *l, uint32_t bytes)
{
	int v = (int)bytes;

	if (setsockopt(l->fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v,
		       sizeof(v)) && !l->lowat_failed) {
		l->lowat_failed = true;
		log_warn("link: TCP_NOTSENT_LOWAT");
	}
}

void link_cork(struct link *l)
{
	l->corked = true;
	l->cork_used = false;
}

void link_uncork(struct link *l)
{
	l->corked = false;
	link_flush(l);
}

/* Write what the client queued, now, in one writev. */
void link_flush(struct link *l)
{
	struct evbuffer *out;

	/* Errors surface on the bufferevent's next write, as for send_now;
	 * what is left it writes as the socket drains. */
	if (!l->bev || !evbuffer_get_length(out = bufferevent_get_output(l->bev)))
		return;
	if (evbuffer_write_atmost(out, l->fd, link_io_budget(l)) > 0)
		/* The bufferevent calls on_writable only after writes of its
		 * own: what this one drained must not leave reading paused. */
		(void)link_resume_reading(l);
}
