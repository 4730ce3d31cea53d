/*
 * kernel.cu - one kernel that does many copies: a vector of small
 * blocks (KV-cache pages) costs one launch instead of one cuMemcpyAsync
 * each.  Built into a fatbin by nvcc and loaded by gpu/copy.c.
 */
#include <stdint.h>

#include "gpu/kernel.h"

/*
 * One thread block per descriptor.  16-byte loads and stores when both
 * ends and the length allow them (the usual case for KV blocks), bytes
 * otherwise.  Source and destination may be on different GPUs (peer
 * access is enabled between them).
 */
extern "C" __global__ void xferd_copy_batch(const struct copy_desc *d,
					     unsigned n)
{
	if (blockIdx.x >= n)
		return;
	const struct copy_desc c = d[blockIdx.x];
	const char *src = (const char *)c.src;
	char *dst = (char *)c.dst;

	if (((c.src | c.dst | c.len) & 15) == 0) {
		const uint4 *s = (const uint4 *)src;
		uint4 *t = (uint4 *)dst;
		const uint64_t n = c.len / 16, step = blockDim.x;
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
	for (uint64_t i = threadIdx.x; i < c.len; i += blockDim.x)
		dst[i] = src[i];
}
