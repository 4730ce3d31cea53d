/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_metrics.c - what the metrics are made of: the latency histogram
 * and errno counts of core/completion_stats.h, their summing in
 * ops/stats.c, the exposition text of ops/metrics_text.c (valid whatever
 * names clients and peers give themselves, cumulative buckets, the
 * "other" row), and the log rate limit of log.c.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/completion_stats.h"
#include "expo_check.h"
#include "core/log.h"
#include "ops/metrics_text.h"
#include "ops/stats.h"
#include "suites.h"

static struct completion_stats cs;

START_TEST(test_buckets)
{
	memset(&cs, 0, sizeof(cs));
	/* Bounds are inclusive: 1000 ns is in the 1 us bucket. */
	completion_record_ns(&cs, XFER_PATH_MEMCPY, 8, 0);
	completion_record_ns(&cs, XFER_PATH_MEMCPY, 8, 1000);
	completion_record_ns(&cs, XFER_PATH_MEMCPY, 8, 1001);
	completion_record_ns(&cs, XFER_PATH_MEMCPY, 8, 3000000);    /* 3 ms */
	completion_record_ns(&cs, XFER_PATH_MEMCPY, 8, 10000000000ull);
	completion_record_ns(&cs, XFER_PATH_MEMCPY, 8, 10000000001ull);
	ck_assert_uint_eq(cs.lat[XFER_PATH_MEMCPY][0], 2);
	ck_assert_uint_eq(cs.lat[XFER_PATH_MEMCPY][1], 1);
	ck_assert_uint_eq(cs.lat[XFER_PATH_MEMCPY][11], 1);  /* <= 5 ms */
	ck_assert_uint_eq(cs.lat[XFER_PATH_MEMCPY][LAT_BOUNDS - 1], 1);
	ck_assert_uint_eq(cs.lat[XFER_PATH_MEMCPY][LAT_BOUNDS], 1);
	ck_assert_uint_eq(cs.lat_sum_ns[XFER_PATH_MEMCPY],
			  2001 + 3000000 + 20000000001ull);
	for (unsigned b = 1; b < LAT_BOUNDS; b++)
		ck_assert(lat_bound_ns[b] > lat_bound_ns[b - 1]);
}
END_TEST

START_TEST(test_pass)
{
	struct completion_pass pp = { .start_ns = 1000000 };

	memset(&cs, 0, sizeof(cs));
	/* Three of this pass (one failed), timed when it ends. */
	completion_pass_add(&pp, &cs, XFER_PATH_MEMCPY, 64, pp.start_ns);
	completion_pass_add(&pp, &cs, XFER_PATH_MEMCPY, 64, pp.start_ns);
	completion_pass_add(&pp, &cs, XFER_PATH_NONE, -EINVAL, pp.start_ns);
	ck_assert_uint_eq(cs.lat[XFER_PATH_MEMCPY][0], 0);
	ck_assert_uint_eq(cs.errors[XFER_PATH_NONE][EINVAL], 1);
	completion_pass_end(&pp, &cs, 1000000 + 3000);   /* 3 us */
	ck_assert_uint_eq(cs.lat[XFER_PATH_MEMCPY][2], 2); /* <= 5 us */
	ck_assert_uint_eq(cs.lat_sum_ns[XFER_PATH_MEMCPY], 6000);
	ck_assert_uint_eq(cs.lat[XFER_PATH_NONE][2], 1);
	ck_assert_uint_eq(pp.start_ns, 1003000);
	ck_assert_uint_eq(pp.touched, 0);
	/* An empty pass only moves the start. */
	completion_pass_end(&pp, &cs, 1005000);
	ck_assert_uint_eq(cs.lat[XFER_PATH_MEMCPY][2], 2);
	ck_assert_uint_eq(pp.start_ns, 1005000);
	/* Begun in an earlier pass: timed at once, with the clock. */
	completion_pass_add(&pp, &cs, XFER_PATH_CMA, 64, 0);
	ck_assert_uint_eq(pp.touched, 0);
	uint64_t n = 0;
	for (unsigned b = 0; b <= LAT_BOUNDS; b++)
		n += cs.lat[XFER_PATH_CMA][b];
	ck_assert_uint_eq(n, 1);
}
END_TEST

