/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xfer_ring.h - the shared-memory ring ABI between libxfer and xferd.
 *
 * One memfd per connection holds a header, a submission queue (SQ) of
 * fixed-size descriptors and a completion queue (CQ) twice its size.
 * xferd creates and seals the memfd and sends the byte offset of every
 * field in its setup reply (struct xfer_ring_offsets), so the layout can
 * grow without breaking old clients: never compute offsets from the
 * structs below, always from the offsets you were given.
 *
 * A fourth part, the index area, holds the index pairs of prepared-list
 * descriptors (XFER_OP_WRITE_DLIST, _READ_DLIST; see below).  Side
 * areas beside the queues hold what does not fit a fixed-size entry: a
 * notification's sender (cq_senders) and, for a client that asked for
 * them, notification messages (sq_msgs, cq_msgs; see below).
 *
 * Indices are free-running 32-bit counters; entry i lives at slot
 * (i & (entries - 1)).  The producer of a queue owns its tail, the
 * consumer its head, and each lives on its own cache line.
 *
 * Everything in this file is plain data; the protocol (which side may
 * write what, and the memory ordering) is described next to each field.
 */
#ifndef XFER_RING_H
#define XFER_RING_H

#include <stdint.h>

/* The layout checks below, in C11 and in C++11 or later (which spell
 * the keyword differently). */
#ifdef __cplusplus
#define XFER_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define XFER_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#define XFER_RING_MAGIC   0x58524e47u /* "XRNG" */
/* 3: the message areas (sq_msgs, cq_msgs below), for a client that asks
 * for them; 2: the CQ sender area (cq_senders); 1: none.  A client reads
 * what the offsets say is there, not this number. */
/* 4: the SQE's class bits (XFER_SQE_F_CLASS_MASK), same layout as 3. */
/* 5: per-entry phase (XFER_SQE_F_PHASE_MASK, xfer_cqe.seq), same layout. */
#define XFER_RING_VERSION 5u
/* For programs built against several versions of this header: struct
 * xfer_cqe_sender, xfer_cqe_sender(), xfer_stream_peer() exist. */
#define XFER_HAVE_CQE_SENDER 1
/* ... and notification messages: XFER_NOTIFY_MSG_MAX, struct
 * xfer_cqe_message, xfer_sqe_set_message(), xfer_cqe_message(),
 * xfer_cqe_sender_name(), xfer_open_named(). */
#define XFER_HAVE_NOTIFY_MSG 1
/* ... and traffic classes: enum xfer_class, xfer_sqe_set_class(),
 * xfer_open_class(). */
#define XFER_HAVE_CLASSES 1
/* ... and per-entry phase: XFER_SQE_F_PHASE_MASK, xfer_cqe.seq (the
 * protocol libxfer and xferd agree on in the hello, when both know it;
 * applications see no difference). */
#define XFER_HAVE_RING_PHASE 1

/*
 * The longest message a notification carries, in bytes (any bytes): a
 * request id, a key, a short status.  Fixed so that each ring slot has
 * room for one and a notification that finds its CQ slot finds its
 * message's place too: a message never waits for space of its own.
 */
#define XFER_NOTIFY_MSG_MAX 256u
/* The longest name a context gives itself as a sender (xfer_open_named),
 * in bytes of printable ASCII (0x20-0x7e), without a NUL. */
#define XFER_SENDER_NAME_MAX 64u

/* Opcodes of a submission queue entry. */
enum xfer_op {
	XFER_OP_NOP = 0,    /* completes at once with result 0 */
	XFER_OP_WRITE = 1,  /* local[local_off..+len] -> remote[remote_off..] */
	XFER_OP_READ = 2,   /* remote[remote_off..+len] -> local[local_off..] */
	XFER_OP_NOTIFY = 3, /* no data: deliver notify_value to remote's owner */
	/*
	 * Prepared lists (xfer_dlist_create): local and remote name two
	 * lists, len is a count of index pairs (struct xfer_dlist_pair) at
	 * byte local_off of the ring's index area, remote_off must be 0.
	 * Pair k moves entry pairs[k].local of the local list to entry
	 * pairs[k].remote of the remote list (WRITE) or back (READ); the
	 * two entries must have the same length.  One CQE for all of it,
	 * with the sum of the bytes.
	 */
	XFER_OP_WRITE_DLIST = 4,
	XFER_OP_READ_DLIST = 5,
	XFER_OP__COUNT
};

