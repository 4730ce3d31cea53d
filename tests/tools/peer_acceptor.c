/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_acceptor.c - a hostile acceptor: it listens where xferd dials
 * another xferd (a `peer =` line, a token's address, a lookup's
 * host:port, the lane of a link it dialed) and answers every connection
 * the way one case says.
 *
 *   peer_acceptor --listen ADDR:PORT --case NAME [--token-out FILE]
 *                 [--node NAME] [--list]
 *
 * It runs until it is killed, one connection at a time, and prints a
 * line per connection ("conn N NAME: what happened") so that the test
 * driving it (tests/integration/netns_acceptor.sh) knows the case ran.
 *
 * The valid parts are real (proto/peer.proto, as daemon/peer/handshake.c
 * speaks it without a cluster key): a Welcome with its own instance id,
 * node name and listening address, Established after the dialer's Ready,
 * Pongs to its keepalives, LookupReply and CheckReply where a case
 * answers them.  --token-out writes a token of another instance (random)
 * at the listening address: importing it makes xferd dial here
 * expecting that instance, which case other-instance is not.  The
 * token a case serves in a LookupReply (flood) is of this acceptor's
 * own instance, so that the dialer's import checks it here and its
 * write goes on the link, where nothing ever acknowledges it.
 *
 * Exit 0 when killed by SIGTERM or SIGINT, 1 on a failure of its own
 * (cannot listen), 2 on usage errors.  Single-threaded; poll() only.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "peer.pb-c.h"
#include "common/token_codec.h"
#include "peer_wire.h"

#define STEP_MS        5000         /* the dialer's next frame, at most */
#define HOLD_MS        60000        /* a connection kept, at most */
#define FLOOD_BURST    64           /* frames between two looks at input */
#define LANE_SECRET    16

static struct {
	const char *name;
	struct sockaddr_in addr;
	const char *token_out;
	const char *node;
} opt = { .node = "hostile" };

static volatile sig_atomic_t stop;
static uint8_t self_id[ID_LEN];     /* the instance this acceptor says it is */
static unsigned nconn;

/* --- what a case does with one connection --- */

enum after_hs { AFTER_SERVE, AFTER_FLOOD, AFTER_LANE_NOWHERE,
		AFTER_LANE_SILENT, AFTER_LANE_GARBAGE };

struct hostile_case {
	const char *name;
	const char *what;
	void (*run)(int fd, int *lfd, char *said, size_t len);
};

static void say(char *said, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(char *said, size_t len, const char *fmt, ...)
{
	va_list ap;
	size_t n = strlen(said);

	if (n >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(said + n, len - n, fmt, ap);
	va_end(ap);
}

/* Read what the dialer sends until it closes (or HOLD_MS); ms it took. */
static uint64_t drain_until_closed(int fd)
{
	uint64_t t0 = now_ms();
	char sink[4096];

	while (!stop && now_ms() - t0 < HOLD_MS) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int rc = poll(&p, 1, 200);
		if (rc < 0 && errno != EINTR)
			break;
		if (rc <= 0)
			continue;
		ssize_t n = recv(fd, sink, sizeof(sink), 0);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			break;
	}
	return now_ms() - t0;
}

/* The dialer's Hello (the first frame): 0, or -1 with `why` set. */
static int read_hello(int fd, uint8_t their_id[ID_LEN])
{
	Xfer__Peer__PeerMsg *m = NULL;
	uint32_t plen;
	int rc = recv_msg(fd, now_ms() + STEP_MS, &m, &plen);

	if (rc <= 0) {
		if (rc == 0 || rc == -ETIMEDOUT)
			set_why("no Hello (%s)", rc ? "timed out" : "closed");
		return -1;
	}
	bool ok = m->body_case == XFER__PEER__PEER_MSG__BODY_HELLO &&
		  m->hello->instance_id.len == ID_LEN;
	if (ok)
		memcpy(their_id, m->hello->instance_id.data, ID_LEN);
	else
		set_why("first frame is message %d, not a Hello",
			(int)m->body_case);
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	return ok ? 0 : -1;
}

/* A Welcome as an xferd without a cluster key sends it, packed into
 * *out (malloc'd); id is the instance it claims to be. */
static size_t pack_welcome(const uint8_t id[ID_LEN], uint32_t version,
			   bool auth, uint8_t **out)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Welcome w = XFER__PEER__WELCOME__INIT;
	Xfer__Token__Address a = XFER__TOKEN__ADDRESS__INIT, *pa = &a;
	uint8_t challenge[CHALLENGE_LEN], proof[32];

	random_bytes(challenge, sizeof(challenge));
	a.ip.data = (uint8_t *)&opt.addr.sin_addr;
	a.ip.len = 4;
	a.prefix_len = 24;
	a.port = ntohs(opt.addr.sin_port);
	w.instance_id.data = (uint8_t *)id;
	w.instance_id.len = ID_LEN;
	w.node_name = (char *)opt.node;
	w.n_addresses = 1;
	w.addresses = &pa;
	w.challenge.data = challenge;
	w.challenge.len = CHALLENGE_LEN;
	if (auth) {
		/* It claims a cluster key, and proves nothing with it. */
		random_bytes(proof, sizeof(proof));
		w.auth = true;
		w.proof.data = proof;
		w.proof.len = sizeof(proof);
	}
	msg_init(&m);
	m.proto_version = version;
	m.body_case = XFER__PEER__PEER_MSG__BODY_WELCOME;
	m.welcome = &w;
	return pack_msg(&m, out);
}

