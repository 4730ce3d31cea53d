/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errors.c - human-readable errors and path names.
 */
#include <errno.h>
#include <string.h>

#include "common/paths.h"
#include "internal.h"

XFER_EXPORT const char *xfer_path_name(unsigned path)
{
	return path_name(path);
}

XFER_EXPORT const char *xfer_strerror(int err)
{
	/* The meanings libxfer and xferd give these codes; the rest are
	 * what the C library says. */
	switch (err) {
	case 0: return "success";
	/* xfer_open's -EACCES is connect() refused by the socket's mode:
	 * the one a new user meets first, so its fix comes first. */
	case -EACCES: return "permission denied on the xferd socket: add the "
			     "user to group xferd (socket_group in xferd.conf); "
			     "after xfer_open: not your handle, or the token's "
			     "key does not match";
	case -ERANGE: return "offset or length outside the region or token";
	case -ESTALE: return "the target region was deregistered";
	case -ENOTCONN: return "not connected to xferd (it stopped or dropped this client)";
	case -EPROTO: return "protocol error talking to xferd (version mismatch?)";
	case -ENOENT: return "not found (no such published name, or no xferd socket at that path)";
	case -ECONNREFUSED: return "xferd is not listening on that socket";
	case -ETIME: return "timed out waiting for a completion";
	case -EHOSTUNREACH: return "the other node's xferd cannot be reached (no address, or unknown node)";
	case -ECONNRESET: return "the other end went away: the link to the other node's xferd broke, or a stream's other process died";
	case -EPIPE: return "the other end closed the stream";
	case -ETIMEDOUT: return "the other node's xferd did not answer in time";
	case -ECANCELED: return "cancelled (the client is closing)";
	case -ENOBUFS: return "a descriptor's notification refused: its owner already holds xferd's notify_queue_max unread ones, or its user's clients notify_queue_max_per_uid (the data, if any, landed); or, creating a prepared list, the client's lists would exceed dlist_max_client_entries, or its user's dlist_max_uid_bytes";
	case -EEXIST: return "the name is published by another client";
	case -ENOTSUP: return "not supported here (no GPU or CUDA driver for GPU memory, or memory xferd cannot reach that way; see xferctl gpus)";
	case -ENODEV: return "a GPU this xferd does not see";
	case -ESRCH: return "the process owning the memory has exited";
	case -EFAULT: return "the registered memory is no longer mapped";
	case -ENOSPC: return "too many regions (xferd's max_regions, max_regions_per_uid) or prepared lists (dlist_max_per_client, dlist_max_per_uid) of this client or its user, or a buffer too small";
	/* xferd's limits (xferd.conf(5)), one code each. */
	case -EMFILE: return "too many connections of this user to xferd (max_connections_per_uid)";
	case -EUSERS: return "xferd serves its maximum number of clients (max_clients), or of xferctl connections (max_ctl_connections, max_ctl_per_uid)";
	case -EDQUOT: return "host memory xferd maps for this client (max_client_bytes) or for its user (max_uid_bytes) would be exceeded";
	case -ENFILE: return "fds xferd holds for this client (max_client_fds) or its user (max_uid_fds) would be exceeded, or xferd's fds for clients are in use (fd_reserve)";
	case -EFBIG: return "region larger than xferd's max_region_bytes";
	case -ETOOMANYREFS: return "too many imported tokens of this client or its user (xferd's max_imports, max_imports_per_uid)";
	case -EMLINK: return "too many names published by this client or its user (xferd's max_names, max_names_per_uid)";
	case -EADDRNOTAVAIL: return "the token's or lookup's address is not a known peer of xferd (without a cluster key xferd dials only configured peers and etcd members)";
	case -EAGAIN: return "try again: not ready yet (no completion, no room), or too many connections to other nodes asked for at once (xferd's peer_connect_rate)";
	case -E2BIG: return "more entries than xferd's dlist_max_entries, or more index pairs than the ring's index area holds";
	}
	return err < 0 ? strerror(-err) : "not an error code";
}
