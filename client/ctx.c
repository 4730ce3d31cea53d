/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctx.c - connecting to xferd, the handshake, control round trips.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"
#include "common/rendezvous.h"
#include "common/wire.h"

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int ctx_call_fds(struct xfer_ctx *ctx, Xfer__Client__ClientMsg *m,
		 const int *fds, unsigned nfds,
		 Xfer__Client__ClientMsg **reply, int *rfds, unsigned *rnfds)
{
	uint8_t pkt[WIRE_MAX_PACKET];
	Xfer__Client__ClientMsg *r = NULL;
	int err;

	*rnfds = 0;
	if (ctx->gone)
		return -ENOTCONN;
	m->proto_version = XFER_PROTO_VERSION;
	m->seq = ++ctx->seq;
	err = wire_send(ctx->sock, WIRE_TAG_CLIENT, &m->base, fds, nfds);
	if (err) {
		if (err == -EPIPE || err == -ECONNRESET) {
			ctx->gone = true;
			err = -ENOTCONN;
		}
		return err;
	}
	ssize_t n = wire_recv(ctx->sock, pkt, rfds, rnfds);
	if (n <= 0) {
		ctx->gone = true;
		return n == 0 || n == -ECONNRESET ? -ENOTCONN : (int)n;
	}
	if (wire_tag(pkt, (size_t)n) == WIRE_TAG_CLIENT)
		r = xfer__client__client_msg__unpack(NULL, (size_t)n - WIRE_TAG_LEN,
						     pkt + WIRE_TAG_LEN);
	if (!r || r->proto_version != XFER_PROTO_VERSION) {
		err = -EPROTO;
	} else if (r->body_case == XFER__CLIENT__CLIENT_MSG__BODY_GOODBYE) {
		ctx->gone = true;
		err = -ENOTCONN;
	} else if (r->seq != m->seq) {
		err = -EPROTO;
	} else if (r->body_case == XFER__CLIENT__CLIENT_MSG__BODY_STATUS &&
		   r->status->error) {
		/* Errors are negative errnos; anything else is garbage. */
		err = r->status->error < 0 ? r->status->error : -EPROTO;
	} else {
		*reply = r;
		return 0;
	}
	if (r)
		xfer__client__client_msg__free_unpacked(r, NULL);
	wire_close_fds(rfds, rnfds);
	return err;
}

int ctx_call(struct xfer_ctx *ctx, Xfer__Client__ClientMsg *m,
	     const int *fds, unsigned nfds, Xfer__Client__ClientMsg **reply)
{
	int rfds[WIRE_MAX_FDS];
	unsigned rnfds;
	int err = ctx_call_fds(ctx, m, fds, nfds, reply, rfds, &rnfds);

	if (!err && rnfds) {
		wire_close_fds(rfds, &rnfds);
		xfer__client__client_msg__free_unpacked(*reply, NULL);
		return -EPROTO;
	}
	return err;
}

/* Fill the ring layout from the reply; the view checks it. */
static void layout_from(const Xfer__Client__RingLayout *rl,
			struct xfer_ring_offsets *o)
{
	*o = (struct xfer_ring_offsets){
		.map_size = rl->map_size,
		.sq_entries = rl->sq_entries,
		.cq_entries = rl->cq_entries,
		.magic = rl->magic,
		.sq_head = rl->sq_head,
		.sq_tail = rl->sq_tail,
		.sq_flags = rl->sq_flags,
		.sqes = rl->sqes,
		.cq_head = rl->cq_head,
		.cq_tail = rl->cq_tail,
		.cq_flags = rl->cq_flags,
		.cq_overflow = rl->cq_overflow,
		.cqes = rl->cqes,
		.idx = rl->idx,
		.idx_size = rl->idx_size,
		.cq_senders = rl->cq_senders,
		.cq_sender_size = rl->cq_sender_size,
		.sq_msgs = rl->sq_msgs,
		.sq_msg_size = rl->sq_msg_size,
		.cq_msgs = rl->cq_msgs,
		.cq_msg_size = rl->cq_msg_size,
	};
}

