/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core.c - xferd._core: the module, Context and Request.
 *
 * A Context is one libxfer context.  Every submission gets a completion
 * slot (its index and generation are the SQE's user_data); reaping the
 * CQ fills slots and queues notifications, all in C under Context.mu and
 * without the GIL, so a thread can wait with the GIL released while
 * others submit.  One waiting thread at a time sleeps on the ring (the
 * leader: it spins spin_us, then arms xfer_event_fd and polls it, see
 * xfer.h); others wait on a condition variable the leader broadcasts
 * after reaping.  asyncio waits on the same descriptor through the
 * Python layer (xferd/__init__.py), with wake_fd for completions a
 * blocking waiter reaped meanwhile.
 *
 * Vectors (write_vec/read_vec) become one linked batch of SQEs (one CQE)
 * built in one C loop from int64 arrays or sequences.  Every argument is
 * checked before the first SQE is written, so bad input raises and moves
 * nothing.
 *
 * Over the usual 800 lines because the slot table, the waiting protocol
 * and the submission paths share the locking described in core.h.
 */
#include "core.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

PyObject *XferError;
static PyObject *await_helper; /* set by xferd/__init__.py */
static PyTypeObject *Notification_Type;
static PyTypeObject *Sender_Type;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

PyObject *raise_xfer(int err, const char *what)
{
	PyObject *args = Py_BuildValue("(is)", -err, "");

	if (!args)
		return NULL;
	PyObject *msg = PyUnicode_FromFormat("%s: %s", what, xfer_strerror(err));
	if (msg) {
		Py_DECREF(args);
		args = Py_BuildValue("(iN)", -err, msg);
	}
	if (args) {
		PyErr_SetObject(XferError, args);
		Py_DECREF(args);
	}
	return NULL;
}

void ctx_lock(ContextObject *c)
{
	/* Never block on mu while holding the GIL (core.h: lock order). */
	if (pthread_mutex_trylock(&c->mu) == 0)
		return;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&c->mu);
	Py_END_ALLOW_THREADS
}

void ctx_unlock(ContextObject *c)
{
	pthread_mutex_unlock(&c->mu);
}

int ctx_check_open(ContextObject *c)
{
	if (c->closed || !c->ctx) {
		PyErr_SetString(PyExc_ValueError, "the Context is closed");
		return -1;
	}
	return 0;
}

int arg_u64(PyObject *o, const char *name, uint64_t *out)
{
	PyObject *i;

	if (PyBool_Check(o) || !PyIndex_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s",
			     name, Py_TYPE(o)->tp_name);
		return -1;
	}
	i = PyNumber_Index(o);
	if (!i)
		return -1;
	if (_PyLong_Sign(i) < 0) {
		Py_DECREF(i);
		PyErr_Format(PyExc_ValueError, "%s must be >= 0", name);
		return -1;
	}
	*out = PyLong_AsUnsignedLongLong(i);
	Py_DECREF(i);
	if (*out == (uint64_t)-1 && PyErr_Occurred())
		return -1;
	return 0;
}

/* --- completion slots (mu) --- */

static uint64_t slot_user_data(ContextObject *c, uint32_t idx)
{
	return (uint64_t)c->slots[idx].gen << 32 | idx;
}

/* A free slot, marked pending; -1 without memory (mu and GIL held). */
static int64_t slot_get(ContextObject *c, PyObject *keep)
{
	if (c->free_slot == UINT32_MAX) {
		uint32_t n = c->nslots ? 2 * c->nslots : 64;
		struct slot *s = PyMem_RawRealloc(c->slots, n * sizeof(*s));
		if (!s)
			return -1;
		for (uint32_t i = c->nslots; i < n; i++)
			s[i] = (struct slot){ .state = SLOT_FREE,
					      .next_free = i + 1 < n ? i + 1
								 : UINT32_MAX };
		c->free_slot = c->nslots;
		c->slots = s;
		c->nslots = n;
	}
	uint32_t idx = c->free_slot;
	struct slot *s = &c->slots[idx];
	c->free_slot = s->next_free;
	s->gen++;
	s->state = SLOT_PENDING;
	s->orphan = false;
	s->result = 0;
	s->path = 0;
	s->keep = keep;
	return idx;
}

/* Give a slot back; returns its keep-alive reference to drop once mu
 * is released (dropping it may run arbitrary Python code). */
static PyObject *slot_put(ContextObject *c, uint32_t idx)
{
	struct slot *s = &c->slots[idx];
	PyObject *keep = s->keep;

	s->keep = NULL;
	s->state = SLOT_FREE;
	s->next_free = c->free_slot;
	c->free_slot = idx;
	return keep;
}

static void slot_complete(ContextObject *c, uint64_t user_data,
			  int64_t result, uint16_t path)
{
	uint32_t idx = (uint32_t)user_data;

	/* A user_data that is not ours (cannot happen unless someone else
	 * writes our ring) is ignored rather than trusted. */
	if (idx >= c->nslots || c->slots[idx].gen != (uint32_t)(user_data >> 32) ||
	    c->slots[idx].state != SLOT_PENDING)
		return;
	c->slots[idx].state = SLOT_DONE;
	c->slots[idx].result = result;
	c->slots[idx].path = path;
}

static void fail_pending(ContextObject *c, int err)
{
	for (uint32_t i = 0; i < c->nslots; i++)
		if (c->slots[i].state == SLOT_PENDING) {
			c->slots[i].state = SLOT_DONE;
			c->slots[i].result = err;
			c->slots[i].path = XFER_PATH_NONE;
		}
}

static void note_push(ContextObject *c, const struct xfer_cqe *cqe)
{
	if (c->note_len == c->note_cap) {
		size_t n = c->note_cap ? 2 * c->note_cap : 64;
		struct note *a = PyMem_RawMalloc(n * sizeof(*a));
		if (!a) {
			c->notes_lost++;
			return;
		}
		for (size_t i = 0; i < c->note_len; i++)
			a[i] = c->notes[(c->note_head + i) % c->note_cap];
		PyMem_RawFree(c->notes);
		c->notes = a;
		c->note_cap = n;
		c->note_head = 0;
	}
	struct note *n = &c->notes[(c->note_head + c->note_len++) % c->note_cap];
	*n = (struct note){
		.value = cqe->user_data,
		.bytes = cqe->result,
		.handle = cqe->handle,
	};
	/* Before the CQE is consumed: the record goes with its slot. */
	n->has_from = xfer_cqe_sender(c->ctx, cqe, &n->from) == 0;
}

/* Consume every CQE there is (mu held, GIL not needed).  Returns the
 * number consumed. */
static unsigned reap_locked(ContextObject *c)
{
	struct xfer_cqe *cqe;
	unsigned n = 0;

	if (!c->ctx || c->dead)
		return 0;
	for (;;) {
		int rc = xfer_peek_cqe(c->ctx, &cqe);
		if (rc == -EAGAIN)
			break;
		if (rc) {
			c->dead = rc;
			fail_pending(c, rc);
			n++;
			break;
		}
		if (cqe->flags & XFER_CQE_F_NOTIFY)
			note_push(c, cqe);
		else
			slot_complete(c, cqe->user_data, cqe->result, cqe->path);
		xfer_cq_advance(c->ctx, 1);
		n++;
	}
	if (n) {
		pthread_cond_broadcast(&c->cv);
		/* asyncio sleeps on the event fd, whose doorbell a blocking
		 * waiter may have reset: tell it directly. */
		if (c->async_waiters > 0) {
			uint64_t one = 1;
			(void)!write(c->wake_fd, &one, sizeof(one));
		}
	}
	return n;
}

/* --- waiting (GIL released, mu not held) --- */

typedef bool (*ready_fn)(const ContextObject *c, uint64_t arg);

static bool slot_ready(const ContextObject *c, uint64_t idx)
{
	return c->slots[idx].state != SLOT_PENDING;
}

static bool notes_ready(const ContextObject *c, uint64_t unused)
{
	(void)unused;
	return c->note_len > 0;
}

static void deadline_ts(uint64_t deadline, struct timespec *ts)
{
	/* The condition variable runs on CLOCK_MONOTONIC (Context init). */
	ts->tv_sec = (time_t)(deadline / 1000000000ull);
	ts->tv_nsec = (long)(deadline % 1000000000ull);
}

/*
 * Wait until ready(c, arg), the deadline (-ETIME) or xferd going away
 * (its -errno).  The leader reaps and sleeps on the ring; followers wait
 * for its broadcast.  Returns 0 when ready.
 */
