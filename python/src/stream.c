/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream.c - Stream: libxfer's streams (xfer_stream_*), a queue of slots
 * in the consumer's memory with flow control by notifications.
 *
 * A stream takes every CQE of its context, so the Context it is made on
 * must serve nothing else while the stream lives (no submissions, no
 * waits, no notifications read through it).  Every stream call holds the
 * context's mu and lets the GIL go while libxfer waits.  A live stream
 * keeps its libxfer context open (Context.deferred) until it is closed,
 * even past Context.close(), so that its close can still tell the other
 * end and free what it holds.
 */
#include <errno.h>

#include "core.h"

typedef struct StreamObject {
	PyObject_HEAD
	ContextObject *ctx;       /* strong */
	PyObject *region;         /* consumer: the slots' Region, kept alive */
	struct xfer_stream *s;    /* NULL once closed */
	bool consumer;
	uint64_t offset;          /* consumer: of slot 0 in the region */
} StreamObject;

static PyTypeObject Stream_Type;

static StreamObject *stream_new(ContextObject *c, bool consumer)
{
	StreamObject *st = PyObject_New(StreamObject, &Stream_Type);

	if (!st)
		return NULL;
	Py_INCREF(c);
	st->ctx = c;
	st->region = NULL;
	st->s = NULL;
	st->consumer = consumer;
	st->offset = 0;
	return st;
}

/* The libxfer stream made: hold the context open for it. */
static void stream_hold(StreamObject *st, struct xfer_stream *s)
{
	st->s = s;
	st->ctx->deferred++;
}

static int stream_close_now(StreamObject *st)
{
	struct xfer_stream *s = st->s;
	ContextObject *c = st->ctx;
	int err;

	if (!s)
		return 0;
	st->s = NULL;
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_stream_close(s);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	c->deferred--;
	ctx_finish_close(c);
	return err;
}

static void Stream_dealloc(StreamObject *st)
{
	stream_close_now(st);
	Py_CLEAR(st->region);
	Py_CLEAR(st->ctx);
	PyObject_Free(st);
}

static int stream_check(StreamObject *st, bool consumer, const char *what)
{
	if (!st->s) {
		PyErr_Format(PyExc_ValueError, "%s: the stream is closed", what);
		return -1;
	}
	if (st->consumer != consumer) {
		PyErr_Format(PyExc_TypeError, "%s: a %s's call, and this "
			     "Stream is a %s (consumers come from "
			     "Stream.listen, producers from Stream.connect)",
			     what, consumer ? "consumer" : "producer",
			     consumer ? "producer" : "consumer");
		return -1;
	}
	return 0;
}

static PyObject *Stream_listen(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "context", "region", "nslots", "slot_size",
				  "offset", NULL };
	ContextObject *c;
	RegionObject *r;
	unsigned int nslots;
	unsigned long long slot_size, offset = 0;
	struct xfer_stream *s;
	int err;

	(void)cls;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!IK|K:listen", kwlist,
					 &Context_Type, &c, &Region_Type, &r,
					 &nslots, &slot_size, &offset) ||
	    ctx_check_open(c))
		return NULL;
	if (r->ctx != c || !r->mem) {
		PyErr_SetString(PyExc_ValueError,
				"listen: the region must be registered by the context");
		return NULL;
	}
	StreamObject *st = stream_new(c, true);
	if (!st)
		return NULL;
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_stream_listen(c->ctx, r->mem, offset, nslots, slot_size, &s);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	if (err) {
		Py_DECREF(st);
		return raise_xfer(err, "listen");
	}
	stream_hold(st, s);
	Py_INCREF(r);
	st->region = (PyObject *)r;
	st->offset = offset;
	return (PyObject *)st;
}

static PyObject *Stream_connect(PyObject *cls, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "context", "token", "timeout_ms", "timeout",
				  NULL };
	ContextObject *c;
	Py_buffer tok;
	PyObject *o_ms = NULL, *o_secs = NULL;
	int64_t timeout_ms;
	int err;
	struct xfer_stream *s;

	(void)cls;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!y*|O$O:connect", kwlist,
					 &Context_Type, &c, &tok, &o_ms, &o_secs))
		return NULL;
	if (arg_timeout(o_secs, o_ms, "connect", true, &timeout_ms) ||
	    ctx_check_open(c)) {
		PyBuffer_Release(&tok);
		return NULL;
	}
	StreamObject *st = stream_new(c, false);
	if (!st) {
		PyBuffer_Release(&tok);
		return NULL;
	}
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_stream_connect(c->ctx, tok.buf, (size_t)tok.len,
				  (int)timeout_ms, &s);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	PyBuffer_Release(&tok);
	if (err) {
		Py_DECREF(st);
		return raise_xfer(err, "connect");
	}
	stream_hold(st, s);
	return (PyObject *)st;
}

