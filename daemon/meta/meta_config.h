/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta_config.h - the settings of the metadata backend: where published
 * names and node records live (this xferd and its `peer =` lines, or an
 * etcd cluster), and how xferd talks to etcd.  The keys `metadata` and
 * `etcd_*` (xferd.conf(5)) are entries of config.c's key table.  The
 * types (struct meta_config, its sizes) are in core/config_types.h, with
 * the rest of the settings.
 */
#ifndef XFERD_META_CONFIG_H
#define XFERD_META_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config_types.h"

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
