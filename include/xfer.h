/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xfer.h - libxfer, the client library of xferd.
 *
 * A process opens a context (one Unix-socket connection to the local xferd
 * plus one shared-memory submission/completion ring), registers memory,
 * exports tokens for it, imports the tokens of others, and moves bytes by
 * placing descriptors on the ring.  xferd picks the path; every completion
 * says which path it used.
 *
 * Conventions: functions return 0 (or a count) on success and a negative
 * errno on failure; there is no global error state.  A context is used by
 * one thread at a time.  Control calls (open, register, import, ...) block
 * for one round trip to xferd; ring calls never block except xfer_wait_cqe.
 */
#ifndef XFER_H
#define XFER_H

#include <stddef.h>
#include <stdint.h>

#include "xfer_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

struct xfer_ctx;    /* a connection to xferd with its ring */
struct xfer_mem;    /* memory this context registered */
struct xfer_remote; /* an imported token: a transfer target */
struct xfer_dlist;  /* a prepared descriptor list */

/* Largest token xfer_export() produces. */
#define XFER_TOKEN_MAX 512

/*
 * Connect to xferd at socket_path (NULL: $XFERD_SOCKET, else the default
 * path: $XDG_RUNTIME_DIR/xferd.sock, or /run/xferd/xferd.sock as root) and
 * set up the ring.  Blocks for the handshake.  On success *out owns the
 * connection; release it with xfer_close().
 * Returns -ENOENT/-ECONNREFUSED when no xferd listens there, -EPROTO on a
 * protocol version mismatch, -EUSERS when xferd serves max_clients
 * clients, -EMFILE when this user has max_connections_per_uid contexts
 * open (xferd.conf(5)).
 * The ring uses per-entry phase (xfer_ring.h, ring 5) where xferd agrees;
 * XFER_RING_PHASE=0 in the environment asks for the tails-only protocol
 * of ring 4 (to compare the two, or to test as an older client would);
 * XFER_RING_PHASE=sq uses phase on the SQ only (the CQ by cq_tail).
 */
int xfer_open(const char *socket_path, struct xfer_ctx **out);
/*
 * xfer_open(), and the context calls itself name as a sender of
 * notifications: 0-XFER_SENDER_NAME_MAX (64) bytes of printable ASCII
 * (0x20-0x7e), else -EINVAL (NULL: no name, as xfer_open).  The name
 * goes with every notification the context sends
 * (xfer_cqe_sender_name() at the receiver), beside xferd's own record
 * of the sender, which is what tells senders apart: anyone may call
 * themselves anything, so the name is informational (a NIXL agent's
 * name, a worker's role).
 */
int xfer_open_named(const char *socket_path, const char *name,
		    struct xfer_ctx **out);
/*
 * xfer_open_named(), and every descriptor of the context whose class
 * bits are 0 is of class cls (enum xfer_class: XFER_CLASS_LATENCY for a
 * decode worker's small transfers, XFER_CLASS_BULK for prefill pushes
 * and offload; XFER_CLASS_DEFAULT: as xfer_open_named).  Per descriptor:
 * xfer_sqe_set_class().  -EINVAL for an unknown class.  An xferd older
 * than classes takes the context as a default one.  Blocks for the
 * handshake, as xfer_open().
 */
int xfer_open_class(const char *socket_path, const char *name, unsigned cls,
		    struct xfer_ctx **out);

/*
 * Close the connection.  xferd cancels whatever was in flight and releases
 * every region and import of this context; memory from xfer_alloc_host()
 * stays mapped until xfer_free_host() (or it is leaked if never freed).
 * Accepts NULL.
 */
void xfer_close(struct xfer_ctx *ctx);

/*
 * Allocate len bytes of host memory shared with xferd (memfd, zero-copy on
 * the same node) and register it.  xfer_mem_ptr() gives the address.
 * Blocks for one round trip.  Free with xfer_free_host().
 */
int xfer_alloc_host(struct xfer_ctx *ctx, size_t len, struct xfer_mem **out);
int xfer_free_host(struct xfer_ctx *ctx, struct xfer_mem *mem);

/*
 * Pin this process's mapping of xfer_alloc_host() memory for CUDA too
 * (cuMemHostRegister, portable to every context): the application's own
 * copies between it and its GPUs then run at DMA speed (cudaMemcpyAsync
 * is asynchronous, PyTorch's is_pinned() is true), while xferd keeps its
 * own mapping pinned for its copies.  libxfer uses the CUDA driver the
 * process has loaded and a context it has (the thread's current one,
 * else an active primary context); it never loads or initializes CUDA,
 * so initialize it first (any CUDA runtime call that creates the
 * context, e.g. cudaFree(0)).  xfer_free_host() unregisters first.
 * Calling it again does nothing.
 *
 * Returns 0; -EINVAL for memory not from xfer_alloc_host(); -ENODEV when
 * the process has no CUDA driver loaded or no context (or libxfer was
 * built without CUDA headers); -ENOMEM past the driver's pinned memory
 * limit; -EIO for another refusal of the driver (e.g. in a forked
 * child).  The memory stays usable with xferd either way.  Blocks while
 * the driver pins the pages (milliseconds per GiB).
 */
int xfer_mem_cuda_register(struct xfer_mem *mem);

