/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpulib.c - helpers for the GPU test programs.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "gpulib.h"
#include "common/token_codec.h"

/* Host copies of device memory go in pieces of this size. */
#define STAGE_MAX (64u << 20)

int gl_require_gpus(int min_gpus)
{
	int n = 0;

	/* Look for the driver before the runtime does: where there is none
	 * the runtime is never started. */
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		printf("skip: no CUDA driver here (%s)\n",
		       dlerror());
		exit(TL_SKIP);
	}
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0) {
		printf("skip: no GPU here (%s)\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		exit(TL_SKIP);
	}
	if (n < min_gpus) {
		printf("skip: %d GPU%s here, this test needs %d\n", n,
		       n == 1 ? "" : "s", min_gpus);
		exit(TL_SKIP);
	}
	return n;
}

/* --- the driver API for VMM memory, through the runtime's lookup --- */

static struct {
	__typeof__(cuMemCreate) *create;
	__typeof__(cuMemAddressReserve) *reserve;
	__typeof__(cuMemAddressFree) *address_free;
	__typeof__(cuMemMap) *map;
	__typeof__(cuMemUnmap) *unmap;
	__typeof__(cuMemSetAccess) *set_access;
	__typeof__(cuMemRelease) *release;
	__typeof__(cuMemGetAllocationGranularity) *granularity;
} drv;

#define DRV_SYM(name, field) { name, offsetof(__typeof__(drv), field) }

static void drv_load(void)
{
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
		DRV_SYM("cuMemCreate", create),
		DRV_SYM("cuMemAddressReserve", reserve),
		DRV_SYM("cuMemAddressFree", address_free),
		DRV_SYM("cuMemMap", map),
		DRV_SYM("cuMemUnmap", unmap),
		DRV_SYM("cuMemSetAccess", set_access),
		DRV_SYM("cuMemRelease", release),
		DRV_SYM("cuMemGetAllocationGranularity", granularity),
	};

	if (drv.create)
		return;
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		enum cudaDriverEntryPointQueryResult q;
		void *fn = NULL;
		GL_CK(cudaGetDriverEntryPointByVersion(syms[i].name, &fn, 12000,
						       cudaEnableDefault, &q));
		T_ASSERT(q == cudaDriverEntryPointSuccess && fn,
			 "driver entry point %s not found", syms[i].name);
		memcpy((char *)&drv + syms[i].off, &fn, sizeof(fn));
	}
}

#define DRV_CK(expr)                                                          \
	do {                                                                  \
		CUresult r_ = (expr);                                         \
		T_ASSERT(r_ == CUDA_SUCCESS, "%s -> CUDA error %d", #expr,    \
			 (int)r_);                                            \
	} while (0)

static CUmemAllocationProp vmm_prop(const struct gl_buf *b)
{
	return (CUmemAllocationProp){
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
			      .id = b->dev },
		.requestedHandleTypes =
			b->kind == GL_VMM ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
					  : CU_MEM_HANDLE_TYPE_NONE,
	};
}

/* Create physical memory for b and map it at b->va. */
static void vmm_map(struct gl_buf *b)
{
	CUmemAllocationProp prop = vmm_prop(b);
	CUmemGenericAllocationHandle h;
	CUmemAccessDesc access = {
		.location = prop.location,
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};

	DRV_CK(drv.create(&h, b->va_len, &prop, 0));
	DRV_CK(drv.map((CUdeviceptr)b->va, b->va_len, 0, h, 0));
	DRV_CK(drv.set_access((CUdeviceptr)b->va, b->va_len, &access, 1));
	b->vmm_handle = h;
}

static void vmm_unmap(struct gl_buf *b)
{
	DRV_CK(drv.unmap((CUdeviceptr)b->va, b->va_len));
	DRV_CK(drv.release(b->vmm_handle));
	b->vmm_handle = 0;
}

