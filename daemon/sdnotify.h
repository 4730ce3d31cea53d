/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sdnotify.h - every systemd interaction of xferd, in one place.
 *
 * Built against libsystemd when it is available (HAVE_SYSTEMD); without
 * it, or when xferd does not run under systemd, these calls do nothing
 * and xferd behaves the same.
 */
#ifndef XFERD_SDNOTIFY_H
#define XFERD_SDNOTIFY_H

#include <stdint.h>

/* READY=1: only once the socket listens and devices are set up. */
void sdnotify_ready(void);
void sdnotify_reloading(void);
void sdnotify_stopping(void);
void sdnotify_status(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
void sdnotify_watchdog(void);
/* The watchdog interval systemd wants (0: no watchdog). */
uint64_t sdnotify_watchdog_usec(void);
/* The listening socket passed by socket activation, or -1. */
int sdnotify_listen_fd(void);

#endif /* XFERD_SDNOTIFY_H */
