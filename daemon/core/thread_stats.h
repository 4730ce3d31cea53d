/* SPDX-License-Identifier: Apache-2.0 */
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

#include "common/clock.h"  /* now_ns */

static inline void stat_add(_Atomic uint64_t *counter, uint64_t v)
{
	atomic_store_explicit(counter,
			      atomic_load_explicit(counter, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

#endif /* XFERD_THREAD_STATS_H */
