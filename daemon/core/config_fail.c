/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config_fail.c - a setting's parse error, told (core/config_fail.h).
 * No state; any thread.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/config_fail.h"

int config_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}
