/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_meta.c - the pure parts of the etcd backend (daemon/meta/): the
 * settings (metadata, etcd_*: endpoints, prefix, bounds, what goes
 * together), the JSON of node and name records (round trip, and every
 * kind of bad record refused with a reason), base64 and etcd's
 * string-encoded integers.
 */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "config.h"
#include "meta/etcd.h"
#include "meta/meta_config.h"
#include "meta/record.h"
#include "suites.h"

static int set(struct xferd_config *c, const char *k, const char *v)
{
	char err[256] = "";
	int rc = config_set(c, k, v, err, sizeof(err));

	ck_assert(rc == 0 || err[0]);
	return rc;
}

START_TEST(test_settings)
{
	struct xferd_config c;
	struct meta_endpoint eps[META_ENDPOINTS_MAX];
	char err[256];

	config_defaults(&c);
	ck_assert_int_eq(c.meta.backend, META_LOCAL);
	ck_assert_str_eq(c.meta.prefix, "/xferd/");
	ck_assert_int_eq(meta_config_check(&c.meta, err, sizeof(err)), 0);
	ck_assert_int_eq(set(&c, "metadata", "etcd"), 0);
	/* etcd without endpoints: refused at start, with the reason. */
	ck_assert_int_eq(meta_config_check(&c.meta, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "etcd_endpoints"));
	ck_assert_int_eq(set(&c, "etcd_endpoints",
			     "http://10.0.0.1:2379,https://etcd-2.example:2379,"
			     "http://[fd00::3]:2379/"), 0);
	ck_assert_int_eq(meta_endpoints_parse(c.meta.endpoints, eps, err,
					      sizeof(err)), 3);
	ck_assert(!eps[0].tls && eps[1].tls && !eps[2].tls);
	ck_assert_str_eq(eps[1].host, "etcd-2.example");
	ck_assert_str_eq(eps[2].host, "fd00::3");
	ck_assert_uint_eq(eps[2].port, 2379);
	ck_assert_int_eq(meta_config_check(&c.meta, err, sizeof(err)), 0);

	static const char *const bad_eps[] = {
		"", "10.0.0.1:2379", "http://10.0.0.1", "http://:2379",
		"http://10.0.0.1:0", "http://10.0.0.1:65536", "ftp://h:1",
		"http://h:1,", "http://h:1,,http://g:2", "http://h h:1",
		"http://[fd00::1:2379",
	};
	for (size_t i = 0; i < sizeof(bad_eps) / sizeof(bad_eps[0]); i++)
		ck_assert_msg(set(&c, "etcd_endpoints", bad_eps[i]) == -EINVAL,
			      "accepted '%s'", bad_eps[i]);
	ck_assert_int_eq(set(&c, "etcd_prefix", "/cluster-7"), 0);
	ck_assert_str_eq(c.meta.prefix, "/cluster-7/");
	ck_assert_int_eq(set(&c, "etcd_prefix", "/x/"), 0);
	ck_assert_str_eq(c.meta.prefix, "/x/");
	ck_assert_int_eq(set(&c, "etcd_prefix", "a b"), -EINVAL);
	ck_assert_int_eq(set(&c, "etcd_lease_ttl", "1"), -EINVAL);
	ck_assert_int_eq(set(&c, "etcd_lease_ttl", "2"), 0);
	ck_assert_int_eq(set(&c, "etcd_timeout_ms", "5"), -EINVAL);
	ck_assert_int_eq(set(&c, "etcd_retry_ms", "0"), 0);
	ck_assert_int_eq(set(&c, "etcd_api", "v3beta"), 0);
	ck_assert_int_eq(c.meta.api, META_API_V3BETA);
	ck_assert_int_eq(set(&c, "etcd_api", "v2"), -EINVAL);
	ck_assert_int_eq(set(&c, "metadata", "zookeeper"), -EINVAL);
	ck_assert_int_eq(set(&c, "etcd_nonsense", "1"), -EINVAL);
	ck_assert_int_eq(set(&c, "etcd_cert", "relative.pem"), -EINVAL);
	ck_assert_int_eq(set(&c, "etcd_cert", "/etc/xferd/client.pem"), 0);
	ck_assert_int_eq(meta_config_check(&c.meta, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(set(&c, "etcd_key", "/etc/xferd/client.key"), 0);
	ck_assert_int_eq(meta_config_check(&c.meta, err, sizeof(err)), 0);
}
END_TEST

static struct node_record sample_node(void)
{
	struct node_record r = { .node = "gpu-node-17", .port = 7474,
				 .naddrs = 2, .nrails = 1 };

	for (int i = 0; i < RECORD_ID_LEN; i++)
		r.instance[i] = (uint8_t)(i * 17 + 3);
	ck_assert_int_eq(netaddr_parse("10.0.1.7/24", &r.addrs[0]), 0);
	ck_assert_int_eq(netaddr_parse("fd00:1::7/64", &r.addrs[1]), 0);
	r.ports[0] = 7474;
	r.ports[1] = 7475;
	ck_assert_int_eq(netaddr_parse("192.168.5.7/24", &r.rails[0].addr), 0);
	r.rails[0].index = 3;
	r.rails[0].gid[15] = 9;
	r.rails[0].lid = 12;
	r.rails[0].mtu = 5;
	r.rails[0].infiniband = true;
	return r;
}

START_TEST(test_node_record)
{
	struct node_record r = sample_node(), back;
	const char *why = NULL;
	char *s = record_node_encode(&r);

	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(record_node_parse(s, strlen(s), &back, &why), 0);
	ck_assert_str_eq(back.node, r.node);
	ck_assert_mem_eq(back.instance, r.instance, RECORD_ID_LEN);
	ck_assert_uint_eq(back.port, 7474);
	ck_assert_uint_eq(back.naddrs, 2);
	ck_assert_uint_eq(back.ports[1], 7475);
	ck_assert_uint_eq(back.addrs[1].prefix_len, 64);
	ck_assert_mem_eq(back.addrs[0].ip, r.addrs[0].ip, 16);
	ck_assert_uint_eq(back.nrails, 1);
	ck_assert_uint_eq(back.rails[0].index, 3);
	ck_assert_uint_eq(back.rails[0].gid[15], 9);
	ck_assert(back.rails[0].infiniband);
	free(s);
	/* listen = off: no port, no address, still a member. */
	r.port = 0;
	r.naddrs = 0;
	s = record_node_encode(&r);
	ck_assert_int_eq(record_node_parse(s, strlen(s), &back, &why), 0);
	ck_assert_uint_eq(back.naddrs, 0);
	free(s);

	static const char *const bad[] = {
		"", "{", "[]", "42", "{\"v\":1}", "garbage{",
		"{\"v\":2,\"node\":\"a\",\"instance\":\"00112233445566778899aabbccddeeff\","
		"\"port\":1,\"addrs\":[{\"ip\":\"10.0.0.1\",\"prefix\":8,\"port\":1}]}",
		"{\"v\":1,\"node\":\"a b\",\"instance\":\"00112233445566778899aabbccddeeff\","
		"\"port\":1,\"addrs\":[{\"ip\":\"10.0.0.1\",\"prefix\":8,\"port\":1}]}",
		"{\"v\":1,\"node\":\"a\",\"instance\":5,"
		"\"port\":1,\"addrs\":[{\"ip\":\"10.0.0.1\",\"prefix\":8,\"port\":1}]}",
		"{\"v\":1,\"node\":\"a\",\"instance\":\"00112233445566778899aabbccddeeff\","
		"\"port\":\"1\",\"addrs\":[{\"ip\":\"10.0.0.1\",\"prefix\":8,\"port\":1}]}",
		"{\"v\":1,\"node\":\"a\",\"instance\":\"00112233445566778899aabbccddeeff\","
		"\"port\":1,\"addrs\":{}}",
		"{\"v\":1,\"node\":\"a\",\"instance\":\"00112233445566778899aabbccddeeff\","
		"\"port\":1,\"addrs\":[{\"ip\":\"10.0.0.1\",\"prefix\":33,\"port\":1}]}",
		"{\"v\":1,\"node\":\"a\",\"instance\":\"00112233445566778899aabbccddeeff\","
		"\"port\":1,\"addrs\":[{\"ip\":\"10.0.0.1/8\",\"prefix\":8,\"port\":1}]}",
		"{\"v\":1,\"node\":\"a\",\"instance\":\"00112233445566778899aabbccddeeff\","
		"\"port\":1,\"addrs\":[{\"ip\":\"10.0.0.1\",\"prefix\":8,\"port\":1}],"
		"\"rails\":[{\"ip\":\"10.0.0.1\",\"prefix\":8}]}",
		"{\"v\":1,\"node\":\"a\",\"instance\":\"00112233445566778899aabbccddeeff\","
		"\"port\":1,\"addrs\":[{\"ip\":\"10.0.0.1\",\"prefix\":8,\"port\":1}]} x",
		"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		ck_assert_msg(record_node_parse(bad[i], strlen(bad[i]), &back,
						&why) == -EINVAL,
			      "accepted bad record %zu", i);
		ck_assert_ptr_nonnull(why);
	}
	/* Huge: refused by its length, before any parsing. */
	size_t n = RECORD_MAX + 1;
	char *huge = malloc(n);
	memset(huge, ' ', n);
	ck_assert_int_eq(record_node_parse(huge, n, &back, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "longer"));
	free(huge);
}
END_TEST

