/*
 * names.c - publishing tokens under a name and looking them up.
 *
 * Arguments are checked here as xferd checks them, so that a bad name
 * costs no round trip and a caller learns of it the same way everywhere.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "internal.h"

#define NAME_MAX_LEN 200  /* bytes of a name, as xferd's table */
#define NODE_MAX_LEN 79   /* "host:port", "[v6]:port" or a node name */

/* 1-200 bytes of [A-Za-z0-9._:@+-]: no '/', which separates a node. */
static bool name_valid(const char *name, size_t len)
{
	if (len == 0 || len > NAME_MAX_LEN)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)name[i];
		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		      (ch >= '0' && ch <= '9') || (ch && strchr("._:@+-", ch))))
			return false;
	}
	return true;
}

/* "name" or "node/name" with a node of printable characters. */
static bool lookup_name_valid(const char *name)
{
	const char *slash = strchr(name, '/');

	if (!slash)
		return name_valid(name, strlen(name));
	size_t nlen = (size_t)(slash - name);
	if (nlen == 0 || nlen > NODE_MAX_LEN)
		return false;
	for (size_t i = 0; i < nlen; i++)
		if ((unsigned char)name[i] <= 0x20 ||
		    (unsigned char)name[i] >= 0x7f)
			return false;
	return name_valid(slash + 1, strlen(slash + 1));
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

XFER_EXPORT int xfer_publish(struct xfer_ctx *ctx, const char *name,
			     const void *token, size_t len)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__PublishRequest req = XFER__CLIENT__PUBLISH_REQUEST__INIT;

	if (!ctx || !name || !name_valid(name, strlen(name)) || !token ||
	    len == 0 || len > XFER_TOKEN_MAX)
		return -EINVAL;
	req.name = (char *)name;
	req.token.data = (uint8_t *)token;
	req.token.len = len;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_PUBLISH;
	m.publish = &req;
	return status_call(ctx, &m);
}

XFER_EXPORT int xfer_unpublish(struct xfer_ctx *ctx, const char *name)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__UnpublishRequest req =
		XFER__CLIENT__UNPUBLISH_REQUEST__INIT;

	if (!ctx || !name || !name_valid(name, strlen(name)))
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
	    !lookup_name_valid(name))
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
