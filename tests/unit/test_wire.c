/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_wire.c - packet framing of common/wire.c over a real
 * socketpair(AF_UNIX, SOCK_SEQPACKET): ClientMsg round trips with and
 * without descriptors, tags, the size and descriptor limits (nothing
 * leaks when a packet is refused), end of stream, and what the protobuf
 * unpacker makes of garbage and truncated messages.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.pb-c.h"
#include "suites.h"
#include "common/wire.h"

static int sv[2];
static uint8_t *rbuf;

static void wire_setup(void)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
				    sv), 0);
	rbuf = malloc(WIRE_MAX_PACKET);
	ck_assert_ptr_nonnull(rbuf);
}

static void wire_teardown(void)
{
	close(sv[0]);
	close(sv[1]);
	free(rbuf);
}

/* Open descriptors of this process. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

static int memfd_with(const char *name, const char *text)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	return fd;
}

static void assert_same_file(int a, int b)
{
	struct stat sa, sb;

	ck_assert_int_eq(fstat(a, &sa), 0);
	ck_assert_int_eq(fstat(b, &sb), 0);
	ck_assert_uint_eq(sa.st_dev, sb.st_dev);
	ck_assert_uint_eq(sa.st_ino, sb.st_ino);
}

/* Send `len` raw bytes with `nfds` descriptors, bypassing wire_send's
 * limits. */
static void raw_send(int sock, const void *data, size_t len, const int *fds,
		     unsigned nfds)
{
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	char *control = NULL;

	if (nfds) {
		size_t space = CMSG_SPACE(nfds * sizeof(int));
		control = calloc(1, space);
		ck_assert_ptr_nonnull(control);
		mh.msg_control = control;
		mh.msg_controllen = space;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	ck_assert_int_eq(sendmsg(sock, &mh, 0), (ssize_t)len);
	free(control);
}

START_TEST(round_trip_no_fds)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Hello h = XFER__CLIENT__HELLO__INIT;
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 99;

	h.name = "unit-test";
	h.sq_entries = 256;
	m.proto_version = XFER_PROTO_VERSION;
	m.seq = 0x0123456789abcdefull;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO;
	m.hello = &h;

	ck_assert_int_eq(wire_send(sv[0], WIRE_TAG_CLIENT, &m.base, NULL, 0),
			 0);
	ssize_t n = wire_recv(sv[1], rbuf, fds, &nfds);
	size_t packed = xfer__client__client_msg__get_packed_size(&m);
	ck_assert_int_eq(n, (ssize_t)(WIRE_TAG_LEN + packed));
	ck_assert_uint_eq(nfds, 0);
	ck_assert_uint_eq(wire_tag(rbuf, (size_t)n), WIRE_TAG_CLIENT);

	Xfer__Client__ClientMsg *r = xfer__client__client_msg__unpack(
		NULL, (size_t)n - WIRE_TAG_LEN, rbuf + WIRE_TAG_LEN);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->proto_version, XFER_PROTO_VERSION);
	ck_assert_uint_eq(r->seq, 0x0123456789abcdefull);
	ck_assert_int_eq(r->body_case, XFER__CLIENT__CLIENT_MSG__BODY_HELLO);
	ck_assert_str_eq(r->hello->name, "unit-test");
	ck_assert_uint_eq(r->hello->sq_entries, 256);
	xfer__client__client_msg__free_unpacked(r, NULL);

	/* An empty message is a tag alone. */
	Xfer__Client__ClientMsg empty = XFER__CLIENT__CLIENT_MSG__INIT;
	ck_assert_int_eq(wire_send(sv[1], WIRE_TAG_CTL, &empty.base, NULL, 0),
			 0);
	n = wire_recv(sv[0], rbuf, fds, &nfds);
	ck_assert_int_eq(n, WIRE_TAG_LEN);
	ck_assert_uint_eq(wire_tag(rbuf, (size_t)n), WIRE_TAG_CTL);
}
END_TEST