static int send_welcome(int fd, const uint8_t id[ID_LEN], uint32_t version,
			bool auth)
{
	uint8_t *hdr;
	size_t n = pack_welcome(id, version, auth, &hdr);
	int rc = send_frame_raw(fd, (uint32_t)n, 0, hdr, n, NULL, 0);

	free(hdr);
	return rc;
}

static int send_error(int fd, bool duplicate)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Error e = XFER__PEER__ERROR__INIT;

	msg_init(&m);
	e.code = -EPERM;
	e.reason = duplicate ? "duplicate link" : "go away";
	e.duplicate_link = duplicate;
	m.body_case = XFER__PEER__PEER_MSG__BODY_ERROR;
	m.error = &e;
	return send_msg(fd, &m, NULL, 0);
}

/* Welcome (as id), the dialer's Ready, Established: the link is up on
 * the dialer's side.  0, or -1 with `why` set. */
static int handshake_as(int fd, const uint8_t id[ID_LEN])
{
	uint8_t their[ID_LEN];
	Xfer__Peer__PeerMsg *m = NULL, e_m;
	Xfer__Peer__Established est = XFER__PEER__ESTABLISHED__INIT;
	uint32_t plen;

	if (read_hello(fd, their) || send_welcome(fd, id, PROTO_VERSION, false))
		return -1;
	int rc = recv_msg(fd, now_ms() + STEP_MS, &m, &plen);
	if (rc <= 0) {
		set_why("no Ready after the Welcome (%s)",
			rc == 0 ? "closed" : strerror(-rc));
		return -1;
	}
	bool ready = m->body_case == XFER__PEER__PEER_MSG__BODY_READY;
	if (!ready)
		set_why("message %d after the Welcome, not Ready",
			(int)m->body_case);
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	if (!ready)
		return -1;
	msg_init(&e_m);
	e_m.body_case = XFER__PEER__PEER_MSG__BODY_ESTABLISHED;
	e_m.established = &est;
	return send_msg(fd, &e_m, NULL, 0) ? -1 : 0;
}

/* The token this acceptor serves (its own instance) or writes with
 * --token-out (another one): 1 MiB of host memory at the listening
 * address, under a key nobody checks. */
