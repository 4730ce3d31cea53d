/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_fuzz.c - malformed and hostile frames on xferd's peer port.
 *
 *   peer_fuzz --connect HOST:PORT [--token-file F] [--pid PID]
 *             [--deadline-ms MS] [--silent-ms MS] [--case NAME]... [--list]
 *
 * One TCP connection per case.  Frames follow proto/peer.proto: u32
 * header length, u32 payload length (little-endian), a packed PeerMsg,
 * then the payload.  For every case the daemon must react as the
 * protocol says - in most cases close the connection (read returns 0 or
 * ECONNRESET) within --deadline-ms; for an operation on a region that
 * does not exist, fail that operation only (WriteAck -ESTALE) and keep
 * the link - and it must still be alive afterwards: a fresh connection
 * gets a Welcome to a fresh Hello and completes the handshake.
 *
 * The lane cases complete a handshake whose Hello says lanes, take the
 * daemon's LaneOffer and open lanes with it (transport/link_lane.c):
 * replays, other links' secrets, guessing, frames at the wrong time and
 * on the wrong connection, either connection closed.
 *
 * Cases after the handshake that need a real region (a bad key, a range
 * outside the token, a payload past it) take a token of the attacked
 * node from --token-file; without one they are skipped.  Whether the
 * region's bytes stayed untouched is for the caller to check (xnode
 * serve --verify-unchanged).
 *
 * One line per case ("ok   NAME: ..." or "FAIL NAME: ..."); exit 0 only
 * if every case that ran behaved, 1 otherwise, 2 on usage errors.
 *
 * Longer than a module should be: the Makefile builds each test tool
 * from one source, and each case is a short function that reads best
 * beside the frame helpers it uses and the other cases.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "peer.pb-c.h"
#include "common/token_codec.h"
#include "peer_wire.h"

#define MAX_CASES       64

static struct {
	const char *host;
	const char *port;
	const char *token_file;
	pid_t pid;
	int deadline_ms;
	int silent_ms;
	const char *only[MAX_CASES];
	unsigned nonly;
} opt = { .deadline_ms = 5000, .silent_ms = 15000 };

static struct token tok;        /* from --token-file */
static bool have_token;

/* --- connecting --- */

static int conn_open(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	int fd = -1, rc;

	rc = getaddrinfo(opt.host, opt.port, &hints, &res);
	if (rc) {
		set_why("getaddrinfo %s:%s: %s", opt.host, opt.port,
			gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		/* Non-blocking connect, so that a daemon that is gone or
		 * hung costs a deadline, not the kernel's SYN retries. */
		int fl = fcntl(fd, F_GETFL);
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
		rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
		if (rc && errno == EINPROGRESS) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			int err = 0;
			socklen_t len = sizeof(err);
			if (poll(&p, 1, opt.deadline_ms) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
			    err == 0)
				rc = 0;
			else
				errno = err ? err : ETIMEDOUT;
		}
		if (rc == 0) {
			fcntl(fd, F_SETFL, fl);
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			break;
		}
		set_why("connect %s:%s: %s", opt.host, opt.port, strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}


/*
 * Wait for the daemon to close fd: true when it did (EOF or reset)
 * before the deadline.  Frames it sends first (an Error, keepalives) are
 * read and, for an Error, shown in `why`.
 */
static bool expect_closed(int fd, int ms, char *how, size_t howlen)
{
	uint64_t t0 = now_ms(), deadline = t0 + (uint64_t)ms;
	char said[256] = "";

	for (;;) {
		Xfer__Peer__PeerMsg *m = NULL;
		uint32_t plen;
		int rc = recv_msg(fd, deadline, &m, &plen);
		if (rc == 1) {
			if (m->body_case == XFER__PEER__PEER_MSG__BODY_ERROR)
				snprintf(said, sizeof(said), ", after Error %d '%s'",
					 m->error->code,
					 m->error->reason ? m->error->reason : "");
			else if (m->body_case == XFER__PEER__PEER_MSG__BODY_PING)
				answer_ping(fd, m);
			xfer__peer__peer_msg__free_unpacked(m, NULL);
			continue;
		}
		if (rc == -EPROTO) {
			/* Not frames: just wait for the end. */
			char sink[4096];
			ssize_t n;
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			while (now_ms() < deadline &&
			       poll(&pfd, 1, (int)(deadline - now_ms())) == 1 &&
			       (n = recv(fd, sink, sizeof(sink), 0)) > 0)
				;
			rc = now_ms() >= deadline ? -ETIMEDOUT : 0;
		}
		if (rc == -ETIMEDOUT) {
			set_why("the connection is still open %d ms later%s", ms,
				said);
			return false;
		}
		snprintf(how, howlen, "closed (%s) after %" PRIu64 " ms%s",
			 rc == 0 ? "EOF" : strerror(-rc), now_ms() - t0, said);
		return true;
	}
}

/*
 * The next frame of type `want`, skipping keepalives.  Returns it, or
 * NULL with `why` set (closed, timed out, something else came).
 */
static Xfer__Peer__PeerMsg *expect_msg(int fd, Xfer__Peer__PeerMsg__BodyCase want,
				       const char *what)
{
	uint64_t deadline = now_ms() + (uint64_t)opt.deadline_ms;

	for (;;) {
		Xfer__Peer__PeerMsg *m = NULL;
		uint32_t plen;
		int rc = recv_msg(fd, deadline, &m, &plen);
		if (rc == 0 || rc == -ECONNRESET) {
			set_why("closed while waiting for %s", what);
			return NULL;
		}
		if (rc == -ETIMEDOUT) {
			set_why("no %s within %d ms", what, opt.deadline_ms);
			return NULL;
		}
		if (rc < 0) {
			if (rc != -EPROTO)
				set_why("waiting for %s: %s", what, strerror(-rc));
			return NULL;
		}
		if (m->body_case == XFER__PEER__PEER_MSG__BODY_PING) {
			answer_ping(fd, m);
			xfer__peer__peer_msg__free_unpacked(m, NULL);
			continue;
		}
		if (m->body_case == want && m->proto_version == PROTO_VERSION)
			return m;
		if (m->body_case == XFER__PEER__PEER_MSG__BODY_ERROR)
			set_why("got Error %d '%s' instead of %s", m->error->code,
				m->error->reason ? m->error->reason : "", what);
		else
			set_why("got message %d (version %u) instead of %s",
				(int)m->body_case, m->proto_version, what);
		xfer__peer__peer_msg__free_unpacked(m, NULL);
		return NULL;
	}
}

/* --- the handshake, done right --- */

static void make_hello(Xfer__Peer__PeerMsg *m, Xfer__Peer__Hello *h,
		       uint8_t id[ID_LEN], uint8_t challenge[CHALLENGE_LEN])
{
	random_bytes(id, ID_LEN);
	random_bytes(challenge, CHALLENGE_LEN);
	*h = (Xfer__Peer__Hello)XFER__PEER__HELLO__INIT;
	h->instance_id = (ProtobufCBinaryData){ ID_LEN, id };
	h->node_name = (char *)"peer-fuzz";
	h->challenge = (ProtobufCBinaryData){ CHALLENGE_LEN, challenge };
	h->auth = false;
	msg_init(m);
	m->body_case = XFER__PEER__PEER_MSG__BODY_HELLO;
	m->hello = h;
}

/* Hello -> Welcome -> Ready -> Established on fd.  0 or -1 with `why`. */
static int handshake(int fd)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Hello h;
	Xfer__Peer__Ready ready = XFER__PEER__READY__INIT;
	uint8_t id[ID_LEN], challenge[CHALLENGE_LEN];
	Xfer__Peer__PeerMsg *r;

	make_hello(&m, &h, id, challenge);
	if (send_msg(fd, &m, NULL, 0)) {
		set_why("sending Hello: %s", strerror(errno));
		return -1;
	}
	if (!(r = expect_msg(fd, XFER__PEER__PEER_MSG__BODY_WELCOME, "Welcome")))
		return -1;
	bool ok = r->welcome->instance_id.len == ID_LEN;
	if (!ok)
		set_why("Welcome with a %zu-byte instance id",
			r->welcome->instance_id.len);
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	if (!ok)
		return -1;
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_READY;
	m.ready = &ready;    /* proof empty: no cluster key */
	if (send_msg(fd, &m, NULL, 0)) {
		set_why("sending Ready: %s", strerror(errno));
		return -1;
	}
	if (!(r = expect_msg(fd, XFER__PEER__PEER_MSG__BODY_ESTABLISHED,
			     "Established")))
		return -1;
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	return 0;
}

/* Is the daemon still there and sane?  0 or -1 with `why`. */
static int alive_check(void)
{
	if (opt.pid > 0 && kill(opt.pid, 0) != 0) {
		set_why("xferd (pid %d) is gone", (int)opt.pid);
		return -1;
	}
	int fd = conn_open();
	if (fd < 0)
		return -1;
	int rc = handshake(fd);
	close(fd);
	return rc;
}

/* A Ping on an established link must come back as its Pong. */
static int link_answers(int fd)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Ping ping = XFER__PEER__PING__INIT;

	ping.nonce = 0x5eed1e55;
	ping.sent_ns = 1;
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_PING;
	m.ping = &ping;
	if (send_msg(fd, &m, NULL, 0)) {
		set_why("the link was closed");
		return -1;
	}
	Xfer__Peer__PeerMsg *r = expect_msg(fd, XFER__PEER__PEER_MSG__BODY_PONG,
					    "Pong");
	if (!r)
		return -1;
	bool ok = r->pong->nonce == ping.nonce;
	if (!ok)
		set_why("Pong with nonce %" PRIu64, r->pong->nonce);
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	return ok ? 0 : -1;
}

