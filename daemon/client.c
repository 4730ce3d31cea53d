/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c - libxfer connections: handshake, control messages, teardown.
 *
 * About 1000 lines: every control request of client.proto is validated
 * and answered here, including the asynchronous ones (registrations on
 * the registration thread, remote imports, lookups at peers); splitting
 * them would spread one dispatch switch and its validation over several
 * files.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget.h"
#include "client.h"
#include "client_msg.h"
#include "common/pubname.h"
#include "client.pb-c.h"
#include "gpu/gpu.h"
#include "quota.h"
#include "uid_usage.h"
#include "log.h"
#include "mem/cma.h"
#include "mem/dlist.h"
#include "mem/regworker.h"
#include "meta/cluster.h"
#include "meta/names.h"
#include "peer/peer.h"
#include "transport/rdma_mr.h"
#include "mem/region.h"
#include "common/wire.h"
#include "xferd.h"

/* fds xferd holds for every client: socket, SQ and CQ doorbells, pidfd. */
#define CLIENT_BASE_FDS 4

enum client_state {
	CLIENT_ACTIVE,
	CLIENT_DETACHING, /* socket closed; waiting for the progress thread */
};

struct client {
	struct prog_client pc;   /* first: notices hand back &c->pc */
	struct xferd *d;
	enum client_state state;
	int sock;
	struct event *ev;        /* reading; off while reg_pending */
	struct event *ev_closed; /* hang-up only; on while reg_pending */
	bool reg_pending;        /* a registration job is out (regworker.h) */
	pid_t pid;
	int pidfd;               /* pins pid until cma takes it over */
	struct cma_owner *cma;   /* its CMA regions' process (cma.h), lazily */
	uid_t uid;
	gid_t gid;
	char name[64];
	struct timespec connected;
	void *ring_map;
	size_t ring_len;
	struct client_usage use; /* against the limits (quota.h) */
	struct uid_usage *uu;    /* its user's, against per-uid limits
				  * (uid_usage.h); also its notify pool */
	uint32_t names;          /* names it published, counted in uu */
	TAILQ_ENTRY(client) link;
};

static void client_drop(struct client *c, const char *why);

static struct client *client_of(struct prog_client *pc)
{
	return (struct client *)((char *)pc - offsetof(struct client, pc));
}

/*
 * A pidfd of the process that connected on sock: SO_PEERPIDFD (Linux 6.5)
 * names the process of connect() itself, so a pid reused since cannot be
 * taken for it; before that, pidfd_open of the pid SO_PEERCRED gave
 * (the process may have exited and its pid gone to another in between).
 * -1 if it has exited: then it gets no CMA.
 */
static int peer_pidfd(int sock, pid_t pid)
{
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
	int fd = -1;
	socklen_t len = sizeof(fd);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 &&
	    fd >= 0)
		return fd;
	return pidfd_open(pid, 0);
}

/*
 * The client's CMA owner (cma.h), opened at its first xfer_reg with its
 * uid and gid from SO_PEERCRED; one per connection, shared by all its
 * regions (two descriptors, however many regions).  Takes over pidfd.
 */
static int client_cma_owner(struct client *c, const char **why)
{
	if (c->cma)
		return 0;
	if (c->pidfd < 0)
		return -ESRCH;
	/* The owner adds one fd to the client's (its pidfd was counted at
	 * the handshake): /proc/PID/mem, held until the client goes. */
	int err = budget_take_fds(&c->d->budget, c->uu, &c->use, 1, why);
	if (err)
		return err;
	err = cma_owner_open(c->pid, c->pidfd, c->uid, c->gid, &c->cma);
	if (err)
		budget_release_fds(&c->d->budget, c->uu, &c->use, 1);
	else
		c->pidfd = -1; /* the owner's now */
	return err;
}

/* --- replies --- */

static int send_msg(struct client *c, Xfer__Client__ClientMsg *m,
		    const int *fds, unsigned nfds)
{
	m->proto_version = XFER_PROTO_VERSION;
	return wire_send(c->sock, WIRE_TAG_CLIENT, &m->base, fds, nfds);
}

static int reply_status(struct client *c, uint64_t seq, int error,
			const char *message)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Status st = XFER__CLIENT__STATUS__INIT;

	st.error = error;
	st.message = (char *)(message ? message : "");
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_STATUS;
	m.status = &st;
	return send_msg(c, &m, NULL, 0);
}

/*
 * The live client with this id, or NULL.  An asynchronous answer keeps
 * the id, never the pointer: the client may have gone meanwhile.
 */
static struct client *client_by_id(struct xferd *d, uint64_t id)
{
	struct client *c;

	TAILQ_FOREACH(c, &d->clients, link)
		if (c->pc.id == id)
			return c->state == CLIENT_ACTIVE ? c : NULL;
	return NULL;
}

/* --- requests --- */

/*
 * While a client's registration runs on the registration thread its
 * socket is not read: its next message waits behind the reply, in order
 * (libxfer has one request out per context anyway).  Only a hang-up is
 * watched for (EV_CLOSED), so that a client that dies meanwhile is
 * dropped at once and its job cancelled.
 */
static void client_pause(struct client *c)
{
	event_del(c->ev);
	event_add(c->ev_closed, NULL);
	c->reg_pending = true;
}

static void client_resume(struct client *c)
{
	event_del(c->ev_closed);
	c->reg_pending = false;
	/* Level-triggered: messages that came meanwhile wake it at once. */
	if (event_add(c->ev, NULL))
		client_drop(c, "cannot watch the socket");
}

/* The table takes the region, the client gets its handle and key. */
static int reply_reg(struct client *c, uint64_t seq, struct region *r)
{
	regtab_add_region(c->d->regs, r);

	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__RegReply rep = XFER__CLIENT__REG_REPLY__INIT;
	rep.handle = region_handle(r);
	rep.key.data = (uint8_t *)region_key(r);
	rep.key.len = TOKEN_KEY_LEN;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_REG_REPLY;
	m.reg_reply = &rep;
	log_debug("client %llu: region %llu %s %llu bytes",
		  (unsigned long long)c->pc.id,
		  (unsigned long long)region_handle(r),
		  region_kind_name(region_kind(r)),
		  (unsigned long long)region_length(r));
	return send_msg(c, &m, NULL, 0);
}

/*
 * A registration out on the registration thread: a memfd region (made
 * here) to register with the NICs, or a CUDA allocation to import (the
 * region made there).  Owned by the worker from submit to done.
 */
struct reg_job {
	struct regworker_job job;   /* first: done() hands back &job */
	struct xferd *d;
	struct rcache *rc;
	uint64_t seq;
	uint64_t length;
	struct region *r;           /* memfd: from the start; cuda: run() */
	struct gpu_alloc_desc desc; /* cuda: the allocation */
	uint64_t offset;            /* cuda: of the range in it */
	int fd;                     /* cuda VMM handle until run(), or -1 */
	uint32_t job_fds;           /* counted for fd until done (budget.h) */
	/* memfd, rdma_register = background: the client has its reply
	 * (r is in its table; the job holds a reference of its own) and
	 * its socket was never paused for this job. */
	bool background;
};