static size_t make_token(const uint8_t id[ID_LEN], uint8_t *buf, size_t len)
{
	struct token t = { .region = 1, .length = 1 << 20,
			   .region_length = 1 << 20, .naddrs = 1 };

	memcpy(t.instance_id, id, ID_LEN);
	random_bytes(t.key, sizeof(t.key));
	memcpy(t.addrs[0].ip, &opt.addr.sin_addr, 4);
	t.addrs[0].ip_len = 4;
	t.addrs[0].prefix_len = 24;
	t.addrs[0].port = ntohs(opt.addr.sin_port);
	snprintf(t.node_name, sizeof(t.node_name), "%s", opt.node);
	if (token_encode(&t, buf, &len)) {
		fprintf(stderr, "peer_acceptor: token_encode failed\n");
		exit(1);
	}
	return len;
}

/* One frame of the dialer's on an up link: keepalives answered; a
 * Lookup and a CheckToken answered when `answer` (the token of this
 * instance, yes), else left to the dialer's deadline; anything else
 * read and ignored.  1, 0 (closed) or -errno. */
static int serve_frame(int fd, bool answer, unsigned *lookups)
{
	Xfer__Peer__PeerMsg *m = NULL, r;
	Xfer__Peer__LookupReply lr = XFER__PEER__LOOKUP_REPLY__INIT;
	Xfer__Peer__CheckReply cr = XFER__PEER__CHECK_REPLY__INIT;
	uint8_t tokbuf[512];
	uint32_t plen;
	int rc = recv_msg(fd, now_ms() + STEP_MS, &m, &plen);

	if (rc <= 0)
		return rc;
	msg_init(&r);
	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_PING:
		answer_ping(fd, m);
		break;
	case XFER__PEER__PEER_MSG__BODY_LOOKUP:
		(*lookups)++;
		if (!answer)
			break;
		lr.id = m->lookup->id;
		lr.token.data = tokbuf;
		lr.token.len = make_token(self_id, tokbuf, sizeof(tokbuf));
		r.body_case = XFER__PEER__PEER_MSG__BODY_LOOKUP_REPLY;
		r.lookup_reply = &lr;
		send_msg(fd, &r, NULL, 0);
		break;
	case XFER__PEER__PEER_MSG__BODY_CHECK:
		if (!answer)
			break;
		cr.id = m->check->id;
		r.body_case = XFER__PEER__PEER_MSG__BODY_CHECK_REPLY;
		r.check_reply = &cr;
		send_msg(fd, &r, NULL, 0);
		break;
	default:
		break;    /* WriteChunk (its payload skipped), Abort, ... */
	}
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	return 1;
}

/* A burst of frames an honest peer sends, none of which the dialer
 * waits for: keepalives, acknowledgements of writes it never made,
 * replies to requests it never asked. */
static int flood_burst(int fd, uint64_t *sent)
{
	for (unsigned i = 0; i < FLOOD_BURST; i++) {
		Xfer__Peer__PeerMsg m;
		Xfer__Peer__Ping p = XFER__PEER__PING__INIT;
		Xfer__Peer__WriteAck a = XFER__PEER__WRITE_ACK__INIT;
		Xfer__Peer__LookupReply lr = XFER__PEER__LOOKUP_REPLY__INIT;

		msg_init(&m);
		switch (i % 3) {
		case 0:
			p.nonce = *sent + 1;
			p.sent_ns = *sent;
			m.body_case = XFER__PEER__PEER_MSG__BODY_PING;
			m.ping = &p;
			break;
		case 1:
			a.op = 0xdead0000u + *sent;
			a.result = 4096;
			m.body_case = XFER__PEER__PEER_MSG__BODY_WRITE_ACK;
			m.write_ack = &a;
			break;
		default:
			lr.id = 0xbeef0000u + *sent;
			lr.error = -ENOENT;
			m.body_case = XFER__PEER__PEER_MSG__BODY_LOOKUP_REPLY;
			m.lookup_reply = &lr;
			break;
		}
		int rc = send_msg(fd, &m, NULL, 0);
		if (rc)
			return rc;
		(*sent)++;
	}
	return 0;
}

static void lane_garbage(int lane)
{
	static const char junk[] = "\xff\xff\xff\x7f\x00\x00\x00\x00"
				   "SSH-2.0-not-a-lane\r\n";

	send_all(lane, junk, sizeof(junk) - 1);
}

