/* SPDX-License-Identifier: Apache-2.0 */
/*
 * container_of.h - the struct around an embedded member, as the Linux
 * kernel spells it: the engine and the transports hand out pointers to
 * a job or an op embedded in their own records and get them back in
 * callbacks.
 */
#ifndef XFER_COMMON_CONTAINER_OF_H
#define XFER_COMMON_CONTAINER_OF_H

#include <stddef.h>

#define container_of(p, type, member) \
	((type *)(void *)((char *)(p) - offsetof(type, member)))

#endif /* XFER_COMMON_CONTAINER_OF_H */
