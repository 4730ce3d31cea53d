/* SPDX-License-Identifier: Apache-2.0 */
/*
 * names.c - publish and lookup through the shared xferd.
 *
 * The parent publishes a token of its memory; a second process looks it
 * up and gets the identical bytes (also as "thisnode/name", and as a
 * size query with too small a buffer: -ENOSPC and the size), imports it
 * and writes, and the bytes land in the parent's memory and nowhere
 * else.  Then:
 *  - the publisher republishes (a sub-range token): the other process
 *    now finds that one, and it grants only the sub-range;
 *  - another client publishing the name gets -EEXIST, unpublishing it
 *    -EACCES, and the token stays; a missing name is -ENOENT (locally
 *    and as "thisnode/name", with no peers configured); another node's
 *    name is -EHOSTUNREACH (no peers);
 *  - after an unpublish the name is free for another client, and its
 *    names go when it closes its context, or is killed with SIGKILL
 *    (polled until lookup says -ENOENT);
 *  - bad names and arguments are -EINVAL from libxfer, and from xferd
 *    when spoken to raw (empty, '/', 201 bytes, control characters,
 *    a token of 0 or 513 bytes); 200 bytes is fine;
 *  - the HelloReply names this node (its host name: the shared xferd
 *    runs with the default node name) and its addresses, and every
 *    token libxfer exports (memfd and malloc'd regions, sub-ranges)
 *    carries exactly those addresses and that node name (decoded with
 *    common/token_codec.h), also after the trip through publish/lookup;
 *  - private xferds that listen on TCP, with node_name set (one too long
 *    for a token) and a peer that cannot be reached: tokens carry their
 *    HelloReply's addresses (with the listening port) and node name (or
 *    none), "node/name" with it is answered locally, a miss and another
 *    node's name come back as errors from the peer lookup, and xferd
 *    stops cleanly with names still published.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.pb-c.h"
#include "testlib.h"
#include "common/token_codec.h"
#include "common/wire.h"

#define REG_LEN  (256u * 1024u)
#define WOFF     1000u          /* the other process writes here */
#define WLEN     5000u
#define SUB_OFF  65536u         /* the republished sub-range */
#define SUB_LEN  8192u
#define BG_SEED  0x6e616d65ull  /* the publisher's background bytes */
#define W_SEED   0x77726974ull
#define SUB_SEED 0x73756272ull
#define GONE_MS  10000

static char kv[64], this_kv[160], other_kv[160], missing[64],
	this_missing[160], orphan[64];
static char host[80];            /* gethostname: at most 64 */

/* What the HelloReply said: every token must carry the same. */
static struct token_addr hello_addrs[TOKEN_MAX_ADDRS];
static uint32_t hello_naddrs;
static char hello_node[128];

/* --- helpers --- */

static void expect_lookup(struct xfer_ctx *c, const char *name,
			  const uint8_t *want, size_t want_len,
			  const char *what)
{
	uint8_t got[XFER_TOKEN_MAX];
	size_t len = sizeof(got);
	int rc = xfer_lookup(c, name, got, &len);

	T_ASSERT(rc == 0, "%s: lookup '%s' -> %d (%s)", what, name, rc,
		 xfer_strerror(rc));
	T_ASSERT(len == want_len, "%s: %zu bytes, want %zu", what, len,
		 want_len);
	T_ASSERT(memcmp(got, want, len) == 0, "%s: other bytes", what);
}

static void expect_lookup_err(struct xfer_ctx *c, const char *name, int want,
			      const char *what)
{
	uint8_t got[XFER_TOKEN_MAX];
	size_t len = sizeof(got);
	int rc = xfer_lookup(c, name, got, &len);

	T_ASSERT(rc == want, "%s: lookup '%s' -> %d (%s), want %s", what,
		 name, rc, xfer_strerror(rc), xfer_strerror(want));
	T_ASSERT(len == sizeof(got), "%s: length changed on failure", what);
}

