/* test-fdown.c: which descriptor numbers are the agent's (agent/fdown.c), with real descriptors
 * and threads: the program's take of an agent number waits for the agent's call in progress and
 * the agent then leaves the number alone; a number just marked waits for the program's calls
 * that began before the mark; and the waits that must not happen do not: a thread's own hold (a
 * signal handler on it), a child made without the fork handlers, an agent call stuck in the
 * kernel (1 s at most). Each test runs in its own child (t.h), with an alarm against a hang. */
#include "../../agent/fdown.c"
#include "t.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

/* What fdown.c calls of the agent's (clock.c), stood in for: clock.c brings the logger. */
uint64_t d9__mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define now_ns d9__mono_ns

/* The agent's state that fdown.c reads: the calling thread's, and the configuration (a table of
 * its own for agent threads unless D9_AGENT_FDS=shared). */
__thread struct d9__thr d9__self __attribute__((tls_model("initial-exec")));
int d9__no_calls; /* the agent's (record.c), never set here */
struct d9__agent d9__g;

static uint32_t word(int fd)
{
	return __atomic_load_n(&d9__fd_words[fd], __ATOMIC_SEQ_CST);
}

/* A fresh descriptor marked the agent's. */
static int agent_fd(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	T_ASSERT(fd >= 0);
	T_EQ(d9__fd_own(fd), 0);
	return fd;
}

static int taker_fd;
static int taker_done;

static void *taker(void *arg)
{
	(void)arg;
	d9__fd_host_take(taker_fd);
	__atomic_store_n(&taker_done, 1, __ATOMIC_SEQ_CST);
	d9__fd_host_done(taker_fd);
	return NULL;
}

/* Waits (10 s at most) until cond holds. */
#define WAIT_FOR(cond)                                                          \
	do {                                                                    \
		uint64_t t_end = now_ns() + 10000000000ull;                     \
		while (!(cond) && now_ns() < t_end)                             \
			usleep(1000);                                           \
		T_ASSERT(cond);                                                 \
	} while (0)

TEST(take_waits_for_the_agents_call)
{
	alarm(20);
	int fd = agent_fd();
	T_EQ(d9__fd_enter(fd), 0);
	taker_fd = fd;
	pthread_t t;
	T_EQ(pthread_create(&t, NULL, taker, NULL), 0);
	/* the program's thread has taken the mark (OURS -> REVOKED) and waits for the call */
	WAIT_FOR(!(word(fd) & D9__FD_OURS));
	T_ASSERT(word(fd) & D9__FD_REVOKED);
	T_EQ(__atomic_load_n(&taker_done, __ATOMIC_SEQ_CST), 0);
	d9__fd_leave(fd);
	WAIT_FOR(__atomic_load_n(&taker_done, __ATOMIC_SEQ_CST));
	pthread_join(t, NULL);
	T_EQ(d9__fd_taken, 1);
	/* the number is the program's now: the agent neither uses nor closes it */
	T_EQ(d9__fd_enter(fd), -ESTALE);
	T_EQ(d9__fd_close(fd), -ESTALE);
	T_ASSERT(fcntl(fd, F_GETFD) >= 0);
	T_EQ(word(fd) & (D9__FD_OURS | D9__FD_REVOKED), 0);
}

TEST(agent_close_of_a_taken_number_closes_nothing)
{
	alarm(20);
	int fd = agent_fd();
	d9__fd_host_take(fd);
	d9__fd_host_done(fd);
	T_EQ(d9__fd_agent_close(fd), 0); /* zlib's close on an agent thread */
	T_ASSERT(fcntl(fd, F_GETFD) >= 0);
	int other = agent_fd();
	T_EQ(d9__fd_agent_close(other), 0); /* still the agent's: closed */
	T_ASSERT(fcntl(other, F_GETFD) < 0 && errno == EBADF);
	T_EQ(word(other), 0);
}

TEST(mark_waits_for_earlier_program_calls)
{
	alarm(20);
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	T_ASSERT(fd >= 0);
	/* a program's close of the number began before the mark (read the word unmarked) */
	d9__fd_host_take(fd);
	uint64_t t0 = now_ns();
	T_EQ(d9__fd_own(fd), -EAGAIN); /* not known to be free of that call: not the agent's */
	T_ASSERT(now_ns() - t0 >= DRAIN_WAIT_NS);
	T_EQ(word(fd) & D9__FD_OURS, 0);
	d9__fd_host_done(fd);
	T_EQ(d9__fd_own(fd), 0);
	/* a close_range in progress counts the same */
	d9__fd_host_take_range(0, 0);
	int fd2 = open("/dev/null", O_RDWR | O_CLOEXEC);
	T_EQ(d9__fd_own(fd2), -EAGAIN);
	d9__fd_host_range_done();
	T_EQ(d9__fd_own(fd2), 0);
}

