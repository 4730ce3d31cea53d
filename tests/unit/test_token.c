/*
 * test_token.c - region tokens (proto/token_codec.c): encode/decode
 * round trips, signing and key checks, tampering with every bit and byte
 * of an encoded token, widening or moving a granted range, and the
 * encoder's and decoder's refusals.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "token.pb-c.h"
#include "token_codec.h"

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

static bool token_equal(const struct token *a, const struct token *b)
{
	return memcmp(a->instance_id, b->instance_id, TOKEN_INSTANCE_LEN) == 0 &&
	       memcmp(a->key, b->key, TOKEN_KEY_LEN) == 0 &&
	       a->region == b->region && a->offset == b->offset &&
	       a->length == b->length &&
	       a->region_length == b->region_length &&
	       a->mem_kind == b->mem_kind;
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
	suite_add_tcase(s, tc);
	return s;
}