static int ctx_wait(ContextObject *c, ready_fn ready, uint64_t arg,
		    uint64_t deadline)
{
	int rc = 0;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		reap_locked(c);
		if (ready(c, arg))
			break;
		if (c->dead || !c->ctx) {
			rc = c->dead ? c->dead : -ENOTCONN;
			break;
		}
		uint64_t now = now_ns();
		if (now >= deadline) {
			rc = -ETIME;
			break;
		}
		if (c->leader) {
			/* Bounded, so a missed broadcast costs latency only. */
			struct timespec ts;
			uint64_t until = now + 100000000ull;
			deadline_ts(until < deadline ? until : deadline, &ts);
			pthread_cond_timedwait(&c->cv, &c->mu, &ts);
			continue;
		}
		c->leader = true;
		uint64_t spin_end = now + 1000ull * c->spin_us;
		while (!ready(c, arg) && !c->dead && now_ns() < spin_end &&
		       now_ns() < deadline)
			reap_locked(c);
		if (!ready(c, arg) && !c->dead) {
			/* xfer.h's protocol: arm, check, then poll. */
			int fd = xfer_event_fd(c->ctx);
			if (fd < 0) {
				rc = fd;
				c->leader = false;
				pthread_cond_broadcast(&c->cv);
				break;
			}
			reap_locked(c);
			if (!ready(c, arg) && !c->dead) {
				uint64_t left = deadline - now_ns();
				int ms = deadline == UINT64_MAX || left > 3600000000000ull
					? 3600000 : (int)((left + 999999) / 1000000);
				struct pollfd p = { .fd = fd, .events = POLLIN };
				pthread_mutex_unlock(&c->mu);
				poll(&p, 1, ms);
				pthread_mutex_lock(&c->mu);
			}
		}
		c->leader = false;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* timeout in seconds (None: forever) -> absolute deadline. */
static int parse_timeout(PyObject *t, uint64_t *deadline)
{
	if (!t || t == Py_None) {
		*deadline = UINT64_MAX;
		return 0;
	}
	double s = PyFloat_AsDouble(t);
	if (s == -1.0 && PyErr_Occurred())
		return -1;
	if (s != s) {
		PyErr_SetString(PyExc_ValueError, "timeout is NaN");
		return -1;
	}
	if (s < 0)
		s = 0;
	*deadline = s > 1e9 ? UINT64_MAX : now_ns() + (uint64_t)(s * 1e9);
	return 0;
}

/* --- Request --- */

typedef struct {
	PyObject_HEAD
	ContextObject *ctx;
	uint32_t idx;
	bool done;      /* result and path copied out, slot given back */
	int64_t result;
	uint16_t path;
} RequestObject;

/* Copy a done slot into r and free it (GIL held; takes mu). */
static bool request_collect(RequestObject *r)
{
	ContextObject *c = r->ctx;
	PyObject *keep = NULL;

	if (r->done)
		return true;
	ctx_lock(c);
	reap_locked(c);
	struct slot *s = &c->slots[r->idx];
	if (s->state == SLOT_DONE) {
		r->done = true;
		r->result = s->result;
		r->path = s->path;
		keep = slot_put(c, r->idx);
	}
	ctx_unlock(c);
	Py_XDECREF(keep);
	return r->done;
}

/* Free slots whose Request went away before they completed. */
static void sweep_orphans(ContextObject *c)
{
	PyObject *drop[64];
	unsigned n = 0;

	if (!c->orphans || !c->slots)
		return;
	ctx_lock(c);
	reap_locked(c);
	for (uint32_t i = 0; i < c->nslots && n < 64; i++) {
		if (c->slots[i].orphan && c->slots[i].state == SLOT_DONE) {
			c->slots[i].orphan = false;
			drop[n++] = slot_put(c, i);
			c->orphans--;
		}
	}
	ctx_unlock(c);
	for (unsigned i = 0; i < n; i++)
		Py_XDECREF(drop[i]);
}

static PyObject *request_new(ContextObject *c, uint32_t idx)
{
	RequestObject *r = PyObject_New(RequestObject, &Request_Type);

	if (!r)
		return NULL;
	Py_INCREF(c);
	r->ctx = c;
	r->idx = idx;
	r->done = false;
	r->result = 0;
	r->path = 0;
	return (PyObject *)r;
}

static void Request_dealloc(RequestObject *r)
{
	ContextObject *c = r->ctx;

	if (!r->done && c->slots) {
		PyObject *keep = NULL;
		ctx_lock(c);
		if (c->slots[r->idx].state == SLOT_DONE) {
			keep = slot_put(c, r->idx);
		} else {
			/* In flight: the slot keeps the regions alive until
			 * its CQE comes (sweep_orphans). */
			c->slots[r->idx].orphan = true;
			c->orphans++;
		}
		ctx_unlock(c);
		Py_XDECREF(keep);
	}
	Py_DECREF(c);
	PyObject_Free(r);
}

static PyObject *request_outcome(RequestObject *r)
{
	if (r->result < 0)
		return raise_xfer((int)r->result, "transfer");
	return PyLong_FromLongLong(r->result);
}

static PyObject *Request_wait(RequestObject *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout", NULL };
	PyObject *t = Py_None;
	uint64_t deadline;
	int rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:wait", kwlist, &t) ||
	    parse_timeout(t, &deadline))
		return NULL;
	if (request_collect(r))
		return request_outcome(r);
	Py_BEGIN_ALLOW_THREADS
	rc = ctx_wait(r->ctx, slot_ready, r->idx, deadline);
	Py_END_ALLOW_THREADS
	if (request_collect(r))
		return request_outcome(r);
	if (rc == -ETIME) {
		PyErr_SetString(PyExc_TimeoutError, "Request.wait: timed out");
		return NULL;
	}
	return raise_xfer(rc ? rc : -EPROTO, "wait");
}

static PyObject *Request_done(RequestObject *r, PyObject *unused)
{
	(void)unused;
	return PyBool_FromLong(request_collect(r));
}

static PyObject *Request_get_result(RequestObject *r, void *unused)
{
	(void)unused;
	if (!request_collect(r))
		Py_RETURN_NONE;
	return PyLong_FromLongLong(r->result);
}

static PyObject *Request_get_path(RequestObject *r, void *unused)
{
	(void)unused;
	if (!request_collect(r))
		Py_RETURN_NONE;
	return PyUnicode_FromString(xfer_path_name(r->path));
}

static PyObject *Request_get_error(RequestObject *r, void *unused)
{
	(void)unused;
	if (!request_collect(r) || r->result >= 0)
		Py_RETURN_NONE;
	PyObject *exc = NULL, *type, *val, *tb;
	raise_xfer((int)r->result, "transfer");
	PyErr_Fetch(&type, &val, &tb);
	PyErr_NormalizeException(&type, &val, &tb);
	exc = val;
	Py_XDECREF(type);
	Py_XDECREF(tb);
	return exc;
}

static PyObject *Request_get_context(RequestObject *r, void *unused)
{
	(void)unused;
	Py_INCREF(r->ctx);
	return (PyObject *)r->ctx;
}

static PyObject *Request_await(RequestObject *r)
{
	if (!await_helper) {
		PyErr_SetString(PyExc_RuntimeError, "import xferd to await requests");
		return NULL;
	}
	PyObject *coro = PyObject_CallOneArg(await_helper, (PyObject *)r);
	if (!coro)
		return NULL;
	PyObject *it = PyObject_CallMethod(coro, "__await__", NULL);
	Py_DECREF(coro);
	return it;
}

static PyObject *Request_repr(RequestObject *r)
{
	if (!request_collect(r))
		return PyUnicode_FromString("<xferd.Request pending>");
	return PyUnicode_FromFormat("<xferd.Request result=%lld path=%s>",
				    (long long)r->result, xfer_path_name(r->path));
}

