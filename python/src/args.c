/* SPDX-License-Identifier: Apache-2.0 */
/*
 * args.c - turning what Python callers pass into what libxfer takes:
 * integer arrays (offsets, lengths, list indices) of any integer dtype,
 * layout or sequence; timeouts in seconds (and the deprecated
 * milliseconds keywords); and the errors that say what to do instead
 * (a name with a character xferd refuses, a socket that is not there).
 *
 * Arrays are cast and copied in C, once, before anything is submitted:
 * only a negative value, one past 64 bits or an index past its list is
 * refused, as a ValueError naming the argument and the first bad entry.
 * An 8-byte native C-contiguous array is used in place (the common case
 * of np.int64/np.uint64 offsets costs no copy).
 *
 * Threads: Python's, with the GIL; no lock of its own.
 */
#include "core.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

PyObject *IndexRangeError;

/* --- integers --- */

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
		PyErr_Format(PyExc_ValueError, "%s must be >= 0, not %R", name, i);
		Py_DECREF(i);
		return -1;
	}
	*out = PyLong_AsUnsignedLongLong(i);
	if (*out == (uint64_t)-1 && PyErr_Occurred()) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError,
			     "%s = %R does not fit in 64 bits", name, i);
		Py_DECREF(i);
		return -1;
	}
	Py_DECREF(i);
	return 0;
}

/* Entry i of a sequence: as arg_u64, naming "name[i]". */
static int item_u64(PyObject *o, const char *name, Py_ssize_t i,
		    uint64_t *out)
{
	char what[96];

	snprintf(what, sizeof(what), "%s[%zd]", name, i);
	return arg_u64(o, what, out);
}

/* How the items of an integer buffer are stored. */
struct int_format {
	bool is_signed;
	bool swap;          /* the other byte order than this host's */
	Py_ssize_t size;    /* 1, 2, 4 or 8 */
};

/* Any struct-module integer code with an optional byte-order prefix:
 * numpy's int8..uint64 in either byte order, array.array, memoryview
 * casts.  The size is the buffer's itemsize: '<l' is 4 bytes in the
 * struct module's standard sizes and 8 natively. */
static int int_format_of(const Py_buffer *v, struct int_format *f)
{
	const char *s = v->format ? v->format : "B";
	const bool host_big = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
	bool big = host_big;

	switch (*s) {
	case '@': case '=':
		s++;
		break;
	case '<':
		big = false;
		s++;
		break;
	case '>': case '!':
		big = true;
		s++;
		break;
	}
	if (!s[0] || s[1])
		return -1;
	if (strchr("bhilqn", s[0]))
		f->is_signed = true;
	else if (strchr("BHILQN", s[0]))
		f->is_signed = false;
	else
		return -1;
	f->size = v->itemsize;
	if (f->size != 1 && f->size != 2 && f->size != 4 && f->size != 8)
		return -1;
	f->swap = big != host_big;
	return 0;
}

/* The item at p; false if it is negative (*out then its bits). */
static bool int_load(const char *p, const struct int_format *f, uint64_t *out)
{
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
	int64_t s = 0;

	switch (f->size) {
	case 1:
		memcpy(&u8, p, 1);
		*out = u8;
		s = (int8_t)u8;
		break;
	case 2:
		memcpy(&u16, p, 2);
		if (f->swap)
			u16 = __builtin_bswap16(u16);
		*out = u16;
		s = (int16_t)u16;
		break;
	case 4:
		memcpy(&u32, p, 4);
		if (f->swap)
			u32 = __builtin_bswap32(u32);
		*out = u32;
		s = (int32_t)u32;
		break;
	default:
		memcpy(&u64, p, 8);
		if (f->swap)
			u64 = __builtin_bswap64(u64);
		*out = u64;
		s = (int64_t)u64;
		break;
	}
	if (!f->is_signed)
		return true;
	*out = (uint64_t)s;
	return s >= 0;
}

void u64_array_free(struct u64_array *a)
{
	if (a->has_view)
		PyBuffer_Release(&a->view);
	a->has_view = false;
	PyMem_Free(a->owned);
	a->owned = NULL;
}

static int negative_at(const char *name, Py_ssize_t i, uint64_t v)
{
	PyErr_Format(PyExc_ValueError, "%s[%zd] = %lld is negative", name, i,
		     (long long)v);
	return -1;
}

/* A buffer of integers (a->view held): in place when it already is
 * native 8-byte C order, else cast into a->owned item by item. */
