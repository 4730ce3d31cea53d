/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_sqe.c - submission queue entries as the progress thread executes
 * them: exec_sqe() (daemon/engine/exec.c) with its checks (sqe_check,
 * handle, range and access resolution, linked batches, notifications)
 * on a real engine: a progress instance whose thread never starts (this
 * harness is its thread), two clients with rings in heap memory, memfd
 * regions, a CMA region, imports of this xferd's and another's tokens.
 *
 * Input: a run of 64-byte SQEs, all of client A.  So that handles and
 * offsets meet the real regions, the low 3 bits of `local` and `remote`
 * pick a handle (A's region, B's region, a sub-range import of B, a
 * whole import of B, A's CMA region, 0, or the field's other bits as
 * is), and bit 0 of user_data folds offsets and length near the
 * regions' size.  The last entry of the input closes an open batch.
 *
 * Prepared-list descriptors (WRITE_DLIST, READ_DLIST) pick lists the
 * same way (the low 3 bits: lists of 16 blocks of 4 KiB over A's region,
 * the two imports of B, A's CMA region, the other node's token, a
 * region handle, or the bits as is), and their pairs come from A's index
 * area, filled once with indices of which some are past the lists.
 *
 * Invariants: a batch completes with exactly one CQE of A, carrying its
 * last entry's user_data, never flagged as a notification; its result
 * is a negative errno or at most the bytes its entries asked for.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/ring.h"
#include "common/token_codec.h"
#include "engine/progress_int.h"
#include "fuzz.h"
#include "mem/cma.h"
#include "mem/dlist.h"
#include "mem/region.h"

#define SQ_ENTRIES 64u
#define REGION_LEN (64u << 10)
#define A_ID       101u
#define B_ID       202u

struct fake_client {
	struct prog_client pc;
	void *ring_mem;
	uint64_t handle;             /* its memfd region */
	uint8_t key[TOKEN_KEY_LEN];
};

static struct regtab *regs;
static struct progress *prog;
static struct fake_client A, B;
static struct prog_client *clients[2];
static uint64_t handles[5];      /* what the low bits of a handle pick */
static uint8_t *cma_buf;
_Noreturn static void die(void)
{
	abort();
}

static struct dltab *dlists;
static uint64_t lists[5];        /* what the low bits of a list pick */

#define LIST_N   16u
#define LIST_BLK 4096u

/* A list of LIST_N blocks of LIST_BLK over handle h of A (the first
 * block at `first`). */
static uint64_t list_over(uint64_t h, bool is_import, uint64_t first)
{
	uint64_t *off = malloc(LIST_N * sizeof(*off)), handle;

	if (!off)
		die();
	for (uint32_t i = 0; i < LIST_N; i++)
		off[i] = first + (uint64_t)((i * 5) % LIST_N) * LIST_BLK / 2;
	if (dltab_add(dlists, A.pc.id, h, is_import, LIST_N, off, NULL,
		      LIST_BLK, first + LIST_N * LIST_BLK / 2 + LIST_BLK,
		      (struct dlist_limits){ .lists = 64, .entries = 1u << 20 },
		      &handle))
		die();
	return handle;
}

static void add_memfd_region(struct fake_client *c)
{
	int fd = memfd_create("fuzz-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct region *r;

	if (fd < 0 || ftruncate(fd, REGION_LEN) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) ||
	    region_create_memfd(fd, REGION_LEN, c->pc.id, &r))
		die();
	memcpy(c->key, region_key(r), TOKEN_KEY_LEN);
	regtab_add_region(regs, r);
	c->handle = region_handle(r);
}

static void open_client(struct fake_client *c, uint64_t id)
{
	struct xfer_ring_offsets off;

	c->pc.id = id;
	/* With the message areas (and a sender name): SQEs with messages
	 * reach the copy out of the ring (exec.c take_msg). */
	if (ring_layout(SQ_ENTRIES, 4096, &off) || ring_layout_msgs(&off))
		die();
	c->pc.name_len = 4;
	memcpy(c->pc.name, "fuzz", 4);
	c->ring_mem = aligned_alloc(4096, (off.map_size + 4095) & ~4095u);
	if (!c->ring_mem)
		die();
	memset(c->ring_mem, 0, off.map_size);
	*(uint32_t *)((char *)c->ring_mem + off.magic) = XFER_RING_MAGIC;
	if (ring_view_init(&c->pc.ring, c->ring_mem, off.map_size, &off))
		die();
	/* No doorbells: the fuzzer never sleeps on a ring. */
	c->pc.sq_efd = c->pc.cq_sock = -1;
	add_memfd_region(c);
}

/* An import of B's region [off, off + len) for A. */
static uint64_t import_of_b(uint64_t off, uint64_t len)
{
	struct token t = { .region = B.handle, .offset = off, .length = len,
			   .region_length = REGION_LEN,
			   .mem_kind = REGION_MEMFD };
	uint64_t h, granted;

	token_sign(&t, B.key);
	if (regtab_add_import(regs, A.pc.id, &t, &h, &granted))
		die();
	return h;
}

/* A token of another xferd: its region is reached over links only. */
static uint64_t remote_import(void)
{
	struct token t = { .region = 77, .offset = 0, .length = REGION_LEN,
			   .region_length = REGION_LEN,
			   .mem_kind = REGION_MEMFD };
	uint64_t h, granted;

	memset(t.instance_id, 0x5a, sizeof(t.instance_id));
	if (regtab_add_remote_import(regs, A.pc.id, &t, NULL, &h, &granted))
		die();
	return h;
}