static PyMethodDef Request_methods[] = {
	{ "wait", (PyCFunction)(void (*)(void))Request_wait,
	  METH_VARARGS | METH_KEYWORDS,
	  "wait(timeout=None) -> int\n\n"
	  "Block (GIL released) until the transfer completed; return the bytes\n"
	  "moved.  XferError if it failed, TimeoutError if timeout seconds\n"
	  "passed first (the request stays pending)." },
	{ "done", (PyCFunction)Request_done, METH_NOARGS,
	  "True once the completion has arrived (never blocks)." },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef Request_getset[] = {
	{ "result", (getter)Request_get_result, NULL,
	  "Bytes moved, or a negative errno; None while pending.", NULL },
	{ "path", (getter)Request_get_path, NULL,
	  "How the bytes moved ('memcpy', 'cma', 'tcp', 'rdma', 'cuda-ipc', "
	  "'cuda-staged', 'tcp-staged', 'none'); None while pending.", NULL },
	{ "error", (getter)Request_get_error, NULL,
	  "The XferError of a failed request, else None.", NULL },
	{ "context", (getter)Request_get_context, NULL, "Its Context.", NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PyAsyncMethods Request_async = {
	.am_await = (unaryfunc)Request_await,
};

PyTypeObject Request_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "xferd.Request",
	.tp_basicsize = sizeof(RequestObject),
	.tp_dealloc = (destructor)Request_dealloc,
	.tp_repr = (reprfunc)Request_repr,
	.tp_as_async = &Request_async,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A submitted transfer (or batch).  wait(), done(), result,\n"
		  "path; `await req` in asyncio.  Keeps the regions it uses\n"
		  "alive until its completion arrives.",
	.tp_methods = Request_methods,
	.tp_getset = Request_getset,
};

/* --- Context: life --- */

static int Context_init(ContextObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "socket", "spin_us", NULL };
	PyObject *sock = Py_None, *bytes = NULL;
	unsigned spin = 20;
	const char *path = NULL;
	struct xfer_ctx *x = NULL;
	int err;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OI:Context", kwlist,
					 &sock, &spin))
		return -1;
	if (c->ctx || c->closed) {
		PyErr_SetString(PyExc_RuntimeError, "Context already initialised");
		return -1;
	}
	if (sock != Py_None) {
		if (!PyUnicode_FSConverter(sock, &bytes))
			return -1;
		path = PyBytes_AS_STRING(bytes);
	}
	Py_BEGIN_ALLOW_THREADS
	err = xfer_open(path, &x);
	Py_END_ALLOW_THREADS
	Py_XDECREF(bytes);
	if (err) {
		raise_xfer(err, "Context");
		return -1;
	}
	c->ctx = x;
	c->spin_us = spin;
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0) {
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	return 0;
}

static PyObject *Context_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	ContextObject *c = (ContextObject *)type->tp_alloc(type, 0);
	pthread_condattr_t ca;

	(void)args;
	(void)kw;
	if (!c)
		return NULL;
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->free_slot = UINT32_MAX;
	c->wake_fd = -1;
	c->regions.next = c->regions.prev = &c->regions;
	c->remotes.next = c->remotes.prev = &c->remotes;
	c->dlists.next = c->dlists.prev = &c->dlists;
	return (PyObject *)c;
}

static void context_close(ContextObject *c)
{
	PyObject **drop = NULL;
	uint32_t ndrop = 0;

	if (c->closed)
		return;
	c->closed = true;
	/* Regions go first (deregistered while the connection is up), so
	 * no memory Python frees is still registered. */
	ctx_release_all(c);
	ctx_lock(c);
	reap_locked(c);
	fail_pending(c, -ECANCELED);
	if (!c->dead)
		c->dead = -ECANCELED;
	pthread_cond_broadcast(&c->cv);
	/* Orphaned slots will never be asked for again. */
	drop = PyMem_RawMalloc((c->nslots + 1) * sizeof(*drop));
	for (uint32_t i = 0; drop && i < c->nslots; i++)
		if (c->slots[i].orphan) {
			c->slots[i].orphan = false;
			drop[ndrop++] = slot_put(c, i);
		}
	c->orphans = 0;
	ctx_unlock(c);
	for (uint32_t i = 0; i < ndrop; i++)
		Py_XDECREF(drop[i]);
	PyMem_RawFree(drop);
	ctx_finish_close(c);
}

static void Context_dealloc(ContextObject *c)
{
	PyObject_GC_UnTrack(c);
	if (c->weakreflist)
		PyObject_ClearWeakRefs((PyObject *)c);
	/* Regions and remotes hold the context: none is left here. */
	context_close(c);
	if (c->ctx) {
		xfer_close(c->ctx);
		c->ctx = NULL;
	}
	for (uint32_t i = 0; i < c->nslots; i++)
		Py_CLEAR(c->slots[i].keep);
	PyMem_RawFree(c->slots);
	PyMem_RawFree(c->notes);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	Py_TYPE(c)->tp_free((PyObject *)c);
}

static int Context_traverse(ContextObject *c, visitproc visit, void *arg)
{
	for (uint32_t i = 0; i < c->nslots; i++)
		Py_VISIT(c->slots[i].keep);
	/* A Python subclass's traverse visits the type itself. */
	return 0;
}

static PyObject *Context_close(ContextObject *c, PyObject *unused)
{
	(void)unused;
	context_close(c);
	Py_RETURN_NONE;
}

static PyObject *Context_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	if (ctx_check_open((ContextObject *)self))
		return NULL;
	Py_INCREF(self);
	return self;
}

static PyObject *Context_exit(ContextObject *c, PyObject *args)
{
	(void)args;
	context_close(c);
	Py_RETURN_FALSE;
}

/* --- Context: memory, tokens, names --- */

static PyObject *Context_alloc_host(ContextObject *c, PyObject *arg)
{
	uint64_t n;

	if (arg_u64(arg, "size", &n))
		return NULL;
	if (n > PY_SSIZE_T_MAX) {
		PyErr_SetString(PyExc_OverflowError, "alloc_host: size too large");
		return NULL;
	}
	return region_alloc_host(c, (size_t)n);
}

static PyObject *Context_register(ContextObject *c, PyObject *obj)
{
	if (ctx_check_open(c))
		return NULL;
	return region_register(c, obj);
}

static RegionObject *as_region(PyObject *o, const char *what)
{
	if (!PyObject_TypeCheck(o, &Region_Type)) {
		PyErr_Format(PyExc_TypeError, "%s must be a Region, not %.80s",
			     what, Py_TYPE(o)->tp_name);
		return NULL;
	}
	return (RegionObject *)o;
}

static PyObject *Context_export(ContextObject *c, PyObject *args, PyObject *kw)
{
	Py_ssize_t n = PyTuple_GET_SIZE(args);

	if (n < 1) {
		PyErr_SetString(PyExc_TypeError, "export(region, off=0, length=None)");
		return NULL;
	}
	RegionObject *r = as_region(PyTuple_GET_ITEM(args, 0), "region");
	if (!r)
		return NULL;
	if (r->ctx != c) {
		PyErr_SetString(PyExc_ValueError, "export: region of another Context");
		return NULL;
	}
	PyObject *rest = PyTuple_GetSlice(args, 1, n);
	if (!rest)
		return NULL;
	PyObject *meth = PyObject_GetAttrString((PyObject *)r, "export");
	PyObject *res = meth ? PyObject_Call(meth, rest, kw) : NULL;
	Py_XDECREF(meth);
	Py_DECREF(rest);
	return res;
}

static PyObject *Context_import_token(ContextObject *c, PyObject *obj)
{
	Py_buffer b;

	if (PyUnicode_Check(obj) || PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE)) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError,
			     "import_token: a token is bytes, not %.80s",
			     Py_TYPE(obj)->tp_name);
		return NULL;
	}
	PyObject *res;
	if (b.len <= 0 || b.len > XFER_TOKEN_MAX)
		res = raise_xfer(-EINVAL, "import_token");
	else
		res = remote_import(c, b.buf, (size_t)b.len);
	PyBuffer_Release(&b);
	return res;
}

static PyObject *Context_publish(ContextObject *c, PyObject *args,
				 PyObject *kw)
{
	static char *kwlist[] = { "name", "token", "shared", NULL };
	const char *name;
	Py_buffer tok;
	int shared = 0;
	int err;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "sy*|p:publish", kwlist,
					 &name, &tok, &shared))
		return NULL;
	if (ctx_check_open(c)) {
		PyBuffer_Release(&tok);
		return NULL;
	}
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_publish_flags(c->ctx, name, tok.buf, (size_t)tok.len,
				 shared ? XFER_PUBLISH_SHARED : 0);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	PyBuffer_Release(&tok);
	if (err)
		return raise_xfer(err, "publish");
	Py_RETURN_NONE;
}