/*
 * Register memory the caller already has: host memory (malloc, mmap, a
 * numpy array) or GPU memory.  The memory must stay valid until
 * xfer_dereg().  Blocks for one round trip.
 *
 * Host memory: xferd reaches it through /proc/PID/mem, opened at the
 * first xfer_reg with the caller's uid and gid, so only what the
 * caller's own user may reach (the kernel's ptrace rules; -EPERM
 * otherwise); after an exec, or a change of the caller's ids, copies
 * with its regions fail.  The library allows xferd to do so under Yama
 * (prctl(PR_SET_PTRACER)).
 * Pinned host memory (cudaMallocHost) is host memory.
 *
 * GPU memory: a CUDA device pointer is recognised through the CUDA driver
 * the process has loaded (libxfer itself needs no CUDA).  xferd imports
 * the allocation that holds [ptr, ptr + len) once and moves its bytes
 * with the GPUs' copy engines (CQE path XFER_PATH_CUDA_IPC).  cudaMalloc
 * memory, sub-allocations of caching allocators included, goes to xferd
 * as the CUDA IPC handle of its allocation; CUDA VMM memory (cuMemCreate,
 * PyTorch's expandable segments) as a shareable handle, so it must have
 * been created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR among its
 * requested handle types.  The range must lie inside one allocation.
 * Host memory at the other end of a GPU transfer must come from
 * xfer_alloc_host() (xferd pins it for DMA): a transfer between GPU
 * memory and xfer_reg'd host memory completes with -ENOTSUP.
 * Returns -ENOTSUP for device memory that cannot be shared (managed
 * memory, cudaMallocAsync pools, VMM memory without a POSIX fd handle,
 * a range spanning allocations) and when xferd runs without CUDA.
 * xferd's copies are not ordered with anyone's CUDA streams: the work
 * that writes a buffer must be complete (synchronized) before a
 * descriptor that reads or writes those bytes is submitted, in the
 * owner's process as in the initiator's (cudaMemcpy from pageable host
 * memory may return before its bytes have landed); once the CQE has
 * arrived, the bytes it moved are in place for any later work.
 * Deregister before freeing: a buffer freed and allocated again (at the
 * same address or not) must be registered again, and tokens of the old
 * registration stop working.
 * xferd's limits (xferd.conf(5)) answer xfer_reg and xfer_alloc_host with
 * -EFBIG (max_region_bytes), -ENOSPC (max_regions, or
 * max_regions_per_uid over all contexts of this user) or -EDQUOT
 * (max_client_bytes).
 */
int xfer_reg(struct xfer_ctx *ctx, void *ptr, size_t len,
	     struct xfer_mem **out);
int xfer_dereg(struct xfer_ctx *ctx, struct xfer_mem *mem);

void *xfer_mem_ptr(const struct xfer_mem *mem);
size_t xfer_mem_len(const struct xfer_mem *mem);
/* The handle to put in xfer_sqe.local or .remote. */
uint64_t xfer_mem_handle(const struct xfer_mem *mem);

/*
 * Export [off, off + len) of mem as a token that lets its holder read and
 * write exactly that range.  Never blocks (sub-range tokens are derived
 * locally).  buf must hold *buf_len bytes; on success *buf_len is set to
 * the token's size.  Returns -ERANGE if the range is outside mem,
 * -ENOSPC if buf is too small.
 */
int xfer_export(const struct xfer_mem *mem, uint64_t off, uint64_t len,
		void *buf, size_t *buf_len);

/*
 * Import a token received from anyone.  The xferd that owns the region
 * checks its key (for a token of another node, the local xferd connects
 * to that node first): a token that was altered gives -EACCES, one whose
 * region is gone -EACCES or -ESTALE, one that is not a token at all
 * -EINVAL, one whose node cannot be reached -EHOSTUNREACH/-ETIMEDOUT.
 * Past xferd's max_imports of this context (or max_imports_per_uid of
 * this user's contexts): -ETOOMANYREFS.
 * Blocks for the round trip(s).  Transfers to an imported token of
 * another node go over the link between the two xferds (CQE path
 * XFER_PATH_TCP) and may fail later with -ECONNRESET or -ETIMEDOUT.
 */
int xfer_import(struct xfer_ctx *ctx, const void *token, size_t len,
		struct xfer_remote **out);
int xfer_unimport(struct xfer_ctx *ctx, struct xfer_remote *remote);
/* Bytes the token grants; offsets in SQEs are relative to its start. */
uint64_t xfer_remote_len(const struct xfer_remote *remote);
uint64_t xfer_remote_handle(const struct xfer_remote *remote);

/* The longest published name in bytes, without the NUL: xferd and
 * libxfer refuse a longer one with -EINVAL, whatever the node. */
#define XFER_NAME_MAX 200

/*
 * Publish a token under a name at the local xferd.  Names are
 * 1-XFER_NAME_MAX (200) bytes of [A-Za-z0-9._:@+-] (no '/': "node/name"
 * addresses a node, "~uid/name" a user).  A name belongs to the
 * publishing user (its uid): users have a namespace each, so another
 * user's name of the same spelling is no conflict, and a name is seen
 * only by lookups of the same uid (and root's "~uid/name"), unless
 * published with XFER_PUBLISH_SHARED (xfer_publish_flags).  Publishing
 * a name again from the same context replaces its token (and flags);
 * another context of the same user holding it is -EEXIST; past xferd's
 * max_names of this context (or max_names_per_uid of this user's
 * contexts), -EMLINK.  Names are removed by xfer_unpublish() or when the
 * context closes.  Blocks for one round trip.  xfer_publish() is
 * xfer_publish_flags() with flags 0.
 */
