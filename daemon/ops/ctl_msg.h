/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_msg.h - what xferd checks of an xferctl request before answering
 * it: version, a request type it answers, a ping target of printable
 * characters.  ctl.c calls it on every request; the fuzz harness
 * tests/fuzz/fuzz_ctl_msg.c on arbitrary bytes.
 */
#ifndef XFERD_CTL_MSG_H
#define XFERD_CTL_MSG_H

#include "ctl.pb-c.h"

/* The longest ping target: a node name, a hex id prefix, "host:port". */
#define CTL_PING_TARGET_MAX 80

/*
 * Returns 0, or -EPROTO / -EINVAL with *why (the message of the Error
 * reply): either way the connection closes after the reply.
 */
int ctl_msg_check(const Xfer__Ctl__CtlMsg *m, const char **why);

#endif /* XFERD_CTL_MSG_H */