/* Poll until name is no longer published (its owner has gone). */
static void wait_gone(struct xfer_ctx *c, const char *name, const char *what)
{
	uint64_t deadline = tl_now_ms() + GONE_MS;
	uint8_t got[XFER_TOKEN_MAX];

	for (;;) {
		size_t len = sizeof(got);
		int rc = xfer_lookup(c, name, got, &len);
		if (rc == -ENOENT)
			return;
		T_ASSERT(rc == 0, "%s: lookup -> %d (%s)", what, rc,
			 xfer_strerror(rc));
		T_ASSERT(tl_now_ms() < deadline,
			 "%s: '%s' still published after %d ms", what, name,
			 GONE_MS);
		usleep(10000);
	}
}

/* The token decodes and carries what the HelloReply said. */
static struct token check_hints(const uint8_t *tok, size_t len,
				const char *what)
{
	struct token t;

	T_ASSERT(token_decode(tok, len, &t) == 0, "%s: token does not decode",
		 what);
	T_ASSERT(t.naddrs == hello_naddrs, "%s: %u addresses, hello said %u",
		 what, t.naddrs, hello_naddrs);
	for (uint32_t i = 0; i < t.naddrs; i++) {
		const struct token_addr *a = &t.addrs[i], *h = &hello_addrs[i];
		T_ASSERT(token_addr_valid(a), "%s: address %u invalid", what, i);
		T_ASSERT(a->ip_len == h->ip_len &&
			 memcmp(a->ip, h->ip, a->ip_len) == 0 &&
			 a->prefix_len == h->prefix_len && a->port == h->port,
			 "%s: address %u differs from the HelloReply's", what,
			 i);
	}
	/* A node name too long for a token is left out of it. */
	if (strlen(hello_node) < TOKEN_NODE_NAME_MAX)
		T_ASSERT(strcmp(t.node_name, hello_node) == 0,
			 "%s: node name '%s', hello said '%s'", what,
			 t.node_name, hello_node);
	else
		T_ASSERT(t.node_name[0] == '\0', "%s: node name '%s'", what,
			 t.node_name);
	return t;
}

/* --- xferd spoken to raw: what libxfer would refuse before sending --- */

static int raw_sock = -1;
static uint64_t raw_seq = 1;

static Xfer__Client__ClientMsg *raw_call(Xfer__Client__ClientMsg *m)
{
	static uint8_t buf[WIRE_MAX_PACKET];
	int fds[WIRE_MAX_FDS];
	unsigned nfds;
	struct pollfd pfd = { .fd = raw_sock, .events = POLLIN };

	m->proto_version = XFER_PROTO_VERSION;
	m->seq = raw_seq++;
	T_ASSERT(wire_send(raw_sock, WIRE_TAG_CLIENT, &m->base, NULL, 0) == 0,
		 "raw send");
	T_ASSERT(poll(&pfd, 1, 10000) == 1, "xferd said nothing for 10 s");
	ssize_t n = wire_recv(raw_sock, buf, fds, &nfds);
	T_ASSERT(n > 0, "raw recv: connection closed (%zd)", n);
	wire_close_fds(fds, &nfds);
	T_ASSERT(wire_tag(buf, (size_t)n) == WIRE_TAG_CLIENT, "reply tag");
	Xfer__Client__ClientMsg *r = xfer__client__client_msg__unpack(
		NULL, (size_t)n - WIRE_TAG_LEN, buf + WIRE_TAG_LEN);
	T_ASSERT(r && r->seq == m->seq, "malformed reply or wrong seq");
	return r;
}

static void raw_expect_status(Xfer__Client__ClientMsg *m, int want,
			      const char *what)
{
	Xfer__Client__ClientMsg *r = raw_call(m);

	T_ASSERT(r->body_case == XFER__CLIENT__CLIENT_MSG__BODY_STATUS,
		 "raw %s: reply %d is not a status", what, (int)r->body_case);
	T_ASSERT(r->status->error == want, "raw %s: %d (%s), want %s", what,
		 r->status->error, xfer_strerror(r->status->error),
		 xfer_strerror(want));
	xfer__client__client_msg__free_unpacked(r, NULL);
}

/*
 * Connect raw_sock to the xferd at path, handshake by hand and keep
 * what the HelloReply says of its node (which must be named node).
 */
