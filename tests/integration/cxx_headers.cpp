/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cxx_headers.cpp - the installed headers (xfer.h, xfer_ring.h) as C++
 * sees them.  cxx_headers.sh compiles this one file as C11 and as C++17
 * and C++20 (so it is written in their common subset), links each with
 * libxfer and compares what they print: the offset of every ring ABI
 * field and the bytes the inline preparation helpers write.  A header
 * that C++ rejects, a layout that differs between the languages, or a
 * declaration missing its C linkage (the link fails) fails the test.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <xfer.h>
#include <xfer_ring.h>

#define FIELD(type, f) \
	printf("%s.%s %zu %zu\n", #type, #f, offsetof(struct type, f), \
	       sizeof(((struct type *)0)->f))

static void print_sqe(const char *what, const struct xfer_sqe *sqe)
{
	const unsigned char *b = (const unsigned char *)sqe;
	size_t i;

	printf("%s", what);
	for (i = 0; i < sizeof *sqe; i++)
		printf("%s%02x", i % 8 ? "" : " ", b[i]);
	printf("\n");
}

int main(void)
{
	struct xfer_sqe sqe;

	printf("sizes %zu %zu %zu %zu %zu\n", sizeof(struct xfer_sqe),
	       sizeof(struct xfer_cqe), sizeof(struct xfer_cqe_sender),
	       sizeof(struct xfer_dlist_pair),
	       sizeof(struct xfer_ring_offsets));
	FIELD(xfer_sqe, opcode);
	FIELD(xfer_sqe, flags);
	FIELD(xfer_sqe, reserved0);
	FIELD(xfer_sqe, timeout_ms);
	FIELD(xfer_sqe, user_data);
	FIELD(xfer_sqe, local);
	FIELD(xfer_sqe, local_off);
	FIELD(xfer_sqe, remote);
	FIELD(xfer_sqe, remote_off);
	FIELD(xfer_sqe, len);
	FIELD(xfer_sqe, notify_value);
	FIELD(xfer_cqe, user_data);
	FIELD(xfer_cqe, result);
	FIELD(xfer_cqe, flags);
	FIELD(xfer_cqe, path);
	FIELD(xfer_cqe, reserved);
	FIELD(xfer_cqe, handle);
	FIELD(xfer_cqe_sender, node);
	FIELD(xfer_cqe_sender, client);
	FIELD(xfer_cqe_sender, uid);
	FIELD(xfer_cqe_sender, flags);
	FIELD(xfer_ring_offsets, cq_senders);
	FIELD(xfer_ring_offsets, cq_sender_size);

	/* Stale bytes first: the helpers must write every field. */
	memset(&sqe, 0xa5, sizeof sqe);
	xfer_prep_write(&sqe, 1, 2, 3, 4, 5, 6);
	print_sqe("write", &sqe);
	xfer_sqe_set_notify(&sqe, 0x1122334455667788ull);
	xfer_sqe_set_link(&sqe);
	xfer_sqe_set_timeout(&sqe, 250);
	print_sqe("flags", &sqe);
	memset(&sqe, 0x5a, sizeof sqe);
	xfer_prep_read(&sqe, 7, 8, 9, 10, 11, 12);
	print_sqe("read", &sqe);
	xfer_prep_notify(&sqe, 13, 14, 15);
	print_sqe("notify", &sqe);
	xfer_prep_nop(&sqe, 16);
	print_sqe("nop", &sqe);

	/* Functions of libxfer itself: C linkage from C++ too. */
	printf("%s %s\n", xfer_path_name(XFER_PATH_CMA),
	       xfer_strerror(-22) ? "strerror" : "none");
	return 0;
}