/*
 * Where other nodes reach our xferd.  Tokens hold TOKEN_MAX_ADDRS; any
 * more are left out.  A node name too long for a token stays out of
 * tokens too: like the addresses it is only a hint.
 */
static int take_addresses(struct xfer_ctx *ctx,
			  const Xfer__Client__HelloReply *hr)
{
	size_t n = hr->n_addresses < TOKEN_MAX_ADDRS ? hr->n_addresses
						     : TOKEN_MAX_ADDRS;

	for (size_t i = 0; i < n; i++) {
		const Xfer__Token__Address *m = hr->addresses[i];
		struct token_addr *a = &ctx->addrs[i];
		if ((m->ip.len != 4 && m->ip.len != 16) ||
		    m->prefix_len > 8 * m->ip.len || m->port > UINT16_MAX)
			return -EPROTO;
		memcpy(a->ip, m->ip.data, m->ip.len);
		a->ip_len = (uint8_t)m->ip.len;
		a->prefix_len = (uint8_t)m->prefix_len;
		a->port = (uint16_t)m->port;
	}
	ctx->naddrs = (uint32_t)n;
	if (hr->node_name && strlen(hr->node_name) < TOKEN_NODE_NAME_MAX)
		strcpy(ctx->node_name, hr->node_name);
	return 0;
}

static int handshake(struct xfer_ctx *ctx, const char *sender_name,
		     unsigned cls)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Hello hello = XFER__CLIENT__HELLO__INIT;
	Xfer__Client__ClientMsg *r = NULL;
	struct xfer_ring_offsets off;
	int fds[WIRE_MAX_FDS];
	unsigned nfds;
	int err;

	hello.name = program_invocation_short_name;
	/* The message areas: an xferd that predates them leaves them out
	 * (xfer_sqe_set_message then says -EOPNOTSUPP). */
	hello.notify_msgs = true;
	hello.sender_name = (char *)(sender_name ? sender_name : "");
	/* An xferd that predates classes ignores it: its order is the
	 * default class's. */
	hello.traffic_class = cls;
	/* Per-entry phase ((F), (G) of common/ring.h), unless the
	 * environment says to speak the tails-only protocol of ring 4
	 * (to compare the two, or to test an xferd with an older client). */
	const char *phase = getenv("XFER_RING_PHASE");
	hello.ring_phase = !phase || strcmp(phase, "0") != 0;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO;
	m.hello = &hello;
	err = ctx_call_fds(ctx, &m, NULL, 0, &r, fds, &nfds);
	if (err)
		return err;
	err = -EPROTO;
	if (r->body_case != XFER__CLIENT__CLIENT_MSG__BODY_HELLO_REPLY ||
	    nfds != 3 || !r->hello_reply->ring ||
	    r->hello_reply->instance_id.len != TOKEN_INSTANCE_LEN)
		goto out;
	const Xfer__Client__HelloReply *hr = r->hello_reply;
	layout_from(hr->ring, &off);
	ctx->ring_map = mmap(NULL, off.map_size, PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_POPULATE, fds[0], 0);
	if (ctx->ring_map == MAP_FAILED) {
		ctx->ring_map = NULL;
		err = -errno;
		goto out;
	}
	ctx->ring_len = off.map_size;
	err = ring_view_init(&ctx->ring, ctx->ring_map, ctx->ring_len, &off);
	if (err)
		goto out;
	/* An xferd that predates phase leaves the field false. */
	ctx->ring.phase = hello.ring_phase && hr->ring_phase;
	/* XFER_RING_PHASE=sq: the SQ by phase, the CQ by cq_tail. */
	ctx->cq_by_seq = ctx->ring.phase && !(phase && !strcmp(phase, "sq"));
	if (ctx->ring.phase) {
		ctx->sq_stamped = calloc((ctx->ring.sq_entries + 63) / 64,
					 sizeof(*ctx->sq_stamped));
		if (!ctx->sq_stamped) {
			err = -ENOMEM;
			goto out;
		}
	}
	close(fds[0]);
	ctx->sq_efd = fds[1];
	ctx->cq_efd = fds[2];
	nfds = 0;
	ctx->client_id = hr->client_id;
	ctx->uid = hr->uid;
	ctx->daemon_pid = (pid_t)hr->daemon_pid;
	memcpy(ctx->instance_id, hr->instance_id.data, TOKEN_INSTANCE_LEN);
	err = take_addresses(ctx, hr);
	if (err)
		goto out;
	/* Start where xferd is (a fresh ring is all zero, but be exact). */
	ctx->sq_tail = ctx->sq_published = ctx->sq_head_cache =
		atomic_load_explicit(ctx->ring.sq_tail, memory_order_relaxed);
	ctx->cq_head = atomic_load_explicit(ctx->ring.cq_head,
					    memory_order_relaxed);
	err = 0;
