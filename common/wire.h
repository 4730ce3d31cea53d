/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wire.h - framing of the control messages on xferd's Unix socket.
 *
 * The socket is SOCK_SEQPACKET: one send is one packet, so no length
 * prefix is needed.  Each packet starts with a 4-byte channel tag (which
 * protobuf envelope follows: client.proto or ctl.proto) and may carry
 * file descriptors with SCM_RIGHTS.
 */
#ifndef XFER_WIRE_H
#define XFER_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

/* Bumped on any incompatible change of client.proto or ctl.proto. */
#define XFER_PROTO_VERSION 1u

#define WIRE_TAG_CLIENT 0x43524658u /* "XFRC" read as little-endian u32 */
#define WIRE_TAG_CTL    0x54524658u /* "XFRT" */
#define WIRE_TAG_LEN    4u

/* Largest packet either side sends or accepts, tag included. */
#define WIRE_MAX_PACKET 65536u
/* Most descriptors one packet may carry. */
#define WIRE_MAX_FDS    4u

/*
 * Pack msg behind tag and send it with nfds descriptors.  Blocks only as
 * long as the socket buffer is full (callers on an event loop use
 * non-blocking sockets and get -EAGAIN).  Returns 0 or -errno.
 */
int wire_send(int sock, uint32_t tag, const ProtobufCMessage *msg,
	      const int *fds, unsigned nfds);

/*
 * Receive one packet into buf (WIRE_MAX_PACKET bytes).  Descriptors that
 * came with it are stored in fds (close-on-exec) and counted in *nfds;
 * a packet with more than WIRE_MAX_FDS descriptors, or truncated, is an
 * error (-EMSGSIZE) and its descriptors are closed.  Returns the packet
 * length, 0 at end of stream, or -errno.
 */
ssize_t wire_recv(int sock, void *buf, int *fds, unsigned *nfds);

/* The tag of a received packet, or 0 when it is too short to have one. */
uint32_t wire_tag(const void *buf, size_t len);

/* Close the descriptors a received packet carried and forget them. */
void wire_close_fds(int *fds, unsigned *nfds);

#endif /* XFER_WIRE_H */
