/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peer_wire.h - the frames of proto/peer.proto as the hostile peers of
 * the tests speak them: blocking sends, reads with a deadline, one frame
 * packed or unpacked, a keepalive answered.  Shared by peer_fuzz.c (it
 * dials xferd) and peer_acceptor.c (xferd dials it).
 *
 * Header-only, every function static inline: the Makefile builds each
 * test tool from one source file.  `why` holds the reason of the last
 * failure these helpers saw (one buffer per tool).  Single-threaded.
 */
#ifndef XFER_TESTS_PEER_WIRE_H
#define XFER_TESTS_PEER_WIRE_H

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "peer.pb-c.h"

#define PROTO_VERSION   1u          /* PeerMsg.proto_version */
#define FRAME_PREFIX    8u
#define MAX_HEADER      (64u << 10) /* what a sane daemon sends us */
#define MAX_PAYLOAD     (16u << 20)
#define ID_LEN          16
#define CHALLENGE_LEN   32

static char why[512];           /* the reason of the last failed check */

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void set_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void set_why(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
}

static inline void random_bytes(uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			perror("getrandom");
			exit(1);
		}
		p += r;
		n -= (size_t)r;
	}
}

/* 0, or -errno when the daemon already closed (EPIPE, ECONNRESET). */
static inline int send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Read exactly len bytes before deadline.  1: done; 0: EOF; -ETIMEDOUT;
 * -ECONNRESET or another -errno.
 */
static inline int recv_exact(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;

	while (len) {
		uint64_t now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int rc = poll(&pfd, 1, (int)(deadline - now));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (rc == 0)
			return -ETIMEDOUT;
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		p += n;
		len -= (size_t)n;
	}
	return 1;
}

/* --- frames --- */

static inline int send_frame_raw(int fd, uint32_t hlen, uint32_t plen,
			  const void *hdr, size_t hdr_bytes, const void *payload,
			  size_t payload_bytes)
{
	uint8_t prefix[FRAME_PREFIX];
	int rc;

	/* Little-endian on the wire, whatever this host is. */
	for (unsigned i = 0; i < 4; i++) {
		prefix[i] = (uint8_t)(hlen >> (8 * i));
		prefix[4 + i] = (uint8_t)(plen >> (8 * i));
	}
	if ((rc = send_all(fd, prefix, sizeof(prefix))))
		return rc;
	if (hdr_bytes && (rc = send_all(fd, hdr, hdr_bytes)))
		return rc;
	if (payload_bytes && (rc = send_all(fd, payload, payload_bytes)))
		return rc;
	return 0;
}

static inline size_t pack_msg(Xfer__Peer__PeerMsg *m, uint8_t **out)
{
	size_t n = xfer__peer__peer_msg__get_packed_size(m);

	*out = malloc(n ? n : 1);
	if (!*out) {
		perror("malloc");
		exit(1);
	}
	xfer__peer__peer_msg__pack(m, *out);
	return n;
}

/* A well-formed frame: m (with its proto_version as set) + payload. */
static inline int send_msg(int fd, Xfer__Peer__PeerMsg *m, const void *payload,
		    uint32_t plen)
{
	uint8_t *hdr;
	size_t hlen = pack_msg(m, &hdr);
	int rc = send_frame_raw(fd, (uint32_t)hlen, plen, hdr, hlen, payload,
				plen);

	free(hdr);
	return rc;
}

/*
 * The next frame from the daemon, its payload skipped (*plen says how
 * long it was).  1 and *m (free with ..._free_unpacked); 0 EOF;
 * -ETIMEDOUT; -ECONNRESET...; -EPROTO for a frame we cannot parse.
 */
static inline int recv_msg(int fd, uint64_t deadline, Xfer__Peer__PeerMsg **m,
		    uint32_t *plen)
{
	uint8_t prefix[FRAME_PREFIX];
	uint32_t hlen;
	int rc = recv_exact(fd, prefix, sizeof(prefix), deadline);

	if (rc <= 0)
		return rc;
	hlen = (uint32_t)prefix[0] | (uint32_t)prefix[1] << 8 |
	       (uint32_t)prefix[2] << 16 | (uint32_t)prefix[3] << 24;
	*plen = (uint32_t)prefix[4] | (uint32_t)prefix[5] << 8 |
		(uint32_t)prefix[6] << 16 | (uint32_t)prefix[7] << 24;
	if (hlen == 0 || hlen > MAX_HEADER || *plen > MAX_PAYLOAD) {
		set_why("the daemon sent a frame of header %u, payload %u bytes",
			hlen, *plen);
		return -EPROTO;
	}
	uint8_t *buf = malloc(hlen > *plen ? hlen : *plen);
	if (!buf) {
		perror("malloc");
		exit(1);
	}
	rc = recv_exact(fd, buf, hlen, deadline);
	if (rc > 0)
		*m = xfer__peer__peer_msg__unpack(NULL, hlen, buf);
	if (rc > 0 && !*m) {
		set_why("the daemon sent a header that does not parse");
		rc = -EPROTO;
	}
	if (rc > 0 && *plen) {
		rc = recv_exact(fd, buf, *plen, deadline);
		if (rc <= 0)
			xfer__peer__peer_msg__free_unpacked(*m, NULL);
	}
	free(buf);
	return rc;
}

static inline void msg_init(Xfer__Peer__PeerMsg *m)
{
	*m = (Xfer__Peer__PeerMsg)XFER__PEER__PEER_MSG__INIT;
	m->proto_version = PROTO_VERSION;
}

/* Answer the daemon's keepalive, as a live peer does. */
static inline void answer_ping(int fd, const Xfer__Peer__PeerMsg *in)
{
	Xfer__Peer__PeerMsg m;
	Xfer__Peer__Pong pong = XFER__PEER__PONG__INIT;

	msg_init(&m);
	pong.nonce = in->ping->nonce;
	pong.sent_ns = in->ping->sent_ns;
	m.body_case = XFER__PEER__PEER_MSG__BODY_PONG;
	m.pong = &pong;
	send_msg(fd, &m, NULL, 0);
}

#endif /* XFER_TESTS_PEER_WIRE_H */