static void raw_hello(const char *path, const char *node)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Hello hello = XFER__CLIENT__HELLO__INIT;

	raw_sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	T_ASSERT(raw_sock >= 0, "socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	T_ASSERT(connect(raw_sock, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		 "connect: %s", strerror(errno));
	hello.name = "names-raw";
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO;
	m.hello = &hello;
	Xfer__Client__ClientMsg *r = raw_call(&m);
	T_ASSERT(r->body_case == XFER__CLIENT__CLIENT_MSG__BODY_HELLO_REPLY,
		 "no HelloReply");
	const Xfer__Client__HelloReply *hr = r->hello_reply;

	T_ASSERT(hr->node_name && strcmp(hr->node_name, node) == 0,
		 "HelloReply node name '%s', want '%s'",
		 hr->node_name ? hr->node_name : "(null)", node);
	snprintf(hello_node, sizeof(hello_node), "%s", hr->node_name);
	T_ASSERT(hr->n_addresses <= TOKEN_MAX_ADDRS,
		 "HelloReply with %zu addresses", hr->n_addresses);
	for (size_t i = 0; i < hr->n_addresses; i++) {
		const Xfer__Token__Address *a = hr->addresses[i];
		struct token_addr *h = &hello_addrs[i];
		T_ASSERT((a->ip.len == 4 && a->prefix_len <= 32) ||
			 (a->ip.len == 16 && a->prefix_len <= 128),
			 "HelloReply address %zu: %zu bytes /%u", i, a->ip.len,
			 a->prefix_len);
		T_ASSERT(a->port <= 65535, "HelloReply port %u", a->port);
		memcpy(h->ip, a->ip.data, a->ip.len);
		h->ip_len = (uint8_t)a->ip.len;
		h->prefix_len = (uint8_t)a->prefix_len;
		h->port = (uint16_t)a->port;
	}
	hello_naddrs = (uint32_t)hr->n_addresses;
	printf("this node: '%s', %u addresses\n", hello_node, hello_naddrs);
	xfer__client__client_msg__free_unpacked(r, NULL);
}

static void raw_publish(const char *name, const uint8_t *tok, size_t len,
			int want, const char *what)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__PublishRequest req = XFER__CLIENT__PUBLISH_REQUEST__INIT;

	req.name = (char *)name;
	req.token.data = (uint8_t *)tok;
	req.token.len = len;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_PUBLISH;
	m.publish = &req;
	raw_expect_status(&m, want, what);
}

static void raw_unpublish(const char *name, int want, const char *what)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__UnpublishRequest req =
		XFER__CLIENT__UNPUBLISH_REQUEST__INIT;

	req.name = (char *)name;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_UNPUBLISH;
	m.unpublish = &req;
	raw_expect_status(&m, want, what);
}

static Xfer__Client__ClientMsg *raw_lookup(const char *name)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__LookupRequest req = XFER__CLIENT__LOOKUP_REQUEST__INIT;

	req.name = (char *)name;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP;
	m.lookup = &req;
	return raw_call(&m);
}

static void raw_lookup_err(const char *name, int want, const char *what)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__LookupRequest req = XFER__CLIENT__LOOKUP_REQUEST__INIT;

	req.name = (char *)name;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP;
	m.lookup = &req;
	raw_expect_status(&m, want, what);
}

