/* SPDX-License-Identifier: Apache-2.0 */
/*
 * copy.c - same-node copies that involve GPU memory.
 *
 * Copies are queued during a pass over the rings and launched together
 * (gpu_copies_flush): many small device-to-device copies of one GPU go as
 * a single batch-copy kernel, the rest as cuMemcpyAsync on the GPU's
 * streams, and copies of 64 MiB or more are split over all streams so
 * that several copy engines work on them.  Every launch records an event;
 * the progress thread polls the events (never a blocking sync) and ends
 * the operations whose copies are all done.
 *
 * Classes (core/traffic_class.h): copies of latency-class operations are
 * queued apart and launched first, on the GPU's high-priority stream
 * (gpu.c), so that the GPU runs their work ahead of what bulk streams
 * have queued (a 1 GiB copy is thousands of blocks; the scheduler picks
 * the high-priority stream's blocks as soon as it has room).  Without
 * stream priorities they take the bulk streams as every copy did.
 *
 * Progress thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/cuda_drv.h"
#include "core/log.h"
#include "core/xop.h"
#include "xfer_ring.h"

#ifdef HAVE_CUDA
#include "gpu/kernel.h"

#ifdef HAVE_NVCC
/* The fatbin of gpu/kernel.cu, embedded at build time. */
extern const unsigned char xferd_copy_fatbin[];
#endif

#define SPLIT_BYTES  (64ull << 20)   /* split copies this large */
#define KERNEL_MAX_LEN (4ull << 20)  /* larger blocks: cuMemcpyAsync */
#define DESC_SLOTS   32u              /* kernel launches in flight per GPU */
#define PAIR_SLOTS   8u               /* indexed launches in flight per GPU */

struct pending_copy {
	struct xop *op;
	uint64_t dst, src, len;
	bool device_only;             /* both ends this GPU's: kernel-able */
	int src_dev;                  /* another GPU: a peer copy */
};

/* One event and what ends when it fires. */
struct flight {
	CUevent ev;
	int dev;
	int slot;                     /* descriptor slot to free, or -1 */
	int pair_slot;                /* pair slot to free, or -1 */
	struct xop **ops;
	unsigned nops;
};

/* Copies queued during a pass, launched by gpu_copies_flush. */
struct pending_list {
	struct pending_copy *v;
	unsigned n, cap;
};

/* pend[] of a class: latency apart, the rest (default, bulk) together. */
enum { PEND_BULK, PEND_LATENCY, PEND__COUNT };

struct gpu_copies {
	struct {
		struct pending_list pend[PEND__COUNT];
		unsigned next_stream;
		CUmodule mod;
		CUfunction kernel;        /* NULL: no batch kernel */
		struct copy_desc *descs;  /* pinned, mapped: DESC_SLOTS slots */
		bool slot_busy[DESC_SLOTS];
		CUfunction indexed;       /* NULL: no indexed copies */
		struct copy_pair *pairs;  /* pinned, mapped: PAIR_SLOTS slots */
		/* Pinned, mapped, after the pairs: one word a pair slot, set
		 * by the kernel when a pair of that launch was out of bounds. */
		volatile unsigned *pair_bad;
		bool pair_busy[PAIR_SLOTS];
	} dev[GPU_MAX];
	struct flight *fl;
	unsigned nfl, capfl;
};

static void load_kernel(struct gpu_copies *g, int d)
{
#ifdef HAVE_NVCC
	CUresult r;

	gpu_set_current(d);
	r = cu.module_load_data(&g->dev[d].mod, xferd_copy_fatbin);
	if (!r)
		r = cu.module_get_function(&g->dev[d].kernel, g->dev[d].mod,
					   "xferd_copy_batch");
	if (!r)
		r = cu.mem_host_alloc((void **)&g->dev[d].descs,
				      DESC_SLOTS * COPY_BATCH_MAX *
					      sizeof(struct copy_desc),
				      CU_MEMHOSTALLOC_DEVICEMAP |
					      CU_MEMHOSTALLOC_PORTABLE);
	if (r) {
		log_warnx("GPU %d: no batch-copy kernel (%s); small copies go "
			  "one by one", d, cu_err(r));
		g->dev[d].kernel = NULL;
		return;
	}
	r = cu.module_get_function(&g->dev[d].indexed, g->dev[d].mod,
				   "xferd_copy_indexed");
	if (!r)
		r = cu.mem_host_alloc((void **)&g->dev[d].pairs,
				      (size_t)PAIR_SLOTS * COPY_PAIRS_MAX *
						      sizeof(struct copy_pair) +
					      PAIR_SLOTS * sizeof(unsigned),
				      CU_MEMHOSTALLOC_DEVICEMAP |
					      CU_MEMHOSTALLOC_PORTABLE);
	if (!r)
		g->dev[d].pair_bad = (volatile unsigned *)(void *)
			(g->dev[d].pairs + (size_t)PAIR_SLOTS * COPY_PAIRS_MAX);
	if (r) {
		log_warnx("GPU %d: no indexed-copy kernel (%s); list transfers "
			  "go block by block", d, cu_err(r));
		g->dev[d].indexed = NULL;
	}
#else
	(void)g, (void)d;
#endif
}

