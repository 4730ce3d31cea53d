/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring.h - the submission/completion ring protocol, both halves.
 *
 * The layout (struct xfer_ring_offsets in include/xfer_ring.h) is made by
 * ring_layout() in xferd and checked by ring_view_init() in libxfer; the
 * inline functions below are the only code that touches ring indices, so
 * every memory-ordering pair is visible in this one file:
 *
 *   (A) SQ slots:  client writes entries (and their messages), then
 *                  store-release sq_tail; xferd load-acquires sq_tail,
 *                  then reads the entries and messages.
 *   (B) SQ reuse:  xferd copies entries out, then store-release sq_head;
 *                  client load-acquires sq_head before overwriting slots.
 *   (C) CQ slots:  xferd writes entries (and a notification's sender
 *                  and message records, ring_cq_sender_at,
 *                  ring_cq_msg_at), then store-release
 *                  cq_tail; client load-acquires cq_tail, then reads the
 *                  entries and their records.
 *   (D) CQ reuse:  client reads entries and records, then store-release
 *                  cq_head; xferd load-acquires cq_head before
 *                  overwriting slots or their records.
 *   (E) doorbells: the sleeper sets NEED_WAKEUP, full fence, re-reads the
 *                  tail; the producer stores its tail, full fence, reads
 *                  the flag.  With both fences at least one side sees the
 *                  other's store, so a wake-up is never lost.
 *   (F) SQ phase:  (ring 5, when the hello negotiated it) the client
 *                  clears the phase bits of each slot it stamped as it
 *                  hands it out again (ring_sqe_unstamp), writes the
 *                  entries of a
 *                  submit (and their messages), then store-releases the
 *                  first one's flags byte with its lap's phase, and RUN
 *                  when more follow (ring_sqe_stamp), then sq_tail as
 *                  always.  xferd, at a head no count it learned covers,
 *                  load-acquires that slot's flags byte: a phase alone
 *                  publishes that entry, with RUN it load-acquires
 *                  sq_tail for the count ((A); not there yet: it looks
 *                  again); after a run it polls sq_tail alone until a
 *                  lone entry comes (ring_sq_phase_avail).  One stamp a
 *                  submit: a lone entry crosses one line, the slot xferd
 *                  then copies; a batch costs what it did without.
 *   (G) CQ phase:  xferd writes an entry (and its records) except seq
 *                  (ring_cqe_write); when it publishes, where it would
 *                  store cq_tail, it store-releases each new entry's seq
 *                  = its lap + 1 (ring_cqe_stamp), the last first, so
 *                  the client load-acquires seq of the slot at its head
 *                  (ring_cqe_ready) and finds the whole run there, then
 *                  reads the entries.  cq_tail is still published after,
 *                  for (E).  A CQE becomes visible exactly where cq_tail
 *                  would make it so: after sq_head passed the SQEs it
 *                  completes, with phase as without.
 *
 * Why phase: polling the tail and then reading the entry crosses two
 * cache lines per hand-over; polling the entry crosses one.  Why a
 * stale stamp never matches: xferd reads the stamp of a slot only at a
 * head, where the slot's lap is the current one; its phase bits are set
 * only by a submit that starts there and cleared when libxfer hands the
 * slot out again, so before this lap's submit stamps it the slot holds 0
 * (never stamped, handed out since, or a fresh ring) or the last lap's
 * stamp (it began a submit then and has not been handed out since),
 * never this lap's (an application that writes the bits itself fools
 * only itself): the
 * SQ stamp is 1 in even laps and 3 in odd ones, never 0, and
 * consecutive laps differ in parity even where the 32-bit index wraps
 * (2^32 / sq_entries laps is even).  The CQ stamp is (lap + 1) mod 2^16:
 * consecutive laps differ by 1 mod 2^16 across the wrap too (2^32 /
 * cq_entries laps is a multiple of 2^16 since cq_entries <= 2^16), and 0
 * arrives only in lap 65535, whose slots lap 65534 has written.  A
 * stamp that lies (a client writing its own ring) lies to that client
 * only: xferd never takes more than sq_entries past its head and treats
 * the copy as untrusted as ever.
 *
 * xferd treats every value it reads from the ring as untrusted: a client
 * can only corrupt its own ring, and xferd checks indices before use.
 */
