/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c - one libxfer connection's life: the handshake (hello, ring,
 * doorbells), reading its control messages and the one dispatch switch
 * over them (client_msg.c validates; client_mem.c, client_dlist.c and
 * client_names.c act, client_int.h), its teardown with what it counted
 * against its user given back, shutdown and listing.
 *
 * Thread: the main thread only; the progress thread sees only the
 * prog_client inside (engine/progress.h) and hands it back by a notice
 * (client_on_notice).  No lock of its own.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "budget.h"
#include "client_int.h"
#include "client_msg.h"
#include "common/wire.h"
#include "core/log.h"
#include "core/notify_msg.h"
#include "mem/cma.h"
#include "mem/dlist.h"
#include "mem/region.h"
#include "mem/regworker.h"
#include "meta/cluster.h"
#include "meta/names.h"
#include "peer/peer.h"
#include "uid_usage.h"
#include "xferd.h"

/* fds xferd holds for every client: socket, SQ and CQ doorbells, pidfd. */
#define CLIENT_BASE_FDS 4

static struct client *client_of(struct prog_client *pc)
{
	return (struct client *)((char *)pc - offsetof(struct client, pc));
}

/*
 * A pidfd of the process that connected on sock: SO_PEERPIDFD (Linux 6.5)
 * names the process of connect() itself, so a pid reused since cannot be
 * taken for it; before that, pidfd_open of the pid SO_PEERCRED gave
 * (the process may have exited and its pid gone to another in between).
 * -1 if it has exited: then it gets no CMA.
 */
static int peer_pidfd(int sock, pid_t pid)
{
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
	int fd = -1;
	socklen_t len = sizeof(fd);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 &&
	    fd >= 0)
		return fd;
	return pidfd_open(pid, 0);
}


/* --- replies --- */

int client_send(struct client *c, Xfer__Client__ClientMsg *m,
		const int *fds, unsigned nfds)
{
	m->proto_version = XFER_PROTO_VERSION;
	return wire_send(c->sock, WIRE_TAG_CLIENT, &m->base, fds, nfds);
}

int client_reply(struct client *c, uint64_t seq, int error,
		 const char *message)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Status st = XFER__CLIENT__STATUS__INIT;

	quota_refusal_count(&c->d->refusals, error);
	st.error = error;
	st.message = (char *)(message ? message : "");
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_STATUS;
	m.status = &st;
	return client_send(c, &m, NULL, 0);
}

/*
 * The live client with this id, or NULL.  An asynchronous answer keeps
 * the id, never the pointer: the client may have gone meanwhile.
 */
struct client *client_by_id(struct xferd *d, uint64_t id)
{
	struct client *c;

	TAILQ_FOREACH(c, &d->clients, link)
		if (c->pc.id == id)
			return c->state == CLIENT_ACTIVE ? c : NULL;
	return NULL;
}



/*
 * One packet from the client.  Returns 0, or -EPROTO (with *why) when the
 * client broke the protocol and must be dropped.
 */