static int u64_from_buffer(struct u64_array *a, const char *name)
{
	Py_buffer *v = &a->view;
	struct int_format f;

	if (int_format_of(v, &f)) {
		PyErr_Format(PyExc_TypeError,
			     "%s: an array of integers (any of int8 to uint64), "
			     "not format '%s'", name, v->format ? v->format : "B");
		return -1;
	}
	a->n = v->itemsize ? v->len / v->itemsize : 0;
	if (f.size == 8 && !f.swap && PyBuffer_IsContiguous(v, 'C')) {
		a->v = v->buf;
		if (f.is_signed)
			for (Py_ssize_t i = 0; i < a->n; i++)
				if ((int64_t)a->v[i] < 0)
					return negative_at(name, i, a->v[i]);
		return 0;
	}
	a->owned = PyMem_Malloc((size_t)(a->n ? a->n : 1) * sizeof(uint64_t));
	if (!a->owned) {
		PyErr_NoMemory();
		return -1;
	}
	/* Row-major over any strides (numpy views: a[::2], a.T, a[:, 0]). */
	Py_ssize_t at[PyBUF_MAX_NDIM] = { 0 };
	for (Py_ssize_t i = 0; i < a->n; i++) {
		const char *p = v->buf;
		for (int d = 0; d < v->ndim; d++)
			p += at[d] * (v->strides ? v->strides[d] : v->itemsize);
		if (!int_load(p, &f, &a->owned[i]))
			return negative_at(name, i, a->owned[i]);
		for (int d = v->ndim - 1; d >= 0; d--) {
			if (++at[d] < v->shape[d])
				break;
			at[d] = 0;
		}
	}
	a->v = a->owned;
	return 0;
}

int u64_array_get(PyObject *o, const char *name, bool scalar_ok,
		  struct u64_array *a)
{
	memset(a, 0, sizeof(*a));
	/* numpy arrays have __index__ too: ints and 0-d arrays are scalars,
	 * anything else with a buffer an array. */
	bool zero_d = false;
	if (PyObject_CheckBuffer(o) && !PyLong_Check(o)) {
		Py_buffer b;
		if (PyObject_GetBuffer(o, &b, PyBUF_STRIDES) == 0) {
			zero_d = b.ndim == 0;
			PyBuffer_Release(&b);
		} else {
			PyErr_Clear();
		}
	}
	if (PyIndex_Check(o) && !PyBool_Check(o) &&
	    (!PyObject_CheckBuffer(o) || zero_d)) {
		if (!scalar_ok) {
			PyErr_Format(PyExc_TypeError,
				     "%s must be an array or a sequence of ints, "
				     "not one int", name);
			return -1;
		}
		if (arg_u64(o, name, &a->scalar))
			return -1;
		a->v = &a->scalar;
		a->n = -1;
		return 0;
	}
	if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) &&
	    !PyByteArray_Check(o)) {
		if (PyObject_GetBuffer(o, &a->view, PyBUF_RECORDS_RO))
			return -1;
		a->has_view = true;
		if (u64_from_buffer(a, name)) {
			u64_array_free(a);
			return -1;
		}
		return 0;
	}
	PyObject *seq = PySequence_Fast(o, "");
	if (!seq) {
		PyErr_Format(PyExc_TypeError,
			     "%s must be an integer array or a sequence of ints, "
			     "not %.80s", name, Py_TYPE(o)->tp_name);
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
		if (item_u64(PySequence_Fast_GET_ITEM(seq, i), name, i,
			     &a->owned[i])) {
			Py_DECREF(seq);
			u64_array_free(a);
			return -1;
		}
	Py_DECREF(seq);
	a->v = a->owned;
	return 0;
}

