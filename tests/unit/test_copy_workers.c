/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_copy_workers.c - the copy worker threads (mem/copy_workers.h):
 * every job's done() runs exactly once, on the polling thread, after its
 * run(); done() may submit more; destroy drains what is queued; with no
 * workers a job runs inline; the queue's order: latency jobs before
 * queued bulk ones, tenants' bulk jobs by weight.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "mem/copy_workers.h"
#include "local/cma_split.h"
#include "suites.h"

#define NJOBS 2000u

struct tjob {
	struct copy_job job;
	unsigned id;
	_Atomic unsigned runs;
	unsigned dones;
	int64_t result;
	pthread_t ran_on;
	uint8_t buf[4096];         /* a "copy" to do */
};

static pthread_t poller;
static unsigned resubmits;     /* done() submits this many more */
static struct copy_workers *cw;
static struct tjob extra[16];
static unsigned nextra;

static int64_t run_job(struct copy_job *j)
{
	struct tjob *t = (struct tjob *)j;
	atomic_fetch_add(&t->runs, 1);
	t->ran_on = pthread_self();
	memset(t->buf, (int)(t->id & 0xff), sizeof(t->buf));
	return t->id;
}

static void done_job(struct copy_job *j, int64_t result)
{
	struct tjob *t = (struct tjob *)j;
	ck_assert(pthread_equal(pthread_self(), poller));
	ck_assert_uint_eq(atomic_load(&t->runs), 1);
	t->dones++;
	t->result = result;
	if (resubmits && nextra < sizeof(extra) / sizeof(extra[0])) {
		resubmits--;
		struct tjob *e = &extra[nextra];
		*e = (struct tjob){ .id = 100000 + nextra };
		nextra++;
		e->job.run = run_job;
		e->job.done = done_job;
		copy_workers_submit(cw, &e->job);
	}
}

static void submit_all(struct tjob *jobs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		jobs[i] = (struct tjob){ .id = i };
		jobs[i].job.run = run_job;
		jobs[i].job.done = done_job;
		copy_workers_submit(cw, &jobs[i].job);
	}
}

static void check_all(const struct tjob *jobs, unsigned n, bool off_thread)
{
	for (unsigned i = 0; i < n; i++) {
		ck_assert_uint_eq(jobs[i].dones, 1);
		ck_assert_int_eq(jobs[i].result, jobs[i].id);
		ck_assert_uint_eq(jobs[i].buf[4095], i & 0xff);
		if (off_thread)
			ck_assert(!pthread_equal(jobs[i].ran_on, poller));
	}
}

START_TEST(each_job_ends_once)
{
	static struct tjob jobs[NJOBS];

	poller = pthread_self();
	cw = copy_workers_create(3);
	ck_assert_ptr_nonnull(cw);
	ck_assert_uint_eq(copy_workers_count(cw), 3);
	resubmits = 5;
	nextra = 0;
	submit_all(jobs, NJOBS);
	ck_assert(copy_workers_busy(cw));
	while (copy_workers_busy(cw))
		copy_workers_poll(cw);
	check_all(jobs, NJOBS, true);
	ck_assert_uint_eq(nextra, 5);
	for (unsigned i = 0; i < nextra; i++)
		ck_assert_uint_eq(extra[i].dones, 1);
	ck_assert_uint_eq(copy_workers_poll(cw), 0);
	copy_workers_destroy(cw);
}
END_TEST

START_TEST(destroy_drains_the_queue)
{
	static struct tjob jobs[NJOBS];

	poller = pthread_self();
	cw = copy_workers_create(2);
	resubmits = 3;  /* done() during destroy submits: runs inline */
	nextra = 0;
	submit_all(jobs, NJOBS);
	copy_workers_destroy(cw);
	check_all(jobs, NJOBS, false);
	ck_assert_uint_eq(nextra, 3);
	for (unsigned i = 0; i < nextra; i++)
		ck_assert_uint_eq(extra[i].dones, 1);
}
END_TEST

