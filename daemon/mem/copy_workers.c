/* SPDX-License-Identifier: Apache-2.0 */
/*
 * copy_workers.c - the copy worker threads (copy_workers.h).
 *
 * One mutex guards the queue of jobs not started, the list of jobs
 * finished and the stop flag; workers wait on a condition variable.  The
 * progress thread looks at the finished list without the lock first (an
 * atomic count), so a pass with nothing finished costs one load.  Jobs
 * are chunks of hundreds of KiB: a lock per job is noise beside its copy.
 *
 * The queue of jobs not started is one FIFO for the latency class and
 * one per tenant for the rest (default and bulk), which a free worker
 * serves latency first, then the tenants by deficit round robin over
 * the jobs' bytes (core/fairq.h), each tenant's weight taken when its
 * queue starts.  So a latency job waits for a worker to finish the job
 * in hand, never behind queued bulk jobs, and a tenant queueing many
 * jobs cannot hold the others' back.  Latency is first but not alone:
 * after LATENCY_RUN_MAX latency jobs in a row while others waited, the
 * others get one turn, so latency jobs that never stop coming (many
 * clients, each within latency_max_bytes) slow the rest, never stop
 * them.  The fair queue is under the same lock as the rest: the workers
 * pick from it, the progress thread adds.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/container_of.h"
#include "core/fairq.h"
#include "mem/copy_workers.h"
#include "core/log.h"

/* Bytes a tenant's turn is worth per unit of weight: about one staging
 * chunk or one split part, so that turns alternate job by job. */
#define COPY_QUANTUM (1u << 20)

/* Latency jobs in a row while others wait, before the others get a
 * turn. */
#define LATENCY_RUN_MAX 8u

struct job_fifo {
	struct copy_job *head, **tail;
};

struct tenant_jobs {
	struct job_fifo q;
	struct fq_flow f;
};

struct copy_workers {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	/* Not started: latency first, then the tenants' queues. */
	struct job_fifo latency;
	struct tenant_jobs tenant[TENANT_MAX];
	struct fairq fq;
	uint32_t weight[TENANT_MAX];            /* copy_workers_set_weights */
	unsigned nqueued, nlatency;             /* queued: all, latency */
	unsigned latency_run;                   /* in a row, others waiting */
	struct copy_job *finished;              /* done() not called yet */
	_Atomic unsigned nfinished;
	bool stop;

	unsigned outstanding;                   /* progress thread only */
	unsigned n;
	pthread_t threads[];
};

static void fifo_init(struct job_fifo *f)
{
	f->head = NULL;
	f->tail = &f->head;
}

static void fifo_push(struct job_fifo *f, struct copy_job *j)
{
	j->next = NULL;
	*f->tail = j;
	f->tail = &j->next;
}

static struct copy_job *fifo_pop(struct job_fifo *f)
{
	struct copy_job *j = f->head;

	if (j && !(f->head = j->next))
		f->tail = &f->head;
	return j;
}

/* Under w->lock: queue j where its class and tenant say. */
static void queue_job(struct copy_workers *w, struct copy_job *j)
{
	w->nqueued++;
	if (j->cls == XFER_CLASS_LATENCY) {
		w->nlatency++;
		fifo_push(&w->latency, j);
		return;
	}
	struct tenant_jobs *t = &w->tenant[j->tenant < TENANT_MAX ? j->tenant
								     : 0];
	fifo_push(&t->q, j);
	if (!t->f.active) {
		/* Weights may change with a reload: taken when it starts. */
		t->f.weight = w->weight[t - w->tenant];
		fairq_activate(&w->fq, &t->f);
	}
}

/* Under w->lock: the job to run next, or NULL when none is queued. */
static struct copy_job *next_job(struct copy_workers *w)
{
	bool others = w->nqueued > w->nlatency;
	struct copy_job *j = NULL;

	if (w->nlatency && !(others && w->latency_run >= LATENCY_RUN_MAX)) {
		j = fifo_pop(&w->latency);
		w->nlatency--;
		w->latency_run = others ? w->latency_run + 1 : 0;
	} else {
		w->latency_run = 0;
	}
	if (!j) {
		struct fq_flow *f = fairq_next(&w->fq, NULL, NULL);
		if (!f)
			return NULL;
		struct tenant_jobs *t = container_of(f, struct tenant_jobs, f);
		j = fifo_pop(&t->q);
		/* At least a byte, so that jobs of no size still take turns. */
		fairq_charge(f, j->bytes ? j->bytes : 1);
		if (!t->q.head)
			fairq_deactivate(&w->fq, f);
	}
	w->nqueued--;
	return j;
}

static void *worker_main(void *arg)
{
	struct copy_workers *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->nqueued && !w->stop)
			pthread_cond_wait(&w->wake, &w->lock);
		struct copy_job *j = next_job(w);
		if (!j)
			break;  /* stopping, and nothing left to run */
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
	fifo_init(&w->latency);
	fairq_init(&w->fq, COPY_QUANTUM);
	for (unsigned t = 0; t < TENANT_MAX; t++) {
		fifo_init(&w->tenant[t].q);
		fq_flow_init(&w->tenant[t].f, 1);
		w->weight[t] = 1;
	}
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
	w->outstanding++;
	pthread_mutex_lock(&w->lock);
	queue_job(w, j);
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
}

void copy_workers_set_weights(struct copy_workers *w,
			      const struct tenant_table *tt)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	for (uint32_t t = 0; t < TENANT_MAX; t++)
		w->weight[t] = t < tt->n && tt->t[t].weight ? tt->t[t].weight
							     : 1;
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
