/* SPDX-License-Identifier: Apache-2.0 */
/*
 * paths.h - the names of the data paths (XFER_PATH_*), one table for
 * libxfer's xfer_path_name() and xferd's counters in xferctl status.
 */
#ifndef XFER_COMMON_PATHS_H
#define XFER_COMMON_PATHS_H

/* "none", "memcpy", "cma", "cuda-ipc", "rdma", "rdma-staged", "tcp";
 * "unknown" for a value outside enum xfer_path.  A static string. */
const char *path_name(unsigned path);

#endif /* XFER_COMMON_PATHS_H */
