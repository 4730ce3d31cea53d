/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_config.c - xferd settings (daemon/config.c): the defaults, every
 * key of a config line with good, malformed and out-of-range values, the
 * line syntax (comments, blanks, whitespace), and loading
 * whole files, where an error names "path:line" and changes nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "core/log.h"
#include "common/ring.h"
#include "suites.h"

static bool config_equal(const struct xferd_config *a,
			 const struct xferd_config *b)
{
	return strcmp(a->socket_path, b->socket_path) == 0 &&
	       a->sq_entries == b->sq_entries &&
	       a->max_sq_entries == b->max_sq_entries &&
	       a->spin_us == b->spin_us &&
	       a->progress_cpu == b->progress_cpu &&
	       a->log_level == b->log_level &&
	       a->max_clients == b->max_clients &&
	       a->max_regions == b->max_regions &&
	       a->max_imports == b->max_imports &&
	       a->max_connections_per_uid == b->max_connections_per_uid &&
	       a->max_client_bytes == b->max_client_bytes &&
	       a->max_region_bytes == b->max_region_bytes;
}

/* Apply a line that must be accepted. */
static struct xferd_config good_line(const char *line)
{
	struct xferd_config c;
	char err[256] = "";

	config_defaults(&c);
	int rc = config_parse_line(&c, line, err, sizeof(err));
	ck_assert_msg(rc == 0, "'%s' rejected: %s", line, err);
	return c;
}

/* Apply a line that must be refused: -EINVAL, a reason, cfg unchanged.
 * The reason must contain `why` when given. */
static void bad_line(const char *line, const char *why)
{
	struct xferd_config c, before;
	char err[256] = "";

	config_defaults(&c);
	before = c;
	int rc = config_parse_line(&c, line, err, sizeof(err));
	ck_assert_msg(rc == -EINVAL, "'%s' accepted (rc %d)", line, rc);
	ck_assert_msg(err[0] != '\0', "'%s': no reason given", line);
	if (why)
		ck_assert_msg(strstr(err, why), "'%s': reason '%s' lacks '%s'",
			      line, err, why);
	ck_assert_msg(config_equal(&c, &before), "'%s' changed cfg", line);
}

START_TEST(defaults)
{
	struct xferd_config c;

	memset(&c, 0xa5, sizeof(c));
	config_defaults(&c);
	ck_assert_str_eq(c.socket_path, "");
	ck_assert_uint_eq(c.sq_entries, 1024);
	ck_assert_uint_eq(c.max_sq_entries, 8192);
	ck_assert_uint_eq(c.spin_us, 50);
	ck_assert_int_eq(c.progress_cpu, -1);
	ck_assert_int_eq(c.log_level, LOG_LVL_INFO);
	ck_assert_uint_eq(c.max_clients, 1024);
	ck_assert_uint_eq(c.max_regions, 65536);
	ck_assert_uint_eq(c.max_imports, 65536);
	ck_assert_uint_eq(c.max_names, 4096);
	ck_assert_uint_eq(c.max_connections_per_uid, 1024);
	ck_assert_uint_eq(c.max_pending_per_uid, 128);
	ck_assert_uint_eq(c.handshake_timeout_ms, 5000);
	ck_assert_uint_eq(c.max_client_bytes, 0);
	ck_assert_uint_eq(c.max_region_bytes, 1ull << 40);
	ck_assert_uint_eq(c.rcache_max_entries, 4096);
	ck_assert_uint_eq(c.rcache_max_bytes, 0);
	/* The defaults themselves pass validation. */
	ck_assert(c.sq_entries <= c.max_sq_entries);
	ck_assert((c.sq_entries & (c.sq_entries - 1)) == 0);
	ck_assert_uint_ge(c.sq_entries, RING_MIN_SQ_ENTRIES);
	ck_assert_uint_le(c.max_sq_entries, RING_MAX_SQ_ENTRIES);
}
END_TEST

START_TEST(key_socket)
{
	struct xferd_config c = good_line("socket = /run/xferd/xferd.sock");
	ck_assert_str_eq(c.socket_path, "/run/xferd/xferd.sock");

	/* The longest path that fits sun_path with its NUL. */
	char line[256], path[CONFIG_PATH_MAX + 1];
	memset(path, 'p', sizeof(path));
	path[0] = '/';
	path[CONFIG_PATH_MAX - 1] = '\0';
	snprintf(line, sizeof(line), "socket=%s", path);
	c = good_line(line);
	ck_assert_str_eq(c.socket_path, path);

	path[CONFIG_PATH_MAX - 1] = 'p';
	path[CONFIG_PATH_MAX] = '\0';
	snprintf(line, sizeof(line), "socket=%s", path);
	bad_line(line, "socket");
	bad_line("socket = relative/path.sock", "absolute");
	bad_line("socket = ./x", "absolute");
}
END_TEST

