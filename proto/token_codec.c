/*
 * token_codec.c - region tokens: HMAC-keyed ranges in a protobuf body.
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "token.pb-c.h"
#include "token_codec.h"

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * The key covers every field of the token, not only the range: a token
 * whose instance id, region length or memory kind was changed must fail
 * the key check like one whose range was changed.  Every field has a
 * fixed size here, so no two tokens give the same input.
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

int token_encode(const struct token *t, void *buf, size_t *len)
{
	Xfer__Token__Token msg = XFER__TOKEN__TOKEN__INIT;
	uint32_t tag = TOKEN_TAG;

	if (!range_inside(t))
		return -ERANGE;
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

	size_t need = sizeof(tag) + xfer__token__token__get_packed_size(&msg);
	if (*len < need)
		return -ENOSPC;
	memcpy(buf, &tag, sizeof(tag));
	xfer__token__token__pack(&msg, (uint8_t *)buf + sizeof(tag));
	*len = need;
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
	err = range_inside(t) ? 0 : -EINVAL;
out:
	xfer__token__token__free_unpacked(msg, NULL);
	return err;
}
