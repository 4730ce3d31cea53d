/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_regworker.c - the registration thread: jobs run on it, one at a
 * time and in order; their completions come back on the thread that runs
 * the event loop, in the same order; a cancelled job's done() still runs
 * exactly once (with -ECANCELED), without run() if it had not started;
 * destroy cancels what is left; the test delay hook delays and is cut
 * short by a cancel.
 */
#include <check.h>
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mem/regworker.h"
#include "suites.h"

#define NJOBS 64

static pthread_t main_thread;

/* A gate a job's run() waits at until the test opens it. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_open;

static void gate_set(bool open)
{
	pthread_mutex_lock(&gate_lock);
	gate_open = open;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

struct tjob {
	struct regworker_job job;    /* first */
	int index;
	bool gated;
	/* Written by run() on the registration thread, read by the test
	 * after done() (the hand-back orders them) or while polling. */
	_Atomic bool ran;
	_Atomic bool started;
	bool run_on_main;
	/* Main thread. */
	int done_calls;
	int result;
	bool done_on_main;
};

/* Order of done() calls, main thread only. */
static int done_order[NJOBS];
static int ndone;
static _Atomic int nrun;
static int run_order[NJOBS];

static int trun(struct regworker_job *j)
{
	struct tjob *t = (struct tjob *)j;

	atomic_store(&t->started, true);
	t->run_on_main = pthread_equal(pthread_self(), main_thread);
	run_order[atomic_fetch_add(&nrun, 1)] = t->index;
	if (t->gated) {
		pthread_mutex_lock(&gate_lock);
		while (!gate_open)
			pthread_cond_wait(&gate_cond, &gate_lock);
		pthread_mutex_unlock(&gate_lock);
	}
	atomic_store(&t->ran, true);
	return -t->index;  /* a result done() can tell apart */
}

static void tdone(struct regworker_job *j, int result)
{
	struct tjob *t = (struct tjob *)j;

	t->done_calls++;
	t->result = result;
	t->done_on_main = pthread_equal(pthread_self(), main_thread);
	done_order[ndone++] = t->index;
}

