/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlist.c - prepared descriptor lists (xfer_dlist_create) and the ring's
 * index area that list descriptors take their pairs from.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* Write all of buf to fd. */
static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

XFER_EXPORT int xfer_dlist_create(struct xfer_ctx *ctx, uint64_t handle,
				  uint32_t n, const uint64_t *offsets,
				  const uint64_t *lengths, uint64_t length,
				  struct xfer_dlist **out)
{
	if (!ctx || !out || n == 0 || !offsets || (!lengths && length == 0))
		return -EINVAL;
	struct xfer_dlist *dl = calloc(1, sizeof(*dl));
	if (!dl)
		return -ENOMEM;
	/* The entries go in a memfd: a long list does not fit a packet.
	 * Sealed once written, so what xferd reads is what was written. */
	int fd = memfd_create("xfer-dlist", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int err = fd < 0 ? -errno : 0;
	if (!err)
		err = write_all(fd, offsets, (size_t)n * sizeof(*offsets));
	if (!err && lengths)
		err = write_all(fd, lengths, (size_t)n * sizeof(*lengths));
	if (!err && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
					   F_SEAL_WRITE | F_SEAL_SEAL))
		err = -errno;
	if (err)
		goto out;

	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__DlistCreateRequest req =
		XFER__CLIENT__DLIST_CREATE_REQUEST__INIT;
	Xfer__Client__ClientMsg *r;
	req.target = handle;
	req.count = n;
	req.length = lengths ? 0 : length;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE;
	m.dlist_create = &req;
	err = ctx_call(ctx, &m, &fd, 1, &r);
	if (err)
		goto out;
	if (r->body_case != XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE_REPLY) {
		err = -EPROTO;
	} else {
		dl->handle = r->dlist_create_reply->handle;
		dl->n = n;
	}
	xfer__client__client_msg__free_unpacked(r, NULL);
out:
	if (fd >= 0)
		close(fd);
	if (err) {
		free(dl);
		return err;
	}
	*out = dl;
	return 0;
}

XFER_EXPORT int xfer_dlist_destroy(struct xfer_ctx *ctx, struct xfer_dlist *dl)
{
	if (!ctx || !dl)
		return -EINVAL;
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__DlistDestroyRequest req =
		XFER__CLIENT__DLIST_DESTROY_REQUEST__INIT;
	Xfer__Client__ClientMsg *r;
	req.handle = dl->handle;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_DLIST_DESTROY;
	m.dlist_destroy = &req;
	int err = ctx_call(ctx, &m, NULL, 0, &r);
	if (!err) {
		if (r->body_case != XFER__CLIENT__CLIENT_MSG__BODY_STATUS)
			err = -EPROTO;
		xfer__client__client_msg__free_unpacked(r, NULL);
	}
	/* Freed whatever xferd said: a list it no longer has is gone. */
	free(dl);
	return err;
}

XFER_EXPORT uint64_t xfer_dlist_handle(const struct xfer_dlist *dl)
{
	return dl->handle;
}

XFER_EXPORT uint32_t xfer_dlist_count(const struct xfer_dlist *dl)
{
	return dl->n;
}

/* --- the index area --- */

/* The SQ index of an SQE handed out by xfer_get_sqe (not yet consumed:
 * it lies in the last sq_entries indices before sq_tail). */
static uint32_t sq_index_of(const struct xfer_ctx *ctx,
			    const struct xfer_sqe *sqe)
{
	uint32_t slot = (uint32_t)(sqe - ctx->ring.sqes);
	uint32_t last = ctx->sq_tail - 1;

	return last - ((last - slot) & (ctx->ring.sq_entries - 1));
}

/* Release the areas of SQEs xferd has consumed (sq_head is past them:
 * it read their pairs already). */
static void idx_reclaim(struct xfer_ctx *ctx)
{
	uint32_t head = atomic_load_explicit(ctx->ring.sq_head,
					     memory_order_acquire);

	while (ctx->idx_count) {
		const struct idx_alloc *a = &ctx->idx_allocs[ctx->idx_first];
		if ((int32_t)(a->sq_index - head) >= 0)
			break;
		ctx->idx_head = a->end;
		ctx->idx_first = (ctx->idx_first + 1) % ctx->ring.sq_entries;
		ctx->idx_count--;
	}
	if (ctx->idx_count == 0)
		ctx->idx_head = ctx->idx_tail;
}