START_TEST(round_trip_with_fds)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__RegRequest reg = XFER__CLIENT__REG_REQUEST__INIT;
	int sent[WIRE_MAX_FDS], got[WIRE_MAX_FDS];
	unsigned nfds;
	char text[32];

	reg.kind = XFER__CLIENT__MEM_KIND__MEM_MEMFD;
	reg.length = 1u << 20;
	m.proto_version = XFER_PROTO_VERSION;
	m.seq = 7;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_REG;
	m.reg = &reg;

	for (unsigned i = 0; i < WIRE_MAX_FDS; i++) {
		snprintf(text, sizeof(text), "file %u", i);
		sent[i] = memfd_with("wire", text);
	}

	/* One descriptor, then as many as a packet may carry. */
	for (unsigned count = 1; count <= WIRE_MAX_FDS;
	     count += WIRE_MAX_FDS - 1) {
		int before = count_fds();
		ck_assert_int_eq(wire_send(sv[0], WIRE_TAG_CLIENT, &m.base,
					   sent, count), 0);
		ssize_t n = wire_recv(sv[1], rbuf, got, &nfds);
		ck_assert_int_gt(n, (ssize_t)WIRE_TAG_LEN);
		ck_assert_uint_eq(nfds, count);
		ck_assert_int_eq(count_fds(), before + (int)count);

		Xfer__Client__ClientMsg *r = xfer__client__client_msg__unpack(
			NULL, (size_t)n - WIRE_TAG_LEN, rbuf + WIRE_TAG_LEN);
		ck_assert_ptr_nonnull(r);
		ck_assert_int_eq(r->body_case,
				 XFER__CLIENT__CLIENT_MSG__BODY_REG);
		ck_assert_int_eq(r->reg->kind,
				 XFER__CLIENT__MEM_KIND__MEM_MEMFD);
		ck_assert_uint_eq(r->reg->length, 1u << 20);
		xfer__client__client_msg__free_unpacked(r, NULL);

		for (unsigned i = 0; i < count; i++) {
			/* A new descriptor of the same file, in order, and
			 * close-on-exec as wire.h promises. */
			ck_assert_int_ne(got[i], sent[i]);
			assert_same_file(got[i], sent[i]);
			ck_assert_int_eq(fcntl(got[i], F_GETFD) & FD_CLOEXEC,
					 FD_CLOEXEC);
			char back[32] = { 0 };
			snprintf(text, sizeof(text), "file %u", i);
			ck_assert_int_eq(pread(got[i], back, sizeof(back) - 1,
					       0), (ssize_t)strlen(text));
			ck_assert_str_eq(back, text);
		}
		wire_close_fds(got, &nfds);
		ck_assert_uint_eq(nfds, 0);
		ck_assert_int_eq(count_fds(), before);
	}
	for (unsigned i = 0; i < WIRE_MAX_FDS; i++)
		close(sent[i]);
}
END_TEST

START_TEST(tag_parsing)
{
	const uint8_t client[] = { 'X', 'F', 'R', 'C', 0x08, 0x01 };
	const uint8_t ctl[] = { 'X', 'F', 'R', 'T' };

	/* The tags are the ASCII names read as little-endian words. */
	ck_assert_uint_eq(wire_tag(client, sizeof(client)), WIRE_TAG_CLIENT);
	ck_assert_uint_eq(wire_tag(ctl, sizeof(ctl)), WIRE_TAG_CTL);
	for (size_t len = 0; len < WIRE_TAG_LEN; len++)
		ck_assert_uint_eq(wire_tag(client, len), 0);
	ck_assert_uint_eq(wire_tag(NULL, 0), 0);
}
END_TEST

START_TEST(short_packet_tag)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds;

	raw_send(sv[0], "XF", 2, NULL, 0);
	ssize_t n = wire_recv(sv[1], rbuf, fds, &nfds);
	ck_assert_int_eq(n, 2);
	ck_assert_uint_eq(wire_tag(rbuf, (size_t)n), 0);
}
END_TEST

START_TEST(too_many_fds)
{
	/* Just over the limit, and more than wire_recv has control room
	 * for (the kernel then truncates the list itself). */
	const unsigned counts[] = { WIRE_MAX_FDS + 1, 4 * WIRE_MAX_FDS + 4 };
	int sent[4 * WIRE_MAX_FDS + 4], got[WIRE_MAX_FDS];
	int file = memfd_with("many", "x");

	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		unsigned nfds = 77;
		for (unsigned i = 0; i < counts[c]; i++) {
			sent[i] = dup(file);
			ck_assert_int_ge(sent[i], 0);
		}
		raw_send(sv[0], "XFRC", 4, sent, counts[c]);
		/* Only the descriptors in flight remain once ours close. */
		for (unsigned i = 0; i < counts[c]; i++)
			close(sent[i]);
		int before = count_fds();
		ck_assert_int_eq(wire_recv(sv[1], rbuf, got, &nfds),
				 -EMSGSIZE);
		ck_assert_uint_eq(nfds, 0);
		ck_assert_int_eq(count_fds(), before);
	}

	/* wire_send itself refuses to send too many. */
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	for (unsigned i = 0; i < WIRE_MAX_FDS + 1; i++)
		sent[i] = file;
	ck_assert_int_eq(wire_send(sv[0], WIRE_TAG_CLIENT, &m.base, sent,
				   WIRE_MAX_FDS + 1), -EMSGSIZE);

	/* The connection still works afterwards. */
	ck_assert_int_eq(wire_send(sv[0], WIRE_TAG_CLIENT, &m.base, &file, 1),
			 0);
	unsigned nfds;
	ck_assert_int_eq(wire_recv(sv[1], rbuf, got, &nfds), WIRE_TAG_LEN);
	ck_assert_uint_eq(nfds, 1);
	assert_same_file(got[0], file);
	wire_close_fds(got, &nfds);
	close(file);
}
END_TEST