/* xferd checks names and sizes itself; kv is published (tok). */
static void raw_bad_requests(const uint8_t *tok, size_t tok_len)
{
	static uint8_t big[XFER_TOKEN_MAX + 1];
	char name[256];

	raw_publish("", tok, tok_len, -EINVAL, "empty name");
	raw_publish("a/b", tok, tok_len, -EINVAL, "name with '/'");
	raw_publish("ctl\x01", tok, tok_len, -EINVAL, "control character");
	raw_publish("sp ace", tok, tok_len, -EINVAL, "space");
	memset(name, 'r', 201);
	name[201] = '\0';
	raw_publish(name, tok, tok_len, -EINVAL, "201 bytes");
	raw_lookup_err(name, -EINVAL, "lookup of 201 bytes");
	raw_unpublish(name, -EINVAL, "unpublish of 201 bytes");
	raw_publish(orphan, tok, 0, -EINVAL, "empty token");
	raw_publish(orphan, big, sizeof(big), -EINVAL, "513-byte token");
	raw_unpublish("a/b", -EINVAL, "unpublish with '/'");
	raw_unpublish("", -EINVAL, "unpublish of an empty name");
	raw_lookup_err("", -EINVAL, "empty lookup");
	raw_lookup_err("/x", -EINVAL, "empty node");
	raw_lookup_err("node/", -EINVAL, "empty name after the node");
	raw_lookup_err("a/b/c", -EINVAL, "two slashes");
	raw_lookup_err("bad node/x", -EINVAL, "space in the node");
	raw_lookup_err("x\x7f", -EINVAL, "DEL in the name");
	raw_lookup_err(missing, -ENOENT, "missing name");
	raw_lookup_err(this_missing, -ENOENT, "missing name on this node");
	raw_unpublish(kv, -EACCES, "another client's name");
	raw_publish(kv, tok, tok_len, -EEXIST, "another client's name");

	/* A good lookup is a LookupReply with the very bytes. */
	Xfer__Client__ClientMsg *r = raw_lookup(kv);
	T_ASSERT(r->body_case == XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP_REPLY,
		 "raw lookup: reply %d", (int)r->body_case);
	T_ASSERT(r->lookup_reply->token.len == tok_len &&
		 memcmp(r->lookup_reply->token.data, tok, tok_len) == 0,
		 "raw lookup: other bytes");
	xfer__client__client_msg__free_unpacked(r, NULL);

	/* Limits inclusive: 200 bytes, a 512-byte blob. */
	memset(name, 'r', 200);
	name[200] = '\0';
	raw_publish(name, big, XFER_TOKEN_MAX, 0, "200 bytes, 512-byte token");
	r = raw_lookup(name);
	T_ASSERT(r->body_case == XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP_REPLY &&
		 r->lookup_reply->token.len == XFER_TOKEN_MAX,
		 "raw lookup of a 200-byte name");
	xfer__client__client_msg__free_unpacked(r, NULL);
	raw_unpublish(name, 0, "unpublish of 200 bytes");
	printf("raw requests: checked by xferd\n");
}

/* --- libxfer's own checks --- */

static void bad_arguments(struct xfer_ctx *c, const uint8_t *tok,
			  size_t tok_len)
{
	uint8_t got[XFER_TOKEN_MAX];
	char name[256], node_name[340];
	size_t len;

	memset(name, 'n', 201);
	name[201] = '\0';
	const char *bad[] = { "", "a/b", "/", name, "ctl\x01", "tab\t",
			      "sp ace", "del\x7f", "caf\xc3\xa9" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		T_ASSERT(xfer_publish(c, bad[i], tok, tok_len) == -EINVAL,
			 "publish of bad name %zu accepted", i);
		T_ASSERT(xfer_unpublish(c, bad[i]) == -EINVAL,
			 "unpublish of bad name %zu accepted", i);
		if (strcmp(bad[i], "a/b") != 0)
			expect_lookup_err(c, bad[i], -EINVAL, "bad name");
	}
	T_ASSERT(xfer_publish(NULL, kv, tok, tok_len) == -EINVAL, "NULL ctx");
	T_ASSERT(xfer_publish(c, NULL, tok, tok_len) == -EINVAL, "NULL name");
	T_ASSERT(xfer_publish(c, kv, NULL, tok_len) == -EINVAL, "NULL token");
	T_ASSERT(xfer_publish(c, kv, tok, 0) == -EINVAL, "empty token");
	T_ASSERT(xfer_publish(c, kv, tok, XFER_TOKEN_MAX + 1) == -EINVAL,
		 "513-byte token");
	T_ASSERT(xfer_unpublish(NULL, kv) == -EINVAL, "NULL ctx");
	T_ASSERT(xfer_unpublish(c, NULL) == -EINVAL, "NULL name");
	len = sizeof(got);
	T_ASSERT(xfer_lookup(NULL, kv, got, &len) == -EINVAL, "NULL ctx");
	T_ASSERT(xfer_lookup(c, NULL, got, &len) == -EINVAL, "NULL name");
	T_ASSERT(xfer_lookup(c, kv, got, NULL) == -EINVAL, "NULL len");
	T_ASSERT(xfer_lookup(c, kv, NULL, &len) == -EINVAL,
		 "NULL buffer with a length");
	expect_lookup_err(c, "/x", -EINVAL, "empty node");
	expect_lookup_err(c, "node/", -EINVAL, "empty name after the node");
	expect_lookup_err(c, "a/b/c", -EINVAL, "two slashes");
	expect_lookup_err(c, "bad node/x", -EINVAL, "space in the node");
	memset(node_name, 'h', 80);
	snprintf(node_name + 80, sizeof(node_name) - 80, "/%s", kv);
	expect_lookup_err(c, node_name, -EINVAL, "80-byte node");
	/* Nothing of that was published. */
	expect_lookup_err(c, "sp", -ENOENT, "never published");

	/* 200 bytes is a name. */
	name[200] = '\0';
	T_OK(xfer_publish(c, name, tok, tok_len));
	expect_lookup(c, name, tok, tok_len, "200-byte name");
	snprintf(node_name, sizeof(node_name), "%s/%s", host, name);
	expect_lookup(c, node_name, tok, tok_len, "this node, 200-byte name");
	T_OK(xfer_unpublish(c, name));
	expect_lookup_err(c, name, -ENOENT, "unpublished 200-byte name");
	T_ASSERT(xfer_unpublish(c, name) == -ENOENT, "unpublish twice");
	printf("bad arguments: refused by libxfer\n");
}