/* --- cases --- */

struct fuzz_case {
	const char *name;
	const char *what;
	bool needs_token;
	/* Run on a fresh connection; true if the daemon behaved, with a
	 * description in how (or the reason in why). */
	bool (*run)(int fd, char *how, size_t howlen);
};

static bool closes(int fd, char *how, size_t howlen)
{
	return expect_closed(fd, opt.deadline_ms, how, howlen);
}

/* Send then require the close; a send that fails because the daemon
 * already hung up counts as closed. */
static bool send_then_closed(int fd, int send_rc, char *how, size_t howlen)
{
	if (send_rc == -EPIPE || send_rc == -ECONNRESET) {
		snprintf(how, howlen, "closed while we were still sending (%s)",
			 strerror(-send_rc));
		return true;
	}
	return closes(fd, how, howlen);
}

static bool case_garbage_http(int fd, char *how, size_t howlen)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: xferd\r\n\r\n";

	return send_then_closed(fd, send_all(fd, req, sizeof(req) - 1), how,
				howlen);
}

static bool case_garbage_random(int fd, char *how, size_t howlen)
{
	uint8_t buf[512];
	uint64_t x = 0x9e3779b97f4a7c15ull;

	/* Deterministic, and the first length is far beyond any limit. */
	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	buf[3] = 0xfe;
	return send_then_closed(fd, send_all(fd, buf, sizeof(buf)), how, howlen);
}

static bool case_header_len_max(int fd, char *how, size_t howlen)
{
	static const uint8_t junk[64];

	return send_then_closed(fd, send_frame_raw(fd, 0xffffffffu, 0, junk,
						   sizeof(junk), NULL, 0),
				how, howlen);
}

static bool case_header_len_zero(int fd, char *how, size_t howlen)
{
	return send_then_closed(fd, send_frame_raw(fd, 0, 0, NULL, 0, NULL, 0),
				how, howlen);
}

static bool case_payload_1g(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Hello h;
	uint8_t id[ID_LEN], ch[CHALLENGE_LEN], *hdr, chunk[4096] = { 0 };

	make_hello(&m, &h, id, ch);
	size_t hlen = pack_msg(&m, &hdr);
	/* Announce 1 GiB, send a little of it: the daemon must not wait
	 * for (or allocate) the rest. */
	int rc = send_frame_raw(fd, (uint32_t)hlen, 1u << 30, hdr, hlen, chunk,
				sizeof(chunk));
	free(hdr);
	return send_then_closed(fd, rc, how, howlen);
}

static bool case_header_unparsable(int fd, char *how, size_t howlen)
{
	uint8_t hdr[32];

	memset(hdr, 0xff, sizeof(hdr));
	return send_then_closed(fd, send_frame_raw(fd, sizeof(hdr), 0, hdr,
						   sizeof(hdr), NULL, 0),
				how, howlen);
}