int xfer_publish(struct xfer_ctx *ctx, const char *name, const void *token,
		 size_t len);
/*
 * XFER_PUBLISH_SHARED: other users of this node find the name as
 * "~uid/name", and other nodes find it (by "name", "node/name" or
 * "node/~uid/name"): uids are not comparable between nodes, so a name
 * leaves its node only when shared.  One user at a time may share a
 * spelling on a node (and, with xferd's metadata = etcd, in the
 * cluster): -EEXIST if another has.  Unknown flags: -EINVAL.
 */
#define XFER_PUBLISH_SHARED 0x1u
int xfer_publish_flags(struct xfer_ctx *ctx, const char *name,
		       const void *token, size_t len, unsigned flags);
int xfer_unpublish(struct xfer_ctx *ctx, const char *name);

/*
 * Find a published token.  "name" finds the caller's own name (its uid's,
 * any context) at the local xferd, then a shared name of another node:
 * of every peer configured in xferd.conf (the first that has it
 * answers) or, with metadata = etcd, the cluster's; never another local
 * user's.  "~uid/name" finds the name of that uid at the local xferd if
 * it is the caller's, shared, or the caller is root.  "node/name" and
 * "node/~uid/name" ask the xferd of that node only (its node_name, or
 * host[:port]: 1-79 bytes of printable ASCII without spaces, not
 * starting with '~'), which answers shared names only (the local node
 * answers as for "name" and "~uid/name").  A name the caller may not see
 * is -ENOENT, as if absent.  buf must hold *len bytes (XFER_TOKEN_MAX is
 * enough); on success *len is the token's size; -ENOSPC sets *len to
 * the size needed (buf may be NULL with *len 0 to ask).  Blocks until
 * answered: -ENOENT if nobody has the name, -EHOSTUNREACH/-ETIMEDOUT if
 * the node cannot be asked, -EINVAL for a malformed name.
 */
int xfer_lookup(struct xfer_ctx *ctx, const char *name, void *buf,
		size_t *len);

/*
 * Submission.  xfer_get_sqe() returns the next free entry or NULL when the
 * SQ is full; fill it (the xfer_prep_* helpers below) and call
 * xfer_submit() to publish every entry got so far.  xfer_submit() never
 * blocks; it returns the number of entries published.
 *
 * Order: xferd starts descriptors in submission order, but those that
 * move asynchronously (GPU copies, another node's memory, and same-node
 * copies with xfer_reg'd memory of xferd's cma_split_bytes and more,
 * which its copy workers do in parts) may complete after descriptors
 * submitted behind them, as in UCX and NIXL.  A client that needs one
 * descriptor's bytes in place before another's starts waits for its CQE
 * (a batch's CQE: all of the batch) before submitting the next.
 */
struct xfer_sqe *xfer_get_sqe(struct xfer_ctx *ctx);
int xfer_submit(struct xfer_ctx *ctx);
/* Free SQ slots right now. */
unsigned xfer_sq_space(const struct xfer_ctx *ctx);

/*
 * Completion.  xfer_peek_cqe() never blocks: 0 and *cqe, or -EAGAIN.
 * xfer_wait_cqe() spins for the context's spin time (xfer_set_wait_spin),
 * then sleeps until a CQE arrives, timeout_ms passes (-1: no limit;
 * -ETIME) or xferd goes away (-ENOTCONN).  A CQE stays at the head of the
 * queue until xfer_cq_advance() consumes it.
 */
int xfer_peek_cqe(struct xfer_ctx *ctx, struct xfer_cqe **cqe);
int xfer_wait_cqe(struct xfer_ctx *ctx, struct xfer_cqe **cqe, int timeout_ms);
void xfer_cq_advance(struct xfer_ctx *ctx, unsigned n);
/*
 * Notifications for this context lost by xferd.  xferd holds the
 * notifications that find the CQ full and posts them as CQEs are
 * consumed (refusing new ones to their senders with -ENOBUFS past its
 * notify_queue_max), so this stays 0; it would count only notifications
 * it had admitted and then could not hold (out of memory).  Kept for
 * compatibility: an older xferd dropped notifications at a full CQ and
 * counted them here.
 */
uint32_t xfer_cq_overflow(const struct xfer_ctx *ctx);
/*
 * Who sent notification cqe (a CQE of ctx flagged XFER_CQE_F_NOTIFY, got
 * from xfer_peek_cqe/xfer_wait_cqe and not yet consumed by
 * xfer_cq_advance): xferd's record of the sender, copied into *out.
 * The sender cannot choose it: node is the instance id of the sender's
 * xferd, client its connection id there (unique per xferd instance,
 * never reused), uid its user id as that xferd saw it (informational
 * for another node's sender); see struct xfer_cqe_sender in
 * xfer_ring.h.  A client's own name (its program name) is not part of
 * it.  To take a notification from one sender only, compare node and
 * client.  Returns 0; -EINVAL for a CQE that is no notification of
 * this ctx; -EOPNOTSUPP when this xferd names no senders (an older
 * one).  Never blocks.
 */
