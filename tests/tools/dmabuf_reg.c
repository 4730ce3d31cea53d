/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dmabuf_reg.c - what xferd's GPUDirect registration (transport/rdma_mr.c,
 * gpu/dmabuf.c) meets on a NIC, with a dma-buf a machine without a GPU
 * can make: a memfd turned into a dma-buf by /dev/udmabuf.
 *
 *   dmabuf_reg [DEV]
 *
 * ibv_reg_dmabuf_mr on that dma-buf either works (a NIC with dma-buf
 * memory regions: the MR's keys are printed) or fails with EOPNOTSUPP
 * (Soft-RoCE has none) - any other error fails the test; then the
 * fallback xferd takes, ibv_reg_mr on the same memory through its
 * mapping, must work.  Prints "dmabuf: supported" or "dmabuf:
 * EOPNOTSUPP", then "fallback: ok".
 *
 * Device: DEV, else $RXE_DEV, else the first one.  Exit 0 pass, 1 fail,
 * 77 skip (no RDMA device, or no /dev/udmabuf in this kernel).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define LEN (2u << 20)

/* <linux/udmabuf.h>, spelled out: the build host may lack it. */
struct udmabuf_create {
	uint32_t memfd;
	uint32_t flags;
	uint64_t offset;
	uint64_t size;
};
#define UDMABUF_FLAGS_CLOEXEC 0x01
#define UDMABUF_CREATE _IOW('u', 0x42, struct udmabuf_create)

static struct ibv_device *pick(struct ibv_device **l, int n, const char *want)
{
	for (int i = 0; i < n; i++)
		if (!want || !strcmp(ibv_get_device_name(l[i]), want))
			return l[i];
	return NULL;
}

/* Skip, giving back the device list (a leak fails the ASan pass). */
static int skip(struct ibv_device **l)
{
	if (l)
		ibv_free_device_list(l);
	return 77;
}

int main(int argc, char **argv)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ;
	const char *want = argc > 1 ? argv[1] : getenv("RXE_DEV");
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_device *dev = l ? pick(l, n, want && *want ? want : NULL)
				   : NULL;

	if (!dev) {
		printf("skip: no RDMA device\n");
		return skip(l);
	}
	int ufd = open("/dev/udmabuf", O_RDWR);
	if (ufd < 0) {
		printf("skip: /dev/udmabuf: %s (CONFIG_UDMABUF)\n",
		       strerror(errno));
		return skip(l);
	}
	int mfd = memfd_create("dmabuf_reg", MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, LEN) ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		perror("memfd");
		return 1;
	}
	struct udmabuf_create c = { .memfd = (uint32_t)mfd,
				    .flags = UDMABUF_FLAGS_CLOEXEC,
				    .size = LEN };
	int dfd = ioctl(ufd, UDMABUF_CREATE, &c);
	if (dfd < 0) {
		printf("skip: UDMABUF_CREATE: %s\n", strerror(errno));
		return skip(l);
	}
	uint8_t *map = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED,
			    mfd, 0);
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (map == MAP_FAILED || !pd) {
		fprintf(stderr, "FAIL: mmap or %s's protection domain\n",
			ibv_get_device_name(dev));
		return 1;
	}
	memset(map, 0x5a, LEN);
	/* As xferd does: an offset inside the buffer, its iova the address
	 * work requests will name. */
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, 4096, LEN - 4096,
					      (uint64_t)(uintptr_t)map + 4096,
					      dfd, access);
	if (mr) {
		printf("dmabuf: supported (lkey %#x rkey %#x)\n", mr->lkey,
		       mr->rkey);
		ibv_dereg_mr(mr);
	} else if (errno == EOPNOTSUPP || errno == ENOTSUP) {
		printf("dmabuf: EOPNOTSUPP\n");
	} else {
		fprintf(stderr, "FAIL: ibv_reg_dmabuf_mr on %s: %s\n",
			ibv_get_device_name(dev), strerror(errno));
		return 1;
	}
	mr = ibv_reg_mr(pd, map + 4096, LEN - 4096, access);
	if (!mr) {
		fprintf(stderr, "FAIL: fallback ibv_reg_mr: %s\n",
			strerror(errno));
		return 1;
	}
	printf("fallback: ok (lkey %#x)\n", mr->lkey);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
	close(dfd);
	close(ufd);
	munmap(map, LEN);
	close(mfd);
	return 0;
}
