/* SPDX-License-Identifier: Apache-2.0 */
/*
 * region.c - Region and Remote: what a Context registered and imported.
 *
 * A Region owns its registration and holds what it registered: the
 * memory of xfer_alloc_host(), or a reference to the Python object whose
 * memory it is (a Py_buffer for the buffer protocol, the object itself
 * for CUDA array interfaces and data_ptr(), the DLManagedTensor for
 * DLPack).  Releasing always deregisters first and lets go of the memory
 * after, so xferd never moves bytes into memory Python has freed.
 *
 * Host memory from alloc_host hands out buffers (numpy views, memoryviews);
 * while one exists the memory stays mapped: Region.close() refuses, and
 * Context.close() leaves such a region (and the connection under it)
 * until its last view goes.
 *
 * Past 800 lines: the two types share the release order above (a
 * registration goes before the memory it names), which every way in
 * (alloc_host, the buffer protocol, CUDA array interface, DLPack) must
 * keep; split, each file would hold half of one rule.
 */
#include "core.h"

#include <errno.h>
#include <string.h>

void link_add(struct obj_link *head, struct obj_link *l)
{
	l->next = head->next;
	l->prev = head;
	head->next->prev = l;
	head->next = l;
}

void link_del(struct obj_link *l)
{
	if (!l->next)
		return;
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->next = l->prev = NULL;
}

/* --- DLPack (the ABI every producer shares; no header needed) --- */

typedef struct {
	int32_t device_type;
	int32_t device_id;
} DLDevice;

typedef struct {
	uint8_t code;
	uint8_t bits;
	uint16_t lanes;
} DLDataType;

typedef struct {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides;
	uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3 };

/* --- releasing --- */

static void region_drop_memory(RegionObject *r)
{
	if (r->kind == REGION_BUFFER && r->view.obj)
		PyBuffer_Release(&r->view);
	if (r->dlpack) {
		DLManagedTensor *m = r->dlpack;
		r->dlpack = NULL;
		if (m->deleter)
			m->deleter(m);
	}
	Py_CLEAR(r->owner);
}

void region_release(RegionObject *r)
{
	ContextObject *c = r->ctx;
	struct xfer_mem *mem = r->mem;

	if (!mem)
		return;
	r->mem = NULL;
	link_del(&r->link);
	if (c->ctx) {
		ctx_lock(c);
		Py_BEGIN_ALLOW_THREADS
		/* Deregister before the memory goes: xferd never touches it
		 * after the reply.  An error (xferd gone) changes nothing. */
		if (r->kind == REGION_HOST)
			xfer_free_host(c->ctx, mem);
		else
			xfer_dereg(c->ctx, mem);
		Py_END_ALLOW_THREADS
		ctx_unlock(c);
	}
	region_drop_memory(r);
	if (r->deferred) {
		r->deferred = false;
		c->deferred--;
		ctx_finish_close(c);
	}
}

void remote_release(RemoteObject *r)
{
	ContextObject *c = r->ctx;
	struct xfer_remote *rem = r->rem;

	if (!rem)
		return;
	r->rem = NULL;
	link_del(&r->link);
	if (c->ctx) {
		ctx_lock(c);
		Py_BEGIN_ALLOW_THREADS
		xfer_unimport(c->ctx, rem);
		Py_END_ALLOW_THREADS
		ctx_unlock(c);
	}
}

void ctx_release_all(ContextObject *c)
{
	/* Lists first: they range over the regions and remotes. */
	while (c->dlists.next != &c->dlists)
		dlist_release(CONTAINER_OF(c->dlists.next, DListObject, link));
	while (c->remotes.next != &c->remotes)
		remote_release(CONTAINER_OF(c->remotes.next, RemoteObject,
					    link));
	struct obj_link *l = c->regions.next;
	while (l != &c->regions) {
		RegionObject *r = CONTAINER_OF(l, RegionObject, link);
		l = l->next;
		if (r->exports > 0 && r->kind == REGION_HOST) {
			/* Views of it exist: the mapping (and the connection
			 * that must free it) lives until they are gone. */
			if (!r->deferred) {
				r->deferred = true;
				c->deferred++;
			}
			continue;
		}
		region_release(r);
	}
}

void ctx_finish_close(ContextObject *c)
{
	if (!c->closed || c->deferred || !c->ctx)
		return;
	struct xfer_ctx *x = c->ctx;
	c->ctx = NULL;
	ctx_lock(c);
	xfer_close(x);
	ctx_unlock(c);
}

