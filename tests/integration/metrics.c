/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - the Prometheus endpoint of a private xferd against what
 * this test did: bytes, ops and errors by errno per path, the latency
 * histogram's count, this client's row; the text passes promtool; the
 * endpoint answers garbage with errors and survives 1000 connections at
 * once, and xferd moves bytes afterwards.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#define LEN    (1u << 20)
#define SIZE   4096u     /* bytes per write and read */
#define WRITES 300u
#define READS  100u
#define BAD_RANGE 7u     /* out of bounds: -ERANGE */
#define BAD_OP    5u     /* unknown opcode: -EINVAL */
#define CONNS  1000

static uint16_t port;

static int connect_endpoint(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	T_ASSERT(fd >= 0, "socket: %s", strerror(errno));
	T_ASSERT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		 "connect to the metrics port %u: %s", port, strerror(errno));
	return fd;
}

/* Send req, read the whole answer (the server closes); malloc'd.
 * half_close: then say that nothing more comes (a request cut short
 * ends there, not at the server's timeout). */
static char *http(const char *req, size_t req_len, bool half_close)
{
	int fd = connect_endpoint();
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	struct timeval tv = { 10, 0 };

	T_ASSERT(buf, "out of memory");
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	tl_write_full(fd, req, req_len);
	if (half_close)
		shutdown(fd, SHUT_WR);
	for (;;) {
		if (n + 1 == cap) {
			buf = realloc(buf, cap *= 2);
			T_ASSERT(buf, "out of memory");
		}
		ssize_t got = read(fd, buf + n, cap - n - 1);
		T_ASSERT(got >= 0, "reading the answer: %s", strerror(errno));
		if (got == 0)
			break;
		n += (size_t)got;
	}
	buf[n] = '\0';
	close(fd);
	return buf;
}

/* GET /metrics: the body (after the headers), status 200 checked. */
static char *scrape(void)
{
	static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n"
				  "Connection: close\r\n\r\n";
	char *all = http(req, sizeof(req) - 1, false);
	char *body = strstr(all, "\r\n\r\n");

	T_ASSERT(!strncmp(all, "HTTP/1.1 200", 12), "answer: %.80s", all);
	T_ASSERT(strstr(all, "text/plain; version=0.0.4"),
		 "no exposition content type: %.300s", all);
	T_ASSERT(body, "no end of headers");
	body = strdup(body + 4);
	free(all);
	return body;
}

/* The value of the series written exactly as key ("name{labels}"). */
static double value(const char *text, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return strtod(p + kl + 1, NULL);
	T_ASSERT(0, "no series %s in the scrape:\n%s", key, text);
	return 0;
}

static bool has(const char *text, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return true;
	return false;
}

static void expect(const char *text, const char *key, double want)
{
	double got = value(text, key);

	T_ASSERT(got == want, "%s is %.0f, the test did %.0f", key, got, want);
}

/* promtool check metrics on text: exit status 0 and no complaint. */
static void promtool(const char *text)
{
	char path[] = "/tmp/xferd-metrics.XXXXXX", cmd[256];
	int fd = mkstemp(path);

	T_ASSERT(fd >= 0, "mkstemp: %s", strerror(errno));
	tl_write_full(fd, text, strlen(text));
	close(fd);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
	FILE *p = popen(cmd, "r");
	char out[4096] = "";
	size_t n = p ? fread(out, 1, sizeof(out) - 1, p) : 0;
	out[n] = '\0';
	int st = p ? pclose(p) : -1;
	unlink(path);
	T_ASSERT(st == 0 && n == 0, "promtool check metrics: status %d: %s",
		 st, out);
}

/* One descriptor, waited for; its result. */
static int64_t one(struct xfer_ctx *ctx, unsigned op, uint64_t local,
		   uint64_t loff, uint64_t remote, uint64_t roff, uint32_t len)
{
	struct xfer_sqe *sqe = xfer_get_sqe(ctx);

	T_ASSERT(sqe, "no SQE");
	xfer_prep_rw(sqe, op, local, loff, remote, roff, len, 1);
	return tl_submit_wait(ctx).result;
}

