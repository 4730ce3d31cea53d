/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring.c - ring layout (xferd) and layout checking (libxfer).
 */
#include <errno.h>
#include <stdalign.h>

#include "common/ring.h"

/* Fixed header: one 128-byte block per writer so that no index shares a
 * cache line (or an adjacent-line prefetch pair) with the other side's. */
enum {
	HDR_MAGIC = 0,             /* magic, version: written once */
	HDR_SQ_CONS = 1 * RING_LINE, /* xferd: sq_head */
	HDR_SQ_PROD = 2 * RING_LINE, /* client: sq_tail */
	HDR_CQ_CONS = 3 * RING_LINE, /* client: cq_head, cq_flags */
	HDR_CQ_PROD = 4 * RING_LINE, /* xferd: cq_tail, cq_overflow */
	/* xferd: sq_flags, alone: a polling client reads it at every look
	 * at its CQ, and xferd stores sq_head at every pass; on one line
	 * each store of sq_head took the line from the client, and the
	 * cq_tail store behind it (stores leave in order) waited for that. */
	HDR_SQ_FLAGS = 5 * RING_LINE,
	HDR_SIZE = 6 * RING_LINE,
};
_Static_assert(HDR_SQ_PROD - HDR_SQ_CONS >= 128, "SQ indices share a line");
_Static_assert(HDR_CQ_PROD - HDR_CQ_CONS >= 128, "CQ indices share a line");
_Static_assert(HDR_SIZE % alignof(struct xfer_sqe) == 0, "SQE alignment");

static bool is_pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

int ring_layout(uint32_t sq_entries, uint32_t idx_bytes,
		struct xfer_ring_offsets *off)
{
	if (!is_pow2(sq_entries) || sq_entries < RING_MIN_SQ_ENTRIES ||
	    sq_entries > RING_MAX_SQ_ENTRIES || idx_bytes % 8 ||
	    idx_bytes > RING_MAX_IDX_BYTES)
		return -EINVAL;
	uint32_t cq_entries = 2 * sq_entries;
	uint32_t sqes = HDR_SIZE;
	uint32_t cqes = sqes + sq_entries * (uint32_t)sizeof(struct xfer_sqe);

	*off = (struct xfer_ring_offsets){
		.sq_entries = sq_entries,
		.cq_entries = cq_entries,
		.magic = HDR_MAGIC,
		.sq_head = HDR_SQ_CONS,
		.sq_flags = HDR_SQ_FLAGS,
		.sq_tail = HDR_SQ_PROD,
		.cq_head = HDR_CQ_CONS,
		.cq_flags = HDR_CQ_CONS + 4,
		.cq_tail = HDR_CQ_PROD,
		.cq_overflow = HDR_CQ_PROD + 4,
		.sqes = sqes,
		.cqes = cqes,
		.map_size = cqes + cq_entries * (uint32_t)sizeof(struct xfer_cqe),
	};
	/* The sender records after the CQEs, on lines of their own: xferd
	 * writes one only for a notification, so a completion's round trip
	 * touches no more lines than without them. */
	off->cq_senders = (off->map_size + RING_LINE - 1) & ~(RING_LINE - 1);
	off->cq_sender_size = (uint32_t)sizeof(struct xfer_cqe_sender);
	off->map_size = off->cq_senders + cq_entries * off->cq_sender_size;
	if (idx_bytes) {
		/* Its own pages, after the CQEs and their senders. */
		off->idx = (off->map_size + 4095u) & ~4095u;
		off->idx_size = idx_bytes;
		off->map_size = off->idx + idx_bytes;
	}
	return 0;
}

int ring_layout_msgs(struct xfer_ring_offsets *off)
{
	uint64_t sq = ((uint64_t)off->map_size + 4095u) & ~4095ull;
	uint64_t cq = (sq + (uint64_t)off->sq_entries * XFER_NOTIFY_MSG_MAX +
		       4095u) & ~4095ull;
	uint64_t end = cq + (uint64_t)off->cq_entries *
			    sizeof(struct xfer_cqe_message);

	if (end > UINT32_MAX)
		return -EINVAL;
	off->sq_msgs = (uint32_t)sq;
	off->sq_msg_size = XFER_NOTIFY_MSG_MAX;
	off->cq_msgs = (uint32_t)cq;
	off->cq_msg_size = (uint32_t)sizeof(struct xfer_cqe_message);
	off->map_size = (uint32_t)end;
	return 0;
}

/* [at, at + n * size) lies inside the mapping, clear of the header and
 * of every other area (ends as computed by ring_view_init). */
struct area {
	uint64_t at, end;
};

static bool area_clear(struct area a, const struct area *others,
		       size_t nothers)
{
	for (size_t i = 0; i < nothers; i++)
		if (others[i].end > others[i].at && a.at < others[i].end &&
		    a.end > others[i].at)
			return false;
	return true;
}

/* A u32 field at off lies in the header, aligned, inside the mapping. */
static bool field_ok(uint32_t off, uint32_t header_end)
{
	return off % 4 == 0 && (uint64_t)off + 4 <= header_end;
}

