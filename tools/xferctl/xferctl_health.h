/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_health.h - the part of `xferctl status` about what xferd
 * depends on and what it turned away: etcd, held notifications, quota
 * refusals, descriptors.
 */
#ifndef XFERCTL_HEALTH_H
#define XFERCTL_HEALTH_H

#include "ctl.pb-c.h"
#include "xferctl_out.h"

/* "etcd: ..." and the other lines, added to status's key: value table. */
void health_text(struct table *kv, const Xfer__Ctl__StatusReply *st);
/* The same as keys of status's JSON object. */
void health_json(json_object *o, const Xfer__Ctl__StatusReply *st);

#endif /* XFERCTL_HEALTH_H */
