/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_auth.c - cluster authentication (daemon/peer/auth.c): loading the key
 * file (missing, too open, too short or long, a trailing newline, a
 * symlink, not a file), proofs that verify and every change that must
 * make them fail (key, role, ids, challenge, any byte or the length of
 * the proof), the proof's exact construction, and fresh challenges.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "peer/auth.h"
#include "suites.h"

static char tmp_dir[64];

static void key_setup(void)
{
	strcpy(tmp_dir, "/tmp/xferd-unit-auth.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void key_teardown(void)
{
	/* Depth first and without following the symlink the tests make. */
	nftw(tmp_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Write `len` bytes to tmp_dir/name with `mode`; return the path. */
static const char *write_key(const char *name, const void *data, size_t len,
			     mode_t mode)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

/* Load a key that must be accepted. */
static struct auth_key *good_key(const char *path)
{
	struct auth_key *k = NULL;
	char err[256] = "";

	ck_assert_msg(auth_key_load(path, &k, err, sizeof(err)) == 0,
		      "%s refused: %s", path, err);
	ck_assert_ptr_nonnull(k);
	return k;
}

/* Load a key that must be refused with `rc`, a reason naming the path
 * and containing `why`, and *out untouched. */
static void bad_key(const char *path, int rc, const char *why)
{
	struct auth_key *k = NULL;
	char err[256] = "";

	ck_assert_int_eq(auth_key_load(path, &k, err, sizeof(err)), rc);
	ck_assert_ptr_null(k);
	ck_assert_msg(strstr(err, path), "'%s' lacks the path", err);
	if (why)
		ck_assert_msg(strstr(err, why), "'%s' lacks '%s'", err, why);
}

static const char secret32[] = "0123456789abcdef0123456789ABCDEF";

static const uint8_t id_a[AUTH_ID_LEN] = {
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
	0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
};
static const uint8_t id_b[AUTH_ID_LEN] = {
	0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7,
	0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf,
};

static void fixed_challenge(uint8_t c[AUTH_CHALLENGE_LEN], uint8_t seed)
{
	for (unsigned i = 0; i < AUTH_CHALLENGE_LEN; i++)
		c[i] = (uint8_t)(seed + 7 * i);
}

START_TEST(key_load_ok)
{
	struct auth_key *k = good_key(write_key("k", secret32, 32, 0600));
	auth_key_free(k);

	/* 0400 is as private as 0600. */
	k = good_key(write_key("ro", secret32, 32, 0400));
	auth_key_free(k);

	/* Exactly the bounds. */
	k = good_key(write_key("min", secret32, AUTH_KEY_MIN, 0600));
	auth_key_free(k);
	char *big = malloc(AUTH_KEY_MAX + 2);
	ck_assert_ptr_nonnull(big);
	memset(big, 'k', AUTH_KEY_MAX + 2);
	k = good_key(write_key("max", big, AUTH_KEY_MAX, 0600));
	auth_key_free(k);
	big[AUTH_KEY_MAX] = '\n'; /* the newline does not count */
	k = good_key(write_key("maxnl", big, AUTH_KEY_MAX + 1, 0600));
	auth_key_free(k);
	free(big);

	/* Any bytes, NULs included. */
	const uint8_t binary[20] = { 0, 1, 2, 0, 0xff, 0x80, '\n', 0 };
	k = good_key(write_key("bin", binary, sizeof(binary), 0600));
	auth_key_free(k);

	auth_key_free(NULL);
}
END_TEST

START_TEST(key_load_refused)
{
	char path[128], err[256] = "";
	struct auth_key *k = NULL;

	snprintf(path, sizeof(path), "%s/missing", tmp_dir);
	bad_key(path, -ENOENT, NULL);

	/* Readable or writable by anyone but the owner. */
	static const mode_t open_modes[] = { 0644, 0640, 0604, 0620, 0602,
					     0610, 0601, 0660, 0666 };
	for (size_t i = 0; i < sizeof(open_modes) / sizeof(open_modes[0]);
	     i++) {
		const char *p = write_key("open", secret32, 32, open_modes[i]);

		bad_key(p, -EPERM, "must not be accessible by group or others");
		bad_key(p, -EPERM, "chmod 600");
	}

	/* Too short, a newline not counting; empty. */
	bad_key(write_key("short", secret32, AUTH_KEY_MIN - 1, 0600), -EINVAL,
		"at least 16");
	char shortnl[AUTH_KEY_MIN + 1];
	memcpy(shortnl, secret32, AUTH_KEY_MIN - 1);
	shortnl[AUTH_KEY_MIN - 1] = '\n';
	bad_key(write_key("shortnl", shortnl, AUTH_KEY_MIN, 0600), -EINVAL,
		"at least 16");
	bad_key(write_key("empty", "", 0, 0600), -EINVAL, NULL);
	bad_key(write_key("nl", "\n", 1, 0600), -EINVAL, NULL);

	/* Too long, with or without a newline. */
	char *big = malloc(AUTH_KEY_MAX + 64);
	ck_assert_ptr_nonnull(big);
	memset(big, 'k', AUTH_KEY_MAX + 64);
	bad_key(write_key("long", big, AUTH_KEY_MAX + 1, 0600), -EINVAL,
		"4096");
	big[AUTH_KEY_MAX + 1] = '\n';
	bad_key(write_key("longnl", big, AUTH_KEY_MAX + 2, 0600), -EINVAL,
		"4096");
	bad_key(write_key("longer", big, AUTH_KEY_MAX + 64, 0600), -EINVAL,
		"4096");
	free(big);

	/* A symlink to a good key is refused (O_NOFOLLOW). */
	char target[128];
	snprintf(target, sizeof(target), "%s",
		 write_key("target", secret32, 32, 0600));
	snprintf(path, sizeof(path), "%s/link", tmp_dir);
	ck_assert_int_eq(symlink(target, path), 0);
	bad_key(path, -ELOOP, "symbolic link");
	auth_key_free(good_key(target));

	/* Not a regular file: a directory, and a FIFO, which must not
	 * block waiting for a writer. */
	snprintf(path, sizeof(path), "%s/dir", tmp_dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	bad_key(path, -EINVAL, "not a regular file");
	snprintf(path, sizeof(path), "%s/fifo", tmp_dir);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	bad_key(path, -EINVAL, "not a regular file");

	/* A NULL or zero-length err is allowed. */
	ck_assert_int_eq(auth_key_load(path, &k, NULL, 0), -EINVAL);
	ck_assert_int_eq(auth_key_load(path, &k, err, 0), -EINVAL);
	ck_assert_str_eq(err, "");
	ck_assert_ptr_null(k);
}
END_TEST

START_TEST(key_newline)
{
	uint8_t c[AUTH_CHALLENGE_LEN], p1[AUTH_PROOF_LEN], p2[AUTH_PROOF_LEN];
	char withnl[40], twonl[40];

	fixed_challenge(c, 1);
	memcpy(withnl, secret32, 32);
	withnl[32] = '\n';
	memcpy(twonl, withnl, 33);
	twonl[33] = '\n';

	struct auth_key *plain = good_key(write_key("plain", secret32, 32,
						    0600));
	struct auth_key *nl = good_key(write_key("nl", withnl, 33, 0600));
	struct auth_key *nl2 = good_key(write_key("nl2", twonl, 34, 0600));

	/* One trailing newline is not part of the secret... */
	auth_proof(plain, AUTH_INITIATOR, c, id_a, id_b, p1);
	auth_proof(nl, AUTH_INITIATOR, c, id_a, id_b, p2);
	ck_assert_mem_eq(p1, p2, AUTH_PROOF_LEN);
	ck_assert(auth_verify(nl, AUTH_INITIATOR, c, id_a, id_b, p1,
			      AUTH_PROOF_LEN));

	/* ... only one: the second is. */
	auth_proof(nl2, AUTH_INITIATOR, c, id_a, id_b, p2);
	ck_assert(memcmp(p1, p2, AUTH_PROOF_LEN) != 0);

	auth_key_free(plain);
	auth_key_free(nl);
	auth_key_free(nl2);
}
END_TEST

START_TEST(proof_verifies)
{
	struct auth_key *k = good_key(write_key("k", secret32, 32, 0600));
	uint8_t c[AUTH_CHALLENGE_LEN], p[AUTH_PROOF_LEN], again[AUTH_PROOF_LEN];

	ck_assert_int_eq(auth_challenge(c), 0);
	/* A (initiator) answers B's challenge; B verifies. */
	auth_proof(k, AUTH_INITIATOR, c, id_a, id_b, p);
	ck_assert(auth_verify(k, AUTH_INITIATOR, c, id_a, id_b, p,
			      AUTH_PROOF_LEN));
	/* Deterministic. */
	auth_proof(k, AUTH_INITIATOR, c, id_a, id_b, again);
	ck_assert_mem_eq(p, again, AUTH_PROOF_LEN);

	/* And the other direction. */
	auth_proof(k, AUTH_ACCEPTOR, c, id_b, id_a, p);
	ck_assert(auth_verify(k, AUTH_ACCEPTOR, c, id_b, id_a, p,
			      AUTH_PROOF_LEN));

	/* Another node loading the same file agrees. */
	struct auth_key *k2 = good_key(write_key("k2", secret32, 32, 0600));
	ck_assert(auth_verify(k2, AUTH_ACCEPTOR, c, id_b, id_a, p,
			      AUTH_PROOF_LEN));
	auth_key_free(k2);
	auth_key_free(k);
}
END_TEST

START_TEST(proof_fails)
{
	struct auth_key *k = good_key(write_key("k", secret32, 32, 0600));
	char other_secret[32];
	uint8_t c[AUTH_CHALLENGE_LEN], c2[AUTH_CHALLENGE_LEN];
	uint8_t p[AUTH_PROOF_LEN + 1], bad[AUTH_PROOF_LEN];

	memcpy(other_secret, secret32, 32);
	other_secret[31] ^= 1;
	struct auth_key *other = good_key(write_key("other", other_secret, 32,
						    0600));

	fixed_challenge(c, 3);
	auth_proof(k, AUTH_INITIATOR, c, id_a, id_b, p);
	ck_assert(auth_verify(k, AUTH_INITIATOR, c, id_a, id_b, p,
			      AUTH_PROOF_LEN));

	/* Wrong key (one bit off). */
	ck_assert(!auth_verify(other, AUTH_INITIATOR, c, id_a, id_b, p,
			       AUTH_PROOF_LEN));
	/* Wrong role: the initiator's proof reflected as the acceptor's. */
	ck_assert(!auth_verify(k, AUTH_ACCEPTOR, c, id_a, id_b, p,
			       AUTH_PROOF_LEN));
	/* Swapped ids, or both the same. */
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c, id_b, id_a, p,
			       AUTH_PROOF_LEN));
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c, id_a, id_a, p,
			       AUTH_PROOF_LEN));
	/* Another challenge: one bit off, or a fresh one. */
	memcpy(c2, c, sizeof(c2));
	c2[AUTH_CHALLENGE_LEN - 1] ^= 0x80;
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c2, id_a, id_b, p,
			       AUTH_PROOF_LEN));
	ck_assert_int_eq(auth_challenge(c2), 0);
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c2, id_a, id_b, p,
			       AUTH_PROOF_LEN));

	/* Truncated, empty, extended (even with the right prefix), NULL. */
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c, id_a, id_b, p,
			       AUTH_PROOF_LEN - 1));
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c, id_a, id_b, p, 16));
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c, id_a, id_b, p, 0));
	p[AUTH_PROOF_LEN] = 0;
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c, id_a, id_b, p,
			       AUTH_PROOF_LEN + 1));
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c, id_a, id_b, NULL,
			       AUTH_PROOF_LEN));

	/* Any bit of the proof flipped. */
	for (unsigned i = 0; i < AUTH_PROOF_LEN * 8; i++) {
		memcpy(bad, p, AUTH_PROOF_LEN);
		bad[i / 8] ^= (uint8_t)(1u << (i % 8));
		ck_assert_msg(!auth_verify(k, AUTH_INITIATOR, c, id_a, id_b,
					   bad, AUTH_PROOF_LEN),
			      "bit %u flipped still verifies", i);
	}
	memset(bad, 0, sizeof(bad));
	ck_assert(!auth_verify(k, AUTH_INITIATOR, c, id_a, id_b, bad,
			       AUTH_PROOF_LEN));

	auth_key_free(other);
	auth_key_free(k);
}
END_TEST