/* Registration thread.  The region is not in the table yet (no other
 * thread sees it), or, in the background, it is and the registration
 * is published with a release store (region_set_nic_mr). */
static int run_nic_mr(struct regworker_job *j)
{
	struct reg_job *rj = (struct reg_job *)j;

	/* The pages the client touched, mapped here rather than faulted
	 * one by one in its first copies (never on the main thread). */
	region_prefault(rj->r);
	/* With GPUs, pin the mapping for GPU copies here too, not at its
	 * first GPU copy on the progress thread (a multi-GiB region takes
	 * long to pin, and every client of the node would wait).  Only
	 * while no other thread sees the region: in the background the
	 * progress thread may be pinning it at first use already.  A
	 * failure is left to that first use, which reports it. */
	if (!rj->background && gpu_count() > 0 && region_gpu_pin(rj->r))
		log_warnx("client %llu: region of %llu bytes not pinned for "
			  "GPU copies (pinned at first use instead)",
			  (unsigned long long)j->owner,
			  (unsigned long long)rj->length);
	return rdma_mr_register(rj->rc, rj->r);
}

static int run_cuda_import(struct regworker_job *j)
{
	struct reg_job *rj = (struct reg_job *)j;
	int fd = rj->fd;

	rj->fd = -1;  /* consumed by the import, success or not */
	return region_create_cuda(rj->rc, rj->job.owner, &rj->desc, fd,
				  rj->offset, rj->length, &rj->r);
}

static void reg_job_free(struct reg_job *rj)
{
	region_put(rj->r);  /* with its MR or import, and the memfd */
	if (rj->fd >= 0)
		close(rj->fd);
	free(rj);
}

/* Main thread: the job's result becomes the client's reply. */
static void reg_job_done(struct regworker_job *j, int result)
{
	struct reg_job *rj = (struct reg_job *)j;
	struct client *c = client_by_id(rj->d, j->owner);
	int err;

	if (rj->background) {
		/* run() published the registration to the live region (a
		 * release store, region_set_nic_mr): its next descriptors
		 * go zero-copy.  Failed: they stay staged. */
		if (result && result != -ECANCELED)
			log_warnx("client %llu: region of %llu bytes not "
				  "registered with the RDMA NICs (%s): RDMA "
				  "through staging buffers",
				  (unsigned long long)j->owner,
				  (unsigned long long)rj->length,
				  strerror(-result));
		reg_job_free(rj);
		return;
	}
	if (!c || result == -ECANCELED) {
		reg_job_free(rj);  /* it left meanwhile, or xferd stops */
		return;
	}
	/* The VMM fd was consumed by the import, or closed; an imported
	 * allocation holds no fd of xferd's. */
	budget_release_fds(&c->d->budget, c->uu, &c->use, rj->job_fds);
	client_resume(c);
	if (c->state != CLIENT_ACTIVE) {
		reg_job_free(rj);
		return;
	}
	if (rj->r && region_kind(rj->r) == REGION_MEMFD) {
		if (result)
			/* Not the client's problem: TCP moves it instead. */
			log_warnx("client %llu: region of %llu bytes not "
				  "registered with the RDMA NICs (%s): RDMA "
				  "through staging buffers",
				  (unsigned long long)c->pc.id,
				  (unsigned long long)rj->length,
				  strerror(-result));
		result = 0;
	}
	if (result) {
		/* counted while the job was out */
		c->use.regions--;
		c->uu->regions--;
		err = reply_status(c, rj->seq, result,
				   result != -ENOTSUP ? strerror(-result)
				   : gpu_count()
				   ? "GPU memory this xferd cannot import"
				   : gpu_unavailable_reason());
	} else {
		err = reply_reg(c, rj->seq, rj->r);
		rj->r = NULL;  /* the table's now */
	}
	reg_job_free(rj);
	if (err && c->state == CLIENT_ACTIVE)
		client_drop(c, "cannot send reply");
}

/*
 * Hand rj (filled but for the job's fields) to the registration thread;
 * the reply goes when it is done.  Counted now, so that registrations in
 * flight respect the limits.
 */
static void reg_submit(struct client *c, struct reg_job *rj, uint64_t seq,
		       uint64_t length,
		       int (*run)(struct regworker_job *j))
{
	rj->d = c->d;
	rj->rc = c->d->rcache;
	rj->seq = seq;
	rj->length = length;
	rj->job.owner = c->pc.id;
	rj->job.run = run;
	rj->job.done = reg_job_done;
	c->use.regions++;
	c->uu->regions++;
	if (!rj->background)
		client_pause(c);  /* until done() replies */
	regworker_submit(c->d->regworker, &rj->job);
}

/*
 * GPU memory: the description (checked by client_msg_check) for the
 * import (once per allocation and buffer id: the registration cache),
 * which runs on the registration thread.
 */
static void reg_cuda(const Xfer__Client__RegRequest *req, int *fds,
		     unsigned *nfds, struct reg_job *rj)
{
	const Xfer__Client__CudaAlloc *a = req->cuda;
	struct gpu_alloc_desc *d = &rj->desc;

	memcpy(d->uuid, a->device_uuid.data, GPU_UUID_LEN);
	d->base = a->alloc_base;
	d->size = a->alloc_size;
	d->buffer_id = a->buffer_id;
	d->vmm = a->vmm;
	if (!a->vmm)
		memcpy(d->ipc_handle, a->ipc_handle.data, GPU_IPC_HANDLE_LEN);
	rj->offset = a->offset;
	rj->fd = -1;
	if (a->vmm) {
		rj->fd = fds[0];
		*nfds = 0;  /* the job's now */
	}
}

/* The fds region r holds, counted for c; 0 or -ENFILE with *why. */
static int region_take_fds(struct client *c, const struct region *r,
			   const char **why)
{
	struct region_cost cost;

	region_cost(r, &cost);
	return budget_take_fds(&c->d->budget, c->uu, &c->use,
			       cost.fds, why);
}

