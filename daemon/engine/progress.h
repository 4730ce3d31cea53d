/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.h - the progress thread: drains client SQs, moves the data,
 * posts CQEs.
 *
 * It polls every attached ring while there is work and for spin_us after,
 * then arms the rings' NEED_WAKEUP flags and sleeps until a client's
 * wake-up socket, the main thread's command doorbell, a link or a timer
 * has something.  An idle xferd therefore uses no CPU.
 *
 * Wake-ups never make xferd read, write or block on anything a client
 * controls; each client has doorbells of its own (progress_doorbells()):
 * - its SQ doorbell, an eventfd the client writes, which this thread
 *   only watches, edge-triggered: it never reads or writes it, so the
 *   client's flags (O_NONBLOCK) and counter do not matter to it, and a
 *   client that reads or saturates it loses only its own wake-ups;
 * - its CQ doorbell, a datagram socket pair: xferd keeps one end, a
 *   file description no client holds, shut for reading, and sends on it
 *   with MSG_DONTWAIT; the client polls the other end.
 *
 * The main thread never touches a ring's private indices: it hands
 * clients over with progress_attach() and takes them back with
 * progress_detach(), which completes asynchronously; the progress thread
 * reports detached (and misbehaving) clients through the notice queue.
 */
#ifndef XFERD_PROGRESS_H
#define XFERD_PROGRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/ring.h"
#include "common/token_codec.h"
#include "core/completion_stats.h"
#include "engine/notify_queue.h"
#include "core/mover.h"
#include "xfer_ring.h"

struct regtab;
struct abatch;
struct event;            /* libevent's, of the thread's base */
struct link_stats;       /* transport/link.h */
struct rdma_peer_rail;   /* transport/rdma.h */
struct Xfer__Peer__PeerMsg;

/* Daemon-wide totals, per path for data that moved. */
struct path_stats {
	_Atomic uint64_t ops[XFER_PATH__COUNT];
	_Atomic uint64_t bytes[XFER_PATH__COUNT];
	_Atomic uint64_t completed; /* CQEs posted for submissions */
	_Atomic uint64_t failed;    /* of which with an error */
	struct completion_stats done; /* latency and errno per path */
};

/* Counters of one client, written by the progress thread, read by ctl. */
struct client_stats {
	_Atomic uint64_t ops_completed;
	_Atomic uint64_t ops_failed;
	_Atomic uint64_t bytes_moved;
	/* Batches that went out (links, GPUs, staging) and came back: the
	 * difference is what the client has in flight. */
	_Atomic uint64_t batches_out, batches_back;
	/* Notifications for it held in xferd (its CQ was full: a gauge),
	 * and those refused to their senders past notify_queue_max. */
	_Atomic uint64_t notify_queued, notify_refused;
};

/*
 * The half of a client the progress thread owns once attached.  The
 * main thread fills it before progress_attach() and may free it only
 * after the notice that it was detached.
 */
struct prog_client {
	uint64_t id;              /* never reused: names it as a sender */
	uint32_t uid;             /* SO_PEERCRED: in its notifications */
	/* Its traffic class by default (enum xfer_class, its hello) and
	 * its tenant (core/traffic_class.h: matched at its hello); fixed
	 * before attach. */
	uint8_t cls;
	uint8_t tenant;
	/* What it calls itself as a sender (its hello, checked: printable
	 * ASCII), handed on with its notifications; fixed before attach. */
	uint8_t name_len;
	char name[XFER_SENDER_NAME_MAX];
	struct ring_view ring;
	/* Its doorbells (progress_doorbells(); set by main before attach,
	 * closed by main after the detach notice; -1: none): the SQ
	 * eventfd, only watched, and xferd's end of the CQ socket pair. */
	int sq_efd;
	int cq_sock;
	struct client_stats stats;

