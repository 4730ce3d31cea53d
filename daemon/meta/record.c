/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.c - node and name records as JSON (json-c), and their
 * validation.  The format is in record.h.  Unknown keys are ignored (a
 * later xferd may add some); a record of another "v" is refused, so that
 * an incompatible change is one number, not a guess.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/numparse.h"
#include "common/pubname.h"
#include "meta/etcd.h"
#include "meta/record.h"

#define RECORD_JSON_DEPTH 8   /* records nest three levels */

/* --- ids and addresses --- */

void record_id_hex(const uint8_t id[RECORD_ID_LEN], char out[33])
{
	for (int i = 0; i < RECORD_ID_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
}

static int hex_parse(const char *s, uint8_t *out, size_t n)
{
	if (strlen(s) != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int b = numparse_hex_byte(s + 2 * i);
		if (b < 0)
			return -EINVAL;
		out[i] = (uint8_t)b;
	}
	return 0;
}

int record_id_parse(const char *s, uint8_t id[RECORD_ID_LEN])
{
	return hex_parse(s, id, RECORD_ID_LEN);
}

/* --- encoding --- */

static struct json_object *jstr(const char *s)
{
	return json_object_new_string(s);
}

static struct json_object *addr_json(const struct netaddr *a, int port,
				     bool with_port)
{
	struct json_object *o = json_object_new_object();
	char ip[64];

	netaddr_format(a, false, ip, sizeof(ip));
	json_object_object_add(o, "ip", jstr(ip));
	json_object_object_add(o, "prefix",
			       json_object_new_int((int)a->prefix_len));
	if (with_port)
		json_object_object_add(o, "port", json_object_new_int(port));
	return o;
}

/* The JSON text of o, malloc'd; o is released. */
static char *finish(struct json_object *o)
{
	char *s = o ? strdup(json_object_to_json_string_ext(o,
						JSON_C_TO_STRING_PLAIN)) : NULL;
	json_object_put(o);
	return s;
}

char *record_node_encode(const struct node_record *r)
{
	struct json_object *o = json_object_new_object();
	struct json_object *addrs = json_object_new_array();
	struct json_object *rails = json_object_new_array();
	char hex[33];

	if (!o || !addrs || !rails) {
		json_object_put(addrs);
		json_object_put(rails);
		json_object_put(o);
		return NULL;
	}
	record_id_hex(r->instance, hex);
	json_object_object_add(o, "v", json_object_new_int(RECORD_VERSION));
	json_object_object_add(o, "node", jstr(r->node));
	json_object_object_add(o, "instance", jstr(hex));
	json_object_object_add(o, "port", json_object_new_int(r->port));
	for (size_t i = 0; i < r->naddrs; i++)
		json_object_array_add(addrs, addr_json(&r->addrs[i],
						       r->ports[i], true));
	json_object_object_add(o, "addrs", addrs);
	for (size_t i = 0; i < r->nrails; i++) {
		const struct record_rail *rl = &r->rails[i];
		struct json_object *j = addr_json(&rl->addr, 0, false);
		char gid[33];
		for (int k = 0; k < 16; k++)
			snprintf(gid + 2 * k, 3, "%02x", rl->gid[k]);
		json_object_object_add(j, "index",
				       json_object_new_int64(rl->index));
		json_object_object_add(j, "gid", jstr(gid));
		json_object_object_add(j, "lid", json_object_new_int(rl->lid));
		json_object_object_add(j, "mtu",
				       json_object_new_int64(rl->mtu));
		json_object_object_add(j, "ib",
				       json_object_new_boolean(rl->infiniband));
		json_object_array_add(rails, j);
	}
	json_object_object_add(o, "rails", rails);
	return finish(o);
}

char *record_name_encode(const struct name_record *r)
{
	struct json_object *o = json_object_new_object();
	char hex[33];
	char *tok = etcd_b64_encode(r->token, r->token_len);

	if (!o || !tok) {
		free(tok);
		json_object_put(o);
		return NULL;
	}
	record_id_hex(r->instance, hex);
	json_object_object_add(o, "v", json_object_new_int(RECORD_VERSION));
	json_object_object_add(o, "node", jstr(r->node));
	json_object_object_add(o, "instance", jstr(hex));
	json_object_object_add(o, "token", jstr(tok));
	if (r->shared)
		json_object_object_add(o, "shared",
				       json_object_new_boolean(1));
	free(tok);
	return finish(o);
}

/* --- parsing --- */

#define BAD(reason) do { *why = (reason); return -EINVAL; } while (0)

static struct json_object *parse_top(const char *p, size_t len,
				     const char **why)
{
	struct json_tokener *tok;
	struct json_object *o;

	if (len == 0)
		return *why = "empty", NULL;
	if (len > RECORD_MAX)
		return *why = "longer than 8192 bytes", NULL;
	if (memchr(p, '\0', len))
		return *why = "a NUL byte", NULL;
	tok = json_tokener_new_ex(RECORD_JSON_DEPTH);
	if (!tok)
		return *why = "out of memory", NULL;
	o = json_tokener_parse_ex(tok, p, (int)len);
	if (!o || json_tokener_get_error(tok) != json_tokener_success) {
		*why = "not JSON (or nested too deep)";
		json_object_put(o);
		o = NULL;
	} else if ((size_t)json_tokener_get_parse_end(tok) != len) {
		*why = "bytes after the JSON";
		json_object_put(o);
		o = NULL;
	} else if (!json_object_is_type(o, json_type_object)) {
		*why = "not a JSON object";
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

/* obj[key] of type t, or NULL. */
static struct json_object *get(struct json_object *obj, const char *key,
			       json_type t)
{
	struct json_object *v;

	if (!json_object_object_get_ex(obj, key, &v) || !v ||
	    !json_object_is_type(v, t))
		return NULL;
	return v;
}

/* An integer member in [min, max] (a JSON number, not a string). */
static int get_int(struct json_object *obj, const char *key, int64_t min,
		   int64_t max, int64_t *out)
{
	struct json_object *v = get(obj, key, json_type_int);

	if (!v)
		return -EINVAL;
	errno = 0;
	int64_t x = json_object_get_int64(v);
	if (errno || x < min || x > max)
		return -EINVAL;
	*out = x;
	return 0;
}

static int check_version(struct json_object *o, const char **why)
{
	int64_t v;

	if (get_int(o, "v", 0, INT32_MAX, &v))
		BAD("\"v\" missing or not a number");
	if (v != RECORD_VERSION)
		BAD("a record version this xferd does not know");
	return 0;
}

static int get_node_id(struct json_object *o, char node[RECORD_NODE_MAX],
		       uint8_t id[RECORD_ID_LEN], const char **why)
{
	struct json_object *n = get(o, "node", json_type_string);
	struct json_object *i = get(o, "instance", json_type_string);

	if (!n)
		BAD("\"node\" missing or not a string");
	size_t len = (size_t)json_object_get_string_len(n);
	const char *s = json_object_get_string(n);
	if (len >= RECORD_NODE_MAX || strlen(s) != len ||
	    !pubname_node_valid(s, len))
		BAD("\"node\" is not a valid node name");
	memcpy(node, s, len + 1);
	if (!i || record_id_parse(json_object_get_string(i), id))
		BAD("\"instance\" is not 32 hex digits");
	return 0;
}

/* {"ip": "...", "prefix": N[, "port": P]} */
static int get_addr(struct json_object *a, struct netaddr *out,
		    uint16_t *port, const char **why)
{
	struct json_object *ip = get(a, "ip", json_type_string);
	int64_t prefix, p;

	if (!json_object_is_type(a, json_type_object))
		BAD("an address that is not an object");
	if (!ip || json_object_get_string_len(ip) > 45 ||
	    strchr(json_object_get_string(ip), '/') ||
	    netaddr_parse(json_object_get_string(ip), out))
		BAD("an address without a valid \"ip\"");
	if (get_int(a, "prefix", 0, out->family == AF_INET ? 32 : 128,
		    &prefix))
		BAD("an address without a valid \"prefix\"");
	out->prefix_len = (unsigned)prefix;
	if (port) {
		if (get_int(a, "port", 1, 65535, &p))
			BAD("an address without a valid \"port\"");
		*port = (uint16_t)p;
	}
	return 0;
}

int record_node_parse(const char *p, size_t len, struct node_record *out,
		      const char **why)
{
	struct json_object *o = parse_top(p, len, why);
	struct json_object *addrs, *rails;
	int64_t port;
	int rc = -EINVAL;

	if (!o)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (check_version(o, why) ||
	    get_node_id(o, out->node, out->instance, why))
		goto out;
	/* 0 and no addresses: a node that takes no links (listen = off). */
	if (get_int(o, "port", 0, 65535, &port)) {
		*why = "\"port\" missing or not in 0-65535";
		goto out;
	}
	out->port = (uint16_t)port;
	addrs = get(o, "addrs", json_type_array);
	if (!addrs || json_object_array_length(addrs) > NETADDR_MAX) {
		*why = "\"addrs\" is not an array of at most 16 addresses";
		goto out;
	}
	for (size_t i = 0; i < json_object_array_length(addrs); i++)
		if (get_addr(json_object_array_get_idx(addrs, i),
			     &out->addrs[i], &out->ports[i], why))
			goto out;
	out->naddrs = json_object_array_length(addrs);
	/* Rails are optional: a TCP-only node has none. */
	if (json_object_object_get_ex(o, "rails", NULL)) {
		rails = get(o, "rails", json_type_array);
		if (!rails || json_object_array_length(rails) > RECORD_RAILS) {
			*why = "\"rails\" is not an array of at most 32 rails";
			goto out;
		}
		for (size_t i = 0; i < json_object_array_length(rails); i++) {
			struct json_object *r = json_object_array_get_idx(rails, i);
			struct record_rail *rl = &out->rails[i];
			struct json_object *gid;
			int64_t v;
			if (get_addr(r, &rl->addr, NULL, why))
				goto out;
			gid = get(r, "gid", json_type_string);
			if (!gid || hex_parse(json_object_get_string(gid),
					      rl->gid, 16)) {
				*why = "a rail without a valid \"gid\"";
				goto out;
			}
			if (get_int(r, "index", 0, RECORD_RAILS - 1, &v)) {
				*why = "a rail without a valid \"index\"";
				goto out;
			}
			rl->index = (uint32_t)v;
			if (get_int(r, "lid", 0, 65535, &v)) {
				*why = "a rail without a valid \"lid\"";
				goto out;
			}
			rl->lid = (uint16_t)v;
			if (get_int(r, "mtu", 1, 5, &v)) {
				*why = "a rail without a valid \"mtu\" (1-5)";
				goto out;
			}
			rl->mtu = (uint32_t)v;
			struct json_object *ib = get(r, "ib", json_type_boolean);
			if (!ib) {
				*why = "a rail without a boolean \"ib\"";
				goto out;
			}
			rl->infiniband = json_object_get_boolean(ib);
		}
		out->nrails = json_object_array_length(rails);
	}
	rc = 0;
out:
	json_object_put(o);
	return rc;
}

int record_name_parse(const char *p, size_t len, struct name_record *out,
		      const char **why)
{
	struct json_object *o = parse_top(p, len, why);
	struct json_object *tok;
	uint8_t *raw = NULL;
	size_t n = 0;
	int rc = -EINVAL;

	if (!o)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (check_version(o, why) ||
	    get_node_id(o, out->node, out->instance, why))
		goto out;
	tok = get(o, "token", json_type_string);
	if (!tok || etcd_b64_decode(json_object_get_string(tok),
				    NAMES_TOKEN_MAX, &raw, &n) || n == 0) {
		*why = "\"token\" is not base64 of 1-512 bytes";
		goto out;
	}
	memcpy(out->token, raw, n);
	out->token_len = n;
	/* Optional (record.h); present, it must be a boolean. */
	if (json_object_object_get_ex(o, "shared", NULL)) {
		struct json_object *sh = get(o, "shared", json_type_boolean);
		if (!sh) {
			*why = "\"shared\" is not a boolean";
			goto out;
		}
		out->shared = json_object_get_boolean(sh);
	}
	rc = 0;
out:
	free(raw);
	json_object_put(o);
	return rc;
}
