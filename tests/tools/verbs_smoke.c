/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verbs_smoke.c - RDMA verbs on a real device, to prove the RDMA test
 * guest (tests/rdma/vm.sh) before anything of xferd runs over it.
 *
 *   verbs_smoke [DEV [GID_INDEX]]
 *
 * Two RC QPs in this process, connected to each other, take the explicit
 * RESET -> INIT -> RTR -> RTS path (each state checked with ibv_query_qp),
 * then move bytes with RDMA WRITE and RDMA READ at a few sizes and odd
 * offsets, and a batch of WRITEs in flight together.  The side that
 * receives checks every byte, and that the bytes around the range were
 * left alone; every completion's status is checked.
 *
 * Device: DEV, else $RXE_DEV, else the first one.  With $RXE_DEV2 (the
 * guest's "pair" setup) the second QP lives on that device, and the bytes
 * cross the veth between the two rxe devices instead of rxe's internal
 * loopback.  GID index: GID_INDEX, else $RXE_GID_INDEX ($RXE_GID_INDEX2),
 * else the first IPv4-mapped RoCEv2 GID, else 0.  Addresses are always
 * global (a GRH): RoCE has no LIDs.
 *
 * Exit 0 pass, 1 fail, 77 skip (no RDMA device, or none ACTIVE and none
 * named).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "../integration/testlib.h"

#define REGION_LEN    (4u << 20)
#define QP_DEPTH      32
#define PORT          1
/* One op under TCG emulation takes milliseconds, a retransmit 67 ms
 * (timeout 14): give completions far more than they need. */
#define OP_TIMEOUT_MS 30000
#define BATCH_N       16
#define BATCH_LEN     (64u << 10)

/* One QP with everything it needs; a and b may share a device. */
struct end {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct ibv_port_attr port;
	int gid_index;
	union ibv_gid gid;
	uint32_t psn;
};

static const int access_flags = IBV_ACCESS_LOCAL_WRITE |
	IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						      noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("FAIL: ", stdout);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	exit(1);
}

static void skip(const char *why) __attribute__((noreturn));
static void skip(const char *why)
{
	printf("skip: %s\n", why);
	exit(TL_SKIP);
}

static const char *qp_state_name(enum ibv_qp_state s)
{
	switch (s) {
	case IBV_QPS_RESET: return "RESET";
	case IBV_QPS_INIT:  return "INIT";
	case IBV_QPS_RTR:   return "RTR";
	case IBV_QPS_RTS:   return "RTS";
	case IBV_QPS_SQD:   return "SQD";
	case IBV_QPS_SQE:   return "SQE";
	case IBV_QPS_ERR:   return "ERR";
	default:            return "?";
	}
}

/* The environment variable as a GID index, or -1 if unset. */
static int gid_index_from_env(const char *var)
{
	const char *s = getenv(var);
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > 255)
		fail("%s=%s is no GID index", var, s);
	return (int)v;
}

/* The first IPv4-mapped RoCEv2 GID (::ffff:a.b.c.d), else 0. */
static int gid_index_search(struct end *e)
{
	static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

	for (int i = 0; i < e->port.gid_tbl_len && i < 16; i++) {
		struct ibv_gid_entry g;

		if (ibv_query_gid_ex(e->ctx, PORT, i, &g, 0))
			continue;
		if (g.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(g.gid.raw, v4_mapped, sizeof(v4_mapped)))
			return i;
	}
	return 0;
}