static bool hello_with_version(int fd, uint32_t version, char *how,
			       size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Hello h;
	uint8_t id[ID_LEN], ch[CHALLENGE_LEN];

	make_hello(&m, &h, id, ch);
	m.proto_version = version;
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_wrong_version(int fd, char *how, size_t howlen)
{
	return hello_with_version(fd, PROTO_VERSION + 9999, how, howlen);
}

static bool case_version_zero(int fd, char *how, size_t howlen)
{
	return hello_with_version(fd, 0, how, howlen);
}

static bool case_unknown_body(int fd, char *how, size_t howlen)
{
	/* proto_version = 1, then field 99 (no such oneof member) as an
	 * empty message: parses, with no body the daemon knows. */
	static const uint8_t hdr[] = { 0x08, PROTO_VERSION, 0x9a, 0x06, 0x00 };

	return send_then_closed(fd, send_frame_raw(fd, sizeof(hdr), 0, hdr,
						   sizeof(hdr), NULL, 0),
				how, howlen);
}

static bool case_no_body(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;

	msg_init(&m);   /* a version and nothing else */
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_hello_short_id(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Hello h;
	uint8_t id[ID_LEN], ch[CHALLENGE_LEN];

	make_hello(&m, &h, id, ch);
	h.instance_id.len = 3;
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_hello_short_challenge(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Hello h;
	uint8_t id[ID_LEN], ch[CHALLENGE_LEN];

	make_hello(&m, &h, id, ch);
	h.challenge.len = 5;
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_hello_with_payload(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Hello h;
	uint8_t id[ID_LEN], ch[CHALLENGE_LEN], payload[64] = { 0 };

	make_hello(&m, &h, id, ch);
	return send_then_closed(fd, send_msg(fd, &m, payload, sizeof(payload)),
				how, howlen);
}

static void make_write(Xfer__Peer__PeerMsg *m, Xfer__Peer__WriteChunk *w,
		       Xfer__Peer__Target *t, uint8_t key[TOKEN_KEY_LEN],
		       uint64_t op)
{
	*t = (Xfer__Peer__Target)XFER__PEER__TARGET__INIT;
	*w = (Xfer__Peer__WriteChunk)XFER__PEER__WRITE_CHUNK__INIT;
	if (have_token) {
		memcpy(key, tok.key, TOKEN_KEY_LEN);
		t->region = tok.region;
		t->offset = tok.offset;
		t->length = tok.length;
		t->region_length = tok.region_length;
		t->mem_kind = tok.mem_kind;
	} else {
		random_bytes(key, TOKEN_KEY_LEN);
		t->region = 1;
		t->length = 4096;
		t->region_length = 4096;
	}
	t->key = (ProtobufCBinaryData){ TOKEN_KEY_LEN, key };
	w->op = op;
	w->target = t;
	w->last = true;
	msg_init(m);
	m->body_case = XFER__PEER__PEER_MSG__BODY_WRITE;
	m->write = w;
}

static bool case_write_before_hello(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	uint8_t key[TOKEN_KEY_LEN], payload[16];

	memset(payload, 0xaa, sizeof(payload));
	make_write(&m, &w, &t, key, 1);
	w.total = sizeof(payload);
	return send_then_closed(fd, send_msg(fd, &m, payload, sizeof(payload)),
				how, howlen);
}

static bool case_established_first(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Established e = XFER__PEER__ESTABLISHED__INIT;

	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_ESTABLISHED;
	m.established = &e;
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_ready_first(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Ready r = XFER__PEER__READY__INIT;

	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_READY;
	m.ready = &r;
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_truncated(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Hello h;
	uint8_t id[ID_LEN], ch[CHALLENGE_LEN], *hdr;

	make_hello(&m, &h, id, ch);
	size_t hlen = pack_msg(&m, &hdr);
	/* The whole length prefix, half the header, then our end closes. */
	int rc = send_frame_raw(fd, (uint32_t)hlen, 0, hdr, hlen / 2, NULL, 0);
	free(hdr);
	if (rc == 0)
		shutdown(fd, SHUT_WR);
	return send_then_closed(fd, rc, how, howlen);
}

static bool case_silent(int fd, char *how, size_t howlen)
{
	/* Nothing at all: the handshake must time out on the daemon's side,
	 * or idle connections would pile up. */
	return expect_closed(fd, opt.silent_ms, how, howlen);
}

/* --- after the handshake --- */

static bool established(int fd)
{
	if (handshake(fd) == 0)
		return true;
	static const char prefix[] = "handshake failed: ";
	size_t n = strnlen(why, sizeof(why) - sizeof(prefix));
	memmove(why + sizeof(prefix) - 1, why, n);
	memcpy(why, prefix, sizeof(prefix) - 1);
	why[sizeof(prefix) - 1 + n] = '\0';
	return false;
}

/* A write the daemon must refuse by dropping the link. */
static bool write_dropped(int fd, Xfer__Peer__PeerMsg *m, const void *payload,
			  uint32_t plen, char *how, size_t howlen)
{
	return send_then_closed(fd, send_msg(fd, m, payload, plen), how, howlen);
}

static bool case_write_bad_key(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	uint8_t key[TOKEN_KEY_LEN], payload[16];

	if (!established(fd))
		return false;
	memset(payload, 0xaa, sizeof(payload));
	make_write(&m, &w, &t, key, 1);
	key[0] ^= 1;
	w.total = sizeof(payload);
	return write_dropped(fd, &m, payload, sizeof(payload), how, howlen);
}

static bool case_write_widened(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	uint8_t key[TOKEN_KEY_LEN], payload[16];

	if (!established(fd))
		return false;
	memset(payload, 0xaa, sizeof(payload));
	make_write(&m, &w, &t, key, 1);
	/* The token's own key over a range it does not grant. */
	if (t.offset > 0 || t.length < t.region_length) {
		t.offset = 0;
		t.length = t.region_length;
	} else {
		t.length += 4096;
		t.region_length += 4096;
	}
	w.total = sizeof(payload);
	return write_dropped(fd, &m, payload, sizeof(payload), how, howlen);
}

static bool case_write_out_of_bounds(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	uint8_t key[TOKEN_KEY_LEN], payload[16];

	if (!established(fd))
		return false;
	memset(payload, 0xaa, sizeof(payload));
	make_write(&m, &w, &t, key, 1);
	w.at = t.length + 4096;
	w.total = sizeof(payload);
	return write_dropped(fd, &m, payload, sizeof(payload), how, howlen);
}

static bool case_write_at_wraps(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	uint8_t key[TOKEN_KEY_LEN], payload[16];

	if (!established(fd))
		return false;
	memset(payload, 0xaa, sizeof(payload));
	make_write(&m, &w, &t, key, 1);
	/* at + length overflows to a small number. */
	w.at = UINT64_MAX - 7;
	w.total = sizeof(payload);
	return write_dropped(fd, &m, payload, sizeof(payload), how, howlen);
}

static bool case_write_past_range(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	uint8_t key[TOKEN_KEY_LEN], payload[64];

	if (!established(fd))
		return false;
	memset(payload, 0xaa, sizeof(payload));
	make_write(&m, &w, &t, key, 1);
	/* Starts inside the token's range, its payload runs past the end. */
	w.at = t.length >= 16 ? t.length - 16 : 0;
	w.total = sizeof(payload);
	return write_dropped(fd, &m, payload, sizeof(payload), how, howlen);
}

/*
 * Read [at, at + len) of the token's range over the established link fd
 * (a legitimate ReadRequest).  0, or -1 with `why`.
 */
static int read_range(int fd, uint64_t at, uint8_t *buf, uint32_t len)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	Xfer__Peer__ReadRequest rr = XFER__PEER__READ_REQUEST__INIT;
	uint8_t key[TOKEN_KEY_LEN];
	uint64_t deadline = now_ms() + (uint64_t)opt.deadline_ms;
	uint32_t got = 0;

	make_write(&m, &w, &t, key, 0);
	rr.op = 11;
	rr.source = &t;
	rr.at = at;
	rr.length = len;
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_READ;
	m.read = &rr;
	if (send_msg(fd, &m, NULL, 0)) {
		set_why("the link was closed");
		return -1;
	}
	while (got < len) {
		uint8_t prefix[FRAME_PREFIX], hdr[1024];
		int rc = recv_exact(fd, prefix, sizeof(prefix), deadline);
		if (rc <= 0) {
			set_why("reading the range back: %s",
				rc ? strerror(-rc) : "closed");
			return -1;
		}
		uint32_t hlen = (uint32_t)prefix[0] | (uint32_t)prefix[1] << 8 |
				(uint32_t)prefix[2] << 16 | (uint32_t)prefix[3] << 24;
		uint32_t plen = (uint32_t)prefix[4] | (uint32_t)prefix[5] << 8 |
				(uint32_t)prefix[6] << 16 | (uint32_t)prefix[7] << 24;
		if (hlen == 0 || hlen > sizeof(hdr) ||
		    recv_exact(fd, hdr, hlen, deadline) <= 0) {
			set_why("reading the range back: a bad frame");
			return -1;
		}
		Xfer__Peer__PeerMsg *r = xfer__peer__peer_msg__unpack(NULL, hlen, hdr);
		bool data = r && r->body_case == XFER__PEER__PEER_MSG__BODY_READ_DATA &&
			    r->read_data->op == 11 && r->read_data->result >= 0 &&
			    r->read_data->at == got && plen <= len - got;
		bool ping = r && r->body_case == XFER__PEER__PEER_MSG__BODY_PING;
		if (ping)
			answer_ping(fd, r);
		if (r)
			xfer__peer__peer_msg__free_unpacked(r, NULL);
		if (ping && plen == 0)
			continue;
		if (!data || recv_exact(fd, buf + got, plen, deadline) <= 0) {
			set_why("reading the range back: no ReadData for it");
			return -1;
		}
		got += plen;
	}
	return 0;
}

/* The op claims 16 bytes in all, its only chunk brings 64: it must not
 * succeed (a dropped link or a failed acknowledgement).  The 64 bytes
 * are those already there (read first), so the region stays as it was
 * whether or not they were written. */
static bool case_write_past_total(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	uint8_t key[TOKEN_KEY_LEN], payload[64];

	if (!established(fd))
		return false;
	if (tok.length < sizeof(payload)) {
		snprintf(how, howlen, "not run: the token grants under 64 bytes");
		return true;
	}
	if (read_range(fd, 0, payload, sizeof(payload)))
		return false;
	make_write(&m, &w, &t, key, 7);
	w.at = 0;
	w.total = 16;
	int rc = send_msg(fd, &m, payload, sizeof(payload));
	if (rc)
		return send_then_closed(fd, rc, how, howlen);
	Xfer__Peer__PeerMsg *r = expect_msg(fd, XFER__PEER__PEER_MSG__BODY_WRITE_ACK,
					    "WriteAck");
	if (!r) {
		/* Closed instead of answering: also a refusal. */
		if (strncmp(why, "closed", 6) == 0) {
			snprintf(how, howlen, "closed");
			return true;
		}
		return false;
	}
	bool ok = r->write_ack->op == 7 && r->write_ack->result < 0;
	if (ok)
		snprintf(how, howlen, "WriteAck %" PRId64, r->write_ack->result);
	else
		set_why("WriteAck op %" PRIu64 " result %" PRId64
			": a payload longer than the op was accepted",
			r->write_ack->op, r->write_ack->result);
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	return ok;
}

static bool case_write_no_region(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	uint8_t key[TOKEN_KEY_LEN], payload[16];

	if (!established(fd))
		return false;
	memset(payload, 0xaa, sizeof(payload));
	make_write(&m, &w, &t, key, 42);
	t.region = 0x7ffffffffff1ull;   /* no such region */
	w.total = sizeof(payload);
	if (send_msg(fd, &m, payload, sizeof(payload))) {
		set_why("the link was closed (a region that is gone fails the "
			"operation, not the link)");
		return false;
	}
	/* proto/peer.proto: an error for that operation only. */
	Xfer__Peer__PeerMsg *r = expect_msg(fd, XFER__PEER__PEER_MSG__BODY_WRITE_ACK,
					    "WriteAck -ESTALE");
	if (!r)
		return false;
	bool ok = r->write_ack->op == 42 && r->write_ack->result == -ESTALE;
	if (!ok)
		set_why("WriteAck op %" PRIu64 " result %" PRId64 ", want op 42 -ESTALE",
			r->write_ack->op, r->write_ack->result);
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	if (!ok)
		return false;
	if (link_answers(fd))
		return false;
	snprintf(how, howlen, "WriteAck -ESTALE, the link still answers a Ping");
	return true;
}

/* CheckToken is a question: a wrong answer is an answer, not a reason
 * to drop the link. */
static bool check_token(int fd, bool missing_region, int want, char *how,
			size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	Xfer__Peer__CheckToken ct = XFER__PEER__CHECK_TOKEN__INIT;
	uint8_t key[TOKEN_KEY_LEN];

	if (!established(fd))
		return false;
	make_write(&m, &w, &t, key, 0);
	if (missing_region)
		t.region = 0x7ffffffffff3ull;
	else
		key[5] ^= 0x10;
	ct.id = 99;
	ct.target = &t;
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_CHECK;
	m.check = &ct;
	if (send_msg(fd, &m, NULL, 0)) {
		set_why("the link was closed");
		return false;
	}
	Xfer__Peer__PeerMsg *r = expect_msg(fd, XFER__PEER__PEER_MSG__BODY_CHECK_REPLY,
					    "CheckReply");
	if (!r)
		return false;
	bool ok = r->check_reply->id == 99 && r->check_reply->error == want;
	if (!ok)
		set_why("CheckReply id %" PRIu64 " error %d, want id 99 error %d",
			r->check_reply->id, r->check_reply->error, want);
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	if (!ok || link_answers(fd))
		return false;
	snprintf(how, howlen, "CheckReply %d, the link still answers a Ping", want);
	return true;
}

static bool case_check_bad_key(int fd, char *how, size_t howlen)
{
	return check_token(fd, false, -EACCES, how, howlen);
}

static bool case_check_no_region(int fd, char *how, size_t howlen)
{
	return check_token(fd, true, -ESTALE, how, howlen);
}

static bool case_read_bad_key(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	Xfer__Peer__ReadRequest rr = XFER__PEER__READ_REQUEST__INIT;
	uint8_t key[TOKEN_KEY_LEN];

	if (!established(fd))
		return false;
	make_write(&m, &w, &t, key, 0);
	key[15] ^= 0x80;
	rr.op = 5;
	rr.source = &t;
	rr.length = 16;
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_READ;
	m.read = &rr;
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_read_past_range(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	Xfer__Peer__ReadRequest rr = XFER__PEER__READ_REQUEST__INIT;
	uint8_t key[TOKEN_KEY_LEN];

	if (!established(fd))
		return false;
	make_write(&m, &w, &t, key, 0);
	rr.op = 6;
	rr.source = &t;
	rr.at = t.length >= 16 ? t.length - 16 : 0;
	rr.length = 4096;
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_READ;
	m.read = &rr;
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_notify_bad_key(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	Xfer__Peer__Notify n = XFER__PEER__NOTIFY__INIT;
	uint8_t key[TOKEN_KEY_LEN];

	if (!established(fd))
		return false;
	make_write(&m, &w, &t, key, 0);
	key[8] ^= 0x01;
	n.op = 8;
	n.target = &t;
	n.value = 0xbad;
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_NOTIFY;
	m.notify = &n;
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_lookup_unknown(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Lookup l = XFER__PEER__LOOKUP__INIT;

	if (!established(fd))
		return false;
	l.id = 77;
	l.name = (char *)"peer-fuzz.no-such-name";
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_LOOKUP;
	m.lookup = &l;
	if (send_msg(fd, &m, NULL, 0)) {
		set_why("the link was closed");
		return false;
	}
	Xfer__Peer__PeerMsg *r = expect_msg(fd, XFER__PEER__PEER_MSG__BODY_LOOKUP_REPLY,
					    "LookupReply");
	if (!r)
		return false;
	bool ok = r->lookup_reply->id == 77 &&
		  r->lookup_reply->error == -ENOENT;
	if (!ok)
		set_why("LookupReply id %" PRIu64 " error %d, want id 77 -ENOENT",
			r->lookup_reply->id, r->lookup_reply->error);
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	if (!ok || link_answers(fd))
		return false;
	snprintf(how, howlen, "LookupReply -ENOENT, the link still answers a Ping");
	return true;
}

static bool case_hello_again(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Hello h;
	uint8_t id[ID_LEN], ch[CHALLENGE_LEN];

	if (!established(fd))
		return false;
	make_hello(&m, &h, id, ch);
	return send_then_closed(fd, send_msg(fd, &m, NULL, 0), how, howlen);
}

static bool case_huge_after_handshake(int fd, char *how, size_t howlen)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__WriteChunk w;
	Xfer__Peer__Target t;
	uint8_t key[TOKEN_KEY_LEN], *hdr, chunk[4096] = { 0 };

	if (!established(fd))
		return false;
	make_write(&m, &w, &t, key, 3);
	w.total = 1u << 30;
	size_t hlen = pack_msg(&m, &hdr);
	int rc = send_frame_raw(fd, (uint32_t)hlen, 1u << 30, hdr, hlen, chunk,
				sizeof(chunk));
	free(hdr);
	return send_then_closed(fd, rc, how, howlen);
}

/* --- the latency lane (transport/link_lane.c) --- */

#define LANE_SECRET_LEN 16

/* A link whose Hello said lanes, up to the daemon's LaneOffer: its
 * instance id and the offer's secret.  0 or -1 with `why`. */
struct lane_link {
	int fd;
	uint8_t id[ID_LEN], secret[LANE_SECRET_LEN];
};

static int lane_link_open(struct lane_link *k)
{
	Xfer__Peer__PeerMsg m, *r;
	Xfer__Peer__Hello h;
	Xfer__Peer__Ready ready = XFER__PEER__READY__INIT;
	uint8_t challenge[CHALLENGE_LEN];

	if ((k->fd = conn_open()) < 0)
		return -1;
	make_hello(&m, &h, k->id, challenge);
	h.lanes = true;
	if (send_msg(k->fd, &m, NULL, 0) ||
	    !(r = expect_msg(k->fd, XFER__PEER__PEER_MSG__BODY_WELCOME,
			     "Welcome")))
		return -1;
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_READY;
	m.ready = &ready;
	if (send_msg(k->fd, &m, NULL, 0) ||
	    !(r = expect_msg(k->fd, XFER__PEER__PEER_MSG__BODY_ESTABLISHED,
			     "Established")))
		return -1;
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	if (!(r = expect_msg(k->fd, XFER__PEER__PEER_MSG__BODY_LANE_OFFER,
			     "LaneOffer")))
		return -1;
	bool ok = r->lane_offer->secret.len == LANE_SECRET_LEN;
	if (ok)
		memcpy(k->secret, r->lane_offer->secret.data, LANE_SECRET_LEN);
	else
		set_why("LaneOffer with a %zu-byte secret",
			r->lane_offer->secret.len);
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	return ok ? 0 : -1;
}

static void lane_link_close(struct lane_link *k)
{
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
}

static int send_lane_hello(int fd, const uint8_t id[ID_LEN],
			   const uint8_t secret[LANE_SECRET_LEN])
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__LaneHello h = XFER__PEER__LANE_HELLO__INIT;

	h.instance_id = (ProtobufCBinaryData){ ID_LEN, (uint8_t *)id };
	h.secret = (ProtobufCBinaryData){ LANE_SECRET_LEN, (uint8_t *)secret };
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_LANE_HELLO;
	m.lane_hello = &h;
	return send_msg(fd, &m, NULL, 0);
}

/* A lane for k with secret: its socket once LaneReady came, or -1. */
static int lane_dial(const struct lane_link *k, const uint8_t *secret)
{
	int fd = conn_open();
	Xfer__Peer__PeerMsg *r;

	if (fd < 0)
		return -1;
	if (send_lane_hello(fd, k->id, secret) ||
	    !(r = expect_msg(fd, XFER__PEER__PEER_MSG__BODY_LANE_READY,
			     "LaneReady"))) {
		close(fd);
		return -1;
	}
	xfer__peer__peer_msg__free_unpacked(r, NULL);
	return fd;
}

/* A link whose lane is offered, and its lane dialed with the offer's
 * secret: the lane's fd, or -1. */
static int lane_link_dialed(struct lane_link *k)
{
	return lane_link_open(k) ? -1 : lane_dial(k, k->secret);
}

/* A LaneHello on a fresh connection that must be closed. */
static bool lane_hello_refused(const uint8_t *id, const uint8_t *secret,
			       char *how, size_t howlen)
{
	int fd = conn_open();

	if (fd < 0)
		return false;
	bool ok = send_then_closed(fd, send_lane_hello(fd, id, secret), how,
				   howlen);
	close(fd);
	return ok;
}

/* Both the link and its lane answer a Ping (the lane: -1 none). */
static bool lane_and_link_answer(const struct lane_link *k, int lane)
{
	if (link_answers(k->fd)) {
		snprintf(why + strlen(why), sizeof(why) - strlen(why),
			 " (on the link)");
		return false;
	}
	if (lane >= 0 && link_answers(lane)) {
		snprintf(why + strlen(why), sizeof(why) - strlen(why),
			 " (on the lane)");
		return false;
	}
	return true;
}

/* The lane taken, its LaneHello again (a replay) is closed; the lane and
 * the link stay. */
static bool case_lane_replay(int fd, char *how, size_t howlen)
{
	struct lane_link k = { .fd = -1 };
	int lane = -1;
	bool ok = false;

	close(fd);
	if ((lane = lane_link_dialed(&k)) < 0)
		goto out;
	ok = lane_hello_refused(k.id, k.secret, how, howlen) &&
	     lane_and_link_answer(&k, lane);
out:
	if (lane >= 0)
		close(lane);
	lane_link_close(&k);
	return ok;
}

/* The secret of one link's offer, presented for another link: closed;
 * the offer stands (its own lane still comes). */
static bool case_lane_other_link(int fd, char *how, size_t howlen)
{
	struct lane_link k1 = { .fd = -1 }, k2 = { .fd = -1 };
	int lane = -1;
	bool ok = false;

	close(fd);
	if (lane_link_open(&k1) || lane_link_open(&k2))
		goto out;
	if (!lane_hello_refused(k1.id, k2.secret, how, howlen))
		goto out;
	if ((lane = lane_dial(&k1, k1.secret)) < 0)
		goto out;
	ok = lane_and_link_answer(&k1, lane) && lane_and_link_answer(&k2, -1);
out:
	if (lane >= 0)
		close(lane);
	lane_link_close(&k1);
	lane_link_close(&k2);
	return ok;
}

/* LaneReady on the link itself: the link is dropped. */
static bool case_lane_ready_on_link(int fd, char *how, size_t howlen)
{
	struct lane_link k = { .fd = -1 };
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__LaneReady r = XFER__PEER__LANE_READY__INIT;
	bool ok = false;

	close(fd);
	if (lane_link_open(&k) == 0) {
		msg_init(&m);
		m.body_case = XFER__PEER__PEER_MSG__BODY_LANE_READY;
		m.lane_ready = &r;
		ok = send_then_closed(k.fd, send_msg(k.fd, &m, NULL, 0), how,
				      howlen);
	}
	lane_link_close(&k);
	return ok;
}

static int send_lane_offer(int fd)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__LaneOffer o = XFER__PEER__LANE_OFFER__INIT;
	uint8_t secret[LANE_SECRET_LEN];

	random_bytes(secret, sizeof(secret));
	o.secret = (ProtobufCBinaryData){ sizeof(secret), secret };
	msg_init(&m);
	m.body_case = XFER__PEER__PEER_MSG__BODY_LANE_OFFER;
	m.lane_offer = &o;
	return send_msg(fd, &m, NULL, 0);
}

/* LaneOffers to the side that offers (three of them): ignored, the link
 * stays and the daemon dials nothing. */
static bool case_lane_offer_back(int fd, char *how, size_t howlen)
{
	struct lane_link k = { .fd = -1 };
	bool ok = false;

	close(fd);
	if (lane_link_open(&k) == 0 && !send_lane_offer(k.fd) &&
	    !send_lane_offer(k.fd) && !send_lane_offer(k.fd) &&
	    lane_and_link_answer(&k, -1)) {
		snprintf(how, howlen, "ignored, the link still answers a Ping");
		ok = true;
	}
	lane_link_close(&k);
	return ok;
}

/* Frames no lane may carry, on a ready lane: it is dropped, its link
 * stays.  which: 0 a LaneOffer, 1 a second LaneHello, 2 a Hello. */
static bool lane_wrong_frame(int which, char *how, size_t howlen)
{
	struct lane_link k = { .fd = -1 };
	int lane = -1, rc;
	bool ok = false;

	if ((lane = lane_link_dialed(&k)) < 0)
		goto out;
	if (which == 0) {
		rc = send_lane_offer(lane);
	} else if (which == 1) {
		rc = send_lane_hello(lane, k.id, k.secret);
	} else {
		Xfer__Peer__PeerMsg m;
		Xfer__Peer__Hello h;
		uint8_t id[ID_LEN], ch[CHALLENGE_LEN];
		make_hello(&m, &h, id, ch);
		rc = send_msg(lane, &m, NULL, 0);
	}
	ok = send_then_closed(lane, rc, how, howlen) &&
	     lane_and_link_answer(&k, -1);
out:
	if (lane >= 0)
		close(lane);
	lane_link_close(&k);
	return ok;
}

static bool case_lane_offer_on_lane(int fd, char *how, size_t howlen)
{
	close(fd);
	return lane_wrong_frame(0, how, howlen);
}

static bool case_lane_hello_on_lane(int fd, char *how, size_t howlen)
{
	close(fd);
	return lane_wrong_frame(1, how, howlen);
}

static bool case_lane_hello_frame(int fd, char *how, size_t howlen)
{
	close(fd);
	return lane_wrong_frame(2, how, howlen);
}

/* The link closed: its lane is closed by the daemon too. */
static bool case_lane_link_dies(int fd, char *how, size_t howlen)
{
	struct lane_link k = { .fd = -1 };
	int lane = -1;
	bool ok = false;

	close(fd);
	if ((lane = lane_link_dialed(&k)) >= 0) {
		lane_link_close(&k);
		ok = closes(lane, how, howlen);
	}
	if (lane >= 0)
		close(lane);
	lane_link_close(&k);
	return ok;
}

/* The lane closed (then half-closed, on a second link): the link stays. */
static bool case_lane_closed(int fd, char *how, size_t howlen)
{
	struct lane_link k = { .fd = -1 };
	int lane = -1;
	bool ok = false;

	close(fd);
	if ((lane = lane_link_dialed(&k)) < 0)
		goto out;
	close(lane);
	lane = -1;
	if (!lane_and_link_answer(&k, -1))
		goto out;
	lane_link_close(&k);
	if ((lane = lane_link_dialed(&k)) < 0)
		goto out;
	shutdown(lane, SHUT_WR);
	ok = closes(lane, how, howlen) && lane_and_link_answer(&k, -1);
out:
	if (lane >= 0)
		close(lane);
	lane_link_close(&k);
	return ok;
}

/* How many descriptors xferd holds (--pid), or -1. */
static int daemon_fds(void)
{
	char line[64];
	int n = -1;

	snprintf(line, sizeof(line), "ls /proc/%d/fd | wc -l", (int)opt.pid);
	FILE *p = opt.pid > 0 ? popen(line, "r") : NULL;
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

/* Many LaneHellos with wrong secrets for a live link (guessing): each
 * closed; xferd holds no more descriptors after than before; the offer
 * still stands. */
#define LANE_GUESSES 300
static bool case_lane_guessing(int fd, char *how, size_t howlen)
{
	struct lane_link k = { .fd = -1 };
	int lane = -1, before, after = -1, fds[LANE_GUESSES];
	unsigned closed = 0;
	bool ok = false;

	close(fd);
	for (int i = 0; i < LANE_GUESSES; i++)
		fds[i] = -1;
	if (lane_link_open(&k))
		goto out;
	before = daemon_fds();
	for (int i = 0; i < LANE_GUESSES; i++) {
		uint8_t guess[LANE_SECRET_LEN];
		random_bytes(guess, sizeof(guess));
		if ((fds[i] = conn_open()) < 0 ||
		    send_lane_hello(fds[i], k.id, guess))
			goto out;
	}
	for (int i = 0; i < LANE_GUESSES; i++) {
		char h[256];
		closed += expect_closed(fds[i], opt.deadline_ms, h, sizeof(h));
		close(fds[i]);
		fds[i] = -1;
	}
	if (closed != LANE_GUESSES) {
		set_why("%u of %d guesses closed", closed, LANE_GUESSES);
		goto out;
	}
	for (int tries = 0; tries < 50; tries++) {
		after = daemon_fds();
		if (after <= before)
			break;
		usleep(100000);
	}
	if (after > before) {
		set_why("xferd holds %d descriptors after the guesses, %d before",
			after, before);
		goto out;
	}
	if ((lane = lane_dial(&k, k.secret)) < 0 ||
	    !lane_and_link_answer(&k, lane))
		goto out;
	snprintf(how, howlen, "%d guesses closed, descriptors %d -> %d, the "
		 "lane still comes", LANE_GUESSES, before, after);
	ok = true;
out:
	for (int i = 0; i < LANE_GUESSES; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (lane >= 0)
		close(lane);
	lane_link_close(&k);
	return ok;
}

static const struct fuzz_case cases[] = {
	{ "garbage-http", "an HTTP request instead of frames", false,
	  case_garbage_http },
	{ "garbage-random", "512 random bytes", false, case_garbage_random },
	{ "header-len-max", "header_len 0xFFFFFFFF", false, case_header_len_max },
	{ "header-len-zero", "header_len 0", false, case_header_len_zero },
	{ "payload-1g", "a Hello announcing a 1 GiB payload", false,
	  case_payload_1g },
	{ "header-unparsable", "a header that is not a PeerMsg", false,
	  case_header_unparsable },
	{ "wrong-version", "a Hello with proto_version + 9999", false,
	  case_wrong_version },
	{ "version-zero", "a Hello without proto_version", false,
	  case_version_zero },
	{ "unknown-body", "a PeerMsg with an unknown oneof case (field 99)",
	  false, case_unknown_body },
	{ "no-body", "a PeerMsg with no body at all", false, case_no_body },
	{ "hello-short-id", "a Hello with a 3-byte instance id", false,
	  case_hello_short_id },
	{ "hello-short-challenge", "a Hello with a 5-byte challenge", false,
	  case_hello_short_challenge },
	{ "hello-with-payload", "a Hello carrying a payload", false,
	  case_hello_with_payload },
	{ "write-before-hello", "a WriteChunk before any handshake", false,
	  case_write_before_hello },
	{ "established-first", "the acceptor's Established as a first frame",
	  false, case_established_first },
	{ "ready-first", "a Ready before any Hello", false, case_ready_first },
	{ "truncated", "half a Hello, then our end closes", false,
	  case_truncated },
	{ "silent", "a connection that never says anything", false,
	  case_silent },
	{ "hello-again", "a second Hello on an established link", false,
	  case_hello_again },
	{ "huge-after-handshake", "a WriteChunk announcing 1 GiB of payload",
	  false, case_huge_after_handshake },
	{ "write-no-region", "a WriteChunk for a region that does not exist",
	  false, case_write_no_region },
	{ "check-no-region", "CheckToken for a region that does not exist",
	  false, case_check_no_region },
	{ "lookup-unknown", "Lookup of a name nobody published", false,
	  case_lookup_unknown },
	{ "write-bad-key", "a WriteChunk with a wrong key", true,
	  case_write_bad_key },
	{ "write-widened", "the token's key over a wider range", true,
	  case_write_widened },
	{ "write-out-of-bounds", "a WriteChunk beyond the token's range", true,
	  case_write_out_of_bounds },
	{ "write-at-wraps", "a WriteChunk whose at + length wraps around",
	  true, case_write_at_wraps },
	{ "write-past-range", "a payload running past the token's range", true,
	  case_write_past_range },
	{ "write-past-total", "a payload longer than the op's total", true,
	  case_write_past_total },
	{ "check-bad-key", "CheckToken with a wrong key", true,
	  case_check_bad_key },
	{ "read-bad-key", "a ReadRequest with a wrong key", true,
	  case_read_bad_key },
	{ "read-past-range", "a ReadRequest past the token's range", true,
	  case_read_past_range },
	{ "notify-bad-key", "a Notify with a wrong key", true,
	  case_notify_bad_key },
	{ "lane-replay", "a lane's LaneHello again once the lane is up",
	  false, case_lane_replay },
	{ "lane-other-link", "one link's lane secret for another link", false,
	  case_lane_other_link },
	{ "lane-ready-on-link", "LaneReady on the link itself", false,
	  case_lane_ready_on_link },
	{ "lane-offer-back", "LaneOffers to the side that offers", false,
	  case_lane_offer_back },
	{ "lane-offer-on-lane", "a LaneOffer on a ready lane", false,
	  case_lane_offer_on_lane },
	{ "lane-hello-on-lane", "a second LaneHello on a ready lane", false,
	  case_lane_hello_on_lane },
	{ "lane-hello-frame", "a Hello on a ready lane", false,
	  case_lane_hello_frame },
	{ "lane-link-dies", "the link closed while its lane is up", false,
	  case_lane_link_dies },
	{ "lane-closed", "the lane closed, then half-closed", false,
	  case_lane_closed },
	{ "lane-guessing", "300 LaneHellos with wrong secrets", false,
	  case_lane_guessing },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* --- main --- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: peer_fuzz --connect HOST:PORT [--token-file F] [--pid PID]\n"
		"                 [--deadline-ms MS] [--silent-ms MS] [--case NAME]... [--list]\n"
		"  --connect HOST:PORT  the xferd to attack (its peer port)\n"
		"  --token-file F       a token of a region on it: enables the cases that\n"
		"                       need a real region (bad key, out of range, ...)\n"
		"  --pid PID            also check that this process stays alive\n"
		"  --deadline-ms MS     how soon the daemon must close or answer (5000)\n"
		"  --silent-ms MS       how soon it must drop a silent connection (15000)\n"
		"  --case NAME          run only these cases (repeatable)\n"
		"  --list               list the cases\n");
}

static void usage_error(const char *msg, const char *arg)
{
	fprintf(stderr, "peer_fuzz: %s%s%s\n", msg, arg ? ": " : "",
		arg ? arg : "");
	usage(stderr);
	exit(2);
}

static int parse_ms(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || end == s || v <= 0 || v > 3600000)
		usage_error("not a number of milliseconds", s);
	return (int)v;
}

static void load_token(const char *path)
{
	uint8_t buf[4096];
	FILE *f = fopen(path, "re");

	if (!f) {
		fprintf(stderr, "peer_fuzz: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (token_decode(buf, n, &tok)) {
		fprintf(stderr, "peer_fuzz: %s is not a token\n", path);
		exit(2);
	}
	have_token = true;
}

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "connect", required_argument, NULL, 'c' },
		{ "token-file", required_argument, NULL, 't' },
		{ "pid", required_argument, NULL, 'p' },
		{ "deadline-ms", required_argument, NULL, 'd' },
		{ "silent-ms", required_argument, NULL, 's' },
		{ "case", required_argument, NULL, 'C' },
		{ "list", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static char hostbuf[256];
	int ch;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': {
			const char *colon = strrchr(optarg, ':');
			if (!colon || colon == optarg || !colon[1] ||
			    (size_t)(colon - optarg) >= sizeof(hostbuf))
				usage_error("--connect wants HOST:PORT", optarg);
			memcpy(hostbuf, optarg, (size_t)(colon - optarg));
			hostbuf[colon - optarg] = '\0';
			/* "[v6]:port" */
			if (hostbuf[0] == '[') {
				size_t n = strlen(hostbuf);
				if (hostbuf[n - 1] != ']')
					usage_error("--connect wants HOST:PORT", optarg);
				hostbuf[n - 1] = '\0';
				memmove(hostbuf, hostbuf + 1, n - 1);
			}
			opt.host = hostbuf;
			opt.port = colon + 1;
			break;
		}
		case 't': opt.token_file = optarg; break;
		case 'p': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v <= 0 || v > INT32_MAX)
				usage_error("--pid wants a process id", optarg);
			opt.pid = (pid_t)v;
			break;
		}
		case 'd': opt.deadline_ms = parse_ms(optarg); break;
		case 's': opt.silent_ms = parse_ms(optarg); break;
		case 'C': {
			bool known = false;
			for (size_t i = 0; i < NCASES; i++)
				known |= strcmp(cases[i].name, optarg) == 0;
			if (!known)
				usage_error("no such case", optarg);
			if (opt.nonly == MAX_CASES)
				usage_error("too many --case", NULL);
			opt.only[opt.nonly++] = optarg;
			break;
		}
		case 'l':
			for (size_t i = 0; i < NCASES; i++)
				printf("%-22s %s%s\n", cases[i].name, cases[i].what,
				       cases[i].needs_token ? " (needs --token-file)" : "");
			exit(0);
		case 'h': usage(stdout); exit(0);
		default: usage_error("bad option", NULL);
		}
	}
	if (optind != argc)
		usage_error("unexpected argument", argv[optind]);
	if (!opt.host)
		usage_error("--connect HOST:PORT is required", NULL);
	if (opt.token_file)
		load_token(opt.token_file);
}

