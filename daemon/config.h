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

/*
 * Apply one "key = value" setting.  Returns 0, or -EINVAL with a reason
 * in err (cfg unchanged).
 */
int config_set(struct xferd_config *cfg, const char *key, const char *value,
	       char *err, size_t errlen);

/*
 * The keys config_set knows, one line each: "key<TAB>form<TAB>doc"
 * (`xferd --list-keys`, what scripts/config-keys.sh reads).
 */
void config_keys_print(FILE *f);

/* The i-th key of the table; NULL past the last. */
const char *config_key_name(size_t i);

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

#endif /* XFERD_CONFIG_H */
