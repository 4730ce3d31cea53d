/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_msg.c - the validation of an xferctl request (ctl_msg.h): one
 * switch over the request types.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/wire.h"
#include "ops/ctl_msg.h"

/* What a node name, a hex id prefix or "host:port" can be made of:
 * printable ASCII, no spaces. */
static bool valid_ping_target(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > CTL_PING_TARGET_MAX)
		return false;
	for (; *s; s++)
		if (*s <= 0x20 || *s >= 0x7f)
			return false;
	return true;
}

int ctl_msg_check(const Xfer__Ctl__CtlMsg *m, const char **why)
{
	if (m->proto_version != XFER_PROTO_VERSION) {
		*why = "protocol version mismatch";
		return -EPROTO;
	}
	*why = NULL;
	switch (m->body_case) {
	case XFER__CTL__CTL_MSG__BODY_STATUS:
	case XFER__CTL__CTL_MSG__BODY_CLIENTS:
	case XFER__CTL__CTL_MSG__BODY_REGIONS:
	case XFER__CTL__CTL_MSG__BODY_PEERS:
	case XFER__CTL__CTL_MSG__BODY_GPUS:
	case XFER__CTL__CTL_MSG__BODY_RAILS:
	case XFER__CTL__CTL_MSG__BODY_STATS:
	case XFER__CTL__CTL_MSG__BODY_CONFIG:
	case XFER__CTL__CTL_MSG__BODY_NAMES:
		return 0;
	case XFER__CTL__CTL_MSG__BODY_PING:
		if (valid_ping_target(m->ping->target))
			return 0;
		*why = "ping: the peer must be 1-80 printable characters "
		       "without spaces";
		return -EINVAL;
	default:
		*why = "unknown request";
		return -EPROTO;
	}
}
