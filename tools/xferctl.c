/*
 * xferctl.c - ask the local xferd how it is doing.
 *
 *   xferctl [--socket PATH] [--json] status|clients|regions
 *
 * One ctl.proto request on xferd's Unix socket, one reply, printed as
 * aligned text for people or as one JSON object for scripts.  Exit status:
 * 0 answered, 1 xferd not running, not answering or refusing, 2 bad usage.
 *
 * Everything printed that came from xferd is treated as untrusted: client
 * names are chosen by other processes, so text output replaces control
 * characters and invalid UTF-8 with '?', and JSON output escapes them.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.pb-c.h"
#include "wire.h"
#include "xferd.h" /* XFERD_VERSION: xferctl ships with the daemon it asks */

#define EXIT_USAGE 2
/* Long enough for a busy daemon, short enough for a script to go on. */
#define REPLY_TIMEOUT_S 5
#define STR_(x) #x
#define STR(x) STR_(x)

struct options {
	const char *socket; /* NULL: the default path */
	bool json;
};

struct command {
	const char *name;
	Xfer__Ctl__CtlMsg__BodyCase request, reply;
	void (*print_text)(const Xfer__Ctl__CtlMsg *r);
	void (*print_json)(const Xfer__Ctl__CtlMsg *r);
};

#define SYNOPSIS \
	"usage: xferctl [-s|--socket PATH] [-j|--json] status|clients|regions\n" \
	"       xferctl --help | --version\n"

/* After a usage error: the synopsis only, the details are in --help. */
static void usage_error(void)
{
	fprintf(stderr, SYNOPSIS "Try 'xferctl --help' for more.\n");
}

static void usage(void)
{
	printf(SYNOPSIS
		"\n"
		"Ask the local xferd how it is doing.\n"
		"\n"
		"commands:\n"
		"  status    version, uptime, counters, bytes moved per path\n"
		"  clients   connected processes and what each has moved\n"
		"  regions   registered memory: owner, kind, length, imports\n"
		"\n"
		"options:\n"
		"  -s, --socket PATH  xferd's socket (default: $XFERD_SOCKET, else\n"
		"                     $XDG_RUNTIME_DIR/xferd.sock, or\n"
		"                     /run/xferd/xferd.sock as root)\n"
		"  -j, --json         print one JSON object instead of text\n"
		"  -h, --help         print this text\n"
		"  -V, --version      print xferctl's version\n"
		"\n"
		"exit status: 0 answered, 1 xferd not running or not answering,\n"
		"2 bad usage\n");
}

/* The same rule as libxfer's xfer_open(NULL, ...). */
static void default_socket(char *out, size_t len)
{
	const char *env = getenv("XFERD_SOCKET");
	const char *rt = getenv("XDG_RUNTIME_DIR");

	if (env && *env)
		snprintf(out, len, "%s", env);
	else if (geteuid() == 0 || !rt || !*rt)
		snprintf(out, len, "/run/xferd/xferd.sock");
	else
		snprintf(out, len, "%s/xferd.sock", rt);
}

/* --- text that came from elsewhere --- */

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when invalid
 * (stray continuation, overlong form, surrogate, beyond U+10FFFF). */
static size_t utf8_len(const unsigned char *s)
{
	static const uint32_t least[] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t n = s[0] < 0x80 ? 1 : s[0] < 0xc0 ? 0 : s[0] < 0xe0 ? 2
		 : s[0] < 0xf0 ? 3 : s[0] < 0xf8 ? 4 : 0;
	uint32_t cp = s[0] & (0xff >> (n + 1));

	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (n == 0 || cp < least[n] || (cp >= 0xd800 && cp <= 0xdfff) ||
	    cp > 0x10ffff)
		return 0;
	return n;
}

/* Copy src for a terminal: control characters and invalid UTF-8 become
 * '?'; stops before a character that would not fit whole. */
