/* SPDX-License-Identifier: Apache-2.0 */
/*
 * submit.c - the Context methods that submit: write, read and notify,
 * vectors (write_vec/read_vec), prepared descriptor lists (dlist,
 * write_dlist/read_dlist), and the steps they share (a slot, ring room,
 * publishing); each hands out a Request (completion.c).
 *
 * Vectors become one linked batch of SQEs (one CQE) built in one C loop
 * from integer arrays or sequences (args.c casts them).  Every argument is checked before the
 * first SQE is written, so bad input raises and moves nothing.
 *
 * Threads: Python's, with the GIL; the ring is written under mu, and a
 * full ring is waited for with the GIL released (core.h: the lock
 * order).  Vectors and lists stay with the single descriptors: they
 * share the per-SQE steps (sq_room, submit_begin/end) in one unit.
 */
#include "core.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

/* --- Context: submission --- */

/* The target of a transfer or list (argument `name`): a Remote, or a
 * Region of this context. */
static int target_of(ContextObject *c, PyObject *o, const char *name,
		     uint64_t *handle, uint64_t *len, bool *readonly)
{
	if (PyObject_TypeCheck(o, &Remote_Type)) {
		RemoteObject *r = (RemoteObject *)o;
		if (!r->rem) {
			PyErr_Format(PyExc_ValueError, "%s: the Remote is "
				     "closed: import the token again", name);
			return -1;
		}
		if (r->ctx != c) {
			PyErr_Format(PyExc_ValueError, "%s: a Remote imported "
				     "by another Context: import the token on "
				     "this one (ctx.import_token(token))", name);
			return -1;
		}
		*handle = r->handle;
		*len = r->len;
		*readonly = false;
		return 0;
	}
	if (PyObject_TypeCheck(o, &Region_Type)) {
		RegionObject *r = (RegionObject *)o;
		if (!r->mem) {
			PyErr_Format(PyExc_ValueError, "%s: the Region is "
				     "closed", name);
			return -1;
		}
		if (r->ctx != c) {
			PyErr_Format(PyExc_ValueError, "%s: a Region of another "
				     "Context: pass ctx.import_token("
				     "region.export()) instead", name);
			return -1;
		}
		*handle = r->handle;
		*len = r->len;
		*readonly = r->readonly;
		return 0;
	}
	PyErr_Format(PyExc_TypeError,
		     "%s must be a Remote (ctx.import_token(token)) or a "
		     "Region of this Context, not %.80s", name,
		     Py_TYPE(o)->tp_name);
	return -1;
}

/* The local memory of a transfer: a Region of c, or a contiguous view
 * of one of c's alloc_host Regions (a numpy array or memoryview of it, a
 * tensor of alloc_pinned), which the Request keeps alive as it would
 * the Region. */
static int local_of(ContextObject *c, PyObject *o, struct local_view *out)
{
	RegionObject *r;

	if (!PyObject_TypeCheck(o, &Region_Type)) {
		int rc = region_view_of(c, o, out);
		if (rc <= 0)
			return rc;
		PyErr_Format(PyExc_TypeError,
			     "local must be a Region of this Context, or a "
			     "contiguous view of memory from its alloc_host or "
			     "alloc_pinned (ctx.register(obj) for other "
			     "memory), not %.80s", Py_TYPE(o)->tp_name);
		return -1;
	}
	r = as_region(o, "local");
	if (!r)
		return -1;
	if (!r->mem || r->ctx != c) {
		PyErr_SetString(PyExc_ValueError,
				r->mem ? "local: a Region of another Context: "
					 "register the memory on this one "
					 "(ctx.register(obj))"
				       : "local: the Region is closed");
		return -1;
	}
	*out = (struct local_view){ .r = r, .base = 0, .len = r->len,
				    .readonly = r->readonly };
	return 0;
}

