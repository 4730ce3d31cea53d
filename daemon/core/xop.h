/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xop.h - a descriptor whose data moves asynchronously (to another node).
 *
 * The progress thread makes one per remote WRITE, READ or NOTIFY and
 * hands it to a transport (core/mover.h), which calls back once
 * with the result.  Both live in the progress thread only.
 */
#ifndef XFERD_XOP_H
#define XFERD_XOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

struct prog_client;
struct region;
struct abatch;
struct notify_msg;

#define XOP_PRIV_BYTES 64

/* op's private area as a mover's own struct type (which must fit). */
#define XOP_PRIV(op, type)                                               \
	((type *)(void *)((op)->priv +                                   \
			  0 * sizeof(char[sizeof(type) <= XOP_PRIV_BYTES  \
					  ? 1 : -1])))

struct xop {
	struct prog_client *pc;   /* who submitted it */
	struct abatch *batch;     /* the batch it completes into */
	uint8_t opcode;           /* XFER_OP_WRITE, _READ, _NOTIFY */
	struct region *local;     /* a reference; NULL for NOTIFY */
	uint64_t local_off;
	struct region *remote;    /* REGION_REMOTE, a reference */
	uint64_t remote_off;      /* within the token's range */
	uint64_t len;
	bool notify;              /* the owner is notified after the data */
	uint64_t notify_value;
	uint64_t notify_bytes;    /* NOTIFY: what the notified batch moved */
	/* The notification's message and sender name (core/notify_msg.h),
	 * owned; NULL: none.  Freed with the op (exec_xop_put). */
	struct notify_msg *notify_msg;
	/* Who notifies: pc's client id and uid, for the peer to hand on
	 * (struct xfer_cqe_sender); kept here so transports need not
	 * know the client. */
	uint64_t sender_client;
	uint32_t sender_uid;
	uint16_t path;            /* XFER_PATH_* that moved the data */
	/* How the movers' queues schedule it (core/traffic_class.h): its
	 * class (enum xfer_class, the context's default applied, latency
	 * past latency_max_bytes made bulk) and its client's tenant.  A
	 * mover that does not schedule ignores them. */
	uint8_t cls;
	uint8_t tenant;
	bool class_counted;       /* in the executor's class counters */
	/* Bytes counted in pc's latency_inflight while it is out. */
	uint64_t latency_charged;
	uint64_t start_ns;        /* handed to its mover (wait times) */

	uint64_t deadline_ns;     /* CLOCK_MONOTONIC */
	/* In the list of whoever holds it now: a transport's queues, the
	 * executor's deferred list. */
	TAILQ_ENTRY(xop) q;
	struct xop *next_free;    /* the executor's cache of ended ops */

	/* The private state of the mover holding it now: that mover's own
	 * struct, declared in its own files, reached with XOP_PRIV().  No
	 * other mover touches it; the executor zeroes it when the op
	 * changes hands (a route handed back, exec_op_reroute). */
	_Alignas(16) unsigned char priv[XOP_PRIV_BYTES];
};

TAILQ_HEAD(xop_list, xop);

#endif /* XFERD_XOP_H */
