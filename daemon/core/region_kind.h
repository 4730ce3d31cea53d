/* SPDX-License-Identifier: Apache-2.0 */
/*
 * region_kind.h - the kinds of memory a descriptor's ends can be.
 *
 * A type shared by the memory layer (mem/region.h, whose regions carry
 * one) and by the route decision (core/path.h), which must not depend
 * on mem/.  No code, no state.
 */
#ifndef XFERD_REGION_KIND_H
#define XFERD_REGION_KIND_H

enum region_kind {
	REGION_MEMFD = 1, /* matches xfer.client.MemKind */
	REGION_CMA = 2,
	/* GPU memory of a client, imported by xferd (cuda.h). */
	REGION_CUDA = 3,
	/* A region of another xferd, known through an imported token.  Its
	 * length is the token's range; offsets are relative to that range. */
	REGION_REMOTE = 4,
};

#endif /* XFERD_REGION_KIND_H */
