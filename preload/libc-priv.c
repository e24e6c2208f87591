/* libc-priv.c: credential changes. A server that starts as root and gives up its privileges
 * (nginx workers become www-data, named -u bind) could no longer write into the root-owned trace
 * directory: before the libc call, while still privileged, the agent prepares a directory the
 * target user can write to; after it, it records the drop and what the drop takes away (perf,
 * kernel samples). Group changes do not touch what the agent may do (its files and directories
 * are its user's, mode 0600/0700) but are wrapped too, so that the rule holds for every call of
 * the family, from the program or from a library. Calls made with syscall(2) are not seen.
 * Design: agent/DESIGN.md, "Privilege drops". */
#include "preload.h"
#include "internal.h" /* d9__seccomp_filtered */

#include <grp.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- calls the kernel answers differently on this thread ------------------------------------
 * glibc makes a set*id call on every thread of the process and aborts the process when the
 * threads' results differ. Capabilities are per thread: a program that gave up CAP_SETUID on its
 * own thread (capset, libcap-ng's capng_apply) while staying root has threads of the agent's that
 * still have it. So, for a thread without the capability (CAP_SETGID for the group calls):
 *   - a call the kernel refuses it (a defensive setgroups, a check that it cannot become another
 *     user) is made on this thread alone, with the system call itself: it changes nothing, and
 *     its answer (EPERM; EINVAL for an id a user namespace does not map) is the program's, as
 *     without the agent, where the agent's threads would have succeeded and glibc aborted;
 *   - setuid(x) and setgid(x), which without the capability set only the effective id (and the
 *     file system one), become setresuid(-1, x, -1) and setresgid(-1, x, -1): the same on this
 *     thread, and the same on the agent's threads, where setuid would have set all three ids and
 *     left the threads' ids apart (a later call then aborted the program). The other calls'
 *     effects do not depend on the capability.
 * Under a seccomp filter nothing is asked (capget may be one the filter kills at): the C library
 * as before. errno is kept. */
#define ID_NONE ((unsigned)-1)

/* 1 when this thread's effective capabilities hold cap, or cannot be read */
static int has_cap(unsigned cap)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) != 0)
		return 1;
	return (d[cap / 32].effective >> (cap % 32)) & 1;
}

/* id (ID_NONE: unchanged) is one an unprivileged thread may take: one of the n ids given */
static int allowed(unsigned id, int n, unsigned a, unsigned b, unsigned c)
{
	return id == ID_NONE || id == a || id == b || (n > 2 && id == c);
}

enum how { ONE, RE, RES, GROUPS };
enum check { CHK_LIBC, CHK_REFUSED, CHK_UNPRIV };

/* How to make a call of kind how that sets the ids x, y, z (uids, or gids when gid) on this
 * thread: CHK_LIBC (it has the capability, or that is not known), CHK_REFUSED (the kernel
 * refuses it: kernel/sys.c lets an unprivileged thread setuid to its real or saved id; setreuid
 * its real to the real or effective, its effective to any of the three; setresuid each to any
 * of the three; setgroups never), CHK_UNPRIV (allowed without the capability). */
static enum check creds_check(int gid, enum how how, unsigned x, unsigned y, unsigned z)
{
	int saved = errno;
	enum check c = CHK_LIBC;
	unsigned r, e, s;

	if (how == ONE && x == ID_NONE)
		return CHK_LIBC; /* EINVAL: the C library says it */
	uint8_t busy = d9__self.busy;
	d9__self.busy = 1; /* the status file read is the agent's */
	int filtered = d9__seccomp_filtered();
	d9__self.busy = busy;
	if (filtered || has_cap(gid ? CAP_SETGID : CAP_SETUID))
		goto out;
	c = CHK_REFUSED;
	if (how == GROUPS)
		goto out;
	if (gid ? getresgid((gid_t *)&r, (gid_t *)&e, (gid_t *)&s) :
		  getresuid((uid_t *)&r, (uid_t *)&e, (uid_t *)&s)) {
		c = CHK_LIBC;
		goto out;
	}
	int ok;
	switch (how) {
	case ONE:
		ok = allowed(x, 2, r, s, 0);
		break;
	case RE:
		ok = allowed(x, 2, r, e, 0) && allowed(y, 3, r, e, s);
		break;
	default:
		ok = allowed(x, 3, r, e, s) && allowed(y, 3, r, e, s) && allowed(z, 3, r, e, s);
	}
	if (ok)
		c = CHK_UNPRIV;
out:
	errno = saved;
	return c;
}

/* Runs `call` between the agent's two steps: the effective uid it sets is `euid`. A call the
 * kernel refuses this thread (chk, above) is the system call `raw` on this thread alone; should
 * the kernel take it after all, the C library makes it on every thread. */
