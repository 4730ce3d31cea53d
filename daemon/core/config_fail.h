/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config_fail.h - how a setting's parser says what is wrong with a value
 * (config.c and its files, meta/meta_config.c): one message for the
 * operator, and -EINVAL.  Here in core, below both parsers' floors.  No
 * state; any thread.
 */
#ifndef XFERD_CORE_CONFIG_FAIL_H
#define XFERD_CORE_CONFIG_FAIL_H

#include <stddef.h>

/* Print fmt into err (errlen bytes, cut short if it must); -EINVAL. */
int config_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif /* XFERD_CORE_CONFIG_FAIL_H */
