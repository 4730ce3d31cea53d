/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu.h - xferd's GPUs.
 *
 * The CUDA driver is loaded at run time (dlopen of libcuda.so.1), so
 * xferd builds and runs without it; then every GPU request gets -ENOTSUP.
 * With it, every GPU is opened at start (primary context, streams, peer
 * access between all pairs that allow it) before xferd says READY.
 *
 * Clients' GPU memory is imported once per allocation (legacy CUDA IPC
 * handle, or a VMM shareable fd) and kept in the registration cache
 * (rcache.h), keyed by client, allocation base and CUDA buffer id.
 */
#ifndef XFERD_CUDA_H
#define XFERD_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/xop.h"

struct rcache;
struct rcache_entry;

#define GPU_MAX 16
#define GPU_UUID_LEN 16
#define GPU_IPC_HANDLE_LEN 64

/* What a client says about the allocation behind its GPU region. */
struct gpu_alloc_desc {
	uint8_t uuid[GPU_UUID_LEN];
	uint64_t base, size, buffer_id;
	uint8_t ipc_handle[GPU_IPC_HANDLE_LEN]; /* legacy (cudaMalloc) */
	bool vmm;                               /* else: the fd is the handle */
};

/* Open the driver and every GPU.  Returns the number of GPUs (0: no
 * driver or none), or -errno when a GPU that exists cannot be opened. */
int gpu_init(void);
void gpu_fini(void);
int gpu_count(void);
const char *gpu_unavailable_reason(void);

/*
 * Import (or find in rc) the allocation of `client` described by d; fd
 * is the VMM handle (consumed) or -1.  On success *entry holds a
 * reference (rcache_put it), *base_ptr is the allocation base in xferd's
 * address space and *dev the GPU's index here.
 */
int gpu_import(struct rcache *rc, uint64_t client,
	       const struct gpu_alloc_desc *d, int fd,
	       struct rcache_entry **entry, uint64_t *base_ptr, int *dev);

/*
 * The same legacy IPC allocation opened again in the context of GPU
 * `accessor` (another cache entry).  A mapping opened where the copy runs
 * is what lets that GPU's copy engines and kernels reach the memory over
 * NVLink; one opened only in the owning GPU's context is not peer-mapped.
 */
int gpu_import_on(struct rcache *rc, uint64_t client,
		  const struct gpu_alloc_desc *d, int accessor,
		  struct rcache_entry **entry, uint64_t *base_ptr);

/* Pin xferd's mapping of a memfd region for GPU copies (once). */
int gpu_host_register(void *p, size_t len);
void gpu_host_unregister(void *p);

/* For xferctl: GPU i's name, UUID, and whether i can access j. */
struct gpu_info {
	char name[96];
	uint8_t uuid[GPU_UUID_LEN];
	uint64_t mem_total, mem_free;
	bool peer[GPU_MAX];
	char bdf[16];        /* PCI bus id, "0000:17:00.0"; "" unknown */
	bool dmabuf;         /* the driver exports its memory as dma-buf */
};
int gpu_info(int i, struct gpu_info *out);

/* --- the copy engine, used by the progress thread (gpu/copy.c) --- */

struct gpu_copies;

/*
 * What the copy engine keeps of an op it copies for, at the start of
 * that op's private area (XOP_PRIV): whoever hands it copies (the GPU
 * mover, local/gpu.c; a staging chunk's copy, gpu/stage.c) puts its
 * own fields after it.  Zero when the op is new.
 */
struct gpu_op {
	unsigned parts;   /* copies of it still in flight */
	int error;        /* first failure among them */
	/* Set: its copies end here, not through gpu_copies_poll's done()
	 * (a staging chunk's copy, gpu/stage.c). */
	void (*on_done)(struct xop *op, int64_t result);
};

static inline struct gpu_op *gpu_op_of(struct xop *op)
{
	return XOP_PRIV(op, struct gpu_op);
}

struct gpu_copies *gpu_copies_create(void);
void gpu_copies_destroy(struct gpu_copies *g);
/*
 * Queue a copy of len bytes for op; the op ends through done() in
 * gpu_copies_poll() once all its copies are done (an op may have many:
 * it counts them in gpu_op_of(op)->parts, which starts at 0).
 * dst_dev/src_dev: the GPU each end is memory of, or -1 for xferd's
 * pinned host memory (at least one end is a GPU's).  0: some of it is
 * out, and op ends through poll (failed, if the rest could not go);
 * -errno: none of this copy is out (poll ends op only for copies queued
 * for it before).
 */
int gpu_copy(struct gpu_copies *g, struct xop *op, uint64_t dst, int dst_dev,
	     uint64_t src, int src_dev, uint64_t len);
/* Launch what was queued (many small copies go as one kernel). */
void gpu_copies_flush(struct gpu_copies *g);
/* Finished copies: done() for each completed op, or the op's own
 * gpu_op_of(op)->on_done where it has one (staging chunks); returns
 * how many. */
unsigned gpu_copies_poll(struct gpu_copies *g,
			 void (*done)(void *arg, struct xop *op, int64_t res),
			 void *arg);
bool gpu_copies_busy(const struct gpu_copies *g);

/*
 * Prepared lists on a GPU (indexed copies).  A list transfer between
 * two GPU regions moves thousands of blocks; resolving each block on the
 * host and uploading its addresses costs more than the copy.  Instead a
 * list's offsets (and lengths) are uploaded to a GPU once, and a
 * transfer sends only its index pairs (8 bytes a block), resolved by
 * the kernel: one launch per transfer.
 */
struct gpu_list;
struct copy_pair;
/* Upload n offsets (and lengths; NULL: every entry is the same length)
 * to GPU dev.  Synchronous (a small host-to-device copy). */
int gpu_list_upload(int dev, const uint64_t *off, const uint64_t *lens,
		    uint32_t n, struct gpu_list **out);
/* Accepts NULL; no copy may still use it. */
void gpu_list_free(struct gpu_list *l);
/*
 * Pinned room for the pairs of one indexed launch on GPU dev
 * (COPY_PAIRS_MAX at most); NULL when every slot is out (then copy the
 * blocks one by one with gpu_copy).  *slot names it for the launch, or
 * for gpu_pairs_release when nothing is launched after all.
 */
struct copy_pair *gpu_pairs_reserve(struct gpu_copies *g, int dev, int *slot);
void gpu_pairs_release(struct gpu_copies *g, int dev, int slot);
/*
 * Launch n pairs written to slot: block pairs[i].src of the source list
 * (at src_base on dev) to block pairs[i].dst of the destination list
 * (at dst_base), each len bytes or the source list's own lengths.  Both
 * bases must be addresses valid on dev.  Counts one part of op; the slot
 * comes back when the launch is done (or at once on failure: -EIO).
 */
int gpu_copy_indexed(struct gpu_copies *g, struct xop *op, int dev, int slot,
		     uint64_t src_base, const struct gpu_list *src,
		     uint64_t dst_base, const struct gpu_list *dst,
		     uint64_t len, uint32_t n);
/*
 * Client pc is going: its copies queued or in flight still run to the
 * end (each op holds its regions), but none of them may reach pc or its
 * batches any more.  Every op of pc loses its pc and batch; forget() is
 * called once for each distinct batch they had.
 */
struct prog_client;
struct abatch;
void gpu_copies_forget_client(struct gpu_copies *g,
			      const struct prog_client *pc,
			      void (*forget)(void *arg, struct abatch *ab),
			      void *arg);

#endif /* XFERD_CUDA_H */
