/* SPDX-License-Identifier: Apache-2.0 */
/*
 * traffic_class.h - classes and tenants: the types every layer that
 * schedules shares (the executor sets them on an operation, a mover's
 * queue reads them), the tenants of xferd.conf ([tenant NAME]
 * sections), and their counters.  No state but what callers own.
 *
 * A class (enum xfer_class of xfer_ring.h) is per descriptor; a tenant
 * is per client, matched by its uid, else its gid, at its hello; the
 * rest share tenant 0, "default".  How they are scheduled:
 * doc/design.md, "Classes and tenants".
 *
 * Counters: one writer, the progress thread (stat_add); read by the
 * main thread without a lock (ops/stats.c).
 */
#ifndef XFERD_CORE_TRAFFIC_CLASS_H
#define XFERD_CORE_TRAFFIC_CLASS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "xfer_ring.h"

/* Tenants: "default" (index 0, every client no section matches) and up
 * to TENANT_MAX - 1 sections.  Bounded so that per-tenant state is a
 * fixed array and the metrics' labels are bounded. */
#define TENANT_MAX       16
#define TENANT_NAME_MAX  32   /* with its NUL */
#define TENANT_IDS_MAX   8    /* uids, and gids, of one section */
#define TENANT_WEIGHT_MAX 1000

struct tenant_cfg {
	char name[TENANT_NAME_MAX];
	uint32_t weight;          /* share of the bulk class, 1..1000 */
	uint64_t rate;            /* bytes a second at most; 0: no cap */
	uint32_t uids[TENANT_IDS_MAX];
	uint32_t gids[TENANT_IDS_MAX];
	uint8_t nuids, ngids;
	/* Its place in the file (the order sections are matched in),
	 * which after a reload need not be its slot's index. */
	uint8_t rank;
	/* Gone from the file, kept while clients of it remain (their ops
	 * are counted and scheduled here; no new client matches it). */
	bool removed;
};

/* A tenant's slot (its index: a client's tenant number, the index of
 * its counters and its queues) stays the same across reloads, by name
 * (config_tenants_rebase), so the slots need not be in file order and
 * may have holes: an unused slot has an empty name and no ids. */
struct tenant_table {
	struct tenant_cfg t[TENANT_MAX];  /* t[0]: "default" */
	uint32_t n;                       /* >= 1: slots past n are unused */
	/* While a file is read: the [tenant] section its lines are in
	 * (0: none, the global keys). */
	uint32_t section;
	/* Slots a reload gave to another tenant than before: the progress
	 * thread zeroes their counters as it applies the table. */
	uint32_t fresh;
};

static inline bool tenant_slot_used(const struct tenant_table *tt,
				    uint32_t i)
{
	return i < tt->n && tt->t[i].name[0] != '\0';
}

/* The tenant of a client: the first section (in the file) naming its
 * uid, else the first naming its gid, else 0. */
static inline uint8_t tenant_match(const struct tenant_table *tt,
				   uint32_t uid, uint32_t gid)
{
	uint32_t best = 0, rank = UINT32_MAX;

	for (uint32_t i = 1; i < tt->n; i++)
		for (uint8_t k = 0; k < tt->t[i].nuids; k++)
			if (tt->t[i].uids[k] == uid && tt->t[i].rank < rank) {
				best = i;
				rank = tt->t[i].rank;
			}
	if (best)
		return (uint8_t)best;
	for (uint32_t i = 1; i < tt->n; i++)
		for (uint8_t k = 0; k < tt->t[i].ngids; k++)
			if (tt->t[i].gids[k] == gid && tt->t[i].rank < rank) {
				best = i;
				rank = tt->t[i].rank;
			}
	return (uint8_t)best;
}

static inline const char *class_name(unsigned cls)
{
	static const char *const names[XFER_CLASS__COUNT] = {
		"default", "latency", "bulk",
	};
	return cls < XFER_CLASS__COUNT ? names[cls] : "?";
}

/* Wait-time histogram: bucket b counts waits below 2^b microseconds
 * (bucket 0: below 1 us), the last everything above. */
#define CLASS_WAIT_BUCKETS 24

struct class_counters {
	/* Operations handed to a mover and not yet ended, and their
	 * bytes (queued or in flight). */
	_Atomic uint64_t queued_ops, queued_bytes;
	_Atomic uint64_t ops, bytes;        /* ended, in all */
	/* From the op's start to its first frame on the link. */
	_Atomic uint64_t wait[CLASS_WAIT_BUCKETS];
	_Atomic uint64_t wait_sum_ns;
};

/* Per class and per tenant (not their product: bounded labels);
 * tenant[i] is slot i's (struct tenant_table).
 * demoted: latency descriptors moved as bulk (past latency_max_bytes);
 * paced: times a tenant's cap held its frames back. */
struct class_stats {
	struct class_counters cls[XFER_CLASS__COUNT];
	struct class_counters tenant[TENANT_MAX];
	_Atomic uint64_t demoted;
	_Atomic uint64_t paced[TENANT_MAX];
};

/* A slot given to another tenant: its counters start again (progress
 * thread, the counters' one writer, with no op of the slot left). */
static inline void class_counters_zero(struct class_counters *c)
{
	atomic_store_explicit(&c->queued_ops, 0, memory_order_relaxed);
	atomic_store_explicit(&c->queued_bytes, 0, memory_order_relaxed);
	atomic_store_explicit(&c->ops, 0, memory_order_relaxed);
	atomic_store_explicit(&c->bytes, 0, memory_order_relaxed);
	for (unsigned b = 0; b < CLASS_WAIT_BUCKETS; b++)
		atomic_store_explicit(&c->wait[b], 0, memory_order_relaxed);
	atomic_store_explicit(&c->wait_sum_ns, 0, memory_order_relaxed);
}

static inline unsigned class_wait_bucket(uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = 0;

	while (us && b < CLASS_WAIT_BUCKETS - 1) {
		us >>= 1;
		b++;
	}
	return b;
}

#endif /* XFERD_CORE_TRAFFIC_CLASS_H */
