/* SPDX-License-Identifier: Apache-2.0 */
/*
 * copy_workers.c - the copy worker threads (copy_workers.h).
 *
 * One mutex guards the queue of jobs not started, the list of jobs
 * finished and the stop flag; workers wait on a condition variable.  The
 * progress thread looks at the finished list without the lock first (an
 * atomic count), so a pass with nothing finished costs one load.  Jobs
 * are chunks of hundreds of KiB: a lock per job is noise beside its copy.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "mem/copy_workers.h"
#include "core/log.h"

struct copy_workers {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct copy_job *queue, **queue_tail;   /* not started */
	struct copy_job *finished;              /* done() not called yet */
	_Atomic unsigned nfinished;
	bool stop;

	unsigned outstanding;                   /* progress thread only */
	unsigned n;
	pthread_t threads[];
};

static void *worker_main(void *arg)
{
	struct copy_workers *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->queue && !w->stop)
			pthread_cond_wait(&w->wake, &w->lock);
		struct copy_job *j = w->queue;
		if (!j)
			break;  /* stopping, and nothing left to run */
		w->queue = j->next;
		if (!w->queue)
			w->queue_tail = &w->queue;
		pthread_mutex_unlock(&w->lock);

		j->result = j->run(j);

		pthread_mutex_lock(&w->lock);
		j->next = w->finished;
		w->finished = j;
		atomic_fetch_add_explicit(&w->nfinished, 1,
					  memory_order_release);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

struct copy_workers *copy_workers_create(unsigned n)
{
	struct copy_workers *w = calloc(1, sizeof(*w) + n * sizeof(pthread_t));

	if (!w)
		return NULL;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	w->queue_tail = &w->queue;
	for (unsigned i = 0; i < n; i++) {
		int err = pthread_create(&w->threads[i], NULL, worker_main, w);
		if (err) {
			log_warnx("copy workers: %u of %u started", i, n);
			break;
		}
		w->n++;
	}
	return w;
}

unsigned copy_workers_count(const struct copy_workers *w)
{
	return w ? w->n : 0;
}

void copy_workers_submit(struct copy_workers *w, struct copy_job *j)
{
	if (!w || w->n == 0) {
		j->done(j, j->run(j));
		return;
	}
	j->next = NULL;
	w->outstanding++;
	pthread_mutex_lock(&w->lock);
	*w->queue_tail = j;
	w->queue_tail = &j->next;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
}

unsigned copy_workers_poll(struct copy_workers *w)
{
	if (!w || atomic_load_explicit(&w->nfinished,
				       memory_order_acquire) == 0)
		return 0;
	pthread_mutex_lock(&w->lock);
	struct copy_job *list = w->finished;
	w->finished = NULL;
	atomic_store_explicit(&w->nfinished, 0, memory_order_relaxed);
	pthread_mutex_unlock(&w->lock);

	/* The list is newest first: end the oldest first. */
	struct copy_job *rev = NULL;
	while (list) {
		struct copy_job *next = list->next;
		list->next = rev;
		rev = list;
		list = next;
	}
	unsigned ended = 0;
	while (rev) {
		struct copy_job *j = rev;
		rev = j->next;
		w->outstanding--;
		ended++;
		j->done(j, j->result);  /* may submit more */
	}
	return ended;
}

bool copy_workers_busy(const struct copy_workers *w)
{
	return w && w->outstanding > 0;
}

void copy_workers_destroy(struct copy_workers *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->wake);
	pthread_mutex_unlock(&w->lock);
	/* Workers run the queue dry before they leave. */
	for (unsigned i = 0; i < w->n; i++)
		pthread_join(w->threads[i], NULL);
	/* What done() submits from here on runs inline. */
	w->n = 0;
	while (copy_workers_poll(w))
		;
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
