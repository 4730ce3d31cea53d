/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_ctl_msg.c - an xferctl request as xferd reads it (ctl.c's
 * dispatch): the wire tag, the CtlMsg unpack and ctl_msg_check()
 * (daemon/ops/ctl_msg.c).
 *
 * Invariants: a verdict is 0, -EPROTO or -EINVAL and an error says why;
 * a ping that passes names a target that fits ctl.c's buffer.
 */
#include <errno.h>
#include <string.h>

#include "common/wire.h"
#include "fuzz.h"
#include "ops/ctl_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = NULL;

	if (size > WIRE_MAX_PACKET || wire_tag(data, size) != WIRE_TAG_CTL)
		return 0;
	Xfer__Ctl__CtlMsg *m = xfer__ctl__ctl_msg__unpack(
		NULL, size - WIRE_TAG_LEN, data + WIRE_TAG_LEN);
	if (!m)
		return 0;
	int rc = ctl_msg_check(m, &why);
	FUZZ_ASSERT(rc == 0 || rc == -EPROTO || rc == -EINVAL);
	if (rc) {
		FUZZ_ASSERT(why && *why);
	} else if (m->body_case == XFER__CTL__CTL_MSG__BODY_PING) {
		size_t n = strlen(m->ping->target);
		FUZZ_ASSERT(n >= 1 && n <= CTL_PING_TARGET_MAX);
		for (size_t i = 0; i < n; i++)
			FUZZ_ASSERT(m->ping->target[i] > 0x20 &&
				    m->ping->target[i] < 0x7f);
	}
	xfer__ctl__ctl_msg__free_unpacked(m, NULL);
	return 0;
}
