/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.h - answers xferctl's questions (ctl.proto) on xferd's socket.
 */
#ifndef XFERD_CTL_H
#define XFERD_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct xferd;

/* Take over a connection whose first packet was tagged for ctl. */
void ctl_accept(struct xferd *d, int sock, const struct ucred *cred,
		const uint8_t *pkt, size_t len);

#endif /* XFERD_CTL_H */
