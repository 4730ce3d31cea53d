/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seeds.c - writes the seed corpora of the fuzz harnesses
 * (tests/fuzz/corpus/<harness>/): real, valid inputs packed by the same
 * code xferd and libxfer use, so that each harness starts past the
 * first checks.  `make fuzz-corpus` runs it; its output is committed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client.pb-c.h"
#include "ctl.pb-c.h"
#include "common/token_codec.h"
#include "common/wire.h"
#include "meta/record.h"
#include "ops/http_request.h"
#include "peer.pb-c.h"
#include "transport/link.h"
#include "xfer_ring.h"

static const char *root = "tests/fuzz/corpus";

static void put(const char *harness, const char *name, const void *p,
		size_t n)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, harness);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", root, harness, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* The sample token of tests/unit/test_token.c, with hints. */
static size_t sample_token(uint8_t *buf, size_t cap, bool hints)
{
	static const uint8_t key[TOKEN_KEY_LEN] = {
		0x3c, 0x91, 0x07, 0xee, 0x42, 0x5a, 0xb0, 0x18,
		0x66, 0xd3, 0x2f, 0x84, 0x01, 0x9e, 0x7b, 0xc5,
	};
	struct token t = {
		.region = 0x1234,
		.offset = 4096,
		.length = 8192,
		.region_length = 1u << 20,
		.mem_kind = 1,
	};
	size_t len = cap;

	for (unsigned i = 0; i < TOKEN_INSTANCE_LEN; i++)
		t.instance_id[i] = (uint8_t)(0xa0 + i);
	if (hints) {
		t.addrs[0] = (struct token_addr){ .ip = { 10, 0, 0, 1 },
						  .ip_len = 4, .prefix_len = 24,
						  .port = 7474 };
		t.addrs[1] = (struct token_addr){ .ip = { 0xfd, 0 },
						  .ip_len = 16,
						  .prefix_len = 64,
						  .port = 7475 };
		t.naddrs = 2;
		strcpy(t.node_name, "node-a");
	}
	token_sign(&t, key);
	if (token_encode(&t, buf, &len))
		abort();
	return len;
}

static void tokens(void)
{
	uint8_t buf[512];

	put("fuzz_token", "plain", buf, sample_token(buf, sizeof(buf), false));
	put("fuzz_token", "hints", buf, sample_token(buf, sizeof(buf), true));
}

/* One client packet: nfds, the tag, the message. */
static void client_put(const char *name, Xfer__Client__ClientMsg *m,
		       uint8_t nfds)
{
	uint8_t buf[1 + WIRE_TAG_LEN + 1024];
	uint32_t tag = WIRE_TAG_CLIENT;
	size_t n = xfer__client__client_msg__get_packed_size(m);

	if (n > sizeof(buf) - 1 - WIRE_TAG_LEN)
		abort();
	m->proto_version = XFER_PROTO_VERSION;
	m->seq = 7;
	buf[0] = nfds;
	memcpy(buf + 1, &tag, WIRE_TAG_LEN);
	n = xfer__client__client_msg__pack(m, buf + 1 + WIRE_TAG_LEN);
	put("fuzz_client_msg", name, buf, 1 + WIRE_TAG_LEN + n);
}