/* --- the other process --- */

enum cmd { CMD_REPLACED = 1, CMD_UNPUBLISHED, CMD_QUIT };

static void reader_main(int in, int out)
{
	uint8_t tok[XFER_TOKEN_MAX], got[XFER_TOKEN_MAX], mine[XFER_TOKEN_MAX];
	size_t tok_len = tl_recv_blob(in, tok, sizeof(tok));
	struct xfer_ctx *c = tl_open();
	struct xfer_remote *rem;
	struct xfer_sqe *sqe;
	struct xfer_cqe cqe;
	struct tl_buf src;
	size_t len;
	uint8_t cmd;

	tl_buf_alloc(c, TL_MALLOC, 64 * 1024, &src);

	/* The very bytes, by name and by this node's name. */
	expect_lookup(c, kv, tok, tok_len, "lookup from another process");
	expect_lookup(c, this_kv, tok, tok_len, "lookup as thisnode/name");
	len = 0;
	T_ASSERT(xfer_lookup(c, kv, NULL, &len) == -ENOSPC && len == tok_len,
		 "size query: %zu, want %zu", len, tok_len);
	len = tok_len - 1;
	memset(got, 0x55, sizeof(got));
	T_ASSERT(xfer_lookup(c, kv, got, &len) == -ENOSPC && len == tok_len,
		 "one byte short: %zu", len);
	T_ASSERT(got[0] == 0x55, "a too small buffer was written");
	len = tok_len;
	T_OK(xfer_lookup(c, kv, got, &len));
	T_ASSERT(len == tok_len && memcmp(got, tok, len) == 0, "exact buffer");
	check_hints(got, len, "looked-up token");

	expect_lookup_err(c, missing, -ENOENT, "missing name");
	expect_lookup_err(c, this_missing, -ENOENT, "missing on this node");
	expect_lookup_err(c, other_kv, -EHOSTUNREACH, "another node");

	/* Not ours to take or remove. */
	size_t mine_len = tl_export(&src, mine);
	T_ASSERT(xfer_publish(c, kv, mine, mine_len) == -EEXIST,
		 "publish over another client's name");
	T_ASSERT(xfer_unpublish(c, kv) == -EACCES,
		 "unpublish of another client's name");
	expect_lookup(c, kv, tok, tok_len, "after -EEXIST and -EACCES");

	/* The token works: write into the publisher's memory. */
	T_OK(xfer_import(c, got, len, &rem));
	T_ASSERT(xfer_remote_len(rem) == REG_LEN, "import grants %llu",
		 (unsigned long long)xfer_remote_len(rem));
	tl_fill(src.ptr, WLEN, W_SEED);
	sqe = xfer_get_sqe(c);
	T_ASSERT(sqe, "no SQE");
	xfer_prep_write(sqe, src.handle, 0, xfer_remote_handle(rem), WOFF,
			WLEN, 1);
	cqe = tl_submit_wait(c);
	T_ASSERT(cqe.user_data == 1 && cqe.result == WLEN,
		 "write through the looked-up token: %lld (%s)",
		 (long long)cqe.result, xfer_strerror((int)cqe.result));
	T_OK(xfer_unimport(c, rem));
	cmd = 1;
	tl_write_full(out, &cmd, 1);

	/* Republished: the sub-range token, which grants only that. */
	tl_read_full(in, &cmd, 1);
	T_ASSERT(cmd == CMD_REPLACED, "command %u", cmd);
	tok_len = tl_recv_blob(in, tok, sizeof(tok));
	expect_lookup(c, kv, tok, tok_len, "after republish");
	T_OK(xfer_import(c, tok, tok_len, &rem));
	T_ASSERT(xfer_remote_len(rem) == SUB_LEN, "sub-range import grants %llu",
		 (unsigned long long)xfer_remote_len(rem));
	tl_fill(src.ptr, SUB_LEN, SUB_SEED);
	sqe = xfer_get_sqe(c);
	xfer_prep_write(sqe, src.handle, 0, xfer_remote_handle(rem), 0,
			SUB_LEN, 2);
	cqe = tl_submit_wait(c);
	T_ASSERT(cqe.user_data == 2 && cqe.result == SUB_LEN,
		 "write through the republished token: %lld",
		 (long long)cqe.result);
	T_OK(xfer_unimport(c, rem));
	tl_write_full(out, &cmd, 1);

	/* Unpublished: gone, and free for us. */
	tl_read_full(in, &cmd, 1);
	T_ASSERT(cmd == CMD_UNPUBLISHED, "command %u", cmd);
	expect_lookup_err(c, kv, -ENOENT, "after unpublish");
	T_OK(xfer_publish(c, kv, mine, mine_len));
	expect_lookup(c, kv, mine, mine_len, "our own publish");
	tl_send_blob(out, mine, mine_len);

	/* Closing the context takes our names along. */
	tl_read_full(in, &cmd, 1);
	T_ASSERT(cmd == CMD_QUIT, "command %u", cmd);
	tl_buf_free(c, &src);
	xfer_close(c);
}

