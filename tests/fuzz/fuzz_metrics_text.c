/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_metrics_text.c - the Prometheus text of a snapshot whose names
 * and numbers are arbitrary bytes (ops/metrics_text.c): client names are
 * chosen by any local process, peer names by other nodes.
 *
 * Invariants: the writer succeeds, and every line it writes is valid
 * exposition format (tests/unit/expo_check.h): names, escaped label
 * values, numbers, a TYPE before each family's samples.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#include "../unit/expo_check.h"
#include "fuzz.h"
#include "ops/metrics_text.h"
#include "ops/stats.h"

struct cursor {
	const uint8_t *p;
	size_t left;
};

static uint64_t take_u64(struct cursor *c)
{
	uint64_t v = 0;
	size_t n = c->left < sizeof(v) ? c->left : sizeof(v);

	memcpy(&v, c->p, n);
	c->p += n;
	c->left -= n;
	return v;
}

/* A name: up to its length byte's worth of the input, NUL-terminated. */
static void take_name(struct cursor *c, char *dst, size_t cap)
{
	size_t n = c->left ? *c->p % cap : 0;

	if (c->left) {
		c->p++;
		c->left--;
	}
	if (n > c->left)
		n = c->left;
	memcpy(dst, c->p, n);
	dst[n] = '\0';
	c->p += n;
	c->left -= n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct stats_snapshot s;
	struct cursor c = { data, size };
	uint64_t shape = take_u64(&c);

	memset(&s, 0, sizeof(s));
	s.version = "0.1.0";
	s.uptime_ms = take_u64(&c);
	s.ops_completed = take_u64(&c);
	for (unsigned p = 0; p < XFER_PATH__COUNT; p++) {
		s.paths[p].bytes = take_u64(&c);
		for (unsigned b = 0; b <= LAT_BOUNDS; b += 7)
			s.paths[p].lat[b] = take_u64(&c) & 0xffffffff;
		s.paths[p].lat_sum_ns = take_u64(&c);
		s.paths[p].nerrors = (unsigned)(take_u64(&c) % 4);
		for (unsigned e = 0; e < s.paths[p].nerrors; e++)
			s.paths[p].errors[e] = (struct stats_errno){
				.err = (int)(take_u64(&c) % 300),
				.count = take_u64(&c) };
	}
	s.ntop = (unsigned)(shape % (STATS_CLIENTS_TOP + 1));
	for (unsigned i = 0; i < s.ntop; i++) {
		s.top[i].pid = (uint32_t)take_u64(&c);
		s.top[i].bytes = take_u64(&c);
		take_name(&c, s.top[i].name, sizeof(s.top[i].name));
	}
	s.other.count = (uint32_t)(shape >> 8) & 3;
	s.npeers = (unsigned)((shape >> 16) % 9);
	for (unsigned i = 0; i < s.npeers; i++) {
		take_name(&c, s.peers[i].name, sizeof(s.peers[i].name));
		take_name(&c, s.peers[i].state, sizeof(s.peers[i].state));
		s.peers[i].rtt_ns = take_u64(&c);
	}
	s.nrails = (unsigned)((shape >> 24) % 5);
	for (unsigned i = 0; i < s.nrails; i++) {
		take_name(&c, s.rails[i].device, sizeof(s.rails[i].device));
		s.rails[i].port = (uint32_t)take_u64(&c);
	}
	s.staging = (shape >> 32) & 1;

	struct evbuffer *out = evbuffer_new();
	if (!out)
		return 0;
	FUZZ_ASSERT(metrics_text_write(&s, out) == 0);
	size_t n = evbuffer_get_length(out);
	const char *text = (const char *)evbuffer_pullup(out, -1);
	FUZZ_ASSERT(n == 0 || text);
	FUZZ_ASSERT(expo_check(text, n) == 0);
	evbuffer_free(out);
	return 0;
}
