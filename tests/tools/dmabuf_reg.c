/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dmabuf_reg.c - what xferd's GPUDirect registration (transport/rdma_mr.c,
 * gpu/dmabuf.c) meets on a NIC, with a dma-buf a machine without a GPU
 * can make: a memfd turned into a dma-buf by /dev/udmabuf where the
 * kernel has it, else a dumb buffer of vgem (the virtual GEM driver,
 * which Debian's kernel builds as a module: `modprobe vgem`) exported
 * with PRIME.
 *
 *   dmabuf_reg [DEV]
 *
 * ibv_reg_dmabuf_mr on that dma-buf either works (a NIC with dma-buf
 * memory regions: the MR's keys are printed) or fails with EOPNOTSUPP
 * (Soft-RoCE has none) - any other error fails the test; then the
 * fallback xferd takes, ibv_reg_mr of memory through its mapping (the
 * memfd's), must work.  Prints "dmabuf: supported (SOURCE ...)" or
 * "dmabuf: EOPNOTSUPP (SOURCE)", SOURCE udmabuf or vgem, then
 * "fallback: ok".
 *
 * Device: DEV, else $RXE_DEV, else the first one.  Exit 0 pass, 1 fail,
 * 77 skip (no RDMA device, or neither /dev/udmabuf nor a vgem device).
 */
#include <dirent.h>
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

/* <drm/drm.h> and <drm/drm_mode.h>, spelled out for the same reason. */
struct drm_version_req {
	int version_major, version_minor, version_patchlevel;
	size_t name_len;
	char *name;
	size_t date_len;
	char *date;
	size_t desc_len;
	char *desc;
};
struct drm_create_dumb_req {
	uint32_t height, width, bpp, flags;
	uint32_t handle, pitch;     /* out */
	uint64_t size;              /* out */
};
struct drm_prime_handle_req {
	uint32_t handle;
	uint32_t flags;
	int32_t fd;                 /* out */
};
#define DRM_IOCTL_VERSION_REQ _IOWR('d', 0x00, struct drm_version_req)
#define DRM_IOCTL_PRIME_HANDLE_TO_FD_REQ \
	_IOWR('d', 0x2d, struct drm_prime_handle_req)
#define DRM_IOCTL_MODE_CREATE_DUMB_REQ \
	_IOWR('d', 0xb2, struct drm_create_dumb_req)

/* An open DRM device whose driver is vgem, or -1. */
static int open_vgem(void)
{
	DIR *d = opendir("/dev/dri");
	struct dirent *e;
	int found = -1;

	while (d && found < 0 && (e = readdir(d))) {
		char path[300], name[32] = "";
		if (strncmp(e->d_name, "card", 4))
			continue;
		snprintf(path, sizeof(path), "/dev/dri/%s", e->d_name);
		int fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct drm_version_req v = { .name_len = sizeof(name) - 1,
					     .name = name };
		if (ioctl(fd, DRM_IOCTL_VERSION_REQ, &v) == 0 &&
		    !strcmp(name, "vgem"))
			found = fd;
		else
			close(fd);
	}
	if (d)
		closedir(d);
	return found;
}

/* A dma-buf of len bytes: udmabuf of memfd mfd, else a vgem dumb buffer
 * (*src names which); -1 and a skip line when neither is there. */
static int make_dmabuf(int mfd, const char **src)
{
	int ufd = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);

	if (ufd >= 0) {
		struct udmabuf_create c = { .memfd = (uint32_t)mfd,
					    .flags = UDMABUF_FLAGS_CLOEXEC,
					    .size = LEN };
		int dfd = ioctl(ufd, UDMABUF_CREATE, &c);
		int err = errno;
		close(ufd);
		if (dfd < 0) {
			printf("skip: UDMABUF_CREATE: %s\n", strerror(err));
			return -1;
		}
		*src = "udmabuf";
		return dfd;
	}
	int vfd = open_vgem();
	if (vfd < 0) {
		printf("skip: no /dev/udmabuf (CONFIG_UDMABUF) and no vgem "
		       "device (modprobe vgem)\n");
		return -1;
	}
	/* 32 bits a pixel, 1024 wide: LEN / 4096 rows. */
	struct drm_create_dumb_req c = { .height = LEN / 4096, .width = 1024,
					 .bpp = 32 };
	struct drm_prime_handle_req p = { .flags = O_CLOEXEC | O_RDWR };
	if (ioctl(vfd, DRM_IOCTL_MODE_CREATE_DUMB_REQ, &c) ||
	    c.size < LEN) {
		printf("skip: vgem dumb buffer: %s\n", strerror(errno));
		close(vfd);
		return -1;
	}
	p.handle = c.handle;
	if (ioctl(vfd, DRM_IOCTL_PRIME_HANDLE_TO_FD_REQ, &p)) {
		printf("skip: vgem PRIME export: %s\n", strerror(errno));
		close(vfd);
		return -1;
	}
	/* The dma-buf keeps the buffer; the device may go. */
	close(vfd);
	*src = "vgem";
	return p.fd;
}

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
	int mfd = memfd_create("dmabuf_reg", MFD_ALLOW_SEALING);
	if (mfd < 0 || ftruncate(mfd, LEN) ||
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		perror("memfd");
		return 1;
	}
	const char *src = "";
	int dfd = make_dmabuf(mfd, &src);
	if (dfd < 0) {
		close(mfd);
		return skip(l);
	}
	off_t dlen = lseek(dfd, 0, SEEK_END);
	if (dlen < (off_t)LEN) {
		fprintf(stderr, "FAIL: the %s dma-buf has %lld bytes, not %u\n",
			src, (long long)dlen, LEN);
		return 1;
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
		printf("dmabuf: supported (%s, lkey %#x rkey %#x)\n", src,
		       mr->lkey, mr->rkey);
		ibv_dereg_mr(mr);
	} else if (errno == EOPNOTSUPP || errno == ENOTSUP) {
		printf("dmabuf: EOPNOTSUPP (%s)\n", src);
	} else {
		fprintf(stderr, "FAIL: ibv_reg_dmabuf_mr of a %s dma-buf on "
			"%s: %s\n", src, ibv_get_device_name(dev),
			strerror(errno));
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
	munmap(map, LEN);
	close(mfd);
	return 0;
}
