/*
 * client.c - libxfer connections: handshake, control messages, teardown.
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "client.h"
#include "client.pb-c.h"
#include "log.h"
#include "region.h"
#include "wire.h"
#include "xferd.h"

enum client_state {
	CLIENT_ACTIVE,
	CLIENT_DETACHING, /* socket closed; waiting for the progress thread */
};

struct client {
	struct prog_client pc;   /* first: notices hand back &c->pc */
	struct xferd *d;
	enum client_state state;
	int sock;
	struct event *ev;
	pid_t pid;
	int pidfd;               /* pins pid for the CMA path (region.h) */
	uid_t uid;
	gid_t gid;
	char name[64];
	struct timespec connected;
	void *ring_map;
	size_t ring_len;
	uint32_t handles;        /* regions + imports, against max_handles */
	TAILQ_ENTRY(client) link;
};

static void client_drop(struct client *c, const char *why);

static struct client *client_of(struct prog_client *pc)
{
	return (struct client *)((char *)pc - offsetof(struct client, pc));
}

/* --- replies --- */

static int send_msg(struct client *c, Xfer__Client__ClientMsg *m,
		    const int *fds, unsigned nfds)
{
	m->proto_version = XFER_PROTO_VERSION;
	return wire_send(c->sock, WIRE_TAG_CLIENT, &m->base, fds, nfds);
}

static int reply_status(struct client *c, uint64_t seq, int error,
			const char *message)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Status st = XFER__CLIENT__STATUS__INIT;

	st.error = error;
	st.message = (char *)(message ? message : "");
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_STATUS;
	m.status = &st;
	return send_msg(c, &m, NULL, 0);
}

/* --- requests --- */

static int handle_reg(struct client *c, uint64_t seq,
		      const Xfer__Client__RegRequest *req, int *fds,
		      unsigned *nfds)
{
	const struct xferd_config *cfg = &c->d->cfg;
	struct region *r = NULL;
	int err;

	if (c->handles >= cfg->max_handles)
		return reply_status(c, seq, -ENOSPC,
				    "too many regions and imports (max_handles)");
	if (req->length == 0 || req->length > cfg->max_region_bytes)
		return reply_status(c, seq, -EINVAL,
				    "region length is 0 or above max_region_bytes");
	switch (req->kind) {
	case XFER__CLIENT__MEM_KIND__MEM_MEMFD:
		if (*nfds != 1)
			return reply_status(c, seq, -EINVAL,
					    "a memfd region needs exactly one fd");
		err = region_create_memfd(fds[0], req->length, c->pc.id, &r);
		if (!err)
			*nfds = 0; /* the region owns the fd now */
		break;
	case XFER__CLIENT__MEM_KIND__MEM_CMA:
		if (*nfds != 0)
			return reply_status(c, seq, -EINVAL,
					    "a cma region carries no fd");
		err = c->pidfd < 0 ? -ESRCH
			: region_create_cma(c->pid, c->pidfd, req->addr,
					    req->length, c->pc.id, &r);
		break;
	default:
		return reply_status(c, seq, -EINVAL, "unknown memory kind");
	}
	if (err) {
		const char *why =
			err == -EPERM && req->kind == XFER__CLIENT__MEM_KIND__MEM_MEMFD
				? "memfd is not sealed against shrink and grow"
			: err == -EPERM ? "xferd may not access this process (ptrace)"
					: strerror(-err);
		return reply_status(c, seq, err, why);
	}
	regtab_add_region(c->d->regs, r);
	c->handles++;

	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__RegReply rep = XFER__CLIENT__REG_REPLY__INIT;
	rep.handle = r->handle;
	rep.key.data = r->key;
	rep.key.len = sizeof(r->key);
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_REG_REPLY;
	m.reg_reply = &rep;
	log_debug("client %llu: region %llu %s %llu bytes",
		  (unsigned long long)c->pc.id, (unsigned long long)r->handle,
		  region_kind_name(r->kind), (unsigned long long)r->length);
	return send_msg(c, &m, NULL, 0);
}

