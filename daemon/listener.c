/* SPDX-License-Identifier: Apache-2.0 */
/*
 * listener.c - bind or inherit the socket, accept, route first packets.
 */
#include <errno.h>
#include <event2/event.h>
#include <grp.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "ops/ctl.h"
#include "listener.h"
#include "core/log.h"
#include "sdnotify.h"
#include "uid_usage.h"
#include "common/wire.h"
#include "xferd.h"

/* Out of fds, accepting stops this long: the backlog holds the rest. */
#define ACCEPT_PAUSE_MS 100

/*
 * Connections closed for saying nothing, or for a user over its pending
 * limit, come in floods when someone tries: the first of a second is
 * logged, the rest are counted into one line a second later.
 */
struct close_log {
	const char *what;         /* "sending nothing within ..." */
	uint64_t count;           /* closed since the last line */
	pid_t last_pid;
	uid_t last_uid;
	struct event *flush;      /* one-shot: the line for the rest */
};

struct listener {
	struct xferd *d;
	int fd;
	bool bound_path;          /* we created the socket file */
	struct event *ev;
	struct event *ev_resume;  /* accepting again after EMFILE */
	unsigned pauses;          /* since accept last worked (0: none) */
	/* Connections that have not said who they are yet: closed by
	 * listener_close() if xferd stops before they do. */
	TAILQ_HEAD(, pending) pending;
	struct close_log silent, over_limit;
};

struct pending {
	struct xferd *d;
	struct listener *l;
	int sock;
	struct ucred cred;
	struct uid_usage *uu;     /* its uid's, counted in conns[PENDING] */
	struct event *ev;
	TAILQ_ENTRY(pending) link;
};

static void close_log_flush(evutil_socket_t fd, short what, void *arg)
{
	struct close_log *cl = arg;
	(void)fd, (void)what;

	if (cl->count)
		log_info("%llu more connections closed for %s (the last "
			 "from pid %d uid %d)", (unsigned long long)cl->count,
			 cl->what, (int)cl->last_pid, (int)cl->last_uid);
	cl->count = 0;
}

/* Log one connection closed for cl's reason, or count it for the line
 * that comes a second later. */
static void close_log_note(struct close_log *cl, const struct ucred *cred)
{
	if (!cl->flush || evtimer_pending(cl->flush, NULL)) {
		cl->count++;
		cl->last_pid = cred->pid;
		cl->last_uid = cred->uid;
		return;
	}
	log_info("connection from pid %d uid %d closed for %s",
		 (int)cred->pid, (int)cred->uid, cl->what);
	struct timeval second = { .tv_sec = 1 };
	evtimer_add(cl->flush, &second);
}

static void pending_free(struct pending *p, bool close_sock)
{
	TAILQ_REMOVE(&p->l->pending, p, link);
	uid_conn_release(p->uu, UID_PENDING);
	uid_usage_put(p->d->uid_use, p->uu);
	if (p->cred.uid != 0)
		p->d->npending--;
	event_free(p->ev);
	if (close_sock)
		close(p->sock);
	free(p);
}

static void on_first_packet(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;
	uint8_t pkt[WIRE_MAX_PACKET];
	int fds[WIRE_MAX_FDS];
	unsigned nfds;

	if (what & EV_TIMEOUT) {
		close_log_note(&p->l->silent, &p->cred);
		pending_free(p, true);
		return;
	}
	ssize_t n = wire_recv(fd, pkt, fds, &nfds);
	if (n == -EAGAIN)
		return;
	if (n <= 0) {
		if (n < 0)
			log_info("connection from pid %d: %s", (int)p->cred.pid,
				 strerror((int)-n));
		pending_free(p, true);
		return;
	}
	struct xferd *d = p->d;
	int sock = p->sock;
	struct ucred cred = p->cred;
	pending_free(p, false);

	switch (wire_tag(pkt, (size_t)n)) {
	case WIRE_TAG_CLIENT:
		client_accept(d, sock, &cred, pkt, (size_t)n, fds, nfds);
		return;
	case WIRE_TAG_CTL:
		wire_close_fds(fds, &nfds);
		ctl_accept(d, sock, &cred, pkt, (size_t)n);
		return;
	default:
		wire_close_fds(fds, &nfds);
		log_info_f(&((struct log_fields){ .client_pid = (int)cred.pid }),
			   "connection from pid %d: unknown channel tag, closed",
			   (int)cred.pid);
		close(sock);
	}
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;
	(void)fd, (void)what;

	if (event_add(l->ev, NULL))
		log_warnx("cannot watch the socket again: no more clients");
}

