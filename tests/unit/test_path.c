/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_path.c - the one route decision (daemon/core/path.c) over every
 * combination of memory kinds, node, opcode and engines, and the one
 * notification decision over every kind of SQE.
 */
#include <check.h>

#include "core/path.h"
#include "mem/region.h"
#include "suites.h"
#include "xfer_ring.h"

static const enum region_kind host_gpu[] = { REGION_MEMFD, REGION_CMA,
					     REGION_CUDA };
#define NKINDS 3

/* Same node: [local][target], with GPUs; rows and columns MEMFD, CMA,
 * CUDA.  xfer_reg'd host memory (CMA) lives in another process: no copy
 * engine reaches it, so it meets GPU memory in staging chunks. */
static const enum path_route same_node_gpus[NKINDS][NKINDS] = {
	{ ROUTE_MEMCPY, ROUTE_CMA, ROUTE_GPU },
	{ ROUTE_CMA, ROUTE_CMA, ROUTE_GPU_STAGED },
	{ ROUTE_GPU, ROUTE_GPU_STAGED, ROUTE_GPU },
};
/* Without GPUs, GPU memory goes nowhere. */
static const enum path_route same_node_no_gpus[NKINDS][NKINDS] = {
	{ ROUTE_MEMCPY, ROUTE_CMA, ROUTE_NOTSUP },
	{ ROUTE_CMA, ROUTE_CMA, ROUTE_NOTSUP },
	{ ROUTE_NOTSUP, ROUTE_NOTSUP, ROUTE_NOTSUP },
};
/* Another node with links and GPUs here: [local][owner's memory], RDMA
 * not ready; GPU memory at either end goes through staging. */
static const enum path_route other_node_gpus[NKINDS][NKINDS] = {
	{ ROUTE_LINK, ROUTE_LINK, ROUTE_LINK_STAGED },
	{ ROUTE_LINK, ROUTE_LINK, ROUTE_LINK_STAGED },
	{ ROUTE_LINK_STAGED, ROUTE_LINK_STAGED, ROUTE_LINK_STAGED },
};
/* Without GPUs here, local GPU memory goes nowhere; the owner's GPU
 * memory is the owner's to stage (it refuses if it has no GPUs). */
static const enum path_route other_node_no_gpus[NKINDS][NKINDS] = {
	{ ROUTE_LINK, ROUTE_LINK, ROUTE_LINK_STAGED },
	{ ROUTE_LINK, ROUTE_LINK, ROUTE_LINK_STAGED },
	{ ROUTE_NOTSUP, ROUTE_NOTSUP, ROUTE_NOTSUP },
};

static const char *kind(enum region_kind k)
{
	return region_kind_name(k);
}

START_TEST(same_node_every_combination)
{
	const uint8_t ops[] = { XFER_OP_WRITE, XFER_OP_READ };

	for (unsigned o = 0; o < 2; o++)
	for (unsigned l = 0; l < NKINDS; l++)
	for (unsigned t = 0; t < NKINDS; t++)
	for (int gpus = 0; gpus < 2; gpus++)
	for (int links = 0; links < 2; links++)
	for (int rdma = 0; rdma < 2; rdma++) {
		struct path_facts f = {
			.opcode = ops[o], .local = host_gpu[l],
			.target = host_gpu[t], .gpus = gpus, .links = links,
			.rdma = rdma,
		};
		enum path_route want = gpus ? same_node_gpus[l][t]
					    : same_node_no_gpus[l][t];
		enum path_route got = path_choose(&f);
		/* Links and RDMA have no say on one node. */
		ck_assert_msg(got == want,
			      "%s %s -> %s, gpus %d links %d rdma %d: %s, "
			      "expected %s", o ? "read" : "write",
			      kind(host_gpu[l]), kind(host_gpu[t]), gpus,
			      links, rdma, path_route_name(got),
			      path_route_name(want));
	}
}
END_TEST

