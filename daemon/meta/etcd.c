/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd.c - etcd's v3 API through its HTTP/JSON gateway, on the event
 * loop: libevent's evhttp client for HTTP, json-c for JSON, OpenSSL for
 * TLS and base64.  What a call promises is in etcd.h.
 *
 * Why the gateway and not gRPC: Debian ships no C client of etcd's gRPC
 * API (only Go and the C++ etcd-cpp-apiv3, outside Debian), and gRPC in
 * C pulls in its own threads and event loop.  The gateway is part of
 * every etcd server since 3.2, speaks HTTP/1.1 with JSON, and evhttp
 * runs it on xferd's own loop with no thread.
 *
 * Connections: evhttp sends one request at a time per connection, so
 * each plain-HTTP endpoint has ETCD_CONNS of them, kept open between
 * calls, and a call takes the least busy; a watch (a response that never
 * ends) gets a connection of its own.  With TLS each request opens its
 * own connection: libevent 2.1 cannot reconnect an SSL bufferevent, so
 * a TLS connection is not reused.
 *
 * Lifetimes: a call lives from etcd_call until its callback returned; an
 * attempt's evhttp request belongs to evhttp (freed after its callback,
 * or by evhttp_cancel_request from our timer, never from inside one of
 * its own callbacks).  Connections made for one request or a watch are
 * freed from a zero-delay event, never from inside their callbacks.
 *
 * Past 800 lines: the calls, their retries across endpoints and the
 * connections they use are one set of lifetimes (above) that a split
 * would spread over files.
 *
 * Main thread only, no locks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/util.h>
#include <json-c/json.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/clock.h"
#include "core/log.h"
#include "meta/etcd.h"

#define ETCD_CONNS          4     /* kept-open connections per endpoint */
#define ETCD_BACKOFF_MIN_MS 50
#define ETCD_BACKOFF_MAX_MS 1000
#define ETCD_JSON_DEPTH     32    /* nesting json-c accepts from etcd */
/* A watch stream is idle for as long as nothing changes: only its end
 * (EOF, reset) or a failed keepalive of the owner stops it. */
#define ETCD_WATCH_IDLE_S   (24 * 3600)

static const char *const api_paths[] = {
	[META_API_AUTO] = "/v3", [META_API_V3] = "/v3",
	[META_API_V3BETA] = "/v3beta", [META_API_V3ALPHA] = "/v3alpha",
};

struct endpoint {
	struct meta_endpoint ep;
	char url[300];                 /* for logs */
	struct evhttp_connection *conns[ETCD_CONNS];
	unsigned busy[ETCD_CONNS];     /* requests queued on each */
};

struct etcd_call {
	struct etcd *e;
	char method[48];
	char *body;
	etcd_cb cb;
	void *arg;
	uint64_t deadline_ns;
	unsigned attempts;
	unsigned rounds;               /* times every endpoint failed */
	int tried;                     /* endpoints tried this round */
	int err;                       /* the best reason so far */
	int ep;                        /* of the attempt in flight */
	int conn;                      /* -1: a connection of its own */
	int api;                       /* path of the attempt in flight */
	int req_error;                 /* evhttp's error callback said */
	struct evhttp_request *req;    /* the attempt in flight */
	struct evhttp_connection *own; /* TLS: this attempt's connection */
	struct event *timer;           /* attempt deadline or backoff */
	LIST_ENTRY(etcd_call) link;
};

struct etcd_watch {
	struct etcd *e;
	char *body;
	etcd_watch_cb cb;
	void *arg;
	struct evhttp_connection *evcon;
	struct evhttp_request *req;
	struct evbuffer *pending;      /* a message not yet complete */
	struct event *closer;          /* frees us outside evhttp */
	bool closing;
	LIST_ENTRY(etcd_watch) link;
};

struct etcd {
	struct event_base *base;
	struct evdns_base *dns;        /* only if an endpoint is a name */
	SSL_CTX *ssl;                  /* only with https endpoints */
	struct endpoint eps[META_ENDPOINTS_MAX];
	int neps;
	int cur;                       /* where the next call goes first */
	int api;                       /* index into api_paths */
	bool api_auto;
	uint32_t timeout_ms, retry_ms;
	unsigned long last_tls_error;  /* logged already */
	LIST_HEAD(, etcd_call) calls;
	LIST_HEAD(, etcd_watch) watches;
	SLIST_HEAD(, grave) graves;    /* connections to free */
	struct event *reaper;          /* frees them from the loop */
};

