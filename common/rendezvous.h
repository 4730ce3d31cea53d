/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rendezvous.h - where libxfer, xferctl and xferd meet: the default path
 * of xferd's Unix socket, one rule for all three.
 */
#ifndef XFER_RENDEZVOUS_H
#define XFER_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>

/*
 * $XFERD_SOCKET if honor_env and set (clients only: xferd takes its path
 * from its settings), else $XDG_RUNTIME_DIR/xferd.sock, or
 * /run/xferd/xferd.sock as root or without a runtime directory.
 */
void rendezvous_default_socket(char *out, size_t len, bool honor_env);

#endif /* XFER_RENDEZVOUS_H */
