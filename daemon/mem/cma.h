/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cma.h - bytes of another process's memory (an xfer_reg'd region): one
 * rule for every path that moves them (same node, the TCP data path,
 * staging).
 *
 * What xferd may reach is what the kernel lets the client's own user
 * reach, decided once per client and bound to its address space: a
 * client's first xfer_reg opens /proc/PID/mem with the client's uid and
 * gid as file-system ids and (for a client that is not root) no
 * capability in effect, so the kernel's ptrace check (uid, euid, suid,
 * gid, egid, sgid equal; dumpable; no capability the client lacks)
 * decides.  The open file is bound to the address space the process had
 * then: after an exec (of a set-uid program, a program with file
 * capabilities, anything) it reads and writes nothing.  Each copy also
 * checks that the owner's ids are still those it connected with (a
 * set-uid drop without exec), so a token holder is refused from the next
 * copy on.  See doc/security.md, "Memory of other processes (CMA)".
 *
 * Threads: cma_owner_open on the main thread (it changes that thread's
 * file-system ids and capabilities for the open); the rest on any.
 */
#ifndef XFERD_CMA_H
#define XFERD_CMA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mem/region.h"

/*
 * The process behind a client's CMA regions, once per client connection
 * and shared by its regions (refcounted: regions outlive the connection
 * while copies hold them).  Holds two descriptors, whatever the number
 * of regions: the pidfd and /proc/PID/mem (three with no_new_privs: and
 * /proc/PID/status).
 */
struct cma_owner;

/*
 * Open pid's memory as uid/gid would (see above).  pidfd refers to the
 * same process (SO_PEERPIDFD, or pidfd_open when it connected); it is
 * taken over on success.  Returns 0, -EPERM (the kernel says uid/gid may
 * not reach that process: another user, set-uid, not dumpable), -ESRCH
 * (it exited) or -errno.  Main thread.
 */
int cma_owner_open(pid_t pid, int pidfd, uid_t uid, gid_t gid,
		   struct cma_owner **out);
void cma_owner_get(struct cma_owner *o);
/* Drops a reference; the last closes both descriptors.  NULL is fine. */
void cma_owner_put(struct cma_owner *o);
/* Its pid (as it connected; for comparing two regions' owners). */
pid_t cma_owner_pid(const struct cma_owner *o);
/* Has the process not exited yet? */
bool cma_owner_alive(const struct cma_owner *o);
/* One byte at addr: is it mapped in the owner's address space?  0, or
 * -EFAULT, -ESRCH. */
int cma_owner_probe(const struct cma_owner *o, uint64_t addr);

/*
 * Copy len bytes between local memory and [off, off + len) of CMA region
 * r: into r when to_region, else out of it.  Returns len, or -ESRCH (the
 * owner exited, or exec'd: its address space is gone), -EPERM (its uid
 * or gid changed since it connected), -EFAULT (its memory is no longer
 * mapped) or another -errno.
 */
int64_t cma_copy(const struct region *r, bool to_region, void *local,
		 uint64_t off, uint64_t len);
/*
 * cma_copy out of r into local, where local is xferd's own memory that
 * no client sees before this returns (a staging chunk, a bounce buffer,
 * a frame not queued yet): for an owner with no_new_privs it reads with
 * process_vm_readv and checks the owner afterwards (cma.c says why).
 * Same results as cma_copy.
 */
int64_t cma_read_private(const struct region *r, void *local, uint64_t off,
			 uint64_t len);

/* One range of a vectored copy: len bytes at local, at off of the region. */
struct cma_range {
	void *local;
	uint64_t off, len;
};

/*
 * cma_copy for n ranges of one region, with one check of the owner for
 * all of them.  Returns the sum of the lengths, or -errno as cma_copy
 * (the ranges before the failing one were copied).  CMA_IOV_MAX: the
 * most ranges a caller gathers for one call.
 */
#define CMA_IOV_MAX 256
int64_t cma_copyv(const struct region *r, bool to_region,
		  const struct cma_range *v, uint32_t n);

/* cma_read_private's reads by process_vm_readv since start: those done
 * and those its check refused (their bytes dropped). */
void cma_fast_read_counts(uint64_t *done, uint64_t *refused);

#endif /* XFERD_CMA_H */
