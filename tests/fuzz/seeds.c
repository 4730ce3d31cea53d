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
#include "common/token_codec.h"
#include "common/wire.h"
#include "peer.pb-c.h"
#include "transport/link.h"
#include "transport/link_int.h"
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

int main(int argc, char **argv)
{
	if (argc > 1)
		root = argv[1];
	tokens();
	client_msgs();
	return 0;
}