START_TEST(test_name_record)
{
	struct name_record r = { .node = "n1", .token_len = 300 }, back;
	const char *why = NULL;

	for (size_t i = 0; i < r.token_len; i++)
		r.token[i] = (uint8_t)(i * 7);
	memset(r.instance, 0x5a, sizeof(r.instance));
	char *s = record_name_encode(&r);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(record_name_parse(s, strlen(s), &back, &why), 0);
	ck_assert_uint_eq(back.token_len, 300);
	ck_assert_mem_eq(back.token, r.token, 300);
	ck_assert_str_eq(back.node, "n1");
	ck_assert(!back.shared);
	ck_assert_ptr_null(strstr(s, "shared"));
	free(s);
	/* "shared" goes there and back; a record without it (a writer that
	 * predates it) parses, unshared. */
	r.shared = true;
	s = record_name_encode(&r);
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(record_name_parse(s, strlen(s), &back, &why), 0);
	ck_assert(back.shared);
	free(s);
	static const char old[] = "{\"v\":1,\"node\":\"n1\",\"instance\":"
		"\"00112233445566778899aabbccddeeff\",\"token\":\"AAAA\"}";
	ck_assert_int_eq(record_name_parse(old, strlen(old), &back, &why), 0);
	ck_assert(!back.shared);
	static const char *const bad[] = {
		"{\"v\":1,\"node\":\"n1\",\"instance\":\"00112233445566778899aabbccddeeff\",\"token\":\"AAAA\",\"shared\":1}",
		"{\"v\":1,\"node\":\"n1\",\"instance\":\"00112233445566778899aabbccddeeff\"}",
		"{\"v\":1,\"node\":\"n1\",\"instance\":\"00112233445566778899aabbccddeeff\",\"token\":5}",
		"{\"v\":1,\"node\":\"n1\",\"instance\":\"00112233445566778899aabbccddeeff\",\"token\":\"\"}",
		"{\"v\":1,\"node\":\"n1\",\"instance\":\"00112233445566778899aabbccddeeff\",\"token\":\"***=\"}",
		"{\"v\":1,\"node\":\"n1\",\"instance\":\"0011\",\"token\":\"AAAA\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(record_name_parse(bad[i], strlen(bad[i]), &back,
						&why) == -EINVAL,
			      "accepted bad name record %zu", i);
	/* 513 bytes of token: one too many. */
	char big[1024] = "{\"v\":1,\"node\":\"n1\",\"instance\":"
			 "\"00112233445566778899aabbccddeeff\",\"token\":\"";
	size_t at = strlen(big);
	memset(big + at, 'A', 684);
	strcpy(big + at + 684, "\"}");
	ck_assert_int_eq(record_name_parse(big, strlen(big), &back, &why),
			 -EINVAL);
}
END_TEST

