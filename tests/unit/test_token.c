/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_token.c - region tokens (common/token_codec.c): encode/decode
 * round trips, signing and key checks, tampering with every bit and byte
 * of an encoded token, widening or moving a granted range, and the
 * encoder's and decoder's refusals.  Also the owner's addresses and node
 * name: they survive a round trip, the largest token still fits in
 * XFER_TOKEN_MAX, bad ones are refused both ways, and, being hints,
 * changing them leaves the key valid while the rest stays guarded.
 *
 * Longer than most files: one suite for the one codec, with the hints
 * tested beside the fields they travel with.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "token.pb-c.h"
#include "common/token_codec.h"
#include "xfer.h"

static const uint8_t region_key[TOKEN_KEY_LEN] = {
	0x3c, 0x91, 0x07, 0xee, 0x42, 0x5a, 0xb0, 0x18,
	0x66, 0xd3, 0x2f, 0x84, 0x01, 0x9e, 0x7b, 0xc5,
};

/* A sub-range token of a 1 MiB region, signed with region_key. */
static struct token sample(void)
{
	struct token t = {
		.region = 0x1234,
		.offset = 4096,
		.length = 8192,
		.region_length = 1u << 20,
		.mem_kind = 1,
	};

	for (unsigned i = 0; i < TOKEN_INSTANCE_LEN; i++)
		t.instance_id[i] = (uint8_t)(0xa0 + i);
	token_sign(&t, region_key);
	return t;
}

/* The fields the key covers. */
static bool auth_equal(const struct token *a, const struct token *b)
{
	return memcmp(a->instance_id, b->instance_id, TOKEN_INSTANCE_LEN) == 0 &&
	       memcmp(a->key, b->key, TOKEN_KEY_LEN) == 0 &&
	       a->region == b->region && a->offset == b->offset &&
	       a->length == b->length &&
	       a->region_length == b->region_length &&
	       a->mem_kind == b->mem_kind;
}

static bool addr_equal(const struct token_addr *a, const struct token_addr *b)
{
	return a->ip_len == b->ip_len && a->prefix_len == b->prefix_len &&
	       a->port == b->port && memcmp(a->ip, b->ip, a->ip_len) == 0;
}

/* Everything, the hints included. */
static bool token_equal(const struct token *a, const struct token *b)
{
	if (!auth_equal(a, b) || a->naddrs != b->naddrs ||
	    strcmp(a->node_name, b->node_name) != 0)
		return false;
	for (uint32_t i = 0; i < a->naddrs; i++)
		if (!addr_equal(&a->addrs[i], &b->addrs[i]))
			return false;
	return true;
}

static size_t encode(const struct token *t, uint8_t *buf, size_t cap)
{
	size_t len = cap;

	ck_assert_int_eq(token_encode(t, buf, &len), 0);
	ck_assert_uint_gt(len, 4);
	ck_assert_uint_le(len, cap);
	return len;
}

