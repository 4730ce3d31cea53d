// SPDX-License-Identifier: Apache-2.0
/*
 * tcpbase - plain TCP between two processes: the baseline that xferd's
 * link between two nodes is measured against where iperf3 and UCX are
 * not installed (the GPU machines).
 *
 *   tcpbase server --port P [--cpu N]
 *   tcpbase pingpong --connect HOST:P [--size 8] [--iters 100000] [--cpu N]
 *   tcpbase stream --connect HOST:P [--size 16M] [--time-ms 1000] [--cpu N]
 *
 * pingpong: one message of --size bytes each way at a time, both ends
 * busy-polling non-blocking sockets (as xferd's progress thread and a
 * polling client do), TCP_NODELAY; prints p50 and p99 of the round trip.
 * stream: send() of --size bytes back to back for --time-ms, then the
 * server's count of what arrived; prints GB/s.  Lines "RES tcpbase ..."
 * are for the benchmark scripts.  The server serves one connection at a
 * time, forever.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/numparse.h"

enum { MODE_PINGPONG = 'p', MODE_STREAM = 's' };

struct opts {
	const char *connect;
	int port, cpu;
	uint64_t size, time_ms;
	unsigned iters;
};

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("tcpbase: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("cannot pin to CPU %d: %s", cpu, strerror(errno));
}

static uint64_t parse_size(const char *s)
{
	uint64_t v;

	if (numparse_size(s, 0, &v) || v == 0 || v > (1ull << 30))
		die("bad size '%s' (1 .. 1G, K/M/G suffixes)", s);
	return v;
}

static void nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("TCP_NODELAY: %s", strerror(errno));
}

/* Exactly n bytes, busy-polling when poll is set; false at EOF. */
static bool recv_all(int fd, void *p, size_t n, bool poll)
{
	while (n) {
		ssize_t k = recv(fd, p, n, poll ? MSG_DONTWAIT : 0);
		if (k == 0)
			return false;
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			die("recv: %s", strerror(errno));
		}
		p = (char *)p + k;
		n -= (size_t)k;
	}
	return true;
}

static void send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			die("send: %s", strerror(errno));
		}
		p = (const char *)p + k;
		n -= (size_t)k;
	}
}

/* A connection: mode byte and size, then the mode's traffic. */
static void serve(int fd)
{
	uint8_t hdr[9];
	uint64_t size;

	if (!recv_all(fd, hdr, sizeof(hdr), false))
		return;
	memcpy(&size, hdr + 1, 8);
	if (size == 0 || size > (1ull << 30))
		die("bad size from the client");
	char *buf = malloc(size);
	if (!buf)
		die("out of memory");
	if (hdr[0] == MODE_PINGPONG) {
		while (recv_all(fd, buf, size, true))
			send_all(fd, buf, size);
	} else {
		uint64_t total = 0;
		ssize_t k;
		while ((k = recv(fd, buf, size, 0)) != 0) {
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0)
				die("recv: %s", strerror(errno));
			total += (uint64_t)k;
		}
		send_all(fd, &total, sizeof(total));
	}
	free(buf);
}

static void run_server(const struct opts *o)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6,
				  .sin6_port = htons((uint16_t)o->port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	int one = 1, zero = 0;
	int s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		die("socket: %s", strerror(errno));
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 4))
		die("listen on port %d: %s", o->port, strerror(errno));
	printf("tcpbase: listening on port %d\n", o->port);
	fflush(stdout);
	for (;;) {
		int fd = accept(s, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			die("accept: %s", strerror(errno));
		}
		nodelay(fd);
		serve(fd);
		close(fd);
	}
}

static int dial(const char *hostport)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;

	if (!colon || (size_t)(colon - hostport) >= sizeof(host))
		die("--connect wants HOST:PORT, not '%s'", hostport);
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	int err = getaddrinfo(host, colon + 1, &hints, &ai);
	if (err)
		die("%s: %s", hostport, gai_strerror(err));
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen))
		die("connect %s: %s", hostport, strerror(errno));
	freeaddrinfo(ai);
	nodelay(fd);
	return fd;
}