int ring_view_init(struct ring_view *v, void *base, size_t map_len,
		   const struct xfer_ring_offsets *off)
{
	char *b = base;

	if (!is_pow2(off->sq_entries) || off->sq_entries > RING_MAX_SQ_ENTRIES ||
	    off->cq_entries != 2 * off->sq_entries || off->map_size > map_len)
		return -EPROTO;
	uint64_t sq_end = (uint64_t)off->sqes +
			  (uint64_t)off->sq_entries * sizeof(struct xfer_sqe);
	uint64_t cq_end = (uint64_t)off->cqes +
			  (uint64_t)off->cq_entries * sizeof(struct xfer_cqe);
	uint32_t header_end = off->sqes < off->cqes ? off->sqes : off->cqes;

	if (off->sqes % 64 || off->cqes % 32 || sq_end > off->map_size ||
	    cq_end > off->map_size ||
	    (off->sqes < off->cqes ? sq_end > off->cqes : cq_end > off->sqes))
		return -EPROTO;
	const uint32_t fields[] = { off->magic, off->sq_head, off->sq_tail,
				    off->sq_flags, off->cq_head, off->cq_tail,
				    off->cq_flags, off->cq_overflow };
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (!field_ok(fields[i], header_end))
			return -EPROTO;

	/* The index area, if any: aligned, inside, clear of both queues. */
	uint64_t idx_end = (uint64_t)off->idx + off->idx_size;
	if (off->idx_size &&
	    (off->idx % 8 || off->idx_size % 8 || idx_end > off->map_size ||
	     off->idx < header_end ||
	     ((uint64_t)off->idx < sq_end && idx_end > off->sqes) ||
	     ((uint64_t)off->idx < cq_end && idx_end > off->cqes)))
		return -EPROTO;
	/* The sender area, if any: records at least as large as we know,
	 * 8-byte aligned, inside, clear of the queues and the index area. */
	uint64_t snd_end = (uint64_t)off->cq_senders +
			   (uint64_t)off->cq_entries * off->cq_sender_size;
	if (off->cq_sender_size &&
	    (off->cq_sender_size < sizeof(struct xfer_cqe_sender) ||
	     off->cq_sender_size % 8 || off->cq_senders % 8 ||
	     snd_end > off->map_size || off->cq_senders < header_end ||
	     ((uint64_t)off->cq_senders < sq_end && snd_end > off->sqes) ||
	     ((uint64_t)off->cq_senders < cq_end && snd_end > off->cqes) ||
	     (off->idx_size && (uint64_t)off->cq_senders < idx_end &&
	      snd_end > off->idx)))
		return -EPROTO;
	/* The message areas, if any: both or neither, slots at least as
	 * large as we know, aligned, inside, clear of everything else. */
	struct area sqm = { off->sq_msgs, (uint64_t)off->sq_msgs +
			    (uint64_t)off->sq_entries * off->sq_msg_size };
	struct area cqm = { off->cq_msgs, (uint64_t)off->cq_msgs +
			    (uint64_t)off->cq_entries * off->cq_msg_size };
	if (!off->sq_msg_size != !off->cq_msg_size)
		return -EPROTO;
	if (off->sq_msg_size) {
		const struct area others[] = {
			{ 0, header_end }, { off->sqes, sq_end },
			{ off->cqes, cq_end },
			{ off->idx, off->idx_size ? idx_end : off->idx },
			{ off->cq_senders, off->cq_sender_size ? snd_end
							      : off->cq_senders },
		};
		size_t no = sizeof(others) / sizeof(others[0]);
		if (off->sq_msg_size < XFER_NOTIFY_MSG_MAX ||
		    off->cq_msg_size < sizeof(struct xfer_cqe_message) ||
		    off->sq_msgs % 8 || off->sq_msg_size % 8 ||
		    off->cq_msgs % 8 || off->cq_msg_size % 8 ||
		    sqm.end > off->map_size || cqm.end > off->map_size ||
		    !area_clear(sqm, others, no) ||
		    !area_clear(cqm, others, no) ||
		    !area_clear(sqm, &cqm, 1))
			return -EPROTO;
	}
	if (*(const uint32_t *)(b + off->magic) != XFER_RING_MAGIC)
		return -EPROTO;
	*v = (struct ring_view){
		.sq_head = (_Atomic uint32_t *)(b + off->sq_head),
		.sq_tail = (_Atomic uint32_t *)(b + off->sq_tail),
		.sq_flags = (_Atomic uint32_t *)(b + off->sq_flags),
		.cq_head = (_Atomic uint32_t *)(b + off->cq_head),
		.cq_tail = (_Atomic uint32_t *)(b + off->cq_tail),
		.cq_flags = (_Atomic uint32_t *)(b + off->cq_flags),
		.cq_overflow = (_Atomic uint32_t *)(b + off->cq_overflow),
		.sqes = (struct xfer_sqe *)(b + off->sqes),
		.cqes = (struct xfer_cqe *)(b + off->cqes),
		.sq_entries = off->sq_entries,
		.cq_entries = off->cq_entries,
		.sq_shift = (uint8_t)__builtin_ctz(off->sq_entries),
		.cq_shift = (uint8_t)__builtin_ctz(off->cq_entries),
		.idx = off->idx_size ? (struct xfer_dlist_pair *)(b + off->idx)
				     : NULL,
		.idx_size = off->idx_size,
		.senders = off->cq_sender_size ? (uint8_t *)b + off->cq_senders
					       : NULL,
		.sender_size = off->cq_sender_size,
		.sq_msgs = off->sq_msg_size ? (uint8_t *)b + off->sq_msgs : NULL,
		.sq_msg_size = off->sq_msg_size,
		.cq_msgs = off->cq_msg_size ? (uint8_t *)b + off->cq_msgs : NULL,
		.cq_msg_size = off->cq_msg_size,
	};
	return 0;
}