static int handle_reg(struct client *c, uint64_t seq,
		      const Xfer__Client__RegRequest *req, int *fds,
		      unsigned *nfds)
{
	const struct xferd_config *cfg = &c->d->cfg;
	struct region *r = NULL;
	struct reg_job *rj;
	const char *why = NULL;
	int err;

	err = quota_check_region(cfg, &c->use, req->length, &why);
	if (!err)
		err = uid_usage_check(cfg, c->uu, UID_BOUND_REGIONS, &why);
	if (err)
		return reply_status(c, seq, err, why);
	/* Kind, length and descriptors: checked by client_msg_check. */
	switch (req->kind) {
	case XFER__CLIENT__MEM_KIND__MEM_MEMFD:
		/* Counted before it is mapped: the mapping is xferd's. */
		err = budget_take_bytes(&c->d->budget, c->uu, &c->use,
					req->length, &why);
		if (err)
			return reply_status(c, seq, err, why);
		rj = calloc(1, sizeof(*rj));
		if (!rj)
			err = -ENOMEM;
		else
			err = region_create_memfd(fds[0], req->length, c->pc.id,
						  &r);
		if (!err) {
			*nfds = 0; /* the region owns the fd now */
			err = region_take_fds(c, r, &why);
			if (err)
				region_put(r);  /* closes the fd */
		}
		if (err) {
			free(rj);
			budget_release_bytes(&c->d->budget, c->uu, &c->use,
					     req->length);
			if (why)
				return reply_status(c, seq, err, why);
			break;
		}
		rj->fd = -1;
		/* Mapped here; registered with the NICs (slow: pins every
		 * page) on the registration thread. */
		rj->r = r;
		if (cfg->rdma_reg_background) {
			/* Reply now; the registration lands in the live
			 * region later (RDMA staged until then). */
			region_get(r);
			rj->background = true;
			reg_submit(c, rj, seq, req->length, run_nic_mr);
			err = reply_reg(c, seq, r);  /* the table's reference */
			return err;
		}
		reg_submit(c, rj, seq, req->length, run_nic_mr);
		return 0;
	case XFER__CLIENT__MEM_KIND__MEM_CUDA:
		rj = calloc(1, sizeof(*rj));
		if (!rj)
			return reply_status(c, seq, -ENOMEM, "out of memory");
		if (req->cuda->vmm) {
			/* The VMM fd waits for the job: one of the client's. */
			err = budget_take_fds(&c->d->budget, c->uu, &c->use,
					      1, &why);
			if (err) {
				free(rj);
				return reply_status(c, seq, err, why);
			}
			rj->job_fds = 1;
		}
		reg_cuda(req, fds, nfds, rj);
		reg_submit(c, rj, seq, req->length, run_cuda_import);
		return 0;
	case XFER__CLIENT__MEM_KIND__MEM_CMA:
		err = client_cma_owner(c, &why);
		if (!err)
			err = region_create_cma(c->cma, req->addr, req->length,
						c->pc.id, &r);
		if (!err && (err = region_take_fds(c, r, &why))) {
			region_put(r);
			return reply_status(c, seq, err, why);
		}
		if (err && why)
			return reply_status(c, seq, err, why);
		break;
	default:
		return reply_status(c, seq, -EINVAL, "unknown memory kind");
	}
	if (err) {
		why =
			err == -EPERM && req->kind == XFER__CLIENT__MEM_KIND__MEM_MEMFD
				? "memfd is not sealed against shrink and grow"
			: err == -EPERM ? "xferd may not reach this process's memory as "
					  "its user (ptrace rules: another "
					  "user's, set-uid or not dumpable)"
					: strerror(-err);
		return reply_status(c, seq, err, why);
	}
	c->use.regions++;
	c->uu->regions++;
	return reply_reg(c, seq, r);
}

static int reply_import(struct client *c, uint64_t seq, uint64_t handle,
			uint64_t length)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__ImportReply rep = XFER__CLIENT__IMPORT_REPLY__INIT;

	rep.handle = handle;
	rep.length = length;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_IMPORT_REPLY;
	m.import_reply = &rep;
	return send_msg(c, &m, NULL, 0);
}

/* An import of another xferd's token, waiting for that xferd's check. */
struct import_wait {
	struct xferd *d;
	uint64_t client;
	uint64_t seq;
	struct token tok;
};

static void on_token_checked(void *arg, int error,
			     const struct region_rdma *rdma)
{
	struct import_wait *w = arg;
	struct client *c = client_by_id(w->d, w->client);
	uint64_t handle, length;
	int err;

	if (!c) {
		/* It left before the answer came: the owner's grant of the
		 * range for it ends. */
		if (rdma)
			peers_release_grant(w->d->peers, w->tok.instance_id,
					    rdma->grant);
		goto out;
	}
	if (error > 0)
		error = -EIO;
	if (!error)
		error = regtab_add_remote_import(w->d->regs, c->pc.id, &w->tok,
						 rdma, &handle, &length);
	if (error && rdma)  /* not adopted (twice is harmless) */
		peers_release_grant(w->d->peers, w->tok.instance_id,
				    rdma->grant);
	if (error) {
		c->use.imports--;  /* counted while the check was out */
		c->uu->imports--;
	}
	if (error)
		err = reply_status(c, w->seq, error,
				   error == -EACCES
				   ? "the owning xferd rejects the token's key"
				   : error == -ESTALE
				   ? "the region is gone on the owning xferd"
				   : error == -EADDRNOTAVAIL
				   ? "the token's address is not a known peer of "
				     "this xferd (no cluster key: only configured "
				     "peers and etcd members are dialed)"
				   : error == -EAGAIN
				   ? "too many connections to other xferds asked "
				     "for at once (peer_connect_rate); retry later"
				   : "cannot reach the xferd that owns the token");
	else
		err = reply_import(c, w->seq, handle, length);
	if (err)
		client_drop(c, "cannot send reply");
out:
	free(w);
}

/*
 * A token of this xferd is checked here and now; one of another xferd is
 * checked by that xferd (connecting to it first), so that a bad key
 * fails the import rather than a transfer.  The answer then comes later,
 * through on_token_checked.
 */
static int handle_import(struct client *c, uint64_t seq,
			 const Xfer__Client__ImportRequest *req)
{
	struct token tok;
	uint64_t handle, length;
	const char *why;
	int lim = quota_check_import(&c->d->cfg, &c->use, &why);

	if (!lim)
		lim = uid_usage_check(&c->d->cfg, c->uu, UID_BOUND_IMPORTS, &why);

	if (lim)
		return reply_status(c, seq, lim, why);
	if (token_decode(req->token.data, req->token.len, &tok))
		return reply_status(c, seq, -EINVAL, "not a valid token");
	if (memcmp(tok.instance_id, c->d->instance_id, sizeof(tok.instance_id))) {
		struct import_wait *w = malloc(sizeof(*w));
		if (!w)
			return reply_status(c, seq, -ENOMEM, "out of memory");
		*w = (struct import_wait){ .d = c->d, .client = c->pc.id,
					   .seq = seq, .tok = tok };
		/* Counted now, so imports in flight respect max_imports. */
		c->use.imports++;
		c->uu->imports++;
		peers_check_token(c->d->peers, &tok, c->uid, on_token_checked,
				  w);
		return 0;
	}
	int err = regtab_add_import(c->d->regs, c->pc.id, &tok, &handle,
				    &length);
	if (err)
		return reply_status(c, seq, err,
				    "token key does not match a live region");
	c->use.imports++;
	c->uu->imports++;
	return reply_import(c, seq, handle, length);
}

