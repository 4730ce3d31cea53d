/*
 * thread_stats.h - the progress thread's clock and counters.
 *
 * Counters have one writer, the progress thread: a plain load and store
 * is enough (no locked instruction on the data path); readers on the
 * main thread see a recent value.
 */
#ifndef XFERD_THREAD_STATS_H
#define XFERD_THREAD_STATS_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

static inline void stat_add(_Atomic uint64_t *counter, uint64_t v)
{
	atomic_store_explicit(counter,
			      atomic_load_explicit(counter, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* XFERD_THREAD_STATS_H */