START_TEST(other_node_every_combination)
{
	const uint8_t ops[] = { XFER_OP_WRITE, XFER_OP_READ };

	for (unsigned o = 0; o < 2; o++)
	for (unsigned l = 0; l < NKINDS; l++)
	for (unsigned m = 0; m < NKINDS; m++)
	for (int gpus = 0; gpus < 2; gpus++)
	for (int links = 0; links < 2; links++)
	for (int rdma = 0; rdma < 2; rdma++)
	for (int staged = 0; staged < 2; staged++)
	for (int dmabuf = 0; dmabuf < 2; dmabuf++)
	for (int owner = 0; owner < 2; owner++) {
		struct path_facts f = {
			.opcode = ops[o], .local = host_gpu[l],
			.target = REGION_REMOTE, .owner_mem = host_gpu[m],
			.gpus = gpus, .links = links, .rdma = rdma,
			.rdma_staged = staged, .owner_dmabuf = dmabuf,
			.rdma_owner_staged = owner,
		};
		enum path_route want = gpus ? other_node_gpus[l][m]
					    : other_node_no_gpus[l][m];
		/* Zero-copy RDMA first, then RDMA through staging chunks,
		 * for every kind of memory here (GPU memory through its
		 * dma-buf registration, or D2H/H2D copies into registered
		 * chunks) that has GPUs where it needs them; the owner's
		 * GPU memory only once the owner granted it (dma-buf),
		 * else the owner stages it: through the chunks it lends
		 * over RDMA where it lends them, else on the link.  The
		 * owner's landing chunks come last for any memory the
		 * owner's NICs cannot reach (the facts say so). */
		bool owner_gpu = host_gpu[m] == REGION_CUDA;
		if (!links)
			want = ROUTE_UNREACHABLE;
		else if (want == ROUTE_NOTSUP)
			;
		else if (owner_gpu && !dmabuf)
			want = owner ? ROUTE_RDMA_OWNER_STAGED
				     : ROUTE_LINK_STAGED;
		else if (rdma)
			want = ROUTE_RDMA;
		else if (staged)
			want = ROUTE_RDMA_STAGED;
		else if (owner)
			want = ROUTE_RDMA_OWNER_STAGED;
		enum path_route got = path_choose(&f);
		ck_assert_msg(got == want,
			      "%s %s -> remote %s, gpus %d links %d rdma %d "
			      "staged %d dmabuf %d owner %d: %s, expected %s",
			      o ? "read" : "write", kind(host_gpu[l]),
			      kind(host_gpu[m]), gpus, links, rdma, staged,
			      dmabuf, owner, path_route_name(got),
			      path_route_name(want));
	}
}
END_TEST

/* The rows of xfer_reg'd (CMA) memory toward a peer that RDMA reaches:
 * zero-copy needs a NIC registration of it, which CMA memory never has;
 * through the staging buffers it goes by RDMA all the same. */
START_TEST(cma_to_rdma_peer_is_staged)
{
	const uint8_t ops[] = { XFER_OP_WRITE, XFER_OP_READ };

	for (unsigned o = 0; o < 2; o++)
	for (int gpus = 0; gpus < 2; gpus++) {
		struct path_facts f = {
			.opcode = ops[o], .local = REGION_CMA,
			.target = REGION_REMOTE, .owner_mem = REGION_MEMFD,
			.gpus = gpus, .links = true, .rdma_staged = true,
		};
		ck_assert_int_eq(path_choose(&f), ROUTE_RDMA_STAGED);
		f.rdma_staged = false;  /* no staging buffers, or no rail */
		ck_assert_int_eq(path_choose(&f), ROUTE_LINK);
		/* A memfd region whose registration is there: zero-copy;
		 * not yet there: staged. */
		f.local = REGION_MEMFD;
		f.rdma = true;
		f.rdma_staged = false;
		ck_assert_int_eq(path_choose(&f), ROUTE_RDMA);
		f.rdma = false;
		f.rdma_staged = true;
		ck_assert_int_eq(path_choose(&f), ROUTE_RDMA_STAGED);
		/* The owner's GPU memory is the owner's to stage. */
		f.owner_mem = REGION_CUDA;
		ck_assert_int_eq(path_choose(&f), ROUTE_LINK_STAGED);
	}
}
END_TEST

/* GPU memory toward a node that RDMA reaches, every capability of this
 * side (GPUs, a GPU region registered with the NICs through dma-buf,
 * staging chunks pinned for the GPUs and registered with the NICs) and
 * of the owner (host memory, or GPU memory granted through dma-buf or
 * not): dma-buf zero-copy, then staged, never TCP while RDMA can. */
