/* libc-direct.c: when the wrappers may enter the kernel themselves (d9__direct, preload.h).
 *
 * glibc 2.36 runs a cancellable call (read, write, recv, send, epoll_wait, poll, select, close,
 * ...) in one of two ways. With one thread in the process it makes the system call and nothing
 * else. With two or more it first marks the thread as cancellable asynchronously and unmarks it
 * after (two atomic read-modify-writes of its cancel state, about 40 instructions and, on these
 * VMs, more time than the wrapper around it), so that pthread_cancel can interrupt the call. A
 * single-threaded server run with the agent is no longer single-threaded (d9-writer,
 * d9-compress), and would pay that on every call for a cancellation nobody can ask for: no
 * thread of the host exists to call pthread_cancel.
 *
 * So while the host has started no thread of its own and cancelled none, the hottest wrappers
 * make the system call as glibc would in the process without the agent. The state ends for good
 * at the first pthread_create or thrd_create by the host (the agent's own threads and those the
 * libraries it calls start do not count) and at the first pthread_cancel by anyone; it never
 * begins when another thread already ran before the agent loaded (glibc's own
 * __libc_single_threaded), or when any of the names resolves past the agent to something other
 * than the C library (another interposer, whose wrapper must still run). What this cannot see is
 * in agent/DESIGN.md, "Direct system calls". */
#include "preload.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/single_threaded.h>
#include <mqueue.h>
#include <signal.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>

int d9__direct;
int d9__pass_direct;

/* errno's address is asked of the C library once per thread (a call through the PLT each time
 * otherwise); a thread's TLS keeps its address for the thread's life, and a forked child's
 * thread has the same. */
long d9__sys_fail_first(long r)
{
	d9__pl.errnop = &errno;
	errno = (int)-r;
	return -1;
}

/* glibc 2.32 and later; weak, so that an older C library (which the agent is not built for, but
 * a host might bring) leaves the flag off instead of failing the program's start */
#pragma weak __libc_single_threaded

/* The names whose wrappers use D9__SYS (select: select_direct, libc-wait.c). */
static const char *const direct_names[] = {
	"read", "write", "readv", "writev", "pread", "pwrite", "recv", "recvfrom", "recvmsg",
	"send", "sendto", "sendmsg", "open", "openat", "close", "accept", "accept4", "connect",
	"epoll_wait", "epoll_pwait", "poll", "select",
};

void d9__direct_sync(void)
{
	__atomic_store_n(&d9__pass_direct, d9__direct_on() && !d9__pcfg.requests,
		__ATOMIC_RELAXED);
}

static void direct_off(void)
{
	__atomic_store_n(&d9__pass_direct, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&d9__direct, 0, __ATOMIC_RELAXED);
}

/* Before the agent's own constructor starts its threads: priority 101 runs first in this
 * object. */
__attribute__((constructor(101))) static void direct_init(void)
{
#if defined(__x86_64__)
	if (!&__libc_single_threaded || !__libc_single_threaded)
		return; /* loaded late, into a process with threads already */
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	if (!libc)
		return;
	int ok = 1;
	for (size_t i = 0; ok && i < sizeof direct_names / sizeof direct_names[0]; i++) {
		void *next = d9__real(direct_names[i], NULL);
		ok = next && next == dlsym(libc, direct_names[i]);
	}
	dlclose(libc);
	__atomic_store_n(&d9__direct, ok, __ATOMIC_RELAXED);
	d9__direct_sync();
#endif
}

/* A thread started by the host, not by the agent or a library on an agent thread (libcurl's
 * resolver). */
static void host_starts_thread(void)
{
	/* a thread under a seccomp filter is busy for good, and still the program's */
	if ((!d9__self.busy || d9__self.filtered) && d9__self.role != D9_ROLE_AGENT)
		direct_off();
}

/* A thread a library starts on an agent thread (libcurl's resolver on d9-s3) is the agent's: it
 * records nothing, and it shares its creator's descriptor table, which may be one of the agent's
 * own (agent/fdown.c): its numbers are then not the program's either. The agent's own threads
 * (d9__spawn_blocked, busy meanwhile) say what they are themselves. */
struct agent_start {
	void *(*fn)(void *);
	void *arg;
	uint8_t fd_private;
};

static void *agent_started(void *p)
{
	struct agent_start a = *(struct agent_start *)p;

	d9__mem_free(p);
	d9__self.role = D9_ROLE_AGENT;
	d9__self.fd_private = a.fd_private;
	return a.fn(a.arg);
}

/* A thread started by a thread under a seccomp filter has that filter: it records nothing and
 * the agent makes no call on it (lifecycle.c, d9_agent_seccomp_before). Its start goes through
 * the program's own malloc, as pthread_create's own does. */
struct filtered_start {
	void *(*fn)(void *);
	void *arg;
};

