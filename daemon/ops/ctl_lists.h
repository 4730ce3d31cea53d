/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_lists.h - the answers to `xferctl config` and `xferctl names`,
 * built apart from ctl.c (which sends them): the configuration in force
 * with each key's source, and the names and prepared lists an asker may
 * see.  Main thread only, like ctl.c.
 */
#ifndef XFERD_OPS_CTL_LISTS_H
#define XFERD_OPS_CTL_LISTS_H

#include <sys/types.h>

#include "ctl.pb-c.h"

struct xferd;

/*
 * Fill rep with every key, its value in force and its source.  Anyone
 * who may ask xferctl questions may ask this: the values are limits,
 * addresses and paths (the file is world-readable), and no file a key
 * names is read.  0 or -ENOMEM; ctl_config_free() in both cases.
 */
int ctl_config_fill(struct xferd *d, Xfer__Ctl__ConfigReply *rep);
void ctl_config_free(Xfer__Ctl__ConfigReply *rep);

/*
 * Fill rep with the published names and the prepared lists of uid's
 * clients, or of every client when uid is 0 (root: doc/security.md
 * trusts a user with its own names and lists only).  Tokens are never
 * copied.  0 or -ENOMEM; ctl_names_free() in both cases.
 */
int ctl_names_fill(struct xferd *d, uid_t uid, Xfer__Ctl__NamesReply *rep);
void ctl_names_free(Xfer__Ctl__NamesReply *rep);

#endif /* XFERD_OPS_CTL_LISTS_H */