START_TEST(key_sq_entries)
{
	struct xferd_config c;

	c = good_line("sq_entries = 8");
	ck_assert_uint_eq(c.sq_entries, 8);
	c = good_line("sq_entries = 4096");
	ck_assert_uint_eq(c.sq_entries, 4096);
	c = good_line("sq_entries = 2K"); /* sizes work for counts too */
	ck_assert_uint_eq(c.sq_entries, 2048);
	c = good_line("sq_entries = 8192"); /* = the default maximum */
	ck_assert_uint_eq(c.sq_entries, 8192);

	bad_line("sq_entries = 4", "sq_entries");
	bad_line("sq_entries = 0", "sq_entries");
	bad_line("sq_entries = 65536", "sq_entries");
	bad_line("sq_entries = 1000", "power of two");
	bad_line("sq_entries = 1023", "power of two");
	bad_line("sq_entries = -8", "sq_entries");
	bad_line("sq_entries = 8x", "sq_entries");
	bad_line("sq_entries = many", "sq_entries");
	/* A power of two in range, but above max_sq_entries (8192). */
	bad_line("sq_entries = 16384", "max_sq_entries");
}
END_TEST

START_TEST(key_max_sq_entries)
{
	struct xferd_config c;
	char err[256];

	c = good_line("max_sq_entries = 32768");
	ck_assert_uint_eq(c.max_sq_entries, RING_MAX_SQ_ENTRIES);
	c = good_line("max_sq_entries = 1024"); /* = the default sq */
	ck_assert_uint_eq(c.max_sq_entries, 1024);

	bad_line("max_sq_entries = 65536", "max_sq_entries");
	bad_line("max_sq_entries = 3000", "power of two");
	/* Below the default sq_entries (1024). */
	bad_line("max_sq_entries = 512", "larger than");

	/* Order matters only through the check of the pair. */
	config_defaults(&c);
	ck_assert_int_eq(config_parse_line(&c, "max_sq_entries = 32768", err,
					   sizeof(err)), 0);
	ck_assert_int_eq(config_parse_line(&c, "sq_entries = 16384", err,
					   sizeof(err)), 0);
	ck_assert_uint_eq(c.sq_entries, 16384);
	ck_assert_int_eq(config_parse_line(&c, "max_sq_entries = 8192", err,
					   sizeof(err)), -EINVAL);
	ck_assert_uint_eq(c.max_sq_entries, 32768);
}
END_TEST

START_TEST(key_spin_us)
{
	struct xferd_config c;

	c = good_line("spin_us = 0");
	ck_assert_uint_eq(c.spin_us, 0);
	c = good_line("spin_us = 1000000");
	ck_assert_uint_eq(c.spin_us, 1000000);
	c = good_line("spin_us=250");
	ck_assert_uint_eq(c.spin_us, 250);
	bad_line("spin_us = 1000001", "spin_us");
	bad_line("spin_us = 1G", "spin_us");
	bad_line("spin_us = 10us", "spin_us");
	bad_line("spin_us = 4294967296", "spin_us");
}
END_TEST

START_TEST(key_progress_cpu)
{
	struct xferd_config c;

	c = good_line("progress_cpu = 0");
	ck_assert_int_eq(c.progress_cpu, 0);
	c = good_line("progress_cpu = 4095");
	ck_assert_int_eq(c.progress_cpu, 4095);
	c = good_line("progress_cpu = 3");
	ck_assert_int_eq(c.progress_cpu, 3);
	c.progress_cpu = 3;
	char err[64];
	ck_assert_int_eq(config_parse_line(&c, "progress_cpu = none", err,
					   sizeof(err)), 0);
	ck_assert_int_eq(c.progress_cpu, -1);
	bad_line("progress_cpu = 4096", "progress_cpu");
	bad_line("progress_cpu = -1", "progress_cpu");
	bad_line("progress_cpu = None", "progress_cpu");
}
END_TEST

