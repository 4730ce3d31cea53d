/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_msg.h - what xferd checks of a client's control message before
 * acting on it: the envelope (version, which messages may carry file
 * descriptors, known types) and every field that needs no state.
 *
 * client.c calls it on every message after the handshake; the fuzz
 * harness tests/fuzz/fuzz_client_msg.c calls it on arbitrary bytes.
 * What needs the daemon's state (max_handles, max_region_bytes, whether
 * a handle or name exists) stays with the handlers in client.c.
 */
#ifndef XFERD_CLIENT_MSG_H
#define XFERD_CLIENT_MSG_H

#include "client.pb-c.h"

/*
 * m was unpacked from a packet that carried nfds descriptors.  Returns
 * 0 (go ahead), -EPROTO (the client broke the protocol: drop it), or
 * -EINVAL (refuse the request with a status and keep the connection).
 * *why says why in both error cases.
 */
int client_msg_check(const Xfer__Client__ClientMsg *m, unsigned nfds,
		     const char **why);

#endif /* XFERD_CLIENT_MSG_H */
