/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core.h - the objects of xferd._core (the C extension behind `import
 * xferd`), shared by its files:
 *
 *   core.c        the module, XferError, the helpers below;
 *   context.c     Context: its life, memory, tokens, names,
 *                 notifications, its method table;
 *   submit.c      Context's methods that submit: single descriptors,
 *                 vectors, prepared lists;
 *   completion.c  the completion slots, reaping, waiting, and Request;
 *   region.c      Region (memory this context registered: host memory
 *                 it allocated, anything with the buffer protocol, CUDA
 *                 memory by __cuda_array_interface__, data_ptr() or
 *                 DLPack) and Remote (an imported token);
 *   dlist.c       DList (a prepared descriptor list over one of them);
 *   stream.c      Stream (xfer_stream_*: a queue of slots, one context
 *                 each);
 *   args.c        what callers pass, as libxfer takes it: integer
 *                 arrays of any dtype, timeouts in seconds, and errors
 *                 that say what to do.
 *
 * Locks.  Two: the GIL and Context.mu.  mu guards the libxfer context
 * (its ring and its socket are not safe for two threads at once) and the
 * completion state below.  No thread ever blocks on mu while it holds
 * the GIL: ctx_lock() lets the GIL go if mu is busy (and a holder of mu
 * may then wait for the GIL without a deadlock).  So a control round trip
 * or a thread sleeping on the ring never stalls other Python threads.
 * Everything else (the region and remote lists, Python references) is
 * guarded by the GIL alone.
 */
#ifndef XFERD_PY_CORE_H
#define XFERD_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <xfer.h>

/* Intrusive list of the regions and remotes of a context (GIL). */
struct obj_link {
	struct obj_link *prev, *next;
};

/* One submitted descriptor or batch awaiting its CQE. */
struct slot {
	uint32_t gen;      /* in user_data beside the index: no stale match */
	uint8_t state;     /* SLOT_FREE, SLOT_PENDING, SLOT_DONE */
	bool orphan;       /* its Request is gone: free it once done */
	uint16_t path;
	int64_t result;
	PyObject *keep;    /* regions in flight; released under the GIL */
	uint32_t next_free;
};

enum { SLOT_FREE, SLOT_PENDING, SLOT_DONE };

/* A notification CQE, queued until get_notifications(). */
struct note {
	uint64_t value;
	int64_t bytes;
	uint64_t handle;
	bool has_from;            /* xferd named the sender */
	struct xfer_cqe_sender from;
	/* Its message and its sender's name (xfer_ring.h). */
	uint16_t msg_len;
	uint8_t name_len;
	char name[XFER_SENDER_NAME_MAX];
	uint8_t msg[XFER_NOTIFY_MSG_MAX];
};

typedef struct ContextObject {
	PyObject_HEAD
	struct xfer_ctx *ctx;     /* NULL once closed */
	bool closed;              /* close() called: no new work */
	pthread_mutex_t mu;
	pthread_cond_t cv;        /* mu: completions reaped, leader left */
	bool leader;              /* mu: a thread sleeps on the ring */
	int dead;                 /* mu: 0, or the -errno xferd left with */
	struct slot *slots;       /* mu */
	uint32_t nslots, free_slot;
	uint32_t orphans;         /* GIL: orphaned slots not yet freed */
	struct note *notes;       /* mu: a ring buffer */
	size_t note_head, note_len, note_cap;
	uint64_t notes_lost;      /* mu: no memory to queue them */
	int wake_fd;              /* eventfd: reaped while asyncio waits */
	int async_waiters;        /* GIL: asyncio futures outstanding */
	unsigned spin_us;
	struct obj_link regions;  /* GIL */
	struct obj_link remotes;  /* GIL */
	struct obj_link dlists;   /* GIL */
	unsigned deferred;        /* GIL: regions still exported after close,
				   * and live streams (stream.c) */
	PyObject *weakreflist;
} ContextObject;

enum region_kind {
	REGION_HOST,    /* xfer_alloc_host: ours, with a buffer interface */
	REGION_BUFFER,  /* an object's buffer (Py_buffer held) */
	REGION_POINTER, /* CUDA array interface, data_ptr(), DLPack */
};

typedef struct RegionObject {
	PyObject_HEAD
	struct obj_link link;     /* in ctx->regions while registered */
	ContextObject *ctx;       /* strong: a region dies before its ctx */
	struct xfer_mem *mem;     /* NULL once released */
	enum region_kind kind;
	bool readonly;
	bool device;              /* registered as GPU memory (best guess) */
	bool deferred;            /* released at close but still exported */
	bool cuda_pinned;         /* REGION_HOST: xfer_mem_cuda_register'd */
	void *ptr;
	size_t len;
	uint64_t handle;
	Py_buffer view;           /* REGION_BUFFER */
	PyObject *owner;          /* the object registered, kept alive */
	void *dlpack;             /* DLManagedTensor to give back, or NULL */
	Py_ssize_t exports;       /* buffers handed out (REGION_HOST) */
	PyObject *weakreflist;
} RegionObject;

