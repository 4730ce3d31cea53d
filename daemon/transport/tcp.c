/*
 * tcp.c - the TCP data path between xferds, in the progress thread.
 *
 * This file is long (about 1450 lines) because both ends of every frame
 * type live here: what this xferd sends for its clients' descriptors and
 * what it does with the same frames from the peer.  Keeping the two
 * halves of the protocol side by side is what makes it reviewable.
 *
 * Per link:
 *   sendq   operations with frames still to queue, served round-robin
 *           one frame at a time while the socket's output buffer is
 *           below OUT_HIGH (refilled when it drains below OUT_LOW);
 *   serveq  reads the peer asked of us, served the same way;
 *   hash    operations with frames on the wire, awaiting their end.
 * A frame's payload from a memfd region goes to the socket by reference
 * (no copy in xferd); incoming payloads are copied once, from libevent's
 * buffer into the region.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "log.h"
#include "peer.pb-c.h"
#include "transport/rdma_dev.h"
#include "transport/rdma_mr.h"
#include "mem/region.h"
#include "transport/tcp.h"
#include "engine/thread_stats.h"
#include "common/wire.h"
#include "xfer_ring.h"
#include "engine/xop.h"

#define FRAME_PREFIX 8u                /* u32 header len, u32 payload len */
#define OUT_HIGH     (4u << 20)        /* stop queueing frames above this */
#define OUT_LOW      (1u << 20)        /* and start again below this */
#define OP_HASH      1024u
#define SINGLE_IO    (1u << 20)        /* bytes per write call */
#define SMALL_PAYLOAD 4096u            /* copied rather than referenced */
#define OUT_CAP      (4 * OUT_HIGH)    /* stop reading the peer above this */
#define READS_PER_CALL 32
#define RXBUF        (FRAME_PREFIX + PEER_MAX_HEADER + (256u << 10))
#define MAX_IOV      64

struct rpeer;

/* Where the payload of the frame being received goes, and what to do
 * once it is all there. */
struct rx_sink {
	bool active;
	uint64_t left;               /* payload bytes still to come */
	uint64_t len;                /* of the whole payload */
	struct region *r;            /* a reference; NULL: drop the bytes */
	uint64_t off;                /* of the next byte in r */
	int err;                     /* first failure to land the bytes */
	bool is_write;               /* else ReadData of ours */
	uint64_t op;                 /* the peer's (write) */
	bool last, notify;
	uint64_t notify_value, total;
	struct xop *xop;             /* ReadData: ours; NULL once it ended */
};

/* A read the peer asked of one of our regions. */
struct serve {
	uint64_t op;
	struct region *r;            /* a reference */
	uint64_t off;                /* in the region */
	uint64_t len, done;
	TAILQ_ENTRY(serve) q;
};
TAILQ_HEAD(serve_list, serve);

struct link {
	struct linkset *ls;
	struct rpeer *peer;
	uint64_t gen;                /* the main thread's name for it */
	bool read_paused;            /* backpressure: the peer reads too slowly */
	struct bufferevent *bev;
	struct link_stats *stats;
	uint64_t next_id;
	struct xop_list sendq;
	struct xop *hash[OP_HASH];
	struct serve_list serveq;
	bool serve_turn;             /* alternate sendq and serveq */
	/* Incoming writes that failed: their remaining chunks are dropped
	 * until their last chunk or an Abort. */
	uint64_t *failed;
	size_t nfailed, capfailed;
	/* The last token whose key checked out (see regtab_resolve_token). */
	struct token verified;
	bool have_verified;
	uint64_t last_rx_ns;
	struct event *tick;

	/* Receiving is done here, not by the bufferevent: payloads go from
	 * the socket straight into the region (one copy, by the kernel). */
	int fd;
	struct event *ev_read;
	uint8_t *rxbuf;              /* headers and small payloads */
	size_t rx_off, rx_len;       /* unparsed bytes: [rx_off, rx_len) */
	struct rx_sink sink;         /* the payload being received */
	struct link *next_dead;      /* failed, waiting to be freed */
};

/* Another xferd as the progress thread knows it. */
struct rpeer {
	uint8_t id[LINK_ID_LEN];
	struct link *link;           /* NULL until attached */
	struct xop_list pending;     /* waiting for a link */
	bool asked;                  /* need_peer sent, no answer yet */
	struct rpeer *next;
};

struct linkset {
	struct event_base *base;
	struct regtab *regs;
	struct linkset_cfg cfg;
	struct linkset_hooks hooks;
	struct rpeer *peers;
	size_t nlinks;
	uint64_t events;
	/* Failed links are freed from the event loop (see fail_link). */
	struct link *dead;
	struct event *ev_reap;
};

static void fail_link(struct link *l, int err, const char *why);
static void fill(struct link *l);

/* --- frames --- */

/* Frames carry lengths in the host's order: the supported hosts (x86-64,
 * arm64) are little-endian, which is what the protocol specifies. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "peer frame lengths are little-endian");

int link_frame_header(const ProtobufCMessage *msg, uint32_t payload_len,
		      uint8_t *out)
{
	size_t hlen = protobuf_c_message_get_packed_size(msg);

	if (hlen > PEER_MAX_HEADER || payload_len > PEER_MAX_PAYLOAD)
		return -EMSGSIZE;
	uint32_t h = (uint32_t)hlen, p = payload_len;
	memcpy(out, &h, 4);      /* little-endian hosts only (x86, arm64) */
	memcpy(out + 4, &p, 4);
	protobuf_c_message_pack(msg, out + FRAME_PREFIX);
	return (int)(FRAME_PREFIX + hlen);
}

/*
 * Queue bytes for the peer.  With nothing else queued they go to the
 * socket at once: a small frame then leaves now, not on the event loop's
 * next turn (latency); whatever does not fit follows through the
 * bufferevent, behind them, so the order on the wire is kept.
 */
static int queue_bytes(struct link *l, const uint8_t *p, size_t n)
{
	struct evbuffer *out = bufferevent_get_output(l->bev);

	if (evbuffer_get_length(out) == 0) {
		ssize_t k;
		do
			k = send(l->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (k < 0 && errno == EINTR);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
		}
		/* Errors surface on the bufferevent's next write. */
	}
	return n && evbuffer_add(out, p, n) ? -ENOMEM : 0;
}