static int dispatch(struct client *c, const uint8_t *pkt, size_t len,
		    int *fds, unsigned *nfds, const char **why)
{
	Xfer__Client__ClientMsg *m;
	int rc = 0;

	if (wire_tag(pkt, len) != WIRE_TAG_CLIENT) {
		*why = "packet without the client tag";
		return -EPROTO;
	}
	m = xfer__client__client_msg__unpack(NULL, len - WIRE_TAG_LEN,
					     pkt + WIRE_TAG_LEN);
	if (!m) {
		*why = "malformed message";
		return -EPROTO;
	}
	rc = client_msg_check(m, *nfds, why);
	if (rc == -EPROTO)
		goto out;
	if (rc) {
		rc = client_reply(c, m->seq, rc, *why);
		goto replied;
	}
	switch (m->body_case) {
	case XFER__CLIENT__CLIENT_MSG__BODY_REG:
		rc = client_reg(c, m->seq, m->reg, fds, nfds);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_DEREG:
		rc = client_remove(c, m->seq, m->dereg->handle, false);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_IMPORT:
		rc = client_import(c, m->seq, m->import);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_UNIMPORT:
		rc = client_remove(c, m->seq, m->unimport->handle, true);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_PUBLISH:
		rc = client_publish(c, m->seq, m->publish);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_UNPUBLISH:
		rc = client_unpublish(c, m->seq, m->unpublish);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_LOOKUP:
		rc = client_lookup(c, m->seq, m->lookup);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE:
		rc = client_dlist_create(c, m->seq, m->dlist_create, fds);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_DLIST_DESTROY:
		rc = client_dlist_destroy(c, m->seq, m->dlist_destroy->handle);
		break;
	default:  /* client_msg_check let no other type through */
		*why = "unexpected message type";
		rc = -EPROTO;
		goto out;
	}
replied:
	if (rc) {
		/* The reply could not be sent: the client stopped reading. */
		*why = "cannot send reply";
		rc = -EPROTO;
	}
out:
	xfer__client__client_msg__free_unpacked(m, NULL);
	return rc;
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	uint8_t pkt[WIRE_MAX_PACKET];
	int fds[WIRE_MAX_FDS];
	unsigned nfds;
	const char *why = NULL;
	(void)what;

	/* A few packets per wake-up, then let others run. */
	for (int i = 0; i < 16; i++) {
		ssize_t n = wire_recv(fd, pkt, fds, &nfds);
		if (n == -EAGAIN)
			return;
		if (n == 0) {
			client_drop(c, "disconnected");
			return;
		}
		if (n < 0) {
			client_drop(c, n == -EMSGSIZE
				       ? "oversized packet or too many fds"
				       : "socket error");
			return;
		}
		int rc = dispatch(c, pkt, (size_t)n, fds, &nfds, &why);
		wire_close_fds(fds, &nfds);
		if (rc) {
			client_drop(c, why);
			return;
		}
		/* An answer sent from inside dispatch (a lookup the peers
		 * answered at once) may have found the socket broken; a
		 * registration on the registration thread holds the rest. */
		if (c->state != CLIENT_ACTIVE || c->reg_pending)
			return;
	}
}

/* --- teardown --- */

/* EV_CLOSED: the client hung up while its registration was out. */
static void on_hangup(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	client_drop(arg, "disconnected");
}

/* What the client held leaves its user's counts (its lists leave with
 * dltab_remove_client), and the connection its uid's.  Its regions are
 * out of the table by then: their fds and mappings go with the last
 * reference (an operation in flight holds one a moment).  Once: the
 * counts are the client's no more. */
static void client_give_back(struct client *c)
{
	c->uu->regions -= c->use.regions;
	c->uu->imports -= c->use.imports;
	c->use.regions = 0;
	c->use.imports = 0;
	client_names_recount(c);
	budget_release_fds(&c->d->budget, c->uu, &c->use, c->use.fds);
	budget_release_bytes(&c->d->budget, c->uu, &c->use,
			     c->use.host_bytes);
	uid_conn_release(c->uu, UID_CLIENT);
}

static void client_free(struct client *c)
{
	if (c->ev)
		event_free(c->ev);
	if (c->ev_closed)
		event_free(c->ev_closed);
	if (c->sock >= 0)
		close(c->sock);
	progress_doorbells_close(&c->pc);
	if (c->ring_map)
		munmap(c->ring_map, c->ring_len);
	if (c->pidfd >= 0)
		close(c->pidfd);
	cma_owner_put(c->cma);
	/* After the progress thread let go of it (its notify pool). */
	uid_usage_put(c->d->uid_use, c->uu);
	free(c);
}

void client_drop(struct client *c, const char *why)
{
	struct xferd *d = c->d;

	if (c->state != CLIENT_ACTIVE)
		return;
	log_info_f(&((struct log_fields){ .client_pid = (int)c->pid }),
		   "client %llu (pid %d, %s) dropped: %s",
		   (unsigned long long)c->pc.id, (int)c->pid, c->name, why);
	c->state = CLIENT_DETACHING;
	event_free(c->ev);
	c->ev = NULL;
	event_free(c->ev_closed);
	c->ev_closed = NULL;
	close(c->sock);
	c->sock = -1;
	/* A registration out for it: released (now, or when it returns). */
	if (c->reg_pending)
		regworker_cancel(d->regworker, c->pc.id);
	/* From here no descriptor of anyone reaches this client's memory. */
	regtab_remove_client(d->regs, c->pc.id);
	dltab_remove_client(d->dlists, c->pc.id);
	cluster_client_gone(d->cluster, c->pc.id);
	names_remove_client(d->names, c->pc.id);
	client_give_back(c);
	d->nclients--;
	progress_detach(d->progress, &c->pc);
}