struct gpu_copies *gpu_copies_create(void)
{
	if (gpu_count() == 0)
		return NULL;
	struct gpu_copies *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	for (int d = 0; d < gpu_count(); d++)
		load_kernel(g, d);
	return g;
}

void gpu_copies_destroy(struct gpu_copies *g)
{
	if (!g)
		return;
	for (int d = 0; d < gpu_count(); d++) {
		gpu_set_current(d);
		/* Copies in flight finish before their memory goes. */
		for (int s = 0; s < GPU_STREAMS; s++)
			cu.stream_synchronize(gpus[d].streams[s]);
		if (gpus[d].lat_stream)
			cu.stream_synchronize(gpus[d].lat_stream);
		if (g->dev[d].mod)
			cu.module_unload(g->dev[d].mod);
		if (g->dev[d].descs)
			cu.mem_free_host(g->dev[d].descs);
		if (g->dev[d].pairs)
			cu.mem_free_host(g->dev[d].pairs);
		for (int k = 0; k < PEND__COUNT; k++)
			free(g->dev[d].pend[k].v);
	}
	for (unsigned i = 0; i < g->nfl; i++) {
		cu.event_destroy(g->fl[i].ev);
		free(g->fl[i].ops);
	}
	free(g->fl);
	free(g);
}

static bool is_latency(const struct xop *op)
{
	return op->cls == XFER_CLASS_LATENCY;
}

static int push_pending(struct pending_list *pl, const struct pending_copy *pc)
{
	if (pl->n == pl->cap) {
		unsigned cap = pl->cap ? 2 * pl->cap : 64;
		void *v = realloc(pl->v, cap * sizeof(*pl->v));
		if (!v)
			return -ENOMEM;
		pl->v = v;
		pl->cap = cap;
	}
	pl->v[pl->n++] = *pc;
	return 0;
}

static CUstream next_stream(struct gpu_copies *g, int d)
{
	unsigned s = g->dev[d].next_stream++ % GPU_STREAMS;
	return gpus[d].streams[s];
}

/* The stream for a copy of the latency class or not on GPU d: the
 * high-priority one where there is one, else the bulk streams. */
static CUstream class_stream(struct gpu_copies *g, int d, bool latency)
{
	if (latency && gpus[d].lat_stream)
		return gpus[d].lat_stream;
	return next_stream(g, d);
}

/* Record an event on stream s that ends ops[0..n) (ownership of ops). */
static int add_flight(struct gpu_copies *g, int d, CUstream s, int slot,
		      struct xop **ops, unsigned n)
{
	CUevent ev;
	CUresult r = cu.event_create(&ev, CU_EVENT_DISABLE_TIMING);

	if (!r) {
		r = cu.event_record(ev, s);
		if (r)
			cu.event_destroy(ev);
	}
	if (r)
		return -EIO;
	if (g->nfl == g->capfl) {
		unsigned cap = g->capfl ? 2 * g->capfl : 64;
		void *v = realloc(g->fl, cap * sizeof(*g->fl));
		if (!v) {
			/* Wait for it here rather than lose track of it. */
			cu.stream_synchronize(s);
			cu.event_destroy(ev);
			return -ENOMEM;
		}
		g->fl = v;
		g->capfl = cap;
	}
	g->fl[g->nfl++] = (struct flight){ .ev = ev, .dev = d, .slot = slot,
					   .pair_slot = -1, .ops = ops,
					   .nops = n };
	return 0;
}

/* A copy that could not be launched: the op ends through poll like
 * every other, with an error, on an event recorded right away. */
