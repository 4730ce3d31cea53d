/* SPDX-License-Identifier: Apache-2.0 */
/*
 * numparse.h - numbers as people and the kernel write them: sizes with a
 * K/M/G/T suffix ("64K", "16M", "2G"; powers of 1024) and hex bytes
 * ("3f").  One copy for xferd's config parser, the tools and the tests,
 * so that "4G" means one thing everywhere.
 *
 * Pure functions: no state, no locks, any thread.
 */
#ifndef XFER_COMMON_NUMPARSE_H
#define XFER_COMMON_NUMPARSE_H

#include <stdint.h>

/* numparse_size() flags. */
enum {
	/* Also "8B", "4KB", "4KiB" (the tools print KiB, MiB, ...). */
	NUMPARSE_BYTE_UNIT = 1u << 0,
	/* The number in any base strtoull() takes ("0x1000", "010"). */
	NUMPARSE_ANY_BASE = 1u << 1,
};

/*
 * "123", "64K", "16M", "2G", "3T" (either case) -> *out.  The string must
 * start with a digit and hold nothing else: no sign, no space, no other
 * suffix.  Returns 0, or -EINVAL (*out unchanged) on anything else or on
 * a value past UINT64_MAX.
 */
int numparse_size(const char *s, unsigned flags, uint64_t *out);

/* Two hex digits (either case) -> 0..255; -1 if either is not one. */
int numparse_hex_byte(const char s[2]);

#endif /* XFER_COMMON_NUMPARSE_H */