START_TEST(oversized_packet)
{
	const size_t big = WIRE_MAX_PACKET + 1;
	uint8_t *data = malloc(big);
	int fds[WIRE_MAX_FDS];
	unsigned nfds;

	ck_assert_ptr_nonnull(data);
	memset(data, 0x5a, big);
	memcpy(data, "XFRC", 4);

	/* Exactly the limit is accepted... */
	raw_send(sv[0], data, WIRE_MAX_PACKET, NULL, 0);
	ck_assert_int_eq(wire_recv(sv[1], rbuf, fds, &nfds),
			 (ssize_t)WIRE_MAX_PACKET);
	ck_assert_uint_eq(rbuf[WIRE_MAX_PACKET - 1], 0x5a);

	/* ...one byte more is not, and its descriptor is closed. */
	int file = memfd_with("big", "y");
	raw_send(sv[0], data, big, &file, 1);
	close(file);
	int before = count_fds();
	ck_assert_int_eq(wire_recv(sv[1], rbuf, fds, &nfds), -EMSGSIZE);
	ck_assert_uint_eq(nfds, 0);
	ck_assert_int_eq(count_fds(), before);

	/* The next packet arrives whole: the rest of the big one is gone. */
	raw_send(sv[0], "XFRT", 4, NULL, 0);
	ck_assert_int_eq(wire_recv(sv[1], rbuf, fds, &nfds), 4);
	ck_assert_uint_eq(wire_tag(rbuf, 4), WIRE_TAG_CTL);

	/* wire_send refuses a message that cannot fit. */
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Hello h = XFER__CLIENT__HELLO__INIT;
	char *name = malloc(WIRE_MAX_PACKET);
	ck_assert_ptr_nonnull(name);
	memset(name, 'n', WIRE_MAX_PACKET - 1);
	name[WIRE_MAX_PACKET - 1] = '\0';
	h.name = name;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO;
	m.hello = &h;
	ck_assert_int_eq(wire_send(sv[0], WIRE_TAG_CLIENT, &m.base, NULL, 0),
			 -EMSGSIZE);

	/* The largest message that fits is sent and arrives whole: the
	 * name shrinks until the packed message is 65532 bytes. */
	size_t overhead = xfer__client__client_msg__get_packed_size(&m) -
			  (WIRE_MAX_PACKET - 1);
	size_t name_len = WIRE_MAX_PACKET - WIRE_TAG_LEN - overhead;
	name[name_len] = '\0';
	/* The length varint of name is 3 bytes either way. */
	ck_assert_uint_eq(xfer__client__client_msg__get_packed_size(&m),
			  WIRE_MAX_PACKET - WIRE_TAG_LEN);
	ck_assert_int_eq(wire_send(sv[0], WIRE_TAG_CLIENT, &m.base, NULL, 0),
			 0);
	ssize_t n = wire_recv(sv[1], rbuf, fds, &nfds);
	ck_assert_int_eq(n, (ssize_t)WIRE_MAX_PACKET);
	Xfer__Client__ClientMsg *r = xfer__client__client_msg__unpack(
		NULL, (size_t)n - WIRE_TAG_LEN, rbuf + WIRE_TAG_LEN);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(strlen(r->hello->name), name_len);
	xfer__client__client_msg__free_unpacked(r, NULL);
	free(name);
	free(data);
}
END_TEST

START_TEST(end_of_stream)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 3;

	close(sv[0]);
	sv[0] = -1;
	ck_assert_int_eq(wire_recv(sv[1], rbuf, fds, &nfds), 0);
	ck_assert_uint_eq(nfds, 0);

	/* Sending to a closed peer is an error, not SIGPIPE. */
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	ck_assert_int_eq(wire_send(sv[1], WIRE_TAG_CLIENT, &m.base, NULL, 0),
			 -EPIPE);
}
END_TEST

