/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_dlist.c - a client's prepared descriptor lists (mem/dlist.h):
 * made from entries read once from a memfd and checked against the
 * range of one of its regions or imports, and destroyed.
 *
 * Thread: the main thread only.  No lock of its own (the list table's
 * leaf lock is taken inside dltab_*).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client_int.h"
#include "core/log.h"
#include "mem/dlist.h"
#include "mem/region.h"
#include "uid_usage.h"
#include "xferd.h"

/* --- prepared descriptor lists --- */

/* Read exactly len bytes at off of fd into buf (a memfd the client may
 * still change: what is read is what is checked and kept). */
static int read_all(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EINVAL;
		done += (size_t)n;
	}
	return 0;
}

/*
 * The fd of a list's entries must be a memfd holding them all: reading
 * it then never waits (a FIFO, a socket or a file on a network or FUSE
 * file system could stall the main thread, which serves every client),
 * and a short one is refused before anything is allocated for it.
 */
static int entries_fd_check(int fd, uint64_t need, const char **why)
{
	struct stat st;

	if (fcntl(fd, F_GET_SEALS) < 0 || fstat(fd, &st) ||
	    !S_ISREG(st.st_mode)) {
		*why = "a list's entries come in a memfd";
		return -EINVAL;
	}
	if ((uint64_t)st.st_size < need) {
		*why = "the fd holds fewer entries than count";
		return -EINVAL;
	}
	return 0;
}

static int reply_dlist(struct client *c, uint64_t seq, uint64_t handle)
{
	Xfer__Client__ClientMsg m = XFER__CLIENT__CLIENT_MSG__INIT;
	Xfer__Client__DlistCreateReply rep =
		XFER__CLIENT__DLIST_CREATE_REPLY__INIT;

	rep.handle = handle;
	m.seq = seq;
	m.body_case = XFER__CLIENT__CLIENT_MSG__BODY_DLIST_CREATE_REPLY;
	m.dlist_create_reply = &rep;
	return client_send(c, &m, NULL, 0);
}

/*
 * A list over one of the client's regions or imports: its entries are
 * read from the memfd once, checked against the handle's range, and
 * kept by xferd.
 */
int client_dlist_create(struct client *c, uint64_t seq,
			const Xfer__Client__DlistCreateRequest *req,
			const int *fds)
{
	const struct xferd_config *cfg = &c->d->cfg;
	uint32_t n = req->count;
	uint64_t *off = NULL, *lens = NULL, end = 0, roff;
	struct region *r;
	bool is_import = false;
	int err;
	const char *why = NULL;

	if (n > cfg->dlist_max_entries)
		return client_reply(c, seq, -E2BIG,
				    "more entries than dlist_max_entries");
	err = entries_fd_check(fds[0], (uint64_t)n * (req->length ? 1 : 2) *
					       sizeof(uint64_t), &why);
	if (err)
		return client_reply(c, seq, err, why);
	off = malloc((size_t)n * sizeof(*off));
	if (req->length == 0)
		lens = malloc((size_t)n * sizeof(*lens));
	if (!off || (req->length == 0 && !lens)) {
		err = -ENOMEM;
		why = "out of memory";
		goto fail;
	}
	if (read_all(fds[0], off, (size_t)n * sizeof(*off), 0) ||
	    (lens && read_all(fds[0], lens, (size_t)n * sizeof(*lens),
			      (off_t)((size_t)n * sizeof(*off))))) {
		err = -EINVAL;
		why = "the fd holds fewer entries than count";
		goto fail;
	}
	err = dlist_check(n, off, lens, req->length, UINT64_MAX, &end);
	if (err) {
		why = err == -ERANGE ? "an entry's offset + length overflows"
				     : "an entry of length 0";
		goto fail;
	}
	/* [0, end) inside the handle's range: its own region, or else an
	 * import (the token's range). */
	err = regtab_resolve(c->d->regs, c->pc.id, req->target, 0, end, false,
			     &r, &roff);
	if (err && err != -ERANGE) {
		is_import = true;
		err = regtab_resolve(c->d->regs, c->pc.id, req->target, 0, end,
				     true, &r, &roff);
	}
	if (err) {
		why = err == -ERANGE ? "an entry lies outside its region or token"
				     : "the list's target is no region or "
				       "import of this client";
		goto fail;
	}
	region_put(r);
	uint64_t handle;
	err = dltab_add(c->d->dlists, c->pc.id, req->target, is_import, n, off,
			lens, req->length, end,
			(struct dlist_limits){
				.lists = cfg->dlist_max_per_client,
				.entries = cfg->dlist_max_client_entries,
				.uid = &c->uu->lists,
				.uid_lists = cfg->dlist_max_per_uid,
				.uid_bytes = cfg->dlist_max_uid_bytes },
			&handle);
	if (err) {
		/* The client's bound is checked first: if it holds room,
		 * its user's was hit. */
		bool mine = err == -ENOSPC
			? dltab_count(c->d->dlists, c->pc.id) >=
				  cfg->dlist_max_per_client
			: dltab_entries(c->d->dlists, c->pc.id) + n >
				  cfg->dlist_max_client_entries;
		why = err == -ENOSPC && mine
			? "too many lists (dlist_max_per_client)"
		    : err == -ENOSPC ? "too many lists of this user "
				       "(dlist_max_per_uid)"
		    : err == -ENOBUFS && mine
			? "entries of this client's lists would exceed "
			  "dlist_max_client_entries"
		    : err == -ENOBUFS ? "memory of this user's lists would "
					"exceed dlist_max_uid_bytes"
				      : "out of memory";
		goto fail;
	}
	log_debug("client %llu: list %llx of %u entries over %llu",
		  (unsigned long long)c->pc.id, (unsigned long long)handle, n,
		  (unsigned long long)req->target);
	return reply_dlist(c, seq, handle);
fail:
	free(off);
	free(lens);
	return client_reply(c, seq, err, why);
}

int client_dlist_destroy(struct client *c, uint64_t seq,
			 uint64_t handle)
{
	int err = dltab_remove(c->d->dlists, c->pc.id, handle);

	return client_reply(c, seq, err, err ? "no such list of this client"
					      : NULL);
}
