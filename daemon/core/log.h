/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - xferd's logging: one line per event, on stderr or the journal.
 *
 * On stderr (not under systemd) a line carries a time and a level name.
 * Under systemd (JOURNAL_STREAM names our stderr, or log_target =
 * journal) each line goes to the journal through sd_journal_send with
 * its priority, source location and, where the call site gives them,
 * the fields XFERD_CLIENT_PID, XFERD_PEER and XFERD_ERRNO that an
 * operator can filter on (journalctl XFERD_CLIENT_PID=1234).
 *
 * Every call site is rate-limited on its own (a token bucket per site,
 * LOG_BURST lines at once, LOG_PER_SEC after): a misbehaving client or
 * peer that makes one line repeat cannot flood the log; the next line
 * that passes says how many were suppressed.  Debug lines, asked for
 * explicitly, are not limited.
 *
 * log_warn appends strerror(errno); log_warnx does not.  fatal logs and
 * exits; it is for start-up only, never for input from clients or peers.
 */
#ifndef XFERD_LOG_H
#define XFERD_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_LVL_ERR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

enum log_target {
	LOG_TARGET_AUTO = 0,  /* the journal when JOURNAL_STREAM is stderr */
	LOG_TARGET_STDERR,
	LOG_TARGET_JOURNAL,   /* sd_journal_send (without libsystemd: stderr) */
};

#define LOG_BURST   20
#define LOG_PER_SEC 2

void log_init(int level);
void log_set_level(int level);
int log_get_level(void);
/* Parse "error", "warn", "info", "debug"; -1 if none of them. */
int log_level_parse(const char *name);
const char *log_level_name(int level);
/* Where lines go from now on; returns the target in effect (AUTO is
 * resolved to STDERR or JOURNAL). */
enum log_target log_set_target(enum log_target t);

/* Structured fields of a line; 0 / NULL: not set. */
struct log_fields {
	int client_pid;
	const char *peer;
	int err;              /* positive errno */
};

/* One call site's rate limit (LOG_AT declares one per call). */
struct log_site {
	const char *file;
	int line;
	const char *func;
	uint64_t last_ns;     /* tokens were counted up to here */
	uint32_t tokens;      /* x1000, to refill fractions */
	uint32_t suppressed;
	bool started;
};

void log_at(struct log_site *site, int level, bool with_errno,
	    const struct log_fields *f, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#define LOG_AT(level, with_errno, f, ...)                                  \
	do {                                                               \
		static struct log_site log_site_ = {                      \
			__FILE__, __LINE__, __func__, 0, 0, 0, false };    \
		log_at(&log_site_, level, with_errno, f, __VA_ARGS__);     \
	} while (0)

#define log_warn(...)  LOG_AT(LOG_LVL_WARN, true, NULL, __VA_ARGS__)
#define log_warnx(...) LOG_AT(LOG_LVL_WARN, false, NULL, __VA_ARGS__)
#define log_info(...)  LOG_AT(LOG_LVL_INFO, false, NULL, __VA_ARGS__)
#define log_debug(...) LOG_AT(LOG_LVL_DEBUG, false, NULL, __VA_ARGS__)
/* The same with journal fields (a const struct log_fields *). */
#define log_warnx_f(f, ...) LOG_AT(LOG_LVL_WARN, false, f, __VA_ARGS__)
#define log_info_f(f, ...)  LOG_AT(LOG_LVL_INFO, false, f, __VA_ARGS__)

void fatal(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

#endif /* XFERD_LOG_H */
