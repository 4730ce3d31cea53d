/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_dev.c - RDMA NIC discovery at start: devices, ports, GIDs, the
 * rail of each port, and the verbs objects the data path will use.
 *
 * Which GID: RoCE ports carry several per address (RoCEv1 and RoCEv2,
 * IPv6 link-local, IPv4-mapped).  A peer reaches us over UDP/IP only with
 * RoCEv2, and the IPv4-mapped one is the same address the TCP control
 * link and the subnet choice (netaddr.c) use, so a rail's GID and IP
 * always name the same interface.  InfiniBand ports are addressed by
 * their port GID; their IP address (for the subnet choice) is the one of
 * the IPoIB interface whose hardware address carries that GID.
 *
 * Devices, GIDs and addresses are looked at once, at start: one added
 * later is not seen until restart.  Only a port's state and MTU are asked
 * again, for xferctl.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "common/numparse.h"
#include "core/log.h"
#include "transport/rdma_dev.h"

/* Completions of every QP on a device land in its one CQ; the data path
 * sizes its queues to fit in this. */
#define CQ_DEPTH         4096
/* Interface addresses looked at: a host with containers has many. */
#define LOCAL_ADDR_MAX   256
/* "80:00:00:48:fe:80:..." */
#define IPOIB_HWADDR_LEN 20

struct rdma_dev {
	char name[RDMA_DEV_NAME_MAX];
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	int cq_depth;             /* CQ_DEPTH, or less if the device says so */
	const char *windows;      /* the memory windows it has, for xferctl */
};

struct rail {
	int dev;                  /* index into devs */
	unsigned port;
	enum ibv_port_state state; /* at start */
	enum ibv_mtu mtu;         /* at start */
	bool infiniband;          /* else Ethernet (RoCE) */
	uint16_t lid;
	int gid_index;
	uint8_t gid[16];
	struct netaddr addr;
	char netdev[IF_NAMESIZE];
};

static struct rdma_dev devs[RDMA_DEV_MAX];
static int ndevs;
static struct rail rails[RDMA_RAIL_MAX];
static int nrails;

/* --- pure helpers --- */

bool rdma_dev_gid_ipv4(const uint8_t gid[16], uint8_t ip[4])
{
	static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

	if (memcmp(gid, v4_mapped, sizeof(v4_mapped)) != 0)
		return false;
	if (ip)
		memcpy(ip, gid + 12, 4);
	return true;
}

int rdma_dev_pick_roce(const struct rdma_gid *gids, size_t ngids,
		       const struct netaddr *local, size_t nlocal,
		       size_t *local_i)
{
	/* First an address on the GID's own netdev, then anywhere: the
	 * kernel may name no netdev, and a GID whose address moved to
	 * another interface still routes. */
	for (int same_netdev = 1; same_netdev >= 0; same_netdev--) {
		for (size_t g = 0; g < ngids; g++) {
			uint8_t ip[4];

			if (gids[g].type != RDMA_GID_ROCE_V2 ||
			    !rdma_dev_gid_ipv4(gids[g].raw, ip))
				continue;
			for (size_t l = 0; l < nlocal; l++) {
				if (local[l].family != AF_INET ||
				    memcmp(local[l].ip, ip, 4) != 0)
					continue;
				if (same_netdev && strcmp(gids[g].netdev,
							  local[l].ifname) != 0)
					continue;
				*local_i = l;
				return (int)g;
			}
		}
	}
	return -ENOENT;
}

bool rdma_dev_ipoib_has_gid(const char *hwaddr, const uint8_t gid[16])
{
	uint8_t b[IPOIB_HWADDR_LEN];
	const char *s = hwaddr;

	for (size_t i = 0; i < sizeof(b); i++) {
		int v = numparse_hex_byte(s);

		if (v < 0)
			return false;
		b[i] = (uint8_t)v;
		s += 2;
		if (i + 1 < sizeof(b) && *s++ != ':')
			return false;
	}
	if (*s && *s != '\n')
		return false;
	/* The first 4 bytes are flags and the QP number. */
	return memcmp(b + 4, gid, 16) == 0;
}

unsigned rdma_dev_mtu_bytes(int ibv_mtu)
{
	return ibv_mtu >= IBV_MTU_256 && ibv_mtu <= IBV_MTU_4096 ?
	       128u << ibv_mtu : 0;
}

/* --- names for people --- */

/* ibv_port_state_str() says "PORT_ACTIVE"; sysfs and ibv_devinfo users
 * know "ACTIVE". */
