/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hostport.h - "host:port" as the settings write it (listen, peer,
 * metrics_listen) and as peer lookups name a node.
 *
 * Below the settings' parser (config.c) and the peer table (peer/),
 * which both split such strings.  No state; any thread.  The name
 * keeps its config_ prefix from when config.c held it.
 */
#ifndef XFERD_NIC_HOSTPORT_H
#define XFERD_NIC_HOSTPORT_H

#include <stdint.h>

#include "core/config_types.h"

/*
 * Split "host:port", "[v6]:port", "host" (port = default_port) into its
 * parts.  Returns 0 or -EINVAL.  host must hold CONFIG_HOST_MAX bytes.
 */
int config_split_hostport(const char *s, char *host, uint16_t *port,
			  uint16_t default_port);

#endif /* XFERD_NIC_HOSTPORT_H */
