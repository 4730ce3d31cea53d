/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xferctl_devices.h - xferctl peers, gpus and rails: links to other
 * nodes, GPUs and RDMA rails, as text or JSON.
 */
#ifndef XFERCTL_DEVICES_H
#define XFERCTL_DEVICES_H

#include "ctl.pb-c.h"

void print_peers_text(const Xfer__Ctl__CtlMsg *r);
void print_peers_json(const Xfer__Ctl__CtlMsg *r);
void print_gpus_text(const Xfer__Ctl__CtlMsg *r);
void print_gpus_json(const Xfer__Ctl__CtlMsg *r);
void print_rails_text(const Xfer__Ctl__CtlMsg *r);
void print_rails_json(const Xfer__Ctl__CtlMsg *r);

/* By node name, then instance id (xferd lists links in its own order). */
void peers_sort(Xfer__Ctl__PeersReply *rep);

#endif /* XFERCTL_DEVICES_H */
