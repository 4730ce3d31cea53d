// SPDX-License-Identifier: Apache-2.0
/* stages.c - see stages.h. */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stages.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

enum { S_SUBMIT_TAKEN, S_TAKEN_CQE, S_CQE_SEEN, S_TOTAL, S__COUNT };

static const char *const stage_names[S__COUNT] = {
	"submit_to_taken", "taken_to_cqe", "cqe_to_seen", "round_trip",
};

static uint32_t *cycles[S__COUNT];
static unsigned recorded, capacity;

uint64_t stages_tsc(void)
{
#if defined(__x86_64__)
	return __rdtsc();
#else
	return 0;
#endif
}

bool stages_begin(unsigned iters)
{
#if !defined(__x86_64__)
	(void)iters;
	return false;
#else
	for (int s = 0; s < S__COUNT; s++) {
		cycles[s] = calloc(iters, sizeof(uint32_t));
		if (!cycles[s])
			return false;
	}
	capacity = iters;
	recorded = 0;
	return true;
#endif
}

bool stages_record(unsigned i, uint64_t submit, uint64_t seen,
		   uint64_t handle)
{
	uint32_t taken = (uint32_t)(handle >> 32), written = (uint32_t)handle;

	if (handle == 0)
		return false;
	if (i >= capacity)
		return true;
	/* Differences of the low 32 bits: right for anything under a
	 * second or so. */
	cycles[S_SUBMIT_TAKEN][i] = taken - (uint32_t)submit;
	cycles[S_TAKEN_CQE][i] = written - taken;
	cycles[S_CQE_SEEN][i] = (uint32_t)seen - written;
	cycles[S_TOTAL][i] = (uint32_t)(seen - submit);
	if (i + 1 > recorded)
		recorded = i + 1;
	return true;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* TSC ticks per nanosecond, against the monotonic clock over 100 ms. */
static double tsc_per_ns(void)
{
	uint64_t n0 = mono_ns(), c0 = stages_tsc();
	struct timespec d = { 0, 100 * 1000 * 1000 };

	nanosleep(&d, NULL);
	return (double)(stages_tsc() - c0) / (double)(mono_ns() - n0);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double median_of(uint32_t *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_u32);
	return n ? v[n / 2] : 0;
}

/* --- the floor: one cache line between two CPUs --- */

#define PINGPONG_ROUNDS 200000u

struct pingpong {
	_Alignas(128) _Atomic uint64_t line;
	int cpu;
};

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *pong(void *arg)
{
	struct pingpong *pp = arg;

	pin(pp->cpu);
	for (uint64_t i = 1; i <= PINGPONG_ROUNDS; i++) {
		while (atomic_load_explicit(&pp->line, memory_order_acquire) !=
		       2 * i - 1)
			;
		atomic_store_explicit(&pp->line, 2 * i, memory_order_release);
	}
	return NULL;
}

/* Median cycles of one hand-over of a line (half a ping-pong). */
static double line_handover(int a, int b)
{
	static struct pingpong pp;
	uint32_t *rt = calloc(PINGPONG_ROUNDS, sizeof(*rt));
	pthread_t t;

	if (!rt)
		return 0;
	atomic_store(&pp.line, 0);
	pp.cpu = b;
	pin(a);
	if (pthread_create(&t, NULL, pong, &pp)) {
		free(rt);
		return 0;
	}
	for (uint64_t i = 1; i <= PINGPONG_ROUNDS; i++) {
		uint64_t t0 = stages_tsc();
		atomic_store_explicit(&pp.line, 2 * i - 1, memory_order_release);
		while (atomic_load_explicit(&pp.line, memory_order_acquire) !=
		       2 * i)
			;
		rt[i - 1] = (uint32_t)(stages_tsc() - t0);
	}
	pthread_join(t, NULL);
	double m = median_of(rt, PINGPONG_ROUNDS) / 2;
	free(rt);
	return m;
}

void stages_report(const char *variant, const char *size_label,
		   int client_cpu, int xferd_cpu)
{
	double hz = tsc_per_ns(), ns[S__COUNT];
	double floor_ns = line_handover(client_cpu, xferd_cpu) / hz;

	for (int s = 0; s < S__COUNT; s++)
		ns[s] = median_of(cycles[s], recorded) / hz;
	printf("stages (median ns of %u round trips; TSC %.3f GHz):\n",
	       recorded, hz);
	printf("  %-34s %8.1f\n", "submit -> xferd took the SQE",
	       ns[S_SUBMIT_TAKEN]);
	printf("  %-34s %8.1f\n", "xferd took the SQE -> CQE written",
	       ns[S_TAKEN_CQE]);
	printf("  %-34s %8.1f\n", "CQE written -> client saw it",
	       ns[S_CQE_SEEN]);
	printf("  %-34s %8.1f\n", "round trip", ns[S_TOTAL]);
	printf("  %-34s %8.1f  (CPU %d <-> CPU %d)\n",
	       "floor: one cache line handed over", floor_ns, client_cpu,
	       xferd_cpu);
	for (int s = 0; s < S__COUNT; s++)
		printf("RES xferbench_stages %s %s %s %.4g ns\n", variant,
		       size_label, stage_names[s], ns[s]);
	printf("RES xferbench_stages %s %s line_handover %.4g ns\n", variant,
	       size_label, floor_ns);
	/* The medians of the stages need not add up to the median round
	 * trip; each is a median of its own. */
	for (int s = 0; s < S__COUNT; s++)
		free(cycles[s]);
}