static void vmm_alloc(struct gl_buf *b)
{
	CUmemAllocationProp prop = vmm_prop(b);
	CUdeviceptr va;
	size_t gran;

	drv_load();
	DRV_CK(drv.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	b->va_len = (b->len + gran - 1) / gran * gran;
	DRV_CK(drv.reserve(&va, b->va_len, 0, 0, 0));
	b->va = va;
	vmm_map(b);
	b->ptr = (uint8_t *)(uintptr_t)va;
}

void gl_vmm_remap(struct gl_buf *b)
{
	T_ASSERT(b->kind == GL_VMM || b->kind == GL_VMM_NOFD,
		 "remap of a %s buffer", gl_kind_name(b->kind));
	GL_CK(cudaSetDevice(b->dev));
	vmm_unmap(b);
	vmm_map(b);
}

/* --- buffers --- */

const char *gl_kind_name(enum gl_kind kind)
{
	switch (kind) {
	case GL_DEVICE: return "cudaMalloc";
	case GL_VMM: return "vmm";
	case GL_VMM_NOFD: return "vmm-without-fd";
	case GL_HOST_MEMFD: return "host-memfd";
	case GL_HOST_MALLOC: return "host-malloc";
	case GL_PINNED: return "cudaMallocHost";
	case GL_MANAGED: return "cudaMallocManaged";
	case GL_POOL: return "cudaMallocAsync";
	}
	return "?";
}

bool gl_kind_is_gpu(enum gl_kind kind)
{
	return kind == GL_DEVICE || kind == GL_VMM || kind == GL_VMM_NOFD ||
	       kind == GL_MANAGED || kind == GL_POOL;
}

void gl_alloc(struct xfer_ctx *ctx, enum gl_kind kind, int dev, size_t len,
	      struct gl_buf *b)
{
	void *p = NULL;

	*b = (struct gl_buf){ .kind = kind, .dev = dev, .len = len };
	if (kind != GL_HOST_MEMFD && kind != GL_HOST_MALLOC) {
		GL_CK(cudaSetDevice(dev));
		GL_CK(cudaFree(NULL));  /* the primary context, now */
	}
	switch (kind) {
	case GL_DEVICE:
		GL_CK(cudaMalloc(&p, len));
		break;
	case GL_VMM:
	case GL_VMM_NOFD:
		vmm_alloc(b);
		p = b->ptr;
		break;
	case GL_HOST_MEMFD:
		T_OK(xfer_alloc_host(ctx, len, &b->mem));
		b->handle = xfer_mem_handle(b->mem);
		p = xfer_mem_ptr(b->mem);
		break;
	case GL_HOST_MALLOC:
		p = malloc(len);
		T_ASSERT(p, "malloc %zu", len);
		break;
	case GL_PINNED:
		GL_CK(cudaMallocHost(&p, len));
		break;
	case GL_MANAGED:
		GL_CK(cudaMallocManaged(&p, len, cudaMemAttachGlobal));
		break;
	case GL_POOL:
		GL_CK(cudaMallocAsync(&p, len, 0));
		GL_CK(cudaStreamSynchronize(0));
		break;
	}
	b->ptr = p;
}

int gl_reg(struct xfer_ctx *ctx, struct gl_buf *b)
{
	if (b->kind == GL_HOST_MEMFD)
		return 0;
	int rc = xfer_reg(ctx, b->ptr, b->len, &b->mem);
	if (rc == 0) {
		T_ASSERT(xfer_mem_ptr(b->mem) == b->ptr &&
			 xfer_mem_len(b->mem) == b->len, "xfer_mem_ptr/len");
		b->handle = xfer_mem_handle(b->mem);
	} else {
		b->mem = NULL;
	}
	return rc;
}

void gl_buf_alloc(struct xfer_ctx *ctx, enum gl_kind kind, int dev,
		  size_t len, struct gl_buf *b)
{
	gl_alloc(ctx, kind, dev, len, b);
	int rc = gl_reg(ctx, b);
	T_ASSERT(rc == 0, "registering %zu bytes of %s memory on GPU %d: %s",
		 len, gl_kind_name(kind), dev, xfer_strerror(rc));
}

void gl_buf_free(struct xfer_ctx *ctx, struct gl_buf *b, bool dereg)
{
	if (b->kind == GL_HOST_MEMFD) {
		T_OK(xfer_free_host(ctx, b->mem));
		*b = (struct gl_buf){ 0 };
		return;
	}
	if (b->mem && dereg)
		T_OK(xfer_dereg(ctx, b->mem));
	if (b->kind != GL_HOST_MALLOC)
		GL_CK(cudaSetDevice(b->dev));
	switch (b->kind) {
	case GL_DEVICE:
	case GL_MANAGED:
		GL_CK(cudaFree(b->ptr));
		break;
	case GL_POOL:
		GL_CK(cudaFreeAsync(b->ptr, 0));
		GL_CK(cudaStreamSynchronize(0));
		break;
	case GL_VMM:
	case GL_VMM_NOFD:
		vmm_unmap(b);
		DRV_CK(drv.address_free((CUdeviceptr)b->va, b->va_len));
		break;
	case GL_HOST_MALLOC:
		free(b->ptr);
		break;
	case GL_PINNED:
		GL_CK(cudaFreeHost(b->ptr));
		break;
	case GL_HOST_MEMFD:
		break;
	}
	*b = (struct gl_buf){ 0 };
}

static bool on_host(const struct gl_buf *b)
{
	return !gl_kind_is_gpu(b->kind) || b->kind == GL_MANAGED;
}

void gl_fill(struct gl_buf *b, uint64_t off, uint64_t len, uint64_t seed,
	     uint64_t pos)
{
	T_ASSERT(off <= b->len && len <= b->len - off, "fill outside buffer");
	if (on_host(b)) {
		tl_fill_at(b->ptr + off, len, seed, pos);
		return;
	}
	size_t n = len < STAGE_MAX ? len : STAGE_MAX;
	uint8_t *stage = malloc(n ? n : 1);
	T_ASSERT(stage, "malloc %zu", n);
	GL_CK(cudaSetDevice(b->dev));
	for (uint64_t done = 0; done < len; done += n) {
		n = len - done < STAGE_MAX ? len - done : STAGE_MAX;
		tl_fill_at(stage, n, seed, pos + done);
		GL_CK(cudaMemcpy(b->ptr + off + done, stage, n,
				 cudaMemcpyDefault));
	}
	/* From pageable memory cudaMemcpy may return before its bytes are
	 * in device memory: xferd, another process, must not see old ones. */
	GL_CK(cudaDeviceSynchronize());
	free(stage);
}

size_t gl_check(struct gl_buf *b, uint64_t off, uint64_t len, uint64_t seed,
		uint64_t pos)
{
	size_t bad = 0;

	T_ASSERT(off <= b->len && len <= b->len - off, "check outside buffer");
	if (on_host(b))
		return tl_check_at(b->ptr + off, len, seed, pos);
	size_t n = len < STAGE_MAX ? len : STAGE_MAX;
	uint8_t *stage = malloc(n ? n : 1);
	T_ASSERT(stage, "malloc %zu", n);
	GL_CK(cudaSetDevice(b->dev));
	for (uint64_t done = 0; done < len && !bad; done += n) {
		n = len - done < STAGE_MAX ? len - done : STAGE_MAX;
		GL_CK(cudaMemcpy(stage, b->ptr + off + done, n,
				 cudaMemcpyDefault));
		size_t r = tl_check_at(stage, n, seed, pos + done);
		if (r)
			bad = done + r;
	}
	free(stage);
	return bad;
}

size_t gl_export(const struct gl_buf *b, uint64_t off, uint64_t len,
		 void *tok)
{
	size_t n = XFER_TOKEN_MAX;

	T_OK(xfer_export(b->mem, off, len, tok, &n));
	return n;
}

uint32_t gl_token_mem_kind(const void *tok, size_t len)
{
	struct token t;

	T_OK(token_decode(tok, len, &t));
	return t.mem_kind;
}

size_t gl_dev_free(int dev)
{
	size_t free_b, total;

	GL_CK(cudaSetDevice(dev));
	GL_CK(cudaMemGetInfo(&free_b, &total));
	return free_b;
}

/* --- one transfer --- */

struct xfer_sqe *gl_get_sqe(struct xfer_ctx *ctx)
{
	return tl_get_sqe(ctx);
}

struct xfer_cqe gl_rw(struct xfer_ctx *ctx, unsigned op, uint64_t local,
		      uint64_t local_off, uint64_t remote, uint64_t remote_off,
		      uint64_t len)
{
	static uint64_t seq = 1;
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);
	struct xfer_cqe *c;

	T_ASSERT(sqe, "no free SQE");
	xfer_prep_rw(sqe, op, local, local_off, remote, remote_off, len, ++seq);
	T_ASSERT(xfer_submit(ctx) == 1, "xfer_submit");
	int rc = xfer_wait_cqe(ctx, &c, 30000);
	T_ASSERT(rc == 0, "waiting for a CQE: %s", xfer_strerror(rc));
	struct xfer_cqe copy = *c;
	xfer_cq_advance(ctx, 1);
	T_ASSERT(copy.user_data == seq, "CQE for %llu, expected %llu",
		 (unsigned long long)copy.user_data, (unsigned long long)seq);
	return copy;
}

