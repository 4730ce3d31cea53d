/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listener.h - xferd's Unix SOCK_SEQPACKET socket.
 *
 * Uses the socket systemd passed (socket activation) or binds the path
 * itself.  Each accepted connection is held until its first packet, whose
 * channel tag decides who takes it over: libxfer (client.c) or xferctl
 * (ctl.c).  Connections that send nothing within handshake_timeout_ms
 * are closed, and one uid may have only max_pending_per_uid of them,
 * all users but root max_pending (uid_usage.h; their fds are kept from
 * clients, budget.h); out of fds, accepting pauses instead of spinning.
 */
#ifndef XFERD_LISTENER_H
#define XFERD_LISTENER_H

struct xferd;
struct listener;

/*
 * Listen at d->socket_path (mode 0660), or on the activated socket.
 * Refuses to take over the path of a running xferd.  Returns NULL with a
 * logged reason on failure.
 */
struct listener *listener_open(struct xferd *d);
/* Stop accepting; removes the socket file if xferd created it. */
void listener_close(struct listener *l);

#endif /* XFERD_LISTENER_H */