static void text_clean(char *dst, size_t len, const char *src)
{
	const unsigned char *s = (const unsigned char *)(src ? src : "");
	size_t o = 0;

	while (*s) {
		size_t n = utf8_len(s);
		bool bad = n == 0 || *s < 0x20 || *s == 0x7f;
		size_t need = bad ? 1 : n;

		if (o + need >= len)
			break;
		if (bad)
			dst[o] = '?';
		else
			memcpy(dst + o, s, n);
		o += need;
		s += bad ? 1 : n;
	}
	dst[o] = '\0';
}

/* Columns a cleaned string takes: one per character, not per byte. */
static int text_width(const char *s)
{
	int w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

static void json_string(const char *src)
{
	const unsigned char *s = (const unsigned char *)(src ? src : "");

	putchar('"');
	while (*s) {
		size_t n = utf8_len(s);

		if (n == 0) {
			fputs("\\ufffd", stdout); /* not UTF-8: the replacement */
			s++;
			continue;
		}
		switch (*s) {
		case '"': fputs("\\\"", stdout); break;
		case '\\': fputs("\\\\", stdout); break;
		case '\b': fputs("\\b", stdout); break;
		case '\f': fputs("\\f", stdout); break;
		case '\n': fputs("\\n", stdout); break;
		case '\r': fputs("\\r", stdout); break;
		case '\t': fputs("\\t", stdout); break;
		default:
			if (*s < 0x20 || *s == 0x7f)
				printf("\\u%04x", *s);
			else
				fwrite(s, 1, n, stdout);
		}
		s += n;
	}
	putchar('"');
}

static void print_hex(const ProtobufCBinaryData *b)
{
	for (size_t i = 0; i < b->len; i++)
		printf("%02x", b->data[i]);
}

/* --- numbers for people --- */

static const char *fmt_bytes(char *buf, size_t len, uint64_t v)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB",
					      "PiB", "EiB" };
	double x = (double)v;
	unsigned u = 0;

	if (v < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", v);
		return buf;
	}
	x /= 1024;
	while (x >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		x /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", x, units[u]);
	return buf;
}

/* "42s", "5m07s", "2h03m", "3d04h": the two largest units. */
static const char *fmt_age(char *buf, size_t len, uint64_t ms)
{
	uint64_t s = ms / 1000;

	if (s < 60)
		snprintf(buf, len, "%" PRIu64 "s", s);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600,
			 s / 60 % 60);
	else
		snprintf(buf, len, "%" PRIu64 "d%02" PRIu64 "h", s / 86400,
			 s / 3600 % 24);
	return buf;
}

/* --- aligned tables --- */

#define TABLE_MAX_COLS 12
#define CELL_LEN 80

struct table {
	unsigned ncols;
	unsigned left;             /* bit per column: align left (text) */
	size_t nrows;              /* filled so far, header included */
	char (*cells)[CELL_LEN];   /* row-major; row 0 is the header */
};

/* Start a new row; its cells are filled with table_set(). */
static void table_row(struct table *t)
{
	t->nrows++;
}

/* Set column col of the last row; the text is cleaned for a terminal. */
__attribute__((format(printf, 3, 4)))
static void table_set(struct table *t, unsigned col, const char *fmt, ...)
{
	char raw[CELL_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	text_clean(t->cells[(t->nrows - 1) * t->ncols + col], CELL_LEN, raw);
}

/* A table for rows rows below header (NULL-terminated column names). */
static void table_init(struct table *t, size_t rows, unsigned left,
		       const char *const *header)
{
	*t = (struct table){ .left = left };
	while (t->ncols < TABLE_MAX_COLS && header[t->ncols])
		t->ncols++;
	t->cells = calloc((rows + 1) * t->ncols, CELL_LEN);
	if (!t->cells) {
		fprintf(stderr, "xferctl: out of memory\n");
		exit(1);
	}
	table_row(t);
	for (unsigned c = 0; c < t->ncols; c++)
		table_set(t, c, "%s", header[c]);
}

static void table_print(struct table *t)
{
	int width[TABLE_MAX_COLS] = { 0 };

	for (size_t r = 0; r < t->nrows; r++)
		for (unsigned c = 0; c < t->ncols; c++) {
			int w = text_width(t->cells[r * t->ncols + c]);
			if (w > width[c])
				width[c] = w;
		}
	for (size_t r = 0; r < t->nrows; r++) {
		for (unsigned c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c];
			int pad = width[c] - text_width(cell);
			bool left = t->left & 1u << c, last = c + 1 == t->ncols;

			if (!left)
				printf("%*s", pad, "");
			fputs(cell, stdout);
			if (left && !last)
				printf("%*s", pad, "");
			if (!last)
				fputs("  ", stdout);
		}
		putchar('\n');
	}
	free(t->cells);
	t->cells = NULL;
}

