/* SPDX-License-Identifier: Apache-2.0 */
/*
 * copy_job.h - one long CPU copy handed to the copy workers
 * (mem/copy_workers.h), as the struct its submitter embeds.
 *
 * Here rather than beside the pool so that what embeds a job (a staging
 * chunk, mem/staging.h) need not depend on the engine that runs it.
 * run() runs on a worker, done() back on the progress thread; see
 * mem/copy_workers.h for the rules.  No code, no state.
 */
#ifndef XFERD_COPY_JOB_H
#define XFERD_COPY_JOB_H

#include <stdint.h>

struct copy_job {
	int64_t (*run)(struct copy_job *j);              /* a worker */
	void (*done)(struct copy_job *j, int64_t result); /* progress */
	/* Private to copy_workers.c. */
	int64_t result;
	struct copy_job *next;
};

#endif /* XFERD_COPY_JOB_H */
