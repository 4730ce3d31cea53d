/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - GET /metrics in the Prometheus text format, over HTTP on
 * the main thread.
 *
 * Each request gathers a fresh snapshot (ops/stats.c: relaxed reads of
 * the progress thread's counters, no locks) and writes it out
 * (ops/metrics_text.c); nothing here waits on anything.
 *
 * The endpoint faces the network, and every descriptor and every
 * millisecond of the main thread it takes is one a local client does
 * not get, so it is a small HTTP/1.x server of its own (one request per
 * connection, answered with Connection: close) whose every resource is
 * bounded:
 *
 *  - connections: at most metrics_max_connections at once; one more
 *    closes the oldest that has not sent its request yet (else the
 *    oldest of all).  A scrape takes milliseconds, so what has held a
 *    slot longest is what stalls; a flood cannot hold more descriptors
 *    than that number (plus the listener), whatever it does: the
 *    endpoint's own fd budget, apart from the clients';
 *  - time: one absolute deadline per connection, metrics_timeout_ms from
 *    accept to the last byte of the answer; bytes that trickle in do not
 *    renew it (a connection sending 1 byte a second is closed at the
 *    deadline like a silent one);
 *  - memory: 8 KiB of request head (more: 431), no body is read, GET
 *    and HEAD only (else 405); what to answer to the head is decided by
 *    ops/http_request.c, state-free and fuzzed, this file only acts;
 *  - accept: out of descriptors, stop accepting for a moment instead of
 *    spinning on a listener that stays readable.
 *
 * After the answer the write side is shut and what the peer still sends
 * is read and dropped until it closes (or the deadline): closing with
 * unread input would reset the connection and could lose the answer.
 *
 * Main thread only, no locks.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "core/log.h"
#include "ops/http_request.h"
#include "ops/metrics.h"
#include "ops/metrics_text.h"
#include "common/clock.h"
#include "ops/stats.h"
#include "xferd.h"

/* Pause on EMFILE/ENFILE before accepting again. */
#define METRICS_ACCEPT_PAUSE_MS 100

enum http_state {
	HTTP_READING,   /* the request head is arriving */
	HTTP_ANSWERING, /* the answer is being written */
	HTTP_DRAINING,  /* answered, write side shut: reading to EOF */
};

struct http_conn {
	struct metrics *m;
	struct bufferevent *bev;
	struct event *deadline;       /* absolute, from accept; never renewed */
	enum http_state state;
	TAILQ_ENTRY(http_conn) q;     /* m->conns, oldest first */
};

struct metrics {
	struct xferd *d;
	struct evconnlistener *listener;
	struct event *resume;             /* accept again after a pause */
	TAILQ_HEAD(, http_conn) conns;
	uint32_t nconns;
	struct stats_snapshot snap;       /* reused: ~40 KiB */
};

static void conn_close(struct http_conn *h)
{
	struct metrics *m = h->m;

	TAILQ_REMOVE(&m->conns, h, q);
	m->nconns--;
	if (h->deadline)
		event_free(h->deadline);
	if (h->bev)
		bufferevent_free(h->bev);  /* closes the socket */
	free(h);
	/* A slot is free: accepting may go on (a pause for EMFILE ends on
	 * its own timer). */
}

/* --- the answer --- */

static void on_written(struct bufferevent *bev, void *arg)
{
	struct http_conn *h = arg;

	if (h->state != HTTP_ANSWERING)
		return;
	/* All of it is in the socket: say that nothing more comes and read
	 * what the peer still sends until it closes. */
	h->state = HTTP_DRAINING;
	shutdown(bufferevent_getfd(bev), SHUT_WR);
	evbuffer_drain(bufferevent_get_input(bev),
		       evbuffer_get_length(bufferevent_get_input(bev)));
	bufferevent_setwatermark(bev, EV_READ, 0, 0);
	bufferevent_enable(bev, EV_READ);
}

/* Queue the answer (status, headers, body unless HEAD); the connection
 * reads no more request bytes. */
static void answer(struct http_conn *h, int code, const char *reason,
		   const char *content_type, struct evbuffer *body,
		   bool head_only, const char *extra_header)
{
	struct evbuffer *out = bufferevent_get_output(h->bev);
	size_t len = body ? evbuffer_get_length(body) : 0;

	h->state = HTTP_ANSWERING;
	bufferevent_disable(h->bev, EV_READ);
	evbuffer_add_printf(out,
			    "HTTP/1.1 %d %s\r\n"
			    "Content-Type: %s\r\n"
			    "Content-Length: %zu\r\n"
			    "%s"
			    "Connection: close\r\n\r\n",
			    code, reason, content_type, len,
			    extra_header ? extra_header : "");
	if (body && !head_only)
		evbuffer_add_buffer(out, body);
	/* An answer that fits the socket buffer at once still gets its
	 * callback: the write watermark is 0, called when out drains. */
}

static void answer_text(struct http_conn *h, int code, const char *reason,
			const char *text, bool head_only,
			const char *extra_header)
{
	struct evbuffer *body = evbuffer_new();

	if (body)
		evbuffer_add(body, text, strlen(text));
	answer(h, code, reason, "text/plain; charset=utf-8", body, head_only,
	       extra_header);
	if (body)
		evbuffer_free(body);
}

static void answer_metrics(struct http_conn *h, bool head_only)
{
	struct metrics *m = h->m;
	struct evbuffer *body = evbuffer_new();

	stats_collect(m->d, &m->snap);
	if (!body || metrics_text_write(&m->snap, body)) {
		if (body)
			evbuffer_free(body);
		answer_text(h, 503, "Service Unavailable", "out of memory\n",
			    head_only, NULL);
		return;
	}
	answer(h, 200, "OK", METRICS_CONTENT_TYPE, body, head_only,
	       "Cache-Control: no-store\r\n");
	evbuffer_free(body);
}

/* --- the request --- */

/* Answer a complete head, or a request cut short at EOF (incomplete),
 * as http_request_parse() decided. */
static void serve(struct http_conn *h, const struct http_request *req,
		  bool incomplete)
{
	enum http_status st = req->status;
	const char *why = http_status_reason(st), *extra = NULL, *text;

	switch (st) {
	case HTTP_OK:
		answer_metrics(h, req->head_only);
		return;
	case HTTP_NOT_FOUND:
		answer_text(h, st, why, "xferd: the metrics are at /metrics\n",
			    req->head_only, NULL);
		return;
	case HTTP_BAD_METHOD:
		text = "xferd: GET or HEAD\n";
		extra = "Allow: GET, HEAD\r\n";
		break;
	case HTTP_HEAD_TOO_LARGE:
		text = "xferd: request head too large\n";
		break;
	case HTTP_BAD_VERSION:
		text = "xferd: HTTP/1.0 or HTTP/1.1\n";
		break;
	case HTTP_INCOMPLETE:
		if (!incomplete)
			return;   /* read on */
		st = HTTP_BAD_REQUEST;
		why = http_status_reason(st);
		text = "xferd: incomplete request\n";
		break;
	case HTTP_BAD_REQUEST:
	default:
		st = HTTP_BAD_REQUEST;
		why = http_status_reason(st);
		text = "xferd: not an HTTP request\n";
		break;
	}
	answer_text(h, st, why, text, false, extra);
}

/* Decide on what has come so far (eof: all that will come). */
static void on_head(struct http_conn *h, bool eof)
{
	struct evbuffer *in = bufferevent_get_input(h->bev);
	/* The answer depends on the first HTTP_HEAD_MAX + 1 bytes only,
	 * and the read watermark lets no more in. */
	char head[HTTP_HEAD_MAX + 1];
	size_t len = evbuffer_get_length(in);
	struct http_request req;

	if (len > sizeof(head))
		len = sizeof(head);
	if (evbuffer_copyout(in, head, len) != (ev_ssize_t)len) {
		conn_close(h);
		return;
	}
	http_request_parse(head, len, &req);
	if (req.status == HTTP_INCOMPLETE && !eof)
		return;
	/* No body is read: what follows the head is dropped with it. */
	evbuffer_drain(in, evbuffer_get_length(in));
	serve(h, &req, eof);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct http_conn *h = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (h->state == HTTP_DRAINING) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	if (h->state != HTTP_READING)
		return;
	on_head(h, false);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct http_conn *h = arg;
	(void)bev;

	/* The peer stopped sending after its request: the answer is still
	 * written.  Anything else (an error, EOF before a request or after
	 * the answer) ends the connection. */
	if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) &&
	    h->state == HTTP_ANSWERING)
		return;
	if ((what & BEV_EVENT_EOF) && h->state == HTTP_READING &&
	    evbuffer_get_length(bufferevent_get_input(bev))) {
		/* A request cut short (no empty line): answer what came. */
		on_head(h, true);
		return;
	}
	conn_close(h);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	conn_close(arg);
}