/*
 * A transfer's local memory: a Region, or a contiguous view of memory
 * one of the context's alloc_host Regions holds (a numpy array or
 * memoryview of it, a torch tensor of alloc_pinned): that region and
 * the view's bytes in it.
 */
struct local_view {
	RegionObject *r;
	uint64_t base, len;
	bool readonly;   /* the view is (a read-only memoryview, say) */
};
/* region.c: 0 with *v when o views c's host memory; 1 when o is no such
 * view (nothing set); -1 with an error set. */
int region_view_of(ContextObject *c, PyObject *o, struct local_view *v);

typedef struct RemoteObject {
	PyObject_HEAD
	struct obj_link link;
	ContextObject *ctx;
	struct xfer_remote *rem;  /* NULL once released */
	uint64_t len;
	uint64_t handle;
} RemoteObject;

/* A prepared descriptor list (dlist.c). */
typedef struct DListObject {
	PyObject_HEAD
	struct obj_link link;     /* in ctx->dlists while alive */
	ContextObject *ctx;
	PyObject *target;         /* the Region or Remote it ranges over */
	struct xfer_dlist *dl;    /* NULL once destroyed */
	uint64_t handle;
	uint32_t count;
	bool readonly;            /* over a read-only Region: a source only */
} DListObject;

extern PyTypeObject Context_Type, Region_Type, Remote_Type, Request_Type,
	DList_Type;
extern PyObject *XferError;
/* args.c: an index past its DList (a ValueError and an IndexError). */
extern PyObject *IndexRangeError;
/* core.c: the coroutine maker of `await req` (set by xferd/__init__.py),
 * and xferd.Notification (made at import). */
extern PyObject *await_helper;
extern PyTypeObject *Notification_Type;

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Raise XferError(errno, "what: xfer_strerror(err)"); returns NULL. */
PyObject *raise_xfer(int err, const char *what);
/* An xferd.Sender for a sender record (xfer_cqe_sender). */
PyObject *sender_object(const struct xfer_cqe_sender *from);

/* mu with the GIL held: waits for it with the GIL released. */
void ctx_lock(ContextObject *c);
void ctx_unlock(ContextObject *c);
/* -EBADF-style check: sets ValueError if c is closed; returns -1. */
int ctx_check_open(ContextObject *c);

/* args.c: arguments. */

/* A u64 from a Python int (index protocol): TypeError if not an int,
 * ValueError if negative or past 64 bits; 0, or -1 with the error set. */
int arg_u64(PyObject *o, const char *name, uint64_t *out);
/* A notify= argument: an int (the value), bytes-like or str (UTF-8: the
 * message, value 0), or a (value, message) pair.  0, or -1 with a
 * TypeError/ValueError naming name (a message past XFER_NOTIFY_MSG_MAX
 * bytes). */
struct notify_arg {
	uint64_t value;
	size_t len;
	uint8_t msg[XFER_NOTIFY_MSG_MAX];
};
int arg_notify(PyObject *o, const char *name, struct notify_arg *out);
/* Set n on sqe (a notification, and its message if any): 0 or -errno
 * (-EOPNOTSUPP: this xferd carries no messages). */
int notify_apply(struct xfer_ctx *ctx, struct xfer_sqe *sqe,
		 const struct notify_arg *n);

/*
 * An array of n u64 from: a buffer of integers of any size, signedness,
 * byte order and strides (numpy int8..uint64, views, array.array), a
 * sequence of ints, or (scalar_ok) one int for all.  v points into the
 * caller's buffer (view held) or at owned; u64_array_free releases both.
 */
struct u64_array {
	const uint64_t *v;
	Py_ssize_t n;       /* -1: a scalar, v[0] for every entry */
	uint64_t scalar;
	uint64_t *owned;
	Py_buffer view;
	bool has_view;
};
int u64_array_get(PyObject *o, const char *name, bool scalar_ok,
		  struct u64_array *a);
void u64_array_free(struct u64_array *a);
static inline uint64_t u64_at(const struct u64_array *a, Py_ssize_t i)
{
	return a->n < 0 ? a->scalar : a->v[i];
}
/* Indices into a list of `count` entries, as uint32 (NULL, *n -1: o is
 * None); *owned to PyMem_Free.  An index past the list raises
 * IndexRangeError here, before anything is submitted. */
int indices_get(PyObject *o, const char *name, uint32_t count,
		uint32_t **owned, Py_ssize_t *n);

