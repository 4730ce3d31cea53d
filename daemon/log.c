/*
 * log.c - leveled logging to stderr, journal-aware.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

/* Read by every thread, changed by SIGHUP on the main thread. */
static _Atomic int log_level = LOG_LVL_INFO;
static int journal;

static const char *const level_names[] = { "error", "warn", "info", "debug" };
/* syslog priorities: err, warning, info, debug */
static const int level_prio[] = { 3, 4, 6, 7 };

void log_init(int level)
{
	journal = getenv("JOURNAL_STREAM") != NULL;
	log_set_level(level);
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

static void vlog(int level, const char *errstr, const char *fmt, va_list ap)
{
	char msg[1024];

	if (level > log_get_level())
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One fprintf per line: stdio locks the stream, so lines from the
	 * main and progress threads never interleave. */
	if (journal) {
		fprintf(stderr, "<%d>%s%s%s\n", level_prio[level], msg,
			errstr ? ": " : "", errstr ? errstr : "");
		return;
	}
	struct timespec ts;
	struct tm tm;
	char when[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03ld xferd %s: %s%s%s\n", when,
		ts.tv_nsec / 1000000, level_names[level], msg,
		errstr ? ": " : "", errstr ? errstr : "");
}

#define LOG_BODY(level, errstr)                  \
	do {                                     \
		va_list ap;                      \
		va_start(ap, fmt);               \
		vlog(level, errstr, fmt, ap);    \
		va_end(ap);                      \
	} while (0)

void log_warn(const char *fmt, ...)
{
	const char *e = strerror(errno);
	LOG_BODY(LOG_LVL_WARN, e);
}

void log_warnx(const char *fmt, ...)
{
	LOG_BODY(LOG_LVL_WARN, NULL);
}

void log_info(const char *fmt, ...)
{
	LOG_BODY(LOG_LVL_INFO, NULL);
}

void log_debug(const char *fmt, ...)
{
	LOG_BODY(LOG_LVL_DEBUG, NULL);
}

void fatal(const char *fmt, ...)
{
	const char *e = strerror(errno);
	LOG_BODY(LOG_LVL_ERR, e);
	exit(1);
}

void fatalx(const char *fmt, ...)
{
	LOG_BODY(LOG_LVL_ERR, NULL);
	exit(1);
}
