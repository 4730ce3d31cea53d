/* SPDX-License-Identifier: Apache-2.0 */
/*
 * completion.c - the completion side of a Context: the slot table,
 * reaping the CQ into slots and notifications, waiting for either, and
 * Request, the handle of one submission.
 *
 * Reaping and waiting run under Context.mu without the GIL (core.h: the
 * lock order), so that one thread sleeps on the ring while others
 * submit; Request's methods run with the GIL and take mu briefly.
 */
#include "core.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

/* --- completion slots (mu) --- */

/* A free slot, marked pending; -1 without memory (mu and GIL held). */
int64_t slot_get(ContextObject *c, PyObject *keep)
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
PyObject *slot_put(ContextObject *c, uint32_t idx)
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

void fail_pending(ContextObject *c, int err)
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
	size_t len;
	const void *m = xfer_cqe_message(c->ctx, cqe, &len);
	n->msg_len = (uint16_t)len;
	if (len)
		memcpy(n->msg, m, len);
	int nl = xfer_cqe_sender_name(c->ctx, cqe, NULL, 0);
	n->name_len = nl > 0 ? (uint8_t)nl : 0;
	if (nl > 0) {
		char buf[XFER_SENDER_NAME_MAX + 1];
		xfer_cqe_sender_name(c->ctx, cqe, buf, sizeof(buf));
		memcpy(n->name, buf, n->name_len);
	}
}

/* Consume every CQE there is (mu held, GIL not needed).  Returns the
 * number consumed. */
unsigned reap_locked(ContextObject *c)
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

static bool slot_ready(const ContextObject *c, uint64_t idx)
{
	return c->slots[idx].state != SLOT_PENDING;
}

bool notes_ready(const ContextObject *c, uint64_t unused)
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
int ctx_wait(ContextObject *c, ready_fn ready, uint64_t arg,
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
int parse_timeout(PyObject *t, uint64_t *deadline)
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
void sweep_orphans(ContextObject *c)
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

PyObject *request_new(ContextObject *c, uint32_t idx)
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
		PyErr_SetString(PyExc_TimeoutError,
				"Request.wait: timed out; the transfer goes on: "
				"wait() again, or poll done()");
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