/* Queue a frame without payload (or whose payload the caller adds). */
static int put_msg(struct link *l, Xfer__Peer__PeerMsg *m, uint32_t payload)
{
	uint8_t buf[FRAME_PREFIX + 1024];
	m->proto_version = XFER_PROTO_VERSION;
	/* Control headers are small; a 1 KiB stack buffer holds them. */
	if (protobuf_c_message_get_packed_size(&m->base) > sizeof(buf) - FRAME_PREFIX)
		return -EMSGSIZE;
	int n = link_frame_header(&m->base, payload, buf);
	if (n < 0)
		return n;
	stat_add(&l->stats->bytes_tx, (uint64_t)n);
	return queue_bytes(l, buf, (size_t)n);
}

static void target_from(const struct token *t, Xfer__Peer__Target *out)
{
	xfer__peer__target__init(out);
	out->region = t->region;
	out->key.data = (uint8_t *)t->key;
	out->key.len = TOKEN_KEY_LEN;
	out->offset = t->offset;
	out->length = t->length;
	out->region_length = t->region_length;
	out->mem_kind = t->mem_kind;
}

/* A Target received from the peer, as a token of ours; -EPROTO if it is
 * malformed. */
static int token_from(const struct linkset *ls, const Xfer__Peer__Target *t,
		      struct token *out)
{
	if (!t || t->key.len != TOKEN_KEY_LEN || t->offset > t->region_length ||
	    t->length > t->region_length - t->offset)
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	memcpy(out->instance_id, ls->cfg.self_id, TOKEN_INSTANCE_LEN);
	memcpy(out->key, t->key.data, TOKEN_KEY_LEN);
	out->region = t->region;
	out->offset = t->offset;
	out->length = t->length;
	out->region_length = t->region_length;
	out->mem_kind = t->mem_kind;
	return 0;
}

/* Can the link read or write r's bytes itself (xferd's mapping of a
 * memfd, or CMA)?  GPU memory needs a copy through staging first. */
static bool bytes_reachable(const struct region *r)
{
	return r->kind == REGION_MEMFD || r->kind == REGION_CMA;
}

/* Resolve a peer's token: the key is checked once per distinct token. */
static int resolve(struct link *l, const struct token *tok, uint64_t at,
		   uint64_t len, struct region **r, uint64_t *off)
{
	bool known = l->have_verified &&
		     memcmp(&l->verified, tok, sizeof(*tok)) == 0;
	int err = regtab_resolve_token(l->ls->regs, tok, at, len, !known, r,
				       off);
	if (!err && !known) {
		l->verified = *tok;
		l->have_verified = true;
	}
	return err;
}

/* resolve() for a frame that moves bytes: -ENOTSUP (that operation
 * fails, not the link) when the link cannot reach the region's memory. */
static int resolve_data(struct link *l, const struct token *tok, uint64_t at,
			uint64_t len, struct region **r, uint64_t *off)
{
	int err = resolve(l, tok, at, len, r, off);

	if (!err && !bytes_reachable(*r)) {
		region_put(*r);
		*r = NULL;
		return -ENOTSUP;
	}
	return err;
}

/* --- operations: bookkeeping --- */

static struct rpeer *find_peer(struct linkset *ls, const uint8_t *id,
			       bool create)
{
	struct rpeer *rp;

	for (rp = ls->peers; rp; rp = rp->next)
		if (memcmp(rp->id, id, LINK_ID_LEN) == 0)
			return rp;
	if (!create || !(rp = calloc(1, sizeof(*rp))))
		return NULL;
	memcpy(rp->id, id, LINK_ID_LEN);
	TAILQ_INIT(&rp->pending);
	rp->next = ls->peers;
	ls->peers = rp;
	return rp;
}

static void hash_add(struct link *l, struct xop *op)
{
	struct xop **b = &l->hash[op->id % OP_HASH];

	op->hnext = *b;
	*b = op;
	op->in_hash = true;
}

static struct xop *hash_find(struct link *l, uint64_t id)
{
	struct xop *op = l->hash[id % OP_HASH];

	while (op && op->id != id)
		op = op->hnext;
	return op;
}

static void hash_del(struct link *l, struct xop *op)
{
	struct xop **pp = &l->hash[op->id % OP_HASH];

	while (*pp != op)
		pp = &(*pp)->hnext;
	*pp = op->hnext;
	op->in_hash = false;
}

static bool in_sendq(const struct xop *op)
{
	return !op->sent_all;
}

/* End op: out of every list of l, Abort if the peer holds half of it. */
static void op_end(struct linkset *ls, struct link *l, struct xop *op,
		   int64_t result)
{
	if (l) {
		if (l->sink.xop == op) {
			/* The rest of its payload is dropped, not landed in a
			 * buffer its client may already reuse. */
			l->sink.xop = NULL;
			region_put(l->sink.r);
			l->sink.r = NULL;
		}
		if (in_sendq(op))
			TAILQ_REMOVE(&l->sendq, op, q);
		if (op->in_hash) {
			hash_del(l, op);
			/* The peer saw part of it and will not see the end. */
			if (result < 0 && l->bev &&
			    (op->opcode == XFER_OP_READ || op->done < op->len ||
			     !op->sent_all)) {
				Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
				Xfer__Peer__Abort a = XFER__PEER__ABORT__INIT;
				a.op = op->id;
				m.body_case = XFER__PEER__PEER_MSG__BODY_ABORT;
				m.abort = &a;
				put_msg(l, &m, 0);
			}
		}
		stat_add(result < 0 ? &l->stats->errors : &l->stats->ops, 1);
	}
	ls->hooks.op_done(ls->hooks.arg, op, result);
}

/* Fail everything of a peer that waits for a link. */
static void fail_pending(struct linkset *ls, struct rpeer *rp, int err)
{
	struct xop *op;

	while ((op = TAILQ_FIRST(&rp->pending))) {
		TAILQ_REMOVE(&rp->pending, op, q);
		op->sent_all = true;  /* not in any sendq */
		ls->hooks.op_done(ls->hooks.arg, op, err);
	}
	rp->asked = false;
}

/* --- sending this side's operations --- */