static PyObject *Context_unpublish(ContextObject *c, PyObject *args)
{
	const char *name;
	int err;

	if (!PyArg_ParseTuple(args, "s:unpublish", &name) || ctx_check_open(c))
		return NULL;
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_unpublish(c->ctx, name);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	if (err)
		return raise_xfer(err, "unpublish");
	Py_RETURN_NONE;
}

static PyObject *Context_lookup(ContextObject *c, PyObject *args)
{
	const char *name;
	uint8_t tok[XFER_TOKEN_MAX];
	size_t len = sizeof(tok);
	int err;

	if (!PyArg_ParseTuple(args, "s:lookup", &name) || ctx_check_open(c))
		return NULL;
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_lookup(c->ctx, name, tok, &len);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	if (err)
		return raise_xfer(err, "lookup");
	return PyBytes_FromStringAndSize((const char *)tok, (Py_ssize_t)len);
}

/* --- Context: submission --- */

/* The target of a transfer: a Remote, or a Region of this context. */
static int target_of(ContextObject *c, PyObject *o, uint64_t *handle,
		     uint64_t *len, bool *readonly)
{
	if (PyObject_TypeCheck(o, &Remote_Type)) {
		RemoteObject *r = (RemoteObject *)o;
		if (!r->rem || r->ctx != c) {
			PyErr_SetString(PyExc_ValueError,
					r->rem ? "remote of another Context"
					       : "the Remote is closed");
			return -1;
		}
		*handle = r->handle;
		*len = r->len;
		*readonly = false;
		return 0;
	}
	if (PyObject_TypeCheck(o, &Region_Type)) {
		RegionObject *r = (RegionObject *)o;
		if (!r->mem || r->ctx != c) {
			PyErr_SetString(PyExc_ValueError,
					r->mem ? "region of another Context"
					       : "the Region is closed");
			return -1;
		}
		*handle = r->handle;
		*len = r->len;
		*readonly = r->readonly;
		return 0;
	}
	PyErr_Format(PyExc_TypeError, "remote must be a Remote or Region, not %.80s",
		     Py_TYPE(o)->tp_name);
	return -1;
}

static int local_of(ContextObject *c, PyObject *o, RegionObject **out)
{
	RegionObject *r = as_region(o, "local");

	if (!r)
		return -1;
	if (!r->mem || r->ctx != c) {
		PyErr_SetString(PyExc_ValueError, r->mem ? "region of another Context"
							 : "the Region is closed");
		return -1;
	}
	*out = r;
	return 0;
}

static bool range_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* One turn of waiting for ring room (mu held): publish what is
 * submitted, reap, then yield the CPU without the GIL.  0 to go on, or
 * the error that ends the wait (xferd gone, the deadline passed). */
static int ring_wait_step(ContextObject *c, uint64_t deadline)
{
	int n = xfer_submit(c->ctx);
	if (n < 0)
		return n;
	reap_locked(c);
	if (c->dead)
		return c->dead;
	if (now_ns() > deadline)
		return -ETIMEDOUT;
	Py_BEGIN_ALLOW_THREADS
	sched_yield();
	Py_END_ALLOW_THREADS
	return 0;
}

/* Reap, then wait for SQ room without the GIL (mu held: the ring is
 * ours).  xferd takes SQEs only while our CQ has room, so reaping is
 * what frees the SQ when completions pile up. */
static int sq_room(ContextObject *c, struct xfer_sqe **sqe)
{
	uint64_t deadline = now_ns() + 30000000000ull;

	while (!(*sqe = xfer_get_sqe(c->ctx))) {
		int err = ring_wait_step(c, deadline);
		if (err)
			return err;
	}
	return 0;
}

/* Take a slot for a submission holding `keep` (stolen).  -1: error set. */
static int64_t submit_begin(ContextObject *c, PyObject *keep)
{
	sweep_orphans(c);
	if (ctx_check_open(c)) {
		Py_XDECREF(keep);
		return -1;
	}
	ctx_lock(c);
	if (c->dead) {
		int err = c->dead;
		ctx_unlock(c);
		Py_XDECREF(keep);
		raise_xfer(err, "submit");
		return -1;
	}
	int64_t idx = slot_get(c, keep);
	if (idx < 0) {
		ctx_unlock(c);
		Py_XDECREF(keep);
		PyErr_NoMemory();
		return -1;
	}
	return idx;
}

/* Publish and hand out the Request (mu held on entry, released here). */
static PyObject *submit_end(ContextObject *c, uint32_t idx, int err)
{
	if (!err) {
		int n = xfer_submit(c->ctx);
		err = n < 0 ? n : 0;
	}
	if (err) {
		/* The slot's SQEs may be out already: let it complete. */
		c->slots[idx].state = SLOT_DONE;
		c->slots[idx].result = err;
	}
	ctx_unlock(c);
	return request_new(c, idx);
}

static PyObject *keep_pair(PyObject *a, PyObject *b)
{
	return b ? PyTuple_Pack(2, a, b) : PyTuple_Pack(1, a);
}

static PyObject *rw_one(ContextObject *c, unsigned op, PyObject *args,
			PyObject *kw)
{
	static char *kwlist[] = { "local", "remote", "local_off", "remote_off",
				  "length", "notify", "timeout_ms", NULL };
	PyObject *o_local, *o_remote, *o_loff = NULL, *o_roff = NULL;
	PyObject *o_len = Py_None, *o_notify = Py_None;
	unsigned timeout_ms = 0;
	uint64_t loff = 0, roff = 0, len, rhandle, rlen, notify = 0;
	RegionObject *local;
	bool rro;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOOOI", kwlist, &o_local,
					 &o_remote, &o_loff, &o_roff, &o_len,
					 &o_notify, &timeout_ms))
		return NULL;
	if (local_of(c, o_local, &local) ||
	    target_of(c, o_remote, &rhandle, &rlen, &rro) ||
	    (o_loff && arg_u64(o_loff, "local_off", &loff)) ||
	    (o_roff && arg_u64(o_roff, "remote_off", &roff)) ||
	    (o_notify != Py_None && arg_u64(o_notify, "notify", &notify)))
		return NULL;
	if (o_len == Py_None) {
		uint64_t a = loff <= local->len ? local->len - loff : 0;
		uint64_t b = roff <= rlen ? rlen - roff : 0;
		len = a < b ? a : b;
	} else if (arg_u64(o_len, "length", &len)) {
		return NULL;
	}
	if (op == XFER_OP_READ ? local->readonly : rro) {
		PyErr_SetString(PyExc_ValueError,
				"the destination was registered read-only");
		return NULL;
	}
	if (!range_ok(loff, len, local->len) || !range_ok(roff, len, rlen))
		return raise_xfer(-ERANGE, op == XFER_OP_WRITE ? "write" : "read");
	int64_t idx = submit_begin(c, keep_pair(o_local, o_remote));
	if (idx < 0)
		return NULL;
	struct xfer_sqe *sqe;
	int err = sq_room(c, &sqe);
	if (!err) {
		xfer_prep_rw(sqe, op, local->handle, loff, rhandle, roff, len,
			     slot_user_data(c, (uint32_t)idx));
		if (o_notify != Py_None)
			xfer_sqe_set_notify(sqe, notify);
		xfer_sqe_set_timeout(sqe, timeout_ms);
	}
	return submit_end(c, (uint32_t)idx, err);
}

static PyObject *Context_write(ContextObject *c, PyObject *args, PyObject *kw)
{
	return rw_one(c, XFER_OP_WRITE, args, kw);
}

static PyObject *Context_read(ContextObject *c, PyObject *args, PyObject *kw)
{
	return rw_one(c, XFER_OP_READ, args, kw);
}

static PyObject *Context_notify(ContextObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "remote", "value", NULL };
	PyObject *o_remote, *o_value;
	uint64_t rhandle, rlen, value;
	bool rro;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:notify", kwlist,
					 &o_remote, &o_value) ||
	    target_of(c, o_remote, &rhandle, &rlen, &rro) ||
	    arg_u64(o_value, "value", &value))
		return NULL;
	int64_t idx = submit_begin(c, keep_pair(o_remote, NULL));
	if (idx < 0)
		return NULL;
	struct xfer_sqe *sqe;
	int err = sq_room(c, &sqe);
	if (!err)
		xfer_prep_notify(sqe, rhandle, value,
				 slot_user_data(c, (uint32_t)idx));
	return submit_end(c, (uint32_t)idx, err);
}

