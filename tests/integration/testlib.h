/* SPDX-License-Identifier: Apache-2.0 */
/*
 * testlib.h - helpers for the integration test programs.
 *
 * Each program is a standalone process against a real xferd: the shared
 * one named by $XFERD_SOCKET (started by tests/run-tests.sh), or one it
 * starts itself with tl_daemon_start().  Exit 0 = pass, 1 = fail,
 * 77 = skip.
 */
#ifndef XFER_TESTLIB_H
#define XFER_TESTLIB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "xfer.h"

#define TL_SKIP 77

/* Fail the test (exit 1) with file:line and a message unless cond. */
#define T_ASSERT(cond, ...)                                                   \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s:%d: assertion '%s' failed: ",      \
				__FILE__, __LINE__, #cond);                   \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
			exit(1);                                              \
		}                                                             \
	} while (0)

/* A libxfer call that must return rc == 0. */
#define T_OK(expr)                                                            \
	do {                                                                  \
		long long rc_ = (long long)(expr);                            \
		T_ASSERT(rc_ == 0, "%s -> %lld (%s)", #expr, rc_,             \
			 xfer_strerror((int)rc_));                            \
	} while (0)

/* The socket of the shared xferd ($XFERD_SOCKET); exits 77 if unset. */
const char *tl_socket(void);
/* xfer_open on tl_socket(), failing the test on error. */
struct xfer_ctx *tl_open(void);

/* Deterministic bytes: pattern depends on seed and absolute position. */
void tl_fill(void *buf, size_t len, uint64_t seed);
/* 0 if buf holds tl_fill(seed) bytes, else the first bad index + 1. */
size_t tl_check(const void *buf, size_t len, uint64_t seed);

/* Submit one prepared SQE and wait (10 s) for its CQE; returns a copy. */
struct xfer_cqe tl_submit_wait(struct xfer_ctx *ctx);
/* Wait (10 s) for the next CQE, copy it, advance; fails on timeout. */
struct xfer_cqe tl_wait(struct xfer_ctx *ctx);
/* A free SQE, submitting what is queued until one is free (10 s, then
 * the test fails): for runs of descriptors longer than the SQ. */
struct xfer_sqe *tl_get_sqe(struct xfer_ctx *ctx);
/* n distinct numbers below total (n <= total), in an order shuffled by
 * seed: the block ids of a scattered transfer. */
void tl_pick(uint32_t *out, uint32_t n, uint32_t total, uint64_t seed);

/* A private xferd (for tests that kill it or count its fds). */
struct tl_daemon {
	pid_t pid;
	char socket[108];
	char dir[64];
};
/* Start $XFERD_BIN on a fresh socket with extra "-o key=value" args
 * (NULL-terminated); waits until it accepts connections and has closed
 * the probe connection again, so its fd count is steady on return.  It
 * dies with the test: a daemon still running at exit is killed and its
 * directory removed. */
void tl_daemon_start(struct tl_daemon *d, const char *const *extra_args);
/* SIGTERM and wait; returns its exit status (or -signal). */
int tl_daemon_stop(struct tl_daemon *d);
/* Wait up to timeout_ms for it to exit by itself (after a signal the
 * test sent); as tl_daemon_stop otherwise.  Fails on timeout. */
int tl_daemon_wait(struct tl_daemon *d, int timeout_ms);
/* SIGTERM and wait up to timeout_ms; on timeout SIGKILL it and fail. */
int tl_daemon_stop_within(struct tl_daemon *d, int timeout_ms);
/* Open file descriptors of a process (count of /proc/pid/fd). */
int tl_fd_count(pid_t pid);

/* CLOCK_MONOTONIC in milliseconds (for deadlines, never for asserts). */
uint64_t tl_now_ms(void);

/* As tl_fill/tl_check, with the pattern taken from position pos on, so
 * that a range can be filled or checked piecewise at absolute offsets. */