/*
 * A call's timeout in milliseconds, from timeout= in seconds (a float,
 * rounded up; None: no limit for a stream (-1), xferd's op_timeout_ms for
 * a descriptor (0)) or the deprecated timeout_ms= (an int, taken as
 * before, with a DeprecationWarning).  Either may be NULL (not passed);
 * both is a TypeError.  fn names the call in errors.
 */
int arg_timeout(PyObject *secs, PyObject *ms, const char *fn, bool stream,
		int64_t *out);
/*
 * A traffic class (enum xfer_class) from traffic_class=: None or
 * "default" (0), "latency", "bulk".  0, or -1 with ValueError/TypeError
 * naming fn.
 */
int arg_class(PyObject *o, const char *fn, unsigned *out);

/* XferError(-err, the formatted message); returns NULL. */
PyObject *raise_xfer_fmt(int err, const char *fmt, ...);
/* A publish/unpublish/lookup error; for EINVAL, what is wrong with the
 * name and which characters a name may have (common/pubname.c). */
PyObject *raise_name(int err, const char *what, const char *name,
		     bool lookup);
/* An xfer_open error naming the socket tried and what chose it. */
PyObject *raise_open(int err, const char *given);

/* completion.c: the slots (mu held unless said), reaping and waiting. */
static inline uint64_t slot_user_data(ContextObject *c, uint32_t idx)
{
	return (uint64_t)c->slots[idx].gen << 32 | idx;
}
/* A free slot, marked pending; -1 without memory (mu and GIL held). */
int64_t slot_get(ContextObject *c, PyObject *keep);
/* Give a slot back; returns its keep-alive reference to drop once mu
 * is released (dropping it may run arbitrary Python code). */
PyObject *slot_put(ContextObject *c, uint32_t idx);
/* Every pending slot done with err. */
void fail_pending(ContextObject *c, int err);
/* Consume every CQE there is (GIL not needed); returns how many. */
unsigned reap_locked(ContextObject *c);
/* Waiting (GIL released, mu not held): until ready(c, arg), the
 * deadline (-ETIME) or xferd going away (its -errno); 0 when ready. */
typedef bool (*ready_fn)(const ContextObject *c, uint64_t arg);
bool notes_ready(const ContextObject *c, uint64_t unused);
int ctx_wait(ContextObject *c, ready_fn ready, uint64_t arg,
	     uint64_t deadline);
/* timeout in seconds (None: forever) -> absolute deadline (GIL). */
int parse_timeout(PyObject *t, uint64_t *deadline);
/* Free slots whose Request went away before they completed (GIL). */
void sweep_orphans(ContextObject *c);
/* The Request of slot idx (GIL). */
PyObject *request_new(ContextObject *c, uint32_t idx);

/* context.c: o as a Region, or NULL with TypeError naming what. */
RegionObject *as_region(PyObject *o, const char *what);

/* submit.c: Context's methods that submit (in its method table). */
PyObject *Context_write(ContextObject *c, PyObject *args, PyObject *kw);
PyObject *Context_read(ContextObject *c, PyObject *args, PyObject *kw);
PyObject *Context_notify(ContextObject *c, PyObject *args, PyObject *kw);
PyObject *Context_write_vec(ContextObject *c, PyObject *args, PyObject *kw);
PyObject *Context_read_vec(ContextObject *c, PyObject *args, PyObject *kw);
PyObject *Context_dlist(ContextObject *c, PyObject *args, PyObject *kw);
PyObject *Context_write_dlist(ContextObject *c, PyObject *args,
			      PyObject *kw);
PyObject *Context_read_dlist(ContextObject *c, PyObject *args,
			     PyObject *kw);

/* region.c */
PyObject *region_alloc_host(ContextObject *c, size_t len);
PyObject *region_register(ContextObject *c, PyObject *obj);
PyObject *remote_import(ContextObject *c, const void *tok, size_t len);
/* Release one region or remote (control round trip; GIL held). */
void region_release(RegionObject *r);
void remote_release(RemoteObject *r);
/* At Context.close: release every region and remote of c. */
void ctx_release_all(ContextObject *c);
/* Close the libxfer context once nothing holds it any more. */
void ctx_finish_close(ContextObject *c);

/* dlist.c: a list of n entries over target (handle, checked by the
 * caller to be this context's), or NULL with an error set; destroying
 * one (control round trip; GIL held). */
PyObject *dlist_create(ContextObject *c, PyObject *target, uint64_t handle,
		       bool readonly, uint32_t n, const uint64_t *offsets,
		       const uint64_t *lengths, uint64_t length);
void dlist_release(DListObject *d);

/* stream.c: add the Stream type and STREAM_TOKEN_MAX to module m. */
int stream_module_add(PyObject *m);

void link_add(struct obj_link *head, struct obj_link *l);
void link_del(struct obj_link *l);

#define CONTAINER_OF(p, type, member) \
	((type *)((char *)(p) - offsetof(type, member)))

#endif /* XFERD_PY_CORE_H */