/*
 * An array of n u64 from: a buffer of 8-byte integers (numpy int64 or
 * uint64, array('q')), a sequence of ints, or (scalar_ok) one int for
 * all.  *owned is what to free with PyMem_Free (NULL: borrowed from
 * *view, release it).
 */
struct u64_array {
	const uint64_t *v;
	Py_ssize_t n;       /* -1: a scalar, v[0] for every entry */
	uint64_t scalar;
	uint64_t *owned;
	Py_buffer view;
	bool has_view;
};

static void u64_array_free(struct u64_array *a)
{
	if (a->has_view)
		PyBuffer_Release(&a->view);
	PyMem_Free(a->owned);
}

static int u64_array_get(PyObject *o, const char *name, bool scalar_ok,
			 struct u64_array *a)
{
	memset(a, 0, sizeof(*a));
	/* numpy arrays have __index__ too: ints and 0-d arrays are scalars,
	 * anything else with a buffer an array. */
	bool zero_d = false;
	if (PyObject_CheckBuffer(o) && !PyLong_Check(o)) {
		Py_buffer b;
		if (PyObject_GetBuffer(o, &b, PyBUF_ND) == 0) {
			zero_d = b.ndim == 0;
			PyBuffer_Release(&b);
		} else {
			PyErr_Clear();
		}
	}
	if (PyIndex_Check(o) && !PyBool_Check(o) &&
	    (!PyObject_CheckBuffer(o) || zero_d)) {
		if (!scalar_ok) {
			PyErr_Format(PyExc_TypeError, "%s must be an array", name);
			return -1;
		}
		if (arg_u64(o, name, &a->scalar))
			return -1;
		a->v = &a->scalar;
		a->n = -1;
		return 0;
	}
	if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) && !PyByteArray_Check(o)) {
		if (PyObject_GetBuffer(o, &a->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS))
			return -1;
		a->has_view = true;
		const char *f = a->view.format ? a->view.format : "B";
		if (*f == '<' || *f == '@' || *f == '=')
			f++;
		bool is_signed = strchr("qln", *f) && f[1] == 0;
		if (a->view.itemsize != 8 || !(is_signed || (strchr("QLN", *f) && f[1] == 0))) {
			PyErr_Format(PyExc_TypeError,
				     "%s: an array of int64 or uint64, not format '%s'",
				     name, a->view.format ? a->view.format : "B");
			u64_array_free(a);
			return -1;
		}
		a->v = a->view.buf;
		a->n = a->view.len / 8;
		if (is_signed)
			for (Py_ssize_t i = 0; i < a->n; i++)
				if ((int64_t)a->v[i] < 0) {
					PyErr_Format(PyExc_ValueError,
						     "%s[%zd] is negative", name, i);
					u64_array_free(a);
					return -1;
				}
		return 0;
	}
	PyObject *seq = PySequence_Fast(o, "");
	if (!seq) {
		PyErr_Format(PyExc_TypeError,
			     "%s must be an int64 array or a sequence of ints, not %.80s",
			     name, Py_TYPE(o)->tp_name);
		return -1;
	}
	a->n = PySequence_Fast_GET_SIZE(seq);
	a->owned = PyMem_Malloc((size_t)(a->n ? a->n : 1) * sizeof(uint64_t));
	if (!a->owned) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < a->n; i++)
		if (arg_u64(PySequence_Fast_GET_ITEM(seq, i), name, &a->owned[i])) {
			Py_DECREF(seq);
			u64_array_free(a);
			return -1;
		}
	Py_DECREF(seq);
	a->v = a->owned;
	return 0;
}

static inline uint64_t u64_at(const struct u64_array *a, Py_ssize_t i)
{
	return a->n < 0 ? a->scalar : a->v[i];
}

static PyObject *rw_vec(ContextObject *c, unsigned op, PyObject *args,
			PyObject *kw)
{
	static char *kwlist[] = { "local", "local_offs", "remote", "remote_offs",
				  "lengths", "notify", "timeout_ms", NULL };
	PyObject *o_local, *o_remote, *o_loffs, *o_roffs, *o_lens;
	PyObject *o_notify = Py_None, *res = NULL;
	unsigned timeout_ms = 0;
	uint64_t rhandle, rlen, notify = 0;
	struct u64_array lo = { 0 }, ro = { 0 }, ln = { 0 };
	RegionObject *local;
	bool rro;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO|OI", kwlist, &o_local,
					 &o_loffs, &o_remote, &o_roffs, &o_lens,
					 &o_notify, &timeout_ms))
		return NULL;
	if (local_of(c, o_local, &local) ||
	    target_of(c, o_remote, &rhandle, &rlen, &rro) ||
	    (o_notify != Py_None && arg_u64(o_notify, "notify", &notify)))
		return NULL;
	if (op == XFER_OP_READ ? local->readonly : rro) {
		PyErr_SetString(PyExc_ValueError,
				"the destination was registered read-only");
		return NULL;
	}
	if (u64_array_get(o_loffs, "local_offs", false, &lo))
		return NULL;
	if (u64_array_get(o_roffs, "remote_offs", false, &ro))
		goto out;
	if (u64_array_get(o_lens, "lengths", true, &ln))
		goto out;
	Py_ssize_t n = lo.n;
	if (n != ro.n || (ln.n >= 0 && ln.n != n)) {
		PyErr_Format(PyExc_ValueError,
			     "local_offs, remote_offs and lengths differ in length "
			     "(%zd, %zd, %zd)", lo.n, ro.n, ln.n);
		goto out;
	}
	if (n == 0) {
		PyErr_SetString(PyExc_ValueError, "an empty vector");
		goto out;
	}
	/* Every range first: a bad entry raises before anything moves. */
	for (Py_ssize_t i = 0; i < n; i++) {
		uint64_t len = u64_at(&ln, i);
		if (!range_ok(lo.v[i], len, local->len) ||
		    !range_ok(ro.v[i], len, rlen)) {
			char what[64];
			snprintf(what, sizeof(what), "%s_vec: entry %zd",
				 op == XFER_OP_WRITE ? "write" : "read", i);
			raise_xfer(-ERANGE, what);
			goto out;
		}
	}
	int64_t idx = submit_begin(c, keep_pair(o_local, o_remote));
	if (idx < 0)
		goto out;
	uint64_t ud = slot_user_data(c, (uint32_t)idx);
	int err = 0;
	for (Py_ssize_t i = 0; i < n && !err; i++) {
		struct xfer_sqe *sqe;
		err = sq_room(c, &sqe);
		if (err)
			break;
		xfer_prep_rw(sqe, op, local->handle, lo.v[i], rhandle, ro.v[i],
			     u64_at(&ln, i), ud);
		xfer_sqe_set_timeout(sqe, timeout_ms);
		if (i + 1 < n)
			xfer_sqe_set_link(sqe);
		else if (o_notify != Py_None)
			xfer_sqe_set_notify(sqe, notify);
	}
	res = submit_end(c, (uint32_t)idx, err);
out:
	u64_array_free(&lo);
	u64_array_free(&ro);
	u64_array_free(&ln);
	return res;
}

static PyObject *Context_write_vec(ContextObject *c, PyObject *args, PyObject *kw)
{
	return rw_vec(c, XFER_OP_WRITE, args, kw);
}

static PyObject *Context_read_vec(ContextObject *c, PyObject *args, PyObject *kw)
{
	return rw_vec(c, XFER_OP_READ, args, kw);
}

/* --- Context: prepared descriptor lists --- */

static PyObject *Context_dlist(ContextObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "target", "offsets", "lengths", NULL };
	PyObject *o_target, *o_offs, *o_lens, *res = NULL;
	uint64_t handle, tlen;
	struct u64_array off = { 0 }, len = { 0 };
	bool ro;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:dlist", kwlist,
					 &o_target, &o_offs, &o_lens) ||
	    target_of(c, o_target, &handle, &tlen, &ro))
		return NULL;
	if (u64_array_get(o_offs, "offsets", false, &off))
		return NULL;
	if (u64_array_get(o_lens, "lengths", true, &len))
		goto out;
	if (off.n == 0 || off.n > UINT32_MAX ||
	    (len.n >= 0 && len.n != off.n)) {
		PyErr_Format(PyExc_ValueError,
			     "dlist: %zd offsets and %zd lengths (1 to 2^32-1 "
			     "entries, as many lengths as offsets or one for "
			     "all)", off.n, len.n);
		goto out;
	}
	/* xferd checks every entry against the target again. */
	res = dlist_create(c, o_target, handle, ro, (uint32_t)off.n, off.v,
			   len.n < 0 ? NULL : len.v, len.n < 0 ? len.scalar : 0);
