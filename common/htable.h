/* SPDX-License-Identifier: Apache-2.0 */
/*
 * htable.h - uthash (Debian uthash-dev) as xferd and libxfer use it.
 *
 * uthash exit()s when it cannot allocate; a daemon must not.  With
 * HASH_NONFATAL_OOM a failed HASH_ADD leaves the element out and its
 * hh.tbl NULL (htable_added() says so) and a failed expansion keeps the
 * old buckets.  Every file that uses uthash includes this header instead
 * of <uthash.h>, so that no table in the program exits on OOM.
 */
#ifndef XFER_COMMON_HTABLE_H
#define XFER_COMMON_HTABLE_H

#define HASH_NONFATAL_OOM 1
#include <uthash.h>

/* After HASH_ADD*(hh, head, ..., elt): whether elt went in. */
#define htable_added(elt) ((elt)->hh.tbl != NULL)

#endif /* XFER_COMMON_HTABLE_H */
