/* libc-thread.c: thread names, and gmtime_r on the agent's threads (at the end). A thread is
 * defined in the trace (tid, name, worker id) when it first records; a name set later is written
 * as a new definition, which supersedes the earlier one (FORMAT.md, definitions: the last one
 * wins). A thread renaming itself (pthread_setname_np on itself, prctl(PR_SET_NAME)) is defined
 * again at once; a rename of another thread (memcached names its mc-worker threads from the main
 * thread) only marks the names stale, and the writer reads /proc/self/task/TID/comm (defs.c).
 * Thread creation itself needs no wrapper: the agent registers threads lazily, and fork is handled
 * by the agent's pthread_atfork handlers (libc-direct.c wraps pthread_create, but only to see that
 * the host has threads). */
#include "preload.h"
#include "s3.h"

#include <pthread.h>
#include <stdarg.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <time.h>

D9_INTERPOSE int pthread_setname_np(pthread_t th, const char *name)
{
	D9_REAL(int, pthread_setname_np, (pthread_t, const char *));
	if (!real_pthread_setname_np)
		return ENOSYS;
	int r = real_pthread_setname_np(th, name);
	if (r == 0 && d9__pl_active()) {
		int saved = errno;
		if (pthread_equal(th, pthread_self()))
			d9_agent_thread_renamed();
		else
			d9_agent_thread_renamed_other();
		errno = saved;
	}
	return r;
}

/* prctl is variadic; every option takes at most four more arguments of register size, which
 * glibc itself passes on as unsigned long. */
D9_INTERPOSE int prctl(int option, ...)
{
	D9_REAL(int, prctl, (int, unsigned long, unsigned long, unsigned long, unsigned long));
	va_list ap;

	va_start(ap, option);
	unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
	unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (!real_prctl) {
		errno = ENOSYS;
		return -1;
	}
	/* a seccomp filter on this thread (the prctl form has no TSYNC): agent/d9-agent.h */
	int sec = option == PR_SET_SECCOMP && (a2 == SECCOMP_MODE_STRICT ||
		(a2 == SECCOMP_MODE_FILTER && a3)) ? d9_agent_seccomp_before(0) : 0;
	int r = real_prctl(option, a2, a3, a4, a5);
	if (sec)
		d9_agent_seccomp_after(sec, r == 0);
	if (r == 0 && option == PR_SET_NAME && d9__pl_active()) {
		int saved = errno;
		d9_agent_thread_renamed();
		errno = saved;
	}
	return r;
}

/* ---- gmtime_r on the agent's threads ---------------------------------------------------------
 * glibc's gmtime_r takes the time-zone lock, which a fork does not reset: the uploader thread
 * (libcurl's SigV4 signing calls gmtime_r for every request) caught inside it by a host's fork
 * would hang the child's first localtime, strftime or log line for ever. On an agent thread the
 * answer is computed without the lock (UTC needs no zone); the host's calls go to libc as they
 * are. */
D9_INTERPOSE struct tm *gmtime_r(const time_t *t, struct tm *tm)
{
	D9_REAL(struct tm *, gmtime_r, (const time_t *, struct tm *));
	if (d9__self.role == D9_ROLE_AGENT || !real_gmtime_r)
		return d9__utc_tm((int64_t)*t, tm);
	return real_gmtime_r(t, tm);
}