/* Copy len bytes of a CMA region into the output buffer. */
static int add_cma(struct evbuffer *out, const struct region *r,
		   uint64_t off, uint64_t len)
{
	struct evbuffer_iovec v[MAX_IOV];
	int n = evbuffer_reserve_space(out, (ev_ssize_t)len, v, MAX_IOV);

	if (n <= 0)
		return -ENOMEM;
	uint64_t done = 0;
	for (int i = 0; i < n && done < len; i++) {
		size_t take = v[i].iov_len < len - done ? v[i].iov_len
							 : (size_t)(len - done);
		struct iovec local = { .iov_base = v[i].iov_base, .iov_len = take };
		struct iovec remote = {
			.iov_base = (void *)(uintptr_t)(r->addr + off + done),
			.iov_len = take };
		if (!region_cma_alive(r))
			return -ESRCH;
		ssize_t got = process_vm_readv(r->pid, &local, 1, &remote, 1, 0);
		if (got != (ssize_t)take)
			return got < 0 ? -errno : -EFAULT;
		v[i].iov_len = take;
		done += take;
	}
	return evbuffer_commit_space(out, v, n) ? -ENOMEM : 0;
}

static void unref_region(const void *data, size_t len, void *arg)
{
	(void)data, (void)len;
	region_put(arg);
}

/*
 * A payload from memory of another process (CMA) is read before its
 * frame's header is queued: if that memory went away, only its own
 * operation fails, not the link.  Memfd payloads cannot fail; memory
 * the link cannot reach (GPU) fails its operation with -ENOTSUP.
 */
static int stage_payload(const struct region *r, uint64_t off, uint64_t len,
			 struct evbuffer **staged)
{
	*staged = NULL;
	if (!bytes_reachable(r))
		return -ENOTSUP;
	if (r->kind != REGION_CMA || len == 0)
		return 0;
	struct evbuffer *b = evbuffer_new();
	if (!b)
		return -ENOMEM;
	int err = add_cma(b, r, off, len);
	if (err) {
		evbuffer_free(b);
		return err;
	}
	*staged = b;
	return 0;
}

/* Queue the payload behind its header: staged bytes, or [off, off + len)
 * of memfd region r (small ones copied and sent at once, large ones by
 * reference, the region kept alive until they left the buffer). */
static int put_payload(struct link *l, struct region *r, uint64_t off,
		       uint64_t len, struct evbuffer *staged)
{
	struct evbuffer *out = bufferevent_get_output(l->bev);

	if (staged) {
		int err = evbuffer_add_buffer(out, staged) ? -ENOMEM : 0;
		evbuffer_free(staged);
		return err;
	}
	if (len == 0)
		return 0;
	if (len <= SMALL_PAYLOAD)
		return queue_bytes(l, (const uint8_t *)r->map + off, len);
	region_get(r);
	if (evbuffer_add_reference(out, (char *)r->map + off, len, unref_region,
				   r)) {
		region_put(r);
		return -ENOMEM;
	}
	return 0;
}

/* Queue the next frame of op; false if op ended meanwhile. */
static bool send_frame(struct link *l, struct xop *op)
{
	const struct token *tok = op->remote->remote;
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Target t;
	target_from(tok, &t);

	/* In the hash before any frame: if the link fails while we queue,
	 * failing the link ends this operation too. */
	if (!op->in_hash)
		hash_add(l, op);
	switch (op->opcode) {
	case XFER_OP_WRITE: {
		Xfer__Peer__WriteChunk w = XFER__PEER__WRITE_CHUNK__INIT;
		uint64_t n = op->len - op->done;
		if (n > l->ls->cfg.tcp_chunk)
			n = l->ls->cfg.tcp_chunk;
		w.op = op->id;
		w.target = &t;
		w.at = op->remote_off + op->done;
		w.last = op->done + n == op->len;
		w.notify = op->notify && w.last;
		w.notify_value = op->notify_value;
		w.total = op->len;
		m.body_case = XFER__PEER__PEER_MSG__BODY_WRITE;
		m.write = &w;
		struct evbuffer *staged;
		int err = stage_payload(op->local, op->local_off + op->done, n,
					&staged);
		if (err) {
			op_end(l->ls, l, op, err);  /* its client's memory */
			return false;
		}
		/* Header, then payload: a failure between them would leave
		 * the stream out of step, so it ends the link. */
		if (put_msg(l, &m, (uint32_t)n) ||
		    put_payload(l, op->local, op->local_off + op->done, n,
				staged)) {
			fail_link(l, -ENOMEM, "cannot queue a frame");
			return false;
		}
		op->done += n;
		op->sent_all = w.last;
		stat_add(&l->stats->bytes_tx, n);
		break;
	}
	case XFER_OP_READ: {
		Xfer__Peer__ReadRequest r = XFER__PEER__READ_REQUEST__INIT;
		r.op = op->id;
		r.source = &t;
		r.at = op->remote_off;
		r.length = op->len;
		m.body_case = XFER__PEER__PEER_MSG__BODY_READ;
		m.read = &r;
		if (put_msg(l, &m, 0)) {
			fail_link(l, -ENOMEM, "cannot queue a frame");
			return false;
		}
		op->sent_all = true;
		break;
	}
	case XFER_OP_NOTIFY: {
		Xfer__Peer__Notify nt = XFER__PEER__NOTIFY__INIT;
		nt.op = op->id;
		nt.target = &t;
		nt.value = op->notify_value;
		nt.bytes = op->notify_bytes;
		m.body_case = XFER__PEER__PEER_MSG__BODY_NOTIFY;
		m.notify = &nt;
		if (put_msg(l, &m, 0)) {
			fail_link(l, -ENOMEM, "cannot queue a frame");
			return false;
		}
		op->sent_all = true;
		break;
	}
	}
	return true;
}

/* --- serving the peer's reads --- */

static void serve_free(struct serve *s)
{
	region_put(s->r);
	free(s);
}

static void read_data(struct link *l, uint64_t op, uint64_t at, bool last,
		      int64_t result, uint32_t payload)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__ReadData d = XFER__PEER__READ_DATA__INIT;

	d.op = op;
	d.at = at;
	d.last = last;
	d.result = result;
	m.body_case = XFER__PEER__PEER_MSG__BODY_READ_DATA;
	m.read_data = &d;
	put_msg(l, &m, payload);
}