/* --- JSON and base64 --- */

char *etcd_b64_encode(const void *p, size_t n)
{
	char *out = malloc(4 * ((n + 2) / 3) + 1);

	if (out)
		EVP_EncodeBlock((unsigned char *)out, p, (int)n);
	return out;
}

int etcd_b64_decode(const char *s, size_t max, uint8_t **out, size_t *len)
{
	size_t n = strlen(s), pad = 0;
	uint8_t *buf;
	int got;

	/* Padded standard base64 is what the gateway writes. */
	if (n % 4 || n / 4 * 3 > max + 2)
		return -EINVAL;
	if (n && s[n - 1] == '=')
		pad = n > 1 && s[n - 2] == '=' ? 2 : 1;
	buf = malloc(n / 4 * 3 + 1);
	if (!buf)
		return -ENOMEM;
	got = n ? EVP_DecodeBlock(buf, (const unsigned char *)s, (int)n) : 0;
	if (got < 0 || (size_t)got < pad || (size_t)got - pad > max) {
		free(buf);
		return -EINVAL;
	}
	*out = buf;
	*len = (size_t)got - pad;
	return 0;
}

int etcd_json_i64(struct json_object *obj, const char *key, int64_t *out)
{
	struct json_object *v;
	char *end;

	*out = 0;
	if (!json_object_object_get_ex(obj, key, &v) || !v)
		return 0;
	if (json_object_is_type(v, json_type_int)) {
		*out = json_object_get_int64(v);
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return -EINVAL;
	const char *s = json_object_get_string(v);
	if (!*s || (*s != '-' && (*s < '0' || *s > '9')))
		return -EINVAL;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = x;
	return 0;
}

/* One JSON object of at most len bytes; NULL if it is not one. */
static struct json_object *parse_object(const char *p, size_t len)
{
	struct json_tokener *tok = json_tokener_new_ex(ETCD_JSON_DEPTH);
	struct json_object *o;

	if (!tok)
		return NULL;
	o = json_tokener_parse_ex(tok, p, (int)len);
	if (o && (json_tokener_get_error(tok) != json_tokener_success ||
		  !json_object_is_type(o, json_type_object) ||
		  (size_t)json_tokener_get_parse_end(tok) != len)) {
		/* trailing bytes after the object: only white space */
		size_t end = json_tokener_get_parse_end(tok);
		bool ok = json_object_is_type(o, json_type_object);
		for (size_t i = end; ok && i < len; i++)
			ok = p[i] == ' ' || p[i] == '\n' || p[i] == '\r' ||
			     p[i] == '\t';
		if (!ok) {
			json_object_put(o);
			o = NULL;
		}
	}
	json_tokener_free(tok);
	return o;
}

/* --- connections --- */

/* Connections to free once evhttp is off the stack (struct etcd). */
struct grave {
	struct evhttp_connection *evcon;
	SLIST_ENTRY(grave) link;
};

static void reap(struct etcd *e)
{
	struct grave *g;

	while ((g = SLIST_FIRST(&e->graves))) {
		SLIST_REMOVE_HEAD(&e->graves, link);
		evhttp_connection_free(g->evcon);
		free(g);
	}
}

static void on_reaper(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	reap(arg);
}

/* evhttp may still be inside a callback of evcon: free it from the loop. */
static void free_evcon_later(struct etcd *e, struct evhttp_connection *evcon)
{
	struct grave *g = malloc(sizeof(*g));
	struct timeval now = { 0, 0 };

	if (!g) {
		log_warnx("etcd: out of memory; a connection leaks");
		return;
	}
	g->evcon = evcon;
	SLIST_INSERT_HEAD(&e->graves, g, link);
	evtimer_add(e->reaper, &now);
}

static struct evhttp_connection *connect_to(struct etcd *e,
					    const struct endpoint *ep)
{
	struct bufferevent *bev = NULL;
	struct evhttp_connection *evcon;

	if (ep->ep.tls) {
		SSL *ssl = SSL_new(e->ssl);
		if (!ssl)
			return NULL;
		SSL_set_tlsext_host_name(ssl, ep->ep.host);
		/* The certificate must name the host (or address) dialed. */
		X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
		if (!X509_VERIFY_PARAM_set1_ip_asc(vp, ep->ep.host))
			X509_VERIFY_PARAM_set1_host(vp, ep->ep.host, 0);
		bev = bufferevent_openssl_socket_new(e->base, -1, ssl,
			BUFFEREVENT_SSL_CONNECTING,
			BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		if (!bev) {
			SSL_free(ssl);
			return NULL;
		}
		bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	}
	evcon = evhttp_connection_base_bufferevent_new(e->base, e->dns, bev,
						       ep->ep.host, ep->ep.port);
	if (!evcon) {
		if (bev)
			bufferevent_free(bev);
		return NULL;
	}
	evhttp_connection_set_max_body_size(evcon, ETCD_BODY_MAX);
	evhttp_connection_set_retries(evcon, 0);
	return evcon;
}

static struct evhttp_request *new_request(struct etcd *e, int ep,
					  const char *body,
					  void (*done)(struct evhttp_request *, void *),
					  void *arg)
{
	struct evhttp_request *req = evhttp_request_new(done, arg);
	char host[300];

	if (!req)
		return NULL;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	snprintf(host, sizeof(host), "%s:%u", e->eps[ep].ep.host,
		 e->eps[ep].ep.port);
	if (evhttp_add_header(h, "Host", host) ||
	    evhttp_add_header(h, "Content-Type", "application/json") ||
	    evbuffer_add(evhttp_request_get_output_buffer(req), body,
			 strlen(body))) {
		evhttp_request_free(req);
		return NULL;
	}
	return req;
}

/* --- calls --- */

static void call_attempt(struct etcd_call *c);

static void call_finish(struct etcd_call *c, int err,
			struct json_object *reply)
{
	struct etcd *e = c->e;

	LIST_REMOVE(c, link);
	if (c->timer)
		event_free(c->timer);
	if (c->own)
		free_evcon_later(e, c->own);
	c->cb(c->arg, err, reply);
	free(c->body);
	free(c);
}

/* Reasons, best first: an answer that came but was wrong says more than
 * a timeout, which says more than no connection at all. */
static int worse(int a, int b)
{
	static const int rank[] = { EACCES, EPROTO, ETIMEDOUT, EHOSTUNREACH };

	for (size_t i = 0; i < sizeof(rank) / sizeof(rank[0]); i++)
		if (-a == rank[i] || -b == rank[i])
			return -rank[i];
	return a ? a : b;
}

/* This attempt failed with err: the next endpoint now, or after a
 * backoff once all failed this round; or the end of the call. */
static void call_retry(struct etcd_call *c, int err, bool now)
{
	struct etcd *e = c->e;
	uint64_t wait_ms = 0;

	c->err = c->err ? worse(c->err, err) : err;
	if (c->own) {
		free_evcon_later(e, c->own);
		c->own = NULL;
	}
	/* The next call goes first where this one is going next. */
	if (c->ep == e->cur)
		e->cur = (e->cur + 1) % e->neps;
	if (!now && ++c->tried >= e->neps) {
		c->tried = 0;
		wait_ms = ETCD_BACKOFF_MIN_MS << (c->rounds < 5 ? c->rounds : 5);
		if (wait_ms > ETCD_BACKOFF_MAX_MS)
			wait_ms = ETCD_BACKOFF_MAX_MS;
		c->rounds++;
	}
	if (now_ns() + wait_ms * 1000000ull >= c->deadline_ns) {
		call_finish(c, c->err, NULL);
		return;
	}
	if (wait_ms == 0) {
		call_attempt(c);
		return;
	}
	struct timeval tv = ms_to_timeval(wait_ms);
	evtimer_add(c->timer, &tv);
}

static void on_call_error(enum evhttp_request_error error, void *arg)
{
	struct etcd_call *c = arg;

	/* Our own cancel (from the timer): the call is past this attempt. */
	if (error == EVREQ_HTTP_REQUEST_CANCEL)
		return;
	c->req_error = error == EVREQ_HTTP_TIMEOUT ? -ETIMEDOUT
		       : error == EVREQ_HTTP_DATA_TOO_LONG ? -EPROTO
		       : error == EVREQ_HTTP_INVALID_HEADER ? -EPROTO
		       : -EHOSTUNREACH;
}

/* A TLS connection that failed: say why (once per reason), as the
 * errno the caller sees cannot. */
static void tls_why(struct etcd *e, int ep, struct evhttp_connection *evcon)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
	unsigned long err = bev ? bufferevent_get_openssl_error(bev) : 0;

	if (!err || err == e->last_tls_error)
		return;
	e->last_tls_error = err;
	log_warnx("etcd: %s: TLS: %s", e->eps[ep].url,
		  ERR_reason_error_string(err) ? ERR_reason_error_string(err)
					       : "handshake failed");
}

static void on_call_done(struct evhttp_request *req, void *arg)
{
	struct etcd_call *c = arg;
	struct etcd *e = c->e;
	int code = req ? evhttp_request_get_response_code(req) : 0;

	evtimer_del(c->timer);
	c->req = NULL;
	if (c->conn >= 0 && e->eps[c->ep].busy[c->conn])
		e->eps[c->ep].busy[c->conn]--;
	if (code == 0 && c->own)
		tls_why(e, c->ep, c->own);
	if (code == 0) {
		/* No answer: refused, reset, or a timeout evhttp saw. */
		call_retry(c, c->req_error ? c->req_error : -EHOSTUNREACH,
			   false);
		return;
	}
	if (code == 404 && e->api_auto && c->api == e->api &&
	    c->attempts < 3 * (unsigned)e->neps + 3) {
		/* An older etcd: its gateway lives under another path. */
		e->api = e->api == META_API_V3 ? META_API_V3BETA
			 : e->api == META_API_V3BETA ? META_API_V3ALPHA
			 : META_API_V3;
		log_info("etcd: %s answers 404 under %s; trying %s",
			 e->eps[c->ep].url, api_paths[c->api], api_paths[e->api]);
		c->ep = -1;  /* not the endpoint's fault */
		call_retry(c, -EPROTO, true);
		return;
	}
	if (code >= 500 || code == 429) {
		/* 503: no leader (an election), 504: etcd's own deadline. */
		call_retry(c, -ETIMEDOUT, false);
		return;
	}
	if (code != 200) {
		log_warnx("etcd: %s%s/%s: HTTP %d", e->eps[c->ep].url,
			  api_paths[c->api], c->method, code);
		call_finish(c, code == 401 || code == 403 ? -EACCES : -EPROTO,
			    NULL);
		return;
	}
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)len);
	struct json_object *reply = p ? parse_object(p, len) : NULL;
	if (!reply) {
		log_warnx("etcd: %s: an answer that is not a JSON object "
			  "(%zu bytes)", e->eps[c->ep].url, len);
		call_retry(c, -EPROTO, false);
		return;
	}
	call_finish(c, 0, reply);
	json_object_put(reply);
}

