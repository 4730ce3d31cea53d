/* SPDX-License-Identifier: Apache-2.0 */
/*
 * copy_workers.h - threads that run the progress thread's long CPU
 * copies (process_vm_readv/writev of xfer_reg'd memory into and out of
 * staging chunks), so that several chunks are copied at once.
 *
 * One core copying another process's memory moves 6-10 GB/s; a GPU's
 * copy engine moves 55 GB/s between pinned host memory and the GPU.  A
 * staged transfer done on the progress thread alone runs at the speed of
 * its CMA copies, one chunk at a time.  Handing each chunk's copy to one
 * of N workers keeps N copies going while the progress thread goes on
 * serving rings.
 *
 * A job is a struct the submitter embeds (struct copy_job, in
 * core/copy_job.h) and fills: run() on a worker (no lock held; it may
 * only touch what the job owns, e.g. a staging chunk and region
 * references the submitter took), done() back on the progress thread,
 * from copy_workers_poll(), with run()'s result.  The job's cls, tenant
 * and bytes say how it is queued: latency-class jobs start before any
 * queued job of another class, the rest are shared between tenants by
 * weight (deficit round robin over bytes); within a class and tenant,
 * jobs start in submission order.  They end in any order.
 * There is no cancelling: a job whose submitter went keeps running, and
 * its done() releases what it holds.
 *
 * The progress thread polls for finished jobs each pass and keeps
 * polling (does not sleep) while any is out, as it does for GPU copies.
 * With 0 workers nothing is created and copy_workers_submit() runs the
 * job inline (run, then done), as before the pool existed.
 */
#ifndef XFERD_COPY_WORKERS_H
#define XFERD_COPY_WORKERS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/copy_job.h"
#include "core/traffic_class.h"

struct copy_workers;

/* n threads (0: none, jobs run inline).  NULL on failure. */
struct copy_workers *copy_workers_create(unsigned n);
/* Waits for running and queued jobs, calls their done(), joins the
 * threads.  Progress thread (or after it stopped).  Accepts NULL. */
void copy_workers_destroy(struct copy_workers *w);
unsigned copy_workers_count(const struct copy_workers *w);
/* Progress thread.  With no workers (w NULL or 0 threads), runs the job
 * and calls its done() before returning. */
void copy_workers_submit(struct copy_workers *w, struct copy_job *j);
/* Progress thread: the tenants' weights (1 for those tt lacks), for the
 * tenant queues started from now on.  Accepts NULL w. */
void copy_workers_set_weights(struct copy_workers *w,
			      const struct tenant_table *tt);
/* Progress thread: done() for every finished job; returns how many. */
unsigned copy_workers_poll(struct copy_workers *w);
/* Progress thread: jobs submitted whose done() has not run yet. */
bool copy_workers_busy(const struct copy_workers *w);

#endif /* XFERD_COPY_WORKERS_H */