/* --- status --- */

static void print_status_text(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__StatusReply *st = r->status_reply;
	char b[32], clean[256];

	/* Keys right-aligned, so "key: value" reads the same for grep. */
	text_clean(clean, sizeof(clean), st->version);
	printf("      version: %s\n", clean);
	printf("  instance id: ");
	print_hex(&st->instance_id);
	putchar('\n');
	printf("          pid: %" PRIu32 "\n", st->pid);
	printf("       uptime: %s\n", fmt_age(b, sizeof(b), st->uptime_ms));
	text_clean(clean, sizeof(clean), st->socket_path);
	printf("       socket: %s\n", clean);
	printf("      workers: %" PRIu32 "\n", st->workers);
	printf("      clients: %" PRIu32 "\n", st->clients);
	printf("      regions: %" PRIu32 "\n", st->regions);
	printf("      imports: %" PRIu32 "\n", st->imports);
	printf("ops completed: %" PRIu64 "\n", st->ops_completed);
	printf("   ops failed: %" PRIu64 "\n", st->ops_failed);
	printf("  bytes moved: %s\n", fmt_bytes(b, sizeof(b), st->bytes_moved));
	printf("          rss: %s\n", fmt_bytes(b, sizeof(b), st->rss_bytes));
	if (st->n_paths == 0)
		return;

	static const char *const head[] = { "PATH", "OPS", "BYTES", NULL };
	struct table t;

	table_init(&t, st->n_paths, 1u << 0, head);
	for (size_t i = 0; i < st->n_paths; i++) {
		const Xfer__Ctl__PathCount *p = st->paths[i];
		table_row(&t);
		table_set(&t, 0, "%s", p->path);
		table_set(&t, 1, "%" PRIu64, p->ops);
		table_set(&t, 2, "%s", fmt_bytes(b, sizeof(b), p->bytes));
	}
	putchar('\n');
	table_print(&t);
}

static void print_status_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__StatusReply *st = r->status_reply;

	printf("{\"version\":");
	json_string(st->version);
	printf(",\"instance_id\":\"");
	print_hex(&st->instance_id);
	printf("\",\"pid\":%" PRIu32 ",\"uptime_ms\":%" PRIu64
	       ",\"socket_path\":", st->pid, st->uptime_ms);
	json_string(st->socket_path);
	printf(",\"workers\":%" PRIu32 ",\"clients\":%" PRIu32
	       ",\"regions\":%" PRIu32 ",\"imports\":%" PRIu32
	       ",\"ops_completed\":%" PRIu64 ",\"ops_failed\":%" PRIu64
	       ",\"bytes_moved\":%" PRIu64 ",\"rss_bytes\":%" PRIu64
	       ",\"paths\":[",
	       st->workers, st->clients, st->regions, st->imports,
	       st->ops_completed, st->ops_failed, st->bytes_moved,
	       st->rss_bytes);
	for (size_t i = 0; i < st->n_paths; i++) {
		printf("%s{\"path\":", i ? "," : "");
		json_string(st->paths[i]->path);
		printf(",\"ops\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
		       st->paths[i]->ops, st->paths[i]->bytes);
	}
	printf("]}\n");
}

/* --- clients --- */

