/* SPDX-License-Identifier: Apache-2.0 */
/*
 * names.c - publishing tokens under a name and looking them up.
 *
 * Arguments are checked here as xferd checks them, so that a bad name
 * costs no round trip and a caller learns of it the same way everywhere.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/pubname.h"
#include "internal.h"

/* The rule (common/pubname.c) is xferd's: a bad name costs no round
 * trip and fails the same way everywhere. */
static bool name_valid(const char *name)
{
	return pubname_valid(name, strnlen(name, PUBNAME_MAX + 1));
}

/* A request answered by a bare Status. */
static int status_call(struct xfer_ctx *ctx, Xfer__Client__ClientMsg *m)
{
	Xfer__Client__ClientMsg *r;
	int err = ctx_call(ctx, m, NULL, 0, &r);

	if (err)
		return err;
	if (r->body_case != XFER__CLIENT__CLIENT_MSG__BODY_STATUS)
		err = -EPROTO;
	xfer__client__client_msg__free_unpacked(r, NULL);
	return err;
}

XFER_EXPORT int xfer_publish_flags(struct xfer_ctx *ctx, const char *name,
				   const void *token, size_t len,
				   unsigned flags)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__PublishRequest req = XFER__CLIENT__PUBLISH_REQUEST__INIT;

	if (!ctx || !name || !name_valid(name) || !token ||
	    len == 0 || len > XFER_TOKEN_MAX || (flags & ~XFER_PUBLISH_SHARED))
		return -EINVAL;
	req.name = (char *)name;
	req.token.data = (uint8_t *)token;
	req.token.len = len;
	req.flags = flags;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_PUBLISH;
	m.publish = &req;
	return status_call(ctx, &m);
}

XFER_EXPORT int xfer_publish(struct xfer_ctx *ctx, const char *name,
			     const void *token, size_t len)
{
	return xfer_publish_flags(ctx, name, token, len, 0);
}

XFER_EXPORT int xfer_unpublish(struct xfer_ctx *ctx, const char *name)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__UnpublishRequest req =
		XFER__CLIENT__UNPUBLISH_REQUEST__INIT;

	if (!ctx || !name || !name_valid(name))
		return -EINVAL;
	req.name = (char *)name;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_UNPUBLISH;
	m.unpublish = &req;
	return status_call(ctx, &m);
}

XFER_EXPORT int xfer_lookup(struct xfer_ctx *ctx, const char *name, void *buf,
			    size_t *len)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__LookupRequest req = XFER__CLIENT__LOOKUP_REQUEST__INIT;
	Xfer__Client__ClientMsg *r;

	/* buf may be NULL with *len == 0: asks for the size only. */
	if (!ctx || !name || !len || (!buf && *len) ||
	    !pubname_lookup_valid(name))
		return -EINVAL;
	req.name = (char *)name;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP;
	m.lookup = &req;
	int err = ctx_call(ctx, &m, NULL, 0, &r);
	if (err)
		return err;
	const ProtobufCBinaryData *tok =
		r->body_case == XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP_REPLY
			? &r->lookup_reply->token : NULL;
	if (!tok || tok->len == 0 || tok->len > XFER_TOKEN_MAX) {
		err = -EPROTO;
	} else if (tok->len > *len) {
		*len = tok->len;
		err = -ENOSPC;
	} else {
		memcpy(buf, tok->data, tok->len);
		*len = tok->len;
	}
	xfer__client__client_msg__free_unpacked(r, NULL);
	return err;
}
