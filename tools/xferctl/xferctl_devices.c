/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_devices.c - xferctl peers, gpus and rails: the links to other
 * nodes and the devices xferd moves data with, as text (tables, or CSV)
 * or JSON.  Single-threaded, like all of xferctl.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xferctl_devices.h"
#include "xferctl_out.h"

/* --- peers --- */

/* By node name, then instance id: xferd lists links in its own order. */
static int by_node(const void *a, const void *b)
{
	const Xfer__Ctl__PeerInfo *x = *(Xfer__Ctl__PeerInfo *const *)a;
	const Xfer__Ctl__PeerInfo *y = *(Xfer__Ctl__PeerInfo *const *)b;
	size_t n = x->instance_id.len < y->instance_id.len ?
		   x->instance_id.len : y->instance_id.len;
	int c = strcmp(x->node_name, y->node_name);

	if (c)
		return c;
	c = n ? memcmp(x->instance_id.data, y->instance_id.data, n) : 0;
	if (c)
		return c;
	return (x->instance_id.len > y->instance_id.len) -
	       (x->instance_id.len < y->instance_id.len);
}

/* The first 4 bytes of the instance id, as `status` shows it in full;
 * "-" before the handshake has told it. */
static void set_instance(struct table *t, unsigned col,
			 const ProtobufCBinaryData *id)
{
	char hex[9] = "";

	for (size_t i = 0; i < id->len && i < 4; i++)
		snprintf(hex + 2 * i, sizeof(hex) - 2 * i, "%02x", id->data[i]);
	table_set(t, col, "%s", *hex ? hex : "-");
}

void print_peers_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = {
		"INSTANCE", "NODE", "STATE", "ADDRESS", "WHY", "LANE", "RTT",
		"TX", "RX", "OPS", "ERRORS", "UP", NULL
	};
	const Xfer__Ctl__PeersReply *rep = r->peers_reply;
	struct table t;
	char b[32];

	if (rep->n_peers == 0 && !out_csv()) {
		printf("no peers\n");
		return;
	}
	/* The first six columns are text, the rest numbers. */
	table_init(&t, 0x3f, head);
	for (size_t i = 0; i < rep->n_peers; i++) {
		const Xfer__Ctl__PeerInfo *p = rep->peers[i];
		bool up = !strcmp(p->state, "up");

		table_row(&t);
		set_instance(&t, 0, &p->instance_id);
		table_set(&t, 1, "%s", *p->node_name ? p->node_name : "-");
		table_set(&t, 2, "%s", *p->state ? p->state : "-");
		table_set(&t, 3, "%s", *p->address ? p->address : "-");
		table_set(&t, 4, "%s", *p->why ? p->why : "-");
		table_set(&t, 5, "%s", p->lane_up ? "up" : "-");
		table_set(&t, 6, "%s", p->rtt_ns ?
			  fmt_rtt(b, sizeof(b), p->rtt_ns) : "-");
		table_set(&t, 7, "%s", fmt_bytes(b, sizeof(b), p->bytes_tx));
		table_set(&t, 8, "%s", fmt_bytes(b, sizeof(b), p->bytes_rx));
		table_set(&t, 9, "%" PRIu64, p->ops);
		table_set(&t, 10, "%" PRIu64, p->errors);
		table_set(&t, 11, "%s", up || p->up_ms ?
			  fmt_age(b, sizeof(b), p->up_ms) : "-");
	}
	table_print(&t);
}

void print_peers_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__PeersReply *rep = r->peers_reply;
	json_object *o = jv_obj(), *list = jv_arr();

	for (size_t i = 0; i < rep->n_peers; i++) {
		const Xfer__Ctl__PeerInfo *p = rep->peers[i];
		json_object *j = jv_obj(), *addrs = jv_arr();

		jv_set(j, "instance_id",
			 jv_hex(p->instance_id.data, p->instance_id.len));
		jv_set(j, "node_name", jv_str(p->node_name));
		for (size_t a = 0; a < p->n_addresses; a++)
			jv_push(addrs, jv_str(p->addresses[a]));
		jv_set(j, "addresses", addrs);
		jv_set(j, "address", jv_str(p->address));
		jv_set(j, "why", jv_str(p->why));
		jv_set(j, "state", jv_str(p->state));
		jv_set(j, "initiated", jv_bool(p->initiated));
		jv_set(j, "rtt_ns", jv_u64(p->rtt_ns));
		jv_set(j, "lane_up", jv_bool(p->lane_up));
		jv_set(j, "lane_ops", jv_u64(p->lane_ops));
		jv_set(j, "bytes_tx", jv_u64(p->bytes_tx));
		jv_set(j, "bytes_rx", jv_u64(p->bytes_rx));
		jv_set(j, "ops", jv_u64(p->ops));
		jv_set(j, "errors", jv_u64(p->errors));
		jv_set(j, "up_ms", jv_u64(p->up_ms));
		jv_set(j, "last_error", jv_str(p->last_error));
		jv_push(list, j);
	}
	jv_set(o, "peers", list);
	jv_print(o);
}

