/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.c - fd and host-memory budgets of clients (budget.h).
 *
 * Main thread only; no locks.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>

#include "budget.h"
#include "core/log.h"

static uint64_t count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	uint64_t n = 0;

	if (!d)
		return 64;  /* a guess on the safe side */
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n ? n - 1 : 0;  /* less the directory's own fd */
}

static uint64_t count_lines(const char *path)
{
	FILE *f = fopen(path, "re");
	uint64_t n = 0;
	int ch;

	if (!f)
		return 0;
	while ((ch = getc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

/* The first number in path, or 0. */
static uint64_t read_u64(const char *path)
{
	FILE *f = fopen(path, "re");
	unsigned long long v = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* This process's cgroup path for controller ("memory"), or for the v2
 * hierarchy when controller is NULL, into out; 0 or -ENOENT. */
static int own_cgroup(const char *controller, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024];
	int rc = -ENOENT;

	if (!f)
		return rc;
	while (rc && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':')
						       : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		bool match = false;
		if (!controller) {
			match = c1[1] == '\0';
		} else {
			for (char *tok = strtok(c1 + 1, ","); tok;
			     tok = strtok(NULL, ","))
				match |= strcmp(tok, controller) == 0;
		}
		if (!match)
			continue;
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		snprintf(out, len, "%s", c2 + 1);
		rc = 0;
	}
	fclose(f);
	return rc;
}

/* The limit of xferd's memory cgroup and of those above it; 0: none. */
static uint64_t cgroup_memory_limit(void)
{
	char cg[512], path[700], line[256];
	uint64_t limit = 0;

	/* v1: memory.stat says the least limit on the way up. */
	if (own_cgroup("memory", cg, sizeof(cg)) == 0) {
		snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.stat",
			 strcmp(cg, "/") ? cg : "");
		FILE *f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f)) {
			unsigned long long v;
			if (sscanf(line, "hierarchical_memory_limit %llu",
				   &v) == 1)
				limit = v;
		}
		if (f)
			fclose(f);
		/* "No limit" reads as a page-rounded LONG_MAX. */
		if (limit >= (1ull << 62))
			limit = 0;
		if (limit)
			return limit;
	}
	/* v2: memory.max of each cgroup up to the root. */
	if (own_cgroup(NULL, cg, sizeof(cg)) == 0) {
		for (;;) {
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max",
				 strcmp(cg, "/") ? cg : "");
			uint64_t v = read_u64(path); /* "max" reads as 0 */
			if (v && (!limit || v < limit))
				limit = v;
			char *slash = strrchr(cg, '/');
			if (!slash || slash == cg)
				break;
			*slash = '\0';
		}
	}
	return limit;
}

uint64_t budget_memory_size(void)
{
	struct sysinfo si;
	uint64_t mem = 0, cg = cgroup_memory_limit();

	if (sysinfo(&si) == 0)
		mem = (uint64_t)si.totalram * si.mem_unit;
	if (cg && (!mem || cg < mem))
		mem = cg;
	return mem;
}

static void raise_nofile(struct budget *b)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl)) {
		b->nofile = 1024;
		return;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = { rl.rlim_max, rl.rlim_max };
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	/* select() is not used: fds above FD_SETSIZE are fine. */
	b->nofile = rl.rlim_cur == RLIM_INFINITY ? (1u << 30) : rl.rlim_cur;
}