static int handle_remove(struct client *c, uint64_t seq, uint64_t handle,
			 bool is_import)
{
	struct region_cost cost = { 0 };
	int err;

	/* What the region counted against the client's budgets. */
	if (!is_import)
		regtab_region_cost(c->d->regs, c->pc.id, handle, &cost);
	err = regtab_remove(c->d->regs, c->pc.id, handle, is_import);
	if (!err && is_import) {
		c->use.imports--;
		c->uu->imports--;
	} else if (!err) {
		c->use.regions--;
		c->uu->regions--;
		budget_release_bytes(&c->d->budget, c->uu, &c->use,
				     cost.host_bytes);
		budget_release_fds(&c->d->budget, c->uu, &c->use, cost.fds);
	}
	/* Its prepared lists go with it. */
	if (!err)
		dltab_remove_target(c->d->dlists, c->pc.id, handle);
	return reply_status(c, seq, err,
			    err == -EACCES ? "no such handle of this client"
			    : err ? "handle is of the other kind" : NULL);
}

/* --- prepared descriptor lists --- */

/* Read exactly len bytes at off of fd into buf (a memfd the client may
 * still change: what is read is what is checked and kept). */
static int read_all(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EINVAL;
		done += (size_t)n;
	}
	return 0;
}

/*
 * The fd of a list's entries must be a memfd holding them all: reading
 * it then never waits (a FIFO, a socket or a file on a network or FUSE
 * file system could stall the main thread, which serves every client),
 * and a short one is refused before anything is allocated for it.
 */
static int entries_fd_check(int fd, uint64_t need, const char **why)
{
	struct stat st;

	if (fcntl(fd, F_GET_SEALS) < 0 || fstat(fd, &st) ||
	    !S_ISREG(st.st_mode)) {
		*why = "a list's entries come in a memfd";
		return -EINVAL;
	}
	if ((uint64_t)st.st_size < need) {
		*why = "the fd holds fewer entries than count";
		return -EINVAL;
	}
	return 0;
}

static int reply_dlist(struct client *c, uint64_t seq, uint64_t handle)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__DlistCreateReply rep =
		XFER__CLIENT__DLIST_CREATE_REPLY__INIT;

	rep.handle = handle;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE_REPLY;
	m.dlist_create_reply = &rep;
	return send_msg(c, &m, NULL, 0);
}

/*
 * A list over one of the client's regions or imports: its entries are
 * read from the memfd once, checked against the handle's range, and
 * kept by xferd.
 */
static int handle_dlist_create(struct client *c, uint64_t seq,
			       const Xfer__Client__DlistCreateRequest *req,
			       const int *fds)
{
	const struct xferd_config *cfg = &c->d->cfg;
	uint32_t n = req->count;
	uint64_t *off = NULL, *lens = NULL, end = 0, roff;
	struct region *r;
	bool is_import = false;
	int err;
	const char *why = NULL;

	if (n > cfg->dlist_max_entries)
		return reply_status(c, seq, -E2BIG,
				    "more entries than dlist_max_entries");
	err = entries_fd_check(fds[0], (uint64_t)n * (req->length ? 1 : 2) *
					       sizeof(uint64_t), &why);
	if (err)
		return reply_status(c, seq, err, why);
	off = malloc((size_t)n * sizeof(*off));
	if (req->length == 0)
		lens = malloc((size_t)n * sizeof(*lens));
	if (!off || (req->length == 0 && !lens)) {
		err = -ENOMEM;
		why = "out of memory";
		goto fail;
	}
	if (read_all(fds[0], off, (size_t)n * sizeof(*off), 0) ||
	    (lens && read_all(fds[0], lens, (size_t)n * sizeof(*lens),
			      (off_t)((size_t)n * sizeof(*off))))) {
		err = -EINVAL;
		why = "the fd holds fewer entries than count";
		goto fail;
	}
	err = dlist_check(n, off, lens, req->length, UINT64_MAX, &end);
	if (err) {
		why = err == -ERANGE ? "an entry's offset + length overflows"
				     : "an entry of length 0";
		goto fail;
	}
	/* [0, end) inside the handle's range: its own region, or else an
	 * import (the token's range). */
	err = regtab_resolve(c->d->regs, c->pc.id, req->target, 0, end, false,
			     &r, &roff);
	if (err && err != -ERANGE) {
		is_import = true;
		err = regtab_resolve(c->d->regs, c->pc.id, req->target, 0, end,
				     true, &r, &roff);
	}
	if (err) {
		why = err == -ERANGE ? "an entry lies outside its region or token"
				     : "the list's target is no region or "
				       "import of this client";
		goto fail;
	}
	region_put(r);
	uint64_t handle;
	err = dltab_add(c->d->dlists, c->pc.id, req->target, is_import, n, off,
			lens, req->length, end,
			(struct dlist_limits){
				.lists = cfg->dlist_max_per_client,
				.entries = cfg->dlist_max_client_entries,
				.uid = &c->uu->lists,
				.uid_lists = cfg->dlist_max_per_uid,
				.uid_bytes = cfg->dlist_max_uid_bytes },
			&handle);
	if (err) {
		/* The client's bound is checked first: if it holds room,
		 * its user's was hit. */
		bool mine = err == -ENOSPC
			? dltab_count(c->d->dlists, c->pc.id) >=
				  cfg->dlist_max_per_client
			: dltab_entries(c->d->dlists, c->pc.id) + n >
				  cfg->dlist_max_client_entries;
		why = err == -ENOSPC && mine
			? "too many lists (dlist_max_per_client)"
		    : err == -ENOSPC ? "too many lists of this user "
				       "(dlist_max_per_uid)"
		    : err == -ENOBUFS && mine
			? "entries of this client's lists would exceed "
			  "dlist_max_client_entries"
		    : err == -ENOBUFS ? "memory of this user's lists would "
					"exceed dlist_max_uid_bytes"
				      : "out of memory";
		goto fail;
	}
	log_debug("client %llu: list %llx of %u entries over %llu",
		  (unsigned long long)c->pc.id, (unsigned long long)handle, n,
		  (unsigned long long)req->target);
	return reply_dlist(c, seq, handle);
fail:
	free(off);
	free(lens);
	return reply_status(c, seq, err, why);
}

static int handle_dlist_destroy(struct client *c, uint64_t seq,
				uint64_t handle)
{
	int err = dltab_remove(c->d->dlists, c->pc.id, handle);

	return reply_status(c, seq, err, err ? "no such list of this client"
					      : NULL);
}

/* --- publish and lookup --- */

/* A publish that waits for etcd (metadata = etcd): whom to answer. */
struct publish_wait {
	struct xferd *d;
	uint64_t client;
	uint64_t seq;
	char name[NAMES_NAME_MAX + 1];
};

/* The user's count of names follows the table: what this client holds
 * now (a publish may replace a token under a name it has). */