START_TEST(round_trip)
{
	const struct token t = sample();
	uint8_t buf[256];
	struct token d;

	size_t len = encode(&t, buf, sizeof(buf));
	uint32_t tag;
	memcpy(&tag, buf, 4);
	ck_assert_uint_eq(tag, TOKEN_TAG);

	memset(&d, 0xee, sizeof(d));
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert(token_equal(&t, &d));
	ck_assert_mem_eq(d.instance_id, t.instance_id, TOKEN_INSTANCE_LEN);
	ck_assert_uint_eq(d.region, 0x1234);
	ck_assert_uint_eq(d.offset, 4096);
	ck_assert_uint_eq(d.length, 8192);
	ck_assert_uint_eq(d.region_length, 1u << 20);
	ck_assert_uint_eq(d.mem_kind, 1);
	ck_assert(token_key_valid(&d, region_key));

	/* Extreme values survive too: whole region, at the top of u64. */
	struct token big = t;
	big.region = UINT64_MAX;
	big.region_length = UINT64_MAX;
	big.offset = 0;
	big.length = UINT64_MAX;
	big.mem_kind = UINT32_MAX;
	token_sign(&big, region_key);
	len = encode(&big, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert(token_equal(&big, &d));
	ck_assert(token_key_valid(&d, region_key));

	/* And the empty range at the very end. */
	struct token end = t;
	end.offset = end.region_length;
	end.length = 0;
	token_sign(&end, region_key);
	len = encode(&end, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert(token_equal(&end, &d));
}
END_TEST

START_TEST(sign_and_check)
{
	struct token t = sample();
	uint8_t first[TOKEN_KEY_LEN];

	ck_assert(token_key_valid(&t, region_key));
	memcpy(first, t.key, sizeof(first));
	/* Deterministic: anyone holding the region key derives it. */
	token_sign(&t, region_key);
	ck_assert_mem_eq(t.key, first, TOKEN_KEY_LEN);

	/* Not the region key itself, nor all zeroes. */
	ck_assert(memcmp(t.key, region_key, TOKEN_KEY_LEN) != 0);
	static const uint8_t zero[TOKEN_KEY_LEN];
	ck_assert(memcmp(t.key, zero, TOKEN_KEY_LEN) != 0);

	/* Every bit of the key matters. */
	for (unsigned i = 0; i < TOKEN_KEY_LEN * 8; i++) {
		struct token bad = t;
		bad.key[i / 8] ^= (uint8_t)(1u << (i % 8));
		ck_assert_msg(!token_key_valid(&bad, region_key),
			      "key with bit %u flipped still valid", i);
	}
}
END_TEST

START_TEST(wrong_region_key)
{
	const struct token t = sample();
	uint8_t other[TOKEN_KEY_LEN];

	memcpy(other, region_key, sizeof(other));
	for (unsigned i = 0; i < TOKEN_KEY_LEN * 8; i++) {
		other[i / 8] ^= (uint8_t)(1u << (i % 8));
		ck_assert(!token_key_valid(&t, other));
		other[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	static const uint8_t zero[TOKEN_KEY_LEN];
	ck_assert(!token_key_valid(&t, zero));

	/* A token signed with another key is not valid under ours. */
	struct token forged = t;
	other[0] ^= 0x80;
	token_sign(&forged, other);
	ck_assert(token_key_valid(&forged, other));
	ck_assert(!token_key_valid(&forged, region_key));
}
END_TEST

/*
 * Change the encoded token at byte i with `mask` and check that the
 * result is either rejected by the decoder or rejected by the key check.
 * A changed encoding that decodes to exactly the same fields would be
 * harmless, but protobuf has no such redundancy in what token_encode
 * writes (each field at most once, minimal varints, no defaults), so the
 * test insists that every change is caught.
 */
static void tamper(const uint8_t *enc, size_t len, size_t i, uint8_t mask,
		   const struct token *orig, unsigned *decodable)
{
	uint8_t buf[256];
	struct token d;

	memcpy(buf, enc, len);
	buf[i] ^= mask;
	if (token_decode(buf, len, &d) != 0)
		return;
	(*decodable)++;
	ck_assert_msg(!token_equal(&d, orig),
		      "byte %zu ^ 0x%02x decodes to the same token", i, mask);
	ck_assert_msg(!token_key_valid(&d, region_key),
		      "byte %zu ^ 0x%02x: tampered token still valid "
		      "(region %llu off %llu len %llu rlen %llu kind %u)",
		      i, mask, (unsigned long long)d.region,
		      (unsigned long long)d.offset,
		      (unsigned long long)d.length,
		      (unsigned long long)d.region_length, d.mem_kind);
}

START_TEST(tamper_every_byte)
{
	const struct token t = sample();
	uint8_t enc[256];
	size_t len = encode(&t, enc, sizeof(enc));
	unsigned decodable = 0;

	for (size_t i = 0; i < len; i++) {
		tamper(enc, len, i, 0xff, &t, &decodable);
		for (unsigned b = 0; b < 8; b++)
			tamper(enc, len, i, (uint8_t)(1u << b), &t,
			       &decodable);
	}
	/* Most changes land in the instance id and key bytes and decode
	 * fine: the key check, not the parser, must catch them. */
	ck_assert_uint_ge(decodable, 9 * (TOKEN_INSTANCE_LEN + TOKEN_KEY_LEN));

	/* Dropping or adding bytes is caught as well. */
	struct token d;
	for (size_t cut = 0; cut < len; cut++)
		ck_assert(token_decode(enc, cut, &d) != 0 ||
			  !token_key_valid(&d, region_key));
}
END_TEST

/* Re-encode a decoded token with a changed range but the old key. */
static bool still_valid_after(void (*change)(struct token *))
{
	const struct token t = sample();
	uint8_t enc[256];
	struct token d;

	size_t len = encode(&t, enc, sizeof(enc));
	ck_assert_int_eq(token_decode(enc, len, &d), 0);
	change(&d);
	len = encode(&d, enc, sizeof(enc));
	ck_assert_int_eq(token_decode(enc, len, &d), 0);
	return token_key_valid(&d, region_key);
}

static void widen_to_region(struct token *t)
{
	t->offset = 0;
	t->length = t->region_length;
}

static void grow_length(struct token *t)
{
	t->length += 1;
}

static void lower_offset(struct token *t)
{
	t->offset -= 1;
	t->length += 1;
}

static void shift_range(struct token *t)
{
	t->offset += t->length;
}

static void shrink_length(struct token *t)
{
	t->length -= 1;
}

static void other_region(struct token *t)
{
	t->region += 1;
}

static void other_instance(struct token *t)
{
	t->instance_id[0] ^= 1;
}

static void other_region_length(struct token *t)
{
	t->region_length *= 2;
}

static void other_mem_kind(struct token *t)
{
	t->mem_kind = 2;
}

static void unchanged(struct token *t)
{
	(void)t;
}

START_TEST(widen_range)
{
	ck_assert(still_valid_after(unchanged));
	ck_assert(!still_valid_after(widen_to_region));
	ck_assert(!still_valid_after(grow_length));
	ck_assert(!still_valid_after(lower_offset));
	ck_assert(!still_valid_after(shift_range));
	/* Narrowing needs a new key too: the key names one exact range. */
	ck_assert(!still_valid_after(shrink_length));
	ck_assert(!still_valid_after(other_region));
	/* The rest of the description is authenticated as well. */
	ck_assert(!still_valid_after(other_instance));
	ck_assert(!still_valid_after(other_region_length));
	ck_assert(!still_valid_after(other_mem_kind));

	/* The holder of the region key may sign any narrower range. */
	struct token sub = sample();
	sub.offset += 100;
	sub.length -= 200;
	token_sign(&sub, region_key);
	ck_assert(token_key_valid(&sub, region_key));
}
END_TEST

START_TEST(encode_refuses_range)
{
	struct token t = sample();
	uint8_t buf[256];
	size_t len;

	struct { uint64_t off, len, rlen; } bad[] = {
		{ 0, (1u << 20) + 1, 1u << 20 },
		{ (1u << 20) + 1, 0, 1u << 20 },
		{ (1u << 20) - 10, 11, 1u << 20 },
		{ 1, UINT64_MAX, 1u << 20 },
		{ UINT64_MAX, 2, 1u << 20 },   /* offset + length wraps */
		{ 2, UINT64_MAX - 1, UINT64_MAX }, /* wraps to exactly 0 */
		{ 0, 1, 0 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t.offset = bad[i].off;
		t.length = bad[i].len;
		t.region_length = bad[i].rlen;
		len = sizeof(buf);
		memset(buf, 0, sizeof(buf));
		ck_assert_msg(token_encode(&t, buf, &len) == -ERANGE,
			      "range %zu accepted", i);
		ck_assert_uint_eq(len, sizeof(buf));
		ck_assert_uint_eq(buf[0], 0); /* nothing written */
	}
	/* The edges that are inside. */
	t.region_length = 1u << 20;
	t.offset = (1u << 20) - 10;
	t.length = 10;
	len = sizeof(buf);
	ck_assert_int_eq(token_encode(&t, buf, &len), 0);
	t.offset = 0;
	t.length = 0;
	t.region_length = 0;
	len = sizeof(buf);
	ck_assert_int_eq(token_encode(&t, buf, &len), 0);
}
END_TEST

START_TEST(encode_small_buffer)
{
	const struct token t = sample();
	uint8_t buf[256], small[256];

	size_t need = encode(&t, buf, sizeof(buf));
	for (size_t cap = 0; cap < need; cap++) {
		size_t len = cap;
		memset(small, 0x77, sizeof(small));
		ck_assert_int_eq(token_encode(&t, small, &len), -ENOSPC);
		ck_assert_uint_eq(len, cap);
		ck_assert_uint_eq(small[0], 0x77);
	}
	size_t len = need;
	ck_assert_int_eq(token_encode(&t, small, &len), 0);
	ck_assert_uint_eq(len, need);
	ck_assert_mem_eq(small, buf, need);
	ck_assert_uint_eq(small[need], 0x77); /* not a byte more */
}
END_TEST

/* Pack msg behind tag into buf; returns the length. */
static size_t pack_raw(uint32_t tag, const Xfer__Token__Token *msg,
		       uint8_t *buf, size_t cap)
{
	size_t n = xfer__token__token__get_packed_size(msg);

	ck_assert_uint_le(n + 4, cap);
	memcpy(buf, &tag, 4);
	xfer__token__token__pack(msg, buf + 4);
	return n + 4;
}

/* A well-formed message equal to sample(); each case breaks one thing. */
static Xfer__Token__Token raw_sample(struct token *t)
{
	Xfer__Token__Token m = XFER__TOKEN__TOKEN__INIT;

	*t = sample();
	m.version = TOKEN_VERSION;
	m.instance_id.data = t->instance_id;
	m.instance_id.len = TOKEN_INSTANCE_LEN;
	m.region = t->region;
	m.key.data = t->key;
	m.key.len = TOKEN_KEY_LEN;
	m.offset = t->offset;
	m.length = t->length;
	m.region_length = t->region_length;
	m.mem_kind = t->mem_kind;
	return m;
}

START_TEST(decode_rejects_malformed)
{
	struct token t, d;
	uint8_t buf[256];
	size_t len;
	Xfer__Token__Token m = raw_sample(&t);

	/* The control: the hand-made message decodes. */
	len = pack_raw(TOKEN_TAG, &m, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert(token_equal(&d, &t));
	ck_assert(token_key_valid(&d, region_key));

	/* Wrong tags. */
	const uint32_t tags[] = { 0, TOKEN_TAG ^ 1, TOKEN_TAG ^ 0x80000000u,
				  0x43524658u /* "XFRC" */ };
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
		len = pack_raw(tags[i], &m, buf, sizeof(buf));
		ck_assert_int_eq(token_decode(buf, len, &d), -EINVAL);
	}

	/* Wrong versions. */
	const uint32_t versions[] = { 0, TOKEN_VERSION + 1, UINT32_MAX };
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		m = raw_sample(&t);
		m.version = versions[i];
		len = pack_raw(TOKEN_TAG, &m, buf, sizeof(buf));
		ck_assert_int_eq(token_decode(buf, len, &d), -EINVAL);
	}

	/* Key and instance id of the wrong size. */
	uint8_t long_field[TOKEN_KEY_LEN + TOKEN_INSTANCE_LEN + 1] = { 0 };
	const size_t sizes[] = { 0, 1, TOKEN_KEY_LEN - 1, TOKEN_KEY_LEN + 1,
				 sizeof(long_field) };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		m = raw_sample(&t);
		memcpy(long_field, t.key, TOKEN_KEY_LEN);
		m.key.data = long_field;
		m.key.len = sizes[i];
		len = pack_raw(TOKEN_TAG, &m, buf, sizeof(buf));
		ck_assert_msg(token_decode(buf, len, &d) == -EINVAL,
			      "key of %zu bytes accepted", sizes[i]);

		m = raw_sample(&t);
		memcpy(long_field, t.instance_id, TOKEN_INSTANCE_LEN);
		m.instance_id.data = long_field;
		m.instance_id.len = sizes[i];
		len = pack_raw(TOKEN_TAG, &m, buf, sizeof(buf));
		ck_assert_msg(token_decode(buf, len, &d) == -EINVAL,
			      "instance id of %zu bytes accepted", sizes[i]);
	}

	/* A range outside the region, which token_encode never writes. */
	m = raw_sample(&t);
	m.offset = m.region_length;
	m.length = 1;
	len = pack_raw(TOKEN_TAG, &m, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), -EINVAL);
	m = raw_sample(&t);
	m.offset = UINT64_MAX;
	m.length = 2;
	len = pack_raw(TOKEN_TAG, &m, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), -EINVAL);

	/* Too short for a tag; a tag alone (version 0); not protobuf. */
	uint32_t tag = TOKEN_TAG;
	memcpy(buf, &tag, 4);
	for (size_t n = 0; n <= 4; n++)
		ck_assert_int_eq(token_decode(buf, n, &d), -EINVAL);
	memset(buf + 4, 0xff, 16);
	ck_assert_int_eq(token_decode(buf, 20, &d), -EINVAL);
}
END_TEST

/* --- the owner's addresses and node name --- */

static struct token_addr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d,
			    uint8_t prefix, uint16_t port)
{
	return (struct token_addr){ .ip = { a, b, c, d }, .ip_len = 4,
				    .prefix_len = prefix, .port = port };
}