/* The attempt's deadline passed, or a backoff ended. */
static void on_call_timer(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_call *c = arg;
	struct etcd *e = c->e;
	(void)fd, (void)what;

	if (!c->req) {
		call_attempt(c);
		return;
	}
	struct evhttp_request *req = c->req;
	c->req = NULL;
	if (c->conn >= 0 && e->eps[c->ep].busy[c->conn])
		e->eps[c->ep].busy[c->conn]--;
	evhttp_cancel_request(req);
	call_retry(c, -ETIMEDOUT, false);
}

static void call_attempt(struct etcd_call *c)
{
	struct etcd *e = c->e;
	struct endpoint *ep;
	struct evhttp_connection *evcon;
	char path[128];

	c->attempts++;
	c->ep = e->cur;
	c->api = e->api;
	c->req_error = 0;
	c->conn = -1;
	ep = &e->eps[c->ep];
	if (ep->ep.tls) {
		evcon = c->own = connect_to(e, ep);
	} else {
		int best = 0;
		for (int i = 1; i < ETCD_CONNS; i++)
			if (ep->busy[i] < ep->busy[best])
				best = i;
		if (!ep->conns[best])
			ep->conns[best] = connect_to(e, ep);
		evcon = ep->conns[best];
		c->conn = best;
	}
	struct evhttp_request *req = evcon ? new_request(e, c->ep, c->body,
						   on_call_done, c) : NULL;
	if (!req) {
		c->conn = -1;
		call_finish(c, -ENOMEM, NULL);
		return;
	}
	evhttp_request_set_error_cb(req, on_call_error);
	snprintf(path, sizeof(path), "%s/%s", api_paths[c->api], c->method);
	if (evhttp_make_request(evcon, req, EVHTTP_REQ_POST, path)) {
		/* evhttp freed req; the connection is unusable. */
		c->conn = -1;
		call_retry(c, -EHOSTUNREACH, false);
		return;
	}
	c->req = req;
	if (c->conn >= 0)
		ep->busy[c->conn]++;
	uint64_t left_ms = (c->deadline_ns - now_ns()) / 1000000 + 1;
	struct timeval tv = ms_to_timeval(left_ms < e->timeout_ms ? left_ms
					  : e->timeout_ms);
	evtimer_add(c->timer, &tv);
}