START_TEST(gpu_memory_over_rdma)
{
	static const struct {
		enum region_kind local, owner;
		bool gpus, dmabuf_mr, gpu_chunks, owner_dmabuf;
		enum path_route want;
	} cases[] = {
		/* GPU here -> owner's host memory (granted) */
		{ REGION_CUDA, REGION_MEMFD, 1, 1, 1, 0, ROUTE_RDMA },
		{ REGION_CUDA, REGION_MEMFD, 1, 1, 0, 0, ROUTE_RDMA },
		{ REGION_CUDA, REGION_MEMFD, 1, 0, 1, 0, ROUTE_RDMA_STAGED },
		{ REGION_CUDA, REGION_MEMFD, 1, 0, 0, 0, ROUTE_LINK_STAGED },
		{ REGION_CUDA, REGION_MEMFD, 0, 0, 0, 0, ROUTE_NOTSUP },
		/* GPU here -> owner's GPU memory */
		{ REGION_CUDA, REGION_CUDA, 1, 1, 1, 1, ROUTE_RDMA },
		{ REGION_CUDA, REGION_CUDA, 1, 0, 1, 1, ROUTE_RDMA_STAGED },
		{ REGION_CUDA, REGION_CUDA, 1, 0, 0, 1, ROUTE_LINK_STAGED },
		{ REGION_CUDA, REGION_CUDA, 1, 1, 1, 0, ROUTE_LINK_STAGED },
		{ REGION_CUDA, REGION_CUDA, 1, 0, 1, 0, ROUTE_LINK_STAGED },
		/* host memory here -> owner's GPU memory */
		{ REGION_MEMFD, REGION_CUDA, 0, 1, 0, 1, ROUTE_RDMA },
		{ REGION_MEMFD, REGION_CUDA, 0, 0, 1, 1, ROUTE_RDMA_STAGED },
		{ REGION_MEMFD, REGION_CUDA, 0, 1, 1, 0, ROUTE_LINK_STAGED },
		{ REGION_CMA, REGION_CUDA, 1, 0, 1, 1, ROUTE_RDMA_STAGED },
		{ REGION_CMA, REGION_CUDA, 1, 0, 0, 0, ROUTE_LINK_STAGED },
	};
	const uint8_t ops[] = { XFER_OP_WRITE, XFER_OP_READ };

	for (unsigned o = 0; o < 2; o++)
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* What the RDMA movers' accepts() say of those facts: zero-
		 * copy needs the local memory registered; staged needs it
		 * not registered, and GPU memory needs GPU-pinned chunks. */
		bool gpu = cases[i].local == REGION_CUDA;
		bool host_mr = cases[i].local == REGION_MEMFD &&
			       cases[i].dmabuf_mr;
		bool mr = gpu ? cases[i].dmabuf_mr : host_mr;
		struct path_facts f = {
			.opcode = ops[o], .local = cases[i].local,
			.target = REGION_REMOTE, .owner_mem = cases[i].owner,
			.gpus = cases[i].gpus, .links = true,
			.rdma = mr,
			.rdma_staged = !mr && (!gpu || cases[i].gpu_chunks),
			.owner_dmabuf = cases[i].owner_dmabuf,
		};
		enum path_route got = path_choose(&f);
		ck_assert_msg(got == cases[i].want, "case %zu (%s): %s, "
			      "expected %s", i, o ? "read" : "write",
			      path_route_name(got),
			      path_route_name(cases[i].want));
	}
}
END_TEST

/* Memory the owner's NICs cannot reach (xfer_reg'd there: CMA; GPU
 * memory without a dma-buf grant), every kind here, with and without
 * the owner's landing chunks (what the facts gather: the owner lends
 * them, a rail pair reaches it, and this side's staging chunks reach its
 * memory): RDMA through them, never TCP while they are there; the link
 * otherwise, as before. */
START_TEST(owner_memory_over_rdma)
{
	static const struct {
		enum region_kind local, owner;
		bool gpus, lends;
		enum path_route want;
	} cases[] = {
		/* the owner's xfer_reg'd host memory */
		{ REGION_MEMFD, REGION_CMA, 0, 1, ROUTE_RDMA_OWNER_STAGED },
		{ REGION_MEMFD, REGION_CMA, 0, 0, ROUTE_LINK },
		{ REGION_CMA, REGION_CMA, 0, 1, ROUTE_RDMA_OWNER_STAGED },
		{ REGION_CMA, REGION_CMA, 1, 0, ROUTE_LINK },
		{ REGION_CUDA, REGION_CMA, 1, 1, ROUTE_RDMA_OWNER_STAGED },
		{ REGION_CUDA, REGION_CMA, 1, 0, ROUTE_LINK_STAGED },
		{ REGION_CUDA, REGION_CMA, 0, 1, ROUTE_NOTSUP },
		/* the owner's GPU memory, no dma-buf grant */
		{ REGION_MEMFD, REGION_CUDA, 0, 1, ROUTE_RDMA_OWNER_STAGED },
		{ REGION_MEMFD, REGION_CUDA, 0, 0, ROUTE_LINK_STAGED },
		{ REGION_CMA, REGION_CUDA, 1, 1, ROUTE_RDMA_OWNER_STAGED },
		{ REGION_CMA, REGION_CUDA, 0, 0, ROUTE_LINK_STAGED },
		{ REGION_CUDA, REGION_CUDA, 1, 1, ROUTE_RDMA_OWNER_STAGED },
		{ REGION_CUDA, REGION_CUDA, 1, 0, ROUTE_LINK_STAGED },
		{ REGION_CUDA, REGION_CUDA, 0, 1, ROUTE_NOTSUP },
	};
	const uint8_t ops[] = { XFER_OP_WRITE, XFER_OP_READ };

	for (unsigned o = 0; o < 2; o++)
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct path_facts f = {
			.opcode = ops[o], .local = cases[i].local,
			.target = REGION_REMOTE, .owner_mem = cases[i].owner,
			.gpus = cases[i].gpus, .links = true,
			.rdma_owner_staged = cases[i].lends,
		};
		enum path_route got = path_choose(&f);
		ck_assert_msg(got == cases[i].want, "case %zu (%s): %s, "
			      "expected %s", i, o ? "read" : "write",
			      path_route_name(got),
			      path_route_name(cases[i].want));
		/* no links: nothing reaches the owner */
		f.links = false;
		ck_assert_int_eq(path_choose(&f), ROUTE_UNREACHABLE);
	}
	ck_assert_str_eq(path_route_name(ROUTE_RDMA_OWNER_STAGED),
			 "rdma-owner-staged");
}
END_TEST

