/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stream_wire.c - the stream token and the HELLO record (stream_wire.h):
 * fixed little-endian layouts, written and checked field by field.
 */
#include <errno.h>
#include <string.h>

#include "stream_wire.h"

#define STREAM_TOKEN_MAGIC 0x52545358u  /* "XSTR" */
#define STREAM_HELLO_MAGIC 0x4c485358u  /* "XSHL" */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return get16(p) | (uint32_t)get16(p + 2) << 16;
}

static uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

bool stream_geometry_ok(uint32_t nslots, uint64_t slot_size)
{
	return nslots > 0 && slot_size > 0 && slot_size <= UINT32_MAX &&
	       slot_size <= UINT64_MAX / nslots;
}

size_t stream_token_encode(const struct stream_token *t, uint8_t *out)
{
	memset(out, 0, STREAM_TOKEN_HDR);
	put32(out, STREAM_TOKEN_MAGIC);
	put16(out + 4, XFER_STREAM_VERSION);
	put32(out + 8, t->nslots);
	put64(out + 16, t->slot_size);
	put64(out + 24, t->id);
	put16(out + 32, t->slots_len);
	put16(out + 34, t->mbox_len);
	put64(out + 40, t->client);
	memcpy(out + STREAM_TOKEN_HDR, t->slots_tok, t->slots_len);
	memcpy(out + STREAM_TOKEN_HDR + t->slots_len, t->mbox_tok, t->mbox_len);
	return STREAM_TOKEN_HDR + (size_t)t->slots_len + t->mbox_len;
}

int stream_token_parse(const void *token, size_t len, struct stream_token *t)
{
	const uint8_t *p = token;

	if (!token || len < STREAM_TOKEN_HDR || len > XFER_STREAM_TOKEN_MAX ||
	    get32(p) != STREAM_TOKEN_MAGIC)
		return -EINVAL;
	if (get16(p + 4) != XFER_STREAM_VERSION)
		return -EPROTONOSUPPORT;
	t->nslots = get32(p + 8);
	t->slot_size = get64(p + 16);
	t->id = get64(p + 24);
	t->slots_len = get16(p + 32);
	t->mbox_len = get16(p + 34);
	t->client = get64(p + 40);
	if (get16(p + 6) || get32(p + 12) || get32(p + 36) ||
	    !stream_geometry_ok(t->nslots, t->slot_size) || t->slots_len == 0 ||
	    t->slots_len > XFER_TOKEN_MAX || t->mbox_len == 0 ||
	    t->mbox_len > XFER_TOKEN_MAX || t->client == 0 ||
	    len != STREAM_TOKEN_HDR + (size_t)t->slots_len + t->mbox_len)
		return -EINVAL;
	t->slots_tok = p + STREAM_TOKEN_HDR;
	t->mbox_tok = t->slots_tok + t->slots_len;
	return 0;
}

size_t stream_hello_encode(uint8_t *rec, uint64_t id,
			   const struct xfer_cqe_sender *self,
			   const uint8_t *tok, uint16_t tok_len)
{
	put32(rec, STREAM_HELLO_MAGIC);
	put16(rec + 4, XFER_STREAM_VERSION);
	put16(rec + 6, tok_len);
	put64(rec + 8, id);
	put64(rec + 16, self->client);
	memcpy(rec + 24, self->node, sizeof(self->node));
	memcpy(rec + STREAM_HELLO_HDR, tok, tok_len);
	return STREAM_HELLO_HDR + (size_t)tok_len;
}

int stream_hello_parse(const uint8_t *rec, uint64_t id, const uint8_t **tok,
		       uint16_t *tok_len, struct xfer_cqe_sender *who)
{
	uint16_t n = get16(rec + 6);

	if (get32(rec) != STREAM_HELLO_MAGIC ||
	    get16(rec + 4) != XFER_STREAM_VERSION || get64(rec + 8) != id ||
	    get64(rec + 16) == 0 || n == 0 || n > XFER_TOKEN_MAX)
		return -EPROTO;
	*who = (struct xfer_cqe_sender){ .client = get64(rec + 16) };
	memcpy(who->node, rec + 24, sizeof(who->node));
	*tok = rec + STREAM_HELLO_HDR;
	*tok_len = n;
	return 0;
}