static bool selected(const char *name)
{
	if (!opt.nonly)
		return true;
	for (unsigned i = 0; i < opt.nonly; i++)
		if (strcmp(opt.only[i], name) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	unsigned ran = 0, failed = 0, skipped = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	parse_args(argc, argv);

	if (alive_check()) {
		printf("FAIL before any case: a well-behaved peer cannot "
		       "complete the handshake: %s\n", why);
		return 1;
	}
	printf("ok   handshake: Hello -> Welcome -> Ready -> Established with %s:%s\n",
	       opt.host, opt.port);
	for (size_t i = 0; i < NCASES; i++) {
		const struct fuzz_case *c = &cases[i];
		char how[512] = "";

		if (!selected(c->name))
			continue;
		if (c->needs_token && !have_token) {
			printf("skip %s: needs --token-file\n", c->name);
			skipped++;
			continue;
		}
		ran++;
		why[0] = '\0';
		int fd = conn_open();
		if (fd < 0) {
			printf("FAIL %s: %s\n", c->name, why);
			failed++;
			continue;
		}
		bool ok = c->run(fd, how, sizeof(how));
		close(fd);
		if (!ok) {
			printf("FAIL %s (%s): %s\n", c->name, c->what, why);
			failed++;
		}
		if (alive_check()) {
			printf("FAIL %s: the daemon is not well afterwards: %s\n",
			       c->name, why);
			failed++;
			/* Later cases would only repeat this. */
			break;
		}
		if (ok)
			printf("ok   %s (%s): %s; still serves handshakes\n",
			       c->name, c->what, how);
	}
	printf("peer_fuzz: %u case(s) run, %u failed, %u skipped\n", ran, failed,
	       skipped);
	return failed ? 1 : 0;
}
