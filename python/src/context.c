/* SPDX-License-Identifier: Apache-2.0 */
/*
 * context.c - Context, one libxfer context: its life (open, close,
 * dealloc), memory, tokens and names (control round trips), its
 * notifications and event descriptor, and its method table; the methods
 * that submit are submit.c's, the completion slots completion.c's.
 *
 * Threads: Python's, with the GIL; a control round trip holds mu with
 * the GIL released (core.h: the lock order).
 */
#include "core.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* --- Context: life --- */

static int Context_init(ContextObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "socket", "spin_us", "name",
				  "traffic_class", NULL };
	PyObject *sock = Py_None, *bytes = NULL, *o_cls = Py_None;
	unsigned cls;
	unsigned spin = 20;
	const char *path = NULL, *name = NULL;
	struct xfer_ctx *x = NULL;
	int err;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OIz$O:Context", kwlist,
					 &sock, &spin, &name, &o_cls) ||
	    arg_class(o_cls, "Context", &cls))
		return -1;
	if (name) {
		size_t nl = strlen(name);
		bool ok = nl <= XFER_SENDER_NAME_MAX;
		for (size_t i = 0; ok && i < nl; i++)
			ok = (unsigned char)name[i] >= 0x20 &&
			     (unsigned char)name[i] <= 0x7e;
		if (!ok) {
			PyErr_Format(PyExc_ValueError, "Context: name: at most "
				     "%u characters of printable ASCII (' ' to "
				     "'~')", XFER_SENDER_NAME_MAX);
			return -1;
		}
	}
	if (c->ctx || c->closed) {
		PyErr_SetString(PyExc_RuntimeError, "Context already initialised");
		return -1;
	}
	if (sock != Py_None) {
		if (!PyUnicode_FSConverter(sock, &bytes))
			return -1;
		path = PyBytes_AS_STRING(bytes);
		/* sun_path's 108 bytes with the NUL: libxfer would cut it. */
		if (PyBytes_GET_SIZE(bytes) > 107) {
			PyErr_Format(PyExc_ValueError,
				     "Context: socket path of %zd bytes; a Unix "
				     "socket path has at most 107: use a shorter "
				     "one (a symlink to the directory works)",
				     PyBytes_GET_SIZE(bytes));
			Py_DECREF(bytes);
			return -1;
		}
	}
	Py_BEGIN_ALLOW_THREADS
	err = xfer_open_class(path, name, cls, &x);
	Py_END_ALLOW_THREADS
	if (err) {
		raise_open(err, path);
		Py_XDECREF(bytes);
		return -1;
	}
	Py_XDECREF(bytes);
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

/* The host Region of c whose memory obj views (a transfer's local). */
static PyObject *Context_region_of(ContextObject *c, PyObject *obj)
{
	struct local_view v;

	if (PyObject_TypeCheck(obj, &Region_Type)) {
		Py_INCREF(obj);
		return obj;
	}
	int rc = region_view_of(c, obj, &v);
	if (rc < 0)
		return NULL;
	if (rc > 0)
		Py_RETURN_NONE;
	Py_INCREF(v.r);
	return (PyObject *)v.r;
}

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