static void fail_op_later(struct gpu_copies *g, int d, struct xop *op)
{
	gpu_op_of(op)->error = -EIO;
	struct xop **one = malloc(sizeof(*one));
	if (one) {
		one[0] = op;
		if (add_flight(g, d, gpus[d].streams[0], -1, one, 1) == 0)
			return;
		free(one);
	}
	log_warnx("GPU %d: an operation could not be tracked", d);
}

/*
 * One copy on stream s of GPU d.  Between two GPUs it is a peer copy
 * between their contexts: the driver then takes the direct path (NVLink,
 * PCIe P2P) where peer access is on, which a plain copy of imported
 * memory does not.
 */
static CUresult launch_copy(int d, int src_dev, uint64_t dst, uint64_t src,
			    uint64_t len, CUstream s)
{
	if (src_dev >= 0 && src_dev != d)
		return cu.memcpy_peer_async(dst, gpus[d].ctx, src,
					    gpus[src_dev].ctx, len, s);
	return cu.memcpy_async(dst, src, len, s);
}

int gpu_copy(struct gpu_copies *g, struct xop *op, uint64_t dst, int dst_dev,
	     uint64_t src, int src_dev, uint64_t len)
{
	/* The destination's GPU runs it (pulling from a peer), or the
	 * source's when the destination is host memory. */
	int d = dst_dev >= 0 ? dst_dev : src_dev;
	int peer_src = dst_dev >= 0 && src_dev >= 0 && src_dev != dst_dev
			       ? src_dev : -1;

	if (!g || d < 0 || d >= gpu_count() || src_dev >= gpu_count())
		return -ENOTSUP;
	bool latency = is_latency(op);
	if (len < SPLIT_BYTES) {
		int err = push_pending(
			&g->dev[d].pend[latency ? PEND_LATENCY : PEND_BULK],
			&(struct pending_copy){
			.op = op, .dst = dst, .src = src, .len = len,
			.device_only = dst_dev >= 0 && src_dev == dst_dev,
			.src_dev = peer_src });
		if (!err)
			gpu_op_of(op)->parts++;
		return err;
	}
	/* Large: one part per stream (latency: all on its own), each its
	 * own event.  Only a part
	 * with an event counts as out: the op ends through poll when the
	 * last of those fires, so with none it must fail here. */
	gpu_set_current(d);
	uint64_t part = (len / GPU_STREAMS + 4095) & ~4095ull;
	unsigned out = 0;
	bool failed = false;
	for (uint64_t off = 0; off < len && !failed; off += part) {
		uint64_t n = len - off < part ? len - off : part;
		CUstream s = class_stream(g, d, latency);
		struct xop **one = malloc(sizeof(*one));
		if (!one || launch_copy(d, peer_src, dst + off, src + off, n, s)) {
			free(one);
			failed = true;
			continue;
		}
		one[0] = op;
		if (add_flight(g, d, s, -1, one, 1)) {
			/* Launched but not tracked: wait for it here. */
			free(one);
			cu.stream_synchronize(s);
			failed = true;
			continue;
		}
		gpu_op_of(op)->parts++;
		out++;
	}
	if (failed && out)
		gpu_op_of(op)->error = -EIO;  /* the parts out end it, failed */
	return out ? 0 : -EIO;  /* none out: the caller ends it now */
}

/* Copies of GPU d that go one by one: all on one stream, one event. */
static void flush_memcpy(struct gpu_copies *g, int d, struct pending_copy *v,
			 unsigned n, bool latency)
{
	CUstream s = class_stream(g, d, latency);
	struct xop **ops = malloc(n * sizeof(*ops));
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		if (launch_copy(d, v[i].src_dev, v[i].dst, v[i].src, v[i].len, s)) {
			fail_op_later(g, d, v[i].op);
			continue;
		}
		if (ops)
			ops[k++] = v[i].op;
	}
	if (!ops || add_flight(g, d, s, -1, ops, k)) {
		/* No event: wait here so the ops can still end. */
		cu.stream_synchronize(s);
		for (unsigned i = 0; ops && i < k; i++)
			fail_op_later(g, d, ops[i]);
		free(ops);
	}
}

static int free_slot(struct gpu_copies *g, int d)
{
	for (unsigned i = 0; i < DESC_SLOTS; i++)
		if (!g->dev[d].slot_busy[i])
			return (int)i;
	return -1;
}

/* Up to COPY_BATCH_MAX device-to-device copies as one kernel launch;
 * false if no slot or the launch failed (then copy them one by one). */