out:
	u64_array_free(&off);
	u64_array_free(&len);
	return res;
}

static DListObject *dlist_of(ContextObject *c, PyObject *o, const char *name)
{
	if (!PyObject_TypeCheck(o, &DList_Type)) {
		PyErr_Format(PyExc_TypeError, "%s must be a DList, not %.80s",
			     name, Py_TYPE(o)->tp_name);
		return NULL;
	}
	DListObject *d = (DListObject *)o;
	if (!d->dl || d->ctx != c) {
		PyErr_Format(PyExc_ValueError, "%s: %s", name,
			     d->dl ? "a DList of another Context"
				   : "the DList is closed");
		return NULL;
	}
	return d;
}

/* Indices into a list of `count` entries, as uint32 (NULL: none given);
 * *owned to PyMem_Free.  An index past the list raises here, before
 * anything is submitted (xferd would refuse it too). */
static int indices_get(PyObject *o, const char *name, uint32_t count,
		       uint32_t **owned, Py_ssize_t *n)
{
	struct u64_array a;

	*owned = NULL;
	*n = -1;
	if (o == Py_None)
		return 0;
	if (u64_array_get(o, name, false, &a))
		return -1;
	if (a.n == 0 || a.n > UINT32_MAX) {
		PyErr_Format(PyExc_ValueError, "%s: 1 to 2^32-1 indices, not %zd",
			     name, a.n);
		u64_array_free(&a);
		return -1;
	}
	*owned = PyMem_Malloc((size_t)a.n * sizeof(uint32_t));
	if (!*owned) {
		u64_array_free(&a);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < a.n; i++) {
		if (a.v[i] >= count) {
			PyErr_Format(PyExc_IndexError,
				     "%s[%zd] = %llu: the list has %u entries",
				     name, i, (unsigned long long)a.v[i],
				     (unsigned)count);
			u64_array_free(&a);
			PyMem_Free(*owned);
			*owned = NULL;
			return -1;
		}
		(*owned)[i] = (uint32_t)a.v[i];
	}
	*n = a.n;
	u64_array_free(&a);
	return 0;
}

/*
 * Fill sqe with the list descriptor, waiting while the ring's index area
 * is held by descriptors xferd has not taken yet (mu held): such an SQE
 * goes back as a NOP nobody waits for, so that xferd moves on.
 */
static int dlist_sqe(ContextObject *c, unsigned op, DListObject *l,
		     DListObject *r, uint32_t n, const uint32_t *li,
		     const uint32_t *ri, uint64_t ud, struct xfer_sqe **out)
{
	uint64_t deadline = now_ns() + 30000000000ull;
	struct xfer_sqe *sqe;

	for (;;) {
		int err = sq_room(c, &sqe);
		if (err)
			return err;
		err = xfer_prep_dlist(c->ctx, sqe, op, l->dl, r->dl, n, li, ri,
				      ud);
		if (err != -EAGAIN) {
			if (err)
				xfer_prep_nop(sqe, UINT64_MAX);  /* nobody's */
			*out = err ? NULL : sqe;
			return err;
		}
		xfer_prep_nop(sqe, UINT64_MAX);
		if ((err = ring_wait_step(c, deadline)))
			return err;
	}
}

static PyObject *rw_dlist(ContextObject *c, unsigned op, PyObject *args,
			  PyObject *kw)
{
	static char *kwlist[] = { "local", "remote", "local_idx", "remote_idx",
				  "notify", "timeout_ms", NULL };
	PyObject *o_l, *o_r, *o_li = Py_None, *o_ri = Py_None;
	PyObject *o_notify = Py_None, *res = NULL;
	unsigned timeout_ms = 0;
	uint64_t notify = 0;
	uint32_t *li = NULL, *ri = NULL;
	DListObject *l, *r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOOI", kwlist, &o_l,
					 &o_r, &o_li, &o_ri, &o_notify,
					 &timeout_ms))
		return NULL;
	if (!(l = dlist_of(c, o_l, "local")) ||
	    !(r = dlist_of(c, o_r, "remote")) ||
	    (o_notify != Py_None && arg_u64(o_notify, "notify", &notify)))
		return NULL;
	if (op == XFER_OP_READ_DLIST ? l->readonly : r->readonly) {
		PyErr_SetString(PyExc_ValueError,
				"the destination was registered read-only");
		return NULL;
	}
	/* n: as many pairs as indices given; none: every entry of the
	 * shorter list, 0..n-1 on both sides. */
	Py_ssize_t nl, nr;
	if (indices_get(o_li, "local_idx", l->count, &li, &nl) ||
	    indices_get(o_ri, "remote_idx", r->count, &ri, &nr))
		goto out;
	if (nl < 0 && nr >= 0) {
		PyErr_SetString(PyExc_ValueError,
				"remote_idx without local_idx");
		goto out;
	}
	if (nl >= 0 && nr >= 0 && nl != nr) {
		PyErr_Format(PyExc_ValueError,
			     "local_idx and remote_idx differ in length "
			     "(%zd, %zd)", nl, nr);
		goto out;
	}
	if (nl >= 0 && nr < 0)
		for (Py_ssize_t k = 0; k < nl; k++)
			if (li[k] >= r->count) {
				PyErr_Format(PyExc_IndexError,
					     "local_idx[%zd] = %u is also the "
					     "remote index: the remote list "
					     "has %u entries", k, li[k],
					     (unsigned)r->count);
				goto out;
			}
	uint32_t n = nl >= 0 ? (uint32_t)nl
		   : l->count < r->count ? l->count : r->count;
	int64_t idx = submit_begin(c, keep_pair(o_l, o_r));
	if (idx < 0)
		goto out;
	struct xfer_sqe *sqe;
	int err = dlist_sqe(c, op, l, r, n, li, ri,
			    slot_user_data(c, (uint32_t)idx), &sqe);
	if (!err) {
		if (o_notify != Py_None)
			xfer_sqe_set_notify(sqe, notify);
		xfer_sqe_set_timeout(sqe, timeout_ms);
	}
	res = submit_end(c, (uint32_t)idx, err);
out:
	PyMem_Free(li);
	PyMem_Free(ri);
	return res;
}

static PyObject *Context_write_dlist(ContextObject *c, PyObject *args,
				     PyObject *kw)
{
	return rw_dlist(c, XFER_OP_WRITE_DLIST, args, kw);
}

static PyObject *Context_read_dlist(ContextObject *c, PyObject *args,
				    PyObject *kw)
{
	return rw_dlist(c, XFER_OP_READ_DLIST, args, kw);
}

/* --- Context: notifications and events --- */

static PyObject *region_by_handle(ContextObject *c, uint64_t handle)
{
	for (struct obj_link *l = c->regions.next; l != &c->regions; l = l->next) {
		RegionObject *r = CONTAINER_OF(l, RegionObject, link);
		if (r->handle == handle) {
			Py_INCREF(r);
			return (PyObject *)r;
		}
	}
	Py_RETURN_NONE;
}