static PyObject *Stream_token(StreamObject *st, PyObject *unused)
{
	uint8_t tok[XFER_STREAM_TOKEN_MAX];
	size_t len = sizeof(tok);

	(void)unused;
	if (stream_check(st, true, "token"))
		return NULL;
	int err = xfer_stream_token(st->s, tok, &len);
	if (err)
		return raise_xfer(err, "token");
	return PyBytes_FromStringAndSize((const char *)tok, (Py_ssize_t)len);
}

static PyObject *Stream_accept(StreamObject *st, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout_ms", "timeout", NULL };
	PyObject *o_ms = NULL, *o_secs = NULL;
	int64_t timeout_ms;
	int err;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$O:accept", kwlist,
					 &o_ms, &o_secs) ||
	    arg_timeout(o_secs, o_ms, "accept", true, &timeout_ms) ||
	    stream_check(st, true, "accept"))
		return NULL;
	ctx_lock(st->ctx);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_stream_accept(st->s, (int)timeout_ms);
	Py_END_ALLOW_THREADS
	ctx_unlock(st->ctx);
	if (err)
		return raise_xfer(err, "accept");
	Py_RETURN_NONE;
}

static PyObject *Stream_recv(StreamObject *st, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout_ms", "timeout", NULL };
	PyObject *o_ms = NULL, *o_secs = NULL;
	int64_t timeout_ms;
	int slot;
	uint64_t len = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$O:recv", kwlist,
					 &o_ms, &o_secs) ||
	    arg_timeout(o_secs, o_ms, "recv", true, &timeout_ms) ||
	    stream_check(st, true, "recv"))
		return NULL;
	ctx_lock(st->ctx);
	Py_BEGIN_ALLOW_THREADS
	slot = xfer_stream_recv(st->s, &len, (int)timeout_ms);
	Py_END_ALLOW_THREADS
	ctx_unlock(st->ctx);
	if (slot == -EPIPE)
		Py_RETURN_NONE;   /* the producer closed: the end */
	if (slot < 0)
		return raise_xfer(slot, "recv");
	uint64_t off = st->offset + (uint64_t)slot * xfer_stream_slot_size(st->s);
	return Py_BuildValue("(iKK)", slot, (unsigned long long)off,
			     (unsigned long long)len);
}

static PyObject *Stream_release(StreamObject *st, PyObject *arg)
{
	uint64_t slot;

	if (stream_check(st, true, "release") || arg_u64(arg, "slot", &slot))
		return NULL;
	if (slot > UINT32_MAX)
		return raise_xfer(-EINVAL, "release");
	ctx_lock(st->ctx);
	int err = xfer_stream_release(st->s, (uint32_t)slot);
	ctx_unlock(st->ctx);
	if (err)
		return raise_xfer(err, "release");
	Py_RETURN_NONE;
}

static PyObject *Stream_send(StreamObject *st, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "region", "length", "offset", "timeout_ms",
				  "timeout", NULL };
	RegionObject *r;
	PyObject *length = Py_None, *o_ms = NULL, *o_secs = NULL;
	unsigned long long offset = 0;
	int64_t timeout_ms;
	int err;
	uint64_t len;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|OKO$O:send", kwlist,
					 &Region_Type, &r, &length, &offset,
					 &o_ms, &o_secs) ||
	    arg_timeout(o_secs, o_ms, "send", true, &timeout_ms) ||
	    stream_check(st, false, "send"))
		return NULL;
	if (r->ctx != st->ctx || !r->mem) {
		PyErr_SetString(PyExc_ValueError,
				"send: the region must be registered by the stream's context");
		return NULL;
	}
	if (length == Py_None)
		len = offset < r->len ? r->len - offset : 0;
	else if (arg_u64(length, "length", &len))
		return NULL;
	ctx_lock(st->ctx);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_stream_send(st->s, r->mem, offset, len, (int)timeout_ms);
	Py_END_ALLOW_THREADS
	ctx_unlock(st->ctx);
	if (err)
		return raise_xfer(err, "send");
	Py_RETURN_NONE;
}

static PyObject *Stream_credits(StreamObject *st, PyObject *unused)
{
	(void)unused;
	if (stream_check(st, false, "credits"))
		return NULL;
	ctx_lock(st->ctx);
	int n = xfer_stream_credits(st->s);
	ctx_unlock(st->ctx);
	if (n < 0)
		return raise_xfer(n, "credits");
	return PyLong_FromLong(n);
}

static PyObject *Stream_close(StreamObject *st, PyObject *unused)
{
	(void)unused;
	int err = stream_close_now(st);
	/* The error that had broken the stream was reported by the call
	 * that met it; an end that is over is no error at close. */
	if (err && err != -EPIPE && err != -ECONNRESET)
		return raise_xfer(err, "close");
	Py_RETURN_NONE;
}

static PyObject *Stream_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	return Py_NewRef(self);
}

static PyObject *Stream_exit(StreamObject *st, PyObject *args)
{
	(void)args;
	stream_close_now(st);
	Py_RETURN_FALSE;
}