/* --- accepting --- */

/* Has h's client sent anything yet (in our buffer or in the socket)? */
static bool has_sent(struct http_conn *h)
{
	int n = 0;

	if (evbuffer_get_length(bufferevent_get_input(h->bev)))
		return true;
	return ioctl(bufferevent_getfd(h->bev), FIONREAD, &n) == 0 && n > 0;
}

/*
 * Make room for one more: close the oldest connection that has sent
 * nothing yet, else the oldest still reading its request, else the
 * oldest of all.  A scraper's request may wait in its socket while a
 * burst of connections is accepted ahead of its read event: what it sent
 * keeps it from being taken for a silent one.
 */
static void evict_one(struct metrics *m)
{
	struct http_conn *h, *victim = NULL, *reading = NULL;

	TAILQ_FOREACH(h, &m->conns, q) {
		if (h->state != HTTP_READING)
			continue;
		if (!reading)
			reading = h;
		if (!has_sent(h)) {
			victim = h;
			break;
		}
	}
	if (!victim)
		victim = reading ? reading : TAILQ_FIRST(&m->conns);
	log_warnx("metrics: %u connections (metrics_max_connections): "
		  "closing the oldest", m->nconns);
	if (victim)
		conn_close(victim);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	struct metrics *m = arg;
	struct xferd_config *cfg = &m->d->cfg;
	struct timeval tv = ms_to_timeval(cfg->metrics_timeout_ms);
	struct http_conn *h;
	(void)l, (void)sa, (void)salen;

	while (m->nconns >= cfg->metrics_max_connections && m->nconns)
		evict_one(m);
	h = calloc(1, sizeof(*h));
	if (!h) {
		evutil_closesocket(fd);
		return;
	}
	h->m = m;
	TAILQ_INSERT_TAIL(&m->conns, h, q);
	m->nconns++;
	h->bev = bufferevent_socket_new(m->d->base, fd, BEV_OPT_CLOSE_ON_FREE);
	h->deadline = evtimer_new(m->d->base, on_deadline, h);
	if (!h->bev || !h->deadline || evtimer_add(h->deadline, &tv)) {
		if (!h->bev)
			evutil_closesocket(fd);
		conn_close(h);
		return;
	}
	/* Read no more than a head can be (plus one byte to know it is
	 * too long); the rest stays in the socket until it is drained. */
	bufferevent_setwatermark(h->bev, EV_READ, 0, HTTP_HEAD_MAX + 1);
	bufferevent_setcb(h->bev, on_read, on_written, on_event, h);
	bufferevent_enable(h->bev, EV_READ | EV_WRITE);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct metrics *m = arg;
	(void)fd, (void)what;

	evconnlistener_enable(m->listener);
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
	struct metrics *m = arg;
	int err = EVUTIL_SOCKET_ERROR();
	(void)l;

	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return;   /* a connection that died before accept: go on */
	/* The listener stays readable: without a pause the loop would spin
	 * on it until a descriptor frees up. */
	log_warnx("metrics: cannot accept (%s); pausing %d ms",
		  strerror(err), METRICS_ACCEPT_PAUSE_MS);
	evconnlistener_disable(m->listener);
	struct timeval tv = { 0, METRICS_ACCEPT_PAUSE_MS * 1000 };
	event_add(m->resume, &tv);
}