static PyObject *Context_get_notifications(ContextObject *c, PyObject *args,
					   PyObject *kw)
{
	static char *kwlist[] = { "timeout", "max", NULL };
	PyObject *t = NULL, *o_max = Py_None;
	Py_ssize_t max = PY_SSIZE_T_MAX;
	uint64_t deadline = 0;
	struct note *got;
	size_t n = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:get_notifications",
					 kwlist, &t, &o_max))
		return NULL;
	if (o_max != Py_None) {
		uint64_t m;
		if (arg_u64(o_max, "max", &m))
			return NULL;
		max = m > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : (Py_ssize_t)m;
	}
	if (t && parse_timeout(t, &deadline))
		return NULL;
	if (ctx_check_open(c))
		return NULL;
	if (max < 1)
		return PyList_New(0);
	if (deadline) {
		int rc;
		Py_BEGIN_ALLOW_THREADS
		rc = ctx_wait(c, notes_ready, 0, deadline);
		Py_END_ALLOW_THREADS
		if (rc && rc != -ETIME && c->note_len == 0)
			return raise_xfer(rc, "get_notifications");
	}
	ctx_lock(c);
	reap_locked(c);
	n = c->note_len < (size_t)max ? c->note_len : (size_t)max;
	got = PyMem_RawMalloc((n ? n : 1) * sizeof(*got));
	if (got) {
		for (size_t i = 0; i < n; i++)
			got[i] = c->notes[(c->note_head + i) % c->note_cap];
		if (n) {
			c->note_head = (c->note_head + n) % c->note_cap;
			c->note_len -= n;
		}
	}
	ctx_unlock(c);
	if (!got)
		return PyErr_NoMemory();
	PyObject *list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *nt = PyStructSequence_New(Notification_Type);
		if (!nt) {
			Py_CLEAR(list);
			break;
		}
		PyStructSequence_SET_ITEM(nt, 0, PyLong_FromUnsignedLongLong(got[i].value));
		PyStructSequence_SET_ITEM(nt, 1, PyLong_FromLongLong(got[i].bytes));
		PyStructSequence_SET_ITEM(nt, 2, region_by_handle(c, got[i].handle));
		PyStructSequence_SET_ITEM(nt, 3, PyLong_FromUnsignedLongLong(got[i].handle));
		PyObject *from = got[i].has_from ? sender_object(&got[i].from)
						 : Py_NewRef(Py_None);
		if (!from) {
			Py_DECREF(nt);
			Py_CLEAR(list);
			break;
		}
		PyStructSequence_SET_ITEM(nt, 4, from);
		PyList_SET_ITEM(list, (Py_ssize_t)i, nt);
	}
	PyMem_RawFree(got);
	return list;
}

static PyObject *Context_event_fd(ContextObject *c, PyObject *unused)
{
	int fd;

	(void)unused;
	if (ctx_check_open(c))
		return NULL;
	ctx_lock(c);
	fd = xfer_event_fd(c->ctx);
	ctx_unlock(c);
	if (fd < 0)
		return raise_xfer(fd, "event_fd");
	return PyLong_FromLong(fd);
}

/* For asyncio's reader: reset wake_fd, reap, arm, reap again (xfer.h's
 * protocol); returns True if xferd has gone. */
static PyObject *Context_dispatch(ContextObject *c, PyObject *unused)
{
	uint64_t v;
	bool dead;

	(void)unused;
	(void)!read(c->wake_fd, &v, sizeof(v));
	ctx_lock(c);
	reap_locked(c);
	if (c->ctx && !c->dead) {
		int fd = xfer_event_fd(c->ctx);
		if (fd < 0)
			c->dead = fd;
		reap_locked(c);
	}
	dead = c->dead || !c->ctx;
	ctx_unlock(c);
	return PyBool_FromLong(dead);
}

static PyObject *Context_notes_pending(ContextObject *c, PyObject *unused)
{
	bool any;

	(void)unused;
	ctx_lock(c);
	reap_locked(c);
	any = c->note_len > 0;
	ctx_unlock(c);
	return PyBool_FromLong(any);
}

static PyObject *Context_async_waiters(ContextObject *c, PyObject *arg)
{
	long d = PyLong_AsLong(arg);

	if (d == -1 && PyErr_Occurred())
		return NULL;
	c->async_waiters += (int)d;
	return PyLong_FromLong(c->async_waiters);
}

static PyObject *Context_get(ContextObject *c, void *which)
{
	switch ((intptr_t)which) {
	case 0:
		return PyBool_FromLong(c->closed);
	case 1:
		return PyLong_FromUnsignedLong(c->ctx ? xfer_cq_overflow(c->ctx) : 0);
	case 2:
		return PyLong_FromLong(c->wake_fd);
	case 4: {
		struct xfer_cqe_sender self;
		if (ctx_check_open(c))
			return NULL;
		xfer_ctx_identity(c->ctx, &self);
		return sender_object(&self);
	}
	default:
		return PyLong_FromUnsignedLongLong(c->notes_lost);
	}
}

static PyMethodDef Context_methods[] = {
	{ "close", (PyCFunction)Context_close, METH_NOARGS,
	  "Deregister every region, forget every import, and close the\n"
	  "connection (pending requests fail with ECANCELED).  Host regions\n"
	  "with live views stay mapped (and the connection open) until the\n"
	  "views are gone." },
	{ "__enter__", Context_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)Context_exit, METH_VARARGS, NULL },
	{ "alloc_host", (PyCFunction)Context_alloc_host, METH_O,
	  "alloc_host(size) -> Region\n\n"
	  "Host memory shared with xferd (a sealed memfd, zero copy on this\n"
	  "node), registered.  The Region is a writable buffer; .numpy() views it." },
	{ "register", (PyCFunction)Context_register, METH_O,
	  "register(obj) -> Region\n\n"
	  "Register the memory of obj: anything with the buffer protocol\n"
	  "(bytes, bytearray, memoryview, numpy), CUDA memory through\n"
	  "__cuda_array_interface__, torch tensors (data_ptr(); CPU, pinned or\n"
	  "CUDA), or DLPack producers.  Must be contiguous.  The Region keeps\n"
	  "obj alive; read-only memory can only be a source." },
	{ "export", (PyCFunction)(void (*)(void))Context_export,
	  METH_VARARGS | METH_KEYWORDS,
	  "export(region, off=0, length=None) -> bytes\n\nRegion.export." },
	{ "import_token", (PyCFunction)Context_import_token, METH_O,
	  "import_token(token) -> Remote\n\n"
	  "Import a token from anyone (checked by the xferd that owns it)." },
	{ "publish", (PyCFunction)(void (*)(void))Context_publish,
	  METH_VARARGS | METH_KEYWORDS,
	  "publish(name, token, shared=False)\n\n"
	  "Publish a token under name at the local xferd (until unpublish or\n"
	  "close), in this user's namespace.  shared: other users see it as\n"
	  "'~uid/name', and other nodes see it.  Names: 1-200 of\n"
	  "[A-Za-z0-9._:@+-]." },
	{ "unpublish", (PyCFunction)Context_unpublish, METH_VARARGS,
	  "unpublish(name)" },
	{ "lookup", (PyCFunction)Context_lookup, METH_VARARGS,
	  "lookup(name) -> bytes\n\n"
	  "'name' asks the local xferd for this user's name, then its\n"
	  "configured peers for a shared one; '~uid/name' that user's name\n"
	  "if shared; 'node/name' asks that node (shared names only).\n"
	  "XferError(ENOENT) if nobody has it (or may see it)." },
	{ "write", (PyCFunction)(void (*)(void))Context_write,
	  METH_VARARGS | METH_KEYWORDS,
	  "write(local, remote, local_off=0, remote_off=0, length=None,\n"
	  "      notify=None, timeout_ms=0) -> Request\n\n"
	  "local[local_off:+length] -> remote[remote_off:].  length None: as\n"
	  "much as fits in both.  notify: a 64-bit value delivered to the\n"
	  "remote owner after the data landed." },
	{ "read", (PyCFunction)(void (*)(void))Context_read,
	  METH_VARARGS | METH_KEYWORDS,
	  "read(local, remote, local_off=0, remote_off=0, length=None,\n"
	  "     notify=None, timeout_ms=0) -> Request\n\n"
	  "remote[remote_off:+length] -> local[local_off:]." },
	{ "dlist", (PyCFunction)(void (*)(void))Context_dlist,
	  METH_VARARGS | METH_KEYWORDS,
	  "dlist(target, offsets, lengths) -> DList\n\n"
	  "A prepared descriptor list: entry i is target[offsets[i]:+lengths[i]]\n"
	  "(lengths: one int for every entry, or an array), target a Region of\n"
	  "this context or a Remote.  xferd checks every entry once and keeps\n"
	  "the list until DList.close(), until its target goes, or the context\n"
	  "closes.  Offsets and lengths: int64/uint64 arrays or sequences." },
	{ "write_dlist", (PyCFunction)(void (*)(void))Context_write_dlist,
	  METH_VARARGS | METH_KEYWORDS,
	  "write_dlist(local, remote, local_idx=None, remote_idx=None,\n"
	  "            notify=None, timeout_ms=0) -> Request\n\n"
	  "Entry local_idx[k] of DList local -> entry remote_idx[k] of DList\n"
	  "remote, for every k, as ONE descriptor (one completion with the sum\n"
	  "of the bytes).  remote_idx None: the same as local_idx; both None:\n"
	  "0..n-1 over the shorter list.  Entries paired must have the same\n"
	  "length; xferd checks every pair before any byte moves.  notify: a\n"
	  "value delivered to the remote owner after the last byte." },
	{ "read_dlist", (PyCFunction)(void (*)(void))Context_read_dlist,
	  METH_VARARGS | METH_KEYWORDS,
	  "read_dlist(local, remote, local_idx=None, remote_idx=None,\n"
	  "           notify=None, timeout_ms=0) -> Request\n\n"
	  "write_dlist the other way: remote entries -> local entries." },
	{ "write_vec", (PyCFunction)(void (*)(void))Context_write_vec,
	  METH_VARARGS | METH_KEYWORDS,
	  "write_vec(local, local_offs, remote, remote_offs, lengths,\n"
	  "          notify=None, timeout_ms=0) -> Request\n\n"
	  "Many writes as one linked batch (one completion: the sum of the\n"
	  "bytes, or the first error).  Offsets: numpy int64/uint64 arrays or\n"
	  "sequences of ints; lengths also one int for all." },
	{ "read_vec", (PyCFunction)(void (*)(void))Context_read_vec,
	  METH_VARARGS | METH_KEYWORDS,
	  "read_vec(local, local_offs, remote, remote_offs, lengths,\n"
	  "         notify=None, timeout_ms=0) -> Request" },
	{ "notify", (PyCFunction)(void (*)(void))Context_notify,
	  METH_VARARGS | METH_KEYWORDS,
	  "notify(remote, value) -> Request\n\n"
	  "Deliver value to the owner of remote's region, moving no data." },
	{ "get_notifications", (PyCFunction)(void (*)(void))Context_get_notifications,
	  METH_VARARGS | METH_KEYWORDS,
	  "get_notifications(timeout=0, max=None) -> list[Notification]\n\n"
	  "Notifications that arrived for this context's regions; waits up\n"
	  "to timeout seconds (None: forever) for the first one." },
	{ "event_fd", (PyCFunction)Context_event_fd, METH_NOARGS,
	  "event_fd() -> int\n\n"
	  "xfer_event_fd: arm and return the descriptor that polls readable\n"
	  "when completions may be waiting (see xfer.h for the protocol)." },
	{ "_dispatch", (PyCFunction)Context_dispatch, METH_NOARGS, NULL },
	{ "_async_waiters", (PyCFunction)Context_async_waiters, METH_O, NULL },
	{ "_notes_pending", (PyCFunction)Context_notes_pending, METH_NOARGS, NULL },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef Context_getset[] = {
	{ "closed", (getter)Context_get, NULL, "close() was called.", (void *)0 },
	{ "overflow", (getter)Context_get, NULL,
	  "Notifications xferd lost (0: it holds those that find the CQ "
	  "full; past its notify_queue_max the sender gets ENOBUFS).",
	  (void *)1 },
	{ "_wake_fd", (getter)Context_get, NULL, NULL, (void *)2 },
	{ "notifications_lost", (getter)Context_get, NULL,
	  "Notifications dropped here for lack of memory.", (void *)3 },
	{ "identity", (getter)Context_get, NULL,
	  "The Sender that this context's notifications carry.", (void *)4 },
	{ NULL, NULL, NULL, NULL, NULL }
};

