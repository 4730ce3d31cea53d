/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hostport.c - splitting "host:port" (hostport.h).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nic/hostport.h"

int config_split_hostport(const char *s, char *host, uint16_t *port,
			  uint16_t default_port)
{
	const char *colon, *end;
	size_t n;

	if (s[0] == '[') {            /* [v6]:port */
		end = strchr(s, ']');
		if (!end)
			return -EINVAL;
		n = (size_t)(end - s - 1);
		memcpy(host, s + 1, n < CONFIG_HOST_MAX ? n : 0);
		colon = end[1] == ':' ? end + 1 : NULL;
		if (!colon && end[1] != '\0')
			return -EINVAL;
		s++;
	} else {
		colon = strrchr(s, ':');
		if (colon && strchr(s, ':') != colon)
			return -EINVAL;   /* a bare IPv6 address needs [] */
		n = colon ? (size_t)(colon - s) : strlen(s);
		memcpy(host, s, n < CONFIG_HOST_MAX ? n : 0);
	}
	if (n == 0 || n >= CONFIG_HOST_MAX)
		return -EINVAL;
	host[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)host[i]) && !strchr("._-:*", host[i]))
			return -EINVAL;
	*port = default_port;
	if (colon) {
		char *e;
		errno = 0;
		unsigned long v = strtoul(colon + 1, &e, 10);
		if (errno || *e || e == colon + 1 || v > 65535)
			return -EINVAL;
		*port = (uint16_t)v;
	}
	return 0;
}