START_TEST(no_workers_run_inline)
{
	static struct tjob jobs[8];

	poller = pthread_self();
	resubmits = 0;
	cw = NULL;
	submit_all(jobs, 8);
	check_all(jobs, 8, false);
	for (unsigned i = 0; i < 8; i++)
		ck_assert(pthread_equal(jobs[i].ran_on, poller));
	ck_assert(!copy_workers_busy(NULL));
	ck_assert_uint_eq(copy_workers_poll(NULL), 0);

	cw = copy_workers_create(0);
	ck_assert_ptr_nonnull(cw);
	ck_assert_uint_eq(copy_workers_count(cw), 0);
	submit_all(jobs, 8);
	check_all(jobs, 8, false);
	ck_assert(!copy_workers_busy(cw));
	copy_workers_destroy(cw);
}
END_TEST

/* --- the queue's order, scripted: one worker held busy by a gate job
 * while the others are queued, then the order they ran in --- */

struct ojob {
	struct copy_job job;
	int id;
	unsigned dones;
};

static _Atomic int gate_open, gate_started;
static int ran[64];
static _Atomic int nran;

static int64_t gate_run(struct copy_job *j)
{
	(void)j;
	atomic_store(&gate_started, 1);
	while (!atomic_load(&gate_open))
		usleep(1000);
	return 0;
}

static int64_t order_run(struct copy_job *j)
{
	struct ojob *o = (struct ojob *)j;
	ran[atomic_fetch_add(&nran, 1)] = o->id;
	return o->id;
}

static void order_done(struct copy_job *j, int64_t result)
{
	struct ojob *o = (struct ojob *)j;
	ck_assert_int_eq(result, o->id);
	o->dones++;
}

static void order_submit(struct ojob *o, int id, uint8_t cls, uint8_t tenant)
{
	*o = (struct ojob){ .id = id };
	o->job = (struct copy_job){ .run = order_run, .done = order_done,
				    .cls = cls, .tenant = tenant,
				    .bytes = 1u << 20 };
	copy_workers_submit(cw, &o->job);
}

START_TEST(latency_first_tenants_by_weight)
{
	struct tenant_table tt = { .n = 3 };
	struct ojob gate = { .id = -1 }, jobs[20];

	tt.t[0].weight = 1;
	tt.t[1].weight = 1;   /* tenant 1 */
	tt.t[2].weight = 3;   /* tenant 2: three times its share */
	atomic_store(&gate_open, 0);
	atomic_store(&gate_started, 0);
	atomic_store(&nran, 0);
	cw = copy_workers_create(1);
	ck_assert_ptr_nonnull(cw);
	copy_workers_set_weights(cw, &tt);
	gate.job = (struct copy_job){ .run = gate_run, .done = order_done };
	gate.id = 0;
	copy_workers_submit(cw, &gate.job);
	while (!atomic_load(&gate_started))
		usleep(1000);
	/* Queued while the worker is busy: 6 bulk jobs of tenant 1 (ids
	 * 100..), 12 of tenant 2 (200..), then two latency jobs (1, 2). */
	for (int i = 0; i < 6; i++)
		order_submit(&jobs[i], 100 + i, XFER_CLASS_BULK, 1);
	for (int i = 0; i < 12; i++)
		order_submit(&jobs[6 + i], 200 + i,
			     i % 2 ? XFER_CLASS_BULK : XFER_CLASS_DEFAULT, 2);
	order_submit(&jobs[18], 1, XFER_CLASS_LATENCY, 1);
	order_submit(&jobs[19], 2, XFER_CLASS_LATENCY, 2);
	atomic_store(&gate_open, 1);
	while (copy_workers_busy(cw))
		copy_workers_poll(cw);
	/* Latency first, in submission order; then by turns of 1 MiB a
	 * unit of weight: one of tenant 1, three of tenant 2, until tenant
	 * 2 is done, then the rest of tenant 1; each tenant in order. */
	static const int want[20] = {
		1, 2,
		100, 200, 201, 202,
		101, 203, 204, 205,
		102, 206, 207, 208,
		103, 209, 210, 211,
		104, 105,
	};
	ck_assert_int_eq(atomic_load(&nran), 20);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(ran[i], want[i]);
	for (int i = 0; i < 20; i++)
		ck_assert_uint_eq(jobs[i].dones, 1);
	ck_assert_uint_eq(gate.dones, 1);
	copy_workers_destroy(cw);
	cw = NULL;
}
END_TEST

/* Latency first, not alone: with more latency jobs queued than a run
 * allows, the others get a turn after each run of them. */
