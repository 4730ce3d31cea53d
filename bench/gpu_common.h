/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_common.h - what the GPU benchmarks (gpubench.c, kvbench.c) share:
 * dying with a message, CUDA calls checked, medians, finding the GPUs
 * (or skipping), the other process that owns the target memory and the
 * pipes to it, CQEs waited for, lists of fixed-size blocks, and the
 * plain CUDA copies they are measured against.
 *
 * Each program defines gpu_bench_name (its messages' prefix).  One
 * thread; the other process is this program started again (CUDA cannot
 * be used across fork), its main() calling owner_main().
 */
#ifndef XFER_BENCH_GPU_COMMON_H
#define XFER_BENCH_GPU_COMMON_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "xfer.h"

/* The program's name, before each message of die(). */
extern const char gpu_bench_name[];

/* Print "NAME: message" on stderr and exit 1 (stdout flushed first). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						 noreturn));

/* A CUDA runtime call that must succeed: else die with where and why. */
#define CK(expr)                                                              \
	do {                                                                  \
		cudaError_t e_ = (expr);                                      \
		if (e_ != cudaSuccess)                                        \
			die("%s:%d: %s: %s", __FILE__, __LINE__, #expr,       \
			    cudaGetErrorString(e_));                          \
	} while (0)

/* The median of v[0, n) (sorted in place). */
double median(double *v, unsigned n);

/*
 * The CUDA driver loaded (returned, for dlsym) and the GPUs counted
 * (*ngpus > 0); NULL after printing the line "skip: ..." when there is
 * no driver or no GPU: the program then exits 77.
 */
void *gpu_find(int *ngpus);

/* --- the other process, which owns the target memory --- */

enum owner_op {
	OWNER_ALLOC = 0,          /* allocate, register, export */
	OWNER_EXIT = 1,           /* exit (no reply) */
	OWNER_FREE = 2,           /* free the last allocation */
};

struct owner_cmd {
	int32_t dev;              /* its GPU; gpubench: -1 a host memfd */
	uint32_t quit;            /* enum owner_op */
	uint64_t len;
};

struct owner_reply {
	int32_t rc;
	uint32_t tok_len;
	uint8_t tok[XFER_TOKEN_MAX];
};

struct owner {
	pid_t pid;
	int to, from;             /* pipes to and from it */
};

/* All of buf through the pipe fd (write if wr); dies if it breaks. */
void full_io(int fd, void *buf, size_t len, bool wr);

/* Start this program again as "ARGV0 --owner SOCKET IN OUT" (socket ""
 * for the default), whose main() then runs owner_main(). */
void owner_start(struct owner *o, const char *argv0, const char *socket);

/*
 * The other process: on xferd at socket ("": the default), it answers
 * each command from pipe in on pipe out: allocates len bytes on GPU dev
 * (its bytes fill) or a host memfd (dev < 0), registers and exports them
 * (the reply: the result and the token); OWNER_FREE frees the last one;
 * OWNER_EXIT returns.
 */
void owner_main(const char *socket, int in, int out, int fill);

/* Send c and wait for the reply (none for OWNER_EXIT: 0); r->rc. */
int owner_ask(struct owner *o, struct owner_cmd c, struct owner_reply *r);

/* OWNER_EXIT, and wait for it to go. */
void owner_stop(struct owner *o);

/* --- through xferd --- */

/* The next CQE, copied out and consumed; 0 or -errno (-ETIME after
 * 20 s: a transfer stalled). */
int wait_cqe(struct xfer_ctx *ctx, struct xfer_cqe *out);

/* A list of every block of a region (or token) of `slots` blocks of blk
 * bytes. */
int make_list(struct xfer_ctx *ctx, uint64_t handle, uint64_t slots,
	      uint64_t blk, struct xfer_dlist **out);

/* --- CUDA in one process --- */

/* Let GPU a reach GPU b's memory directly (a note if it cannot). */
void enable_peer(int a, int b);

/*
 * The baseline: len bytes sdev -> ddev (either -1: pinned host memory),
 * per_run copies back to back on one stream, reps + 1 runs, the first a
 * warm-up; ns[r] the wall time of run r (reps of them).  Across GPUs,
 * peer access is the caller's to enable (enable_peer).
 */
void direct_copy_runs(int sdev, int ddev, uint64_t len, unsigned per_run,
		      unsigned reps, double *ns);

#endif /* XFER_BENCH_GPU_COMMON_H */
