/* SPDX-License-Identifier: Apache-2.0 */
/*
 * exec_run.h - a run of linked writes (or reads) between the same two
 * memfd regions, moved without the executor's per-descriptor work.
 *
 * A batch of small linked writes is the unit of UCX's put_bw: a store
 * per put.  Through exec_sqe() each one pays its checks, two memo
 * lookups, the path facts and route, the mover's call and glibc's
 * memcpy (callgrind: ~340 instructions for a 64 B write, the copy ~30).
 * When exec_sqe() has moved a linked WRITE/READ on ROUTE_MEMCPY (both
 * ends xferd's own mappings), it arms a run (exec_run_arm, exec.c) with
 * what it resolved: the two handles, the ranges they grant and where
 * those are mapped.  drain() then offers each next SQE of that client to
 * exec_run_step() first: one that is again a linked, plain WRITE/READ
 * naming the same handles, within their ranges, while the region table
 * is unchanged, is copied in place and counted into its batch; anything
 * else (the batch's last SQE, a flag, another handle, a range past the
 * grant, a removal in the table) goes through exec_sqe(), which ends the
 * run, so its errors and CQEs are exactly exec_sqe()'s.
 *
 * The memo holds the references: a run lives within one drain() of one
 * client, where nothing else uses the memo, and a removal from the table
 * (regtab_memo_sync sees the generation move) ends it.  Per-path
 * counters are added once, at the run's end.
 *
 * Progress thread only.
 */
#ifndef XFERD_EXEC_RUN_H
#define XFERD_EXEC_RUN_H

#include <string.h>

#include "engine/progress_int.h"
#include "mem/region.h"

/* End the run, if any: its counters into the per-path ones. */
static inline void exec_run_end(struct progress *p)
{
	struct exec_run *r = &p->exec.run;

	if (!r->pc)
		return;
	r->pc = NULL;
	if (r->ops) {
		stat_add(&p->exec.paths.bytes[XFER_PATH_MEMCPY], r->bytes);
		stat_add(&p->exec.paths.ops[XFER_PATH_MEMCPY], r->ops);
		r->bytes = r->ops = 0;
	}
}

/* Arm a run after exec_sqe() moved sqe of pc by memcpy between local
 * and remote (exec.c); nothing when sqe cannot begin one. */
void exec_run_arm(struct progress *p, struct prog_client *pc,
		  const struct xfer_sqe *sqe, const struct region *local,
		  const struct region *remote);

/* Small copies in place: glibc's memcpy costs a call and its size
 * dispatch, more than the copy of 64 bytes.  Each range is loaded whole
 * before it is stored (the two may overlap in the middle). */
static inline void exec_run_copy(char *d, const char *s, uint64_t n)
{
	if (n > 64) {
		memcpy(d, s, n);
	} else if (n >= 32) {
		char a[32], b[32];
		memcpy(a, s, 32);
		memcpy(b, s + n - 32, 32);
		memcpy(d, a, 32);
		memcpy(d + n - 32, b, 32);
	} else if (n >= 16) {
		char a[16], b[16];
		memcpy(a, s, 16);
		memcpy(b, s + n - 16, 16);
		memcpy(d, a, 16);
		memcpy(d + n - 16, b, 16);
	} else if (n >= 8) {
		uint64_t a, b;
		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(d, &a, 8);
		memcpy(d + n - 8, &b, 8);
	} else {
		for (uint64_t i = 0; i < n; i++)
			d[i] = s[i];
	}
}

/*
 * Move sqe as the next of pc's run: true when done (its bytes counted
 * into the open batch), false when exec_sqe() must take it.
 */
static inline bool exec_run_step(struct progress *p, struct prog_client *pc,
				 const struct xfer_sqe *sqe)
{
	struct exec_run *r = &p->exec.run;

	if (r->pc != pc || sqe->opcode != r->opcode ||
	    sqe->flags != XFER_SQE_F_LINK || sqe->msg_len ||
	    sqe->local != r->local || sqe->remote != r->remote)
		return false;
	/* Beyond the grant: exec_sqe() says -ERANGE. */
	if (sqe->local_off > r->llimit || sqe->len > r->llimit - sqe->local_off ||
	    sqe->remote_off > r->rlimit ||
	    sqe->len > r->rlimit - sqe->remote_off)
		return false;
	/* A removal since the run began: the memo let its references go. */
	regtab_memo_sync(p->regs, &p->exec.memo);
	if (p->exec.memo.gen != r->gen)
		return false;
	char *l = r->lmap + sqe->local_off, *m = r->rmap + sqe->remote_off;
	if (sqe->opcode == XFER_OP_WRITE)
		exec_run_copy(m, l, sqe->len);
	else
		exec_run_copy(l, m, sqe->len);
	pc->batch.bytes += sqe->len;
	r->bytes += sqe->len;
	r->ops++;
	return true;
}

#endif
