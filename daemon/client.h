/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.h - one libxfer connection, as seen by xferd's main thread.
 *
 * Handles the control messages (registration, import, ...) of a client,
 * owns its ring and descriptors, and tears everything down when the
 * client goes: regions leave the handle table at once (nobody can reach
 * them any more), the ring is handed back by the progress thread, and
 * only then is the client freed.
 */
#ifndef XFERD_CLIENT_H
#define XFERD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "engine/progress.h"

struct xferd;
struct client;

/*
 * Take over connection sock whose first packet (pkt, with nfds fds) was
 * tagged for the client channel; it must be a Hello.  On any failure the
 * connection and fds are closed with one log line.
 */
void client_accept(struct xferd *d, int sock, const struct ucred *cred,
		   const uint8_t *pkt, size_t len, int *fds, unsigned nfds);

/* Route a progress-thread notice (installed by main.c). */
void client_on_notice(struct prog_client *pc, enum notice_kind kind,
		      void *arg);

/*
 * Shutdown: tell every client goodbye and close its socket.  Call before
 * stopping the progress thread; client_free_all() after it.
 */
void client_goodbye_all(struct xferd *d, const char *reason);
void client_free_all(struct xferd *d);

/* What xferctl shows of a client. */
struct client_view {
	uint64_t id;
	pid_t pid;
	uid_t uid;
	const char *name;
	uint32_t sq_entries;
	uint64_t connected_ms;
	const struct client_stats *stats;
};
void client_foreach(struct xferd *d,
		    void (*fn)(const struct client_view *v, void *arg),
		    void *arg);

/* held[t]: some client of tenant slot t is still in d's list (active,
 * or dropped and not yet let go by the progress thread). */
void client_tenants_held(struct xferd *d, bool held[TENANT_MAX]);

#endif /* XFERD_CLIENT_H */