static const char *port_state_name(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_NOP:          return "NOP";
	case IBV_PORT_DOWN:         return "DOWN";
	case IBV_PORT_INIT:         return "INIT";
	case IBV_PORT_ARMED:        return "ARMED";
	case IBV_PORT_ACTIVE:       return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
	default:                    return "?";
	}
}

static void gid_text(const uint8_t gid[16], char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, gid, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

static void log_rail(const struct rail *r)
{
	char gid[INET6_ADDRSTRLEN], addr[64], lid[16] = "", line[256];

	gid_text(r->gid, gid, sizeof(gid));
	netaddr_format(&r->addr, true, addr, sizeof(addr));
	if (r->infiniband)
		snprintf(lid, sizeof(lid), ", LID %u", r->lid);
	snprintf(line, sizeof(line), "rail %s/%u: %s, %s, MTU %u%s, GID[%d] "
		 "%s, %s %s", devs[r->dev].name, r->port,
		 port_state_name(r->state), r->infiniband ? "IB" : "RoCEv2",
		 rdma_dev_mtu_bytes(r->mtu), lid, r->gid_index, gid, r->netdev,
		 addr);
	/* A rail on a port that is not up yet is kept (xferctl shows when
	 * it comes up), but it deserves a warning. */
	if (r->state == IBV_PORT_ACTIVE)
		log_info("%s", line);
	else
		log_warnx("%s", line);
}

/* --- finding a port's rail --- */

static enum rdma_gid_type gid_type_of(uint32_t t)
{
	switch (t) {
	case IBV_GID_TYPE_ROCE_V1: return RDMA_GID_ROCE_V1;
	case IBV_GID_TYPE_ROCE_V2: return RDMA_GID_ROCE_V2;
	default:                   return RDMA_GID_IB;
	}
}

/* The RoCE rail of port r->port from the device's GID table; 0 or
 * -ENOENT (logged). */
static int find_roce(struct rail *r, const struct ibv_gid_entry *table,
		     size_t ntable, const struct netaddr *local, size_t nlocal)
{
	struct rdma_gid *gids = calloc(ntable ? ntable : 1, sizeof(*gids));
	size_t n = 0, candidates = 0, local_i;
	const char *name = devs[r->dev].name;
	int g;

	if (!gids) {
		log_warnx("RDMA port %s/%u: out of memory", name, r->port);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ntable; i++) {
		/* A QP's source GID index is 8 bits (ibv_global_route). */
		if (table[i].port_num != r->port || table[i].gid_index > 255)
			continue;
		memcpy(gids[n].raw, table[i].gid.raw, 16);
		gids[n].index = (int)table[i].gid_index;
		gids[n].type = gid_type_of(table[i].gid_type);
		if (!table[i].ndev_ifindex ||
		    !if_indextoname(table[i].ndev_ifindex, gids[n].netdev))
			gids[n].netdev[0] = '\0';
		if (gids[n].type == RDMA_GID_ROCE_V2 &&
		    rdma_dev_gid_ipv4(gids[n].raw, NULL))
			candidates++;
		n++;
	}
	g = rdma_dev_pick_roce(gids, n, local, nlocal, &local_i);
	if (g < 0) {
		if (!candidates)
			log_info("RDMA port %s/%u: no RoCEv2 GID with an "
				 "IPv4 address (none on its interface?): not a "
				 "rail", name, r->port);
		else
			log_info("RDMA port %s/%u: its RoCEv2 GIDs' IPv4 "
				 "addresses are on no interface that is up: "
				 "not a rail", name, r->port);
		free(gids);
		return -ENOENT;
	}
	r->gid_index = gids[g].index;
	memcpy(r->gid, gids[g].raw, 16);
	r->addr = local[local_i];
	snprintf(r->netdev, sizeof(r->netdev), "%s",
		 gids[g].netdev[0] ? gids[g].netdev : local[local_i].ifname);
	free(gids);
	return 0;
}

/* Whether interface ifname is an IPoIB interface on the port of gid. */
static bool ipoib_on_port(const char *ifname, const uint8_t gid[16])
{
	char path[64 + IF_NAMESIZE], hw[128];
	FILE *f;
	bool yes = false;

	snprintf(path, sizeof(path), "/sys/class/net/%s/address", ifname);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fgets(hw, sizeof(hw), f))
		yes = rdma_dev_ipoib_has_gid(hw, gid);
	fclose(f);
	return yes;
}

/* The InfiniBand rail of port r->port: its port GID (index 0) and the
 * address of its IPoIB interface, IPv4 first.  0 or -ENOENT (logged). */
