/* SPDX-License-Identifier: Apache-2.0 */
/*
 * completion_stats.h - what every completion leaves behind for the
 * metrics: its latency (submit -> completion, measured in xferd) in a
 * histogram per path, and its errno when it failed.
 *
 * Recorded on the progress thread for every CQE of a submission, so it
 * must cost a few nanoseconds: a descriptor that completes in the pass
 * of the progress loop that took it costs an increment, and the pass
 * is timed once with the clock readings the loop takes anyway
 * (completion_pass_*); one that completes later (links, GPUs) costs
 * one clock read, a short scan of the bucket bounds and two counter
 * bumps.
 * No locks and no locked instructions: each counter has one writer (the
 * progress thread) and is read racily by the main thread (ops/stats.c),
 * which gets a recent, never torn, value: 64-bit relaxed atomics.
 */
#ifndef XFERD_COMPLETION_STATS_H
#define XFERD_COMPLETION_STATS_H

#include <stdint.h>

#include "core/thread_stats.h"
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

static inline unsigned lat_bucket(uint64_t ns)
{
	unsigned b = 0;

	while (b < LAT_BOUNDS && ns > lat_bound_ns[b])
		b++;
	return b;
}

static inline void completion_count_error(struct completion_stats *cs,
					  unsigned path, int64_t result)
{
	if (result < 0)
		stat_add(&cs->errors[path][-result < ERRNO_SLOTS ? -result : 0],
			 1);
}

/* A completion on path with result (bytes or -errno) that took ns. */
static inline void completion_record_ns(struct completion_stats *cs,
					unsigned path, int64_t result,
					uint64_t ns)
{
	if (path >= XFER_PATH__COUNT)
		path = XFER_PATH_NONE;
	stat_add(&cs->lat[path][lat_bucket(ns)], 1);
	stat_add(&cs->lat_sum_ns[path], ns);
	completion_count_error(cs, path, result);
}

/*
 * The same for a submission whose first SQE was taken at start_ns
 * (now_ns()).  Progress thread: completions that end outside the pass
 * they began in (on links, on GPUs).
 */
static inline void completion_record(struct completion_stats *cs,
				     unsigned path, int64_t result,
				     uint64_t start_ns)
{
	completion_record_ns(cs, path, result, now_ns() - start_ns);
}

/*
 * Completions of one pass of the progress loop, timed without a clock
 * read of their own: a descriptor that begins and completes in one pass
 * took (at most) the pass, from the loop's last clock reading before it
 * (start_ns) to the first after it (completion_pass_end), readings the
 * loop takes anyway.  Its CQE was published within that time, so this
 * is what the client could see, rounded up to the pass.
 */
struct completion_pass {
	uint64_t start_ns;
	uint32_t n[XFER_PATH__COUNT];  /* completions this pass, per path */
	uint32_t touched;              /* bit per path with n > 0 */
};
_Static_assert(XFER_PATH__COUNT <= 32, "a bit per path in touched");

/* A completion on path (< XFER_PATH__COUNT: a CQE's path) of a
 * submission begun at start_ns (the start_ns of the pass it began in);
 * counted now, timed at the end of the pass. */
static inline void completion_pass_add(struct completion_pass *pp,
				       struct completion_stats *cs,
				       unsigned path, int64_t result,
				       uint64_t start_ns)
{
	if (start_ns != pp->start_ns) {
		/* Begun in an earlier pass (a batch split over passes). */
		completion_record(cs, path, result, start_ns);
		return;
	}
	completion_count_error(cs, path, result);
	pp->n[path]++;
	pp->touched |= 1u << path;
}

/* The pass ended at now (a clock reading of the loop's): time its
 * completions; the next pass starts there. */
static inline void completion_pass_end(struct completion_pass *pp,
				       struct completion_stats *cs,
				       uint64_t now)
{
	uint32_t t = pp->touched;

	if (t) {
		uint64_t ns = now - pp->start_ns;
		unsigned b = lat_bucket(ns);
		do {
			unsigned path = (unsigned)__builtin_ctz(t);
			t &= t - 1;
			stat_add(&cs->lat[path][b], pp->n[path]);
			stat_add(&cs->lat_sum_ns[path], ns * pp->n[path]);
			pp->n[path] = 0;
		} while (t);
		pp->touched = 0;
	}
	pp->start_ns = now;
}

#endif /* XFERD_COMPLETION_STATS_H */
