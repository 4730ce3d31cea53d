/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta_config.h - the settings of the metadata backend: where published
 * names and node records live (this xferd and its `peer =` lines, or an
 * etcd cluster), and how xferd talks to etcd.  The keys `metadata` and
 * `etcd_*` (xferd.conf(5)) are entries of config.c's key table.
 */
#ifndef XFERD_META_CONFIG_H
#define XFERD_META_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_ENDPOINTS_MAX  16    /* etcd endpoints */
#define META_ENDPOINTS_LEN  1024  /* the comma-separated list, bytes */
#define META_PREFIX_MAX     128
#define META_FILE_MAX       256

enum meta_backend { META_LOCAL, META_ETCD };

/* The etcd v3 JSON gateway's path prefix: etcd 3.4 and 3.5 serve /v3,
 * 3.3 /v3beta, 3.2 /v3alpha; `auto` tries them in that order. */
enum meta_api { META_API_AUTO, META_API_V3, META_API_V3BETA,
		META_API_V3ALPHA };

struct meta_config {
	enum meta_backend backend;
	char endpoints[META_ENDPOINTS_LEN]; /* "http://10.0.0.1:2379,..." */
	char prefix[META_PREFIX_MAX];       /* keys start with it: "/xferd/" */
	uint32_t lease_ttl_s;      /* node record and names live this long
				    * after the last keepalive */
	uint32_t timeout_ms;       /* one request at one endpoint */
	uint32_t retry_ms;         /* one call tries the endpoints this long */
	enum meta_api api;
	char cert[META_FILE_MAX];  /* TLS client certificate ("" = none) */
	char key[META_FILE_MAX];   /* its private key */
	char ca[META_FILE_MAX];    /* CA bundle ("" = the system's) */
};

/* One entry of etcd_endpoints. */
struct meta_endpoint {
	bool tls;                  /* https:// */
	char host[256];            /* name or address, without [] */
	uint16_t port;
};

void meta_config_defaults(struct meta_config *mc);

/*
 * etcd_endpoints and etcd_prefix (the other keys are plain numbers, words
 * and paths of config.c's table).  Return 0, or -EINVAL with a reason in
 * err (mc unchanged).
 */
int meta_config_set_endpoints(struct meta_config *mc, const char *value,
			      char *err, size_t errlen);
int meta_config_set_prefix(struct meta_config *mc, const char *value,
			   char *err, size_t errlen);

/*
 * Split etcd_endpoints into out (META_ENDPOINTS_MAX at most).  Returns
 * the count, or -EINVAL with a reason in err.
 */
int meta_endpoints_parse(const char *list, struct meta_endpoint *out,
			 char *err, size_t errlen);

/* The settings that only make sense together (metadata = etcd needs
 * endpoints; cert goes with key).  0 or -EINVAL with a reason. */
int meta_config_check(const struct meta_config *mc, char *err,
		      size_t errlen);

#endif /* XFERD_META_CONFIG_H */