int indices_get(PyObject *o, const char *name, uint32_t count,
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
			PyErr_Format(IndexRangeError,
				     "%s[%zd] = %llu: the list has %u entries "
				     "(indices 0 to %lld)", name, i,
				     (unsigned long long)a.v[i], (unsigned)count,
				     (long long)count - 1);
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

/* --- timeouts --- */

int arg_timeout(PyObject *secs, PyObject *ms, const char *fn,
		bool stream, int64_t *out)
{
	/* The most each takes: an SQE's u32, a stream wait's int. */
	const int64_t max_ms = stream ? INT_MAX : UINT32_MAX;

	if (ms == Py_None)
		ms = NULL;      /* the stubs' default: as if not passed */
	if (secs && ms) {
		PyErr_Format(PyExc_TypeError,
			     "%s: timeout= (seconds) or timeout_ms= (deprecated), "
			     "not both", fn);
		return -1;
	}
	if (ms) {
		long long v;

		if (PyBool_Check(ms) || !PyIndex_Check(ms)) {
			PyErr_Format(PyExc_TypeError,
				     "%s: timeout_ms must be an int, not %.80s",
				     fn, Py_TYPE(ms)->tp_name);
			return -1;
		}
		v = PyLong_AsLongLong(ms);
		if (v == -1 && PyErr_Occurred())
			return -1;
		/* As before: a stream's negative waits without limit, an
		 * SQE's is 0 to 2^32-1 (0: xferd's op_timeout_ms). */
		if (stream ? v > INT_MAX || v < INT_MIN : v < 0 || v > max_ms) {
			PyErr_Format(PyExc_ValueError,
				     "%s: timeout_ms = %lld is out of range", fn, v);
			return -1;
		}
		if (PyErr_WarnFormat(PyExc_DeprecationWarning, 1,
				     "%s: timeout_ms= is deprecated; pass "
				     "timeout= in seconds", fn))
			return -1;
		*out = v;
		return 0;
	}
	if (!secs || secs == Py_None) {
		*out = stream ? -1 : 0;
		return 0;
	}
	double s = PyFloat_AsDouble(secs);
	if (s == -1.0 && PyErr_Occurred()) {
		PyErr_Format(PyExc_TypeError,
			     "%s: timeout must be a number of seconds or None, "
			     "not %.80s", fn, Py_TYPE(secs)->tp_name);
		return -1;
	}
	if (isnan(s) || s < 0) {
		PyErr_Format(PyExc_ValueError,
			     "%s: timeout must be >= 0 seconds, or None (%s)", fn,
			     stream ? "no limit" : "xferd's op_timeout_ms");
		return -1;
	}
	/* Rounded up: a short positive timeout never becomes 0, which
	 * means "do not wait" to a stream and "xferd's default" to an SQE. */
	double m = ceil(s * 1000.0);
	if (m > (double)max_ms)
		*out = stream ? -1 : max_ms;
	else
		*out = (int64_t)m;
	return 0;
}

/* --- errors that say what to do --- */

PyObject *raise_xfer_fmt(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	PyObject *msg = PyUnicode_FromFormatV(fmt, ap);
	va_end(ap);
	if (!msg)
		return NULL;
	PyObject *args = Py_BuildValue("(iN)", -err, msg);
	if (args) {
		PyErr_SetObject(XferError, args);
		Py_DECREF(args);
	}
	return NULL;
}

/* common/pubname.c's character class, repeated here only to explain
 * an EINVAL: libxfer and xferd stay the judges of a name. */
#define NAME_RULE "1 to 200 bytes of A-Z a-z 0-9 and . _ : @ + -"

static bool name_char(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= '0' && ch <= '9') || (ch && strchr("._:@+-", ch));
}

/* The name part of a lookup string "[node/][~uid/]name". */
static const char *lookup_name_part(const char *s)
{
	const char *slash = strchr(s, '/');

	if (slash && s[0] != '~')
		s = slash + 1;
	if (s[0] == '~' && (slash = strchr(s, '/')))
		s = slash + 1;
	return s;
}

PyObject *raise_name(int err, const char *what, const char *name,
		     bool lookup)
{
	if (err != -EINVAL)
		return raise_xfer(err, what);
	const char *part = lookup ? lookup_name_part(name) : name;
	size_t len = strlen(part);
	const char *form = lookup
		? "a lookup is [node/][~uid/]name, the name " NAME_RULE
		: "a name is " NAME_RULE " (no '/')";

	if (len == 0)
		return raise_xfer_fmt(err, "%s: '%s': the name is empty; %s",
				      what, name, form);
	if (len > XFER_NAME_MAX)
		return raise_xfer_fmt(err, "%s: the name has %zu bytes; %s",
				      what, len, form);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)part[i];
		size_t at = (size_t)(part - name) + i;
		if (name_char(ch))
			continue;
		if (ch >= 0x80)
			return raise_xfer_fmt(err, "%s: '%s': non-ASCII "
					      "characters are not allowed; %s",
					      what, name, form);
		if (ch <= 0x20 || ch == 0x7f)
			return raise_xfer_fmt(err, "%s: '%s': byte 0x%x at %zu "
					      "is not allowed; %s", what, name,
					      (unsigned)ch, at, form);
		return raise_xfer_fmt(err, "%s: '%s': character '%c' at %zu "
				      "is not allowed; %s", what, name, (int)ch,
				      at, form);
	}
	return raise_xfer_fmt(err, "%s: '%s': %s (%s)", what, name,
			      xfer_strerror(err), form);
}

