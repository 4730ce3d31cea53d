/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_peer_frame.c - bytes from another xferd as an established link
 * receives them: a stream of frames through link_frame_check()
 * (daemon/transport/link_frame.c), which runs the link's own length-prefix
 * check and PeerMsg unpack (link_frame_prefix, link_frame_unpack, as
 * consume() and dispatch() do) and the state-free checks of data
 * frames' fields (link_target_valid, chunk size), landing streams'
 * targets among them.
 *
 * Invariants: a dropped link says why; an accepted frame lies inside
 * what was received and within the protocol's bounds, carries a payload
 * only if it is a data frame, and its targets are valid tokens.
 */
#include <errno.h>
#include <string.h>

#include "common/token_codec.h"
#include "fuzz.h"
#include "peer.pb-c.h"
#include "transport/link.h"

#define PREFIX 8u  /* u32 header length, u32 payload length */

/* What link_frame_check accepted, unpacked again and checked. */
static void check_accepted(const uint8_t *frame, int hsize, uint32_t plen)
{
	Xfer__Peer__PeerMsg *m = xfer__peer__peer_msg__unpack(
		NULL, (size_t)hsize - PREFIX, frame + PREFIX);
	const Xfer__Peer__Target *t = NULL;

	FUZZ_ASSERT(m);
	switch (m->body_case) {
	case XFER__PEER__PEER_MSG__BODY_WRITE:
		FUZZ_ASSERT(plen <= m->write->total);
		t = m->write->target;
		break;
	case XFER__PEER__PEER_MSG__BODY_READ:
		t = m->read->source;
		break;
	case XFER__PEER__PEER_MSG__BODY_NOTIFY:
		t = m->notify->target;
		break;
	case XFER__PEER__PEER_MSG__BODY_READ_DATA:
		break;
	case XFER__PEER__PEER_MSG__BODY_LAND_OPEN:
		FUZZ_ASSERT(plen == 0);
		t = m->land_open->target;
		break;
	default:
		FUZZ_ASSERT(plen == 0);
		break;
	}
	if (t) {
		FUZZ_ASSERT(t->key.len == TOKEN_KEY_LEN);
		FUZZ_ASSERT(t->offset <= t->region_length &&
			    t->length <= t->region_length - t->offset);
	}
	xfer__peer__peer_msg__free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (off < size) {
		const char *why = NULL;
		uint32_t plen = 0;
		int rc = link_frame_check(data + off, size - off, &plen, &why);

		if (rc < 0) {
			FUZZ_ASSERT(rc == -EPROTO && why && *why);
			return 0;  /* the link is dropped */
		}
		if (rc == 0)
			return 0;  /* waits for the rest of the frame */
		FUZZ_ASSERT((size_t)rc > PREFIX && (size_t)rc <= size - off);
		FUZZ_ASSERT((size_t)rc - PREFIX <= PEER_MAX_HEADER);
		FUZZ_ASSERT(plen <= PEER_MAX_PAYLOAD);
		check_accepted(data + off, rc, plen);
		/* The payload goes to the frame's sink; the next frame
		 * follows it. */
		off += (size_t)rc;
		off += plen < size - off ? plen : size - off;
	}
	return 0;
}
