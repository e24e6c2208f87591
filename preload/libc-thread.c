/* libc-thread.c: thread names. A thread is defined in the trace (tid, name, worker id) when it
 * first records; a name set later with pthread_setname_np is written as a new definition, which
 * supersedes the earlier one (FORMAT.md, definitions: the last one wins). Thread creation itself
 * needs no wrapper: the agent registers threads lazily, and fork is handled by the agent's
 * pthread_atfork handlers. */
#include "preload.h"

#include <pthread.h>

D9_INTERPOSE int pthread_setname_np(pthread_t th, const char *name)
{
	D9_REAL(int, pthread_setname_np, (pthread_t, const char *));
	if (!real_pthread_setname_np)
		return ENOSYS;
	int r = real_pthread_setname_np(th, name);
	if (r == 0 && pthread_equal(th, pthread_self()) && d9__pl_active()) {
		int saved = errno;
		d9_agent_thread_renamed();
		errno = saved;
	}
	return r;
}