void client_on_notice(struct prog_client *pc, enum notice_kind kind,
		      void *arg)
{
	struct client *c = client_of(pc);
	struct xferd *d = arg;

	switch (kind) {
	case NOTICE_BROKEN:
		client_drop(c, pc->broken);
		break;
	case NOTICE_DETACHED:
		TAILQ_REMOVE(&d->clients, c, link);
		client_free(c);
		break;
	}
}

/* --- handshake --- */

static int make_ring(struct client *c, uint32_t sq_entries, bool msgs,
		     struct xfer_ring_offsets *off, int *ring_fd)
{
	int err = ring_layout(sq_entries, c->d->cfg.ring_index_kb << 10, off);

	if (!err && msgs)
		err = ring_layout_msgs(off);
	if (err)
		return err;
	int fd = memfd_create("xferd-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* Sealed so the client cannot shrink the ring under our feet. */
	if (ftruncate(fd, off->map_size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		goto err_fd;
	c->ring_map = mmap(NULL, off->map_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, fd, 0);
	if (c->ring_map == MAP_FAILED) {
		c->ring_map = NULL;
		goto err_fd;
	}
	/* The queues' pages now, not on the first descriptors; the index
	 * and message areas' only when a client uses them (most never do). */
	uint32_t queues = off->idx_size ? off->idx
			  : off->sq_msg_size ? off->sq_msgs : off->map_size;
	for (uint32_t at = 0; at < queues; at += 4096)
		((volatile char *)c->ring_map)[at] = 0;
	c->ring_len = off->map_size;
	*(uint32_t *)((char *)c->ring_map + off->magic) = XFER_RING_MAGIC;
	err = ring_view_init(&c->pc.ring, c->ring_map, c->ring_len, off);
	if (err) {
		close(fd);
		return err;
	}
	*ring_fd = fd;
	return 0;
err_fd:
	err = -errno;
	close(fd);
	return err;
}

/*
 * The ring, the client's SQ doorbell (an eventfd) and its end of the CQ
 * doorbell pair (a datagram socket; libxfer before the pair took an
 * eventfd there, and works with it unchanged: it reads up to 8 bytes to
 * reset it).
 */
static int send_hello_reply(struct client *c, uint64_t seq,
			    const struct xfer_ring_offsets *o, int ring_fd,
			    int cq_fd)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__HelloReply rep = XFER__CLIENT__HELLO_REPLY__INIT;
	Xfer__Client__RingLayout rl = XFER__CLIENT__RING_LAYOUT__INIT;
	const int fds[3] = { ring_fd, c->pc.sq_efd, cq_fd };
	Xfer__Token__Address addr[TOKEN_MAX_ADDRS];
	Xfer__Token__Address *addrp[TOKEN_MAX_ADDRS];
	char ifname[TOKEN_MAX_ADDRS][IF_NAMESIZE];
	const struct netaddr *na;
	uint16_t port;
	size_t nna = peers_advertised(c->d->peers, &na, &port), naddr = 0;

	/* The client copies these into every token, which holds at most
	 * TOKEN_MAX_ADDRS: send no more, and only what a token accepts. */
	for (size_t i = 0; i < nna && naddr < TOKEN_MAX_ADDRS; i++) {
		const struct token_addr ta = {
			.ip_len = na[i].family == AF_INET ? 4
				  : na[i].family == AF_INET6 ? 16 : 0,
			.prefix_len = na[i].prefix_len > 128
					      ? 255 : (uint8_t)na[i].prefix_len,
		};
		if (!token_addr_valid(&ta))
			continue;
		xfer__token__address__init(&addr[naddr]);
		addr[naddr].ip.data = (uint8_t *)na[i].ip;
		addr[naddr].ip.len = ta.ip_len;
		addr[naddr].prefix_len = ta.prefix_len;
		addr[naddr].port = port;
		snprintf(ifname[naddr], sizeof(ifname[naddr]), "%.*s",
			 (int)sizeof(na[i].ifname), na[i].ifname);
		addr[naddr].ifname = ifname[naddr];
		addrp[naddr] = &addr[naddr];
		naddr++;
	}

	rl.map_size = o->map_size;
	rl.sq_entries = o->sq_entries;
	rl.cq_entries = o->cq_entries;
	rl.magic = o->magic;
	rl.sq_head = o->sq_head;
	rl.sq_tail = o->sq_tail;
	rl.sq_flags = o->sq_flags;
	rl.sqes = o->sqes;
	rl.cq_head = o->cq_head;
	rl.cq_tail = o->cq_tail;
	rl.cq_flags = o->cq_flags;
	rl.cq_overflow = o->cq_overflow;
	rl.cqes = o->cqes;
	rl.idx = o->idx;
	rl.idx_size = o->idx_size;
	rl.cq_senders = o->cq_senders;
	rl.cq_sender_size = o->cq_sender_size;
	rl.sq_msgs = o->sq_msgs;
	rl.sq_msg_size = o->sq_msg_size;
	rl.cq_msgs = o->cq_msgs;
	rl.cq_msg_size = o->cq_msg_size;
	rep.instance_id.data = c->d->instance_id;
	rep.instance_id.len = sizeof(c->d->instance_id);
	rep.client_id = c->pc.id;
	rep.uid = c->uid;
	rep.daemon_pid = (uint32_t)getpid();
	rep.ring = &rl;
	rep.ring_phase = c->pc.ring.phase;
	rep.n_addresses = naddr;
	rep.addresses = naddr ? addrp : NULL;
	rep.node_name = (char *)peers_node_name(c->d->peers);
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO_REPLY;
	m.hello_reply = &rep;
	return client_send(c, &m, fds, 3);
}

/* Refuse a connection before it became a client: one status, close. */
static void refuse(struct xferd *d, int sock, uint64_t seq, int error,
		   const char *why)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Status st = XFER__CLIENT__STATUS__INIT;

	quota_refusal_count(&d->refusals, error);
	st.error = error;
	st.message = (char *)why;
	m.proto_version = XFER_PROTO_VERSION;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_STATUS;
	m.status = &st;
	wire_send(sock, WIRE_TAG_CLIENT, &m.base, NULL, 0);
	close(sock);
}

void client_accept(struct xferd *d, int sock, const struct ucred *cred,
		   const uint8_t *pkt, size_t len, int *fds, unsigned nfds)
{
	Xfer__Client__ClientMsg *m = NULL;
	struct client *c = NULL;
	struct xfer_ring_offsets off;
	int ring_fd = -1, cq_fd = -1, err;
	uint64_t seq = 0;
	bool uncount = false;  /* counted against its uid, not a client */
	struct uid_usage *uu = NULL;      /* its uid's, held until out */
	struct client_usage use = { 0 };  /* its fds, until it is a client */
	const char *why;

	bool had_fds = nfds > 0;

	wire_close_fds(fds, &nfds); /* a hello carries none */
	m = xfer__client__client_msg__unpack(NULL, len - WIRE_TAG_LEN,
					     pkt + WIRE_TAG_LEN);
	if (!m || m->body_case != XFER__CLIENT__CLIENT_MSG__BODY_HELLO ||
	    had_fds) {
		log_info("connection from pid %d: expected a hello, dropped",
			 (int)cred->pid);
		close(sock);
		goto out;
	}
	seq = m->seq;
	if (m->proto_version != XFER_PROTO_VERSION) {
		log_info("client pid %d speaks protocol %u, not %u: refused",
			 (int)cred->pid, m->proto_version, XFER_PROTO_VERSION);
		refuse(d, sock, seq, -EPROTO, "protocol version mismatch");
		goto out;
	}
	if (d->stopping) {
		refuse(d, sock, seq, -EBUSY, "xferd is stopping");
		goto out;
	}
	if (d->nclients >= d->cfg.max_clients) {
		log_info("client pid %d uid %d refused: xferd has max_clients "
			 "(%u) clients", (int)cred->pid, (int)cred->uid,
			 d->cfg.max_clients);
		refuse(d, sock, seq, -EUSERS, "xferd has max_clients clients");
		goto out;
	}
	/* Counted from here; client_drop gives it back, and so does every
	 * failure below (uncount). */
	uu = uid_usage_get(d->uid_use, cred->uid);
	err = uu ? uid_conn_take(uu, UID_CLIENT,
				 d->cfg.max_connections_per_uid) : -ENOMEM;
	if (err) {
		log_info("client pid %d uid %d refused: %s", (int)cred->pid,
			 (int)cred->uid, err == -EMFILE
			 ? "the uid is at max_connections_per_uid"
			 : "out of memory");
		refuse(d, sock, seq, err, err == -EMFILE
		       ? "too many connections of this uid "
			 "(max_connections_per_uid)" : "out of memory");
		goto out;
	}
	uncount = true;
	/* Its socket, its two doorbells (SQ eventfd, xferd's end of the CQ
	 * pair) and its pidfd. */
	err = budget_take_fds(&d->budget, uu, &use, CLIENT_BASE_FDS, &why);
	if (err) {
		log_info("client pid %d uid %d refused: %s", (int)cred->pid,
			 (int)cred->uid, why);
		refuse(d, sock, seq, err, why);
		goto out;
	}
	uint32_t want = m->hello->sq_entries ? m->hello->sq_entries
					     : d->cfg.sq_entries;
	if (want > d->cfg.max_sq_entries || (want & (want - 1)) ||
	    want < RING_MIN_SQ_ENTRIES) {
		refuse(d, sock, seq, -EINVAL,
		       "sq_entries must be a power of two within limits");
		goto out;
	}
	if (m->hello->traffic_class >= XFER_CLASS__COUNT) {
		refuse(d, sock, seq, -EINVAL, "unknown traffic class");
		goto out;
	}
	const char *sname = m->hello->sender_name ? m->hello->sender_name : "";
	size_t sname_len = strlen(sname);
	if (!notify_name_ok(sname, sname_len)) {
		refuse(d, sock, seq, -EINVAL, "a sender name is at most 64 "
		       "bytes of printable ASCII (0x20-0x7e)");
		goto out;
	}

	c = calloc(1, sizeof(*c));
	if (!c) {
		refuse(d, sock, seq, -ENOMEM, "out of memory");
		goto out;
	}
	c->d = d;
	c->uu = uid_usage_hold(uu);  /* until client_free */
	c->pc.notify.pool = &uu->notify;
	c->sock = sock;
	c->pid = cred->pid;
	c->uid = cred->uid;
	c->gid = cred->gid;
	c->pc.id = d->next_client_id++;
	c->pc.uid = cred->uid;
	c->pc.name_len = (uint8_t)sname_len;
	memcpy(c->pc.name, sname, sname_len);
	c->pc.cls = (uint8_t)m->hello->traffic_class;
	c->pc.tenant = tenant_match(&d->cfg.tenants, cred->uid, cred->gid);
	/* Its own doorbells: nothing xferd reads or writes is shared with
	 * another client, nor with this one (engine/progress.h). */
	bool doorbells = progress_doorbells(&c->pc, &cq_fd) == 0;
	c->pidfd = peer_pidfd(sock, c->pid);
	clock_gettime(CLOCK_MONOTONIC, &c->connected);
	snprintf(c->name, sizeof(c->name), "%s",
		 m->hello->name && *m->hello->name ? m->hello->name : "?");
	for (char *p = c->name; *p; p++) /* keep log lines one line */
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (!doorbells || (err = make_ring(c, want, m->hello->notify_msgs, &off,
					  &ring_fd))) {
		refuse(d, sock, seq, -ENOMEM, "cannot set up the ring");
		c->sock = -1;
		if (cq_fd >= 0)
			close(cq_fd);
		client_free(c);
		goto out;
	}
	/* Per-entry phase ((F), (G) of common/ring.h): for a client that
	 * asks; one that does not gets tails only, as before. */
	c->pc.ring.phase = m->hello->ring_phase;
	err = send_hello_reply(c, seq, &off, ring_fd, cq_fd);
	/* Our mapping stays, and our doorbells; the client has its own
	 * fds, and xferd keeps no copy of the client's CQ end. */
	close(ring_fd);
	close(cq_fd);
	c->ev = event_new(d->base, sock, EV_READ | EV_PERSIST, on_readable, c);
	c->ev_closed = event_new(d->base, sock, EV_CLOSED | EV_PERSIST,
				 on_hangup, c);
	if (err || !c->ev || !c->ev_closed || event_add(c->ev, NULL)) {
		log_warnx("client pid %d: handshake failed", (int)c->pid);
		client_free(c);
		goto out;
	}
	TAILQ_INSERT_TAIL(&d->clients, c, link);
	d->nclients++;
	uncount = false;
	c->use = use;
	progress_attach(d->progress, &c->pc);
	log_info_f(&((struct log_fields){ .client_pid = (int)c->pid }),
		   "client %llu connected: pid %d uid %d '%s', %u SQ entries",
		   (unsigned long long)c->pc.id, (int)c->pid, (int)c->uid,
		   c->name, want);
out:
	if (uncount) {
		budget_release_fds(&d->budget, uu, &use, use.fds);
		uid_conn_release(uu, UID_CLIENT);
	}
	uid_usage_put(d->uid_use, uu);
	if (m)
		xfer__client__client_msg__free_unpacked(m, NULL);
}

/* --- shutdown and listing --- */

void client_goodbye_all(struct xferd *d, const char *reason)
{
	struct client *c;

	TAILQ_FOREACH(c, &d->clients, link) {
		if (c->state != CLIENT_ACTIVE)
			continue;
		Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
		Xfer__Client__Goodbye bye = XFER__CLIENT__GOODBYE__INIT;
		bye.error = -ESHUTDOWN;
		bye.reason = (char *)reason;
		m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_GOODBYE;
		m.goodbye = &bye;
		client_send(c, &m, NULL, 0);
		/* Wake anyone polling or sleeping on the ring. */
		atomic_fetch_or_explicit(c->pc.ring.sq_flags, XFER_SQ_DEAD,
					 memory_order_release);
		progress_wake_client(&c->pc);
		shutdown(c->sock, SHUT_RDWR);
	}
}

void client_free_all(struct xferd *d)
{
	struct client *c;

	while ((c = TAILQ_FIRST(&d->clients))) {
		TAILQ_REMOVE(&d->clients, c, link);
		regtab_remove_client(d->regs, c->pc.id);
		if (c->state == CLIENT_ACTIVE) {  /* never dropped */
			dltab_remove_client(d->dlists, c->pc.id);
			names_remove_client(d->names, c->pc.id);
			client_give_back(c);
		}
		client_free(c);
	}
	d->nclients = 0;
}

void client_foreach(struct xferd *d,
		    void (*fn)(const struct client_view *v, void *arg),
		    void *arg)
{
	struct client *c;

	TAILQ_FOREACH(c, &d->clients, link) {
		if (c->state != CLIENT_ACTIVE)
			continue;
		struct client_view v = {
			.id = c->pc.id,
			.pid = c->pid,
			.uid = c->uid,
			.name = c->name,
			.sq_entries = c->pc.ring.sq_entries,
			.connected_ms = xferd_ms_since(&c->connected),
			.stats = &c->pc.stats,
		};
		fn(&v, arg);
	}
}

void client_tenants_held(struct xferd *d, bool held[TENANT_MAX])
{
	struct client *c;

	memset(held, 0, TENANT_MAX * sizeof(held[0]));
	TAILQ_FOREACH(c, &d->clients, link)
		if (c->pc.tenant < TENANT_MAX)
			held[c->pc.tenant] = true;
}
