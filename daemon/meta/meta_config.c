/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta_config.c - parse and validate the metadata backend's settings
 * (`metadata`, `etcd_*`; xferd.conf(5)).  The keys are entries of
 * config.c's key table; the values that need more than a number, a word
 * or a path (the endpoint list, the prefix) are checked here, beside the
 * code that uses them.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_fail.h"
#include "meta/meta_config.h"

void meta_config_defaults(struct meta_config *mc)
{
	*mc = (struct meta_config){
		.backend = META_LOCAL,
		.prefix = "/xferd/",
		/* Long enough to ride out an etcd leader election (about a
		 * second) with keepalives at a third of it; short enough
		 * that a dead node's names go within seconds. */
		.lease_ttl_s = 10,
		.timeout_ms = 1000,
		.retry_ms = 5000,
		.api = META_API_AUTO,
	};
}

/* One "http[s]://host:port" (host a name, an IPv4 or a [v6] address). */
static int endpoint_parse(const char *s, size_t n, struct meta_endpoint *out)
{
	const char *host, *end, *colon;
	size_t hlen;

	*out = (struct meta_endpoint){ 0 };
	if (n > 7 && strncmp(s, "http://", 7) == 0) {
		host = s + 7;
	} else if (n > 8 && strncmp(s, "https://", 8) == 0) {
		host = s + 8;
		out->tls = true;
	} else {
		return -EINVAL;
	}
	end = s + n;
	if (end[-1] == '/')   /* "http://h:2379/" as etcdctl accepts */
		end--;
	if (*host == '[') {
		const char *rb = memchr(host, ']', (size_t)(end - host));
		if (!rb || rb + 1 >= end || rb[1] != ':')
			return -EINVAL;
		hlen = (size_t)(rb - host - 1);
		host++;
		colon = rb + 1;
	} else {
		colon = NULL;
		for (const char *p = host; p < end; p++)
			if (*p == ':')
				colon = p;
		if (!colon)
			return -EINVAL;
		hlen = (size_t)(colon - host);
	}
	if (hlen == 0 || hlen >= sizeof(out->host))
		return -EINVAL;
	for (size_t i = 0; i < hlen; i++)
		if (!isalnum((unsigned char)host[i]) && !strchr(".-:", host[i]))
			return -EINVAL;
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	unsigned long port = 0;
	const char *p = colon + 1;
	if (p >= end)
		return -EINVAL;
	for (; p < end; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		port = port * 10 + (unsigned long)(*p - '0');
		if (port > 65535)
			return -EINVAL;
	}
	if (port == 0)
		return -EINVAL;
	out->port = (uint16_t)port;
	return 0;
}

int meta_endpoints_parse(const char *list, struct meta_endpoint *out,
			 char *err, size_t errlen)
{
	int n = 0;

	for (const char *s = list; *s;) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		if (n == META_ENDPOINTS_MAX)
			return config_fail(err, errlen,
					   "etcd_endpoints: more than %d "
					   "endpoints", META_ENDPOINTS_MAX);
		if (endpoint_parse(s, len, &out[n]))
			return config_fail(err, errlen,
					   "etcd_endpoints: '%.*s' is not "
					   "http://HOST:PORT or "
					   "https://HOST:PORT", (int)len, s);
		n++;
		if (!comma)
			break;
		s = comma + 1;
		if (!*s)
			return config_fail(err, errlen,
					   "etcd_endpoints: empty entry "
					   "after ','");
	}
	if (n == 0)
		return config_fail(err, errlen, "etcd_endpoints: no endpoint");
	return n;
}

int meta_config_set_endpoints(struct meta_config *mc, const char *value,
			      char *err, size_t errlen)
{
	struct meta_endpoint eps[META_ENDPOINTS_MAX];

	if (strlen(value) >= sizeof(mc->endpoints))
		return config_fail(err, errlen,
				   "etcd_endpoints: longer than %zu bytes",
				   sizeof(mc->endpoints) - 1);
	int rc = meta_endpoints_parse(value, eps, err, errlen);
	if (rc < 0)
		return rc;
	snprintf(mc->endpoints, sizeof(mc->endpoints), "%s", value);
	return 0;
}

int meta_config_set_prefix(struct meta_config *mc, const char *value,
			   char *err, size_t errlen)
{
	size_t n = strlen(value);
	bool ok = n > 0 && n < sizeof(mc->prefix) - 1;

	/* Printable and without '"' or '\\': it goes into logs and is
	 * compared byte for byte with what etcd returns. */
	for (size_t i = 0; ok && i < n; i++)
		ok = isgraph((unsigned char)value[i]) && value[i] != '"' &&
		     value[i] != '\\';
	if (!ok)
		return config_fail(err, errlen,
				   "etcd_prefix: '%s' is not 1-%zu printable "
				   "characters", value, sizeof(mc->prefix) - 2);
	/* Always a directory: "/xferd" and "/xferd/" are one prefix, and
	 * "/xferd" does not cover "/xferd2/". */
	snprintf(mc->prefix, sizeof(mc->prefix), "%s%s", value,
		 value[n - 1] == '/' ? "" : "/");
	return 0;
}

int meta_config_check(const struct meta_config *mc, char *err,
		      size_t errlen)
{
	if (mc->backend != META_ETCD)
		return 0;
	if (!mc->endpoints[0])
		return config_fail(err, errlen,
				   "metadata = etcd needs etcd_endpoints");
	if (!mc->cert[0] != !mc->key[0])
		return config_fail(err, errlen,
				   "etcd_cert and etcd_key go together");
	return 0;
}