/*
 * One pair of a prepared-list descriptor, in the ring's index area.
 *
 * Why an area of the ring: it is mapped by both sides already, needs no
 * registration and no handle, and it is reclaimed in SQ order.  xferd
 * reads a descriptor's pairs exactly once, while it consumes that SQE
 * (before sq_head moves past it), copying them out of shared memory
 * before it checks them; so the bytes of an SQE's pairs are the
 * client's again as soon as sq_head has passed that SQE, whatever the
 * transfer is still doing.  libxfer hands the area out as a circular
 * buffer released by sq_head (xfer_prep_dlist).
 */
struct xfer_dlist_pair {
	uint32_t local, remote;  /* entry indices in the two lists */
};

/* SQE flags. */
enum {
	/*
	 * This entry and the next one belong to one batch.  A batch is a run
	 * of entries each carrying LINK except the last; it completes with a
	 * single CQE carrying the last entry's user_data and the sum of the
	 * bytes moved, or the first error (after which the rest of the batch
	 * moves nothing and is skipped).
	 */
	XFER_SQE_F_LINK = 1u << 0,
	/*
	 * After this entry's data has landed, deliver notify_value as a CQE
	 * (flag XFER_CQE_F_NOTIFY) on the ring of the remote region's owner.
	 * For a batch, set it on the last entry: it fires once, after all
	 * data of the batch has landed and only if the batch succeeded.
	 * -ENOBUFS in this entry's CQE: the data landed, the notification
	 * was refused (the owner holds too many unread ones; xfer.h).
	 */
	XFER_SQE_F_NOTIFY = 1u << 1,
	/*
	 * Bits 2-3: this entry's traffic class (enum xfer_class; ring 4,
	 * XFER_HAVE_CLASSES): 0 takes the context's default (chosen at
	 * xfer_open_class(); none: today's first-come order).  An xferd
	 * older than classes refuses the bits with -EINVAL.
	 */
	XFER_SQE_F_CLASS_MASK = 3u << 2,
	XFER_SQE_F__ALL = (1u << 4) - 1,
	/*
	 * Bits 4-6: the phase of the first entry of a submit (ring 5,
	 * XFER_HAVE_RING_PHASE), only on a ring whose hello negotiated it,
	 * and written only by libxfer, never by an application: the
	 * xfer_prep_* helpers clear them, the xfer_sqe_set_* helpers leave
	 * them alone, xfer_get_sqe() clears them in the slot it hands out,
	 * xfer_submit() sets them in the first entry it publishes.  Bits
	 * 4-5: 1 in even laps of the SQ (index / sq_entries), 3 in odd
	 * ones, 0 never; bit 6 (RUN): more entries follow in this submit,
	 * sq_tail says how many.  So xferd polls the slot at its head,
	 * which it then copies, instead of sq_tail, and reads sq_tail only
	 * for a submit of several entries ((F) in common/ring.h).  Without
	 * the negotiation the bits are refused like any unknown.
	 */
	XFER_SQE_F_PHASE_MASK = 3u << 4,
	XFER_SQE_F_PHASE_RUN = 1u << 6,
	XFER_SQE_F_PHASE_BITS = 7u << 4,
};
#define XFER_SQE_CLASS_SHIFT 2
#define XFER_SQE_PHASE_SHIFT 4

/*
 * Traffic classes: how xferd schedules a descriptor against others on
 * the resources they share (the link to a peer, so far; doc/design.md,
 * "Classes and tenants").
 *
 *  DEFAULT  the context's default; for a context without one, the order
 *           xferd always had (round-robin between operations).
 *  LATENCY  small and waited for (a decode step's KV block): its frames
 *           go ahead of every bulk frame, and while latency traffic runs
 *           on a link at most one chunk of bulk bytes waits ahead of it.
 *           Bounded: a descriptor (or batch) past xferd's
 *           latency_max_bytes (1 MiB) is treated as BULK, and its bytes
 *           count against its user's share like any others.
 *  BULK     throughput (prefill pushes, offload): shared between tenants
 *           by weight (xferd.conf(5), [tenant] sections).
 */
