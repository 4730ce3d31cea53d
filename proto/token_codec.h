/*
 * token_codec.h - encode, decode and authenticate region tokens.
 *
 * Both sides use this: libxfer derives and encodes tokens without asking
 * xferd; xferd decodes them on import and checks the key.  The key of a
 * token is HMAC-SHA256(region key, "xfer-range" | instance_id | region |
 * offset | length | region_length | mem_kind) cut to 16 bytes, so it
 * authenticates exactly what the token says: a holder can neither widen
 * the range, point it at another region, nor alter any other field.
 */
#ifndef XFER_TOKEN_CODEC_H
#define XFER_TOKEN_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOKEN_VERSION      1u
#define TOKEN_TAG          0x4b544658u /* "XFTK" */
#define TOKEN_KEY_LEN      16u
#define TOKEN_INSTANCE_LEN 16u

struct token {
	uint8_t instance_id[TOKEN_INSTANCE_LEN];
	uint64_t region;        /* owner's handle */
	uint8_t key[TOKEN_KEY_LEN];
	uint64_t offset;        /* granted range, relative to the region */
	uint64_t length;
	uint64_t region_length;
	uint32_t mem_kind;
};

/* Fill t->key for the other fields of t from the region's secret key. */
void token_sign(struct token *t, const uint8_t region_key[TOKEN_KEY_LEN]);

/* Constant-time check of t->key against the region's secret key. */
bool token_key_valid(const struct token *t,
		     const uint8_t region_key[TOKEN_KEY_LEN]);

/*
 * Serialize t into buf of *len bytes; *len becomes the token's size.
 * Returns 0, -ENOSPC (buf too small) or -ERANGE (range not inside the
 * region).
 */
int token_encode(const struct token *t, void *buf, size_t *len);

/* Parse a token; -EINVAL if it is not a well-formed one. */
int token_decode(const void *buf, size_t len, struct token *t);

#endif /* XFER_TOKEN_CODEC_H */
