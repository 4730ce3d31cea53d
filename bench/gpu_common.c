/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_common.c - what the GPU benchmarks share (gpu_common.h says what).
 * One thread; no state of its own.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "gpu_common.h"

#define WAIT_MS 20000

void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", gpu_bench_name);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void *gpu_find(int *ngpus)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!cuda) {
		printf("skip: no CUDA driver here (%s)\n", dlerror());
		return NULL;
	}
	*ngpus = 0;
	cudaError_t e = cudaGetDeviceCount(ngpus);
	if (e != cudaSuccess || *ngpus == 0) {
		printf("skip: no GPU here (%s)\n",
		       e ? cudaGetErrorString(e) : "0 devices");
		return NULL;
	}
	return cuda;
}

/* --- the other process --- */

void full_io(int fd, void *buf, size_t len, bool wr)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("pipe %s: %s", wr ? "write" : "read",
			    n ? strerror(errno) : "the other process has gone");
		p += n;
		len -= (size_t)n;
	}
}

void owner_start(struct owner *o, const char *argv0, const char *socket)
{
	int to[2], from[2];

	if (pipe(to) || pipe(from))
		die("pipe: %s", strerror(errno));
	fflush(NULL);
	o->pid = fork();
	if (o->pid < 0)
		die("fork: %s", strerror(errno));
	if (o->pid == 0) {
		char in[16], out[16];
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(to[1]);
		close(from[0]);
		snprintf(in, sizeof(in), "%d", to[0]);
		snprintf(out, sizeof(out), "%d", from[1]);
		char *const args[] = { (char *)argv0, "--owner",
				       (char *)socket, in, out, NULL };
		execv("/proc/self/exe", args);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	o->to = to[1];
	o->from = from[0];
}

void owner_main(const char *socket, int in, int out, int fill)
{
	struct xfer_ctx *ctx;
	struct xfer_mem *mem = NULL;  /* the last allocation, for OWNER_FREE */
	void *p = NULL;               /* its GPU memory (NULL: a host memfd) */
	int rc = xfer_open(*socket ? socket : NULL, &ctx);

	if (rc)
		die("owner: xfer_open: %s", xfer_strerror(rc));
	for (;;) {
		struct owner_cmd c;
		struct owner_reply r = { 0 };
		size_t tl = sizeof(r.tok);

		full_io(in, &c, sizeof(c), false);
		if (c.quit == OWNER_EXIT)
			break;
		if (c.quit == OWNER_FREE) {
			if (mem && p)
				xfer_dereg(ctx, mem);
			else if (mem)
				xfer_free_host(ctx, mem);
			if (p)
				CK(cudaFree(p));
			mem = NULL;
			p = NULL;
			full_io(out, &r, sizeof(r), true);
			continue;
		}
		/* An allocation not freed before stays until the process
		 * goes. */
		mem = NULL;
		p = NULL;
		if (c.dev < 0) {
			r.rc = xfer_alloc_host(ctx, c.len, &mem);
		} else {
			CK(cudaSetDevice(c.dev));
			CK(cudaMalloc(&p, c.len));
			CK(cudaMemset(p, fill, c.len));
			CK(cudaDeviceSynchronize());
			r.rc = xfer_reg(ctx, p, c.len, &mem);
		}
		if (r.rc == 0)
			r.rc = xfer_export(mem, 0, c.len, r.tok, &tl);
		r.tok_len = (uint32_t)tl;
		full_io(out, &r, sizeof(r), true);
	}
	/* Everything it holds goes with the process. */
	xfer_close(ctx);
}

int owner_ask(struct owner *o, struct owner_cmd c, struct owner_reply *r)
{
	full_io(o->to, &c, sizeof(c), true);
	if (c.quit == OWNER_EXIT)
		return 0;
	full_io(o->from, r, sizeof(*r), false);
	return r->rc;
}

void owner_stop(struct owner *o)
{
	owner_ask(o, (struct owner_cmd){ .quit = OWNER_EXIT }, NULL);
	waitpid(o->pid, NULL, 0);
}

/* --- through xferd --- */

int wait_cqe(struct xfer_ctx *ctx, struct xfer_cqe *out)
{
	struct xfer_cqe *c;
	int rc = xfer_wait_cqe(ctx, &c, WAIT_MS);

	if (rc)
		return rc;
	*out = *c;
	xfer_cq_advance(ctx, 1);
	return 0;
}

int make_list(struct xfer_ctx *ctx, uint64_t handle, uint64_t slots,
	      uint64_t blk, struct xfer_dlist **out)
{
	uint64_t *off = malloc(slots * sizeof(*off));
	if (!off)
		return -ENOMEM;
	for (uint64_t i = 0; i < slots; i++)
		off[i] = i * blk;
	int rc = xfer_dlist_create(ctx, handle, (uint32_t)slots, off, NULL,
				   blk, out);
	free(off);
	return rc;
}

/* --- CUDA in one process --- */

void enable_peer(int a, int b)
{
	int can = 0;

	if (a == b)
		return;
	CK(cudaDeviceCanAccessPeer(&can, a, b));
	if (!can) {
		printf("note: GPU %d cannot access GPU %d directly\n", a, b);
		return;
	}
	CK(cudaSetDevice(a));
	cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
	if (e == cudaErrorPeerAccessAlreadyEnabled)
		cudaGetLastError();
	else
		CK(e);
}

void direct_copy_runs(int sdev, int ddev, uint64_t len, unsigned per_run,
		      unsigned reps, double *ns)
{
	void *a, *b;
	cudaStream_t st;
	const int sdev_gpu = sdev < 0 ? ddev : sdev;

	if (ddev >= 0) {
		CK(cudaSetDevice(ddev));
		CK(cudaMalloc(&b, len));
	} else {
		CK(cudaMallocHost(&b, len));
	}
	if (sdev >= 0) {
		CK(cudaSetDevice(sdev));
		CK(cudaMalloc(&a, len));
		CK(cudaMemset(a, 0x5a, len));
	} else {
		CK(cudaMallocHost(&a, len));
		memset(a, 0x5a, len);
	}
	CK(cudaSetDevice(sdev_gpu));
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	for (unsigned r = 0; r < reps + 1; r++) {
		uint64_t t0 = now_ns();
		for (unsigned i = 0; i < per_run; i++) {
			if (sdev >= 0 && ddev >= 0 && sdev != ddev)
				CK(cudaMemcpyPeerAsync(b, ddev, a, sdev, len,
						       st));
			else
				CK(cudaMemcpyAsync(b, a, len, cudaMemcpyDefault,
						   st));
		}
		CK(cudaStreamSynchronize(st));
		/* The first run is the warm-up. */
		if (r)
			ns[r - 1] = (double)(now_ns() - t0);
	}
	CK(cudaStreamDestroy(st));
	if (sdev >= 0) {
		CK(cudaSetDevice(sdev));
		CK(cudaFree(a));
	} else {
		CK(cudaFreeHost(a));
	}
	if (ddev >= 0) {
		CK(cudaSetDevice(ddev));
		CK(cudaFree(b));
	} else {
		CK(cudaFreeHost(b));
	}
}