/* One ReadData frame of s; true when s is finished (and freed). */
static bool serve_frame(struct link *l, struct serve *s)
{
	uint64_t n = s->len - s->done;

	if (n > l->ls->cfg.tcp_chunk)
		n = l->ls->cfg.tcp_chunk;
	bool last = s->done + n == s->len;
	struct evbuffer *staged;
	int err = stage_payload(s->r, s->off + s->done, n, &staged);
	if (err) {
		/* The owner's memory went away: this read fails, not the
		 * link. */
		read_data(l, s->op, s->done, true, err, 0);
		serve_free(s);
		return true;
	}
	read_data(l, s->op, s->done, last, (int64_t)n, (uint32_t)n);
	if (put_payload(l, s->r, s->off + s->done, n, staged)) {
		serve_free(s);
		fail_link(l, -ENOMEM, "cannot queue a frame");
		return true;
	}
	s->done += n;
	stat_add(&l->stats->bytes_tx, n);
	if (!last)
		return false;
	serve_free(s);
	return true;
}

/* Queue frames round-robin until the output buffer is full enough. */
static void fill(struct link *l)
{
	struct evbuffer *out;

	while (l->bev && (out = bufferevent_get_output(l->bev)) &&
	       evbuffer_get_length(out) < OUT_HIGH) {
		struct xop *op = TAILQ_FIRST(&l->sendq);
		struct serve *s = TAILQ_FIRST(&l->serveq);
		if (!op && !s)
			return;
		l->serve_turn = !l->serve_turn;
		if (s && (l->serve_turn || !op)) {
			TAILQ_REMOVE(&l->serveq, s, q);
			if (!serve_frame(l, s))
				TAILQ_INSERT_TAIL(&l->serveq, s, q);
			continue;
		}
		TAILQ_REMOVE(&l->sendq, op, q);
		op->sent_all = true;  /* out of the queue while we look */
		if (!send_frame(l, op))
			continue;  /* op ended (or the link: bev is NULL) */
		if (!op->sent_all)
			TAILQ_INSERT_TAIL(&l->sendq, op, q);
	}
}

static void start_op(struct link *l, struct xop *op)
{
	op->id = ++l->next_id;
	op->done = 0;
	op->sent_all = false;
	TAILQ_INSERT_TAIL(&l->sendq, op, q);
}

/* --- receiving: the peer's frames --- */

static bool is_failed(struct link *l, uint64_t op)
{
	for (size_t i = 0; i < l->nfailed; i++)
		if (l->failed[i] == op)
			return true;
	return false;
}

static void forget_failed(struct link *l, uint64_t op)
{
	for (size_t i = 0; i < l->nfailed; i++)
		if (l->failed[i] == op) {
			l->failed[i] = l->failed[--l->nfailed];
			return;
		}
}

static int remember_failed(struct link *l, uint64_t op)
{
	if (l->nfailed == l->capfailed) {
		size_t cap = l->capfailed ? 2 * l->capfailed : 16;
		if (cap > 65536)
			return -EPROTO;  /* a peer that never ends its writes */
		uint64_t *f = realloc(l->failed, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		l->failed = f;
		l->capfailed = cap;
	}
	l->failed[l->nfailed++] = op;
	return 0;
}

static void write_ack(struct link *l, uint64_t op, int64_t result)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__WriteAck a = XFER__PEER__WRITE_ACK__INIT;

	a.op = op;
	a.result = result;
	m.body_case = XFER__PEER__PEER_MSG__BODY_WRITE_ACK;
	m.write_ack = &a;
	put_msg(l, &m, 0);
}

/* The payload of the current frame goes to region r at off (r NULL:
 * dropped, reporting err at the end). */
static void sink_start(struct link *l, uint32_t plen, struct region *r,
		       uint64_t off, int err)
{
	struct rx_sink *k = &l->sink;

	k->active = true;
	k->left = k->len = plen;
	k->r = r;
	k->off = off;
	k->err = err;
	stat_add(&l->stats->bytes_rx, plen);
}

/* n bytes of payload from p. */
static void sink_put(struct rx_sink *k, const uint8_t *p, size_t n)
{
	if (k->r && !k->err) {
		if (k->r->kind == REGION_MEMFD) {
			memcpy((char *)k->r->map + k->off, p, n);
		} else if (!bytes_reachable(k->r)) {
			k->err = -ENOTSUP;
		} else if (!region_cma_alive(k->r)) {
			k->err = -ESRCH;
		} else {
			struct iovec local = { .iov_base = (void *)p, .iov_len = n };
			struct iovec remote = {
				.iov_base = (void *)(uintptr_t)(k->r->addr + k->off),
				.iov_len = n };
			ssize_t put = process_vm_writev(k->r->pid, &local, 1,
							&remote, 1, 0);
			if (put != (ssize_t)n)
				k->err = put < 0 ? -errno : -EFAULT;
		}
	}
	k->off += n;
	k->left -= n;
}

/* The whole payload is in: acknowledge, notify, end our read. */
static void sink_finish(struct link *l)
{
	struct rx_sink *k = &l->sink;

	k->active = false;
	if (k->is_write) {
		if (!k->r && !k->err) {
			/* An operation that had failed before: drop silently. */
			if (k->last)
				forget_failed(l, k->op);
		} else if (k->err) {
			write_ack(l, k->op, k->err);
			if (!k->last && remember_failed(l, k->op))
				fail_link(l, -EPROTO, "too many failed writes");
		} else if (k->last) {
			write_ack(l, k->op, (int64_t)k->total);
			if (k->notify)
				l->ls->hooks.notify_local(l->ls->hooks.arg, k->r,
							  k->notify_value,
							  (int64_t)k->total);
		}
	} else if (k->xop) {
		struct xop *op = k->xop;
		op->done += k->len;
		if (k->err)
			op_end(l->ls, l, op, k->err);  /* our client's memory went */
		else if (k->last)
			op_end(l->ls, l, op, (int64_t)op->len);
	}
	region_put(k->r);
	k->r = NULL;
	k->xop = NULL;
}

/* A WriteChunk of the peer; its plen payload bytes follow. */
static int on_write(struct link *l, const Xfer__Peer__WriteChunk *w,
		    uint32_t plen)
{
	struct token tok;
	struct region *r = NULL;
	uint64_t off = 0;
	int err = 0;

	if (plen > w->total)
		return -EPROTO;  /* a chunk larger than its whole operation */
	l->sink = (struct rx_sink){ .is_write = true, .op = w->op,
				    .last = w->last, .notify = w->notify,
				    .notify_value = w->notify_value,
				    .total = w->total };
	if (!is_failed(l, w->op)) {
		if (token_from(l->ls, w->target, &tok))
			return -EPROTO;
		err = resolve_data(l, &tok, w->at, plen, &r, &off);
		if (err == -EACCES || err == -ERANGE)
			return -EPROTO;
	}
	/* An error here (-ESTALE) fails this operation only. */
	sink_start(l, plen, r, off, err);
	return 0;
}

