/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu.c - the CUDA driver, xferd's GPUs, imports of clients' GPU memory.
 *
 * Only the driver API is used, resolved at run time through
 * cuGetProcAddress, so xferd has no link-time CUDA dependency.  The copy
 * engine built on it is in gpu/copy.c.
 *
 * Each GPU gets GPU_STREAMS streams for bulk copies and, where the
 * driver has stream priorities, one more at the highest priority for
 * latency-class copies (the bulk ones at the lowest); without them the
 * latency copies share the bulk streams, as before classes.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "gpu/cuda_drv.h"
#include "core/log.h"
#include "core/rcache.h"

#ifdef HAVE_CUDA

struct cuda_driver cu;
struct gpu_dev gpus[GPU_MAX];
int ngpus;
static void *libcuda;
static char why_none[160] = "no CUDA driver";

const char *gpu_unavailable_reason(void)
{
	return why_none;
}

int gpu_count(void)
{
	return ngpus;
}

/* "cuMemAlloc" -> the driver's entry point of the ABI we compiled for. */
#define RESOLVE(field, name)                                                  \
	do {                                                                  \
		CUdriverProcAddressQueryResult st_;                           \
		if (get_proc(name, (void **)&cu.field, 12000,                 \
			     CU_GET_PROC_ADDRESS_DEFAULT, &st_) != CUDA_SUCCESS || \
		    !cu.field) {                                              \
			snprintf(why_none, sizeof(why_none),                  \
				 "the CUDA driver lacks %s", name);           \
			return -ENOTSUP;                                      \
		}                                                             \
	} while (0)