static int find_ib(struct rail *r, const struct ibv_gid_entry *table,
		   size_t ntable, const struct netaddr *local, size_t nlocal)
{
	const char *name = devs[r->dev].name;
	const struct ibv_gid_entry *port_gid = NULL;

	for (size_t i = 0; i < ntable && !port_gid; i++)
		if (table[i].port_num == r->port && table[i].gid_index == 0)
			port_gid = &table[i];
	if (!port_gid) {
		log_info("RDMA port %s/%u: no port GID: not a rail", name,
			 r->port);
		return -ENOENT;
	}
	for (int want_v4 = 1; want_v4 >= 0; want_v4--) {
		for (size_t l = 0; l < nlocal; l++) {
			if ((local[l].family == AF_INET) != want_v4 ||
			    !ipoib_on_port(local[l].ifname, port_gid->gid.raw))
				continue;
			r->gid_index = 0;
			memcpy(r->gid, port_gid->gid.raw, 16);
			r->addr = local[l];
			snprintf(r->netdev, sizeof(r->netdev), "%s",
				 local[l].ifname);
			return 0;
		}
	}
	log_info("RDMA port %s/%u: no IPoIB interface with an address: not "
		 "a rail", name, r->port);
	return -ENOENT;
}

/* The device's GID table, every port: *table (free it) and its length,
 * or -errno. */
static ssize_t read_gid_table(struct ibv_context *ctx,
			      const struct ibv_port_attr *ports,
			      unsigned nports, struct ibv_gid_entry **table)
{
	size_t max = 0;
	ssize_t n;

	for (unsigned p = 0; p < nports; p++)
		max += (size_t)ports[p].gid_tbl_len;
	*table = calloc(max ? max : 1, sizeof(**table));
	if (!*table)
		return -ENOMEM;
	/* One call for the whole table: a port may have a thousand entries
	 * (rxe has 1024), and a query per entry is a system call each. */
	n = ibv_query_gid_table(ctx, *table, max, 0);
	if (n < 0) {
		free(*table);
		*table = NULL;
	}
	return n;
}

/* Add the rails of an opened device (devs[ndevs]); returns how many. */
/* The memory windows a device offers (xferctl rails; token ranges use
 * registrations either way: transport/rdma_grant.h says why). */
static const char *windows_name(const struct ibv_device_attr *a)
{
	bool t1 = a->device_cap_flags & IBV_DEVICE_MEM_WINDOW;
	bool t2a = a->device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A;
	bool t2b = a->device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B;

	if (a->max_mw <= 0 || !(t1 || t2a || t2b))
		return "none";
	if (t2a && t2b)
		return t1 ? "type1,type2a,type2b" : "type2a,type2b";
	if (t2a || t2b)
		return t1 ? (t2a ? "type1,type2a" : "type1,type2b")
			  : (t2a ? "type2a" : "type2b");
	return "type1";
}

static int find_rails(struct rdma_dev *dev, const struct netaddr *local,
		      size_t nlocal)
{
	struct ibv_device_attr attr;
	struct ibv_port_attr *ports;
	struct ibv_gid_entry *table;
	unsigned nports;
	ssize_t ntable;
	int rc, found = 0;

	rc = ibv_query_device(dev->ctx, &attr);
	if (rc) {
		log_warnx("RDMA device %s: ibv_query_device: %s", dev->name,
			  strerror(rc));
		return 0;
	}
	nports = attr.phys_port_cnt;
	dev->cq_depth = attr.max_cqe < CQ_DEPTH ? attr.max_cqe : CQ_DEPTH;
	dev->windows = windows_name(&attr);
	ports = calloc(nports ? nports : 1, sizeof(*ports));
	if (!ports) {
		log_warnx("RDMA device %s: out of memory", dev->name);
		return 0;
	}
	for (unsigned p = 0; p < nports; p++) {
		rc = ibv_query_port(dev->ctx, (uint8_t)(p + 1), &ports[p]);
		if (rc) {
			log_warnx("RDMA device %s: ibv_query_port(%u): %s",
				  dev->name, p + 1, strerror(rc));
			goto free_ports;
		}
	}
	ntable = read_gid_table(dev->ctx, ports, nports, &table);
	if (ntable < 0) {
		log_warnx("RDMA device %s: ibv_query_gid_table: %s", dev->name,
			  strerror((int)-ntable));
		goto free_ports;
	}
	for (unsigned p = 0; p < nports; p++) {
		const struct ibv_port_attr *pa = &ports[p];
		struct rail r = {
			.dev = ndevs,
			.port = p + 1,
			.state = pa->state,
			.mtu = pa->active_mtu,
			/* Old drivers leave the link layer unspecified: they
			 * are InfiniBand. */
			.infiniband = pa->link_layer != IBV_LINK_LAYER_ETHERNET,
			.lid = pa->link_layer == IBV_LINK_LAYER_ETHERNET ? 0 :
			       pa->lid,
		};

		rc = r.infiniband ?
		     find_ib(&r, table, (size_t)ntable, local, nlocal) :
		     find_roce(&r, table, (size_t)ntable, local, nlocal);
		if (rc)
			continue;
		if (nrails == RDMA_RAIL_MAX) {
			log_warnx("more than %d RDMA rails: %s/%u and after "
				  "left out", RDMA_RAIL_MAX, dev->name, r.port);
			break;
		}
		rails[nrails++] = r;
		found++;
	}
	free(table);
free_ports:
	free(ports);
	return found;
}