void gl_rw_ok(struct xfer_ctx *ctx, unsigned op, uint64_t local,
	      uint64_t local_off, uint64_t remote, uint64_t remote_off,
	      uint64_t len, const char *what)
{
	struct xfer_cqe c = gl_rw(ctx, op, local, local_off, remote,
				  remote_off, len);

	T_ASSERT(c.result == (int64_t)len, "%s: %s of %llu bytes -> %lld (%s)",
		 what, op == XFER_OP_READ ? "read" : "write",
		 (unsigned long long)len, (long long)c.result,
		 c.result < 0 ? xfer_strerror((int)c.result) : "short");
	T_ASSERT(c.path == XFER_PATH_CUDA_IPC, "%s: path %s, expected %s", what,
		 xfer_path_name(c.path), xfer_path_name(XFER_PATH_CUDA_IPC));
}

/* --- the owner process --- */

enum owner_op {
	OP_ALLOC = 1,
	OP_EXPORT,
	OP_FILL,
	OP_CHECK,
	OP_FREE,
	OP_VMM_REMAP,
	OP_FLOOD,
	OP_QUIT,
};

struct owner_cmd {
	uint32_t op;
	int32_t idx;
	uint32_t kind;
	int32_t dev;
	uint64_t off, len, seed, pos;
};

