/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stages.h - where the time of one descriptor goes (xferbench lat --stages).
 *
 * An xferd built with `make STAGE_STAMPS=1` writes into each same-node
 * completion's handle the TSC (low 32 bits) at which its progress thread
 * took the SQE and at which it had written the CQE.  With the client's
 * own TSC readings before xfer_submit and after the CQE was seen, one
 * round trip splits into three stages:
 *
 *   submit -> taken   the client's stores and fence, the SQ lines moving
 *                     to xferd's core, and xferd noticing them
 *   taken -> CQE      xferd's work: copy the SQE out, check it, move the
 *                     bytes, write the CQE
 *   CQE -> seen       publishing cq_tail, the CQ lines moving back, and
 *                     the client noticing them
 *
 * beside the floor under the first and last: one cache line handed
 * between the client's CPU and xferd's (two threads ping-ponging it).
 * The TSC must be constant and shared by the CPUs (constant_tsc,
 * nonstop_tsc): x86-64 only.
 */
#ifndef XFERBENCH_STAGES_H
#define XFERBENCH_STAGES_H

#include <stdbool.h>
#include <stdint.h>

/* Room for iters round trips; false where there is no usable TSC. */
bool stages_begin(unsigned iters);
uint64_t stages_tsc(void);
/* Round trip i: the client's readings and the CQE's handle; false if
 * the handle carries no stamps (xferd not built with STAGE_STAMPS=1). */
bool stages_record(unsigned i, uint64_t submit, uint64_t seen,
		   uint64_t handle);
/* Print the medians (ns) and RES lines; the floor is measured between
 * client_cpu and xferd_cpu. */
void stages_report(const char *variant, const char *size_label,
		   int client_cpu, int xferd_cpu);

#endif
