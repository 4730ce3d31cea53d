/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cma.c - another process's memory through /proc/PID/mem, opened with
 * that process's user's rights (cma.h).  cma_owner_open on the main
 * thread; copies on any thread (pread/pwrite on one descriptor need no
 * lock).  No locks.
 *
 * Why not process_vm_readv/writev as root: the kernel checks those
 * against the caller at each call, by pid.  As root with CAP_SYS_PTRACE
 * the check always passes, so a client that exec'd a set-uid program
 * (or one with file capabilities) after xfer_reg handed its token
 * holders the new program's memory.  Passing the check honestly would
 * need the calling thread's real uid to be the client's, and a thread
 * whose real uid is a client's can be sent SIGSTOP or SIGKILL by that
 * client (tgkill), which stops or kills all of xferd; and its permitted
 * capabilities would still pass the capability part of the check for a
 * program with file capabilities.  /proc/PID/mem is checked once, at the
 * open, with file-system ids (which signals ignore), and stays bound to
 * the address space it was opened on.
 *
 * That file reads a page at a time through a bounce page, under the
 * owner's mmap lock each page: on a 16-core H100 host eight threads read
 * 10-12 GB/s from it, against 34-37 GB/s with process_vm_readv.  So an
 * owner that can never gain privileges by exec (no_new_privs, which its
 * exec'd programs inherit and nothing clears: Kubernetes'
 * allowPrivilegeEscalation: false, systemd's NoNewPrivileges=, Docker's
 * no-new-privileges) is read with process_vm_readv where the bytes land
 * in xferd's own memory (cma_read_private: a staging chunk, a bounce
 * buffer, a frame not sent yet), and each such read is checked
 * afterwards: the owner still alive (its pid not reused), the address
 * space the file is bound to still in use (no exec since: the file reads
 * nothing after one), its main thread still with no_new_privs (the flag
 * is per thread: every thread has it at the open, threads made later
 * inherit it, and one that lacked it and exec'd would be the main thread
 * now), its ids still the connected ones, still dumpable (not an
 * execute-only program).  A read that fails the check is refused
 * and its bytes never leave xferd.  Whatever ran at that pid in between,
 * under no_new_privs it had no more rights than the client.  What is
 * left: an owner that shares its address space with a process that is
 * not a thread (clone(CLONE_VM)) keeps that space in use across its own
 * exec, so a read racing with the exec may see the new program; that
 * program runs with the owner's rights and no more, and only its owner
 * can set this up.  Reads straight into a client's memfd and every write
 * go through the file: neither can be taken back after a failed check.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/log.h"
#include "mem/cma.h"
#include "mem/region_int.h"

struct cma_owner {
	_Atomic uint32_t refs;
	pid_t pid;
	uid_t uid;             /* from SO_PEERCRED: who connected */
	gid_t gid;
	int pidfd;             /* exit, and the ids it has now */
	int mem;               /* /proc/PID/mem, of the address space then */
	int status;            /* no_new_privs: /proc/PID/status, reads by
				* process_vm_readv; else -1 */
};

/* PIDFD_GET_INFO (Linux 6.13): the ids a process has now, by pidfd.
 * Declared here: the C library's headers may predate it.  Layout as
 * struct pidfd_info, version 0 (64 bytes). */
