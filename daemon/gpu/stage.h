/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stage.h - the GPU copy engine as a stage of the staging pipeline
 * (core/stage.h, stage/pipeline.h): D2H fills a chunk from GPU memory,
 * H2D empties a chunk into GPU memory.
 *
 * One end of a stream in GPU memory is a struct gpu_stage, the stage's
 * argument: the chunk whose bytes are at c->at of the stream moves to or
 * from addr + c->at on GPU dev.  Each chunk's copy is an xop of the copy
 * engine kept in the chunk's priv area, so the copy outlives the
 * pipeline that asked for it; it ends through gpu_copies_poll (the
 * xop's gpu.on_done), which calls stage_done.  A GPU copy cannot be
 * stopped: the stages have no cancel.  The memory stays mapped because
 * every chunk holds the GPU region (the pipeline's cfg.hold must name
 * it).
 *
 * Progress thread only.
 */
#ifndef XFERD_GPU_STAGE_H
#define XFERD_GPU_STAGE_H

#include <stdint.h>

#include "core/stage.h"

struct gpu_copies;

struct gpu_stage {
	struct gpu_copies *g;
	uint64_t addr;      /* GPU address of the stream's byte 0 */
	int dev;            /* the GPU that memory is on */
	/* The stream's class (enum xfer_class): latency chunks' copies go
	 * on the GPU's high-priority stream (gpu/copy.c). */
	uint8_t cls;
};

/* Fill: GPU memory -> chunk.  Drain: chunk -> GPU memory. */
extern const struct stage_ops gpu_stage_d2h;
extern const struct stage_ops gpu_stage_h2d;

#endif /* XFERD_GPU_STAGE_H */