/* The proof is HMAC-SHA256 over "xferd-link-auth-v1" (no NUL), the role
 * byte, the challenge, the prover's id and the verifier's id: pinned
 * here because the other end of a link may run another build. */
START_TEST(proof_construction)
{
	struct auth_key *k = good_key(write_key("k", secret32, 32, 0600));
	static const char label[] = "xferd-link-auth-v1";
	uint8_t msg[sizeof(label) - 1 + 1 + AUTH_CHALLENGE_LEN +
		    2 * AUTH_ID_LEN];
	uint8_t c[AUTH_CHALLENGE_LEN], p[AUTH_PROOF_LEN];
	uint8_t want[EVP_MAX_MD_SIZE];
	unsigned want_len = 0;
	size_t off = 0;

	fixed_challenge(c, 9);
	memcpy(msg, label, sizeof(label) - 1);
	off = sizeof(label) - 1;
	msg[off++] = AUTH_ACCEPTOR;
	memcpy(msg + off, c, AUTH_CHALLENGE_LEN);
	off += AUTH_CHALLENGE_LEN;
	memcpy(msg + off, id_b, AUTH_ID_LEN);
	off += AUTH_ID_LEN;
	memcpy(msg + off, id_a, AUTH_ID_LEN);
	ck_assert_ptr_nonnull(HMAC(EVP_sha256(), secret32, 32, msg,
				   sizeof(msg), want, &want_len));
	ck_assert_uint_eq(want_len, AUTH_PROOF_LEN);

	auth_proof(k, AUTH_ACCEPTOR, c, id_b, id_a, p);
	ck_assert_mem_eq(p, want, AUTH_PROOF_LEN);
	auth_key_free(k);
}
END_TEST

START_TEST(challenges_differ)
{
	static const uint8_t zero[AUTH_CHALLENGE_LEN];
	uint8_t c[4][AUTH_CHALLENGE_LEN];

	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(auth_challenge(c[i]), 0);
		ck_assert(memcmp(c[i], zero, AUTH_CHALLENGE_LEN) != 0);
		for (int j = 0; j < i; j++)
			ck_assert(memcmp(c[i], c[j], AUTH_CHALLENGE_LEN) != 0);
	}
}
END_TEST

Suite *auth_suite(void)
{
	Suite *s = suite_create("auth");
	TCase *tc;

	tc = tcase_create("key");
	tcase_add_checked_fixture(tc, key_setup, key_teardown);
	tcase_add_test(tc, key_load_ok);
	tcase_add_test(tc, key_load_refused);
	tcase_add_test(tc, key_newline);
	suite_add_tcase(s, tc);

	tc = tcase_create("proof");
	tcase_add_checked_fixture(tc, key_setup, key_teardown);
	tcase_add_test(tc, proof_verifies);
	tcase_add_test(tc, proof_fails);
	tcase_add_test(tc, proof_construction);
	tcase_add_test(tc, challenges_differ);
	suite_add_tcase(s, tc);
	return s;
}