	/* progress thread only, from attach to detach */
	struct event *ev_wake;    /* sq_efd in the thread's event base */
	uint32_t sq_head, cq_tail;
	uint32_t cq_stamped;      /* phase: entries up to here have seq (G) */
	uint32_t sq_known;        /* phase: published up to here, known (F) */
	bool sq_by_tail;          /* phase: the last submit was a run (F) */
	uint32_t cq_head_seen;    /* the client's cq_head when last read */
#ifdef XFERD_STAGE_STAMPS
	uint32_t stage_taken;  /* TSC when the SQE being run was taken */
#endif
	struct {
		bool open;        /* inside a linked run of SQEs */
		int64_t error;    /* first error of the batch, or 0 */
		uint64_t bytes;
		uint16_t path;
		struct abatch *ab; /* set once an entry went out on a link */
		struct xop *gpu_op; /* its GPU copies so far (this pass) */
		uint64_t start_ns; /* its first SQE was taken (latency) */
		uint64_t latency_bytes; /* of its latency-class entries */
	} batch;
	bool cq_dirty;            /* CQEs written, tail not yet published */
	uint32_t cq_reserved;     /* CQ slots promised to async batches */
	uint32_t ops_out;         /* its operations out (op_begin), against
				   * max_inflight */
	/* Bytes of its latency-class operations out now, against
	 * latency_max_bytes (exec_op_set_class). */
	uint64_t latency_inflight;
	/* Notifications for it that wait for CQ room, oldest first. */
	struct notify_queue notify;

	/* progress <-> main hand-over */
	struct prog_client *cmd_next;
	bool detach_requested;
	const char *broken;       /* why the client must be dropped */
};

enum notice_kind {
	NOTICE_DETACHED, /* the progress thread let go: main may free */
	NOTICE_BROKEN,   /* the client corrupted its ring: drop it */
};

/* What the progress thread tells the main thread about other nodes. */
enum net_notice_kind {
	NET_NEED_PEER,   /* operations wait for a link to tok's instance */
	NET_LINK_DOWN,   /* the link to id ended (err, why) */
	NET_CTL_FRAME,   /* a control frame from id for the main thread */
};

struct net_notice {
	enum net_notice_kind kind;
	uint8_t id[LINK_ID_LEN];
	uint64_t gen;             /* NET_LINK_DOWN: which link of id */
	int err;
	char why[128];
	struct token tok;         /* NET_NEED_PEER */
	/* NET_CTL_FRAME: the message, unpacked by the link; freed after
	 * the notice was handled. */
	struct Xfer__Peer__PeerMsg *msg;
	struct net_notice *next;
};

struct progress;

struct progress *progress_create(struct regtab *regs, uint32_t spin_us,
				 int cpu);
/* Before progress_start: this xferd's instance id, the node of every
 * notification a client of ours sends (struct xfer_cqe_sender). */
void progress_set_instance_id(struct progress *p,
			      const uint8_t id[LINK_ID_LEN]);
/* Before progress_start: the prepared lists descriptors name. */
struct dltab;
void progress_set_dlists(struct progress *p, struct dltab *t);
/*
 * Before progress_enable_net: the pinned staging pool (staging_mb MiB in
 * chunks of chunk bytes, mem/staging.h) where GPU memory meets links and
 * xfer_reg'd memory; only with GPUs (0 and no pool without).  -ENOMEM:
 * none could be had (logged; those descriptors then get -ENOTSUP).
 */
int progress_enable_staging(struct progress *p, uint32_t staging_mb,
			    uint32_t chunk);
/* n copy workers (mem/copy_workers.h) for the CMA copies of staged
 * transfers and for memfd <-> CMA copies of cma_split_bytes and more (0:
 * none of those; local/cma_split.h); n -1 chooses from the CPU count.
 * Before progress_start.  Returns how many run (0: the progress thread
 * copies). */
int progress_enable_copy_workers(struct progress *p, int n,
				 uint64_t cma_split_bytes);
struct staging_stats;
/* For ctl, from any thread: false (and zeros) when there is no pool. */
bool progress_staging_stats(const struct progress *p,
			    struct staging_stats *out);
struct rdma;
/* The RDMA transport, for xferctl's tables (transport/rdma.h:
 * rdma_rail_stats, rdma_qp_list), or NULL without rails.  Main thread:
 * set by progress_enable_net before the thread starts, gone with
 * progress_destroy. */
