/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_mr.h - host memory registered with this node's RDMA NICs.
 *
 * A memfd region is registered whole, from xferd's own mapping, on every
 * RDMA device, once, when the client registers it (on the registration
 * thread, mem/regworker.h, while the client waits): both ends of an RDMA
 * transfer need it (the initiator's lkey, the owner's rkey), and the
 * owner hands out rkeys when another xferd checks a token, before any
 * transfer.  The registration is an entry of the registration cache
 * (rcache.h, RCACHE_NIC_MR) that the region holds a reference to; it is
 * released with the region's last reference, so a descriptor in flight
 * keeps it, and a deregistered or departed client's memory is no longer
 * reachable by any NIC once its transfers are done.
 *
 * Registration pins the pages: on a real node xferd needs a memlock
 * limit as large as the memory its clients register (the systemd unit
 * sets LimitMEMLOCK=infinity).  A registration that fails leaves the
 * region on the TCP path; it is not an error for the client.
 */
#ifndef XFERD_RDMA_MR_H
#define XFERD_RDMA_MR_H

#include <stdbool.h>
#include <stdint.h>

struct rcache;
struct region;

/* Register memfd region r on every device (nothing without devices).
 * Returns 0 or -errno; r is unchanged on failure.  Main thread. */
int rdma_mr_register(struct rcache *rc, struct region *r);

/*
 * GPU memory toward the NICs (GPUDirect RDMA): register the GPU
 * allocation region r lies in - xferd's import of it at addr, size
 * bytes; the client's base and the buffer id name it in the cache - on
 * every device: ibv_reg_dmabuf_mr on a dma-buf of it, else ibv_reg_mr
 * on the device pointer (nvidia-peermem).  The registration thread,
 * after the import.  0 or -errno (r unchanged: it stays staged).
 */
struct rdma_gpu_span {
	uint64_t addr, size;          /* xferd's import of the allocation */
	uint64_t client_base, buffer_id;
};
int rdma_mr_register_gpu(struct rcache *rc, struct region *r,
			 const struct rdma_gpu_span *g);

/* The keys of region r on device dev: false if r is not registered
 * there.  Any thread holding a reference to r. */
bool rdma_mr_keys(const struct region *r, int dev, uint32_t *lkey,
		  uint32_t *rkey);

#endif /* XFERD_RDMA_MR_H */