struct owner_info {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid;
	uint32_t ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
_Static_assert(sizeof(struct owner_info) == 64, "pidfd_info version 0");
#define OWNER_INFO_CREDS (1ull << 1)
#define OWNER_GET_INFO _IOWR(0xFF, 11, struct owner_info)

/* Reads by process_vm_readv since start: done, and refused by the check
 * after them.  Any thread adds; ctl reads them (relaxed: counts). */
static _Atomic uint64_t fast_reads_done, fast_reads_refused;

/* Set once the kernel has said it has no PIDFD_GET_INFO (logged once). */
static atomic_bool no_owner_info;

static bool pidfd_alive(int pidfd)
{
	/* A pidfd becomes readable when its process exits. */
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 0;
}

/*
 * The owner's ids now against those it connected with, as the kernel's
 * ptrace check compares them (uid, euid, suid; gid, egid, sgid): a
 * set-uid drop or a set-gid change without exec refuses its regions
 * from here on.  A change racing with a copy that already passed lets
 * that copy finish on the same address space: without an exec no
 * process gains privileges, so nothing it could not reach before.
 */
static int owner_ids_same(const struct cma_owner *o)
{
	struct owner_info info = { .mask = OWNER_INFO_CREDS };

	if (atomic_load_explicit(&no_owner_info, memory_order_relaxed))
		return 0;
	if (ioctl(o->pidfd, OWNER_GET_INFO, &info) < 0) {
		if (errno == ESRCH)
			return -ESRCH;
		if (errno != ENOTTY && errno != EINVAL)
			return -errno;
		if (!atomic_exchange(&no_owner_info, true))
			log_warnx("cma: this kernel has no PIDFD_GET_INFO "
				  "(Linux 6.13): a CMA owner that changes its "
				  "ids without exec keeps its regions (exec "
				  "still ends them)");
		return 0;
	}
	if (!(info.mask & OWNER_INFO_CREDS))
		return 0;
	if (info.ruid != o->uid || info.euid != o->uid ||
	    info.suid != o->uid || info.rgid != o->gid ||
	    info.egid != o->gid || info.sgid != o->gid)
		return -EPERM;
	return 0;
}

/* --- the open, with the client's rights --- */

static void log_no_switch_once(void)
{
	static atomic_bool said;

	if (atomic_exchange(&said, true))
		return;
	log_warnx("cma: xferd cannot take a client's ids (it lacks "
		  "CAP_SETUID/CAP_SETGID): xfer_reg'd memory (CMA) works only "
		  "for clients of uid %u gid %u, as the kernel allows it; "
		  "another client's xfer_reg fails with EPERM",
		  (unsigned)getuid(), (unsigned)getgid());
}

/*
 * open(path) as uid/gid would: file-system ids set to theirs (per thread,
 * and ignored by signal permission checks, unlike the real uid), and for
 * uid != 0 every effective capability off, so that the kernel's checks
 * of the open (the file's owner and mode, then ptrace access with
 * PTRACE_MODE_FSCREDS) are those of an unprivileged process of that
 * user.  Root clients are trusted as root.  Everything is restored
 * before returning.  xferd without CAP_SETUID/CAP_SETGID opens with its
 * own ids, so the kernel allows only clients of its own user.
 */
static int open_as(const char *path, uid_t uid, gid_t gid)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct saved[2], none[2];
	uid_t old_fsuid = (uid_t)setfsuid((uid_t)-1);
	gid_t old_fsgid = (gid_t)setfsgid((gid_t)-1);
	bool have_caps = syscall(SYS_capget, &hdr, saved) == 0;
	bool caps_off = false;
	int fd, err;

