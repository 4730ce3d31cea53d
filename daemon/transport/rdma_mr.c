/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_mr.c - registering memfd regions, and GPU allocations (dma-buf,
 * else nvidia-peermem), with the RDMA devices.  Both go through one
 * registration-cache lookup and one loop over the devices (nic_mr_get),
 * and differ only in how one device registers the memory.  Threads as
 * rdma_mr.h says; no lock of its own (the cache's is a leaf, rcache.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "core/log.h"
#include "core/rcache.h"
#include "gpu/dmabuf.h"
#include "gpu/gpu.h"
#include "transport/rdma_dev.h"
#include "transport/rdma_mr.h"
#include "mem/region.h"

struct nic_mr {
	struct rcache_entry e;    /* first: the cache's view */
	int ndevs;
	struct ibv_mr *mr[RDMA_DEV_MAX];
};

static void nic_mr_release(struct rcache_entry *e)
{
	struct nic_mr *m = (struct nic_mr *)e;

	for (int i = 0; i < m->ndevs; i++) {
		int rc;
		if (m->mr[i] && (rc = ibv_dereg_mr(m->mr[i])))
			log_warnx("ibv_dereg_mr: %s", strerror(rc));
	}
	free(m);
}

/* Both ends of a transfer reach registered memory: the initiator's
 * lkey, the owner's rkeys for reads and writes. */
#define NIC_MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		       IBV_ACCESS_REMOTE_READ)

/* Register what mem says on the device of pd: its MR, or NULL with *err
 * set to -errno. */
typedef struct ibv_mr *nic_reg_fn(struct ibv_pd *pd, const void *mem,
				  int *err);

/*
 * Hand r a reference to the registration named key: the cache's, or one
 * made here with reg on every device (a device without verbs skipped),
 * which the cache keeps unless another thread's came first.  0 or the
 * first device's -errno that failed (nothing registered then).
 */
static int nic_mr_get(struct rcache *rc, struct region *r,
		      const struct rcache_key *key, nic_reg_fn *reg,
		      const void *mem)
{
	int ndevs = rdma_dev_count();
	struct rcache_entry *e = rcache_get(rc, key);

	if (e)
		goto done;
	struct nic_mr *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->e.key = *key;
	m->e.release = nic_mr_release;
	m->ndevs = ndevs;
	for (int i = 0; i < ndevs; i++) {
		struct rdma_dev_verbs v;
		int err = 0;
		if (rdma_dev_verbs(i, &v))
			continue;
		m->mr[i] = reg(v.pd, mem, &err);
		if (!m->mr[i]) {
			nic_mr_release(&m->e);
			return err ? err : -EIO;
		}
	}
	e = rcache_insert(rc, &m->e);
	if (e != &m->e)
		nic_mr_release(&m->e);
done:
	region_set_nic_mr(r, rc, e);
	return 0;
}

/* A memfd region, whole, from xferd's own mapping. */
static struct ibv_mr *reg_memfd(struct ibv_pd *pd, const void *mem, int *err)
{
	const struct region *r = mem;
	struct ibv_mr *mr = ibv_reg_mr(pd, region_map_at(r, 0),
				       region_length(r), NIC_MR_ACCESS);

	if (!mr) {
		*err = errno ? -errno : -ENOMEM;
		log_warn("ibv_reg_mr of %llu bytes (memlock limit?)",
			 (unsigned long long)region_length(r));
	}
	return mr;
}

int rdma_mr_register(struct rcache *rc, struct region *r)
{
	struct stat st;

	if (rdma_dev_count() == 0 || region_kind(r) != REGION_MEMFD)
		return 0;
	if (fstat(region_memfd_fd(r), &st))
		return -errno;
	/* The mapping's address tells regions of the same memfd apart; the
	 * inode a memfd reused at the same address after an unmap. */
	const struct rcache_key key = {
		.client = region_owner(r),
		.kind = RCACHE_NIC_MR,
		.base = (uint64_t)(uintptr_t)region_map_at(r, 0),
		.id = (uint64_t)st.st_ino,
	};
	return nic_mr_get(rc, r, &key, reg_memfd, r);
}

bool rdma_mr_keys(const struct region *r, int dev, uint32_t *lkey,
		  uint32_t *rkey)
{
	const struct nic_mr *m = (const struct nic_mr *)region_nic_mr(r);

	if (!m || dev < 0 || dev >= m->ndevs || !m->mr[dev])
		return false;
	if (lkey)
		*lkey = m->mr[dev]->lkey;
	if (rkey)
		*rkey = m->mr[dev]->rkey;
	return true;
}

/* GPU memory [addr, addr + len) of GPU dev's context. */
struct gpu_mem {
	int dev;
	uint64_t addr, len;
};

/* One device's MR of GPU memory: through a dma-buf of it (Linux >= 5.12,
 * an NVIDIA open kernel module), else ibv_reg_mr on the device pointer
 * (nvidia-peermem).  The MR's iova is addr, so work requests use xferd's
 * GPU addresses. */
static struct ibv_mr *reg_gpu(struct ibv_pd *pd, const void *mem, int *err)
{
	const struct gpu_mem *g = mem;
	struct dmabuf_span span;
	struct ibv_mr *mr = NULL;
	int fd = -1;

	*err = gpu_dmabuf_export_on(g->dev, g->addr, g->len, &fd, &span);
	if (!*err) {
		*err = nic_reg_dmabuf(pd, fd, span.offset, g->len, g->addr,
				      NIC_MR_ACCESS, &mr);
		close(fd);  /* the MR keeps the buffer */
		if (!*err)
			return mr;
	}
	mr = ibv_reg_mr(pd, (void *)(uintptr_t)g->addr, g->len, NIC_MR_ACCESS);
	if (!mr && !*err)
		*err = errno ? -errno : -EIO;
	return mr;
}

int rdma_mr_register_gpu(struct rcache *rc, struct region *r,
			 const struct rdma_gpu_span *g)
{
	if (rdma_dev_count() == 0 || region_kind(r) != REGION_CUDA)
		return 0;
	/* The whole allocation, as its import: every region of it shares
	 * the MR; the buffer id tells a reallocation apart. */
	const struct rcache_key key = {
		.client = region_owner(r),
		.kind = RCACHE_GPU_MR,
		.base = g->client_base,
		.id = g->buffer_id,
	};
	const struct gpu_mem mem = { region_gpu_dev(r), g->addr, g->size };
	return nic_mr_get(rc, r, &key, reg_gpu, &mem);
}