int xfer_cqe_sender(const struct xfer_ctx *ctx, const struct xfer_cqe *cqe,
		    struct xfer_cqe_sender *out);
/*
 * The message notification cqe carries (a CQE of ctx flagged
 * XFER_CQE_F_NOTIFY, not yet consumed): a pointer into the ring, valid
 * until xfer_cq_advance() consumes the CQE (copy what you keep), and
 * its length in *len (0 to XFER_NOTIFY_MSG_MAX; 0: none).  NULL with
 * *len 0 for a CQE that is no notification of ctx, or when this xferd
 * carries no messages (an older one).  Never blocks.
 */
const void *xfer_cqe_message(const struct xfer_ctx *ctx,
			     const struct xfer_cqe *cqe, size_t *len);
/*
 * The name the sender of notification cqe gave itself
 * (xfer_open_named; informational), copied into buf of size bytes with
 * a NUL (truncated to fit).  Returns the name's length (0: none),
 * -EINVAL for a CQE that is no notification of ctx, -EOPNOTSUPP when
 * this xferd carries no names.  Never blocks.
 */
int xfer_cqe_sender_name(const struct xfer_ctx *ctx,
			 const struct xfer_cqe *cqe, char *buf, size_t size);
/*
 * What notifications sent from ctx carry as their sender (flags 0):
 * for comparing with a record from xfer_cqe_sender() at the other end,
 * or for telling it to the other end out of band.  Returns 0.  Never
 * blocks.
 */
int xfer_ctx_identity(const struct xfer_ctx *ctx,
		      struct xfer_cqe_sender *out);
/* How long xfer_wait_cqe() polls before sleeping (default 20 us). */
void xfer_set_wait_spin(struct xfer_ctx *ctx, unsigned usec);

/*
 * Waiting from an event loop (epoll, poll, asyncio's add_reader) instead
 * of xfer_wait_cqe().  xfer_event_fd() arms the context's completion
 * doorbell and returns a file descriptor that polls readable (POLLIN)
 * when CQEs may be waiting or xferd has gone.  The descriptor belongs to
 * ctx (the same one on every call; xfer_close() closes it): poll it,
 * never read or close it.  Returns the descriptor or a negative errno.
 *
 * xferd signals the descriptor only while it is armed, and each call
 * also resets it, so every wait follows one protocol:
 *
 *   1. arm:   fd = xfer_event_fd(ctx);
 *   2. check: consume CQEs with xfer_peek_cqe()/xfer_cq_advance() until
 *             -EAGAIN (-ENOTCONN: xferd has gone, stop waiting);
 *   3. poll:  wait for POLLIN on fd, then go back to 1.
 *
 * Arming before checking is what makes it race-free: a CQE published
 * before the arm is found by the check, one published after it makes the
 * descriptor readable.  Polling without arming again may sleep through
 * completions.  While armed, xferd writes the doorbell once per batch of
 * CQEs it publishes (a system call of its own); it stays armed until an
 * xfer_wait_cqe() that went to sleep wakes up.  Never blocks.
 */
int xfer_event_fd(struct xfer_ctx *ctx);

/* The name of a path (XFER_PATH_*), "memcpy", "cma", "tcp", ... */
const char *xfer_path_name(unsigned path);
/* A message for a negative errno returned by this library or a CQE. */
const char *xfer_strerror(int err);

/* --- descriptor preparation (inline: they only fill an SQE) --- */

static inline void xfer_prep_rw(struct xfer_sqe *sqe, unsigned op,
				uint64_t local, uint64_t local_off,
				uint64_t remote, uint64_t remote_off,
				uint64_t len, uint64_t user_data)
{
	/* Every field, one by one rather than a compound literal, so that
	 * C++ compilers take this header too. */
	sqe->opcode = (uint8_t)op;
	sqe->flags = 0;
	sqe->msg_len = 0;
	sqe->timeout_ms = 0;
	sqe->user_data = user_data;
	sqe->local = local;
	sqe->local_off = local_off;
	sqe->remote = remote;
	sqe->remote_off = remote_off;
	sqe->len = len;
	sqe->notify_value = 0;
}

/* local[local_off, +len) -> remote[remote_off, +len) */
static inline void xfer_prep_write(struct xfer_sqe *sqe, uint64_t local,
				   uint64_t local_off, uint64_t remote,
				   uint64_t remote_off, uint64_t len,
				   uint64_t user_data)
{
	xfer_prep_rw(sqe, XFER_OP_WRITE, local, local_off, remote, remote_off,
		     len, user_data);
}

/* remote[remote_off, +len) -> local[local_off, +len) */
static inline void xfer_prep_read(struct xfer_sqe *sqe, uint64_t local,
				  uint64_t local_off, uint64_t remote,
				  uint64_t remote_off, uint64_t len,
				  uint64_t user_data)
{
	xfer_prep_rw(sqe, XFER_OP_READ, local, local_off, remote, remote_off,
		     len, user_data);
}

static inline void xfer_prep_nop(struct xfer_sqe *sqe, uint64_t user_data)
{
	xfer_prep_rw(sqe, XFER_OP_NOP, 0, 0, 0, 0, 0, user_data);
}

