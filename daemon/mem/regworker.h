/* SPDX-License-Identifier: Apache-2.0 */
/*
 * regworker.h - the registration thread: the slow part of a registration
 * (pinning memory for the RDMA NICs, importing a CUDA IPC handle) runs
 * here, off the main thread, so that other clients and xferctl are served
 * while a multi-GiB ibv_reg_mr pins or a CUDA import maps.
 *
 * A job is a struct the submitter embeds (struct regworker_job first) and
 * fills: an owner (the client id), run() for the registration thread and
 * done() for the main thread.  regworker_submit() queues it; the thread
 * takes jobs one at a time in submission order and calls run(); the
 * finished job is handed back to the main thread's event loop (a done
 * list under the lock plus an eventfd the loop watches), which calls
 * done() with run()'s result.  Completions come in submission order.
 *
 * Cancellation: regworker_cancel(owner) (the client went) takes that
 * owner's queued jobs out of the queue and calls their done() with
 * -ECANCELED before it returns, run() never called; a job of that owner
 * that is running or finished but not yet delivered gets done() with
 * -ECANCELED from the loop later, after run() returned.  So done() sees
 * -ECANCELED both when run() never ran and when it ran to the end: the job
 * keeps track of what it holds (a region, an fd) and done() releases
 * whatever is left.  A cancelled job waiting in the test delay (below)
 * skips run().  regworker_destroy() cancels every job it still has.
 *
 * Threads and locks: run() is called on the registration thread with no
 * lock of this module held, so it may take the registration cache's and
 * the handle table's locks; done() and everything else here on the main
 * thread, also without the lock.  The module's one mutex is a leaf lock
 * over the queue, the done list, the running job and the stop flag.  No
 * atomics: everything shared is under that mutex, and the eventfd write
 * (after the unlock) only wakes the loop.
 *
 * Later (the staged data path): a client may get its reply at submit,
 * with the NIC registration finishing here in the background while its
 * transfers are staged.  Nothing in this API changes for that: the
 * submitter replies before regworker_submit() instead of in done(), and
 * done() then publishes the registration to the live region (a release
 * store the progress thread pairs with an acquire) or, on -ECANCELED,
 * drops it.  The client layer marks such a job as not holding the
 * client's socket.
 *
 * Test hook: with test_delay_ms > 0 (xferd reads XFERD_TEST_REG_DELAY_MS)
 * every job waits that long before run(), so that tests can see what
 * happens while a registration is pending.  Never set in production.
 */
#ifndef XFERD_REGWORKER_H
#define XFERD_REGWORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

struct event_base;
struct regworker;

struct regworker_job {
	/* Set by the submitter before regworker_submit(). */
	uint64_t owner;                          /* what cancel matches */
	/* Registration thread.  Returns 0 or -errno. */
	int (*run)(struct regworker_job *j);
	/* Main thread, exactly once per submitted job: run()'s result, or
	 * -ECANCELED.  It owns j again and frees it. */
	void (*done)(struct regworker_job *j, int result);

	/* Private to regworker.c, under its lock. */
	TAILQ_ENTRY(regworker_job) link;
	int result;
	bool cancelled;
};

/*
 * Start the registration thread; its completions arrive through base
 * (the main thread's loop).  NULL on failure (errno set).
 */
struct regworker *regworker_create(struct event_base *base,
				   unsigned test_delay_ms);
/*
 * Cancel every job left (done() with -ECANCELED, on the calling thread,
 * in submission order), after the running one returned; join the thread.
 * Main thread, after the loop stopped or from it.  Accepts NULL.
 */
void regworker_destroy(struct regworker *w);

/* Queue j (filled as above).  Main thread; never blocks. */
void regworker_submit(struct regworker *w, struct regworker_job *j);

/* Cancel every job of owner, as described at the top.  Main thread. */
void regworker_cancel(struct regworker *w, uint64_t owner);

/* Jobs submitted and not yet delivered (queued, running, finished). */
unsigned regworker_pending(struct regworker *w);

#endif /* XFERD_REGWORKER_H */