/* --- GPU memory toward the rails (both gpus and rails show it) --- */

static void print_gpu_rdma_text(const Xfer__Ctl__GpuRdma *g)
{
	if (!g || out_csv())
		return;
	printf("GPU memory over RDMA: %s (%s)\n", g->gpu_mem, g->why);
	if (!g->n_gpus) {
		printf("GPU-rail distances: none (no GPUs or no rails)\n");
		return;
	}
	printf("GPU  BDF          ");
	for (size_t r = 0; r < g->n_rails; r++)
		printf(" %-10s", g->rails[r]);
	printf(" PREFERRED\n");
	for (size_t i = 0; i < g->n_gpus; i++) {
		const Xfer__Ctl__GpuRails *gr = g->gpus[i];
		printf("%-4u %-13s", gr->gpu, *gr->bdf ? gr->bdf : "-");
		for (size_t r = 0; r < gr->n_distance; r++)
			printf(" %-10s", gr->distance[r]);
		for (size_t k = 0; k < gr->n_preferred; k++)
			printf("%s%u", k ? "," : " ", gr->preferred[k]);
		printf("\n");
	}
}

static json_object *gpu_rdma_json(const Xfer__Ctl__GpuRdma *g)
{
	json_object *o = jv_obj(), *rails = jv_arr(), *gpus = jv_arr();

	if (!g)
		return o;
	jv_set(o, "gpu_mem", jv_str(g->gpu_mem));
	jv_set(o, "why", jv_str(g->why));
	for (size_t r = 0; r < g->n_rails; r++)
		jv_push(rails, jv_str(g->rails[r]));
	for (size_t i = 0; i < g->n_gpus; i++) {
		const Xfer__Ctl__GpuRails *gr = g->gpus[i];
		json_object *j = jv_obj(), *d = jv_arr(), *p = jv_arr();
		jv_set(j, "gpu", jv_u64(gr->gpu));
		jv_set(j, "bdf", jv_str(gr->bdf));
		for (size_t r = 0; r < gr->n_distance; r++)
			jv_push(d, jv_str(gr->distance[r]));
		for (size_t k = 0; k < gr->n_preferred; k++)
			jv_push(p, jv_u64(gr->preferred[k]));
		jv_set(j, "distance", d);
		jv_set(j, "preferred", p);
		jv_push(gpus, j);
	}
	jv_set(o, "rails", rails);
	jv_set(o, "gpus", gpus);
	return o;
}

/* --- gpus --- */

void print_gpus_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = {
		"GPU", "NAME", "UUID", "MEMORY", "FREE", "PEERS", NULL
	};
	const Xfer__Ctl__GpusReply *rep = r->gpus_reply;
	struct table t;
	char b[32], peers[64], uuid[40];

	if (rep->n_gpus == 0 && !out_csv()) {
		printf("no GPUs (%s)\n", *rep->unavailable ? rep->unavailable
							     : "none found");
		print_gpu_rdma_text(rep->gpu_rdma);
		return;
	}
	table_init(&t, 0x06, head);
	for (size_t i = 0; i < rep->n_gpus; i++) {
		const Xfer__Ctl__GpuInfo *g = rep->gpus[i];
		size_t k = 0;

		peers[0] = '\0';
		for (size_t j = 0; j < g->n_peers && k + 4 < sizeof(peers); j++)
			k += (size_t)snprintf(peers + k, sizeof(peers) - k, "%s%u",
					      j ? "," : "", g->peers[j]);
		for (size_t j = 0; j < g->uuid.len && j < 16; j++)
			snprintf(uuid + 2 * j, sizeof(uuid) - 2 * j, "%02x",
				 g->uuid.data[j]);
		table_row(&t);
		table_set(&t, 0, "%u", g->index);
		table_set(&t, 1, "%s", g->name);
		table_set(&t, 2, "%.8s", g->uuid.len ? uuid : "-");
		table_set(&t, 3, "%s", fmt_bytes(b, sizeof(b), g->mem_total));
		table_set(&t, 4, "%s", fmt_bytes(b, sizeof(b), g->mem_free));
		table_set(&t, 5, "%s", *peers ? peers : "-");
	}
	table_print(&t);
	if (!out_csv()) /* CSV is the one table; JSON has these too */
		printf("imports: %u allocations, %u regions using them\n",
		       rep->imports, rep->import_refs);
	if (!out_csv())
		putchar('\n');  /* the table ends at the first empty line */
	print_gpu_rdma_text(rep->gpu_rdma);
}