static void hello(int fd, uint8_t mode, uint64_t size)
{
	uint8_t hdr[9] = { mode };

	memcpy(hdr + 1, &size, 8);
	send_all(fd, hdr, sizeof(hdr));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void run_pingpong(const struct opts *o)
{
	uint64_t size = o->size ? o->size : 8;
	unsigned iters = o->iters ? o->iters : 100000, warmup = iters / 10;
	uint64_t *ns = malloc(iters * sizeof(*ns));
	char *buf = calloc(1, size);
	int fd = dial(o->connect);

	if (!ns || !buf)
		die("out of memory");
	hello(fd, MODE_PINGPONG, size);
	for (unsigned i = 0; i < warmup + iters; i++) {
		uint64_t t0 = now_ns();
		send_all(fd, buf, size);
		if (!recv_all(fd, buf, size, true))
			die("the server closed the connection");
		if (i >= warmup)
			ns[i - warmup] = now_ns() - t0;
	}
	close(fd);
	qsort(ns, iters, sizeof(*ns), cmp_u64);
	double p50 = ns[iters / 2] / 1e3, p99 = ns[(size_t)(iters * 0.99)] / 1e3;
	printf("pingpong: %" PRIu64 " B each way, both ends busy-polling, "
	       "%u round trips: p50 %.3f us, p99 %.3f us\n", size, iters, p50,
	       p99);
	printf("RES tcpbase_lat %" PRIu64 "B lat_p50 %.4g us\n", size, p50);
	printf("RES tcpbase_lat %" PRIu64 "B lat_p99 %.4g us\n", size, p99);
	free(ns);
	free(buf);
}

static void run_stream(const struct opts *o)
{
	uint64_t size = o->size ? o->size : 16u << 20, total;
	uint64_t ms = o->time_ms ? o->time_ms : 1000;
	char *buf = malloc(size);
	int fd = dial(o->connect);

	if (!buf)
		die("out of memory");
	memset(buf, 0x5a, size);
	hello(fd, MODE_STREAM, size);
	uint64_t t0 = now_ns(), end = t0 + ms * 1000000u, sent = 0;
	while (now_ns() < end) {
		send_all(fd, buf, size);
		sent += size;
	}
	shutdown(fd, SHUT_WR);
	if (!recv_all(fd, &total, sizeof(total), false))
		die("the server closed without its count");
	double s = (double)(now_ns() - t0) / 1e9;
	close(fd);
	if (total != sent)
		die("the server counted %" PRIu64 " bytes of %" PRIu64, total,
		    sent);
	printf("stream: send() of %" PRIu64 " B for %" PRIu64 " ms: %.3f GB/s\n",
	       size, ms, (double)total / s / 1e9);
	printf("RES tcpbase_bw %" PRIu64 "B bw %.4g GB/s\n", size,
	       (double)total / s / 1e9);
	free(buf);
}

static void usage(void)
{
	fputs("usage: tcpbase server --port P [--cpu N]\n"
	      "       tcpbase pingpong --connect HOST:P [--size 8] "
	      "[--iters 100000] [--cpu N]\n"
	      "       tcpbase stream --connect HOST:P [--size 16M] "
	      "[--time-ms 1000] [--cpu N]\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = { .cpu = -1 };

	if (argc < 2)
		usage();
	for (int i = 2; i < argc; i++) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		if (!strcmp(k, "--connect"))
			o.connect = v;
		else if (!strcmp(k, "--port"))
			o.port = atoi(v);
		else if (!strcmp(k, "--cpu"))
			o.cpu = atoi(v);
		else if (!strcmp(k, "--size"))
			o.size = parse_size(v);
		else if (!strcmp(k, "--time-ms"))
			o.time_ms = strtoull(v, NULL, 10);
		else if (!strcmp(k, "--iters"))
			o.iters = (unsigned)strtoul(v, NULL, 10);
		else
			usage();
		i++;
	}
	pin(o.cpu);
	if (!strcmp(argv[1], "server")) {
		if (o.port <= 0 || o.port > 65535)
			die("server: --port 1..65535");
		run_server(&o);
	}
	if (!o.connect)
		usage();
	if (!strcmp(argv[1], "pingpong"))
		run_pingpong(&o);
	else if (!strcmp(argv[1], "stream"))
		run_stream(&o);
	else
		usage();
	return 0;
}