/* --- Region --- */

static RegionObject *region_new(ContextObject *c, enum region_kind kind)
{
	RegionObject *r = PyObject_GC_New(RegionObject, &Region_Type);

	if (!r)
		return NULL;
	r->link.next = r->link.prev = NULL;
	Py_INCREF(c);
	r->ctx = c;
	r->mem = NULL;
	r->kind = kind;
	r->readonly = r->device = r->deferred = r->cuda_pinned = false;
	r->ptr = NULL;
	r->len = 0;
	r->handle = 0;
	memset(&r->view, 0, sizeof(r->view));
	r->owner = NULL;
	r->dlpack = NULL;
	r->exports = 0;
	r->weakreflist = NULL;
	PyObject_GC_Track(r);
	return r;
}

/* Register [ptr, ptr + len) on r's context; on failure r is dropped. */
static PyObject *region_finish(RegionObject *r, void *ptr, size_t len)
{
	ContextObject *c = r->ctx;
	struct xfer_mem *mem = NULL;
	int err;

	if (ctx_check_open(c)) {
		Py_DECREF(r);
		return NULL;
	}
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_reg(c->ctx, ptr, len, &mem);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	if (err) {
		Py_DECREF(r);
		return raise_xfer(err, "register");
	}
	r->mem = mem;
	r->ptr = ptr;
	r->len = len;
	r->handle = xfer_mem_handle(mem);
	link_add(&c->regions, &r->link);
	return (PyObject *)r;
}

PyObject *region_alloc_host(ContextObject *c, size_t len)
{
	struct xfer_mem *mem = NULL;
	RegionObject *r;
	int err;

	if (len == 0) {
		PyErr_SetString(PyExc_ValueError, "alloc_host: size must be > 0");
		return NULL;
	}
	r = region_new(c, REGION_HOST);
	if (!r)
		return NULL;
	if (ctx_check_open(c)) {
		Py_DECREF(r);
		return NULL;
	}
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_alloc_host(c->ctx, len, &mem);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	if (err) {
		Py_DECREF(r);
		return raise_xfer(err, "alloc_host");
	}
	r->mem = mem;
	r->ptr = xfer_mem_ptr(mem);
	r->len = len;
	r->handle = xfer_mem_handle(mem);
	link_add(&c->regions, &r->link);
	return (PyObject *)r;
}

/* Bytes of a C-contiguous array of shape (a tuple) and itemsize, with
 * strides (None or a tuple) checked to be the compact ones. */
static int array_bytes(PyObject *shape, PyObject *strides, Py_ssize_t item,
		       size_t *out)
{
	Py_ssize_t nd;
	size_t n = (size_t)item;

	if (!PyTuple_Check(shape)) {
		PyErr_SetString(PyExc_TypeError, "array interface: shape is not a tuple");
		return -1;
	}
	nd = PyTuple_GET_SIZE(shape);
	if (strides != NULL && strides != Py_None &&
	    (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != nd)) {
		PyErr_SetString(PyExc_TypeError, "array interface: bad strides");
		return -1;
	}
	for (Py_ssize_t i = nd - 1; i >= 0; i--) {
		Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
		if (d < 0) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError,
						"array interface: negative dimension");
			return -1;
		}
		if (strides != NULL && strides != Py_None && d > 1) {
			Py_ssize_t s = PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, i));
			if (s == -1 && PyErr_Occurred())
				return -1;
			if ((size_t)s != n) {
				PyErr_SetString(PyExc_ValueError,
						"register: the array is not contiguous");
				return -1;
			}
		}
		if (d && n > SIZE_MAX / (size_t)d) {
			PyErr_SetString(PyExc_OverflowError, "array too large");
			return -1;
		}
		n *= (size_t)d;
	}
	*out = n;
	return 0;
}