static void print_clients_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = {
		"ID", "PID", "UID", "NAME", "REGIONS", "IMPORTS", "OPS",
		"FAILED", "BYTES", "SQ", "AGE", NULL
	};
	const Xfer__Ctl__ClientsReply *rep = r->clients_reply;
	struct table t;
	char b[32];

	if (rep->n_clients == 0) {
		printf("no clients\n");
		return;
	}
	table_init(&t, rep->n_clients, 1u << 3, head);
	for (size_t i = 0; i < rep->n_clients; i++) {
		const Xfer__Ctl__ClientInfo *c = rep->clients[i];
		table_row(&t);
		table_set(&t, 0, "%" PRIu64, c->id);
		table_set(&t, 1, "%" PRIu32, c->pid);
		table_set(&t, 2, "%" PRIu32, c->uid);
		table_set(&t, 3, "%s", c->name);
		table_set(&t, 4, "%" PRIu32, c->regions);
		table_set(&t, 5, "%" PRIu32, c->imports);
		table_set(&t, 6, "%" PRIu64, c->ops_completed);
		table_set(&t, 7, "%" PRIu64, c->ops_failed);
		table_set(&t, 8, "%s", fmt_bytes(b, sizeof(b), c->bytes_moved));
		table_set(&t, 9, "%" PRIu32, c->sq_entries);
		table_set(&t, 10, "%s", fmt_age(b, sizeof(b), c->connected_ms));
	}
	table_print(&t);
}

static void print_clients_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__ClientsReply *rep = r->clients_reply;

	printf("{\"clients\":[");
	for (size_t i = 0; i < rep->n_clients; i++) {
		const Xfer__Ctl__ClientInfo *c = rep->clients[i];
		printf("%s{\"id\":%" PRIu64 ",\"pid\":%" PRIu32
		       ",\"uid\":%" PRIu32 ",\"name\":",
		       i ? "," : "", c->id, c->pid, c->uid);
		json_string(c->name);
		printf(",\"regions\":%" PRIu32 ",\"imports\":%" PRIu32
		       ",\"ops_completed\":%" PRIu64 ",\"ops_failed\":%" PRIu64
		       ",\"bytes_moved\":%" PRIu64 ",\"sq_entries\":%" PRIu32
		       ",\"connected_ms\":%" PRIu64 "}",
		       c->regions, c->imports, c->ops_completed, c->ops_failed,
		       c->bytes_moved, c->sq_entries, c->connected_ms);
	}
	printf("]}\n");
}

/* --- regions --- */

static int by_handle(const void *a, const void *b)
{
	const Xfer__Ctl__RegionInfo *x = *(Xfer__Ctl__RegionInfo *const *)a;
	const Xfer__Ctl__RegionInfo *y = *(Xfer__Ctl__RegionInfo *const *)b;

	return (x->handle > y->handle) - (x->handle < y->handle);
}

static void print_regions_text(const Xfer__Ctl__CtlMsg *r)
{
	static const char *const head[] = {
		"HANDLE", "OWNER", "KIND", "LENGTH", "IMPORTS", "ADDR", NULL
	};
	const Xfer__Ctl__RegionsReply *rep = r->regions_reply;
	struct table t;
	char b[32];

	if (rep->n_regions == 0) {
		printf("no regions\n");
		return;
	}
	table_init(&t, rep->n_regions, 1u << 2 | 1u << 5, head);
	for (size_t i = 0; i < rep->n_regions; i++) {
		const Xfer__Ctl__RegionInfo *g = rep->regions[i];
		table_row(&t);
		table_set(&t, 0, "%" PRIu64, g->handle);
		table_set(&t, 1, "%" PRIu64, g->owner);
		table_set(&t, 2, "%s", g->kind);
		table_set(&t, 3, "%s", fmt_bytes(b, sizeof(b), g->length));
		table_set(&t, 4, "%" PRIu32, g->refs);
		if (g->addr)
			table_set(&t, 5, "0x%" PRIx64, g->addr);
		else
			table_set(&t, 5, "-");
	}
	table_print(&t);
}

