/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream_wire.h - what the two ends of a stream (stream.c) say to each
 * other: the stream token, the HELLO record and the notification values.
 *
 * Wire formats (all little-endian, version XFER_STREAM_VERSION):
 *
 *   stream token (consumer -> producer, out of band):
 *     0 u32 magic "XSTR"    4 u16 version   6 u16 0
 *     8 u32 nslots         12 u32 0        16 u64 slot_size
 *    24 u64 stream id      32 u16 slots token length
 *    34 u16 mailbox token length           36 u32 0
 *    40 u64 the consumer's client id (its node: the tokens' instance)
 *    48 the slots token, then the mailbox token
 *
 *   HELLO record (the producer WRITEs it into the mailbox at 0):
 *     0 u32 magic "XSHL"    4 u16 version   6 u16 token length
 *     8 u64 stream id      16 u64 the producer's client id
 *    24 u8[16] the producer's node (its xferd's instance id)
 *    40 the token of the producer's region
 *
 * The two client ids and nodes are what each end's notifications carry
 * as their sender (xfer_cqe_sender); each end takes notifications only
 * from the other's (stream.c).  Version 1 had neither.
 *
 *   notification values: type in bits 63..60, then
 *     HELLO, ACCEPT  0
 *     DATA           bits 55..32 the low 24 bits of seq, 31..0 the length
 *     CREDIT         head (bits 59..0)
 *     CLOSE          from the producer: its tail; from the consumer: 0
 *
 * Both small regions (the consumer's mailbox, the producer's region) are
 * STREAM_REGION_LEN bytes: the HELLO record at 0, a probe word at
 * STREAM_PROBE_OFF.  Every field received is checked before use.
 */
#ifndef XFER_CLIENT_STREAM_WIRE_H
#define XFER_CLIENT_STREAM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xfer.h"

#define STREAM_TOKEN_HDR   48u
#define STREAM_HELLO_HDR   40u
#define STREAM_HELLO_MAX   (STREAM_HELLO_HDR + XFER_TOKEN_MAX)
#define STREAM_PROBE_OFF   1024u
#define STREAM_PROBE_LEN   8u
#define STREAM_REGION_LEN  4096u
_Static_assert(STREAM_HELLO_MAX <= STREAM_PROBE_OFF,
	       "the HELLO record and the probe word overlap");
_Static_assert(STREAM_TOKEN_HDR + 2 * XFER_TOKEN_MAX == XFER_STREAM_TOKEN_MAX,
	       "XFER_STREAM_TOKEN_MAX");

/* Notification types (value bits 63..60), and the user_data of an end's
 * own SQEs (the same bits: a completion of ours is never flagged
 * NOTIFY). */
enum stream_msg {
	MSG_HELLO = 1,
	MSG_ACCEPT,
	MSG_DATA,
	MSG_CREDIT,
	MSG_CLOSE,
	UD_PROBE,       /* user_data only */
};
#define MSG_SHIFT     60
#define MSG_PAYLOAD   ((1ull << MSG_SHIFT) - 1)
#define SEQ_BITS      24
#define SEQ_MASK      ((1u << SEQ_BITS) - 1)

static inline uint64_t msg(enum stream_msg type, uint64_t payload)
{
	return (uint64_t)type << MSG_SHIFT | (payload & MSG_PAYLOAD);
}

/* At least one slot, of 1 byte to 4 GiB - 1 (DATA carries 32
 * bits of length), nslots * slot_size not overflowing. */
bool stream_geometry_ok(uint32_t nslots, uint64_t slot_size);

/* A stream token's fields; the two tokens point into the blob. */
struct stream_token {
	uint32_t nslots;
	uint64_t slot_size, id;
	uint64_t client;   /* the consumer's */
	const uint8_t *slots_tok, *mbox_tok;
	uint16_t slots_len, mbox_len;
};

/* Into out (XFER_STREAM_TOKEN_MAX bytes); returns the length. */
size_t stream_token_encode(const struct stream_token *t, uint8_t *out);
/* 0; -EINVAL for anything malformed (lengths that do not add up, a
 * field out of range, reserved bits set); -EPROTONOSUPPORT for another
 * version. */
int stream_token_parse(const void *blob, size_t len, struct stream_token *t);

/* The HELLO record of stream id from producer self (node, client)
 * with its region's token into rec (STREAM_HELLO_MAX bytes); returns
 * its length. */
size_t stream_hello_encode(uint8_t *rec, uint64_t id,
			   const struct xfer_cqe_sender *self,
			   const uint8_t *tok, uint16_t tok_len);
/* A record of STREAM_HELLO_MAX bytes: 0, the token inside it and the
 * producer it names (node, client; the rest zero), or -EPROTO if it is
 * not a HELLO of stream id. */
int stream_hello_parse(const uint8_t *rec, uint64_t id, const uint8_t **tok,
		       uint16_t *tok_len, struct xfer_cqe_sender *who);

#endif /* XFER_CLIENT_STREAM_WIRE_H */