/* A NOTIFY moves no bytes: the link carries it whatever the memory. */
START_TEST(notify_goes_on_the_link)
{
	for (unsigned m = 0; m < NKINDS; m++)
	for (int links = 0; links < 2; links++)
	for (int rdma = 0; rdma < 2; rdma++) {
		struct path_facts f = {
			.opcode = XFER_OP_NOTIFY, .target = REGION_REMOTE,
			.owner_mem = host_gpu[m], .gpus = true,
			.links = links, .rdma = rdma, .rdma_staged = rdma,
			.rdma_owner_staged = rdma,
		};
		ck_assert_int_eq(path_choose(&f),
				 links ? ROUTE_LINK : ROUTE_UNREACHABLE);
	}
}
END_TEST

START_TEST(route_names)
{
	for (int r = ROUTE_MEMCPY; r <= ROUTE_UNREACHABLE; r++)
		ck_assert_str_ne(path_route_name((enum path_route)r), "?");
}
END_TEST

static struct xfer_sqe sqe_of(uint8_t opcode, uint16_t flags)
{
	return (struct xfer_sqe){ .opcode = opcode, .flags = flags };
}

START_TEST(notify_every_sqe)
{
	const uint8_t ops[] = { XFER_OP_NOP, XFER_OP_WRITE, XFER_OP_READ,
				XFER_OP_NOTIFY };
	const uint16_t flags[] = { 0, XFER_SQE_F_NOTIFY, XFER_SQE_F_LINK,
				   XFER_SQE_F_LINK | XFER_SQE_F_NOTIFY };

	for (unsigned o = 0; o < 4; o++)
	for (unsigned fl = 0; fl < 4; fl++)
	for (int remote = 0; remote < 2; remote++)
	for (int pending = 0; pending < 2; pending++) {
		struct xfer_sqe s = sqe_of(ops[o], flags[fl]);
		bool last = !(flags[fl] & XFER_SQE_F_LINK);
		bool asks = ops[o] == XFER_OP_NOTIFY ||
			    (flags[fl] & XFER_SQE_F_NOTIFY);
		enum notify_when want;
		if (!last || !asks)
			want = NOTIFY_NONE;  /* only a batch's end notifies */
		else if (!remote)
			want = pending ? NOTIFY_AFTER_BATCH : NOTIFY_NOW;
		else if (pending || ops[o] == XFER_OP_READ)
			want = NOTIFY_AFTER_BATCH;
		else
			want = NOTIFY_WITH_DATA;
		ck_assert_msg(notify_choose(&s, remote, pending) == want,
			      "opcode %u flags %#x remote %d pending %d: %d, "
			      "expected %d", ops[o], flags[fl], remote,
			      pending, notify_choose(&s, remote, pending),
			      want);
		ck_assert_int_eq(notify_wanted(&s), last && asks);
	}
}
END_TEST

Suite *path_suite(void)
{
	Suite *s = suite_create("path");
	TCase *tc = tcase_create("route");

	tcase_add_test(tc, same_node_every_combination);
	tcase_add_test(tc, other_node_every_combination);
	tcase_add_test(tc, cma_to_rdma_peer_is_staged);
	tcase_add_test(tc, gpu_memory_over_rdma);
	tcase_add_test(tc, owner_memory_over_rdma);
	tcase_add_test(tc, notify_goes_on_the_link);
	tcase_add_test(tc, route_names);
	suite_add_tcase(s, tc);
	tc = tcase_create("notify");
	tcase_add_test(tc, notify_every_sqe);
	suite_add_tcase(s, tc);
	return s;
}