out:
	wire_close_fds(fds, &nfds);
	xfer__client__client_msg__free_unpacked(r, NULL);
	return err;
}

/* What xferd takes as a sender name (daemon/core/notify_msg.h). */
static bool sender_name_ok(const char *name)
{
	size_t len = strlen(name);

	if (len > XFER_SENDER_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] > 0x7e)
			return false;
	return true;
}

XFER_EXPORT int xfer_open(const char *socket_path, struct xfer_ctx **out)
{
	return xfer_open_named(socket_path, NULL, out);
}

XFER_EXPORT int xfer_open_named(const char *socket_path, const char *name,
				struct xfer_ctx **out)
{
	return xfer_open_class(socket_path, name, XFER_CLASS_DEFAULT, out);
}

XFER_EXPORT int xfer_open_class(const char *socket_path, const char *name,
				unsigned cls, struct xfer_ctx **out)
{
	char path[108];
	struct xfer_ctx *ctx;
	int err;

	if (!out || (name && !sender_name_ok(name)) ||
	    cls >= XFER_CLASS__COUNT)
		return -EINVAL;
	if (socket_path)
		snprintf(path, sizeof(path), "%s", socket_path);
	else
		rendezvous_default_socket(path, sizeof(path), true);
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->sq_efd = ctx->cq_efd = ctx->event_fd = -1;
	ctx->spin_us = 20;
	ctx->sock = connect_to(path);
	if (ctx->sock < 0) {
		err = ctx->sock;
		free(ctx);
		return err;
	}
	err = handshake(ctx, name, cls);
	if (err) {
		xfer_close(ctx);
		return err;
	}
	/*
	 * Under Yama ptrace_scope 1, xferd may reach xfer_reg'd memory only
	 * if we name it.  Without Yama the call fails harmlessly.
	 */
	prctl(PR_SET_PTRACER, (unsigned long)ctx->daemon_pid, 0, 0, 0);
	*out = ctx;
	return 0;
}

XFER_EXPORT int xfer_ctx_identity(const struct xfer_ctx *ctx,
				  struct xfer_cqe_sender *out)
{
	if (!ctx || !out)
		return -EINVAL;
	*out = (struct xfer_cqe_sender){
		.client = ctx->client_id,
		.uid = ctx->uid,
	};
	memcpy(out->node, ctx->instance_id, sizeof(out->node));
	return 0;
}

XFER_EXPORT void xfer_close(struct xfer_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->ring_map)
		munmap(ctx->ring_map, ctx->ring_len);
	free(ctx->idx_allocs);
	free(ctx->sq_stamped);
	if (ctx->sq_efd >= 0)
		close(ctx->sq_efd);
	if (ctx->cq_efd >= 0)
		close(ctx->cq_efd);
	if (ctx->event_fd >= 0)
		close(ctx->event_fd);
	if (ctx->sock >= 0)
		close(ctx->sock);
	free(ctx);
}