/* __cuda_array_interface__ (version 2 and later). */
static int from_cuda_interface(PyObject *cai, void **ptr, size_t *len,
			       bool *readonly)
{
	PyObject *data, *shape, *typestr, *strides;
	Py_ssize_t item;

	if (!PyDict_Check(cai)) {
		PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ is not a dict");
		return -1;
	}
	data = PyDict_GetItemString(cai, "data");
	shape = PyDict_GetItemString(cai, "shape");
	typestr = PyDict_GetItemString(cai, "typestr");
	strides = PyDict_GetItemString(cai, "strides");
	if (!data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2 ||
	    !shape || !typestr || !PyUnicode_Check(typestr)) {
		PyErr_SetString(PyExc_TypeError,
				"__cuda_array_interface__ lacks data, shape or typestr");
		return -1;
	}
	const char *ts = PyUnicode_AsUTF8(typestr);
	if (!ts || strlen(ts) < 3 || (item = atol(ts + 2)) <= 0) {
		PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__: bad typestr");
		return -1;
	}
	if (array_bytes(shape, strides, item, len))
		return -1;
	*ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data, 0));
	if (PyErr_Occurred())
		return -1;
	*readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1)) == 1;
	return 0;
}

/* torch-style: data_ptr(), nbytes (or numel() * element_size()). */
static int from_data_ptr(PyObject *obj, void **ptr, size_t *len)
{
	PyObject *v;

	v = PyObject_CallMethod(obj, "is_contiguous", NULL);
	if (v) {
		int ok = PyObject_IsTrue(v);
		Py_DECREF(v);
		if (ok == 0) {
			PyErr_SetString(PyExc_ValueError,
					"register: the tensor is not contiguous");
			return -1;
		}
	} else {
		PyErr_Clear();
	}
	v = PyObject_CallMethod(obj, "data_ptr", NULL);
	if (!v)
		return -1;
	*ptr = PyLong_AsVoidPtr(v);
	Py_DECREF(v);
	if (PyErr_Occurred())
		return -1;
	v = PyObject_GetAttrString(obj, "nbytes");
	if (!v) {
		PyErr_Clear();
		PyObject *n = PyObject_CallMethod(obj, "numel", NULL);
		PyObject *e = n ? PyObject_CallMethod(obj, "element_size", NULL)
				: NULL;
		v = e ? PyNumber_Multiply(n, e) : NULL;
		Py_XDECREF(n);
		Py_XDECREF(e);
		if (!v)
			return -1;
	}
	*len = PyLong_AsSize_t(v);
	Py_DECREF(v);
	return PyErr_Occurred() ? -1 : 0;
}

int region_view_of(ContextObject *c, PyObject *o, struct local_view *v)
{
	void *ptr;
	size_t len;
	bool ro = false;

	if (PyObject_CheckBuffer(o)) {
		Py_buffer b;
		if (PyObject_GetBuffer(o, &b, PyBUF_ANY_CONTIGUOUS)) {
			PyErr_Clear();
			return 1;  /* strided: no one range of a region */
		}
		ptr = b.buf;
		len = (size_t)b.len;
		ro = b.readonly != 0;
		/* The caller keeps o, and so the memory, alive. */
		PyBuffer_Release(&b);
	} else if (PyObject_HasAttrString(o, "data_ptr")) {
		if (from_data_ptr(o, &ptr, &len))
			return -1;
	} else {
		return 1;
	}
	for (struct obj_link *l = c->regions.next; l != &c->regions;
	     l = l->next) {
		RegionObject *r = CONTAINER_OF(l, RegionObject, link);
		uintptr_t lo = (uintptr_t)r->ptr, p = (uintptr_t)ptr;
		if (r->kind != REGION_HOST || !r->mem || p < lo ||
		    len > r->len || p - lo > r->len - len)
			continue;
		v->r = r;
		v->base = p - lo;
		v->len = len;
		v->readonly = ro || r->readonly;
		return 0;
	}
	return 1;
}

/* DLPack: take the capsule (renamed "used_dltensor", as consumers do);
 * the tensor is given back by its deleter when the region goes. */
