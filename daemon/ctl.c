/*
 * ctl.c - status, clients and regions for xferctl.
 *
 * Read-only requests: anyone who may connect to the socket (mode 0660)
 * may ask.  A connection may ask several questions; a malformed one
 * closes it.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "ctl.pb-c.h"
#include "log.h"
#include "progress.h"
#include "region.h"
#include "wire.h"
#include "xfer_ring.h"
#include "xferd.h"

struct ctl_conn {
	struct xferd *d;
	int sock;
	pid_t pid;
	struct event *ev;
};

static const char *const path_names[XFER_PATH__COUNT] = {
	[XFER_PATH_NONE] = "none",
	[XFER_PATH_MEMCPY] = "memcpy",
	[XFER_PATH_CMA] = "cma",
	[XFER_PATH_CUDA_IPC] = "cuda-ipc",
	[XFER_PATH_RDMA] = "rdma",
	[XFER_PATH_RDMA_STAGED] = "rdma-staged",
	[XFER_PATH_TCP] = "tcp",
};

uint64_t ctl_rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long long size, resident = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int reply_error(struct ctl_conn *cc, int error, const char *message);

static int send_reply(struct ctl_conn *cc, Xfer__Ctl__CtlMsg *m)
{
	m->proto_version = XFER_PROTO_VERSION;
	int rc = wire_send(cc->sock, WIRE_TAG_CTL, &m->base, NULL, 0);
	/* A long list (thousands of regions) outgrows one packet: tell the
	 * asker so, rather than closing on it as if it had misbehaved. */
	if (rc == -EMSGSIZE && m->body_case != XFER__CTL__CTL_MSG__BODY_ERROR)
		return reply_error(cc, -EMSGSIZE,
				   "the answer is too large for one packet");
	return rc;
}

static int reply_error(struct ctl_conn *cc, int error, const char *message)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__Error e = XFER__CTL__ERROR__INIT;

	e.error = error;
	e.message = (char *)message;
	m.body_case = XFER__CTL__CTL_MSG__BODY_ERROR;
	m.error = &e;
	return send_reply(cc, &m);
}

static int reply_status(struct ctl_conn *cc)
{
	struct xferd *d = cc->d;
	const struct path_stats *ps = progress_path_stats(d->progress);
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__StatusReply st = XFER__CTL__STATUS_REPLY__INIT;
	Xfer__Ctl__PathCount pcs[XFER_PATH__COUNT];
	Xfer__Ctl__PathCount *pcp[XFER_PATH__COUNT];
	struct regtab_counts counts;
	size_t npaths = 0;

	regtab_count_all(d->regs, &counts);
	st.version = (char *)XFERD_VERSION;
	st.instance_id.data = d->instance_id;
	st.instance_id.len = sizeof(d->instance_id);
	st.pid = (uint32_t)getpid();
	st.uptime_ms = xferd_ms_since(&d->started);
	st.socket_path = d->socket_path;
	st.clients = d->nclients;
	st.regions = counts.regions;
	st.imports = counts.imports;
	st.ops_completed = atomic_load_explicit(&ps->completed,
						memory_order_relaxed);
	st.ops_failed = atomic_load_explicit(&ps->failed, memory_order_relaxed);
	st.workers = 1;
	st.rss_bytes = ctl_rss_bytes();
	for (unsigned p = XFER_PATH_NONE + 1; p < XFER_PATH__COUNT; p++) {
		uint64_t ops = atomic_load_explicit(&ps->ops[p],
						    memory_order_relaxed);
		uint64_t bytes = atomic_load_explicit(&ps->bytes[p],
						      memory_order_relaxed);
		st.bytes_moved += bytes;
		if (!ops)
			continue;
		xfer__ctl__path_count__init(&pcs[npaths]);
		pcs[npaths].path = (char *)path_names[p];
		pcs[npaths].ops = ops;
		pcs[npaths].bytes = bytes;
		pcp[npaths] = &pcs[npaths];
		npaths++;
	}
	st.n_paths = npaths;
	st.paths = pcp;
	m.body_case = XFER__CTL__CTL_MSG__BODY_STATUS_REPLY;
	m.status_reply = &st;
	return send_reply(cc, &m);
}

struct list_acc {
	struct xferd *d;
	void **items;
	size_t n, cap, item_size;
};

/* Append one zeroed item of acc->item_size; NULL when out of memory. */
static void *acc_push(struct list_acc *acc)
{
	if (acc->n == acc->cap) {
		size_t cap = acc->cap ? 2 * acc->cap : 16;
		void **items = realloc(acc->items, cap * sizeof(*items));
		if (!items)
			return NULL;
		acc->items = items;
		acc->cap = cap;
	}
	void *it = calloc(1, acc->item_size);
	if (it)
		acc->items[acc->n++] = it;
	return it;
}

static void acc_free(struct list_acc *acc)
{
	for (size_t i = 0; i < acc->n; i++)
		free(acc->items[i]);
	free(acc->items);
}