static int handle_import(struct client *c, uint64_t seq,
			 const Xfer__Client__ImportRequest *req)
{
	struct token tok;
	uint64_t handle, length;

	if (c->handles >= c->d->cfg.max_handles)
		return reply_status(c, seq, -ENOSPC,
				    "too many regions and imports (max_handles)");
	if (token_decode(req->token.data, req->token.len, &tok))
		return reply_status(c, seq, -EINVAL, "not a valid token");
	if (memcmp(tok.instance_id, c->d->instance_id, sizeof(tok.instance_id)))
		return reply_status(c, seq, -EHOSTUNREACH,
				    "token belongs to another xferd");
	int err = regtab_add_import(c->d->regs, c->pc.id, &tok, &handle,
				    &length);
	if (err)
		return reply_status(c, seq, err,
				    "token key does not match a live region");
	c->handles++;

	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__ImportReply rep = XFER__CLIENT__IMPORT_REPLY__INIT;
	rep.handle = handle;
	rep.length = length;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_IMPORT_REPLY;
	m.import_reply = &rep;
	return send_msg(c, &m, NULL, 0);
}

static int handle_remove(struct client *c, uint64_t seq, uint64_t handle,
			 bool is_import)
{
	int err = regtab_remove(c->d->regs, c->pc.id, handle, is_import);

	if (!err)
		c->handles--;
	return reply_status(c, seq, err,
			    err == -EACCES ? "no such handle of this client"
			    : err ? "handle is of the other kind" : NULL);
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
	if (m->proto_version != XFER_PROTO_VERSION) {
		*why = "protocol version mismatch";
		rc = -EPROTO;
		goto out;
	}
	/* Only REG may carry descriptors. */
	if (*nfds && m->body_case != XFER__CLIENT__CLIENT_MSG__BODY_REG) {
		*why = "unexpected file descriptors";
		rc = -EPROTO;
		goto out;
	}
	switch (m->body_case) {
	case XFER__CLIENT__CLIENT_MSG__BODY_REG:
		rc = handle_reg(c, m->seq, m->reg, fds, nfds);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_DEREG:
		rc = handle_remove(c, m->seq, m->dereg->handle, false);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_IMPORT:
		rc = handle_import(c, m->seq, m->import);
		break;
	case XFER__CLIENT__CLIENT_MSG__BODY_UNIMPORT:
		rc = handle_remove(c, m->seq, m->unimport->handle, true);
		break;
	default:
		*why = "unexpected message type";
		rc = -EPROTO;
		goto out;
	}
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
	}
}

/* --- teardown --- */

static void client_free(struct client *c)
{
	if (c->ev)
		event_free(c->ev);
	if (c->sock >= 0)
		close(c->sock);
	if (c->pc.cq_efd >= 0)
		close(c->pc.cq_efd);
	if (c->ring_map)
		munmap(c->ring_map, c->ring_len);
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c);
}

static void client_drop(struct client *c, const char *why)
{
	struct xferd *d = c->d;

	if (c->state != CLIENT_ACTIVE)
		return;
	log_info("client %llu (pid %d, %s) dropped: %s",
		 (unsigned long long)c->pc.id, (int)c->pid, c->name, why);
	c->state = CLIENT_DETACHING;
	event_free(c->ev);
	c->ev = NULL;
	close(c->sock);
	c->sock = -1;
	/* From here no descriptor of anyone reaches this client's memory. */
	regtab_remove_client(d->regs, c->pc.id);
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

static int make_ring(struct client *c, uint32_t sq_entries,
		     struct xfer_ring_offsets *off, int *ring_fd)
{
	int err = ring_layout(sq_entries, off);

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
			   MAP_SHARED | MAP_POPULATE, fd, 0);
	if (c->ring_map == MAP_FAILED) {
		c->ring_map = NULL;
		goto err_fd;
	}
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

static int send_hello_reply(struct client *c, uint64_t seq,
			    const struct xfer_ring_offsets *o, int ring_fd)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__HelloReply rep = XFER__CLIENT__HELLO_REPLY__INIT;
	Xfer__Client__RingLayout rl = XFER__CLIENT__RING_LAYOUT__INIT;
	const int fds[3] = { ring_fd, progress_doorbell_fd(c->d->progress),
			     c->pc.cq_efd };

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
	rep.instance_id.data = c->d->instance_id;
	rep.instance_id.len = sizeof(c->d->instance_id);
	rep.client_id = c->pc.id;
	rep.daemon_pid = (uint32_t)getpid();
	rep.ring = &rl;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_HELLO_REPLY;
	m.hello_reply = &rep;
	return send_msg(c, &m, fds, 3);
}