static int on_read_request(struct link *l, const Xfer__Peer__ReadRequest *rq)
{
	struct token tok;
	struct region *r;
	uint64_t off;

	if (token_from(l->ls, rq->source, &tok))
		return -EPROTO;
	int err = resolve_data(l, &tok, rq->at, rq->length, &r, &off);
	if (err == -EACCES || err == -ERANGE)
		return -EPROTO;
	if (err) {
		read_data(l, rq->op, 0, true, err, 0);
		return 0;
	}
	struct serve *s = calloc(1, sizeof(*s));
	if (!s) {
		region_put(r);
		read_data(l, rq->op, 0, true, -ENOMEM, 0);
		return 0;
	}
	*s = (struct serve){ .op = rq->op, .r = r, .off = off,
			     .len = rq->length };
	TAILQ_INSERT_TAIL(&l->serveq, s, q);
	return 0;
}

/* Payload of a read of ours follows. */
static int on_read_data(struct link *l, const Xfer__Peer__ReadData *d,
			uint32_t plen)
{
	struct xop *op = hash_find(l, d->op);

	l->sink = (struct rx_sink){ .last = d->last };
	if (!op || op->opcode != XFER_OP_READ) {
		/* It timed out or was cancelled meanwhile: drop the bytes. */
		sink_start(l, plen, NULL, 0, 0);
		return 0;
	}
	if (d->result < 0) {
		if (plen)
			return -EPROTO;
		op_end(l->ls, l, op, d->result);
		return 0;
	}
	if (d->at != op->done || plen > op->len - op->done ||
	    (uint64_t)d->result != plen || (d->last && op->done + plen != op->len))
		return -EPROTO;
	region_get(op->local);
	l->sink.xop = op;
	sink_start(l, plen, op->local, op->local_off + op->done, 0);
	return 0;
}

static int on_ack(struct link *l, const Xfer__Peer__WriteAck *a)
{
	struct xop *op = hash_find(l, a->op);

	if (!op)
		return 0;  /* ended already (deadline) */
	if (op->opcode == XFER_OP_READ)
		return -EPROTO;
	if (a->result >= 0 && !op->sent_all)
		return -EPROTO;  /* success before the last chunk */
	op_end(l->ls, l, op, a->result >= 0 ? (int64_t)op->len : a->result);
	return 0;
}

static int on_notify(struct link *l, const Xfer__Peer__Notify *nt)
{
	struct token tok;
	struct region *r;
	uint64_t off;

	if (token_from(l->ls, nt->target, &tok))
		return -EPROTO;
	int err = resolve(l, &tok, 0, 0, &r, &off);
	if (err == -EACCES || err == -ERANGE)
		return -EPROTO;
	if (!err) {
		l->ls->hooks.notify_local(l->ls->hooks.arg, r, nt->value,
					  (int64_t)nt->bytes);
		region_put(r);
	}
	write_ack(l, nt->op, err);
	return 0;
}

static void on_abort(struct link *l, uint64_t op)
{
	forget_failed(l, op);
	struct serve *s;
	TAILQ_FOREACH(s, &l->serveq, q) {
		if (s->op == op) {
			TAILQ_REMOVE(&l->serveq, s, q);
			serve_free(s);
			return;
		}
	}
}

static void on_check(struct link *l, const Xfer__Peer__CheckToken *c)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__CheckReply rep = XFER__PEER__CHECK_REPLY__INIT;
	Xfer__Peer__RdmaMemory mem = XFER__PEER__RDMA_MEMORY__INIT;
	uint32_t rkeys[RDMA_DEV_MAX];
	struct token tok;
	struct region *r;
	uint64_t off;

	rep.id = c->id;
	rep.error = token_from(l->ls, c->target, &tok) ? -EINVAL : 0;
	if (!rep.error) {
		/* Always the full key check: this is what it is for. */
		rep.error = regtab_resolve_token(l->ls->regs, &tok, 0, 0, true,
						 &r, &off);
	}
	if (!rep.error) {
		/* The region's NIC registration, for one-sided access. */
		int n = rdma_dev_count();
		bool any = false;
		for (int d = 0; d < n && d < RDMA_DEV_MAX; d++) {
			rkeys[d] = 0;
			any |= rdma_mr_keys(r, d, NULL, &rkeys[d]);
		}
		if (any) {
			mem.addr = (uint64_t)(uintptr_t)r->map;
			mem.rkeys = rkeys;
			mem.n_rkeys = (size_t)n;
			rep.rdma = &mem;
		}
		region_put(r);
	}
	m.body_case = XFER__PEER__PEER_MSG__BODY_CHECK_REPLY;
	m.check_reply = &rep;
	put_msg(l, &m, 0);
}

/*
 * One frame: its header, and plen payload bytes that follow (a handler
 * of a frame with payload sets up l->sink for them).
 * Returns 0 or -EPROTO (the peer broke the protocol: drop the link).
 */