enum xfer_class {
	XFER_CLASS_DEFAULT = 0,
	XFER_CLASS_LATENCY = 1,
	XFER_CLASS_BULK = 2,
	XFER_CLASS__COUNT
};

/* Which path moved the data of a completion (xfer_cqe.path). */
enum xfer_path {
	XFER_PATH_NONE = 0,     /* no data moved (NOP, NOTIFY, early error) */
	XFER_PATH_MEMCPY = 1,   /* same node, memcpy between xferd's mappings */
	XFER_PATH_CMA = 2,      /* same node, process_vm_readv/writev */
	XFER_PATH_CUDA_IPC = 3, /* same node, CUDA copy between imports */
	XFER_PATH_RDMA = 4,     /* other node, one-sided RDMA, zero copy */
	XFER_PATH_RDMA_STAGED = 5,
	XFER_PATH_TCP = 6,      /* other node, streamed over the xferd link */
	/* other node, GPU memory at one end at least: copied through
	 * xferd's pinned staging chunks and streamed over the link */
	XFER_PATH_TCP_STAGED = 7,
	/* same node, GPU memory and xfer_reg'd host memory: through xferd's
	 * pinned staging chunks (CMA on one side, a CUDA copy on the other) */
	XFER_PATH_CUDA_STAGED = 8,
	XFER_PATH__COUNT
};

/*
 * Submission queue entry, written by the client, read by xferd.  xferd
 * copies each entry out of the ring once and validates the copy: a client
 * that changes an entry after publishing it only hurts itself.
 */
struct xfer_sqe {
	uint8_t opcode;        /* enum xfer_op */
	uint8_t flags;         /* XFER_SQE_F_* */
	union {
		/* Bytes of this entry's notification message, in the SQ
		 * message area slot of this entry (sq_msgs below); only
		 * with XFER_SQE_F_NOTIFY or XFER_OP_NOTIFY.  0: none (the
		 * only value a ring without the area takes). */
		uint16_t msg_len;
		uint16_t reserved0;  /* its name before messages */
	};
	uint32_t timeout_ms;   /* other-node paths: fail with -ETIMEDOUT after
				* this long; 0 = xferd's op_timeout_ms */
	uint64_t user_data;    /* returned untouched in the CQE */
	uint64_t local;        /* handle of a region this client registered */
	uint64_t local_off;
	uint64_t remote;       /* handle of a region or an imported token */
	uint64_t remote_off;
	uint64_t len;          /* bytes; 0 is allowed and moves nothing */
	uint64_t notify_value; /* with XFER_SQE_F_NOTIFY or XFER_OP_NOTIFY */
};
XFER_STATIC_ASSERT(sizeof(struct xfer_sqe) == 64, "SQE is one cache line");

/* CQE flags. */
enum {
	/* A notification for a region this client owns, not a completion of
	 * its own submission: user_data is the sender's notify_value, result
	 * the bytes that landed, handle the owner's handle of the region.
	 * The notifications for one owner come in the order its xferd took
	 * them; those that find the CQ full xferd holds and posts, in that
	 * order, as CQEs are consumed (see xfer_sqe_set_notify()).  Who
	 * sent it: the CQ sender area (struct xfer_cqe_sender); its
	 * message and the sender's name: the CQ message area (struct
	 * xfer_cqe_message). */
	XFER_CQE_F_NOTIFY = 1u << 0,
	/* With XFER_CQE_F_NOTIFY: the CQ message record of this slot holds
	 * the notification's message or its sender's name (or both).
	 * Without it there is neither, and xferd left the record as it was:
	 * a notification with nothing to say touches no message page. */
	XFER_CQE_F_MSG = 1u << 1,
};