START_TEST(key_copy_workers)
{
	struct xferd_config c;

	config_defaults(&c);
	ck_assert_int_eq(c.copy_workers, -1);
	c = good_line("copy_workers = 0");
	ck_assert_int_eq(c.copy_workers, 0);
	c = good_line("copy_workers = 64");
	ck_assert_int_eq(c.copy_workers, 64);
	c = good_line("copy_workers = auto");
	ck_assert_int_eq(c.copy_workers, -1);
	bad_line("copy_workers = 65", "copy_workers");
	bad_line("copy_workers = -1", "copy_workers");
	bad_line("copy_workers = many", "copy_workers");
}
END_TEST

START_TEST(key_log_level)
{
	const char *names[] = { "error", "warn", "info", "debug" };
	const int levels[] = { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO,
			       LOG_LVL_DEBUG };
	char line[64];

	for (size_t i = 0; i < 4; i++) {
		snprintf(line, sizeof(line), "log_level = %s", names[i]);
		struct xferd_config c = good_line(line);
		ck_assert_int_eq(c.log_level, levels[i]);
	}
	bad_line("log_level = verbose", "log_level");
	bad_line("log_level = DEBUG", "log_level");
	bad_line("log_level = 3", "log_level");
}
END_TEST

START_TEST(key_limits)
{
	struct xferd_config c;

	c = good_line("max_clients = 1");
	ck_assert_uint_eq(c.max_clients, 1);
	c = good_line("max_clients = 1M");
	ck_assert_uint_eq(c.max_clients, 1u << 20);
	bad_line("max_clients = 0", "max_clients");
	bad_line("max_clients = 1048577", "max_clients");

	/* The older key sets both. */
	c = good_line("max_handles = 16M");
	ck_assert_uint_eq(c.max_regions, 1u << 24);
	ck_assert_uint_eq(c.max_imports, 1u << 24);
	c = good_line("max_handles = 100");
	ck_assert_uint_eq(c.max_regions, 100);
	ck_assert_uint_eq(c.max_imports, 100);
	bad_line("max_handles = 0", "max_handles");
	bad_line("max_handles = 16777217", "max_handles");

	c = good_line("max_regions = 3");
	ck_assert_uint_eq(c.max_regions, 3);
	ck_assert_uint_eq(c.max_imports, 65536);
	bad_line("max_regions = 0", "max_regions");
	c = good_line("max_imports = 2K");
	ck_assert_uint_eq(c.max_imports, 2048);
	bad_line("max_imports = 16777217", "max_imports");
	c = good_line("max_names = 1");
	ck_assert_uint_eq(c.max_names, 1);
	bad_line("max_names = 0", "max_names");
	c = good_line("max_names = 2");
	ck_assert_uint_eq(c.notify_queue_max, 65536);  /* the default */
	c = good_line("notify_queue_max = 0");
	ck_assert_uint_eq(c.notify_queue_max, 0);
	c = good_line("notify_queue_max = 1M");
	ck_assert_uint_eq(c.notify_queue_max, 1u << 20);
	bad_line("notify_queue_max = 16777217", "notify_queue_max");
	c = good_line("max_connections_per_uid = 4");
	ck_assert_uint_eq(c.max_connections_per_uid, 4);
	bad_line("max_connections_per_uid = -1", "max_connections_per_uid");
	c = good_line("max_pending_per_uid = 4096");
	ck_assert_uint_eq(c.max_pending_per_uid, 4096);
	c = good_line("handshake_timeout_ms = 200");
	ck_assert_uint_eq(c.handshake_timeout_ms, 200);
	bad_line("handshake_timeout_ms = 5", "handshake_timeout_ms");
	c = good_line("listen_backlog = 4096");
	ck_assert_uint_eq(c.listen_backlog, 4096);
	bad_line("listen_backlog = 0", "listen_backlog");
	c = good_line("max_inflight = 64");
	ck_assert_uint_eq(c.max_inflight, 64);
	bad_line("max_inflight = 0", "max_inflight");
	c = good_line("max_client_bytes = 256G");
	ck_assert_uint_eq(c.max_client_bytes, 256ull << 30);
	c = good_line("max_client_bytes = 0");
	ck_assert_uint_eq(c.max_client_bytes, 0);
	bad_line("max_client_bytes = lots", "max_client_bytes");
	c = good_line("max_uid_bytes = 64G");
	ck_assert_uint_eq(c.max_uid_bytes, 64ull << 30);
	c = good_line("max_uid_bytes = auto");
	ck_assert_uint_eq(c.max_uid_bytes, 0);
	bad_line("max_uid_bytes = -1", "max_uid_bytes");
	c = good_line("max_client_fds = 100");
	ck_assert_uint_eq(c.max_client_fds, 100);
	bad_line("max_client_fds = 7", "max_client_fds");
	c = good_line("max_ctl_connections = 5");
	ck_assert_uint_eq(c.max_ctl_connections, 5);
	bad_line("ctl_idle_timeout_ms = 99", "ctl_idle_timeout_ms");

	c = good_line("max_region_bytes = 64G");
	ck_assert_uint_eq(c.max_region_bytes, 64ull << 30);
	c = good_line("max_region_bytes = 1");
	ck_assert_uint_eq(c.max_region_bytes, 1);
	c = good_line("max_region_bytes = 16777215T");
	ck_assert_uint_eq(c.max_region_bytes, 16777215ull << 40);
	bad_line("max_region_bytes = 0", "max_region_bytes");
	bad_line("max_region_bytes = 0G", "max_region_bytes");
	bad_line("max_region_bytes = 1P", "max_region_bytes");
	bad_line("max_region_bytes = 16777216T", "max_region_bytes");
	bad_line("max_region_bytes = 64G1", "max_region_bytes");

	c = good_line("rcache_max_entries = 0");
	ck_assert_uint_eq(c.rcache_max_entries, 0);
	c = good_line("rcache_max_entries = 64K");
	ck_assert_uint_eq(c.rcache_max_entries, 64u << 10);
	bad_line("rcache_max_entries = 16777217", "rcache_max_entries");
	bad_line("rcache_max_entries = -1", "rcache_max_entries");
	c = good_line("rcache_max_bytes = 0");
	ck_assert_uint_eq(c.rcache_max_bytes, 0);
	c = good_line("rcache_max_bytes = 32G");
	ck_assert_uint_eq(c.rcache_max_bytes, 32ull << 30);
	bad_line("rcache_max_bytes = lots", "rcache_max_bytes");
}
END_TEST