static void *filtered_started(void *p)
{
	struct filtered_start a = *(struct filtered_start *)p;

	free(p);
	d9__self.filtered = 1;
	d9__self.busy = 1;
	return a.fn(a.arg);
}

struct filtered_thrd {
	thrd_start_t fn;
	void *arg;
};

static int filtered_thrd_started(void *p)
{
	struct filtered_thrd a = *(struct filtered_thrd *)p;

	free(p);
	d9__self.filtered = 1;
	d9__self.busy = 1;
	return a.fn(a.arg);
}

D9_INTERPOSE int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
	void *arg)
{
	D9_REAL(int, pthread_create, (pthread_t *, const pthread_attr_t *, void *(*)(void *),
		void *));
	host_starts_thread();
	if (!real_pthread_create)
		return EAGAIN;
	if (D9_UNLIKELY(d9__self.filtered)) {
		struct filtered_start *a = malloc(sizeof(*a));
		if (!a)
			return EAGAIN;
		*a = (struct filtered_start){ fn, arg };
		int err = real_pthread_create(th, attr, filtered_started, a);
		if (err)
			free(a);
		return err;
	}
	if (D9_UNLIKELY(d9__self.role == D9_ROLE_AGENT && !d9__self.busy)) {
		struct agent_start *a = d9__mem_alloc(sizeof(*a));
		if (!a)
			return EAGAIN;
		*a = (struct agent_start){ fn, arg, d9__self.fd_private };
		int err = real_pthread_create(th, attr, agent_started, a);
		if (err)
			d9__mem_free(a);
		return err;
	}
	return real_pthread_create(th, attr, fn, arg);
}

/* Threads the C library starts itself, without pthread_create through the PLT: the notification
 * threads of timer_create(SIGEV_THREAD) and mq_notify(SIGEV_THREAD). Asked for by a thread under
 * a seccomp filter, they have its filter (the helper thread that starts them is that thread's
 * child): their function is wrapped to mark them first, as filtered_started does. The wrapper's
 * record lives as long as the timer or the notification may fire (a few bytes, not freed). */
struct filtered_notify {
	void (*fn)(union sigval);
	union sigval value;
};

static void filtered_notified(union sigval v)
{
	struct filtered_notify *n = v.sival_ptr;

	d9__self.filtered = 1;
	d9__self.busy = 1;
	n->fn(n->value);
}

/* ev, or a copy in *copy whose function marks the notification thread filtered */
static const struct sigevent *filtered_sigevent(const struct sigevent *ev, struct sigevent *copy)
{
	if (!ev || ev->sigev_notify != SIGEV_THREAD || !ev->sigev_notify_function ||
		!d9__calls_off())
		return ev;
	struct filtered_notify *n = malloc(sizeof(*n));
	if (!n)
		return ev; /* unmarked: its first wait may be the agent's call the filter kills at */
	*n = (struct filtered_notify){ ev->sigev_notify_function, ev->sigev_value };
	*copy = *ev;
	copy->sigev_notify_function = filtered_notified;
	copy->sigev_value.sival_ptr = n;
	return copy;
}

D9_INTERPOSE int timer_create(clockid_t clock, struct sigevent *ev, timer_t *timer)
{
	D9_REAL(int, timer_create, (clockid_t, struct sigevent *, timer_t *));
	struct sigevent copy;
	if (!real_timer_create) {
		errno = ENOSYS;
		return -1;
	}
	return real_timer_create(clock, (struct sigevent *)filtered_sigevent(ev, &copy), timer);
}

D9_INTERPOSE int mq_notify(mqd_t q, const struct sigevent *ev)
{
	D9_REAL(int, mq_notify, (mqd_t, const struct sigevent *));
	struct sigevent copy;
	if (!real_mq_notify) {
		errno = ENOSYS;
		return -1;
	}
	return real_mq_notify(q, filtered_sigevent(ev, &copy));
}

/* glibc's thrd_create starts its thread without calling pthread_create through the PLT. */
D9_INTERPOSE int thrd_create(thrd_t *th, thrd_start_t fn, void *arg)
{
	D9_REAL(int, thrd_create, (thrd_t *, thrd_start_t, void *));
	host_starts_thread();
	if (!real_thrd_create)
		return thrd_error;
	if (D9_UNLIKELY(d9__self.filtered)) {
		struct filtered_thrd *a = malloc(sizeof(*a));
		if (!a)
			return thrd_nomem;
		*a = (struct filtered_thrd){ fn, arg };
		int err = real_thrd_create(th, filtered_thrd_started, a);
		if (err != thrd_success)
			free(a);
		return err;
	}
	return real_thrd_create(th, fn, arg);
}

/* Before the request: from now on every call goes through the C library, which acts on it. */
D9_INTERPOSE int pthread_cancel(pthread_t th)
{
	D9_REAL(int, pthread_cancel, (pthread_t));
	direct_off();
	if (!real_pthread_cancel)
		return ESRCH;
	return real_pthread_cancel(th);
}