/* Open device d as devs[ndevs] with its rails; a failure is logged and
 * leaves nothing behind. */
static void dev_open(struct ibv_device *d, const struct netaddr *local,
		     size_t nlocal)
{
	struct rdma_dev *dev = &devs[ndevs];
	int first_rail = nrails;

	memset(dev, 0, sizeof(*dev));
	snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(d));
	if (d->transport_type != IBV_TRANSPORT_IB) {
		log_info("RDMA device %s: %s, neither InfiniBand nor RoCE: "
			 "left out", dev->name,
			 d->transport_type == IBV_TRANSPORT_IWARP ? "iWARP" :
			 "unknown transport");
		return;
	}
	dev->ctx = ibv_open_device(d);
	if (!dev->ctx) {
		log_warn("RDMA device %s: ibv_open_device", dev->name);
		return;
	}
	if (find_rails(dev, local, nlocal) == 0) {
		log_info("RDMA device %s: no rail, closed", dev->name);
		goto close_device;
	}
	dev->pd = ibv_alloc_pd(dev->ctx);
	if (!dev->pd) {
		log_warn("RDMA device %s: ibv_alloc_pd", dev->name);
		goto drop_rails;
	}
	dev->channel = ibv_create_comp_channel(dev->ctx);
	if (!dev->channel) {
		log_warn("RDMA device %s: ibv_create_comp_channel", dev->name);
		goto dealloc_pd;
	}
	dev->cq = ibv_create_cq(dev->ctx, dev->cq_depth, dev, dev->channel, 0);
	if (!dev->cq) {
		log_warn("RDMA device %s: ibv_create_cq(%d)", dev->name,
			 dev->cq_depth);
		goto destroy_channel;
	}
	log_debug("RDMA device %s: PD, completion channel and CQ of %d open",
		  dev->name, dev->cq_depth);
	for (int i = first_rail; i < nrails; i++)
		log_rail(&rails[i]);
	ndevs++;
	return;

destroy_channel:
	ibv_destroy_comp_channel(dev->channel);
dealloc_pd:
	ibv_dealloc_pd(dev->pd);
drop_rails:
	log_warnx("RDMA device %s: left out", dev->name);
	nrails = first_rail;
close_device:
	ibv_close_device(dev->ctx);
	memset(dev, 0, sizeof(*dev));
}

/* Is name in the comma-separated list only ("" or NULL: every device)? */
static bool wanted(const char *only, const char *name)
{
	size_t n = strlen(name);

	if (!only || !*only)
		return true;
	for (const char *p = only; *p;) {
		size_t len = strcspn(p, ",");
		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p += len;
		if (*p == ',')
			p++;
	}
	return false;
}