static bool flush_kernel(struct gpu_copies *g, int d, struct pending_copy *v,
			 unsigned n, bool latency)
{
	int slot = free_slot(g, d);
	struct xop **ops = malloc(n * sizeof(*ops));

	if (slot < 0 || !ops) {
		free(ops);
		return false;
	}
	struct copy_desc *desc = g->dev[d].descs + (size_t)slot * COPY_BATCH_MAX;
	for (unsigned i = 0; i < n; i++) {
		desc[i] = (struct copy_desc){ .src = v[i].src, .dst = v[i].dst,
					      .len = v[i].len };
		ops[i] = v[i].op;
	}
	CUstream s = class_stream(g, d, latency);
	/* Mapped pinned memory: with unified addressing the host pointer
	 * is valid on the GPU as well. */
	void *dptr = desc;
	unsigned count = n;
	void *args[] = { &dptr, &count };
	CUresult r = cu.launch_kernel(g->dev[d].kernel, n, 1, 1, COPY_THREADS,
				      1, 1, 0, s, args, NULL);
	if (r) {
		free(ops);
		return false;
	}
	if (add_flight(g, d, s, slot, ops, n)) {
		/* Launched but not tracked: wait, and report what we cannot
		 * vouch for as failed. */
		cu.stream_synchronize(s);
		for (unsigned i = 0; i < n; i++)
			fail_op_later(g, d, ops[i]);
		free(ops);
		return true;
	}
	g->dev[d].slot_busy[slot] = true;
	return true;
}

/* Launch the copies of one pending list of GPU d (current). */
static void flush_list(struct gpu_copies *g, int d, struct pending_list *pl,
		       bool latency)
{
	struct pending_copy *v = pl->v;
	unsigned n = pl->n;
	/* Runs of kernel-able copies, in launches of the batch size. */
	unsigned i = 0;

	while (i < n) {
		unsigned j = i;
		while (j < n && j - i < COPY_BATCH_MAX && v[j].device_only &&
		       v[j].len <= KERNEL_MAX_LEN)
			j++;
		if (j - i >= 2 && g->dev[d].kernel &&
		    flush_kernel(g, d, v + i, j - i, latency)) {
			i = j;
			continue;
		}
		if (j == i)
			j = i + 1;  /* not kernel-able: one by one */
		flush_memcpy(g, d, v + i, j - i, latency);
		i = j;
	}
	pl->n = 0;
}

void gpu_copies_flush(struct gpu_copies *g)
{
	if (!g)
		return;
	for (int d = 0; d < gpu_count(); d++) {
		struct pending_list *pend = g->dev[d].pend;
		if (pend[PEND_LATENCY].n == 0 && pend[PEND_BULK].n == 0)
			continue;
		gpu_set_current(d);
		/* The latency class first: launched before this pass's bulk
		 * copies, on the high-priority stream. */
		flush_list(g, d, &pend[PEND_LATENCY], true);
		flush_list(g, d, &pend[PEND_BULK], false);
	}
}

/* --- prepared lists: indexed copies --- */

struct gpu_list {
	int dev;
	uint32_t n;                   /* entries: the kernel's bound */
	CUdeviceptr off, lens;        /* lens 0: one length for all */
};

int gpu_list_upload(int dev, const uint64_t *off, const uint64_t *lens,
		    uint32_t n, struct gpu_list **out)
{
	if (dev < 0 || dev >= gpu_count() || n == 0)
		return -EINVAL;
	struct gpu_list *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->dev = dev;
	l->n = n;
	size_t bytes = (size_t)n * sizeof(uint64_t);
	CUresult r;
	gpu_set_current(dev);
	if ((r = cu.mem_alloc(&l->off, bytes)) ||
	    (r = cu.memcpy_htod(l->off, off, bytes)) ||
	    (lens && ((r = cu.mem_alloc(&l->lens, bytes)) ||
		      (r = cu.memcpy_htod(l->lens, lens, bytes))))) {
		log_warnx("GPU %d: list of %u entries not uploaded: %s", dev,
			  n, cu_err(r));
		gpu_list_free(l);
		return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	}
	*out = l;
	return 0;
}

void gpu_list_free(struct gpu_list *l)
{
	if (!l)
		return;
	gpu_set_current(l->dev);
	if (l->off)
		cu.mem_free(l->off);
	if (l->lens)
		cu.mem_free(l->lens);
	free(l);
}