/*
 * bytes of the index area, contiguous, for the SQE at sq_index: its
 * offset in the area, or -EAGAIN (in use by SQEs xferd has not consumed
 * yet), -E2BIG (never fits).
 */
static int64_t idx_alloc(struct xfer_ctx *ctx, uint32_t sq_index,
			 uint64_t bytes)
{
	uint64_t size = ctx->ring.idx_size;

	if (bytes > size)
		return -E2BIG;
	if (!ctx->idx_allocs) {
		ctx->idx_allocs = calloc(ctx->ring.sq_entries,
					 sizeof(*ctx->idx_allocs));
		if (!ctx->idx_allocs)
			return -ENOMEM;
	}
	idx_reclaim(ctx);
	if (ctx->idx_count == ctx->ring.sq_entries)
		return -EAGAIN;
	uint64_t pos = ctx->idx_tail % size;
	/* Pairs are never split at the end of the area: skip the rest. */
	uint64_t pad = pos + bytes > size ? size - pos : 0;
	if (ctx->idx_tail + pad + bytes - ctx->idx_head > size)
		return -EAGAIN;
	uint64_t at = (ctx->idx_tail + pad) % size;
	ctx->idx_tail += pad + bytes;
	uint32_t i = (ctx->idx_first + ctx->idx_count) % ctx->ring.sq_entries;
	ctx->idx_allocs[i] = (struct idx_alloc){ sq_index, ctx->idx_tail };
	ctx->idx_count++;
	return (int64_t)at;
}

/* Room for n pairs of the list descriptor sqe will be: *pairs in the
 * area, at byte *off of it. */
static int pairs_for(struct xfer_ctx *ctx, const struct xfer_sqe *sqe,
		     uint32_t n, struct xfer_dlist_pair **pairs, uint64_t *off)
{
	if (!ctx->ring.idx)
		return -EOPNOTSUPP;  /* an xferd without an index area */
	if (sqe < ctx->ring.sqes || sqe >= ctx->ring.sqes + ctx->ring.sq_entries)
		return -EINVAL;
	uint32_t sq_index = sq_index_of(ctx, sqe);
	int64_t at = idx_alloc(ctx, sq_index,
			       (uint64_t)n * sizeof(struct xfer_dlist_pair));
	if (at == -EAGAIN) {
		/* The client submits now so that xferd takes what is before
		 * this SQE, and tries again with it (xfer.h): until it is
		 * filled, xfer_submit must not publish it, or xferd would run
		 * whatever the slot last held.  Marked through the ring's own
		 * (writable) view of the slot. */
		ring_sqe_at(&ctx->ring, sq_index)->opcode = SQE_OP_UNFILLED;
		ctx->sq_unfilled = true;
	}
	if (at < 0)
		return (int)at;
	*pairs = (struct xfer_dlist_pair *)((char *)ctx->ring.idx + at);
	*off = (uint64_t)at;
	return 0;
}

XFER_EXPORT int xfer_dlist_pairs(struct xfer_ctx *ctx,
				 const struct xfer_sqe *sqe, uint32_t n,
				 struct xfer_dlist_pair **pairs, uint64_t *off)
{
	if (!ctx || !sqe || !pairs || !off || n == 0)
		return -EINVAL;
	return pairs_for(ctx, sqe, n, pairs, off);
}

XFER_EXPORT int xfer_prep_dlist(struct xfer_ctx *ctx, struct xfer_sqe *sqe,
				unsigned op, const struct xfer_dlist *local,
				const struct xfer_dlist *remote, uint32_t n,
				const uint32_t *local_idx,
				const uint32_t *remote_idx, uint64_t user_data)
{
	if (!ctx || !sqe || !local || !remote ||
	    (op != XFER_OP_WRITE_DLIST && op != XFER_OP_READ_DLIST))
		return -EINVAL;
	uint64_t at = 0;
	if (n) {
		struct xfer_dlist_pair *pairs;
		int err = pairs_for(ctx, sqe, n, &pairs, &at);
		if (err)
			return err;
		for (uint32_t k = 0; k < n; k++) {
			uint32_t l = local_idx ? local_idx[k] : k;
			pairs[k] = (struct xfer_dlist_pair){
				l, remote_idx ? remote_idx[k] : l };
		}
	} else if (!ctx->ring.idx) {
		return -EOPNOTSUPP;
	}
	xfer_prep_dlist_at(sqe, op, local->handle, remote->handle, n, at,
			   user_data);
	return 0;
}