/* Open DEV and set up a's or b's resources; the QP stays in RESET. */
static void end_open(struct end *e, struct ibv_device *dev, int gid_index,
		     bool must_be_active)
{
	char gid_text[INET6_ADDRSTRLEN];
	int rc;

	e->ctx = ibv_open_device(dev);
	if (!e->ctx)
		fail("ibv_open_device(%s): %s", ibv_get_device_name(dev),
		     strerror(errno));
	rc = ibv_query_port(e->ctx, PORT, &e->port);
	if (rc)
		fail("ibv_query_port: %s", strerror(rc));
	if (e->port.state != IBV_PORT_ACTIVE) {
		if (!must_be_active)
			skip("the port of the first RDMA device is not ACTIVE");
		fail("%s port %d is %s, not ACTIVE", ibv_get_device_name(dev),
		     PORT, ibv_port_state_str(e->port.state));
	}
	e->gid_index = gid_index >= 0 ? gid_index : gid_index_search(e);
	if (ibv_query_gid(e->ctx, PORT, e->gid_index, &e->gid))
		fail("ibv_query_gid(%d): %s", e->gid_index, strerror(errno));
	inet_ntop(AF_INET6, e->gid.raw, gid_text, sizeof(gid_text));
	printf("%s: %s port %d, %s, active_mtu %d, gid[%d] %s\n", e->name,
	       ibv_get_device_name(dev), PORT,
	       e->port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB",
	       128 << e->port.active_mtu, e->gid_index, gid_text);

	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd)
		fail("ibv_alloc_pd: %s", strerror(errno));
	e->cq = ibv_create_cq(e->ctx, 2 * QP_DEPTH, NULL, NULL, 0);
	if (!e->cq)
		fail("ibv_create_cq: %s", strerror(errno));
	e->buf = aligned_alloc(4096, REGION_LEN);
	if (!e->buf)
		fail("no memory for the region");
	memset(e->buf, 0, REGION_LEN);
	e->mr = ibv_reg_mr(e->pd, e->buf, REGION_LEN, access_flags);
	if (!e->mr)
		fail("ibv_reg_mr(%u bytes): %s (ulimit -l?)", REGION_LEN,
		     strerror(errno));

	struct ibv_qp_init_attr init = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
		.cap = {
			.max_send_wr = QP_DEPTH,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	e->qp = ibv_create_qp(e->pd, &init);
	if (!e->qp)
		fail("ibv_create_qp(RC): %s", strerror(errno));
}

static void end_close(struct end *e)
{
	if (e->qp && ibv_destroy_qp(e->qp))
		fail("ibv_destroy_qp(%s)", e->name);
	if (e->mr && ibv_dereg_mr(e->mr))
		fail("ibv_dereg_mr(%s)", e->name);
	if (e->cq && ibv_destroy_cq(e->cq))
		fail("ibv_destroy_cq(%s)", e->name);
	if (e->pd && ibv_dealloc_pd(e->pd))
		fail("ibv_dealloc_pd(%s)", e->name);
	if (e->ctx && ibv_close_device(e->ctx))
		fail("ibv_close_device(%s)", e->name);
	free(e->buf);
}

/* ibv_modify_qp, then ibv_query_qp must report the new state. */
static void qp_modify(struct end *e, struct ibv_qp_attr *attr, int mask)
{
	struct ibv_qp_attr now;
	struct ibv_qp_init_attr init;
	int rc = ibv_modify_qp(e->qp, attr, mask);

	if (rc)
		fail("%s: ibv_modify_qp to %s: %s", e->name,
		     qp_state_name(attr->qp_state), strerror(rc));
	rc = ibv_query_qp(e->qp, &now, IBV_QP_STATE, &init);
	if (rc)
		fail("%s: ibv_query_qp: %s", e->name, strerror(rc));
	if (now.qp_state != attr->qp_state)
		fail("%s: QP is %s after the move to %s", e->name,
		     qp_state_name(now.qp_state),
		     qp_state_name(attr->qp_state));
}

static void qp_to_init(struct end *e)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = PORT,
		.qp_access_flags = access_flags,
	};

	qp_modify(e, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		  IBV_QP_ACCESS_FLAGS);
}

/* RTR names the peer: its QP number, its first PSN and, since RoCE routes
 * by GID, a global address with its GID and our source GID index. */
static void qp_to_rtr(struct end *e, const struct end *peer,
		      enum ibv_mtu mtu)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu,
		.dest_qp_num = peer->qp->qp_num,
		.rq_psn = peer->psn,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = {
				.dgid = peer->gid,
				.sgid_index = (uint8_t)e->gid_index,
				.hop_limit = 64,
			},
			.dlid = peer->port.lid,
			.sl = 0,
			.src_path_bits = 0,
			.port_num = PORT,
		},
	};

	qp_modify(e, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
		  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

/* timeout 14 (67 ms) and 7 retries: rxe under emulation retransmits. */
static void qp_to_rts(struct end *e)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = e->psn,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 4,
	};

	qp_modify(e, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
		  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		  IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Post one signaled RDMA WRITE or READ: local [off, off + len) of e
 * against the peer's region at remote_off. */
static void post_rdma(struct end *e, const struct end *peer,
		      enum ibv_wr_opcode opcode, uint64_t wr_id, size_t off,
		      size_t remote_off, size_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(e->buf + off),
		.length = (uint32_t)len,
		.lkey = e->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = opcode,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {
			.remote_addr = (uintptr_t)(peer->buf + remote_off),
			.rkey = peer->mr->rkey,
		},
	};
	struct ibv_send_wr *bad;
	int rc = ibv_post_send(e->qp, &wr, &bad);

	if (rc)
		fail("%s: ibv_post_send: %s", e->name, strerror(rc));
}

