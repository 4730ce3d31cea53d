/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_msg.c - the state-free validation of a client's control message
 * (client_msg.h): one switch over the message types, every field and
 * bound checked before client.c acts.
 */
#include <errno.h>
#include <string.h>

#include "client_msg.h"
#include "common/pubname.h"
#include "common/wire.h"
#include "gpu/gpu.h"
#include "meta/names.h"

#define BAD_NAME "names are 1-200 bytes of [A-Za-z0-9._:@+-]"

/* GPU memory: the description of the allocation the client sends. */
static bool cuda_alloc_valid(const Xfer__Client__CudaAlloc *a, unsigned nfds)
{
	return a && a->device_uuid.len == GPU_UUID_LEN && a->alloc_size != 0 &&
	       (a->vmm ? nfds == 1 : nfds == 0) &&
	       (a->vmm || a->ipc_handle.len == GPU_IPC_HANDLE_LEN);
}

static int check_reg(const Xfer__Client__RegRequest *req, unsigned nfds,
		     const char **why)
{
	if (req->length == 0) {
		*why = "region length is 0";
		return -EINVAL;
	}
	switch (req->kind) {
	case XFER__CLIENT__MEM_KIND__MEM_MEMFD:
		*why = "a memfd region needs exactly one fd";
		return nfds == 1 ? 0 : -EINVAL;
	case XFER__CLIENT__MEM_KIND__MEM_CUDA:
		*why = "Invalid argument";  /* strerror(EINVAL), as before */
		return cuda_alloc_valid(req->cuda, nfds) ? 0 : -EINVAL;
	case XFER__CLIENT__MEM_KIND__MEM_CMA:
		*why = "a cma region carries no fd";
		return nfds == 0 ? 0 : -EINVAL;
	default:
		*why = "unknown memory kind";
		return -EINVAL;
	}
}

/* "[node/][~uid/]name" (common/pubname.h). */
static int check_lookup(const char *name, const char **why)
{
	struct pubname_ref ref;
	const char *last = strrchr(name, '/');

	if (pubname_lookup_parse(name, &ref))
		return 0;
	/* A good name behind a bad node or qualifier: say which. */
	*why = last && names_valid(last + 1)
		? "lookup is 'name', '~uid/name', 'node/name' or "
		  "'node/~uid/name'"
		: BAD_NAME;
	return -EINVAL;
}

int client_msg_check(const Xfer__Client__ClientMsg *m, unsigned nfds,
		     const char **why)
{
	if (m->proto_version != XFER_PROTO_VERSION) {
		*why = "protocol version mismatch";
		return -EPROTO;
	}
	/* Only REG and DLIST_CREATE may carry descriptors. */
	if (nfds && m->body_case != XFER__CLIENT__CLIENT_MSG__BODY_REG &&
	    m->body_case != XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE) {
		*why = "unexpected file descriptors";
		return -EPROTO;
	}
	*why = NULL;
	switch (m->body_case) {
	case XFER__CLIENT__CLIENT_MSG__BODY_REG:
		return check_reg(m->reg, nfds, why);
	case XFER__CLIENT__CLIENT_MSG__BODY_DEREG:
	case XFER__CLIENT__CLIENT_MSG__BODY_UNIMPORT:
		return 0;  /* a handle: the region table says if it is one */
	case XFER__CLIENT__CLIENT_MSG__BODY_IMPORT:
		return 0;  /* the token: token_decode() in handle_import */
	case XFER__CLIENT__CLIENT_MSG__BODY_PUBLISH:
		if (!names_valid(m->publish->name)) {
			*why = BAD_NAME;
			return -EINVAL;
		}
		if (m->publish->flags & ~NAMES_FLAGS) {
			*why = "unknown publish flags";
			return -EINVAL;
		}
		if (m->publish->token.len == 0 ||
		    m->publish->token.len > NAMES_TOKEN_MAX) {
			*why = "a token is 1-512 bytes";
			return -EINVAL;
		}
		return 0;
	case XFER__CLIENT__CLIENT_MSG__BODY_UNPUBLISH:
		*why = BAD_NAME;
		return names_valid(m->unpublish->name) ? 0 : -EINVAL;
	case XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP:
		return check_lookup(m->lookup->name, why);
	case XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE:
		if (nfds != 1) {
			*why = "a list's entries come in exactly one fd";
			return -EINVAL;
		}
		if (m->dlist_create->count == 0) {
			*why = "a list has at least one entry";
			return -EINVAL;
		}
		return 0;  /* the rest against the config and the table */
	case XFER__CLIENT__CLIENT_MSG__BODY_DLIST_DESTROY:
		return 0;
	default:
		*why = "unexpected message type";
		return -EPROTO;
	}
}