/* Refuse a connection before it became a client: one status, close. */
static void refuse(int sock, uint64_t seq, int error, const char *why)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__Status st = XFER__CLIENT__STATUS__INIT;

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
	int ring_fd = -1, err;
	uint64_t seq = 0;

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
		refuse(sock, seq, -EPROTO, "protocol version mismatch");
		goto out;
	}
	if (d->nclients >= d->cfg.max_clients || d->stopping) {
		refuse(sock, seq, -EBUSY,
		       d->stopping ? "xferd is stopping" : "too many clients");
		goto out;
	}
	uint32_t want = m->hello->sq_entries ? m->hello->sq_entries
					     : d->cfg.sq_entries;
	if (want > d->cfg.max_sq_entries || (want & (want - 1)) ||
	    want < RING_MIN_SQ_ENTRIES) {
		refuse(sock, seq, -EINVAL,
		       "sq_entries must be a power of two within limits");
		goto out;
	}

	c = calloc(1, sizeof(*c));
	if (!c) {
		refuse(sock, seq, -ENOMEM, "out of memory");
		goto out;
	}
	c->d = d;
	c->sock = sock;
	c->pid = cred->pid;
	c->uid = cred->uid;
	c->gid = cred->gid;
	c->pc.id = d->next_client_id++;
	c->pc.cq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	/* Fails only if the process already exited; then it gets no CMA. */
	c->pidfd = pidfd_open(c->pid, 0);
	clock_gettime(CLOCK_MONOTONIC, &c->connected);
	snprintf(c->name, sizeof(c->name), "%s",
		 m->hello->name && *m->hello->name ? m->hello->name : "?");
	for (char *p = c->name; *p; p++) /* keep log lines one line */
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (c->pc.cq_efd < 0 || (err = make_ring(c, want, &off, &ring_fd))) {
		refuse(sock, seq, -ENOMEM, "cannot set up the ring");
		c->sock = -1;
		client_free(c);
		goto out;
	}
	err = send_hello_reply(c, seq, &off, ring_fd);
	close(ring_fd); /* our mapping stays; the client has its own fd */
	c->ev = event_new(d->base, sock, EV_READ | EV_PERSIST, on_readable, c);
	if (err || !c->ev || event_add(c->ev, NULL)) {
		log_warnx("client pid %d: handshake failed", (int)c->pid);
		client_free(c);
		goto out;
	}
	TAILQ_INSERT_TAIL(&d->clients, c, link);
	d->nclients++;
	progress_attach(d->progress, &c->pc);
	log_info("client %llu connected: pid %d uid %d '%s', %u SQ entries",
		 (unsigned long long)c->pc.id, (int)c->pid, (int)c->uid,
		 c->name, want);
out:
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
		send_msg(c, &m, NULL, 0);
		/* Wake anyone polling or sleeping on the ring. */
		atomic_fetch_or_explicit(c->pc.ring.sq_flags, XFER_SQ_DEAD,
					 memory_order_release);
		uint64_t one = 1;
		if (write(c->pc.cq_efd, &one, sizeof(one)) < 0)
			log_debug("client %llu: cq doorbell full",
				  (unsigned long long)c->pc.id);
		shutdown(c->sock, SHUT_RDWR);
	}
}

void client_free_all(struct xferd *d)
{
	struct client *c;

	while ((c = TAILQ_FIRST(&d->clients))) {
		TAILQ_REMOVE(&d->clients, c, link);
		regtab_remove_client(d->regs, c->pc.id);
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