START_TEST(test_errors)
{
	struct stats_path sp;

	memset(&cs, 0, sizeof(cs));
	completion_record_ns(&cs, XFER_PATH_NONE, -ERANGE, 5);
	completion_record_ns(&cs, XFER_PATH_NONE, -ERANGE, 5);
	completion_record_ns(&cs, XFER_PATH_NONE, -EINVAL, 5);
	completion_record_ns(&cs, XFER_PATH_NONE, -100000, 5);  /* "other" */
	completion_record_ns(&cs, 999, -EIO, 5);  /* bad path: counted as none */
	stats_fill_path(&sp, &cs, XFER_PATH_NONE);
	ck_assert_uint_eq(sp.lat_count, 5);
	ck_assert_uint_eq(sp.nerrors, 4);
	/* errno order, "other" (0) last. */
	ck_assert_int_eq(sp.errors[0].err, EIO);
	ck_assert_int_eq(sp.errors[1].err, EINVAL);
	ck_assert_int_eq(sp.errors[2].err, ERANGE);
	ck_assert_uint_eq(sp.errors[2].count, 2);
	ck_assert_int_eq(sp.errors[3].err, 0);

	/* More kinds than kept fold into the last entry. */
	memset(&cs, 0, sizeof(cs));
	for (int e = 1; e <= STATS_ERRNOS_MAX + 5; e++)
		completion_record_ns(&cs, XFER_PATH_TCP, -e, 1);
	stats_fill_path(&sp, &cs, XFER_PATH_TCP);
	ck_assert_uint_eq(sp.nerrors, STATS_ERRNOS_MAX);
	ck_assert_int_eq(sp.errors[STATS_ERRNOS_MAX - 1].err, 0);
	ck_assert_uint_eq(sp.errors[STATS_ERRNOS_MAX - 1].count, 6);
}
END_TEST

/* The text of s, NUL-terminated, malloc'd. */
static char *text_of(const struct stats_snapshot *s)
{
	struct evbuffer *b = evbuffer_new();

	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(metrics_text_write(s, b), 0);
	size_t n = evbuffer_get_length(b);
	char *t = malloc(n + 1);
	ck_assert_ptr_nonnull(t);
	evbuffer_remove(b, t, n);
	t[n] = '\0';
	evbuffer_free(b);
	return t;
}

static struct stats_snapshot snap;

static void hostile_snapshot(void)
{
	memset(&snap, 0, sizeof(snap));
	memset(&cs, 0, sizeof(cs));
	snap.version = "0.1.0";
	snap.uptime_ms = 1500;
	completion_record_ns(&cs, XFER_PATH_TCP, 4096, 1500);
	completion_record_ns(&cs, XFER_PATH_TCP, 4096, 70000);
	completion_record_ns(&cs, XFER_PATH_TCP, -ECONNRESET, 20000000000ull);
	for (unsigned p = 0; p < XFER_PATH__COUNT; p++)
		stats_fill_path(&snap.paths[p], &cs, p);
	snap.paths[XFER_PATH_TCP].ops = 2;
	snap.paths[XFER_PATH_TCP].bytes = 8192;
	snap.ntop = 2;
	snap.top[0] = (struct stats_client){ .uid = 42, .bytes = 8192,
					     .count = 1 };
	snprintf(snap.top[0].name, sizeof(snap.top[0].name),
		 "q\"b\\s\nn\xff\x01");
	snap.top[1] = (struct stats_client){ .uid = 43, .pid = 7,
					     .count = 2 };
	snprintf(snap.other.name, sizeof(snap.other.name), "other");
	snap.other.count = 3;
	snap.other.bytes = 7;
	snap.npeers = 1;
	snprintf(snap.peers[0].name, sizeof(snap.peers[0].name), "n\"ode");
	snprintf(snap.peers[0].state, sizeof(snap.peers[0].state), "up");
	snap.peers[0].rtt_ns = 85000;
	snap.nrails = 1;
	snprintf(snap.rails[0].device, sizeof(snap.rails[0].device), "rxe0");
	snap.rails[0].port = 1;
	snap.staging = true;
	snap.pool.chunks[0] = 4;
}

START_TEST(test_text_valid)
{
	hostile_snapshot();
	char *t = text_of(&snap);

	ck_assert_msg(expo_check(t, strlen(t)) == 0, "bad line %zu in:\n%s",
		      expo_check(t, strlen(t)), t);
	/* Quote and backslash escaped, newline and non-ASCII replaced. */
	ck_assert_ptr_nonnull(strstr(t,
		"xferd_client_bytes_total{uid=\"42\",client=\"q\\\"b\\\\s?n??\"} 8192\n"));
	ck_assert_ptr_nonnull(strstr(t,
		"xferd_client_bytes_total{uid=\"\",client=\"other\"} 7\n"));
	ck_assert_ptr_nonnull(strstr(t,
		"xferd_client_connections{uid=\"43\",client=\"\"} 2\n"));
	/* No pid label: a series per process would grow without end. */
	ck_assert_ptr_null(strstr(t, "pid=\""));
	ck_assert_ptr_nonnull(strstr(t, "process_open_fds "));
	ck_assert_ptr_nonnull(strstr(t,
		"xferd_quota_refusals_total{limit=\"bytes\"} 0\n"));
	/* No etcd series without metadata = etcd. */
	ck_assert_ptr_null(strstr(t, "xferd_etcd_"));
	ck_assert_ptr_nonnull(strstr(t,
		"xferd_peer_state{peer=\"n\\\"ode\",state=\"up\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t,
		"xferd_peer_state{peer=\"n\\\"ode\",state=\"down\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(t,
		"xferd_peer_rtt_seconds{peer=\"n\\\"ode\"} 0.000085000\n"));
	ck_assert_ptr_nonnull(strstr(t, "xferd_uptime_seconds 1.500000000\n"));
	ck_assert_ptr_nonnull(strstr(t,
		"xferd_path_errors_total{path=\"tcp\",errno=\"ECONNRESET\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t,
		"xferd_rail_queue_pairs{device=\"rxe0\",port=\"1\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "xferd_staging_chunks{half=\"send\"} 4\n"));
	free(t);
}
END_TEST

START_TEST(test_text_histogram)
{
	hostile_snapshot();
	char *t = text_of(&snap);
	static const char *const want[] = {
		"_bucket{path=\"tcp\",le=\"1e-06\"} 0\n",
		"_bucket{path=\"tcp\",le=\"2e-06\"} 1\n",
		"_bucket{path=\"tcp\",le=\"5e-05\"} 1\n",
		"_bucket{path=\"tcp\",le=\"0.0001\"} 2\n",
		"_bucket{path=\"tcp\",le=\"10\"} 2\n",
		"_bucket{path=\"tcp\",le=\"+Inf\"} 3\n",
		"_sum{path=\"tcp\"} 20.000071500\n",
		"_count{path=\"tcp\"} 3\n",
		"_count{path=\"memcpy\"} 0\n",
	};
	char key[160];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		snprintf(key, sizeof(key), "xferd_completion_latency_seconds%s",
			 want[i]);
		ck_assert_msg(strstr(t, key), "no '%s'", key);
	}
	/* No "other" row when nobody is beyond the top, no staging lines
	 * without a pool. */
	snap.other.count = 0;
	snap.staging = false;
	free(t);
	t = text_of(&snap);
	ck_assert_ptr_null(strstr(t, "client=\"other\""));
	ck_assert_ptr_null(strstr(t, "xferd_staging"));
	ck_assert_uint_eq(expo_check(t, strlen(t)), 0);
	free(t);
}
END_TEST