static int dispatch(struct link *l, const uint8_t *hdr, size_t hlen,
		    uint32_t plen, const char **why)
{
	Xfer__Peer__PeerMsg *m = xfer__peer__peer_msg__unpack(NULL, hlen, hdr);
	int err = 0;

	*why = "malformed frame";
	if (!m)
		return -EPROTO;
	if (m->proto_version != XFER_PROTO_VERSION) {
		*why = "protocol version mismatch";
		err = -EPROTO;
		goto out;
	}
	bool payload_ok = m->body_case == XFER__PEER__PEER_MSG__BODY_WRITE ||
			  m->body_case == XFER__PEER__PEER_MSG__BODY_READ_DATA;
	if (plen && !payload_ok) {
		*why = "payload on a frame that has none";
		err = -EPROTO;
		goto out;
	}
	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_WRITE:
		*why = "bad write (key, range or size)";
		err = on_write(l, m->write, plen);
		break;
	case XFER__PEER__PEER_MSG__BODY_WRITE_ACK:
		*why = "bad write acknowledgement";
		err = on_ack(l, m->write_ack);
		break;
	case XFER__PEER__PEER_MSG__BODY_READ:
		*why = "bad read request (key or range)";
		err = on_read_request(l, m->read);
		break;
	case XFER__PEER__PEER_MSG__BODY_READ_DATA:
		*why = "bad read data";
		err = on_read_data(l, m->read_data, plen);
		break;
	case XFER__PEER__PEER_MSG__BODY_NOTIFY:
		*why = "bad notify (key or range)";
		err = on_notify(l, m->notify);
		break;
	case XFER__PEER__PEER_MSG__BODY_ABORT:
		on_abort(l, m->abort->op);
		break;
	case XFER__PEER__PEER_MSG__BODY_CHECK:
		on_check(l, m->check);
		break;
	case XFER__PEER__PEER_MSG__BODY_PING: {
		Xfer__Peer__PeerMsg r = XFER__PEER__PEER_MSG__INIT;
		Xfer__Peer__Pong pong = XFER__PEER__PONG__INIT;
		pong.nonce = m->ping->nonce;
		pong.sent_ns = m->ping->sent_ns;
		r.body_case = XFER__PEER__PEER_MSG__BODY_PONG;
		r.pong = &pong;
		put_msg(l, &r, 0);
		break;
	}
	case XFER__PEER__PEER_MSG__BODY_PONG:
		if (m->pong->nonce == 0) {  /* our keepalive */
			uint64_t now = now_ns();
			if (m->pong->sent_ns && m->pong->sent_ns <= now)
				atomic_store_explicit(&l->stats->rtt_ns,
						      now - m->pong->sent_ns,
						      memory_order_relaxed);
			break;
		}
		/* an xferctl ping: answered on the main thread */
		__attribute__((fallthrough));
	case XFER__PEER__PEER_MSG__BODY_LOOKUP:
	case XFER__PEER__PEER_MSG__BODY_LOOKUP_REPLY:
	case XFER__PEER__PEER_MSG__BODY_CHECK_REPLY:
		l->ls->hooks.ctl_frame(l->ls->hooks.arg, l->peer->id, hdr, hlen);
		break;
	case XFER__PEER__PEER_MSG__BODY_QP_CONNECT:
	case XFER__PEER__PEER_MSG__BODY_QP_ACCEPT:
		l->ls->hooks.rdma_frame(l->ls->hooks.arg, l->peer->id, m);
		break;
	case XFER__PEER__PEER_MSG__BODY_ERROR:
		log_warnx("peer says: %s (%d)",
			  m->error->reason ? m->error->reason : "",
			  m->error->code);
		*why = "peer closed the link with an error";
		err = -EPROTO;
		break;
	default:
		*why = "unexpected message on an established link";
		err = -EPROTO;
		break;
	}
out:
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	return err;
}

/*
 * Parse what is buffered: frames, and payload bytes for the sink.
 * Returns false if the link failed.
 */
static bool consume(struct link *l)
{
	const char *why = NULL;

	for (;;) {
		size_t have = l->rx_len - l->rx_off;
		if (l->sink.active) {
			size_t n = have < l->sink.left ? have : (size_t)l->sink.left;
			sink_put(&l->sink, l->rxbuf + l->rx_off, n);
			l->rx_off += n;
			if (l->sink.left)
				return true;  /* more payload to come */
			sink_finish(l);
			if (!l->bev)
				return false;
			continue;
		}
		uint32_t hlen, plen;
		if (have < FRAME_PREFIX)
			return true;
		memcpy(&hlen, l->rxbuf + l->rx_off, 4);
		memcpy(&plen, l->rxbuf + l->rx_off + 4, 4);
		if (hlen == 0 || hlen > PEER_MAX_HEADER ||
		    plen > PEER_MAX_PAYLOAD) {
			fail_link(l, -EPROTO, "frame length out of bounds");
			return false;
		}
		if (have < FRAME_PREFIX + (size_t)hlen)
			return true;
		const uint8_t *hdr = l->rxbuf + l->rx_off + FRAME_PREFIX;
		l->rx_off += FRAME_PREFIX + hlen;
		stat_add(&l->stats->bytes_rx, FRAME_PREFIX + hlen);
		int err = dispatch(l, hdr, hlen, plen, &why);
		if (err) {
			fail_link(l, err, why);
			return false;
		}
		if (!l->bev)
			return false;
		if (plen && !l->sink.active) {
			fail_link(l, -EPROTO, "payload on a frame that has none");
			return false;
		}
		if (l->sink.active && l->sink.left == 0) {
			sink_finish(l);
			if (!l->bev)
				return false;
		}
	}
}

/* Big payloads into a memfd region skip the buffer: recv() lands them. */
static bool direct_target(const struct link *l)
{
	const struct rx_sink *k = &l->sink;

	return k->active && k->r && !k->err && k->r->kind == REGION_MEMFD &&
	       l->rx_off == l->rx_len;
}

/*
 * Backpressure: a peer that sends but does not read (its replies and the
 * reads it asked for pile up here) is not read from until the output
 * buffer has drained.
 */
static bool output_full(struct link *l)
{
	return evbuffer_get_length(bufferevent_get_output(l->bev)) > OUT_CAP;
}

static void on_fd_read(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	(void)what;

	l->ls->events++;
	l->last_rx_ns = now_ns();
	/* A bounded number of reads per call: the event is level-triggered
	 * and fires again, and rings, timers and other links get their turn
	 * in between. */
	for (int round = 0; round < READS_PER_CALL; round++) {
		if (!consume(l))
			return;
		if (output_full(l)) {
			event_del(l->ev_read);
			l->read_paused = true;
			break;
		}
		uint8_t *dst;
		size_t room;
		bool direct = direct_target(l);
		if (direct) {
			dst = (uint8_t *)l->sink.r->map + l->sink.off;
			room = (size_t)l->sink.left;
		} else {
			/* Keep the unparsed bytes at the front. */
			if (l->rx_off) {
				memmove(l->rxbuf, l->rxbuf + l->rx_off,
					l->rx_len - l->rx_off);
				l->rx_len -= l->rx_off;
				l->rx_off = 0;
			}
			dst = l->rxbuf + l->rx_len;
			room = RXBUF - l->rx_len;
		}
		ssize_t n = recv(fd, dst, room, 0);
		if (n == 0) {
			fail_link(l, -ECONNRESET, "connection closed by the peer");
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				fail_link(l, -ECONNRESET, "connection error");
			break;
		}
		if (direct) {
			l->sink.off += (uint64_t)n;
			l->sink.left -= (uint64_t)n;
		} else {
			l->rx_len += (size_t)n;
		}
	}
	fill(l);
}

