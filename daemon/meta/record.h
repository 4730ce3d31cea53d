/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.h - what xferd stores in etcd, as JSON: the record of a node
 * (under <prefix>nodes/<node>) and the record of a published name (under
 * <prefix>names/<name>).  Encoding and validation only: pure functions
 * of bytes, unit-tested and fuzzed (tests/fuzz/fuzz_etcd_record.c).
 *
 * Anyone with write access to the prefix can put anything there, so a
 * parser takes nothing on trust: bounded length, JSON nesting, types,
 * ranges, names by the rules of common/pubname.h; one bad field makes
 * the whole record invalid, with the reason in *why.
 *
 *   node: {"v":1,"node":"a","instance":"<32 hex>","port":7474,
 *          "addrs":[{"ip":"10.0.1.1","prefix":24,"port":7474},...],
 *          "rails":[{"index":0,"gid":"<32 hex>","ip":"10.0.1.1",
 *                    "prefix":24,"lid":0,"mtu":5,"ib":false},...]}
 *   name: {"v":1,"node":"a","instance":"<32 hex>","token":"<base64>",
 *          "shared":true}
 *
 * "shared" came later within version 1: readers that predate it ignore
 * it (they read named members only), and a record without it is of a
 * writer that published every name, shared or not (cluster_names.c
 * ignores those).
 */
#ifndef XFERD_META_RECORD_H
#define XFERD_META_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta/names.h"
#include "nic/netaddr.h"

#define RECORD_VERSION   1
#define RECORD_MAX       8192  /* bytes of a record's JSON we read */
#define RECORD_NODE_MAX  80    /* a node name with its NUL */
#define RECORD_RAILS     32    /* = RDMA_RAIL_MAX */
#define RECORD_ID_LEN    16    /* an instance id */

struct record_rail {
	uint32_t index;            /* the node's rail number */
	uint8_t gid[16];
	struct netaddr addr;
	uint16_t lid;
	uint32_t mtu;              /* enum ibv_mtu */
	bool infiniband;
};

struct node_record {
	char node[RECORD_NODE_MAX];
	uint8_t instance[RECORD_ID_LEN];
	uint16_t port;             /* the xferd's TCP port */
	struct netaddr addrs[NETADDR_MAX];
	uint16_t ports[NETADDR_MAX];
	size_t naddrs;
	struct record_rail rails[RECORD_RAILS];
	size_t nrails;
};

struct name_record {
	char node[RECORD_NODE_MAX];
	uint8_t instance[RECORD_ID_LEN];
	uint8_t token[NAMES_TOKEN_MAX];
	size_t token_len;
	bool shared;               /* its publisher shared it (NAMES_SHARED) */
};

/* JSON of a record, malloc'd (NULL if out of memory). */
char *record_node_encode(const struct node_record *r);
char *record_name_encode(const struct name_record *r);

/*
 * Parse len bytes (no NUL needed).  0, or -EINVAL with a static reason
 * in *why (out then undefined).
 */
int record_node_parse(const char *p, size_t len, struct node_record *out,
		      const char **why);
int record_name_parse(const char *p, size_t len, struct name_record *out,
		      const char **why);

/* 32 lower-case hex digits of an instance id, and back (0 or -EINVAL). */
void record_id_hex(const uint8_t id[RECORD_ID_LEN], char out[33]);
int record_id_parse(const char *s, uint8_t id[RECORD_ID_LEN]);

#endif /* XFERD_META_RECORD_H */
