/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rendezvous.c - the default socket path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/rendezvous.h"

void rendezvous_default_socket(char *out, size_t len, bool honor_env)
{
	const char *env = honor_env ? getenv("XFERD_SOCKET") : NULL;
	const char *rt = getenv("XDG_RUNTIME_DIR");

	if (env && *env)
		snprintf(out, len, "%s", env);
	else if (geteuid() == 0 || !rt || !*rt)
		snprintf(out, len, "/run/xferd/xferd.sock");
	else
		snprintf(out, len, "%s/xferd.sock", rt);
}
