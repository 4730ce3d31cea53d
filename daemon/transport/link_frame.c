/* SPDX-License-Identifier: Apache-2.0 */
/*
 * link_frame.c - the frames of the links between xferds, without state:
 * packing a frame's header (the session's sender and peer/handshake.c)
 * and the checks every received frame passes before anyone acts on it
 * (the session's dispatch, and tests/fuzz/fuzz_peer_frame.c through
 * link_frame_check).
 *
 * A frame is a u32 header length, a u32 payload length, a PeerMsg
 * (proto/peer.proto) and the payload.  Any thread; no state.
 */
#include <errno.h>
#include <string.h>

#include "common/token_codec.h"
#include "common/wire.h"
#include "core/notify_msg.h"
#include "peer.pb-c.h"
#include "transport/link.h"
#include "xfer_ring.h"

/* --- frames --- */

/* Frames carry lengths in the host's order: the supported hosts (x86-64,
 * arm64) are little-endian, which is what the protocol specifies. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "peer frame lengths are little-endian");

int link_frame_header(const ProtobufCMessage *msg, uint32_t payload_len,
		      uint8_t *out)
{
	size_t hlen = protobuf_c_message_get_packed_size(msg);

	if (hlen > PEER_MAX_HEADER || payload_len > PEER_MAX_PAYLOAD)
		return -EMSGSIZE;
	uint32_t h = (uint32_t)hlen, p = payload_len;
	memcpy(out, &h, 4);      /* little-endian hosts only (x86, arm64) */
	memcpy(out + 4, &p, 4);
	protobuf_c_message_pack(msg, out + LINK_FRAME_PREFIX);
	return (int)(LINK_FRAME_PREFIX + hlen);
}

/* A Target received from the peer, as a token of ours; -EPROTO if it is
 * malformed. */
void link_target_of(const struct token *tok, Xfer__Peer__Target *out)
{
	xfer__peer__target__init(out);
	out->region = tok->region;
	out->key.data = (uint8_t *)tok->key;
	out->key.len = TOKEN_KEY_LEN;
	out->offset = tok->offset;
	out->length = tok->length;
	out->region_length = tok->region_length;
	out->mem_kind = tok->mem_kind;
}

int link_target_valid(const Xfer__Peer__Target *t)
{
	if (!t || t->key.len != TOKEN_KEY_LEN || t->offset > t->region_length ||
	    t->length > t->region_length - t->offset)
		return -EPROTO;
	return 0;
}

int link_notify_valid(const Xfer__Peer__Sender *snd,
		      const ProtobufCBinaryData *msg)
{
	if (msg->len > XFER_NOTIFY_MSG_MAX)
		return -EPROTO;
	if (snd && !notify_name_ok(snd->name.data, snd->name.len))
		return -EPROTO;
	return 0;
}

int link_frame_prefix(const uint8_t *buf, size_t have, uint32_t *hlen,
		      uint32_t *plen)
{
	if (have < LINK_FRAME_PREFIX)
		return 0;
	memcpy(hlen, buf, 4);
	memcpy(plen, buf + 4, 4);
	if (*hlen == 0 || *hlen > PEER_MAX_HEADER || *plen > PEER_MAX_PAYLOAD)
		return -EPROTO;
	return have >= LINK_FRAME_PREFIX + (size_t)*hlen;
}

Xfer__Peer__PeerMsg *link_frame_unpack(const uint8_t *hdr, size_t hlen,
				       uint32_t plen, const char **why)
{
	Xfer__Peer__PeerMsg *m = xfer__peer__peer_msg__unpack(NULL, hlen, hdr);

	*why = "malformed frame";
	if (!m)
		return NULL;
	if (m->proto_version != XFER_PROTO_VERSION) {
		*why = "protocol version mismatch";
		goto bad;
	}
	bool payload_ok = m->body_case == XFER__PEER__PEER_MSG__BODY_WRITE ||
			  m->body_case == XFER__PEER__PEER_MSG__BODY_READ_DATA;
	if (plen && !payload_ok) {
		*why = "payload on a frame that has none";
		goto bad;
	}
	return m;
bad:
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	return NULL;
}

int link_frame_check(const uint8_t *buf, size_t have, uint32_t *plen,
		     const char **why)
{
	uint32_t hlen;
	int rc = link_frame_prefix(buf, have, &hlen, plen);

	*why = "frame length out of bounds";
	if (rc <= 0)
		return rc;
	Xfer__Peer__PeerMsg *m = link_frame_unpack(buf + LINK_FRAME_PREFIX, hlen,
						   *plen, why);
	if (!m)
		return -EPROTO;
	rc = (int)(LINK_FRAME_PREFIX + hlen);
	*why = NULL;
	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_WRITE:
		*why = "bad write (key, range, size or notification)";
		if (*plen > m->write->total ||
		    link_target_valid(m->write->target) ||
		    link_notify_valid(m->write->sender, &m->write->message))
			rc = -EPROTO;
		break;
	case XFER__PEER__PEER_MSG__BODY_READ:
		*why = "bad read request (key or range)";
		if (link_target_valid(m->read->source))
			rc = -EPROTO;
		break;
	case XFER__PEER__PEER_MSG__BODY_NOTIFY:
		*why = "bad notify (key, range, message or name)";
		if (link_target_valid(m->notify->target) ||
		    link_notify_valid(m->notify->sender, &m->notify->message))
			rc = -EPROTO;
		break;
	case XFER__PEER__PEER_MSG__BODY_READ_DATA:  /* no such read: dropped */
	case XFER__PEER__PEER_MSG__BODY_WRITE_ACK:  /* no such write: ignored */
	case XFER__PEER__PEER_MSG__BODY_ABORT:
	case XFER__PEER__PEER_MSG__BODY_CHECK:
	case XFER__PEER__PEER_MSG__BODY_PING:
	case XFER__PEER__PEER_MSG__BODY_PONG:
	case XFER__PEER__PEER_MSG__BODY_LOOKUP:
	case XFER__PEER__PEER_MSG__BODY_LOOKUP_REPLY:
	case XFER__PEER__PEER_MSG__BODY_CHECK_REPLY:
	case XFER__PEER__PEER_MSG__BODY_QP_CONNECT:
	case XFER__PEER__PEER_MSG__BODY_QP_ACCEPT:
	case XFER__PEER__PEER_MSG__BODY_RELEASE_GRANT:
	case XFER__PEER__PEER_MSG__BODY_LAND_GRANT:
	case XFER__PEER__PEER_MSG__BODY_LANDED:
	case XFER__PEER__PEER_MSG__BODY_LAND_DONE:
	case XFER__PEER__PEER_MSG__BODY_LAND_ABORT:
		break;
	case XFER__PEER__PEER_MSG__BODY_LANE_READY:
		break;
	case XFER__PEER__PEER_MSG__BODY_LANE_OFFER:
		*why = "bad lane offer";
		if (m->lane_offer->secret.len != LINK_LANE_SECRET)
			rc = -EPROTO;
		break;
	case XFER__PEER__PEER_MSG__BODY_LAND_OPEN:
		*why = "bad landing stream (key or range)";
		if (link_target_valid(m->land_open->target))
			rc = -EPROTO;
		break;
	case XFER__PEER__PEER_MSG__BODY_ERROR:
		*why = "peer closed the link with an error";
		rc = -EPROTO;
		break;
	default:
		*why = "unexpected message on an established link";
		rc = -EPROTO;
		break;
	}
	xfer__peer__peer_msg__free_unpacked(m, NULL);
	return rc;
}