START_TEST(recv_error)
{
	int fds[WIRE_MAX_FDS];
	unsigned nfds;

	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	ck_assert_int_eq(wire_recv(sv[1], rbuf, fds, &nfds), -EAGAIN);
	ck_assert_int_eq(wire_recv(-1, rbuf, fds, &nfds), -EBADF);
}
END_TEST

/* A packet of a correct tag and `body`, received and unpacked. */
static Xfer__Client__ClientMsg *send_and_unpack(const uint8_t *body,
						size_t len)
{
	uint8_t pkt[256];
	int fds[WIRE_MAX_FDS];
	unsigned nfds;
	uint32_t tag = WIRE_TAG_CLIENT;

	ck_assert_uint_le(len + 4, sizeof(pkt));
	memcpy(pkt, &tag, 4);
	memcpy(pkt + 4, body, len);
	raw_send(sv[0], pkt, len + 4, NULL, 0);
	ssize_t n = wire_recv(sv[1], rbuf, fds, &nfds);
	ck_assert_int_eq(n, (ssize_t)(len + 4));
	ck_assert_uint_eq(wire_tag(rbuf, (size_t)n), WIRE_TAG_CLIENT);
	return xfer__client__client_msg__unpack(NULL, (size_t)n - 4, rbuf + 4);
}

START_TEST(garbage_after_tag)
{
	/* Each of these is malformed protobuf, not merely unexpected. */
	static const struct {
		const char *what;
		uint8_t bytes[16];
		size_t len;
	} cases[] = {
		{ "wire type 7", { 0x0f, 0x00 }, 2 },
		{ "field number 0", { 0x00, 0x01 }, 2 },
		{ "tag varint never ends", { 0xff, 0xff, 0xff, 0xff, 0xff,
					     0xff, 0xff, 0xff, 0xff, 0xff,
					     0xff }, 11 },
		{ "value varint cut", { 0x10, 0x80 }, 2 },
		{ "hello longer than the packet", { 0x52, 0x10, 0x0a, 0x01,
						    'a' }, 5 },
		{ "name longer than hello", { 0x52, 0x03, 0x0a, 0x05, 'a' },
		  5 },
		{ "proto_version as fixed64", { 0x09, 1, 2, 3 }, 4 },
		{ "length-delimited past end", { 0x12, 0x7f, 0x00 }, 3 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		Xfer__Client__ClientMsg *r =
			send_and_unpack(cases[i].bytes, cases[i].len);
		ck_assert_msg(r == NULL, "unpacked garbage: %s", cases[i].what);
	}
}
END_TEST

START_TEST(truncated_message)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Hello h = XFER__CLIENT__HELLO__INIT;
	uint8_t packed[128];

	m.proto_version = XFER_PROTO_VERSION;
	m.seq = 300;
	size_t head = xfer__client__client_msg__pack(&m, packed);
	h.name = "a-client-name";
	h.sq_entries = 64;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO;
	m.hello = &h;
	ck_assert_uint_le(xfer__client__client_msg__get_packed_size(&m),
			  sizeof(packed));
	size_t full = xfer__client__client_msg__pack(&m, packed);
	ck_assert_uint_gt(full, head + 2);

	Xfer__Client__ClientMsg *r = send_and_unpack(packed, full);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->hello->name, "a-client-name");
	xfer__client__client_msg__free_unpacked(r, NULL);

	/* Cut anywhere inside the hello field: unpacking fails. */
	for (size_t cut = head + 1; cut < full; cut++) {
		r = send_and_unpack(packed, cut);
		ck_assert_msg(r == NULL, "message cut at %zu of %zu unpacked",
			      cut, full);
	}
	/* Cut exactly before it: a valid message without a body, which is
	 * why every receiver must check body_case itself. */
	r = send_and_unpack(packed, head);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->body_case, XFER__CLIENT__CLIENT_MSG__BODY__NOT_SET);
	ck_assert_uint_eq(r->seq, 300);
	xfer__client__client_msg__free_unpacked(r, NULL);
}
END_TEST

Suite *wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("seqpacket");

	tcase_add_checked_fixture(tc, wire_setup, wire_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, round_trip_no_fds);
	tcase_add_test(tc, round_trip_with_fds);
	tcase_add_test(tc, tag_parsing);
	tcase_add_test(tc, short_packet_tag);
	tcase_add_test(tc, too_many_fds);
	tcase_add_test(tc, oversized_packet);
	tcase_add_test(tc, end_of_stream);
	tcase_add_test(tc, recv_error);
	tcase_add_test(tc, garbage_after_tag);
	tcase_add_test(tc, truncated_message);
	suite_add_tcase(s, tc);
	return s;
}
