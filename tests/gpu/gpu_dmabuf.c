/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_dmabuf.c - the dma-buf export of GPU memory (daemon/gpu/dmabuf.c)
 * that xferd's GPUDirect RDMA registration starts from (transport/
 * rdma_mr.c: ibv_reg_dmabuf_mr at the span's offset), linked in with the
 * daemon's GPU objects as the unit tests link them: no xferd, no NIC.
 *
 * On cudaMalloc memory and on VMM memory (cuMemCreate + cuMemMap, made
 * as gpulib makes it for gpu_vmm.c), for ranges at unaligned starts and
 * of unaligned lengths (1 byte, across a 64 KiB page boundary, a page's
 * last byte, odd lengths, the allocation's last byte, the whole
 * allocation): an fd comes back; the span starts on a 64 KiB page at or
 * before the range, ends on one at or after it, is no wider than that,
 * stays inside the allocation, and its offset is where the range starts
 * in it; lseek(fd, 0, SEEK_END), the dma-buf's size, covers offset +
 * length (what the NIC registration reaches).  After every fd is closed
 * no fd is left open.  An empty range is -EINVAL and a GPU that does not
 * exist -ENOTSUP, before the driver is asked.
 *
 * Where the driver exports no dma-buf (the device attribute says so, or
 * it refuses the first, plain export: a kernel module without dma-buf)
 * the test skips with one line; xferd then keeps GPU regions staged.
 *
 * Single thread.  Exit 0 pass, 1 fail, 77 skip.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "gpu/dmabuf.h"
#include "gpu/gpu.h"

#include "gpulib.h"

#define PAGE     65536ull            /* the export's page (dmabuf.c) */
#define LEN      (4ull << 20)        /* the part of each buffer used */

struct range {
	uint64_t off, len;
};

static const struct range ranges[] = {
	{ 0, LEN },                       /* the whole allocation */
	{ 1, 1 },
	{ PAGE - 1, 1 },                  /* a page's last byte */
	{ PAGE - 1, 2 },                  /* across a boundary */
	{ PAGE, PAGE },                   /* exactly one page */
	{ 4097, 3 * PAGE + 5 },
	{ 12345, LEN - 12345 },           /* to the end */
	{ LEN - 1, 1 },                   /* the last byte */
	{ 3 * PAGE + 17, 2 * PAGE - 40 },
};
#define NRANGES (sizeof(ranges) / sizeof(ranges[0]))

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	T_ASSERT(d, "opendir /proc/self/fd: %s", strerror(errno));
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* base: a 64 KiB aligned address with LEN bytes of the allocation from
 * it.  Returns how many ranges exported. */
static unsigned check_ranges(int dev, uint64_t base, const char *what)
{
	struct dmabuf_span s;
	unsigned n = 0;
	int fd = -1;

	/* A first export, so that what the driver opens once for it is
	 * open before the fds are counted. */
	int err = gpu_dmabuf_export_on(dev, base, PAGE, &fd, &s);
	T_ASSERT(err == 0, "%s: first export: %d (%s)", what, err,
		 strerror(-err));
	close(fd);
	int before = open_fds();
	for (unsigned i = 0; i < NRANGES; i++) {
		uint64_t ptr = base + ranges[i].off, len = ranges[i].len;
		uint64_t lo = ptr & ~(PAGE - 1);
		uint64_t hi = (ptr + len + PAGE - 1) & ~(PAGE - 1);

		fd = -1;
		err = gpu_dmabuf_export_on(dev, ptr, len, &fd, &s);
		T_ASSERT(err == 0 && fd >= 0, "%s: export of %llu bytes at "
			 "+%llu: %d (%s)", what, (unsigned long long)len,
			 (unsigned long long)ranges[i].off, err,
			 strerror(-err));
		T_ASSERT(s.base == lo && s.size == hi - lo &&
			 s.offset == ptr - lo,
			 "%s: +%llu len %llu: span base +%lld size %llu offset "
			 "%llu, expected +%lld %llu %llu", what,
			 (unsigned long long)ranges[i].off,
			 (unsigned long long)len, (long long)(s.base - base),
			 (unsigned long long)s.size,
			 (unsigned long long)s.offset, (long long)(lo - base),
			 (unsigned long long)(hi - lo),
			 (unsigned long long)(ptr - lo));
		T_ASSERT(s.base % PAGE == 0 && s.size % PAGE == 0 &&
			 s.base >= base && s.base + s.size <= base + LEN,
			 "%s: span outside the allocation's pages", what);
		off_t size = lseek(fd, 0, SEEK_END);
		T_ASSERT(size >= 0, "%s: lseek(SEEK_END) on the dma-buf: %s",
			 what, strerror(errno));
		T_ASSERT((uint64_t)size >= s.offset + len,
			 "%s: +%llu len %llu: the dma-buf has %lld bytes, the "
			 "registration reaches %llu", what,
			 (unsigned long long)ranges[i].off,
			 (unsigned long long)len, (long long)size,
			 (unsigned long long)(s.offset + len));
		T_ASSERT(close(fd) == 0, "%s: close: %s", what,
			 strerror(errno));
		n++;
	}
	T_ASSERT(open_fds() == before, "%s: %d fds open after closing every "
		 "dma-buf, %d before", what, open_fds(), before);
	return n;
}