void etcd_call(struct etcd *e, const char *method, struct json_object *body,
	       etcd_cb cb, void *arg)
{
	struct etcd_call *c = calloc(1, sizeof(*c));
	struct timeval now = { 0, 0 };

	if (c) {
		c->body = strdup(json_object_to_json_string_ext(body,
						JSON_C_TO_STRING_PLAIN));
		c->timer = evtimer_new(e->base, on_call_timer, c);
	}
	json_object_put(body);
	if (!c || !c->body || !c->timer) {
		if (c) {
			if (c->timer)
				event_free(c->timer);
			free(c->body);
			free(c);
		}
		/* Never from inside the caller: a zero-delay timer would
		 * need memory too, so this one failure answers at once. */
		cb(arg, -ENOMEM, NULL);
		return;
	}
	c->e = e;
	c->cb = cb;
	c->arg = arg;
	c->conn = -1;
	snprintf(c->method, sizeof(c->method), "%s", method);
	/* A timeout of its own at least once, even with etcd_retry_ms 0. */
	c->deadline_ns = now_ns() + (uint64_t)(e->retry_ms > e->timeout_ms
					       ? e->retry_ms : e->timeout_ms) *
					      1000000ull;
	LIST_INSERT_HEAD(&e->calls, c, link);
	/* The first attempt from the loop: callers may finish what they
	 * were doing before any answer (even -ENOMEM) comes. */
	evtimer_add(c->timer, &now);
}