/* Publishes orphan, says so, and waits to be killed. */
static void orphan_main(int out)
{
	struct xfer_ctx *c = tl_open();
	uint8_t tok[XFER_TOKEN_MAX];
	struct tl_buf b;

	tl_buf_alloc(c, TL_HOST, 4096, &b);
	size_t len = tl_export(&b, tok);
	T_OK(xfer_publish(c, orphan, tok, len));
	tl_send_blob(out, tok, len);
	for (;;)
		pause();
}

/* --- a private xferd with its own node name and a peer --- */

/* What a lookup that had to ask an unreachable peer may come back with. */
static bool peer_miss(int rc)
{
	return rc == -EHOSTUNREACH || rc == -ETIMEDOUT ||
	       rc == -ECONNREFUSED || rc == -ENOENT;
}

/*
 * A private xferd that listens (so it advertises addresses), with
 * node_name set and a peer that cannot be reached: its HelloReply names
 * the node and the addresses, every token carries both (or no node name
 * when it is too long for a token), "node/name" with that name is
 * answered locally, a miss and another node's name come back as errors
 * from the peer lookup, and it stops cleanly with a name still
 * published.
 */
static void private_node(const char *node)
{
	char node_opt[128], node_kv[160], listen_opt[64];
	const char *const args[] = { node_opt, listen_opt, "peer=127.0.0.1:1",
				     NULL };
	uint8_t tok[XFER_TOKEN_MAX], got[XFER_TOKEN_MAX];
	int shared_raw = raw_sock;
	struct tl_daemon xd;
	struct xfer_ctx *c;
	struct tl_buf b;

	snprintf(node_opt, sizeof(node_opt), "node_name=%s", node);
	snprintf(listen_opt, sizeof(listen_opt), "listen=*:%u", tl_free_port());
	snprintf(node_kv, sizeof(node_kv), "%s/kv", node);
	tl_daemon_start(&xd, args);
	/* From here check_hints() compares with this xferd's HelloReply. */
	raw_hello(xd.socket, node);
	T_OK(xfer_open(xd.socket, &c));
	tl_buf_alloc(c, TL_HOST, 4096, &b);
	size_t len = tl_export(&b, tok);
	struct token t = check_hints(tok, len, "private xferd's token");
	for (uint32_t i = 0; i < t.naddrs; i++)
		T_ASSERT(t.addrs[i].port == atoi(strchr(listen_opt, ':') + 1),
			 "address %u with port %u, listening on %s", i,
			 t.addrs[i].port, listen_opt);

	T_OK(xfer_publish(c, "kv", tok, len));
	expect_lookup(c, "kv", tok, len, "private: local hit, peers configured");
	expect_lookup(c, node_kv, tok, len, "private: by its node name");

	uint64_t start = tl_now_ms();
	size_t glen = sizeof(got);
	int rc = xfer_lookup(c, "missing", got, &glen);
	T_ASSERT(peer_miss(rc), "private: miss asked the peer: %d (%s)", rc,
		 xfer_strerror(rc));
	glen = sizeof(got);
	rc = xfer_lookup(c, this_kv, got, &glen);
	T_ASSERT(peer_miss(rc), "private: '%s' is another node: %d (%s)",
		 this_kv, rc, xfer_strerror(rc));
	printf("private xferd '%.20s', %u addresses: peer lookups -> %s "
	       "(%llu ms)\n", node, t.naddrs, xfer_strerror(rc),
	       (unsigned long long)(tl_now_ms() - start));
	expect_lookup(c, node_kv, tok, len, "private: after the peer lookups");

	/* Stopped while the name is still published. */
	close(raw_sock);
	raw_sock = shared_raw;
	T_ASSERT(tl_daemon_stop(&xd) == 0, "private xferd did not stop cleanly");
	tl_buf_free(c, &b);
	xfer_close(c);
}