PyTypeObject Context_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "xferd._core.Context",
	.tp_basicsize = sizeof(ContextObject),
	.tp_dealloc = (destructor)Context_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "Context(socket=None, spin_us=20)\n\n"
		  "A connection to the local xferd ($XFERD_SOCKET or the default\n"
		  "socket when None) with its submission/completion ring.",
	.tp_traverse = (traverseproc)Context_traverse,
	.tp_weaklistoffset = offsetof(ContextObject, weakreflist),
	.tp_methods = Context_methods,
	.tp_getset = Context_getset,
	.tp_init = (initproc)Context_init,
	.tp_new = Context_new,
};

/* --- module --- */

static PyObject *mod_strerror(PyObject *self, PyObject *arg)
{
	(void)self;
	long e = PyLong_AsLong(arg);
	if (e == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(xfer_strerror(e > 0 ? (int)-e : (int)e));
}

static PyObject *mod_set_await(PyObject *self, PyObject *fn)
{
	(void)self;
	Py_XSETREF(await_helper, Py_NewRef(fn));
	Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
	{ "strerror", mod_strerror, METH_O,
	  "strerror(errno) -> str: xfer_strerror's text (either sign)." },
	{ "_set_await", mod_set_await, METH_O, NULL },
	{ NULL, NULL, 0, NULL }
};

static PyStructSequence_Field note_fields[] = {
	{ "value", "the sender's 64-bit notify value" },
	{ "nbytes", "bytes that landed with it (0 for notify())" },
	{ "region", "the Region notified (None if no longer registered)" },
	{ "handle", "xferd's handle of that region" },
	/* Not in the tuple (older code unpacks four): an attribute. */
	{ "sender", "who sent it, as xferd recorded it (a Sender; None "
		    "from an xferd that names no senders)" },
	{ NULL, NULL }
};

static PyStructSequence_Desc note_desc = {
	"xferd.Notification",
	"A notification for one of this context's regions.",
	note_fields, 4,
};

static PyStructSequence_Field sender_fields[] = {
	{ "node", "16 bytes: the instance id of the sender's xferd" },
	{ "client", "the sender's connection id at that xferd (never reused)" },
	{ "uid", "its user id as that xferd saw it (informational for "
		 "another node)" },
	{ "remote", "True: a client of another node's xferd" },
	{ NULL, NULL }
};

static PyStructSequence_Desc sender_desc = {
	"xferd.Sender",
	"Who sent a notification, as xferd recorded it: the sender cannot\n"
	"choose it.  Compare node and client to know a sender again.",
	sender_fields, 4,
};

PyObject *sender_object(const struct xfer_cqe_sender *from)
{
	PyObject *o = PyStructSequence_New(Sender_Type);

	if (!o)
		return NULL;
	PyStructSequence_SET_ITEM(o, 0, PyBytes_FromStringAndSize(
					 (const char *)from->node,
					 sizeof(from->node)));
	PyStructSequence_SET_ITEM(o, 1, PyLong_FromUnsignedLongLong(from->client));
	PyStructSequence_SET_ITEM(o, 2, PyLong_FromUnsignedLong(from->uid));
	PyStructSequence_SET_ITEM(o, 3, PyBool_FromLong(
					 !!(from->flags & XFER_SENDER_F_REMOTE)));
	for (Py_ssize_t i = 0; i < 4; i++) {
		if (!PyStructSequence_GET_ITEM(o, i)) {
			Py_DECREF(o);
			return NULL;
		}
	}
	return o;
}

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "xferd._core",
	.m_doc = "C core of the xferd package (libxfer bindings).",
	.m_size = -1,
	.m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__core(void);

PyMODINIT_FUNC PyInit__core(void)
{
	PyObject *m;

	if (PyType_Ready(&Context_Type) || PyType_Ready(&Region_Type) ||
	    PyType_Ready(&Remote_Type) || PyType_Ready(&Request_Type) ||
	    PyType_Ready(&DList_Type))
		return NULL;
	m = PyModule_Create(&module_def);
	if (!m)
		return NULL;
	XferError = PyErr_NewExceptionWithDoc(
		"xferd.XferError",
		"An error from xferd or libxfer: .errno is the errno, .strerror\n"
		"xfer_strerror's explanation.",
		PyExc_OSError, NULL);
	Notification_Type = PyStructSequence_NewType(&note_desc);
	Sender_Type = PyStructSequence_NewType(&sender_desc);
	if (!XferError || !Notification_Type || !Sender_Type ||
	    PyModule_AddObjectRef(m, "Sender", (PyObject *)Sender_Type) ||
	    PyModule_AddObjectRef(m, "XferError", XferError) ||
	    PyModule_AddObjectRef(m, "Notification", (PyObject *)Notification_Type) ||
	    PyModule_AddObjectRef(m, "Context", (PyObject *)&Context_Type) ||
	    PyModule_AddObjectRef(m, "Region", (PyObject *)&Region_Type) ||
	    PyModule_AddObjectRef(m, "Remote", (PyObject *)&Remote_Type) ||
	    PyModule_AddObjectRef(m, "Request", (PyObject *)&Request_Type) ||
	    PyModule_AddObjectRef(m, "DList", (PyObject *)&DList_Type) ||
	    PyModule_AddIntConstant(m, "TOKEN_MAX", XFER_TOKEN_MAX) ||
	    stream_module_add(m)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
