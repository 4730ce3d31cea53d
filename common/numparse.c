/* SPDX-License-Identifier: Apache-2.0 */
/*
 * numparse.c - sizes with suffixes and hex bytes (numparse.h).  Pure
 * functions, any thread.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/numparse.h"

int numparse_size(const char *s, unsigned flags, uint64_t *out)
{
	char *end;
	unsigned shift = 0;

	/* strtoull alone would take leading spaces and signs. */
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end,
					flags & NUMPARSE_ANY_BASE ? 0 : 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	case 'T': case 't': shift = 40; end++; break;
	default: break;
	}
	if (flags & NUMPARSE_BYTE_UNIT) {
		if (shift && strcmp(end, "iB") == 0)
			end += 2;
		else if (*end == 'B')
			end++;
	}
	if (*end != '\0' || (shift && v > (ULLONG_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int numparse_hex_byte(const char s[2])
{
	int hi = hex_digit(s[0]);
	/* s[1] is not read past a NUL in s[0]. */
	int lo = hi < 0 ? -1 : hex_digit(s[1]);

	return lo < 0 ? -1 : hi << 4 | lo;
}