/*
 * Out of fds (our limit or the system's): the listening socket stays
 * readable, so a level-triggered watch would spin.  Stop watching it for
 * a moment; waiting connections stay in the backlog meanwhile.
 */
static void pause_accepting(struct listener *l, int err)
{
	struct timeval tv = { .tv_usec = ACCEPT_PAUSE_MS * 1000 };

	if (evtimer_pending(l->ev_resume, NULL))
		return;
	/* One warning for a whole shortage, however many pauses. */
	if (l->pauses++ == 0)
		log_warnx("accept: %s: pausing %d ms at a time until fds are "
			  "free (%u clients)", strerror(err), ACCEPT_PAUSE_MS,
			  l->d->nclients);
	event_del(l->ev);
	evtimer_add(l->ev_resume, &tv);
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;
	const struct xferd_config *cfg = &l->d->cfg;
	(void)what;

	for (;;) {
		int sock = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (sock < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				pause_accepting(l, errno);
			else if (errno != EAGAIN && errno != EINTR &&
				 errno != ECONNABORTED)
				log_warn("accept");
			return;
		}
		struct pending *p = calloc(1, sizeof(*p));
		socklen_t len = sizeof(p ? p->cred : (struct ucred){ 0 });
		if (!p || getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &p->cred,
				     &len)) {
			log_warn("accepting a connection");
			free(p);
			close(sock);
			continue;
		}
		if (l->pauses) {
			log_info("accepting again after %u pauses", l->pauses);
			l->pauses = 0;
		}
		/* Not yet anybody: one user gets only so many such fds,
		 * and all but root together max_pending (the fds for them
		 * are kept from clients: budget.h).  Root's never wait
		 * behind users', so that xferctl works in a flood. */
		bool root = p->cred.uid == 0;
		if (root || l->d->npending < cfg->max_pending)
			p->uu = uid_usage_get(l->d->uid_use, p->cred.uid);
		if (!p->uu || uid_conn_take(p->uu, UID_PENDING,
					    cfg->max_pending_per_uid)) {
			uid_usage_put(l->d->uid_use, p->uu);
			close_log_note(&l->over_limit, &p->cred);
			free(p);
			close(sock);
			continue;
		}
		if (!root)
			l->d->npending++;
		p->d = l->d;
		p->l = l;
		p->sock = sock;
		p->ev = event_new(l->d->base, sock, EV_READ | EV_PERSIST,
				  on_first_packet, p);
		struct timeval tv = {
			.tv_sec = cfg->handshake_timeout_ms / 1000,
			.tv_usec = cfg->handshake_timeout_ms % 1000 * 1000,
		};
		if (!p->ev || event_add(p->ev, &tv)) {
			log_warnx("cannot watch a new connection");
			if (p->ev)
				event_free(p->ev);
			uid_conn_release(p->uu, UID_PENDING);
			uid_usage_put(l->d->uid_use, p->uu);
			if (!root)
				l->d->npending--;
			free(p);
			close(sock);
			continue;
		}
		TAILQ_INSERT_TAIL(&l->pending, p, link);
	}
}