#ifndef XFER_PROTO_RING_H
#define XFER_PROTO_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "xfer_ring.h"

#define RING_LINE           128u  /* two cache lines: no adjacent-line sharing */
#define RING_MAX_SQ_ENTRIES 32768u
#define RING_MIN_SQ_ENTRIES 8u

/* A mapped ring, with pointers resolved from its offsets. */
struct ring_view {
	_Atomic uint32_t *sq_head, *sq_tail, *sq_flags;
	_Atomic uint32_t *cq_head, *cq_tail, *cq_flags, *cq_overflow;
	struct xfer_sqe *sqes;
	struct xfer_cqe *cqes;
	uint32_t sq_entries, cq_entries;
	/* log2 of the entry counts: the lap of index i is i >> shift. */
	uint8_t sq_shift, cq_shift;
	/* Both sides agreed on per-entry phase ((F), (G)); set after
	 * ring_view_init() by whoever negotiated it. */
	bool phase;
	/* The index area of prepared-list descriptors (NULL, 0: none). */
	struct xfer_dlist_pair *idx;
	uint32_t idx_size;
	/* The CQ sender area (NULL, 0: none): record i at senders +
	 * i * sender_size. */
	uint8_t *senders;
	uint32_t sender_size;
	/* The message areas (NULL, 0: none; xfer_ring.h): SQ slot i's
	 * message at sq_msgs + i * sq_msg_size, CQ slot i's record at
	 * cq_msgs + i * cq_msg_size. */
	uint8_t *sq_msgs;
	uint32_t sq_msg_size;
	uint8_t *cq_msgs;
	uint32_t cq_msg_size;
};

/* Offsets for a ring of sq_entries (power of two) with an index area of
 * idx_bytes (a multiple of 8, RING_MAX_IDX_BYTES at most; 0: none);
 * -EINVAL otherwise. */
#define RING_MAX_IDX_BYTES (64u << 20)
int ring_layout(uint32_t sq_entries, uint32_t idx_bytes,
		struct xfer_ring_offsets *off);

/* Add the message areas (xfer_ring.h) to a layout of ring_layout(),
 * behind everything else, on pages of their own.  0 or -EINVAL. */
int ring_layout_msgs(struct xfer_ring_offsets *off);

/*
 * Resolve off against a mapping of map_len bytes at base.  Checks that
 * every field lies inside the mapping, is aligned and does not overlap
 * the entry arrays, so a bad setup reply cannot make libxfer touch memory
 * outside the ring.  Returns 0 or -EPROTO.
 */
int ring_view_init(struct ring_view *v, void *base, size_t map_len,
		   const struct xfer_ring_offsets *off);

/* --- producer side of the SQ (libxfer) --- */

/* Free slots, given the producer's private tail. */
static inline uint32_t ring_sq_space(const struct ring_view *v,
				     uint32_t tail)
{
	/* (B) pairs with ring_sq_release(): slots below head are free. */
	uint32_t head = atomic_load_explicit(v->sq_head, memory_order_acquire);
	return v->sq_entries - (tail - head);
}

static inline struct xfer_sqe *ring_sqe_at(const struct ring_view *v,
					   uint32_t index)
{
	return &v->sqes[index & (v->sq_entries - 1)];
}

/* The phase an entry at index carries when published: 1 in even laps,
 * 3 in odd ones, in the flags bits XFER_SQE_F_PHASE_MASK. */
static inline uint8_t ring_sq_phase(const struct ring_view *v, uint32_t index)
{
	return (uint8_t)((1u | ((index >> v->sq_shift) & 1u) << 1)
			 << XFER_SQE_PHASE_SHIFT);
}

/* A slot handed out (F): no phase of any lap until its submit stamps
 * it (the client's own line, about to be written). */
static inline void ring_sqe_unstamp(const struct ring_view *v, uint32_t index)
{
	struct xfer_sqe *e = ring_sqe_at(v, index);

	e->flags = (uint8_t)(e->flags & ~XFER_SQE_F_PHASE_BITS);
}

