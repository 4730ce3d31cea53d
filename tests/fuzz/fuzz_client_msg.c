/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_client_msg.c - a libxfer client's control packet as xferd reads
 * it after the handshake (client.c's dispatch): the wire tag, the
 * ClientMsg unpack, and client_msg_check() (daemon/client_msg.c), the
 * validation client.c runs before any handler acts.
 *
 * Input: one byte, the number of descriptors the packet came with (mod
 * WIRE_MAX_FDS + 1), then the packet itself.
 *
 * Invariants: a verdict is 0, -EPROTO or -EINVAL and an error says why;
 * what passes holds what the handlers rely on (descriptors only where
 * they belong: a memfd region, a VMM allocation, a prepared list's
 * entries; names and node names in bounds).
 */
#include <errno.h>
#include <string.h>

#include "client_msg.h"
#include "common/pubname.h"
#include "common/wire.h"
#include "config.h"
#include "fuzz.h"
#include "meta/names.h"

static void check_passed(const Xfer__Client__ClientMsg *m, unsigned nfds)
{
	const char *slash;

	switch (m->body_case) {
	case XFER__CLIENT__CLIENT_MSG__BODY_REG:
		FUZZ_ASSERT(m->reg->length != 0);
		if (m->reg->kind == XFER__CLIENT__MEM_KIND__MEM_MEMFD)
			FUZZ_ASSERT(nfds == 1);
		else if (m->reg->kind == XFER__CLIENT__MEM_KIND__MEM_CMA)
			FUZZ_ASSERT(nfds == 0);
		else
			FUZZ_ASSERT(m->reg->kind == XFER__CLIENT__MEM_KIND__MEM_CUDA &&
				    m->reg->cuda && nfds == (m->reg->cuda->vmm ? 1u : 0u));
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_PUBLISH:
		FUZZ_ASSERT(nfds == 0);
		FUZZ_ASSERT(strlen(m->publish->name) <= PUBNAME_MAX);
		FUZZ_ASSERT(!(m->publish->flags & ~NAMES_FLAGS));
		FUZZ_ASSERT(m->publish->token.len >= 1 &&
			    m->publish->token.len <= NAMES_TOKEN_MAX);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP:
		FUZZ_ASSERT(nfds == 0);
		slash = strchr(m->lookup->name, '/');
		/* handle_lookup copies the node part into CONFIG_HOST_MAX. */
		if (slash)
			FUZZ_ASSERT((size_t)(slash - m->lookup->name) <
				    CONFIG_HOST_MAX);
		FUZZ_ASSERT(names_valid(strrchr(m->lookup->name, '/')
					? strrchr(m->lookup->name, '/') + 1
					: m->lookup->name));
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE:
		/* The entries come in exactly one memfd. */
		FUZZ_ASSERT(nfds == 1 && m->dlist_create->count != 0);
		break;
	default:
		FUZZ_ASSERT(nfds == 0);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = NULL;

	if (size < 1 || size - 1 > WIRE_MAX_PACKET)
		return 0;
	unsigned nfds = data[0] % (WIRE_MAX_FDS + 1);
	const uint8_t *pkt = data + 1;
	size_t len = size - 1;

	if (wire_tag(pkt, len) != WIRE_TAG_CLIENT)
		return 0;
	Xfer__Client__ClientMsg *m = xfer__client__client_msg__unpack(
		NULL, len - WIRE_TAG_LEN, pkt + WIRE_TAG_LEN);
	if (!m)
		return 0;
	int rc = client_msg_check(m, nfds, &why);
	FUZZ_ASSERT(rc == 0 || rc == -EPROTO || rc == -EINVAL);
	if (rc)
		FUZZ_ASSERT(why && *why);
	else
		check_passed(m, nfds);
	xfer__client__client_msg__free_unpacked(m, NULL);
	return 0;
}