#define CREDS_CALL(chk, raw, euid, call)                                           \
	do {                                                                       \
		if ((chk) == CHK_REFUSED) {                                        \
			int saved0_ = errno;                                       \
			if ((raw) != 0)                                            \
				return -1; /* errno: the kernel's */               \
			errno = saved0_;                                           \
		}                                                                  \
		if (d9__calls_off())                                               \
			return (call); /* no call of the agent's on it (lifecycle.c) */ \
		unsigned from_ = (unsigned)geteuid();                              \
		int token_ = d9_agent_creds_before(euid);                          \
		int r_ = (call);                                                   \
		int saved_ = errno;                                                \
		d9_agent_creds_after(token_, from_, r_ == 0);                      \
		errno = saved_;                                                    \
		return r_;                                                         \
	} while (0)

#define CREDS_REAL(ret, name, params)                                              \
	D9_REAL(ret, name, params);                                                \
	if (!real_##name) {                                                        \
		errno = ENOSYS;                                                    \
		return -1;                                                         \
	}

D9_INTERPOSE int setuid(uid_t uid)
{
	CREDS_REAL(int, setuid, (uid_t));
	D9_REAL(int, setresuid, (uid_t, uid_t, uid_t));
	enum check c = creds_check(0, ONE, uid, ID_NONE, ID_NONE);
	if (c == CHK_UNPRIV && real_setresuid)
		CREDS_CALL(c, 0, (unsigned)uid, real_setresuid((uid_t)-1, uid, (uid_t)-1));
	CREDS_CALL(c, syscall(SYS_setuid, uid), (unsigned)uid, real_setuid(uid));
}

D9_INTERPOSE int seteuid(uid_t euid)
{
	CREDS_REAL(int, seteuid, (uid_t));
	CREDS_CALL(creds_check(0, RES, ID_NONE, euid, ID_NONE),
		syscall(SYS_setresuid, -1, euid, -1), (unsigned)euid, real_seteuid(euid));
}

D9_INTERPOSE int setreuid(uid_t ruid, uid_t euid)
{
	CREDS_REAL(int, setreuid, (uid_t, uid_t));
	CREDS_CALL(creds_check(0, RE, ruid, euid, ID_NONE), syscall(SYS_setreuid, ruid, euid),
		(unsigned)euid, real_setreuid(ruid, euid));
}

D9_INTERPOSE int setresuid(uid_t ruid, uid_t euid, uid_t suid)
{
	CREDS_REAL(int, setresuid, (uid_t, uid_t, uid_t));
	CREDS_CALL(creds_check(0, RES, ruid, euid, suid), syscall(SYS_setresuid, ruid, euid, suid),
		(unsigned)euid, real_setresuid(ruid, euid, suid));
}

D9_INTERPOSE int setgid(gid_t gid)
{
	CREDS_REAL(int, setgid, (gid_t));
	D9_REAL(int, setresgid, (gid_t, gid_t, gid_t));
	enum check c = creds_check(1, ONE, gid, ID_NONE, ID_NONE);
	if (c == CHK_UNPRIV && real_setresgid)
		CREDS_CALL(c, 0, (unsigned)-1, real_setresgid((gid_t)-1, gid, (gid_t)-1));
	CREDS_CALL(c, syscall(SYS_setgid, gid), (unsigned)-1, real_setgid(gid));
}

D9_INTERPOSE int setegid(gid_t egid)
{
	CREDS_REAL(int, setegid, (gid_t));
	CREDS_CALL(creds_check(1, RES, ID_NONE, egid, ID_NONE),
		syscall(SYS_setresgid, -1, egid, -1), (unsigned)-1, real_setegid(egid));
}

D9_INTERPOSE int setregid(gid_t rgid, gid_t egid)
{
	CREDS_REAL(int, setregid, (gid_t, gid_t));
	CREDS_CALL(creds_check(1, RE, rgid, egid, ID_NONE), syscall(SYS_setregid, rgid, egid),
		(unsigned)-1, real_setregid(rgid, egid));
}

D9_INTERPOSE int setresgid(gid_t rgid, gid_t egid, gid_t sgid)
{
	CREDS_REAL(int, setresgid, (gid_t, gid_t, gid_t));
	CREDS_CALL(creds_check(1, RES, rgid, egid, sgid), syscall(SYS_setresgid, rgid, egid, sgid),
		(unsigned)-1, real_setresgid(rgid, egid, sgid));
}

D9_INTERPOSE int setgroups(size_t size, const gid_t *list)
{
	CREDS_REAL(int, setgroups, (size_t, const gid_t *));
	CREDS_CALL(creds_check(1, GROUPS, 0, 0, 0), syscall(SYS_setgroups, size, list), (unsigned)-1,
		real_setgroups(size, list));
}

/* initgroups looks the groups up, then sets them: refused, the setting is (of none) */
D9_INTERPOSE int initgroups(const char *user, gid_t group)
{
	CREDS_REAL(int, initgroups, (const char *, gid_t));
	CREDS_CALL(creds_check(1, GROUPS, 0, 0, 0), syscall(SYS_setgroups, 0, NULL), (unsigned)-1,
		real_initgroups(user, group));
}