START_TEST(test_json_helpers)
{
	uint8_t *out;
	size_t len;
	char *b = etcd_b64_encode("foo", 3);

	ck_assert_str_eq(b, "Zm9v");
	free(b);
	ck_assert_int_eq(etcd_b64_decode("Zm8=", 16, &out, &len), 0);
	ck_assert_uint_eq(len, 2);
	ck_assert_mem_eq(out, "fo", 2);
	free(out);
	ck_assert_int_eq(etcd_b64_decode("Zm8", 16, &out, &len), -EINVAL);
	ck_assert_int_eq(etcd_b64_decode("Zm9vYmFy", 3, &out, &len), -EINVAL);
	ck_assert_int_eq(etcd_b64_decode("", 3, &out, &len), 0);
	ck_assert_uint_eq(len, 0);
	free(out);

	struct json_object *o = json_tokener_parse(
		"{\"a\":\"7587899136781873419\",\"b\":5,\"c\":\"x\",\"d\":[]}");
	int64_t v;
	ck_assert_int_eq(etcd_json_i64(o, "a", &v), 0);
	ck_assert(v == 7587899136781873419LL);
	ck_assert_int_eq(etcd_json_i64(o, "b", &v), 0);
	ck_assert(v == 5);
	ck_assert_int_eq(etcd_json_i64(o, "missing", &v), 0);
	ck_assert(v == 0);
	ck_assert_int_eq(etcd_json_i64(o, "c", &v), -EINVAL);
	ck_assert_int_eq(etcd_json_i64(o, "d", &v), -EINVAL);
	json_object_put(o);
}
END_TEST

Suite *meta_suite(void)
{
	Suite *s = suite_create("meta");
	TCase *tc = tcase_create("etcd");

	tcase_add_test(tc, test_settings);
	tcase_add_test(tc, test_node_record);
	tcase_add_test(tc, test_name_record);
	tcase_add_test(tc, test_json_helpers);
	suite_add_tcase(s, tc);
	return s;
}