void print_gpus_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__GpusReply *rep = r->gpus_reply;
	json_object *o = jv_obj(), *list = jv_arr();

	for (size_t i = 0; i < rep->n_gpus; i++) {
		const Xfer__Ctl__GpuInfo *g = rep->gpus[i];
		json_object *j = jv_obj(), *peers = jv_arr();

		jv_set(j, "index", jv_u64(g->index));
		jv_set(j, "name", jv_str(g->name));
		jv_set(j, "uuid", jv_hex(g->uuid.data, g->uuid.len));
		jv_set(j, "mem_total", jv_u64(g->mem_total));
		jv_set(j, "mem_free", jv_u64(g->mem_free));
		for (size_t k = 0; k < g->n_peers; k++)
			jv_push(peers, jv_u64(g->peers[k]));
		jv_set(j, "peers", peers);
		jv_push(list, j);
	}
	jv_set(o, "gpus", list);
	jv_set(o, "unavailable", jv_str(rep->unavailable));
	jv_set(o, "imports", jv_u64(rep->imports));
	jv_set(o, "import_refs", jv_u64(rep->import_refs));
	jv_set(o, "gpu_rdma", gpu_rdma_json(rep->gpu_rdma));
	jv_print(o);
}

/* --- rails --- */

/* The queue pairs of every rail, one line each. */
static void print_qps_text(const Xfer__Ctl__RailsReply *rep)
{
	static const char *const head[] = {
		"RAIL", "PEER", "DIR", "SLOT", "QPN", "REMOTE", "STATE",
		"BYTES", "WRS", "OUT", NULL
	};
	size_t n = 0;
	struct table t;

	for (size_t i = 0; i < rep->n_rails; i++)
		n += rep->rails[i]->n_qp;
	if (n == 0)
		return;
	putchar('\n');
	table_init(&t, 0x4e, head);
	for (size_t i = 0; i < rep->n_rails; i++) {
		const Xfer__Ctl__RailInfo *l = rep->rails[i];
		for (size_t k = 0; k < l->n_qp; k++) {
			const Xfer__Ctl__QpInfo *q = l->qp[k];
			char b[32];
			table_row(&t);
			table_set(&t, 0, "%s:%u", l->device, l->port);
			table_set(&t, 1, "%s", *q->peer ? q->peer : "-");
			table_set(&t, 2, "%s", q->initiator ? "out" : "in");
			table_set(&t, 3, "%u", q->slot);
			table_set(&t, 4, "%u", q->qpn);
			table_set(&t, 5, "%u", q->remote_qpn);
			table_set(&t, 6, "%s", q->state);
			table_set(&t, 7, "%s", fmt_bytes(b, sizeof(b), q->bytes));
			table_set(&t, 8, "%llu", (unsigned long long)q->wrs);
			table_set(&t, 9, "%u", q->outstanding);
		}
	}
	table_print(&t);
}