/*
 * After a valid handshake: serve the link (keepalives, and lookups as
 * the mode says) until the dialer closes it or HOLD_MS.  The lane modes
 * offer a lane first; *lfd is the listener, which the lane dial reaches
 * (lane-silent, lane-garbage) or which is closed so that it leads
 * nowhere (lane-nowhere).
 */
static void serve_link(int fd, int *lfd, enum after_hs mode, char *said,
		       size_t len)
{
	uint64_t t0 = now_ms(), flooded = 0, lane_at = 0, lane_gone = 0;
	unsigned lookups = 0;
	int lane = -1;
	/* Lookups are answered where the link is to look healthy. */
	bool answer = mode != AFTER_SERVE;

	if (mode >= AFTER_LANE_NOWHERE) {
		Xfer__Peer__PeerMsg m;
		Xfer__Peer__LaneOffer o = XFER__PEER__LANE_OFFER__INIT;
		uint8_t secret[LANE_SECRET];

		random_bytes(secret, sizeof(secret));
		if (mode == AFTER_LANE_NOWHERE) {
			close(*lfd);    /* the lane's connect is refused */
			*lfd = -1;
		}
		msg_init(&m);
		o.secret.data = secret;
		o.secret.len = sizeof(secret);
		m.body_case = XFER__PEER__PEER_MSG__BODY_LANE_OFFER;
		m.lane_offer = &o;
		send_msg(fd, &m, NULL, 0);
		say(said, len, "lane offered; ");
		printf("lane offered\n");
	}
	while (!stop && now_ms() - t0 < HOLD_MS) {
		struct pollfd p[3] = {
			{ .fd = fd, .events = POLLIN |
				  (mode == AFTER_FLOOD ? POLLOUT : 0) },
			{ .fd = mode >= AFTER_LANE_SILENT && lane < 0 && !lane_at
					? *lfd : -1, .events = POLLIN },
			{ .fd = lane, .events = POLLIN },
		};
		int rc = poll(p, 3, 200);
		if (rc < 0 && errno != EINTR)
			break;
		if (rc <= 0)
			continue;
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (serve_frame(fd, answer, &lookups) <= 0)
				break;
		} else if ((p[0].revents & POLLOUT) && flood_burst(fd, &flooded))
			break;
		if (p[1].revents & POLLIN) {
			lane = accept4(*lfd, NULL, NULL, SOCK_CLOEXEC);
			if (lane >= 0) {
				lane_at = now_ms();
				printf("lane dialed\n");
				if (mode == AFTER_LANE_GARBAGE)
					lane_garbage(lane);
			}
		}
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			char sink[512];
			ssize_t n = recv(lane, sink, sizeof(sink), 0);
			if (n == 0 || (n < 0 && errno != EINTR)) {
				lane_gone = now_ms();
				printf("lane dropped by the dialer after %llu ms\n",
				       (unsigned long long)(lane_gone - lane_at));
				close(lane);
				lane = -1;
			}
		}
	}
	if (lane >= 0)
		close(lane);
	if (lane_at)
		say(said, len, "the dialer %s the lane; ",
		    lane_gone ? "dropped" : "kept");
	if (mode == AFTER_FLOOD)
		say(said, len, "flooded %llu frames; ",
		    (unsigned long long)flooded);
	say(said, len, "%u lookup(s) seen; link ended after %llu ms", lookups,
	    (unsigned long long)(now_ms() - t0));
}

static void run_close(int fd, int *lfd, char *said, size_t len)
{
	(void)fd, (void)lfd;
	say(said, len, "closed at once");
}

static void run_silent(int fd, int *lfd, char *said, size_t len)
{
	(void)lfd;
	say(said, len, "said nothing; the dialer closed after %llu ms",
	    (unsigned long long)drain_until_closed(fd));
}

/* Read the Hello, send `bytes`, then wait for the dialer to close. */
static void after_hello(int fd, const void *bytes, size_t n, char *said,
			size_t len)
{
	uint8_t their[ID_LEN];

	if (read_hello(fd, their)) {
		say(said, len, "%s", why);
		return;
	}
	send_all(fd, bytes, n);
	say(said, len, "the dialer closed %llu ms after the answer",
	    (unsigned long long)drain_until_closed(fd));
}

