/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd.h - a client of etcd's v3 API through its HTTP/JSON gateway
 * (POST <api>/kv/range, /kv/txn, /lease/grant, /watch, ... with keys and
 * values in base64), non-blocking on the main thread's event loop.
 *
 * Main thread only.  A call tries the endpoints in turn: one attempt
 * gets timeout_ms; after every endpoint failed once it waits (backoff
 * from 50 ms doubling to 1 s) and goes round again, until retry_ms have
 * passed since the call began.  Its callback then runs exactly once:
 *
 *   0            etcd answered (HTTP 200); `reply` is its JSON object,
 *                owned by the client (valid during the callback only)
 *   -ETIMEDOUT   some endpoint accepted the request but no answer came
 *                in time (or etcd said it has no leader)
 *   -EHOSTUNREACH no endpoint could be connected to
 *   -EPROTO      answers that were not etcd's (bad JSON, HTTP 4xx)
 *   -EACCES      etcd refused us (HTTP 401/403)
 *   -ECANCELED   etcd_destroy ran first
 *
 * A watch is a stream: each message etcd sends (one JSON object per
 * line) reaches the callback with err 0; when the stream ends for any
 * reason the callback runs once more with err < 0 and msg NULL, and the
 * watch is gone.  The owner then opens a new one (from the revision it
 * saw last) - the client never does on its own.
 */
#ifndef XFERD_META_ETCD_H
#define XFERD_META_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include "meta/meta_config.h"

struct event_base;
struct json_object;
struct etcd;
struct etcd_watch;

typedef void (*etcd_cb)(void *arg, int err, struct json_object *reply);

/* Largest JSON answer accepted from etcd (a range of every node record
 * of a large cluster fits many times). */
#define ETCD_BODY_MAX  (64u << 20)
/* Largest single message of a watch stream (etcd's own request limit
 * is 1.5 MiB, base64 makes 2). */
#define ETCD_WATCH_MSG_MAX (8u << 20)

/*
 * A client of the endpoints in mc (TLS settings loaded here).  NULL with
 * a reason in err.
 */
struct etcd *etcd_create(struct event_base *base,
			 const struct meta_config *mc, char *err,
			 size_t errlen);
/* Every call ends with -ECANCELED, every watch without a callback.
 * Accepts NULL. */
void etcd_destroy(struct etcd *e);

/*
 * POST `body` (taken over: freed here) to the gateway's `method`, e.g.
 * "kv/range".  The callback runs later, never from inside this call.
 */
void etcd_call(struct etcd *e, const char *method, struct json_object *body,
	       etcd_cb cb, void *arg);

typedef void (*etcd_watch_cb)(void *arg, int err, struct json_object *msg);
/* A watch stream on the endpoint that answered last; body (taken over)
 * is the WatchRequest, {"create_request": {...}}.  NULL if out of
 * memory. */
struct etcd_watch *etcd_watch_open(struct etcd *e, struct json_object *body,
				   etcd_watch_cb cb, void *arg);
/* Stop it; no callback after this returns.  Safe from inside its own
 * callback.  Accepts NULL. */
void etcd_watch_close(struct etcd_watch *w);

/* The endpoint last answered, "http://10.0.0.1:2379" (for logs). */
const char *etcd_current(const struct etcd *e);
/* The gateway path in use, "/v3" (auto mode may change it). */
const char *etcd_api_path(const struct etcd *e);

/* --- JSON helpers shared with the record parser --- */

/* base64 (standard alphabet, padded) of n bytes; malloc'd, NULL if out of
 * memory. */
char *etcd_b64_encode(const void *p, size_t n);
/* Decode s (at most max bytes of output); malloc'd into *out.  0, or
 * -EINVAL (not base64, too long), -ENOMEM. */
int etcd_b64_decode(const char *s, size_t max, uint8_t **out, size_t *len);
/* A key of obj as an int64: etcd's gateway writes them as strings
 * ("42"), and leaves out zeros.  0 (missing counts as 0) or -EINVAL. */
int etcd_json_i64(struct json_object *obj, const char *key, int64_t *out);

#endif /* XFERD_META_ETCD_H */