/* Is an xferd answering at path?  Then we must not unlink it. */
static bool path_in_use(const struct sockaddr_un *sa)
{
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	bool used;

	if (s < 0)
		return false;
	used = connect(s, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
	close(s);
	return used;
}

static int bind_path(const char *path, int backlog)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[sizeof(sa.sun_path)];

	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_warnx("socket path too long: %s", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	strcpy(dir, path);
	/* The runtime directory may not exist yet (/run/xferd as root). */
	if (mkdir(dirname(dir), 0755) && errno != EEXIST)
		log_warn("mkdir for %s", path);

	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);
	if (fd < 0) {
		log_warn("socket");
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (errno != EADDRINUSE)
			goto fail_errno;
		if (path_in_use(&sa)) {
			log_warnx("another xferd is listening on %s", path);
			goto fail;
		}
		/* Left over from an xferd that died: take it over. */
		unlink(path);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
			goto fail_errno;
	}
	if (chmod(path, 0660))
		log_warn("chmod 0660 %s", path);
	/* The kernel caps it at net.core.somaxconn. */
	if (listen(fd, backlog))
		goto fail_errno;
	return fd;
fail_errno:
	log_warn("cannot listen on %s", path);
fail:
	close(fd);
	return -1;
}

/*
 * Hand the socket to group (socket_group) so that its members, not only
 * root, may connect: the file stays mode 0660, owned root:group.  A
 * missing group is no error (a source install has none until someone
 * creates it): the socket then stays root's only, and the log says how
 * to open it up.
 */
static void socket_give_group(const char *path, const char *group)
{
	struct group gr, *found = NULL;
	char buf[4096];

	if (strcmp(group, "none") == 0)
		return;
	int err = getgrnam_r(group, &gr, buf, sizeof(buf), &found);
	if (err) {
		log_warnx("socket_group %s: %s; only root may connect to %s",
			  group, strerror(err), path);
		return;
	}
	if (!found) {
		/* The default group missing is the normal state of a source
		 * build; a configured one missing is a mistake. */
		if (strcmp(group, "xferd") == 0)
			log_info("no group %s: only root may connect to %s "
				 "(groupadd %s, or set socket_group)",
				 group, path, group);
		else
			log_warnx("socket_group %s: no such group; only root may "
				  "connect to %s", group, path);
		return;
	}
	if (chown(path, (uid_t)-1, gr.gr_gid))
		log_warn("chown %s to group %s", path, group);
	else
		log_info("members of group %s may connect to %s", group, path);
}

/* The line for what was still counted, then the timer. */
static void close_log_free(struct close_log *cl)
{
	if (!cl->flush)
		return;
	close_log_flush(-1, 0, cl);
	event_free(cl->flush);
}

static void listener_free_events(struct listener *l)
{
	if (l->ev)
		event_free(l->ev);
	if (l->ev_resume)
		event_free(l->ev_resume);
	close_log_free(&l->silent);
	close_log_free(&l->over_limit);
}

struct listener *listener_open(struct xferd *d)
{
	struct listener *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->d = d;
	TAILQ_INIT(&l->pending);
	l->fd = sdnotify_listen_fd();
	if (l->fd >= 0) {
		log_info("listening on the socket passed by systemd");
		evutil_make_socket_nonblocking(l->fd);
	} else {
		l->fd = bind_path(d->socket_path, (int)d->cfg.listen_backlog);
		if (l->fd < 0)
			goto err;
		l->bound_path = true;
		log_info("listening on %s", d->socket_path);
		socket_give_group(d->socket_path, d->cfg.socket_group);
	}
	l->silent.what = "sending nothing within handshake_timeout_ms";
	l->over_limit.what = "their uid being at max_pending_per_uid, or "
			     "all users at max_pending";
	l->silent.flush = evtimer_new(d->base, close_log_flush, &l->silent);
	l->over_limit.flush = evtimer_new(d->base, close_log_flush,
					  &l->over_limit);
	l->ev_resume = evtimer_new(d->base, on_resume, l);
	l->ev = event_new(d->base, l->fd, EV_READ | EV_PERSIST, on_accept, l);
	if (!l->ev || !l->ev_resume || !l->silent.flush ||
	    !l->over_limit.flush || event_add(l->ev, NULL))
		goto err_fd;
	return l;
err_fd:
	listener_free_events(l);
	close(l->fd);
err:
	free(l);
	return NULL;
}

void listener_close(struct listener *l)
{
	if (!l)
		return;
	while (!TAILQ_EMPTY(&l->pending))
		pending_free(TAILQ_FIRST(&l->pending), true);
	listener_free_events(l);
	close(l->fd);
	if (l->bound_path)
		unlink(l->d->socket_path);
	free(l);
}