static int bind_listener(struct metrics *m, const char *spec)
{
	char host[CONFIG_HOST_MAX], port_s[8];
	uint16_t port;
	struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC,
					 .ai_socktype = SOCK_STREAM,
					 .ai_flags = EVUTIL_AI_PASSIVE |
						     EVUTIL_AI_NUMERICHOST |
						     EVUTIL_AI_NUMERICSERV };
	struct evutil_addrinfo *ai = NULL;
	int rc;

	if (config_split_hostport(spec, host, &port, 0) || port == 0)
		return -EINVAL;   /* config.c let it through: cannot happen */
	snprintf(port_s, sizeof(port_s), "%u", port);
	/* Numeric only: resolving a name could block the main thread. */
	rc = evutil_getaddrinfo(strcmp(host, "*") ? host : NULL, port_s,
				&hints, &ai);
	if (rc || !ai)
		return -EINVAL;
	m->listener = evconnlistener_new_bind(
		m->d->base, on_accept, m,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
		128, ai->ai_addr, (int)ai->ai_addrlen);
	rc = m->listener ? 0 : (errno ? -errno : -EADDRINUSE);
	evutil_freeaddrinfo(ai);
	if (rc)
		return rc;
	evconnlistener_set_error_cb(m->listener, on_accept_error);
	return 0;
}

int metrics_open(struct xferd *d, struct metrics **out)
{
	const char *spec = d->cfg.metrics_listen;
	struct metrics *m;
	int rc;

	*out = NULL;
	if (!*spec || strcmp(spec, "off") == 0)
		return 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->d = d;
	TAILQ_INIT(&m->conns);
	m->resume = evtimer_new(d->base, on_resume, m);
	if (!m->resume) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = bind_listener(m, spec);
	if (rc) {
		log_warnx_f(&((struct log_fields){ .err = -rc }),
			    "metrics: cannot listen on %s: %s; no metrics "
			    "endpoint", spec, strerror(-rc));
		goto fail;
	}
	log_info("metrics on http://%s/metrics (at most %u connections, "
		 "%u ms each)", spec, d->cfg.metrics_max_connections,
		 d->cfg.metrics_timeout_ms);
	*out = m;
	return 0;
fail:
	metrics_close(m);
	return rc;
}

void metrics_close(struct metrics *m)
{
	struct http_conn *h;

	if (!m)
		return;
	while ((h = TAILQ_FIRST(&m->conns)))
		conn_close(h);
	if (m->listener)
		evconnlistener_free(m->listener);
	if (m->resume)
		event_free(m->resume);
	free(m);
}
