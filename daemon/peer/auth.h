/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.h - optional cluster authentication of peer links.
 *
 * Every xferd of a cluster holds the same secret (cluster_key_file).  In
 * the link handshake each side sends a random challenge and proves it
 * knows the key with HMAC-SHA256 over the other side's challenge, its
 * role and both instance ids; the role and ids keep a proof from being
 * replayed or reflected back to its sender.
 */
#ifndef XFERD_AUTH_H
#define XFERD_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_CHALLENGE_LEN 32
#define AUTH_PROOF_LEN     32
#define AUTH_ID_LEN        16
#define AUTH_KEY_MIN       16  /* bytes of secret */
#define AUTH_KEY_MAX       4096

enum auth_role { AUTH_INITIATOR = 1, AUTH_ACCEPTOR = 2 };

struct auth_key;

/*
 * Load the key file: its whole content (trailing newline stripped) is
 * the secret, at least AUTH_KEY_MIN bytes.  A file readable or writable
 * by group or others is refused.  Returns 0 or -errno with a reason in
 * err (naming the path).
 */
int auth_key_load(const char *path, struct auth_key **out, char *err,
		  size_t errlen);
/* Wipes the secret; accepts NULL. */
void auth_key_free(struct auth_key *key);

/* Fill a fresh random challenge. */
int auth_challenge(uint8_t out[AUTH_CHALLENGE_LEN]);

/* The proof that `prover` (in `role`) knows the key, answering the
 * verifier's challenge. */
void auth_proof(const struct auth_key *key, enum auth_role role,
		const uint8_t challenge[AUTH_CHALLENGE_LEN],
		const uint8_t prover_id[AUTH_ID_LEN],
		const uint8_t verifier_id[AUTH_ID_LEN],
		uint8_t out[AUTH_PROOF_LEN]);

/* Constant-time check of a received proof (any length accepted). */
bool auth_verify(const struct auth_key *key, enum auth_role role,
		 const uint8_t challenge[AUTH_CHALLENGE_LEN],
		 const uint8_t prover_id[AUTH_ID_LEN],
		 const uint8_t verifier_id[AUTH_ID_LEN], const uint8_t *proof,
		 size_t proof_len);

#endif /* XFERD_AUTH_H */