struct owner_reply {
	int64_t rc;
	uint64_t val;
};

static void owner_main(const char *socket, int in, int out)
{
	static struct gl_buf bufs[GL_OWNER_MAX];
	struct xfer_ctx *ctx = NULL;
	int n = 0;

	T_OK(xfer_open(socket, &ctx));
	for (;;) {
		struct owner_cmd c;
		struct owner_reply r = { 0 };
		uint8_t tok[XFER_TOKEN_MAX];

		tl_read_full(in, &c, sizeof(c));
		if (c.op == OP_QUIT)
			break;
		T_ASSERT(c.op == OP_ALLOC || (c.idx >= 0 && c.idx < n &&
					      bufs[c.idx].ptr),
			 "owner: no region %d", c.idx);
		struct gl_buf *b = c.op == OP_ALLOC ? NULL : &bufs[c.idx];
		switch (c.op) {
		case OP_ALLOC:
			T_ASSERT(n < GL_OWNER_MAX, "owner: too many regions");
			b = &bufs[n];
			gl_alloc(ctx, (enum gl_kind)c.kind, c.dev, c.len, b);
			r.rc = gl_reg(ctx, b);
			if (r.rc) {
				gl_buf_free(ctx, b, false);
			} else {
				r.rc = n++;
				r.val = (uint64_t)(uintptr_t)b->ptr;
			}
			break;
		case OP_EXPORT: {
			size_t len = gl_export(b, c.off, c.len, tok);
			tl_send_blob(out, tok, len);
			continue;
		}
		case OP_FILL:
			gl_fill(b, c.off, c.len, c.seed, c.pos);
			break;
		case OP_CHECK:
			r.val = gl_check(b, c.off, c.len, c.seed, c.pos);
			break;
		case OP_FREE:
			if (b->kind == GL_HOST_MEMFD) {
				r.rc = xfer_free_host(ctx, b->mem);
				*b = (struct gl_buf){ 0 };
				break;
			}
			/* Without dereg the registration outlives the
			 * memory, as in a program that forgot it. */
			if (c.len && b->mem)
				r.rc = xfer_dereg(ctx, b->mem);
			b->mem = NULL;
			gl_buf_free(ctx, b, false);
			break;
		case OP_FLOOD: {
			/* Writes of region idx to a token, submitted and not
			 * waited for: the test kills this process with them
			 * out. */
			struct xfer_remote *rem;
			size_t tlen = tl_recv_blob(in, tok, sizeof(tok));
			T_OK(xfer_import(ctx, tok, tlen, &rem));
			for (uint64_t i = 0; i < c.pos; i++) {
				struct xfer_sqe *sqe = xfer_get_sqe(ctx);
				if (!sqe)
					break;
				xfer_prep_rw(sqe, XFER_OP_WRITE, b->handle, 0,
					     xfer_remote_handle(rem), 0, c.len,
					     i + 1);
				r.rc++;
			}
			T_ASSERT(xfer_submit(ctx) == (int)r.rc, "owner: submit");
			break;
		}
		case OP_VMM_REMAP:
			if (b->mem)
				T_OK(xfer_dereg(ctx, b->mem));
			b->mem = NULL;
			gl_vmm_remap(b);
			r.rc = gl_reg(ctx, b);
			break;
		default:
			T_ASSERT(0, "owner: unknown command %u", c.op);
		}
		tl_write_full(out, &r, sizeof(r));
	}
	xfer_close(ctx);
}