static void add_client(const struct client_view *v, void *arg)
{
	struct list_acc *acc = arg;
	Xfer__Ctl__ClientInfo *ci = acc_push(acc);
	struct regtab_counts counts;

	if (!ci)
		return;
	xfer__ctl__client_info__init(ci);
	regtab_count(acc->d->regs, v->id, &counts);
	ci->id = v->id;
	ci->pid = (uint32_t)v->pid;
	ci->uid = (uint32_t)v->uid;
	ci->name = (char *)v->name;
	ci->regions = counts.regions;
	ci->imports = counts.imports;
	ci->ops_completed = atomic_load_explicit(&v->stats->ops_completed,
						 memory_order_relaxed);
	ci->ops_failed = atomic_load_explicit(&v->stats->ops_failed,
					      memory_order_relaxed);
	ci->bytes_moved = atomic_load_explicit(&v->stats->bytes_moved,
					       memory_order_relaxed);
	ci->sq_entries = v->sq_entries;
	ci->connected_ms = v->connected_ms;
}

static int reply_clients(struct ctl_conn *cc)
{
	struct list_acc acc = { .d = cc->d,
				.item_size = sizeof(Xfer__Ctl__ClientInfo) };
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__ClientsReply rep = XFER__CTL__CLIENTS_REPLY__INIT;

	client_foreach(cc->d, add_client, &acc);
	rep.n_clients = acc.n;
	rep.clients = (Xfer__Ctl__ClientInfo **)acc.items;
	m.body_case = XFER__CTL__CTL_MSG__BODY_CLIENTS_REPLY;
	m.clients_reply = &rep;
	int rc = send_reply(cc, &m);
	acc_free(&acc);
	return rc;
}

static void add_region(const struct region *r, void *arg)
{
	struct list_acc *acc = arg;
	Xfer__Ctl__RegionInfo *ri = acc_push(acc);

	if (!ri)
		return;
	xfer__ctl__region_info__init(ri);
	ri->handle = r->handle;
	ri->owner = r->owner;
	ri->kind = (char *)region_kind_name(r->kind);
	ri->length = r->length;
	ri->addr = r->kind == REGION_CMA ? r->addr : 0;
	ri->refs = atomic_load_explicit(&r->imports, memory_order_relaxed);
}

static int reply_regions(struct ctl_conn *cc)
{
	struct list_acc acc = { .d = cc->d,
				.item_size = sizeof(Xfer__Ctl__RegionInfo) };
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__RegionsReply rep = XFER__CTL__REGIONS_REPLY__INIT;

	regtab_foreach_region(cc->d->regs, add_region, &acc);
	rep.n_regions = acc.n;
	rep.regions = (Xfer__Ctl__RegionInfo **)acc.items;
	m.body_case = XFER__CTL__CTL_MSG__BODY_REGIONS_REPLY;
	m.regions_reply = &rep;
	int rc = send_reply(cc, &m);
	acc_free(&acc);
	return rc;
}

/* One request; returns 0, or -EPROTO when the connection must close. */
static int dispatch(struct ctl_conn *cc, const uint8_t *pkt, size_t len)
{
	Xfer__Ctl__CtlMsg *m;
	int rc;

	if (wire_tag(pkt, len) != WIRE_TAG_CTL)
		return -EPROTO;
	m = xfer__ctl__ctl_msg__unpack(NULL, len - WIRE_TAG_LEN,
				       pkt + WIRE_TAG_LEN);
	if (!m)
		return -EPROTO;
	if (m->proto_version != XFER_PROTO_VERSION) {
		reply_error(cc, -EPROTO, "protocol version mismatch");
		rc = -EPROTO;
		goto out;
	}
	switch (m->body_case) {
	case XFER__CTL__CTL_MSG__BODY_STATUS:
		rc = reply_status(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_CLIENTS:
		rc = reply_clients(cc);
		break;
	case XFER__CTL__CTL_MSG__BODY_REGIONS:
		rc = reply_regions(cc);
		break;
	default:
		reply_error(cc, -EPROTO, "unknown request");
		rc = -EPROTO;
		break;
	}
out:
	xfer__ctl__ctl_msg__free_unpacked(m, NULL);
	return rc ? -EPROTO : 0;
}

static void ctl_close(struct ctl_conn *cc)
{
	if (cc->ev)
		event_free(cc->ev);
	close(cc->sock);
	free(cc);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_conn *cc = arg;
	uint8_t pkt[WIRE_MAX_PACKET];
	int fds[WIRE_MAX_FDS];
	unsigned nfds;
	(void)what;

	ssize_t n = wire_recv(fd, pkt, fds, &nfds);
	if (n == -EAGAIN)
		return;
	wire_close_fds(fds, &nfds);
	if (n <= 0 || dispatch(cc, pkt, (size_t)n)) {
		if (n > 0)
			log_info("ctl connection from pid %d: bad request, closed",
				 (int)cc->pid);
		ctl_close(cc);
	}
}

void ctl_accept(struct xferd *d, int sock, const struct ucred *cred,
		const uint8_t *pkt, size_t len)
{
	struct ctl_conn *cc = calloc(1, sizeof(*cc));

	if (!cc) {
		close(sock);
		return;
	}
	cc->d = d;
	cc->sock = sock;
	cc->pid = cred->pid;
	if (dispatch(cc, pkt, len)) {
		log_info("ctl connection from pid %d: bad request, closed",
			 (int)cc->pid);
		ctl_close(cc);
		return;
	}
	cc->ev = event_new(d->base, sock, EV_READ | EV_PERSIST, on_readable, cc);
	if (!cc->ev || event_add(cc->ev, NULL))
		ctl_close(cc);
}
