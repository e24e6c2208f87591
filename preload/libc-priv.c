/* libc-priv.c: credential changes. A server that starts as root and gives up its privileges
 * (nginx workers become www-data, named -u bind) could no longer write into the root-owned trace
 * directory: before the libc call, while still privileged, the agent prepares a directory the
 * target user can write to; after it, it records the drop and what the drop takes away (perf,
 * kernel samples). Group changes do not touch what the agent may do (its files and directories
 * are its user's, mode 0600/0700) but are wrapped too, so that the rule holds for every call of
 * the family, from the program or from a library. Calls made with syscall(2) are not seen.
 * Design: agent/DESIGN.md, "Privilege drops". */
#include "preload.h"

#include <grp.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- calls the kernel refuses on this thread ------------------------------------------------
 * glibc makes a set*id call on every thread of the process and aborts the process when the
 * threads' results differ. Capabilities are per thread: a program that gave up CAP_SETUID on its
 * own thread (capset, libcap-ng's capng_apply) while staying root, and then makes a set*id call
 * the kernel refuses it (a defensive setgroups, a check that it cannot become another user),
 * gets EPERM alone, but with the agent's threads, which still have the capability, it would be
 * aborted. So a call the kernel would refuse on the calling thread, with EPERM for want of the
 * capability and by the rules for unprivileged changes, is refused here, without the broadcast:
 * the same result the program has without the agent. Anything else goes to the C library. */
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

/* Whether the kernel refuses, with EPERM, a call of kind how that sets the ids x, y, z (uids, or
 * gids when gid) on this thread: no CAP_SETUID (CAP_SETGID), and not a change its own ids allow
 * (kernel/sys.c: setuid to the real or saved id; setreuid's real to the real or effective, its
 * effective to any of the three; setresuid's each to any of the three; setgroups never). */
static int refused(int gid, enum how how, unsigned x, unsigned y, unsigned z)
{
	unsigned r, e, s;

	if (has_cap(gid ? CAP_SETGID : CAP_SETUID))
		return 0;
	if (how == GROUPS)
		return 1;
	if (gid ? getresgid((gid_t *)&r, (gid_t *)&e, (gid_t *)&s) :
		  getresuid((uid_t *)&r, (uid_t *)&e, (uid_t *)&s))
		return 0;
	switch (how) {
	case ONE:
		return x != ID_NONE && !allowed(x, 2, r, s, 0);
	case RE:
		return !allowed(x, 2, r, e, 0) || !allowed(y, 3, r, e, s);
	default:
		return !allowed(x, 3, r, e, s) || !allowed(y, 3, r, e, s) || !allowed(z, 3, r, e, s);
	}
}

/* Runs `call` between the agent's two steps: the effective uid it sets is `euid`; but not a call
 * refused on this thread (`refuse`, above), which fails here with EPERM. */
#define CREDS_CALL(refuse, euid, call)                                             \
	do {                                                                       \
		if (refuse) {                                                      \
			errno = EPERM;                                             \
			return -1;                                                 \
		}                                                                  \
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
	CREDS_CALL(refused(0, ONE, uid, ID_NONE, ID_NONE), (unsigned)uid, real_setuid(uid));
}

D9_INTERPOSE int seteuid(uid_t euid)
{
	CREDS_REAL(int, seteuid, (uid_t));
	CREDS_CALL(refused(0, RES, ID_NONE, euid, ID_NONE), (unsigned)euid, real_seteuid(euid));
}

D9_INTERPOSE int setreuid(uid_t ruid, uid_t euid)
{
	CREDS_REAL(int, setreuid, (uid_t, uid_t));
	CREDS_CALL(refused(0, RE, ruid, euid, ID_NONE), (unsigned)euid, real_setreuid(ruid, euid));
}

D9_INTERPOSE int setresuid(uid_t ruid, uid_t euid, uid_t suid)
{
	CREDS_REAL(int, setresuid, (uid_t, uid_t, uid_t));
	CREDS_CALL(refused(0, RES, ruid, euid, suid), (unsigned)euid,
		real_setresuid(ruid, euid, suid));
}

D9_INTERPOSE int setgid(gid_t gid)
{
	CREDS_REAL(int, setgid, (gid_t));
	CREDS_CALL(refused(1, ONE, gid, ID_NONE, ID_NONE), (unsigned)-1, real_setgid(gid));
}

D9_INTERPOSE int setegid(gid_t egid)
{
	CREDS_REAL(int, setegid, (gid_t));
	CREDS_CALL(refused(1, RES, ID_NONE, egid, ID_NONE), (unsigned)-1, real_setegid(egid));
}

D9_INTERPOSE int setregid(gid_t rgid, gid_t egid)
{
	CREDS_REAL(int, setregid, (gid_t, gid_t));
	CREDS_CALL(refused(1, RE, rgid, egid, ID_NONE), (unsigned)-1, real_setregid(rgid, egid));
}

D9_INTERPOSE int setresgid(gid_t rgid, gid_t egid, gid_t sgid)
{
	CREDS_REAL(int, setresgid, (gid_t, gid_t, gid_t));
	CREDS_CALL(refused(1, RES, rgid, egid, sgid), (unsigned)-1,
		real_setresgid(rgid, egid, sgid));
}

D9_INTERPOSE int setgroups(size_t size, const gid_t *list)
{
	CREDS_REAL(int, setgroups, (size_t, const gid_t *));
	CREDS_CALL(refused(1, GROUPS, 0, 0, 0), (unsigned)-1, real_setgroups(size, list));
}

D9_INTERPOSE int initgroups(const char *user, gid_t group)
{
	CREDS_REAL(int, initgroups, (const char *, gid_t));
	CREDS_CALL(refused(1, GROUPS, 0, 0, 0), (unsigned)-1, real_initgroups(user, group));
}