static void names_recount(struct client *c)
{
	uint32_t now = (uint32_t)names_client_count(c->d->names, c->pc.id);

	c->uu->names = c->uu->names - c->names + now;
	c->names = now;
}

static void on_cluster_published(void *arg, int error)
{
	struct publish_wait *w = arg;
	struct client *c = client_by_id(w->d, w->client);

	if (c) {
		/* Another node has the name: it is not ours here either. */
		if (error) {
			names_unpublish(w->d->names, w->name, c->pc.id,
					(uint32_t)c->uid, NULL);
			names_recount(c);
		}
		if (reply_status(c, w->seq, error,
				 error == -EEXIST ? "name published by another node"
				 : error ? strerror(-error) : NULL))
			client_drop(c, "cannot send reply");
	}
	free(w);
}

static int publish_in_cluster(struct client *c, uint64_t seq,
			      const Xfer__Client__PublishRequest *req)
{
	struct publish_wait *w = malloc(sizeof(*w));

	if (!w)
		return reply_status(c, seq, 0, NULL); /* local only, for now */
	*w = (struct publish_wait){ .d = c->d, .client = c->pc.id, .seq = seq };
	snprintf(w->name, sizeof(w->name), "%s", req->name);
	if (cluster_publish(c->d->cluster, req->name, req->token.data,
			    req->token.len, on_cluster_published, w) == 1)
		return 0;
	free(w);
	return reply_status(c, seq, 0, NULL);
}

/*
 * The name goes into the namespace of the client's uid (SO_PEERCRED at
 * connect): another user's name of the same spelling is no conflict.
 * Only a shared name leaves this xferd (etcd, other nodes' lookups).
 */
static int handle_publish(struct client *c, uint64_t seq,
			  const Xfer__Client__PublishRequest *req)
{
	/* Name, flags and token length: checked by client_msg_check.  The
	 * table keeps opaque bytes: a token is checked where it is used,
	 * on import at the xferd that owns it. */
	bool shared = req->flags & NAMES_SHARED;
	const char *why = NULL;
	/* A shared name published again private leaves etcd too. */
	int was = names_flags(c->d->names, (uint32_t)c->uid, req->name);
	int err = names_publish(c->d->names, req->name, c->pc.id,
				(uint32_t)c->uid, req->flags, req->token.data,
				req->token.len);
	/* A new name (not a new token under one it has) past its user's
	 * bound: taken back. */
	if (!err && names_client_count(c->d->names, c->pc.id) > c->names &&
	    (err = uid_usage_check(&c->d->cfg, c->uu, UID_BOUND_NAMES, &why))) {
		names_unpublish(c->d->names, req->name, c->pc.id,
				(uint32_t)c->uid, NULL);
		was = 0;
	}
	names_recount(c);
	if (!err)
		log_debug("client %llu (uid %u): published '%s'%s (%zu bytes)",
			  (unsigned long long)c->pc.id, (unsigned)c->uid,
			  req->name, shared ? " shared" : "", req->token.len);
	if (!err && was > 0 && (was & NAMES_SHARED) && !shared)
		cluster_unpublish(c->d->cluster, req->name);
	if (!err && shared && c->d->cluster)
		return publish_in_cluster(c, seq, req);
	return reply_status(c, seq, err,
			    why ? why
			    : err == -EEXIST
			    ? (shared ? "name published by another client of "
					"this user, or shared by another user"
				      : "name published by another client")
			    : err == -EMLINK
			    ? "too many published names of this client (max_names)"
			    : err ? strerror(-err) : NULL);
}

static int handle_unpublish(struct client *c, uint64_t seq,
			    const Xfer__Client__UnpublishRequest *req)
{
	uint32_t flags = 0;
	int err = names_unpublish(c->d->names, req->name, c->pc.id,
				  (uint32_t)c->uid, &flags);
	names_recount(c);
	if (!err && (flags & NAMES_SHARED))
		cluster_unpublish(c->d->cluster, req->name);
	return reply_status(c, seq, err,
			    err == -ENOENT ? "no such name"
			    : err == -EACCES ? "name published by another client"
			    : err ? strerror(-err) : NULL);
}

static int reply_token(struct client *c, uint64_t seq, const void *token,
		       size_t len)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__LookupReply rep = XFER__CLIENT__LOOKUP_REPLY__INIT;

	rep.token.data = (uint8_t *)token;
	rep.token.len = len;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP_REPLY;
	m.lookup_reply = &rep;
	return send_msg(c, &m, NULL, 0);
}

/* A lookup handed to the peers: whom to answer, and to what. */
struct lookup_wait {
	struct xferd *d;
	uint64_t client;
	uint64_t seq;
};

static void on_peer_lookup(void *arg, int error, const void *token,
			   size_t len)
{
	struct lookup_wait *w = arg;
	struct client *c = client_by_id(w->d, w->client);
	int err;

	if (!c)
		goto out; /* it left before the answer came */
	if (error > 0)
		error = -EIO;
	if (!error && (!token || len == 0 || len > NAMES_TOKEN_MAX))
		error = -EPROTO;
	if (error)
		err = reply_status(c, w->seq, error,
				   error == -ENOENT ? "no such name"
				   : error == -EPROTO ? "malformed answer from a peer"
				   : strerror(-error));
	else
		err = reply_token(c, w->seq, token, len);
	if (err)
		client_drop(c, "cannot send reply");
out:
	free(w);
}

/*
 * "name": the caller's own name in this xferd's table (never another
 * user's: that is what keeps a squatter's name from answering), then
 * the shared names of every configured peer (or etcd's); "~uid/name":
 * that uid's name here, if the caller may see it (names_lookup_as);
 * "node/..." : only that node, which answers shared names alone (as
 * here if it is this one).  An answer from the peers comes later,
 * through on_peer_lookup.
 */
static int handle_lookup(struct client *c, uint64_t seq,
			 const Xfer__Client__LookupRequest *req)
{
	struct xferd *d = c->d;
	struct pubname_ref ref;
	char node[CONFIG_HOST_MAX];
	const void *token;
	size_t len;
	int err;

	/* Well-formed: client_msg_check. */
	if (!pubname_lookup_parse(req->name, &ref))
		return reply_status(c, seq, -EINVAL, "malformed lookup");
	if (ref.node) {
		memcpy(node, ref.node, ref.node_len);
		node[ref.node_len] = '\0';
	}
	if (!ref.node || strcmp(node, peers_node_name(d->peers)) == 0) {
		err = ref.uid == PUBNAME_NO_UID
			? names_lookup(d->names, (uint32_t)c->uid, ref.name,
				       &token, &len)
			: names_lookup_as(d->names, (uint32_t)c->uid, ref.uid,
					  ref.name, &token, &len);
		if (err == 0)
			return reply_token(c, seq, token, len);
		/* "~uid/name" is this node's uid; with no peers configured,
		 * nobody else could have it. */
		if (ref.node || ref.uid != PUBNAME_NO_UID ||
		    (d->cfg.npeers == 0 && !d->cluster))
			return reply_status(c, seq, -ENOENT, "no such name");
	}

	struct lookup_wait *w = malloc(sizeof(*w));
	if (!w)
		return reply_status(c, seq, -ENOMEM, "out of memory");
	*w = (struct lookup_wait){ .d = d, .client = c->pc.id, .seq = seq };
	/* With etcd: one read there for "name" (other nodes' shared names);
	 * a node it knows gets a peer record for "node/name". */
	if (d->cluster && !ref.node) {
		cluster_lookup(d->cluster, ref.name, on_peer_lookup, w);
		return 0;
	}
	if (d->cluster)
		cluster_resolve_node(d->cluster, node);
	/* The peer is asked for "[~uid/]name": its uid, its shared names. */
	peers_lookup(d->peers, ref.node ? node : NULL, ref.qname, c->uid,
		     on_peer_lookup, w);
	return 0;
}

