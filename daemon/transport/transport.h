/*
 * transport.h - what the progress thread asks of a way to move data to
 * another xferd.
 *
 * exec.c offers each remote operation (xop.h) to the transports in
 * order of preference, RDMA (transport/rdma.c) before TCP
 * (transport/tcp.c); the first that accepts it moves it, stamps its path
 * (XFER_PATH_*) and ends it exactly once through the op_done hook it was
 * created with.  TCP accepts everything: it is the path of last resort.
 */
#ifndef XFERD_TRANSPORT_H
#define XFERD_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/path.h"

struct xop;
struct prog_client;

struct transport_ops {
	const char *name;
	/* Can this transport move op now (its memory, the peer's rails)? */
	bool (*accepts)(void *t, const struct xop *op);
	/* Start op; it ends through op_done (maybe at once). */
	void (*submit)(void *t, struct xop *op);
	/* End every operation of pc with -ECANCELED (it is going away). */
	void (*cancel_client)(void *t, const struct prog_client *pc);
	/* Fail operations past their deadline; true if any ended. */
	bool (*expire)(void *t, uint64_t now_ns);
};

struct transport {
	const struct transport_ops *ops;
	void *impl;
	enum path_route route;  /* the route (engine/path.h) it runs */
};

#endif /* XFERD_TRANSPORT_H */
