/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - GET /metrics in the Prometheus text format, over HTTP on
 * the main thread (libevent's evhttp).
 *
 * Each request gathers a fresh snapshot (ops/stats.c: relaxed reads of
 * the progress thread's counters, no locks) and writes it out
 * (ops/metrics_text.c); nothing here waits on anything.  The endpoint
 * faces the network, so it is bounded: small header and body limits, a
 * timeout for connections that send nothing, GET and HEAD only, and when
 * xferd runs out of file descriptors it stops accepting for a moment
 * instead of spinning on a listener it cannot serve.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "ops/metrics.h"
#include "ops/metrics_text.h"
#include "ops/stats.h"
#include "xferd.h"

/* A scraper sends a few hundred bytes of headers and no body. */
#define METRICS_MAX_HEADERS 8192
#define METRICS_MAX_BODY    4096
/* Seconds a connection may take to send its request. */
#define METRICS_TIMEOUT_S   10
/* Pause on EMFILE/ENFILE before accepting again. */
#define METRICS_ACCEPT_PAUSE_MS 100

struct metrics {
	struct xferd *d;
	struct evhttp *http;
	struct evconnlistener *listener;  /* owned by http once bound */
	struct event *resume;             /* accept again after a pause */
	struct stats_snapshot snap;       /* reused: ~40 KiB */
};

static void on_metrics(struct evhttp_request *req, void *arg)
{
	struct metrics *m = arg;
	struct evbuffer *body = evbuffer_new();
	struct evkeyvalq *hdrs = evhttp_request_get_output_headers(req);

	if (!body) {
		evhttp_send_error(req, HTTP_SERVUNAVAIL, "out of memory");
		return;
	}
	stats_collect(m->d, &m->snap);
	if (metrics_text_write(&m->snap, body)) {
		evbuffer_free(body);
		evhttp_send_error(req, HTTP_SERVUNAVAIL, "out of memory");
		return;
	}
	evhttp_add_header(hdrs, "Content-Type", METRICS_CONTENT_TYPE);
	evhttp_add_header(hdrs, "Cache-Control", "no-store");
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

/* Anything but /metrics: say where the metrics are. */
static void on_other(struct evhttp_request *req, void *arg)
{
	struct evbuffer *body = evbuffer_new();
	(void)arg;

	if (body)
		evbuffer_add_printf(body, "xferd: the metrics are at /metrics\n");
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "Content-Type", "text/plain; charset=utf-8");
	evhttp_send_reply(req, HTTP_NOTFOUND, "Not Found", body);
	if (body)
		evbuffer_free(body);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct metrics *m = arg;
	(void)fd, (void)what;

	evconnlistener_enable(m->listener);
}

/*
 * The endpoint of this process, for on_accept_error: evhttp passes its
 * own pointer to the listener's callbacks, not ours, and there is one
 * endpoint per xferd.
 */
static struct metrics *the_endpoint;

static void on_accept_error(struct evconnlistener *l, void *arg)
{
	struct metrics *m = the_endpoint;
	int err = EVUTIL_SOCKET_ERROR();
	(void)arg;

	if (!m || m->listener != l)
		return;

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
		m->d->base, NULL, NULL,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
		128, ai->ai_addr, (int)ai->ai_addrlen);
	rc = m->listener ? 0 : (errno ? -errno : -EADDRINUSE);
	evutil_freeaddrinfo(ai);
	if (rc)
		return rc;
	evconnlistener_set_error_cb(m->listener, on_accept_error);
	if (!evhttp_bind_listener(m->http, m->listener)) {
		evconnlistener_free(m->listener);
		m->listener = NULL;
		return -ENOMEM;
	}
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
	m->http = evhttp_new(d->base);
	m->resume = evtimer_new(d->base, on_resume, m);
	if (!m->http || !m->resume) {
		rc = -ENOMEM;
		goto fail;
	}
	evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
	evhttp_set_max_headers_size(m->http, METRICS_MAX_HEADERS);
	evhttp_set_max_body_size(m->http, METRICS_MAX_BODY);
	evhttp_set_timeout(m->http, METRICS_TIMEOUT_S);
	evhttp_set_default_content_type(m->http, "text/plain; charset=utf-8");
	if (evhttp_set_cb(m->http, "/metrics", on_metrics, m)) {
		rc = -ENOMEM;
		goto fail;
	}
	evhttp_set_gencb(m->http, on_other, m);
	rc = bind_listener(m, spec);
	if (rc) {
		log_warnx_f(&((struct log_fields){ .err = -rc }),
			    "metrics: cannot listen on %s: %s; no metrics "
			    "endpoint", spec, strerror(-rc));
		goto fail;
	}
	log_info("metrics on http://%s/metrics", spec);
	the_endpoint = m;
	*out = m;
	return 0;
fail:
	metrics_close(m);
	return rc;
}

void metrics_close(struct metrics *m)
{
	if (!m)
		return;
	if (the_endpoint == m)
		the_endpoint = NULL;
	if (m->http)
		evhttp_free(m->http);  /* frees the bound listener too */
	if (m->resume)
		event_free(m->resume);
	free(m);
}