static void garbage(void)
{
	static const char *const reqs[] = {
		"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  /* TLS hello */
		"GET /metrics\r\n\r\n",
		"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
		"BREW /pot HTCPCP/1.0\r\n\r\n",
		"GET /metrics HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"GET /../../etc/passwd HTTP/1.1\r\n\r\n",
		"\r\n\r\n\r\n",
		"GET /metrics HTTP/9.9\r\n\r\n",
		"GET /metrics?x=%zz HTTP/1.0\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++)
		free(http(reqs[i], strlen(reqs[i]), true));
	/* 64 KiB of header: past the limit. */
	size_t big = 65536;
	char *req = malloc(big + 64);
	T_ASSERT(req, "out of memory");
	int n = snprintf(req, 64, "GET /metrics HTTP/1.1\r\nX: ");
	memset(req + n, 'a', big);
	memcpy(req + n + big, "\r\n\r\n", 4);
	free(http(req, (size_t)n + big + 4, true));
	/* Random bytes. */
	for (size_t i = 0; i < big; i++)
		req[i] = (char)(rand() & 0xff);
	free(http(req, big, true));
	free(req);
	char *nf = http("GET /nothing HTTP/1.0\r\n\r\n", 25, false);
	T_ASSERT(!strncmp(nf, "HTTP/1.", 7) && !strncmp(nf + 9, "404", 3),
		 "not 404: %.80s", nf);
	free(nf);
}

/* CONNS connections at once, each sending part of a request or
 * nothing, then all closed. */
static void many_connections(void)
{
	static int fds[CONNS];

	for (int i = 0; i < CONNS; i++) {
		fds[i] = connect_endpoint();
		if (i % 3 == 1)
			tl_write_full(fds[i], "GET /metr", 9);
		else if (i % 3 == 2)
			tl_write_full(fds[i], "GET /metrics HTTP/1.1\r\n\r\n", 25);
	}
	/* While they are all open, a scrape still gets its answer. */
	char *t = scrape();
	T_ASSERT(strstr(t, "xferd_build_info"), "scrape during the flood");
	free(t);
	for (int i = 0; i < CONNS; i++)
		close(fds[i]);
}

int main(void)
{
	struct tl_daemon d;
	char listen[64], key[256];
	struct tl_buf a, b;
	struct xfer_remote *rb;
	uint8_t tok[XFER_TOKEN_MAX];

	port = tl_free_port();
	snprintf(listen, sizeof(listen), "metrics_listen=127.0.0.1:%u", port);
	const char *args[] = { listen, NULL };
	tl_daemon_start(&d, args);

	char *t0 = scrape();
	expect(t0, "xferd_path_ops_total{path=\"memcpy\"}", 0);
	free(t0);

	struct xfer_ctx *ctx;
	T_OK(xfer_open(d.socket, &ctx));
	tl_buf_alloc(ctx, TL_HOST, LEN, &a);
	tl_buf_alloc(ctx, TL_HOST, LEN, &b);
	size_t tl = tl_export(&b, tok);
	T_OK(xfer_import(ctx, tok, tl, &rb));
	uint64_t rh = xfer_remote_handle(rb);

	for (unsigned i = 0; i < WRITES; i++) {
		uint64_t off = (uint64_t)i * SIZE % LEN;
		tl_fill(a.ptr + off, SIZE, i);
		T_ASSERT(one(ctx, XFER_OP_WRITE, a.handle, off, rh, off, SIZE) ==
			 SIZE, "write %u", i);
		T_ASSERT(tl_check(b.ptr + off, SIZE, i) == 0,
			 "write %u: wrong bytes arrived", i);
	}
	for (unsigned i = 0; i < READS; i++)
		T_ASSERT(one(ctx, XFER_OP_READ, a.handle, 0, rh, LEN - SIZE,
			     SIZE) == SIZE, "read %u", i);
	for (unsigned i = 0; i < BAD_RANGE; i++)
		T_ASSERT(one(ctx, XFER_OP_WRITE, a.handle, 0, rh, LEN - 8, 64) ==
			 -ERANGE, "out of bounds");
	for (unsigned i = 0; i < BAD_OP; i++)
		T_ASSERT(one(ctx, 200, a.handle, 0, rh, 0, 64) == -EINVAL,
			 "bad opcode");

	char *t = scrape();
	unsigned ops = WRITES + READS, bad = BAD_RANGE + BAD_OP;
	expect(t, "xferd_path_ops_total{path=\"memcpy\"}", ops);
	expect(t, "xferd_path_bytes_total{path=\"memcpy\"}", (double)ops * SIZE);
	expect(t, "xferd_path_ops_total{path=\"cma\"}", 0);
	expect(t, "xferd_path_errors_total{path=\"none\",errno=\"ERANGE\"}",
	       BAD_RANGE);
	expect(t, "xferd_path_errors_total{path=\"none\",errno=\"EINVAL\"}",
	       BAD_OP);
	expect(t, "xferd_completions_total", ops + bad);
	expect(t, "xferd_completions_failed_total", bad);
	expect(t, "xferd_completion_latency_seconds_count{path=\"memcpy\"}",
	       ops);
	expect(t, "xferd_completion_latency_seconds_bucket{path=\"memcpy\","
	       "le=\"+Inf\"}", ops);
	expect(t, "xferd_completion_latency_seconds_count{path=\"none\"}", bad);
	expect(t, "xferd_clients", 1);
	expect(t, "xferd_regions", 2);
	snprintf(key, sizeof(key), "xferd_client_bytes_total{uid=\"%d\","
		 "client=\"metrics\"}", (int)getuid());
	expect(t, key, (double)ops * SIZE);
	snprintf(key, sizeof(key), "xferd_client_ops_total{uid=\"%d\","
		 "client=\"metrics\"}", (int)getuid());
	expect(t, key, ops + bad);
	snprintf(key, sizeof(key), "xferd_client_failed_total{uid=\"%d\","
		 "client=\"metrics\"}", (int)getuid());
	expect(t, key, bad);
	snprintf(key, sizeof(key), "xferd_client_in_flight{uid=\"%d\","
		 "client=\"metrics\"}", (int)getuid());
	expect(t, key, 0);
	T_ASSERT(!strstr(t, "pid=\""), "a pid label (one series per process)");
	T_ASSERT(has(t, "process_resident_memory_bytes") &&
		 has(t, "process_open_fds") && has(t, "process_max_fds") &&
		 has(t, "process_cpu_seconds_total") &&
		 has(t, "process_start_time_seconds") &&
		 has(t, "process_virtual_memory_bytes"),
		 "the standard process_* series");
	T_ASSERT(!has(t, "xferd_client_bytes_total{uid=\"\",client=\"other\"}"),
		 "an \"other\" row with one client");
	if (system("command -v promtool >/dev/null") == 0)
		promtool(t);
	else
		printf("promtool not installed (make deps): format not "
		       "checked\n");
	free(t);

	garbage();
	many_connections();

	/* Still alive, still moving and counting. */
	tl_fill(a.ptr, SIZE, 99);
	T_ASSERT(one(ctx, XFER_OP_WRITE, a.handle, 0, rh, 0, SIZE) == SIZE,
		 "write after the flood");
	T_ASSERT(tl_check(b.ptr, SIZE, 99) == 0, "bytes after the flood");
	t = scrape();
	expect(t, "xferd_path_ops_total{path=\"memcpy\"}", ops + 1);
	free(t);

	T_OK(xfer_unimport(ctx, rb));
	tl_buf_free(ctx, &a);
	tl_buf_free(ctx, &b);
	xfer_close(ctx);
	T_ASSERT(tl_daemon_stop(&d) == 0, "xferd did not stop cleanly");
	printf("ok: %u ops, %u errors counted; promtool; garbage; %d "
	       "connections\n", ops, bad, CONNS);
	return 0;
}
