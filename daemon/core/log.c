/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - leveled logging to stderr or the journal, rate-limited per
 * call site (log.h).
 *
 * Any thread logs.  One mutex guards the rate-limit state of every call
 * site: logging is never on a hot path, and a line is a write(2) anyway.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_SYSTEMD
/* The location is the call site's (struct log_site), not log.c's. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>
#endif

#include "common/clock.h"
#include "core/log.h"

/* Read by every thread, changed by SIGHUP on the main thread. */
static _Atomic int log_level = LOG_LVL_INFO;
static _Atomic int journal;
static bool stream_journal;   /* stderr is a journal stream */
static pthread_mutex_t site_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = { "error", "warn", "info", "debug" };
/* syslog priorities: err, warning, info, debug */
static const int level_prio[] = { 3, 4, 6, 7 };

/* systemd sets JOURNAL_STREAM to "DEV:INODE" of the stream it connected
 * to the journal; it is ours only if stderr is still that stream (a
 * child started from a shell under a unit inherits the variable). */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2)
		return false;
	return fstat(STDERR_FILENO, &st) == 0 &&
	       (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void log_init(int level)
{
	stream_journal = stderr_is_journal();
	log_set_target(LOG_TARGET_AUTO);
	log_set_level(level);
}

enum log_target log_set_target(enum log_target t)
{
	if (t == LOG_TARGET_AUTO)
		t = stderr_is_journal() ? LOG_TARGET_JOURNAL : LOG_TARGET_STDERR;
#ifndef HAVE_SYSTEMD
	t = LOG_TARGET_STDERR;
#endif
	atomic_store_explicit(&journal, t == LOG_TARGET_JOURNAL,
			      memory_order_relaxed);
	return t;
}

void log_set_level(int level)
{
	if (level < LOG_LVL_ERR)
		level = LOG_LVL_ERR;
	if (level > LOG_LVL_DEBUG)
		level = LOG_LVL_DEBUG;
	atomic_store_explicit(&log_level, level, memory_order_relaxed);
}

int log_get_level(void)
{
	return atomic_load_explicit(&log_level, memory_order_relaxed);
}

int log_level_parse(const char *name)
{
	for (int i = 0; i <= LOG_LVL_DEBUG; i++)
		if (strcmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

const char *log_level_name(int level)
{
	return level >= 0 && level <= LOG_LVL_DEBUG ? level_names[level] : "?";
}

/*
 * May this site log now?  *suppressed: lines it dropped since the last
 * one that passed.  A token bucket of LOG_BURST lines refilled at
 * LOG_PER_SEC, in thousandths so that slow refills are not lost.
 */
static bool site_admit(struct log_site *site, uint32_t *suppressed)
{
	uint64_t now = now_ns();
	bool ok;

	pthread_mutex_lock(&site_lock);
	if (!site->started) {
		site->started = true;
		site->tokens = LOG_BURST * 1000;
	} else {
		uint64_t add = (now - site->last_ns) / (1000000u / LOG_PER_SEC);
		uint64_t t = site->tokens + add;
		site->tokens = t > LOG_BURST * 1000 ? LOG_BURST * 1000
						     : (uint32_t)t;
	}
	site->last_ns = now;
	ok = site->tokens >= 1000;
	if (ok) {
		site->tokens -= 1000;
		*suppressed = site->suppressed;
		site->suppressed = 0;
	} else {
		site->suppressed++;
	}
	pthread_mutex_unlock(&site_lock);
	return ok;
}

#ifdef HAVE_SYSTEMD
static int journal_send(const struct log_site *site, int level,
			const struct log_fields *f, const char *msg)
{
	char file[256], line[32], pid[48], peer[160], err[48], errno_f[32];

	snprintf(file, sizeof(file), "CODE_FILE=%s", site ? site->file : "");
	snprintf(line, sizeof(line), "CODE_LINE=%d", site ? site->line : 0);
	/* sd_journal_send takes a NULL-terminated list: unset fields are
	 * passed as a harmless repeat of the identifier. */
	const char *ident = "SYSLOG_IDENTIFIER=xferd";
	const char *fp = ident, *fq = ident, *fe = ident, *fn = ident;
	if (f && f->client_pid > 0) {
		snprintf(pid, sizeof(pid), "XFERD_CLIENT_PID=%d", f->client_pid);
		fp = pid;
	}
	if (f && f->peer && *f->peer) {
		snprintf(peer, sizeof(peer), "XFERD_PEER=%s", f->peer);
		fq = peer;
	}
	if (f && f->err > 0) {
		const char *name = strerrorname_np(f->err);
		snprintf(err, sizeof(err), "XFERD_ERRNO=%s",
			 name ? name : "?");
		snprintf(errno_f, sizeof(errno_f), "ERRNO=%d", f->err);
		fe = err;
		fn = errno_f;
	}
	return sd_journal_send_with_location(
		file, line, site && site->func ? site->func : "",
		"MESSAGE=%s", msg, "PRIORITY=%d", level_prio[level], "%s",
		ident, "%s", fp, "%s", fq, "%s", fe, "%s", fn, NULL);
}
#endif

static void emit(const struct log_site *site, int level,
		 const struct log_fields *f, const char *msg)
{
#ifdef HAVE_SYSTEMD
	if (atomic_load_explicit(&journal, memory_order_relaxed) &&
	    journal_send(site, level, f, msg) >= 0)
		return;
	/* No journal after all: the line still goes somewhere. */
#else
	(void)site, (void)f;
#endif
	if (stream_journal) {   /* the journal reads "<prio>" itself */
		fprintf(stderr, "<%d>%s\n", level_prio[level], msg);
		return;
	}
	struct timespec ts;
	struct tm tm;
	char when[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	/* One fprintf per line: stdio locks the stream, so lines from the
	 * main and progress threads never interleave. */
	fprintf(stderr, "%s.%03ld xferd %s: %s\n", when, ts.tv_nsec / 1000000,
		level_names[level], msg);
}

static void vlog(struct log_site *site, int level, const char *errstr,
		 const struct log_fields *f, const char *fmt, va_list ap)
{
	char msg[1024];
	uint32_t suppressed = 0;
	size_t n;

	if (level > log_get_level())
		return;
	if (site && level != LOG_LVL_DEBUG && !site_admit(site, &suppressed))
		return;
	if (suppressed) {
		snprintf(msg, sizeof(msg), "suppressed %u messages like the "
			 "next (%s:%d)", suppressed, site->file, site->line);
		emit(site, level, NULL, msg);
	}
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	if (errstr)
		snprintf(msg + n, sizeof(msg) - n, ": %s", errstr);
	emit(site, level, f, msg);
}

void log_at(struct log_site *site, int level, bool with_errno,
	    const struct log_fields *f, const char *fmt, ...)
{
	int saved = errno;
	const char *e = with_errno ? strerror(saved) : NULL;
	struct log_fields ef;
	va_list ap;

	/* log_warn's errno is a field of its own too. */
	if (with_errno && (!f || !f->err)) {
		ef = f ? *f : (struct log_fields){ 0 };
		ef.err = saved;
		f = &ef;
	}
	va_start(ap, fmt);
	vlog(site, level, e, f, fmt, ap);
	va_end(ap);
	errno = saved;
}

void fatal(const char *fmt, ...)
{
	const char *e = strerror(errno);
	struct log_fields f = { .err = errno };
	va_list ap;

	va_start(ap, fmt);
	vlog(NULL, LOG_LVL_ERR, e, &f, fmt, ap);
	va_end(ap);
	exit(1);
}

void fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(NULL, LOG_LVL_ERR, NULL, NULL, fmt, ap);
	va_end(ap);
	exit(1);
}
