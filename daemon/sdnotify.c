/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sdnotify.c - sd_notify, watchdog and socket activation.
 */
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>

#include "core/log.h"
#include "sdnotify.h"

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

static void notify(const char *state)
{
	/* unset_environment = 0: the watchdog and STATUS keep using it. */
	int rc = sd_notify(0, state);
	if (rc < 0)
		log_debug("sd_notify(%s) failed: %d", state, rc);
}

uint64_t sdnotify_watchdog_usec(void)
{
	uint64_t usec = 0;
	return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

int sdnotify_listen_fd(void)
{
	int n = sd_listen_fds(1);

	if (n <= 0)
		return -1;
	if (n > 1)
		log_warnx("systemd passed %d sockets; using the first", n);
	if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_SEQPACKET, 1, NULL,
			      0) <= 0) {
		log_warnx("the socket systemd passed is not a listening "
			  "SOCK_SEQPACKET Unix socket; binding our own");
		return -1;
	}
	return SD_LISTEN_FDS_START;
}
#else
static void notify(const char *state)
{
	(void)state;
}

uint64_t sdnotify_watchdog_usec(void)
{
	return 0;
}

int sdnotify_listen_fd(void)
{
	return -1;
}
#endif

void sdnotify_ready(void)
{
	notify("READY=1");
}

void sdnotify_reloading(void)
{
	notify("RELOADING=1");
}

void sdnotify_stopping(void)
{
	notify("STOPPING=1");
}

void sdnotify_watchdog(void)
{
	notify("WATCHDOG=1");
}

void sdnotify_status(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "STATUS=");

	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	notify(buf);
}
