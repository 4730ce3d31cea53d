/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_etcd_record.c - what xferd reads from etcd under its prefix (with
 * metadata = etcd), which anyone with write access there can fill with
 * anything: node records and name records (daemon/meta/record.c), and the
 * kv objects of etcd's JSON answers that carry them (cluster_kv,
 * daemon/meta/cluster.c).  The first byte picks which; the rest is the
 * input.
 *
 * Invariants: a record that parses holds a valid node name, at most
 * NETADDR_MAX addresses (none for a node that takes no links) and RECORD_RAILS rails, a token of 1-512 bytes;
 * encoding it again and parsing that gives the same record.  A kv that
 * decodes has a NUL-terminated key and a value within the bound asked.
 */
#include <string.h>

#include <json-c/json.h>

#include "common/pubname.h"
#include "fuzz.h"
#include "meta/cluster_int.h"
#include "meta/record.h"

static void node(const char *p, size_t n)
{
	struct node_record r, again;
	const char *why = NULL;

	if (record_node_parse(p, n, &r, &why)) {
		FUZZ_ASSERT(why != NULL);
		return;
	}
	FUZZ_ASSERT(pubname_node_valid(r.node, strlen(r.node)));
	FUZZ_ASSERT(r.naddrs <= NETADDR_MAX);
	FUZZ_ASSERT(r.nrails <= RECORD_RAILS);
	char *s = record_node_encode(&r);
	FUZZ_ASSERT(s != NULL);
	FUZZ_ASSERT(record_node_parse(s, strlen(s), &again, &why) == 0);
	FUZZ_ASSERT(strcmp(again.node, r.node) == 0);
	FUZZ_ASSERT(memcmp(again.instance, r.instance, RECORD_ID_LEN) == 0);
	FUZZ_ASSERT(again.naddrs == r.naddrs && again.nrails == r.nrails);
	for (size_t i = 0; i < r.naddrs; i++)
		FUZZ_ASSERT(again.ports[i] == r.ports[i] &&
			    again.addrs[i].prefix_len == r.addrs[i].prefix_len &&
			    memcmp(again.addrs[i].ip, r.addrs[i].ip, 16) == 0);
	free(s);
}

static void name(const char *p, size_t n)
{
	struct name_record r, again;
	const char *why = NULL;

	if (record_name_parse(p, n, &r, &why)) {
		FUZZ_ASSERT(why != NULL);
		return;
	}
	FUZZ_ASSERT(r.token_len >= 1 && r.token_len <= NAMES_TOKEN_MAX);
	char *s = record_name_encode(&r);
	FUZZ_ASSERT(s != NULL);
	FUZZ_ASSERT(record_name_parse(s, strlen(s), &again, &why) == 0);
	FUZZ_ASSERT(again.token_len == r.token_len &&
		    memcmp(again.token, r.token, r.token_len) == 0);
	FUZZ_ASSERT(strcmp(again.node, r.node) == 0);
	free(s);
}

static void kv(const char *p, size_t n)
{
	struct json_tokener *tok = json_tokener_new_ex(16);
	struct json_object *o = json_tokener_parse_ex(tok, p, (int)n);
	char *key;
	uint8_t *val;
	size_t vlen;
	int64_t lease;

	if (o && cluster_kv(o, &key, &val, &vlen, RECORD_MAX, &lease) == 0) {
		FUZZ_ASSERT(key != NULL);
		FUZZ_ASSERT(strlen(key) <= 1024);
		FUZZ_ASSERT(!val || vlen <= RECORD_MAX);
		free(key);
		free(val);
	}
	json_object_put(o);
	json_tokener_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *p = (const char *)data + 1;
	size_t n = size - 1;
	switch (data[0] % 3) {
	case 0: node(p, n); break;
	case 1: name(p, n); break;
	default: kv(p, n); break;
	}
	return 0;
}