struct copy_pair *gpu_pairs_reserve(struct gpu_copies *g, int dev, int *slot)
{
	if (!g || dev < 0 || dev >= gpu_count() || !g->dev[dev].indexed)
		return NULL;
	for (unsigned i = 0; i < PAIR_SLOTS; i++) {
		if (g->dev[dev].pair_busy[i])
			continue;
		g->dev[dev].pair_busy[i] = true;
		*slot = (int)i;
		return g->dev[dev].pairs + (size_t)i * COPY_PAIRS_MAX;
	}
	return NULL;
}

void gpu_pairs_release(struct gpu_copies *g, int dev, int slot)
{
	g->dev[dev].pair_busy[slot] = false;
}

int gpu_copy_indexed(struct gpu_copies *g, struct xop *op, int dev, int slot,
		     uint64_t src_base, const struct gpu_list *src,
		     uint64_t dst_base, const struct gpu_list *dst,
		     uint64_t len, uint32_t n)
{
	struct xop **one = malloc(sizeof(*one));
	/* Mapped pinned memory: the host pointer is valid on the GPU. */
	void *pairs = g->dev[dev].pairs + (size_t)slot * COPY_PAIRS_MAX;
	CUdeviceptr soff = src->off, doff = dst->off, lens = src->lens;
	uint32_t sn = src->n, dn = dst->n;
	unsigned count = n;
	void *bad = (void *)&g->dev[dev].pair_bad[slot];
	void *args[] = { &src_base, &soff, &sn, &dst_base, &doff, &dn, &lens,
			 &len, &pairs, &count, &bad };

	g->dev[dev].pair_bad[slot] = 0;
	gpu_set_current(dev);
	CUstream s = class_stream(g, dev, is_latency(op));
	if (!one || cu.launch_kernel(g->dev[dev].indexed, n, 1, 1,
				     COPY_THREADS, 1, 1, 0, s, args, NULL)) {
		free(one);
		gpu_pairs_release(g, dev, slot);
		return -EIO;
	}
	one[0] = op;
	gpu_op_of(op)->parts++;
	if (add_flight(g, dev, s, -1, one, 1)) {
		/* Launched but not tracked: the kernel reads the slot, so
		 * wait for it here before the slot goes back. */
		cu.stream_synchronize(s);
		free(one);
		gpu_op_of(op)->parts--;
		gpu_pairs_release(g, dev, slot);
		return -EIO;
	}
	g->fl[g->nfl - 1].pair_slot = slot;
	return 0;
}

unsigned gpu_copies_poll(struct gpu_copies *g,
			 void (*done)(void *arg, struct xop *op, int64_t res),
			 void *arg)
{
	unsigned ended = 0;

	if (!g)
		return 0;
	for (unsigned i = 0; i < g->nfl;) {
		struct flight *f = &g->fl[i];
		gpu_set_current(f->dev);
		CUresult r = cu.event_query(f->ev);
		if (r == CUDA_ERROR_NOT_READY) {
			i++;
			continue;
		}
		struct flight fin = *f;
		g->fl[i] = g->fl[--g->nfl];   /* order does not matter */
		cu.event_destroy(fin.ev);
		if (fin.slot >= 0)
			g->dev[fin.dev].slot_busy[fin.slot] = false;
		int err = r == CUDA_SUCCESS ? 0 : -EIO;
		if (fin.pair_slot >= 0) {
			g->dev[fin.dev].pair_busy[fin.pair_slot] = false;
			/* xferd checked every pair before the launch: a pair
			 * the kernel found out of bounds fails the op. */
			if (g->dev[fin.dev].pair_bad[fin.pair_slot]) {
				log_warnx("GPU %d: a list pair out of bounds at "
					  "the kernel", fin.dev);
				err = -ERANGE;
			}
		}
		if (r != CUDA_SUCCESS)
			log_warnx("GPU %d: copy failed: %s", fin.dev, cu_err(r));
		for (unsigned k = 0; k < fin.nops; k++) {
			struct xop *op = fin.ops[k];
			if (err)
				gpu_op_of(op)->error = err;
			if (--gpu_op_of(op)->parts)
				continue;  /* other parts still out */
			int64_t res = gpu_op_of(op)->error ? gpu_op_of(op)->error
						    : (int64_t)op->len;
			if (gpu_op_of(op)->on_done)
				gpu_op_of(op)->on_done(op, res);  /* a staging chunk's */
			else
				done(arg, op, res);
			ended++;
		}
		free(fin.ops);
	}
	return ended;
}