/* Deliver value to the owner of remote's region, moving no data. */
static inline void xfer_prep_notify(struct xfer_sqe *sqe, uint64_t remote,
				    uint64_t value, uint64_t user_data)
{
	xfer_prep_rw(sqe, XFER_OP_NOTIFY, 0, 0, remote, 0, 0, user_data);
	sqe->notify_value = value;
}

/*
 * Also notify the remote owner with value once the data has landed.
 *
 * Notifications are never dropped.  When the owner's CQ is full, its
 * xferd holds them (up to its notify_queue_max per owner context, and
 * notify_queue_max_per_uid over all contexts of the owner's user, see
 * xferd.conf(5)) and posts them in order as the owner consumes CQEs.
 * Past that bound the sender's descriptor (a NOTIFY, or the write or
 * batch carrying the notification) completes with -ENOBUFS instead of a
 * byte count.  What the sender may conclude then: the data of a write or
 * batch did land completely in the target (the bound is checked only
 * after it did) but its owner will never hear of it; it can send the
 * notification again (a NOTIFY) once the owner catches up, or tell it
 * out of band.  Any other error still means the data may not have landed
 * and no notification was delivered.  A successful completion means the
 * notification was delivered or is held for the owner in order; it is
 * lost only if the owner's context closes first.
 */
static inline void xfer_sqe_set_notify(struct xfer_sqe *sqe, uint64_t value)
{
	sqe->flags |= XFER_SQE_F_NOTIFY;
	sqe->notify_value = value;
}

/*
 * Send len bytes of msg (XFER_NOTIFY_MSG_MAX at most) with the
 * notification of sqe, an entry of ctx from xfer_get_sqe(), prepared
 * already (the xfer_prep_* helpers clear the message): a NOTIFY, or an
 * entry with xfer_sqe_set_notify() (before or after this call; an entry
 * that notifies nobody fails with -EINVAL).  The bytes are copied into
 * the ring's message slot of the entry now.  The owner reads them with
 * xfer_cqe_message(); held notifications keep theirs.  Returns 0,
 * -EMSGSIZE past XFER_NOTIFY_MSG_MAX, -EOPNOTSUPP when this xferd
 * carries no messages (an older one; len 0 is accepted), -EINVAL for
 * an sqe not of ctx.  Never blocks.
 */
int xfer_sqe_set_message(struct xfer_ctx *ctx, struct xfer_sqe *sqe,
			 const void *msg, size_t len);

/* Give up after ms milliseconds (paths to other nodes; 0 = default). */
static inline void xfer_sqe_set_timeout(struct xfer_sqe *sqe, uint32_t ms)
{
	sqe->timeout_ms = ms;
}

/*
 * Schedule sqe as class cls (enum xfer_class; XFER_CLASS_DEFAULT: the
 * context's default).  A latency descriptor (or batch) past xferd's
 * latency_max_bytes is moved as bulk.  What classes do: xfer_ring.h,
 * doc/design.md.  Call after the xfer_prep_* helper (which clears it).
 */
static inline void xfer_sqe_set_class(struct xfer_sqe *sqe, unsigned cls)
{
	sqe->flags = (uint8_t)((sqe->flags & ~XFER_SQE_F_CLASS_MASK) |
			       ((cls << XFER_SQE_CLASS_SHIFT) &
				XFER_SQE_F_CLASS_MASK));
}

/* Link sqe with the next one into one batch (one CQE for the batch). */
static inline void xfer_sqe_set_link(struct xfer_sqe *sqe)
{
	sqe->flags |= XFER_SQE_F_LINK;
}

/* --- prepared descriptor lists --- */

/*
 * A KV-cache transfer moves a few hundred blocks of every layer out of
 * thousands.  Instead of one SQE per block, describe the blocks once (a
 * list of ranges inside one region or one imported token) and move any
 * of them by index, thousands per SQE, one CQE for all (the idea of
 * NIXL's prepared transfers):
 *
 *   uint64_t off[NBLOCKS];            // block i at i * BLOCK
 *   for (i = 0; i < NBLOCKS; i++) off[i] = i * BLOCK;
 *   xfer_dlist_create(ctx, xfer_mem_handle(kv), NBLOCKS, off, NULL,
 *                     BLOCK, &mine);
 *   xfer_dlist_create(ctx, xfer_remote_handle(peer_kv), NBLOCKS, off,
 *                     NULL, BLOCK, &theirs);
 *   ...
 *   sqe = xfer_get_sqe(ctx);
 *   xfer_prep_dlist(ctx, sqe, XFER_OP_WRITE_DLIST, mine, theirs, n,
 *                   src_blocks, dst_blocks, user_data);
 *   xfer_sqe_set_notify(sqe, value);  // optional: after the last byte
 *   xfer_submit(ctx);
 *
 * The CQE's result is the sum of the bytes moved (or the first error),
 * its path the path that moved them.  Every pair is checked before any
 * byte moves: an index past its list (-ERANGE), two entries of
 * different lengths (-EINVAL), a list that is gone or not this
 * context's (-EACCES) or whose region or import went (-EACCES, -ESTALE)
 * fail the descriptor with nothing moved.  A list descriptor may be
 * linked into a batch like any other.  Runs of pairs that are
 * contiguous at both ends move as one range; between GPUs the pairs are
 * resolved by one kernel launch against the lists, uploaded to the GPU
 * on first use.
 */

