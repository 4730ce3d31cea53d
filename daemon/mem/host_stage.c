/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host_stage.c - CPU copies between staging chunks and host memory
 * (host_stage.h).
 *
 * Everything the copy needs is copied into the chunk's priv area at
 * start, so that the job may run after the pipeline (and its stage
 * argument) went.  Progress thread, except job_run (a copy worker).
 */
#include <stdbool.h>
#include <string.h>

#include "common/container_of.h"
#include "mem/cma.h"
#include "mem/host_stage.h"
#include "mem/region.h"

struct host_job {
	struct copy_job job;
	struct region *r;       /* held by the chunk */
	uint64_t off;
	bool to_region;
	bool shared;            /* host_stage.shared */
};

static int64_t job_run(struct copy_job *j)
{
	struct host_job *hj = container_of(j, struct host_job, job);
	struct stage_chunk *c = STAGE_CHUNK_OF_PRIV(hj);

	if (region_kind(hj->r) == REGION_CMA)
		return hj->to_region || hj->shared
			? cma_copy(hj->r, hj->to_region, c->buf, hj->off,
				   c->len)
			: cma_read_private(hj->r, c->buf, hj->off, c->len);
	/* A memfd region: xferd's own mapping. */
	if (hj->to_region)
		memcpy(region_map_at(hj->r, hj->off), c->buf, c->len);
	else
		memcpy(c->buf, region_map_at(hj->r, hj->off), c->len);
	return c->len;
}

static void job_done(struct copy_job *j, int64_t result)
{
	struct host_job *hj = container_of(j, struct host_job, job);

	stage_done(STAGE_CHUNK_OF_PRIV(hj), result);
}

static int start_copy(const struct host_stage *s, struct stage_chunk *c,
		      bool to_region)
{
	struct host_job *hj = STAGE_PRIV(c, struct host_job);

	*hj = (struct host_job){
		.job = { .run = job_run, .done = job_done, .cls = s->cls,
			 .tenant = s->tenant, .bytes = c->len },
		.r = s->r,
		.off = s->off + c->at,
		.to_region = to_region,
		.shared = s->shared,
	};
	if (s->submit) {
		s->submit(s->submit_ctx, &hj->job);
		return 0;
	}
	job_done(&hj->job, job_run(&hj->job));
	return 0;
}

static int read_start(void *arg, struct stage_chunk *c)
{
	return start_copy(arg, c, false);
}

static int write_start(void *arg, struct stage_chunk *c)
{
	return start_copy(arg, c, true);
}

const struct stage_ops host_stage_read = {
	.name = "host-read",
	.start = read_start,
};

const struct stage_ops host_stage_write = {
	.name = "host-write",
	.start = write_start,
};
