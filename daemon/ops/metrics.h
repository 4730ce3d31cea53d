/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h - the Prometheus endpoint: GET /metrics over HTTP (libevent's
 * evhttp) on the main thread, at config metrics_listen.
 */
#ifndef XFERD_METRICS_H
#define XFERD_METRICS_H

struct xferd;
struct metrics;

/*
 * Listen on d->cfg.metrics_listen ("ADDR:PORT"; "off": none, returns
 * NULL and *out NULL).  A port that cannot be bound is logged and leaves
 * xferd without the endpoint rather than without its clients: returns
 * -errno with *out NULL.
 */
int metrics_open(struct xferd *d, struct metrics **out);
/* Accepts NULL. */
void metrics_close(struct metrics *m);

#endif /* XFERD_METRICS_H */
