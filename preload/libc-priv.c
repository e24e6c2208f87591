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
#include <unistd.h>

/* Runs `call` between the agent's two steps: the effective uid it sets is `euid`. */
#define CREDS_CALL(euid, call)                                                     \
	do {                                                                       \
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
	CREDS_CALL((unsigned)uid, real_setuid(uid));
}

D9_INTERPOSE int seteuid(uid_t euid)
{
	CREDS_REAL(int, seteuid, (uid_t));
	CREDS_CALL((unsigned)euid, real_seteuid(euid));
}

D9_INTERPOSE int setreuid(uid_t ruid, uid_t euid)
{
	CREDS_REAL(int, setreuid, (uid_t, uid_t));
	CREDS_CALL((unsigned)euid, real_setreuid(ruid, euid));
}

D9_INTERPOSE int setresuid(uid_t ruid, uid_t euid, uid_t suid)
{
	CREDS_REAL(int, setresuid, (uid_t, uid_t, uid_t));
	CREDS_CALL((unsigned)euid, real_setresuid(ruid, euid, suid));
}

D9_INTERPOSE int setgid(gid_t gid)
{
	CREDS_REAL(int, setgid, (gid_t));
	CREDS_CALL((unsigned)-1, real_setgid(gid));
}

D9_INTERPOSE int setegid(gid_t egid)
{
	CREDS_REAL(int, setegid, (gid_t));
	CREDS_CALL((unsigned)-1, real_setegid(egid));
}

D9_INTERPOSE int setregid(gid_t rgid, gid_t egid)
{
	CREDS_REAL(int, setregid, (gid_t, gid_t));
	CREDS_CALL((unsigned)-1, real_setregid(rgid, egid));
}

D9_INTERPOSE int setresgid(gid_t rgid, gid_t egid, gid_t sgid)
{
	CREDS_REAL(int, setresgid, (gid_t, gid_t, gid_t));
	CREDS_CALL((unsigned)-1, real_setresgid(rgid, egid, sgid));
}

D9_INTERPOSE int setgroups(size_t size, const gid_t *list)
{
	CREDS_REAL(int, setgroups, (size_t, const gid_t *));
	CREDS_CALL((unsigned)-1, real_setgroups(size, list));
}

D9_INTERPOSE int initgroups(const char *user, gid_t group)
{
	CREDS_REAL(int, initgroups, (const char *, gid_t));
	CREDS_CALL((unsigned)-1, real_initgroups(user, group));
}