static PyObject *readonly_error(const char *fn, const char *which)
{
	PyErr_Format(PyExc_ValueError,
		     "%s: %s, the destination, was registered read-only "
		     "(bytes or a read-only buffer): register writable memory "
		     "(a bytearray, a numpy array, ctx.alloc_host) to receive",
		     fn, which);
	return NULL;
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
				  "length", "notify", "timeout_ms", "timeout",
				  "traffic_class", NULL };
	PyObject *o_local, *o_remote, *o_loff = NULL, *o_roff = NULL;
	PyObject *o_len = Py_None, *o_notify = Py_None;
	PyObject *o_ms = NULL, *o_secs = NULL, *o_cls = NULL;
	const char *fn = op == XFER_OP_WRITE ? "write" : "read";
	unsigned cls;
	int64_t timeout_ms;
	uint64_t loff = 0, roff = 0, len, rhandle, rlen;
	struct notify_arg notify;
	struct local_view local;
	bool rro;

	/* timeout_ms keeps its old place; timeout (seconds) is keyword-only
	 * so that a positional millisecond count never turns into seconds. */
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOOOO$OO", kwlist,
					 &o_local, &o_remote, &o_loff, &o_roff,
					 &o_len, &o_notify, &o_ms, &o_secs,
					 &o_cls) ||
	    arg_timeout(o_secs, o_ms, fn, false, &timeout_ms) ||
	    arg_class(o_cls, fn, &cls))
		return NULL;
	if (local_of(c, o_local, &local) ||
	    target_of(c, o_remote, "remote", &rhandle, &rlen, &rro) ||
	    (o_loff && arg_u64(o_loff, "local_off", &loff)) ||
	    (o_roff && arg_u64(o_roff, "remote_off", &roff)) ||
	    (o_notify != Py_None && arg_notify(o_notify, "notify", &notify)))
		return NULL;
	if (o_len == Py_None) {
		uint64_t a = loff <= local.len ? local.len - loff : 0;
		uint64_t b = roff <= rlen ? rlen - roff : 0;
		len = a < b ? a : b;
	} else if (arg_u64(o_len, "length", &len)) {
		return NULL;
	}
	if (op == XFER_OP_READ ? local.readonly : rro)
		return readonly_error(fn, op == XFER_OP_READ ? "local" : "remote");
	if (!range_ok(loff, len, local.len) || !range_ok(roff, len, rlen))
		return raise_xfer(-ERANGE, fn);
	int64_t idx = submit_begin(c, keep_pair(o_local, o_remote));
	if (idx < 0)
		return NULL;
	struct xfer_sqe *sqe;
	int err = sq_room(c, &sqe);
	if (!err) {
		xfer_prep_rw(sqe, op, local.r->handle, local.base + loff,
			     rhandle, roff, len,
			     slot_user_data(c, (uint32_t)idx));
		if (o_notify != Py_None)
			err = notify_apply(c->ctx, sqe, &notify);
		xfer_sqe_set_timeout(sqe, (uint32_t)timeout_ms);
		xfer_sqe_set_class(sqe, cls);
	}
	return submit_end(c, (uint32_t)idx, err);
}

PyObject *Context_write(ContextObject *c, PyObject *args, PyObject *kw)
{
	return rw_one(c, XFER_OP_WRITE, args, kw);
}

PyObject *Context_read(ContextObject *c, PyObject *args, PyObject *kw)
{
	return rw_one(c, XFER_OP_READ, args, kw);
}

PyObject *Context_notify(ContextObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "remote", "value", NULL };
	PyObject *o_remote, *o_value;
	uint64_t rhandle, rlen;
	struct notify_arg value;
	bool rro;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:notify", kwlist,
					 &o_remote, &o_value) ||
	    target_of(c, o_remote, "remote", &rhandle, &rlen, &rro) ||
	    arg_notify(o_value, "value", &value))
		return NULL;
	int64_t idx = submit_begin(c, keep_pair(o_remote, NULL));
	if (idx < 0)
		return NULL;
	struct xfer_sqe *sqe;
	int err = sq_room(c, &sqe);
	if (!err) {
		xfer_prep_notify(sqe, rhandle, value.value,
				 slot_user_data(c, (uint32_t)idx));
		err = notify_apply(c->ctx, sqe, &value);
	}
	return submit_end(c, (uint32_t)idx, err);
}

