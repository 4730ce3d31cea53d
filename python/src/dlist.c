/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlist.c - DList: a prepared descriptor list (xfer_dlist_create), the
 * blocks of one Region or Remote described once so that
 * Context.write_dlist/read_dlist move thousands of them by index as one
 * descriptor (the submission itself is in submit.c with the others).
 *
 * A DList holds its context and its target (the Region or Remote it
 * ranges over) and goes before them: Context.close() destroys every list
 * first.  xferd drops a list by itself when its region or import goes;
 * using it then fails in xferd (EACCES, ESTALE), and close() still frees
 * it here.
 */
#include "core.h"

#include <stdio.h>

void dlist_release(DListObject *d)
{
	ContextObject *c = d->ctx;
	struct xfer_dlist *dl = d->dl;

	if (!dl)
		return;
	d->dl = NULL;
	link_del(&d->link);
	if (c->ctx) {
		ctx_lock(c);
		Py_BEGIN_ALLOW_THREADS
		/* Freed whatever xferd says (EACCES: gone with its target). */
		xfer_dlist_destroy(c->ctx, dl);
		Py_END_ALLOW_THREADS
		ctx_unlock(c);
	}
}

PyObject *dlist_create(ContextObject *c, PyObject *target, uint64_t handle,
		       bool readonly, uint32_t n, const uint64_t *offsets,
		       const uint64_t *lengths, uint64_t length)
{
	struct xfer_dlist *dl = NULL;
	int err;

	if (ctx_check_open(c))
		return NULL;
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_dlist_create(c->ctx, handle, n, offsets, lengths, length,
				&dl);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	if (err)
		return raise_xfer(err, "dlist");
	DListObject *d = PyObject_GC_New(DListObject, &DList_Type);
	if (!d) {
		ctx_lock(c);
		xfer_dlist_destroy(c->ctx, dl);
		ctx_unlock(c);
		return NULL;
	}
	Py_INCREF(c);
	Py_INCREF(target);
	d->ctx = c;
	d->target = target;
	d->dl = dl;
	d->handle = xfer_dlist_handle(dl);
	d->count = n;
	d->readonly = readonly;
	link_add(&c->dlists, &d->link);
	PyObject_GC_Track(d);
	return (PyObject *)d;
}

static void DList_dealloc(DListObject *d)
{
	PyObject_GC_UnTrack(d);
	dlist_release(d);
	Py_CLEAR(d->target);
	Py_CLEAR(d->ctx);
	PyObject_GC_Del(d);
}

static int DList_traverse(DListObject *d, visitproc visit, void *arg)
{
	Py_VISIT(d->ctx);
	Py_VISIT(d->target);
	return 0;
}

static PyObject *DList_close(DListObject *d, PyObject *unused)
{
	(void)unused;
	dlist_release(d);
	Py_RETURN_NONE;
}

static PyObject *DList_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	Py_INCREF(self);
	return self;
}

static PyObject *DList_exit(DListObject *d, PyObject *args)
{
	(void)args;
	return DList_close(d, NULL);
}

static PyObject *DList_get(DListObject *d, void *which)
{
	switch ((intptr_t)which) {
	case 0: return PyLong_FromUnsignedLong(d->count);
	case 1: return PyLong_FromUnsignedLongLong(d->handle);
	case 2: Py_INCREF(d->target); return d->target;
	default: return PyBool_FromLong(d->dl == NULL);
	}
}

static Py_ssize_t DList_len(DListObject *d)
{
	return (Py_ssize_t)d->count;
}

static PyObject *DList_repr(DListObject *d)
{
	char buf[96];

	/* PyUnicode_FromFormat has no %llx. */
	snprintf(buf, sizeof(buf), "<xferd.DList %u entries handle=%#llx%s>",
		 (unsigned)d->count, (unsigned long long)d->handle,
		 d->dl ? "" : " closed");
	return PyUnicode_FromString(buf);
}

static PyMethodDef DList_methods[] = {
	{ "close", (PyCFunction)DList_close, METH_NOARGS,
	  "Destroy the list at xferd (xfer_dlist_destroy); transfers using\n"
	  "it go on." },
	{ "__enter__", DList_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)DList_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef DList_getset[] = {
	{ "count", (getter)DList_get, NULL, "Entries of the list.", (void *)0 },
	{ "handle", (getter)DList_get, NULL, "xferd's handle of the list.",
	  (void *)1 },
	{ "target", (getter)DList_get, NULL,
	  "The Region or Remote the entries lie in.", (void *)2 },
	{ "closed", (getter)DList_get, NULL, "Destroyed.", (void *)3 },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PySequenceMethods DList_seq = {
	.sq_length = (lenfunc)DList_len,
};

PyTypeObject DList_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "xferd.DList",
	.tp_basicsize = sizeof(DListObject),
	.tp_dealloc = (destructor)DList_dealloc,
	.tp_repr = (reprfunc)DList_repr,
	.tp_as_sequence = &DList_seq,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "A prepared descriptor list (Context.dlist): blocks of one\n"
		  "Region or Remote, checked once by xferd, moved by index with\n"
		  "Context.write_dlist and read_dlist.",
	.tp_traverse = (traverseproc)DList_traverse,
	.tp_methods = DList_methods,
	.tp_getset = DList_getset,
};