START_TEST(test_expo_check_rejects)
{
	static const char *const bad[] = {
		"xferd_x 1\n",                                 /* no TYPE */
		"# TYPE a gauge\na{x=\"1} 2\n",                /* open quote */
		"# TYPE a gauge\na{x=\"\\q\"} 2\n",            /* bad escape */
		"# TYPE a gauge\na 1 2 3\n",
		"# TYPE a gauge\na one\n",
		"# TYPE a gauge\nb 1\n",                        /* other family */
		"# TYPE a gauge\na_bu 1\n",
		"# TYPE a gauge\na 1",                          /* no newline */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(expo_check(bad[i], strlen(bad[i])) != 0,
			      "accepted: %s", bad[i]);
}
END_TEST

/* --- the log rate limit --- */

static int capture_begin(int *saved)
{
	int p[2];

	ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
	fflush(stderr);
	*saved = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	return p[0];
}

static char *capture_end(int rd, int saved)
{
	static char buf[65536];
	ssize_t n;

	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = read(rd, buf, sizeof(buf) - 1);
	close(rd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static unsigned count_lines(const char *s, const char *needle)
{
	unsigned n = 0;

	for (const char *p = s; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

START_TEST(test_log_rate_limit)
{
	static struct log_site site = { __FILE__, __LINE__, "test", 0, 0, 0,
					false };
	int saved, rd;
	char *out;

	log_set_target(LOG_TARGET_STDERR);
	log_set_level(LOG_LVL_INFO);
	rd = capture_begin(&saved);
	for (int i = 0; i < 100; i++)
		log_at(&site, LOG_LVL_WARN, false, NULL, "flood %d", i);
	out = capture_end(rd, saved);
	/* The burst, and (on a machine slow enough to refill during the
	 * loop) at most one more. */
	unsigned n = count_lines(out, "warn: flood ");
	ck_assert_msg(n >= LOG_BURST && n <= LOG_BURST + 1, "%u lines", n);
	ck_assert_ptr_null(strstr(out, "suppressed"));

	/* A second later (moved back instead of waiting) one line passes
	 * again, after one that counts the rest. */
	site.last_ns -= 1000000000ull;
	rd = capture_begin(&saved);
	log_at(&site, LOG_LVL_WARN, false, NULL, "flood again");
	out = capture_end(rd, saved);
	char want[64];
	snprintf(want, sizeof(want), "suppressed %u messages", 100 - n);
	ck_assert_msg(strstr(out, want), "no '%s' in: %s", want, out);
	ck_assert_ptr_nonnull(strstr(out, "warn: flood again\n"));

	/* Debug lines are never limited. */
	log_set_level(LOG_LVL_DEBUG);
	rd = capture_begin(&saved);
	for (int i = 0; i < 100; i++)
		log_at(&site, LOG_LVL_DEBUG, false, NULL, "chatty %d", i);
	out = capture_end(rd, saved);
	ck_assert_uint_eq(count_lines(out, "debug: chatty "), 100);
	log_set_level(LOG_LVL_ERR);
}
END_TEST

Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");

	tcase_add_test(tc, test_buckets);
	tcase_add_test(tc, test_pass);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_text_valid);
	tcase_add_test(tc, test_text_histogram);
	tcase_add_test(tc, test_expo_check_rejects);
	tcase_add_test(tc, test_log_rate_limit);
	suite_add_tcase(s, tc);
	return s;
}
