/*
 * progress.c - the progress thread.
 *
 * Lock order: p->lock (command and notice queues) is never held while
 * the region table's lock is taken, nor the other way round.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "path_local.h"
#include "progress.h"
#include "region.h"

/* SQEs taken from one client before looking at the next (fairness). */
#define DRAIN_BUDGET 256u
/*
 * The completion of a copy at least this large is published at once, not
 * with the rest of the drain: the client refills its window while the
 * next copies run, instead of both sides waiting for a wake-up between
 * rounds (one across vCPUs can take milliseconds).  Smaller copies keep
 * one publication, and its fence, per drain.
 */
#define PUBLISH_EARLY_BYTES (256u << 10)
#define STAGING_BYTES (4u << 20)

enum cmd_kind { CMD_ATTACH, CMD_DETACH, CMD_STOP };

struct cmd {
	enum cmd_kind kind;
	struct prog_client *pc;
	struct cmd *next;
};

struct notice {
	enum notice_kind kind;
	struct prog_client *pc;
	struct notice *next;
};

struct progress {
	struct regtab *regs;
	pthread_t thread;
	bool running;
	int doorbell;              /* eventfd: SQ doorbell and commands */
	int notice_efd;            /* eventfd: notices for the main thread */
	_Atomic uint32_t spin_us;
	int cpu;

	pthread_mutex_t lock;      /* guards cmds and notices */
	struct cmd *cmds, **cmds_tail;
	_Atomic bool cmds_pending; /* lets the loop skip the lock */
	struct notice *notices;

	/* progress thread only */
	struct prog_client **clients;
	size_t nclients, cap;
	struct regtab_memo memo;   /* handles of the latest descriptors */
	struct local_staging staging;
	struct path_stats paths;
};

/*
 * Counters have one writer, this thread: a plain load and store is
 * enough (no locked instruction on the data path); readers on the main
 * thread see a recent value.
 */
