/*
 * log.h - xferd's logging: one line per event on stderr.
 *
 * Under systemd (JOURNAL_STREAM set) lines carry the "<N>" priority prefix
 * the journal understands; otherwise they carry a time and a level name.
 * log_warn appends strerror(errno); log_warnx does not.  fatal logs and
 * exits; it is for start-up only, never for input from clients or peers.
 */
#ifndef XFERD_LOG_H
#define XFERD_LOG_H

enum log_level { LOG_LVL_ERR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_init(int level);
void log_set_level(int level);
int log_get_level(void);
/* Parse "error", "warn", "info", "debug"; -1 if none of them. */
int log_level_parse(const char *name);
const char *log_level_name(int level);

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fatal(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

#endif /* XFERD_LOG_H */
