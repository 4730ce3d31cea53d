/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h - libxfer's private structures, shared by its files.
 */
#ifndef XFER_CLIENT_INTERNAL_H
#define XFER_CLIENT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "client.pb-c.h"
#include "common/ring.h"
#include "common/token_codec.h"
#include "xfer.h"

#define XFER_EXPORT __attribute__((visibility("default")))

/* The opcode of an SQE a list descriptor could not be given room in the
 * index area (-EAGAIN): xfer_submit publishes nothing from it on until
 * the client has filled it (dlist.c, queue.c). */
#define SQE_OP_UNFILLED 0xffu
_Static_assert(SQE_OP_UNFILLED >= XFER_OP__COUNT, "never a real opcode");

struct xfer_ctx {
	int sock;
	/* Doorbells (queue.c): an eventfd, and our end of a datagram
	 * socket pair (an older xferd's eventfd). */
	int sq_efd;               /* ring to wake xferd's progress thread */
	int cq_efd;               /* xferd rings it when we sleep on the CQ */
	int event_fd;             /* xfer_event_fd's epoll set, or -1 */
	void *ring_map;
	size_t ring_len;
	struct ring_view ring;
	uint32_t sq_tail;         /* entries handed out by xfer_get_sqe */
	uint32_t sq_published;    /* entries xfer_submit made visible */
	bool sq_unfilled;         /* one not yet published may be unfilled */
	uint32_t sq_head_cache;   /* last sq_head seen: refreshed when full */
	uint32_t cq_head;
	uint64_t seq;             /* of the last control request */
	uint64_t client_id;
	uint32_t uid;             /* ours as xferd saw it (HelloReply) */
	pid_t daemon_pid;
	uint8_t instance_id[TOKEN_INSTANCE_LEN];
	/* How other nodes reach our xferd (HelloReply): into every token. */
	struct token_addr addrs[TOKEN_MAX_ADDRS];
	uint32_t naddrs;
	char node_name[TOKEN_NODE_NAME_MAX];
	unsigned spin_us;
	unsigned empty_peeks;     /* since the last look at the socket */
	bool cq_by_seq;           /* CQEs found by their seq (G), not cq_tail */
	/* With phase: the SQ slots we stamped (F), one bit each, to be
	 * unstamped when handed out again.  A bit, not a look at every
	 * slot: reading a slot xferd has read since costs a transfer of
	 * its line before the write that takes it anyway (measured: half
	 * the rate of linked batches between two far cores). */
	uint64_t *sq_stamped;
	/* The ring's index area, handed out as a circular buffer (dlist.c):
	 * free-running byte counters, and the allocations not yet released
	 * (the SQE each belongs to, where it ends), oldest first. */
	uint64_t idx_head, idx_tail;
	struct idx_alloc {
		uint32_t sq_index;
		uint64_t end;
	} *idx_allocs;            /* sq_entries of them */
	uint32_t idx_first, idx_count;
	bool gone;                /* xferd said goodbye or closed the socket */
};

struct xfer_mem {
	void *ptr;
	size_t len;
	size_t map_len;           /* memfd mapping (page-rounded); 0 for reg */
	bool cuda_registered;     /* xfer_mem_cuda_register: unregister first */
	uint64_t handle;
	uint32_t kind;            /* Xfer__Client__MemKind */
	uint8_t key[TOKEN_KEY_LEN];
	uint8_t instance_id[TOKEN_INSTANCE_LEN];
	/* The context's, at registration: export needs no context. */
	struct token_addr addrs[TOKEN_MAX_ADDRS];
	uint32_t naddrs;
	char node_name[TOKEN_NODE_NAME_MAX];
};

struct xfer_remote {
	uint64_t handle;
	uint64_t len;
};

struct xfer_dlist {
	uint64_t handle;
	uint32_t n;
};

/*
 * Send request m (fds optional) and wait for its reply.  Returns the
 * unpacked reply (free with xfer__client__client_msg__free_unpacked) in
 * *reply, or -errno: -ENOTCONN if xferd is gone, -EPROTO on a bad reply.
 * A Status reply with an error is returned as that error.
 */
int ctx_call(struct xfer_ctx *ctx, Xfer__Client__ClientMsg *m,
	     const int *fds, unsigned nfds, Xfer__Client__ClientMsg **reply);

/* As ctx_call, and the reply may carry up to WIRE_MAX_FDS descriptors,
 * returned in rfds/rnfds (the caller closes them). */
int ctx_call_fds(struct xfer_ctx *ctx, Xfer__Client__ClientMsg *m,
		 const int *fds, unsigned nfds,
		 Xfer__Client__ClientMsg **reply, int *rfds, unsigned *rnfds);

#endif /* XFER_CLIENT_INTERNAL_H */