/* --- the publisher (parent) --- */

/* Global so that the children, which inherit them, still reach them. */
static struct xfer_ctx *pub;
static struct tl_buf buf, mbuf;

int main(void)
{
	uint8_t tok[XFER_TOKEN_MAX], tok2[XFER_TOKEN_MAX], other[XFER_TOKEN_MAX];
	int to_child[2], from_child[2];
	size_t len;
	uint8_t cmd;
	pid_t pid;

	tl_socket(); /* skips without a shared xferd */
	T_ASSERT(gethostname(host, sizeof(host)) == 0, "gethostname");
	host[sizeof(host) - 1] = '\0';
	snprintf(kv, sizeof(kv), "names-test.%d.kv", (int)getpid());
	snprintf(missing, sizeof(missing), "names-test.%d.missing",
		 (int)getpid());
	snprintf(orphan, sizeof(orphan), "names-test.%d.orphan",
		 (int)getpid());
	snprintf(this_kv, sizeof(this_kv), "%s/%s", host, kv);
	snprintf(this_missing, sizeof(this_missing), "%s/%s", host, missing);
	snprintf(other_kv, sizeof(other_kv), "no-such-node.invalid/%s", kv);

	raw_hello(tl_socket(), host);
	pub = tl_open();
	tl_buf_alloc(pub, TL_HOST, REG_LEN, &buf);
	tl_fill(buf.ptr, REG_LEN, BG_SEED);
	len = tl_export(&buf, tok);

	/* Every token carries this node's addresses and name. */
	check_hints(tok, len, "memfd region token");
	tl_buf_alloc(pub, TL_MALLOC, 4096, &mbuf);
	size_t mlen = tl_export(&mbuf, other);
	check_hints(other, mlen, "malloc region token");
	size_t len2 = sizeof(tok2);
	T_OK(xfer_export(buf.mem, SUB_OFF, SUB_LEN, tok2, &len2));
	struct token sub = check_hints(tok2, len2, "sub-range token");
	T_ASSERT(sub.offset == SUB_OFF && sub.length == SUB_LEN &&
		 sub.region_length == REG_LEN, "sub-range token's range");

	T_OK(xfer_publish(pub, kv, tok, len));
	expect_lookup(pub, kv, tok, len, "the publisher's own lookup");
	bad_arguments(pub, tok, len);
	raw_bad_requests(tok, len);

	/* Another process finds it, imports it and writes. */
	T_ASSERT(pipe(to_child) == 0 && pipe(from_child) == 0, "pipe");
	pid = tl_fork();
	if (pid == 0) {
		close(to_child[1]);
		close(from_child[0]);
		reader_main(to_child[0], from_child[1]);
		exit(0);
	}
	close(to_child[0]);
	close(from_child[1]);
	tl_send_blob(to_child[1], tok, len);
	tl_read_full(from_child[0], &cmd, 1);
	T_ASSERT(!tl_check(buf.ptr + WOFF, WLEN, W_SEED),
		 "the other process's bytes did not land");
	T_ASSERT(!tl_check_at(buf.ptr, WOFF, BG_SEED, 0) &&
		 !tl_check_at(buf.ptr + WOFF + WLEN, REG_LEN - WOFF - WLEN,
			      BG_SEED, WOFF + WLEN),
		 "bytes outside the write changed");
	printf("lookup from another process: token works\n");

	/* Republish: the same client replaces its token. */
	T_OK(xfer_publish(pub, kv, tok2, len2));
	cmd = CMD_REPLACED;
	tl_write_full(to_child[1], &cmd, 1);
	tl_send_blob(to_child[1], tok2, len2);
	tl_read_full(from_child[0], &cmd, 1);
	T_ASSERT(!tl_check(buf.ptr + SUB_OFF, SUB_LEN, SUB_SEED),
		 "the write through the republished token did not land");
	T_ASSERT(!tl_check_at(buf.ptr + SUB_OFF + SUB_LEN, 4096, BG_SEED,
			      SUB_OFF + SUB_LEN) &&
		 !tl_check_at(buf.ptr + SUB_OFF - 4096, 4096, BG_SEED,
			      SUB_OFF - 4096),
		 "bytes around the sub-range changed");
	printf("republish: replaced\n");

	/* Unpublish: the name is free, and then another client's. */
	T_OK(xfer_unpublish(pub, kv));
	T_ASSERT(xfer_unpublish(pub, kv) == -ENOENT, "unpublish twice");
	cmd = CMD_UNPUBLISHED;
	tl_write_full(to_child[1], &cmd, 1);
	uint8_t theirs[XFER_TOKEN_MAX];
	size_t theirs_len = tl_recv_blob(from_child[0], theirs, sizeof(theirs));
	T_ASSERT(xfer_publish(pub, kv, tok, len) == -EEXIST,
		 "publish over the other process's name");
	T_ASSERT(xfer_unpublish(pub, kv) == -EACCES,
		 "unpublish of the other process's name");
	expect_lookup(pub, kv, theirs, theirs_len, "the other process's token");

	/* It closes its context: its name goes. */
	cmd = CMD_QUIT;
	tl_write_full(to_child[1], &cmd, 1);
	T_ASSERT(tl_child_wait(pid, 30000) == 0, "the other process failed");
	close(to_child[1]);
	close(from_child[0]);
	wait_gone(pub, kv, "after xfer_close");
	T_OK(xfer_publish(pub, kv, tok, len));
	expect_lookup(pub, kv, tok, len, "published again");
	printf("names go with a closed context\n");

	/* A publisher killed with SIGKILL loses its names too. */
	T_ASSERT(pipe(from_child) == 0, "pipe");
	pid = tl_fork();
	if (pid == 0) {
		close(from_child[0]);
		orphan_main(from_child[1]);
	}
	close(from_child[1]);
	size_t olen = tl_recv_blob(from_child[0], other, sizeof(other));
	expect_lookup(pub, orphan, other, olen, "the doomed publisher's name");
	check_hints(other, olen, "another process's token");
	T_ASSERT(kill(pid, SIGKILL) == 0, "kill");
	T_ASSERT(tl_child_wait(pid, 10000) == -SIGKILL, "not killed");
	close(from_child[0]);
	wait_gone(pub, orphan, "after SIGKILL");
	printf("names go with a killed publisher\n");

	/* Node names from the config; a 70-byte one stays out of tokens. */
	private_node("names-private-node");
	char long_node[71];
	memset(long_node, 'l', 70);
	long_node[70] = '\0';
	private_node(long_node);

	/* Ours is still there, and goes when we unpublish. */
	expect_lookup(pub, kv, tok, len, "ours after the others left");
	T_OK(xfer_unpublish(pub, kv));
	expect_lookup_err(pub, kv, -ENOENT, "ours after unpublish");
	close(raw_sock);
	tl_buf_free(pub, &mbuf);
	tl_buf_free(pub, &buf);
	xfer_close(pub);
	return 0;
}