void print_rails_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = {
		"DEVICE", "PORT", "STATE", "LINK", "MTU", "GID", "ADDRESS",
		"NETDEV", "QPS", "TX", "RX", "ERRORS", "RANGES", "GRANTS", NULL
	};
	const Xfer__Ctl__RailsReply *rep = r->rails_reply;
	char tx[32], rx[32];
	struct table t;

	if (rep->n_rails == 0 && !out_csv()) {
		printf("no RDMA devices\n");
		print_gpu_rdma_text(rep->gpu_rdma);
		return;
	}
	/* PORT, MTU and the counters are numbers, the rest text. */
	table_init(&t, 0x10ed, head);
	for (size_t i = 0; i < rep->n_rails; i++) {
		const Xfer__Ctl__RailInfo *l = rep->rails[i];

		table_row(&t);
		table_set(&t, 0, "%s", l->device);
		table_set(&t, 1, "%u", l->port);
		table_set(&t, 2, "%s", l->state);
		table_set(&t, 3, "%s", l->link_layer);
		table_set(&t, 4, "%u", l->mtu);
		table_set(&t, 5, "[%u] %s", l->gid_index, l->gid);
		table_set(&t, 6, "%s/%u", l->ip, l->prefix_len);
		table_set(&t, 7, "%s", *l->netdev ? l->netdev : "-");
		table_set(&t, 8, "%u", l->qps);
		table_set(&t, 9, "%s", fmt_bytes(tx, sizeof(tx), l->bytes_tx));
		table_set(&t, 10, "%s", fmt_bytes(rx, sizeof(rx), l->bytes_rx));
		table_set(&t, 11, "%llu", (unsigned long long)l->errors);
		table_set(&t, 12, "%s", *l->token_ranges ? l->token_ranges : "-");
		table_set(&t, 13, "%u", l->grants);
	}
	table_print(&t);
	if (!out_csv()) { /* CSV is one row per rail; JSON has the QPs */
		print_qps_text(rep);
		putchar('\n');  /* each table ends at an empty line */
	}
	print_gpu_rdma_text(rep->gpu_rdma);
}

void print_rails_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__RailsReply *rep = r->rails_reply;
	json_object *o = jv_obj(), *list = jv_arr();

	for (size_t i = 0; i < rep->n_rails; i++) {
		const Xfer__Ctl__RailInfo *l = rep->rails[i];
		json_object *j = jv_obj(), *qps = jv_arr();

		jv_set(j, "device", jv_str(l->device));
		jv_set(j, "port", jv_u64(l->port));
		jv_set(j, "state", jv_str(l->state));
		jv_set(j, "link_layer", jv_str(l->link_layer));
		jv_set(j, "transport", jv_str(l->transport));
		jv_set(j, "mtu", jv_u64(l->mtu));
		jv_set(j, "lid", jv_u64(l->lid));
		jv_set(j, "gid_index", jv_u64(l->gid_index));
		jv_set(j, "gid", jv_str(l->gid));
		jv_set(j, "ip", jv_str(l->ip));
		jv_set(j, "prefix_len", jv_u64(l->prefix_len));
		jv_set(j, "netdev", jv_str(l->netdev));
		jv_set(j, "qps", jv_u64(l->qps));
		jv_set(j, "bytes_tx", jv_u64(l->bytes_tx));
		jv_set(j, "bytes_rx", jv_u64(l->bytes_rx));
		jv_set(j, "wrs", jv_u64(l->wrs));
		jv_set(j, "errors", jv_u64(l->errors));
		jv_set(j, "token_ranges", jv_str(l->token_ranges));
		jv_set(j, "windows", jv_str(l->windows));
		jv_set(j, "grants", jv_u64(l->grants));
		jv_set(j, "grants_made", jv_u64(l->grants_made));
		for (size_t k = 0; k < l->n_qp; k++) {
			const Xfer__Ctl__QpInfo *q = l->qp[k];
			json_object *jq = jv_obj();
			jv_set(jq, "peer", jv_str(q->peer));
			jv_set(jq, "peer_rail", jv_u64(q->peer_rail));
			jv_set(jq, "slot", jv_u64(q->slot));
			jv_set(jq, "initiator", jv_bool(q->initiator));
			jv_set(jq, "qpn", jv_u64(q->qpn));
			jv_set(jq, "remote_qpn", jv_u64(q->remote_qpn));
			jv_set(jq, "state", jv_str(q->state));
			jv_set(jq, "bytes", jv_u64(q->bytes));
			jv_set(jq, "wrs", jv_u64(q->wrs));
			jv_set(jq, "outstanding", jv_u64(q->outstanding));
			jv_push(qps, jq);
		}
		jv_set(j, "qp", qps);
		jv_push(list, j);
	}
	jv_set(o, "rails", list);
	jv_set(o, "gpu_rdma", gpu_rdma_json(rep->gpu_rdma));
	jv_print(o);
}

void peers_sort(Xfer__Ctl__PeersReply *rep)
{
	/* An empty list has no array at all. */
	if (rep->n_peers > 1)
		qsort(rep->peers, rep->n_peers, sizeof(*rep->peers), by_node);
}
