/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wire.c - send and receive tagged protobuf packets with descriptors.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/wire.h"

int wire_send(int sock, uint32_t tag, const ProtobufCMessage *msg,
	      const int *fds, unsigned nfds)
{
	uint8_t buf[WIRE_MAX_PACKET];
	size_t size = protobuf_c_message_get_packed_size(msg);

	if (size > sizeof(buf) - WIRE_TAG_LEN || nfds > WIRE_MAX_FDS)
		return -EMSGSIZE;
	memcpy(buf, &tag, WIRE_TAG_LEN);
	protobuf_c_message_pack(msg, buf + WIRE_TAG_LEN);

	struct iovec iov = { .iov_base = buf, .iov_len = WIRE_TAG_LEN + size };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(WIRE_MAX_FDS * sizeof(int))];
	} control;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds > 0) {
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n >= 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

void wire_close_fds(int *fds, unsigned *nfds)
{
	for (unsigned i = 0; i < *nfds; i++)
		close(fds[i]);
	*nfds = 0;
}

ssize_t wire_recv(int sock, void *buf, int *fds, unsigned *nfds)
{
	struct iovec iov = { .iov_base = buf, .iov_len = WIRE_MAX_PACKET };
	/* Room for more than we accept, so an over-long list is seen and
	 * its descriptors closed rather than silently cut (MSG_CTRUNC). */
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(4 * WIRE_MAX_FDS * sizeof(int))];
	} control;
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = sizeof(control.buf),
	};
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;

	int err = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm;
	     cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
			if (*nfds < WIRE_MAX_FDS)
				fds[(*nfds)++] = fd;
			else {
				close(fd);
				err = -EMSGSIZE;
			}
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		err = -EMSGSIZE;
	if (err) {
		wire_close_fds(fds, nfds);
		return err;
	}
	return n;
}

uint32_t wire_tag(const void *buf, size_t len)
{
	uint32_t tag;

	if (len < WIRE_TAG_LEN)
		return 0;
	memcpy(&tag, buf, WIRE_TAG_LEN);
	return tag;
}