void tl_fill_at(void *buf, size_t len, uint64_t seed, uint64_t pos);
size_t tl_check_at(const void *buf, size_t len, uint64_t seed, uint64_t pos);

/* --- registered memory of both kinds --- */

enum tl_kind {
	TL_HOST,   /* xfer_alloc_host: memfd shared with xferd */
	TL_MALLOC, /* malloc + xfer_reg: reached with CMA */
};

struct tl_buf {
	struct xfer_mem *mem;
	uint8_t *ptr;
	size_t len;
	enum tl_kind kind;
	uint64_t handle;
};

void tl_buf_alloc(struct xfer_ctx *ctx, enum tl_kind kind, size_t len,
		  struct tl_buf *b);
void tl_buf_free(struct xfer_ctx *ctx, struct tl_buf *b);
const char *tl_kind_name(enum tl_kind kind);
/* The path xferd must report for a copy between these two kinds. */
unsigned tl_path_for(enum tl_kind a, enum tl_kind b);
/* Export the whole of b into tok (XFER_TOKEN_MAX bytes); returns size. */
size_t tl_export(const struct tl_buf *b, void *tok);

/* --- child processes and pipes --- */

/*
 * fork() for a test's second client.  The child dies with the parent
 * (PR_SET_PDEATHSIG) and is killed at the parent's exit if still there,
 * so a failing test leaves no process behind.  Returns as fork() does.
 */
pid_t tl_fork(void);
/* A TCP port on loopback that nobody listens on right now (the kernel's
 * pick, released again): for a private xferd's listeners. */
uint16_t tl_free_port(void);
/* Wait up to timeout_ms for child pid: its exit status, or -signal.  On
 * timeout the child is killed and the test fails. */
int tl_child_wait(pid_t pid, int timeout_ms);

/* Write all of buf / read exactly len bytes (60 s at most), failing the
 * test on error or when the other end has gone. */
void tl_write_full(int fd, const void *buf, size_t len);
void tl_read_full(int fd, void *buf, size_t len);
/* A length-prefixed blob (a token) through a pipe; returns its size. */
void tl_send_blob(int fd, const void *buf, size_t len);
size_t tl_recv_blob(int fd, void *buf, size_t max);

/*
 * A second client in a child process that owns regions, exports whole
 * region tokens for them and then fills and checks their bytes on
 * request, so another process can move data to and from memory it cannot
 * see.
 */
#define TL_OWNER_MAX 8
struct tl_owner {
	pid_t pid;
	int to, from;             /* command pipe, reply pipe */
	unsigned n;
	uint8_t token[TL_OWNER_MAX][XFER_TOKEN_MAX];
	size_t token_len[TL_OWNER_MAX];
	uint64_t handle[TL_OWNER_MAX]; /* the owner's handle numbers */
	uint64_t len[TL_OWNER_MAX];
};
/* Start the owner on socket (NULL: tl_socket()) with n regions. */
void tl_owner_start(struct tl_owner *o, const char *socket,
		    const enum tl_kind *kinds, const size_t *lens, unsigned n);
/* tl_fill_at / tl_check_at on region idx at [off, off + len). */
void tl_owner_fill(struct tl_owner *o, unsigned idx, uint64_t off,
		   uint64_t len, uint64_t seed, uint64_t pos);
size_t tl_owner_check(struct tl_owner *o, unsigned idx, uint64_t off,
		      uint64_t len, uint64_t seed, uint64_t pos);
/* The owner exports [off, off + len) of region idx into tok
 * (XFER_TOKEN_MAX bytes); returns xfer_export()'s result. */
int tl_owner_export(struct tl_owner *o, unsigned idx, uint64_t off,
		    uint64_t len, void *tok, size_t *tok_len);
/* The owner frees (deregisters) region idx; returns that call's result. */
int tl_owner_free(struct tl_owner *o, unsigned idx);
/* Close the owner's context and reap it; fails unless it exited 0. */
void tl_owner_stop(struct tl_owner *o);

#endif /* XFER_TESTLIB_H */