int rdma_dev_open_all(const char *only)
{
	static struct netaddr local[LOCAL_ADDR_MAX];
	struct ibv_device **list;
	int n, nlocal;

	nlocal = netaddr_local(local, LOCAL_ADDR_MAX, true);
	if (nlocal < 0) {
		log_warnx("RDMA: cannot list interface addresses: %s",
			  strerror(-nlocal));
		nlocal = 0;
	}
	list = ibv_get_device_list(&n);
	if (!list) {
		/* ENOSYS: no RDMA support in the kernel at all. */
		if (errno != ENOSYS)
			log_warn("ibv_get_device_list");
		log_info("no RDMA devices: TCP only");
		return 0;
	}
	if (n == 0)
		log_info("no RDMA devices: TCP only");
	for (int i = 0; i < n; i++) {
		if (ndevs == RDMA_DEV_MAX) {
			log_warnx("more than %d RDMA devices: %s and after "
				  "left out", RDMA_DEV_MAX,
				  ibv_get_device_name(list[i]));
			break;
		}
		if (!wanted(only, ibv_get_device_name(list[i]))) {
			log_info("RDMA device %s: not in rdma_devices",
				 ibv_get_device_name(list[i]));
			continue;
		}
		dev_open(list[i], local, (size_t)nlocal);
	}
	/* The contexts opened stay valid without the list. */
	ibv_free_device_list(list);
	if (n > 0 && nrails == 0)
		log_info("%d RDMA device%s, no rail: TCP only", n,
			 n == 1 ? "" : "s");
	else if (nrails > 0)
		log_info("%d RDMA rail%s on %d device%s", nrails,
			 nrails == 1 ? "" : "s", ndevs, ndevs == 1 ? "" : "s");
	return nrails;
}

void rdma_dev_close_all(void)
{
	/* In the reverse order of creation: the CQ holds the channel, the
	 * PD and the CQ hold the context. */
	for (int i = 0; i < ndevs; i++) {
		struct rdma_dev *dev = &devs[i];
		int rc;

		if ((rc = ibv_destroy_cq(dev->cq)))
			log_warnx("RDMA device %s: ibv_destroy_cq: %s",
				  dev->name, strerror(rc));
		if ((rc = ibv_destroy_comp_channel(dev->channel)))
			log_warnx("RDMA device %s: "
				  "ibv_destroy_comp_channel: %s", dev->name,
				  strerror(rc));
		if ((rc = ibv_dealloc_pd(dev->pd)))
			log_warnx("RDMA device %s: ibv_dealloc_pd: %s",
				  dev->name, strerror(rc));
		if (ibv_close_device(dev->ctx))
			log_warn("RDMA device %s: ibv_close_device", dev->name);
		memset(dev, 0, sizeof(*dev));
	}
	ndevs = 0;
	nrails = 0;
}

int rdma_dev_count(void)
{
	return ndevs;
}

int rdma_dev_rail_count(void)
{
	return nrails;
}

int rdma_dev_rail(int i, struct rdma_rail_info *out)
{
	const struct rail *r;
	struct ibv_port_attr pa;
	enum ibv_port_state state;
	enum ibv_mtu mtu;

	if (i < 0 || i >= nrails)
		return -ENOENT;
	r = &rails[i];
	state = r->state;
	mtu = r->mtu;
	if (ibv_query_port(devs[r->dev].ctx, (uint8_t)r->port, &pa) == 0) {
		state = pa.state;
		mtu = pa.active_mtu;
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->dev, sizeof(out->dev), "%s", devs[r->dev].name);
	out->port = r->port;
	out->state = port_state_name(state);
	out->link_layer = r->infiniband ? "InfiniBand" : "Ethernet";
	out->transport = r->infiniband ? "IB" : "RoCEv2";
	out->mtu = rdma_dev_mtu_bytes(mtu);
	out->lid = r->lid;
	out->gid_index = r->gid_index;
	memcpy(out->gid, r->gid, sizeof(out->gid));
	gid_text(r->gid, out->gid_text, sizeof(out->gid_text));
	out->addr = r->addr;
	snprintf(out->netdev, sizeof(out->netdev), "%s", r->netdev);
	out->dev_index = r->dev;
	out->windows = devs[r->dev].windows ? devs[r->dev].windows : "none";
	return 0;
}

int rdma_dev_verbs(int dev, struct rdma_dev_verbs *out)
{
	if (dev < 0 || dev >= ndevs)
		return -ENOENT;
	*out = (struct rdma_dev_verbs){
		.ctx = devs[dev].ctx,
		.pd = devs[dev].pd,
		.cq = devs[dev].cq,
		.channel = devs[dev].channel,
		.cq_depth = devs[dev].cq_depth,
	};
	return 0;
}

int rdma_dev_rail_addr(int i, struct rdma_rail_addr *out)
{
	const struct rail *r;

	if (i < 0 || i >= nrails)
		return -ENOENT;
	r = &rails[i];
	*out = (struct rdma_rail_addr){
		.dev = r->dev,
		.port = (uint8_t)r->port,
		.gid_index = r->gid_index,
		.lid = r->lid,
		.mtu = (int)r->mtu,
		.infiniband = r->infiniband,
		.addr = r->addr,
	};
	memcpy(out->gid, r->gid, sizeof(out->gid));
	return 0;
}