static int load_driver(void)
{
	__typeof__(cuGetProcAddress) *get_proc;

	libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!libcuda) {
		snprintf(why_none, sizeof(why_none),
			 "no CUDA driver (libcuda.so.1 not found)");
		return -ENOTSUP;
	}
	get_proc = (__typeof__(cuGetProcAddress) *)dlsym(libcuda,
							  "cuGetProcAddress_v2");
	if (!get_proc) {
		snprintf(why_none, sizeof(why_none),
			 "the CUDA driver is older than 12.0");
		return -ENOTSUP;
	}
	cu.get_proc_address = get_proc;
	RESOLVE(init, "cuInit");
	RESOLVE(get_error_string, "cuGetErrorString");
	RESOLVE(device_get_count, "cuDeviceGetCount");
	RESOLVE(device_get, "cuDeviceGet");
	RESOLVE(device_get_name, "cuDeviceGetName");
	RESOLVE(device_get_uuid, "cuDeviceGetUuid");
	RESOLVE(device_get_pci_bus_id, "cuDeviceGetPCIBusId");
	RESOLVE(device_get_attribute, "cuDeviceGetAttribute");
	RESOLVE(device_can_access_peer, "cuDeviceCanAccessPeer");
	RESOLVE(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
	RESOLVE(primary_ctx_release, "cuDevicePrimaryCtxRelease");
	RESOLVE(ctx_set_current, "cuCtxSetCurrent");
	RESOLVE(ctx_enable_peer_access, "cuCtxEnablePeerAccess");
	RESOLVE(mem_get_info, "cuMemGetInfo");
	RESOLVE(stream_create, "cuStreamCreate");
	RESOLVE(stream_destroy, "cuStreamDestroy");
	RESOLVE(stream_synchronize, "cuStreamSynchronize");
	RESOLVE(event_create, "cuEventCreate");
	RESOLVE(event_destroy, "cuEventDestroy");
	RESOLVE(event_record, "cuEventRecord");
	RESOLVE(event_query, "cuEventQuery");
	RESOLVE(ipc_open_mem_handle, "cuIpcOpenMemHandle");
	RESOLVE(ipc_close_mem_handle, "cuIpcCloseMemHandle");
	RESOLVE(mem_import, "cuMemImportFromShareableHandle");
	RESOLVE(mem_address_reserve, "cuMemAddressReserve");
	RESOLVE(mem_address_free, "cuMemAddressFree");
	RESOLVE(mem_map, "cuMemMap");
	RESOLVE(mem_unmap, "cuMemUnmap");
	RESOLVE(mem_set_access, "cuMemSetAccess");
	RESOLVE(mem_release, "cuMemRelease");
	RESOLVE(memcpy_async, "cuMemcpyAsync");
	RESOLVE(memcpy_peer_async, "cuMemcpyPeerAsync");
	RESOLVE(mem_host_register, "cuMemHostRegister");
	RESOLVE(mem_host_unregister, "cuMemHostUnregister");
	RESOLVE(mem_host_alloc, "cuMemHostAlloc");
	RESOLVE(mem_free_host, "cuMemFreeHost");
	RESOLVE(module_load_data, "cuModuleLoadData");
	RESOLVE(module_unload, "cuModuleUnload");
	RESOLVE(module_get_function, "cuModuleGetFunction");
	RESOLVE(launch_kernel, "cuLaunchKernel");
	RESOLVE(mem_alloc, "cuMemAlloc");
	RESOLVE(mem_free, "cuMemFree");
	RESOLVE(memcpy_htod, "cuMemcpyHtoD");
	/* Optional: without them every copy goes at one priority. */
	CUdriverProcAddressQueryResult st;
	if (get_proc("cuCtxGetStreamPriorityRange",
		     (void **)&cu.ctx_get_stream_priority_range, 12000,
		     CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS ||
	    get_proc("cuStreamCreateWithPriority",
		     (void **)&cu.stream_create_with_priority, 12000,
		     CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS ||
	    !cu.ctx_get_stream_priority_range ||
	    !cu.stream_create_with_priority) {
		cu.ctx_get_stream_priority_range = NULL;
		cu.stream_create_with_priority = NULL;
	}
	return 0;
}

const char *cu_err(CUresult r)
{
	const char *s = NULL;

	if (cu.get_error_string && cu.get_error_string(r, &s) == CUDA_SUCCESS &&
	    s)
		return s;
	return "unknown CUDA error";
}

int gpu_set_current(int dev)
{
	return cu.ctx_set_current(gpus[dev].ctx) == CUDA_SUCCESS ? 0 : -EIO;
}

static int open_device(int i)
{
	struct gpu_dev *g = &gpus[i];
	CUresult r;

	if ((r = cu.device_get(&g->dev, i)) ||
	    (r = cu.device_get_name(g->name, sizeof(g->name), g->dev)) ||
	    (r = cu.device_get_uuid((CUuuid *)g->uuid, g->dev)) ||
	    (r = cu.primary_ctx_retain(&g->ctx, g->dev)) ||
	    (r = cu.ctx_set_current(g->ctx))) {
		log_warnx("GPU %d: cannot open: %s", i, cu_err(r));
		return -EIO;
	}
	/* Lower numbers are higher priorities: greatest <= least. */
	int least = 0, greatest = 0;
	bool prio = cu.stream_create_with_priority &&
		    cu.ctx_get_stream_priority_range(&least, &greatest) ==
			    CUDA_SUCCESS &&
		    greatest < least;
	for (int s = 0; s < GPU_STREAMS; s++) {
		/* Non-blocking: never serialised with another context's
		 * legacy default stream. */
		r = prio ? cu.stream_create_with_priority(
				   &g->streams[s], CU_STREAM_NON_BLOCKING, least)
			 : cu.stream_create(&g->streams[s],
					    CU_STREAM_NON_BLOCKING);
		if (r) {
			log_warnx("GPU %d: cannot create streams: %s", i,
				  cu_err(r));
			return -EIO;
		}
	}
	g->lat_stream = NULL;
	if (prio) {
		r = cu.stream_create_with_priority(&g->lat_stream,
						   CU_STREAM_NON_BLOCKING,
						   greatest);
		if (r) {
			log_warnx("GPU %d: no high-priority stream (%s); "
				  "latency copies share the bulk streams", i,
				  cu_err(r));
			g->lat_stream = NULL;
		}
	} else {
		log_info("GPU %d: no stream priorities; latency copies share "
			 "the bulk streams", i);
	}
	return 0;
}

/* Every GPU may reach every other it can (NVLink or PCIe P2P). */
static void enable_peers(void)
{
	for (int i = 0; i < ngpus; i++) {
		gpu_set_current(i);
		for (int j = 0; j < ngpus; j++) {
			int can = 0;
			if (i == j)
				continue;
			cu.device_can_access_peer(&can, gpus[i].dev, gpus[j].dev);
			if (!can)
				continue;
			CUresult r = cu.ctx_enable_peer_access(gpus[j].ctx, 0);
			if (r == CUDA_SUCCESS ||
			    r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
				gpus[i].peer[j] = true;
			else
				log_warnx("GPU %d -> %d: no peer access: %s", i,
					  j, cu_err(r));
		}
	}
}

int gpu_init(void)
{
	int n = 0;
	CUresult r;

	if (load_driver())
		return 0;
	r = cu.init(0);
	if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_NOT_FOUND) {
		snprintf(why_none, sizeof(why_none), "no GPU on this node");
		return 0;
	}
	if (r) {
		snprintf(why_none, sizeof(why_none), "cuInit: %s", cu_err(r));
		return 0;
	}
	if (cu.device_get_count(&n) || n == 0) {
		snprintf(why_none, sizeof(why_none), "no GPU on this node");
		return 0;
	}
	if (n > GPU_MAX) {
		log_warnx("%d GPUs; using the first %d", n, GPU_MAX);
		n = GPU_MAX;
	}
	for (int i = 0; i < n; i++) {
		if (open_device(i))
			return -EIO;  /* fail fast: READY means usable */
		ngpus = i + 1;
	}
	enable_peers();
	for (int i = 0; i < ngpus; i++)
		log_info("GPU %d: %s", i, gpus[i].name);
	return ngpus;
}

void gpu_fini(void)
{
	for (int i = 0; i < ngpus; i++) {
		gpu_set_current(i);
		for (int s = 0; s < GPU_STREAMS; s++)
			if (gpus[i].streams[s])
				cu.stream_destroy(gpus[i].streams[s]);
		if (gpus[i].lat_stream)
			cu.stream_destroy(gpus[i].lat_stream);
		gpus[i].lat_stream = NULL;
		cu.primary_ctx_release(gpus[i].dev);
	}
	ngpus = 0;
	/* The driver stays loaded: unloading it at exit gains nothing. */
}

int gpu_info(int i, struct gpu_info *out)
{
	size_t fr = 0, total = 0;

	if (i < 0 || i >= ngpus)
		return -ENODEV;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", gpus[i].name);
	memcpy(out->uuid, gpus[i].uuid, GPU_UUID_LEN);
	if (!gpu_set_current(i) && !cu.mem_get_info(&fr, &total)) {
		out->mem_free = fr;
		out->mem_total = total;
	}
	for (int j = 0; j < ngpus; j++)
		out->peer[j] = gpus[i].peer[j];
	if (cu.device_get_pci_bus_id(out->bdf, (int)sizeof(out->bdf),
				     gpus[i].dev) != CUDA_SUCCESS)
		out->bdf[0] = '\0';
	int v = 0;
	out->dmabuf = cu.device_get_attribute(
			      &v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
			      gpus[i].dev) == CUDA_SUCCESS && v;
	return 0;
}

static int dev_by_uuid(const uint8_t *uuid)
{
	for (int i = 0; i < ngpus; i++)
		if (memcmp(gpus[i].uuid, uuid, GPU_UUID_LEN) == 0)
			return i;
	return -1;
}

/* --- imports --- */

struct gpu_import {
	struct rcache_entry e;    /* first: the cache hands back &e */
	int dev;
	bool vmm;
	CUdeviceptr ptr;          /* the allocation base here */
	size_t size;
	CUmemGenericAllocationHandle handle; /* vmm */
};

static void import_release(struct rcache_entry *e)
{
	struct gpu_import *im = (struct gpu_import *)e;

	gpu_set_current(im->dev);
	if (im->vmm) {
		cu.mem_unmap(im->ptr, im->size);
		cu.mem_address_free(im->ptr, im->size);
		cu.mem_release(im->handle);
	} else {
		cu.ipc_close_mem_handle(im->ptr);
	}
	free(im);
}

/* Map an exported VMM allocation and let every GPU that can reach its
 * device read and write it. */
static int import_vmm(struct gpu_import *im, int fd)
{
	CUresult r = cu.mem_import(&im->handle, (void *)(uintptr_t)fd,
				   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	if (r) {
		log_warnx("GPU import (vmm): %s", cu_err(r));
		return -EINVAL;
	}
	r = cu.mem_address_reserve(&im->ptr, im->size, 0, 0, 0);
	if (!r)
		r = cu.mem_map(im->ptr, im->size, 0, im->handle, 0);
	if (r) {
		log_warnx("GPU map (vmm): %s", cu_err(r));
		if (im->ptr)
			cu.mem_address_free(im->ptr, im->size);
		cu.mem_release(im->handle);
		return -EINVAL;
	}
	CUmemAccessDesc acc[GPU_MAX];
	int n = 0;
	for (int j = 0; j < ngpus; j++) {
		if (j != im->dev && !gpus[j].peer[im->dev])
			continue;
		acc[n++] = (CUmemAccessDesc){
			.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
				      .id = gpus[j].dev },
			.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
		};
	}
	r = cu.mem_set_access(im->ptr, im->size, acc, (size_t)n);
	if (r) {
		log_warnx("GPU access (vmm): %s", cu_err(r));
		cu.mem_unmap(im->ptr, im->size);
		cu.mem_address_free(im->ptr, im->size);
		cu.mem_release(im->handle);
		return -EINVAL;
	}
	return 0;
}

int gpu_import(struct rcache *rc, uint64_t client,
	       const struct gpu_alloc_desc *d, int fd,
	       struct rcache_entry **entry, uint64_t *base_ptr, int *dev)
{
	const struct rcache_key key = { .client = client,
					.kind = RCACHE_CUDA_IMPORT,
					.base = d->base, .id = d->buffer_id };
	int err;

	if (ngpus == 0) {
		if (fd >= 0)
			close(fd);
		return -ENOTSUP;
	}
	struct rcache_entry *e = rcache_get(rc, &key);
	if (e) {
		/* Imported before: same allocation, same buffer id. */
		if (fd >= 0)
			close(fd);
		goto found;
	}
	struct gpu_import *im = calloc(1, sizeof(*im));
	if (!im) {
		err = -ENOMEM;
		goto fail;
	}
	im->e.key = key;
	im->e.release = import_release;
	im->e.bytes = d->size;
	im->size = d->size;
	im->vmm = d->vmm;
	im->dev = dev_by_uuid(d->uuid);
	if (im->dev < 0) {
		free(im);
		err = -ENODEV;  /* a GPU xferd does not see */
		goto fail;
	}
	gpu_set_current(im->dev);
	if (d->vmm) {
		err = import_vmm(im, fd);
	} else {
		CUipcMemHandle h;
		memcpy(&h, d->ipc_handle, sizeof(h));
		CUresult r = cu.ipc_open_mem_handle(
			&im->ptr, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
		if (r)
			log_warnx("GPU import (ipc): %s", cu_err(r));
		err = r ? -EINVAL : 0;
	}
	if (fd >= 0)
		close(fd);
	fd = -1;
	if (err) {
		free(im);
		return err;
	}
	e = rcache_insert(rc, &im->e);
	if (e != &im->e)
		import_release(&im->e);  /* imported twice at once: keep one */
found:;
	struct gpu_import *got = (struct gpu_import *)e;
	*entry = e;
	*base_ptr = got->ptr;
	*dev = got->dev;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	return err;
}

int gpu_import_on(struct rcache *rc, uint64_t client,
		  const struct gpu_alloc_desc *d, int accessor,
		  struct rcache_entry **entry, uint64_t *base_ptr)
{
	/* One key per accessor GPU: kinds above RCACHE_CUDA_IMPORT. */
	const struct rcache_key key = {
		.client = client, .kind = RCACHE_CUDA_IMPORT + 1 + (uint32_t)accessor,
		.base = d->base, .id = d->buffer_id };

	if (d->vmm || accessor < 0 || accessor >= ngpus)
		return -EINVAL;
	struct rcache_entry *e = rcache_get(rc, &key);
	if (!e) {
		struct gpu_import *im = calloc(1, sizeof(*im));
		if (!im)
			return -ENOMEM;
		im->e.key = key;
		im->e.release = import_release;
		im->e.bytes = d->size;
		im->size = d->size;
		im->dev = accessor;
		gpu_set_current(accessor);
		CUipcMemHandle h;
		memcpy(&h, d->ipc_handle, sizeof(h));
		CUresult r = cu.ipc_open_mem_handle(
			&im->ptr, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
		if (r) {
			log_debug("GPU %d: second mapping of an allocation: %s",
				  accessor, cu_err(r));
			free(im);
			return -EINVAL;
		}
		e = rcache_insert(rc, &im->e);
		if (e != &im->e)
			import_release(&im->e);
	}
	*entry = e;
	*base_ptr = ((struct gpu_import *)e)->ptr;
	return 0;
}

int gpu_host_register(void *p, size_t len)
{
	if (ngpus == 0)
		return -ENOTSUP;
	gpu_set_current(0);
	/* Portable: usable from every context (every GPU). */
	CUresult r = cu.mem_host_register(p, len, CU_MEMHOSTREGISTER_PORTABLE);
	if (r && r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
		log_warnx("pinning host memory for GPU copies: %s", cu_err(r));
		return -ENOMEM;
	}
	return 0;
}

void gpu_host_unregister(void *p)
{
	if (!ngpus)
		return;
	gpu_set_current(0);
	cu.mem_host_unregister(p);
}
#else /* !HAVE_CUDA: the same interface, every GPU request -ENOTSUP */

const char *gpu_unavailable_reason(void)
{
	return "xferd was built without CUDA";
}

int gpu_init(void)
{
	return 0;
}

void gpu_fini(void)
{
}

int gpu_count(void)
{
	return 0;
}

int gpu_info(int i, struct gpu_info *out)
{
	(void)i, (void)out;
	return -ENODEV;
}

int gpu_import(struct rcache *rc, uint64_t client,
	       const struct gpu_alloc_desc *d, int fd,
	       struct rcache_entry **entry, uint64_t *base_ptr, int *dev)
{
	(void)rc, (void)client, (void)d, (void)entry, (void)base_ptr, (void)dev;
	if (fd >= 0)
		close(fd);
	return -ENOTSUP;
}

int gpu_import_on(struct rcache *rc, uint64_t client,
		  const struct gpu_alloc_desc *d, int accessor,
		  struct rcache_entry **entry, uint64_t *base_ptr)
{
	(void)rc, (void)client, (void)d, (void)accessor, (void)entry;
	(void)base_ptr;
	return -ENOTSUP;
}

int gpu_host_register(void *p, size_t len)
{
	(void)p, (void)len;
	return -ENOTSUP;
}

void gpu_host_unregister(void *p)
{
	(void)p;
}
#endif /* HAVE_CUDA */
