/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - the monotonic clock and millisecond timeouts, one copy for
 * libxfer, xferd and the tools.
 *
 * Header-only: now_ns() sits on the progress thread's and the client's
 * polling paths, where a call into another object would cost more than
 * the clock read itself (a vDSO call).
 */
#ifndef XFER_COMMON_CLOCK_H
#define XFER_COMMON_CLOCK_H

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A timeout in milliseconds as the struct timeval that libevent and
 * SO_RCVTIMEO/SO_SNDTIMEO take. */
static inline struct timeval ms_to_timeval(uint64_t ms)
{
	return (struct timeval){ .tv_sec = (time_t)(ms / 1000),
				 .tv_usec = (suseconds_t)(ms % 1000 * 1000) };
}

/* The same for microseconds (libevent timers kept in µs). */
static inline struct timeval us_to_timeval(uint64_t us)
{
	return (struct timeval){ .tv_sec = (time_t)(us / 1000000),
				 .tv_usec = (suseconds_t)(us % 1000000) };
}

/* Milliseconds since `since` (CLOCK_MONOTONIC): xferd's uptime, a
 * client's or a peer link's age. */
static inline uint64_t xferd_ms_since(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)((now.tv_sec - since->tv_sec) * 1000 +
			  (now.tv_nsec - since->tv_nsec) / 1000000);
}

#endif /* XFER_COMMON_CLOCK_H */