START_TEST(latency_runs_let_others_in)
{
	struct ojob gate = { .id = -1 }, jobs[22];

	atomic_store(&gate_open, 0);
	atomic_store(&gate_started, 0);
	atomic_store(&nran, 0);
	cw = copy_workers_create(1);
	ck_assert_ptr_nonnull(cw);
	gate.job = (struct copy_job){ .run = gate_run, .done = order_done };
	gate.id = 0;
	copy_workers_submit(cw, &gate.job);
	while (!atomic_load(&gate_started))
		usleep(1000);
	/* Two bulk jobs (100, 101), then 20 latency ones (1..20). */
	order_submit(&jobs[0], 100, XFER_CLASS_BULK, 1);
	order_submit(&jobs[1], 101, XFER_CLASS_BULK, 1);
	for (int i = 0; i < 20; i++)
		order_submit(&jobs[2 + i], 1 + i, XFER_CLASS_LATENCY, 2);
	atomic_store(&gate_open, 1);
	while (copy_workers_busy(cw))
		copy_workers_poll(cw);
	static const int want[22] = {
		1, 2, 3, 4, 5, 6, 7, 8, 100,
		9, 10, 11, 12, 13, 14, 15, 16, 101,
		17, 18, 19, 20,
	};
	ck_assert_int_eq(atomic_load(&nran), 22);
	for (int i = 0; i < 22; i++)
		ck_assert_int_eq(ran[i], want[i]);
	copy_workers_destroy(cw);
	cw = NULL;
}
END_TEST

/* A job of a tenant past the table, or no weights given: weight 1,
 * round robin job by job. */
START_TEST(tenants_without_weights_alternate)
{
	struct ojob gate = { .id = 0 }, jobs[6];

	atomic_store(&gate_open, 0);
	atomic_store(&gate_started, 0);
	atomic_store(&nran, 0);
	cw = copy_workers_create(1);
	gate.job = (struct copy_job){ .run = gate_run, .done = order_done };
	copy_workers_submit(cw, &gate.job);
	while (!atomic_load(&gate_started))
		usleep(1000);
	for (int i = 0; i < 3; i++)
		order_submit(&jobs[i], 10 + i, XFER_CLASS_BULK, 0);
	for (int i = 0; i < 3; i++)
		order_submit(&jobs[3 + i], 20 + i, XFER_CLASS_BULK, 5);
	atomic_store(&gate_open, 1);
	while (copy_workers_busy(cw))
		copy_workers_poll(cw);
	static const int want[6] = { 10, 20, 11, 21, 12, 22 };
	ck_assert_int_eq(atomic_load(&nran), 6);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(ran[i], want[i]);
	copy_workers_destroy(cw);
	cw = NULL;
}
END_TEST

/* A split CMA copy: parts of at least CMA_PART_MIN, one per worker at
 * most, never none. */
START_TEST(cma_split_parts_bounds)
{
	ck_assert_uint_eq(cma_split_parts(0, 8), 1);
	ck_assert_uint_eq(cma_split_parts(CMA_PART_MIN - 1, 8), 1);
	ck_assert_uint_eq(cma_split_parts(2 * CMA_PART_MIN, 8), 2);
	ck_assert_uint_eq(cma_split_parts(2 * CMA_PART_MIN - 1, 8), 1);
	ck_assert_uint_eq(cma_split_parts(256ull << 20, 8), 8);
	ck_assert_uint_eq(cma_split_parts(256ull << 20, 1), 1);
	ck_assert_uint_eq(cma_split_parts(256ull << 20, 0), 1);
	ck_assert_uint_eq(cma_split_parts(1ull << 40, 64), 64);
}
END_TEST

Suite *copy_workers_suite(void)
{
	Suite *s = suite_create("copy_workers");
	TCase *tc = tcase_create("pool");

	tcase_add_test(tc, each_job_ends_once);
	tcase_add_test(tc, destroy_drains_the_queue);
	tcase_add_test(tc, no_workers_run_inline);
	tcase_add_test(tc, cma_split_parts_bounds);
	tcase_add_test(tc, latency_first_tenants_by_weight);
	tcase_add_test(tc, latency_runs_let_others_in);
	tcase_add_test(tc, tenants_without_weights_alternate);
	suite_add_tcase(s, tc);
	return s;
}