RegionObject *as_region(PyObject *o, const char *what)
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
		res = raise_xfer_fmt(-EINVAL, "import_token: a token of %zd "
				     "bytes; tokens are 1 to %d bytes, as "
				     "Region.export() or lookup() gave them",
				     b.len, XFER_TOKEN_MAX);
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
		return raise_name(err, "publish", name, false);
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
		return raise_name(err, "unpublish", name, false);
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
		return raise_name(err, "lookup", name, true);
	return PyBytes_FromStringAndSize((const char *)tok, (Py_ssize_t)len);
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
		PyObject *msg = PyBytes_FromStringAndSize(
			(const char *)got[i].msg, got[i].msg_len);
		PyObject *sname = PyUnicode_DecodeASCII(got[i].name,
							got[i].name_len,
							"replace");
		if (!msg || !sname) {
			Py_XDECREF(msg);
			Py_XDECREF(sname);
			Py_DECREF(nt);
			Py_CLEAR(list);
			break;
		}
		PyStructSequence_SET_ITEM(nt, 5, msg);
		PyStructSequence_SET_ITEM(nt, 6, sname);
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
	{ "region_of", (PyCFunction)Context_region_of, METH_O,
	  "region_of(obj) -> Region or None\n\n"
	  "The alloc_host Region of this context whose memory obj (a numpy\n"
	  "array, memoryview or torch tensor of alloc_pinned,\n"
	  "alloc_pinned_array or Region.numpy) views, or None: its\n"
	  "export(), cuda_pinned, handle.  obj as a transfer's local is the\n"
	  "same region at the view's offset." },
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
	  "'~uid/name', and other nodes see it.  Names: 1 to 200 bytes of\n"
	  "A-Z a-z 0-9 and . _ : @ + - (XferError EINVAL says which\n"
	  "character is not)." },
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
	  "      notify=None, *, timeout=None, traffic_class=None) -> Request\n\n"
	  "local[local_off:+length] -> remote[remote_off:].  length None: as\n"
	  "much as fits in both.  notify: delivered to the remote owner after\n"
	  "the data landed: a 64-bit value, a message (bytes, or str sent as\n"
	  "UTF-8; NOTIFY_MSG_MAX bytes at most, else ValueError) with value 0,\n"
	  "or a (value, message) pair.  timeout: seconds xferd gives\n"
	  "the transfer (rounded up to ms; None or 0: its op_timeout_ms);\n"
	  "timeout_ms= (milliseconds) is the deprecated spelling.\n"
	  "traffic_class: 'latency' (small and waited for: ahead of bulk on\n"
	  "a shared link; past xferd's latency_max_bytes it goes as bulk),\n"
	  "'bulk', or None: the Context's." },
	{ "read", (PyCFunction)(void (*)(void))Context_read,
	  METH_VARARGS | METH_KEYWORDS,
	  "read(local, remote, local_off=0, remote_off=0, length=None,\n"
	  "     notify=None, *, timeout=None, traffic_class=None) -> Request\n\n"
	  "remote[remote_off:+length] -> local[local_off:]; as write()." },
	{ "dlist", (PyCFunction)(void (*)(void))Context_dlist,
	  METH_VARARGS | METH_KEYWORDS,
	  "dlist(target, offsets, lengths) -> DList\n\n"
	  "A prepared descriptor list: entry i is target[offsets[i]:+lengths[i]]\n"
	  "(lengths: one int for every entry, or an array), target a Region of\n"
	  "this context or a Remote.  xferd checks every entry once and keeps\n"
	  "the list until DList.close(), until its target goes, or the context\n"
	  "closes.  Offsets and lengths: arrays of any integer dtype (int8 to\n"
	  "uint64, any strides) or sequences of ints; a negative or too large\n"
	  "value raises ValueError naming the argument and the entry." },
	{ "write_dlist", (PyCFunction)(void (*)(void))Context_write_dlist,
	  METH_VARARGS | METH_KEYWORDS,
	  "write_dlist(local, remote, local_idx=None, remote_idx=None,\n"
	  "            notify=None, *, timeout=None) -> Request\n\n"
	  "Entry local_idx[k] of DList local -> entry remote_idx[k] of DList\n"
	  "remote, for every k, as ONE descriptor (one completion with the sum\n"
	  "of the bytes).  remote_idx None: the same as local_idx; both None:\n"
	  "0..n-1 over the shorter list.  Entries paired must have the same\n"
	  "length; xferd checks every pair before any byte moves.  Indices:\n"
	  "arrays of any integer dtype (uint32 as the ring holds them, int64,\n"
	  "views) or sequences of ints; one past its list raises\n"
	  "IndexRangeError (a ValueError and an IndexError) naming it.\n"
	  "notify: delivered to the remote owner after the last byte (a\n"
	  "value, a message or a (value, message) pair, as write()).\n"
	  "timeout: seconds, as write()." },
	{ "read_dlist", (PyCFunction)(void (*)(void))Context_read_dlist,
	  METH_VARARGS | METH_KEYWORDS,
	  "read_dlist(local, remote, local_idx=None, remote_idx=None,\n"
	  "           notify=None, *, timeout=None) -> Request\n\n"
	  "write_dlist the other way: remote entries -> local entries." },
	{ "write_vec", (PyCFunction)(void (*)(void))Context_write_vec,
	  METH_VARARGS | METH_KEYWORDS,
	  "write_vec(local, local_offs, remote, remote_offs, lengths,\n"
	  "          notify=None, *, timeout=None) -> Request\n\n"
	  "Many writes as one linked batch (one completion: the sum of the\n"
	  "bytes, or the first error).  Offsets: arrays of any integer dtype\n"
	  "(any strides) or sequences of ints; lengths also one int for all.\n"
	  "timeout: seconds each entry may take, as write()." },
	{ "read_vec", (PyCFunction)(void (*)(void))Context_read_vec,
	  METH_VARARGS | METH_KEYWORDS,
	  "read_vec(local, local_offs, remote, remote_offs, lengths,\n"
	  "         notify=None, *, timeout=None) -> Request" },
	{ "notify", (PyCFunction)(void (*)(void))Context_notify,
	  METH_VARARGS | METH_KEYWORDS,
	  "notify(remote, value) -> Request\n\n"
	  "Deliver value to the owner of remote's region, moving no data:\n"
	  "an int, a message (bytes, or str sent as UTF-8; NOTIFY_MSG_MAX\n"
	  "bytes at most) or a (value, message) pair." },
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
	.tp_doc = "Context(socket=None, spin_us=20, name=None)\n\n"
		  "A connection to the local xferd ($XFERD_SOCKET or the default\n"
		  "socket when None) with its submission/completion ring.  name:\n"
		  "what it calls itself as a sender of notifications (up to\n"
		  "SENDER_NAME_MAX printable ASCII characters; informational:\n"
		  "Notification.sender tells who sent one).",
	.tp_traverse = (traverseproc)Context_traverse,
	.tp_weaklistoffset = offsetof(ContextObject, weakreflist),
	.tp_methods = Context_methods,
	.tp_getset = Context_getset,
	.tp_init = (initproc)Context_init,
	.tp_new = Context_new,
};