static void client_msgs(void)
{
	Xfer__Client__ClientMsg m;
	Xfer__Client__RegRequest reg = XFER__CLIENT__REG_REQUEST__INIT;
	Xfer__Client__CudaAlloc cuda = XFER__CLIENT__CUDA_ALLOC__INIT;
	Xfer__Client__DeregRequest dereg = XFER__CLIENT__DEREG_REQUEST__INIT;
	Xfer__Client__ImportRequest imp = XFER__CLIENT__IMPORT_REQUEST__INIT;
	Xfer__Client__PublishRequest pub = XFER__CLIENT__PUBLISH_REQUEST__INIT;
	Xfer__Client__UnpublishRequest unpub =
		XFER__CLIENT__UNPUBLISH_REQUEST__INIT;
	Xfer__Client__LookupRequest look = XFER__CLIENT__LOOKUP_REQUEST__INIT;
	Xfer__Client__Hello hello = XFER__CLIENT__HELLO__INIT;
	uint8_t tok[512], uuid[16] = { 1, 2, 3 }, ipc[64] = { 4, 5, 6 };
	size_t toklen = sample_token(tok, sizeof(tok), true);

#define MSG(field, val, body) \
	(m = (Xfer__Client__ClientMsg)XFER__CLIENT__CLIENT_MSG__INIT, \
	 m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_##body, m.field = (val))

	reg.kind = XFER__CLIENT__MEM_KIND__MEM_MEMFD;
	reg.length = 1u << 20;
	MSG(reg, &reg, REG);
	client_put("reg_memfd", &m, 1);
	reg.kind = XFER__CLIENT__MEM_KIND__MEM_CMA;
	reg.addr = 0x7f0000001000;
	MSG(reg, &reg, REG);
	client_put("reg_cma", &m, 0);
	reg.kind = XFER__CLIENT__MEM_KIND__MEM_CUDA;
	cuda.device_uuid = (ProtobufCBinaryData){ sizeof(uuid), uuid };
	cuda.alloc_base = 0x7e0000000000;
	cuda.alloc_size = 2u << 20;
	cuda.offset = 4096;
	cuda.buffer_id = 9;
	cuda.ipc_handle = (ProtobufCBinaryData){ sizeof(ipc), ipc };
	reg.cuda = &cuda;
	MSG(reg, &reg, REG);
	client_put("reg_cuda", &m, 0);
	cuda.vmm = 1;
	cuda.ipc_handle = (ProtobufCBinaryData){ 0, NULL };
	MSG(reg, &reg, REG);
	client_put("reg_cuda_vmm", &m, 1);
	dereg.handle = 3;
	MSG(dereg, &dereg, DEREG);
	client_put("dereg", &m, 0);
	MSG(unimport, (Xfer__Client__UnimportRequest *)&dereg, UNIMPORT);
	client_put("unimport", &m, 0);
	imp.token = (ProtobufCBinaryData){ toklen, tok };
	MSG(import, &imp, IMPORT);
	client_put("import", &m, 0);
	pub.name = "kv.layer0";
	pub.token = imp.token;
	MSG(publish, &pub, PUBLISH);
	client_put("publish", &m, 0);
	unpub.name = "kv.layer0";
	MSG(unpublish, &unpub, UNPUBLISH);
	client_put("unpublish", &m, 0);
	look.name = "kv.layer0";
	MSG(lookup, &look, LOOKUP);
	client_put("lookup", &m, 0);
	look.name = "node-b/kv.layer0";
	MSG(lookup, &look, LOOKUP);
	client_put("lookup_node", &m, 0);
	hello.name = "bench";
	hello.sq_entries = 256;
	MSG(hello, &hello, HELLO);
	client_put("hello", &m, 0);
#undef MSG
}

/* Peer frames, framed by link_frame_header (the link's own sender). */
static uint8_t stream[1 << 16];
static size_t nstream;

static void frame_put(const char *name, Xfer__Peer__PeerMsg *m,
		      uint32_t plen)
{
	uint8_t buf[8 + 4096 + 256];

	m->proto_version = XFER_PROTO_VERSION;
	int n = link_frame_header(&m->base, plen, buf);
	if (n < 0 || (size_t)n + plen > sizeof(buf))
		abort();
	for (uint32_t i = 0; i < plen; i++)
		buf[n + i] = (uint8_t)(i * 13);
	put("fuzz_peer_frame", name, buf, (size_t)n + plen);
	if (nstream + (size_t)n + plen <= sizeof(stream)) {
		memcpy(stream + nstream, buf, (size_t)n + plen);
		nstream += (size_t)n + plen;
	}
}

static void peer_frames(void)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Target tgt = XFER__PEER__TARGET__INIT;
	Xfer__Peer__Ping ping = XFER__PEER__PING__INIT;
	Xfer__Peer__Pong pong = XFER__PEER__PONG__INIT;
	Xfer__Peer__WriteChunk w = XFER__PEER__WRITE_CHUNK__INIT;
	Xfer__Peer__WriteAck ack = XFER__PEER__WRITE_ACK__INIT;
	Xfer__Peer__Abort ab = XFER__PEER__ABORT__INIT;
	Xfer__Peer__ReadRequest rq = XFER__PEER__READ_REQUEST__INIT;
	Xfer__Peer__ReadData rd = XFER__PEER__READ_DATA__INIT;
	Xfer__Peer__Notify nt = XFER__PEER__NOTIFY__INIT;
	Xfer__Peer__CheckToken ck = XFER__PEER__CHECK_TOKEN__INIT;
	Xfer__Peer__CheckReply cr = XFER__PEER__CHECK_REPLY__INIT;
	Xfer__Peer__RdmaMemory mem = XFER__PEER__RDMA_MEMORY__INIT;
	Xfer__Peer__QpEnd end = XFER__PEER__QP_END__INIT;
	Xfer__Peer__QpConnect qc = XFER__PEER__QP_CONNECT__INIT;
	Xfer__Peer__QpAccept qa = XFER__PEER__QP_ACCEPT__INIT;
	Xfer__Peer__Lookup lk = XFER__PEER__LOOKUP__INIT;
	Xfer__Peer__LookupReply lr = XFER__PEER__LOOKUP_REPLY__INIT;
	Xfer__Peer__Error er = XFER__PEER__ERROR__INIT;
	Xfer__Peer__LandOpen lo = XFER__PEER__LAND_OPEN__INIT;
	Xfer__Peer__LandGrant lg = XFER__PEER__LAND_GRANT__INIT;
	Xfer__Peer__Landed ld = XFER__PEER__LANDED__INIT;
	Xfer__Peer__LandDone ldn = XFER__PEER__LAND_DONE__INIT;
	Xfer__Peer__LandAbort la = XFER__PEER__LAND_ABORT__INIT;
	uint8_t key[TOKEN_KEY_LEN] = { 0x3c, 0x91, 7 }, gid[16] = { 0xfe, 0x80 };
	uint8_t tok[512];
	uint32_t rkeys[2] = { 0x1234, 0x5678 };

#define MSG(field, val, body) \
	(m = (Xfer__Peer__PeerMsg)XFER__PEER__PEER_MSG__INIT, \
	 m.body_case = XFER__PEER__PEER_MSG__BODY_##body, m.field = (val))

	tgt.region = 0x1234;
	tgt.key = (ProtobufCBinaryData){ sizeof(key), key };
	tgt.offset = 4096;
	tgt.length = 8192;
	tgt.region_length = 1u << 20;
	tgt.mem_kind = 1;
	ping.nonce = 5;
	ping.sent_ns = 123456789;
	MSG(ping, &ping, PING);
	frame_put("ping", &m, 0);
	pong.sent_ns = 123456789;
	MSG(pong, &pong, PONG);
	frame_put("pong", &m, 0);
	w.op = 1;
	w.target = &tgt;
	w.at = 0;
	w.total = 4096;
	w.last = 1;
	w.notify = 1;
	w.notify_value = 42;
	MSG(write, &w, WRITE);
	frame_put("write", &m, 4096);
	ack.op = 1;
	ack.result = 4096;
	MSG(write_ack, &ack, WRITE_ACK);
	frame_put("write_ack", &m, 0);
	ab.op = 2;
	MSG(abort, &ab, ABORT);
	frame_put("abort", &m, 0);
	rq.op = 3;
	rq.source = &tgt;
	rq.at = 0;
	rq.length = 4096;
	MSG(read, &rq, READ);
	frame_put("read", &m, 0);
	rd.op = 3;
	rd.last = 1;
	rd.result = 256;
	MSG(read_data, &rd, READ_DATA);
	frame_put("read_data", &m, 256);
	nt.op = 4;
	nt.target = &tgt;
	nt.value = 7;
	nt.bytes = 4096;
	MSG(notify, &nt, NOTIFY);
	frame_put("notify", &m, 0);
	ck.id = 5;
	ck.target = &tgt;
	MSG(check, &ck, CHECK);
	frame_put("check", &m, 0);
	cr.id = 5;
	mem.addr = 0x7f0000000000;
	mem.n_rkeys = 2;
	mem.rkeys = rkeys;
	cr.rdma = &mem;
	MSG(check_reply, &cr, CHECK_REPLY);
	frame_put("check_reply", &m, 0);
	end.qpn = 0x11;
	end.psn = 0x22;
	end.gid = (ProtobufCBinaryData){ sizeof(gid), gid };
	end.mtu = 5;
	end.rd_atomic = 16;
	qc.rail = 0;
	qc.peer_rail = 1;
	qc.epoch = 9;
	qc.end = &end;
	MSG(qp_connect, &qc, QP_CONNECT);
	frame_put("qp_connect", &m, 0);
	qa.rail = 0;
	qa.peer_rail = 1;
	qa.epoch = 9;
	qa.end = &end;
	MSG(qp_accept, &qa, QP_ACCEPT);
	frame_put("qp_accept", &m, 0);
	lk.id = 6;
	lk.name = "kv.layer0";
	MSG(lookup, &lk, LOOKUP);
	frame_put("lookup", &m, 0);
	lr.id = 6;
	lr.token = (ProtobufCBinaryData){ sample_token(tok, sizeof(tok), true),
					  tok };
	MSG(lookup_reply, &lr, LOOKUP_REPLY);
	frame_put("lookup_reply", &m, 0);
	/* Owner-side staging (transport/rdma_land.c): a stream opened,
	 * a chunk lent, landed and returned, the stream done, one given
	 * up. */
	lo.id = 7;
	lo.target = &tgt;
	lo.at = 0;
	lo.length = 8192;
	lo.read = 1;
	lo.chunk = 4096;
	lo.timeout_ms = 5000;
	MSG(land_open, &lo, LAND_OPEN);
	frame_put("land_open", &m, 0);
	lg.id = 7;
	lg.slot = 3;
	lg.at = 4096;
	lg.len = 4096;
	lg.addr = 0x7f0000100000;
	lg.n_rkeys = 2;
	lg.rkeys = rkeys;
	MSG(land_grant, &lg, LAND_GRANT);
	frame_put("land_grant", &m, 0);
	ld.id = 7;
	ld.slot = 3;
	ld.error = 0;
	MSG(landed, &ld, LANDED);
	frame_put("landed", &m, 0);
	ldn.id = 7;
	ldn.result = 8192;
	MSG(land_done, &ldn, LAND_DONE);
	frame_put("land_done", &m, 0);
	la.id = 8;
	MSG(land_abort, &la, LAND_ABORT);
	frame_put("land_abort", &m, 0);
	/* A link's latency lane (transport/link_lane.c): offered, ready. */
	uint8_t secret[LINK_LANE_SECRET];
	memset(secret, 0x5e, sizeof(secret));
	Xfer__Peer__LaneOffer lof = XFER__PEER__LANE_OFFER__INIT;
	Xfer__Peer__LaneReady lrd = XFER__PEER__LANE_READY__INIT;
	lof.secret = (ProtobufCBinaryData){ sizeof(secret), secret };
	MSG(lane_offer, &lof, LANE_OFFER);
	frame_put("lane_offer", &m, 0);
	MSG(lane_ready, &lrd, LANE_READY);
	frame_put("lane_ready", &m, 0);
	/* The rest in one stream, then an Error that ends it. */
	put("fuzz_peer_frame", "stream", stream, nstream);
	er.code = -EPROTO;
	er.reason = "bye";
	MSG(error, &er, ERROR);
	frame_put("error", &m, 0);
#undef MSG
}

/*
 * SQEs in fuzz_sqe's terms: the low 3 bits of a handle pick A's region
 * (0), B's (1), the sub-range import of B (2), the whole import (3), A's
 * CMA region (4), another xferd's region (5); user_data bit 0 folds
 * offsets near the regions' size.
 */
static void sqes(void)
{
	struct xfer_sqe s[4];

#define SQE(op, fl, l, lo, r, ro, n) \
	((struct xfer_sqe){ .opcode = (op), .flags = (fl), .user_data = 1, \
			    .local = (l), .local_off = (lo), .remote = (r), \
			    .remote_off = (ro), .len = (n), \
			    .notify_value = 99 })
	s[0] = SQE(XFER_OP_WRITE, 0, 0, 0, 2, 0, 8192);
	put("fuzz_sqe", "write_import", s, sizeof(s[0]));
	s[0] = SQE(XFER_OP_READ, 0, 0, 100, 3, 4000, 30000);
	put("fuzz_sqe", "read_import", s, sizeof(s[0]));
	s[0] = SQE(XFER_OP_WRITE, XFER_SQE_F_NOTIFY, 0, 0, 3, 0, 4096);
	put("fuzz_sqe", "write_notify", s, sizeof(s[0]));
	s[0] = SQE(XFER_OP_NOTIFY, 0, 0, 0, 2, 0, 0);
	put("fuzz_sqe", "notify", s, sizeof(s[0]));
	s[0] = SQE(XFER_OP_NOP, 0, 0, 0, 0, 0, 0);
	put("fuzz_sqe", "nop", s, sizeof(s[0]));
	s[0] = SQE(XFER_OP_WRITE, 0, 4, 0, 3, 0, 65536);
	put("fuzz_sqe", "write_cma", s, sizeof(s[0]));
	s[0] = SQE(XFER_OP_READ, 0, 4, 512, 0, 0, 1000);
	put("fuzz_sqe", "read_cma", s, sizeof(s[0]));
	s[0] = SQE(XFER_OP_WRITE, 0, 0, 0, 5, 0, 4096);
	put("fuzz_sqe", "write_remote", s, sizeof(s[0]));
	s[0] = SQE(XFER_OP_WRITE, XFER_SQE_F_LINK, 0, 0, 3, 0, 4096);
	s[1] = SQE(XFER_OP_READ, XFER_SQE_F_LINK, 0, 8192, 2, 0, 8192);
	s[2] = SQE(XFER_OP_WRITE, XFER_SQE_F_LINK, 4, 0, 3, 4096, 4096);
	s[3] = SQE(XFER_OP_WRITE, XFER_SQE_F_NOTIFY, 0, 0, 3, 8192, 100);
	put("fuzz_sqe", "batch", s, sizeof(s));
	s[1] = SQE(XFER_OP_READ, XFER_SQE_F_LINK, 0, 0, 2, 8000, 8192);
	put("fuzz_sqe", "batch_error", s, sizeof(s));
#undef SQE
}

/* xferctl's requests, tagged as on the control socket. */
static void ctl_put(const char *name, Xfer__Ctl__CtlMsg *m)
{
	uint8_t buf[WIRE_TAG_LEN + 256];
	uint32_t tag = WIRE_TAG_CTL;

	m->proto_version = XFER_PROTO_VERSION;
	if (xfer__ctl__ctl_msg__get_packed_size(m) > sizeof(buf) - WIRE_TAG_LEN)
		abort();
	memcpy(buf, &tag, WIRE_TAG_LEN);
	size_t n = xfer__ctl__ctl_msg__pack(m, buf + WIRE_TAG_LEN);
	put("fuzz_ctl_msg", name, buf, WIRE_TAG_LEN + n);
}

static void ctl_msgs(void)
{
	Xfer__Ctl__CtlMsg m;
	Xfer__Ctl__StatusRequest st = XFER__CTL__STATUS_REQUEST__INIT;
	Xfer__Ctl__ClientsRequest cl = XFER__CTL__CLIENTS_REQUEST__INIT;
	Xfer__Ctl__RegionsRequest rg = XFER__CTL__REGIONS_REQUEST__INIT;
	Xfer__Ctl__PeersRequest pr = XFER__CTL__PEERS_REQUEST__INIT;
	Xfer__Ctl__GpusRequest gp = XFER__CTL__GPUS_REQUEST__INIT;
	Xfer__Ctl__RailsRequest rl = XFER__CTL__RAILS_REQUEST__INIT;
	Xfer__Ctl__PingRequest pg = XFER__CTL__PING_REQUEST__INIT;

#define MSG(field, val, body) \
	(m = (Xfer__Ctl__CtlMsg)XFER__CTL__CTL_MSG__INIT, \
	 m.body_case = XFER__CTL__CTL_MSG__BODY_##body, m.field = (val))
	MSG(status, &st, STATUS);
	ctl_put("status", &m);
	MSG(clients, &cl, CLIENTS);
	ctl_put("clients", &m);
	MSG(regions, &rg, REGIONS);
	ctl_put("regions", &m);
	MSG(peers, &pr, PEERS);
	ctl_put("peers", &m);
	MSG(gpus, &gp, GPUS);
	ctl_put("gpus", &m);
	MSG(rails, &rl, RAILS);
	ctl_put("rails", &m);
	pg.target = "node-b";
	MSG(ping, &pg, PING);
	ctl_put("ping_node", &m);
	pg.target = "[fd00::2]:7474";
	MSG(ping, &pg, PING);
	ctl_put("ping_addr", &m);
#undef MSG
}

/*
 * Handshakes in fuzz_handshake's terms: a side byte (1: this side
 * initiated), then the frames it receives, framed by link_frame_header.
 */
static size_t hs_frame(uint8_t *out, Xfer__Peer__PeerMsg *m)
{
	m->proto_version = XFER_PROTO_VERSION;
	int n = link_frame_header(&m->base, 0, out);
	if (n < 0)
		abort();
	return (size_t)n;
}

static void handshakes(void)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Hello h = XFER__PEER__HELLO__INIT;
	Xfer__Peer__Welcome w = XFER__PEER__WELCOME__INIT;
	Xfer__Peer__Ready r = XFER__PEER__READY__INIT;
	Xfer__Peer__Established e = XFER__PEER__ESTABLISHED__INIT;
	Xfer__Token__Address a4 = XFER__TOKEN__ADDRESS__INIT,
			     a6 = XFER__TOKEN__ADDRESS__INIT;
	Xfer__Token__Address *addrs[2] = { &a4, &a6 };
	Xfer__Peer__Rail rail = XFER__PEER__RAIL__INIT;
	Xfer__Peer__Rail *rails[1] = { &rail };
	uint8_t id[16], chal[32], proof[32], gid[16] = { 0xfe, 0x80 };
	uint8_t ip4[4] = { 10, 0, 0, 2 }, ip6[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0,
						    0, 0, 0, 0, 0, 0, 0, 2 };
	uint8_t buf[8192];
	size_t n;

	memset(id, 0xb1, sizeof(id));
	memset(chal, 0xc2, sizeof(chal));
	memset(proof, 0xd3, sizeof(proof));
	a4.ip = (ProtobufCBinaryData){ sizeof(ip4), ip4 };
	a4.prefix_len = 24;
	a4.port = 7474;
	a4.ifname = "eth0";
	a6.ip = (ProtobufCBinaryData){ sizeof(ip6), ip6 };
	a6.prefix_len = 64;
	a6.port = 7474;
	rail.index = 0;
	rail.device = 1;
	rail.gid = (ProtobufCBinaryData){ sizeof(gid), gid };
	rail.mtu = 5;
	rail.ip = a4.ip;
	rail.prefix_len = 24;

	/* The acceptor's side: Hello, then Ready. */
	h.instance_id = (ProtobufCBinaryData){ sizeof(id), id };
	h.node_name = "node-b";
	h.n_addresses = 2;
	h.addresses = addrs;
	h.challenge = (ProtobufCBinaryData){ sizeof(chal), chal };
	h.n_rails = 1;
	h.rails = rails;
	buf[0] = 0;
	m = (Xfer__Peer__PeerMsg)XFER__PEER__PEER_MSG__INIT;
	m.body_case = XFER__PEER__PEER_MSG__BODY_HELLO;
	m.hello = &h;
	n = 1 + hs_frame(buf + 1, &m);
	r.proof = (ProtobufCBinaryData){ sizeof(proof), proof };
	m = (Xfer__Peer__PeerMsg)XFER__PEER__PEER_MSG__INIT;
	m.body_case = XFER__PEER__PEER_MSG__BODY_READY;
	m.ready = &r;
	n += hs_frame(buf + n, &m);
	put("fuzz_handshake", "acceptor", buf, n);

	/* The initiator's side: Welcome, then Established. */
	w.instance_id = h.instance_id;
	w.node_name = "node-b";
	w.n_addresses = 2;
	w.addresses = addrs;
	w.challenge = h.challenge;
	w.proof = r.proof;
	w.auth = 1;
	w.n_rails = 1;
	w.rails = rails;
	buf[0] = 1;
	m = (Xfer__Peer__PeerMsg)XFER__PEER__PEER_MSG__INIT;
	m.body_case = XFER__PEER__PEER_MSG__BODY_WELCOME;
	m.welcome = &w;
	n = 1 + hs_frame(buf + 1, &m);
	m = (Xfer__Peer__PeerMsg)XFER__PEER__PEER_MSG__INIT;
	m.body_case = XFER__PEER__PEER_MSG__BODY_ESTABLISHED;
	m.established = &e;
	n += hs_frame(buf + n, &m);
	put("fuzz_handshake", "initiator", buf, n);

	/* A latency lane's first frame, on the acceptor's side. */
	Xfer__Peer__LaneHello lh = XFER__PEER__LANE_HELLO__INIT;
	lh.instance_id = h.instance_id;
	lh.secret = (ProtobufCBinaryData){ 16, chal };
	buf[0] = 0;
	m = (Xfer__Peer__PeerMsg)XFER__PEER__PEER_MSG__INIT;
	m.body_case = XFER__PEER__PEER_MSG__BODY_LANE_HELLO;
	m.lane_hello = &lh;
	n = 1 + hs_frame(buf + 1, &m);
	put("fuzz_handshake", "lane", buf, n);
}

/* etcd records (meta/record.h), as xferd writes them, and a kv of a
 * range answer; the first byte picks the parser (fuzz_etcd_record.c). */
static void etcd_put(const char *name, char kind, const char *json)
{
	char buf[RECORD_MAX + 1];
	size_t n = strlen(json);

	buf[0] = kind;
	memcpy(buf + 1, json, n);
	put("fuzz_etcd_record", name, buf, n + 1);
}

static void etcd_records(void)
{
	struct node_record nr = { .node = "node-a", .port = 7474, .naddrs = 2,
				  .nrails = 1 };
	struct name_record mr = { .node = "node-a" };
	uint8_t tok[512];
	char *s;

	memset(nr.instance, 0xab, sizeof(nr.instance));
	netaddr_parse("10.0.1.1/24", &nr.addrs[0]);
	netaddr_parse("fd00::1/64", &nr.addrs[1]);
	nr.ports[0] = nr.ports[1] = 7474;
	netaddr_parse("192.168.7.1/24", &nr.rails[0].addr);
	nr.rails[0].mtu = 5;
	s = record_node_encode(&nr);
	etcd_put("node", 0, s);
	free(s);
	memcpy(mr.instance, nr.instance, sizeof(mr.instance));
	mr.token_len = sample_token(tok, sizeof(tok), true);
	memcpy(mr.token, tok, mr.token_len);
	s = record_name_encode(&mr);
	etcd_put("name", 1, s);
	free(s);
	etcd_put("kv", 2, "{\"key\":\"L3hmZXJkL25vZGVzL2E=\",\"create_revision\":"
		 "\"2\",\"mod_revision\":\"3\",\"version\":\"1\",\"value\":"
		 "\"eyJ2IjoxfQ==\",\"lease\":\"7587899136781873419\"}");
}

/* fuzz_dlist: entries for dlist_check, then table operations. */
static void dlists(void)
{
	struct {
		uint32_t n;
		uint64_t range, len;
		uint32_t own;
		uint64_t off[3], lens[3];
		uint8_t ops[7][4];
	} __attribute__((packed)) s = {
		.n = 3, .range = 1 << 20, .len = 0, .own = 1,
		.off = { 0, 4096, 65536 }, .lens = { 4096, 8192, 1 },
		/* add, add, get, remove, add (another client), target goes,
		 * put */
		.ops = { { 0, 0, 0, 10 }, { 0, 0, 1, 39 }, { 4, 0, 0, 0 },
			 { 1, 0, 1, 0 }, { 0, 1, 0, 5 }, { 2, 0, 0, 0 },
			 { 5, 0, 0, 0 } },
	};

	put("fuzz_dlist", "own_lengths", &s, sizeof(s));
	s.own = 0;
	s.len = 4096;
	s.off[2] = (1 << 20) - 4095;  /* one byte past the range */
	put("fuzz_dlist", "past_the_range", &s, sizeof(s));
}

/* fuzz_http_request: what scrapers, browsers and port scanners send
 * to the metrics endpoint, one of each answer, and heads at the limit. */
static void http_put(const char *name, const char *head)
{
	put("fuzz_http_request", name, head, strlen(head));
}

static void http_requests(void)
{
	static char big[HTTP_HEAD_MAX + 1024];
	size_t n;

	http_put("prometheus",
		 "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\n"
		 "User-Agent: Prometheus/2.42.0\r\nAccept: application/"
		 "openmetrics-text;version=1.0.0,text/plain;version=0.0.4;"
		 "q=0.5,*/*;q=0.1\r\nAccept-Encoding: gzip\r\n"
		 "X-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n");
	http_put("curl_head", "HEAD /metrics HTTP/1.1\r\nHost: h\r\n"
		 "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n");
	http_put("lf_only_http10", "GET /metrics?x=1&y HTTP/1.0\n\n");
	http_put("not_found", "GET /favicon.ico HTTP/1.1\r\n\r\n");
	http_put("post", "POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n"
		 "\r\n{}");
	http_put("http2_preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
	http_put("http_3", "GET /metrics HTTP/3\r\n\r\n");
	http_put("http09", "GET /metrics\r\n\r\n");
	http_put("incomplete", "GET /metrics HTTP/1.1\r\nHost: h\r\n");
	static const char nul[] = "GET /metrics\0 HTTP/1.1\r\n\r\n";
	put("fuzz_http_request", "nul_in_line", nul, sizeof(nul) - 1);
	/* Exactly HTTP_HEAD_MAX bytes of head, then one byte more. */
	n = (size_t)snprintf(big, sizeof(big), "GET /metrics HTTP/1.1\r\nX: ");
	memset(big + n, 'a', sizeof(big) - n);
	memcpy(big + HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
	put("fuzz_http_request", "at_the_limit", big, HTTP_HEAD_MAX);
	memcpy(big + HTTP_HEAD_MAX - 4, "aaaa", 4);
	memcpy(big + HTTP_HEAD_MAX - 3, "\r\n\r\n", 4);
	put("fuzz_http_request", "one_byte_past", big, HTTP_HEAD_MAX + 1);
	/* Longer than metrics.c ever passes: the fuzzer's inputs may be
	 * (libFuzzer's longest input is its longest seed). */
	memcpy(big + HTTP_HEAD_MAX - 3, "aaaa", 4);
	memcpy(big + sizeof(big) - 4, "\r\n\r\n", 4);
	put("fuzz_http_request", "far_past", big, sizeof(big));
}

int main(int argc, char **argv)
{
	if (argc > 1)
		root = argv[1];
	tokens();
	client_msgs();
	peer_frames();
	sqes();
	ctl_msgs();
	handshakes();
	etcd_records();
	dlists();
	http_requests();
	return 0;
}