/*
 * One packet from the client.  Returns 0, or -EPROTO (with *why) when the
 * client broke the protocol and must be dropped.
 */
static int dispatch(struct client *c, const uint8_t *pkt, size_t len,
		    int *fds, unsigned *nfds, const char **why)
{
	Xfer__Client__ClientMsg *m;
	int rc = 0;

	if (wire_tag(pkt, len) != WIRE_TAG_CLIENT) {
		*why = "packet without the client tag";
		return -EPROTO;
	}
	m = xfer__client__client_msg__unpack(NULL, len - WIRE_TAG_LEN,
					     pkt + WIRE_TAG_LEN);
	if (!m) {
		*why = "malformed message";
		return -EPROTO;
	}
	rc = client_msg_check(m, *nfds, why);
	if (rc == -EPROTO)
		goto out;
	if (rc) {
		rc = reply_status(c, m->seq, rc, *why);
		goto replied;
	}
	switch (m->body_case) {
	case XFER__CLIENT__CLIENT_MSG__BODY_REG:
		rc = handle_reg(c, m->seq, m->reg, fds, nfds);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_DEREG:
		rc = handle_remove(c, m->seq, m->dereg->handle, false);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_IMPORT:
		rc = handle_import(c, m->seq, m->import);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_UNIMPORT:
		rc = handle_remove(c, m->seq, m->unimport->handle, true);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_PUBLISH:
		rc = handle_publish(c, m->seq, m->publish);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_UNPUBLISH:
		rc = handle_unpublish(c, m->seq, m->unpublish);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP:
		rc = handle_lookup(c, m->seq, m->lookup);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE:
		rc = handle_dlist_create(c, m->seq, m->dlist_create, fds);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_DLIST_DESTROY:
		rc = handle_dlist_destroy(c, m->seq, m->dlist_destroy->handle);
		break;
	default:  /* client_msg_check let no other type through */
		*why = "unexpected message type";
		rc = -EPROTO;
		goto out;
	}
replied:
	if (rc) {
		/* The reply could not be sent: the client stopped reading. */
		*why = "cannot send reply";
		rc = -EPROTO;
	}
out:
	xfer__client__client_msg__free_unpacked(m, NULL);
	return rc;
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	uint8_t pkt[WIRE_MAX_PACKET];
	int fds[WIRE_MAX_FDS];
	unsigned nfds;
	const char *why = NULL;
	(void)what;

	/* A few packets per wake-up, then let others run. */
	for (int i = 0; i < 16; i++) {
		ssize_t n = wire_recv(fd, pkt, fds, &nfds);
		if (n == -EAGAIN)
			return;
		if (n == 0) {
			client_drop(c, "disconnected");
			return;
		}
		if (n < 0) {
			client_drop(c, n == -EMSGSIZE
				       ? "oversized packet or too many fds"
				       : "socket error");
			return;
		}
		int rc = dispatch(c, pkt, (size_t)n, fds, &nfds, &why);
		wire_close_fds(fds, &nfds);
		if (rc) {
			client_drop(c, why);
			return;
		}
		/* An answer sent from inside dispatch (a lookup the peers
		 * answered at once) may have found the socket broken; a
		 * registration on the registration thread holds the rest. */
		if (c->state != CLIENT_ACTIVE || c->reg_pending)
			return;
	}
}

/* --- teardown --- */

/* EV_CLOSED: the client hung up while its registration was out. */
static void on_hangup(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	client_drop(arg, "disconnected");
}

/* What the client held leaves its user's counts (its lists leave with
 * dltab_remove_client), and the connection its uid's.  Its regions are
 * out of the table by then: their fds and mappings go with the last
 * reference (an operation in flight holds one a moment).  Once: the
 * counts are the client's no more. */
static void client_give_back(struct client *c)
{
	c->uu->regions -= c->use.regions;
	c->uu->imports -= c->use.imports;
	c->use.regions = 0;
	c->use.imports = 0;
	names_recount(c);
	budget_release_fds(&c->d->budget, c->uu, &c->use, c->use.fds);
	budget_release_bytes(&c->d->budget, c->uu, &c->use,
			     c->use.host_bytes);
	uid_conn_release(c->uu, UID_CLIENT);
}

static void client_free(struct client *c)
{
	if (c->ev)
		event_free(c->ev);
	if (c->ev_closed)
		event_free(c->ev_closed);
	if (c->sock >= 0)
		close(c->sock);
	progress_doorbells_close(&c->pc);
	if (c->ring_map)
		munmap(c->ring_map, c->ring_len);
	if (c->pidfd >= 0)
		close(c->pidfd);
	cma_owner_put(c->cma);
	/* After the progress thread let go of it (its notify pool). */
	uid_usage_put(c->d->uid_use, c->uu);
	free(c);
}

static void client_drop(struct client *c, const char *why)
{
	struct xferd *d = c->d;

	if (c->state != CLIENT_ACTIVE)
		return;
	log_info_f(&((struct log_fields){ .client_pid = (int)c->pid }),
		   "client %llu (pid %d, %s) dropped: %s",
		   (unsigned long long)c->pc.id, (int)c->pid, c->name, why);
	c->state = CLIENT_DETACHING;
	event_free(c->ev);
	c->ev = NULL;
	event_free(c->ev_closed);
	c->ev_closed = NULL;
	close(c->sock);
	c->sock = -1;
	/* A registration out for it: released (now, or when it returns). */
	if (c->reg_pending)
		regworker_cancel(d->regworker, c->pc.id);
	/* From here no descriptor of anyone reaches this client's memory. */
	regtab_remove_client(d->regs, c->pc.id);
	dltab_remove_client(d->dlists, c->pc.id);
	cluster_client_gone(d->cluster, c->pc.id);
	names_remove_client(d->names, c->pc.id);
	client_give_back(c);
	d->nclients--;
	progress_detach(d->progress, &c->pc);
}