/* --- watches --- */

/* Never from inside an evhttp callback of w (the closer event, open's
 * failure, etcd_destroy): its connection goes now, and with it the
 * request that would call back with w. */
static void watch_free(struct etcd_watch *w)
{
	LIST_REMOVE(w, link);
	if (w->closer)
		event_free(w->closer);
	if (w->evcon)
		evhttp_connection_free(w->evcon);
	if (w->pending)
		evbuffer_free(w->pending);
	free(w->body);
	free(w);
}

static void on_watch_closer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	watch_free(arg);
}

/* The stream is over (err): tell the owner once, then go. */
static void watch_end(struct etcd_watch *w, int err)
{
	struct timeval now = { 0, 0 };

	if (w->closing)
		return;
	w->closing = true;
	w->req = NULL;
	w->cb(w->arg, err, NULL);
	evtimer_add(w->closer, &now);
}

/* Whole lines of the stream: one message each. */
static void watch_lines(struct etcd_watch *w)
{
	struct evbuffer_ptr nl;

	while (!w->closing) {
		nl = evbuffer_search(w->pending, "\n", 1, NULL);
		if (nl.pos < 0) {
			if (evbuffer_get_length(w->pending) > ETCD_WATCH_MSG_MAX) {
				log_warnx("etcd: a watch message over %u bytes; "
					  "restarting the watch",
					  ETCD_WATCH_MSG_MAX);
				watch_end(w, -EPROTO);
			}
			return;
		}
		size_t len = (size_t)nl.pos;
		const char *p = (const char *)evbuffer_pullup(w->pending,
							      (ev_ssize_t)len + 1);
		struct json_object *msg = p ? parse_object(p, len) : NULL;
		evbuffer_drain(w->pending, len + 1);
		if (!msg) {
			if (len == 0)
				continue;
			log_warnx("etcd: a watch message that is not JSON; "
				  "restarting the watch");
			watch_end(w, -EPROTO);
			return;
		}
		w->cb(w->arg, 0, msg);
		json_object_put(msg);
	}
}