/* The per-uid bounds (uid_usage.h): finite defaults, finite maxima. */
START_TEST(key_uid_limits)
{
	struct xferd_config c;

	config_defaults(&c);
	ck_assert_uint_eq(c.max_regions_per_uid, 131072);
	ck_assert_uint_eq(c.max_imports_per_uid, 131072);
	ck_assert_uint_eq(c.max_names_per_uid, 16384);
	ck_assert_uint_eq(c.dlist_max_per_uid, 16384);
	ck_assert_uint_eq(c.dlist_max_uid_bytes, 256ull << 20);
	ck_assert_uint_eq(c.notify_queue_max_per_uid, 262144);
	c = good_line("max_regions_per_uid = 8");
	ck_assert_uint_eq(c.max_regions_per_uid, 8);
	bad_line("max_regions_per_uid = 0", "max_regions_per_uid");
	c = good_line("max_imports_per_uid = 16M");
	ck_assert_uint_eq(c.max_imports_per_uid, 16u << 20);
	bad_line("max_imports_per_uid = 16777217", "max_imports_per_uid");
	bad_line("max_names_per_uid = 0", "max_names_per_uid");
	c = good_line("dlist_max_per_uid = 0");
	ck_assert_uint_eq(c.dlist_max_per_uid, 0);
	c = good_line("dlist_max_uid_bytes = 1G");
	ck_assert_uint_eq(c.dlist_max_uid_bytes, 1ull << 30);
	bad_line("dlist_max_uid_bytes = 0", "dlist_max_uid_bytes");
	bad_line("dlist_max_uid_bytes = 2T", "dlist_max_uid_bytes");
	c = good_line("notify_queue_max_per_uid = 0");
	ck_assert_uint_eq(c.notify_queue_max_per_uid, 0);
}
END_TEST