TEST(range_takes_every_agent_number_in_it)
{
	alarm(20);
	int a = agent_fd(), b = agent_fd(), c = agent_fd();
	int lo = a < b ? a : b, hi = a < b ? b : a;
	if (c > lo && c < hi)
		T_SKIP("descriptors not in the order opened");
	d9__fd_host_take_range((unsigned)lo, (unsigned)hi);
	d9__fd_host_range_done();
	T_EQ(d9__fd_enter(a), -ESTALE);
	T_EQ(d9__fd_enter(b), -ESTALE);
	T_EQ(d9__fd_enter(c), 0); /* outside the range */
	d9__fd_leave(c);
	T_EQ(d9__fd_taken, 2);
}

TEST(own_hold_does_not_wait)
{
	/* a signal handler run on the thread that holds the number closes it: no wait for itself */
	alarm(20);
	int fd = agent_fd();
	T_EQ(d9__fd_enter(fd), 0);
	d9__fd_host_take(fd);
	d9__fd_host_done(fd);
	T_EQ(d9__fd_taken, 1);
	d9__fd_leave(fd);
	/* and a number this thread closes as the agent, given to it again inside that close */
	int fd2 = agent_fd();
	T_EQ(d9__fd_enter(fd2), 0);
	T_EQ(d9__fd_own(fd2), 0);
	d9__fd_leave(fd2);
}

TEST(child_without_fork_handlers_does_not_wait)
{
	alarm(20);
	int fd = agent_fd();
	T_EQ(d9__fd_enter(fd), 0); /* the agent's write in progress, in the parent */
	pid_t pid = (pid_t)syscall(SYS_fork); /* no pthread_atfork handlers: d9__fd_child not run */
	if (pid == 0) {
		d9__fd_host_take(fd); /* the child's daemon-style close: its own table */
		d9__fd_host_done(fd);
		_exit(word(fd) & D9__FD_OURS ? 0 : 1); /* the parent's mark left alone */
	}
	T_ASSERT(pid > 0);
	int status = 0;
	uint64_t end = now_ns() + 10000000000ull;
	while (waitpid(pid, &status, WNOHANG) == 0 && now_ns() < end)
		usleep(1000);
	if (now_ns() >= end) {
		kill(pid, SIGKILL);
		T_FAIL("the child waited for its parent's call");
	}
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	d9__fd_leave(fd);
}

static int stuck_fd, stuck_go;

static void *stuck(void *arg)
{
	(void)arg;
	if (d9__fd_enter(stuck_fd) != 0)
		return NULL;
	__atomic_store_n(&stuck_go, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&stuck_go, __ATOMIC_SEQ_CST) == 1)
		usleep(1000); /* an agent call stuck in the kernel (a hung file system) */
	d9__fd_leave(stuck_fd);
	return NULL;
}

/* An agent number held by another thread until stuck_end; the program's take of it given up
 * (1 s). */
static pthread_t stuck_start(void)
{
	pthread_t t;

	stuck_fd = agent_fd();
	T_EQ(pthread_create(&t, NULL, stuck, NULL), 0);
	WAIT_FOR(__atomic_load_n(&stuck_go, __ATOMIC_SEQ_CST) == 1);
	uint64_t t0 = now_ns();
	d9__fd_host_take(stuck_fd);
	d9__fd_host_done(stuck_fd);
	T_ASSERT(now_ns() - t0 >= TAKE_WAIT_NS);
	return t;
}

static void stuck_end(pthread_t t)
{
	__atomic_store_n(&stuck_go, 2, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);
}

TEST(take_waits_one_second_at_most)
{
	alarm(20);
	pthread_t t = stuck_start();
	T_EQ(d9__fd_take_timeouts, 1);
	stuck_end(t);
}

TEST(no_second_mark_of_a_number_the_program_took)
{
	alarm(20);
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	T_ASSERT(fd >= 0);
	T_EQ(d9__fd_mark_new(fd), 0); /* an agent thread's open, marked by the interposer */
	d9__fd_host_take(fd); /* the program closes it and puts a file of its own there */
	d9__fd_host_done(fd);
	T_EQ(d9__fd_own(fd), -ESTALE); /* the agent's code must not mark it again */
	T_EQ(word(fd) & D9__FD_OURS, 0);
	/* a number the kernel gives out again, REVOKED left by an earlier holder: the agent's */
	int again = open("/dev/null", O_RDWR | O_CLOEXEC);
	T_ASSERT(again >= 0);
	T_EQ(d9__fd_own(again), 0);
	d9__fd_host_take(again);
	d9__fd_host_done(again);
	T_EQ(d9__fd_own(again), 0);
	T_EQ(word(again) & (D9__FD_OURS | D9__FD_REVOKED), D9__FD_OURS);
}