static void on_watch_chunk(struct evhttp_request *req, void *arg)
{
	struct etcd_watch *w = arg;

	if (w->closing)
		return;
	evbuffer_add_buffer(w->pending, evhttp_request_get_input_buffer(req));
	watch_lines(w);
}

static void on_watch_done(struct evhttp_request *req, void *arg)
{
	struct etcd_watch *w = arg;
	int code = req ? evhttp_request_get_response_code(req) : 0;

	if (w->closing)
		return;
	if (req && code == 200) {
		evbuffer_add_buffer(w->pending,
				    evhttp_request_get_input_buffer(req));
		evbuffer_add(w->pending, "\n", 1);
		watch_lines(w);
	}
	watch_end(w, code == 0 ? -EHOSTUNREACH
		  : code == 200 ? -ECONNRESET
		  : code >= 500 ? -ETIMEDOUT : -EPROTO);
}

static void on_watch_error(enum evhttp_request_error error, void *arg)
{
	(void)error, (void)arg;  /* on_watch_done follows with req NULL */
}

struct etcd_watch *etcd_watch_open(struct etcd *e, struct json_object *body,
				   etcd_watch_cb cb, void *arg)
{
	struct etcd_watch *w = calloc(1, sizeof(*w));
	struct endpoint *ep = &e->eps[e->cur];
	char path[128];

	if (!w) {
		json_object_put(body);
		return NULL;
	}
	w->e = e;
	w->cb = cb;
	w->arg = arg;
	w->body = strdup(json_object_to_json_string_ext(body,
						JSON_C_TO_STRING_PLAIN));
	json_object_put(body);
	LIST_INSERT_HEAD(&e->watches, w, link);
	w->pending = evbuffer_new();
	w->closer = evtimer_new(e->base, on_watch_closer, w);
	w->evcon = connect_to(e, ep);
	if (!w->body || !w->pending || !w->closer || !w->evcon)
		goto fail;
	evhttp_connection_set_timeout(w->evcon, ETCD_WATCH_IDLE_S);
	w->req = new_request(e, e->cur, w->body, on_watch_done, w);
	if (!w->req)
		goto fail;
	evhttp_request_set_chunked_cb(w->req, on_watch_chunk);
	evhttp_request_set_error_cb(w->req, on_watch_error);
	snprintf(path, sizeof(path), "%s/watch", api_paths[e->api]);
	if (evhttp_make_request(w->evcon, w->req, EVHTTP_REQ_POST, path)) {
		w->req = NULL;
		goto fail;
	}
	return w;
fail:
	if (w->req)
		evhttp_request_free(w->req);
	w->req = NULL;
	watch_free(w);
	return NULL;
}

void etcd_watch_close(struct etcd_watch *w)
{
	struct timeval now = { 0, 0 };

	if (!w || w->closing)
		return;
	/* Maybe inside its own callback: evhttp frees the request with
	 * the connection, from the loop. */
	w->closing = true;
	w->req = NULL;
	evtimer_add(w->closer, &now);
}

/* --- the client --- */

static SSL_CTX *tls_context(const struct meta_config *mc, char *err,
			    size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx)
		goto ossl;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (mc->ca[0] ? !SSL_CTX_load_verify_locations(ctx, mc->ca, NULL)
		      : !SSL_CTX_set_default_verify_paths(ctx)) {
		snprintf(err, errlen, "etcd_ca %s: cannot load",
			 mc->ca[0] ? mc->ca : "(system default)");
		goto fail;
	}
	if (mc->cert[0] &&
	    (!SSL_CTX_use_certificate_chain_file(ctx, mc->cert) ||
	     !SSL_CTX_use_PrivateKey_file(ctx, mc->key, SSL_FILETYPE_PEM) ||
	     !SSL_CTX_check_private_key(ctx))) {
		snprintf(err, errlen, "etcd_cert %s / etcd_key %s: cannot load "
			 "(or they do not match)", mc->cert, mc->key);
		goto fail;
	}
	return ctx;