	if (old_fsgid != gid) {
		setfsgid(gid);
		if ((gid_t)setfsgid((gid_t)-1) != gid)
			log_no_switch_once();
	}
	if (old_fsuid != uid) {
		setfsuid(uid);
		if ((uid_t)setfsuid((uid_t)-1) != uid)
			log_no_switch_once();
	}
	if (uid != 0 && have_caps) {
		for (int i = 0; i < 2; i++)
			none[i] = (struct __user_cap_data_struct){
				.effective = 0,
				.permitted = saved[i].permitted,
				.inheritable = saved[i].inheritable };
		caps_off = syscall(SYS_capset, &hdr, none) == 0;
		if (!caps_off) {
			/* Never open with a capability in effect for a
			 * client that has none. */
			err = -errno;
			fd = -1;
			goto restore;
		}
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	err = fd < 0 ? -errno : 0;
restore:
	/* Capabilities first: changing the ids back needs CAP_SETUID and
	 * CAP_SETGID in effect again. */
	if (caps_off && syscall(SYS_capset, &hdr, saved))
		fatal("cma: cannot restore xferd's capabilities");
	setfsuid(old_fsuid);
	setfsgid(old_fsgid);
	if ((uid_t)setfsuid((uid_t)-1) != old_fsuid ||
	    (gid_t)setfsgid((gid_t)-1) != old_fsgid)
		fatal("cma: cannot restore xferd's file-system ids");
	if (err == -EACCES)
		err = -EPERM; /* the file's mode or the ptrace check */
	return fd < 0 ? err : fd;
}

/* NoNewPrivs of the task a /proc/.../status descriptor shows (it follows
 * the pid: after an exec by another thread, the thread that exec'd). */
static bool status_nnp(int fd)
{
	char buf[4096];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return false;
	buf[n] = '\0';
	const char *at = strstr(buf, "\nNoNewPrivs:");
	return at && atoi(at + 13) == 1;
}

/*
 * Does every thread of pid run with no_new_privs?  The flag is per
 * thread and inherited by the threads a thread makes, never cleared: if
 * each has it, no thread of the process ever lacks it (vm_read checks
 * the process again after each read, for one made meanwhile).  Read
 * after /proc/PID/mem is open and before pidfd is checked alive, so the
 * answer is that process's.  Returns the main thread's status
 * descriptor, or -1 (not every thread has it, or it cannot be read).
 */
static int no_new_privs(pid_t pid)
{
	char path[64];
	bool all = true;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	struct dirent *e;
	while (all && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/status",
			 (int)pid, e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		all = fd >= 0 && status_nnp(fd);
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
	if (!all)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !status_nnp(fd)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int cma_owner_open(pid_t pid, int pidfd, uid_t uid, gid_t gid,
		   struct cma_owner **out)
{
	char path[32];

	if (pid <= 0 || pidfd < 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	struct cma_owner *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	int mem = open_as(path, uid, gid);
	if (mem < 0) {
		free(o);
		return mem == -ENOENT ? -ESRCH : mem;
	}
	int status = no_new_privs(pid);
	/* pid named the process of pidfd if that one is still alive after
	 * the open: a pid is never reused while its process exists. */
	if (!pidfd_alive(pidfd)) {
		if (status >= 0)
			close(status);
		close(mem);
		free(o);
		return -ESRCH;
	}
	atomic_init(&o->refs, 1);
	o->pid = pid;
	o->uid = uid;
	o->gid = gid;
	o->pidfd = pidfd;
	o->mem = mem;
	o->status = status;
	if (status >= 0)
		log_debug("cma: pid %d runs with no_new_privs: reads by "
			  "process_vm_readv", (int)pid);
	*out = o;
	return 0;
}

void cma_owner_get(struct cma_owner *o)
{
	/* Relaxed: a new reference is made from one the caller holds. */
	atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
}

void cma_owner_put(struct cma_owner *o)
{
	/* acq_rel: the last put sees every other holder's use done. */
	if (!o || atomic_fetch_sub_explicit(&o->refs, 1,
					    memory_order_acq_rel) != 1)
		return;
	close(o->mem);
	close(o->pidfd);
	if (o->status >= 0)
		close(o->status);
	free(o);
}

pid_t cma_owner_pid(const struct cma_owner *o)
{
	return o->pid;
}

bool cma_owner_alive(const struct cma_owner *o)
{
	return pidfd_alive(o->pidfd);
}

/* Still dumpable: /proc/PID belongs to root while it is not (an
 * execute-only program, a set-id one).  Root owners are trusted. */
static bool owner_dumpable(const struct cma_owner *o)
{
	char path[24];
	struct stat st;

	if (o->uid == 0)
		return true;
	snprintf(path, sizeof(path), "/proc/%d", (int)o->pid);
	return stat(path, &st) == 0 && st.st_uid == o->uid;
}

/* As much of len as process_vm_readv reads; the file reads the rest
 * (and tells why it stopped).  See the head comment for the checks. */
static int64_t vm_read(const struct cma_owner *o, void *local, uint64_t addr,
		       uint64_t len)
{
	uint64_t done = 0;

	while (done < len) {
		/* Calls of at most 4 MiB: the checks below see the state
		 * the last one ran in. */
		uint64_t n = len - done;
		if (n > (4ull << 20))
			n = 4ull << 20;
		struct iovec l = { (char *)local + done, n };
		struct iovec r = { (void *)(uintptr_t)(addr + done), n };
		ssize_t got = process_vm_readv(o->pid, &l, 1, &r, 1, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		done += (uint64_t)got;
	}
	if (done == 0)
		return 0;
	if (!pidfd_alive(o->pidfd))
		return -ESRCH;
	/* The address space the file is bound to still has users: an exec
	 * since the open (which ends it) refuses the read, as the file
	 * would have. */
	char byte;
	ssize_t got = pread(o->mem, &byte, 1, (off_t)addr);
	if (got != 1)
		return got == 0 ? -EPERM : -EFAULT;
	/* The process's main thread now: a thread that ran without
	 * no_new_privs (made while the open looked) and exec'd is it. */
	if (!status_nnp(o->status))
		return -EPERM;
	int err = owner_ids_same(o);
	if (err)
		return err;
	return owner_dumpable(o) ? (int64_t)done : -EPERM;
}

/* len bytes between local and addr of the owner's address space.
 * private: local is xferd's own memory, seen by no client before the
 * call returns (the fast read is checked only afterwards). */
static int64_t mem_copy(const struct cma_owner *o, bool write, bool private,
			void *local, uint64_t addr, uint64_t len)
{
	uint64_t done = 0;

	if (!write && private && o->status >= 0) {
		int64_t got = vm_read(o, local, addr, len);
		atomic_fetch_add_explicit(got < 0 ? &fast_reads_refused
						  : &fast_reads_done, 1,
					  memory_order_relaxed);
		if (got < 0)
			return got;
		done = (uint64_t)got;
	}

	while (done < len) {
		uint64_t n = len - done;
		if (n > (1ull << 30))
			n = 1ull << 30;
		/* The file offset is the address (addr < 2^57: no sign). */
		ssize_t got = write
			? pwrite(o->mem, (char *)local + done, n,
				 (off_t)(addr + done))
			: pread(o->mem, (char *)local + done, n,
				(off_t)(addr + done));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) /* EIO: the first page is not mapped */
			return errno == EIO ? -EFAULT : -errno;
		if (got == 0) /* its address space is gone: exec or exit */
			return pidfd_alive(o->pidfd) ? -EPERM : -ESRCH;
		done += (uint64_t)got;
	}
	return (int64_t)len;
}

int cma_owner_probe(const struct cma_owner *o, uint64_t addr)
{
	char byte;
	int64_t rc = mem_copy(o, false, false, &byte, addr, 1);

	return rc < 0 ? (int)rc : 0;
}

static int owner_check(const struct region *r)
{
	if (r->head.kind != REGION_CMA)
		return -EINVAL;
	if (!cma_owner_alive(r->cma))
		return -ESRCH;
	return owner_ids_same(r->cma);
}

int64_t cma_copy(const struct region *r, bool to_region, void *local,
		 uint64_t off, uint64_t len)
{
	int err = owner_check(r);

	if (err)
		return err;
	return mem_copy(r->cma, to_region, false, local, r->addr + off, len);
}

int64_t cma_read_private(const struct region *r, void *local, uint64_t off,
			 uint64_t len)
{
	int err = owner_check(r);

	if (err)
		return err;
	return mem_copy(r->cma, false, true, local, r->addr + off, len);
}

int64_t cma_copyv(const struct region *r, bool to_region,
		  const struct cma_range *v, uint32_t n)
{
	uint64_t sum = 0;
	int err = owner_check(r);

	if (err)
		return err;
	/* One call a range: /proc/PID/mem has one offset a call. */
	for (uint32_t i = 0; i < n; i++) {
		int64_t rc = mem_copy(r->cma, to_region, false, v[i].local,
				      r->addr + v[i].off, v[i].len);
		if (rc < 0)
			return rc;
		sum += v[i].len;
	}
	return (int64_t)sum;
}

void cma_fast_read_counts(uint64_t *done, uint64_t *refused)
{
	*done = atomic_load_explicit(&fast_reads_done, memory_order_relaxed);
	*refused = atomic_load_explicit(&fast_reads_refused,
					memory_order_relaxed);
}