/* Wait for the completion of wr_id; it must be a success of that opcode. */
static void wait_completion(struct end *e, uint64_t wr_id,
			    enum ibv_wc_opcode opcode)
{
	uint64_t deadline = tl_now_ms() + OP_TIMEOUT_MS;
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(e->cq, 1, &wc)) == 0)
		if (tl_now_ms() > deadline)
			fail("%s: no completion for wr %" PRIu64 " in %d ms",
			     e->name, wr_id, OP_TIMEOUT_MS);
	if (n < 0)
		fail("%s: ibv_poll_cq: %d", e->name, n);
	if (wc.status != IBV_WC_SUCCESS)
		fail("%s: wr %" PRIu64 " completed with %s (vendor_err 0x%x)",
		     e->name, wc.wr_id, ibv_wc_status_str(wc.status),
		     wc.vendor_err);
	if (wc.wr_id != wr_id || wc.opcode != opcode)
		fail("%s: completion for wr %" PRIu64 " opcode %d, expected wr %"
		     PRIu64 " opcode %d", e->name, wc.wr_id, wc.opcode, wr_id,
		     opcode);
}

/* The bytes that must not arrive: the complement of the expected ones,
 * so that a transfer that moved nothing cannot pass. */
static void fill_unexpected(uint8_t *p, size_t len, uint64_t seed,
			    uint64_t pos)
{
	tl_fill_at(p, len, seed, pos);
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)~p[i];
}

/* dst [off - 1, off + len] after a transfer of seed's bytes into
 * [off, off + len): those bytes, and the guard bytes either side
 * unchanged. */
static void check_arrived(const char *what, const uint8_t *dst, size_t off,
			  size_t len, uint64_t seed, uint8_t guard_lo,
			  uint8_t guard_hi)
{
	size_t bad = tl_check_at(dst + off, len, seed, off);

	if (bad)
		fail("%s: byte %zu of %zu is wrong", what, bad - 1, len);
	if (off > 0 && dst[off - 1] != guard_lo)
		fail("%s: the byte before the range was overwritten", what);
	if (off + len < REGION_LEN && dst[off + len] != guard_hi)
		fail("%s: the byte after the range was overwritten", what);
}

/* One WRITE from `from` into `to`, or one READ by `from` out of `to`,
 * with the data checked where it landed. */
static void transfer(struct end *from, struct end *to, bool is_read,
		     size_t src_off, size_t dst_off, size_t len, uint64_t seed)
{
	/* A WRITE moves from's bytes into to; a READ moves to's into from. */
	uint8_t *src = is_read ? to->buf : from->buf;
	uint8_t *dst = is_read ? from->buf : to->buf;
	size_t local_off = is_read ? dst_off : src_off;
	size_t remote_off = is_read ? src_off : dst_off;
	/* The guard bytes either side of the range are unexpected ones too. */
	size_t guard_lo = dst_off > 0 ? dst_off - 1 : 0;
	size_t guard_end = dst_off + len < REGION_LEN ? dst_off + len + 1
						      : REGION_LEN;
	char what[96];
	uint8_t lo, hi;
	uint64_t t0;

	snprintf(what, sizeof(what), "%s %zu B %s[%zu] -> %s[%zu]",
		 is_read ? "READ " : "WRITE", len,
		 is_read ? to->name : from->name, src_off,
		 is_read ? from->name : to->name, dst_off);
	/* The source holds seed's bytes as if at dst_off: what arrives is
	 * then checked at its own offset. */
	tl_fill_at(src + src_off, len, seed, dst_off);
	fill_unexpected(dst + guard_lo, guard_end - guard_lo, seed, guard_lo);
	lo = dst_off > 0 ? dst[dst_off - 1] : 0;
	hi = dst_off + len < REGION_LEN ? dst[dst_off + len] : 0;

	t0 = tl_now_ms();
	post_rdma(from, to, is_read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
		  seed, local_off, remote_off, len);
	wait_completion(from, seed,
			is_read ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE);
	check_arrived(what, dst, dst_off, len, seed, lo, hi);
	printf("ok   %-40s %6" PRIu64 " ms\n", what, tl_now_ms() - t0);
}

