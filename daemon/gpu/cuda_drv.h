/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda_drv.h - the CUDA driver entry points xferd uses and its GPUs;
 * shared by gpu/gpu.c (devices, imports) and gpu/copy.c (copies) only.
 */
#ifndef XFERD_CUDA_DRV_H
#define XFERD_CUDA_DRV_H

#ifdef HAVE_CUDA
#include <cuda.h>

#include "gpu/gpu.h"

#define GPU_STREAMS 4

/* Resolved with cuGetProcAddress for the CUDA 12 ABI. */
struct cuda_driver {
	__typeof__(cuInit) *init;
	__typeof__(cuGetErrorString) *get_error_string;
	__typeof__(cuDeviceGetCount) *device_get_count;
	__typeof__(cuDeviceGet) *device_get;
	__typeof__(cuDeviceGetName) *device_get_name;
	__typeof__(cuDeviceGetUuid) *device_get_uuid;
	__typeof__(cuDeviceGetPCIBusId) *device_get_pci_bus_id;
	__typeof__(cuDeviceGetAttribute) *device_get_attribute;
	__typeof__(cuDeviceCanAccessPeer) *device_can_access_peer;
	__typeof__(cuDevicePrimaryCtxRetain) *primary_ctx_retain;
	__typeof__(cuDevicePrimaryCtxRelease) *primary_ctx_release;
	__typeof__(cuCtxSetCurrent) *ctx_set_current;
	__typeof__(cuCtxEnablePeerAccess) *ctx_enable_peer_access;
	__typeof__(cuMemGetInfo) *mem_get_info;
	__typeof__(cuStreamCreate) *stream_create;
	__typeof__(cuStreamDestroy) *stream_destroy;
	__typeof__(cuStreamSynchronize) *stream_synchronize;
	__typeof__(cuEventCreate) *event_create;
	__typeof__(cuEventDestroy) *event_destroy;
	__typeof__(cuEventRecord) *event_record;
	__typeof__(cuEventQuery) *event_query;
	__typeof__(cuIpcOpenMemHandle) *ipc_open_mem_handle;
	__typeof__(cuIpcCloseMemHandle) *ipc_close_mem_handle;
	__typeof__(cuMemImportFromShareableHandle) *mem_import;
	__typeof__(cuMemAddressReserve) *mem_address_reserve;
	__typeof__(cuMemAddressFree) *mem_address_free;
	__typeof__(cuMemMap) *mem_map;
	__typeof__(cuMemUnmap) *mem_unmap;
	__typeof__(cuMemSetAccess) *mem_set_access;
	__typeof__(cuMemRelease) *mem_release;
	__typeof__(cuMemcpyAsync) *memcpy_async;
	__typeof__(cuMemcpyPeerAsync) *memcpy_peer_async;
	__typeof__(cuMemHostRegister) *mem_host_register;
	__typeof__(cuMemHostUnregister) *mem_host_unregister;
	__typeof__(cuMemHostAlloc) *mem_host_alloc;
	__typeof__(cuMemFreeHost) *mem_free_host;
	__typeof__(cuModuleLoadData) *module_load_data;
	__typeof__(cuModuleUnload) *module_unload;
	__typeof__(cuModuleGetFunction) *module_get_function;
	__typeof__(cuLaunchKernel) *launch_kernel;
	__typeof__(cuMemAlloc) *mem_alloc;
	__typeof__(cuMemFree) *mem_free;
	__typeof__(cuMemcpyHtoD) *memcpy_htod;
	/* Optional (NULL where the driver lacks them): stream priorities,
	 * so that latency-class copies go ahead of bulk ones. */
	__typeof__(cuCtxGetStreamPriorityRange) *ctx_get_stream_priority_range;
	__typeof__(cuStreamCreateWithPriority) *stream_create_with_priority;
	/* for entry points resolved later (dmabuf.c) */
	__typeof__(cuGetProcAddress) *get_proc_address;
};

struct gpu_dev {
	CUdevice dev;
	CUcontext ctx;               /* the primary context */
	/* Bulk and default-class copies, round robin; at the lowest
	 * priority where the driver has priorities. */
	CUstream streams[GPU_STREAMS];
	/* Latency-class copies: the highest priority, so that the GPU's
	 * scheduler runs their work ahead of the bulk streams'.  NULL
	 * without priorities: latency copies then share streams[]. */
	CUstream lat_stream;
	char name[96];
	uint8_t uuid[GPU_UUID_LEN];
	bool peer[GPU_MAX];          /* this GPU may access GPU j */
};

extern struct cuda_driver cu;
extern struct gpu_dev gpus[GPU_MAX];
extern int ngpus;

const char *cu_err(CUresult r);
int gpu_set_current(int dev);
#endif /* HAVE_CUDA */

#endif /* XFERD_CUDA_DRV_H */