static void print_regions_json(const Xfer__Ctl__CtlMsg *r)
{
	const Xfer__Ctl__RegionsReply *rep = r->regions_reply;

	printf("{\"regions\":[");
	for (size_t i = 0; i < rep->n_regions; i++) {
		const Xfer__Ctl__RegionInfo *g = rep->regions[i];
		printf("%s{\"handle\":%" PRIu64 ",\"owner\":%" PRIu64
		       ",\"kind\":", i ? "," : "", g->handle, g->owner);
		json_string(g->kind);
		printf(",\"length\":%" PRIu64 ",\"imports\":%" PRIu32
		       ",\"addr\":%" PRIu64 "}", g->length, g->refs, g->addr);
	}
	printf("]}\n");
}

static const struct command commands[] = {
	{ "status", XFER__CTL__CTL_MSG__BODY_STATUS,
	  XFER__CTL__CTL_MSG__BODY_STATUS_REPLY,
	  print_status_text, print_status_json },
	{ "clients", XFER__CTL__CTL_MSG__BODY_CLIENTS,
	  XFER__CTL__CTL_MSG__BODY_CLIENTS_REPLY,
	  print_clients_text, print_clients_json },
	{ "regions", XFER__CTL__CTL_MSG__BODY_REGIONS,
	  XFER__CTL__CTL_MSG__BODY_REGIONS_REPLY,
	  print_regions_text, print_regions_json },
};

/* --- talking to xferd --- */