/* b->ptr rounded up to the export's page: the ranges' base. */
static uint64_t page_base(const struct gl_buf *b)
{
	return ((uint64_t)(uintptr_t)b->ptr + PAGE - 1) & ~(PAGE - 1);
}

int main(void)
{
	struct gl_buf dev_buf, vmm_buf;
	struct gpu_info gi;
	struct dmabuf_span s;
	int fd = -1;

	gl_require_gpus(1);
	log_init(LOG_LVL_INFO);
	int n = gpu_init();
	T_ASSERT(n >= 1, "gpu_init: %d (%s)", n, gpu_unavailable_reason());
	T_ASSERT(gpu_info(0, &gi) == 0, "gpu_info(0)");
	if (!gi.dmabuf) {
		printf("skip: GPU 0 (%s) exports no dma-buf (its driver says "
		       "so: no dma-buf support in this kernel module)\n",
		       gi.name);
		gpu_fini();
		return TL_SKIP;
	}
	/* One page more than used: the ranges start on a page of it. */
	gl_alloc(NULL, GL_DEVICE, 0, LEN + PAGE, &dev_buf);
	uint64_t base = page_base(&dev_buf);

	/* Refused before the driver is asked. */
	T_ASSERT(gpu_dmabuf_export_on(0, base, 0, &fd, &s) == -EINVAL,
		 "an empty range is -EINVAL");
	T_ASSERT(gpu_dmabuf_export_on(gpu_count(), base, PAGE, &fd, &s) ==
			 -ENOTSUP, "a GPU that does not exist is -ENOTSUP");
	T_ASSERT(fd == -1, "an fd came back from a refusal");

	int err = gpu_dmabuf_export_on(0, base, PAGE, &fd, &s);
	if (err == -ENOTSUP) {
		printf("skip: the driver refused to export GPU 0's memory as "
		       "dma-buf (the line above says why)\n");
		gl_buf_free(NULL, &dev_buf, false);
		gpu_fini();
		return TL_SKIP;
	}
	T_ASSERT(err == 0, "first export: %d (%s)", err, strerror(-err));
	close(fd);

	unsigned done = check_ranges(0, base, "cudaMalloc");

	gl_alloc(NULL, GL_VMM, 0, LEN + PAGE, &vmm_buf);
	done += check_ranges(0, page_base(&vmm_buf), "vmm");

	gl_buf_free(NULL, &vmm_buf, false);
	gl_buf_free(NULL, &dev_buf, false);
	gpu_fini();
	printf("gpu_dmabuf: %u exports of cudaMalloc and VMM memory, spans "
	       "and dma-buf sizes right\n", done);
	return 0;
}