static int from_dlpack(PyObject *obj, RegionObject *r, void **ptr,
		       size_t *len)
{
	PyObject *cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
	DLManagedTensor *m;
	size_t n;

	if (!cap)
		return -1;
	m = PyCapsule_GetPointer(cap, "dltensor");
	if (!m) {
		Py_DECREF(cap);
		return -1;
	}
	PyCapsule_SetName(cap, "used_dltensor");
	Py_DECREF(cap);
	r->dlpack = m;
	const DLTensor *t = &m->dl_tensor;
	if (t->device.device_type != DL_CPU &&
	    t->device.device_type != DL_CUDA &&
	    t->device.device_type != DL_CUDA_HOST) {
		PyErr_Format(PyExc_ValueError,
			     "register: DLPack device type %d is neither CPU nor CUDA",
			     (int)t->device.device_type);
		return -1;
	}
	n = ((size_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
	for (int32_t i = t->ndim - 1; i >= 0; i--) {
		if (t->shape[i] < 0) {
			PyErr_SetString(PyExc_ValueError, "DLPack: negative dimension");
			return -1;
		}
		if (t->strides && t->shape[i] > 1) {
			/* Strides count elements; compact means each is the
			 * product of the dimensions after it. */
			size_t el = n / (((size_t)t->dtype.bits * t->dtype.lanes + 7) / 8);
			if ((size_t)t->strides[i] != el) {
				PyErr_SetString(PyExc_ValueError,
						"register: the tensor is not contiguous");
				return -1;
			}
		}
		n *= (size_t)t->shape[i];
	}
	*ptr = (char *)t->data + t->byte_offset;
	*len = n;
	r->device = t->device.device_type == DL_CUDA;
	return 0;
}

PyObject *region_register(ContextObject *c, PyObject *obj)
{
	RegionObject *r;
	void *ptr = NULL;
	size_t len = 0;
	PyObject *cai;

	if (PyObject_TypeCheck(obj, &Region_Type) ||
	    PyObject_TypeCheck(obj, &Remote_Type)) {
		PyErr_SetString(PyExc_TypeError,
				"register: that is already a Region/Remote");
		return NULL;
	}
	if (PyUnicode_Check(obj)) {
		PyErr_SetString(PyExc_TypeError,
				"register: str has no fixed bytes; pass bytes or a buffer");
		return NULL;
	}
	if (PyObject_CheckBuffer(obj)) {
		r = region_new(c, REGION_BUFFER);
		if (!r)
			return NULL;
		if (PyObject_GetBuffer(obj, &r->view,
				       PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS)) {
			/* Read-only memory is a fine source, never a target. */
			PyErr_Clear();
			if (PyObject_GetBuffer(obj, &r->view, PyBUF_ANY_CONTIGUOUS)) {
				Py_DECREF(r);
				if (PyErr_ExceptionMatches(PyExc_BufferError)) {
					PyErr_Clear();
					PyErr_SetString(PyExc_ValueError,
							"register: the buffer is not contiguous");
				}
				return NULL;
			}
			r->readonly = true;
		}
		if (r->view.len <= 0) {
			Py_DECREF(r);
			PyErr_SetString(PyExc_ValueError, "register: empty buffer");
			return NULL;
		}
		return region_finish(r, r->view.buf, (size_t)r->view.len);
	}
	r = region_new(c, REGION_POINTER);
	if (!r)
		return NULL;
	Py_INCREF(obj);
	r->owner = obj;
	cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
	if (cai) {
		int rc = from_cuda_interface(cai, &ptr, &len, &r->readonly);
		Py_DECREF(cai);
		r->device = true;
		if (rc)
			goto fail;
	} else if (PyErr_Clear(), PyObject_HasAttrString(obj, "data_ptr")) {
		if (from_data_ptr(obj, &ptr, &len))
			goto fail;
		PyObject *is_cuda = PyObject_GetAttrString(obj, "is_cuda");
		if (is_cuda) {
			r->device = PyObject_IsTrue(is_cuda) == 1;
			Py_DECREF(is_cuda);
		}
		PyErr_Clear();
	} else if (PyObject_HasAttrString(obj, "__dlpack__")) {
		if (from_dlpack(obj, r, &ptr, &len))
			goto fail;
	} else {
		PyErr_Format(PyExc_TypeError,
			     "register: %.100s has no buffer protocol, "
			     "__cuda_array_interface__, data_ptr() or __dlpack__",
			     Py_TYPE(obj)->tp_name);
		goto fail;
	}
	if (!ptr || len == 0) {
		PyErr_SetString(PyExc_ValueError, "register: empty or NULL memory");
		goto fail;
	}
	return region_finish(r, ptr, len);
fail:
	Py_DECREF(r);
	return NULL;
}

static void Region_dealloc(RegionObject *r)
{
	PyObject_GC_UnTrack(r);
	if (r->weakreflist)
		PyObject_ClearWeakRefs((PyObject *)r);
	region_release(r);
	region_drop_memory(r);
	Py_CLEAR(r->ctx);
	PyObject_GC_Del(r);
}

static int Region_traverse(RegionObject *r, visitproc visit, void *arg)
{
	Py_VISIT(r->ctx);
	Py_VISIT(r->owner);
	Py_VISIT(r->view.obj);
	return 0;
}

static PyObject *Region_close(RegionObject *r, PyObject *unused)
{
	(void)unused;
	if (r->exports > 0) {
		PyErr_Format(PyExc_BufferError,
			     "Region.close: %zd buffer view(s) of it still exist",
			     r->exports);
		return NULL;
	}
	region_release(r);
	Py_RETURN_NONE;
}

static PyObject *Region_cuda_register(RegionObject *r, PyObject *unused)
{
	ContextObject *c = r->ctx;
	int err;

	(void)unused;
	if (r->kind != REGION_HOST || !r->mem) {
		PyErr_SetString(PyExc_ValueError,
				r->mem ? "cuda_register: only alloc_host memory "
					 "(register pinned memory of your own "
					 "with ctx.register)"
				       : "cuda_register: the region is closed");
		return NULL;
	}
	/* The region's mem is touched under mu, as every libxfer call on
	 * it; the pinning itself may take milliseconds. */
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_mem_cuda_register(r->mem);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	if (err)
		return raise_xfer(err, err == -ENODEV
			? "cuda_register: no CUDA context in this process "
			  "(initialize CUDA first, e.g. torch.cuda.init() "
			  "and any CUDA call)"
			: "cuda_register");
	r->cuda_pinned = true;
	Py_RETURN_NONE;
}

static PyObject *Region_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	Py_INCREF(self);
	return self;
}

static PyObject *Region_exit(RegionObject *r, PyObject *args)
{
	(void)args;
	return Region_close(r, NULL);
}

static PyObject *Region_export(RegionObject *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "off", "length", NULL };
	PyObject *o_off = NULL, *o_len = Py_None;
	uint64_t off = 0, len;
	uint8_t tok[XFER_TOKEN_MAX];
	size_t tlen = sizeof(tok);

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:export", kwlist,
					 &o_off, &o_len))
		return NULL;
	if (!r->mem) {
		PyErr_SetString(PyExc_ValueError, "export: the region is closed");
		return NULL;
	}
	if (r->readonly) {
		PyErr_SetString(PyExc_ValueError,
				"export: a read-only buffer cannot be exported "
				"(a token lets its holder write)");
		return NULL;
	}
	if (o_off && arg_u64(o_off, "off", &off))
		return NULL;
	if (o_len == Py_None)
		len = off <= r->len ? r->len - off : 0;
	else if (arg_u64(o_len, "length", &len))
		return NULL;
	int err = xfer_export(r->mem, off, len, tok, &tlen);
	if (err)
		return raise_xfer(err, "export");
	return PyBytes_FromStringAndSize((const char *)tok, (Py_ssize_t)tlen);
}