static PyObject *rw_vec(ContextObject *c, unsigned op, PyObject *args,
			PyObject *kw)
{
	static char *kwlist[] = { "local", "local_offs", "remote", "remote_offs",
				  "lengths", "notify", "timeout_ms", "timeout",
				  NULL };
	PyObject *o_local, *o_remote, *o_loffs, *o_roffs, *o_lens;
	PyObject *o_notify = Py_None, *res = NULL;
	PyObject *o_ms = NULL, *o_secs = NULL;
	const char *fn = op == XFER_OP_WRITE ? "write_vec" : "read_vec";
	int64_t timeout_ms;
	uint64_t rhandle, rlen;
	struct notify_arg notify;
	struct u64_array lo = { 0 }, ro = { 0 }, ln = { 0 };
	struct local_view local;
	bool rro;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO|OO$O", kwlist,
					 &o_local, &o_loffs, &o_remote, &o_roffs,
					 &o_lens, &o_notify, &o_ms, &o_secs) ||
	    arg_timeout(o_secs, o_ms, fn, false, &timeout_ms))
		return NULL;
	if (local_of(c, o_local, &local) ||
	    target_of(c, o_remote, "remote", &rhandle, &rlen, &rro) ||
	    (o_notify != Py_None && arg_notify(o_notify, "notify", &notify)))
		return NULL;
	if (op == XFER_OP_READ ? local.readonly : rro)
		return readonly_error(fn, op == XFER_OP_READ ? "local" : "remote");
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
		if (!range_ok(lo.v[i], len, local.len) ||
		    !range_ok(ro.v[i], len, rlen)) {
			char what[64];
			snprintf(what, sizeof(what), "%s: entry %zd", fn, i);
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
		xfer_prep_rw(sqe, op, local.r->handle, local.base + lo.v[i],
			     rhandle, ro.v[i], u64_at(&ln, i), ud);
		xfer_sqe_set_timeout(sqe, (uint32_t)timeout_ms);
		if (i + 1 < n)
			xfer_sqe_set_link(sqe);
		else if (o_notify != Py_None)
			err = notify_apply(c->ctx, sqe, &notify);
	}
	res = submit_end(c, (uint32_t)idx, err);
out:
	u64_array_free(&lo);
	u64_array_free(&ro);
	u64_array_free(&ln);
	return res;
}

PyObject *Context_write_vec(ContextObject *c, PyObject *args, PyObject *kw)
{
	return rw_vec(c, XFER_OP_WRITE, args, kw);
}

PyObject *Context_read_vec(ContextObject *c, PyObject *args, PyObject *kw)
{
	return rw_vec(c, XFER_OP_READ, args, kw);
}

/* --- Context: prepared descriptor lists --- */

PyObject *Context_dlist(ContextObject *c, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "target", "offsets", "lengths", NULL };
	PyObject *o_target, *o_offs, *o_lens, *res = NULL;
	uint64_t handle, tlen;
	struct u64_array off = { 0 }, len = { 0 };
	bool ro;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:dlist", kwlist,
					 &o_target, &o_offs, &o_lens) ||
	    target_of(c, o_target, "target", &handle, &tlen, &ro))
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
			     d->dl ? "a DList of another Context: make it on "
				     "this one (ctx.dlist(target, offsets, "
				     "lengths))"
				   : "the DList is closed");
		return NULL;
	}
	return d;
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
				  "notify", "timeout_ms", "timeout", NULL };
	PyObject *o_l, *o_r, *o_li = Py_None, *o_ri = Py_None;
	PyObject *o_notify = Py_None, *res = NULL;
	PyObject *o_ms = NULL, *o_secs = NULL;
	const char *fn = op == XFER_OP_WRITE_DLIST ? "write_dlist"
						   : "read_dlist";
	int64_t timeout_ms;
	struct notify_arg notify;
	uint32_t *li = NULL, *ri = NULL;
	DListObject *l, *r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOOO$O", kwlist, &o_l,
					 &o_r, &o_li, &o_ri, &o_notify, &o_ms,
					 &o_secs) ||
	    arg_timeout(o_secs, o_ms, fn, false, &timeout_ms))
		return NULL;
	if (!(l = dlist_of(c, o_l, "local")) ||
	    !(r = dlist_of(c, o_r, "remote")) ||
	    (o_notify != Py_None && arg_notify(o_notify, "notify", &notify)))
		return NULL;
	if (op == XFER_OP_READ_DLIST ? l->readonly : r->readonly)
		return readonly_error(fn, op == XFER_OP_READ_DLIST ? "local"
								   : "remote");
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
				PyErr_Format(IndexRangeError,
					     "local_idx[%zd] = %u is also the "
					     "remote index (no remote_idx): the "
					     "remote list has %u entries", k,
					     li[k], (unsigned)r->count);
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
			err = notify_apply(c->ctx, sqe, &notify);
		xfer_sqe_set_timeout(sqe, (uint32_t)timeout_ms);
	}
	res = submit_end(c, (uint32_t)idx, err);
out:
	PyMem_Free(li);
	PyMem_Free(ri);
	return res;
}

PyObject *Context_write_dlist(ContextObject *c, PyObject *args,
			      PyObject *kw)
{
	return rw_dlist(c, XFER_OP_WRITE_DLIST, args, kw);
}

PyObject *Context_read_dlist(ContextObject *c, PyObject *args,
			     PyObject *kw)
{
	return rw_dlist(c, XFER_OP_READ_DLIST, args, kw);
}