static void on_writable(struct bufferevent *bev, void *arg)
{
	struct link *l = arg;
	(void)bev;

	l->ls->events++;
	if (l->read_paused && !output_full(l)) {
		l->read_paused = false;
		if (event_add(l->ev_read, NULL)) {
			fail_link(l, -ENOMEM, "cannot watch the socket");
			return;
		}
	}
	fill(l);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct link *l = arg;
	(void)bev;

	l->ls->events++;
	if (what & BEV_EVENT_EOF)
		fail_link(l, -ECONNRESET, "connection closed by the peer");
	else if (what & BEV_EVENT_ERROR)
		fail_link(l, -ECONNRESET, "connection error");
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct link *l = arg;
	uint64_t now = now_ns();
	(void)fd, (void)what;

	if (now - l->last_rx_ns > 1000000ull * l->ls->cfg.peer_timeout_ms) {
		fail_link(l, -ETIMEDOUT, "no traffic from the peer within peer_timeout_ms");
		return;
	}
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__Ping ping = XFER__PEER__PING__INIT;
	ping.sent_ns = now;
	m.body_case = XFER__PEER__PEER_MSG__BODY_PING;
	m.ping = &ping;
	put_msg(l, &m, 0);
}

/* --- link life cycle --- */

static void free_link(struct link *l)
{
	struct serve *s;

	while ((s = TAILQ_FIRST(&l->serveq))) {
		TAILQ_REMOVE(&l->serveq, s, q);
		serve_free(s);
	}
	if (l->tick)
		event_free(l->tick);
	if (l->ev_read)
		event_free(l->ev_read);
	if (l->bev)
		bufferevent_free(l->bev);
	region_put(l->sink.r);
	free(l->rxbuf);
	free(l->failed);
	free(l);
}

static void reap_dead(struct linkset *ls)
{
	while (ls->dead) {
		struct link *l = ls->dead;
		ls->dead = l->next_dead;
		free_link(l);
	}
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	reap_dead(arg);
}

/* Setting the link up failed half-way: take it back. */
static void fail_link_setup(struct link *l)
{
	struct linkset *ls = l->ls;
	struct rpeer *rp = l->peer;

	rp->link = NULL;
	ls->nlinks--;
	fail_pending(ls, rp, -ENOMEM);
	ls->hooks.link_down(ls->hooks.arg, rp->id, l->gen, -ENOMEM,
			    "cannot set the link up");
	free_link(l);
}

/*
 * The link is gone: every operation on it ends with err.  The struct
 * itself is freed from the event loop later, so that callers up the
 * stack may still look at l->bev (NULL now) after calling this.
 */
static void fail_link(struct link *l, int err, const char *why)
{
	struct linkset *ls = l->ls;
	struct rpeer *rp = l->peer;
	char id[9];

	if (!l->bev)
		return;
	snprintf(id, sizeof(id), "%02x%02x%02x%02x", rp->id[0], rp->id[1],
		 rp->id[2], rp->id[3]);
	log_info("link to %s: %s", id, why);
	/* No more frames: Aborts are pointless now. */
	event_free(l->ev_read);
	l->ev_read = NULL;
	bufferevent_free(l->bev);  /* closes the socket */
	l->bev = NULL;
	event_free(l->tick);
	l->tick = NULL;
	rp->link = NULL;
	ls->nlinks--;
	struct xop *op;
	while ((op = TAILQ_FIRST(&l->sendq)))
		op_end(ls, l, op, err);
	for (unsigned b = 0; b < OP_HASH; b++)
		while ((op = l->hash[b]))
			op_end(ls, l, op, err);
	fail_pending(ls, rp, err);
	ls->hooks.link_down(ls->hooks.arg, rp->id, l->gen, err, why);
	l->next_dead = ls->dead;
	ls->dead = l;
	event_active(ls->ev_reap, EV_TIMEOUT, 0);
}

void linkset_attach(struct linkset *ls, int fd, const uint8_t id[LINK_ID_LEN],
		    uint64_t gen, struct link_stats *stats, const void *pending,
		    size_t pending_len)
{
	struct rpeer *rp = find_peer(ls, id, true);
	struct link *l = calloc(1, sizeof(*l));

	if (!rp || !l) {
		free(l);
		close(fd);
		/* The main thread must learn this link never came up. */
		ls->hooks.link_down(ls->hooks.arg, id, gen, -ENOMEM,
				    "out of memory");
		return;
	}
	if (rp->link)  /* replaced: the peer evidently lost the old one */
		fail_link(rp->link, -ECONNRESET, "replaced by a new link");
	l->ls = ls;
	l->peer = rp;
	l->gen = gen;
	l->stats = stats;
	TAILQ_INIT(&l->sendq);
	TAILQ_INIT(&l->serveq);
	l->last_rx_ns = now_ns();
	l->fd = fd;
	l->rxbuf = pending_len <= RXBUF ? malloc(RXBUF) : NULL;
	l->bev = bufferevent_socket_new(ls->base, fd, BEV_OPT_CLOSE_ON_FREE);
	l->tick = event_new(ls->base, -1, EV_PERSIST, on_tick, l);
	l->ev_read = event_new(ls->base, fd, EV_READ | EV_PERSIST, on_fd_read,
			       l);
	struct timeval tv = ms_to_timeval(ls->cfg.keepalive_ms);
	/* From here the link is the peer's: a failure goes through
	 * fail_link, which undoes all of this and tells the main thread. */
	rp->link = l;
	rp->asked = false;
	ls->nlinks++;
	if (!l->bev) {
		close(fd);
		l->bev = NULL;
	}
	if (!l->bev || !l->tick || !l->ev_read || !l->rxbuf ||
	    event_add(l->tick, &tv) || event_add(l->ev_read, NULL)) {
		fail_link_setup(l);
		return;
	}
	/* The bufferevent only writes; on_fd_read receives. */
	bufferevent_setcb(l->bev, NULL, on_writable, on_event, l);
	/* libevent writes 16 KiB per system call by default: far too
	 * little for a link that moves megabyte chunks. */
	bufferevent_set_max_single_write(l->bev, SINGLE_IO);
	bufferevent_setwatermark(l->bev, EV_WRITE, OUT_LOW, 0);
	bufferevent_disable(l->bev, EV_READ);
	bufferevent_enable(l->bev, EV_WRITE);

	struct xop *op;
	while ((op = TAILQ_FIRST(&rp->pending))) {
		TAILQ_REMOVE(&rp->pending, op, q);
		start_op(l, op);
	}
	if (pending_len) {
		memcpy(l->rxbuf, pending, pending_len);
		l->rx_len = pending_len;
	}
	on_fd_read(fd, EV_READ, l);
}