static void reset(struct tjob *jobs, int n)
{
	main_thread = pthread_self();
	ndone = 0;
	atomic_store(&nrun, 0);
	gate_set(false);
	for (int i = 0; i < n; i++) {
		jobs[i] = (struct tjob){ .index = i };
		jobs[i].job.owner = 1;
		jobs[i].job.run = trun;
		jobs[i].job.done = tdone;
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Run the loop until `want` done() calls happened (5 s at most). */
static void loop_until(struct event_base *base, int want)
{
	uint64_t deadline = now_ms() + 5000;

	while (ndone < want) {
		ck_assert_msg(now_ms() < deadline, "%d of %d done after 5 s",
			      ndone, want);
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(200);
	}
}

static void wait_started(struct tjob *t)
{
	uint64_t deadline = now_ms() + 5000;

	while (!atomic_load(&t->started)) {
		ck_assert_msg(now_ms() < deadline, "job %d never started",
			      t->index);
		usleep(200);
	}
}

START_TEST(in_order_on_the_loop)
{
	static struct tjob jobs[NJOBS];
	struct event_base *base = event_base_new();
	struct regworker *w = regworker_create(base, 0);

	ck_assert_ptr_nonnull(w);
	reset(jobs, NJOBS);
	for (int i = 0; i < NJOBS; i++)
		regworker_submit(w, &jobs[i].job);
	ck_assert_uint_eq(regworker_pending(w), NJOBS);
	/* Nothing is delivered outside the loop. */
	usleep(20000);
	ck_assert_int_eq(ndone, 0);
	loop_until(base, NJOBS);
	ck_assert_uint_eq(regworker_pending(w), 0);
	for (int i = 0; i < NJOBS; i++) {
		ck_assert_int_eq(run_order[i], i);
		ck_assert_int_eq(done_order[i], i);
		ck_assert(atomic_load(&jobs[i].ran));
		ck_assert(!jobs[i].run_on_main);
		ck_assert(jobs[i].done_on_main);
		ck_assert_int_eq(jobs[i].done_calls, 1);
		ck_assert_int_eq(jobs[i].result, -i);
	}
	regworker_destroy(w);
	event_base_free(base);
}
END_TEST

START_TEST(cancel_by_owner)
{
	static struct tjob jobs[4];
	struct event_base *base = event_base_new();
	struct regworker *w = regworker_create(base, 0);

	/* 0 (owner 1) runs and blocks; 1, 3 (owner 2) and 2 (owner 1)
	 * wait behind it. */
	reset(jobs, 4);
	jobs[0].gated = true;
	jobs[1].job.owner = jobs[3].job.owner = 2;
	for (int i = 0; i < 4; i++)
		regworker_submit(w, &jobs[i].job);
	wait_started(&jobs[0]);

	/* Queued jobs of owner 2: done at once, never run. */
	regworker_cancel(w, 2);
	ck_assert_int_eq(ndone, 2);
	ck_assert_int_eq(done_order[0], 1);
	ck_assert_int_eq(done_order[1], 3);
	ck_assert_int_eq(jobs[1].result, -ECANCELED);
	ck_assert_int_eq(jobs[3].result, -ECANCELED);
	ck_assert(jobs[1].done_on_main && jobs[3].done_on_main);

	/* Owner 1: the queued one at once, the running one once its run()
	 * returned, through the loop, still -ECANCELED. */
	regworker_cancel(w, 1);
	ck_assert_int_eq(ndone, 3);
	ck_assert_int_eq(done_order[2], 2);
	ck_assert_int_eq(jobs[2].result, -ECANCELED);
	ck_assert_int_eq(jobs[0].done_calls, 0);
	gate_set(true);
	loop_until(base, 4);
	ck_assert_int_eq(done_order[3], 0);
	ck_assert(atomic_load(&jobs[0].ran));
	ck_assert_int_eq(jobs[0].result, -ECANCELED);
	ck_assert(jobs[0].done_on_main);
	ck_assert_int_eq(atomic_load(&nrun), 1);
	for (int i = 1; i < 4; i++)
		ck_assert(!atomic_load(&jobs[i].ran));
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(jobs[i].done_calls, 1);
	ck_assert_uint_eq(regworker_pending(w), 0);

	/* The thread goes on with new work after a cancel. */
	reset(jobs, 1);
	regworker_submit(w, &jobs[0].job);
	loop_until(base, 1);
	ck_assert_int_eq(jobs[0].result, 0);
	regworker_destroy(w);
	event_base_free(base);
}
END_TEST

static void *open_gate_later(void *arg)
{
	(void)arg;
	usleep(50000);
	gate_set(true);
	return NULL;
}

START_TEST(destroy_cancels_the_rest)
{
	static struct tjob jobs[3];
	struct event_base *base = event_base_new();
	struct regworker *w = regworker_create(base, 0);
	pthread_t t;

	reset(jobs, 3);
	jobs[0].gated = true;
	for (int i = 0; i < 3; i++)
		regworker_submit(w, &jobs[i].job);
	wait_started(&jobs[0]);
	pthread_create(&t, NULL, open_gate_later, NULL);
	/* Waits for the running job, then hands back all three. */
	regworker_destroy(w);
	pthread_join(t, NULL);
	ck_assert_int_eq(ndone, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(done_order[i], i);
		ck_assert_int_eq(jobs[i].done_calls, 1);
		ck_assert_int_eq(jobs[i].result, -ECANCELED);
		ck_assert(jobs[i].done_on_main);
	}
	ck_assert(atomic_load(&jobs[0].ran));
	ck_assert(!atomic_load(&jobs[1].ran) && !atomic_load(&jobs[2].ran));
	event_base_free(base);
}
END_TEST

START_TEST(test_delay_hook)
{
	static struct tjob jobs[2];
	struct event_base *base = event_base_new();
	struct regworker *w = regworker_create(base, 150);

	reset(jobs, 2);
	uint64_t t0 = now_ms();
	regworker_submit(w, &jobs[0].job);
	loop_until(base, 1);
	ck_assert_uint_ge(now_ms() - t0, 150);
	ck_assert_int_eq(jobs[0].result, 0);
	regworker_destroy(w);

	/* A cancel ends the delay: no run(), done long before 10 s. */
	w = regworker_create(base, 10000);
	reset(jobs, 2);
	jobs[1].job.owner = 2;
	regworker_submit(w, &jobs[0].job);
	regworker_submit(w, &jobs[1].job);
	usleep(20000);
	t0 = now_ms();
	regworker_cancel(w, 1);
	loop_until(base, 1);
	ck_assert_int_eq(done_order[0], 0);
	ck_assert_int_eq(jobs[0].result, -ECANCELED);
	ck_assert(!atomic_load(&jobs[0].ran));
	/* Destroy ends the second one's delay as well. */
	regworker_destroy(w);
	ck_assert_uint_lt(now_ms() - t0, 2000);
	ck_assert_int_eq(ndone, 2);
	ck_assert_int_eq(jobs[1].result, -ECANCELED);
	ck_assert(!atomic_load(&jobs[1].ran));
	event_base_free(base);
}
END_TEST

Suite *regworker_suite(void)
{
	Suite *s = suite_create("regworker");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, in_order_on_the_loop);
	tcase_add_test(tc, cancel_by_owner);
	tcase_add_test(tc, destroy_cancels_the_rest);
	tcase_add_test(tc, test_delay_hook);
	suite_add_tcase(s, tc);
	return s;
}
