/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config_file.c - the lines of a config file: comments, blank lines,
 * sections ([tenant NAME] and [global]; config_tenant.c) and
 * "key = value" lines for the key table (config.c).  A file applies
 * whole or not at all.  Main thread only (start-up, SIGHUP); no locks.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "core/config_fail.h"

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int parse_line_from(struct xferd_config *cfg,
			   struct config_sources *src,
			   enum config_source from, const char *line,
			   char *err, size_t errlen)
{
	char buf[512];

	if (strlen(line) >= sizeof(buf))
		return config_fail(err, errlen, "line longer than %zu bytes",
				   sizeof(buf) - 1);
	strcpy(buf, line);
	char *hash = strchr(buf, '#');
	if (hash)
		*hash = '\0';
	char *s = trim(buf);
	if (*s == '\0')
		return 0;
	/* Sections: [tenant NAME] (config_tenant.c), until the next one;
	 * [global] goes back to the keys of the table. */
	if (strcmp(s, "[global]") == 0) {
		cfg->tenants.section = 0;
		return 0;
	}
	if (*s == '[')
		return config_tenant_section(cfg, s, err, errlen);
	char *eq = strchr(s, '=');
	if (!eq)
		return config_fail(err, errlen,
				   "expected 'key = value', got '%s'", s);
	*eq = '\0';
	char *key = trim(s), *value = trim(eq + 1);
	if (*key == '\0' || *value == '\0')
		return config_fail(err, errlen, "empty key or value");
	if (cfg->tenants.section)
		return config_tenant_key(cfg, key, value, err, errlen);
	return config_set_from(cfg, src, from, key, value, err, errlen);
}

int config_parse_line(struct xferd_config *cfg, const char *line, char *err,
		      size_t errlen)
{
	return parse_line_from(cfg, NULL, CONFIG_FROM_FILE, line, err, errlen);
}

int config_load(struct xferd_config *cfg, const char *path, char *err,
		size_t errlen)
{
	return config_load_from(cfg, NULL, path, err, errlen);
}

int config_load_from(struct xferd_config *cfg, struct config_sources *src,
		     const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	struct xferd_config c = *cfg;
	struct config_sources s = src ? *src : (struct config_sources){ { 0 } };
	char line[1024], why[256];
	unsigned lineno = 0;
	int rc = 0;

	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t n = strlen(line);
		if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
			snprintf(err, errlen, "%s:%u: line too long", path,
				 lineno);
			rc = -EINVAL;
			break;
		}
		if (parse_line_from(&c, src ? &s : NULL, CONFIG_FROM_FILE,
				    line, why, sizeof(why))) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
			rc = -EINVAL;
			break;
		}
	}
	if (!rc && ferror(f)) {
		rc = -EIO;
		snprintf(err, errlen, "%s: read error", path);
	}
	fclose(f);
	if (!rc) {
		*cfg = c;
		if (src)
			*src = s;
	}
	return rc;
}
