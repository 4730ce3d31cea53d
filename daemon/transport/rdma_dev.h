/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_dev.h - this node's RDMA NICs and the rails on them.
 *
 * A rail is one (device, port) that a peer can address: a GID and an IP
 * address on the port's network interface.  On RoCE that is the RoCEv2
 * GID that is the interface's IPv4 address (::ffff:a.b.c.d); on
 * InfiniBand the port GID (index 0) and the address of its IPoIB
 * interface.  The IP address is what peers match subnets on (netaddr.h),
 * the GID what their QPs are addressed to.
 *
 * Every device is opened once at start, before READY, and kept with one
 * protection domain, one completion channel and one completion queue for
 * the data path.  A device that fails is logged and left out; no device
 * at all means TCP only, which is not an error.  Opened and closed on the
 * main thread before and after the progress thread runs; read-only in
 * between, so both threads may read it.
 */
#ifndef XFERD_RDMA_DEV_H
#define XFERD_RDMA_DEV_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <net/if.h>

#include "nic/netaddr.h"

#define RDMA_DEV_NAME_MAX 64  /* IBV_SYSFS_NAME_MAX */
#define RDMA_DEV_MAX      16  /* devices kept open */
#define RDMA_RAIL_MAX     32  /* rails over all devices */

/* The kinds of GID a port has (ibv_gid_type's, in our own names so that
 * the pure helpers below need no verbs headers). */
enum rdma_gid_type {
	RDMA_GID_IB = 0,
	RDMA_GID_ROCE_V1,
	RDMA_GID_ROCE_V2,
};

/* For xferctl: one rail as it is now. */
struct rdma_rail_info {
	char dev[RDMA_DEV_NAME_MAX];
	unsigned port;
	const char *state;        /* "ACTIVE", "DOWN", ...: the port's now */
	const char *link_layer;   /* "InfiniBand" or "Ethernet" */
	const char *transport;    /* "IB", "RoCEv1" or "RoCEv2" */
	unsigned mtu;             /* the port's active MTU now, bytes */
	uint16_t lid;             /* InfiniBand only; 0 on RoCE */
	int gid_index;
	uint8_t gid[16];
	char gid_text[INET6_ADDRSTRLEN];
	struct netaddr addr;      /* with its prefix length */
	char netdev[IF_NAMESIZE];
	int dev_index;            /* its device's number (rdma_dev_verbs) */
	const char *windows;      /* "type1,type2b", ... or "none" */
};

/*
 * Open every RDMA device (only those named in the comma-separated list
 * `only`, unless it is NULL or "") and find its rails; logs one line per
 * rail, and why for each device or port left out.  Returns the number of
 * rails (0: TCP only); never fails.  Blocks briefly (verbs and netlink).
 */
int rdma_dev_open_all(const char *only);
/* Close what rdma_dev_open_all opened; safe to call when it found none. */
void rdma_dev_close_all(void);
/* Devices kept open (those with at least one rail). */
int rdma_dev_count(void);
/* Rails over all devices, in device then port order. */
int rdma_dev_rail_count(void);
/* Rail i, its port state and MTU queried now.  0, or -ENOENT. */
int rdma_dev_rail(int i, struct rdma_rail_info *out);

/* --- for the data path (transport/rdma.c, rdma_mr.c) --- */

struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_comp_channel;

/* Device dev's verbs objects, valid until rdma_dev_close_all().  The
 * CQ takes the completions of every QP of the device. */
struct rdma_dev_verbs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_comp_channel *channel;
	int cq_depth;
};
int rdma_dev_verbs(int dev, struct rdma_dev_verbs *out);

/* How a QP on rail i is addressed, as found at start. */
struct rdma_rail_addr {
	int dev;                  /* device number (rdma_dev_verbs) */
	uint8_t port;
	int gid_index;
	uint8_t gid[16];
	uint16_t lid;
	int mtu;                  /* enum ibv_mtu */
	bool infiniband;
	struct netaddr addr;
};
int rdma_dev_rail_addr(int i, struct rdma_rail_addr *out);

/* --- pure helpers (unit-tested) --- */

/* One GID table entry, as rdma_dev_pick_gid sees it. */
struct rdma_gid {
	uint8_t raw[16];
	int index;
	enum rdma_gid_type type;
	char netdev[IF_NAMESIZE];  /* "" when the kernel named none */
};

/* True when gid is IPv4-mapped (::ffff:a.b.c.d); the address then goes
 * to ip (network order) if ip is not NULL. */
bool rdma_dev_gid_ipv4(const uint8_t gid[16], uint8_t ip[4]);

/*
 * The RoCE rail of a port: the first RoCEv2 IPv4-mapped GID of gids
 * whose address is one of local's, preferring an address on the GID's
 * own netdev.  Returns the index into gids with *local_i the index into
 * local, or -ENOENT.
 */
int rdma_dev_pick_roce(const struct rdma_gid *gids, size_t ngids,
		       const struct netaddr *local, size_t nlocal,
		       size_t *local_i);

/* True when hwaddr (sysfs text "80:00:00:48:fe:80:...") is the hardware
 * address of an IPoIB interface on the port whose GID is gid: 20 bytes,
 * a QP number then that GID. */
bool rdma_dev_ipoib_has_gid(const char *hwaddr, const uint8_t gid[16]);

/* An ibv_mtu (1..5) in bytes; 0 for anything else. */
unsigned rdma_dev_mtu_bytes(int ibv_mtu);

#endif /* XFERD_RDMA_DEV_H */
