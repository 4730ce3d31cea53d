/* SPDX-License-Identifier: Apache-2.0 */
/*
 * uid_limits.c - regions, imports and names of one user are bounded over
 * all its contexts (max_regions_per_uid, max_imports_per_uid,
 * max_names_per_uid), each with its per-client errno, and given back
 * when a context closes.
 *
 * A private xferd with small per-uid bounds (8 each) and per-client
 * ones above them: three contexts of this process (one uid) together get
 * exactly 8 of each; a context closing gives its share back; a replaced
 * name is not a new one.
 *
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"

#define CTXS  3
#define BOUND 8

int main(void)
{
	struct tl_daemon xd;
	struct xfer_ctx *ctx[CTXS], *owner;
	struct tl_buf src;
	uint8_t tok[XFER_TOKEN_MAX];
	unsigned got;
	int rc = 0;

	tl_daemon_start(&xd, (const char *const[]){
		"max_regions_per_uid=8", "max_imports_per_uid=8",
		"max_names_per_uid=8", NULL });
	for (int k = 0; k < CTXS; k++)
		T_OK(xfer_open(xd.socket, &ctx[k]));

	/* Regions: round robin until refused. */
	struct xfer_mem *mem[CTXS][BOUND + 1];
	unsigned nmem[CTXS] = { 0 };
	for (got = 0; got <= BOUND; got++) {
		int k = got % CTXS;
		rc = xfer_alloc_host(ctx[k], 4096, &mem[k][nmem[k]]);
		if (rc)
			break;
		nmem[k]++;
	}
	printf("regions: %u, then %s\n", got, xfer_strerror(rc));
	T_ASSERT(got == BOUND && rc == -ENOSPC,
		 "one user got %u regions, then %d", got, rc);

	/* Imports of one token of another process's region: the owner is
	 * the same uid here, so it gets its region from the freed room. */
	T_OK(xfer_free_host(ctx[0], mem[0][--nmem[0]]));
	T_OK(xfer_open(xd.socket, &owner));
	tl_buf_alloc(owner, TL_HOST, 4096, &src);
	size_t tlen = tl_export(&src, tok);
	struct xfer_remote *rem[BOUND + 1];
	for (got = 0; got <= BOUND; got++) {
		rc = xfer_import(ctx[got % CTXS], tok, tlen, &rem[got]);
		if (rc)
			break;
	}
	printf("imports: %u, then %s\n", got, xfer_strerror(rc));
	T_ASSERT(got == BOUND && rc == -ETOOMANYREFS,
		 "one user got %u imports, then %d", got, rc);

	/* Names; a token replaced under a name is no new name. */
	char name[32];
	for (got = 0; got <= BOUND; got++) {
		snprintf(name, sizeof(name), "uidlim-%d-%u", (int)xd.pid, got);
		rc = xfer_publish(ctx[got % CTXS], name, tok, tlen);
		if (rc)
			break;
	}
	printf("names: %u, then %s\n", got, xfer_strerror(rc));
	T_ASSERT(got == BOUND && rc == -EMLINK,
		 "one user got %u names, then %d", got, rc);
	snprintf(name, sizeof(name), "uidlim-%d-0", (int)xd.pid);
	T_OK(xfer_publish(ctx[0], name, tok, tlen));

	/* A context closing gives back what it held: its regions, imports
	 * and names are the user's again. */
	xfer_close(ctx[1]);
	ctx[1] = NULL;
	T_OK(xfer_open(xd.socket, &ctx[1]));
	struct xfer_mem *m;
	T_OK(xfer_alloc_host(ctx[1], 4096, &m));
	struct xfer_remote *r;
	T_OK(xfer_import(ctx[1], tok, tlen, &r));
	snprintf(name, sizeof(name), "uidlim-%d-new", (int)xd.pid);
	T_OK(xfer_publish(ctx[1], name, tok, tlen));

	T_OK(xfer_unimport(ctx[1], r));
	T_OK(xfer_free_host(ctx[1], m));
	for (int k = 0; k < CTXS; k++) {
		/* ctx[1]'s regions went with its first connection: this only
		 * unmaps them (xferd refuses the handles, not this context's). */
		for (unsigned i = 0; i < nmem[k]; i++) {
			int frc = xfer_free_host(ctx[k], mem[k][i]);
			T_ASSERT(k == 1 || frc == 0, "xfer_free_host: %d", frc);
		}
		for (unsigned i = k; i < BOUND; i += CTXS) {
			int urc = xfer_unimport(ctx[k], rem[i]);
			T_ASSERT(k == 1 || urc == 0, "xfer_unimport: %d", urc);
		}
		xfer_close(ctx[k]);
	}
	tl_buf_free(owner, &src);
	xfer_close(owner);
	T_ASSERT(tl_daemon_stop(&xd) == 0, "xferd did not stop cleanly");
	return 0;
}
