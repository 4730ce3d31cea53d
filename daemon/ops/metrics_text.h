/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics_text.h - a stats snapshot (ops/stats.h) as the Prometheus text
 * exposition format, version 0.0.4.
 *
 * Pure: no daemon state, no I/O; the unit tests and the fuzz harness
 * feed it snapshots of their own.  Label values that came from outside
 * (client names, peer node names) are escaped and anything but printable
 * ASCII is replaced with '?', so the output is valid whatever they hold.
 */
#ifndef XFERD_METRICS_TEXT_H
#define XFERD_METRICS_TEXT_H

#include "ops/stats.h"

struct evbuffer;

/* The Content-Type of what metrics_text_write writes. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Append the exposition of s to out.  Returns 0, or -ENOMEM (out then
 * holds part of it). */
int metrics_text_write(const struct stats_snapshot *s, struct evbuffer *out);

#endif /* XFERD_METRICS_TEXT_H */