/* Completion queue entry, written by xferd, read by the client. */
struct xfer_cqe {
	uint64_t user_data;
	int64_t result;    /* bytes moved (>= 0) or a negative errno */
	uint32_t flags;    /* XFER_CQE_F_* */
	uint16_t path;     /* enum xfer_path */
	union {
		/*
		 * Ring 5, a ring whose hello negotiated phase: xferd stores
		 * (uint16_t)(index / cq_entries + 1) here last, with
		 * release, after the rest of the entry (and its records);
		 * the entry at index is there when this field holds that
		 * value, so the client polls the slot at its head instead
		 * of cq_tail ((G) in common/ring.h).  0 from an xferd that
		 * did not agree; never a value to trust.
		 */
		uint16_t seq;
		uint16_t reserved;  /* its name before phase */
	};
	uint64_t handle;   /* XFER_CQE_F_NOTIFY: the region notified */
};
XFER_STATIC_ASSERT(sizeof(struct xfer_cqe) == 32, "two CQEs per cache line");

/*
 * Who sent a notification: xferd's own record of it, never a value the
 * sender chose.  The CQ sender area (xfer_ring_offsets.cq_senders) holds
 * one record per CQ slot; xferd fills the record of slot i before it
 * publishes a notification CQE in slot i, and only then (a completion of
 * one's own submission leaves its record as it was: the round trip of a
 * descriptor writes nothing more than before).
 *
 *  node    the instance id of the xferd the sender is a client of (ours
 *          for a sender on this node; HelloReply gives ours).  For a
 *          notification from another node it is the instance id of the
 *          link it came over, which the handshake proves where a
 *          cluster_key is set: a sending xferd names its own clients
 *          only, never another node's.
 *  client  the sender's connection id at that xferd: unique per xferd
 *          instance and never reused while it runs, never 0.  0: the
 *          sending xferd did not say (an older xferd on another node);
 *          then only node is known.
 *  uid     the sender's user id as its xferd saw it (SO_PEERCRED).  For
 *          another node this is what that node's xferd says about its own
 *          client: informational (user ids differ between nodes).
 *  flags   XFER_SENDER_F_*.
 *
 * The record is read like the CQE: after the acquire of cq_tail, before
 * cq_head is released past it ((C) and (D) of common/ring.h cover the
 * area as they cover the CQEs).  A client can write its own ring's
 * records (it is shared memory) and so fool only itself.
 *
 * The record may grow: xferd says its size (cq_sender_size, a multiple
 * of 8); a client reads the fields it knows, at their offsets below, and
 * steps from record to record by that size.  Fields added later (a
 * notification message's place and length, say) are zero from an xferd
 * that does not fill them; the CQE itself keeps its size.
 */
struct xfer_cqe_sender {
	uint8_t node[16];
	uint64_t client;
	uint32_t uid;
	uint32_t flags;    /* XFER_SENDER_F_* */
};
XFER_STATIC_ASSERT(sizeof(struct xfer_cqe_sender) == 32, "sender record size");

/*
 * The message of a notification and the name its sender gave itself, in
 * the CQ message area (xfer_ring_offsets.cq_msgs), one record per CQ
 * slot like the sender records: xferd fills the record of slot i before
 * it publishes a notification CQE in slot i (len and name_len 0: none),
 * and only then; it is read like the CQE ((C) and (D) of common/ring.h).
 *
 *  len       bytes of data (XFER_NOTIFY_MSG_MAX at most)
 *  name_len  bytes of name: what the sender named itself, printable
 *            ASCII that xferd checked, informational only (anyone may
 *            call themselves anything: node and client of the sender
 *            record are who sent it)
 *
 * Why one record per CQ slot rather than a ring of messages: a
 * notification that has its CQ slot then has its message's place too,
 * so a message adds no way for a notification to wait or be refused
 * (held notifications keep theirs in xferd, notify_queue), and the
 * client releases both with cq_head, as it does the CQEs.  The cost is
 * cq_entries * cq_msg_size bytes of the ring, touched only by
 * notifications, and present only for a client that asked for messages.
 * The record may grow like the sender record (cq_msg_size).
 */
struct xfer_cqe_message {
	uint16_t len;
	uint8_t name_len;
	uint8_t reserved[5];
	char name[XFER_SENDER_NAME_MAX];
	uint8_t data[XFER_NOTIFY_MSG_MAX];
};
XFER_STATIC_ASSERT(sizeof(struct xfer_cqe_message) ==
		   8 + XFER_SENDER_NAME_MAX + XFER_NOTIFY_MSG_MAX,
		   "message record size");

