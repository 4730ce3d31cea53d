/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stage.c - GPU copies of staging chunks (stage.h).
 *
 * Progress thread only.
 */
#include <stdbool.h>
#include <string.h>

#include "core/xop.h"
#include "gpu/gpu.h"
#include "gpu/stage.h"

/* The copy engine ended the chunk's copy. */
static void copy_done(struct xop *op, int64_t result)
{
	stage_done(STAGE_CHUNK_OF_PRIV(op), result);
}

static int start_copy(const struct gpu_stage *s, struct stage_chunk *c,
		      bool to_gpu)
{
	struct xop *op = STAGE_PRIV(c, struct xop);
	uint64_t gaddr = s->addr + c->at;
	uint64_t host = (uint64_t)(uintptr_t)c->buf;

	memset(op, 0, sizeof(*op));
	op->len = c->len;
	op->cls = s->cls;
	gpu_op_of(op)->on_done = copy_done;
	return to_gpu ? gpu_copy(s->g, op, gaddr, s->dev, host, -1, c->len)
		      : gpu_copy(s->g, op, host, -1, gaddr, s->dev, c->len);
}

static int d2h_start(void *arg, struct stage_chunk *c)
{
	return start_copy(arg, c, false);
}

static int h2d_start(void *arg, struct stage_chunk *c)
{
	return start_copy(arg, c, true);
}

const struct stage_ops gpu_stage_d2h = {
	.name = "gpu-d2h",
	.start = d2h_start,
};

const struct stage_ops gpu_stage_h2d = {
	.name = "gpu-h2d",
	.start = h2d_start,
};