static struct token_addr v6(uint8_t last, uint8_t prefix, uint16_t port)
{
	struct token_addr a = { .ip = { 0xfd, 0x00, 0x12, 0x34 }, .ip_len = 16,
				.prefix_len = prefix, .port = port };

	a.ip[15] = last;
	return a;
}

/* sample() with two rails and a node name. */
static struct token sample_hints(void)
{
	struct token t = sample();

	t.addrs[0] = v4(10, 1, 2, 3, 24, 7474);
	t.addrs[1] = v6(1, 64, 7475);
	t.naddrs = 2;
	strcpy(t.node_name, "node-a.cluster");
	return t;
}

START_TEST(hints_round_trip)
{
	struct token t = sample_hints(), d;
	uint8_t buf[XFER_TOKEN_MAX];

	size_t len = encode(&t, buf, sizeof(buf));
	memset(&d, 0xee, sizeof(d));
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert(token_equal(&t, &d));
	ck_assert_uint_eq(d.naddrs, 2);
	ck_assert_uint_eq(d.addrs[0].ip_len, 4);
	ck_assert_mem_eq(d.addrs[0].ip, ((uint8_t[]){ 10, 1, 2, 3 }), 4);
	ck_assert_uint_eq(d.addrs[0].prefix_len, 24);
	ck_assert_uint_eq(d.addrs[0].port, 7474);
	ck_assert_uint_eq(d.addrs[1].ip_len, 16);
	ck_assert_mem_eq(d.addrs[1].ip, t.addrs[1].ip, 16);
	ck_assert_uint_eq(d.addrs[1].prefix_len, 64);
	ck_assert_uint_eq(d.addrs[1].port, 7475);
	ck_assert_str_eq(d.node_name, "node-a.cluster");
	ck_assert(token_key_valid(&d, region_key));
	/* What the decoder did not fill is zero, not left over. */
	static const struct token_addr zero;
	for (unsigned i = 2; i < TOKEN_MAX_ADDRS; i++)
		ck_assert_mem_eq(&d.addrs[i], &zero, sizeof(zero));
	ck_assert_mem_eq(d.addrs[0].ip + 4, zero.ip, 12);
	for (size_t i = strlen(d.node_name); i < TOKEN_NODE_NAME_MAX; i++)
		ck_assert_uint_eq((unsigned char)d.node_name[i], 0);

	/* Edges: port 0 and 65535, prefixes 0 and full. */
	t.addrs[0] = v4(192, 168, 0, 1, 32, 0);
	t.addrs[1] = v6(0xff, 128, 65535);
	t.addrs[2] = v4(0, 0, 0, 0, 0, 1);
	t.addrs[3] = v6(2, 0, 2);
	t.naddrs = 4;
	len = encode(&t, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert(token_equal(&t, &d));

	/* No hints at all is still a token (what sample() is). */
	t.naddrs = 0;
	t.node_name[0] = '\0';
	len = encode(&t, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert(token_equal(&t, &d));
	ck_assert_uint_eq(d.naddrs, 0);
	ck_assert_str_eq(d.node_name, "");
}
END_TEST

/* The biggest token there is still fits what libxfer promises. */
START_TEST(largest_token_fits)
{
	struct token t = sample();
	uint8_t buf[1024];
	struct token d;

	t.region = t.region_length = t.length = UINT64_MAX;
	t.offset = 0;
	t.mem_kind = UINT32_MAX;
	for (unsigned i = 0; i < TOKEN_MAX_ADDRS; i++) {
		t.addrs[i] = v6((uint8_t)i, 128, 65535);
		memset(t.addrs[i].ip, 0xff, 15);
	}
	t.naddrs = TOKEN_MAX_ADDRS;
	memset(t.node_name, 'n', TOKEN_NODE_NAME_MAX - 1);
	t.node_name[TOKEN_NODE_NAME_MAX - 1] = '\0';
	token_sign(&t, region_key);
	size_t len = encode(&t, buf, sizeof(buf));
	ck_assert_msg(len <= XFER_TOKEN_MAX,
		      "largest token is %zu bytes", len);
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert(token_equal(&t, &d));
	ck_assert(token_key_valid(&d, region_key));
}
END_TEST

START_TEST(encode_refuses_hints)
{
	uint8_t buf[512];
	struct token t;
	size_t len;

	struct token_addr bad[] = {
		{ .ip_len = 0 },
		{ .ip_len = 5, .prefix_len = 8 },
		{ .ip_len = 15 },
		{ .ip_len = 17 },
		{ .ip = { 10 }, .ip_len = 4, .prefix_len = 33 },
		{ .ip = { 0xfd }, .ip_len = 16, .prefix_len = 129 },
		{ .ip = { 0xfd }, .ip_len = 16, .prefix_len = 255 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert(!token_addr_valid(&bad[i]));
		t = sample_hints();
		t.addrs[1] = bad[i];
		len = sizeof(buf);
		memset(buf, 0, sizeof(buf));
		ck_assert_msg(token_encode(&t, buf, &len) == -EINVAL,
			      "address %zu accepted", i);
		ck_assert_uint_eq(len, sizeof(buf));
		ck_assert_uint_eq(buf[0], 0);
	}
	t = sample_hints();
	ck_assert(token_addr_valid(&t.addrs[0]));
	ck_assert(token_addr_valid(&t.addrs[1]));

	/* More addresses than a token holds. */
	for (unsigned i = 0; i < TOKEN_MAX_ADDRS; i++)
		t.addrs[i] = v4(10, 0, 0, (uint8_t)i, 8, 7474);
	t.naddrs = TOKEN_MAX_ADDRS;
	len = sizeof(buf);
	ck_assert_int_eq(token_encode(&t, buf, &len), 0);
	t.naddrs = TOKEN_MAX_ADDRS + 1;
	len = sizeof(buf);
	ck_assert_int_eq(token_encode(&t, buf, &len), -EINVAL);
	t.naddrs = UINT32_MAX;
	len = sizeof(buf);
	ck_assert_int_eq(token_encode(&t, buf, &len), -EINVAL);

	/* A node name that fills its array has no room for the NUL. */
	t = sample_hints();
	memset(t.node_name, 'x', TOKEN_NODE_NAME_MAX);
	len = sizeof(buf);
	ck_assert_int_eq(token_encode(&t, buf, &len), -EINVAL);
	t.node_name[TOKEN_NODE_NAME_MAX - 1] = '\0';
	len = sizeof(buf);
	ck_assert_int_eq(token_encode(&t, buf, &len), 0);

	/* A bad range is still -ERANGE first. */
	t = sample_hints();
	t.addrs[0].ip_len = 3;
	t.length = t.region_length + 1;
	len = sizeof(buf);
	ck_assert_int_eq(token_encode(&t, buf, &len), -ERANGE);
}
END_TEST

/* Pack raw_sample() with the given addresses and node name. */
static size_t pack_hints(Xfer__Token__Address *const *addrs, size_t n,
			 const char *node_name, uint8_t *buf, size_t cap)
{
	struct token t;
	Xfer__Token__Token m = raw_sample(&t);

	m.addresses = (Xfer__Token__Address **)addrs;
	m.n_addresses = n;
	m.node_name = (char *)node_name;
	return pack_raw(TOKEN_TAG, &m, buf, cap);
}

START_TEST(decode_rejects_hints)
{
	uint8_t ip[17] = { 10, 0, 0, 1 };
	uint8_t buf[1024];
	struct token d;
	size_t len;

	struct { size_t ip_len; uint32_t prefix, port; bool ok; } cases[] = {
		{ 4, 24, 7474, true },
		{ 16, 64, 7474, true },
		{ 4, 32, 65535, true },
		{ 16, 128, 0, true },
		{ 0, 0, 7474, false },
		{ 3, 8, 7474, false },
		{ 5, 8, 7474, false },
		{ 15, 8, 7474, false },
		{ 17, 8, 7474, false },
		{ 4, 33, 7474, false },
		{ 16, 129, 7474, false },
		{ 4, 24, 65536, false },
		{ 16, 64, UINT32_MAX, false },
		{ 4, UINT32_MAX, 1, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		Xfer__Token__Address a = XFER__TOKEN__ADDRESS__INIT;
		Xfer__Token__Address *ap[] = { &a };
		a.ip.data = ip;
		a.ip.len = cases[i].ip_len;
		a.prefix_len = cases[i].prefix;
		a.port = cases[i].port;
		len = pack_hints(ap, 1, "n", buf, sizeof(buf));
		ck_assert_msg(token_decode(buf, len, &d) ==
				      (cases[i].ok ? 0 : -EINVAL),
			      "address case %zu", i);
		if (cases[i].ok) {
			ck_assert_uint_eq(d.naddrs, 1);
			ck_assert_uint_eq(d.addrs[0].ip_len, cases[i].ip_len);
			ck_assert_uint_eq(d.addrs[0].prefix_len, cases[i].prefix);
			ck_assert_uint_eq(d.addrs[0].port, cases[i].port);
			ck_assert_mem_eq(d.addrs[0].ip, ip, cases[i].ip_len);
		}
	}

	/* Up to TOKEN_MAX_ADDRS of them; the interface name is read past. */
	Xfer__Token__Address many[TOKEN_MAX_ADDRS + 1];
	Xfer__Token__Address *mp[TOKEN_MAX_ADDRS + 1];
	for (unsigned i = 0; i <= TOKEN_MAX_ADDRS; i++) {
		xfer__token__address__init(&many[i]);
		many[i].ip.data = ip;
		many[i].ip.len = 4;
		many[i].prefix_len = 16;
		many[i].port = 7000 + i;
		many[i].ifname = (char *)"eth0";
		mp[i] = &many[i];
	}
	len = pack_hints(mp, TOKEN_MAX_ADDRS, NULL, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert_uint_eq(d.naddrs, TOKEN_MAX_ADDRS);
	ck_assert_uint_eq(d.addrs[TOKEN_MAX_ADDRS - 1].port,
			  7000 + TOKEN_MAX_ADDRS - 1);
	len = pack_hints(mp, TOKEN_MAX_ADDRS + 1, NULL, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), -EINVAL);

	/* Node names up to 63 bytes. */
	char name[TOKEN_NODE_NAME_MAX + 1];
	memset(name, 'h', sizeof(name));
	name[TOKEN_NODE_NAME_MAX - 1] = '\0';
	len = pack_hints(NULL, 0, name, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), 0);
	ck_assert_str_eq(d.node_name, name);
	name[TOKEN_NODE_NAME_MAX - 1] = 'h';
	name[TOKEN_NODE_NAME_MAX] = '\0';
	len = pack_hints(NULL, 0, name, buf, sizeof(buf));
	ck_assert_int_eq(token_decode(buf, len, &d), -EINVAL);
}
END_TEST

static void move_address(struct token *t)
{
	t->addrs[0].ip[3] ^= 0x40;
}

static void other_port(struct token *t)
{
	t->addrs[1].port = 1;
}

static void other_prefix(struct token *t)
{
	t->addrs[0].prefix_len = 8;
}

static void drop_addresses(struct token *t)
{
	t->naddrs = 0;
}

static void add_address(struct token *t)
{
	t->addrs[t->naddrs++] = v4(203, 0, 113, 9, 32, 9999);
}

static void other_node_name(struct token *t)
{
	strcpy(t->node_name, "elsewhere");
}

/* As still_valid_after, on a token with hints. */
static bool hints_still_valid_after(void (*change)(struct token *),
				    bool *hints_changed)
{
	const struct token t = sample_hints();
	uint8_t enc[XFER_TOKEN_MAX];
	struct token d;

	size_t len = encode(&t, enc, sizeof(enc));
	ck_assert_int_eq(token_decode(enc, len, &d), 0);
	change(&d);
	len = encode(&d, enc, sizeof(enc));
	ck_assert_int_eq(token_decode(enc, len, &d), 0);
	*hints_changed = !token_equal(&t, &d) && auth_equal(&t, &d);
	return token_key_valid(&d, region_key);
}

START_TEST(hints_not_authenticated)
{
	void (*hint_changes[])(struct token *) = {
		move_address, other_port, other_prefix, drop_addresses,
		add_address, other_node_name,
	};
	bool changed;

	/* By design: hints may be rewritten and the key stays valid. */
	for (size_t i = 0; i < sizeof(hint_changes) / sizeof(hint_changes[0]);
	     i++) {
		ck_assert_msg(hints_still_valid_after(hint_changes[i], &changed),
			      "hint change %zu broke the key", i);
		ck_assert_msg(changed, "hint change %zu changed nothing", i);
	}
	/* What grants access is guarded with hints present as without. */
	ck_assert(!hints_still_valid_after(widen_to_region, &changed));
	ck_assert(!hints_still_valid_after(other_region, &changed));
	ck_assert(!hints_still_valid_after(other_instance, &changed));
	ck_assert(!hints_still_valid_after(other_mem_kind, &changed));

	/* And the key of a token with hints is the key without them. */
	struct token with = sample_hints(), without = sample();
	token_sign(&with, region_key);
	ck_assert_mem_eq(with.key, without.key, TOKEN_KEY_LEN);
}
END_TEST

/*
 * Every single-byte change of a token with hints: rejected by the
 * decoder, or by the key check, or it touched only hints.
 */
START_TEST(tamper_with_hints)
{
	const struct token t = sample_hints();
	uint8_t enc[XFER_TOKEN_MAX], buf[XFER_TOKEN_MAX];
	size_t len = encode(&t, enc, sizeof(enc));
	unsigned hint_only = 0;
	struct token d;

	for (size_t i = 0; i < len; i++)
		for (unsigned b = 0; b <= 8; b++) {
			memcpy(buf, enc, len);
			buf[i] ^= b == 8 ? 0xff : (uint8_t)(1u << b);
			if (token_decode(buf, len, &d) != 0)
				continue;
			if (auth_equal(&d, &t)) {
				ck_assert(token_key_valid(&d, region_key));
				hint_only++;
				continue;
			}
			ck_assert_msg(!token_key_valid(&d, region_key),
				      "byte %zu bit %u: tampered token valid",
				      i, b);
		}
	/* The ip, port and name bytes are in there, and were hints only. */
	ck_assert_uint_ge(hint_only, 9 * (4 + 16 + strlen(t.node_name)));
}
END_TEST

Suite *token_suite(void)
{
	Suite *s = suite_create("token");
	TCase *tc = tcase_create("codec");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, sign_and_check);
	tcase_add_test(tc, wrong_region_key);
	tcase_add_test(tc, tamper_every_byte);
	tcase_add_test(tc, widen_range);
	tcase_add_test(tc, encode_refuses_range);
	tcase_add_test(tc, encode_small_buffer);
	tcase_add_test(tc, decode_rejects_malformed);
	tcase_add_test(tc, hints_round_trip);
	tcase_add_test(tc, largest_token_fits);
	tcase_add_test(tc, encode_refuses_hints);
	tcase_add_test(tc, decode_rejects_hints);
	tcase_add_test(tc, hints_not_authenticated);
	tcase_add_test(tc, tamper_with_hints);
	suite_add_tcase(s, tc);
	return s;
}
