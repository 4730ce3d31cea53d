/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu.c - telling device memory from host memory, and describing a
 * device allocation so that xferd can import it: the legacy CUDA IPC
 * handle of its base (cudaMalloc), or a POSIX fd exported from its VMM
 * handle (cuMemCreate, PyTorch's expandable segments).
 *
 * libxfer has no link-time CUDA dependency.  The driver API is reached
 * through dlopen("libcuda.so.1", RTLD_NOLOAD) and cuGetProcAddress: a
 * process that holds device memory has loaded the driver already (the
 * CUDA runtime does), and one that has not holds none, so libxfer never
 * loads the driver itself and never initializes it.
 *
 * Also: pinning the client's own mapping of xfer_alloc_host() memory for
 * its CUDA copies (client_cuda_host_register), under a context the process has.
 */
#include <errno.h>
#include <string.h>

#include "gpu.h"

#ifdef HAVE_CUDA

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* The ABI the entry points are asked for: CUDA 12's, which every call
 * below keeps in later drivers too. */
#define GPU_CUDA_ABI 12000

_Static_assert(sizeof(CUipcMemHandle) == GPU_IPC_HANDLE_LEN,
	       "CudaAlloc.ipc_handle is a CUipcMemHandle");
_Static_assert(sizeof(CUuuid) == GPU_UUID_LEN, "CudaAlloc.device_uuid");

static struct {
	__typeof__(cuPointerGetAttributes) *pointer_get_attributes;
	__typeof__(cuMemGetAddressRange) *mem_get_address_range;
	__typeof__(cuIpcGetMemHandle) *ipc_get_mem_handle;
	__typeof__(cuMemRetainAllocationHandle) *mem_retain_allocation_handle;
	__typeof__(cuMemExportToShareableHandle) *mem_export;
	__typeof__(cuMemRelease) *mem_release;
	__typeof__(cuDeviceGet) *device_get;
	__typeof__(cuDeviceGetUuid) *device_get_uuid;
	__typeof__(cuCtxGetCurrent) *ctx_get_current;
	__typeof__(cuCtxPushCurrent) *ctx_push_current;
	__typeof__(cuCtxPopCurrent) *ctx_pop_current;
	__typeof__(cuDevicePrimaryCtxGetState) *primary_ctx_get_state;
	__typeof__(cuDevicePrimaryCtxRetain) *primary_ctx_retain;
	__typeof__(cuDevicePrimaryCtxRelease) *primary_ctx_release;
	__typeof__(cuDeviceGetCount) *device_get_count;
	__typeof__(cuMemHostRegister) *mem_host_register;
	__typeof__(cuMemHostUnregister) *mem_host_unregister;
} cu;

#define CU_SYM(name, field) { name, offsetof(__typeof__(cu), field) }
static const struct {
	const char *name;
	size_t off;
} cu_syms[] = {
	CU_SYM("cuPointerGetAttributes", pointer_get_attributes),
	CU_SYM("cuMemGetAddressRange", mem_get_address_range),
	CU_SYM("cuIpcGetMemHandle", ipc_get_mem_handle),
	CU_SYM("cuMemRetainAllocationHandle", mem_retain_allocation_handle),
	CU_SYM("cuMemExportToShareableHandle", mem_export),
	CU_SYM("cuMemRelease", mem_release),
	CU_SYM("cuDeviceGet", device_get),
	CU_SYM("cuDeviceGetUuid", device_get_uuid),
	CU_SYM("cuCtxGetCurrent", ctx_get_current),
	CU_SYM("cuCtxPushCurrent", ctx_push_current),
	CU_SYM("cuCtxPopCurrent", ctx_pop_current),
	CU_SYM("cuDevicePrimaryCtxGetState", primary_ctx_get_state),
	CU_SYM("cuDevicePrimaryCtxRetain", primary_ctx_retain),
	CU_SYM("cuDevicePrimaryCtxRelease", primary_ctx_release),
	CU_SYM("cuDeviceGetCount", device_get_count),
	CU_SYM("cuMemHostRegister", mem_host_register),
	CU_SYM("cuMemHostUnregister", mem_host_unregister),
};

/*
 * cu is filled once, under cu_lock, and then published by the release
 * store to cu_ready; gpu_probe reads cu without the lock after its
 * acquire load of cu_ready sees true.  A process without the driver is
 * asked again at every registration: it may load CUDA later.
 */
static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool cu_ready;

static int cu_resolve(void *lib)
{
	__typeof__(cuGetProcAddress) *get_proc;
	void *sym = dlsym(lib, "cuGetProcAddress_v2");

	/* Drivers before CUDA 12 lack it: GPU memory stays unsupported. */
	if (!sym)
		return -ENOTSUP;
	memcpy(&get_proc, &sym, sizeof(sym));
	for (size_t i = 0; i < sizeof(cu_syms) / sizeof(cu_syms[0]); i++) {
		CUdriverProcAddressQueryResult found;
		void *fn = NULL;

		if (get_proc(cu_syms[i].name, &fn, GPU_CUDA_ABI,
			     CU_GET_PROC_ADDRESS_DEFAULT, &found) ||
		    found != CU_GET_PROC_ADDRESS_SUCCESS || !fn)
			return -ENOTSUP;
		memcpy((char *)&cu + cu_syms[i].off, &fn, sizeof(fn));
	}
	return 0;
}

static bool cu_loaded(void)
{
	bool ready;

	if (atomic_load_explicit(&cu_ready, memory_order_acquire))
		return true;
	pthread_mutex_lock(&cu_lock);
	ready = atomic_load_explicit(&cu_ready, memory_order_relaxed);
	if (!ready) {
		/* NOLOAD: only a driver the process has loaded itself.  The
		 * reference is kept for good: the runtime never unloads
		 * the driver either. */
		void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		if (lib && cu_resolve(lib) == 0) {
			ready = true;
			atomic_store_explicit(&cu_ready, true,
					      memory_order_release);
		} else if (lib) {
			dlclose(lib);
		}
	}
	pthread_mutex_unlock(&cu_lock);
	return ready;
}

/*
 * The allocation around a device pointer, once a context is current.
 * Returns 1 with *a filled, or -ENOTSUP.
 */
static int describe(CUdeviceptr p, size_t len, int ordinal, bool legacy,
		    uint64_t handle_types, struct gpu_alloc *a)
{
	CUdeviceptr base;
	size_t size;
	CUdevice dev;
	CUuuid uuid;

	/* For VMM memory this is the mapping, which starts at offset 0 of
	 * its physical allocation (cuMemMap allows no other offset). */
	if (cu.mem_get_address_range(&base, &size, p) != CUDA_SUCCESS)
		return -ENOTSUP;
	/* The range must lie in one allocation: xferd imports one. */
	if (p < base || len > size || p - base > size - len)
		return -ENOTSUP;
	if (cu.device_get(&dev, ordinal) != CUDA_SUCCESS ||
	    cu.device_get_uuid(&uuid, dev) != CUDA_SUCCESS)
		return -ENOTSUP;
	a->device = (uint32_t)ordinal;
	memcpy(a->uuid, uuid.bytes, GPU_UUID_LEN);
	a->base = base;
	a->size = size;
	a->offset = p - base;

	if (legacy) {
		CUipcMemHandle h;
		if (cu.ipc_get_mem_handle(&h, base) != CUDA_SUCCESS)
			return -ENOTSUP;
		memcpy(a->ipc_handle, &h, GPU_IPC_HANDLE_LEN);
		return 1;
	}

	/* VMM memory travels as a POSIX fd, and only if it was created
	 * with that handle type; other memory (pools, fabric-only or
	 * Win32 handles) cannot reach xferd. */
	CUmemGenericAllocationHandle h;
	int fd = -1;
	if (!(handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
	    cu.mem_retain_allocation_handle(&h, (void *)(uintptr_t)p) !=
		    CUDA_SUCCESS)
		return -ENOTSUP;
	CUresult r = cu.mem_export(&fd, h,
				   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	cu.mem_release(h);  /* the retain's reference; the mapping keeps its own */
	if (r != CUDA_SUCCESS || fd < 0)
		return -ENOTSUP;
	a->vmm = true;
	a->fd = fd;
	return 1;
}

int gpu_probe(const void *ptr, size_t len, struct gpu_alloc *a)
{
	CUpointer_attribute attrs[] = {
		CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		CU_POINTER_ATTRIBUTE_BUFFER_ID,
		CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
		CU_POINTER_ATTRIBUTE_CONTEXT,
		CU_POINTER_ATTRIBUTE_IS_MANAGED,
		CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
		CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
	};
	unsigned int mem_type = 0;
	int ordinal = -1;
	unsigned long long buffer_id = 0;
	/* Booleans and a bitmask: zeroed words, whatever width the driver
	 * stores into them. */
	uint64_t legacy = 0, managed = 0, handle_types = 0;
	CUcontext owner = NULL;
	CUmemoryPool pool = NULL;
	void *data[] = { &mem_type, &ordinal, &buffer_id, &legacy, &owner,
			 &managed, &pool, &handle_types };
	const CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
	_Static_assert(sizeof(attrs) / sizeof(attrs[0]) ==
		       sizeof(data) / sizeof(data[0]), "one datum per attribute");

	*a = (struct gpu_alloc){ .fd = -1 };
	if (!cu_loaded())
		return 0;
	/* Unlike cuPointerGetAttribute this succeeds for pointers the
	 * driver does not know.  It fails when the driver is not (or no
	 * longer, or in a forked child not) initialized: then this process
	 * cannot hold device memory either. */
	if (cu.pointer_get_attributes(sizeof(attrs) / sizeof(attrs[0]), attrs,
				      data, p) != CUDA_SUCCESS)
		return 0;
	/* Managed memory migrates between host and GPUs on its own: no
	 * handle reaches it, and CMA would race the migrations. */
	if (managed)
		return -ENOTSUP;
	if (mem_type != CU_MEMORYTYPE_DEVICE)
		return 0;
	if (pool || ordinal < 0)
		return -ENOTSUP;

	/*
	 * The address range and the IPC handle need a current context.  A
	 * thread that allocated has the runtime's; another borrows the
	 * allocation's context, or for VMM memory (which belongs to none)
	 * the device's primary context if it is active, never creating one.
	 */
	CUcontext cur = NULL, pushed = NULL;
	CUdevice dev = 0;
	bool primary = false;
	if (cu.ctx_get_current(&cur) == CUDA_SUCCESS && !cur) {
		unsigned int flags;
		int active = 0;
		if (owner) {
			pushed = owner;
		} else if (cu.device_get(&dev, ordinal) == CUDA_SUCCESS &&
			   cu.primary_ctx_get_state(dev, &flags, &active) ==
				   CUDA_SUCCESS && active &&
			   cu.primary_ctx_retain(&pushed, dev) == CUDA_SUCCESS) {
			primary = true;
		}
		if (pushed && cu.ctx_push_current(pushed) != CUDA_SUCCESS) {
			if (primary)
				cu.primary_ctx_release(dev);
			pushed = NULL;
			primary = false;
		}
	}

	int rc = describe(p, len, ordinal, legacy != 0, handle_types, a);
	a->buffer_id = buffer_id;

	if (pushed) {
		CUcontext popped;
		cu.ctx_pop_current(&popped);
		if (primary)
			cu.primary_ctx_release(dev);
	}
	return rc;
}

/*
 * Run fn(p, len) with a CUDA context current: the thread's own, else the
 * first device's primary context that the process made active (never
 * creating one: that costs GPU memory and is the application's choice).
 * -ENODEV without either.
 */
static int with_context(int (*fn)(void *p, size_t len), void *p, size_t len)
{
	CUcontext cur = NULL, pushed = NULL;
	CUdevice dev = 0;
	int n = 0, rc;

	if (!cu_loaded() || cu.ctx_get_current(&cur) != CUDA_SUCCESS)
		return -ENODEV;  /* not loaded, or not initialized */
	if (cur)
		return fn(p, len);
	if (cu.device_get_count(&n) != CUDA_SUCCESS)
		return -ENODEV;
	for (int i = 0; i < n && !pushed; i++) {
		unsigned int flags;
		int active = 0;
		if (cu.device_get(&dev, i) == CUDA_SUCCESS &&
		    cu.primary_ctx_get_state(dev, &flags, &active) ==
			    CUDA_SUCCESS && active &&
		    cu.primary_ctx_retain(&pushed, dev) == CUDA_SUCCESS &&
		    cu.ctx_push_current(pushed) != CUDA_SUCCESS) {
			cu.primary_ctx_release(dev);
			pushed = NULL;
		}
	}
	if (!pushed)
		return -ENODEV;
	rc = fn(p, len);
	CUcontext popped;
	cu.ctx_pop_current(&popped);
	cu.primary_ctx_release(dev);
	return rc;
}

static int host_register(void *p, size_t len)
{
	/* PORTABLE: pinned for every context of the process, not only the
	 * one current here (the application may use several GPUs). */
	CUresult r = cu.mem_host_register(p, len,
					  CU_MEMHOSTREGISTER_PORTABLE);

	if (r == CUDA_SUCCESS)
		return 0;
	/* The application pinned it itself: its to undo, not ours. */
	if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		return 1;
	return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

static int host_unregister(void *p, size_t len)
{
	(void)len;
	return cu.mem_host_unregister(p) == CUDA_SUCCESS ? 0 : -EIO;
}

int client_cuda_host_register(void *ptr, size_t len)
{
	return with_context(host_register, ptr, len);
}

int client_cuda_host_unregister(void *ptr)
{
	return with_context(host_unregister, ptr, 0);
}

#else /* !HAVE_CUDA */

int client_cuda_host_register(void *ptr, size_t len)
{
	(void)ptr;
	(void)len;
	return -ENODEV;
}

int client_cuda_host_unregister(void *ptr)
{
	(void)ptr;
	return -ENODEV;
}

int gpu_probe(const void *ptr, size_t len, struct gpu_alloc *a)
{
	(void)ptr;
	(void)len;
	*a = (struct gpu_alloc){ .fd = -1 };
	return 0;
}

#endif /* HAVE_CUDA */