START_TEST(line_syntax)
{
	struct xferd_config c, d;
	char err[256];

	/* Lines that change nothing. */
	const char *noops[] = { "", "\n", "   \t  \n", "# a comment",
				"   # indented comment = 5",
				"#sq_entries = 3" };
	for (size_t i = 0; i < sizeof(noops) / sizeof(noops[0]); i++) {
		config_defaults(&d);
		c = good_line(noops[i]);
		ck_assert_msg(config_equal(&c, &d), "'%s' changed cfg",
			      noops[i]);
	}

	/* Whitespace and a trailing comment around a setting. */
	c = good_line("  \tspin_us\t=\t  77  # seventy-seven\n");
	ck_assert_uint_eq(c.spin_us, 77);
	c = good_line("spin_us=78#x");
	ck_assert_uint_eq(c.spin_us, 78);
	c = good_line("spin_us = 79\r\n");
	ck_assert_uint_eq(c.spin_us, 79);

	bad_line("spin_us 50", "key = value");
	bad_line("spin_us", "key = value");
	bad_line("spin_us # = 5", "key = value");
	bad_line("= 50", "empty");
	bad_line("spin_us =", "empty");
	bad_line("spin_us =   # nothing", "empty");
	bad_line("spin us = 50", "unknown key");
	bad_line("no_such_key = 1", "unknown key 'no_such_key'");
	bad_line("SPIN_US = 50", "unknown key");
	bad_line("spin_us = 5 0", "spin_us");
	bad_line("spin_us = 50 = 60", "spin_us");

	/* A line too long to be a setting. */
	char *lng = malloc(2000);
	ck_assert_ptr_nonnull(lng);
	memset(lng, ' ', 1999);
	lng[1999] = '\0';
	memcpy(lng, "spin_us = 1", 11);
	bad_line(lng, "line longer");
	free(lng);

	/* A failed line leaves earlier settings alone. */
	config_defaults(&c);
	ck_assert_int_eq(config_parse_line(&c, "spin_us = 5", err,
					   sizeof(err)), 0);
	d = c;
	ck_assert_int_eq(config_parse_line(&c, "spin_us = x", err,
					   sizeof(err)), -EINVAL);
	ck_assert(config_equal(&c, &d));
	ck_assert_uint_eq(c.spin_us, 5);

	/* config_set directly, without line syntax. */
	config_defaults(&c);
	ck_assert_int_eq(config_set(&c, "max_clients", "7", err, sizeof(err)),
			 0);
	ck_assert_uint_eq(c.max_clients, 7);
	ck_assert_int_eq(config_set(&c, "max_clients", " 7", err, sizeof(err)),
			 -EINVAL);
}
END_TEST

/* The key table: each name once, each one config_set's (no key parsed
 * outside the table), each value it refuses named in the reason. */
