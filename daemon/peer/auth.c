/* SPDX-License-Identifier: Apache-2.0 */
/*
 * auth.c - the cluster key and the HMAC challenge-response of peer links.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "peer/auth.h"
#include "core/log.h"

/* Binds a proof to this protocol and its version: a MAC made with the
 * same key for anything else (region tokens, a later handshake) can
 * never pass as a link proof. */
static const char proof_label[] = "xferd-link-auth-v1";

struct auth_key {
	size_t len;
	uint8_t secret[];
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int read_secret(int fd, uint8_t *buf, size_t cap, size_t *len);
static bool compute_proof(const struct auth_key *key, enum auth_role role,
			  const uint8_t challenge[AUTH_CHALLENGE_LEN],
			  const uint8_t prover_id[AUTH_ID_LEN],
			  const uint8_t verifier_id[AUTH_ID_LEN],
			  uint8_t out[AUTH_PROOF_LEN]);

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Read to EOF or until cap bytes: the size fstat reported may change
 * under us, so the bytes read decide. */
static int read_secret(int fd, uint8_t *buf, size_t cap, size_t *len)
{
	size_t n = 0;

	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return 0;
}

int auth_key_load(const char *path, struct auth_key **out, char *err,
		  size_t errlen)
{
	/* One byte for a trailing newline, one more to see a file too
	 * long without trusting st_size. */
	uint8_t buf[AUTH_KEY_MAX + 2];
	struct auth_key *key;
	struct stat st;
	size_t len = 0;
	int fd, rc;

	/* O_NOFOLLOW: a symlink planted in place of the key file would
	 * let whoever can write the directory choose the key.  O_NONBLOCK:
	 * a FIFO there must not hang start-up waiting for a writer (it is
	 * then refused as not a regular file); regular files ignore it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY |
			O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP)
			return fail(err, errlen, rc,
				    "%s: is a symbolic link (refused)", path);
		return fail(err, errlen, rc, "%s: %s", path, strerror(-rc));
	}
	if (fstat(fd, &st) < 0) {
		rc = fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = fail(err, errlen, -EINVAL, "%s: not a regular file",
			  path);
		goto out_close;
	}
	/* As ssh does with private keys: a secret others could read is
	 * no longer a secret, and one others could write is not ours. */
	if (st.st_mode & 077) {
		rc = fail(err, errlen, -EPERM,
			  "%s: must not be accessible by group or others "
			  "(chmod 600)", path);
		goto out_close;
	}
	rc = read_secret(fd, buf, sizeof(buf), &len);
	if (rc < 0) {
		rc = fail(err, errlen, rc, "%s: %s", path, strerror(-rc));
		goto out_wipe;
	}
	/* Keys are often written with echo, which appends a newline the
	 * other nodes' files may lack; one is not part of the secret. */
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len < AUTH_KEY_MIN) {
		rc = fail(err, errlen, -EINVAL,
			  "%s: key is %zu bytes, at least %d are needed", path,
			  len, AUTH_KEY_MIN);
		goto out_wipe;
	}
	if (len > AUTH_KEY_MAX) {
		rc = fail(err, errlen, -EINVAL,
			  "%s: key is longer than %d bytes", path,
			  AUTH_KEY_MAX);
		goto out_wipe;
	}
	key = malloc(sizeof(*key) + len);
	if (!key) {
		rc = fail(err, errlen, -ENOMEM, "%s: %s", path,
			  strerror(ENOMEM));
		goto out_wipe;
	}
	key->len = len;
	memcpy(key->secret, buf, len);
	*out = key;
	rc = 0;
out_wipe:
	OPENSSL_cleanse(buf, sizeof(buf));
out_close:
	close(fd);
	return rc;
}

void auth_key_free(struct auth_key *key)
{
	if (!key)
		return;
	OPENSSL_cleanse(key->secret, key->len);
	free(key);
}

