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

/* A private xferd (for tests that kill it or count its fds). */
struct tl_daemon {
	pid_t pid;
	char socket[108];
	char dir[64];
};
/* Start $XFERD_BIN on a fresh socket with extra "-o key=value" args
 * (NULL-terminated); waits until it accepts connections. */
void tl_daemon_start(struct tl_daemon *d, const char *const *extra_args);
/* SIGTERM and wait; returns its exit status (or -signal). */
int tl_daemon_stop(struct tl_daemon *d);
/* Open file descriptors of a process (count of /proc/pid/fd). */
int tl_fd_count(pid_t pid);

#endif /* XFER_TESTLIB_H */