/* Publish the submit that starts at index (F): its entries written, run
 * when more than this one; before ring_sq_publish(). */
static inline void ring_sqe_stamp(const struct ring_view *v, uint32_t index,
				  bool run)
{
	struct xfer_sqe *e = ring_sqe_at(v, index);
	uint8_t flags = (uint8_t)((e->flags & ~XFER_SQE_F_PHASE_BITS) |
				  ring_sq_phase(v, index) |
				  (run ? XFER_SQE_F_PHASE_RUN : 0));

	/* (F) pairs with the acquire in ring_sq_phase_avail(): the entries
	 * and their messages are written before the stamp. */
	__atomic_store_n(&e->flags, flags, __ATOMIC_RELEASE);
}

/* Publish entries up to tail; true if xferd asked to be woken. */
static inline bool ring_sq_publish(const struct ring_view *v, uint32_t tail)
{
	/* (A) pairs with the acquire in ring_sq_avail(). */
	atomic_store_explicit(v->sq_tail, tail, memory_order_release);
	/* (E) order the tail store before the flag load. */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(v->sq_flags, memory_order_relaxed) &
	       XFER_SQ_NEED_WAKEUP;
}

/* --- consumer side of the SQ (xferd) --- */

/* Entries published past head (untrusted: may exceed sq_entries). */
static inline uint32_t ring_sq_avail(const struct ring_view *v,
				     uint32_t head)
{
	/* (A) pairs with the release in ring_sq_publish(). */
	return atomic_load_explicit(v->sq_tail, memory_order_acquire) - head;
}

/*
 * With phase: how many entries from head on are published (F).  *known
 * is where the count xferd learned last ends (start it at head): inside
 * it nothing is read.  At its end, by the stamp of the slot at head
 * (none: 0; a lone entry: 1; a run: sq_tail's count, 0 while the tail
 * is not there yet), or by sq_tail alone while *by_tail: the client's
 * last submit was a run.  A client writing a batch writes the slot at
 * the head first and stamps it last; polled meanwhile, that line would
 * go back and forth between the two for every field the client writes,
 * so after a run xferd polls sq_tail, written once a submit, and after
 * a lone entry the slot again.  Untrusted like all the ring: a count
 * past sq_entries (a lying tail) is returned as it is, for the caller
 * to refuse, and not remembered.
 */
static inline uint32_t ring_sq_phase_avail(const struct ring_view *v,
					   uint32_t head, uint32_t *known,
					   bool *by_tail)
{
	uint32_t left = *known - head, n;

	if (left && left <= v->sq_entries)
		return left;
	if (*by_tail) {
		/* (A): the tail, stored after the stamps it covers. */
		n = ring_sq_avail(v, head);
		if (n == 0 || n > v->sq_entries)
			return n;
		uint8_t flags = __atomic_load_n(&ring_sqe_at(v, head)->flags,
						__ATOMIC_RELAXED);
		*by_tail = n > 1 || (flags & XFER_SQE_F_PHASE_RUN);
	} else {
		/* (F) pairs with the release in ring_sqe_stamp(). */
		uint8_t flags = __atomic_load_n(&ring_sqe_at(v, head)->flags,
						__ATOMIC_ACQUIRE);
		if ((flags & XFER_SQE_F_PHASE_MASK) != ring_sq_phase(v, head))
			return 0;
		*by_tail = flags & XFER_SQE_F_PHASE_RUN;
		n = *by_tail ? ring_sq_avail(v, head) : 1;
		if (n > v->sq_entries)
			return n;
	}
	*known = head + n;
	return n;
}

/*
 * Copy one entry out of shared memory.  Each field is read exactly once
 * (relaxed atomic loads) so that validation and use see the same values
 * even if the client rewrites the slot meanwhile.
 */
static inline void ring_sqe_copy(const struct ring_view *v, uint32_t index,
				 struct xfer_sqe *out)
{
	const uint64_t *src = (const uint64_t *)ring_sqe_at(v, index);
	uint64_t *dst = (uint64_t *)out;

