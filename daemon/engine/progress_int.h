/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress_int.h - the progress thread's state, shared by progress.c
 * (the thread: its loop, sleeping and waking), progress_life.c (its
 * making, its movers' set-up and its end),
 * progress_cmd.c (commands and notices to and from the main thread)
 * and the executor (exec.c, completion.c, exec_dlist.c: exec_int.h).
 * Nothing else includes it (but the fuzzer of exec_sqe).
 */
#ifndef XFERD_PROGRESS_INT_H
#define XFERD_PROGRESS_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/fairq.h"
#include "core/log.h"
#include "core/mover.h"
#include "core/notify_msg.h"
#include "core/thread_stats.h"
#include "core/xop.h"
#include "engine/progress.h"
#include "local/local.h"
#include "mem/region.h"

struct cmd;
struct notice;
struct event_base;
struct event;
struct linkset;
struct rdma;

/* The executor's own state (exec_int.h; progress_life.c sets it up and tears
 * it down around the thread's life). */
struct exec_state {
	struct regtab_memo memo;   /* handles of the latest descriptors */
	struct path_stats paths;   /* read by ctl from the main thread */
	struct completion_pass pass; /* this pass's completions (latency) */
	struct xop_list deferred;  /* to submit after this pass */
	struct xop *xop_cache;     /* ended operations, for reuse */
	unsigned nxop_cache;
	uint32_t op_timeout_ms;    /* set by commands from main */
	/* A latency-class descriptor (or batch) past this many bytes is
	 * moved as bulk (set by commands from main). */
	uint64_t latency_max_bytes;
	/* Per class and tenant (core/traffic_class.h); the movers that
	 * schedule write their wait times into it too. */
	struct class_stats classes;
	/* Each tenant's byte-rate bucket over every link and rail: the
	 * movers that schedule by tenant charge them (tcp_sched.c,
	 * rdma_sched.c), so a cap holds whichever way the bytes go. */
	struct rate_cap caps[TENANT_MAX];
	/* Whose descriptor exec_sqe() runs now: the client an op a
	 * same-node mover begins (exec_hook_op_begin) is of. */
	struct prog_client *running;
	const struct xfer_sqe *running_sqe;   /* and its descriptor */
	/* The SQ index of the descriptor exec_sqe() runs (drain), and its
	 * notification's message and sender name, copied out of the ring
	 * (msg_set false: none): what carries the notification on copies
	 * them (notify_msg_dup). */
	uint32_t sqe_index;
	bool msg_set;
	struct notify_msg msg;
	/* A prepared-list descriptor's ranges, checked (exec_dlist). */
	struct dl_seg *segs;
	size_t segs_cap;
	/* A run of linked memcpy writes or reads (engine/exec_run.h). */
	struct exec_run {
		struct prog_client *pc;   /* NULL: no run armed */
		uint64_t gen;             /* of the memo it was armed under */
		uint64_t local, remote;   /* the handles the SQEs name */
		uint64_t llimit, rlimit;  /* the ranges those handles grant */
		char *lmap, *rmap;        /* byte 0 of each range, mapped */
		uint64_t bytes, ops;      /* moved, not yet in paths */
		uint8_t opcode;
	} run;
};

struct progress {
	struct regtab *regs;
	struct dltab *dlists;      /* prepared lists (mem/dlist.h) */
	pthread_t thread;
	bool running;
	int doorbell;              /* eventfd: commands from main only */
	int notice_efd;            /* eventfd: notices for the main thread */
	_Atomic uint32_t spin_us;
	_Atomic uint32_t max_inflight; /* per client (progress.h) */
	_Atomic uint32_t notify_queue_max; /* per client (progress.h) */
	_Atomic uint32_t notify_uid_max;   /* per uid (progress.h) */
	int cpu;
	uint8_t instance_id[LINK_ID_LEN]; /* set before the thread starts */

	pthread_mutex_t lock;      /* guards cmds and both notice lists */
	struct cmd *cmds, **cmds_tail;
	_Atomic bool cmds_pending; /* lets the loop skip the lock */
	struct notice *notices;
	struct net_notice *net_notices;

	/* progress thread only (and before start / after join) */
	struct prog_client **clients;
	size_t nclients, cap;
	struct exec_state exec;    /* the executor's */

	struct event_base *base;   /* links, timers, doorbell, clients' wake fds */
	struct event *ev_doorbell, *ev_expire;
	struct linkset *links;     /* NULL: no other nodes */
	struct rdma *rdma;         /* NULL: no RDMA rails */
	/* The ways to other nodes (transports), in order of preference. */
#define MOVERS_MAX 4
	struct mover movers[MOVERS_MAX];
	int nmovers;
	/* The ways on this node (local/local.h); the GPU mover last (see
	 * exec_cancel_client). */
#define LOCAL_MOVERS_MAX 4
	struct mover local[LOCAL_MOVERS_MAX];
	int nlocal;
	struct mover local_polled[LOCAL_MOVERS_MAX]; /* those with a poll */
	int nlocal_polled;
	/* The mover of each route path_choose() gives (ops NULL: none
	 * here), which the executor indexes. */
	struct mover routes[ROUTE_NOTSUP];
	/* Each route's own ops table, the stubs filled in at registration
	 * (mover_ops_fill): every struct mover's ops points here. */
	struct mover_ops route_ops[ROUTE_NOTSUP];
	/* What the same-node movers share: their hooks into the executor,
	 * and the GPU copy engine (res.gpu, NULL: no GPUs), the pinned
	 * chunks where GPU memory meets the links and xfer_reg'd memory
	 * (res.staging, NULL: none; outlives the links and the GPU
	 * copies) and the threads for long CMA copies (res.workers, NULL:
	 * none, they run on this thread), which the transports use too. */
	struct local_res res;
	uint64_t async_ops;        /* operations out on links */
	_Atomic uint64_t ops_in_flight; /* async_ops, for other threads */
	uint64_t last_net_poll_ns;
};

/*
 * The async part of a batch: the batch ends when it is closed (its last
 * SQE was seen) and none of its operations is out any more.
 */
struct abatch {
	struct prog_client *pc;
	uint32_t pending;          /* operations out */
	bool closed;
	int64_t error;             /* first error, or 0 */
	uint64_t bytes;
	uint16_t path;
	uint64_t user_data;        /* of the last SQE */
	/* Notification to send once the whole batch succeeded. */
	struct region *notify_target; /* a reference, local or remote */
	uint64_t notify_value;
	struct notify_msg *notify_msg; /* owned; NULL: none */
	uint64_t start_ns;         /* its first SQE was taken (latency) */
};

static inline void cpu_relax_hint(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

/* One of xferd's own eventfds (the command doorbell, the notices): no
 * client holds them, so they stay non-blocking. */
static inline void ring_eventfd(int fd)
{
	uint64_t one = 1;
	/* A full counter (EAGAIN) already means "wake up". */
	if (write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("eventfd write");
}

/*
 * Ring a client's CQ doorbell: one datagram on xferd's end of its CQ
 * pair.  MSG_DONTWAIT makes this call non-blocking whatever the flags
 * of any file description; EAGAIN means datagrams the client has not
 * read yet fill our send buffer, so its end is readable already;
 * ECONNREFUSED or EPIPE mean it closed or shut down its end and sleeps
 * on nothing of ours.  8 bytes, as the eventfd it replaces gave, so
 * that an older libxfer reading 8 bytes works unchanged.
 */
static inline void ring_client(int cq_sock)
{
	uint64_t one = 1;

	if (cq_sock >= 0)
		(void)send(cq_sock, &one, sizeof(one),
			   MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* exec.c, completion.c */
void exec_sqe(struct progress *p, struct prog_client *pc,
	      const struct xfer_sqe *sqe);
void exec_publish(struct prog_client *pc);
/* CQ slots a client may still fill with new completions. */
uint32_t exec_cq_room(struct prog_client *pc);
/* Notify r's owner (completion.c) on behalf of sender from (a client
 * of another node: the link made the record), with msg (lent; NULL:
 * none): posted, or held for it
 * in order; -ENOBUFS past notify_queue_max held (-ENOMEM), for the
 * sender. */
int exec_notify_owner(struct progress *p, const struct region *r,
		      uint64_t value, int64_t bytes,
		      const struct xfer_cqe_sender *from,
		      const struct notify_msg *msg);
/* Post what pc's queue holds while its CQ has room; true if any. */
bool exec_notify_flush(struct progress *p, struct prog_client *pc);
/* pc goes: what it was still to be told goes with it. */
void exec_notify_forget(struct prog_client *pc);
/* Submit what completions queued while a transport was busy. */
void exec_run_deferred(struct progress *p);
/* Mover hooks: an operation ended; a transport hands one back. */
void exec_op_done(void *arg, struct xop *op, int64_t result);
void exec_op_reroute(void *arg, struct xop *op);
/* The same-node movers' other hooks (struct local_hooks). */
struct xop *exec_hook_op_begin(void *arg, const struct move_req *rq);
/* op's class and tenant from sqe (len bytes of it) and pc (exec.c):
 * for the queues a same-node op meets (copy workers, staging, GPU
 * streams); not in the class counters, which count remote ops. */
void exec_op_set_class(struct progress *p, struct prog_client *pc,
		       const struct xfer_sqe *sqe, struct xop *op,
		       uint64_t len);
/* The tenants' byte-rate caps (p->exec.caps) from tt, at start and at
 * each reload; frame: the largest frame a mover sends at once. */
void exec_caps_set(struct progress *p, const struct tenant_table *tt,
		   uint32_t frame);
void exec_hook_op_abandon(void *arg, struct xop *op);
void exec_forget_batch(void *arg, struct abatch *ab);
/* The client goes: end everything it has out, free its open batch. */
void exec_cancel_client(struct progress *p, struct prog_client *pc);

/* Operations come from a per-thread cache: a vector of thousands of GPU
 * copies must not cost a malloc and a free each. */
struct xop *exec_xop_get(struct progress *p);
void exec_xop_put(struct progress *p, struct xop *op);
void exec_xop_cache_free(struct progress *p);

/* progress.c */
struct prog_client *progress_find_client(struct progress *p, uint64_t id);
void progress_op_started(struct progress *p);
void progress_op_ended(struct progress *p);

/* progress_cmd.c: the main thread's commands, the notices back */
/* Apply the commands queued; false when asked to stop. */
bool progress_apply_cmds(struct progress *p);
/* Stop serving pc (why: for the main thread's log); once. */
void progress_mark_broken(struct progress *p, struct prog_client *pc,
			  const char *why);
void progress_post_net_notice(struct progress *p, struct net_notice *n);
/* Ask the thread to stop (progress_destroy). */
void progress_push_stop(struct progress *p);
/* At destroy: what was queued and never taken. */
void progress_free_queues(struct progress *p);

#endif /* XFERD_PROGRESS_INT_H */