/*
 * Make a list of n ranges inside handle: a region of this context
 * (xfer_mem_handle) or an imported token (xfer_remote_handle).  Entry i
 * is [offsets[i], offsets[i] + lengths[i]) of the handle's range (the
 * whole region, or the token's range: the same offsets an SQE takes);
 * lengths NULL: every entry is `length` bytes.  xferd checks every
 * entry once (-ERANGE: outside the range, or offset + length
 * overflowing; -EINVAL: an entry of 0 bytes) and keeps the list (-E2BIG:
 * more than xferd's dlist_max_entries; -ENOSPC: this context has
 * dlist_max_per_client lists, or this user's contexts dlist_max_per_uid;
 * -ENOBUFS: its lists would hold more than dlist_max_client_entries
 * entries, or this user's more than dlist_max_uid_bytes bytes).  The arrays are copied: the caller
 * may free them on return.  Blocks for one round trip.  A list lives until
 * xfer_dlist_destroy(), or until its region or import is removed, or
 * the context closes; *out is freed by xfer_dlist_destroy() only.
 */
int xfer_dlist_create(struct xfer_ctx *ctx, uint64_t handle, uint32_t n,
		      const uint64_t *offsets, const uint64_t *lengths,
		      uint64_t length, struct xfer_dlist **out);
/* Remove the list and free dl (always, even on error: -EACCES when xferd
 * had dropped it already with its region).  Transfers using it go on.
 * Blocks for one round trip. */
int xfer_dlist_destroy(struct xfer_ctx *ctx, struct xfer_dlist *dl);
/* The handle list descriptors name it by; its number of entries. */
uint64_t xfer_dlist_handle(const struct xfer_dlist *dl);
uint32_t xfer_dlist_count(const struct xfer_dlist *dl);

/*
 * Fill sqe (from xfer_get_sqe) with op XFER_OP_WRITE_DLIST (local list
 * entries -> remote list entries) or XFER_OP_READ_DLIST (the reverse),
 * moving n blocks: pair k is entry local_idx[k] of local and entry
 * remote_idx[k] of remote (local_idx NULL: 0..n-1; remote_idx NULL: the
 * same as local_idx).  The indices are copied into the ring's index
 * area, so the arrays may be reused at once; that room comes back once
 * xferd has taken the SQE (it reads the pairs right away), so it is
 * short only when many list SQEs are queued: -EAGAIN then (submit, let
 * completions arrive, try again with the same SQE; until it is filled,
 * xfer_submit publishes only the entries before it, so a linked batch
 * stays whole; or fill it as something else, a linked NOP say, and take
 * another), -E2BIG if
 * n pairs can never fit (8 bytes a pair; the area is xferd's
 * ring_index_kb, 1 MiB by default), -EOPNOTSUPP if this xferd has no
 * index area.  Set flags (notify, link, timeout) after this call.  Never
 * blocks.
 */
int xfer_prep_dlist(struct xfer_ctx *ctx, struct xfer_sqe *sqe, unsigned op,
		    const struct xfer_dlist *local,
		    const struct xfer_dlist *remote, uint32_t n,
		    const uint32_t *local_idx, const uint32_t *remote_idx,
		    uint64_t user_data);

/*
 * The same without the copy, for a client that computes its block
 * indices anyway: xfer_dlist_pairs() reserves room for n pairs of the
 * list descriptor that sqe (from xfer_get_sqe) will be, at byte *off of
 * the index area, and points *pairs at it; write the n pairs there, then
 * fill sqe with xfer_prep_dlist_at(..., n, *off, ...).  The room is the
 * client's again once xferd has taken sqe, whatever sqe became (a NOP,
 * say).  Errors as xfer_prep_dlist (-EAGAIN, -E2BIG, -EOPNOTSUPP: after
 * -EAGAIN sqe is held back from xfer_submit until filled) and
 * -EINVAL (n 0, sqe not of this ring).  Never blocks.
 */
int xfer_dlist_pairs(struct xfer_ctx *ctx, const struct xfer_sqe *sqe,
		     uint32_t n, struct xfer_dlist_pair **pairs,
		     uint64_t *off);

/* Fill sqe with a list descriptor (op XFER_OP_WRITE_DLIST or _READ_DLIST)
 * of n pairs at byte off of the index area, between the lists of
 * handles local_list and remote_list (xfer_dlist_handle). */
static inline void xfer_prep_dlist_at(struct xfer_sqe *sqe, unsigned op,
				      uint64_t local_list,
				      uint64_t remote_list, uint32_t n,
				      uint64_t off, uint64_t user_data)
{
	xfer_prep_rw(sqe, op, local_list, off, remote_list, 0, n, user_data);
}

/* --- streams --- */