/* Sender flags. */
enum {
	/* The sender is a client of another node's xferd (node is not
	 * ours): uid is that xferd's word for it. */
	XFER_SENDER_F_REMOTE = 1u << 0,
};

/* Bits of the SQ flags word (written by xferd, read by the client). */
enum {
	/* xferd's progress thread is asleep: ring the SQ doorbell. */
	XFER_SQ_NEED_WAKEUP = 1u << 0,
	/* xferd has gone (shut down or dropped this client): stop waiting. */
	XFER_SQ_DEAD = 1u << 1,
	/* xferd has SQEs of this client, or notifications for it that it
	 * holds, but no CQ room for them and sleeps: ring the SQ doorbell
	 * after consuming CQEs (libxfer's xfer_cq_advance() does), also
	 * when submitting nothing, or the held notifications wait until
	 * the next submission. */
	XFER_SQ_CQ_WAIT = 1u << 2,
};

/* Bits of the CQ flags word (written by the client, read by xferd). */
enum {
	/* The client sleeps on its CQ doorbell: xferd must ring it. */
	XFER_CQ_NEED_WAKEUP = 1u << 0,
};

/*
 * Byte offsets of the ring fields inside the ring memfd, as sent by xferd
 * in the setup reply.  Every counter is a uint32_t.
 */
struct xfer_ring_offsets {
	uint32_t map_size;   /* bytes to mmap */
	uint32_t sq_entries; /* power of two */
	uint32_t cq_entries; /* power of two, 2 * sq_entries */
	uint32_t magic;      /* u32 at this offset == XFER_RING_MAGIC */
	uint32_t sq_head;    /* xferd: consumed up to here (release) */
	/* client: published up to here (release); also with phase, for
	 * the doorbell (E) and for an xferd that polls it */
	uint32_t sq_tail;
	uint32_t sq_flags;   /* xferd: XFER_SQ_* */
	uint32_t sqes;       /* array of sq_entries struct xfer_sqe */
	uint32_t cq_head;    /* client: consumed up to here (release) */
	/* xferd: published up to here (release); also with phase, for the
	 * doorbell (E) and for counting what is there */
	uint32_t cq_tail;
	uint32_t cq_flags;   /* client: XFER_CQ_* */
	/* xferd: notifications lost (0 since xferd holds those that find
	 * the CQ full; see xfer_cq_overflow() in xfer.h) */
	uint32_t cq_overflow;
	uint32_t cqes;       /* array of cq_entries struct xfer_cqe */
	/* The index area (struct xfer_dlist_pair, 8-byte aligned); idx_size
	 * 0: this xferd takes no prepared-list descriptors. */
	uint32_t idx;
	uint32_t idx_size;
	/* The CQ sender area: cq_entries records of cq_sender_size bytes
	 * (struct xfer_cqe_sender), the one of CQ slot i at cq_senders +
	 * i * cq_sender_size.  cq_sender_size 0: this xferd names no
	 * senders (an older one). */
	uint32_t cq_senders;
	uint32_t cq_sender_size;
	/*
	 * The message areas, only for a client that asked for messages in
	 * its hello (0, 0: none; then every msg_len must be 0 and no
	 * notification shows a message; an older client sees the ring of
	 * version 2 exactly).  The SQ message area: sq_entries slots of
	 * sq_msg_size bytes (XFER_NOTIFY_MSG_MAX), the message of the SQE
	 * in SQ slot i at sq_msgs + i * sq_msg_size, its first msg_len
	 * bytes; written by the client before it publishes the SQE (A),
	 * copied by xferd once, while it consumes the SQE, so the slot is
	 * the client's again when sq_head passes it (B).  The CQ message
	 * area: cq_entries records of cq_msg_size bytes (struct
	 * xfer_cqe_message), the one of CQ slot i at cq_msgs + i *
	 * cq_msg_size.
	 */
	uint32_t sq_msgs;
	uint32_t sq_msg_size;
	uint32_t cq_msgs;
	uint32_t cq_msg_size;
};

#endif /* XFER_RING_H */