struct rdma *progress_rdma(const struct progress *p);
/* Before progress_start: serve links to other xferds too, and RDMA
 * over the rails rdma_dev_open_all() found (if any). */
int progress_enable_net(struct progress *p, const struct transport_cfg *cfg,
			uint32_t op_timeout_ms);
/* Stops and joins the thread if running; accepts NULL. */
void progress_destroy(struct progress *p);
int progress_start(struct progress *p);

/*
 * A client's doorbells: pc->sq_efd and pc->cq_sock are set (xferd
 * keeps them; progress_doorbells_close() closes them), *client_cq is
 * the client's end of the CQ pair, to hand over with pc->sq_efd and
 * close after.  0 or -errno (then nothing is open).
 */
int progress_doorbells(struct prog_client *pc, int *client_cq);
/* Closes what progress_doorbells() opened (after the detach notice). */
void progress_doorbells_close(struct prog_client *pc);
/* Ring pc's CQ doorbell, from any thread; never blocks. */
void progress_wake_client(const struct prog_client *pc);
/* Readable when notices wait; main calls progress_take_notices(). */
int progress_notice_fd(const struct progress *p);
void progress_take_notices(struct progress *p,
			   void (*fn)(struct prog_client *pc,
				      enum notice_kind kind, void *arg),
			   void *arg);

/* Notices about other nodes; the data is freed after fn returns. */
void progress_take_net_notices(struct progress *p,
			       void (*fn)(const struct net_notice *n, void *arg),
			       void *arg);

void progress_attach(struct progress *p, struct prog_client *pc);
void progress_detach(struct progress *p, struct prog_client *pc);

/* Links (see transport/link.h); applied in the progress thread. */
void progress_link_attach(struct progress *p, int fd,
			  const uint8_t id[LINK_ID_LEN], uint64_t gen,
			  struct link_stats *stats, const void *pending,
			  size_t pending_len, const char *name,
			  const struct rdma_peer_rail *rails, size_t nrails,
			  bool initiator, bool offer_lane);
/* A connection that opened with LaneHello: the latency lane of the link
 * to id if that link offered one with secret (link_lane.c). */
void progress_lane_attach(struct progress *p, int fd,
			  const uint8_t id[LINK_ID_LEN],
			  const uint8_t secret[LINK_LANE_SECRET],
			  const void *pending, size_t pending_len);
void progress_link_close(struct progress *p, const uint8_t id[LINK_ID_LEN],
			 int err, const char *why);
void progress_link_send(struct progress *p, const uint8_t id[LINK_ID_LEN],
			const void *msg, size_t len);
void progress_net_cfg(struct progress *p, const struct transport_cfg *cfg,
		      uint32_t op_timeout_ms);

void progress_set_spin(struct progress *p, uint32_t spin_us);
/*
 * Operations one client may have out on links, GPU copies and staging
 * at once (max_inflight): at the limit its ring is not drained further
 * until some end.  The ring's own bound (one CQ slot per batch) does not
 * cover a long linked batch, whose entries all go out before it ends.
 */
void progress_set_max_inflight(struct progress *p, uint32_t max);
/*
 * Notifications xferd holds for one client whose CQ is full
 * (notify_queue_max): past them the sender's descriptor completes with
 * -ENOBUFS.  0: none are held.
 */
#define PROGRESS_NOTIFY_QUEUE_MAX 65536u  /* until set */
void progress_set_notify_queue_max(struct progress *p, uint32_t max);
/*
 * And for all clients of one user together (notify_queue_max_per_uid):
 * the queues of clients whose notify.pool is the same (set by the main
 * thread before progress_attach, engine/notify_queue.h).
 */
#define PROGRESS_NOTIFY_UID_MAX 262144u  /* until set */
void progress_set_notify_uid_max(struct progress *p, uint32_t max);
/* Operations out now (links, GPU copies, staging), from any thread. */
uint64_t progress_ops_in_flight(const struct progress *p);
const struct path_stats *progress_path_stats(const struct progress *p);
struct class_stats;
/* Per class and per tenant (core/traffic_class.h), for ops/stats.c. */
const struct class_stats *progress_class_stats(const struct progress *p);

#endif /* XFERD_PROGRESS_H */