/* A connected socket, or -errno. */
static int connect_xferd(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* A wedged xferd must not hang us: the send timeout also bounds a
	 * connect() waiting on a full listen backlog, the receive timeout
	 * the wait for the answer. */
	struct timeval tv = { .tv_sec = REPLY_TIMEOUT_S };
	size_t len = strlen(path);
	int fd;

	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, len + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* Say why talking to xferd at path failed; the exit status is 1. */
static int report(const char *path, int err)
{
	const char *why, *end = "";

	switch (err) {
	case -ENOENT:
		why = "xferd is not running (no socket at";
		end = ")";
		break;
	case -ECONNREFUSED:
		why = "xferd is not running (nothing listens on";
		end = ")";
		break;
	case -EACCES:
	case -EPERM:
		why = "permission denied on";
		end = " (the socket is mode 0660: run as xferd's user or group)";
		break;
	case -EAGAIN:
		why = "xferd did not answer within " STR(REPLY_TIMEOUT_S) " s on";
		break;
	case -ENAMETOOLONG:
		why = "socket path too long:";
		break;
	case -ECONNRESET:
	case -EPIPE:
		why = "xferd closed the connection without an answer on";
		end = " (see its log)";
		break;
	case -EMSGSIZE:
	case -EPROTO:
		why = "malformed answer from xferd on";
		break;
	default:
		fprintf(stderr, "xferctl: cannot talk to xferd on %s: %s\n",
			path, strerror(-err));
		return 1;
	}
	fprintf(stderr, "xferctl: %s %s%s\n", why, path, end);
	return 1;
}

/*
 * Ask cmd's question; on success *out is the reply (free it with
 * xfer__ctl__ctl_msg__free_unpacked) and 0 is returned, otherwise the
 * reason has been printed and the exit status is returned.
 */
static int ask(const char *path, const struct command *cmd,
	       Xfer__Ctl__CtlMsg **out)
{
	Xfer__Ctl__CtlMsg m = XFER__CTL__CTL_MSG__INIT;
	Xfer__Ctl__StatusRequest status = XFER__CTL__STATUS_REQUEST__INIT;
	Xfer__Ctl__ClientsRequest clients = XFER__CTL__CLIENTS_REQUEST__INIT;
	Xfer__Ctl__RegionsRequest regions = XFER__CTL__REGIONS_REQUEST__INIT;
	static uint8_t pkt[WIRE_MAX_PACKET]; /* too big for a polite stack */
	Xfer__Ctl__CtlMsg *r = NULL;
	int fds[WIRE_MAX_FDS];
	unsigned nfds = 0;
	ssize_t n;
	int sock, err;

	m.proto_version = XFER_PROTO_VERSION;
	m.body_case = cmd->request;
	switch (cmd->request) {
	case XFER__CTL__CTL_MSG__BODY_STATUS: m.status = &status; break;
	case XFER__CTL__CTL_MSG__BODY_CLIENTS: m.clients = &clients; break;
	case XFER__CTL__CTL_MSG__BODY_REGIONS: m.regions = &regions; break;
	default: return report(path, -EINVAL);
	}
	sock = connect_xferd(path);
	if (sock < 0)
		return report(path, sock);
	err = wire_send(sock, WIRE_TAG_CTL, &m.base, NULL, 0);
	n = err ? err : wire_recv(sock, pkt, fds, &nfds);
	close(sock);
	if (n <= 0)
		return report(path, n == 0 ? -ECONNRESET : (int)n);
	if (nfds) { /* ctl replies never carry descriptors */
		wire_close_fds(fds, &nfds);
		return report(path, -EMSGSIZE);
	}
	if (wire_tag(pkt, (size_t)n) == WIRE_TAG_CTL)
		r = xfer__ctl__ctl_msg__unpack(NULL, (size_t)n - WIRE_TAG_LEN,
					       pkt + WIRE_TAG_LEN);
	if (!r)
		return report(path, -EPROTO);
	/* An error is shown whatever its version: it says why. */
	if (r->body_case == XFER__CTL__CTL_MSG__BODY_ERROR) {
		char msg[256];
		int e = r->error->error < 0 ? -r->error->error : r->error->error;
		text_clean(msg, sizeof(msg), r->error->message);
		fprintf(stderr, "xferctl: xferd: %s%s%s%s\n",
			*msg ? msg : "no reason given",
			e ? " (" : "", e ? strerror(e) : "", e ? ")" : "");
	} else if (r->proto_version != XFER_PROTO_VERSION) {
		fprintf(stderr, "xferctl: xferd speaks protocol version %" PRIu32
			", xferctl %u: use the xferctl that came with it\n",
			r->proto_version, XFER_PROTO_VERSION);
	} else if (r->body_case != cmd->reply) {
		fprintf(stderr, "xferctl: xferd answered '%s' with the wrong "
			"message (%d)\n", cmd->name, (int)r->body_case);
	} else {
		*out = r;
		return 0;
	}
	xfer__ctl__ctl_msg__free_unpacked(r, NULL);
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct options opt = { 0 };
	const struct command *cmd = NULL;
	char default_path[4096];
	const char *path;
	Xfer__Ctl__CtlMsg *reply = NULL;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "s:jhV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			opt.socket = optarg;
			break;
		case 'j':
			opt.json = true;
			break;
		case 'h':
			usage();
			return 0;
		case 'V':
			printf("xferctl %s (protocol %u)\n", XFERD_VERSION,
			       XFER_PROTO_VERSION);
			return 0;
		default: /* getopt_long said what was wrong */
			usage_error();
			return EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "xferctl: %s\n", optind == argc
			? "no command given" : "one command at a time");
		usage_error();
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[optind], commands[i].name))
			cmd = &commands[i];
	if (!cmd) {
		fprintf(stderr, "xferctl: unknown command '%s'\n", argv[optind]);
		usage_error();
		return EXIT_USAGE;
	}
	if (opt.socket && !*opt.socket) {
		fprintf(stderr, "xferctl: empty socket path\n");
		usage_error();
		return EXIT_USAGE;
	}
	path = opt.socket;
	if (!path) {
		default_socket(default_path, sizeof(default_path));
		path = default_path;
	}
	rc = ask(path, cmd, &reply);
	if (rc)
		return rc;
	/* xferd lists regions in hash order; people want handle order.  An
	 * empty list has no array at all. */
	if (reply->body_case == XFER__CTL__CTL_MSG__BODY_REGIONS_REPLY &&
	    reply->regions_reply->n_regions > 1)
		qsort(reply->regions_reply->regions,
		      reply->regions_reply->n_regions,
		      sizeof(*reply->regions_reply->regions), by_handle);
	(opt.json ? cmd->print_json : cmd->print_text)(reply);
	xfer__ctl__ctl_msg__free_unpacked(reply, NULL);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "xferctl: writing the answer: %s\n",
			strerror(errno));
		return 1;
	}
	return 0;
}