TEST(other_process_marks_nothing)
{
	/* a vfork child shares the parent's marks: it must not add to them (a raw fork stands in) */
	alarm(20);
	int fd = agent_fd();
	pid_t pid = (pid_t)syscall(SYS_fork);
	if (pid == 0) {
		int nfd = open("/dev/null", O_RDWR | O_CLOEXEC);
		_exit(d9__fd_own(nfd) == -EAGAIN && word(fd) == D9__FD_OURS ? 0 : 1);
	}
	T_ASSERT(pid > 0);
	int status = 0;
	T_EQ(waitpid(pid, &status, 0), pid);
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(mark_waits_one_second_at_most_for_a_stuck_call)
{
	alarm(20);
	pthread_t t = stuck_start(); /* the number is the program's after 1 s */
	uint64_t t0 = now_ns();
	T_EQ(d9__fd_own(stuck_fd), -EAGAIN); /* given out again while the call is still stuck */
	T_ASSERT(now_ns() - t0 >= TAKE_WAIT_NS);
	stuck_end(t);
	T_EQ(d9__fd_own(stuck_fd), 0);
}

TEST(forked_child_resets_the_counts)
{
	alarm(20);
	int fd = agent_fd();
	T_EQ(d9__fd_enter(fd), 0);
	d9__fd_host_take(7); /* another thread's calls in progress at the fork */
	d9__fd_child();
	T_EQ(word(fd), D9__FD_OURS); /* still the agent's, nothing in progress */
	T_EQ(word(7), 0);
}

/* An agent thread's table of its own (d9__fd_private_begin): none of the program's descriptors,
 * /dev/null at 0, 1 and 2, its numbers never marked, and the program's take of such a number from
 * that thread... never made: the program's calls on the thread leave the marks alone. */
static int program_fd = -1;
static int private_result = -1;

static void *private_thread(void *arg)
{
	(void)arg;
	d9__fd_private_begin(0);
	struct stat st, nul;
	int r = 0;
	if (!d9__self.fd_private)
		r = d9__fd_private_refused ? 100 : 1; /* 100: refused (an older kernel) */
	else if (fcntl(program_fd, F_GETFD) != -1 || errno != EBADF)
		r = 2; /* the program's descriptor is not in this table */
	else if (stat("/dev/null", &nul) != 0)
		r = 3;
	for (int fd = 0; !r && fd < 3; fd++)
		if (fstat(fd, &st) != 0 || st.st_rdev != nul.st_rdev)
			r = 4 + fd;
	if (!r) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 3 || d9__fd_own(fd) != 0 || word(fd) != 0)
			r = 8; /* not marked: the program cannot take a number of this table */
		else if (d9__fd_enter(fd) != 0 || !d9__fd_still(fd) || word(fd) != 0)
			r = 9;
		d9__fd_leave(fd);
		d9__fd_host_take(fd); /* a program's call on this thread: no mark either */
		if (!r && word(fd) != 0)
			r = 10;
		d9__fd_host_done(fd);
		if (!r && (d9__fd_close(fd) != 0 || fcntl(fd, F_GETFD) != -1))
			r = 11; /* closed at once */
	}
	private_result = r;
	return NULL;
}

TEST(agent_thread_has_a_table_of_its_own)
{
	alarm(20);
	program_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	T_ASSERT(program_fd >= 0);
	pthread_t t;
	T_EQ(pthread_create(&t, NULL, private_thread, NULL), 0);
	T_EQ(pthread_join(t, NULL), 0);
	if (private_result == 100)
		T_SKIP("close_range(CLOSE_RANGE_UNSHARE) refused here (Linux 5.9 and later)");
	T_EQ(private_result, 0);
	T_ASSERT(fcntl(program_fd, F_GETFD) >= 0); /* the program's table keeps its own */
}

TEST(agent_thread_shares_the_table_when_told)
{
	alarm(20);
	d9__g.cfg.agent_fds_shared = 1;
	program_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	pthread_t t;
	T_EQ(pthread_create(&t, NULL, private_thread, NULL), 0);
	T_EQ(pthread_join(t, NULL), 0);
	T_EQ(private_result, 1); /* D9_AGENT_FDS=shared: not made private, nothing refused */
}

/* Under a seccomp filter the thread makes no close_range (a filter may kill the process at a
 * call it does not list): it keeps the table it has, which is private only when an agent thread
 * with one started it. */
static int filtered_result[2];

static void *filtered_thread(void *inherited)
{
	d9__self.fd_inherited = inherited != NULL;
	d9__fd_private_begin(1);
	filtered_result[inherited != NULL] = d9__self.fd_private + 10 * d9__fd_private_refused;
	return NULL;
}

TEST(agent_thread_under_a_filter_makes_no_call)
{
	alarm(20);
	pthread_t t;
	program_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	T_EQ(pthread_create(&t, NULL, filtered_thread, NULL), 0);
	T_EQ(pthread_join(t, NULL), 0);
	T_EQ(filtered_result[0], 10); /* shared, refused: 1 (a filter) */
	T_EQ(pthread_create(&t, NULL, filtered_thread, (void *)1), 0);
	T_EQ(pthread_join(t, NULL), 0);
	T_EQ(filtered_result[1], 11); /* its creator's private table: private */
}

int main(int argc, char **argv)
{
	return t_main(argc, argv);
}