static void setup(void)
{
	struct region *r;

	regs = regtab_create();
	prog = progress_create(regs, 0, -1);
	if (!regs || !prog)
		die();
	open_client(&A, A_ID);
	open_client(&B, B_ID);
	/* Attached as progress_attach would, without the thread. */
	clients[0] = &A.pc;
	clients[1] = &B.pc;
	prog->clients = clients;
	prog->nclients = prog->cap = 2;
	/* A's own memory, reached as CMA (mem/cma.h). */
	int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	struct cma_owner *o;
	cma_buf = calloc(1, REGION_LEN);
	if (pidfd < 0 || !cma_buf ||
	    cma_owner_open(getpid(), pidfd, getuid(), getgid(), &o) ||
	    region_create_cma(o, (uint64_t)(uintptr_t)cma_buf, REGION_LEN,
			      A.pc.id, &r))
		die();
	cma_owner_put(o);
	regtab_add_region(regs, r);
	handles[0] = A.handle;
	handles[1] = import_of_b(4096, 8192);
	handles[2] = import_of_b(0, REGION_LEN);
	handles[3] = region_handle(r);
	handles[4] = remote_import();
	dlists = dltab_create();
	if (!dlists)
		die();
	progress_set_dlists(prog, dlists);
	lists[0] = list_over(handles[0], false, 0);
	lists[1] = list_over(handles[1], true, 0);       /* 8 KiB: past it */
	lists[2] = list_over(handles[2], true, 4096);
	lists[3] = list_over(handles[3], false, 1);
	lists[4] = list_over(handles[4], true, 0);
	/* Pairs everywhere in A's index area: indices 0..19 of lists of
	 * 16, so some are past the end. */
	uint32_t *idx = (uint32_t *)(void *)A.pc.ring.idx;
	for (uint32_t i = 0; i < A.pc.ring.idx_size / 4; i++)
		idx[i] = (i * 2654435761u >> 7) % (LIST_N + 4);
}

static uint64_t pick_list(uint64_t field)
{
	switch (field & 7) {
	case 0: case 1: case 2: case 3: case 4: return lists[field & 7];
	case 5: return handles[0];  /* a region handle: not a list */
	default: return field >> 3;
	}
}

static uint64_t pick_handle(uint64_t field)
{
	switch (field & 7) {
	case 0: return handles[0];
	case 1: return B.handle;  /* not A's: -EACCES */
	case 2: return handles[1];
	case 3: return handles[2];
	case 4: return handles[3];
	case 5: return handles[4];
	case 6: return 0;
	default: return field >> 3;
	}
}

/* The client side: take every CQE, so the CQ always has room. */
static void consume_cq(struct fake_client *c)
{
	exec_publish(&c->pc);
	*c->pc.ring.cq_head = c->pc.cq_tail;
}

/* FUZZ_TRACE=1 in the environment: each batch's result on stderr. */
static bool trace;
static uint64_t batch_len;  /* bytes the open batch's entries ask for */

static void run_one(struct xfer_sqe *sqe)
{
	uint32_t tail0 = A.pc.cq_tail;

	/* A list descriptor moves up to len blocks. */
	bool is_list = sqe->opcode == XFER_OP_WRITE_DLIST ||
		       sqe->opcode == XFER_OP_READ_DLIST;
	uint64_t want = sqe->len;
	if (is_list)
		want = sqe->len > UINT64_MAX / LIST_BLK ? UINT64_MAX
							: sqe->len * LIST_BLK;
	if (want <= UINT64_MAX - batch_len)
		batch_len += want;
	else
		batch_len = UINT64_MAX;
	exec_sqe(prog, &A.pc, sqe);
	exec_run_deferred(prog);
	if (sqe->flags & XFER_SQE_F_LINK) {
		/* Inside a batch: no completion of its own. */
		FUZZ_ASSERT(A.pc.cq_tail == tail0);
	} else {
		FUZZ_ASSERT(A.pc.cq_tail != tail0);
		const struct xfer_cqe *cqe = ring_cqe_at(&A.pc.ring, tail0);
		FUZZ_ASSERT(cqe->user_data == sqe->user_data);
		FUZZ_ASSERT(!(cqe->flags & XFER_CQE_F_NOTIFY));
		if (trace)
			fprintf(stderr, "op %u -> %lld (path %u)\n",
				sqe->opcode, (long long)cqe->result,
				cqe->path);
		FUZZ_ASSERT(cqe->result >= -4095);
		FUZZ_ASSERT(cqe->result < 0 ||
			    (uint64_t)cqe->result <= batch_len);
		batch_len = 0;
	}
	FUZZ_ASSERT(A.pc.cq_reserved == 0 && !A.pc.batch.ab);
	consume_cq(&A);
	consume_cq(&B);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xfer_sqe sqe;

	if (!prog) {
		setup();
		trace = getenv("FUZZ_TRACE") != NULL;
	}
	for (size_t off = 0; off + sizeof(sqe) <= size; off += sizeof(sqe)) {
		memcpy(&sqe, data + off, sizeof(sqe));
		bool is_list = sqe.opcode == XFER_OP_WRITE_DLIST ||
			       sqe.opcode == XFER_OP_READ_DLIST;
		sqe.local = is_list ? pick_list(sqe.local)
				    : pick_handle(sqe.local);
		sqe.remote = is_list ? pick_list(sqe.remote)
				     : pick_handle(sqe.remote);
		if (sqe.user_data & 1) {
			sqe.local_off %= REGION_LEN + 64;
			sqe.remote_off %= REGION_LEN + 64;
			sqe.len %= REGION_LEN + 64;
		}
		/* The input's last entry ends its batch. */
		if (off + 2 * sizeof(sqe) > size)
			sqe.flags &= (uint8_t)~XFER_SQE_F_LINK;
		run_one(&sqe);
	}
	return 0;
}