int auth_challenge(uint8_t out[AUTH_CHALLENGE_LEN])
{
	size_t n = 0;

	/* getrandom blocks only until the pool is first initialised,
	 * long before a daemon takes connections. */
	while (n < AUTH_CHALLENGE_LEN) {
		ssize_t r = getrandom(out + n, AUTH_CHALLENGE_LEN - n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		n += (size_t)r;
	}
	return 0;
}

/*
 * HMAC-SHA256(key, label || role || challenge || prover || verifier).
 * The role stops a proof from being reflected (the acceptor's answer
 * replayed as the initiator's), the ids from being relayed to a link
 * between other daemons, the challenge from being replayed later.  All
 * fields are fixed-size, so the concatenation is unambiguous.
 */
static bool compute_proof(const struct auth_key *key, enum auth_role role,
			  const uint8_t challenge[AUTH_CHALLENGE_LEN],
			  const uint8_t prover_id[AUTH_ID_LEN],
			  const uint8_t verifier_id[AUTH_ID_LEN],
			  uint8_t out[AUTH_PROOF_LEN])
{
	uint8_t msg[sizeof(proof_label) - 1 + 1 + AUTH_CHALLENGE_LEN +
		    2 * AUTH_ID_LEN];
	uint8_t mac[EVP_MAX_MD_SIZE];
	unsigned mac_len = 0;
	size_t off = 0;

	_Static_assert(AUTH_PROOF_LEN == 32, "a proof is one SHA-256");
	memcpy(msg + off, proof_label, sizeof(proof_label) - 1);
	off += sizeof(proof_label) - 1;
	msg[off++] = (uint8_t)role;
	memcpy(msg + off, challenge, AUTH_CHALLENGE_LEN);
	off += AUTH_CHALLENGE_LEN;
	memcpy(msg + off, prover_id, AUTH_ID_LEN);
	off += AUTH_ID_LEN;
	memcpy(msg + off, verifier_id, AUTH_ID_LEN);

	if (!HMAC(EVP_sha256(), key->secret, (int)key->len, msg, sizeof(msg),
		  mac, &mac_len) || mac_len != AUTH_PROOF_LEN) {
		OPENSSL_cleanse(mac, sizeof(mac));
		return false;
	}
	memcpy(out, mac, AUTH_PROOF_LEN);
	OPENSSL_cleanse(mac, sizeof(mac));
	return true;
}

void auth_proof(const struct auth_key *key, enum auth_role role,
		const uint8_t challenge[AUTH_CHALLENGE_LEN],
		const uint8_t prover_id[AUTH_ID_LEN],
		const uint8_t verifier_id[AUTH_ID_LEN],
		uint8_t out[AUTH_PROOF_LEN])
{
	if (!compute_proof(key, role, challenge, prover_id, verifier_id,
			   out)) {
		/* Only a broken libcrypto gets here.  A proof of zeros
		 * fails the verifier's comparison, so the link is refused
		 * rather than sent an uninitialised buffer. */
		log_warnx("auth: HMAC-SHA256 failed");
		memset(out, 0, AUTH_PROOF_LEN);
	}
}

bool auth_verify(const struct auth_key *key, enum auth_role role,
		 const uint8_t challenge[AUTH_CHALLENGE_LEN],
		 const uint8_t prover_id[AUTH_ID_LEN],
		 const uint8_t verifier_id[AUTH_ID_LEN], const uint8_t *proof,
		 size_t proof_len)
{
	uint8_t expect[AUTH_PROOF_LEN];
	bool ok;

	/* The length is public (it is on the wire); only the bytes need
	 * a constant-time comparison. */
	if (!key || !proof || proof_len != AUTH_PROOF_LEN)
		return false;
	if (!compute_proof(key, role, challenge, prover_id, verifier_id,
			   expect))
		return false;
	ok = CRYPTO_memcmp(expect, proof, AUTH_PROOF_LEN) == 0;
	OPENSSL_cleanse(expect, sizeof(expect));
	return ok;
}
