/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_token.c - region tokens as xferd receives them (an import, a
 * publish, a peer's check): token_decode() and the key check on
 * arbitrary bytes (common/token_codec.c).
 *
 * Invariants: a decoded token's range lies inside its region and its
 * hints are bounded; it encodes again to the same fields; its key
 * verifies only under the key it was signed with.
 */
#include <string.h>

#include "common/token_codec.h"
#include "fuzz.h"

static const uint8_t region_key[TOKEN_KEY_LEN] = "fuzz-region-key";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct token t, again;
	uint8_t buf[1024];
	size_t len = sizeof(buf);

	if (token_decode(data, size, &t))
		return 0;
	FUZZ_ASSERT(t.offset <= t.region_length &&
		    t.length <= t.region_length - t.offset);
	FUZZ_ASSERT(t.naddrs <= TOKEN_MAX_ADDRS);
	FUZZ_ASSERT(memchr(t.node_name, 0, sizeof(t.node_name)) != NULL);
	for (uint32_t i = 0; i < t.naddrs; i++)
		FUZZ_ASSERT(token_addr_valid(&t.addrs[i]));

	/* An arbitrary key almost never verifies; a signed one always. */
	bool forged = token_key_valid(&t, region_key);
	token_sign(&t, region_key);
	FUZZ_ASSERT(token_key_valid(&t, region_key));
	(void)forged;

	/* What decodes encodes, and decodes again to the same token. */
	FUZZ_ASSERT(token_encode(&t, buf, &len) == 0);
	FUZZ_ASSERT(len <= 512);  /* XFER_TOKEN_MAX */
	FUZZ_ASSERT(token_decode(buf, len, &again) == 0);
	FUZZ_ASSERT(memcmp(&t, &again, sizeof(t)) == 0);
	FUZZ_ASSERT(token_key_valid(&again, region_key));
	/* Any change to what the key covers breaks it. */
	again.length ^= 1;
	FUZZ_ASSERT(!token_key_valid(&again, region_key));
	return 0;
}
