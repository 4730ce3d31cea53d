/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem.c - registering memory, exporting and importing tokens.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu.h"
#include "internal.h"

/* ga: the allocation behind a MEM_CUDA region, else NULL.  fd: the
 * memfd, or a VMM allocation's shareable handle, or -1. */
static int reg_request(struct xfer_ctx *ctx, struct xfer_mem *mem, int fd,
		       const struct gpu_alloc *ga)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__RegRequest req = XFER__CLIENT__REG_REQUEST__INIT;
	Xfer__Client__CudaAlloc cuda = XFER__CLIENT__CUDA_ALLOC__INIT;
	Xfer__Client__ClientMsg *r;

	req.kind = mem->kind;
	req.length = mem->len;
	req.addr = (uint64_t)(uintptr_t)mem->ptr;
	if (ga) {
		cuda.device = ga->device;
		cuda.device_uuid.data = (uint8_t *)ga->uuid;
		cuda.device_uuid.len = sizeof(ga->uuid);
		cuda.alloc_base = ga->base;
		cuda.alloc_size = ga->size;
		cuda.offset = ga->offset;
		cuda.buffer_id = ga->buffer_id;
		if (ga->vmm) {
			cuda.vmm = true;
		} else {
			cuda.ipc_handle.data = (uint8_t *)ga->ipc_handle;
			cuda.ipc_handle.len = sizeof(ga->ipc_handle);
		}
		req.cuda = &cuda;
	}
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_REG;
	m.reg = &req;
	int err = ctx_call(ctx, &m, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0, &r);
	if (err)
		return err;
	if (r->body_case != XFER__CLIENT__CLIENT_MSG__BODY_REG_REPLY ||
	    r->reg_reply->key.len != TOKEN_KEY_LEN) {
		err = -EPROTO;
	} else {
		mem->handle = r->reg_reply->handle;
		memcpy(mem->key, r->reg_reply->key.data, TOKEN_KEY_LEN);
		memcpy(mem->instance_id, ctx->instance_id, TOKEN_INSTANCE_LEN);
		memcpy(mem->addrs, ctx->addrs, sizeof(mem->addrs));
		mem->naddrs = ctx->naddrs;
		memcpy(mem->node_name, ctx->node_name, sizeof(mem->node_name));
	}
	xfer__client__client_msg__free_unpacked(r, NULL);
	return err;
}

static int remove_request(struct xfer_ctx *ctx, uint64_t handle,
			  bool is_import)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__DeregRequest dereg = XFER__CLIENT__DEREG_REQUEST__INIT;
	Xfer__Client__UnimportRequest unimp =
		XFER__CLIENT__UNIMPORT_REQUEST__INIT;
	Xfer__Client__ClientMsg *r;

	if (is_import) {
		unimp.handle = handle;
		m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_UNIMPORT;
		m.unimport = &unimp;
	} else {
		dereg.handle = handle;
		m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_DEREG;
		m.dereg = &dereg;
	}
	int err = ctx_call(ctx, &m, NULL, 0, &r);
	if (err)
		return err;
	if (r->body_case != XFER__CLIENT__CLIENT_MSG__BODY_STATUS)
		err = -EPROTO;
	xfer__client__client_msg__free_unpacked(r, NULL);
	return err;
}

XFER_EXPORT int xfer_alloc_host(struct xfer_ctx *ctx, size_t len,
				struct xfer_mem **out)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct xfer_mem *mem;
	int fd, err;

	if (!ctx || !out || len == 0 || len > SIZE_MAX - page)
		return -EINVAL;
	mem = calloc(1, sizeof(*mem));
	if (!mem)
		return -ENOMEM;
	mem->len = len;
	mem->map_len = (len + page - 1) & ~(page - 1);
	mem->kind = XFER__CLIENT__MEM_KIND__MEM_MEMFD;
	fd = memfd_create("xfer-host", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		err = -errno;
		goto err_mem;
	}
	/* xferd refuses memfds that could shrink under its copies. */
	if (ftruncate(fd, (off_t)mem->map_len) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) {
		err = -errno;
		goto err_fd;
	}
	/* Populate now: the pages are paid for at allocation, like pinned
	 * memory, not inside the first transfers. */
	mem->ptr = mmap(NULL, mem->map_len, PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_POPULATE, fd, 0);
	if (mem->ptr == MAP_FAILED) {
		err = -errno;
		goto err_fd;
	}
	err = reg_request(ctx, mem, fd, NULL);
	if (err)
		goto err_map;
	close(fd);
	*out = mem;
	return 0;

err_map:
	munmap(mem->ptr, mem->map_len);
err_fd:
	close(fd);
err_mem:
	free(mem);
	return err;
}

XFER_EXPORT int xfer_free_host(struct xfer_ctx *ctx, struct xfer_mem *mem)
{
	if (!ctx || !mem || !mem->map_len)
		return -EINVAL;
	/* Deregister first so xferd never copies into freed memory; the
	 * mapping goes even if xferd is gone. */
	int err = remove_request(ctx, mem->handle, false);
	/* The driver lets go of the pages before they are unmapped; if it
	 * cannot (the context is gone) the unmap still frees them. */
	if (mem->cuda_registered)
		client_cuda_host_unregister(mem->ptr);
	munmap(mem->ptr, mem->map_len);
	free(mem);
	return err == -ENOTCONN ? 0 : err;
}

