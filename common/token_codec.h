/* SPDX-License-Identifier: Apache-2.0 */
/*
 * token_codec.h - encode, decode and authenticate region tokens.
 *
 * Both sides use this: libxfer derives and encodes tokens without asking
 * xferd; xferd decodes them on import and checks the key.  The key of a
 * token is HMAC-SHA256(region key, "xfer-range" | instance_id | region |
 * offset | length | region_length | mem_kind) cut to 16 bytes, so it
 * authenticates everything that decides which bytes the holder may
 * touch: a holder can neither widen the range, point it at another
 * region or another xferd, nor change what the region is said to be.
 *
 * The owner's addresses and node name are not covered, on purpose.  They
 * only say where to send a request, and they may change while tokens are
 * out (a rail added, an address renumbered) or be rewritten by whoever
 * forwards a token; the xferd a request reaches accepts it only if the
 * instance id is its own and the key matches.  A wrong or forged
 * address can thus misdirect its holder's own requests (take tokens from
 * sources you trust, as any address), but never grant access to the
 * owner's memory.
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
#define TOKEN_MAX_ADDRS     8u   /* owner addresses a token carries */
#define TOKEN_NODE_NAME_MAX 64u  /* node name with its NUL */

/* One way to reach the owning xferd (xfer.token.Address without the
 * informational interface name, which tokens leave out to stay small). */
struct token_addr {
	uint8_t ip[16];         /* network order; IPv4 in the first 4 */
	uint8_t ip_len;         /* 4 or 16 */
	uint8_t prefix_len;     /* 0-32 / 0-128 */
	uint16_t port;          /* host order */
};

struct token {
	uint8_t instance_id[TOKEN_INSTANCE_LEN];
	uint64_t region;        /* owner's handle */
	uint8_t key[TOKEN_KEY_LEN];
	uint64_t offset;        /* granted range, relative to the region */
	uint64_t length;
	uint64_t region_length;
	uint32_t mem_kind;
	/* Hints, not covered by the key (see above). */
	struct token_addr addrs[TOKEN_MAX_ADDRS];
	uint32_t naddrs;
	char node_name[TOKEN_NODE_NAME_MAX]; /* "" if unknown */
};

/* ip_len 4 or 16 and a prefix length that fits it. */
bool token_addr_valid(const struct token_addr *a);

/* Fill t->key for the other fields of t from the region's secret key. */
void token_sign(struct token *t, const uint8_t region_key[TOKEN_KEY_LEN]);

/* Constant-time check of t->key against the region's secret key. */
bool token_key_valid(const struct token *t,
		     const uint8_t region_key[TOKEN_KEY_LEN]);

/*
 * Serialize t into buf of *len bytes; *len becomes the token's size.
 * Returns 0, -ENOSPC (buf too small), -ERANGE (range not inside the
 * region) or -EINVAL (an invalid address, more than TOKEN_MAX_ADDRS, a
 * node name without its NUL).  Every valid token fits in 512 bytes
 * (XFER_TOKEN_MAX).
 */
int token_encode(const struct token *t, void *buf, size_t *len);

/* Parse a token; -EINVAL if it is not a well-formed one (addresses and
 * node name included).  Unused entries of t->addrs are zeroed. */
int token_decode(const void *buf, size_t len, struct token *t);

#endif /* XFER_TOKEN_CODEC_H */