/* BATCH_N WRITEs of BATCH_LEN in flight together, completed in order. */
static void write_batch(struct end *from, struct end *to, uint64_t seed)
{
	uint64_t t0, ms;

	for (unsigned i = 0; i < BATCH_N; i++) {
		size_t off = i * BATCH_LEN;

		tl_fill_at(from->buf + off, BATCH_LEN, seed + i, off);
		fill_unexpected(to->buf + off, BATCH_LEN, seed + i, off);
	}
	t0 = tl_now_ms();
	for (unsigned i = 0; i < BATCH_N; i++)
		post_rdma(from, to, IBV_WR_RDMA_WRITE, seed + i, i * BATCH_LEN,
			  i * BATCH_LEN, BATCH_LEN);
	/* RC completes a QP's work requests in the order they were posted. */
	for (unsigned i = 0; i < BATCH_N; i++)
		wait_completion(from, seed + i, IBV_WC_RDMA_WRITE);
	ms = tl_now_ms() - t0;
	for (unsigned i = 0; i < BATCH_N; i++) {
		size_t off = i * BATCH_LEN;
		size_t bad = tl_check_at(to->buf + off, BATCH_LEN, seed + i, off);

		if (bad)
			fail("batch WRITE %u: byte %zu is wrong", i, bad - 1);
	}
	printf("ok   %u WRITEs of %u B in flight together %6" PRIu64
	       " ms (%.1f MB/s)\n", BATCH_N, BATCH_LEN, ms,
	       ms ? BATCH_N * (double)BATCH_LEN / 1e3 / (double)ms : 0.0);
}

static struct ibv_device *find_device(struct ibv_device **list, int n,
				      const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			return list[i];
	fail("no RDMA device %s (%d found)", name, n);
}

int main(int argc, char **argv)
{
	/* size, source offset, destination offset: from one byte to more
	 * than a thousand RoCE packets, nothing aligned. */
	static const struct { size_t len, src, dst; } cases[] = {
		{ 1, 0, 7 },
		{ 4095, 4097, 3 },
		{ 65536 + 3, 5, 65536 + 11 },
		{ (1u << 20) + 17, 1u << 20, 2 * (1u << 20) + 1 },
	};
	const char *name_a = argc > 1 ? argv[1] : getenv("RXE_DEV");
	const char *name_b = getenv("RXE_DEV2");
	int gid_a, gid_b;
	struct end a = { .name = "A", .psn = 0x1234 };
	struct end b = { .name = "B", .psn = 0x5678 };
	struct ibv_device **list;
	struct ibv_device *dev_a, *dev_b;
	enum ibv_mtu mtu;
	int n = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (name_a && !*name_a)
		name_a = NULL;
	list = ibv_get_device_list(&n);
	if ((!list || n == 0) && name_a)
		fail("no RDMA device at all, but %s was named", name_a);
	if (!list || n == 0)
		skip("no RDMA device here (tests/rdma/vm.sh runs one)");
	if (name_b && !*name_b)
		name_b = NULL;
	gid_a = argc > 2 ? atoi(argv[2]) : gid_index_from_env("RXE_GID_INDEX");
	gid_b = name_b ? gid_index_from_env("RXE_GID_INDEX2") : gid_a;
	dev_a = name_a ? find_device(list, n, name_a) : list[0];
	dev_b = name_b ? find_device(list, n, name_b) : dev_a;

	end_open(&a, dev_a, gid_a, name_a != NULL);
	end_open(&b, dev_b, gid_b, name_a != NULL);
	mtu = a.port.active_mtu < b.port.active_mtu ? a.port.active_mtu
						     : b.port.active_mtu;

	qp_to_init(&a);
	qp_to_init(&b);
	qp_to_rtr(&a, &b, mtu);
	qp_to_rtr(&b, &a, mtu);
	qp_to_rts(&a);
	qp_to_rts(&b);
	printf("ok   QPs 0x%x <-> 0x%x: RESET -> INIT -> RTR -> RTS, path_mtu %d\n",
	       a.qp->qp_num, b.qp->qp_num, 128 << mtu);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		transfer(&a, &b, false, cases[i].src, cases[i].dst,
			 cases[i].len, 100 + i);
		transfer(&a, &b, true, cases[i].src, cases[i].dst,
			 cases[i].len, 200 + i);
	}
	/* And the other way round, so both QPs have been requesters. */
	transfer(&b, &a, false, 11, 13, 100000, 300);
	transfer(&b, &a, true, 17, 19, 100000, 301);
	write_batch(&a, &b, 400);

	end_close(&a);
	end_close(&b);
	ibv_free_device_list(list);
	printf("pass: RDMA WRITE and READ over %s%s%s\n",
	       ibv_get_device_name(dev_a), dev_b != dev_a ? " <-> " : "",
	       dev_b != dev_a ? ibv_get_device_name(dev_b) : "");
	return 0;
}