static PyObject *Region_numpy(RegionObject *r, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "dtype", "shape", NULL };
	PyObject *dtype = NULL, *shape = Py_None, *np, *arr;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:numpy", kwlist,
					 &dtype, &shape))
		return NULL;
	np = PyImport_ImportModule("numpy");
	if (!np)
		return NULL;
	if (!dtype)
		arr = PyObject_CallMethod(np, "frombuffer", "Os", r, "uint8");
	else
		arr = PyObject_CallMethod(np, "frombuffer", "OO", r, dtype);
	Py_DECREF(np);
	if (arr && shape != Py_None) {
		PyObject *a2 = PyObject_CallMethod(arr, "reshape", "O", shape);
		Py_DECREF(arr);
		arr = a2;
	}
	return arr;
}

static int Region_getbuffer(RegionObject *r, Py_buffer *view, int flags)
{
	if (!r->mem && !r->deferred) {
		PyErr_SetString(PyExc_BufferError, "the region is closed");
		return -1;
	}
	if (r->kind == REGION_POINTER) {
		PyErr_SetString(PyExc_BufferError,
				"a region of pointer memory (GPU, DLPack) has no "
				"buffer interface: use the object registered");
		return -1;
	}
	if (r->len > PY_SSIZE_T_MAX) {
		PyErr_SetString(PyExc_BufferError, "region too large");
		return -1;
	}
	if (PyBuffer_FillInfo(view, (PyObject *)r, r->ptr, (Py_ssize_t)r->len,
			      r->readonly, flags))
		return -1;
	r->exports++;
	return 0;
}

static void Region_releasebuffer(RegionObject *r, Py_buffer *view)
{
	(void)view;
	r->exports--;
}

