/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_stats.h - xferctl stats (everything the metrics endpoint
 * exports, as text or JSON) and xferctl top (rates of it, refreshed).
 */
#ifndef XFERCTL_STATS_H
#define XFERCTL_STATS_H

#include "ctl.pb-c.h"

void print_stats_text(const Xfer__Ctl__CtlMsg *r);
void print_stats_json(const Xfer__Ctl__CtlMsg *r);

/* Fetch one StatsReply: 0 with *out set (free it with
 * xfer__ctl__ctl_msg__free_unpacked), else the exit status, the reason
 * printed. */
typedef int (*stats_fetch_fn)(void *arg, Xfer__Ctl__CtlMsg **out);

/*
 * Show rates every interval_ms until q is pressed (a terminal), or for
 * count frames (count > 0, or stdout not a terminal: plain frames, no
 * escape codes).  Returns the exit status.
 */
int top_run(stats_fetch_fn fetch, void *arg, unsigned interval_ms,
	    unsigned count);

#endif /* XFERCTL_STATS_H */
