/* SPDX-License-Identifier: Apache-2.0 */
/*
 * regworker.c - the registration thread and the hand-back of its
 * finished jobs to the main thread (regworker.h says what and why).
 *
 * Lock order: `lock` is a leaf.  It is never held across run() or done(),
 * nor across the eventfd write, so a run() may take the registration
 * cache's and the handle table's locks and a done() may call back into
 * regworker_submit() or regworker_cancel().
 */
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "mem/regworker.h"

TAILQ_HEAD(job_list, regworker_job);

struct regworker {
	pthread_mutex_t lock;         /* leaf: guards the four below */
	pthread_cond_t wake;          /* queue filled, stop, a cancel */
	struct job_list queue;        /* submitted, not started */
	struct job_list done;         /* finished, not yet delivered */
	struct regworker_job *running;
	bool stop;

	int efd;                      /* "done is not empty", to the loop */
	struct event *ev;
	pthread_t thread;
	bool started;
	unsigned test_delay_ms;
	unsigned pending;             /* main thread only */
};

/* The test hook: wait before run() unless stopped or cancelled.  Lock
 * held (the wait drops it). */
static void test_delay(struct regworker *w, struct regworker_job *j)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += w->test_delay_ms / 1000;
	until.tv_nsec += (long)(w->test_delay_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (!w->stop && !j->cancelled &&
	       pthread_cond_timedwait(&w->wake, &w->lock, &until) != ETIMEDOUT)
		;
}

static void *worker_main(void *arg)
{
	struct regworker *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->stop && TAILQ_EMPTY(&w->queue))
			pthread_cond_wait(&w->wake, &w->lock);
		if (w->stop)
			break;  /* what is queued, destroy cancels */
		struct regworker_job *j = TAILQ_FIRST(&w->queue);
		TAILQ_REMOVE(&w->queue, j, link);
		w->running = j;
		if (w->test_delay_ms)
			test_delay(w, j);
		bool skip = j->cancelled;
		pthread_mutex_unlock(&w->lock);

		/* The slow part, with nothing of ours locked. */
		int result = skip ? -ECANCELED : j->run(j);

		pthread_mutex_lock(&w->lock);
		j->result = result;
		w->running = NULL;
		TAILQ_INSERT_TAIL(&w->done, j, link);
		pthread_mutex_unlock(&w->lock);
		/* The loop reads the counter and then takes the whole done
		 * list under the lock: a job put there before this write is
		 * seen by the read it causes, or by an earlier one. */
		uint64_t one = 1;
		if (write(w->efd, &one, sizeof(one)) < 0)
			log_warn("registration thread: eventfd");
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void deliver(struct regworker *w, struct job_list *list)
{
	struct regworker_job *j;

	while ((j = TAILQ_FIRST(list))) {
		TAILQ_REMOVE(list, j, link);
		w->pending--;
		j->done(j, j->cancelled ? -ECANCELED : j->result);
	}
}

/* Main loop: finished jobs, in the order they finished.  One at a time
 * off the shared list, so that a done() that cancels another owner's
 * jobs (a reply that finds a socket broken) still reaches those not yet
 * delivered. */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
	struct regworker *w = arg;
	struct regworker_job *j;
	uint64_t n;
	(void)what;

	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("registration thread: eventfd");
	for (;;) {
		pthread_mutex_lock(&w->lock);
		j = TAILQ_FIRST(&w->done);
		if (j)
			TAILQ_REMOVE(&w->done, j, link);
		pthread_mutex_unlock(&w->lock);
		if (!j)
			return;
		/* Out of every list: no other thread sees j any more. */
		w->pending--;
		j->done(j, j->cancelled ? -ECANCELED : j->result);
	}
}

struct regworker *regworker_create(struct event_base *base,
				   unsigned test_delay_ms)
{
	struct regworker *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;
	int err;

	if (!w)
		return NULL;
	TAILQ_INIT(&w->queue);
	TAILQ_INIT(&w->done);
	w->test_delay_ms = test_delay_ms;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0)
		goto err_sync;
	w->ev = event_new(base, w->efd, EV_READ | EV_PERSIST, on_done, w);
	if (!w->ev || event_add(w->ev, NULL)) {
		errno = ENOMEM;
		goto err_efd;
	}
	err = pthread_create(&w->thread, NULL, worker_main, w);
	if (err) {
		errno = err;
		goto err_ev;
	}
	w->started = true;
	if (test_delay_ms)
		log_warnx("test hook: every registration waits %u ms first "
			  "(XFERD_TEST_REG_DELAY_MS)", test_delay_ms);
	return w;
err_ev:
	event_free(w->ev);
err_efd:
	err = errno;
	close(w->efd);
	errno = err;
err_sync:
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
	return NULL;
}

void regworker_destroy(struct regworker *w)
{
	struct job_list left = TAILQ_HEAD_INITIALIZER(left);
	struct regworker_job *j;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	if (w->running)
		w->running->cancelled = true;
	TAILQ_FOREACH(j, &w->done, link)
		j->cancelled = true;
	TAILQ_FOREACH(j, &w->queue, link)
		j->cancelled = true;
	pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&w->lock);
	if (w->started)
		pthread_join(w->thread, NULL);
	/* The thread is gone: the lists are ours.  Finished ones first,
	 * then those it never started: submission order. */
	TAILQ_CONCAT(&left, &w->done, link);
	TAILQ_CONCAT(&left, &w->queue, link);
	deliver(w, &left);
	event_free(w->ev);
	close(w->efd);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

void regworker_submit(struct regworker *w, struct regworker_job *j)
{
	j->result = 0;
	j->cancelled = false;
	w->pending++;
	pthread_mutex_lock(&w->lock);
	TAILQ_INSERT_TAIL(&w->queue, j, link);
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
}

void regworker_cancel(struct regworker *w, uint64_t owner)
{
	struct job_list gone = TAILQ_HEAD_INITIALIZER(gone);
	struct regworker_job *j, *next;

	pthread_mutex_lock(&w->lock);
	for (j = TAILQ_FIRST(&w->queue); j; j = next) {
		next = TAILQ_NEXT(j, link);
		if (j->owner != owner)
			continue;
		TAILQ_REMOVE(&w->queue, j, link);
		j->cancelled = true;
		TAILQ_INSERT_TAIL(&gone, j, link);
	}
	/* These two are delivered by the loop, with -ECANCELED. */
	if (w->running && w->running->owner == owner) {
		w->running->cancelled = true;
		pthread_cond_broadcast(&w->wake); /* ends a test delay */
	}
	TAILQ_FOREACH(j, &w->done, link)
		if (j->owner == owner)
			j->cancelled = true;
	pthread_mutex_unlock(&w->lock);
	deliver(w, &gone);
}

unsigned regworker_pending(struct regworker *w)
{
	return w->pending;
}