static void run_garbage(int fd, int *lfd, char *said, size_t len)
{
	static const char http[] = "HTTP/1.1 400 Bad Request\r\n"
				   "Content-Length: 0\r\n\r\n";
	(void)lfd;
	after_hello(fd, http, sizeof(http) - 1, said, len);
}

static void run_huge_header(int fd, int *lfd, char *said, size_t len)
{
	/* u32 header length 0xfffffff0, no payload, then a few bytes. */
	static const uint8_t f[] = { 0xf0, 0xff, 0xff, 0xff, 0, 0, 0, 0,
				     1, 2, 3, 4 };
	(void)lfd;
	after_hello(fd, f, sizeof(f), said, len);
}

static void run_huge_payload(int fd, int *lfd, char *said, size_t len)
{
	uint8_t *hdr, their[ID_LEN];
	size_t n;

	(void)lfd;
	if (read_hello(fd, their)) {
		say(said, len, "%s", why);
		return;
	}
	/* A real Welcome announcing 1 GiB of payload behind it. */
	n = pack_welcome(self_id, PROTO_VERSION, false, &hdr);
	send_frame_raw(fd, (uint32_t)n, 1u << 30, hdr, n, NULL, 0);
	free(hdr);
	say(said, len, "the dialer closed %llu ms after the answer",
	    (unsigned long long)drain_until_closed(fd));
}

static void welcome_then_wait(int fd, const uint8_t *id, uint32_t version,
			      bool auth, char *said, size_t len)
{
	uint8_t their[ID_LEN];

	if (read_hello(fd, their)) {
		say(said, len, "%s", why);
		return;
	}
	send_welcome(fd, id ? id : their, version, auth);
	say(said, len, "the dialer closed %llu ms after the Welcome",
	    (unsigned long long)drain_until_closed(fd));
}

static void run_wrong_version(int fd, int *lfd, char *said, size_t len)
{
	(void)lfd;
	welcome_then_wait(fd, self_id, PROTO_VERSION + 1, false, said, len);
}

static void run_auth(int fd, int *lfd, char *said, size_t len)
{
	(void)lfd;
	welcome_then_wait(fd, self_id, PROTO_VERSION, true, said, len);
}

static void run_self(int fd, int *lfd, char *said, size_t len)
{
	(void)lfd;
	welcome_then_wait(fd, NULL, PROTO_VERSION, false, said, len);
}

static void error_then_wait(int fd, bool duplicate, char *said, size_t len)
{
	uint8_t their[ID_LEN];

	if (read_hello(fd, their)) {
		say(said, len, "%s", why);
		return;
	}
	send_error(fd, duplicate);
	say(said, len, "the dialer closed %llu ms after the Error",
	    (unsigned long long)drain_until_closed(fd));
}

static void run_refuse(int fd, int *lfd, char *said, size_t len)
{
	(void)lfd;
	error_then_wait(fd, false, said, len);
}

static void run_duplicate(int fd, int *lfd, char *said, size_t len)
{
	(void)lfd;
	error_then_wait(fd, true, said, len);
}

/* A real Welcome, a byte a second: the dialer's handshake deadline
 * (connect_timeout_ms) ends it, not the bytes. */
static void run_slowloris(int fd, int *lfd, char *said, size_t len)
{
	uint8_t *hdr, their[ID_LEN], frame[FRAME_PREFIX + 512];
	uint64_t t0;
	size_t n, sent = 0;

	(void)lfd;
	if (read_hello(fd, their)) {
		say(said, len, "%s", why);
		return;
	}
	n = pack_welcome(self_id, PROTO_VERSION, false, &hdr);
	if (n > sizeof(frame) - FRAME_PREFIX) {
		free(hdr);
		return;
	}
	for (unsigned i = 0; i < 4; i++) {
		frame[i] = (uint8_t)(n >> (8 * i));
		frame[4 + i] = 0;
	}
	memcpy(frame + FRAME_PREFIX, hdr, n);
	free(hdr);
	n += FRAME_PREFIX;
	t0 = now_ms();
	while (!stop && sent < n) {
		if (send(fd, frame + sent, 1, MSG_NOSIGNAL) != 1)
			break;
		sent++;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 1000) == 1) {
			char c;
			if (recv(fd, &c, 1, MSG_PEEK) <= 0)
				break;   /* closed (or reset) by the dialer */
			recv(fd, &c, 1, 0);
		}
	}
	say(said, len, "%zu of %zu bytes sent, a byte a second, in %llu ms; "
	    "the dialer %s", sent, n, (unsigned long long)(now_ms() - t0),
	    sent < n ? "closed first" : "waited for all of them");
}