/* Where xfer_open looked, and why there: common/rendezvous.c's rule,
 * repeated here only to name it in the error. */
static void socket_tried(const char *given, char *path, size_t len,
			 const char **why)
{
	const char *env = getenv("XFERD_SOCKET");
	const char *rt = getenv("XDG_RUNTIME_DIR");

	if (given) {
		snprintf(path, len, "%s", given);
		*why = "the socket argument";
	} else if (env && *env) {
		snprintf(path, len, "%s", env);
		*why = "$XFERD_SOCKET";
	} else if (geteuid() == 0 || !rt || !*rt) {
		snprintf(path, len, "/run/xferd/xferd.sock");
		*why = geteuid() == 0 ? "the default for root"
				       : "the default without $XDG_RUNTIME_DIR";
	} else {
		snprintf(path, len, "%s/xferd.sock", rt);
		*why = "the default, $XDG_RUNTIME_DIR/xferd.sock";
	}
}

PyObject *raise_open(int err, const char *given)
{
	char path[PATH_MAX];
	const char *why;

	socket_tried(given, path, sizeof(path), &why);
	switch (err) {
	case -ENOENT:
	case -ENOTDIR:
		return raise_xfer_fmt(err,
			"Context: no xferd socket at %s (%s): start xferd "
			"(systemctl start xferd), or pass socket= or set "
			"$XFERD_SOCKET to the path it listens on", path, why);
	case -ECONNREFUSED:
		return raise_xfer_fmt(err,
			"Context: nothing listens on %s (%s): xferd stopped "
			"and left its socket; start xferd, or pass socket= or "
			"set $XFERD_SOCKET to the path it listens on", path, why);
	default:
		return raise_xfer_fmt(err, "Context: %s: %s (%s)",
				      xfer_strerror(err), path, why);
	}
}

/* --- notify= --- */

static int notify_msg_of(PyObject *o, const char *name, struct notify_arg *out)
{
	Py_buffer b;
	const char *s;
	Py_ssize_t n;

	if (PyUnicode_Check(o)) {
		if (!(s = PyUnicode_AsUTF8AndSize(o, &n)))
			return -1;
	} else if (PyObject_GetBuffer(o, &b, PyBUF_SIMPLE) == 0) {
		if ((size_t)b.len > XFER_NOTIFY_MSG_MAX) {
			PyErr_Format(PyExc_ValueError, "%s: a message of %zd bytes; "
				     "at most %u", name, b.len, XFER_NOTIFY_MSG_MAX);
			PyBuffer_Release(&b);
			return -1;
		}
		memcpy(out->msg, b.buf, (size_t)b.len);
		out->len = (size_t)b.len;
		PyBuffer_Release(&b);
		return 0;
	} else {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "%s: an int value, a message "
			     "(bytes or str) or a (value, message) pair, not %s",
			     name, Py_TYPE(o)->tp_name);
		return -1;
	}
	if ((size_t)n > XFER_NOTIFY_MSG_MAX) {
		PyErr_Format(PyExc_ValueError, "%s: a message of %zd bytes "
			     "(UTF-8); at most %u", name, n, XFER_NOTIFY_MSG_MAX);
		return -1;
	}
	memcpy(out->msg, s, (size_t)n);
	out->len = (size_t)n;
	return 0;
}

int arg_notify(PyObject *o, const char *name, struct notify_arg *out)
{
	out->value = 0;
	out->len = 0;
	if (PyLong_Check(o))
		return arg_u64(o, name, &out->value);
	if (PyTuple_Check(o) && PyTuple_GET_SIZE(o) == 2)
		return arg_u64(PyTuple_GET_ITEM(o, 0), name, &out->value) ||
		       notify_msg_of(PyTuple_GET_ITEM(o, 1), name, out) ? -1 : 0;
	return notify_msg_of(o, name, out);
}

int notify_apply(struct xfer_ctx *ctx, struct xfer_sqe *sqe,
		 const struct notify_arg *n)
{
	if (sqe->opcode != XFER_OP_NOTIFY)
		xfer_sqe_set_notify(sqe, n->value);
	return xfer_sqe_set_message(ctx, sqe, n->msg, n->len);
}