void gl_owner_entry(int argc, char **argv)
{
	if (argc != 5 || strcmp(argv[1], "--gl-owner") != 0)
		return;
	owner_main(argv[2], atoi(argv[3]), atoi(argv[4]));
	exit(0);
}

void gl_owner_start(struct gl_owner *o, const char *socket)
{
	int to[2], from[2];

	if (!socket)
		socket = tl_socket();
	T_ASSERT(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0,
		 "pipe: %s", strerror(errno));
	o->pid = tl_fork();
	if (o->pid == 0) {
		char in[16], out[16];
		/* A fresh image: CUDA cannot be used across fork. */
		fcntl(to[0], F_SETFD, 0);
		fcntl(from[1], F_SETFD, 0);
		snprintf(in, sizeof(in), "%d", to[0]);
		snprintf(out, sizeof(out), "%d", from[1]);
		char *const args[] = { "gpu-owner", "--gl-owner",
				       (char *)socket, in, out, NULL };
		execv("/proc/self/exe", args);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	o->to = to[1];
	o->from = from[0];
}

static struct owner_reply owner_call(struct gl_owner *o,
				     const struct owner_cmd *c)
{
	struct owner_reply r;

	tl_write_full(o->to, c, sizeof(*c));
	tl_read_full(o->from, &r, sizeof(r));
	return r;
}

int gl_owner_alloc(struct gl_owner *o, enum gl_kind kind, int dev,
		   size_t len, uint64_t *ptr)
{
	struct owner_reply r = owner_call(o, &(struct owner_cmd){
		.op = OP_ALLOC, .kind = kind, .dev = dev, .len = len });

	if (ptr)
		*ptr = r.val;
	return (int)r.rc;
}

size_t gl_owner_export(struct gl_owner *o, int idx, uint64_t off,
		       uint64_t len, void *tok)
{
	struct owner_cmd c = { .op = OP_EXPORT, .idx = idx, .off = off,
			       .len = len };

	tl_write_full(o->to, &c, sizeof(c));
	return tl_recv_blob(o->from, tok, XFER_TOKEN_MAX);
}

void gl_owner_fill(struct gl_owner *o, int idx, uint64_t off, uint64_t len,
		   uint64_t seed, uint64_t pos)
{
	owner_call(o, &(struct owner_cmd){ .op = OP_FILL, .idx = idx,
					   .off = off, .len = len,
					   .seed = seed, .pos = pos });
}

size_t gl_owner_check(struct gl_owner *o, int idx, uint64_t off,
		      uint64_t len, uint64_t seed, uint64_t pos)
{
	return (size_t)owner_call(o, &(struct owner_cmd){
		.op = OP_CHECK, .idx = idx, .off = off, .len = len,
		.seed = seed, .pos = pos }).val;
}

int gl_owner_free(struct gl_owner *o, int idx, bool dereg)
{
	return (int)owner_call(o, &(struct owner_cmd){
		.op = OP_FREE, .idx = idx, .len = dereg }).rc;
}

int gl_owner_vmm_remap(struct gl_owner *o, int idx)
{
	return (int)owner_call(o, &(struct owner_cmd){ .op = OP_VMM_REMAP,
						       .idx = idx }).rc;
}

int gl_owner_flood(struct gl_owner *o, int idx, const void *tok,
		   size_t tlen, uint64_t len, unsigned count)
{
	tl_write_full(o->to, &(struct owner_cmd){ .op = OP_FLOOD, .idx = idx,
						  .len = len, .pos = count },
		      sizeof(struct owner_cmd));
	tl_send_blob(o->to, tok, tlen);
	struct owner_reply r;
	tl_read_full(o->from, &r, sizeof(r));
	return (int)r.rc;
}

void gl_owner_stop(struct gl_owner *o)
{
	tl_write_full(o->to, &(struct owner_cmd){ .op = OP_QUIT },
		      sizeof(struct owner_cmd));
	int status = tl_child_wait(o->pid, 30000);
	close(o->to);
	close(o->from);
	T_ASSERT(status == 0, "GPU region owner exited with %d", status);
}

void gl_owner_kill(struct gl_owner *o)
{
	kill(o->pid, SIGKILL);
	tl_child_wait(o->pid, 10000);
	close(o->to);
	close(o->from);
}

/* --- sub-ranges --- */

/* The owner's bytes around [a, b) of a region of rlen bytes. */
static void check_window(struct gl_owner *o, int idx, uint64_t rlen,
			 uint64_t a, uint64_t b, uint64_t seed, uint64_t bg,
			 const char *what)
{
	const uint64_t lo = a > 4096 ? a - 4096 : 0;
	const uint64_t hi = rlen - b > 4096 ? b + 4096 : rlen;
	size_t bad;

	bad = gl_owner_check(o, idx, lo, a - lo, bg, lo);
	T_ASSERT(!bad, "%s: byte %llu before the range was written", what,
		 (unsigned long long)(lo + bad - 1));
	bad = gl_owner_check(o, idx, a, b - a, seed, 0);
	T_ASSERT(!bad, "%s: byte %llu of the range is wrong", what,
		 (unsigned long long)(bad - 1));
	bad = gl_owner_check(o, idx, b, hi - b, bg, b);
	T_ASSERT(!bad, "%s: byte %llu after the range was written", what,
		 (unsigned long long)(b + bad - 1));
}

void gl_subranges(struct xfer_ctx *ctx, struct gl_owner *o, int idx,
		  uint64_t rlen, struct gl_buf *src, struct gl_buf *dst,
		  const char *what)
{
	/* Token [off, off + len); data at roff in it, from src + loff. */
	const struct {
		uint64_t off, len, roff, loff;
	} cases[] = {
		{ 0, 1, 0, 0 },
		{ 1, 1, 0, 7 },
		{ 4095, 65537, 3, 1 },
		{ rlen / 2 + 3, rlen / 4 + 1, 1, 4093 },
		{ rlen - 7, 7, 2, 5 },
		{ 12345, rlen - 12345 - 1, 0, 3 },
	};

	T_ASSERT(src->len >= rlen + 8 && dst->len >= rlen + 8,
		 "sub-range buffers too small");
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint64_t off = cases[i].off, len = cases[i].len;
		const uint64_t roff = cases[i].roff, loff = cases[i].loff;
		const uint64_t n = len - roff, a = off + roff, b = a + n;
		const uint64_t seed = 0x5b000 + i, bg = ~seed;
		uint8_t tok[XFER_TOKEN_MAX];
		struct xfer_remote *rem;
		char w[160];

		snprintf(w, sizeof(w), "%s, token [%llu, +%llu) at +%llu, "
			 "%llu bytes", what, (unsigned long long)off,
			 (unsigned long long)len, (unsigned long long)roff,
			 (unsigned long long)n);
		gl_owner_fill(o, idx, a > 4096 ? a - 4096 : 0,
			      (rlen - b > 4096 ? b + 4096 : rlen) -
				      (a > 4096 ? a - 4096 : 0),
			      bg, a > 4096 ? a - 4096 : 0);
		gl_fill(src, loff, n, seed, 0);
		size_t tlen = gl_owner_export(o, idx, off, len, tok);
		T_OK(xfer_import(ctx, tok, tlen, &rem));
		T_ASSERT(xfer_remote_len(rem) == len, "%s: token length %llu",
			 w, (unsigned long long)xfer_remote_len(rem));
		const uint64_t rh = xfer_remote_handle(rem);

		gl_rw_ok(ctx, XFER_OP_WRITE, src->handle, loff, rh, roff, n, w);
		check_window(o, idx, rlen, a, b, seed, bg, w);

		gl_fill(dst, loff + 1, n, bg, 0);
		gl_rw_ok(ctx, XFER_OP_READ, dst->handle, loff + 1, rh, roff, n,
			 w);
		size_t bad = gl_check(dst, loff + 1, n, seed, 0);
		T_ASSERT(!bad, "%s: read back, byte %zu", w, bad - 1);

		/* One byte more than the token grants. */
		struct xfer_cqe c = gl_rw(ctx, XFER_OP_WRITE, src->handle,
					  loff, rh, roff, n + 1);
		T_ASSERT(c.result == -ERANGE, "%s: one byte past the token "
			 "-> %lld, expected -ERANGE", w, (long long)c.result);
		T_OK(xfer_unimport(ctx, rem));
	}
	printf("%s: unaligned sub-ranges ok\n", what);
}
