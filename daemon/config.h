/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - xferd settings: embedded defaults, /etc/xferd/xferd.conf,
 * command-line flags, in that order of precedence (last wins).
 *
 * The file is "key = value" lines; '#' starts a comment.  Every line is
 * validated: an unknown key, a malformed or out-of-range value is an
 * error that names the file, the line and the reason.  See xferd.conf(5).
 *
 * The parser is here; the settings' types (struct xferd_config, the
 * CONFIG_* sizes) are in core/config_types.h, where the layers below
 * this one (peer/, meta/) can read them.
 */
#ifndef XFERD_CONFIG_H
#define XFERD_CONFIG_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/config_types.h"
#include "meta/meta_config.h"
#include "nic/hostport.h"

void config_defaults(struct xferd_config *cfg);
/* next (as just read) laid over cur (running): each tenant keeps its
 * slot by name, with next's settings; one next lacks stays, marked
 * removed, where held[slot] (clients or ops of it remain), else its
 * slot is free for a new one (in fresh: its counters start again).
 * 0, or -EINVAL with err when more slots would be needed. */
int config_tenants_rebase(struct tenant_table *next,
			  const struct tenant_table *cur,
			  const bool held[TENANT_MAX], char *err,
			  size_t errlen);
/* The tenants (config_tenant.c): only "default", weight 1. */
void config_tenants_default(struct tenant_table *tt);
/* `[tenant NAME]`: the lines that follow set that tenant. */
int config_tenant_section(struct xferd_config *c, const char *header,
			  char *err, size_t errlen);
/* A `key = value` line inside a [tenant] section. */
int config_tenant_key(struct xferd_config *c, const char *key,
		      const char *value, char *err, size_t errlen);
/* The `tenant` key: "NAME weight=N uid=A,B gid=C rate=SIZE". */
int config_tenant_line(struct xferd_config *c, const char *value, char *err,
		       size_t errlen);
/* Every tenant, "; "-separated, as config_tenant_line reads them. */
void config_tenant_get(const struct xferd_config *c, char *buf, size_t len);

/* Where the value in force of a key came from (`xferctl config`). */
enum config_source {
	CONFIG_FROM_DEFAULT,  /* the embedded default */
	CONFIG_FROM_FILE,     /* the config file, as read at start */
	CONFIG_FROM_FLAG,     /* -o KEY=VALUE (or -s, -l) */
	CONFIG_FROM_RELOAD,   /* the file, changed by a SIGHUP since start */
};

/* Slots for the keys of the table (config.c checks that they fit). */
#define CONFIG_KEYS_MAX 128
/* The longest value config_key_value writes: every `peer` line. */
#define CONFIG_VALUE_MAX (CONFIG_MAX_PEERS * CONFIG_HOST_MAX + 16)

/* The source of each key, by its index in the table; zeroed: defaults. */
struct config_sources {
	unsigned char of[CONFIG_KEYS_MAX];  /* enum config_source */
};

/* "default", "file", "override", "reload". */
const char *config_source_name(enum config_source s);

/*
 * Apply one "key = value" setting.  Returns 0, or -EINVAL with a reason
 * in err (cfg unchanged).
 */
int config_set(struct xferd_config *cfg, const char *key, const char *value,
	       char *err, size_t errlen);
/* The same, noting in src (NULL: nowhere) that key now comes from
 * `from`. */
int config_set_from(struct xferd_config *cfg, struct config_sources *src,
		    enum config_source from, const char *key,
		    const char *value, char *err, size_t errlen);

/*
 * The keys config_set knows, one line each: "key<TAB>form<TAB>doc"
 * (`xferd --list-keys`, what scripts/config-keys.sh reads).
 */
void config_keys_print(FILE *f);

/* The i-th key of the table; NULL past the last. */
const char *config_key_name(size_t i);
/* The index of a key in the table, or -ENOENT. */
int config_key_index(const char *name);

/*
 * The value in force of the i-th key in cfg, as a line of the file
 * would write it ("64M", "auto", "on"; every `peer` comma-separated).
 * Paths are paths: no file named by a key is read (the cluster key's
 * contents are never shown).  Returns 0, or -ENOENT past the last key.
 */
int config_key_value(size_t i, const struct xferd_config *cfg, char *buf,
		     size_t len);

/*
 * After a reload: the keys whose new value came from the file and
 * differs from the one before (or was changed by an earlier reload) are
 * marked CONFIG_FROM_RELOAD in after_src.
 */
void config_sources_reloaded(const struct xferd_config *before,
			     const struct config_sources *before_src,
			     const struct xferd_config *after,
			     struct config_sources *after_src);

/*
 * Apply one line of a config file (comments and blank lines are fine).
 * Returns 0 or -EINVAL with a reason in err.
 */
int config_parse_line(struct xferd_config *cfg, const char *line, char *err,
		      size_t errlen);

/*
 * Read a whole file into cfg.  On any error cfg is left unchanged and
 * err says "path:line: reason".  Returns 0, -ENOENT when the file does
 * not exist, -EINVAL on a bad line, or another -errno.
 */
int config_load(struct xferd_config *cfg, const char *path, char *err,
		size_t errlen);
/* The same, noting in src (NULL: nowhere) the keys the file set. */
int config_load_from(struct xferd_config *cfg, struct config_sources *src,
		     const char *path, char *err, size_t errlen);

#endif /* XFERD_CONFIG_H */
