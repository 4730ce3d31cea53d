/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_int.h - what the files of one libxfer connection share, and
 * nothing outside them includes: struct client, the replies, and the
 * handlers that dispatch() (client.c) calls once client_msg_check()
 * passed a message.
 *
 *   client.c        the connection's life: handshake, reading and the
 *                   one dispatch switch, teardown (and giving back what
 *                   it counted against its uid), shutdown, listing;
 *   client_mem.c    registrations (memfd, CMA, CUDA on the registration
 *                   thread), imports, and their removal;
 *   client_dlist.c  prepared descriptor lists;
 *   client_names.c  publish, unpublish and lookup (here, in etcd, at
 *                   peers).
 *
 * Thread: the main thread, all of it (a registration job's run() is the
 * registration thread's, client_mem.c).  A struct client is never
 * reached from another thread: the progress thread sees only its
 * prog_client (engine/progress.h), and asynchronous answers keep its
 * id, never the pointer (client_by_id).  No lock of its own.
 */
#ifndef XFERD_CLIENT_INT_H
#define XFERD_CLIENT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <time.h>

#include "client.h"
#include "client.pb-c.h"
#include "quota.h"

struct cma_owner;
struct event;
struct uid_usage;

enum client_state {
	CLIENT_ACTIVE,
	CLIENT_DETACHING, /* socket closed; waiting for the progress thread */
};

struct client {
	struct prog_client pc;   /* first: notices hand back &c->pc */
	struct xferd *d;
	enum client_state state;
	int sock;
	struct event *ev;        /* reading; off while reg_pending */
	struct event *ev_closed; /* hang-up only; on while reg_pending */
	bool reg_pending;        /* a registration job is out (regworker.h) */
	pid_t pid;
	int pidfd;               /* pins pid until cma takes it over */
	struct cma_owner *cma;   /* its CMA regions' process (cma.h), lazily */
	uid_t uid;
	gid_t gid;
	char name[64];
	struct timespec connected;
	void *ring_map;
	size_t ring_len;
	struct client_usage use; /* against the limits (quota.h) */
	struct uid_usage *uu;    /* its user's, against per-uid limits
				  * (uid_usage.h); also its notify pool */
	uint32_t names;          /* names it published, counted in uu */
	TAILQ_ENTRY(client) link;
};

/* client.c */
/* Drop c (once; what it holds goes now, c itself when the progress
 * thread lets go of it). */
void client_drop(struct client *c, const char *why);
struct client *client_by_id(struct xferd *d, uint64_t id);
int client_send(struct client *c, Xfer__Client__ClientMsg *m,
		const int *fds, unsigned nfds);
int client_reply(struct client *c, uint64_t seq, int error,
		 const char *message);

/*
 * The handlers, called by dispatch() once the message passed
 * client_msg_check (kinds, lengths, names, descriptors).  Each returns 0
 * once it replied or will reply later, or the error of a reply that
 * could not be sent (the client is then dropped).
 */

/* client_mem.c.  fds, *nfds: the message's descriptors; one taken over
 * leaves *nfds (the caller closes the rest). */
int client_reg(struct client *c, uint64_t seq,
	       const Xfer__Client__RegRequest *req, int *fds,
	       unsigned *nfds);
int client_import(struct client *c, uint64_t seq,
		  const Xfer__Client__ImportRequest *req);
int client_remove(struct client *c, uint64_t seq, uint64_t handle,
		  bool is_import);

/* client_dlist.c */
int client_dlist_create(struct client *c, uint64_t seq,
			const Xfer__Client__DlistCreateRequest *req,
			const int *fds);
int client_dlist_destroy(struct client *c, uint64_t seq,
			 uint64_t handle);

/* client_names.c */
int client_publish(struct client *c, uint64_t seq,
		   const Xfer__Client__PublishRequest *req);
int client_unpublish(struct client *c, uint64_t seq,
		     const Xfer__Client__UnpublishRequest *req);
int client_lookup(struct client *c, uint64_t seq,
		  const Xfer__Client__LookupRequest *req);
/* The user's count of names follows the table: what this client holds
 * now (client.c calls it at teardown). */
void client_names_recount(struct client *c);

#endif /* XFERD_CLIENT_INT_H */
