/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core.c - xferd._core: the module (its functions, types and constants,
 * PyInit__core), XferError and the helpers every file of it uses
 * (raise_xfer, ctx_lock, sender_object); the argument conversions are
 * args.c's.
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
 * blocking waiter reaped meanwhile.  The files, their threads and the
 * lock order: core.h.
 */
#include "core.h"

PyObject *XferError;
PyObject *await_helper; /* set by xferd/__init__.py */
PyTypeObject *Notification_Type;
static PyTypeObject *Sender_Type;

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
		PyErr_SetString(PyExc_ValueError,
				"the Context is closed: open a new one");
		return -1;
	}
	return 0;
}

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
	{ "message", "the bytes the sender sent with it (b'' for none; "
		     "XFER_NOTIFY_MSG_MAX, 256, at most)" },
	{ "sender_name", "what the sender calls itself (Context(name=); "
			 "'' for none): informational, sender tells who" },
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
	/* Both, so that `except IndexError` (what an index past a list
	 * raised before) and `except ValueError` (every other bad value of
	 * an array) catch it. */
	PyObject *bases = PyTuple_Pack(2, PyExc_ValueError, PyExc_IndexError);
	IndexRangeError = bases ? PyErr_NewExceptionWithDoc(
		"xferd.IndexRangeError",
		"An index past the end of its DList (a ValueError and an\n"
		"IndexError): the message names the argument and the entry.",
		bases, NULL) : NULL;
	Py_XDECREF(bases);
	Notification_Type = PyStructSequence_NewType(&note_desc);
	Sender_Type = PyStructSequence_NewType(&sender_desc);
	if (!XferError || !IndexRangeError || !Notification_Type ||
	    !Sender_Type ||
	    PyModule_AddObjectRef(m, "IndexRangeError", IndexRangeError) ||
	    PyModule_AddObjectRef(m, "Sender", (PyObject *)Sender_Type) ||
	    PyModule_AddObjectRef(m, "XferError", XferError) ||
	    PyModule_AddObjectRef(m, "Notification", (PyObject *)Notification_Type) ||
	    PyModule_AddObjectRef(m, "Context", (PyObject *)&Context_Type) ||
	    PyModule_AddObjectRef(m, "Region", (PyObject *)&Region_Type) ||
	    PyModule_AddObjectRef(m, "Remote", (PyObject *)&Remote_Type) ||
	    PyModule_AddObjectRef(m, "Request", (PyObject *)&Request_Type) ||
	    PyModule_AddObjectRef(m, "DList", (PyObject *)&DList_Type) ||
	    PyModule_AddIntConstant(m, "TOKEN_MAX", XFER_TOKEN_MAX) ||
	    PyModule_AddIntConstant(m, "NOTIFY_MSG_MAX", XFER_NOTIFY_MSG_MAX) ||
	    PyModule_AddIntConstant(m, "SENDER_NAME_MAX", XFER_SENDER_NAME_MAX) ||
	    stream_module_add(m)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
