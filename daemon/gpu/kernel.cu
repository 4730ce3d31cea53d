/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kernel.cu - one kernel that does many copies: a vector of small
 * blocks (KV-cache pages) costs one launch instead of one cuMemcpyAsync
 * each.  Built into a fatbin by nvcc and loaded by gpu/copy.c.
 */
#include <stdint.h>

#include "gpu/kernel.h"

/*
 * One thread block copies one block of bytes: 16-byte loads and stores
 * when both ends and the length allow them (the usual case for KV
 * blocks), bytes otherwise.  Source and destination may be on different
 * GPUs (peer access is enabled between them).
 */
static __device__ __forceinline__ void copy_block(const char *src, char *dst,
						   uint64_t len)
{
	if ((((uint64_t)src | (uint64_t)dst | len) & 15) == 0) {
		const uint4 *s = (const uint4 *)src;
		uint4 *t = (uint4 *)dst;
		const uint64_t n = len / 16, step = blockDim.x;
		uint64_t i = threadIdx.x;
		/* Four loads in flight per thread before the stores: a copy
		 * is latency-bound otherwise. */
		for (; i + 3 * step < n; i += 4 * step) {
			uint4 a = s[i], b = s[i + step], e = s[i + 2 * step],
			      f = s[i + 3 * step];
			t[i] = a;
			t[i + step] = b;
			t[i + 2 * step] = e;
			t[i + 3 * step] = f;
		}
		for (; i < n; i += step)
			t[i] = s[i];
		return;
	}
	for (uint64_t i = threadIdx.x; i < len; i += blockDim.x)
		dst[i] = src[i];
}

/* One thread block per descriptor. */
extern "C" __global__ void xferd_copy_batch(const struct copy_desc *d,
					     unsigned n)
{
	if (blockIdx.x >= n)
		return;
	const struct copy_desc c = d[blockIdx.x];
	copy_block((const char *)c.src, (char *)c.dst, c.len);
}

/*
 * A prepared list transfer, resolved here: pair i copies entry
 * pairs[i].src of the source list to entry pairs[i].dst of the
 * destination list.  The lists' offsets (and lengths, or one length for
 * all) live in device memory, uploaded once per list; only the pairs
 * (8 bytes an entry) come with each transfer, in xferd's own pinned copy
 * of them.  Every index is bounded here against the lists' lengths
 * (src_n, dst_n: xferd's, never the client's): xferd checked them before
 * the launch, so a pair out of bounds is skipped and reported through
 * *bad (mapped pinned memory, read when the launch has ended).  One
 * thread block per pair.
 */
extern "C" __global__ void xferd_copy_indexed(uint64_t src_base,
					       const uint64_t *src_off,
					       uint32_t src_n,
					       uint64_t dst_base,
					       const uint64_t *dst_off,
					       uint32_t dst_n,
					       const uint64_t *lens,
					       uint64_t len,
					       const struct copy_pair *pairs,
					       unsigned n,
					       volatile unsigned *bad)
{
	if (blockIdx.x >= n)
		return;
	const struct copy_pair p = pairs[blockIdx.x];
	if (p.src >= src_n || p.dst >= dst_n) {
		if (threadIdx.x == 0)
			*bad = 1;  /* every writer stores the same value */
		return;
	}
	copy_block((const char *)(src_base + src_off[p.src]),
		   (char *)(dst_base + dst_off[p.dst]),
		   lens ? lens[p.src] : len);
}