static inline void stat_add(_Atomic uint64_t *counter, uint64_t v)
{
	atomic_store_explicit(counter,
			      atomic_load_explicit(counter, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

static void ring_eventfd(int fd)
{
	uint64_t one = 1;
	/* A full counter (EAGAIN) already means "wake up". */
	if (write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("eventfd write");
}

static void post_notice(struct progress *p, struct prog_client *pc,
			enum notice_kind kind)
{
	struct notice *n = malloc(sizeof(*n));

	if (!n)
		abort();
	n->kind = kind;
	n->pc = pc;
	pthread_mutex_lock(&p->lock);
	n->next = p->notices;
	p->notices = n;
	pthread_mutex_unlock(&p->lock);
	ring_eventfd(p->notice_efd);
}

static void mark_broken(struct progress *p, struct prog_client *pc,
			const char *why)
{
	if (pc->broken)
		return;
	pc->broken = why;
	post_notice(p, pc, NOTICE_BROKEN);
}

/* --- completions --- */

static void publish_cq(struct prog_client *pc)
{
	if (!pc->cq_dirty)
		return;
	pc->cq_dirty = false;
	if (ring_cq_publish(&pc->ring, pc->cq_tail))
		ring_eventfd(pc->cq_efd);
}

/* Caller made sure there is room (ring_cq_space). */
static void write_cqe(struct prog_client *pc, const struct xfer_cqe *cqe)
{
	*ring_cqe_at(&pc->ring, pc->cq_tail) = *cqe;
	pc->cq_tail++;
	pc->cq_dirty = true;
}

static struct prog_client *find_client(struct progress *p, uint64_t id)
{
	for (size_t i = 0; i < p->nclients; i++)
		if (p->clients[i]->id == id)
			return p->clients[i];
	return NULL;
}

/* Deliver a notification to the owner of region r.  A full CQ drops it
 * and counts it in cq_overflow: a slow consumer must not stall senders. */
static void notify_owner(struct progress *p, const struct region *r,
			 uint64_t value, int64_t bytes)
{
	struct prog_client *owner = find_client(p, r->owner);

	if (!owner || owner->broken)
		return;
	if (ring_cq_space(&owner->ring, owner->cq_tail) == 0) {
		atomic_fetch_add_explicit(owner->ring.cq_overflow, 1,
					  memory_order_relaxed);
		return;
	}
	write_cqe(owner, &(struct xfer_cqe){
		.user_data = value,
		.result = bytes,
		.flags = XFER_CQE_F_NOTIFY,
		.handle = r->handle,
	});
	publish_cq(owner);
}

/* --- executing one descriptor --- */

static int64_t exec_copy(struct progress *p, struct prog_client *pc,
			 const struct xfer_sqe *sqe, uint16_t *path,
			 struct region **target)
{
	struct region *local = NULL, *remote = NULL;
	uint64_t loff, roff;
	int64_t rc;

	rc = regtab_resolve_memo(p->regs, &p->memo, pc->id, sqe->local,
				 sqe->local_off, sqe->len, false, &local,
				 &loff);
	if (rc)
		return rc;
	rc = regtab_resolve_memo(p->regs, &p->memo, pc->id, sqe->remote,
				 sqe->remote_off, sqe->len, true, &remote,
				 &roff);
	if (rc)
		return rc;
	if (sqe->len == 0)
		rc = 0;
	else if (sqe->opcode == XFER_OP_WRITE)
		rc = local_copy(&p->staging, local, loff, remote, roff,
				sqe->len, path);
	else
		rc = local_copy(&p->staging, remote, roff, local, loff,
				sqe->len, path);
	if (rc > 0) {
		stat_add(&p->paths.bytes[*path], (uint64_t)rc);
		stat_add(&p->paths.ops[*path], 1);
	}
	*target = remote;  /* the caller notifies its owner */
	return rc;
}

static int64_t exec_notify_only(struct progress *p, struct prog_client *pc,
				const struct xfer_sqe *sqe,
				struct region **target)
{
	uint64_t off;

	return regtab_resolve_memo(p->regs, &p->memo, pc->id, sqe->remote, 0, 0,
				   true, target, &off);
}

static int64_t sqe_check(const struct xfer_sqe *sqe)
{
	if (sqe->opcode >= XFER_OP__COUNT || (sqe->flags & ~XFER_SQE_F__ALL) ||
	    sqe->reserved0)
		return -EINVAL;
	if (sqe->opcode == XFER_OP_NOTIFY && (sqe->flags & XFER_SQE_F_NOTIFY))
		return -EINVAL;   /* NOTIFY already is the notification */
	return 0;
}

static void exec_sqe(struct progress *p, struct prog_client *pc,
		     const struct xfer_sqe *sqe)
{
	struct region *target = NULL;  /* lent by p->memo */
	uint16_t path = XFER_PATH_NONE;
	int64_t rc = sqe_check(sqe);

	regtab_memo_sync(p->regs, &p->memo);
	if (!pc->batch.open)
		pc->batch.error = 0, pc->batch.bytes = 0,
		pc->batch.path = XFER_PATH_NONE;
	/* After a failure the rest of a batch moves nothing. */
	if (!rc && !pc->batch.error) {
		switch (sqe->opcode) {
		case XFER_OP_NOP:
			break;
		case XFER_OP_WRITE:
		case XFER_OP_READ:
			rc = exec_copy(p, pc, sqe, &path, &target);
			break;
		case XFER_OP_NOTIFY:
			rc = exec_notify_only(p, pc, sqe, &target);
			break;
		}
	}
	if (rc < 0 && !pc->batch.error)
		pc->batch.error = rc;
	else if (rc > 0)
		pc->batch.bytes += (uint64_t)rc;
	if (path != XFER_PATH_NONE)
		pc->batch.path = path;

	pc->batch.open = (sqe->flags & XFER_SQE_F_LINK) != 0;
	if (pc->batch.open)
		return;
	int64_t result = pc->batch.error ? pc->batch.error
					 : (int64_t)pc->batch.bytes;
	/* Own completion first: drain() reserved its slot, and a client
	 * notifying itself must not take that slot. */
	write_cqe(pc, &(struct xfer_cqe){
		.user_data = sqe->user_data,
		.result = result,
		.path = pc->batch.path,
	});
	if (!pc->batch.error && target &&
	    (sqe->opcode == XFER_OP_NOTIFY || (sqe->flags & XFER_SQE_F_NOTIFY)))
		notify_owner(p, target, sqe->notify_value, result);
	if (result < 0) {
		stat_add(&pc->stats.ops_failed, 1);
		stat_add(&p->paths.failed, 1);
	} else {
		stat_add(&pc->stats.bytes_moved, (uint64_t)result);
	}
	stat_add(&pc->stats.ops_completed, 1);
	stat_add(&p->paths.completed, 1);
}

/* Run what one client submitted; true if anything was done. */
static bool drain(struct progress *p, struct prog_client *pc)
{
	uint32_t avail = ring_sq_avail(&pc->ring, pc->sq_head);

	if (avail == 0 || pc->broken)
		return false;
	if (avail > pc->ring.sq_entries) {
		mark_broken(p, pc, "SQ tail beyond the ring");
		return false;
	}
	/* Every SQE may end a batch and need a CQE: take only as many as
	 * the CQ has room for, so completions are never dropped.
	 * Counting by cq_tail also covers notifications a client sends to
	 * its own regions, which take CQ slots too. */
	uint32_t space = ring_cq_space(&pc->ring, pc->cq_tail);
	uint32_t n = avail < DRAIN_BUDGET ? avail : DRAIN_BUDGET;
	uint32_t tail0 = pc->cq_tail, i;
	for (i = 0; i < n && pc->cq_tail - tail0 < space; i++) {
		struct xfer_sqe sqe;
		ring_sqe_copy(&pc->ring, pc->sq_head + i, &sqe);
		exec_sqe(p, pc, &sqe);
		if (sqe.len >= PUBLISH_EARLY_BYTES)
			publish_cq(pc);
	}
	pc->sq_head += i;
	ring_sq_release(&pc->ring, pc->sq_head);
	publish_cq(pc);
	return i > 0;
}

/* --- commands from the main thread --- */

static void remove_client(struct progress *p, struct prog_client *pc)
{
	for (size_t i = 0; i < p->nclients; i++) {
		if (p->clients[i] != pc)
			continue;
		p->clients[i] = p->clients[--p->nclients];
		break;
	}
	/* Whatever it still had queued is cancelled: never executed.  The
	 * DEAD flag (and the doorbell) stop a client that polls or sleeps. */
	atomic_fetch_or_explicit(pc->ring.sq_flags, XFER_SQ_DEAD,
				 memory_order_release);
	ring_eventfd(pc->cq_efd);
	post_notice(p, pc, NOTICE_DETACHED);
}

/* Returns false when asked to stop. */
static bool apply_cmds(struct progress *p)
{
	pthread_mutex_lock(&p->lock);
	struct cmd *c = p->cmds;
	p->cmds = NULL;
	p->cmds_tail = &p->cmds;
	atomic_store_explicit(&p->cmds_pending, false, memory_order_relaxed);
	pthread_mutex_unlock(&p->lock);

	bool keep_going = true;
	for (struct cmd *next; c; c = next) {
		next = c->next;
		switch (c->kind) {
		case CMD_ATTACH:
			if (p->nclients == p->cap) {
				size_t cap = p->cap ? 2 * p->cap : 16;
				void *a = realloc(p->clients,
						  cap * sizeof(*p->clients));
				if (!a)
					abort();
				p->clients = a;
				p->cap = cap;
			}
			p->clients[p->nclients++] = c->pc;
			break;
		case CMD_DETACH:
			remove_client(p, c->pc);
			break;
		case CMD_STOP:
			keep_going = false;
			break;
		}
		free(c);
	}
	return keep_going;
}

static void push_cmd(struct progress *p, enum cmd_kind kind,
		     struct prog_client *pc)
{
	struct cmd *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	c->kind = kind;
	c->pc = pc;
	pthread_mutex_lock(&p->lock);
	*p->cmds_tail = c;
	p->cmds_tail = &c->next;
	atomic_store_explicit(&p->cmds_pending, true, memory_order_relaxed);
	pthread_mutex_unlock(&p->lock);
	ring_eventfd(p->doorbell);
}

void progress_attach(struct progress *p, struct prog_client *pc)
{
	push_cmd(p, CMD_ATTACH, pc);
}

void progress_detach(struct progress *p, struct prog_client *pc)
{
	push_cmd(p, CMD_DETACH, pc);
}

/* --- sleeping --- */

/* SQEs waiting and CQ room to complete them: work we can do now. */
static bool client_has_work(const struct prog_client *pc)
{
	return !pc->broken && ring_sq_avail(&pc->ring, pc->sq_head) &&
	       ring_cq_space(&pc->ring, pc->cq_tail);
}

static bool any_work(struct progress *p)
{
	if (atomic_load_explicit(&p->cmds_pending, memory_order_relaxed))
		return true;
	for (size_t i = 0; i < p->nclients; i++)
		if (client_has_work(p->clients[i]))
			return true;
	return false;
}

/*
 * Before sleeping: every client must ring when it submits, and a client
 * whose SQEs wait for CQ room must ring when it consumes CQEs
 * (XFER_SQ_CQ_WAIT), or a full CQ would keep this thread spinning.
 */
static void set_wakeup(struct progress *p, bool on)
{
	const uint32_t flags = XFER_SQ_NEED_WAKEUP | XFER_SQ_CQ_WAIT;

	for (size_t i = 0; i < p->nclients; i++) {
		struct prog_client *pc = p->clients[i];
		if (!on) {
			ring_flag_clear(pc->ring.sq_flags, flags);
			continue;
		}
		bool stalled = !pc->broken &&
			       ring_sq_avail(&pc->ring, pc->sq_head) &&
			       !ring_cq_space(&pc->ring, pc->cq_tail);
		ring_flag_set(pc->ring.sq_flags,
			      stalled ? flags : XFER_SQ_NEED_WAKEUP);
	}
}

static void sleep_until_rung(struct progress *p)
{
	/* An idle xferd keeps no region alive, mapped or not. */
	regtab_memo_release(&p->memo);
	/* (E) in ring.h: flags first, then one more look at every tail. */
	set_wakeup(p, true);
	if (!any_work(p)) {
		struct pollfd pfd = { .fd = p->doorbell, .events = POLLIN };
		uint64_t v;
		while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
			;
		if (read(p->doorbell, &v, sizeof(v)) < 0 && errno != EAGAIN)
			log_warn("doorbell read");
	}
	set_wakeup(p, false);
}

static void *progress_main(void *arg)
{
	struct progress *p = arg;
	uint64_t idle_since = now_ns();

	if (p->cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(p->cpu, &set);
		if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
			log_warnx("progress: cannot pin to CPU %d", p->cpu);
	}
	for (;;) {
		if (atomic_load_explicit(&p->cmds_pending, memory_order_relaxed) &&
		    !apply_cmds(p))
			break;
		bool busy = false;
		for (size_t i = 0; i < p->nclients; i++)
			busy |= drain(p, p->clients[i]);
		if (busy) {
			idle_since = now_ns();
			continue;
		}
		uint64_t spin = 1000ull *
			atomic_load_explicit(&p->spin_us, memory_order_relaxed);
		if (now_ns() - idle_since < spin) {
			cpu_relax();
			continue;
		}
		sleep_until_rung(p);
		idle_since = now_ns();
	}
	return NULL;
}

/* --- life cycle --- */

struct progress *progress_create(struct regtab *regs, uint32_t spin_us,
				 int cpu)
{
	struct progress *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->regs = regs;
	p->cpu = cpu;
	atomic_init(&p->spin_us, spin_us);
	p->cmds_tail = &p->cmds;
	pthread_mutex_init(&p->lock, NULL);
	p->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->doorbell < 0)
		goto err_doorbell;
	p->notice_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->notice_efd < 0)
		goto err_notice;
	if (local_staging_init(&p->staging, STAGING_BYTES))
		goto err_staging;
	return p;

err_staging:
	close(p->notice_efd);
err_notice:
	close(p->doorbell);
err_doorbell:
	pthread_mutex_destroy(&p->lock);
	free(p);
	return NULL;
}

int progress_start(struct progress *p)
{
	int err = pthread_create(&p->thread, NULL, progress_main, p);

	if (err)
		return -err;
	p->running = true;
	return 0;
}

void progress_destroy(struct progress *p)
{
	if (!p)
		return;
	if (p->running) {
		push_cmd(p, CMD_STOP, NULL);
		pthread_join(p->thread, NULL);
	}
	regtab_memo_release(&p->memo);
	/* Commands queued behind STOP were never applied. */
	for (struct cmd *c = p->cmds, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	for (struct notice *n = p->notices, *next; n; n = next) {
		next = n->next;
		free(n);
	}
	free(p->clients);
	local_staging_fini(&p->staging);
	close(p->doorbell);
	close(p->notice_efd);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int progress_doorbell_fd(const struct progress *p)
{
	return p->doorbell;
}

int progress_notice_fd(const struct progress *p)
{
	return p->notice_efd;
}

void progress_take_notices(struct progress *p,
			   void (*fn)(struct prog_client *pc,
				      enum notice_kind kind, void *arg),
			   void *arg)
{
	uint64_t v;

	if (read(p->notice_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("notice read");
	pthread_mutex_lock(&p->lock);
	struct notice *n = p->notices;
	p->notices = NULL;
	pthread_mutex_unlock(&p->lock);

	/* The list is newest first; BROKEN before DETACHED of one client
	 * matters, so deliver oldest first. */
	struct notice *rev = NULL;
	for (struct notice *next; n; n = next) {
		next = n->next;
		n->next = rev;
		rev = n;
	}
	for (struct notice *next; rev; rev = next) {
		next = rev->next;
		fn(rev->pc, rev->kind, arg);
		free(rev);
	}
}

void progress_set_spin(struct progress *p, uint32_t spin_us)
{
	atomic_store_explicit(&p->spin_us, spin_us, memory_order_relaxed);
}

const struct path_stats *progress_path_stats(const struct progress *p)
{
	return &p->paths;
}