/* A real handshake claiming to be self_id, where the dialer (a token
 * of another instance) expected someone else. */
static void run_other_instance(int fd, int *lfd, char *said, size_t len)
{
	if (handshake_as(fd, self_id)) {
		say(said, len, "handshake: %s", why);
		return;
	}
	say(said, len, "linked as another instance; ");
	serve_link(fd, lfd, AFTER_SERVE, said, len);
}

static void after_handshake(int fd, int *lfd, enum after_hs mode, char *said,
			    size_t len)
{
	if (handshake_as(fd, self_id)) {
		say(said, len, "handshake: %s", why);
		return;
	}
	say(said, len, "linked; ");
	serve_link(fd, lfd, mode, said, len);
}

static void run_mute(int fd, int *lfd, char *said, size_t len)
{
	after_handshake(fd, lfd, AFTER_SERVE, said, len);
}

/* A node name no xferd can have: a line break and a forged log line
 * after it (peers name nodes in xferd's log, xferctl and lookups). */
#define FORGED_LINE "00:00:00.000 xferd info: forged by a peer's name"

static void run_bad_name(int fd, int *lfd, char *said, size_t len)
{
	opt.node = "b\n" FORGED_LINE;
	after_handshake(fd, lfd, AFTER_SERVE, said, len);
}

static void run_flood(int fd, int *lfd, char *said, size_t len)
{
	after_handshake(fd, lfd, AFTER_FLOOD, said, len);
}

static void run_lane_nowhere(int fd, int *lfd, char *said, size_t len)
{
	after_handshake(fd, lfd, AFTER_LANE_NOWHERE, said, len);
}

static void run_lane_silent(int fd, int *lfd, char *said, size_t len)
{
	after_handshake(fd, lfd, AFTER_LANE_SILENT, said, len);
}

static void run_lane_garbage(int fd, int *lfd, char *said, size_t len)
{
	after_handshake(fd, lfd, AFTER_LANE_GARBAGE, said, len);
}

static const struct hostile_case cases[] = {
	{ "close", "accept and close at once", run_close },
	{ "silent", "accept and say nothing", run_silent },
	{ "garbage", "an HTTP answer to the Hello", run_garbage },
	{ "huge-header", "a frame header of 4 GiB", run_huge_header },
	{ "huge-payload", "a Welcome with 1 GiB of payload", run_huge_payload },
	{ "wrong-version", "a Welcome of another protocol version",
	  run_wrong_version },
	{ "auth", "a Welcome that claims a cluster key, a random proof",
	  run_auth },
	{ "self", "a Welcome with the dialer's own instance id", run_self },
	{ "refuse", "an Error instead of a Welcome", run_refuse },
	{ "duplicate", "an Error that says duplicate link", run_duplicate },
	{ "slowloris", "a real Welcome, a byte a second", run_slowloris },
	{ "other-instance", "a real handshake as another instance than "
	  "--token-out's", run_other_instance },
	{ "mute", "a real handshake, keepalives answered, lookups never",
	  run_mute },
	{ "bad-name", "a real handshake whose node name holds a line break "
	  "and a forged log line", run_bad_name },
	{ "flood", "a real handshake, lookups and token checks answered, "
	  "writes never, a flood of frames nobody waits for", run_flood },
	{ "lane-nowhere", "a real handshake, a LaneOffer, nothing listens "
	  "any more", run_lane_nowhere },
	{ "lane-silent", "a real handshake, a LaneOffer, the lane accepted "
	  "and never answered", run_lane_silent },
	{ "lane-garbage", "a real handshake, a LaneOffer, garbage on the "
	  "lane", run_lane_garbage },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* --- the listener --- */

static int listen_on(void)
{
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&opt.addr, sizeof(opt.addr)) ||
	    listen(fd, 16)) {
		close(fd);
		return -1;
	}
	return fd;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: peer_acceptor --listen ADDR:PORT --case NAME "
		   "[--token-out FILE] [--node NAME] [--list]\n");
}

