/*
 * completion_stats.h - what every completion leaves behind for the
 * metrics: its latency (submit -> completion, measured in xferd) in a
 * histogram per path, and its errno when it failed.
 *
 * Recorded on the progress thread for every CQE of a submission, so it
 * must cost a few nanoseconds: one clock read (the start was read when
 * the batch's first SQE was taken), a short scan of the bucket bounds
 * (a fast operation stops after a few), two or three counter bumps.
 * No locks and no locked instructions: each counter has one writer (the
 * progress thread) and is read racily by the main thread (ops/stats.c),
 * which gets a recent, never torn, value: 64-bit relaxed atomics.
 */
#ifndef XFERD_COMPLETION_STATS_H
#define XFERD_COMPLETION_STATS_H

#include <stdint.h>

#include "engine/thread_stats.h"
#include "xfer_ring.h"

/* Upper bounds (inclusive, nanoseconds) of the latency buckets: 1, 2, 5
 * per decade from 1 us to 10 s.  A 22nd+1 bucket holds what took longer. */
#define LAT_BOUNDS 22
static const uint64_t lat_bound_ns[LAT_BOUNDS] = {
	1000ull, 2000ull, 5000ull,                         /* us */
	10000ull, 20000ull, 50000ull,
	100000ull, 200000ull, 500000ull,
	1000000ull, 2000000ull, 5000000ull,                /* ms */
	10000000ull, 20000000ull, 50000000ull,
	100000000ull, 200000000ull, 500000000ull,
	1000000000ull, 2000000000ull, 5000000000ull,       /* s */
	10000000000ull,
};

/* Failures are counted per errno value below this; larger ones (none on
 * Linux today) go to slot 0. */
#define ERRNO_SLOTS 134

struct completion_stats {
	/* [path][bucket]: completions per bucket (not cumulative), the
	 * last bucket above 10 s.  Path XFER_PATH_NONE: completions that
	 * moved no data (NOP, NOTIFY, a descriptor refused early). */
	_Atomic uint64_t lat[XFER_PATH__COUNT][LAT_BOUNDS + 1];
	_Atomic uint64_t lat_sum_ns[XFER_PATH__COUNT];
	_Atomic uint64_t errors[XFER_PATH__COUNT][ERRNO_SLOTS];
};

/* A completion on path with result (bytes or -errno) that took ns. */
static inline void completion_record_ns(struct completion_stats *cs,
					unsigned path, int64_t result,
					uint64_t ns)
{
	unsigned b = 0;

	if (path >= XFER_PATH__COUNT)
		path = XFER_PATH_NONE;
	while (b < LAT_BOUNDS && ns > lat_bound_ns[b])
		b++;
	stat_add(&cs->lat[path][b], 1);
	stat_add(&cs->lat_sum_ns[path], ns);
	if (result < 0)
		stat_add(&cs->errors[path][-result < ERRNO_SLOTS ? -result : 0],
			 1);
}

/*
 * The same for a submission whose first SQE was taken at start_ns
 * (now_ns()).  Progress thread.
 */
static inline void completion_record(struct completion_stats *cs,
				     unsigned path, int64_t result,
				     uint64_t start_ns)
{
	completion_record_ns(cs, path, result, now_ns() - start_ns);
}

#endif /* XFERD_COMPLETION_STATS_H */
