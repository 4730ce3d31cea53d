/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_lists.h - xferctl config (every key, its value in force and
 * its source), names (published names) and lists (prepared lists), as
 * text (tables, or CSV) or JSON.
 */
#ifndef XFERCTL_LISTS_H
#define XFERCTL_LISTS_H

#include "ctl.pb-c.h"

void print_config_text(const Xfer__Ctl__CtlMsg *r);
void print_config_json(const Xfer__Ctl__CtlMsg *r);
void print_names_text(const Xfer__Ctl__CtlMsg *r);
void print_names_json(const Xfer__Ctl__CtlMsg *r);
/* The same answer as names: its prepared lists. */
void print_lists_text(const Xfer__Ctl__CtlMsg *r);
void print_lists_json(const Xfer__Ctl__CtlMsg *r);

#endif /* XFERCTL_LISTS_H */