/* Detach op from its client (once), remembering its batch in *abs. */
static void forget_op(struct xop *op, const struct prog_client *pc,
		      struct abatch ***abs, unsigned *nabs, unsigned *cap)
{
	if (op->pc != pc)
		return;
	struct abatch *ab = op->batch;
	op->pc = NULL;
	op->batch = NULL;
	if (!ab)
		return;
	for (unsigned i = 0; i < *nabs; i++)
		if ((*abs)[i] == ab)
			return;
	if (*nabs == *cap) {
		unsigned c = *cap ? 2 * *cap : 8;
		struct abatch **a = realloc(*abs, c * sizeof(*a));
		if (!a) {
			log_warnx("GPU: out of memory forgetting a batch");
			return;
		}
		*abs = a;
		*cap = c;
	}
	(*abs)[(*nabs)++] = ab;
}

void gpu_copies_forget_client(struct gpu_copies *g,
			      const struct prog_client *pc,
			      void (*forget)(void *arg, struct abatch *ab),
			      void *arg)
{
	struct abatch **abs = NULL;
	unsigned nabs = 0, cap = 0;

	if (!g)
		return;
	for (int d = 0; d < gpu_count(); d++)
		for (int k = 0; k < PEND__COUNT; k++)
			for (unsigned i = 0; i < g->dev[d].pend[k].n; i++)
				forget_op(g->dev[d].pend[k].v[i].op, pc, &abs,
					  &nabs, &cap);
	for (unsigned i = 0; i < g->nfl; i++)
		for (unsigned k = 0; k < g->fl[i].nops; k++)
			forget_op(g->fl[i].ops[k], pc, &abs, &nabs, &cap);
	for (unsigned i = 0; i < nabs; i++)
		forget(arg, abs[i]);
	free(abs);
}

bool gpu_copies_busy(const struct gpu_copies *g)
{
	if (!g)
		return false;
	if (g->nfl)
		return true;
	for (int d = 0; d < gpu_count(); d++)
		for (int k = 0; k < PEND__COUNT; k++)
			if (g->dev[d].pend[k].n)
				return true;
	return false;
}

#else /* !HAVE_CUDA */

struct gpu_copies *gpu_copies_create(void)
{
	return NULL;
}

void gpu_copies_destroy(struct gpu_copies *g)
{
	(void)g;
}

int gpu_copy(struct gpu_copies *g, struct xop *op, uint64_t dst, int dst_dev,
	     uint64_t src, int src_dev, uint64_t len)
{
	(void)g, (void)op, (void)dst, (void)dst_dev, (void)src, (void)src_dev;
	(void)len;
	return -ENOTSUP;
}

void gpu_copies_flush(struct gpu_copies *g)
{
	(void)g;
}

unsigned gpu_copies_poll(struct gpu_copies *g,
			 void (*done)(void *arg, struct xop *op, int64_t res),
			 void *arg)
{
	(void)g, (void)done, (void)arg;
	return 0;
}

bool gpu_copies_busy(const struct gpu_copies *g)
{
	(void)g;
	return false;
}

void gpu_copies_forget_client(struct gpu_copies *g,
			      const struct prog_client *pc,
			      void (*forget)(void *arg, struct abatch *ab),
			      void *arg)
{
	(void)g, (void)pc, (void)forget, (void)arg;
}

int gpu_list_upload(int dev, const uint64_t *off, const uint64_t *lens,
		    uint32_t n, struct gpu_list **out)
{
	(void)dev, (void)off, (void)lens, (void)n, (void)out;
	return -ENOTSUP;
}

void gpu_list_free(struct gpu_list *l)
{
	(void)l;
}

struct copy_pair *gpu_pairs_reserve(struct gpu_copies *g, int dev, int *slot)
{
	(void)g, (void)dev, (void)slot;
	return NULL;
}

void gpu_pairs_release(struct gpu_copies *g, int dev, int slot)
{
	(void)g, (void)dev, (void)slot;
}

int gpu_copy_indexed(struct gpu_copies *g, struct xop *op, int dev, int slot,
		     uint64_t src_base, const struct gpu_list *src,
		     uint64_t dst_base, const struct gpu_list *dst,
		     uint64_t len, uint32_t n)
{
	(void)g, (void)op, (void)dev, (void)slot, (void)src_base, (void)src;
	(void)dst_base, (void)dst, (void)len, (void)n;
	return -ENOTSUP;
}
#endif /* HAVE_CUDA */