	/* Spelled out: a loop of atomic loads is not unrolled, and its
	 * counter cost as much as the loads (callgrind). */
	_Static_assert(sizeof(*out) == 8 * sizeof(uint64_t), "SQE size");
	_Static_assert(offsetof(struct xfer_sqe, flags) == 1, "SQE flags");
	uint64_t w0 = __atomic_load_n(&src[0], __ATOMIC_RELAXED);
	/* With phase the phase bits said "published" and are done: the copy
	 * goes without them (masked here, in the register: a byte store to
	 * the copy would stall the next read of its first word). */
	if (v->phase)
		w0 &= ~((uint64_t)XFER_SQE_F_PHASE_BITS << 8);
	dst[0] = w0;
	dst[1] = __atomic_load_n(&src[1], __ATOMIC_RELAXED);
	dst[2] = __atomic_load_n(&src[2], __ATOMIC_RELAXED);
	dst[3] = __atomic_load_n(&src[3], __ATOMIC_RELAXED);
	dst[4] = __atomic_load_n(&src[4], __ATOMIC_RELAXED);
	dst[5] = __atomic_load_n(&src[5], __ATOMIC_RELAXED);
	dst[6] = __atomic_load_n(&src[6], __ATOMIC_RELAXED);
	dst[7] = __atomic_load_n(&src[7], __ATOMIC_RELAXED);
}

static inline void ring_sq_release(const struct ring_view *v, uint32_t head)
{
	/* (B) our copies of the entries are done before the slots go back. */
	atomic_store_explicit(v->sq_head, head, memory_order_release);
}

/* --- producer side of the CQ (xferd) --- */

/* The client's CQ head (D): a line the client writes at every consume,
 * so xferd looks only when what it saw last leaves too little room. */
static inline uint32_t ring_cq_head(const struct ring_view *v)
{
	return atomic_load_explicit(v->cq_head, memory_order_acquire);
}

/* Free CQ slots given xferd's private tail; 0 if the client's head is
 * corrupt (beyond the tail), which only stalls that client. */
static inline uint32_t ring_cq_space(const struct ring_view *v,
				     uint32_t tail)
{
	/* (D) pairs with ring_cq_release(). */
	uint32_t head = atomic_load_explicit(v->cq_head, memory_order_acquire);
	uint32_t used = tail - head;

	return used > v->cq_entries ? 0 : v->cq_entries - used;
}

static inline struct xfer_cqe *ring_cqe_at(const struct ring_view *v,
					   uint32_t index)
{
	return &v->cqes[index & (v->cq_entries - 1)];
}

/*
 * The sender record of CQ slot index (NULL: the ring has none).  xferd
 * fills it before ring_cq_publish() of that slot's notification; the
 * release there publishes the record with the CQE (C).
 */
static inline struct xfer_cqe_sender *
ring_cq_sender_at(const struct ring_view *v, uint32_t index)
{
	if (!v->senders)
		return NULL;
	return (struct xfer_cqe_sender *)(v->senders +
		(size_t)(index & (v->cq_entries - 1)) * v->sender_size);
}

/*
 * The message record of CQ slot index (NULL: the ring has none): like
 * the sender record, filled before ring_cq_publish() of the slot's
 * notification (C).
 */
static inline struct xfer_cqe_message *
ring_cq_msg_at(const struct ring_view *v, uint32_t index)
{
	if (!v->cq_msgs)
		return NULL;
	return (struct xfer_cqe_message *)(v->cq_msgs +
		(size_t)(index & (v->cq_entries - 1)) * v->cq_msg_size);
}

/* The message slot of SQ slot index (NULL: none); sq_msg_size bytes. */
static inline uint8_t *ring_sq_msg_at(const struct ring_view *v,
				      uint32_t index)
{
	if (!v->sq_msgs)
		return NULL;
	return v->sq_msgs +
	       (size_t)(index & (v->sq_entries - 1)) * v->sq_msg_size;
}

/* The seq the entry at index carries once written (G): its lap + 1. */
static inline uint16_t ring_cq_seq(const struct ring_view *v, uint32_t index)
{
	return (uint16_t)((index >> v->cq_shift) + 1u);
}

/*
 * Write the entry at index (room checked by the caller).  With phase all
 * of it but seq, which keeps the last lap's value (never this lap's):
 * ring_cqe_stamp() makes it visible when xferd publishes (a copy of the
 * whole struct would store a seq of its own, and 0 is lap 65535's).
 */