static PyBufferProcs Region_as_buffer = {
	.bf_getbuffer = (getbufferproc)Region_getbuffer,
	.bf_releasebuffer = (releasebufferproc)Region_releasebuffer,
};

static PyObject *Region_get_length(RegionObject *r, void *unused)
{
	(void)unused;
	return PyLong_FromSize_t(r->len);
}

static PyObject *Region_get_handle(RegionObject *r, void *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong(r->handle);
}

static PyObject *Region_get_ptr(RegionObject *r, void *unused)
{
	(void)unused;
	return PyLong_FromVoidPtr(r->ptr);
}

static PyObject *Region_get_bool(RegionObject *r, void *which)
{
	switch ((intptr_t)which) {
	case 0: return PyBool_FromLong(r->readonly);
	case 1: return PyBool_FromLong(r->device);
	case 2: return PyBool_FromLong(r->mem == NULL);
	case 4: return PyBool_FromLong(r->cuda_pinned);
	default: return PyBool_FromLong(r->kind == REGION_HOST);
	}
}

static PyObject *Region_get_obj(RegionObject *r, void *unused)
{
	(void)unused;
	PyObject *o = r->kind == REGION_BUFFER ? r->view.obj : r->owner;
	if (!o)
		o = Py_None;
	Py_INCREF(o);
	return o;
}

static PyObject *Region_get_context(RegionObject *r, void *unused)
{
	(void)unused;
	Py_INCREF(r->ctx);
	return (PyObject *)r->ctx;
}

static PyObject *Region_repr(RegionObject *r)
{
	static const char *const kinds[] = { "host", "buffer", "pointer" };
	return PyUnicode_FromFormat("<xferd.Region %s%s %zu bytes handle=%llu%s>",
				    kinds[r->kind], r->device ? " gpu" : "",
				    r->len, (unsigned long long)r->handle,
				    r->mem ? "" : " closed");
}