static PyObject *Stream_get(StreamObject *st, void *which)
{
	if (!st->s && which != (void *)2) {
		PyErr_SetString(PyExc_ValueError, "the stream is closed");
		return NULL;
	}
	switch ((uintptr_t)which) {
	case 0: return PyLong_FromUnsignedLong(xfer_stream_nslots(st->s));
	case 1: return PyLong_FromUnsignedLongLong(xfer_stream_slot_size(st->s));
	case 3: {
		struct xfer_cqe_sender peer;
		if (xfer_stream_peer(st->s, &peer))
			Py_RETURN_NONE;
		return sender_object(&peer);
	}
	case 4: return PyLong_FromUnsignedLongLong(xfer_stream_dropped(st->s));
	default: return PyBool_FromLong(st->s == NULL);
	}
}

static PyMethodDef Stream_methods[] = {
	{ "listen", (PyCFunction)(void (*)(void))Stream_listen,
	  METH_VARARGS | METH_KEYWORDS | METH_CLASS,
	  "listen(context, region, nslots, slot_size, offset=0) -> Stream\n\n"
	  "Consumer: offer nslots slots of slot_size bytes at offset of region\n"
	  "(registered by context, which then serves this stream only)." },
	{ "connect", (PyCFunction)(void (*)(void))Stream_connect,
	  METH_VARARGS | METH_KEYWORDS | METH_CLASS,
	  "connect(context, token, *, timeout=None) -> Stream\n\n"
	  "Producer: connect with a consumer's token() and wait up to timeout\n"
	  "seconds (None: no limit) for its accept().  timeout_ms= (an int,\n"
	  "-1: no limit) is the deprecated spelling." },
	{ "token", (PyCFunction)Stream_token, METH_NOARGS,
	  "token() -> bytes: the consumer's stream token for the producer." },
	{ "accept", (PyCFunction)(void (*)(void))Stream_accept,
	  METH_VARARGS | METH_KEYWORDS,
	  "accept(*, timeout=None): wait up to timeout seconds (None: no\n"
	  "limit, 0: only look) for a producer.  timeout_ms= is deprecated." },
	{ "recv", (PyCFunction)(void (*)(void))Stream_recv,
	  METH_VARARGS | METH_KEYWORDS,
	  "recv(*, timeout=None) -> (slot, offset, length), or None at the end\n\n"
	  "The next message: its bytes are region[offset:offset + length]\n"
	  "until release(slot).  None once the producer closed and every\n"
	  "message was received.  Waits up to timeout seconds (None: no\n"
	  "limit, 0: only look; XferError ETIME or EAGAIN).  timeout_ms= is\n"
	  "deprecated." },
	{ "release", (PyCFunction)Stream_release, METH_O,
	  "release(slot): give a received slot back to the producer." },
	{ "send", (PyCFunction)(void (*)(void))Stream_send,
	  METH_VARARGS | METH_KEYWORDS,
	  "send(region, length=None, offset=0, *, timeout=None)\n\n"
	  "Producer: send region[offset:offset + length] (None: to its end)\n"
	  "as the next message; waits up to timeout seconds for a free slot\n"
	  "(None: no limit, 0: XferError EAGAIN at once), then for the write:\n"
	  "on return the bytes are in the consumer's slot.  timeout_ms= is\n"
	  "deprecated." },
	{ "credits", (PyCFunction)Stream_credits, METH_NOARGS,
	  "credits() -> int: messages that may be sent without waiting." },
	{ "close", (PyCFunction)Stream_close, METH_NOARGS,
	  "close(): tell the other end and free the stream." },
	{ "__enter__", Stream_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)Stream_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef Stream_getset[] = {
	{ "nslots", (getter)Stream_get, NULL, "Slots of the stream.", (void *)0 },
	{ "slot_size", (getter)Stream_get, NULL, "Bytes of a slot.", (void *)1 },
	{ "closed", (getter)Stream_get, NULL, "close() was called.", (void *)2 },
	{ "peer", (getter)Stream_get, NULL,
	  "The other end as a Sender (the only one whose notifications the\n"
	  "stream takes), None before accept().", (void *)3 },
	{ "dropped", (getter)Stream_get, NULL,
	  "Notifications of anyone else, dropped.", (void *)4 },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PyTypeObject Stream_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "xferd._core.Stream",
	.tp_basicsize = sizeof(StreamObject),
	.tp_dealloc = (destructor)Stream_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "A stream of messages through slots in the consumer's memory\n"
		  "(Stream.listen / Stream.connect); see libxfer's xfer_stream_*.",
	.tp_methods = Stream_methods,
	.tp_getset = Stream_getset,
};

int stream_module_add(PyObject *m)
{
	if (PyType_Ready(&Stream_Type))
		return -1;
	return PyModule_AddObjectRef(m, "Stream", (PyObject *)&Stream_Type) ||
	       PyModule_AddIntConstant(m, "STREAM_TOKEN_MAX",
				       XFER_STREAM_TOKEN_MAX);
}
