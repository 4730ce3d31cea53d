/* SPDX-License-Identifier: Apache-2.0 */
/*
 * copy_job.h - one long CPU copy handed to the copy workers
 * (mem/copy_workers.h), as the struct its submitter embeds.
 *
 * Here rather than beside the pool so that what embeds a job (a staging
 * chunk, mem/staging.h) need not depend on the engine that runs it.
 * run() runs on a worker, done() back on the progress thread; see
 * mem/copy_workers.h for the rules.  No code, no state.
 *
 * The submitter also says whose copy it is: its class and tenant
 * (core/traffic_class.h, from the operation it serves) and its bytes, so
 * that the workers run latency jobs before queued bulk ones and share
 * the rest between tenants by weight.
 */
#ifndef XFERD_COPY_JOB_H
#define XFERD_COPY_JOB_H

#include <stdint.h>

struct copy_job {
	int64_t (*run)(struct copy_job *j);              /* a worker */
	void (*done)(struct copy_job *j, int64_t result); /* progress */
	uint8_t cls;              /* enum xfer_class; 0 (default): as bulk */
	uint8_t tenant;           /* < TENANT_MAX */
	uint64_t bytes;           /* what it copies: its tenant's charge */
	/* Private to copy_workers.c. */
	int64_t result;
	struct copy_job *next;
};

#endif /* XFERD_COPY_JOB_H */