ossl:
	snprintf(err, errlen, "TLS: %s",
		 ERR_reason_error_string(ERR_get_error()));
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

struct etcd *etcd_create(struct event_base *base,
			 const struct meta_config *mc, char *err,
			 size_t errlen)
{
	struct meta_endpoint eps[META_ENDPOINTS_MAX];
	struct etcd *e;
	bool names = false, tls = false;
	int n = meta_endpoints_parse(mc->endpoints, eps, err, errlen);

	if (n < 0)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	e->base = base;
	e->neps = n;
	e->api = mc->api;
	e->api_auto = mc->api == META_API_AUTO;
	e->timeout_ms = mc->timeout_ms;
	e->retry_ms = mc->retry_ms;
	LIST_INIT(&e->calls);
	LIST_INIT(&e->watches);
	SLIST_INIT(&e->graves);
	e->reaper = evtimer_new(base, on_reaper, e);
	if (!e->reaper) {
		snprintf(err, errlen, "out of memory");
		free(e);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		struct evutil_addrinfo hints = { .ai_flags = EVUTIL_AI_NUMERICHOST };
		struct evutil_addrinfo *ai = NULL;
		e->eps[i].ep = eps[i];
		snprintf(e->eps[i].url, sizeof(e->eps[i].url), "%s://%s%s%s:%u",
			 eps[i].tls ? "https" : "http",
			 strchr(eps[i].host, ':') ? "[" : "", eps[i].host,
			 strchr(eps[i].host, ':') ? "]" : "", eps[i].port);
		if (evutil_getaddrinfo(eps[i].host, NULL, &hints, &ai))
			names = true;
		else
			evutil_freeaddrinfo(ai);
		tls |= eps[i].tls;
	}
	/* Each xferd starts at a member of its own: the nodes of a cluster
	 * spread their calls over the members, not all on the first. */
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint32_t)getpid();
	e->cur = (int)(r % (uint32_t)n);
	/* Names resolve through evdns, never a blocking getaddrinfo. */
	if (names && !(e->dns = evdns_base_new(base,
					EVDNS_BASE_INITIALIZE_NAMESERVERS))) {
		snprintf(err, errlen, "cannot set up DNS (/etc/resolv.conf) "
			 "for the etcd endpoints' names");
		event_free(e->reaper);
		free(e);
		return NULL;
	}
	if (tls && !(e->ssl = tls_context(mc, err, errlen))) {
		if (e->dns)
			evdns_base_free(e->dns, 0);
		event_free(e->reaper);
		free(e);
		return NULL;
	}
	return e;
}

void etcd_destroy(struct etcd *e)
{
	struct etcd_call *c;
	struct etcd_watch *w;

	if (!e)
		return;
	while ((c = LIST_FIRST(&e->calls))) {
		if (c->req) {
			struct evhttp_request *req = c->req;
			c->req = NULL;
			evhttp_cancel_request(req);
		}
		call_finish(c, -ECANCELED, NULL);
	}
	/* Nothing of evhttp is on the stack here. */
	while ((w = LIST_FIRST(&e->watches)))
		watch_free(w);
	for (int i = 0; i < e->neps; i++)
		for (int k = 0; k < ETCD_CONNS; k++)
			if (e->eps[i].conns[k])
				evhttp_connection_free(e->eps[i].conns[k]);
	reap(e);
	event_free(e->reaper);
	if (e->dns)
		evdns_base_free(e->dns, 0);
	SSL_CTX_free(e->ssl);
	free(e);
}

const char *etcd_current(const struct etcd *e)
{
	return e->eps[e->cur].url;
}

const char *etcd_api_path(const struct etcd *e)
{
	return api_paths[e->api];
}