START_TEST(key_table)
{
	struct xferd_config c;
	char err[256];
	size_t n = 0;

	for (const char *k; (k = config_key_name(n)); n++) {
		for (size_t j = 0; j < n; j++)
			ck_assert_msg(strcmp(k, config_key_name(j)) != 0,
				      "key %s twice", k);
		config_defaults(&c);
		err[0] = '\0';
		ck_assert_int_eq(config_set(&c, k, "@ @", err, sizeof(err)),
				 -EINVAL);
		ck_assert_msg(strncmp(err, k, strlen(k)) == 0 &&
			      !strstr(err, "unknown key"),
			      "%s = @ @: '%s'", k, err);
	}
	ck_assert_uint_ge(n, 70);
	ck_assert_int_eq(config_set(&c, "etcd_bogus", "1", err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_eq(err, "unknown key 'etcd_bogus'");
}
END_TEST

/* --- config_load --- */

static char tmp_dir[64];
static char tmp_path[128];

static void load_setup(void)
{
	strcpy(tmp_dir, "/tmp/xferd-unit-config.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
	snprintf(tmp_path, sizeof(tmp_path), "%s/xferd.conf", tmp_dir);
}

static void load_teardown(void)
{
	unlink(tmp_path);
	rmdir(tmp_dir);
}

static void write_file(const char *text)
{
	FILE *f = fopen(tmp_path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(load_ok)
{
	struct xferd_config c;
	char err[256] = "";

	write_file("# xferd.conf\n"
		   "\n"
		   "socket = /tmp/x.sock\n"
		   "max_sq_entries = 16384   # room for big clients\n"
		   "sq_entries = 2048\n"
		   "  spin_us = 0\n"
		   "progress_cpu = 1\n"
		   "log_level = debug\n"
		   "max_clients = 16\n"
		   "max_handles = 4K\n"
		   "max_region_bytes = 2G\n"
		   "spin_us = 10\n" /* the last setting wins */
		   "# end, and a last line without newline\n"
		   "max_clients = 17");
	config_defaults(&c);
	ck_assert_int_eq(config_load(&c, tmp_path, err, sizeof(err)), 0);
	ck_assert_str_eq(c.socket_path, "/tmp/x.sock");
	ck_assert_uint_eq(c.max_sq_entries, 16384);
	ck_assert_uint_eq(c.sq_entries, 2048);
	ck_assert_uint_eq(c.spin_us, 10);
	ck_assert_int_eq(c.progress_cpu, 1);
	ck_assert_int_eq(c.log_level, LOG_LVL_DEBUG);
	ck_assert_uint_eq(c.max_clients, 17);
	ck_assert_uint_eq(c.max_regions, 4096);
	ck_assert_uint_eq(c.max_region_bytes, 2ull << 30);

	/* An empty file is a valid one that changes nothing. */
	struct xferd_config d;
	write_file("");
	config_defaults(&c);
	d = c;
	ck_assert_int_eq(config_load(&c, tmp_path, err, sizeof(err)), 0);
	ck_assert(config_equal(&c, &d));
}
END_TEST

/* Load text whose line `lineno` is bad; the error names it. */
static void load_bad(const char *text, unsigned lineno, const char *why)
{
	struct xferd_config c, before;
	char err[512] = "", want[256];

	write_file(text);
	config_defaults(&c);
	c.spin_us = 123; /* not a default: must survive the failure */
	before = c;
	ck_assert_int_eq(config_load(&c, tmp_path, err, sizeof(err)), -EINVAL);
	ck_assert(config_equal(&c, &before));
	snprintf(want, sizeof(want), "%s:%u: ", tmp_path, lineno);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0,
		      "error '%s' does not start with '%s'", err, want);
	ck_assert_msg(strstr(err, why), "error '%s' lacks '%s'", err, why);
}

START_TEST(load_bad_line)
{
	/* Settings before the bad line are not applied either. */
	load_bad("spin_us = 7\n"
		 "max_clients = 9\n"
		 "\n"
		 "# comment\n"
		 "sq_entries = 1000\n"
		 "max_handles = 5\n",
		 5, "power of two");
	load_bad("bogus = 1\n", 1, "unknown key 'bogus'");
	load_bad("spin_us = 1\nspin_us = 2\nspin_us\n", 3, "key = value");
	load_bad("# only\n#comments\n\n\nlog_level = loud", 5, "log_level");
	load_bad("max_sq_entries = 512\n", 1, "larger than");

	/* A line longer than the reader's buffer. */
	char *text = malloc(3000);
	ck_assert_ptr_nonnull(text);
	strcpy(text, "spin_us = 1\n# ");
	size_t n = strlen(text);
	memset(text + n, 'c', 2000);
	strcpy(text + n + 2000, "\n");
	load_bad(text, 2, "too long");
	free(text);
}
END_TEST

START_TEST(load_missing)
{
	struct xferd_config c, before;
	char err[256] = "";

	config_defaults(&c);
	before = c;
	ck_assert_int_eq(config_load(&c, tmp_path, err, sizeof(err)), -ENOENT);
	ck_assert(config_equal(&c, &before));
	ck_assert_msg(strstr(err, tmp_path), "error '%s' lacks the path", err);

	/* A directory is no config file either. */
	ck_assert_int_lt(config_load(&c, tmp_dir, err, sizeof(err)), 0);
	ck_assert(config_equal(&c, &before));
}
END_TEST

START_TEST(key_rdma)
{
	struct xferd_config c = good_line("rdma = off");
	ck_assert(!c.rdma);
	c = good_line("rdma=on");
	ck_assert(c.rdma);
	bad_line("rdma = yes", "on or off");

	c = good_line("rdma_devices = mlx5_0,mlx5_1");
	ck_assert_str_eq(c.rdma_devices, "mlx5_0,mlx5_1");
	bad_line("rdma_devices = mlx5_0,,mlx5_1", "comma-separated");
	bad_line("rdma_devices = mlx5_0;rm", "comma-separated");
	bad_line("rdma_devices = rxe0,", "comma-separated");

	c = good_line("rdma_qps = 8");
	ck_assert_uint_eq(c.rdma_qps, 8);
	bad_line("rdma_qps = 0", "rdma_qps");
	bad_line("rdma_qps = 9", "rdma_qps");

	c = good_line("rdma_stripe = 256K");
	ck_assert_uint_eq(c.rdma_stripe, 256u << 10);
	c = good_line("rdma_stripe = 1G");
	ck_assert_uint_eq(c.rdma_stripe, 1u << 30);
	bad_line("rdma_stripe = 1K", "4K..1G");
	bad_line("rdma_stripe = 2G", "4K..1G");
	ck_assert(!c.rdma_reg_background);  /* the default: wait */
	c = good_line("rdma_register = background");
	ck_assert(c.rdma_reg_background);
	c = good_line("rdma_register = wait");
	ck_assert(!c.rdma_reg_background);
	bad_line("rdma_register = later", "wait or background");
	bad_line("rdma_stripe = lots", "4K..1G");
}
END_TEST

START_TEST(key_staging_mb)
{
	struct xferd_config c;

	config_defaults(&c);
	ck_assert_uint_eq(c.staging_mb, 64);
	c = good_line("staging_mb = 16");
	ck_assert_uint_eq(c.staging_mb, 16);
	c = good_line("staging_mb = 1024");
	ck_assert_uint_eq(c.staging_mb, 1024);
	bad_line("staging_mb = 15", "staging_mb");
	bad_line("staging_mb = 65537", "staging_mb");
	bad_line("staging_mb = lots", "staging_mb");
}
END_TEST

START_TEST(key_staging_latency_reserve)
{
	struct xferd_config c;

	config_defaults(&c);
	ck_assert_uint_eq(c.staging_latency_reserve, 2);
	c = good_line("staging_latency_reserve = 0");
	ck_assert_uint_eq(c.staging_latency_reserve, 0);
	c = good_line("staging_latency_reserve = 8");
	ck_assert_uint_eq(c.staging_latency_reserve, 8);
	bad_line("staging_latency_reserve = 65", "staging_latency_reserve");
	bad_line("staging_latency_reserve = some", "staging_latency_reserve");
}
END_TEST

/* The D2H copies a staged send keeps ahead of the link. */
START_TEST(key_tcp_stage_ahead)
{
	struct xferd_config c;

	config_defaults(&c);
	ck_assert_uint_eq(c.tcp_stage_ahead, 4);
	c = good_line("tcp_stage_ahead = 16");
	ck_assert_uint_eq(c.tcp_stage_ahead, 16);
	c = good_line("tcp_stage_ahead = 1");
	ck_assert_uint_eq(c.tcp_stage_ahead, 1);
	c = good_line("tcp_stage_ahead = 64");
	ck_assert_uint_eq(c.tcp_stage_ahead, 64);
	bad_line("tcp_stage_ahead = 0", "tcp_stage_ahead");
	bad_line("tcp_stage_ahead = 65", "tcp_stage_ahead");
	bad_line("tcp_stage_ahead = deep", "tcp_stage_ahead");
}
END_TEST

START_TEST(key_socket_group)
{
	struct xferd_config c;

	config_defaults(&c);
	ck_assert_str_eq(c.socket_group, "xferd");
	c = good_line("socket_group = inference");
	ck_assert_str_eq(c.socket_group, "inference");
	c = good_line("socket_group = gpu-users.2");
	ck_assert_str_eq(c.socket_group, "gpu-users.2");
	c = good_line("socket_group = none");
	ck_assert_str_eq(c.socket_group, "none");
	/* 32 characters fit, 33 do not. */
	c = good_line("socket_group = g2345678901234567890123456789012");
	ck_assert_uint_eq(strlen(c.socket_group), 32);
	bad_line("socket_group = g23456789012345678901234567890123",
		 "socket_group");
	bad_line("socket_group = -rf", "socket_group");
	bad_line("socket_group = a/b", "socket_group");
	bad_line("socket_group = a:b", "socket_group");
}
END_TEST

/* tenants NAME...: a table read from `tenant = NAME uid=1000+i` lines. */
static struct tenant_table tenants_of(const char *const *names, unsigned n)
{
	struct xferd_config c;
	char err[256], line[64];

	config_defaults(&c);
	for (unsigned i = 0; i < n; i++) {
		snprintf(line, sizeof(line), "%s uid=%u", names[i], 1000 + i);
		ck_assert_int_eq(config_tenant_line(&c, line, err, sizeof(err)),
				 0);
	}
	return c.tenants;
}

/* A reload keeps each tenant's slot by name; a removed one stays while
 * held, else its slot goes to a new tenant with fresh counters. */
START_TEST(tenant_rebase)
{
	static const char *const ab[] = { "a", "b" };
	static const char *const b[] = { "b" };
	static const char *const bc[] = { "b", "c" };
	static const char *const cdb[] = { "c", "d", "b" };
	bool held[TENANT_MAX] = { false };
	char err[256];

	struct tenant_table cur = tenants_of(ab, 2);  /* a: 1, b: 2 */
	struct tenant_table next = tenants_of(b, 1);
	held[1] = true;  /* a client of a remains */
	ck_assert_int_eq(config_tenants_rebase(&next, &cur, held, err,
					       sizeof(err)), 0);
	ck_assert_uint_eq(next.n, 3);
	ck_assert_str_eq(next.t[1].name, "a");
	ck_assert(next.t[1].removed);
	ck_assert_uint_eq(next.t[1].nuids, 0);
	ck_assert_str_eq(next.t[2].name, "b");
	ck_assert(!next.t[2].removed);
	ck_assert_uint_eq(next.fresh, 0);
	/* uid 1000 was a's: now default; b's uid 1000 (first in its file). */
	ck_assert_uint_eq(tenant_match(&next, 1000, 1000), 2);

	/* a's client gone: c takes slot 1, its counters from zero. */
	cur = next;
	held[1] = false;
	next = tenants_of(bc, 2);
	ck_assert_int_eq(config_tenants_rebase(&next, &cur, held, err,
					       sizeof(err)), 0);
	ck_assert_str_eq(next.t[1].name, "c");
	ck_assert_str_eq(next.t[2].name, "b");
	ck_assert_uint_eq(next.fresh, 1u << 1);

	/* The file's order decides matching, not the slots': c d b with
	 * uids 1000 1001 1002. */
	cur = next;
	next = tenants_of(cdb, 3);
	ck_assert_int_eq(config_tenants_rebase(&next, &cur, held, err,
					       sizeof(err)), 0);
	ck_assert_str_eq(next.t[1].name, "c");
	ck_assert_str_eq(next.t[2].name, "b");
	ck_assert_str_eq(next.t[3].name, "d");
	ck_assert_uint_eq(tenant_match(&next, 1000, 0), 1);
	ck_assert_uint_eq(tenant_match(&next, 1001, 0), 3);
	ck_assert_uint_eq(tenant_match(&next, 1002, 0), 2);
	struct xferd_config c;
	config_defaults(&c);
	c.tenants = next;
	char text[512];
	config_tenant_get(&c, text, sizeof(text));
	ck_assert_ptr_nonnull(strstr(text, "default weight=1; c weight=1 "
					   "uid=1000; d weight=1 uid=1001; b"));

	/* Every slot held by removed tenants: a new one fails. */
	struct tenant_table full;
	char names[TENANT_MAX - 1][8];
	const char *np[TENANT_MAX - 1];
	for (unsigned i = 0; i < TENANT_MAX - 1; i++) {
		snprintf(names[i], sizeof(names[i]), "t%u", i);
		np[i] = names[i];
		held[i + 1] = true;
	}
	full = tenants_of(np, TENANT_MAX - 1);
	next = tenants_of(b, 1);
	ck_assert_int_eq(config_tenants_rebase(&next, &full, held, err,
					       sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no free slot"));
}
END_TEST

Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc;

	tc = tcase_create("lines");
	tcase_add_test(tc, defaults);
	tcase_add_test(tc, key_socket);
	tcase_add_test(tc, key_sq_entries);
	tcase_add_test(tc, key_max_sq_entries);
	tcase_add_test(tc, key_spin_us);
	tcase_add_test(tc, key_progress_cpu);
	tcase_add_test(tc, key_copy_workers);
	tcase_add_test(tc, key_log_level);
	tcase_add_test(tc, key_limits);
	tcase_add_test(tc, key_uid_limits);
	tcase_add_test(tc, line_syntax);
	tcase_add_test(tc, key_table);
	tcase_add_test(tc, tenant_rebase);
	suite_add_tcase(s, tc);

	tc = tcase_create("load");
	tcase_add_checked_fixture(tc, load_setup, load_teardown);
	tcase_add_test(tc, load_ok);
	tcase_add_test(tc, load_bad_line);
	tcase_add_test(tc, load_missing);
	tcase_add_test(tc, key_rdma);
	tcase_add_test(tc, key_staging_mb);
	tcase_add_test(tc, key_staging_latency_reserve);
	tcase_add_test(tc, key_tcp_stage_ahead);
	tcase_add_test(tc, key_socket_group);
	suite_add_tcase(s, tc);
	return s;
}