/*
 * A stream moves a sequence of messages from one producer to one
 * consumer through slots in the consumer's memory, the head/tail queue
 * of NIXL's sender/receiver example with xferd's notifications for the
 * head and the tail:
 *
 *  - the consumer offers nslots slots of slot_size bytes inside memory it
 *    registered (any kind: xfer_alloc_host, xfer_reg'd host or GPU
 *    memory), at mem + off + slot * slot_size;
 *  - the producer WRITEs message seq into slot seq % nslots with
 *    XFER_SQE_F_NOTIFY: the consumer's notification says the bytes have
 *    landed, with the sequence number and the length;
 *  - the consumer gives slots back (xfer_stream_release) by XFER_OP_NOTIFY
 *    to a small region of the producer: a credit, the count of slots
 *    released in order so far.  The producer writes only into slots the
 *    consumer has given back.  Nobody reads the other side's memory.
 *
 * Set-up needs one blob, the consumer's stream token: it holds the
 * tokens of the slots and of a small mailbox the consumer's stream
 * allocated.  The producer imports both, allocates a small region of its
 * own, WRITEs its token into the mailbox with a notification (HELLO) and
 * waits until the consumer has imported it and answered (ACCEPT).
 *
 *   consumer                                 producer
 *   xfer_stream_listen(ctx, mem, 0, 2, SZ, &s);
 *   xfer_stream_token(s, tok, &len);
 *   xfer_publish(ctx, "kv", tok, len); ----> xfer_lookup(ctx, "kv", tok, &len);
 *   xfer_stream_accept(s, 10000);    <-----  xfer_stream_connect(ctx, tok, len,
 *                                                            10000, &s);
 *   for (;;) {                               for (...)
 *     slot = xfer_stream_recv(s, &n, -1);      xfer_stream_send(s, src, 0, n, -1);
 *     ...use mem + slot * SZ, n bytes...     xfer_stream_close(s);
 *     xfer_stream_release(s, slot);
 *   }    // recv: -EPIPE after the last message
 *
 * The context: a stream takes every CQE of the context it was made on
 * (the consumer's: the one that registered mem).  Use one context per
 * stream and nothing else on it while the stream lives (no other
 * submissions, no xfer_peek_cqe); each end of a stream is used by one
 * thread at a time, like its context.
 *
 * CQ room: a stream never has more notifications and completions
 * outstanding on its context's CQ than 2 * nslots + XFER_STREAM_CQ_SPARE,
 * and refuses (-E2BIG) an nslots for which that exceeds the CQ (with
 * xferd's default sq_entries of 1024, the CQ holds 2048: up to 1022
 * slots).  So no notification of a stream is ever dropped for want of
 * CQ room (HELLOs of further producers, which the stream ignores, are
 * not counted).
 *
 * Errors, on both ends, once the stream is broken every later call
 * returns the same error:
 *  -EPIPE       the other end closed the stream (the consumer gets it
 *               from xfer_stream_recv only after every message sent
 *               before the close was received);
 *  -ECONNRESET  the other end went away without closing: its process
 *               died or closed its context, so its regions are gone
 *               (xferd answered -ESTALE or -EACCES).  A waiting end
 *               learns it within XFER_STREAM_PROBE_MS: while it waits
 *               it writes 8 bytes into a probe word of the other end's
 *               small region once per interval, which fails once that
 *               region is gone;
 *  -ETIME       timeout_ms passed (the stream stays usable);
 *  -EAGAIN      timeout_ms 0 and nothing is ready (the same);
 *  -EPROTO      the other end broke the protocol (a notification that
 *               does not fit the stream);
 *  -EOVERFLOW   the context's CQ dropped a notification (it was used
 *               for something else as well);
 *  -ENOTCONN    xferd has gone;
 *  and what xferd's writes return otherwise (-ETIMEDOUT, -EHOSTUNREACH,
 *  -ECONNRESET of a broken link between two nodes).
 * timeout_ms: -1 waits without limit, 0 never waits.
 */
struct xfer_stream;

/* Largest stream token; the format is versioned (XFER_STREAM_VERSION). */
#define XFER_STREAM_TOKEN_MAX (48 + 2 * XFER_TOKEN_MAX)
#define XFER_STREAM_VERSION 2
/* CQ entries a stream needs besides 2 per slot. */
#define XFER_STREAM_CQ_SPARE 4
/* How often a waiting end checks that the other end is still there. */
#define XFER_STREAM_PROBE_MS 100

/*
 * Consumer: offer nslots slots of slot_size bytes at [off, off + nslots *
 * slot_size) of mem, a registration of ctx (its notifications come to
 * ctx).  mem must stay registered while the stream lives (deregistered,
 * the producer's writes fail: -ECONNRESET); the stream does not use the
 * struct xfer_mem after this call.  Allocates the mailbox
 * (xfer_alloc_host, one page) and blocks for that round trip.  slot_size
 * is 1 byte to 4 GiB - 1.  Returns -EINVAL for bad arguments, -ERANGE if
 * the slots do not fit in mem, -E2BIG if the CQ of ctx cannot hold what
 * nslots slots need (see above).  Free with xfer_stream_close().
 */
int xfer_stream_listen(struct xfer_ctx *ctx, struct xfer_mem *mem,
		       uint64_t off, uint32_t nslots, uint64_t slot_size,
		       struct xfer_stream **out);

/*
 * Consumer: the stream token (at most XFER_STREAM_TOKEN_MAX bytes) for
 * the producer, to be published (xfer_publish) or sent any way.  *len
 * holds buf's size; on success the token's.  -ENOSPC if buf is too
 * small.  Never blocks.
 */
int xfer_stream_token(const struct xfer_stream *s, void *buf, size_t *len);