static void write_token_out(void)
{
	uint8_t other[ID_LEN], buf[512];
	size_t n;
	FILE *f;

	do
		random_bytes(other, sizeof(other));
	while (memcmp(other, self_id, ID_LEN) == 0);
	n = make_token(other, buf, sizeof(buf));
	f = fopen(opt.token_out, "we");
	if (!f || fwrite(buf, 1, n, f) != n || fclose(f)) {
		fprintf(stderr, "peer_acceptor: %s: %s\n", opt.token_out,
			strerror(errno));
		exit(1);
	}
}

static const struct hostile_case *parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'L' },
		{ "case", required_argument, NULL, 'C' },
		{ "token-out", required_argument, NULL, 't' },
		{ "node", required_argument, NULL, 'n' },
		{ "list", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const struct hostile_case *c = NULL;
	const char *listen_arg = NULL;
	int ch;

	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'L': listen_arg = optarg; break;
		case 't': opt.token_out = optarg; break;
		case 'n': opt.node = optarg; break;
		case 'C':
			for (size_t i = 0; i < NCASES; i++)
				if (strcmp(cases[i].name, optarg) == 0)
					c = &cases[i];
			if (!c) {
				fprintf(stderr, "peer_acceptor: no case %s\n",
					optarg);
				exit(2);
			}
			break;
		case 'l':
			for (size_t i = 0; i < NCASES; i++)
				printf("%-15s %s\n", cases[i].name, cases[i].what);
			exit(0);
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	const char *colon = listen_arg ? strrchr(listen_arg, ':') : NULL;
	char host[64];
	if (!c || !colon || (size_t)(colon - listen_arg) >= sizeof(host) ||
	    optind != argc) {
		usage(stderr);
		exit(2);
	}
	memcpy(host, listen_arg, (size_t)(colon - listen_arg));
	host[colon - listen_arg] = '\0';
	long port = strtol(colon + 1, NULL, 10);
	opt.addr.sin_family = AF_INET;
	opt.addr.sin_port = htons((uint16_t)port);
	if (port <= 0 || port > 65535 ||
	    inet_pton(AF_INET, host, &opt.addr.sin_addr) != 1) {
		fprintf(stderr, "peer_acceptor: --listen wants IPv4:PORT\n");
		exit(2);
	}
	opt.name = c->name;
	return c;
}

int main(int argc, char **argv)
{
	const struct hostile_case *c = parse_args(argc, argv);
	struct sigaction sa = { .sa_handler = on_signal };
	int lfd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	random_bytes(self_id, sizeof(self_id));
	if (opt.token_out)
		write_token_out();
	if ((lfd = listen_on()) < 0) {
		fprintf(stderr, "peer_acceptor: listen: %s\n", strerror(errno));
		return 1;
	}
	printf("listening case=%s instance=%02x%02x%02x%02x\n", c->name,
	       self_id[0], self_id[1], self_id[2], self_id[3]);
	while (!stop) {
		if (lfd < 0 && (lfd = listen_on()) < 0) {
			/* lane-nowhere closed it; the port comes back. */
			usleep(50 * 1000);
			continue;
		}
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		if (poll(&p, 1, 200) != 1)
			continue;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		char said[512] = "";
		why[0] = '\0';
		nconn++;
		c->run(fd, &lfd, said, sizeof(said));
		close(fd);
		printf("conn %u %s: %s\n", nconn, c->name, said);
	}
	if (lfd >= 0)
		close(lfd);
	return 0;
}