void linkset_close(struct linkset *ls, const uint8_t id[LINK_ID_LEN], int err,
		   const char *why)
{
	struct rpeer *rp = find_peer(ls, id, false);

	if (!rp)
		return;
	if (rp->link)
		fail_link(rp->link, err, why);
	else
		fail_pending(ls, rp, err);
}

void linkset_send_ctl(struct linkset *ls, const uint8_t id[LINK_ID_LEN],
		      const uint8_t *msg, size_t len)
{
	struct rpeer *rp = find_peer(ls, id, false);
	uint8_t prefix[FRAME_PREFIX];
	uint32_t h = (uint32_t)len, p = 0;

	if (!rp || !rp->link || len == 0 || len > PEER_MAX_HEADER)
		return;
	memcpy(prefix, &h, 4);
	memcpy(prefix + 4, &p, 4);
	queue_bytes(rp->link, prefix, sizeof(prefix));
	queue_bytes(rp->link, msg, len);
}

void linkset_submit(struct linkset *ls, struct xop *op)
{
	const struct token *tok = op->remote->remote;
	struct rpeer *rp = find_peer(ls, tok->instance_id, true);

	if (!rp) {
		ls->hooks.op_done(ls->hooks.arg, op, -ENOMEM);
		return;
	}
	if (rp->link) {
		start_op(rp->link, op);
		fill(rp->link);
		return;
	}
	op->sent_all = true;  /* not in a send queue */
	TAILQ_INSERT_TAIL(&rp->pending, op, q);
	if (!rp->asked) {
		rp->asked = true;
		ls->hooks.need_peer(ls->hooks.arg, tok);
	}
}

/*
 * End every operation `want` picks with result; returns how many.  The
 * saved `next` pointers stay valid because ending an operation with an
 * error never starts another one nor fails a link: a batch that fails
 * sends no notification.
 */
static unsigned each_op(struct linkset *ls,
			bool (*want)(const struct xop *op, const void *arg),
			const void *arg, int64_t result)
{
	unsigned n = 0;

	for (struct rpeer *rp = ls->peers; rp; rp = rp->next) {
		struct xop *op, *next;
		for (op = TAILQ_FIRST(&rp->pending); op; op = next) {
			next = TAILQ_NEXT(op, q);
			if (want(op, arg)) {
				TAILQ_REMOVE(&rp->pending, op, q);
				ls->hooks.op_done(ls->hooks.arg, op, result);
				n++;
			}
		}
		struct link *l = rp->link;
		if (!l)
			continue;
		for (op = TAILQ_FIRST(&l->sendq); op; op = next) {
			next = TAILQ_NEXT(op, q);
			if (want(op, arg)) {
				op_end(ls, l, op, result);
				n++;
			}
		}
		for (unsigned b = 0; b < OP_HASH; b++) {
			for (op = l->hash[b]; op; op = next) {
				next = op->hnext;
				if (want(op, arg)) {
					op_end(ls, l, op, result);
					n++;
				}
			}
		}
	}
	return n;
}

static bool of_client(const struct xop *op, const void *arg)
{
	return op->pc == arg;
}

void linkset_cancel_client(struct linkset *ls, const struct prog_client *pc)
{
	each_op(ls, of_client, pc, -ECANCELED);
}

static bool expired(const struct xop *op, const void *arg)
{
	return op->deadline_ns <= *(const uint64_t *)arg;
}

bool linkset_expire(struct linkset *ls, uint64_t now)
{
	bool any = each_op(ls, expired, &now, -ETIMEDOUT) > 0;

	/* Nothing waits for a link any more: the next operation asks the
	 * main thread again (its answer may have been lost). */
	for (struct rpeer *rp = ls->peers; rp; rp = rp->next)
		if (!rp->link && TAILQ_EMPTY(&rp->pending))
			rp->asked = false;
	return any;
}

bool linkset_active(const struct linkset *ls)
{
	return ls->nlinks > 0;
}

uint64_t linkset_take_events(struct linkset *ls)
{
	uint64_t n = ls->events;

	ls->events = 0;
	return n;
}

struct linkset *linkset_create(struct event_base *base, struct regtab *regs,
			       const struct linkset_cfg *cfg,
			       const struct linkset_hooks *hooks)
{
	struct linkset *ls = calloc(1, sizeof(*ls));

	if (!ls)
		return NULL;
	ls->base = base;
	ls->regs = regs;
	ls->cfg = *cfg;
	ls->hooks = *hooks;
	ls->ev_reap = event_new(base, -1, 0, on_reap, ls);
	if (!ls->ev_reap) {
		free(ls);
		return NULL;
	}
	return ls;
}

void linkset_set_cfg(struct linkset *ls, const struct linkset_cfg *cfg)
{
	ls->cfg = *cfg;
}

void linkset_destroy(struct linkset *ls)
{
	if (!ls)
		return;
	for (struct rpeer *rp = ls->peers, *next; rp; rp = next) {
		next = rp->next;
		if (rp->link)
			fail_link(rp->link, -ECONNRESET, "xferd is stopping");
		fail_pending(ls, rp, -ECONNRESET);
		free(rp);
	}
	reap_dead(ls);
	event_free(ls->ev_reap);
	free(ls);
}

/* --- as a transport (transport.h): the path of last resort --- */

static bool tcp_accepts(void *impl, const struct xop *op)
{
	(void)impl, (void)op;
	return true;
}

static void tcp_submit(void *impl, struct xop *op)
{
	op->path = XFER_PATH_TCP;
	linkset_submit(impl, op);
}

static void tcp_cancel_client(void *impl, const struct prog_client *pc)
{
	linkset_cancel_client(impl, pc);
}

static bool tcp_expire(void *impl, uint64_t now_ns)
{
	return linkset_expire(impl, now_ns);
}

const struct transport_ops tcp_transport_ops = {
	.name = "tcp",
	.accepts = tcp_accepts,
	.submit = tcp_submit,
	.cancel_client = tcp_cancel_client,
	.expire = tcp_expire,
};