/*
 * Consumer: wait for a producer's HELLO, import its region and answer it.
 * Returns 0, -ETIME/-EAGAIN, -EPROTO for a HELLO that does not hold a
 * valid reply, or whose record names another sender than xferd's record
 * of the HELLO notification (the stream keeps listening: call again),
 * or an error of importing the producer's token.  From then on the
 * stream takes notifications from that producer only
 * (xfer_stream_peer); later HELLOs (other producers) are ignored:
 * their xfer_stream_connect times out; calling it again is -EISCONN.
 */
int xfer_stream_accept(struct xfer_stream *s, int timeout_ms);

/*
 * Consumer: the next message, in the order sent.  Returns its slot index
 * (the bytes are at off + slot * slot_size of mem, *len of them) and
 * keeps the slot until xfer_stream_release(); -EPIPE once the producer
 * has closed and every message before the close was returned;
 * -ENOTCONN before xfer_stream_accept() succeeded.  Messages may be
 * received several before one is released.
 */
int xfer_stream_recv(struct xfer_stream *s, uint64_t *len, int timeout_ms);

/*
 * Consumer: give a slot returned by xfer_stream_recv() back to the
 * producer (its bytes may be overwritten from now on).  Slots may be
 * released in any order; a credit goes out when the oldest held slot
 * comes back.  Never waits for xferd (-EINVAL: not a held slot).
 */
int xfer_stream_release(struct xfer_stream *s, uint32_t slot);

/*
 * Producer: connect with a consumer's stream token: import the slots and
 * the mailbox, allocate the producer's small region, send HELLO, and
 * wait up to timeout_ms for the consumer's answer (-ETIME; the consumer
 * must call xfer_stream_accept).  A token that is not a stream token, or
 * one whose parts do not fit together, is -EINVAL; another version
 * -EPROTONOSUPPORT; -E2BIG as for xfer_stream_listen; errors of
 * xfer_import otherwise.  Free with xfer_stream_close().
 */
int xfer_stream_connect(struct xfer_ctx *ctx, const void *token, size_t len,
			int timeout_ms, struct xfer_stream **out);

/*
 * Producer: send len bytes (0 to slot_size) at src_off of src_mem (a
 * registration of the producer's context) as the next message.  Waits up
 * to timeout_ms for a free slot (0: -EAGAIN at once if there is none),
 * then WRITEs it with its notification and waits for the write's
 * completion: on return 0 the bytes have landed in the consumer's slot
 * (the notification is on its way) and src may be reused.  Once the
 * slot is granted the wait for the write is not bounded by timeout_ms
 * but by xferd (op_timeout_ms on paths to other nodes).  Returns 0 or an
 * error above (-EINVAL: len > slot_size or a bad src).
 */
int xfer_stream_send(struct xfer_stream *s, const struct xfer_mem *src_mem,
		     uint64_t src_off, uint64_t len, int timeout_ms);

/*
 * Producer: how many messages may be sent right now without waiting for
 * a slot (takes the credits that have arrived; never blocks), or the
 * error that broke the stream.
 */
int xfer_stream_credits(struct xfer_stream *s);

/*
 * Either end: tell the other end (a CLOSE notification, when the stream
 * is still connected), wait for that notification's completion, release
 * the stream's imports and its small region, consume every CQE left on
 * the context's CQ and free s (a notification xferd was delivering to
 * the stream's region as it went may still arrive later: a new stream on
 * the context ignores it).  The consumer's slots stay the
 * caller's registration: a write the producer had been granted before
 * it saw the CLOSE may still land in them; deregister mem to cut the
 * producer off at once.  Returns 0, or the error that broke the stream
 * before (-EPIPE, -ECONNRESET, ...: s is freed anyway).  Accepts NULL.
 */
int xfer_stream_close(struct xfer_stream *s);

/*
 * Either end: the other end as a sender (struct xfer_cqe_sender): for
 * the consumer the producer it accepted (node, client, uid and flags as
 * xferd recorded its HELLO), for the producer the consumer its token
 * names (node and client; uid 0).  Each end takes notifications from
 * the other end only: anyone else holding the stream token (it is
 * published for anyone to look up) may notify the mailbox or the slots,
 * or read the mailbox and notify the producer, but its data, credits,
 * closes and HELLOs are dropped and counted (xfer_stream_dropped), never
 * received.  Where xferd names no senders (an older xferd,
 * xfer_cqe_sender -EOPNOTSUPP) a stream takes every notification, as
 * streams of version 1 did.  What the stream does not guard: the bytes
 * of the slots, which every holder of the stream token may write (the
 * slots token is in it); a consumer that must not see others' bytes
 * gives the stream token to its producer only.  Returns 0, -ENOTCONN
 * before the consumer accepted a producer.  Never blocks.
 */
int xfer_stream_peer(const struct xfer_stream *s, struct xfer_cqe_sender *out);
/* Notifications dropped so far because someone other than the other end
 * sent them. */
uint64_t xfer_stream_dropped(const struct xfer_stream *s);

/* The stream's geometry: slots, bytes per slot. */
uint32_t xfer_stream_nslots(const struct xfer_stream *s);
uint64_t xfer_stream_slot_size(const struct xfer_stream *s);

#ifdef __cplusplus
}
#endif

#endif /* XFER_H */
