/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdma_grant.c - NIC-enforced token ranges (rdma_grant.h says what and
 * why): a registration of a checked token's range per peer and link.
 *
 * Lock order: grant_lock is a leaf; nothing else is taken while it is
 * held (region accessors read only the region's immutable head).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <event2/event.h>
#include <infiniband/verbs.h>

#include "core/log.h"
#include "peer.pb-c.h"
#include "common/wire.h"
#include "mem/region.h"
#include "transport/rdma_dev.h"
#include "transport/rdma_grant.h"
#include "transport/rdma_mr.h"

/* Grants alive at once, over all peers: a peer checking tokens in a
 * loop must not pin and allocate without end (its imports are bounded
 * by its clients' max_handles; a peer that is not honest is not).  Past
 * it, imports go over TCP. */
#define GRANTS_MAX (1u << 16)

struct grant {
	uint64_t id;
	uint8_t peer[LINK_ID_LEN];
	uint64_t link_gen;
	const struct region *region;  /* a key only: never dereferenced */
	struct ibv_mr *mr[RDMA_DEV_MAX];
	struct grant *next;
};

static pthread_mutex_t grant_lock = PTHREAD_MUTEX_INITIALIZER;
static struct grant *grants;      /* grant_lock */
static uint64_t next_id;          /* grant_lock */
static uint32_t alive[RDMA_DEV_MAX];   /* grant_lock */
static uint64_t made[RDMA_DEV_MAX];    /* grant_lock */
/* Grants alive: lets the region path skip the lock when there are none.
 * Relaxed: a grant is made while its region is referenced, so it is
 * counted before that region's last reference can go. */
static _Atomic uint32_t nalive;

/* Deregister g's ranges and free it; lock held, g unlinked. */
static void grant_free(struct grant *g)
{
	for (int d = 0; d < RDMA_DEV_MAX; d++) {
		int rc;
		if (!g->mr[d])
			continue;
		if ((rc = ibv_dereg_mr(g->mr[d])))
			log_warnx("RDMA grant %llu: ibv_dereg_mr: %s",
				  (unsigned long long)g->id, strerror(rc));
		alive[d]--;
	}
	atomic_fetch_sub_explicit(&nalive, 1, memory_order_relaxed);
	free(g);
}

uint64_t rdma_grant_open(const struct region *r, uint64_t off, uint64_t len,
			 const uint8_t peer[LINK_ID_LEN], uint64_t link_gen,
			 uint32_t *keys, size_t nkeys)
{
	/* No local access: a peer's READ and WRITE are all it serves. */
	const int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_LOCAL_WRITE;
	int ndevs = rdma_dev_count();
	struct grant *g;
	bool any = false;

	if (region_kind(r) != REGION_MEMFD || len == 0 ||
	    off > region_length(r) || len > region_length(r) - off)
		return 0;
	if (atomic_load_explicit(&nalive, memory_order_relaxed) >= GRANTS_MAX) {
		/* Once: a peer looping on checks must not flood the log. */
		static atomic_bool said;
		if (!atomic_exchange_explicit(&said, true, memory_order_relaxed))
			log_warnx("RDMA: %u token ranges granted already: "
				  "imports past that go by TCP", GRANTS_MAX);
		return 0;
	}
	if (!(g = calloc(1, sizeof(*g))))
		return 0;
	memcpy(g->peer, peer, LINK_ID_LEN);
	g->link_gen = link_gen;
	g->region = r;
	if ((size_t)ndevs > nkeys)
		ndevs = (int)nkeys;
	pthread_mutex_lock(&grant_lock);
	for (int d = 0; d < ndevs && d < RDMA_DEV_MAX; d++) {
		struct rdma_dev_verbs v;
		keys[d] = 0;
		if (!rdma_mr_keys(r, d, NULL, NULL) || rdma_dev_verbs(d, &v))
			continue;
		g->mr[d] = ibv_reg_mr(v.pd, region_map_at(r, off), len, access);
		if (!g->mr[d]) {
			log_warn("RDMA grant of %llu bytes on device %d "
				 "(memlock limit?): that token goes by TCP",
				 (unsigned long long)len, d);
			any = false;
			break;
		}
		keys[d] = g->mr[d]->rkey;
		alive[d]++;
		made[d]++;
		any = true;
	}
	atomic_fetch_add_explicit(&nalive, 1, memory_order_relaxed);
	if (!any) {
		grant_free(g);
		pthread_mutex_unlock(&grant_lock);
		return 0;
	}
	g->id = ++next_id;
	g->next = grants;
	grants = g;
	uint64_t id = g->id;
	pthread_mutex_unlock(&grant_lock);
	return id;
}

/* End every grant pick() selects; lock held.  How many. */
static unsigned end_where(bool (*pick)(const struct grant *g,
				       const void *arg),
			  const void *arg)
{
	unsigned n = 0;

	for (struct grant **pp = &grants, *g; (g = *pp);) {
		if (!pick(g, arg)) {
			pp = &g->next;
			continue;
		}
		*pp = g->next;
		grant_free(g);
		n++;
	}
	return n;
}

struct grant_name {
	const uint8_t *peer;
	uint64_t id;
};

static bool is_named(const struct grant *g, const void *arg)
{
	const struct grant_name *n = arg;

	return g->id == n->id && memcmp(g->peer, n->peer, LINK_ID_LEN) == 0;
}

static bool of_link(const struct grant *g, const void *arg)
{
	const struct grant_name *n = arg;

	return g->link_gen == n->id &&
	       memcmp(g->peer, n->peer, LINK_ID_LEN) == 0;
}

static bool of_region(const struct grant *g, const void *arg)
{
	return g->region == arg;
}

static bool every(const struct grant *g, const void *arg)
{
	(void)g, (void)arg;
	return true;
}

bool rdma_grant_release(const uint8_t peer[LINK_ID_LEN], uint64_t id)
{
	struct grant_name n = { peer, id };

	pthread_mutex_lock(&grant_lock);
	unsigned ended = end_where(is_named, &n);
	pthread_mutex_unlock(&grant_lock);
	return ended > 0;
}

unsigned rdma_grant_end_link(const uint8_t peer[LINK_ID_LEN],
			     uint64_t link_gen)
{
	struct grant_name n = { peer, link_gen };

	if (!atomic_load_explicit(&nalive, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&grant_lock);
	unsigned ended = end_where(of_link, &n);
	pthread_mutex_unlock(&grant_lock);
	return ended;
}

void rdma_grant_end_region(const struct region *r)
{
	if (!atomic_load_explicit(&nalive, memory_order_relaxed))
		return;
	pthread_mutex_lock(&grant_lock);
	end_where(of_region, r);
	pthread_mutex_unlock(&grant_lock);
}

void rdma_grant_end_all(void)
{
	pthread_mutex_lock(&grant_lock);
	end_where(every, NULL);
	pthread_mutex_unlock(&grant_lock);
}

void rdma_grant_count(int dev, uint32_t *n_alive, uint64_t *n_made)
{
	*n_alive = 0;
	*n_made = 0;
	if (dev < 0 || dev >= RDMA_DEV_MAX)
		return;
	pthread_mutex_lock(&grant_lock);
	*n_alive = alive[dev];
	*n_made = made[dev];
	pthread_mutex_unlock(&grant_lock);
}

const char *rdma_grant_mode(int dev)
{
	(void)dev;  /* every device, for the reason in rdma_grant.h */
	return "token-mr";
}

size_t rdma_grant_release_pack(uint64_t grant, uint8_t *buf, size_t cap)
{
	Xfer__Peer__PeerMsg m = XFER__PEER__PEER_MSG__INIT;
	Xfer__Peer__ReleaseGrant rel = XFER__PEER__RELEASE_GRANT__INIT;

	rel.grant = grant;
	m.proto_version = XFER_PROTO_VERSION;
	m.body_case = XFER__PEER__PEER_MSG__BODY_RELEASE_GRANT;
	m.release_grant = &rel;
	size_t len = xfer__peer__peer_msg__get_packed_size(&m);
	if (len > cap)
		return 0;
	xfer__peer__peer_msg__pack(&m, buf);
	return len;
}

size_t rdma_grant_release_msg(const struct region *r,
			      uint8_t owner[LINK_ID_LEN], uint8_t *buf,
			      size_t cap)
{
	const struct region_rdma *rr;
	const struct token *tok;

	if (region_kind(r) != REGION_REMOTE || !(rr = region_rdma(r)) ||
	    !rr->grant || !(tok = region_token(r)))
		return 0;
	memcpy(owner, tok->instance_id, LINK_ID_LEN);
	return rdma_grant_release_pack(rr->grant, buf, cap);
}

/* --- the grant worker --- */

struct rdma_grant_worker {
	pthread_t thread;
	pthread_mutex_t lock;     /* leaf: the two lists and stop */
	pthread_cond_t more;
	struct rdma_grant_job *queue, **queue_tail;
	struct rdma_grant_job *made, **made_tail;
	bool stop;
	int efd;                  /* the worker -> base's thread */
	struct event *ev;
	rdma_grant_done_fn done;
	void *arg;
};

static void *worker_main(void *arg)
{
	struct rdma_grant_worker *w = arg;
	struct rdma_grant_job *j;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		if (!(j = w->queue)) {
			pthread_cond_wait(&w->more, &w->lock);
			continue;
		}
		if (!(w->queue = j->next))
			w->queue_tail = &w->queue;
		pthread_mutex_unlock(&w->lock);
		j->grant = rdma_grant_open(j->r, j->q.off, j->q.len, j->peer,
					   j->q.link_gen, j->keys, j->nkeys);
		pthread_mutex_lock(&w->lock);
		j->next = NULL;
		*w->made_tail = j;
		w->made_tail = &j->next;
		pthread_mutex_unlock(&w->lock);
		uint64_t one = 1;
		if (write(w->efd, &one, sizeof(one)) < 0)
			log_warn("RDMA grant worker: eventfd");
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void job_free(struct rdma_grant_job *j)
{
	region_put(j->r);
	free(j);
}

static void on_made(evutil_socket_t fd, short what, void *arg)
{
	struct rdma_grant_worker *w = arg;
	struct rdma_grant_job *j, *next;
	uint64_t n;
	(void)what;

	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warn("RDMA grant worker: eventfd");
	pthread_mutex_lock(&w->lock);
	j = w->made;
	w->made = NULL;
	w->made_tail = &w->made;
	pthread_mutex_unlock(&w->lock);
	for (; j; j = next) {
		next = j->next;
		w->done(w->arg, j);
		job_free(j);
	}
}

struct rdma_grant_worker *rdma_grant_worker_create(struct event_base *base,
						   rdma_grant_done_fn done,
						   void *arg)
{
	struct rdma_grant_worker *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->queue_tail = &w->queue;
	w->made_tail = &w->made;
	w->done = done;
	w->arg = arg;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->more, NULL);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0)
		goto err_efd;
	w->ev = event_new(base, w->efd, EV_READ | EV_PERSIST, on_made, w);
	if (!w->ev || event_add(w->ev, NULL))
		goto err_event;
	if (pthread_create(&w->thread, NULL, worker_main, w))
		goto err_event;
	return w;

err_event:
	if (w->ev)
		event_free(w->ev);
	close(w->efd);
err_efd:
	pthread_cond_destroy(&w->more);
	pthread_mutex_destroy(&w->lock);
	free(w);
	return NULL;
}

void rdma_grant_worker_submit(struct rdma_grant_worker *w,
			      struct rdma_grant_job *j)
{
	j->next = NULL;
	pthread_mutex_lock(&w->lock);
	*w->queue_tail = j;
	w->queue_tail = &j->next;
	pthread_cond_signal(&w->more);
	pthread_mutex_unlock(&w->lock);
}

void rdma_grant_worker_destroy(struct rdma_grant_worker *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->more);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	event_free(w->ev);
	close(w->efd);
	/* Grants first: the jobs' references may be their regions' last. */
	rdma_grant_end_all();
	struct rdma_grant_job *lists[2] = { w->queue, w->made };
	for (int i = 0; i < 2; i++)
		for (struct rdma_grant_job *j = lists[i], *next; j; j = next) {
			next = j->next;
			job_free(j);
		}
	pthread_cond_destroy(&w->more);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