void budget_init(struct budget *b, const struct xferd_config *cfg)
{
	*b = (struct budget){ 0 };
	raise_nofile(b);
	b->fds_at_start = count_fds();
	uint64_t max_maps = read_u64("/proc/sys/vm/max_map_count");
	uint64_t maps = count_lines("/proc/self/maps");
	b->maps_free = max_maps > maps ? max_maps - maps : UINT64_MAX;
	if (!max_maps)
		b->maps_free = UINT64_MAX;
	b->memory = budget_memory_size();
	budget_apply(b, cfg);
	log_info("client budgets: %" PRIu64 " fds in all (RLIMIT_NOFILE %"
		 PRIu64 ", %" PRIu64 " kept for accepting, xferctl and xferd), %"
		 PRIu64 " a client, %" PRIu64 " a user; host memory %" PRIu64
		 " MiB a client, %" PRIu64 " MiB a user (of %" PRIu64 " MiB)",
		 b->all_fds, b->nofile, b->reserve, b->client_fds, b->uid_fds,
		 b->client_bytes >> 20, b->uid_bytes >> 20, b->memory >> 20);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

void budget_apply(struct budget *b, const struct xferd_config *cfg)
{
	uint64_t avail = b->nofile > b->fds_at_start
				 ? b->nofile - b->fds_at_start : 0;

	avail = min_u64(avail, b->maps_free);
	b->reserve = (uint64_t)cfg->fd_reserve + cfg->max_pending +
		     cfg->max_pending_per_uid + cfg->max_ctl_connections +
		     CTL_ROOT_RESERVE;
	if (b->reserve > avail / 2) {
		/* Too few fds for the whole reserve: clients get half.
		 * Accepting pauses when fds run out (listener.c). */
		log_warnx("RLIMIT_NOFILE %" PRIu64 " leaves %" PRIu64 " fds: "
			  "%" PRIu64 " kept from clients, not the %" PRIu64
			  " configured (raise LimitNOFILE)", b->nofile, avail,
			  avail / 2, b->reserve);
		b->reserve = avail / 2;
	}
	b->all_fds = avail - b->reserve;
	b->uid_fds = min_u64(cfg->max_uid_fds,
			     b->all_fds >= 32 ? b->all_fds / 2 : b->all_fds);
	b->client_fds = min_u64(cfg->max_client_fds, b->uid_fds);

	uint64_t half = b->memory ? b->memory / 2 : (16ull << 30);
	b->uid_bytes = cfg->max_uid_bytes ? cfg->max_uid_bytes : half;
	b->client_bytes = cfg->max_client_bytes ? cfg->max_client_bytes
						: b->uid_bytes;
}

/* Room for n more where have of max are taken?  Written so that it
 * cannot overflow (have may exceed a max lowered by a reload). */
static bool room(uint64_t have, uint64_t n, uint64_t max)
{
	return have <= max && n <= max - have;
}

static uint64_t sub_sat(uint64_t have, uint64_t n)
{
	return have - (n < have ? n : have);
}

int budget_take_fds(struct budget *b, struct uid_usage *uu,
		    struct client_usage *u, uint32_t n, const char **why)
{
	if (n == 0)
		return 0;
	if (!room(u->fds, n, b->client_fds)) {
		*why = "fds xferd holds for this client would exceed "
		       "max_client_fds";
		return -ENFILE;
	}
	if (!room(b->fds_used, n, b->all_fds)) {
		*why = "xferd's fds for clients are all in use (its "
		       "RLIMIT_NOFILE less fd_reserve)";
		return -ENFILE;
	}
	if (!room(uu->fds, n, b->uid_fds)) {
		*why = "fds xferd holds for this user would exceed "
		       "max_uid_fds";
		return -ENFILE;
	}
	u->fds += n;
	uu->fds += n;
	b->fds_used += n;
	return 0;
}

void budget_release_fds(struct budget *b, struct uid_usage *uu,
			struct client_usage *u, uint32_t n)
{
	if (n > u->fds)
		n = u->fds;
	u->fds -= n;
	b->fds_used = sub_sat(b->fds_used, n);
	uu->fds = sub_sat(uu->fds, n);
}

int budget_take_bytes(struct budget *b, struct uid_usage *uu,
		      struct client_usage *u, uint64_t n, const char **why)
{
	if (n == 0)
		return 0;
	if (!room(u->host_bytes, n, b->client_bytes)) {
		*why = "host memory xferd maps for this client would exceed "
		       "max_client_bytes";
		return -EDQUOT;
	}
	if (!room(uu->host_bytes, n, b->uid_bytes)) {
		*why = "host memory xferd maps for this user would exceed "
		       "max_uid_bytes";
		return -EDQUOT;
	}
	u->host_bytes += n;
	uu->host_bytes += n;
	return 0;
}

void budget_release_bytes(struct budget *b, struct uid_usage *uu,
			  struct client_usage *u, uint64_t n)
{
	(void)b;
	if (n > u->host_bytes)
		n = u->host_bytes;
	u->host_bytes -= n;
	uu->host_bytes = sub_sat(uu->host_bytes, n);
}