static inline void ring_cqe_write(const struct ring_view *v, uint32_t index,
				  const struct xfer_cqe *cqe)
{
	struct xfer_cqe *e = ring_cqe_at(v, index);

	if (!v->phase) {
		*e = *cqe;
		return;
	}
	e->user_data = cqe->user_data;
	e->result = cqe->result;
	e->flags = cqe->flags;
	e->path = cqe->path;
	e->handle = cqe->handle;
}

/*
 * With phase: make the entry at index (and its records) visible (G):
 * seq in one release store with flags and path (the 8 bytes at offset
 * 16, as written by ring_cqe_write; a client that changed them since
 * fools only itself).
 */
static inline void ring_cqe_stamp(const struct ring_view *v, uint32_t index)
{
	struct xfer_cqe *e = ring_cqe_at(v, index);
	struct xfer_cqe_word {
		uint32_t flags;
		uint16_t path, seq;
	} w;

	_Static_assert(offsetof(struct xfer_cqe, flags) == 16 &&
		       offsetof(struct xfer_cqe, seq) == 22 &&
		       offsetof(struct xfer_cqe, handle) == 24, "CQE layout");
	w.flags = e->flags;
	w.path = e->path;
	w.seq = ring_cq_seq(v, index);
	uint64_t word;
	memcpy(&word, &w, sizeof(word));
	/* (G) pairs with the acquire in ring_cqe_ready(). */
	__atomic_store_n((uint64_t *)&e->flags, word, __ATOMIC_RELEASE);
}

/* Publish completions up to tail; true if the client asked for a wake-up. */
static inline bool ring_cq_publish(const struct ring_view *v, uint32_t tail)
{
	/* (C) pairs with the acquire in ring_cq_avail(). */
	atomic_store_explicit(v->cq_tail, tail, memory_order_release);
	/* (E) order the tail store before the flag load. */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(v->cq_flags, memory_order_relaxed) &
	       XFER_CQ_NEED_WAKEUP;
}

/* --- consumer side of the CQ (libxfer) --- */

static inline uint32_t ring_cq_avail(const struct ring_view *v,
				     uint32_t head)
{
	/* (C) pairs with the release in ring_cq_publish(). */
	return atomic_load_explicit(v->cq_tail, memory_order_acquire) - head;
}

/* With phase: is the entry at index there (G)? */
static inline bool ring_cqe_ready(const struct ring_view *v, uint32_t index)
{
	/* (G) pairs with the release in ring_cqe_write(). */
	return __atomic_load_n(&ring_cqe_at(v, index)->seq, __ATOMIC_ACQUIRE) ==
	       ring_cq_seq(v, index);
}

static inline void ring_cq_release(const struct ring_view *v, uint32_t head)
{
	/* (D) we have read the entries before xferd may overwrite them. */
	atomic_store_explicit(v->cq_head, head, memory_order_release);
}

/*
 * After ring_cq_release(): true if xferd sleeps waiting for CQ room and
 * must be woken.  (E) again, with cq_head as the "tail" that xferd
 * re-reads after setting XFER_SQ_CQ_WAIT.
 */
static inline bool ring_cq_room_wanted(const struct ring_view *v)
{
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(v->sq_flags, memory_order_relaxed) &
	       XFER_SQ_CQ_WAIT;
}

/*
 * Doorbell arming for a sleeper (E): set flag in *flags, then re-check
 * with a full fence in between.  Returns true if work arrived meanwhile
 * (the caller must not sleep).  `avail` re-reads the producer's tail.
 */
static inline void ring_flag_set(_Atomic uint32_t *flags, uint32_t flag)
{
	atomic_fetch_or_explicit(flags, flag, memory_order_relaxed);
	/* (E) the flag store is ordered before the caller's tail re-read. */
	atomic_thread_fence(memory_order_seq_cst);
}

static inline void ring_flag_clear(_Atomic uint32_t *flags, uint32_t flag)
{
	atomic_fetch_and_explicit(flags, ~flag, memory_order_relaxed);
}

#endif /* XFER_PROTO_RING_H */