XFER_EXPORT int xfer_mem_cuda_register(struct xfer_mem *mem)
{
	if (!mem || !mem->map_len)
		return -EINVAL;  /* only memory libxfer mapped itself */
	if (mem->cuda_registered)
		return 0;
	int err = client_cuda_host_register(mem->ptr, mem->map_len);
	if (err < 0)
		return err;
	/* Pinned by the application already: xfer_free_host leaves it. */
	mem->cuda_registered = err == 0;
	return 0;
}

XFER_EXPORT int xfer_reg(struct xfer_ctx *ctx, void *ptr, size_t len,
			 struct xfer_mem **out)
{
	struct xfer_mem *mem;
	struct gpu_alloc ga;
	int err;

	if (!ctx || !ptr || !out || len == 0)
		return -EINVAL;
	/* Device memory is imported by xferd; everything else is reached
	 * with CMA. */
	int gpu = gpu_probe(ptr, len, &ga);
	if (gpu < 0)
		return gpu;
	mem = calloc(1, sizeof(*mem));
	if (!mem) {
		err = -ENOMEM;
		goto out;
	}
	mem->ptr = ptr;
	mem->len = len;
	if (gpu) {
		mem->kind = XFER__CLIENT__MEM_KIND__MEM_CUDA;
		err = reg_request(ctx, mem, ga.fd, &ga);
	} else {
		mem->kind = XFER__CLIENT__MEM_KIND__MEM_CMA;
		err = reg_request(ctx, mem, -1, NULL);
	}
	if (err) {
		free(mem);
		goto out;
	}
	*out = mem;
out:
	/* SCM_RIGHTS gave xferd its own copy of a VMM handle. */
	if (ga.fd >= 0)
		close(ga.fd);
	return err;
}

XFER_EXPORT int xfer_dereg(struct xfer_ctx *ctx, struct xfer_mem *mem)
{
	if (!ctx || !mem || mem->map_len)
		return -EINVAL;
	int err = remove_request(ctx, mem->handle, false);
	free(mem);
	return err == -ENOTCONN ? 0 : err;
}

XFER_EXPORT void *xfer_mem_ptr(const struct xfer_mem *mem)
{
	return mem->ptr;
}

XFER_EXPORT size_t xfer_mem_len(const struct xfer_mem *mem)
{
	return mem->len;
}

XFER_EXPORT uint64_t xfer_mem_handle(const struct xfer_mem *mem)
{
	return mem->handle;
}

XFER_EXPORT int xfer_export(const struct xfer_mem *mem, uint64_t off,
			    uint64_t len, void *buf, size_t *buf_len)
{
	struct token t = {
		.region = mem->handle,
		.offset = off,
		.length = len,
		.region_length = mem->len,
		.mem_kind = mem->kind,
	};

	if (!buf || !buf_len)
		return -EINVAL;
	memcpy(t.instance_id, mem->instance_id, TOKEN_INSTANCE_LEN);
	memcpy(t.addrs, mem->addrs, sizeof(t.addrs));
	t.naddrs = mem->naddrs;
	memcpy(t.node_name, mem->node_name, sizeof(t.node_name));
	if (off > mem->len || len > mem->len - off)
		return -ERANGE;
	token_sign(&t, mem->key);
	return token_encode(&t, buf, buf_len);
}

XFER_EXPORT int xfer_import(struct xfer_ctx *ctx, const void *token,
			    size_t len, struct xfer_remote **out)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__ImportRequest req = XFER__CLIENT__IMPORT_REQUEST__INIT;
	Xfer__Client__ClientMsg *r;

	if (!ctx || !token || !out || len == 0 || len > XFER_TOKEN_MAX)
		return -EINVAL;
	struct xfer_remote *rem = calloc(1, sizeof(*rem));
	if (!rem)
		return -ENOMEM;
	req.token.data = (uint8_t *)token;
	req.token.len = len;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_IMPORT;
	m.import = &req;
	int err = ctx_call(ctx, &m, NULL, 0, &r);
	if (err)
		goto fail;
	if (r->body_case != XFER__CLIENT__CLIENT_MSG__BODY_IMPORT_REPLY) {
		err = -EPROTO;
	} else {
		rem->handle = r->import_reply->handle;
		rem->len = r->import_reply->length;
	}
	xfer__client__client_msg__free_unpacked(r, NULL);
	if (err)
		goto fail;
	*out = rem;
	return 0;
fail:
	free(rem);
	return err;
}

XFER_EXPORT int xfer_unimport(struct xfer_ctx *ctx, struct xfer_remote *rem)
{
	if (!ctx || !rem)
		return -EINVAL;
	int err = remove_request(ctx, rem->handle, true);
	free(rem);
	return err == -ENOTCONN ? 0 : err;
}

XFER_EXPORT uint64_t xfer_remote_len(const struct xfer_remote *rem)
{
	return rem->len;
}

XFER_EXPORT uint64_t xfer_remote_handle(const struct xfer_remote *rem)
{
	return rem->handle;
}