void client_on_notice(struct prog_client *pc, enum notice_kind kind,
		      void *arg)
{
	struct client *c = client_of(pc);
	struct xferd *d = arg;

	switch (kind) {
	case NOTICE_BROKEN:
		client_drop(c, pc->broken);
		break;
	case NOTICE_DETACHED:
		TAILQ_REMOVE(&d->clients, c, link);
		client_free(c);
		break;
	}
}

/* --- handshake --- */

static int make_ring(struct client *c, uint32_t sq_entries,
		     struct xfer_ring_offsets *off, int *ring_fd)
{
	int err = ring_layout(sq_entries, c->d->cfg.ring_index_kb << 10, off);

	if (err)
		return err;
	int fd = memfd_create("xferd-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* Sealed so the client cannot shrink the ring under our feet. */
	if (ftruncate(fd, off->map_size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		goto err_fd;
	c->ring_map = mmap(NULL, off->map_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, fd, 0);
	if (c->ring_map == MAP_FAILED) {
		c->ring_map = NULL;
		goto err_fd;
	}
	/* The queues' pages now, not on the first descriptors; the index
	 * area's only when a client uses it (most never do). */
	uint32_t queues = off->idx_size ? off->idx : off->map_size;
	for (uint32_t at = 0; at < queues; at += 4096)
		((volatile char *)c->ring_map)[at] = 0;
	c->ring_len = off->map_size;
	*(uint32_t *)((char *)c->ring_map + off->magic) = XFER_RING_MAGIC;
	err = ring_view_init(&c->pc.ring, c->ring_map, c->ring_len, off);
	if (err) {
		close(fd);
		return err;
	}
	*ring_fd = fd;
	return 0;
err_fd:
	err = -errno;
	close(fd);
	return err;
}

/*
 * The ring, the client's SQ doorbell (an eventfd) and its end of the CQ
 * doorbell pair (a datagram socket; libxfer before the pair took an
 * eventfd there, and works with it unchanged: it reads up to 8 bytes to
 * reset it).
 */
static int send_hello_reply(struct client *c, uint64_t seq,
			    const struct xfer_ring_offsets *o, int ring_fd,
			    int cq_fd)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__HelloReply rep = XFER__CLIENT__HELLO_REPLY__INIT;
	Xfer__Client__RingLayout rl = XFER__CLIENT__RING_LAYOUT__INIT;
	const int fds[3] = { ring_fd, c->pc.sq_efd, cq_fd };
	Xfer__Token__Address addr[TOKEN_MAX_ADDRS];
	Xfer__Token__Address *addrp[TOKEN_MAX_ADDRS];
	char ifname[TOKEN_MAX_ADDRS][IF_NAMESIZE];
	const struct netaddr *na;
	uint16_t port;
	size_t nna = peers_advertised(c->d->peers, &na, &port), naddr = 0;

	/* The client copies these into every token, which holds at most
	 * TOKEN_MAX_ADDRS: send no more, and only what a token accepts. */
	for (size_t i = 0; i < nna && naddr < TOKEN_MAX_ADDRS; i++) {
		const struct token_addr ta = {
			.ip_len = na[i].family == AF_INET ? 4
				  : na[i].family == AF_INET6 ? 16 : 0,
			.prefix_len = na[i].prefix_len > 128
					      ? 255 : (uint8_t)na[i].prefix_len,
		};
		if (!token_addr_valid(&ta))
			continue;
		xfer__token__address__init(&addr[naddr]);
		addr[naddr].ip.data = (uint8_t *)na[i].ip;
		addr[naddr].ip.len = ta.ip_len;
		addr[naddr].prefix_len = ta.prefix_len;
		addr[naddr].port = port;
		snprintf(ifname[naddr], sizeof(ifname[naddr]), "%.*s",
			 (int)sizeof(na[i].ifname), na[i].ifname);
		addr[naddr].ifname = ifname[naddr];
		addrp[naddr] = &addr[naddr];
		naddr++;
	}

	rl.map_size = o->map_size;
	rl.sq_entries = o->sq_entries;
	rl.cq_entries = o->cq_entries;
	rl.magic = o->magic;
	rl.sq_head = o->sq_head;
	rl.sq_tail = o->sq_tail;
	rl.sq_flags = o->sq_flags;
	rl.sqes = o->sqes;
	rl.cq_head = o->cq_head;
	rl.cq_tail = o->cq_tail;
	rl.cq_flags = o->cq_flags;
	rl.cq_overflow = o->cq_overflow;
	rl.cqes = o->cqes;
	rl.idx = o->idx;
	rl.idx_size = o->idx_size;
	rl.cq_senders = o->cq_senders;
	rl.cq_sender_size = o->cq_sender_size;
	rep.instance_id.data = c->d->instance_id;
	rep.instance_id.len = sizeof(c->d->instance_id);
	rep.client_id = c->pc.id;
	rep.uid = c->uid;
	rep.daemon_pid = (uint32_t)getpid();
	rep.ring = &rl;
	rep.n_addresses = naddr;
	rep.addresses = naddr ? addrp : NULL;
	rep.node_name = (char *)peers_node_name(c->d->peers);
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO_REPLY;
	m.hello_reply = &rep;
	return send_msg(c, &m, fds, 3);
}

/* Refuse a connection before it became a client: one status, close. */
static void refuse(int sock, uint64_t seq, int error, const char *why)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Status st = XFER__CLIENT__STATUS__INIT;

	st.error = error;
	st.message = (char *)why;
	m.proto_version = XFER_PROTO_VERSION;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_STATUS;
	m.status = &st;
	wire_send(sock, WIRE_TAG_CLIENT, &m.base, NULL, 0);
	close(sock);
}

void client_accept(struct xferd *d, int sock, const struct ucred *cred,
		   const uint8_t *pkt, size_t len, int *fds, unsigned nfds)
{
	Xfer__Client__ClientMsg *m = NULL;
	struct client *c = NULL;
	struct xfer_ring_offsets off;
	int ring_fd = -1, cq_fd = -1, err;
	uint64_t seq = 0;
	bool uncount = false;  /* counted against its uid, not a client */
	struct uid_usage *uu = NULL;      /* its uid's, held until out */
	struct client_usage use = { 0 };  /* its fds, until it is a client */
	const char *why;

	bool had_fds = nfds > 0;

	wire_close_fds(fds, &nfds); /* a hello carries none */
	m = xfer__client__client_msg__unpack(NULL, len - WIRE_TAG_LEN,
					     pkt + WIRE_TAG_LEN);
	if (!m || m->body_case != XFER__CLIENT__CLIENT_MSG__BODY_HELLO ||
	    had_fds) {
		log_info("connection from pid %d: expected a hello, dropped",
			 (int)cred->pid);
		close(sock);
		goto out;
	}
	seq = m->seq;
	if (m->proto_version != XFER_PROTO_VERSION) {
		log_info("client pid %d speaks protocol %u, not %u: refused",
			 (int)cred->pid, m->proto_version, XFER_PROTO_VERSION);
		refuse(sock, seq, -EPROTO, "protocol version mismatch");
		goto out;
	}
	if (d->stopping) {
		refuse(sock, seq, -EBUSY, "xferd is stopping");
		goto out;
	}
	if (d->nclients >= d->cfg.max_clients) {
		log_info("client pid %d uid %d refused: xferd has max_clients "
			 "(%u) clients", (int)cred->pid, (int)cred->uid,
			 d->cfg.max_clients);
		refuse(sock, seq, -EUSERS, "xferd has max_clients clients");
		goto out;
	}
	/* Counted from here; client_drop gives it back, and so does every
	 * failure below (uncount). */
	uu = uid_usage_get(d->uid_use, cred->uid);
	err = uu ? uid_conn_take(uu, UID_CLIENT,
				 d->cfg.max_connections_per_uid) : -ENOMEM;
	if (err) {
		log_info("client pid %d uid %d refused: %s", (int)cred->pid,
			 (int)cred->uid, err == -EMFILE
			 ? "the uid is at max_connections_per_uid"
			 : "out of memory");
		refuse(sock, seq, err, err == -EMFILE
		       ? "too many connections of this uid "
			 "(max_connections_per_uid)" : "out of memory");
		goto out;
	}
	uncount = true;
	/* Its socket, its two doorbells (SQ eventfd, xferd's end of the CQ
	 * pair) and its pidfd. */
	err = budget_take_fds(&d->budget, uu, &use, CLIENT_BASE_FDS, &why);
	if (err) {
		log_info("client pid %d uid %d refused: %s", (int)cred->pid,
			 (int)cred->uid, why);
		refuse(sock, seq, err, why);
		goto out;
	}
	uint32_t want = m->hello->sq_entries ? m->hello->sq_entries
					     : d->cfg.sq_entries;
	if (want > d->cfg.max_sq_entries || (want & (want - 1)) ||
	    want < RING_MIN_SQ_ENTRIES) {
		refuse(sock, seq, -EINVAL,
		       "sq_entries must be a power of two within limits");
		goto out;
	}

	c = calloc(1, sizeof(*c));
	if (!c) {
		refuse(sock, seq, -ENOMEM, "out of memory");
		goto out;
	}
	c->d = d;
	c->uu = uid_usage_hold(uu);  /* until client_free */
	c->pc.notify.pool = &uu->notify;
	c->sock = sock;
	c->pid = cred->pid;
	c->uid = cred->uid;
	c->gid = cred->gid;
	c->pc.id = d->next_client_id++;
	c->pc.uid = cred->uid;
	/* Its own doorbells: nothing xferd reads or writes is shared with
	 * another client, nor with this one (engine/progress.h). */
	bool doorbells = progress_doorbells(&c->pc, &cq_fd) == 0;
	c->pidfd = peer_pidfd(sock, c->pid);
	clock_gettime(CLOCK_MONOTONIC, &c->connected);
	snprintf(c->name, sizeof(c->name), "%s",
		 m->hello->name && *m->hello->name ? m->hello->name : "?");
	for (char *p = c->name; *p; p++) /* keep log lines one line */
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (!doorbells || (err = make_ring(c, want, &off, &ring_fd))) {
		refuse(sock, seq, -ENOMEM, "cannot set up the ring");
		c->sock = -1;
		if (cq_fd >= 0)
			close(cq_fd);
		client_free(c);
		goto out;
	}
	err = send_hello_reply(c, seq, &off, ring_fd, cq_fd);
	/* Our mapping stays, and our doorbells; the client has its own
	 * fds, and xferd keeps no copy of the client's CQ end. */
	close(ring_fd);
	close(cq_fd);
	c->ev = event_new(d->base, sock, EV_READ | EV_PERSIST, on_readable, c);
	c->ev_closed = event_new(d->base, sock, EV_CLOSED | EV_PERSIST,
				 on_hangup, c);
	if (err || !c->ev || !c->ev_closed || event_add(c->ev, NULL)) {
		log_warnx("client pid %d: handshake failed", (int)c->pid);
		client_free(c);
		goto out;
	}
	TAILQ_INSERT_TAIL(&d->clients, c, link);
	d->nclients++;
	uncount = false;
	c->use = use;
	progress_attach(d->progress, &c->pc);
	log_info_f(&((struct log_fields){ .client_pid = (int)c->pid }),
		   "client %llu connected: pid %d uid %d '%s', %u SQ entries",
		   (unsigned long long)c->pc.id, (int)c->pid, (int)c->uid,
		   c->name, want);
out:
	if (uncount) {
		budget_release_fds(&d->budget, uu, &use, use.fds);
		uid_conn_release(uu, UID_CLIENT);
	}
	uid_usage_put(d->uid_use, uu);
	if (m)
		xfer__client__client_msg__free_unpacked(m, NULL);
}

/* --- shutdown and listing --- */

void client_goodbye_all(struct xferd *d, const char *reason)
{
	struct client *c;

	TAILQ_FOREACH(c, &d->clients, link) {
		if (c->state != CLIENT_ACTIVE)
			continue;
		Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
		Xfer__Client__Goodbye bye = XFER__CLIENT__GOODBYE__INIT;
		bye.error = -ESHUTDOWN;
		bye.reason = (char *)reason;
		m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_GOODBYE;
		m.goodbye = &bye;
		send_msg(c, &m, NULL, 0);
		/* Wake anyone polling or sleeping on the ring. */
		atomic_fetch_or_explicit(c->pc.ring.sq_flags, XFER_SQ_DEAD,
					 memory_order_release);
		progress_wake_client(&c->pc);
		shutdown(c->sock, SHUT_RDWR);
	}
}

void client_free_all(struct xferd *d)
{
	struct client *c;

	while ((c = TAILQ_FIRST(&d->clients))) {
		TAILQ_REMOVE(&d->clients, c, link);
		regtab_remove_client(d->regs, c->pc.id);
		if (c->state == CLIENT_ACTIVE) {  /* never dropped */
			dltab_remove_client(d->dlists, c->pc.id);
			names_remove_client(d->names, c->pc.id);
			client_give_back(c);
		}
		client_free(c);
	}
	d->nclients = 0;
}

void client_foreach(struct xferd *d,
		    void (*fn)(const struct client_view *v, void *arg),
		    void *arg)
{
	struct client *c;

	TAILQ_FOREACH(c, &d->clients, link) {
		if (c->state != CLIENT_ACTIVE)
			continue;
		struct client_view v = {
			.id = c->pc.id,
			.pid = c->pid,
			.uid = c->uid,
			.name = c->name,
			.sq_entries = c->pc.ring.sq_entries,
			.connected_ms = xferd_ms_since(&c->connected),
			.stats = &c->pc.stats,
		};
		fn(&v, arg);
	}
}