static PyMethodDef Region_methods[] = {
	{ "export", (PyCFunction)(void (*)(void))Region_export,
	  METH_VARARGS | METH_KEYWORDS,
	  "export(off=0, length=None) -> bytes\n\n"
	  "A token granting read and write of [off, off+length) of this region\n"
	  "(length None: to the end).  Derived locally: no round trip." },
	{ "numpy", (PyCFunction)(void (*)(void))Region_numpy,
	  METH_VARARGS | METH_KEYWORDS,
	  "numpy(dtype='uint8', shape=None) -> numpy.ndarray\n\n"
	  "A numpy view of the region's host memory (no copy)." },
	{ "cuda_register", (PyCFunction)Region_cuda_register, METH_NOARGS,
	  "cuda_register() -> None\n\n"
	  "Pin this process's mapping of alloc_host memory for CUDA too\n"
	  "(xfer_mem_cuda_register: cuMemHostRegister under a context the\n"
	  "process has): its own copies to and from GPUs run at DMA speed\n"
	  "and torch's is_pinned() is True.  Undone when the region is\n"
	  "freed.  XferError ENODEV without CUDA or a CUDA context;\n"
	  "ValueError for other regions.  Blocks while pages are pinned." },
	{ "close", (PyCFunction)Region_close, METH_NOARGS,
	  "Deregister (and for alloc_host memory, free) the region.\n"
	  "BufferError while views of its memory exist." },
	{ "__enter__", Region_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)Region_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef Region_getset[] = {
	{ "length", (getter)Region_get_length, NULL, "Bytes registered.", NULL },
	{ "handle", (getter)Region_get_handle, NULL,
	  "The handle xferd knows the region by (in notifications).", NULL },
	{ "ptr", (getter)Region_get_ptr, NULL, "Address of the memory.", NULL },
	{ "readonly", (getter)Region_get_bool, NULL,
	  "Registered from read-only memory: a source only.", (void *)0 },
	{ "device", (getter)Region_get_bool, NULL,
	  "GPU memory (as the object described itself).", (void *)1 },
	{ "closed", (getter)Region_get_bool, NULL, "Released.", (void *)2 },
	{ "cuda_pinned", (getter)Region_get_bool, NULL,
	  "alloc_host memory pinned for CUDA here (cuda_register).",
	  (void *)4 },
	{ "host", (getter)Region_get_bool, NULL,
	  "Memory from alloc_host (shared with xferd: zero copy).", (void *)3 },
	{ "obj", (getter)Region_get_obj, NULL,
	  "The object registered (None for alloc_host memory).", NULL },
	{ "context", (getter)Region_get_context, NULL, "Its Context.", NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

PyTypeObject Region_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "xferd.Region",
	.tp_basicsize = sizeof(RegionObject),
	.tp_dealloc = (destructor)Region_dealloc,
	.tp_repr = (reprfunc)Region_repr,
	.tp_as_buffer = &Region_as_buffer,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "Memory registered with xferd (Context.alloc_host or "
		  "Context.register).\n\n"
		  "Holds the registration and what it registered; close() or\n"
		  "garbage collection deregisters, then lets the memory go.\n"
		  "Host regions support the buffer protocol (memoryview, numpy).",
	.tp_traverse = (traverseproc)Region_traverse,
	.tp_weaklistoffset = offsetof(RegionObject, weakreflist),
	.tp_methods = Region_methods,
	.tp_getset = Region_getset,
};

/* --- Remote --- */

PyObject *remote_import(ContextObject *c, const void *tok, size_t len)
{
	struct xfer_remote *rem = NULL;
	RemoteObject *r;
	int err;

	if (ctx_check_open(c))
		return NULL;
	ctx_lock(c);
	Py_BEGIN_ALLOW_THREADS
	err = xfer_import(c->ctx, tok, len, &rem);
	Py_END_ALLOW_THREADS
	ctx_unlock(c);
	if (err)
		return raise_xfer(err, "import_token");
	r = PyObject_GC_New(RemoteObject, &Remote_Type);
	if (!r) {
		ctx_lock(c);
		xfer_unimport(c->ctx, rem);
		ctx_unlock(c);
		return NULL;
	}
	Py_INCREF(c);
	r->ctx = c;
	r->rem = rem;
	r->len = xfer_remote_len(rem);
	r->handle = xfer_remote_handle(rem);
	link_add(&c->remotes, &r->link);
	PyObject_GC_Track(r);
	return (PyObject *)r;
}

static void Remote_dealloc(RemoteObject *r)
{
	PyObject_GC_UnTrack(r);
	remote_release(r);
	Py_CLEAR(r->ctx);
	PyObject_GC_Del(r);
}

static int Remote_traverse(RemoteObject *r, visitproc visit, void *arg)
{
	Py_VISIT(r->ctx);
	return 0;
}

static PyObject *Remote_close(RemoteObject *r, PyObject *unused)
{
	(void)unused;
	remote_release(r);
	Py_RETURN_NONE;
}

static PyObject *Remote_exit(RemoteObject *r, PyObject *args)
{
	(void)args;
	return Remote_close(r, NULL);
}

static PyObject *Remote_get(RemoteObject *r, void *which)
{
	switch ((intptr_t)which) {
	case 0: return PyLong_FromUnsignedLongLong(r->len);
	case 1: return PyLong_FromUnsignedLongLong(r->handle);
	default: return PyBool_FromLong(r->rem == NULL);
	}
}

static PyObject *Remote_repr(RemoteObject *r)
{
	return PyUnicode_FromFormat("<xferd.Remote %llu bytes handle=%llu%s>",
				    (unsigned long long)r->len,
				    (unsigned long long)r->handle,
				    r->rem ? "" : " closed");
}

static PyMethodDef Remote_methods[] = {
	{ "close", (PyCFunction)Remote_close, METH_NOARGS,
	  "Forget the imported token (xfer_unimport)." },
	{ "__enter__", Region_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)Remote_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef Remote_getset[] = {
	{ "length", (getter)Remote_get, NULL,
	  "Bytes the token grants; offsets are relative to its start.", (void *)0 },
	{ "handle", (getter)Remote_get, NULL, "xferd's handle of the import.", (void *)1 },
	{ "closed", (getter)Remote_get, NULL, "Released.", (void *)2 },
	{ NULL, NULL, NULL, NULL, NULL }
};

PyTypeObject Remote_Type = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "xferd.Remote",
	.tp_basicsize = sizeof(RemoteObject),
	.tp_dealloc = (destructor)Remote_dealloc,
	.tp_repr = (reprfunc)Remote_repr,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "An imported token (Context.import_token): a transfer target\n"
		  "on this node or another.",
	.tp_traverse = (traverseproc)Remote_traverse,
	.tp_methods = Remote_methods,
	.tp_getset = Remote_getset,
};
