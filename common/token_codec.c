/* SPDX-License-Identifier: Apache-2.0 */
/*
 * token_codec.c - region tokens: HMAC-keyed ranges in a protobuf body.
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "token.pb-c.h"
#include "common/token_codec.h"

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * The key covers every field that decides access, not only the range: a
 * token whose instance id, region length or memory kind was changed must
 * fail the key check like one whose range was changed.  Every field has
 * a fixed size here, so no two tokens give the same input.  Addresses
 * and node name stay out (token_codec.h says why).
 */
static void range_key(const uint8_t region_key[TOKEN_KEY_LEN],
		      const struct token *t, uint8_t out[TOKEN_KEY_LEN])
{
	static const char label[] = "xfer-range";
	uint8_t msg[sizeof(label) + TOKEN_INSTANCE_LEN + 4 * 8 + 4];
	uint8_t *p = msg;
	uint8_t mac[EVP_MAX_MD_SIZE];
	unsigned mac_len = 0;

	memcpy(p, label, sizeof(label));
	p += sizeof(label);
	memcpy(p, t->instance_id, TOKEN_INSTANCE_LEN);
	p += TOKEN_INSTANCE_LEN;
	put_le64(p, t->region);
	put_le64(p + 8, t->offset);
	put_le64(p + 16, t->length);
	put_le64(p + 24, t->region_length);
	for (int i = 0; i < 4; i++)
		p[32 + i] = (uint8_t)(t->mem_kind >> (8 * i));
	HMAC(EVP_sha256(), region_key, TOKEN_KEY_LEN, msg, sizeof(msg), mac,
	     &mac_len);
	memcpy(out, mac, TOKEN_KEY_LEN);
	OPENSSL_cleanse(mac, sizeof(mac));
}

void token_sign(struct token *t, const uint8_t region_key[TOKEN_KEY_LEN])
{
	range_key(region_key, t, t->key);
}

bool token_key_valid(const struct token *t,
		     const uint8_t region_key[TOKEN_KEY_LEN])
{
	uint8_t expect[TOKEN_KEY_LEN];
	bool ok;

	range_key(region_key, t, expect);
	ok = CRYPTO_memcmp(expect, t->key, TOKEN_KEY_LEN) == 0;
	OPENSSL_cleanse(expect, sizeof(expect));
	return ok;
}

static bool range_inside(const struct token *t)
{
	return t->offset <= t->region_length &&
	       t->length <= t->region_length - t->offset;
}

bool token_addr_valid(const struct token_addr *a)
{
	return (a->ip_len == 4 && a->prefix_len <= 32) ||
	       (a->ip_len == 16 && a->prefix_len <= 128);
}

int token_encode(const struct token *t, void *buf, size_t *len)
{
	Xfer__Token__Token msg = XFER__TOKEN__TOKEN__INIT;
	Xfer__Token__Address addr[TOKEN_MAX_ADDRS];
	Xfer__Token__Address *addrp[TOKEN_MAX_ADDRS];
	uint32_t tag = TOKEN_TAG;

	if (!range_inside(t))
		return -ERANGE;
	if (t->naddrs > TOKEN_MAX_ADDRS ||
	    memchr(t->node_name, 0, TOKEN_NODE_NAME_MAX) == NULL)
		return -EINVAL;
	for (uint32_t i = 0; i < t->naddrs; i++) {
		const struct token_addr *a = &t->addrs[i];
		if (!token_addr_valid(a))
			return -EINVAL;
		xfer__token__address__init(&addr[i]);
		addr[i].ip.data = (uint8_t *)a->ip;
		addr[i].ip.len = a->ip_len;
		addr[i].prefix_len = a->prefix_len;
		addr[i].port = a->port;
		addrp[i] = &addr[i];
	}
	msg.version = TOKEN_VERSION;
	msg.instance_id.data = (uint8_t *)t->instance_id;
	msg.instance_id.len = TOKEN_INSTANCE_LEN;
	msg.region = t->region;
	msg.key.data = (uint8_t *)t->key;
	msg.key.len = TOKEN_KEY_LEN;
	msg.offset = t->offset;
	msg.length = t->length;
	msg.region_length = t->region_length;
	msg.mem_kind = t->mem_kind;
	msg.n_addresses = t->naddrs;
	msg.addresses = t->naddrs ? addrp : NULL;
	if (t->node_name[0])
		msg.node_name = (char *)t->node_name;

	size_t need = sizeof(tag) + xfer__token__token__get_packed_size(&msg);
	if (*len < need)
		return -ENOSPC;
	memcpy(buf, &tag, sizeof(tag));
	xfer__token__token__pack(&msg, (uint8_t *)buf + sizeof(tag));
	*len = need;
	return 0;
}

/* Addresses and node name: hints, but still bounded and well-formed. */
static int decode_hints(const Xfer__Token__Token *msg, struct token *t)
{
	memset(t->addrs, 0, sizeof(t->addrs));
	memset(t->node_name, 0, sizeof(t->node_name));
	t->naddrs = 0;
	if (msg->n_addresses > TOKEN_MAX_ADDRS)
		return -EINVAL;
	for (size_t i = 0; i < msg->n_addresses; i++) {
		const Xfer__Token__Address *m = msg->addresses[i];
		struct token_addr *a = &t->addrs[i];
		if ((m->ip.len != 4 && m->ip.len != 16) || m->port > UINT16_MAX ||
		    m->prefix_len > 8 * m->ip.len)
			return -EINVAL;
		memcpy(a->ip, m->ip.data, m->ip.len);
		a->ip_len = (uint8_t)m->ip.len;
		a->prefix_len = (uint8_t)m->prefix_len;
		a->port = (uint16_t)m->port;
	}
	t->naddrs = (uint32_t)msg->n_addresses;
	size_t nlen = msg->node_name ? strlen(msg->node_name) : 0;
	if (nlen >= TOKEN_NODE_NAME_MAX)
		return -EINVAL;
	if (nlen)
		memcpy(t->node_name, msg->node_name, nlen);
	return 0;
}

int token_decode(const void *buf, size_t len, struct token *t)
{
	uint32_t tag;
	int err = -EINVAL;

	if (len < sizeof(tag))
		return -EINVAL;
	memcpy(&tag, buf, sizeof(tag));
	if (tag != TOKEN_TAG)
		return -EINVAL;

	Xfer__Token__Token *msg = xfer__token__token__unpack(
		NULL, len - sizeof(tag), (const uint8_t *)buf + sizeof(tag));
	if (!msg)
		return -EINVAL;
	if (msg->version != TOKEN_VERSION ||
	    msg->instance_id.len != TOKEN_INSTANCE_LEN ||
	    msg->key.len != TOKEN_KEY_LEN)
		goto out;

	memcpy(t->instance_id, msg->instance_id.data, TOKEN_INSTANCE_LEN);
	memcpy(t->key, msg->key.data, TOKEN_KEY_LEN);
	t->region = msg->region;
	t->offset = msg->offset;
	t->length = msg->length;
	t->region_length = msg->region_length;
	t->mem_kind = msg->mem_kind;
	if (!range_inside(t))
		goto out;
	err = decode_hints(msg, t);
out:
	xfer__token__token__free_unpacked(msg, NULL);
	return err;
}
