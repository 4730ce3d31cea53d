/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_mem.c - a client's memory: registrations (memfd and CMA made
 * here; a memfd's NIC registration and a CUDA allocation's import on the
 * registration thread), imports of tokens (this xferd's at once, another
 * xferd's once that xferd checked it), and their removal, each counted
 * against the client's and its user's limits and budgets.
 *
 * Thread: the main thread, except a job's run() (run_nic_mr,
 * run_cuda_import), which the registration thread calls on a job that
 * no other thread touches until done() (mem/regworker.h).  No lock of
 * its own: run() is called with none held and takes only those of the
 * modules it calls (the registration cache's, the handle table's).
 */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "client_int.h"
#include "gpu/gpu.h"
#include "core/log.h"
#include "mem/cma.h"
#include "mem/dlist.h"
#include "mem/region.h"
#include "mem/regworker.h"
#include "peer/peer.h"
#include "transport/rdma_mr.h"
#include "uid_usage.h"
#include "xferd.h"

/* --- registrations --- */

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
	return client_send(c, &m, NULL, 0);
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
	int err = region_create_cuda(rj->rc, rj->job.owner, &rj->desc, fd,
				     rj->offset, rj->length, &rj->r);
	if (err)
		return err;
	/* GPUDirect RDMA where the NICs and the driver allow: the region
	 * then moves zero-copy by RDMA; else it stays staged (one line). */
	const struct rdma_gpu_span g = {
		.addr = region_gpu_ptr(rj->r) - rj->offset,
		.size = rj->desc.size,
		.client_base = rj->desc.base,
		.buffer_id = rj->desc.buffer_id,
	};
	if ((err = rdma_mr_register_gpu(rj->rc, rj->r, &g)))
		log_info("client %llu: GPU region of %llu bytes not registered "
			 "with the RDMA NICs (%s): RDMA through staging chunks",
			 (unsigned long long)j->owner,
			 (unsigned long long)rj->length, strerror(-err));
	return 0;
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
		err = client_reply(c, rj->seq, result,
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

int client_reg(struct client *c, uint64_t seq,
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
		return client_reply(c, seq, err, why);
	/* Kind, length and descriptors: checked by client_msg_check. */
	switch (req->kind) {
	case XFER__CLIENT__MEM_KIND__MEM_MEMFD:
		/* Counted before it is mapped: the mapping is xferd's. */
		err = budget_take_bytes(&c->d->budget, c->uu, &c->use,
					req->length, &why);
		if (err)
			return client_reply(c, seq, err, why);
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
				return client_reply(c, seq, err, why);
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
			return client_reply(c, seq, -ENOMEM, "out of memory");
		if (req->cuda->vmm) {
			/* The VMM fd waits for the job: one of the client's. */
			err = budget_take_fds(&c->d->budget, c->uu, &c->use,
					      1, &why);
			if (err) {
				free(rj);
				return client_reply(c, seq, err, why);
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
			return client_reply(c, seq, err, why);
		}
		if (err && why)
			return client_reply(c, seq, err, why);
		break;
	default:
		return client_reply(c, seq, -EINVAL, "unknown memory kind");
	}
	if (err) {
		why =
			err == -EPERM && req->kind == XFER__CLIENT__MEM_KIND__MEM_MEMFD
				? "memfd is not sealed against shrink and grow"
			: err == -EPERM ? "xferd may not reach this process's memory as "
					  "its user (ptrace rules: another "
					  "user's, set-uid or not dumpable)"
					: strerror(-err);
		return client_reply(c, seq, err, why);
	}
	c->use.regions++;
	c->uu->regions++;
	return reply_reg(c, seq, r);
}

/* --- imports --- */

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
	return client_send(c, &m, NULL, 0);
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
		err = client_reply(c, w->seq, error,
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
int client_import(struct client *c, uint64_t seq,
		  const Xfer__Client__ImportRequest *req)
{
	struct token tok;
	uint64_t handle, length;
	const char *why;
	int lim = quota_check_import(&c->d->cfg, &c->use, &why);

	if (!lim)
		lim = uid_usage_check(&c->d->cfg, c->uu, UID_BOUND_IMPORTS, &why);

	if (lim)
		return client_reply(c, seq, lim, why);
	if (token_decode(req->token.data, req->token.len, &tok))
		return client_reply(c, seq, -EINVAL, "not a valid token");
	if (memcmp(tok.instance_id, c->d->instance_id, sizeof(tok.instance_id))) {
		struct import_wait *w = malloc(sizeof(*w));
		if (!w)
			return client_reply(c, seq, -ENOMEM, "out of memory");
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
		return client_reply(c, seq, err,
				    "token key does not match a live region");
	c->use.imports++;
	c->uu->imports++;
	return reply_import(c, seq, handle, length);
}

/* --- removal --- */

int client_remove(struct client *c, uint64_t seq, uint64_t handle,
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
	return client_reply(c, seq, err,
			    err == -EACCES ? "no such handle of this client"
			    : err ? "handle is of the other kind" : NULL);
}
